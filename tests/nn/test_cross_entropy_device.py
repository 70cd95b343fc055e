"""``nn.CrossEntropyLoss`` with class ids on the GPU, on the strict device: the targets, class
weights and the mean's denominator stay on the device (no read in the forward or backward
pass), the values and gradients are the CPU's, and ids out of range raise the CPU's ValueError
at the next read of the device."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, nn
from minigrad.testing.strict_device import strict_device

CASES = {"plain": {}, "weighted": {"weight": [1.0, 2.0, 0.5, 1.5]},
         "ignore and smoothing": {"ignore_index": 2, "label_smoothing": 0.1},
         "sum": {"reduction": "sum"}, "none": {"reduction": "none"}}


def _run(device, options, ids):
    rng = numpy.random.default_rng(0)
    logits = Tensor(rng.standard_normal((len(ids), 4)).astype(numpy.float32), device=device,
                    requires_grad=True)
    options = dict(options)
    if "weight" in options:
        options["weight"] = Tensor(numpy.array(options["weight"], numpy.float32), device=device)
    loss = nn.CrossEntropyLoss(**options)(logits, Tensor(numpy.array(ids, numpy.int32),
                                                         device=device))
    loss.sum().backward()
    return loss, logits.grad


@pytest.mark.parametrize("name", list(CASES))
def test_class_ids_on_the_gpu_read_nothing_and_match_the_cpu(name):
    ids = [0, 3, 2, 1, 2]
    cpu_loss, cpu_grad = _run("CPU", CASES[name], ids)
    with strict_device() as reads:
        minigrad.set_context(device_target="GPU")
        loss, grad = _run("GPU", CASES[name], ids)
        assert reads.count == 0 and loss.device == grad.device == "GPU"
        loss, grad = loss.asnumpy(), grad.asnumpy()
    numpy.testing.assert_allclose(loss, cpu_loss.asnumpy(), rtol=1e-6)
    numpy.testing.assert_allclose(grad, cpu_grad.asnumpy(), rtol=1e-6, atol=1e-7)


def test_ids_out_of_range_raise_at_the_next_read():
    with pytest.raises(ValueError, match=r"class ids must be in \[0, 4\) or the ignore_index "
                                         r"-100, got values in \[0, 7\]"):
        _run("CPU", {}, [0, 7])
    with strict_device() as reads:
        minigrad.set_context(device_target="GPU")
        loss, _ = _run("GPU", {}, [0, 7])
        assert reads.count == 0
        with pytest.raises(ValueError, match=r"class ids must be in \[0, 4\) or the "
                                             r"ignore_index -100, got values in \[0, 7\]"):
            loss.item()
