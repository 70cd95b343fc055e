"""dataset.vision (dataset/vision.py): each transform against its NumPy formula, the random ones
seeded and covering their range, and argument errors."""
import numpy
import pytest

import minigrad
from minigrad.dataset import vision

RNG = numpy.random.default_rng(0)
HWC = RNG.integers(0, 256, (6, 5, 3), dtype=numpy.uint8)


def test_rescale_and_normalize():
    out = vision.Rescale(1 / 255, -0.5)(HWC)
    assert out.dtype == numpy.float32
    numpy.testing.assert_allclose(out, HWC / 255 - 0.5, atol=1e-7)
    mean, std = [1.0, 2.0, 3.0], [0.5, 0.25, 2.0]
    out = vision.Normalize(mean, std)(HWC)
    numpy.testing.assert_allclose(out, (HWC - numpy.array(mean)) / numpy.array(std), rtol=1e-6)
    chw = HWC.transpose(2, 0, 1)
    out = vision.Normalize(mean, std, is_hwc=False)(chw)
    numpy.testing.assert_allclose(out, (chw - numpy.array(mean)[:, None, None])
                                  / numpy.array(std)[:, None, None], rtol=1e-6)
    gray = HWC[..., 0]
    numpy.testing.assert_allclose(vision.Normalize([10.0], [4.0])(gray), (gray - 10.0) / 4)


def test_hwc2chw():
    out = vision.HWC2CHW()(HWC)
    assert out.shape == (3, 6, 5) and out.flags.c_contiguous
    assert (out == HWC.transpose(2, 0, 1)).all()
    assert vision.HWC2CHW()(HWC[..., 0]).shape == (6, 5)


@pytest.mark.parametrize("padding, expected", [
    (None, (0, 0, 0, 0)), (2, (2, 2, 2, 2)), ((1, 3), (1, 3, 1, 3)), ((1, 2, 3, 4), (1, 2, 3, 4))])
def test_random_crop_pads_then_crops_windows_of_the_padded_image(padding, expected):
    minigrad.set_seed(0)
    left, top, right, bottom = expected
    crop = vision.RandomCrop((4, 3), padding=padding, fill_value=(7, 8, 9))
    padded = numpy.empty((6 + top + bottom, 5 + left + right, 3), numpy.uint8)
    padded[...] = [7, 8, 9]
    padded[top:top + 6, left:left + 5] = HWC
    corners = set()
    for _ in range(1000):
        out = crop(HWC)
        assert out.shape == (4, 3, 3)
        found = [(y, x) for y in range(padded.shape[0] - 3) for x in range(padded.shape[1] - 2)
                 if (padded[y:y + 4, x:x + 3] == out).all()]
        assert found
        corners.update(found)
    assert len(corners) == (padded.shape[0] - 3) * (padded.shape[1] - 2)  # every window occurs


@pytest.mark.parametrize("mode", list(vision.Border))
def test_random_crop_padding_modes_match_numpy_pad(mode):
    minigrad.set_seed(1)
    crop = vision.RandomCrop(10, padding=2, padding_mode=mode)  # the whole padded image
    square = RNG.integers(0, 256, (6, 6, 3), dtype=numpy.uint8)
    out = crop(square)
    numpy_mode = {"CONSTANT": "constant", "EDGE": "edge", "REFLECT": "reflect",
                  "SYMMETRIC": "symmetric"}[mode.name]
    assert (out == numpy.pad(square, ((2, 2), (2, 2), (0, 0)), mode=numpy_mode)).all()


def test_random_crop_pad_if_needed_and_its_absence():
    out = vision.RandomCrop(8, pad_if_needed=True)(HWC)
    assert out.shape == (8, 8, 3) and out.sum() == HWC.sum()  # padded with zeros only
    with pytest.raises(ValueError, match=r"at least \(8, 8\) after padding"):
        vision.RandomCrop(8)(HWC)


def test_random_transforms_repeat_with_the_seed():
    def draws():
        minigrad.set_seed(3)
        crop, flip = vision.RandomCrop(4, padding=1), vision.RandomHorizontalFlip()
        return [flip(crop(HWC)) for _ in range(20)]
    assert all((a == b).all() for a, b in zip(draws(), draws()))


def test_random_horizontal_flip():
    assert (vision.RandomHorizontalFlip(1.0)(HWC) == HWC[:, ::-1]).all()
    assert vision.RandomHorizontalFlip(0.0)(HWC) is HWC
    minigrad.set_seed(2)
    flip = vision.RandomHorizontalFlip()
    flipped = sum(bool((flip(HWC) != HWC).any()) for _ in range(400))
    assert 150 < flipped < 250


def test_bad_arguments_name_the_argument():
    with pytest.raises(TypeError, match="rescale must be a finite float"):
        vision.Rescale("1/255", 0)
    with pytest.raises(ValueError, match=r"std\[1\] must be a finite float in \(0.0, inf\)"):
        vision.Normalize([0.5, 0.5], [0.2, 0.0])
    with pytest.raises(ValueError, match="std must be as long as mean"):
        vision.Normalize([0.5, 0.5], [0.2])
    with pytest.raises(TypeError, match="mean must be a list or tuple of numbers"):
        vision.Normalize(0.5, [0.2])
    with pytest.raises(ValueError, match="image.shape must be an image of 1 channels"):
        vision.Normalize([0.5], [0.2])(HWC)
    with pytest.raises(ValueError, match="size must be a positive int or a 2-tuple"):
        vision.RandomCrop(0)
    with pytest.raises(ValueError, match="padding must be an int or a sequence of 2 or 4 ints"):
        vision.RandomCrop(4, padding=(1, 2, 3))
    with pytest.raises(TypeError, match="padding_mode must be a Border"):
        vision.RandomCrop(4, padding_mode="edge")
    with pytest.raises(ValueError, match="fill_value must be an int in \\[0, 255\\]"):
        vision.RandomCrop(4, fill_value=300)
    with pytest.raises(ValueError, match="prob must be a finite float in \\[0.0, 1.0\\]"):
        vision.RandomHorizontalFlip(1.5)
    with pytest.raises(ValueError, match=r"expects an image of shape \(H, W\) or \(H, W, C\)"):
        vision.HWC2CHW()(numpy.zeros((2, 3, 4, 5)))
