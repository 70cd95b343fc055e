"""Session 3 review (l): docstring claims of nn/cell.py, nn/wrap.py, nn/layers/container.py,
ops/primitives.py, ops/arithmetic.py, ops/math.py, autograd/engine.py, checked by running them."""
import numpy
import pytest

from minigrad import Parameter, Tensor, nn


def _param(value=1.0):
    return Parameter(Tensor(numpy.array(value, numpy.float32)))


class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(2, 2)
        self.w = _param()

    def construct(self, x):
        return self.fc(x) * self.w


def test_parameter_added_to_an_attached_sub_cell_is_named_by_its_path():
    """nn/cell.py module docstring: "names follow attribute paths" and ``insert_param_to_cell``
    names an unnamed parameter after where it goes. A parameter (or a sub-cell) added to
    ``net.fc`` after ``fc`` was attached got no "fc." prefix: ``net.fc.w`` was named "w", the
    same name as ``net.w``, and ``net.parameters_and_names()`` then raised ValueError for the
    whole network."""
    net = _Net()
    net.fc.insert_param_to_cell("w", _param(2.0))
    net.fc.deep = nn.Dense(1, 1)
    pairs = list(net.parameters_and_names())   # raised ValueError: two parameters named 'w'
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
        with pytest.raises(TypeError, match="only Cells, got int"):
            change()
        assert len(seq) == 2
        assert [(path, id(p)) for path, p in seq.parameters_and_names()] == before
        numpy.testing.assert_array_equal(seq(x).asnumpy(), expected)
    cells = nn.CellList([nn.Dense(1, 1)])
    with pytest.raises(TypeError, match="only Cells, got int"):
        cells.insert(0, 3)
    assert len(cells) == 1 and [p.name for p in cells.get_parameters()] == ["0.weight", "0.bias"]
