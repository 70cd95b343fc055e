"""Pictures of loss scaling: the scale's trajectory, and where gradient values fall in fp16's range.

Numbers first, drawing second. ``gradient_exponents`` and ``scale_trajectory`` return plain NumPy
data (no plotting library needed); ``plot_gradient_exponents`` and ``plot_scale_trajectory`` draw
them on a matplotlib ``Axes`` (``pip install minigrad[plots]``)::

    from minigrad.amp import plots
    plots.plot_gradient_exponents(fp32_grads, scale=1.0, label="scale 1")      # most values flush
    to 0
    plots.plot_gradient_exponents(fp32_grads, scale=2**16, label="scale 2^16")  # shifted 16 binades
    up
    plots.plot_scale_trajectory(loss_scale_monitor)                           # S over steps, skips
    marked

fp16's range in binary exponents e (a value in [2^e, 2^(e+1))): normal from e = -14 (6.1e-5) to
e = 15 (up to 65504); subnormal from e = -24 (6e-8) to -15, with fewer significant bits the lower
they go; below 2^-24 a value rounds to 0 (2^-25 and under) or to 2^-24; from 65520 on it rounds to
inf. Multiplying by a loss scale S = 2^k moves every exponent up by k.
"""
import numpy

from minigrad import backend

FP16_SUBNORMAL_MIN_EXP = -24  # 2**-24, the smallest positive fp16 value
FP16_NORMAL_MIN_EXP = -14     # 2**-14, the smallest normal fp16 value
FP16_MAX_EXP = 15             # 65504 = (2 - 2**-10) * 2**15


def gradient_exponents(gradients, scale=1.0):
    """Histogram of the binary exponents of ``gradients`` times ``scale``, with fp16's verdict.

    Args:
        gradients: an array or Tensor, a list of them, or a dict ``name -> array/Tensor`` (the
            true gradient values, e.g. from an fp32 run).
        scale: the loss scale to apply (a positive finite number). Default 1.

    Returns:
        A dict:

        * ``"exponents"`` (int array, ascending) and ``"counts"``: how many nonzero finite
            values ``|g| * scale`` lie in ``[2^e, 2^(e+1))`` for each exponent ``e`` present;
        * ``"total"``, ``"zero"`` (exact zeros), ``"nonfinite"`` (inf and NaN inputs): counts;
        * ``"fp16"``: the share of all values that, rounded once to fp16 at this scale, become
            ``"flushed"`` (nonzero, but 0 in fp16), ``"subnormal"``, ``"normal"`` (zeros
            included) and ``"overflow"`` (finite, but inf in fp16); non-finite inputs are in
            none.

    Raises:
        TypeError: ``gradients`` holds something that is not an array or Tensor; ``scale`` is
            not a number.
        ValueError: ``scale`` is not positive and finite; no values at all.
    """
    try:
        if isinstance(scale, (str, bytes)):  # float("2") parses; a string is still not a number
            raise TypeError
        scale = float(scale)
    except (TypeError, ValueError):
        raise TypeError("gradient_exponents: 'scale' must be a number, but got "
                        f"{type(scale).__name__}") from None
    if not (0.0 < scale < float("inf")):
        raise ValueError("gradient_exponents: 'scale' must be positive and finite, but got "
                         f"{scale}")
    arrays = _arrays(gradients)
    values = (numpy.concatenate([a.reshape(-1).astype(numpy.float64) for a in arrays])
              if arrays else numpy.zeros(0))
    if values.size == 0:
        raise ValueError("gradient_exponents: 'gradients' holds no values")
    finite = numpy.isfinite(values)
    values = values[finite]
    with numpy.errstate(over="ignore", under="ignore"):  # a float64 product beyond fp16 either way
        scaled = values * scale
        rounded = numpy.abs(scaled.astype(numpy.float16))
    shown = numpy.isfinite(scaled) & (scaled != 0)
    exponents = numpy.frexp(numpy.abs(scaled[shown]))[1] - 1  # frexp: |x| = m * 2^e, m in [0.5, 1)
    bins, counts = numpy.unique(exponents, return_counts=True)
    total = finite.size
    shares = {
        "flushed": int(numpy.count_nonzero((values != 0) & (rounded == 0))) / total,
        "subnormal": int(numpy.count_nonzero(
            (rounded > 0) & (rounded < 2.0 ** FP16_NORMAL_MIN_EXP))) / total,
        "overflow": int(numpy.count_nonzero(numpy.isinf(rounded))) / total,
    }
    shares["normal"] = values.size / total - sum(shares.values())
    return {"exponents": bins.astype(numpy.int64), "counts": counts.astype(numpy.int64),
            "total": total,
            "zero": int(numpy.count_nonzero(values == 0)),
            "nonfinite": int(total - values.size), "fp16": shares}


def scale_trajectory(source):
    """``(steps, scales, skipped)`` NumPy arrays of a run's loss scale.

    Args:
        source: a ``LossScaleMonitor`` (its ``steps``, ``scales`` and ``overflows``), or an
            iterable of ``StepReport`` (e.g. ``last_report`` collected after every step; the
            scale is the one each step used).

    Raises:
        TypeError: ``source`` is neither.
    """
    if all(hasattr(source, name) for name in ("steps", "scales", "overflows")):
        steps, scales, skipped = source.steps, source.scales, source.overflows
    else:
        from minigrad.amp.core import StepReport
        try:
            reports = list(source)
        except TypeError:
            reports = None
        if reports is None or not all(isinstance(r, StepReport) for r in reports):
            raise TypeError("scale_trajectory: 'source' must be a LossScaleMonitor or an "
                            "iterable of "
                            f"StepReport, but got {type(source).__name__}")
        steps = [r.step for r in reports]
        scales = [r.scale_before for r in reports]
        skipped = [r.skipped for r in reports]
    return (numpy.asarray(steps, numpy.int64), numpy.asarray(scales, numpy.float64),
            numpy.asarray(skipped, bool))


# the x-window of every exponent panel (fp16's subnormal start - 6 to its largest exponent + 4),
# and the exponents the shading covers (float64's, from subnormals to the largest finite)
_WINDOW = (FP16_SUBNORMAL_MIN_EXP - 6, FP16_MAX_EXP + 4)
_SHADED = (-1080, 1030)


def plot_gradient_exponents(gradients, scale=1.0, ax=None, label=None):
    """Draw ``gradient_exponents(gradients, scale)`` as bars over fp16's regions; return ``ax``.

    The background shows where fp16 flushes values to 0 (red), keeps them subnormal (orange),
    normal (green) and overflows (red); the legend gives the shares. Call it again on the same
    ``ax`` with another ``scale`` to see the shift. The x-axis spans exponents -30 to 19 (fp16's
    subnormal start - 6 to its largest exponent + 4) on every axes, widened to hold every bar
    drawn on it, so panels of different gradients line up.

    Raises:
        ImportError: without matplotlib (``pip install minigrad[plots]``). And as
            ``gradient_exponents``.
    """
    plt = _pyplot()
    hist = gradient_exponents(gradients, scale)
    ax = ax if ax is not None else plt.subplots(figsize=(8, 3.5))[1]
    shares = hist["fp16"]
    text = (f"{label or f'scale {scale:.9g}'}: {shares['flushed']:.0%} flush to 0, "
            f"{shares['subnormal']:.0%} subnormal, {shares['overflow']:.0%} overflow")
    ax.bar(hist["exponents"], hist["counts"] / hist["total"], width=0.9, alpha=0.6, label=text)
    # every panel shows the same window of fp16's range, widened to hold all of its bars; the
    # regions are shaded across every exponent a float32 or float64 gradient can have
    exps = hist["exponents"]
    low, high = getattr(ax, "_minigrad_exponent_window", _WINDOW)
    if exps.size:
        low, high = min(low, int(exps.min()) - 1), max(high, int(exps.max()) + 1)
    if not getattr(ax, "_minigrad_exponent_window", None):  # shade the regions once per axes
        for start, stop, color in ((_SHADED[0], FP16_SUBNORMAL_MIN_EXP - 0.5, "tab:red"),
                                   (FP16_SUBNORMAL_MIN_EXP - 0.5, FP16_NORMAL_MIN_EXP - 0.5,
                                    "tab:orange"),
                                   (FP16_NORMAL_MIN_EXP - 0.5, FP16_MAX_EXP + 0.5, "tab:green"),
                                   (FP16_MAX_EXP + 0.5, _SHADED[1], "tab:red")):
            ax.axvspan(start, stop, color=color, alpha=0.08, linewidth=0)
    ax._minigrad_exponent_window = (low, high)
    ax.set_xlim(low, high)
    ax.set_xlabel("binary exponent of |gradient| x scale   (fp16: subnormal from -24, normal -14 "
                  "to 15)")
    ax.set_ylabel("share of values")
    ax.legend(fontsize="small")
    return ax


def plot_scale_trajectory(source, ax=None):
    """Draw the loss scale over the steps (log2 axis) with skipped steps marked; return ``ax``.

    Raises:
        ImportError: without matplotlib (``pip install minigrad[plots]``). And as
            ``scale_trajectory``.
    """
    plt = _pyplot()
    steps, scales, skipped = scale_trajectory(source)
    ax = ax if ax is not None else plt.subplots(figsize=(8, 3))[1]
    ax.step(steps, scales, where="post", label="loss scale")
    if skipped.any():
        ax.scatter(steps[skipped], scales[skipped], marker="x", color="tab:red", zorder=3,
                   label=f"skipped ({int(skipped.sum())} of {steps.size} steps)")
    ax.set_yscale("log", base=2)
    ax.set_xlabel("step")
    ax.set_ylabel("loss scale")
    ax.legend(fontsize="small")
    return ax


def _arrays(gradients):
    items = gradients.values() if isinstance(gradients, dict) else (
        gradients if isinstance(gradients, (list, tuple)) else [gradients])
    from minigrad.tensor import Tensor
    arrays = []
    for item in items:
        data = item.data if isinstance(item, Tensor) else item
        if backend.get_array_module(data) is numpy and not isinstance(data, numpy.ndarray):
            raise TypeError(f"gradient_exponents: 'gradients' must hold arrays or Tensors, but got "
                            f"{type(item).__name__}")
        arrays.append(backend.as_numpy(data))
    return arrays


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError("minigrad.amp.plots needs matplotlib: pip install "
                          "minigrad[plots]") from error
    return plt
