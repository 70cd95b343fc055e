"""Image transforms with MindSpore's names (``mindspore.dataset.vision``), on NumPy images.

Each transform is a callable taking one image as a dataset row holds it, (H, W) or (H, W, C)
(``HWC``, as ``MnistDataset`` and ``Cifar10Dataset`` give them), and returning a NumPy array, so
that ``dataset.map(operations=[...], input_columns="image")`` applies them in order::

    from minigrad.dataset import Cifar10Dataset, vision
    train = Cifar10Dataset(folder, usage="train").map(
        [vision.RandomCrop(32, padding=4), vision.RandomHorizontalFlip(),
         vision.Rescale(1 / 255, 0), vision.Normalize([0.49, 0.48, 0.45], [0.25, 0.24, 0.26]),
         vision.HWC2CHW()], input_columns="image").batch(128)

The random transforms draw from a Generator of their own, made from the dataset seed
(``minigrad.dataset.config.set_seed``, else ``minigrad.set_seed``) at their first call, so a run
is repeatable.
"""
import enum
import numbers

import numpy

from minigrad._checks import (check_bool, check_float, check_int_tuple,
                              check_relation, check_type)
from minigrad.dataset.settings import new_generator


class Border(enum.Enum):
    """How ``RandomCrop`` fills its padding (MindSpore's ``vision.Border``): a constant value,
    the edge pixel repeated, a reflection without the edge (``1 2 3 | 2 1``) or with it
    (``1 2 3 | 3 2``)."""
    CONSTANT = "constant"
    EDGE = "edge"
    REFLECT = "reflect"
    SYMMETRIC = "symmetric"


def _image(image, owner):
    """``image`` as a NumPy array of 2 or 3 dimensions, else ValueError naming its shape."""
    image = numpy.asarray(image)
    if image.ndim not in (2, 3):
        raise ValueError(f"{owner} expects an image of shape (H, W) or (H, W, C), got shape "
                         f"{image.shape}")
    return image


class Rescale:
    """``image · rescale + shift`` as float32 (e.g. ``Rescale(1 / 255, 0)`` maps bytes to [0, 1]).

    Raises:
        TypeError: ``rescale`` or ``shift`` is not a real number.
        ValueError: either is not finite.
    """

    def __init__(self, rescale, shift):
        self.rescale = check_float("rescale", rescale, owner="Rescale")
        self.shift = check_float("shift", shift, owner="Rescale")

    def __call__(self, image):
        image = numpy.asarray(image, numpy.float32)
        return image * numpy.float32(self.rescale) + numpy.float32(self.shift)


class Normalize:
    """``(image - mean) / std`` per channel, as float32.

    Args:
        mean: one number per channel (a list or tuple; one entry for a 2-D image).
        std: one positive number per channel, as many as ``mean``.
        is_hwc: channels last (H, W, C), the default; False for (C, H, W).

    Raises:
        TypeError: ``mean``/``std`` not a list or tuple of numbers, ``is_hwc`` not a bool.
        ValueError: an empty or non-finite ``mean``/``std``, a ``std`` entry <= 0, ``mean`` and
            ``std`` of different lengths; at the call, an image with another channel count.
    """

    def __init__(self, mean, std, is_hwc=True):
        owner = "Normalize"
        values = []
        for name, given in (("mean", mean), ("std", std)):
            check_type(name, given, (list, tuple), expected="a list or tuple of numbers",
                       owner=owner)
            check_relation(name, given, len(given) > 0, "a non-empty list or tuple", owner=owner)
            low = {"mean": {}, "std": {"low": 0.0, "low_open": True}}[name]
            values.append([check_float(f"{name}[{i}]", v, owner=owner, **low)
                           for i, v in enumerate(given)])
        check_relation("std", std, len(std) == len(mean), f"as long as mean ({len(mean)})",
                       owner=owner)
        self.mean, self.std = values
        self.is_hwc = check_bool("is_hwc", is_hwc, owner=owner)

    def __call__(self, image):
        image = _image(image, "Normalize").astype(numpy.float32)
        channels = 1 if image.ndim == 2 else image.shape[-1 if self.is_hwc else 0]
        check_relation("image.shape", image.shape, channels == len(self.mean),
                       f"an image of {len(self.mean)} channels "
                       f"({'HWC' if self.is_hwc else 'CHW'})", owner="Normalize")
        shape = (-1,) if image.ndim == 2 or self.is_hwc else (-1, 1, 1)
        mean = numpy.array(self.mean, numpy.float32).reshape(shape)
        std = numpy.array(self.std, numpy.float32).reshape(shape)
        return (image - mean) / std


class HWC2CHW:
    """(H, W, C) -> (C, H, W), the layout ``nn.Conv2d`` takes; an (H, W) image is returned as
    it is (MindSpore's rule)."""

    def __call__(self, image):
        image = _image(image, "HWC2CHW")
        return image if image.ndim == 2 else numpy.ascontiguousarray(image.transpose(2, 0, 1))


class RandomCrop:
    """Pad the image (optionally), then cut a ``size`` window at a random place.

    Args:
        size: the crop, an int (square) or (height, width).
        padding: None; an int (every border); (left/right, top/bottom); or (left, top, right,
            bottom). Default None.
        pad_if_needed: pad an image smaller than ``size`` up to it. Default False.
        fill_value: the value of ``Border.CONSTANT`` padding, an int in [0, 255] or one per
            channel (a 3-tuple). Default 0.
        padding_mode: a ``Border``. Default ``Border.CONSTANT``.

    Raises:
        TypeError / ValueError (at construction): arguments of the wrong type or out of range;
            (at the call) an image smaller than ``size`` after padding, without
            ``pad_if_needed``.
    """

    def __init__(self, size, padding=None, pad_if_needed=False, fill_value=0,
                 padding_mode=Border.CONSTANT):
        owner = "RandomCrop"
        self.size = check_int_tuple("size", size, 2, low=1, owner=owner)
        self.padding = (0, 0, 0, 0)
        if padding is not None:
            padding = check_int_tuple("padding", padding, low=0, owner=owner)
            check_relation("padding", padding, len(padding) in (1, 2, 4),
                           "an int or a sequence of 2 or 4 ints", owner=owner)
            self.padding = {1: padding * 4, 2: padding * 2, 4: padding}[len(padding)]
        self.pad_if_needed = check_bool("pad_if_needed", pad_if_needed, owner=owner)
        if isinstance(fill_value, numbers.Integral) and not isinstance(fill_value, bool):
            fill_value = (fill_value,)
        self.fill_value = check_int_tuple("fill_value", fill_value, low=0, owner=owner)
        check_relation("fill_value", fill_value, len(self.fill_value) in (1, 3)
                       and max(self.fill_value) <= 255, "an int in [0, 255] or a 3-tuple of them",
                       owner=owner)
        self.padding_mode = check_type("padding_mode", padding_mode, Border, owner=owner)
        self._rng = None

    def __call__(self, image):
        image = _image(image, "RandomCrop")
        left, top, right, bottom = self.padding
        height, width = self.size
        if self.pad_if_needed:
            bottom += max(0, height - (image.shape[0] + top + bottom))
            right += max(0, width - (image.shape[1] + left + right))
        if left or top or right or bottom:
            image = self._pad(image, top, bottom, left, right)
        check_relation("image.shape", image.shape,
                       image.shape[0] >= height and image.shape[1] >= width,
                       f"at least {self.size} after padding (or pass pad_if_needed=True)",
                       owner="RandomCrop")
        if self._rng is None:
            self._rng = new_generator()
        y = int(self._rng.integers(image.shape[0] - height + 1))
        x = int(self._rng.integers(image.shape[1] - width + 1))
        return numpy.ascontiguousarray(image[y:y + height, x:x + width])

    def _pad(self, image, top, bottom, left, right):
        widths = ((top, bottom), (left, right)) + (((0, 0),) if image.ndim == 3 else ())
        if self.padding_mode is not Border.CONSTANT:
            return numpy.pad(image, widths, mode=self.padding_mode.value)
        fill = self.fill_value
        if len(fill) == 1 or image.ndim == 2:
            return numpy.pad(image, widths, constant_values=fill[0])
        check_relation("image.shape", image.shape, image.shape[2] == len(fill),
                       f"an image of {len(fill)} channels for fill_value {fill}",
                       owner="RandomCrop")
        out = numpy.empty((image.shape[0] + top + bottom, image.shape[1] + left + right,
                           image.shape[2]), image.dtype)
        out[...] = numpy.array(fill, image.dtype)
        out[top:top + image.shape[0], left:left + image.shape[1]] = image
        return out


class RandomHorizontalFlip:
    """Mirror the image left to right with probability ``prob`` (default 0.5).

    Raises:
        TypeError / ValueError: ``prob`` not a number in [0, 1].
    """

    def __init__(self, prob=0.5):
        self.prob = check_float("prob", prob, low=0.0, high=1.0, owner="RandomHorizontalFlip")
        self._rng = None

    def __call__(self, image):
        image = _image(image, "RandomHorizontalFlip")
        if self._rng is None:
            self._rng = new_generator()
        if self._rng.random() < self.prob:
            return numpy.ascontiguousarray(image[:, ::-1])
        return image
