"""minigrad.dataset.load_digits: splits that leave a side empty, dtypes, bad arguments and the
install hint without scikit-learn."""
import numpy
import pytest


def _needs_sklearn():
    import importlib.util
    if importlib.util.find_spec("sklearn") is None:
        pytest.skip("scikit-learn (the digits data) is not installed")


def test_load_digits_refuses_a_split_that_leaves_a_side_empty():
    # split=0.001 rounded every class's test share to 0: an empty (0, 64) test set came back
    # silently (Model.eval then fails far away); split=0.999 emptied the train set.
    _needs_sklearn()
    from minigrad.dataset import load_digits
    with pytest.raises(ValueError, match="test set.*empty"):
        load_digits(split=0.001)
    with pytest.raises(ValueError, match="train set.*empty"):
        load_digits(split=0.999)
    (x_train, _), (x_test, _) = load_digits(split=0.01)  # small but not empty
    assert len(x_test) > 0 and len(x_train) + len(x_test) == 1797


def test_load_digits_checks_seed_and_flatten_before_reading():
    from minigrad.dataset import load_digits
    with pytest.raises(ValueError, match="load_digits: seed must be a non-negative int, got -1"):
        load_digits(seed=-1)
    with pytest.raises(TypeError, match=r"load_digits: seed must be a non-negative int, got None "
                                        r"\(NoneType\)"):
        load_digits(seed=None)
    with pytest.raises(TypeError, match=r"load_digits: flatten must be a bool, got 1 \(int\)"):
        load_digits(flatten=1)


def test_load_digits_missing_scikit_learn_is_an_import_error_with_the_install_hint(monkeypatch):
    import importlib.util

    from minigrad.dataset import digits
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sklearn" else real(name, *a))
    with pytest.raises(ImportError, match=r"pip install minigrad\[datasets\]"):
        digits.load_digits()


def test_load_digits_refuses_a_non_float_dtype_and_names_bad_arguments():
    # dtype=int32 truncated the [0, 1] pixels to 0 (all but the value 16): data destroyed silently.
    _needs_sklearn()
    from minigrad.dataset import load_digits
    with pytest.raises(TypeError, match="dtype"):
        load_digits(dtype=numpy.int32)
    with pytest.raises(TypeError, match="split"):
        load_digits(split="0.2")  # not "'<' not supported between 'int' and 'str'"
    (x, _), _ = load_digits(dtype="float16")
    assert x.dtype == numpy.float16
