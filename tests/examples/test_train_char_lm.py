"""examples/train_char_lm.py: the three faces give the same trajectory over 50 steps, O2 ends
within 2 % of fp32's validation loss, the command line prints progress, bits per character,
the loss-scale story and a sample; examples/compare_char_lm.py prints its table."""
import importlib.util
import sys

import numpy
import pytest

from helpers import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"


def _load(name):
    sys.path.insert(0, str(EXAMPLES))  # compare_char_lm imports train_char_lm
    try:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(EXAMPLES))
    return module


@pytest.fixture(scope="module")
def lm():
    return _load("train_char_lm")


@pytest.fixture(scope="module")
def corpus(lm):
    return lm.load_corpus()


SMALL = dict(width=32, heads=2, layers=1, context=16, batch_size=8, eval_windows=4,
             sample_length=0, verbose=False)


def test_three_faces_give_the_same_trajectory_for_50_steps(lm, corpus):
    """A scale of 2**24 overflows at first and a window of 5 grows it back: skipped steps and
    growth both happen. MindSpore's and TensorFlow's faces clip with ops.clip_by_global_norm and
    agree to the bit; PyTorch's face clips with clip_grad_norm_, whose norm carries PyTorch's
    +1e-6, so its values differ in the last bits while its scales and skips are the same."""
    runs = {face: lm.run(steps=50, face=face, init_scale=2.0 ** 24, scale_window=5,
                         eval_every=50, corpus=corpus, **SMALL)
            for face in ("mindspore", "tensorflow", "torch")}
    base = runs["mindspore"]
    skipped = [r.step for r in base["reports"] if r.skipped]
    grown = [r.step for r in base["reports"] if r.scale_after > r.scale_before]
    assert skipped and grown and len(base["reports"]) == 50
    for face, run in runs.items():
        assert [(r.skipped, r.reason, r.scale_before, r.scale_after, r.inf_params)
                for r in run["reports"]] == [(r.skipped, r.reason, r.scale_before,
                                              r.scale_after, r.inf_params)
                                             for r in base["reports"]], face
    tf = runs["tensorflow"]
    assert tf["losses"] == base["losses"]
    for a, b in zip(tf["net"].trainable_params(), base["net"].trainable_params()):
        assert (a.asnumpy() == b.asnumpy()).all(), a.name
    numpy.testing.assert_allclose(runs["torch"]["losses"], base["losses"], rtol=1e-4)
    assert base["losses"][-1] < base["losses"][0] - 0.5


def test_o2_reaches_fp32s_validation_loss_within_2_percent(lm, corpus):
    config = dict(SMALL, steps=150, eval_every=150, eval_windows=32, corpus=corpus)
    fp32 = lm.run(amp_level="O0", **config)["validation"][-1][1]
    o2 = lm.run(amp_level="O2", **config)["validation"][-1][1]
    assert fp32 < 5.2  # it learned (the uniform guess is log2(97) = 6.6 bits)
    assert abs(o2 / fp32 - 1) < 0.02, (fp32, o2)


def test_command_line_prints_the_run_the_story_and_a_sample(lm, capsys):
    result = lm.main(["--steps", "4", "--width", "16", "--heads", "2", "--layers", "1",
                      "--context", "8", "--batch-size", "4"])
    out = capsys.readouterr().out
    assert "standard-library files" in out and "bits/char" in out
    assert "step     4/4: train loss" in out and "loss scale 65536 -> 65536" in out
    assert "sample (temperature 0.8):\ndef " in out and len(result["sample"]) == 4 + 300
    fp32 = lm.main(["--steps", "2", "--width", "16", "--heads", "2", "--layers", "1",
                    "--context", "8", "--batch-size", "4", "--amp-level", "O0",
                    "--face", "torch"])
    assert fp32["reports"] == [] and "no loss scaling (fp32)" in capsys.readouterr().out


def test_bad_flags_are_refused_before_training(lm, capsys):
    for flags in (["--steps", "0"], ["--face", "jax"], ["--width", "10", "--heads", "4"]):
        with pytest.raises(SystemExit):
            lm.main(flags)
        assert "argument" in capsys.readouterr().err


def test_compare_script_prints_the_three_runs(capsys):
    pytest.importorskip("torch")
    columns = _load("compare_char_lm").main(["--steps", "8", "--width", "32", "--heads", "2",
                                             "--layers", "1", "--context", "16"])
    assert list(columns) == ["minigrad fp32", "minigrad O2", "PyTorch fp32"]
    fp32, torch_fp32 = columns["minigrad fp32"][-1][1], columns["PyTorch fp32"][-1][1]
    assert abs(fp32 / torch_fp32 - 1) < 1e-3
    assert "minigrad / PyTorch" in capsys.readouterr().out
