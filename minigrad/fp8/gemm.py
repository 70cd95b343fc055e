"""FP8 GEMMs for Dense and Conv2d: quantize the operands, multiply the dequantized values in
float32.

Under a recipe, with ``Q_f`` the forward cast (E4M3) and ``Q_b`` the backward cast (E5M2 for
HYBRID), each one a quantize-dequantize under that tensor's ``ScalingState``::

    forward   y  = Q_f(x) Q_f(W)ᵀ + b                  (conv: Q_f(x) ⋆ Q_f(W) + b)
    backward  ĝ  = Q_b(∂L/∂y)
              ∂L/∂x = ĝ Q_f(W),   ∂L/∂W = ĝᵀ Q_f(x),   ∂L/∂b = Σ ∂L/∂y

so both backward GEMMs read the quantized gradient and the quantized forward operands, as in
Transformer Engine's Linear, while the bias gradient and everything outside the GEMMs (norms,
softmax, losses, the optimizer) stays in higher precision. The casts pass gradients straight
through (a cast is the identity for the gradient), so the gradients are exactly those of the
dequantized GEMM. The products run in float32 (``xp`` arrays: NumPy, or CuPy on the GPU), and
the result returns in x's dtype.
"""
import numpy

from minigrad import ops
from minigrad.autograd.function import Function
from minigrad.fp8.autocast import mark_cast
from minigrad.fp8.quantize import dequantize

PER_TENSOR_NAMES = ("DelayedScaling", "CurrentScaling", "TensorwiseScaling")
TENSORS = ("input", "weight", "grad_output")


class Fp8Cast(Function):
    """out = dequantize(quantize(x)) in float32 under (recipe, state), forward format; the
    gradient passes through (cast back to x's dtype)."""

    def forward(self, x, recipe, state):
        self.dtype = x.dtype
        q, _ = recipe.quantize(x, state, "forward")
        mark_cast(recipe, state)
        return dequantize(q).astype(numpy.float32)

    def backward(self, g):
        return g.astype(self.dtype, copy=False)


class Fp8GradCast(Function):
    """out = x; the gradient is cast in the backward format: dequantize(quantize(g)), in the
    gradient's dtype."""

    def forward(self, x, recipe, state):
        self.recipe, self.state = recipe, state
        return x

    def backward(self, g):
        q, _ = self.recipe.quantize(g, self.state, "backward")
        mark_cast(self.recipe, self.state)
        return dequantize(q).astype(g.dtype, copy=False)


def states_of(cell, recipe, weight, name=None):
    """The ``ScalingState`` of each FP8 tensor ("input", "weight", "grad_output") of the GEMM
    of ``cell`` with ``weight`` under ``recipe``: kept on the cell (one group per weight, so a
    cell with several GEMMs keeps several), new when the recipe changes, and named after the
    weight's parameter path (or ``name``, for a weight that is a slice of a parameter):
    ``fc1.weight`` gives ``fc1.input``, ``attn.q_proj_weight`` ``attn.q_proj.input``."""
    held = cell.__dict__.get("_fp8_states")
    if held is None or held[0] is not recipe:
        held = cell.__dict__["_fp8_states"] = (recipe, {})
    name = name or getattr(weight, "name", None) or type(cell).__name__
    prefix = (name[:-len("weight")] if name.endswith("weight") else name).rstrip("._")
    group = held[1].get(prefix)
    if group is None:
        group = held[1][prefix] = {t: recipe.new_state(f"{prefix}.{t}") for t in TENSORS}
    return group


def dense(cell, x, weight, bias, recipe, name=None):
    """``cell``'s Dense map ``x Wᵀ + b`` with the GEMM in FP8 under ``recipe`` (module
    docstring); ``name`` names the weight where it is not a named parameter (``states_of``)."""
    states = states_of(cell, recipe, weight, name)
    y = ops.dense(Fp8Cast.apply(x, recipe=recipe, state=states["input"]),
                  Fp8Cast.apply(weight, recipe=recipe, state=states["weight"]))
    y = Fp8GradCast.apply(y, recipe=recipe, state=states["grad_output"])
    return _finish(y, bias, x.dtype, (-1,))


def conv2d(cell, x, weight, bias, recipe, **conv_args):
    """``cell``'s 2-D convolution with the GEMM in FP8 under a per-tensor ``recipe`` (module
    docstring); ``conv_args`` are ``ops.conv2d``'s stride, padding, dilation, groups.

    Raises:
        ValueError: for a recipe with one scale per row or block (RowwiseScaling,
            MXFP8BlockScaling): they scale along the last axis, which for an NCHW tensor is W.
    """
    if recipe.blocked:
        raise ValueError(f"fp8_autocast: Conv2d supports the per-tensor recipes "
                         f"({', '.join(PER_TENSOR_NAMES)}), got {type(recipe).__name__}")
    states = states_of(cell, recipe, weight)
    y = ops.conv2d(Fp8Cast.apply(x, recipe=recipe, state=states["input"]),
                   Fp8Cast.apply(weight, recipe=recipe, state=states["weight"]), **conv_args)
    y = Fp8GradCast.apply(y, recipe=recipe, state=states["grad_output"])
    return _finish(y, bias, x.dtype, (1, -1, 1, 1))


def _finish(y, bias, dtype, bias_shape):
    if bias is not None:
        y = y + ops.reshape(ops.cast(bias, y.dtype), bias_shape)
    return ops.cast(y, dtype)
