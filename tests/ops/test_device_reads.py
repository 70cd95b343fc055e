"""Ops on the GPU read nothing from the device, checked on the strict device: a float mask's
removed keys, a raw device array as an operand, and the embedding's id check (deferred to the
next read of the device, where it still raises)."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, backend, nn, ops
from minigrad.testing.strict_device import strict_device


@pytest.fixture
def reads():
    with strict_device() as counter:
        minigrad.set_context(device_target="GPU")
        yield counter


def test_attention_with_a_float_mask_reads_nothing(reads):
    rng = numpy.random.default_rng(0)
    q, k, v = (Tensor(rng.standard_normal((1, 2, 4, 8)).astype(numpy.float32))
               for _ in range(3))
    mask = numpy.zeros((4, 4), numpy.float32)
    mask[0, 1] = -1e9  # below -65504: the key is removed
    out = ops.scaled_dot_product_attention(q, k, v, attn_mask=Tensor(mask))
    assert reads.count == 0 and out.device == "GPU"
    cpu = ops.scaled_dot_product_attention(*(Tensor(t.asnumpy(), device="CPU") for t in (q, k, v)),
                                           attn_mask=Tensor(mask, device="CPU"))
    numpy.testing.assert_allclose(out.asnumpy(), cpu.asnumpy(), rtol=1e-6)


def test_a_device_array_is_an_operand_without_a_copy_to_the_host(reads):
    x = Tensor(numpy.arange(3, dtype=numpy.float32))
    y = x * backend.cupy.asarray(numpy.full(3, 2.0, numpy.float32))
    assert reads.count == 0
    numpy.testing.assert_array_equal(y.asnumpy(), [0.0, 2.0, 4.0])
    with pytest.raises(TypeError, match="a Tensor, a number or an array of numbers"):
        x * backend.cupy.asarray(numpy.array([1 + 2j]))


def test_embedding_checks_ids_at_the_next_read(reads):
    minigrad.set_seed(0)
    table = nn.Embedding(5, 3)
    out = table(Tensor(numpy.array([0, 4, 2], numpy.int32)))
    assert reads.count == 0
    out.sum().item()  # the read brings the check back: it passed
    table(Tensor(numpy.array([1, 7], numpy.int32)))
    assert reads.count == 1
    with pytest.raises(IndexError, match="embedding id 7 is out of range for a table of 5 rows"):
        out.sum().item()


def test_embedding_on_the_cpu_checks_at_once():
    table = nn.Embedding(5, 3)
    with pytest.raises(IndexError, match="embedding id -1 is out of range"):
        table(Tensor(numpy.array([-1, 2], numpy.int32)))


@pytest.mark.parametrize("norm_type", [2.0, 1.0, numpy.inf])
def test_the_global_norm_of_device_arrays_is_one_read(reads, norm_type):
    from minigrad.ops.global_norm import global_norm
    arrays = [numpy.full(3, 2.0, numpy.float32), numpy.full(4, -1.0, numpy.float16),
              numpy.zeros(0, numpy.float32)]
    on_device = [backend.cupy.asarray(a) for a in arrays]
    assert global_norm(on_device, norm_type) == pytest.approx(global_norm(arrays, norm_type))
    assert reads.count == 1


@pytest.mark.parametrize("scale", [1.0, 1e-3, numpy.inf, numpy.nan], ids=str)
def test_clipping_device_tensors_reads_nothing_and_matches_the_cpu(reads, scale):
    arrays = [numpy.array([2.0, -3.0, 0.5], numpy.float32) * numpy.float32(scale),
              numpy.array([1.0, -1.0, 4.0, 0.25], numpy.float16), numpy.zeros(0, numpy.float32)]
    with numpy.errstate(invalid="ignore", over="ignore"):
        cpu = ops.clip_by_global_norm([Tensor(a, device="CPU") for a in arrays], 1.0)
        gpu = ops.clip_by_global_norm([Tensor(a) for a in arrays], 1.0)
    assert reads.count == 0 and all(t.device == "GPU" for t in gpu)
    for a, b in zip(cpu, gpu):
        assert b.dtype == a.dtype
        numpy.testing.assert_array_equal(b.asnumpy(), a.asnumpy())


def test_a_device_tensor_deep_copies_on_the_device(reads):
    import copy
    t = Tensor(numpy.arange(3, dtype=numpy.float32))
    c = copy.deepcopy(t)
    assert reads.count == 0 and c.device == "GPU" and c.data is not t.data
    numpy.testing.assert_array_equal(c.asnumpy(), [0.0, 1.0, 2.0])
