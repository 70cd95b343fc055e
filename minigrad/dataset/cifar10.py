"""``Cifar10Dataset``: CIFAR-10 from its binary batches.

The binary version (``cifar-10-binary.tar.gz``) holds ``data_batch_1.bin`` ... ``data_batch_5.bin``
(training, 10,000 images each) and ``test_batch.bin``. Each record is 3073 bytes: the label
(0-9), then the 32x32 red, green and blue planes, row by row.
"""
import os

import numpy

from minigrad._checks import check_in
from minigrad.dataset import files
from minigrad.dataset.numpy_slices import NumpySlicesDataset

_TRAIN = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
_TEST = ("test_batch.bin",)
_RECORD = 1 + 3 * 32 * 32
_SUBFOLDER = "cifar-10-batches-bin"  # where the archive unpacks


def read_batch(path):
    """``(images (N, 32, 32, 3) uint8, labels (N,) uint8)`` from one binary batch file.

    Raises:
        ValueError: naming the file, for an empty file, a size that is not a whole number of
            3073-byte records (truncated, or another format such as CIFAR-100's 3074-byte
            records), or a label above 9.
    """
    data = files.read_bytes(path)
    if not data or len(data) % _RECORD:
        raise ValueError(f"{path}: {len(data)} bytes is not a whole number of CIFAR-10 records "
                         f"({_RECORD} bytes each: a label and 32x32x3 pixels): truncated, or "
                         f"not a CIFAR-10 binary batch")
    records = numpy.frombuffer(data, numpy.uint8).reshape(-1, _RECORD)
    labels = records[:, 0]
    if labels.max() > 9:
        raise ValueError(f"{path}: labels must be 0-9, found {int(labels.max())} (not a CIFAR-10 "
                         f"binary batch?)")
    images = records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return images, labels


def _locate(folder, names, owner):
    """The paths of ``names`` in ``folder`` (or its ``cifar-10-batches-bin``), or
    FileNotFoundError naming what is missing."""
    for where in (folder, os.path.join(folder, _SUBFOLDER)):
        paths = [files.find(where, name) for name in names]
        if all(paths):
            return paths
    missing = [name for name in names if files.find(folder, name) is None]
    hint = ""
    if os.path.isfile(os.path.join(folder, "data_batch_1")):
        hint = (" (the files here are CIFAR-10's Python version; this reader takes the binary "
                "version, cifar-10-binary.tar.gz)")
    raise FileNotFoundError(f"{owner}: {folder!r} (or its {_SUBFOLDER}/) has no "
                            f"{', '.join(missing)}{hint}")


class Cifar10Dataset(NumpySlicesDataset):
    """CIFAR-10 read from its binary batches (MindSpore's ``dataset.Cifar10Dataset``).

    ``dataset_dir`` holds ``data_batch_1.bin`` ... ``data_batch_5.bin`` and ``test_batch.bin``
    (each plain or ``.gz``), directly or in the ``cifar-10-batches-bin`` folder the archive
    unpacks to. Columns: ``"image"``, uint8 of shape (32, 32, 3) (HWC, as MindSpore's), and
    ``"label"``, int32
    (MindSpore's is uint32, a dtype minigrad tensors do not have; int32 holds every class).

    Args:
        dataset_dir: the folder of the files.
        usage: "train" (the five data batches), "test" (the test batch) or "all" (train then
            test). None (the default) means "all", as in MindSpore.

    ``num_samples``, ``num_parallel_workers``, ``shuffle``, ``sampler``, ``num_shards`` and
    ``shard_id`` are ``NumpySlicesDataset``'s (``shuffle`` None means True unless a sampler is
    given). Every file is read and checked before the dataset exists.

    Raises:
        FileNotFoundError: a batch ``usage`` needs is missing (named; the Python-pickle
            version is recognised and named).
        ValueError: a file that is not a whole number of 3073-byte records, holds a label above
            9, or is a damaged gzip stream (each message names the file); a ``dataset_dir``
            that is not a folder; and ``NumpySlicesDataset``'s errors.
        TypeError: a ``dataset_dir`` that is not a str or path, a ``usage`` that is not a str.
    """

    def __init__(self, dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None):
        owner = "Cifar10Dataset"
        folder = files.check_folder(dataset_dir, owner)
        usage = "all" if usage is None else check_in("usage", usage, ("train", "test", "all"),
                                                     owner=owner)
        names = {"train": _TRAIN, "test": _TEST, "all": _TRAIN + _TEST}[usage]
        parts = [read_batch(path) for path in _locate(folder, names, owner)]
        images = numpy.concatenate([p[0] for p in parts])
        labels = numpy.concatenate([p[1] for p in parts]).astype(numpy.int32)
        super().__init__({"image": images, "label": labels}, num_samples=num_samples,
                         num_parallel_workers=num_parallel_workers, shuffle=shuffle,
                         sampler=sampler, num_shards=num_shards, shard_id=shard_id)
        self.dataset_dir, self.usage = folder, usage
