"""amp.custom_fwd / amp.custom_bwd: the "Autocast and Custom Autograd Functions" examples of
PyTorch's Automatic Mixed Precision notes, ported, with the dtypes PyTorch 2.13's CPU autocast
gives for the same code (fp16)."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, amp, autograd
from minigrad._config import config

F16, F32 = numpy.float16, numpy.float32
seen = {}


class MyMM(autograd.Function):
    """The notes' MyMM: a function of several inputs that autocasts its ops."""

    @staticmethod
    @amp.custom_fwd
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    @amp.custom_bwd
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        seen["backward autocast"] = config.autocast_dtype
        result = grad @ b.T, a.T @ grad
        seen["backward result"] = [r.dtype for r in result]
        return result


class MyFloat32Func(autograd.Function):
    """The notes' MyFloat32Func: a function that needs float32 inputs."""

    @staticmethod
    @amp.custom_fwd(cast_inputs=minigrad.float32)
    def forward(ctx, input):
        ctx.save_for_backward(input)
        seen["forward input"] = input.dtype
        seen["forward autocast"] = config.autocast_dtype
        return input @ input.T

    @staticmethod
    @amp.custom_bwd
    def backward(ctx, grad):
        (input,) = ctx.saved_tensors
        seen["backward autocast"] = config.autocast_dtype
        return (grad + grad.T) @ input


def _inputs(dtype=F32):
    rng = numpy.random.RandomState(0)
    return (Tensor(rng.randn(3, 4).astype(dtype), requires_grad=True),
            Tensor(rng.randn(4, 2).astype(dtype), requires_grad=True))


def test_mymm_runs_in_fp16_under_autocast_and_backward_too():
    seen.clear()
    input1, input2 = _inputs()
    mymm = MyMM.apply
    with amp.autocast():
        output = mymm(input1, input2)
    assert output.dtype == F16
    output.astype(F32).sum().backward()
    assert seen["backward autocast"] == F16
    assert seen["backward result"] == [F16, F16]
    assert input1.grad.dtype == F32 and input2.grad.dtype == F32  # cast back to the inputs'
    expected = numpy.ones((3, 2)) @ input2.asnumpy().T.astype(numpy.float64)
    numpy.testing.assert_allclose(input1.grad.asnumpy(), expected, rtol=2e-3, atol=2e-3)


def test_mymm_outside_autocast_is_plain():
    seen.clear()
    input1, input2 = _inputs()
    output = MyMM.apply(input1, input2)
    output.sum().backward()
    assert output.dtype == F32 and seen["backward autocast"] is None
    assert seen["backward result"] == [F32, F32]


def test_float32_function_casts_its_inputs_and_turns_autocast_off():
    seen.clear()
    x = Tensor(numpy.random.RandomState(1).randn(3, 2).astype(F16), requires_grad=True)
    with amp.autocast():
        y = MyFloat32Func.apply(x)
    assert seen["forward input"] == F32 and seen["forward autocast"] is None
    assert y.dtype == F32
    y.sum().backward()
    assert seen["backward autocast"] is None
    assert x.grad.dtype == F16
    x64 = x.asnumpy().astype(numpy.float64)
    numpy.testing.assert_allclose(x.grad.asnumpy(), 2 * numpy.ones((3, 3)) @ x64, rtol=2e-3)


def test_float32_function_outside_autocast_keeps_its_inputs():
    seen.clear()
    x = Tensor(numpy.ones((2, 2), F16), requires_grad=True)
    MyFloat32Func.apply(x).sum().backward()
    assert seen["forward input"] == F16 and x.grad.dtype == F16


def test_the_dtypes_match_pytorch_cpu_autocast():
    torch = pytest.importorskip("torch")
    record = {}

    class TorchMM(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cpu")
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a.mm(b)

        @staticmethod
        @torch.amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            result = grad.mm(b.t()), a.t().mm(grad)
            record["mm"] = [r.dtype for r in result]
            return result

    class TorchFloat32(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
        def forward(ctx, x):
            ctx.save_for_backward(x)
            record["input"] = x.dtype
            return x.mm(x.t())

        @staticmethod
        @torch.amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return (grad + grad.t()).mm(x)

    a, b = (torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True))
    x = torch.randn(3, 2, dtype=torch.float16, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.float16):
        out, y = TorchMM.apply(a, b), TorchFloat32.apply(x)
    (out.float().sum() + y.sum()).backward()
    assert (out.dtype, y.dtype, record["input"]) == (torch.float16, torch.float32, torch.float32)
    assert record["mm"] == [torch.float16, torch.float16]
    assert (a.grad.dtype, x.grad.dtype) == (torch.float32, torch.float16)
    seen.clear()
    mine_a, mine_b = _inputs()
    mine_x = Tensor(numpy.ones((3, 2), F16), requires_grad=True)
    with amp.autocast():
        mine_out, mine_y = MyMM.apply(mine_a, mine_b), MyFloat32Func.apply(mine_x)
    (mine_out.astype(F32).sum() + mine_y.sum()).backward()
    assert (mine_out.dtype, mine_y.dtype, seen["forward input"]) == (F16, F32, F32)
    assert seen["backward result"] == [F16, F16]
    assert (mine_a.grad.dtype, mine_x.grad.dtype) == (F32, F16)


@pytest.mark.parametrize("call, error, message", [
    (lambda: amp.custom_fwd(cast_inputs=minigrad.int32), TypeError,
     "cast_inputs must be a float dtype"),
    (lambda: amp.custom_fwd(cast_inputs="half precision"), ValueError,
         "cast_inputs must be one of"),
    (lambda: amp.custom_fwd(device_type="cuda"), ValueError, "device_type must be 'cpu'"),
    (lambda: amp.custom_bwd(device_type=3), TypeError, "device_type must be a str"),
])
def test_decorator_arguments_are_checked(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_device_type_of_the_context_is_accepted():
    @amp.custom_fwd(device_type="cpu", cast_inputs=minigrad.float32)
    def forward(ctx, x):
        return x.dtype
    with amp.autocast():
        assert forward(type("Ctx", (), {})(), Tensor(numpy.ones(2, F16))) == F32
