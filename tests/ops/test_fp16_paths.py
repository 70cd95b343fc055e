"""The fast fp16 paths give exactly the bits of the plain NumPy computation they replace.

fp16 arithmetic through fp32 (``ops.arithmetic._arith``), fp32-accumulated sums and means of
widened fp16, transcendental ops through fp32, the matmul's kept fp32 copies, and the optimizer's
fp32 master kept across steps (re-read only after a write it can see).
"""
import numpy
import pytest

import minigrad
from minigrad import Parameter, Tensor, _native, ops
from minigrad._fp16_host import MIN_SIZE
from minigrad.ops.arithmetic import _arith
from minigrad.optim import SGD

F16, F32 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32)


def bits(x):
    x = numpy.asarray(x)
    return x.view({2: numpy.uint16, 4: numpy.uint32}[x.itemsize])


def assert_same_bits(got, want):
    got, want = numpy.asarray(got), numpy.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    numpy.testing.assert_array_equal(bits(got), bits(want))


def awkward_halves(n, seed):
    """fp16 values of every kind: random bit patterns (NaNs, infs, subnormals, ±0 included)."""
    rng = numpy.random.default_rng(seed)
    return rng.integers(0, 1 << 16, n, dtype=numpy.uint32).astype(numpy.uint16).view(numpy.float16)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv"])
def test_fp16_arithmetic_through_fp32_is_numpys_fp16_result(op):
    import operator
    fn = getattr(operator, op)
    a, b = awkward_halves(1 << 18, 1), awkward_halves(1 << 18, 2)
    # products and sums that round: operands of nearby magnitudes, and halfway cases
    c = numpy.random.default_rng(3).uniform(-4, 4, 1 << 18).astype(F16)
    with numpy.errstate(all="ignore"):
        got, want = _arith(fn, a, b), fn(a, b)
        # NaN op NaN: IEEE lets either payload through, and NumPy's own fp16 and fp32 loops
        # pick different ones; everywhere else the bits agree
        both = numpy.isnan(a) & numpy.isnan(b)
        assert numpy.isnan(got[both]).all()
        assert_same_bits(got[~both], want[~both])
        assert_same_bits(_arith(fn, c, c[::-1].copy()), fn(c, c[::-1]))
        row = c[:512].copy()
        grid = c[: 512 * 64].reshape(64, 512)
        assert_same_bits(_arith(fn, grid, row), fn(grid, row))  # broadcasting, as a bias add


def test_fp16_ops_forward_and_backward_match_the_plain_fp16_computation():
    rng = numpy.random.default_rng(4)
    a = rng.uniform(-2, 2, (64, 128)).astype(F16)
    b = rng.uniform(0.5, 2, (128,)).astype(F16)
    g = rng.uniform(-1, 1, (64, 128)).astype(F16)
    for name, fn in [("add", ops.add), ("sub", ops.sub), ("mul", ops.mul), ("div", ops.div)]:
        ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
        out = fn(ta, tb)
        out.backward(Tensor(g))
        b2 = numpy.broadcast_to(b, a.shape)
        # b's gradient: the fp32 products summed, then rounded once (as the fp16 gradient tests
        # of tests/ops/test_elementwise.py check)
        want = {
            "add": (a + b, g, g),
            "sub": (a - b, g, -g),
            "mul": (a * b, g * b2, g.astype(F32) * a),
            "div": (a / b, g / b2, -(g.astype(F32) / b2) * a / b2),
        }[name]
        assert_same_bits(out.asnumpy(), want[0])
        assert_same_bits(ta.grad.asnumpy(), want[1])
        assert_same_bits(tb.grad.asnumpy(), want[2].sum(axis=0, dtype=F32).astype(F16))


def test_fp16_sum_and_mean_are_fp32_sums_of_the_widened_values():
    x = numpy.random.default_rng(5).standard_normal((128, 512)).astype(F16)
    for axis in (0, (0,), None):
        assert_same_bits(
            ops.sum(Tensor(x), axis=axis).asnumpy(), x.sum(axis=axis, dtype=F32).astype(F16)
        )
        assert_same_bits(
            ops.mean(Tensor(x), axis=axis).asnumpy(), x.mean(axis=axis, dtype=F32).astype(F16)
        )
    t = Tensor(x, requires_grad=True)
    ops.mean(t, axis=0).backward(Tensor(numpy.full(512, 3.0, F16)))
    assert_same_bits(
        t.grad.asnumpy(), numpy.full(x.shape, numpy.float32(3.0) / 128, F32).astype(F16)
    )


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "sigmoid"])
def test_fp16_transcendentals_are_rounded_fp32_results(name):
    x = numpy.random.default_rng(6).uniform(0.01, 4, MIN_SIZE * 2).astype(F16)
    fn = (lambda v: numpy.tanh(v * 0.5) * 0.5 + 0.5) if name == "sigmoid" else getattr(numpy, name)
    assert_same_bits(getattr(ops, name)(Tensor(x)).asnumpy(), fn(x.astype(F32)).astype(F16))


@pytest.mark.parametrize("transpose_b", [False, True])
def test_fp16_matmul_backward_uses_the_forward_widened_operands(transpose_b):
    rng = numpy.random.default_rng(7)
    a = rng.uniform(-1, 1, (96, 80)).astype(F16)
    w = rng.uniform(-1, 1, (70, 80) if transpose_b else (80, 70)).astype(F16)
    g = rng.uniform(-1, 1, (96, 70)).astype(F16)
    ta, tw = Tensor(a, requires_grad=True), Tensor(w, requires_grad=True)
    out = ops.matmul(ta, tw, transpose_b=transpose_b)
    out.backward(Tensor(g))
    a32, w32, g32 = a.astype(F32), w.astype(F32), g.astype(F32)
    wt = w32.T if transpose_b else w32
    assert_same_bits(out.asnumpy(), (a32 @ wt).astype(F16))
    assert_same_bits(ta.grad.asnumpy(), (g32 @ wt.T).astype(F16))
    # d(bᵀ) is computed directly as gᵀ @ a; BLAS may round (aᵀ @ g)ᵀ differently in the last bit
    gw = (g32.T @ a32) if transpose_b else (a32.T @ g32)
    assert_same_bits(tw.grad.asnumpy(), gw.astype(F16))


# ---- the optimizer's fp32 master ---------------------------------------------------------------
def step(opt, value=1.0):
    opt(tuple(numpy.full(p.shape, value, F16) for p in opt.parameters))


@pytest.mark.parametrize(
    "write",
    [
        lambda w: w.set_data(numpy.array([3.0, 4.0], F16)),
        lambda w: w.__setitem__(slice(None), numpy.array([3.0, 4.0], F16)),
        lambda w: setattr(w, "data", numpy.array([3.0, 4.0], F16)),
    ],
    ids=["set_data", "setitem", "new_array"],
)
def test_master_is_reread_after_a_visible_write(write):
    w = Parameter(numpy.ones(2, F16), name="w")
    opt = SGD([w], learning_rate=0.5)
    step(opt)
    write(w)
    step(opt)
    numpy.testing.assert_array_equal(w.data, [2.5, 3.5])
    numpy.testing.assert_array_equal(opt.state_dict()["master.w"], [2.5, 3.5])


def test_master_survives_a_write_of_the_value_it_rounds_to():
    # a checkpoint of the fp16 parameters loaded after the optimizer state keeps the fp32 master
    w = Parameter(numpy.ones(3, F16), name="w")
    opt = SGD([w], learning_rate=1e-4)
    for _ in range(10):
        step(opt)
    master = opt.state_dict()["master.w"]
    assert (master != master.astype(F16).astype(F32)).all()  # finer than fp16
    w.set_data(w.data.copy())
    step(opt)
    numpy.testing.assert_allclose(opt.state_dict()["master.w"], master - 1e-4, rtol=1e-6)


def test_parameter_version_counts_in_place_writes():
    w = Parameter(numpy.zeros(3, F32))
    assert w.version == 0
    w.set_data(numpy.ones(3, F32))
    w[0] = 5.0
    assert w.version == 2 and w.data.tolist() == [5.0, 1.0, 1.0]


def test_master_write_back_rounds_like_numpy():
    rng = numpy.random.default_rng(8)
    w = Parameter(rng.standard_normal((64, 128)).astype(F16), name="w")
    opt = SGD([w], learning_rate=0.37)
    grad = rng.standard_normal((64, 128)).astype(F16)
    opt((grad,))
    master = opt.state_dict()["master.w"]
    assert_same_bits(w.data, master.astype(F16))


@pytest.mark.requires_native
def test_o2_step_is_the_same_with_and_without_the_native_conversion(monkeypatch):
    """Five O2 steps give the same losses and parameter bits whether ``_fp16_host.convert`` runs its
    native conversion (counted, so the first run is known to take it) or NumPy's ``astype``."""
    from minigrad import amp, nn

    def train():
        minigrad.set_seed(0)
        net = nn.SequentialCell([nn.Dense(64, 96), nn.ReLU(), nn.Dense(96, 10)])
        cell = amp.build_train_network(
            net,
            nn.SGD(net.trainable_params(), 0.05),
            nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
            level="O2",
        )
        rng = numpy.random.default_rng(0)
        x = Tensor(rng.standard_normal((128, 64)).astype(F32))
        y = Tensor(rng.integers(0, 10, 128).astype(numpy.int32))
        losses = [float(cell(x, y)[0].asnumpy()) for _ in range(5)]
        return losses, [p.data.copy() for p in net.trainable_params()]

    native = {pair: fn for pair, fn in (_native.loaded().conversions or {}).items()
              if F16 in pair}
    if not native:
        pytest.skip("the host library has no vector conversion (a CPU without F16C)")
    calls = []

    def counted(pair, fn):
        def call(*args):
            calls.append(pair)
            return fn(*args)

        return call

    monkeypatch.setattr(
        _native.loaded(), "conversions", {pair: counted(pair, fn) for pair, fn in native.items()}
    )
    fast = train()
    assert set(calls) == set(native), "the native conversion did not run both ways"
    monkeypatch.setattr(_native.loaded(), "conversions", None)
    plain = train()
    assert fast[0] == plain[0]
    for a, b in zip(fast[1], plain[1]):
        assert_same_bits(a, b)
