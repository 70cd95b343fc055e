"""The float status (sticky overflow flag) against a NumPy reference, on every engine.

Engines: the CUDA kernels (GPU), the same kernels built for the host (CPU), and the NumPy
fallback (forced by hiding the host library). Inputs are adversarial: every kind of inf/NaN at
the first, middle and last element, the finite extremes (max, -0.0, subnormals), lengths
0/1/7/2^20+3, misaligned and strided views, many arrays and mixed dtypes in one call.
"""
import numpy
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import NO_GPU
from helpers.bits import assert_same_values, from_bits, ref_unscale
from minigrad import _native, backend
from minigrad.amp import float_status
from minigrad.amp import float_status as fs
from minigrad.amp import npu_ops
from minigrad.tensor import Tensor

ENGINES = [pytest.param("host", id="host-kernels"),
           pytest.param("numpy", id="numpy-fallback"),
           pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu, NO_GPU])]
KERNEL_DTYPES = [numpy.dtype(numpy.float16), numpy.dtype(numpy.float32)]
ALL_DTYPES = KERNEL_DTYPES + [numpy.dtype(numpy.float64)]

# Bit patterns: +inf, -inf, then NaNs with several payloads and both signs.
NONFINITE_BITS = {
    numpy.dtype(numpy.float16): [0x7C00, 0xFC00, 0x7C01, 0x7E00, 0x7FFF, 0xFC01, 0xFFFF],
    numpy.dtype(numpy.float32): [0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF,
                                 0xFF800001, 0xFFFFFFFF],
    numpy.dtype(numpy.float64): [0x7FF0000000000000, 0xFFF0000000000000, 0x7FF0000000000001,
                                 0x7FF8000000000000, 0x7FFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF],
}
# Finite extremes: +-max, -0.0, smallest and largest subnormal (both signs), smallest normal.
FINITE_EDGE_BITS = {
    numpy.dtype(numpy.float16): [0x7BFF, 0xFBFF, 0x8000, 0x0001, 0x03FF, 0x8001, 0x83FF, 0x0400],
    numpy.dtype(numpy.float32): [0x7F7FFFFF, 0xFF7FFFFF, 0x80000000, 0x00000001, 0x007FFFFF,
                                 0x80000001, 0x807FFFFF, 0x00800000],
    numpy.dtype(numpy.float64): [0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x8000000000000000,
                                 0x0000000000000001, 0x000FFFFFFFFFFFFF, 0x8000000000000001,
                                 0x0010000000000000],
}


class Engine:
    def __init__(self, name):
        self.name = name
        self.device = "GPU" if name == "cuda" else "CPU"

    def put(self, array):
        """A copy of ``array`` on this engine's device."""
        return backend.to_device(numpy.array(array), self.device)

    def status(self):
        return fs.alloc_status(self.device)


@pytest.fixture(params=ENGINES)
def engine(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setattr(_native, "host_library", lambda: None)
    elif request.param == "host" and _native.host_library() is None:
        pytest.skip(f"no host build of the kernels: {_native.host_library_error()}")
    return Engine(request.param)


def ref_overflow(*arrays):
    return any(not numpy.isfinite(a).all() for a in arrays)


def overflowed(engine, *arrays):
    status = engine.status()
    fs.check_overflow(status, *arrays)
    return fs.get_status(status)


def random_values(rng, n, dtype):
    return (rng.standard_normal(n) * 100).astype(dtype)


# ---- the status buffer and the MindSpore ops ---------------------------------------------------

def test_alloc_status_is_zeroed_float32_of_shape_8(engine):
    status = engine.status()
    assert isinstance(status, Tensor)
    assert status.shape == (8,) and status.dtype == numpy.float32
    assert status.device == engine.device
    assert not status.asnumpy().any()
    assert fs.alloc_status(engine.put(numpy.ones(3, numpy.float16))).device == engine.device
    assert fs.alloc_status(Tensor(engine.put(numpy.ones(3)))).device == engine.device


def test_mindspore_ops_alloc_clear_check_get(engine):
    status = npu_ops.NPUAllocFloatStatus()(engine.put(numpy.zeros(1)))
    cleared = npu_ops.NPUClearFloatStatus()(status)
    assert cleared is status
    grad = engine.put(numpy.array([1.0, numpy.inf], numpy.float16))
    fs.check_overflow(status, grad)
    got = npu_ops.NPUGetFloatStatus()(status)
    assert got is status and float(got.asnumpy().sum()) > 0
    npu_ops.NPUClearFloatStatus()(status)
    assert float(npu_ops.NPUGetFloatStatus()(status).asnumpy().sum()) == 0


def test_alloc_default_device_is_cpu():
    assert npu_ops.NPUAllocFloatStatus()().device == "CPU"


# ---- detection ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 7, 1000])
def test_every_nonfinite_kind_at_first_middle_last(engine, dtype, n):
    base = random_values(numpy.random.default_rng(n), n, dtype)
    assert not overflowed(engine, engine.put(base))
    for value in from_bits(NONFINITE_BITS[dtype], dtype):
        for position in sorted({0, n // 2, n - 1}):
            x = base.copy()
            x[position] = value
            assert overflowed(engine, engine.put(x)), (value, position)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_finite_extremes_are_finite_and_unscale_exactly(engine, dtype):
    edges = from_bits(FINITE_EDGE_BITS[dtype], dtype)
    for n in (1, 7, 64, 1001):
        x = numpy.resize(edges, n)
        assert not overflowed(engine, engine.put(x))
        for inv_scale in (1.0, 0.5):
            device_x = engine.put(x)
            status = engine.status()
            fs.check_and_unscale(status, [device_x], inv_scale)
            assert not fs.get_status(status)
            assert_same_values(device_x, ref_unscale(x, inv_scale))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("n", [0, 1, 7, 2 ** 20 + 3])
def test_lengths(engine, dtype, n):
    x = numpy.ones(n, dtype)
    assert not overflowed(engine, engine.put(x))
    if n:
        x[-1] = numpy.nan
        assert overflowed(engine, engine.put(x))
        x[-1], x[0] = 1, -numpy.inf
        assert overflowed(engine, engine.put(x))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_flag_is_sticky_until_cleared(engine, dtype):
    clean = engine.put(numpy.ones(100, dtype))
    dirty = engine.put(numpy.array([1, numpy.inf, 2], dtype))
    status = engine.status()
    fs.check_overflow(status, dirty)
    for _ in range(3):
        fs.check_overflow(status, clean)
        fs.check_and_unscale(status, [clean], 1.0)
        assert fs.get_status(status)
    assert fs.clear_status(status) is status
    assert not fs.get_status(status)
    fs.check_overflow(status, clean)
    fs.check_and_unscale(status, clean, 0.5)
    assert not fs.get_status(status)
    fs.check_and_unscale(status, [clean, dirty], 0.5)
    assert fs.get_status(status)


# ---- memory layouts ------------------------------------------------------------------------------


def _views(base):
    """(name, view) pairs of ``base`` (1-D, length 6000) that a kernel cannot read as given."""
    grid = base[:5994].reshape(999, 6)
    return [
        ("offset 1", base[1:]),
        ("offset 3, short tail", base[3:-2]),
        ("every 2nd", base[::2]),
        ("reversed", base[::-1]),
        ("transposed", grid.T),
        ("column slice", grid[:, 1::3]),
        ("one element", base[4001:4002]),
    ]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_views_check_only_their_elements(engine, dtype):
    for name, _ in _views(numpy.empty(6000)):
        base = engine.put(numpy.arange(6000).astype(dtype) % 97)
        view = dict(_views(base))[name]
        assert not overflowed(engine, view), name
        flat_ids = dict(_views(numpy.arange(6000)))[name].reshape(-1)
        outside = numpy.setdiff1d(numpy.arange(6000), flat_ids)
        if outside.size:
            base[int(outside[len(outside) // 2])] = numpy.inf
            assert not overflowed(engine, view), name
        base[int(flat_ids[-1])] = numpy.nan
        assert overflowed(engine, view), name


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_unscale_writes_through_views_and_nowhere_else(engine, dtype):
    values = random_values(numpy.random.default_rng(1), 6000, dtype)
    for name, _ in _views(numpy.empty(6000)):
        base = engine.put(values)
        status = engine.status()
        fs.check_and_unscale(status, [dict(_views(base))[name]], 0.25)
        expected = values.copy()
        view = dict(_views(expected))[name]
        view[...] = ref_unscale(view, 0.25)
        assert_same_values(base, expected)
        assert not fs.get_status(status), name


def test_byte_misaligned_arrays_cpu(engine):
    if engine.device != "CPU":
        pytest.skip("NumPy-only layout")
    for dtype in ALL_DTYPES:
        values = random_values(numpy.random.default_rng(2), 301, dtype)
        raw = bytearray(values.nbytes + 1)
        x = numpy.frombuffer(raw, dtype=dtype, offset=1, count=values.size)
        assert x.ctypes.data % dtype.itemsize != 0
        x[...] = values
        assert not overflowed(engine, x)
        status = engine.status()
        fs.check_and_unscale(status, [x], 0.5)
        assert_same_values(x, ref_unscale(values, 0.5))
        x[150] = numpy.inf
        assert overflowed(engine, x)


# ---- many arrays, unscale ------------------------------------------------------------------------


@pytest.mark.parametrize("inv_scale", [1.0, 0.5, 2.0**-16, 1 / 3, 3.0])
def test_check_and_unscale_many_arrays_mixed_dtypes(engine, inv_scale):
    rng = numpy.random.default_rng(3)
    host = [
        random_values(rng, int(n), ALL_DTYPES[i % 3])
        for i, n in enumerate(rng.integers(0, 3000, size=40))
    ]
    arrays = [engine.put(a) for a in host]
    status = engine.status()
    fs.check_and_unscale(status, arrays, inv_scale)
    assert not fs.get_status(status)
    for got, want in zip(arrays, host):
        assert_same_values(got, ref_unscale(want, inv_scale))
    for i in (0, 17, 38):
        host[i][-1] = numpy.inf
        assert overflowed(engine, *[engine.put(a) for a in host]) == ref_overflow(*host)


def test_overflow_flag_is_computed_before_the_multiplication(engine):
    # 60000 * 2 overflows fp16, but the gradient itself is finite: no flag (PyTorch semantics).
    x = engine.put(numpy.full(33, 60000, numpy.float16))
    status = engine.status()
    fs.check_and_unscale(status, [x], 2.0)
    assert not fs.get_status(status)
    assert numpy.isinf(backend.as_numpy(x)).all()


def test_all_finite(engine):
    ok = engine.put(numpy.ones(10, numpy.float16))
    bad = engine.put(numpy.array([numpy.nan], numpy.float32))
    assert fs.all_finite([ok, None, ok]) and fs.all_finite(ok) and fs.all_finite([])
    assert not fs.all_finite([ok, bad]) and not fs.all_finite(Tensor(bad))


def test_tensors_and_arrays_mix(engine):
    status = engine.status()
    fs.check_overflow(status.data, Tensor(engine.put(numpy.ones(3, numpy.float32))), None)
    assert not fs.get_status(status)
    grad = Tensor(engine.put(numpy.array([2.0, 4.0], numpy.float32)))
    fs.check_and_unscale(status, [grad], Tensor(engine.put(numpy.array([0.5], numpy.float32))))
    assert_same_values(grad.data, numpy.array([1.0, 2.0], numpy.float32))


# ---- property test -------------------------------------------------------------------------------


@st.composite
def float_arrays(draw):
    """Arrays with random lengths, offsets (misalignment) and injected inf/NaN."""
    dtype = draw(st.sampled_from(ALL_DTYPES))
    n = draw(st.integers(0, 300))
    offset = draw(st.integers(0, 9))
    seed = draw(st.integers(0, 2**32 - 1))
    specials = NONFINITE_BITS[dtype] + FINITE_EDGE_BITS[dtype]
    injected = draw(
        st.lists(
            st.tuples(st.integers(0, max(n - 1, 0)), st.sampled_from(specials)),
            max_size=3 if n else 0,
        )
    )
    x = random_values(numpy.random.default_rng(seed), n + offset, dtype)[offset:]
    for position, bits in injected:
        x[position] = from_bits([bits], dtype)[0]
    return x


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    arrays=st.lists(float_arrays(), max_size=6),
    inv_scale=st.sampled_from([1.0, 0.5, 2.0**-10, 0.3]),
)
def test_property_matches_numpy_reference(engine, arrays, inv_scale):
    assert overflowed(engine, *[engine.put(a) for a in arrays]) == ref_overflow(*arrays)
    device_arrays = [engine.put(a) for a in arrays]
    status = engine.status()
    fs.check_and_unscale(status, device_arrays, inv_scale)
    assert fs.get_status(status) == ref_overflow(*arrays)
    for got, want in zip(device_arrays, arrays):
        assert_same_values(got, ref_unscale(want, inv_scale))


# ---- bad input -----------------------------------------------------------------------------------


def test_bad_status():
    x = numpy.ones(3, numpy.float32)
    with pytest.raises(TypeError, match=r"status must be a float32 Tensor or array of shape "
                                        r"\(8,\).*not of dtype float64, got array\(\[0\., "):
        fs.check_overflow(numpy.zeros(8), x)
    with pytest.raises(ValueError, match=r"status must be .* of shape \(8,\).*not of shape \(4,\)"):
        fs.clear_status(numpy.zeros(4, numpy.float32))
    with pytest.raises(TypeError,
                       match=r"status must be a Tensor or a NumPy/CuPy array, got \[.*\(list\)"):
        fs.get_status([0.0] * 8)
    with pytest.raises(ValueError,
                       match=r"like must be .* a device name \(one of \['CPU', 'GPU'\]"):
        fs.alloc_status("TPU")


def test_bad_arrays():
    status = fs.alloc_status()
    with pytest.raises(
        TypeError,
        match=r"arrays\[1\] must be a float16, float32 or float64 Tensor or array, not of dtype "
        r"int32, got array\(\[1, 1\], dtype=int32\)",
    ):
        fs.check_overflow(status, numpy.ones(2), numpy.ones(2, numpy.int32))
    with pytest.raises(
        TypeError,
        match=r"arrays\[0\] must be a Tensor or a NumPy/CuPy array, got "
        r"1.5 \(float\)",
    ):
        fs.check_and_unscale(status, [1.5], 0.5)
    frozen = numpy.ones(4, numpy.float16)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match=r"arrays\[0\] must be writable .* not read-only, got"):
        fs.check_and_unscale(status, [frozen], 0.5)
    fs.check_overflow(status, frozen)  # reading a read-only array is fine


def test_bad_inv_scale():
    status, x = fs.alloc_status(), numpy.ones(2, numpy.float32)
    with pytest.raises(ValueError,
                       match=r"inv_scale must be a finite float in \[0.0, inf\), got inf"):
        fs.check_and_unscale(status, [x], float("inf"))
    with pytest.raises(
        TypeError,
        match=r"inv_scale must be a finite real number >= 0 or a one-element Tensor/array holding "
        r"one, got '0.5' \(str\)",
    ):
        fs.check_and_unscale(status, [x], "0.5")
    with pytest.raises(ValueError,
                       match=r"inv_scale must be .* one-element .*, got array\(\[1\., 1\.\]\)"):
        fs.check_and_unscale(status, [x], numpy.ones(2))


@pytest.mark.gpu
@NO_GPU
def test_device_mismatch():
    status = fs.alloc_status("GPU")
    with pytest.raises(ValueError, match=r"arrays\[0\] is on CPU but status is on GPU"):
        fs.check_overflow(status, numpy.ones(2, numpy.float32))


# ---- one launch per dtype ------------------------------------------------------------------------


class _CountingLaunches:
    """Stands in for the host library or a CUDA kernel and counts the launches it forwards."""

    def __init__(self, target):
        self.target, self.launches = target, []

    def __getattr__(self, name):  # host library: launch_<kernel> functions
        attribute = getattr(self.target, name)
        if not name.startswith("launch_"):
            return attribute

        def launch(*args):
            self.launches.append(name)
            return attribute(*args)

        return launch

    def __call__(self, *args):  # CUDA kernel
        self.launches.append("kernel")
        return self.target(*args)


def test_one_host_launch_per_dtype(monkeypatch):
    lib = _native.host_library()
    if lib is None:
        pytest.skip(f"no host build of the kernels: {_native.host_library_error()}")
    counter = _CountingLaunches(lib)
    monkeypatch.setattr(_native, "host_library", lambda: counter)
    arrays = [numpy.ones(n, KERNEL_DTYPES[n % 2]) for n in range(1, 41)]
    fs.check_and_unscale(fs.alloc_status(), arrays, 0.5)
    assert sorted(counter.launches) == ["launch_check_unscale_fp16", "launch_check_unscale_fp32"]


@pytest.mark.gpu
@NO_GPU
def test_one_cuda_launch_per_dtype(monkeypatch):
    counters = []

    def counting_function(name, *args):
        counters.append(_CountingLaunches(real_function(name, *args)))
        return counters[-1]

    real_function = _native.cuda_function
    monkeypatch.setattr(_native, "cuda_function", counting_function)
    arrays = [backend.cupy.ones(n, KERNEL_DTYPES[n % 2]) for n in range(1, 41)]
    status = fs.alloc_status("GPU")
    fs.check_overflow(status, *arrays)
    assert sum(len(c.launches) for c in counters) == 2 and not fs.get_status(status)


def test_check_and_unscale_to_fp32_widens_and_flags(engine):
    """fp16 in, new fp32 out (on the inputs' device): values below fp16's subnormals survive the
    unscale; inputs untouched. On a GPU this is the kernel an fp16 loss-scaled step runs."""
    halves = [
        engine.put(numpy.array([1.0, 2.0, 3.0], numpy.float16)),
        engine.put(numpy.array([6e-5, 65504.0], numpy.float16)),
    ]
    before = [backend.as_numpy(h).copy() for h in halves]
    status = engine.status()
    out = fs.check_and_unscale_to_fp32(status, halves, 2.0**-20)
    assert [o.dtype for o in out] == [numpy.float32, numpy.float32]
    assert all(backend.device_of(o) == engine.device for o in out)
    assert_same_values(out[1], before[1].astype(numpy.float32) * numpy.float32(2.0**-20))
    assert backend.as_numpy(out[1])[0] > 0  # 6e-5 / 2**20 is far below fp16's smallest subnormal
    assert not fs.get_status(status)
    assert all(numpy.array_equal(backend.as_numpy(h), b) for h, b in zip(halves, before))
    fs.check_and_unscale_to_fp32(status, [engine.put(numpy.array([numpy.inf], numpy.float16))], 1.0)
    assert fs.get_status(status)
    with pytest.raises(TypeError, match=r"arrays\[0\] must be a float16 Tensor or array"):
        fs.check_and_unscale_to_fp32(status, [engine.put(numpy.ones(2, numpy.float32))], 1.0)


def test_float_status_all_finite_names_arrays_argument():
    # amp/float_status.py all_finite: "Raises TypeError / ValueError: as check_overflow",
    # whose message names arrays[i]; it named 'like' (alloc_status's argument)
    with pytest.raises(TypeError, match=r"arrays\[1\] must be a Tensor"):
        fs.all_finite([None, 1.0])
    with pytest.raises(TypeError,
                       match=r"arrays\[0\] must be a float16, float32 or float64 Tensor"):
        fs.all_finite([numpy.ones(2, numpy.int32)])
    assert fs.all_finite([None, numpy.ones(2, numpy.float32)]) is True


@pytest.mark.parametrize("native", [True, False])
def test_every_nan_payload_and_both_infs_set_the_flag_and_nothing_else_does(native, monkeypatch):
    # MindSpore's FloatStatus: the flag is isinf or isnan, in fp16, fp32 and fp64; subnormals,
    # -0 and the largest finite value are not overflow. The host kernels and the NumPy path agree.
    if not native:
        monkeypatch.setattr(_native, "host_library", lambda: None)
    elif _native.host_library() is None:
        pytest.skip("no host compiler")
    rng = np.random.default_rng(3)
    for dt, ut, exp_bits, mant in (
        (np.float16, np.uint16, 5, 10),
        (np.float32, np.uint32, 8, 23),
        (np.float64, np.uint64, 11, 52),
    ):
        payloads = (
            np.arange(0, 1 << mant, dtype=np.uint64)
            if mant == 10
            else np.concatenate(
                [[0, 1, (1 << mant) - 1], rng.integers(1, 1 << mant, 40, dtype=np.uint64)]
            )
        )
        nb = 1 + exp_bits + mant
        for sign in (0, 1):
            top = (sign << (nb - 1)) | (((1 << exp_bits) - 1) << mant)
            a = np.ones(len(payloads) * 3 + 5, dt)
            for k, pay in enumerate(payloads):
                a.view(ut)[3 * k + 2] = ut(top | int(pay))
                status = float_status.alloc_status()
                float_status.check_overflow(status, a[3 * k : 3 * k + 5])
                assert float_status.get_status(status), (dt, hex(top | int(pay)))
        fi = np.finfo(dt)
        for v in (fi.max, -fi.max, fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal, -0.0):
            status = float_status.alloc_status()
            float_status.check_overflow(status, np.full(37, v, dt), np.full(37, v, dt)[1::3])
            assert not float_status.get_status(status), (dt, v)


@pytest.mark.parametrize("native", [True, False])
def test_check_and_unscale_is_numpy_exact_on_strided_misaligned_and_mixed_arrays(
    native, monkeypatch
):
    if not native:
        monkeypatch.setattr(_native, "host_library", lambda: None)
    rng = np.random.default_rng(4)
    inv = 1 / 3
    arrays, want = [], []
    for dt in (np.float16, np.float32, np.float64):
        base = (rng.standard_normal(2003) * 300).astype(dt)
        raw = np.zeros(1000 * np.dtype(dt).itemsize + 1, np.uint8)[1:].view(dt)  # misaligned
        raw[...] = base[:1000]
        for x in (base[:1001].copy(), base[::2], raw, base[:0]):
            arrays.append(x)
            with np.errstate(all="ignore"):
                want.append(
                    x * np.float64(inv)
                    if dt == np.float64
                    else (x.astype(np.float32) * np.float32(inv)).astype(dt)
                )
    status = float_status.alloc_status()
    float_status.check_and_unscale(status, arrays, inv)
    assert not float_status.get_status(status)
    for got, expected in zip(arrays, want):
        assert got.dtype == expected.dtype and np.array_equal(got, expected)
