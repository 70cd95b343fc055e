"""minigrad.amp.plots: the numbers behind the pictures, exactly; the pictures drawn when
matplotlib is there, a clear ImportError when it is not."""
import sys
import warnings

import numpy
import numpy as np
import pytest

import minigrad
from minigrad.amp import plots
from minigrad.amp.core import StepReport
from minigrad.train.callback import LossScaleMonitor

F32 = numpy.float32


def test_gradient_exponents_counts_and_fp16_verdicts():
    values = numpy.array(
        [0.0, 2.0**-30, 3 * 2.0**-20, 1.0, 1.5, 70000.0, numpy.inf, numpy.nan], numpy.float32
    )
    h = plots.gradient_exponents(values)
    assert h["exponents"].tolist() == [-30, -19, 0, 16]
    assert h["counts"].tolist() == [1, 1, 2, 1]
    assert (h["total"], h["zero"], h["nonfinite"]) == (8, 1, 2)
    assert h["fp16"] == pytest.approx(
        {"flushed": 1 / 8, "subnormal": 1 / 8, "overflow": 1 / 8, "normal": 3 / 8}
    )

    shifted = plots.gradient_exponents(values, scale=2.0**16)  # every exponent moves up by 16
    assert shifted["exponents"].tolist() == [-14, -3, 16, 32]
    assert shifted["fp16"] == pytest.approx(
        {"flushed": 0, "subnormal": 0, "overflow": 3 / 8, "normal": 3 / 8}
    )


def test_gradient_exponents_takes_tensors_lists_and_dicts_and_checks_input():
    a, b = (
        minigrad.Tensor(numpy.full(3, 2.0**-26, numpy.float32)),
        numpy.full(5, 0.25, numpy.float16),
    )
    for grads in ([a, b], {"w": a, "b": b}, (a, b)):
        h = plots.gradient_exponents(grads)
        assert dict(zip(h["exponents"].tolist(), h["counts"].tolist())) == {-26: 3, -2: 5}
        assert h["fp16"]["flushed"] == pytest.approx(3 / 8)
    with pytest.raises(ValueError, match="'scale'"):
        plots.gradient_exponents(b, scale=0)
    with pytest.raises(TypeError, match="'gradients'"):
        plots.gradient_exponents([b, "x"])
    with pytest.raises(ValueError, match="no values"):
        plots.gradient_exponents(numpy.zeros(0, numpy.float32))


def _report(step, scale, skipped):
    return StepReport(
        step,
        skipped,
        "gradient_overflow" if skipped else None,
        scale,
        scale / 2 if skipped else scale,
    )


def test_scale_trajectory_from_reports_and_from_a_monitor():
    steps, scales, skipped = plots.scale_trajectory(
        [_report(1, 1024.0, True), _report(2, 512.0, False)]
    )
    assert (
        steps.tolist() == [1, 2]
        and scales.tolist() == [1024.0, 512.0]
        and skipped.tolist() == [True, False]
    )

    monitor = LossScaleMonitor()
    monitor.steps, monitor.scales, monitor.overflows = (
        [1, 2, 3],
        [8.0, 8.0, 4.0],
        [False, True, False],
    )
    assert plots.scale_trajectory(monitor)[2].tolist() == [False, True, False]
    with pytest.raises(TypeError, match="'source'"):
        plots.scale_trajectory(42)
    with pytest.raises(TypeError, match="'source'"):
        plots.scale_trajectory([1, 2])


def test_without_matplotlib_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"minigrad\[plots\]"):
        plots.plot_scale_trajectory([_report(1, 2.0, False)])


def test_the_pictures_are_drawn(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = numpy.random.default_rng(0)
    grads = {"w": (rng.standard_normal(1000) * 1e-7).astype(numpy.float32)}
    fig, (top, bottom) = plt.subplots(2, 1)
    assert plots.plot_gradient_exponents(grads, scale=1.0, ax=top) is top
    plots.plot_gradient_exponents(grads, scale=2.0**16, ax=top)
    labels = [t.get_text() for t in top.get_legend().get_texts()]
    assert len(labels) == 2 and "flush to 0" in labels[0]
    assert sum(len(c.patches) for c in top.containers) == sum(
        plots.gradient_exponents(grads, s)["exponents"].size for s in (1.0, 2.0**16)
    )

    reports = [_report(i + 1, 2.0 ** (10 - (i > 3)), i == 3) for i in range(8)]
    assert plots.plot_scale_trajectory(reports, ax=bottom) is bottom
    assert bottom.get_yscale() == "log"
    assert "skipped (1 of 8 steps)" in [t.get_text() for t in bottom.get_legend().get_texts()]
    fig.savefig(tmp_path / "plots.png")
    plt.close(fig)
    assert (tmp_path / "plots.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "value,verdict",
    [
        (2.0**-25, "flushed"),  # the tie with 0 rounds to even: 0
        (2.0**-25 + 2.0**-60, "subnormal"),  # above the tie (float64: no detour via fp32)
        (float(numpy.nextafter(2.0**-24, 0)), "subnormal"),  # rounds to 2**-24
        (float(numpy.nextafter(2.0**-14, 0)), "normal"),  # rounds up to the smallest normal
        (65504.0, "normal"),
        (65519.99, "normal"),
        (float(numpy.nextafter(65520.0, 0)), "normal"),
        (65520.0, "overflow"),
    ],
)
def test_fp16_verdicts_at_the_boundaries(value, verdict):
    for sign in (1.0, -1.0):
        shares = plots.gradient_exponents(numpy.array([sign * value]))["fp16"]
        assert shares[verdict] == 1.0, (value, shares)


def test_float64_values_that_overflow_or_vanish_only_once_scaled():
    """Finite inputs whose float64 product with the scale is inf (or 0) are fp16 overflow (or
    flushed), not 'nonfinite' (or exact zeros), and no NumPy warning escapes."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h = plots.gradient_exponents(numpy.array([1e300, numpy.inf, numpy.nan, 1.0]), scale=1e10)
        assert (h["total"], h["zero"], h["nonfinite"]) == (4, 0, 2)
        assert h["fp16"] == pytest.approx(
            {"flushed": 0.0, "subnormal": 0.0, "overflow": 0.5, "normal": 0.0}
        )
        tiny = plots.gradient_exponents(numpy.array([1e-300, 0.0]), scale=1e-300)
        assert (tiny["zero"], tiny["nonfinite"]) == (1, 0)
        assert tiny["fp16"] == pytest.approx(
            {"flushed": 0.5, "subnormal": 0.0, "overflow": 0.0, "normal": 0.5}
        )


@pytest.mark.parametrize("gradients", [[], {}, ()])
def test_no_gradients_at_all_names_the_argument(gradients):
    with pytest.raises(ValueError, match="'gradients'"):
        plots.gradient_exponents(gradients)


@pytest.mark.parametrize("scale", ["x", None, [2.0]])
def test_a_scale_that_is_not_a_number_names_the_argument(scale):
    with pytest.raises(TypeError, match="'scale'"):
        plots.gradient_exponents(numpy.ones(3, F32), scale=scale)


@pytest.mark.parametrize("scale", ["2", b"2"])
def test_gradient_exponents_scale_must_be_a_number(scale):
    # its docstring: TypeError when 'scale' is not a number (a string parsed by float() is not)
    with pytest.raises(TypeError, match="scale"):
        plots.gradient_exponents(np.ones(3), scale)


def test_exponent_panels_share_one_window_widened_to_their_bars():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(2, 1)
    plots.plot_gradient_exponents(numpy.array([2.0**-20, 1.0], numpy.float32), ax=a)
    plots.plot_gradient_exponents(numpy.array([2.0**-3, 2.0**4], numpy.float32), ax=b)
    assert a.get_xlim() == b.get_xlim() == (-30, 19)  # different data inside it: one window
    plots.plot_gradient_exponents(numpy.array([2.0**-60, 2.0**40]), ax=a)  # float64, beyond it
    low, high = a.get_xlim()
    assert low < -60 and high > 40
    shaded = [p for p in a.patches if p.get_alpha() == 0.08]
    assert len(shaded) == 4  # shaded once, and across the whole widened window
    spans = sorted((p.get_x(), p.get_x() + p.get_width()) for p in shaded)
    assert spans[0][0] <= low and spans[-1][1] >= high
    assert all(x1 == x0 for (_, x1), (x0, _) in zip(spans, spans[1:]))  # no gap between regions
    assert "scale 65536:" in plots.plot_gradient_exponents(
        numpy.ones(2, numpy.float32), scale=2.0**16, ax=b).get_legend().get_texts()[-1].get_text()
    plt.close(fig)
