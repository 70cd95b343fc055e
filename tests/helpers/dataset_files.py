"""Dataset files in their real formats, written by the tests (nothing is downloaded): MNIST's
IDX files and CIFAR-10's binary batches, plain or gzip-compressed."""
import gzip
import struct

import numpy

MNIST_NAMES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
               "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def idx_bytes(array):
    """The IDX encoding of a uint8 array: 00 00 08 ndim, the big-endian sizes, the values."""
    array = numpy.asarray(array, numpy.uint8)
    return (bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
            + array.tobytes())


def write(path, data, gz=False):
    """Write ``data`` (bytes) to ``path``, or gzip-compressed to ``path + ".gz"``; the path."""
    path = f"{path}.gz" if gz else str(path)
    with (gzip.open(path, "wb") if gz else open(path, "wb")) as f:
        f.write(data)
    return path


def mnist_arrays(count, seed, height=28, width=28):
    rng = numpy.random.default_rng(seed)
    return (rng.integers(0, 256, (count, height, width), dtype=numpy.uint8),
            rng.integers(0, 10, count, dtype=numpy.uint8))


def write_mnist(folder, usage, images, labels, gz=False):
    """Write one part ("train" or "test") of MNIST into ``folder``."""
    image_name, label_name = MNIST_NAMES[usage]
    return (write(folder / image_name, idx_bytes(images), gz),
            write(folder / label_name, idx_bytes(labels), gz))


def cifar_bytes(images, labels):
    """CIFAR-10 binary records: per image the label byte, then the R, G and B planes."""
    images = numpy.asarray(images, numpy.uint8)
    planes = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
    return numpy.concatenate([numpy.asarray(labels, numpy.uint8)[:, None], planes], 1).tobytes()


def cifar_arrays(count, seed):
    rng = numpy.random.default_rng(seed)
    return (rng.integers(0, 256, (count, 32, 32, 3), dtype=numpy.uint8),
            rng.integers(0, 10, count, dtype=numpy.uint8))


def write_cifar10(folder, per_batch=4, seed=0, gz=False):
    """The six batches of CIFAR-10 (``per_batch`` images each) into ``folder``: {name:
    (images, labels)}."""
    written = {}
    for i, name in enumerate([f"data_batch_{k}.bin" for k in range(1, 6)] + ["test_batch.bin"]):
        images, labels = cifar_arrays(per_batch, seed + i)
        write(folder / name, cifar_bytes(images, labels), gz)
        written[name] = (images, labels)
    return written
