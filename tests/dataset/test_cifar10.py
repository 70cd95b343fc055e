"""dataset.Cifar10Dataset (dataset/cifar10.py) on binary batches the tests write: usages, HWC
images, the archive's subfolder, .gz, and a ValueError naming the file for every truncated or
foreign file."""
import numpy
import pytest

from helpers.dataset_files import cifar_bytes, write, write_cifar10
from minigrad.dataset import Cifar10Dataset, vision


def _rows(dataset):
    return [(row["image"], row["label"]) for row in dataset.create_dict_iterator(
        output_numpy=True, num_epochs=1)]


@pytest.mark.parametrize("usage", ["train", "test", "all"])
def test_reads_each_usage_as_hwc_images_in_batch_order(tmp_path, usage):
    written = write_cifar10(tmp_path, per_batch=3)
    names = {"train": [f"data_batch_{k}.bin" for k in range(1, 6)], "test": ["test_batch.bin"]}
    names["all"] = names["train"] + names["test"]
    rows = _rows(Cifar10Dataset(tmp_path, usage, shuffle=False))
    images = numpy.concatenate([written[n][0] for n in names[usage]])
    labels = numpy.concatenate([written[n][1] for n in names[usage]])
    assert rows[0][0].shape == (32, 32, 3) and rows[0][0].dtype == numpy.uint8
    assert rows[0][1].dtype == numpy.int32
    numpy.testing.assert_array_equal(numpy.stack([r[0] for r in rows]), images)
    numpy.testing.assert_array_equal([r[1] for r in rows], labels)


def test_the_archive_subfolder_and_gzip(tmp_path):
    inner = tmp_path / "cifar-10-batches-bin"
    inner.mkdir()
    written = write_cifar10(inner, per_batch=2, gz=True)
    rows = _rows(Cifar10Dataset(tmp_path, "test", shuffle=False))
    numpy.testing.assert_array_equal(numpy.stack([r[0] for r in rows]),
                                     written["test_batch.bin"][0])


def test_a_planar_record_becomes_the_right_pixels(tmp_path):
    """Label, then the red, green and blue planes: pixel (y, x) takes byte y·32 + x of each."""
    write_cifar10(tmp_path, per_batch=1)
    record = numpy.zeros(3073, numpy.uint8)
    record[0] = 7
    record[1 + 5 * 32 + 9] = 200            # red at (5, 9)
    record[1 + 1024 + 31 * 32 + 0] = 100    # green at (31, 0)
    record[1 + 2048 + 0 * 32 + 31] = 50     # blue at (0, 31)
    write(tmp_path / "test_batch.bin", record.tobytes())
    (image, label), = _rows(Cifar10Dataset(tmp_path, "test"))
    assert label == 7 and image[5, 9, 0] == 200 and image[31, 0, 1] == 100
    assert image[0, 31, 2] == 50 and image.sum() == 350


def test_random_augmentation_pipeline(tmp_path):
    write_cifar10(tmp_path, per_batch=4)
    dataset = Cifar10Dataset(tmp_path, "train").map(
        [vision.RandomCrop(32, padding=4), vision.RandomHorizontalFlip(),
         vision.Rescale(1 / 255, 0), vision.Normalize([0.49, 0.48, 0.45], [0.25, 0.24, 0.26]),
         vision.HWC2CHW()], input_columns="image").batch(8)
    x, y = next(iter(dataset))
    assert x.shape == (8, 3, 32, 32) and y.shape == (8,)


@pytest.mark.parametrize("case, data, phrase", [
    ("truncated", lambda ok: ok[:-100], "not a whole number of CIFAR-10 records"),
    ("empty", lambda ok: b"", "0 bytes"),
    ("CIFAR-100 records", lambda ok: b"\0" * 3074 * 3, "not a whole number"),
    ("label 12", lambda ok: bytes([12]) + ok[1:], "labels must be 0-9"),
])
def test_a_truncated_or_foreign_batch_is_a_value_error_naming_it(tmp_path, case, data, phrase):
    write_cifar10(tmp_path, per_batch=3)
    path = tmp_path / "data_batch_3.bin"
    path.write_bytes(data(path.read_bytes()))
    with pytest.raises(ValueError, match=phrase) as info:
        Cifar10Dataset(tmp_path, "train")
    assert "data_batch_3.bin" in str(info.value)
    assert Cifar10Dataset(tmp_path, "test").get_dataset_size() == 3  # the other file still reads


def test_missing_batches_are_named_and_the_python_version_recognised(tmp_path):
    write_cifar10(tmp_path, per_batch=1)
    (tmp_path / "data_batch_4.bin").unlink()
    with pytest.raises(FileNotFoundError, match="data_batch_4.bin"):
        Cifar10Dataset(tmp_path, "train")
    python_version = tmp_path / "py"
    python_version.mkdir()
    (python_version / "data_batch_1").write_bytes(b"pickle")
    with pytest.raises(FileNotFoundError, match="Python version"):
        Cifar10Dataset(python_version)
    with pytest.raises(TypeError, match="usage must be one of"):
        Cifar10Dataset(tmp_path, usage=1)
    assert len(cifar_bytes(numpy.zeros((2, 32, 32, 3)), [0, 1])) == 2 * 3073
