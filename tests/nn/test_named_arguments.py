"""nn's constructors name a bad argument and show its value, and change nothing then."""
import re

import numpy
import pytest

from minigrad import nn
from minigrad.amp.core import ScaleCore


def _raises(error, message):
    return pytest.raises(error, match=re.escape(message))


def test_containers_take_an_iterable_of_their_kind_all_or_nothing():
    cells = nn.CellList([nn.ReLU()])
    with _raises(TypeError, "CellList: cells must be an iterable of Cells (element 1 is a str), "
                            "got [ReLU<>, 'relu'] (list)"):
        cells.extend([nn.ReLU(), "relu"])
    assert len(cells) == 1  # the good cell before the bad one was not appended
    with _raises(TypeError, "CellList: cells must be an iterable of Cells, got 'abc' (str)"):
        nn.CellList("abc")
    assert len(nn.CellList(c for c in (nn.ReLU(), nn.Tanh()))) == 2
    params = nn.Dense(3, 2).trainable_params()
    assert nn.ParameterTuple(p for p in params) == tuple(params)
    with _raises(TypeError, "ParameterTuple: iterable must be an iterable of Parameters, got "
                            "True (bool)"):
        nn.ParameterTuple(True)


def test_initializers_check_their_numbers():
    with _raises(TypeError, "HeUniform: negative_slope must be a finite float, got None "
                            "(NoneType)"):
        nn.HeUniform(negative_slope=None)
    with _raises(ValueError, "HeNormal: negative_slope must be a finite float, got inf"):
        nn.HeNormal(negative_slope=float("inf"))
    with _raises(TypeError, "XavierUniform: gain must be a finite float, got '1' (str)"):
        nn.XavierUniform(gain="1")
    # a slope too large to square leaves a gain of 0, as the formula does in the limit
    assert not nn.HeUniform(negative_slope=1e200).sample((2, 2)).any()


def test_a_bias_init_array_has_the_bias_shape_even_without_a_bias():
    with _raises(ValueError, "bias_init must have shape (2,), got array([1., 1., 1.]) of shape "
                             "(3,)"):
        nn.Conv2d(1, 2, 3, bias_init=numpy.ones(3))  # has_bias=False: the bias is not made
    conv = nn.Conv2d(1, 2, 3, has_bias=True, bias_init=numpy.full(2, 0.5))
    numpy.testing.assert_array_equal(conv.bias.asnumpy(), [0.5, 0.5])


def test_thor_and_transformer_arguments():
    with _raises(ValueError, "Conv2dThor: group must be 1 (THOR's factor A treats all input "
                             "channels as one Kronecker block), got 2"):
        nn.Conv2dThor(2, 2, 3, group=2)
    with _raises(TypeError, "Conv2dThor: group must be a positive int, got [1] (list)"):
        nn.Conv2dThor(2, 2, 3, group=[1])
    with _raises(ValueError, "name must be one of ['gelu', 'logsoftmax', 'relu', 'sigmoid', "
                             "'softmax', 'tanh'], got 'swish'"):
        nn.get_activation("swish")


def test_update_cells_take_a_core_of_their_kind():
    fixed = ScaleCore(2.0 ** 10, growth_interval=None)
    dynamic = ScaleCore(2.0 ** 10, 2.0, 0.5, 10)
    assert nn.FixedLossScaleUpdateCell(2.0 ** 10, core=fixed).core is fixed
    assert nn.DynamicLossScaleUpdateCell(2.0 ** 10, 2, 10, core=dynamic).core is dynamic
    with pytest.raises(ValueError, match=r"FixedLossScaleUpdateCell: core must be a fixed "
                                         r"ScaleCore \(growth_interval None\) or None, got "):
        nn.FixedLossScaleUpdateCell(2.0 ** 10, core=dynamic)
    with _raises(TypeError, "DynamicLossScaleUpdateCell: core must be a dynamic ScaleCore "
                            "(growth_interval set) or None, got 'abc' (str)"):
        nn.DynamicLossScaleUpdateCell(2.0 ** 10, 2, 10, core="abc")
