"""Tensor and Parameter flags are real bools: a truthy stand-in (0, 1, None, '') is refused."""
import numpy
import pytest

from minigrad import Parameter, Tensor

STAND_INS = [0, 1, None, "", "yes", 1.0, numpy.int64(1)]


@pytest.mark.parametrize("value", STAND_INS)
def test_tensor_requires_grad_must_be_a_bool(value):
    with pytest.raises(TypeError, match=r"^requires_grad must be a bool, got .* \(\w+\)$"):
        Tensor([1.0], requires_grad=value)
    t = Tensor([1.0])
    with pytest.raises(TypeError, match=r"^requires_grad must be a bool"):
        t.requires_grad_(value)
    assert t.requires_grad is False  # nothing half-written


@pytest.mark.parametrize("value", STAND_INS)
def test_parameter_requires_grad_must_be_a_bool(value):
    with pytest.raises(TypeError, match=r"^requires_grad must be a bool"):
        Parameter(Tensor([1.0]), requires_grad=value)


@pytest.mark.parametrize("value", [True, False, numpy.bool_(True), numpy.bool_(False)])
def test_bools_pass_and_are_stored_as_python_bools(value):
    assert Tensor([1.0], requires_grad=value).requires_grad is bool(value)
    assert Tensor([1.0]).requires_grad_(value).requires_grad is bool(value)
    assert Parameter(Tensor([1.0]), requires_grad=value).requires_grad is bool(value)
