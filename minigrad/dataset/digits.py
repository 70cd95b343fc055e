"""scikit-learn's handwritten digits (1797 images of 8x8 pixels, 10 classes), split and normalised.

The data ship inside scikit-learn, so nothing is downloaded. scikit-learn is an optional
dependency: ``pip install minigrad[datasets]``.
"""
import numpy


def load_digits(split=0.2, seed=0, flatten=True, dtype=numpy.float32):
    """Load the digits, split them into train and test sets, and scale pixels to [0, 1].

    Args:
        split: fraction of the samples held out for testing (0 < split < 1). The split is
            stratified (each class keeps its share) and seeded.
        seed: seed of the split.
        flatten: images as rows of 64 features (default), else as ``(N, 1, 8, 8)`` (NCHW).
        dtype: dtype of the images (labels are int32).

    Returns:
        ``((x_train, y_train), (x_test, y_test))``: NumPy arrays; pixels are divided by 16 (their
        maximum), so they lie in [0, 1].

    Raises:
        ImportError: if scikit-learn is not installed.
        ValueError: if ``split`` is not in (0, 1).
    """
    if not 0 < split < 1:
        raise ValueError(f"split must lie in (0, 1), got {split!r}")
    try:
        from sklearn.datasets import load_digits as sk_load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as error:
        raise ImportError("minigrad.dataset.load_digits needs scikit-learn, which ships the digits "
                          "data: pip install minigrad[datasets]  (or: pip install scikit-learn)") from error
    digits = sk_load_digits()
    x = (digits.data / 16.0).astype(dtype)
    y = digits.target.astype(numpy.int32)
    if not flatten:
        x = x.reshape(-1, 1, 8, 8)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=split, random_state=seed,
                                                        stratify=y)
    return (x_train, y_train), (x_test, y_test)
