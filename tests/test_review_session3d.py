"""Review of the nn layers, losses, initializers, Cell and Parameter (session 3d) against
MindSpore's documented behaviour. Each test pins one discrepancy that was found; the docstring
names the MindSpore documentation that shows the expected behaviour."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, nn
from minigrad.nn import init
from minigrad.parameter import Parameter


def _x(*shape, dtype=numpy.float32):
    return Tensor(numpy.random.default_rng(0).standard_normal(shape).astype(dtype))


# ---- data_format -------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda fmt: nn.Conv2d(3, 4, 3, data_format=fmt),
    lambda fmt: nn.BatchNorm2d(3, data_format=fmt),
    lambda fmt: nn.MaxPool2d(2, 2, data_format=fmt),
    lambda fmt: nn.AvgPool2d(2, 2, data_format=fmt),
], ids=["Conv2d", "BatchNorm2d", "MaxPool2d", "AvgPool2d"])
def test_2d_layers_take_data_format_nchw(make):
    """MindSpore's signatures: nn.Conv2d(..., data_format='NCHW'), nn.BatchNorm2d(...,
    data_format='NCHW'), nn.MaxPool2d(kernel_size=1, stride=1, pad_mode='valid',
    data_format='NCHW'), nn.AvgPool2d(same) (mindspore.cn docs r1.7-r2.x). Code that spells the
    default out got 'unexpected keyword argument'. 'NHWC' is a GPU-only layout in MindSpore and
    minigrad computes NCHW only: a ValueError naming data_format and the value."""
    cell = make("NCHW")
    assert cell(_x(2, 3, 4, 4)).shape[:2] in ((2, 4), (2, 3))
    with pytest.raises(ValueError, match="data_format.*'NCHW'.*'NHWC'"):
        make("NHWC")
    with pytest.raises(ValueError, match="data_format.*'nchw_'"):
        make("nchw_")


# ---- Embedding ---------------------------------------------------------------------------------

def test_embedding_padding_idx_must_be_in_0_vocab():
    """mindspore.nn.Embedding, Raises: 'ValueError - If padding_idx is an int not in
    [0, vocab_size)'. A negative padding_idx was accepted (and zeroed a row counted from the end),
    True was taken as 1, and a NumPy integer was refused."""
    with pytest.raises(ValueError, match=r"padding_idx must be None or an int in \[0, 5\), got -1"):
        nn.Embedding(5, 3, padding_idx=-1)
    with pytest.raises(TypeError, match="padding_idx.*True"):
        nn.Embedding(5, 3, padding_idx=True)
    emb = nn.Embedding(5, 3, padding_idx=numpy.int64(4))
    assert not emb.embedding_table.asnumpy()[4].any() and emb.embedding_table.asnumpy()[:4].all()


# ---- Flatten -----------------------------------------------------------------------------------

def test_flatten_keeps_an_empty_batch():
    """mindspore.nn.Flatten: output shape (N, X), X the product of the remaining dimensions. An
    input with N = 0 raised 'cannot reshape ... to (0, -1)' instead of giving (0, 12)."""
    out = nn.Flatten()(Tensor(numpy.ones((0, 3, 4), numpy.float32)))
    assert out.shape == (0, 12)
    assert nn.Flatten()(_x(2, 3, 4)).shape == (2, 12)


# ---- Cell --------------------------------------------------------------------------------------

def test_insert_child_to_cell_refuses_a_name_in_use():
    """mindspore.nn.Cell.insert_child_to_cell, Raises: 'KeyError - Child Cell's name is incorrect
    or duplicated with the other child name.' (an attribute of that name that is not a child
    cell). Inserting a child named 'weight' silently dropped the Dense's weight Parameter, and
    one named 'in_channels' or 'construct' overwrote the attribute / shadowed the method."""
    dense = nn.Dense(2, 2)
    for name in ("weight", "in_channels", "construct", "training"):
        with pytest.raises(KeyError, match=f"'{name}'"):
            dense.insert_child_to_cell(name, nn.ReLU())
    assert [n for n, _ in dense.parameters_and_names()] == ["weight", "bias"]
    assert dense(_x(1, 2)).shape == (1, 2)
    # an existing child of that name may be replaced
    seq = nn.SequentialCell(nn.ReLU())
    seq.insert_child_to_cell("0", nn.Tanh())
    assert isinstance(seq[0], nn.Tanh)


def test_insert_param_to_cell_refuses_a_method_name():
    """mindspore.nn.Cell.insert_param_to_cell: a name that is already an attribute of the cell and
    not one of its parameters is a KeyError ('Duplicated parameter name'). Only the instance
    __dict__ was looked at, so 'construct' (a method) was shadowed by the Parameter and calling
    the cell failed with 'Parameter object is not callable'."""
    dense = nn.Dense(2, 2)
    with pytest.raises(KeyError, match="'construct'"):
        dense.insert_param_to_cell("construct", Parameter(Tensor(numpy.ones(1, numpy.float32))))
    assert dense(_x(1, 2)).shape == (1, 2)
    dense.insert_param_to_cell("weight", Parameter(Tensor(numpy.zeros((2, 2), numpy.float32))))
    assert not dense.weight.asnumpy().any()


# ---- Parameter ---------------------------------------------------------------------------------

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
    type. requires_grad='no' was read as True (a non-empty string)."""
    with pytest.raises(TypeError, match="requires_grad must be a bool, got 'no'"):
        Parameter(Tensor(numpy.ones(1, numpy.float32)), requires_grad="no")
    assert Parameter(Tensor(numpy.ones(1, numpy.float32)), requires_grad=False).requires_grad is False


# ---- initializer -------------------------------------------------------------------------------

def test_initializer_takes_numpy_numbers():
    """mindspore.common.initializer.initializer: init (Union[Tensor, str, Initializer,
    numbers.Number]). A NumPy scalar (numpy.float32(0.5), numpy.int64(2)) is a numbers.Number but
    was refused with TypeError."""
    numpy.testing.assert_array_equal(init.initializer(numpy.float32(0.5), (2,)).asnumpy(), [0.5, 0.5])
    numpy.testing.assert_array_equal(init.initializer(numpy.int64(2), (2,)).asnumpy(), [2.0, 2.0])


def test_initializer_shape_must_hold_ints():
    """mindspore.common.initializer.initializer: shape (Union[tuple, list, int]) of integers;
    MindSpore raises ValueError ('the value of shape must be positive integer') for another value.
    A float dimension 2.5 was silently truncated to 2."""
    with pytest.raises(ValueError, match=r"shape must hold ints.*2\.5"):
        init.initializer("zeros", (2.5, 3))
    assert init.initializer("zeros", (numpy.int64(2), 3)).shape == (2, 3)


# ---- containers filled after registration ------------------------------------------------------

class _Stack(nn.Cell):
    """The common pattern: empty containers registered first, filled by append in a loop."""

    def __init__(self):
        super().__init__()
        self.layers = nn.CellList()
        for _ in range(2):
            self.layers.append(nn.Dense(2, 2))
        self.head = nn.SequentialCell()
        self.head.append(nn.Dense(2, 2))

    def construct(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def test_append_to_an_empty_registered_container_names_by_attribute_path():
    """SPEC 3: Parameters have unique dotted names that follow attribute paths. A CellList or
    SequentialCell assigned to a cell while empty and filled by append afterwards named its
    parameters '0.weight', '1.weight', ... without the container's path, so two such containers
    collided and get_parameters() raised 'two different parameters are both named 0.weight'."""
    net = _Stack()
    assert [p.name for p in net.get_parameters()] == [
        "layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
        "head.0.weight", "head.0.bias"]

    class Outer(nn.Cell):
        def __init__(self):
            super().__init__()
            self.body = _Stack()

        def construct(self, x):
            return self.body(x)
    outer = Outer()
    outer.body.layers.append(nn.Dense(2, 2))
    outer.body.layers.insert(0, nn.Dense(2, 2))
    names = [p.name for p in outer.get_parameters()]
    assert names == [f"body.{path}" for path, _ in outer.body.parameters_and_names()]
    assert names[:2] == ["body.layers.0.weight", "body.layers.0.bias"]
    assert names[-2:] == ["body.head.0.weight", "body.head.0.bias"]
    # update_parameters_name sets the path an empty container appends under, too
    copy = _Stack()
    fresh = nn.CellList()
    copy.insert_child_to_cell("extra", fresh)
    copy.update_parameters_name("copy.")
    fresh.append(nn.Dense(2, 2))
    assert [p.name for p in copy.get_parameters()][-2:] == ["copy.extra.0.weight", "copy.extra.0.bias"]
