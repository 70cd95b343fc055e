"""Pooling's fast path and layouts (ops/pooling.py) against its general path.

Windows that cannot overlap (stride >= kernel) get their gradient written tap by tap in the
input's dtype instead of summed in fp32 and rounded: the same bits, checked here against the
general path forced on the same geometry. The input's layout (NCHW, channels-last, strided)
changes no bit either, and the output and gradient keep a channels-last input's layout.
"""
import contextlib

import numpy
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from helpers.fp16 import F16, F32, assert_bits
from helpers.layouts import is_channels_last, layouts
from minigrad import Tensor, ops
from minigrad.ops import pooling


@contextlib.contextmanager
def general_path():
    """Within the block every pooling takes the general path (shares summed in the
    accumulation dtype, no native pass), whatever its windows."""
    record = pooling._Pool2d.record

    def without_fast_path(self, *args):
        record(self, *args)
        self.disjoint = self.tiles = False
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pooling._Pool2d, "record", without_fast_path)
        patch.setattr(pooling._pool_host, "max_pool", lambda *args: None)
        patch.setattr(pooling._pool_host, "max_pool_grad", lambda *args: None)
        yield


def run(op, x, g, **kwargs):
    t = Tensor(x, requires_grad=True)
    out = op(t, **kwargs)
    with numpy.errstate(invalid="ignore"):  # inf - inf in an average: NumPy's warning
        out.backward(Tensor(g))
    return out.data, t.grad.data


OPS = {"max": ops.max_pool2d,
       "avg": lambda t, **kw: ops.avg_pool2d(t, count_include_pad=False, **kw)}

disjoint = st.fixed_dictionaries({
    "op": st.sampled_from(sorted(OPS)), "n": st.integers(1, 2), "c": st.integers(1, 5),
    "hw": st.tuples(st.integers(1, 9), st.integers(1, 9)),
    "kernel": st.tuples(st.integers(1, 3), st.integers(1, 3)),
    "gap": st.tuples(st.integers(0, 1), st.integers(0, 1)),
    "padding": st.tuples(*[st.integers(0, 2)] * 4), "ties": st.booleans(),
    "dtype": st.sampled_from([F16, F32]), "seed": st.integers(0, 2**31)})


def case(spec):
    (h, w), (kh, kw), (top, bottom, left, right) = spec["hw"], spec["kernel"], spec["padding"]
    assume(max(top, bottom) < kh and max(left, right) < kw)
    assume(h + top + bottom >= kh and w + left + right >= kw)
    stride = (kh + spec["gap"][0], kw + spec["gap"][1])
    rng = numpy.random.default_rng(spec["seed"])
    x = rng.standard_normal((spec["n"], spec["c"], h, w))
    if spec["ties"]:  # what ReLU feeds a pooling: many zeros, whole windows of them
        x = numpy.maximum(numpy.round(x), 0)
    x = x.astype(spec["dtype"])
    x.flat[::7] = numpy.inf
    ho = (h + top + bottom - kh) // stride[0] + 1
    wo = (w + left + right - kw) // stride[1] + 1
    g = rng.standard_normal((spec["n"], spec["c"], ho, wo)).astype(spec["dtype"])
    return x, g, dict(kernel_size=(kh, kw), stride=stride, padding=spec["padding"])


@given(spec=disjoint)
def test_disjoint_windows_fast_path_gives_the_general_paths_bits(spec):
    x, g, kwargs = case(spec)
    fast = {name: run(OPS[spec["op"]], view, g, **kwargs) for name, view in layouts(x).items()}
    with general_path():
        general = run(OPS[spec["op"]], x, g, **kwargs)
    for out, gx in fast.values():
        assert_bits(out, general[0])
        assert_bits(gx, general[1])


@pytest.mark.parametrize("dtype", [F16, F32])
def test_ties_give_the_whole_gradient_to_the_first_maximum(dtype):
    # zeros after a ReLU: every window of the first image is a four-way tie
    x = numpy.zeros((2, 3, 4, 6), dtype)
    x[1] = numpy.arange(72).reshape(3, 4, 6) % 5  # ties between some taps
    g = (numpy.arange(36).reshape(2, 3, 2, 3) + 1).astype(dtype)
    for view in layouts(x).values():
        _, gx = run(ops.max_pool2d, view, g, kernel_size=2, stride=2)
        windows = x.reshape(2, 3, 2, 2, 3, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, 2, 3, 4)
        first = numpy.argmax(windows == windows.max(axis=-1, keepdims=True), axis=-1)
        want = numpy.zeros((2, 3, 2, 3, 4), dtype)
        numpy.put_along_axis(want, first[..., None], g[..., None], axis=-1)
        want = want.reshape(2, 3, 2, 3, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(x.shape)
        assert_bits(gx, want)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("kernel,stride,padding", [(2, 2, 0), (3, 1, 1), (2, 2, (0, 1, 0, 1))])
def test_channels_last_input_gives_channels_last_output_and_gradient(op, kernel, stride,
                                                                     padding):
    rng = numpy.random.default_rng(3)
    x = layouts(rng.standard_normal((2, 8, 6, 6)).astype(F32))["channels_last"]
    out = OPS[op](Tensor(x), kernel_size=kernel, stride=stride, padding=padding)
    g = layouts(numpy.ones(out.shape, F32))["channels_last"]
    _, gx = run(OPS[op], x, g, kernel_size=kernel, stride=stride, padding=padding)
    assert is_channels_last(out.data)
    # the gradient is the inside of a channels-last padded array: channels stay innermost
    assert gx.strides[1] == gx.itemsize and (padding or is_channels_last(gx))


def test_forced_general_path_runs_and_gives_the_definition():
    # the general path's own code (accumulation buffer) runs on a disjoint geometry
    x = numpy.arange(16, dtype=F32).reshape(1, 1, 4, 4)
    with general_path():
        t = Tensor(x, requires_grad=True)
        out = ops.max_pool2d(t, kernel_size=2)
        assert not out._ctx.disjoint
        out.backward(Tensor(numpy.ones((1, 1, 2, 2), F32)))
    out, gx = out.data, t.grad.data
    assert_bits(out, numpy.array([[[[5, 7], [13, 15]]]], F32))
    assert_bits(gx, (x % 2 == 1) * (x // 4 % 2 == 1) * numpy.float32(1))


def first_maximum_reference(x, g, kernel, stride, padding):
    """max_pool2d's gradient by its definition, window by window in float64: each window's g
    goes whole to its first maximum (row-major) and the shares are summed."""
    (kh, kw), (sh, sw), (top, bottom, left, right) = kernel, stride, padding
    xp = numpy.pad(x.astype(numpy.float64), ((0, 0), (0, 0), (top, bottom), (left, right)),
                   constant_values=-numpy.inf)
    dx = numpy.zeros(xp.shape)
    for i in range(g.shape[2]):
        for j in range(g.shape[3]):
            window = xp[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw].reshape(*x.shape[:2], -1)
            first = window.argmax(axis=-1)  # NumPy's argmax: the first maximum
            for n, c in numpy.ndindex(*x.shape[:2]):
                r, s = divmod(first[n, c], kw)
                dx[n, c, i * sh + r, j * sw + s] += g[n, c, i, j]
    return dx[:, :, top:top + x.shape[2], left:left + x.shape[3]]


@given(spec=st.fixed_dictionaries({
    "kernel": st.tuples(st.integers(1, 3), st.integers(1, 3)),
    "stride": st.tuples(st.integers(1, 3), st.integers(1, 3)),
    "padding": st.tuples(*[st.integers(0, 2)] * 4),
    "hw": st.tuples(st.integers(1, 8), st.integers(1, 8)),
    "dtype": st.sampled_from([F16, F32]), "seed": st.integers(0, 2**31)}))
def test_max_pool_argmax_index_is_the_first_maximum_for_any_geometry(spec):
    # overlapping and disjoint windows, ties of zeros and of other values, inf
    (kh, kw), (top, bottom, left, right) = spec["kernel"], spec["padding"]
    h, w = spec["hw"]
    assume(max(top, bottom) < kh and max(left, right) < kw)
    assume(h + top + bottom >= kh and w + left + right >= kw)
    rng = numpy.random.default_rng(spec["seed"])
    x = numpy.maximum(numpy.round(rng.standard_normal((2, 3, h, w)) * 2), 0)
    x.flat[::5] = numpy.inf
    x = x.astype(spec["dtype"])
    out = ops.max_pool2d(Tensor(x), spec["kernel"], spec["stride"], spec["padding"])
    g = rng.integers(1, 9, out.shape).astype(spec["dtype"])  # exact sums in fp16 too
    for view in layouts(x).values():
        _, gx = run(ops.max_pool2d, view, g, kernel_size=spec["kernel"], stride=spec["stride"],
                    padding=spec["padding"])
        want = first_maximum_reference(x, g, spec["kernel"], spec["stride"], spec["padding"])
        assert_bits(gx, want.astype(spec["dtype"]))


@given(spec=disjoint)
def test_every_gradient_layout_gives_the_same_bits(spec):
    # g is read in the input's layout (copied there when it comes in another): no bit changes
    x, g, kwargs = case(spec)
    for view in layouts(x).values():
        results = [run(OPS[spec["op"]], view, g_view, **kwargs)[1]
                   for g_view in layouts(g).values()]
        for gx in results[1:]:
            assert_bits(gx, results[0])
