"""minigrad.amp.autocast: the op lists (fp16, fp32, follow the input), float64 left alone,
differentiable casts, nesting, re-entry and argument checks."""
import numpy
import numpy as np
import pytest

import minigrad
from minigrad import Parameter, Tensor, ops
from minigrad.amp import autocast
from minigrad.ops.linalg import dense, matmul

F16, F32, F64 = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)


def test_autocast_lists_and_gradients_in_the_inputs_dtypes():
    rng = numpy.random.default_rng(2)
    x = Tensor(rng.standard_normal((4, 3)).astype(F32), requires_grad=True)
    w = Parameter(rng.standard_normal((2, 3)).astype(F32), name="w")
    b = Parameter(numpy.zeros(2, F32), name="b")
    h = Tensor(rng.standard_normal((4, 2)).astype(F16), requires_grad=True)
    d = Tensor(rng.standard_normal((3, 2)), requires_grad=True)            # float64: not eligible
    with autocast():
        y = dense(x, w, b)                         # MindSpore white list / PyTorch linear: fp16
        m = matmul(x, Tensor(numpy.ones((3, 2), F32)))
        r = ops.relu(y)                            # unlisted: follows its input
        s = ops.softmax(h)                         # fp32 list
        e, lg = ops.exp(h), ops.log(ops.abs(h) + 1)
        total = ops.sum(r * s + h)                 # fp16 * fp32 promotes; sum in fp32
        q = matmul(x, d)                           # float64 stays float64
    assert (y.dtype, m.dtype, r.dtype) == (F16, F16, F16)
    assert (s.dtype, e.dtype, lg.dtype, total.dtype) == (F32, F32, F32, F32)
    assert q.dtype == F64
    (total + ops.sum(q)).backward()
    assert (x.grad.dtype, w.grad.dtype, b.grad.dtype, h.grad.dtype, d.grad.dtype) == (
        F32,
        F32,
        F32,
        F16,
        F64,
    )
    # the casts are differentiated: the same graph without autocast, with the casts written out
    x2, w2, b2 = (Tensor(t.asnumpy(), requires_grad=True) for t in (x, w, b))
    y2 = dense(ops.cast(x2, F16), ops.cast(w2, F16), ops.cast(b2, F16))
    ops.sum(ops.relu(y2)).backward()
    x.grad = w.grad = None
    with autocast():
        ops.sum(ops.relu(dense(x, w, b))).backward()
    numpy.testing.assert_array_equal(w.grad.asnumpy(), w2.grad.asnumpy())
    numpy.testing.assert_array_equal(x.grad.asnumpy(), x2.grad.asnumpy())


def test_autocast_nesting_reentry_and_arguments():
    cfg = minigrad._config.config
    outer = autocast()
    with outer:
        with autocast(enabled=False):
            assert cfg.autocast_dtype is None
            with autocast(dtype="float16"):
                assert cfg.autocast_dtype == F16
            assert cfg.autocast_dtype is None
        with outer:  # the same object entered twice
            assert cfg.autocast_dtype == F16
        assert cfg.autocast_dtype == F16
    assert cfg.autocast_dtype is None
    with pytest.raises(ValueError):
        with autocast():
            raise ValueError("inside")
    assert cfg.autocast_dtype is None  # restored on an exception
    for bad in (numpy.float32, numpy.float64, "int32"):
        with pytest.raises(TypeError, match="'dtype' must be float16"):
            autocast(dtype=bad)
    for bad in (1, None, "yes"):
        with pytest.raises(TypeError, match="'enabled' must be a bool"):
            autocast(enabled=bad)


def test_autocast_leaves_float64_ops_alone():
    """PyTorch amp "Op Eligibility": "Ops that run in float64 or non-floating-point dtypes are not
    eligible, and will run in these types whether or not autocast is enabled." minigrad cast a
    float64 matmul down to fp16."""
    a = Tensor(np.random.default_rng(0).standard_normal((3, 4)))
    b = Tensor(np.random.default_rng(1).standard_normal((4, 2)))
    with autocast():
        y = ops.matmul(a, b)
        z = ops.matmul(a.astype(np.float32), b.astype(np.float32))
    assert y.dtype == np.float64 and z.dtype == np.float16
    np.testing.assert_array_equal(y.asnumpy(), a.asnumpy() @ b.asnumpy())
