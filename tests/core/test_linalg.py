"""minigrad.linalg: batched SPD inverse against numpy.linalg.inv, and the failure ladder."""
import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigrad import Tensor, backend
from minigrad.linalg import NotPositiveDefiniteError, batched_inv_spd, inv_spd_ladder

TOL = {numpy.float32: 2e-4, numpy.float64: 1e-10}


def spd_stack(rng, batch, n, dtype, cond=1e2, rank=None):
    """Random SPD matrices with eigenvalues spread over ``cond`` (or of ``rank`` < n, PSD)."""
    q, _ = numpy.linalg.qr(rng.standard_normal((batch, n, n)))
    eig = numpy.geomspace(1.0, 1.0 / cond, n)
    if rank is not None:
        eig[rank:] = 0.0
    return ((q * eig[None, None, :]) @ q.transpose(0, 2, 1)).astype(dtype)


def rel_err(inv, ref):
    return float(numpy.abs(inv - ref).max() / numpy.abs(ref).max())


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
@pytest.mark.parametrize("n", [1, 5, 16, 17, 33, 65, 100, 128])
def test_matches_numpy_inv(dtype, n):
    rng = numpy.random.default_rng(n)
    x = spd_stack(rng, 6, n, dtype)
    inv = batched_inv_spd(x)
    assert inv.dtype == dtype and inv.shape == x.shape
    ref = numpy.linalg.inv(x.astype(numpy.float64))
    assert rel_err(inv, ref) < TOL[dtype]


@given(st.integers(1, 40), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_random_stacks_property(n, batch, seed):
    rng = numpy.random.default_rng(seed)
    x = spd_stack(rng, batch, n, numpy.float32, cond=1e3)
    assert rel_err(batched_inv_spd(x), numpy.linalg.inv(x.astype(numpy.float64))) < 2e-3


def test_leading_dims_and_tensor_in_tensor_out():
    rng = numpy.random.default_rng(1)
    x = spd_stack(rng, 6, 7, numpy.float32).reshape(2, 3, 7, 7)
    out = batched_inv_spd(Tensor(x))
    assert isinstance(out, Tensor) and out.shape == (2, 3, 7, 7)
    assert rel_err(out.asnumpy(), numpy.linalg.inv(x.astype(numpy.float64))) < 2e-4


def test_identity_padded_residual_block():
    """THOR pads the last diagonal block of a factor with the identity: still exact."""
    rng = numpy.random.default_rng(2)
    core = spd_stack(rng, 1, 5, numpy.float64)[0]
    padded = numpy.eye(8)
    padded[:5, :5] = core
    inv = batched_inv_spd(padded[None].astype(numpy.float32))[0]
    assert numpy.allclose(inv[5:, 5:], numpy.eye(3), atol=1e-6)
    assert numpy.abs(inv[:5, 5:]).max() < 1e-6
    assert rel_err(inv[:5, :5], numpy.linalg.inv(core)) < 2e-4


def test_near_singular_blocks_with_damping():
    """A rank-deficient factor (batch < width) is singular; with damping it inverts accurately."""
    rng = numpy.random.default_rng(3)
    a = spd_stack(rng, 4, 64, numpy.float64, rank=16)
    damped = a + 1e-3 * numpy.eye(64)
    inv = batched_inv_spd(damped.astype(numpy.float32))
    assert numpy.isfinite(inv).all()
    assert rel_err(inv, numpy.linalg.inv(damped)) < 1e-2
    with pytest.raises(NotPositiveDefiniteError):
        batched_inv_spd((a - 1e-3 * numpy.eye(64)).astype(numpy.float32))


def test_not_positive_definite_names_the_blocks():
    x = numpy.stack([numpy.eye(3), -numpy.eye(3), numpy.eye(3)]).astype(numpy.float32)
    with pytest.raises(NotPositiveDefiniteError, match="1 of 3") as info:
        batched_inv_spd(x)
    assert info.value.indices == (1,)
    x[2, 0, 0] = numpy.nan
    with pytest.raises(NotPositiveDefiniteError) as info:
        batched_inv_spd(x)
    assert info.value.indices == (1, 2)


def test_a_schur_complement_that_fails_deep_in_the_recursion_names_the_block():
    """A 100x100 matrix whose trailing corner makes it indefinite: the blocked factorisation
    meets it only in the last Schur complement; the failing block is still named."""
    rng = numpy.random.default_rng(9)
    x = spd_stack(rng, 4, 100, numpy.float32)
    x[2, 99, 99] = -1.0
    with pytest.raises(NotPositiveDefiniteError, match="1 of 4") as info:
        batched_inv_spd(x)
    assert info.value.indices == (2,)
    good = batched_inv_spd(x[[0, 1, 3]])
    assert rel_err(good, numpy.linalg.inv(x[[0, 1, 3]].astype(numpy.float64))) < 1e-3


@pytest.mark.parametrize("bad, error, match", [
    (numpy.ones((3, 4), numpy.float32), ValueError, r"square matrices.*\(3, 4\)"),
    (numpy.ones(3, numpy.float32), ValueError, r"shape \(3,\)"),
    (numpy.eye(3, dtype=numpy.float16), TypeError, "float16"),
    (numpy.eye(3, dtype=numpy.int64), TypeError, "int64"),
    ([[1.0]], TypeError, "list"),
])
def test_bad_input(bad, error, match):
    with pytest.raises(error, match=match):
        batched_inv_spd(bad)


def test_ladder_more_damping_then_float64_then_previous():
    rng = numpy.random.default_rng(4)
    good = spd_stack(rng, 2, 6, numpy.float32)
    # indefinite by a little: more damping (10x, 100x, 1000x of 1e-3) makes it definite
    slightly = numpy.eye(6, dtype=numpy.float32) * 1e-3
    slightly[0, 0] = -5e-3
    blocks = numpy.stack([good[0], slightly, good[1]])
    inv, steps = inv_spd_ladder(blocks, damping=1e-3, name="fc1.A")
    assert steps == {"damped": [1], "float64": [], "previous": []}
    assert numpy.isfinite(inv).all()
    assert rel_err(inv[0], numpy.linalg.inv(good[0].astype(numpy.float64))) < 2e-4
    # hopeless block: keeps the previous inverse
    hopeless = -numpy.eye(6, dtype=numpy.float32)
    previous = numpy.stack([numpy.eye(6)] * 3).astype(numpy.float32) * 7
    inv, steps = inv_spd_ladder(numpy.stack([good[0], hopeless, good[1]]), 1e-3, previous, "fc1.A")
    assert steps["previous"] == [1] and (inv[1] == previous[1]).all()
    with pytest.raises(NotPositiveDefiniteError, match="block 1 of fc1.A"):
        inv_spd_ladder(numpy.stack([good[0], hopeless]), 1e-3, None, "fc1.A")


def test_ladder_float64_step(monkeypatch):
    """When float32 Cholesky refuses a block at every damping, the block is retried in float64
    (LAPACK's float32 Cholesky is robust enough that a natural case is hard to build, so the
    float32 refusal is simulated)."""
    from minigrad import linalg
    real = linalg._cholesky
    monkeypatch.setattr(linalg, "_cholesky",
                        lambda s: None if s.dtype == numpy.float32 else real(s))
    rng = numpy.random.default_rng(6)
    blocks = spd_stack(rng, 2, 5, numpy.float32)
    inv, steps = inv_spd_ladder(blocks, damping=1e-3, retries=2)
    assert steps == {"damped": [], "float64": [0, 1], "previous": []}
    assert inv.dtype == numpy.float32
    damped = blocks.astype(numpy.float64) + 99 * 1e-3 * numpy.eye(5)  # growth**2 - 1 extra
    assert rel_err(inv, numpy.linalg.inv(damped)) < 1e-5


def test_ladder_non_finite_block_goes_to_previous():
    blocks = numpy.stack([numpy.eye(2), numpy.full((2, 2), numpy.inf)]).astype(numpy.float32)
    previous = numpy.stack([numpy.eye(2)] * 2).astype(numpy.float32)
    inv, steps = inv_spd_ladder(blocks, 0.1, previous)
    assert steps == {"damped": [], "float64": [], "previous": [1]}
    assert numpy.isfinite(inv).all()


@pytest.mark.gpu
@pytest.mark.skipif(not backend.CUDA_AVAILABLE, reason="needs CuPy and a CUDA GPU")
def test_gpu_matches_cpu():
    cupy = backend.cupy
    rng = numpy.random.default_rng(5)
    x = spd_stack(rng, 8, 128, numpy.float32)
    gpu = batched_inv_spd(cupy.asarray(x))
    assert isinstance(gpu, cupy.ndarray)
    assert rel_err(cupy.asnumpy(gpu), batched_inv_spd(x)) < 1e-4
    bad = x.copy()
    bad[3] = -numpy.eye(128)
    with pytest.raises(NotPositiveDefiniteError) as info:
        batched_inv_spd(cupy.asarray(bad))
    assert info.value.indices == (3,)
