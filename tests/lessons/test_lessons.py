"""Every lesson runs in quick mode as a plain script, prints what it shows, and saves real images.

Each lesson runs once (module-scoped fixture) in a subprocess on the checkout's minigrad, with
``--quick --out <tmp>``; the tests then read its output and its files. Lesson 8 needs THOR: where
``minigrad.nn.thor`` is missing it must say so and exit 0, and its content tests skip with that
reason (one test hides ``nn.thor`` to check that path on every build).
"""
import json
import os
import subprocess
import sys

import numpy
import pytest

import minigrad
from helpers import REPO_ROOT

LESSONS = REPO_ROOT / "lessons"
SCRIPTS = {path.name.split("_")[0]: path for path in sorted(LESSONS.glob("[0-9][0-9]_*.py"))}
NO_THOR = "minigrad.nn.thor is not built yet: lesson 8 says so and exits 0"


def _run(script, *arguments, cwd):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), MPLBACKEND="Agg")
    return subprocess.run([sys.executable, str(script), *arguments], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """``ran(number)`` -> (completed process, output folder), running each lesson at most once."""
    done = {}

    def run(number):
        if number not in done:
            out = tmp_path_factory.mktemp(f"lesson{number}")
            done[number] = _run(SCRIPTS[number], "--quick", "--out", str(out), cwd=out), out
        return done[number]
    return run


def _assert_real_image(path):
    """A PNG a person can read: big enough, and drawn with more than a few colours."""
    from matplotlib import image
    pixels = image.imread(str(path))
    height, width = pixels.shape[:2]
    assert width >= 600 and height >= 300, f"{path.name} is only {width}x{height} pixels"
    colours = numpy.unique((pixels.reshape(-1, pixels.shape[-1]) * 255).astype(numpy.uint8), axis=0)
    assert len(colours) > 30, f"{path.name} has only {len(colours)} distinct colours"
    assert path.stat().st_size > 20_000, f"{path.name} is only {path.stat().st_size} bytes"


# lesson number -> (PNG files it saves, phrases its printed output must hold)
EXPECTED = {
    "01": (["fp16_spacing.png", "fp16_number_line_near_1.png", "fp16_small_values.png"],
           ["largest finite value  65504", "smallest subnormal    5.96046e-08",
            "fp16(65520) = inf", "fp16: 1 + 0.0001 = 1.0000000  (float16)",
            "float16  gradient: [0. 0. 0. 0.]", "31743 positive finite values: 1023 subnormal"]),
    "02": (["loss_scaling_by_hand.png"],
           [("GradOperation with sens = 2**12 gives the same fp16 gradient as "
             "(loss * 2**12).backward(): True")]),
    "03": (["float_status_bits.png"],
           ["check a NaN    array -> flag True", "check a finite array -> flag True",
            "clear                  -> flag False", "inf at index 4, check of data[::3]: False",
            "struct Fp16 {", "MASK = 0x7C007C00u", "status[0] = 1.0f;"]),
    "04": (["loss_scale_cell_steps.png"],
           ["step 1: skipped (gradient_overflow), loss scale 16777216 -> 8388608",
            "parameters and optimizer state bit-identical: True",
            "step 15: skipped (nonfinite_loss)", "RuntimeError: loss scaling skipped 3 steps"]),
    "05": (["dynamic_vs_fixed_scale.png"], ["fixed 2**20", "dynamic (from 2**24, window 10)"]),
    "06": (["three_faces.png"],
           [("TensorFlow vs MindSpore: same scales True, same skipped steps True, "
             "bit-identical weights True"),
            ("PyTorch vs MindSpore: same scales True, same skipped steps True, "
             "bit-identical weights True"),
            "growth factor        scale_factor                   multiplier"]),
    "07": (["gradient_exponents.png"], ["chosen scale S = 2**", "fc output", "conv1.weight"]),
    "08": (["thor_vs_momentum.png", "thor_curvature_vs_hessian.png"],
           ["THOR's step reports", "step 1: refresh 3/3 layers", "step 2: reuse",
            "THOR: refresh steps [1, 11, 21, 31, 41, 51]", "THOR, trace rule: refresh steps [1, ",
            "layer refreshes", "curvature products against the Hessian H v",
            "negative curvature found: True; every Fisher-type form >= 0: True"]),
    "09": (["attention_logit_range.png", "attention_mask_trap.png", "softmax_fp16_vs_fp32.png",
            "attention_overflow_steps.png"],
           ["fp16(-1e9) = -inf",
            "naive fp16 softmax, every key masked with -1e9: [nan nan nan nan]",
            "minigrad (fp16, the mask rule): weights [0. 0. 0. 0.]",
            "step 1: skipped (nonfinite_loss)", "step 1: skipped (gradient_overflow)"]),
    "10": (["number_lines.png", "digits_fp32_fp16_fp8.png", "delayed_scaling_lag.png"],
           ["FP8 E4M3         448", "bf16(256) + bf16(1) = 256.0",
            "sum in bf16: 256.0; in fp32, rounded once: 4992.0", "bf16                 test",
            "FP8 delayed          test",
            "net.0.grad_output  float8_e5m2",
            "delayed  share of the input clipped per step: 0% 0% 0% 0% 0% 96% 0%",
            "current  share of the input clipped per step: 0% 0% 0% 0% 0% 0% 0%"]),
}


def test_every_lesson_is_tested():
    assert sorted(SCRIPTS) == sorted(EXPECTED) == [f"{i:02d}" for i in range(1, 11)]


@pytest.mark.parametrize("number", sorted(EXPECTED))
def test_lesson_runs_prints_and_saves_images(number, ran):
    if number == "08" and not hasattr(minigrad.nn, "thor"):
        pytest.skip(NO_THOR)
    if number == "10":  # bfloat16 and FP8 side by side
        pytest.importorskip("ml_dtypes", reason="the lowp extra (bfloat16, FP8) is not installed")
    process, out = ran(number)
    assert process.returncode == 0, process.stderr[-3000:]
    assert f"figures go to {out}" in process.stdout
    pngs, phrases = EXPECTED[number]
    for phrase in phrases:
        assert phrase in process.stdout, f"lesson {number} did not print {phrase!r}"
    for name in pngs:
        assert f"saved {out / name}" in process.stdout
        _assert_real_image(out / name)


def test_lesson_8_without_thor_says_so_and_exits_0(tmp_path):
    """Run lesson 8 on a minigrad whose nn has no ``thor`` (as before THOR was built)."""
    hide_thor = ("import os, runpy, sys, minigrad.nn as nn\n"
                 "if hasattr(nn, 'thor'):\n    delattr(nn, 'thor')\n"
                 "sys.argv = sys.argv[1:]\n"
                 "sys.path.insert(0, os.path.dirname(sys.argv[0]))  # as running the script does\n"
                 "runpy.run_path(sys.argv[0], run_name='__main__')")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), MPLBACKEND="Agg")
    process = subprocess.run([sys.executable, "-c", hide_thor, str(SCRIPTS["08"]), "--quick",
                              "--out", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120, check=False)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "lesson 8 needs THOR (minigrad.nn.thor)" in process.stdout
    assert not list(tmp_path.glob("*.png"))


def test_lesson_3_names_the_devices_it_ran_on(ran):
    process, _ = ran("03")
    lines = process.stdout.splitlines()
    assert any(line.startswith("CPU: 65,536 fp16 + fp32 finite -> False; NaN in the last "
                               "element -> True; clean check after -> True; after clear -> False")
               for line in lines)
    if minigrad.backend.CUDA_AVAILABLE:
        assert any(line.startswith("GPU: 65,536 fp16 + fp32 finite -> False") for line in lines)
    else:
        assert any(line.startswith("GPU: none here") and "skipped" in line for line in lines)


def test_lesson_7_underflow_shares_equal_a_direct_numpy_count(ran):
    """The shares lesson 7 reports (JSON and printed table) are what counting the saved
    gradients with NumPy gives: nonzero values that round to 0 in fp16 ("flushed"), values that
    round into fp16's subnormal range ("subnormal"), finite values that round to inf."""
    process, out = ran("07")
    assert process.returncode == 0, process.stderr[-3000:]
    report = json.loads((out / "underflow_shares.json").read_text(encoding="utf-8"))
    gradients = numpy.load(out / "gradients.npz")
    assert set(report["shares"]) == set(gradients.files) and len(gradients.files) == 6
    table = {line.split("|")[0].strip(): line
             for line in process.stdout.splitlines() if "|" in line}
    for name in gradients.files:
        g = gradients[name].astype(numpy.float64).reshape(-1)
        for scale_text, shares in report["shares"][name].items():
            with numpy.errstate(over="ignore"):
                rounded = numpy.abs((g * float(scale_text)).astype(numpy.float16))
            direct = {
                "flushed": numpy.count_nonzero((g != 0) & (rounded == 0)) / g.size,
                "subnormal": numpy.count_nonzero((rounded > 0) & (rounded < 2.0**-14)) / g.size,
                "overflow": numpy.count_nonzero(numpy.isinf(rounded)) / g.size,
            }
            for kind, share in direct.items():
                assert shares[kind] == pytest.approx(share, abs=1e-12), (name, scale_text, kind)
        at_one = report["shares"][name]["1"]
        assert f"{at_one['flushed']:14.2%} {at_one['subnormal']:9.2%}" in table[name]
    # the lesson's point holds on its own data: some activation gradients flush at scale 1, and
    # the chosen scale rescues them without overflowing anything
    output = report["shares"]["fc output"]
    assert output["1"]["flushed"] > 0.05
    assert output[str(report["scale"])]["flushed"] < output["1"]["flushed"] / 2
    assert all(s[str(report["scale"])]["overflow"] == 0 for s in report["shares"].values())


def test_lesson_8_curvature_claims_hold(ran):
    """What lesson 8's prose says about THOR's curvature against the Hessian, in numbers (its
    JSON, averaged over random unit directions v; "ratio" is vᵀMv / vᵀHv)."""
    if not hasattr(minigrad.nn, "thor"):
        pytest.skip(NO_THOR)
    process, out = ran("08")
    assert process.returncode == 0, process.stderr[-3000:]
    report = json.loads((out / "curvature_vs_hessian.json").read_text(encoding="utf-8"))
    cases = report["cases"]
    at_fit, far = cases["linear regression, at the fit"], cases["linear regression, far from it"]
    initial, trained = cases["ReLU MLP, at initialization"], cases["ReLU MLP, trained"]
    # linear regression with squared loss: autograd's H v is the closed form, and H = GN
    assert report["closed_form"] < 1e-10
    for case in (at_fit, far):
        assert case["GN"]["relative_error"] < 1e-10 and case["GN"]["cosine"] > 1 - 1e-10
    # at the fit THOR's A ⊗ G is close to H, in direction and scale
    assert at_fit["A⊗G"]["cosine"] > 0.98 and at_fit["A⊗G"]["relative_error"] < 0.25
    assert 0.8 < at_fit["A⊗G"]["ratio"] < 1.25
    assert at_fit["A⊗G"]["cosine"] > at_fit["F"]["cosine"]
    # far from it the empirical curvature is many times too large
    assert far["A⊗G"]["ratio"] > 4 and far["F"]["ratio"] > 4
    assert far["A⊗G"]["relative_error"] > 3
    # the ReLU MLP: at initialization the residual term separates GN from H, and THOR is
    # further off still; trained, GN agrees with H while the empirical Fisher sees a fraction
    assert initial["GN"]["cosine"] < 0.9 and initial["A⊗G"]["cosine"] < 0.7
    assert trained["GN"]["cosine"] > 0.999
    assert trained["A⊗G"]["ratio"] < 0.3 and trained["F"]["ratio"] < 0.3
    assert trained["A⊗G"]["relative_error"] > 0.5
    # a direction of negative curvature, which no Fisher-type matrix can show
    assert report["negative_direction"]["H"] < -0.1 * report["lambda_max"]
    assert all(report["min_forms"][name] >= 0 for name in ("GN", "F", "A⊗G"))


def test_default_output_folder_is_a_new_temporary_one(tmp_path):
    process = _run(SCRIPTS["01"], cwd=tmp_path)
    assert process.returncode == 0, process.stderr[-3000:]
    folder = process.stdout.splitlines()[0].removeprefix("figures go to ")
    assert os.path.isdir(folder) and folder != str(tmp_path)
    assert sorted(os.listdir(folder)) == sorted(EXPECTED["01"][0])
    for name in os.listdir(folder):
        os.remove(os.path.join(folder, name))
    os.rmdir(folder)


def test_out_that_is_a_file_is_refused_by_name(tmp_path):
    target = tmp_path / "not_a_folder"
    target.write_text("")
    process = _run(SCRIPTS["01"], "--out", str(target), cwd=tmp_path)
    assert process.returncode == 2
    assert f"argument --out: {str(target)!r} exists and is not a folder" in process.stderr


@pytest.mark.parametrize("number", sorted(EXPECTED))
def test_lesson_opens_as_a_notebook(number):
    jupytext = pytest.importorskip(
        "jupytext",
        reason="jupytext is not installed (pip install jupytext) to open lessons as notebooks",
    )
    notebook = jupytext.read(SCRIPTS[number])
    kinds = [cell.cell_type for cell in notebook.cells]
    assert kinds[0] == "markdown" and kinds.count("markdown") >= 3 and kinds.count("code") >= 3
    assert notebook.cells[0].source.startswith(f"# Lesson {int(number)} ")
