"""The MindSpore 2.x Tensor spellings work; PyTorch-only names say what to write in minigrad."""
import numpy
import pytest

import minigrad
from minigrad import Tensor

X = numpy.array([[1.0, 5.0, 3.0], [7.0, 2.0, 7.0]], numpy.float32)


def test_argmax_and_argmin():
    t = Tensor(X)
    assert t.argmax().item() == numpy.argmax(X) and t.argmax().dtype == numpy.int32
    numpy.testing.assert_array_equal(t.argmax(axis=1).asnumpy(), X.argmax(axis=1))
    numpy.testing.assert_array_equal(t.argmin(axis=0).asnumpy(), X.argmin(axis=0))
    assert t.argmax(axis=-1, keepdims=True).shape == (2, 1)
    assert t.argmax(keepdims=True).shape == (1, 1)
    with pytest.raises(TypeError, match=r"^argmax: axis must be an int in \[-2, 1\]"):
        t.argmax(axis=(0, 1))
    with pytest.raises(ValueError, match=r"^argmax: axis must be an int in \[-2, 1\].*got 2$"):
        t.argmax(axis=2)


def test_permute_unsqueeze_and_casts():
    t = Tensor(X, requires_grad=True)
    assert t.permute(1, 0).shape == (3, 2) and t.permute((1, 0)).shape == (3, 2)
    assert t.unsqueeze(0).shape == (1, 2, 3)
    assert t.half().dtype == minigrad.float16 and t.half().float().dtype == minigrad.float32
    assert t.int().dtype == minigrad.int32 and t.bool().dtype == minigrad.bool_
    out = t.permute(1, 0).half().float().sum()
    out.backward()
    numpy.testing.assert_array_equal(t.grad.asnumpy(), numpy.ones_like(X))


def test_to_takes_a_dtype_or_a_device_positionally():
    t = Tensor(X)
    assert t.to(minigrad.float16).dtype == minigrad.float16       # MindSpore 2.x
    assert t.to("float16").dtype == minigrad.float16
    assert t.to("cpu").device == "CPU" and t.to("CPU", minigrad.float16).dtype == minigrad.float16
    assert t.to(dtype=minigrad.float64).dtype == minigrad.float64
    with pytest.raises(ValueError, match=r"args must be a device name \(CPU, GPU\) or a dtype, "
                                         r"got 'float128'"):
        t.to("float128")
    with pytest.raises(TypeError, match="to\\(\\) takes a device and/or a dtype"):
        t.to("CPU", minigrad.float16, 1)


def test_arithmetic_method_spellings():
    t, u = Tensor(X), Tensor(X + 1)
    for name, want in [("add", X + (X + 1)), ("sub", X - (X + 1)), ("mul", X * (X + 1)),
                       ("div", X / (X + 1))]:
        numpy.testing.assert_allclose(getattr(t, name)(u).asnumpy(), want, rtol=1e-6)
    numpy.testing.assert_allclose(t.pow(2).asnumpy(), X ** 2)
    numpy.testing.assert_allclose(t.square().asnumpy(), X ** 2)
    numpy.testing.assert_allclose(t.neg().asnumpy(), -X)
    numpy.testing.assert_allclose(t.clamp(2, 5).asnumpy(), numpy.clip(X, 2, 5))
    c = t.copy()
    assert c.is_leaf and c.data is not t.data
    numpy.testing.assert_array_equal(c.asnumpy(), X)


@pytest.mark.parametrize("name, hint", [
    ("cuda", "t.to('GPU')"), ("cpu", "t.to('CPU')"), ("clone", "t.copy()"),
    ("numel", "t.size"), ("type", "t.astype(dtype)"), ("contiguous", "nothing"),
])
def test_pytorch_only_names_say_the_minigrad_equivalent(name, hint):
    with pytest.raises(
        AttributeError, match=f"{name!r} \\(a PyTorch name\\); in minigrad write"
    ) as info:
        getattr(Tensor(X), name)
    assert hint in str(info.value)


def test_unknown_names_are_plain_attribute_errors():
    t = Tensor(X)
    with pytest.raises(AttributeError, match="^'Tensor' object has no attribute 'no_such'$"):
        t.no_such
    assert not hasattr(t, "cuda") and hasattr(t, "argmax")
    assert minigrad.Parameter(t).argmax().item() == numpy.argmax(X)  # subclasses inherit them
