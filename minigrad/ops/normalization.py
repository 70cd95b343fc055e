"""Batch and layer normalisation, sharing one ``Normalize`` Function.

Both compute y = γ·x̂ + β with x̂ = (x - μ) / √(σ² + ε). Batch norm takes μ, σ² per channel over
(N, H, W); layer norm per sample over the trailing axes. Statistics and x̂ are kept in fp32 for
fp16 input (the dtype policy for fragile reductions); y is returned in x's dtype.

The rule also runs on Tensors, for higher-order gradients (``saves``:
``minigrad.autograd.function``): there x - μ and r are recomputed from x by recorded ops, so
the second derivatives include the statistics' (as the first do when they are the batch's).
"""
import math

import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_bool, check_float, check_relation
from minigrad._fp16_host import store, widen
from minigrad.tensor import Tensor
from minigrad.autograd.function import Function
from minigrad._checks import check_axis
from minigrad.ops import _norm_host
from minigrad.ops._util import dot_axes, per_channel, sum_axes
from minigrad.ops.arithmetic import float_tensor, leaf


def _moments(x, axes):
    """Mean, biased variance (both keepdims) and x - mean over ``axes``, two-pass, in the
    accumulation dtype."""
    x = widen(x)
    count = math.prod(x.shape[a] for a in axes)
    mean = sum_axes(x, axes) / count
    centred = x - mean
    return mean, sum_axes(centred * centred, axes) / count, centred


def _centred(node):
    """x - μ of the node's input Tensor, recorded (μ recomputed when it is the batch's)."""
    x = node.inputs[0]
    return _moments(x, node.axes)[2] if node.through_stats else widen(x) - node.mean


def _rstd(node):
    """r = 1/√(σ² + ε) of the node's input Tensor, recorded when σ² is the batch's."""
    if not node.through_stats:
        return node.rstd
    return 1 / (_moments(node.inputs[0], node.axes)[1] + node.eps).sqrt()


class Normalize(Function):
    """out = γ·x̂ + β,  x̂ = (x - μ)·r,  r = 1/√(σ² + ε), with γ, β broadcast as ``param_shape``.

    dβ = Σ g,  dγ = Σ g·x̂ (over the axes where γ is broadcast), and with h = g·γ:
    dx = r·(h - mean(h) - x̂·mean(h·x̂)) when μ, σ² are this batch's (``through_stats``), else
    dx = r·h (fixed running statistics). Both run as dx = a·h - b·(x - μ) - c with per-group
    a = r, b = r³·Σ h·(x - μ) / M, c = r·Σ h / M (M values per group). Batch norm's γ is one
    value per group, so it joins a, b and c, h is g, and the two sums are dβ and dγ / r.

    Batch norm on arrays (``per_group``) keeps only x (which the graph holds anyway) and the
    per-channel μ and r: forward computes x - μ into the buffer that becomes the output, and
    backward computes x - μ again into the buffer that becomes dx, as
    dx = a·((g - Σg / M) - (r²·Σ g·(x - μ) / M)·(x - μ)), a = γ·r, each step in place. The
    sums Σ (x - μ)² and Σ g·(x - μ) need no product array (``_util.dot_axes``). On a
    channels-last float32 batch with the host library, each direction is two native passes
    instead (``_norm_host``: the statistics or the two sums in one read, then the output or dx
    in one read and one write; the sums in float64). Layer norm, and the rule on Tensors, keep
    x - μ from the forward pass.
    """
    autocast = "fp32"
    saves = {"centred": _centred, "rstd": _rstd,
             "gamma": lambda node: widen(node.inputs[1]).reshape(node.param_shape)}

    def forward(self, x, gamma, beta, axes, param_shape, eps, stats, through_stats,
                running=None):
        xp = backend.get_array_module(x)
        self.axes, self.through_stats = axes, through_stats
        self.eps, self.param_shape = eps, param_shape
        self.count = math.prod(x.shape[a] for a in axes)
        self.gamma = widen(gamma).reshape(param_shape)
        self.param_axes = tuple(i for i, n in enumerate(param_shape) if n == 1)
        self.x_dtype = x.dtype
        self.params = (gamma.shape, gamma.dtype), (beta.shape, beta.dtype)
        beta = widen(beta).reshape(param_shape)
        if stats is None or len(stats) == 2:  # batch norm: x - μ is not kept (class docstring)
            self.x, self.centred = x, None
            wide, centred = widen(x), None
            if stats is None:
                self.mean, var, centred = _batch_moments(x, wide, axes, self.count)
                if running is not None:
                    _update_running(running, self.mean, var, self.count)
            else:
                self.mean, var = stats
            self.rstd = 1 / xp.sqrt(var + eps)
            out = _normalized(x, wide, self.mean, self.rstd * self.gamma, beta, centred)
            return store(out, x.dtype)
        self.mean, var, centred = stats
        self.rstd = 1 / xp.sqrt(var + eps)
        self.centred = widen(x) - self.mean if centred is None else centred
        out = self.centred * (self.rstd * self.gamma)
        out += beta
        return store(out, x.dtype)

    def backward(self, g):
        if self.centred is None and not isinstance(g, Tensor):
            return self._batch_backward(widen(g))
        return self._general_backward(g)

    def _general_backward(self, g):
        """The rule for every case, on arrays or on Tensors (``_batch_backward``'s reference)."""
        g = widen(g)  # fp16 O3 steps: the fast conversion, both ways (a NumPy cast is ~5x slower)
        needs, axes = self.needs_grad, self.axes
        per_group = self.param_axes == axes  # batch norm: γ and β hold one value per group
        centred = self.centred
        if centred is None:  # batch norm's arrays through the general rule
            centred = widen(self.x) - self.mean
        h = g if per_group else g * self.gamma
        dx_sums = needs[0] and self.through_stats
        sum_h = sum_axes(h, axes) if dx_sums or per_group and needs[2] else None
        sum_hc = sum_axes(h * centred, axes) if dx_sums or per_group and needs[1] else None
        gx = ggamma = gbeta = None
        if needs[0]:
            a = self.rstd * self.gamma if per_group else self.rstd
            gx = h * a
            if self.through_stats:
                gx -= centred * (a * self.rstd * self.rstd * sum_hc / self.count)
                gx -= a * sum_h / self.count
            gx = store(gx, self.x_dtype)
        if needs[1]:
            ggamma = (self.rstd * sum_hc if per_group else
                      (g * centred * self.rstd).sum(axis=self.param_axes, keepdims=True))
            ggamma = self._param_grad(ggamma, self.params[0])
        if needs[2]:
            gbeta = sum_h if per_group else g.sum(axis=self.param_axes, keepdims=True)
            gbeta = self._param_grad(gbeta, self.params[1])
        return gx, ggamma, gbeta

    def _batch_backward(self, g):
        """Batch norm's rule on arrays (class docstring), ``g`` widened (not written)."""
        needs, axes, count = self.needs_grad, self.axes, self.count
        gx = ggamma = gbeta = None
        dx_sums = needs[0] and self.through_stats
        sum_h = wide = centred = None
        if dx_sums or needs[1]:
            wide = widen(self.x)
            sums = _norm_host.grad_sums(wide, g, self.mean)
            if sums is None:
                centred = _private_centred(self.x, self.mean, wide)
                sum_hc = dot_axes(g, centred, axes)
            else:
                sum_h, sum_hc = sums
        if sum_h is None and (dx_sums or needs[2]):
            sum_h = sum_axes(g, axes)
        if needs[1]:
            ggamma = self._param_grad(self.rstd * sum_hc, self.params[0])
        if needs[2]:
            gbeta = self._param_grad(sum_h, self.params[1])
        if needs[0]:
            xp = backend.get_array_module(g)
            a = self.rstd * self.gamma
            if self.through_stats:
                gx = _batch_dx(self.x, wide, g, self.mean, centred,
                               (-(self.rstd * self.rstd * sum_hc / count), sum_h / count, a))
            else:
                gx = per_channel(xp.multiply, g, a, xp.empty_like(g))
            gx = store(gx, self.x_dtype)
        return gx, ggamma, gbeta

    def _param_grad(self, total, like):
        shape, dtype = like
        return store(total.reshape(shape), dtype)


def _writable_like(x, wide):
    """A float array for a result the shape of ``x`` and laid out as ``wide`` (= widen(x)): the
    widened copy itself where widening made one, else a new array."""
    return wide if wide is not x else backend.get_array_module(wide).empty_like(wide)


def _normalized(x, wide, mean, a, b, centred=None):
    """out = ((x - μ)·a) + b per channel, in x's memory order, each step rounded as written;
    ``centred`` (x - μ in a writable array), if at hand, becomes out in place."""
    if centred is None:
        out = _norm_host.normalize(wide, mean, a, b, _writable_like(x, wide))
        if out is not None:
            return out
        centred = _private_centred(x, mean, wide)
    xp = backend.get_array_module(centred)
    per_channel(xp.multiply, centred, a, centred)
    return per_channel(xp.add, centred, b, centred)


def _batch_dx(x, wide, g, mean, centred, vectors):
    """dx = ((((x - μ)·k) + g) - s)·a per channel (``vectors`` = (k, s, a)), each step rounded as
    written; ``centred`` (x - μ in a writable array), if at hand, becomes dx in place."""
    if centred is None:
        out = _norm_host.dx(wide, g, mean, *vectors, _writable_like(x, wide))
        if out is not None:
            return out
        centred = _private_centred(x, mean, wide)
    k, s, a = vectors
    xp = backend.get_array_module(centred)
    per_channel(xp.multiply, centred, k, centred)
    centred += g
    per_channel(xp.subtract, centred, s, centred)
    return per_channel(xp.multiply, centred, a, centred)


def _private_centred(x, mean, wide=None):
    """x - μ, widened, in a new array that the caller may write (in x's memory order when
    widening copies x: the subtraction then runs in place). ``wide``: widen(x), if at hand."""
    wide = widen(x) if wide is None else wide
    xp = backend.get_array_module(wide)
    out = xp.empty_like(wide, dtype=xp.result_type(wide, mean)) if wide is x else wide
    return per_channel(xp.subtract, wide, mean, out)


def _batch_moments(x, wide, axes, count):
    """(μ, σ² biased, x - μ in a writable array or None) over ``axes`` of ``wide`` = widen(x),
    in the accumulation dtype: in one native read of a channels-last float32 batch
    (``_norm_host.moments``: no x - μ), else two-pass, σ² from ``dot_axes`` without an array of
    squares, x - μ in a new array (or in ``wide``, if widening made it)."""
    native = _norm_host.moments(wide)
    if native is not None:
        return (*native, None)
    mean = sum_axes(wide, axes) / count
    centred = _private_centred(x, mean, wide)
    return mean, dot_axes(centred, centred, axes) / count, centred


def _array(stat):
    return stat.data if isinstance(stat, Tensor) else stat


def _params(gamma, beta, shape, x, op, source=None):
    """γ and β as tensors of ``shape``; ``None`` means the identity (γ = 1, β = 0, no gradient).
    ``source`` says where ``shape`` comes from in the message about a γ or β of another shape."""
    xp = backend.get_array_module(x.data)
    out = []
    for name, value, fill in (("gamma", gamma, 1), ("beta", beta, 0)):
        if value is None:
            value = leaf(xp.full(shape, fill, dtypes.acc_dtype(x.dtype)))
        value = float_tensor(value, op, name)
        if value.shape != shape:
            where = f" ({source})" if source else ""
            raise ValueError(f"{op} {name} must have shape {shape}{where} for x of shape "
                             f"{x.shape}, got {value.shape}")
        out.append(value)
    return out


def _check_running(running, c):
    """Raise unless each running statistic is None or a float array or Tensor of shape (c,)
    (TypeError for another kind of value, ValueError for another shape): before either is
    written, so that a bad one leaves both as they were."""
    for name, stat in zip(("running_mean", "running_var"), running):
        if stat is None:
            continue
        array = _array(stat)
        expected = f"None or a float array or Tensor of shape ({c},) (updated in place)"
        is_array = isinstance(array, numpy.ndarray) or hasattr(array, "__cuda_array_interface__")
        check_relation(name, stat, is_array and dtypes.is_float(array.dtype), expected,
                       error=TypeError, owner="batch_norm")
        check_relation(name, stat, array.shape == (c,), expected, owner="batch_norm")


def _update_running(running, mean, var, count):
    """running = (1 - momentum)·running + momentum·batch_stat, in place, for the mean and the
    unbiased variance var·count/(count - 1); ``running`` is (running_mean, running_var,
    momentum), either statistic None to skip it."""
    running_mean, running_var, momentum = running
    c = mean.size
    for stat, batch_stat in ((running_mean, mean.reshape(c)),
                             (running_var, var.reshape(c) * (count / (count - 1)))):
        if stat is not None:
            array = _array(stat)
            array *= 1 - momentum
            array += (momentum * batch_stat).astype(array.dtype, copy=False)


def batch_norm(x, gamma, beta, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    """Batch normalisation over axis 1 of x (N, C) or (N, C, H, W) (any (N, C, ...)).

    y = γ·(x - μ)/√(σ² + ε) + β per channel. Training: μ, σ² are the batch's (biased variance),
    gradients flow through them, and the running statistics (fp32 arrays or Tensors of shape
    (C,); either may be None to skip) are updated in place:
    running = (1 - momentum)·running + momentum·batch_stat, with the unbiased batch variance
    for ``running_var`` (as PyTorch). Evaluation: μ, σ² are the running statistics.
    ``momentum`` (default 0.1) is PyTorch's; MindSpore's ``BatchNorm2d(momentum=0.9)`` is its
    complement (1 - momentum), which the nn layer translates. ``gamma``/``beta`` of shape (C,)
    or None (1 and 0). Statistics in fp32 for fp16 x; y in x's dtype.

    Raises:
        ValueError: for x with fewer than 2 dims, parameters or running statistics not of shape
            (C,), missing running statistics in evaluation, a single value per channel in
            training, momentum outside [0, 1], or eps <= 0.
        TypeError: for non-float tensors, a ``training`` that is not a bool, or a ``momentum`` or
            ``eps`` that is not a number.
    """
    x = float_tensor(x, "batch_norm")
    # what the nn layers pass at every step (a bool, floats in range) needs no checker call
    if training is not True and training is not False:
        training = check_bool("training", training)
    if x.ndim < 2:
        raise ValueError(f"batch_norm expects x of shape (N, C) or (N, C, H, W), got {x.shape}")
    if type(momentum) is not float or not 0.0 <= momentum <= 1.0:
        momentum = check_float("batch_norm momentum", momentum, low=0, high=1)
    if type(eps) is not float or not 0.0 < eps < math.inf:
        eps = check_float("batch_norm eps", eps, low=0, low_open=True)
    c = x.shape[1]
    axes = (0,) + tuple(range(2, x.ndim))
    param_shape = (1, c) + (1,) * (x.ndim - 2)
    gamma, beta = _params(gamma, beta, (c,), x, "batch_norm")
    if training:
        if x.size // c < 2:
            raise ValueError(f"batch_norm in training needs more than one value per channel, "
                             f"got x of shape {x.shape}")
        _check_running((running_mean, running_var), c)
        return Normalize.apply(x, gamma, beta, axes=axes, param_shape=param_shape, eps=eps,
                               stats=None, through_stats=True,
                               running=(running_mean, running_var, momentum))
    if running_mean is None or running_var is None:
        raise ValueError("batch_norm in evaluation (training=False) needs running_mean and "
                         "running_var, got None")
    _check_running((running_mean, running_var), c)
    acc = dtypes.acc_dtype(x.dtype)
    mean, var = (_array(s).astype(acc, copy=False) for s in (running_mean, running_var))
    return Normalize.apply(x, gamma, beta, axes=axes, param_shape=param_shape, eps=eps,
                           stats=(mean.reshape(param_shape), var.reshape(param_shape)),
                           through_stats=False)


def layer_norm(x, gamma, beta, begin_norm_axis=-1, begin_params_axis=-1, eps=1e-5):
    """Layer normalisation (MindSpore semantics) of each sample over axes begin_norm_axis..last.

    y = γ·(x - μ)/√(σ² + ε) + β with μ, σ² (biased) over those axes, in fp32 for fp16 x; γ, β
    have shape ``x.shape[begin_params_axis:]`` (or None for 1 and 0).

    Raises:
        ValueError: for an axis out of range or γ/β of the wrong shape.
        TypeError: for non-float tensors.
    """
    x = float_tensor(x, "layer_norm")
    norm_axis = check_axis("begin_norm_axis", begin_norm_axis, x.ndim)
    params_axis = check_axis("begin_params_axis", begin_params_axis, x.ndim)
    axes = tuple(range(norm_axis, x.ndim))
    if type(eps) is not float or not 0.0 < eps < math.inf:
        eps = check_float("eps", eps, low=0, low_open=True, owner="layer_norm")
    gamma, beta = _params(gamma, beta, x.shape[params_axis:], x, "layer_norm",
                          f"x.shape[begin_params_axis:] with begin_params_axis={begin_params_axis}")
    param_shape = (1,) * params_axis + x.shape[params_axis:]
    return Normalize.apply(x, gamma, beta, axes=axes, param_shape=param_shape, eps=eps,
                           stats=_moments(x.data, axes), through_stats=True)
