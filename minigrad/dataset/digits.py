"""scikit-learn's handwritten digits (1797 images of 8x8 pixels, 10 classes), split and normalised.

The data ship inside scikit-learn (``sklearn/datasets/data/digits.csv.gz``), so nothing is
downloaded. We read that file with NumPy rather than through ``sklearn.datasets``: importing
scikit-learn pulls in SciPy (seconds of import time and a second BLAS thread pool beside NumPy's).
scikit-learn is an optional dependency: ``pip install minigrad[datasets]``.
"""
import importlib.util
import numbers
import os

import numpy

from minigrad import dtype as dtypes
from minigrad._checks import check_bool, check_non_negative_int

_INSTALL_HINT = ("minigrad.dataset.load_digits needs scikit-learn, which ships the digits data: "
                 "pip install minigrad[datasets]  (or: pip install scikit-learn)")


def load_digits(split=0.2, seed=0, flatten=True, dtype=numpy.float32):
    """Load the digits, split them into train and test sets, and scale pixels to [0, 1].

    Args:
        split: fraction of the samples held out for testing (0 < split < 1). The split is
            stratified (each class keeps its share, rounded) and seeded.
        seed: seed of the split.
        flatten: images as rows of 64 features (default), else as ``(N, 1, 8, 8)`` (NCHW).
        dtype: float dtype of the images (labels are int32).

    Returns:
        ``((x_train, y_train), (x_test, y_test))``: NumPy arrays; pixels are divided by 16 (their
        maximum), so they lie in [0, 1].

    Raises:
        ImportError: if scikit-learn is not installed.
        TypeError: if ``split`` is not a real number, ``seed`` not an int, ``flatten`` not a
            bool, or ``dtype`` not a float dtype.
        ValueError: if ``seed`` is negative, ``split`` is not in (0, 1), or so close to 0 or 1
            that the test or the train set would be empty.
    """
    if isinstance(split, bool) or not isinstance(split, numbers.Real):
        raise TypeError(f"split must be a float in (0, 1), got {split!r} ({type(split).__name__})")
    if not 0 < split < 1:
        raise ValueError(f"split must lie in (0, 1), got {split!r}")
    check_non_negative_int("seed", seed, owner="load_digits")
    check_bool("flatten", flatten, owner="load_digits")
    dtype = dtypes.as_dtype(dtype)
    if dtype not in dtypes.FLOATS:
        raise TypeError(f"dtype must be a float dtype (float16, bfloat16, float32 or float64): the "
                        f"pixels are scaled to [0, 1]; got {dtype}")
    pixels, labels = _read_digits()
    x = (pixels / 16.0).astype(dtype)
    y = labels.astype(numpy.int32)
    if not flatten:
        x = x.reshape(-1, 1, 8, 8)
    rng = numpy.random.default_rng(seed)
    test = []
    for label in numpy.unique(y):  # stratified: the same fraction of every class
        members = rng.permutation(numpy.flatnonzero(y == label))
        test.append(members[:int(round(split * len(members)))])
    is_test = numpy.zeros(len(y), bool)
    is_test[numpy.concatenate(test)] = True
    for name, count in (("test", int(is_test.sum())), ("train", int((~is_test).sum()))):
        if count == 0:
            raise ValueError(f"split={split!r} leaves the {name} set empty (each class keeps "
                             f"round(split * its size) samples for testing); choose a split "
                             f"between about 0.003 and 0.997")
    train_idx = rng.permutation(numpy.flatnonzero(~is_test))
    test_idx = rng.permutation(numpy.flatnonzero(is_test))
    return (x[train_idx], y[train_idx]), (x[test_idx], y[test_idx])


def _read_digits():
    """(pixels (1797, 64) float64, labels (1797,) int) from scikit-learn's data file."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None:
        raise ImportError(_INSTALL_HINT)
    for folder in spec.submodule_search_locations or ():
        path = os.path.join(folder, "datasets", "data", "digits.csv.gz")
        if os.path.isfile(path):
            table = numpy.loadtxt(path, delimiter=",")
            return table[:, :-1], table[:, -1].astype(numpy.int64)
    from sklearn.datasets import load_digits as sk_load_digits  # the file moved: ask scikit-learn
    digits = sk_load_digits()
    return digits.data, digits.target
