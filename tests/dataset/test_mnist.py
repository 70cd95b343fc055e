"""dataset.MnistDataset (dataset/mnist.py) on IDX files the tests write: train/test/all, plain and
.gz, MindSpore's columns and dtypes, sampling options, and a ValueError naming the file for every
corrupt, truncated or foreign file (never a half-read dataset)."""
import gzip

import numpy
import pytest

import minigrad
from helpers.dataset_files import idx_bytes, mnist_arrays, write, write_mnist
from minigrad.dataset import MnistDataset, vision


@pytest.fixture
def mnist(tmp_path):
    """A small MNIST in tmp_path: 12 training and 5 test images."""
    train, test = mnist_arrays(12, 0), mnist_arrays(5, 1)
    write_mnist(tmp_path, "train", *train)
    write_mnist(tmp_path, "test", *test)
    return tmp_path, train, test


def _rows(dataset):
    return [(row["image"], row["label"]) for row in dataset.create_dict_iterator(
        output_numpy=True, num_epochs=1)]


@pytest.mark.parametrize("usage", ["train", "test", "all", None])
def test_reads_each_usage_in_file_order(mnist, usage):
    folder, train, test = mnist
    dataset = MnistDataset(str(folder), usage=usage, shuffle=False)
    parts = {"train": [train], "test": [test]}.get(usage, [train, test])
    images = numpy.concatenate([p[0] for p in parts])
    labels = numpy.concatenate([p[1] for p in parts])
    assert dataset.get_col_names() == ["image", "label"]
    assert dataset.get_dataset_size() == len(labels)
    rows = _rows(dataset)
    assert rows[0][0].shape == (28, 28, 1) and rows[0][0].dtype == numpy.uint8
    assert rows[0][1].dtype == numpy.int32
    numpy.testing.assert_array_equal(numpy.stack([r[0] for r in rows])[..., 0], images)
    numpy.testing.assert_array_equal([r[1] for r in rows], labels)


def test_gzip_files_read_as_the_plain_ones(tmp_path):
    train = mnist_arrays(6, 3)
    (tmp_path / "plain").mkdir()
    (tmp_path / "gz").mkdir()
    write_mnist(tmp_path / "plain", "train", *train)
    write_mnist(tmp_path / "gz", "train", *train, gz=True)
    plain = _rows(MnistDataset(tmp_path / "plain", "train", shuffle=False))
    packed = _rows(MnistDataset(tmp_path / "gz", "train", shuffle=False))
    for (a, b), (c, d) in zip(plain, packed):
        assert (a == c).all() and a.shape == c.shape and b == d


def test_sampling_options_and_a_seeded_shuffle(mnist):
    folder, train, _ = mnist
    assert MnistDataset(folder, "train", num_samples=5).get_dataset_size() == 5
    shard = MnistDataset(folder, "train", shuffle=False, num_shards=3, shard_id=1)
    numpy.testing.assert_array_equal([r[1] for r in _rows(shard)], train[1][1::3])
    minigrad.set_seed(7)
    first = [r[1] for r in _rows(MnistDataset(folder, "train", shuffle=True))]
    minigrad.set_seed(7)
    again = [r[1] for r in _rows(MnistDataset(folder, "train", shuffle=True))]
    assert first == again and sorted(first) == sorted(train[1])


def test_vision_transforms_through_map_and_batch(mnist):
    folder, train, _ = mnist
    dataset = MnistDataset(folder, "train", shuffle=False).map(
        [vision.Rescale(1 / 255, 0), vision.Normalize([0.1307], [0.3081]), vision.HWC2CHW()],
        input_columns="image").batch(4)
    x, y = next(iter(dataset))
    assert x.shape == (4, 1, 28, 28) and x.dtype == minigrad.float32
    expected = (train[0][:4].astype(numpy.float32) / 255 - 0.1307) / 0.3081
    numpy.testing.assert_allclose(x.asnumpy()[:, 0], expected, rtol=1e-5, atol=1e-5)


# ---- files that are not MNIST's -------------------------------------------------------------

def _damage(folder, name, data):
    write(folder / name, data)


DAMAGED = {
    "truncated images": ("train-images-idx3-ubyte", lambda ok: ok[:-1], "truncated"),
    "trailing bytes": ("train-images-idx3-ubyte", lambda ok: ok + b"\0", "longer than its header"),
    "header cut short": ("train-labels-idx1-ubyte", lambda ok: ok[:6], "truncated"),
    "empty file": ("train-labels-idx1-ubyte", lambda ok: b"", "not an IDX file"),
    "a PNG": ("train-images-idx3-ubyte", lambda ok: b"\x89PNG\r\n\x1a\n" + ok, "not an IDX file"),
    "labels as images": ("train-images-idx3-ubyte",
                         lambda ok: idx_bytes(numpy.zeros(12, numpy.uint8)), "00 00 08 03"),
    "int32 values": ("train-labels-idx1-ubyte", lambda ok: b"\0\0\x0c\x01" + ok[4:],
                     "unsigned bytes"),
    "fewer labels": ("train-labels-idx1-ubyte",
                     lambda ok: idx_bytes(numpy.zeros(11, numpy.uint8)), "11 labels"),
    "label 10": ("train-labels-idx1-ubyte",
                 lambda ok: idx_bytes(numpy.full(12, 10, numpy.uint8)), "digits 0-9"),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_or_foreign_file_is_a_value_error_naming_it(mnist, case):
    folder, _, _ = mnist
    name, damage, phrase = DAMAGED[case]
    good = (folder / name).read_bytes()
    _damage(folder, name, damage(good))
    with pytest.raises(ValueError, match=phrase) as info:
        MnistDataset(folder, "train")
    assert str(folder) in str(info.value) and "ubyte" in str(info.value)


def test_a_damaged_gzip_stream_is_a_value_error_naming_it(tmp_path):
    train = mnist_arrays(4, 0)
    images, _ = write_mnist(tmp_path, "train", *train, gz=True)
    packed = open(images, "rb").read()
    for bad in (packed[:len(packed) // 2], b"not gzip at all"):
        open(images, "wb").write(bad)
        with pytest.raises(ValueError, match="not a readable gzip file") as info:
            MnistDataset(tmp_path, "train")
        assert "train-images-idx3-ubyte.gz" in str(info.value)
    with gzip.open(images, "wb") as f:  # a sound stream of a truncated file
        f.write(idx_bytes(train[0])[:-10])
    with pytest.raises(ValueError, match="truncated"):
        MnistDataset(tmp_path, "train")


def test_missing_files_and_bad_arguments(mnist, tmp_path):
    folder, _, _ = mnist
    (folder / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(FileNotFoundError, match="t10k-labels-idx1-ubyte"):
        MnistDataset(folder, "test")
    with pytest.raises(FileNotFoundError, match="t10k-labels-idx1-ubyte"):
        MnistDataset(folder)  # "all" needs the test files too
    assert MnistDataset(folder, "train").get_dataset_size() == 12
    with pytest.raises(ValueError, match="usage must be one of \\['train', 'test', 'all'\\]"):
        MnistDataset(folder, "validation")
    with pytest.raises(ValueError, match="dataset_dir must be an existing folder"):
        MnistDataset(tmp_path / "nowhere")
    with pytest.raises(TypeError, match="dataset_dir must be a str or a path"):
        MnistDataset(3)
