"""``autocast``: run matmul-like ops in fp16 and range-sensitive ops in fp32, whatever the inputs;
``custom_fwd``/``custom_bwd`` for custom functions under it.

::

    with minigrad.amp.autocast():          # or @autocast() on a function
        logits = net(x)                    # Dense/Conv matmuls in fp16 (fp32 accumulation)
        loss = loss_fn(logits, y)          # softmax, log, sums, norms, losses in fp32

The mode is ``minigrad._config.config.autocast_dtype``. The op lists are labels on the Function
classes (``autocast = "low"`` on ``ops.linalg.MatMul``/``Dense``, ``ops.conv.Conv2d`` and
``ops.attention.Attention``, which takes fp16 q, k, v and computes its scores and softmax in fp32;
``"fp32"`` on softmax, log-softmax, exp, log, pow, sum, mean, the norms and the softmax
cross-entropy), and ``Function.apply`` casts a labelled op's inputs while the mode is set;
``labelled_ops()`` lists them. Unlabelled ops run in the dtype of their inputs (fp16 + fp32
promotes to fp32 as usual). As in PyTorch, float64 inputs are not eligible: they stay float64
whether or not autocast is on. Casts are ordinary differentiable ``ops.cast`` nodes, so
gradients return to fp32 parameters in fp32.
"""
import functools

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_callable, check_relation, check_type
from minigrad._config import config, using_config
from minigrad.autograd.function import Function
from minigrad.ops import cast
from minigrad.tensor import Tensor


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def labelled_ops():
    """``(low_precision_classes, fp32_classes)``: the Function classes defined so far whose
    ``autocast`` label is ``"low"`` (inputs cast to the autocast dtype) and ``"fp32"`` (inputs
    cast to float32), each tuple sorted by module and name. A class is defined before its op can
    run, so the lists hold every op autocast can act on at that point."""
    found = {"low": set(), "fp32": set()}
    for cls in _subclasses(Function):
        if cls.autocast is not None:
            found[cls.autocast].add(cls)
    return tuple(sorted(found["low"], key=_by_name)), tuple(sorted(found["fp32"], key=_by_name))


def _by_name(cls):
    return cls.__module__, cls.__qualname__


_TORCH_DEVICES = {"cpu": "CPU", "cuda": "GPU"}


def is_device_name(value):
    """Whether ``value`` names a device as PyTorch does (``"cpu"``, ``"cuda"``, ``"cuda:0"``) or
    as minigrad does (``"CPU"``, ``"GPU"``)."""
    if not isinstance(value, str):
        return False
    name = value.split(":", 1)[0]
    return name.lower() in _TORCH_DEVICES or name.upper() in backend.DEVICES


def check_device(name, value, *, owner=None):
    """The minigrad device (``"CPU"``/``"GPU"``) a PyTorch device string stands for, checked
    against the context's ``device_target`` (where minigrad creates tensors): PyTorch picks the
    device from this argument, minigrad from the context, so the two must agree.

    Raises:
        TypeError: ``value`` is not a str. ValueError: an unknown device, or another device than
            the context's (the message says which ``set_context`` call or argument fits).
    """
    check_type(name, value, str, expected="a str such as 'cpu' or 'cuda'", owner=owner)
    check_relation(name, value, is_device_name(value), "'cpu' or 'cuda' (or 'CPU'/'GPU')",
                   owner=owner)
    base = value.split(":", 1)[0]
    device = _TORCH_DEVICES.get(base.lower()) or base.upper()
    target = config.device_target
    torch_name = {v: k for k, v in _TORCH_DEVICES.items()}[target]
    check_relation(name, value, device == target,
                   f"{torch_name!r} as the context's device_target is {target!r} ({value!r} is "
                   f"minigrad's {device!r}: pass {name}={torch_name!r} or call "
                   f"set_context(device_target={device!r}) first)", owner=owner)
    return device


class autocast:
    """Context manager and decorator turning autocast on (or off with ``enabled=False``).

    Spelled as PyTorch 2.x's ``torch.autocast(device_type, dtype=None, enabled=True,
    cache_enabled=None)``: ``autocast("cpu")``, ``autocast(device_type="cpu", dtype=float16)``;
    ``autocast()`` and ``autocast(dtype)`` (no device) work too.

    Args:
        device_type: ``"cpu"``/``"cuda"`` (or ``"CPU"``/``"GPU"``), checked against the
            context's ``device_target``; None (default): the context's device.
        dtype: the low-precision dtype, float16 or ``minigrad.bfloat16`` (the ``minigrad[lowp]``
            extra). Default float16 (PyTorch's default is bfloat16 on the CPU and float16 on
            CUDA; minigrad keeps one default for both).
        enabled: False runs the block with autocast off (e.g. a region that must stay fp32).
        cache_enabled: accepted for PyTorch compatibility (a bool or None); minigrad keeps no
            cast cache (each cast is an ordinary graph node).

    Raises:
        TypeError: if ``dtype`` is not float16 or bfloat16, ``enabled`` not a bool,
            ``cache_enabled`` neither a bool nor None, or a positional argument of the wrong
            kind.
        ValueError: an unknown device, or a device other than the context's.
    """

    def __init__(self, *args, device_type=None, dtype=None, enabled=True, cache_enabled=None):
        args = list(args)
        if args and is_device_name(args[0]):
            if device_type is not None:
                raise TypeError("autocast: got 'device_type' both positionally and by keyword")
            device_type = args.pop(0)
        if len(args) > 3:
            raise TypeError(f"autocast takes at most 4 positional arguments (device_type, dtype, "
                            f"enabled, cache_enabled), but got {len(args) + 1}")
        names = ("dtype", "enabled", "cache_enabled")
        given = {"dtype": dtype, "enabled": enabled, "cache_enabled": cache_enabled}
        defaults = {"dtype": None, "enabled": True, "cache_enabled": None}
        for key, value in zip(names, args):
            if given[key] is not defaults[key]:
                raise TypeError(f"autocast: got '{key}' both positionally and by keyword")
            given[key] = value
        dtype, enabled, cache_enabled = (given[key] for key in names)
        if device_type is not None:
            check_device("device_type", device_type, owner="autocast")
        dtype = dtypes.float16 if dtype is None else dtypes.as_dtype(dtype)
        if not dtypes.is_low_precision(dtype):
            raise TypeError(f"autocast: 'dtype' must be float16 or bfloat16, but got {dtype}")
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: 'enabled' must be a bool, but got {enabled!r}")
        if cache_enabled is not None and not isinstance(cache_enabled, bool):
            raise TypeError(f"autocast: 'cache_enabled' must be a bool or None, but got "
                            f"{cache_enabled!r}")
        self.device_type, self.dtype, self.enabled = device_type, dtype, enabled
        self._contexts = []

    def __enter__(self):
        context = using_config(autocast_dtype=self.dtype if self.enabled else None)
        self._contexts.append(context)
        return context.__enter__()

    def __exit__(self, *exc):
        return self._contexts.pop().__exit__(*exc)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(dtype=self.dtype, enabled=self.enabled):
                return fn(*args, **kwargs)
        return wrapped


def custom_fwd(fwd=None, *, device_type=None, cast_inputs=None):
    """Decorator for the ``forward`` of a custom function (``minigrad.autograd.Function``) under
    autocast, as PyTorch's ``torch.amp.custom_fwd``: ``@custom_fwd``, ``@custom_fwd(
    device_type="cpu")``, ``@custom_fwd(cast_inputs=minigrad.float32)`` (below ``@staticmethod``).

    It records autocast's state on ``ctx`` for ``custom_bwd``. With ``cast_inputs`` and autocast
    on, the float16/float32 Tensors among the arguments (in lists, tuples and dicts too) are
    cast to ``cast_inputs`` and ``forward`` runs with autocast off; without ``cast_inputs``, or
    with autocast off, ``forward`` runs in the current state, arguments as they are. (The
    gradients of cast arguments return in the arguments' own dtypes.)

    Args:
        fwd: the ``forward`` to wrap (callable), or None (``@custom_fwd(...)`` with options).
        device_type: ``"cpu"``/``"cuda"`` (or ``"CPU"``/``"GPU"``), checked against the
            context's device (PyTorch 2.4+ requires it; minigrad takes the context's when None).
        cast_inputs: the dtype to run ``forward`` in under autocast (float16 or float32), or
            None.

    Raises:
        TypeError: for a ``fwd`` that is not callable, a ``cast_inputs`` that is not a float
            dtype of minigrad, or a ``device_type`` that is not a str. ValueError: for an unknown
            or another device, or a ``cast_inputs`` name that is no dtype.
    """
    if device_type is not None:
        check_device("device_type", device_type, owner="custom_fwd")
    if cast_inputs is not None:
        cast_inputs = dtypes.as_dtype(cast_inputs, "cast_inputs", owner="custom_fwd")
        check_relation("cast_inputs", cast_inputs, dtypes.is_float(cast_inputs),
                       "a float dtype (float16, bfloat16, float32) or None", error=TypeError,
                       owner="custom_fwd")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    check_callable("fwd", fwd, owner="custom_fwd")

    @functools.wraps(fwd)
    def forward(ctx, *args, **kwargs):
        ctx.autocast_dtype = config.autocast_dtype  # what custom_bwd restores
        if cast_inputs is None or config.autocast_dtype is None:
            return fwd(ctx, *args, **kwargs)
        ctx.autocast_dtype = None
        with using_config(autocast_dtype=None):
            return fwd(ctx, *_cast(args, cast_inputs), **_cast(kwargs, cast_inputs))
    return forward


def custom_bwd(bwd=None, *, device_type=None):
    """Decorator for the ``backward`` of a custom function whose ``forward`` has ``custom_fwd``,
    as PyTorch's ``torch.amp.custom_bwd``: ``backward`` runs in the autocast state ``forward``
    ran in (on with its dtype, or off; by default minigrad runs every backward without autocast,
    in the forward's dtypes).

    Raises:
        TypeError: for a ``bwd`` that is not callable. TypeError, ValueError: for
            ``device_type``, as ``custom_fwd``.
    """
    if device_type is not None:
        check_device("device_type", device_type, owner="custom_bwd")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    check_callable("bwd", bwd, owner="custom_bwd")

    @functools.wraps(bwd)
    def backward(ctx, *args, **kwargs):
        with using_config(autocast_dtype=getattr(ctx, "autocast_dtype", None)):
            return bwd(ctx, *args, **kwargs)
    return backward


def _cast(value, dtype):
    """``value`` with its float16/bfloat16/float32 Tensors cast to ``dtype`` (float64 ones, as
    PyTorch leaves them, and everything else as they are), through lists, tuples and dicts."""
    if isinstance(value, Tensor):
        eligible = dtypes.is_low_precision(value.dtype) or value.dtype == dtypes.float32
        return cast(value, dtype) if eligible else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast(v, dtype) for k, v in value.items()}
    return value
