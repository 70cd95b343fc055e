"""minigrad.Parameter: set_data with Python numbers, requires_grad's type, in-place operators
that write into the Parameter and count its versions."""
import numpy
import numpy as np
import pytest

from minigrad import Tensor
from minigrad.parameter import Parameter


def test_parameter_set_data_takes_python_numbers():
    """mindspore.Parameter.set_data(data): 'data (Union[Tensor, int, float]) - New data.' A
    Python number raised AttributeError ('float' object has no attribute 'shape'); any other
    kind of data must be a TypeError naming it, not an AttributeError."""
    p = Parameter(Tensor(numpy.float32(1.0)), name="s")
    assert p.set_data(2.5) is p and p.asnumpy() == 2.5 and p.dtype == numpy.float32
    p.set_data(3)
    assert p.asnumpy() == 3.0
    q = Parameter(Tensor(numpy.ones((2,), numpy.float32)), name="q")
    with pytest.raises(ValueError, match=r"'q'.*\(\).*\(2,\)"):
        q.set_data(1.0)
    with pytest.raises(TypeError, match="set_data.*'q'.*data.*str"):
        q.set_data("1.0")


def test_parameter_requires_grad_must_be_bool():
    """mindspore.Parameter: requires_grad (bool); MindSpore's setter raises TypeError for another
    type: requires_grad='no' is not read as True (a non-empty string)."""
    with pytest.raises(TypeError, match="requires_grad must be a bool, got 'no'"):
        Parameter(Tensor(numpy.ones(1, numpy.float32)), requires_grad="no")
    assert (
        Parameter(Tensor(numpy.ones(1, numpy.float32)), requires_grad=False).requires_grad is False
    )


def test_inplace_operator_on_parameter_updates_it_and_bumps_version():
    # ``p -= lr * p.grad`` must not silently rebind p to a new plain Tensor (the Parameter, and
    # the network holding it, unchanged); it writes in place as Cell attribute assignment does
    p = Parameter(np.ones(3, np.float32), name="w")
    alias = p
    p -= 0.5
    assert p is alias and isinstance(p, Parameter)
    np.testing.assert_array_equal(alias.data, [0.5, 0.5, 0.5])
    assert alias.version == 1
    p *= Tensor(np.float32(4.0))
    np.testing.assert_array_equal(alias.data, [2.0, 2.0, 2.0])
    assert alias.version == 2
    with pytest.raises(ValueError):
        p += Tensor(np.ones((2, 3), np.float32))  # would change the shape
