"""nn.Cell: registration, naming, traversal, modes, hooks, to_float, repr, containers."""
import copy
from collections import OrderedDict

import numpy
import numpy as np
import pytest

import minigrad
from minigrad import Parameter, Tensor, nn


def _param(*shape, name=None, requires_grad=True):
    return Parameter(
        Tensor(numpy.ones(shape, numpy.float32)), name=name, requires_grad=requires_grad
    )


class Block(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(3, 4)
        self.bn = nn.BatchNorm1d(4)

    def construct(self, x):
        return self.bn(self.fc(x))


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.SequentialCell(nn.ReLU(), nn.Dense(4, 2, has_bias=False))
        self.scale = _param(2)

    def construct(self, x):
        return self.head(self.block(x)) * self.scale


def test_parameter_names_follow_attribute_paths():
    net = Net()
    expected = [
        "scale",
        "block.fc.weight",
        "block.fc.bias",
        "block.bn.gamma",
        "block.bn.beta",
        "block.bn.moving_mean",
        "block.bn.moving_variance",
        "head.1.weight",
    ]
    assert [path for path, _ in net.parameters_and_names()] == expected
    assert [p.name for p in net.get_parameters()] == expected
    assert [p.name for p in net.trainable_params()] == [n for n in expected if "moving" not in n]
    assert [p.name for p in net.untrainable_params()] == [
        "block.bn.moving_mean",
        "block.bn.moving_variance",
    ]
    assert list(net.parameters_dict()) == expected
    assert [path for path, _ in net.parameters_and_names(name_prefix="net")][0] == "net.scale"
    assert [path for path, _ in net.parameters_and_names(expand=False)] == ["scale"]


def test_cells_and_names_name_cells_cells():
    net = Net()
    assert [path for path, _ in net.cells_and_names()] == [
        "",
        "block",
        "block.fc",
        "block.bn",
        "head",
        "head.0",
        "head.1",
    ]
    assert list(net.name_cells()) == ["block", "head"]
    assert net.cells() == [net.block, net.head]


def test_user_named_parameter_keeps_its_name_and_wrappers_add_no_prefix():
    class Inner(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = _param(2, name="my_weight")
            self.v = _param(2)

        def construct(self, x):
            return x * self.w * self.v

    class Outer(nn.Cell):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def construct(self, x):
            return self.inner(x)

    outer = Outer()
    assert [p.name for p in outer.get_parameters()] == ["my_weight", "inner.v"]
    wrapped = nn.WithLossCell(outer, nn.MSELoss())
    assert [p.name for p in wrapped.get_parameters()] == ["my_weight", "inner.v"]
    assert [path for path, _ in wrapped.parameters_and_names()] == [
        "_backbone.inner.w",
        "_backbone.inner.v",
    ]


def test_duplicate_parameter_names_raise_naming_both_paths():
    class Twice(nn.Cell):
        def __init__(self):
            super().__init__()
            self.a = nn.Dense(2, 2)
            self.a.weight = _param(2, 2, name="w")
            self.b = nn.Dense(2, 2)
            self.b.weight = _param(2, 2, name="w")

    net = Twice()
    with pytest.raises(ValueError, match=r"'w'.*'a.weight'.*'b.weight'"):
        net.trainable_params()
    net.b.update_parameters_name("b.")
    assert [p.name for p in net.trainable_params()] == ["w", "a.bias", "b.weight", "b.bias"]


def test_shared_parameter_is_listed_once():
    class Tied(nn.Cell):
        def __init__(self):
            super().__init__()
            self.a = nn.Dense(2, 2)
            self.b = nn.Dense(2, 2)
            self.b.weight = self.a.weight  # the same Parameter under two paths is not a duplicate

    assert [p.name for p in Tied().trainable_params()] == ["a.weight", "a.bias", "b.bias"]


def test_update_parameters_name_renames_all():
    net = Block()
    net.update_parameters_name("copy.")
    assert [p.name for p in net.get_parameters()][:2] == ["copy.fc.weight", "copy.fc.bias"]
    with pytest.raises(TypeError, match="prefix"):
        net.update_parameters_name(3)


def test_setattr_rules():
    net = Block()
    value = numpy.full((4, 3), 2.0, numpy.float32)
    weight = net.fc.weight
    net.fc.weight = Tensor(value)  # a Tensor sets the value of the existing Parameter
    assert net.fc.weight is weight and numpy.array_equal(weight.asnumpy(), value)
    with pytest.raises(TypeError, match="'fc'.*Cell"):
        net.fc = 3
    with pytest.raises(TypeError, match="'weight'.*Parameter"):
        net.fc.weight = "x"
    net.fc.bias = None
    assert [p.name for p in net.fc.get_parameters()] == ["fc.weight"]
    del net.bn
    assert list(net.name_cells()) == ["fc"]

    class NoInit(nn.Cell):
        def __init__(self):
            self.w = _param(1)

    with pytest.raises(AttributeError, match=r"super\(\).__init__"):
        NoInit()


def test_insert_param_and_child():
    cell = nn.Cell()
    cell.insert_param_to_cell("alpha", _param(1))
    cell.insert_child_to_cell("act", nn.ReLU())
    assert cell.alpha.name == "alpha" and cell.name_cells()["act"] is cell.act
    with pytest.raises(KeyError, match="'a.b'"):
        cell.insert_param_to_cell("a.b", _param(1))
    with pytest.raises(TypeError, match="Parameter"):
        cell.insert_param_to_cell("beta", Tensor([1.0]))
    cell.plain = 3
    with pytest.raises(KeyError, match="'plain'"):
        cell.insert_param_to_cell("plain", _param(1))
    with pytest.raises(TypeError, match="Cell"):
        cell.insert_child_to_cell("x", 3)


def test_set_train_is_recursive_and_starts_false():
    net = Net()
    assert not any(c.training for _, c in net.cells_and_names())
    assert net.set_train() is net
    assert all(c.training for _, c in net.cells_and_names())
    net.set_train(False)
    assert not any(c.training for _, c in net.cells_and_names())
    assert net.set_grad() is net


def test_forward_hooks_see_and_replace_and_remove():
    dense = nn.Dense(3, 2)
    seen = []
    handle = dense.register_forward_hook(
        lambda cell, inputs, output: seen.append((cell, inputs, output))
    )
    x = Tensor(numpy.ones((1, 3), numpy.float32))
    out = dense(x)
    assert seen[0][0] is dense and seen[0][1][0] is x and seen[0][2] is out
    handle.remove()
    dense(x)
    assert len(seen) == 1
    doubled = dense.register_forward_hook(lambda cell, inputs, output: output * 2)
    numpy.testing.assert_allclose(dense(x).asnumpy(), 2 * out.asnumpy(), rtol=1e-6)
    doubled.remove()
    pre = dense.register_forward_pre_hook(lambda cell, inputs: (inputs[0] * 0,))
    numpy.testing.assert_allclose(dense(x).asnumpy(), dense.bias.asnumpy()[None], rtol=1e-6)
    pre.remove()
    with pytest.raises(TypeError, match="callable"):
        dense.register_forward_hook(3)


def test_hook_and_output_gradient_hook_record_layer_statistics():
    # the pattern THOR uses: inputs from a forward hook, output gradients from a tensor hook
    dense = nn.Dense(3, 2)
    record = {}

    def hook(cell, inputs, output):
        record["a"] = inputs[0].asnumpy()
        output.register_hook(lambda g: record.__setitem__("g", g.asnumpy()))

    dense.register_forward_hook(hook)
    x = Tensor(numpy.arange(6, dtype=numpy.float32).reshape(2, 3))
    dense(x).sum().backward()
    assert numpy.array_equal(record["a"], x.asnumpy()) and numpy.array_equal(
        record["g"], numpy.ones((2, 2))
    )


def test_to_float_casts_floating_inputs_recursively():
    net = nn.SequentialCell(nn.ReLU(), nn.Tanh())
    net.to_float(minigrad.float16)
    assert all(c._cast_dtype == minigrad.float16 for _, c in net.cells_and_names())
    out = net(Tensor(numpy.ones((2, 2), numpy.float32)))
    assert out.dtype == minigrad.float16
    ids = Tensor(numpy.array([1, 2]))
    emb = nn.Embedding(4, 2).to_float(minigrad.float16)
    assert emb(ids).shape == (2, 2)  # integer inputs are not cast
    with pytest.raises(TypeError, match="int32"):
        net.to_float(minigrad.int32)


def test_cast_parameters_in_place_keeps_moving_statistics_fp32():
    net = Block()
    weight = net.fc.weight
    net.cast_parameters(minigrad.float16).to_float(minigrad.float16)
    assert net.fc.weight is weight and weight.dtype == minigrad.float16
    assert net.bn.gamma.dtype == minigrad.float16
    assert net.bn.moving_mean.dtype == net.bn.moving_variance.dtype == minigrad.float32
    net.set_train()
    out = net(Tensor(numpy.random.RandomState(0).randn(5, 3).astype(numpy.float32)))
    assert out.dtype == minigrad.float16


def test_repr_shows_the_tree():
    net = nn.SequentialCell(OrderedDict(fc=nn.Dense(784, 512), act=nn.ReLU()))
    assert repr(net) == (
        "SequentialCell<\n"
        "  (fc): Dense<input_channels=784, output_channels=512, has_bias=True>\n"
        "  (act): ReLU<>\n"
        "  >"
    )
    assert repr(nn.Conv2d(1, 6, 5, pad_mode="valid")).startswith(
        "Conv2d<input_channels=1, output_channels=6, kernel_size=(5, 5), stride=(1, 1), "
        "pad_mode=valid"
    )


def test_parameter_tuple_registration_and_clone():
    params = nn.ParameterTuple(Block().trainable_params())
    moments = params.clone(prefix="moments", init="zeros")
    assert [p.name for p in moments][:2] == ["moments.fc.weight", "moments.fc.bias"]
    assert all(not m.asnumpy().any() for m in moments)
    same = params.clone(prefix="copy")
    assert (
        numpy.array_equal(same[0].asnumpy(), params[0].asnumpy())
        and same[0].data is not params[0].data
    )

    holder = nn.Cell()
    holder.moments = moments
    assert [path for path, _ in holder.parameters_and_names()][:2] == ["moments.0", "moments.1"]
    assert [p.name for p in holder.get_parameters()] == [p.name for p in moments]
    with pytest.raises(TypeError, match="element 1"):
        nn.ParameterTuple([params[0], Tensor([1.0])])


def test_sequential_cell_indexing_slicing_append_delete():
    seq = nn.SequentialCell([nn.Dense(2, 3), nn.ReLU(), nn.Dense(3, 1)])
    assert len(seq) == 3 and isinstance(seq[1], nn.ReLU) and isinstance(seq[-1], nn.Dense)
    head = seq[:2]
    assert isinstance(head, nn.SequentialCell) and len(head) == 2
    assert [p.name for p in head.get_parameters()] == ["0.weight", "0.bias"]  # names unchanged
    seq.append(nn.Sigmoid())
    assert list(seq.name_cells()) == ["0", "1", "2", "3"]
    del seq[1]
    assert list(seq.name_cells()) == ["0", "1", "2"] and isinstance(seq[1], nn.Dense)
    assert seq(Tensor(numpy.ones((4, 2), numpy.float32))).shape == (4, 1)
    seq[2] = nn.Tanh()
    assert isinstance(seq[2], nn.Tanh)
    with pytest.raises(IndexError, match="index 7"):
        seq[7]
    with pytest.raises(TypeError, match="only Cells"):
        nn.SequentialCell([nn.ReLU(), 3])
    assert len(nn.SequentialCell(nn.ReLU(), nn.Tanh())) == 2


def test_cell_list():
    layers = nn.CellList([nn.Dense(2, 2), nn.Dense(2, 2)])
    layers.extend([nn.ReLU()])
    layers.insert(0, nn.Dense(2, 2))
    assert len(layers) == 4 and isinstance(layers[3], nn.ReLU)
    first = layers[1].weight
    assert [p.name for p in layers.trainable_params()] == [
        "0.weight",
        "0.bias",
        "1.weight",
        "1.bias",
        "2.weight",
        "2.bias",
    ]
    del layers[0]
    assert layers[0].weight is first and first.name == "0.weight"

    class Stack(nn.Cell):
        def __init__(self):
            super().__init__()
            self.layers = nn.CellList([nn.Dense(2, 2) for _ in range(2)])

        def construct(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    net = Stack()
    net.layers.insert(1, nn.Dense(2, 2))  # after attachment: the container's prefix is kept
    assert [p.name for p in net.trainable_params()] == [
        "layers.0.weight",
        "layers.0.bias",
        "layers.1.weight",
        "layers.1.bias",
        "layers.2.weight",
        "layers.2.bias",
    ]
    assert net(Tensor(numpy.ones((1, 2), numpy.float32))).shape == (1, 2)


def test_doc_example_network_part_runs():
    """The network of mindspore.nn.TrainOneStepWithLossScaleCell's example, with minigrad
    (``helpers.doubles.MatMulNet``)."""
    from helpers.doubles import MatMulNet as DocExampleNet

    size, in_features, out_features = 16, 16, 10
    net = DocExampleNet(in_features, out_features)
    loss = nn.MSELoss()
    net_with_loss = nn.WithLossCell(net, loss)
    inputs = Tensor(numpy.ones([size, in_features]).astype(numpy.float32))
    label = Tensor(numpy.zeros([size, out_features]).astype(numpy.float32))
    value = net_with_loss(inputs, label)
    assert value.dtype == minigrad.float32 and value.shape == ()
    assert float(value) == pytest.approx(256.0)
    assert [p.name for p in net.trainable_params()] == ["weight"]


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
    not one of its parameters is a KeyError ('Duplicated parameter name'), methods included: a
    Parameter named 'construct' would shadow the method and calling the cell would fail with
    'Parameter object is not callable'."""
    dense = nn.Dense(2, 2)
    with pytest.raises(KeyError, match="'construct'"):
        dense.insert_param_to_cell("construct", Parameter(Tensor(numpy.ones(1, numpy.float32))))
    assert dense(_x(1, 2)).shape == (1, 2)
    dense.insert_param_to_cell("weight", Parameter(Tensor(numpy.zeros((2, 2), numpy.float32))))
    assert not dense.weight.asnumpy().any()


def _x(*shape, dtype=numpy.float32):
    return Tensor(numpy.random.default_rng(0).standard_normal(shape).astype(dtype))


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
    """Parameters have unique dotted names that follow attribute paths, also in a CellList or
    SequentialCell assigned to a cell while empty and filled by append afterwards: its
    parameters are 'layers.0.weight', not '0.weight' (which two such containers would share)."""
    net = _Stack()
    assert [p.name for p in net.get_parameters()] == [
        "layers.0.weight",
        "layers.0.bias",
        "layers.1.weight",
        "layers.1.bias",
        "head.0.weight",
        "head.0.bias",
    ]

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
    assert [p.name for p in copy.get_parameters()][-2:] == [
        "copy.extra.0.weight",
        "copy.extra.0.bias",
    ]


def _scalar_param(value=1.0):
    return Parameter(Tensor(numpy.array(value, numpy.float32)))


class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(2, 2)
        self.w = _scalar_param()

    def construct(self, x):
        return self.fc(x) * self.w


def test_parameter_added_to_an_attached_sub_cell_is_named_by_its_path():
    """nn/cell.py module docstring: "names follow attribute paths" and ``insert_param_to_cell``
    names an unnamed parameter after where it goes: a parameter (or a sub-cell) added to
    ``net.fc`` after ``fc`` is attached gets the "fc." prefix, so ``net.fc.w`` is "fc.w", not
    the "w" of ``net.w`` (two parameters of one name make ``parameters_and_names()`` raise)."""
    net = _Net()
    net.fc.insert_param_to_cell("w", _scalar_param(2.0))
    net.fc.deep = nn.Dense(1, 1)
    pairs = list(net.parameters_and_names())  # one name per parameter
    assert [(path, p.name) for path, p in pairs] == [(path, path) for path, _ in pairs]
    assert net.fc.w.name == "fc.w"
    assert [p.name for p in net.fc.deep.get_parameters()] == ["fc.deep.weight", "fc.deep.bias"]
    # built bottom-up, or attached later, the names are the same paths
    outer = nn.Cell()
    outer.net = net
    assert [p.name for p in outer.get_parameters()] == [f"net.{path}" for path, _ in pairs]
    # a wrapper (auto_prefix=False) still adds nothing; a user-given name is kept
    wrapped = nn.WithLossCell(_Net(), nn.MSELoss())
    wrapped.backbone_network.fc.b2 = Parameter(Tensor(numpy.ones(1, numpy.float32)), name="mine")
    assert [p.name for p in wrapped.get_parameters()] == ["w", "fc.weight", "fc.bias", "mine"]


def test_container_keeps_its_cells_when_a_non_cell_is_refused():
    """nn/layers/container.py: SequentialCell/CellList raise TypeError for an element that is not
    a Cell. The refusal came after every child had been removed, so ``seq[0] = 3`` (or
    ``append(3)``, ``insert(0, 3)``) raised but left the container empty: the network silently
    lost its layers and parameters."""
    seq = nn.SequentialCell(nn.Dense(2, 3), nn.ReLU())
    before = [(path, id(p)) for path, p in seq.parameters_and_names()]
    x = Tensor(numpy.ones((1, 2), numpy.float32))
    expected = seq(x).asnumpy()
    for change in (lambda: seq.__setitem__(0, 3), lambda: seq.append(3)):
        with pytest.raises(TypeError, match=r"(only Cells|cell must be a Cell), got (int|3)"):
            change()
        assert len(seq) == 2
        assert [(path, id(p)) for path, p in seq.parameters_and_names()] == before
        numpy.testing.assert_array_equal(seq(x).asnumpy(), expected)
    cells = nn.CellList([nn.Dense(1, 1)])
    with pytest.raises(TypeError, match=r"CellList.insert: cell must be a Cell, got 3 \(int\)"):
        cells.insert(0, 3)
    assert len(cells) == 1 and [p.name for p in cells.get_parameters()] == ["0.weight", "0.bias"]


def test_deepcopy_network_and_optimizer_independent():
    net = nn.SequentialCell([nn.Dense(3, 4), nn.ReLU(), nn.Dense(4, 2)])
    net2 = copy.deepcopy(net)
    for (n1, p1), (n2, p2) in zip(net.parameters_and_names(), net2.parameters_and_names()):
        assert n1 == n2 and p1.name == p2.name and p1 is not p2
        assert not np.shares_memory(p1.data, p2.data)
        np.testing.assert_array_equal(p1.data, p2.data)
    p = Parameter(np.ones(4, np.float16), name="w")
    opt = nn.Adam([p], 0.1)
    opt((Tensor(np.ones(4, np.float16)),))
    opt2 = copy.deepcopy(opt)
    assert opt2.slots.states[0]["moment1"] is not opt.slots.states[0]["moment1"]
    opt2((Tensor(np.ones(4, np.float16)),))
    assert opt.global_step == 1 and float(p.data[0]) == pytest.approx(0.9, abs=1e-3)
