"""Review of session 2's fused optimizer step and loss-scale hand-over: cases where the fused
(native) path was taken although it must not be."""
import numpy
import pytest

import minigrad
from minigrad import nn
from minigrad._fastcast import convert
from minigrad import _native

needs_host = pytest.mark.skipif(_native.host_library() is None, reason="no host library")
F16, F32 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32)


@needs_host
@pytest.mark.parametrize("dtype", [F32, F16])
def test_a_read_only_parameter_is_never_written(dtype):
    """The NumPy path refuses to write a read-only parameter; the fused step must not write it either."""
    p = minigrad.Parameter(numpy.ones(5000, dtype), name="w")  # >= MIN_SIZE: convert's native path
    p.data.flags.writeable = False
    opt = nn.SGD([p], 0.5, momentum=0.9)
    with pytest.raises(ValueError, match="read-only"):
        opt.apply_gradients([numpy.ones(5000, F32)])
    numpy.testing.assert_array_equal(p.data, numpy.ones(5000, dtype))


@needs_host
def test_convert_into_a_read_only_out_raises_like_numpy():
    out = numpy.zeros(5000, F16)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        convert(numpy.ones(5000, F32), F16, out=out)
    assert not out.any()


class _HalvedUnscale(nn.SGD):
    def _unscale(self, grad, dtype):
        return super()._unscale(grad, dtype) * numpy.float32(0.5)


class _NoDecay(nn.Momentum):
    def _add_weight_decay(self, i, grad, weight):
        return grad


class _CountingApply(nn.Adam):
    def _apply_one(self, i, grad, lr):
        self.applied = getattr(self, "applied", 0) + 1
        super()._apply_one(i, grad, lr)


class _OnesMoments(nn.Momentum):
    def init_state(self, weight):
        return {"moments": numpy.ones_like(weight)}


@needs_host
@pytest.mark.parametrize("make,expected", [
    (lambda ps: _HalvedUnscale(ps, 1.0), 0.5),                            # 1 - 1.0 * 0.5
    (lambda ps: _NoDecay(ps, 1.0, 0.0, weight_decay=0.5), 0.0),           # 1 - 1.0 * 1 (no decay)
])
def test_a_subclass_that_overrides_a_gradient_hook_is_not_fused(make, expected):
    p = minigrad.Parameter(numpy.ones(4, F32), name="w")
    opt = make([p])
    assert opt._fused_rule() is None
    opt.apply_gradients([numpy.ones(4, F32)])
    numpy.testing.assert_array_equal(p.data, numpy.full(4, expected, F32))


@needs_host
def test_a_subclass_init_state_is_honoured():
    p = minigrad.Parameter(numpy.ones(4, F32), name="w")
    _OnesMoments([p], 1.0, 0.5).apply_gradients([numpy.ones(4, F32)])
    numpy.testing.assert_array_equal(p.data, numpy.full(4, -0.5, F32))  # v = 0.5 * 1 + 1; 1 - 1.5


@needs_host
def test_a_subclass_that_overrides_apply_one_is_not_fused():
    p = minigrad.Parameter(numpy.ones(4, F32), name="w")
    opt = _CountingApply([p], 0.1)
    assert opt._fused_rule() is None
    opt.apply_gradients([numpy.ones(4, F32)])
    assert opt.applied == 1


def _loss_scaled_step(optimizer_class):
    minigrad.set_seed(0)
    net = nn.Dense(3, 2)
    opt = optimizer_class(net.trainable_params(), 0.1, 0.9)
    cell = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, nn.MSELoss()), opt,
                                            minigrad.Tensor(numpy.float32(1024.0)))
    cell(minigrad.Tensor(numpy.ones((2, 3), F32)), minigrad.Tensor(numpy.zeros((2, 2), F32)))
    return opt, net


@needs_host
def test_loss_scale_cell_with_an_optimizer_whose_apply_gradients_takes_no_scale():
    class AllReduced(nn.Momentum):  # e.g. a data-parallel all-reduce right before the update
        def apply_gradients(self, grads):
            self.reduced = True
            return super().apply_gradients(grads)

    opt, _ = _loss_scaled_step(AllReduced)
    assert opt.reduced and opt.global_step == 1


@needs_host
def test_loss_scale_cell_calls_an_optimizer_that_overrides_call():
    class Clipping(nn.Momentum):
        def __call__(self, grads):
            self.clipped = [numpy.abs(g.data).max() for g in grads]
            return super().__call__(tuple(numpy.clip(g.data, -1e-3, 1e-3) for g in grads))

    opt, net = _loss_scaled_step(Clipping)
    assert opt.global_step == 1 and max(opt.clipped) < 1e3  # it saw unscaled gradients


def _compare_with_numpy_path(make, first_dtype, then_dtype):
    results = []
    for fused in (True, False):
        p = minigrad.Parameter(numpy.linspace(-1, 1, 2000).astype(first_dtype), name="w")
        opt = make([p])
        if not fused:
            opt._fused_rule = lambda: None
        opt.apply_gradients([numpy.full(2000, 0.5, first_dtype)])
        p.data = p.data.astype(then_dtype)  # a dtype change between steps, the state is kept
        opt.apply_gradients([numpy.full(2000, 0.25, then_dtype)])
        results.append(p.data)
    numpy.testing.assert_array_equal(results[0], results[1])


@needs_host
@pytest.mark.parametrize("make", [lambda ps: nn.Momentum(ps, 0.1, 0.9), lambda ps: nn.Adam(ps, 0.01),
                                  lambda ps: nn.SGD(ps, 0.1, momentum=0.9)])
def test_a_float64_state_kept_after_a_dtype_change_is_not_read_as_float32(make):
    _compare_with_numpy_path(make, numpy.float64, numpy.float32)


class _HalfMoments(nn.Momentum):  # memory-saving fp16 state: the kernel must not write fp32 into it
    def init_state(self, weight):
        return {"moments": numpy.zeros(weight.shape, F16)}


@needs_host
def test_a_state_that_is_not_float32_leaves_the_step_to_numpy():
    _compare_with_numpy_path(lambda ps: _HalfMoments(ps, 0.1, 0.9), F32, F32)
