"""Review session 3o: Tensor, Parameter, Cell, Optimizer and GradScaler under Python's protocols
(copy/deepcopy, pickle, NumPy conversion, number protocols, containment, iteration, in-place ops)."""
import copy
import pickle

import numpy as np
import pytest

from minigrad import Parameter, Tensor, nn
from minigrad.amp import GradScaler


# ---- NumPy conversion ------------------------------------------------------------------------------
# ---- NumPy conversion ------------------------------------------------------------------------------
def test_numpy_array_of_tensor_is_a_copy():
    # numpy.array(x) copies (copy=True is its default), as for PyTorch tensors; numpy.asarray may share
    t = Tensor(np.arange(3, dtype=np.float32))
    a = np.array(t)
    a[0] = 99.0
    assert t.data[0] == 0.0


def test_numpy_array_copy_false_refuses_a_needed_copy():
    # NumPy 2 protocol: copy=False must raise ValueError when a copy (here: a cast) is needed
    t = Tensor(np.arange(3, dtype=np.float32))
    with pytest.raises(ValueError):
        np.array(t, dtype=np.float64, copy=False)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert np.shares_memory(np.asarray(t), t.data)


# ---- iteration and containment ---------------------------------------------------------------------
# ---- iteration and containment ---------------------------------------------------------------------
def test_iter_over_0d_tensor_raises():
    # PyTorch: TypeError "iteration over a 0-d tensor" (it silently yielded nothing)
    with pytest.raises(TypeError, match="0-d"):
        iter(Tensor(np.float32(2.0)))
    assert [r.shape for r in Tensor(np.zeros((2, 3), np.float32))] == [(3,), (3,)]


def test_in_is_elementwise_any():
    # NumPy / PyTorch: ``x in t`` is (t == x).any() (it raised "truth value ... ambiguous")
    t = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert 3.0 in t
    assert 30.0 not in t
    assert Tensor(np.float32(4.0)) in t


# ---- number protocols --------------------------------------------------------------------------------
# ---- number protocols --------------------------------------------------------------------------------
def test_int_float_of_one_element_tensor():
    # PyTorch: any one-element tensor converts; more elements is a clear error
    assert int(Tensor([3])) == 3
    assert float(Tensor([[2.5]])) == 2.5
    assert float(Tensor(np.float16(1.5))) == 1.5
    with pytest.raises(TypeError, match="one-element"):
        float(Tensor([1.0, 2.0]))


def test_index_protocol_for_integer_tensors():
    # PyTorch: an integer tensor of one element is an index (range, list indexing, slicing)
    assert [10, 20, 30][Tensor(1)] == 20
    assert list(range(Tensor(np.int32(3)))) == [0, 1, 2]
    assert operator_index(Tensor(np.int64(2))) == 2
    assert np.arange(5)[Tensor([2])].shape == (1,)  # still an index array to NumPy, as np.array([2])
    with pytest.raises(TypeError):
        [10, 20][Tensor(1.0)]


def operator_index(x):
    import operator
    return operator.index(x)


def test_format_of_0d_tensor():
    # PyTorch: format(t, spec) formats t.item() for a 0-d tensor
    assert format(Tensor(np.float32(2.5)), ".3f") == "2.500"
    assert f"{Tensor(np.float16(0.5)):.2f}" == "0.50"
    assert "Tensor" in format(Tensor(np.float32(2.5)))  # empty spec: str()
    with pytest.raises(TypeError):
        format(Tensor([1.0, 2.0]), ".3f")


# ---- copy / deepcopy / pickle ------------------------------------------------------------------------
# ---- copy / deepcopy / pickle ------------------------------------------------------------------------
def test_deepcopy_of_non_leaf_tensor_raises():
    # PyTorch: only graph leaves support deepcopy (the copy's backward filled copies of the leaves,
    # leaving x.grad None without a word)
    x = Tensor(np.ones(3, np.float32), requires_grad=True)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="leaves"):
        copy.deepcopy(y)
    x2 = copy.deepcopy(x)
    assert x2.requires_grad and x2.is_leaf and x2.data is not x.data


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


def test_grad_scaler_pickle_and_deepcopy_get_their_own_status():
    scaler = GradScaler(init_scale=8.0)
    net = nn.Dense(3, 2)
    opt = nn.SGD(net.trainable_params(), 0.1)
    scaler.scale(net(Tensor(np.ones((2, 3), np.float32))).sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert repr(scaler).startswith("GradScaler(scale=8.0")
    restored = pickle.loads(pickle.dumps(scaler))
    assert restored.state_dict() == scaler.state_dict()
    twin = copy.deepcopy(scaler)
    assert twin._status is not scaler._status
    for s in (restored, twin):  # a full step on the copy works and leaves the original alone
        opt.zero_grad()
        s.scale(net(Tensor(np.ones((2, 3), np.float32))).sum()).backward()
        assert s.step(opt)
        s.update()
    assert scaler._per_optimizer == {}
    # mid-iteration the per-optimizer records name optimizers by id: refuse, as PyTorch does
    scaler.scale(net(Tensor(np.ones((2, 3), np.float32))).sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="update"):
        pickle.dumps(scaler)


# ---- in-place operators -------------------------------------------------------------------------------
# ---- in-place operators -------------------------------------------------------------------------------
def test_inplace_operator_on_parameter_updates_it_and_bumps_version():
    # ``p -= lr * p.grad`` must not silently rebind p to a new plain Tensor (the Parameter, and
    # the network holding it, stayed unchanged); it writes in place as Cell attribute assignment does
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


def test_inplace_operator_on_fp16_parameter_is_seen_by_the_optimizer_master():
    p = Parameter(np.ones(2, np.float16), name="w")
    opt = nn.SGD([p], 0.5)
    opt((Tensor(np.ones(2, np.float16)),))   # master 0.5
    p += 2.0                                 # 2.5: the master must re-read it
    opt((Tensor(np.ones(2, np.float16)),))
    np.testing.assert_array_equal(p.data, np.array([2.0, 2.0], np.float16))


def test_deepcopy_of_overflow_status_checks_into_its_own_buffer():
    from minigrad.amp import step
    status = step.OverflowStatus()
    status.clear()
    status.unscale_and_check([np.ones(4, np.float32)], 2.0)
    twin = copy.deepcopy(status)
    twin.clear()
    twin.unscale_and_check([np.array([np.inf], np.float32)], 2.0)
    assert twin.overflow() and not status.overflow()
    flagged = copy.deepcopy(twin)  # a copy keeps the flag it had
    assert flagged.overflow() and flagged._host_address != twin._host_address


def test_loss_scale_managers_and_scalers_say_what_they_hold():
    from minigrad import amp
    assert repr(amp.FixedLossScaleManager(64.0, False)) == \
        "FixedLossScaleManager(loss_scale=64.0, drop_overflow_update=False)"
    assert repr(amp.DynamicLossScaleManager(2 ** 10, 2, 100)) == \
        "DynamicLossScaleManager(loss_scale=1024.0, scale_factor=2, scale_window=100)"
    assert repr(amp.StaticLossScaler(8.0)) == "StaticLossScaler(scale_value=8.0)"
    assert repr(amp.DynamicLossScaler(1024, 2, 1000)) == \
        "DynamicLossScaler(scale_value=1024.0, scale_factor=2, scale_window=1000)"
