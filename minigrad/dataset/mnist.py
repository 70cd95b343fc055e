"""``MnistDataset``: MNIST (and Fashion-MNIST, KMNIST: the same files) from its IDX files.

An IDX file is a 4-byte header (two zero bytes, a type code, 0x08 for unsigned bytes, and the
number of dimensions), one big-endian uint32 per dimension, then the values in C order. MNIST's
images are (N, 28, 28) and its labels (N,).
"""
import numpy

from minigrad._checks import check_in
from minigrad.dataset import files
from minigrad.dataset.numpy_slices import NumpySlicesDataset

_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
_UNSIGNED_BYTE = 0x08


def read_idx(path, ndim):
    """The unsigned-byte array of ``ndim`` dimensions in the IDX file ``path`` (plain or .gz).

    Raises:
        ValueError: naming the file, for another header (not IDX, another value type or number
            of dimensions), or a size that differs from what the header announces (truncated,
            or trailing bytes).
    """
    data = files.read_bytes(path)
    header = 4 + 4 * ndim
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path}: not an IDX file (it must start with two zero bytes, got "
                         f"{data[:4]!r})")
    if data[2] != _UNSIGNED_BYTE or data[3] != ndim:
        raise ValueError(f"{path}: an IDX file of unsigned bytes in {ndim} dimensions must start "
                         f"with 00 00 08 {ndim:02x}, got {data[:4].hex(' ')}")
    if len(data) < header:
        raise ValueError(f"{path}: truncated: {len(data)} bytes, shorter than its header")
    shape = tuple(int(n) for n in numpy.frombuffer(data, ">u4", ndim, 4))
    expected = header + int(numpy.prod(shape, dtype=numpy.int64))
    if len(data) != expected:
        state = "truncated" if len(data) < expected else "longer than its header says"
        raise ValueError(f"{path}: {state}: {len(data)} bytes, but a header of shape {shape} "
                         f"means {expected}")
    return numpy.frombuffer(data, numpy.uint8, offset=header).reshape(shape)


def _read_part(folder, usage, owner):
    names = _FILES[usage]
    paths = [files.find(folder, name) for name in names]
    missing = [name for name, path in zip(names, paths) if path is None]
    if missing:
        raise FileNotFoundError(f"{owner}: {folder!r} has no {' or '.join(missing)} (nor "
                                f"{missing[0]}.gz): usage {usage!r} needs {names[0]} and "
                                f"{names[1]}, plain or .gz")
    images, labels = read_idx(paths[0], 3), read_idx(paths[1], 1)
    if len(images) != len(labels):
        raise ValueError(f"{paths[0]} holds {len(images)} images but {paths[1]} holds "
                         f"{len(labels)} labels")
    if labels.size and labels.max() > 9:
        raise ValueError(f"{paths[1]}: labels must be digits 0-9, found {int(labels.max())}")
    return images, labels


class MnistDataset(NumpySlicesDataset):
    """MNIST read from its IDX files (MindSpore's ``dataset.MnistDataset``).

    ``dataset_dir`` holds ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``, each plain or gzip-compressed
    (the same name with ``.gz``, as downloaded). Fashion-MNIST and KMNIST use the same files.
    Columns: ``"image"``, uint8 of shape (28, 28, 1) (HWC, as MindSpore's), and ``"label"``,
    int32 (MindSpore's is uint32, a dtype minigrad tensors do not have; int32 holds every class).

    Args:
        dataset_dir: the folder of the files.
        usage: "train" (60,000 images), "test" (10,000) or "all" (train then test). None (the
            default) means "all", as in MindSpore.

    ``num_samples``, ``num_parallel_workers``, ``shuffle``, ``sampler``, ``num_shards`` and
    ``shard_id`` are ``NumpySlicesDataset``'s (``shuffle`` None means True unless a sampler is
    given). Every file is read and checked before the dataset exists.

    Raises:
        FileNotFoundError: a file ``usage`` needs is missing (the message names it).
        ValueError: a file that is not an IDX file of unsigned bytes with the right number of
            dimensions, a truncated one, a damaged gzip stream, images and labels of
            different counts, or a label above 9 (each message names the file); a
            ``dataset_dir`` that is not a folder; and ``NumpySlicesDataset``'s errors.
        TypeError: a ``dataset_dir`` that is not a str or path, a ``usage`` that is not a str.
    """

    def __init__(self, dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None):
        owner = "MnistDataset"
        folder = files.check_folder(dataset_dir, owner)
        usage = "all" if usage is None else check_in("usage", usage, ("train", "test", "all"),
                                                     owner=owner)
        parts = [_read_part(folder, u, owner) for u in (("train", "test") if usage == "all"
                                                        else (usage,))]
        images = numpy.concatenate([p[0] for p in parts])[..., None]
        labels = numpy.concatenate([p[1] for p in parts]).astype(numpy.int32)
        super().__init__({"image": images, "label": labels}, num_samples=num_samples,
                         num_parallel_workers=num_parallel_workers, shuffle=shuffle,
                         sampler=sampler, num_shards=num_shards, shard_id=shard_id)
        self.dataset_dir, self.usage = folder, usage
