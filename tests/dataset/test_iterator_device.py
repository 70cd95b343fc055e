"""The dataset iterator's ``device``: GPU batches staged through pinned host buffers (two per
column, used in turn) without a read of the device, the context's device by default, and on
the CPU plain host Tensors with no staging. On the strict device everywhere, on a real GPU
where there is one."""
import numpy
import pytest

import minigrad
from helpers import GPU_KINDS, gpu_of
from minigrad.dataset import NumpySlicesDataset
from minigrad.dataset.iterator import STAGING_DEPTH


def _dataset():
    x = numpy.arange(40, dtype=numpy.float32).reshape(10, 4)
    return NumpySlicesDataset({"x": x, "y": numpy.arange(10, dtype=numpy.int32)},
                              shuffle=False).batch(2), x


@pytest.mark.parametrize("kind", GPU_KINDS)
def test_gpu_batches_come_through_pinned_buffers_without_a_read(kind):
    ds, x = _dataset()
    with gpu_of(kind) as reads:
        it = ds.create_tuple_iterator(num_epochs=1)  # the context's device: the GPU
        batches = list(it)
        assert it.device == "GPU" and it._staging is not None
        assert all(t.device == "GPU" for batch in batches for t in batch)
        if reads is not None:
            assert reads.count == 0
        buffers = {column: {id(pinned) for pinned, _ in slots}
                   for column, slots in it._staging._slots.items()}
        assert all(len(ids) == STAGING_DEPTH for ids in buffers.values())  # reused, not grown
        values = [batch[0].asnumpy() for batch in batches]  # each batch kept its own values
    numpy.testing.assert_array_equal(numpy.concatenate(values), x)


@pytest.mark.parametrize("kind", GPU_KINDS)
def test_cpu_iterators_and_numpy_rows_stage_nothing(kind):
    ds, x = _dataset()
    with gpu_of(kind):
        cpu = ds.create_tuple_iterator(num_epochs=1, device="CPU")
        rows = list(cpu)
        assert cpu._staging is None and all(t.device == "CPU" for r in rows for t in r)
        raw = ds.create_dict_iterator(num_epochs=1, output_numpy=True, device="GPU")
        first = next(iter(raw))
        assert raw._staging is None and isinstance(first["x"], numpy.ndarray)
    numpy.testing.assert_array_equal(rows[0][0].asnumpy(), x[:2])


def test_the_cpu_context_gives_host_tensors():
    ds, _ = _dataset()
    minigrad.set_context(device_target="CPU")
    it = ds.create_tuple_iterator(num_epochs=1)
    assert it.device == "CPU" and it._staging is None
    assert next(iter(it))[0].device == "CPU"


def test_an_unknown_device_is_refused():
    ds, _ = _dataset()
    with pytest.raises(ValueError, match="device must be one of"):
        ds.create_tuple_iterator(device="TPU")
