"""Reading dataset files whole: plain or gzip-compressed bytes, and the errors that name the file.

A reader checks everything it reads before it builds anything, so a corrupt, truncated or foreign
file is a ``ValueError`` naming the file and what was wrong, never a half-read dataset.
"""
import gzip
import os
import zlib


def find(folder, name):
    """The path of ``name`` in ``folder``, or of ``name + ".gz"``; None when neither exists."""
    for candidate in (name, name + ".gz"):
        path = os.path.join(folder, candidate)
        if os.path.isfile(path):
            return path
    return None


def read_bytes(path):
    """The bytes of ``path``, decompressed when its name ends in ``.gz``.

    Raises:
        ValueError: naming the file, for a damaged or truncated gzip stream.
    """
    if not path.endswith(".gz"):
        with open(path, "rb") as f:
            return f.read()
    try:
        with gzip.open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError, zlib.error) as error:
        raise ValueError(f"{path}: not a readable gzip file ({error})") from None


def check_folder(dataset_dir, owner):
    """``dataset_dir`` as a str if it is an existing folder, else TypeError / ValueError."""
    if not isinstance(dataset_dir, (str, os.PathLike)):
        raise TypeError(f"{owner}: dataset_dir must be a str or a path, got {dataset_dir!r} "
                        f"({type(dataset_dir).__name__})")
    dataset_dir = os.fspath(dataset_dir)
    if not os.path.isdir(dataset_dir):
        raise ValueError(f"{owner}: dataset_dir must be an existing folder, got {dataset_dir!r}")
    return dataset_dir
