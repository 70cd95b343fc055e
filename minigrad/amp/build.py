"""AMP levels: ``build_train_network`` (how ``Model(amp_level=..., loss_scale_manager=...)``
becomes a training cell) and ``auto_mixed_precision`` (the network alone, no loss scaling).

=====  ==================================================  ====================  ==================
level  network                                             loss                  loss scale default
=====  ==================================================  ====================  ==================
O0     unchanged (fp32)                                    as the network        none
O1     white-list ops (matmul, conv) in fp16 via autocast  fp32 (autocast list)  none
O2     fp16 parameters and compute; BatchNorm/LayerNorm    inputs cast to fp32   DynamicLossScale-
       in fp32 (output cast back to fp16); the optimizer                         Manager()
       keeps fp32 master weights
O3     everything fp16, BatchNorm included                 inputs cast to fp32   none
=====  ==================================================  ====================  ==================

Keyword arguments override a level's defaults: ``cast_model_type`` (float16/bfloat16/float32),
``keep_batchnorm_fp32`` (bool), ``loss_scale_manager`` (a ``LossScaleManager`` or None).

``dtype`` (float16 by default, or ``minigrad.bfloat16``) is the level's low-precision dtype: the
table's "fp16" reads "bf16" with it. bfloat16 has float32's 8-bit exponent, so its gradients
neither overflow nor underflow where float32's would not: O2 then has no loss scale by default
(as Keras's ``mixed_bfloat16`` policy and PyTorch's bf16 autocast, which need no GradScaler).
A ``loss_scale_manager`` passed explicitly still scales the loss: a power-of-two scale changes
no bf16 gradient (short of the float32 range), so training follows the same path at the cost of
the scaling and the overflow checks.

``auto_mixed_precision(network, amp_level)`` is MindSpore 2.x's: the compute dtypes of the
level (``Cell.to_float``; O1 through autocast) with the Parameters left in float32, and the
network's output cast to float32. Every builder checks all of its arguments before it changes
anything: a refused call leaves the network, the optimizer and the manager as they were.
"""
from minigrad import dtype as dtypes
from minigrad import ops
from minigrad._checks import check_bool, check_in, check_relation, check_type
from minigrad.amp.managers import DynamicLossScaleManager, LossScaleManager
from minigrad.nn.cell import Cell
from minigrad.tensor import Tensor
from minigrad.nn.wrap import (TrainOneStepCell, WithLossCell, check_loss_fn, check_optimizer,
                              check_optimizer_owns)

LEVELS = ("O0", "O1", "O2", "O3")


def _level_config(level, low=dtypes.float16):
    """The defaults of ``level`` with the low-precision dtype ``low``: O2's dynamic loss scale
    only for float16 (bfloat16 has float32's range)."""
    scale = DynamicLossScaleManager() if level == "O2" and low == dtypes.float16 else None
    return {"O0": dict(cast_model_type=dtypes.float32, keep_batchnorm_fp32=False,
                       loss_scale_manager=None),
            "O1": dict(cast_model_type=dtypes.float32, keep_batchnorm_fp32=False,
                       loss_scale_manager=None),
            "O2": dict(cast_model_type=low, keep_batchnorm_fp32=True, loss_scale_manager=scale),
            "O3": dict(cast_model_type=low, keep_batchnorm_fp32=False,
                       loss_scale_manager=None)}[level]


def _check_level(level):
    """``level``, with ``"auto"`` resolved (O2 on a GPU, as MindSpore's ``"auto"``); TypeError
    for a non-str, ValueError for an unknown level or ``"auto"`` off the GPU."""
    owner = "build_train_network"
    check_in("level", level, LEVELS + ("auto",), owner=owner)
    if level == "auto":
        from minigrad.context import get_context
        target = get_context("device_target")
        check_relation("level", level, target == "GPU",
                       f"one of {list(LEVELS)} when device_target is {target!r} ('auto' means O2 "
                       f"on a GPU)", owner=owner)
        return "O2"
    return level


def _apply_autocast(network, dtype):
    """Level O1, in place: every call of ``network`` (train step, ``Model.eval``/``predict``, or a
    direct call) runs its ``construct`` under ``autocast(dtype=dtype)`` (white-list ops in fp16
    or bf16)."""
    network.__dict__["_autocast_dtype"] = dtype
    return network


class _WithLossCellFp32(WithLossCell):
    """``loss_fn(cast(net(x), fp32), cast(label, fp32))``: the loss of an fp16 (bf16) network in
    fp32."""

    def construct(self, data, label):
        out = self._backbone(data)
        return self._loss_fn(_to_fp32(out), _to_fp32(label))


def _to_fp32(t):
    # fp16 and bf16 to fp32, others unchanged
    return ops.cast(t, dtypes.float32) if dtypes.is_low_precision(t.dtype) else t


class _OutputTo32(Cell):
    """``network(*inputs)`` with its floating outputs (a Tensor or a tuple of them) cast to
    float32: the wrapper ``auto_mixed_precision`` returns (MindSpore's ``_OutputTo32``). Built
    with ``auto_prefix=False``: the parameter names are the network's."""
    _takes_policy = False  # not a layer: no Keras dtype policy

    def __init__(self, network):
        super().__init__(auto_prefix=False)
        self._backbone = network

    def construct(self, *inputs, **kwargs):
        out = self._backbone(*inputs, **kwargs)
        if isinstance(out, tuple):
            return tuple(_to_fp32(o) if isinstance(o, Tensor) else o for o in out)
        return _to_fp32(out)


class _OutputTo:
    """Forward hook casting a normalization cell's float32 output to the network's dtype."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __call__(self, cell, inputs, output):
        return ops.cast(output, self.dtype)


def _normalization_cells(network):
    """The cells a level keeps in float32 (MindSpore's black list): BatchNorm and LayerNorm."""
    from minigrad import nn
    kinds = nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm
    return [cell for _, cell in network.cells_and_names() if isinstance(cell, kinds)]


def _compute_in_low(network, keep_normalization_fp32, dtype):
    """``network.to_float(dtype)`` (float16 or bfloat16); with ``keep_normalization_fp32`` its
    BatchNorm and LayerNorm cells compute in float32 (their own Parameters cast back to float32)
    and cast their output to ``dtype``. Returns those cells."""
    network.to_float(dtype)
    norms = _normalization_cells(network) if keep_normalization_fp32 else []
    for cell in norms:
        cell.to_float(dtypes.float32)
        cell.register_forward_hook(_OutputTo(dtype))
    return norms


def _check_cell(name, value, owner):
    if not isinstance(value, Cell):
        check_type(name, value, Cell, owner=owner)


def cast_network(network, cast_model_type, keep_batchnorm_fp32):
    """Cast ``network`` in place: fp16 (or bf16) compute and parameters; normalization cells kept
    fp32 (with their output cast back to the low dtype) when ``keep_batchnorm_fp32``. A
    ``cast_model_type`` of float32 leaves the network as it is. Returns ``network``.

    Raises:
        TypeError: ``network`` is not a Cell, ``cast_model_type`` not float16/bfloat16/float32 or
            ``keep_batchnorm_fp32`` not a bool; nothing is cast then.
    """
    _check_cell("network", network, "cast_network")
    cast_model_type = _cast_model_type(cast_model_type, "cast_network")
    check_bool("keep_batchnorm_fp32", keep_batchnorm_fp32, owner="cast_network")
    if not dtypes.is_low_precision(cast_model_type):
        return network
    norms = _compute_in_low(network, keep_batchnorm_fp32, cast_model_type)
    network.cast_parameters(cast_model_type)
    for cell in norms:
        cell.cast_parameters(dtypes.float32)
    return network


def auto_mixed_precision(network, amp_level="O0", dtype=dtypes.float16):
    """The network computing at an AMP level, with no loss scaling (MindSpore 2.x's
    ``amp.auto_mixed_precision``).

    * "O0": ``network`` unchanged.
    * "O1": ``network``'s every call runs under ``amp.autocast(dtype=dtype)`` (matmul, dense and
      conv in ``dtype``; softmax, log, sums, norms and losses in fp32).
    * "O2": ``network.to_float(dtype)`` with BatchNorm and LayerNorm computing in float32
      (their output cast back to ``dtype``).
    * "O3": ``network.to_float(dtype)``, every cell.

    The Parameters stay float32 (``to_float`` casts them where they are read), so an optimizer
    built on ``network.trainable_params()`` before or after is a plain fp32 one. For O1-O3 the
    result is a new Cell around ``network`` whose outputs are cast to float32 (MindSpore's
    ``_OutputTo32``); its parameters are ``network``'s, under the same names. The network is
    changed in place (its compute dtypes), as in MindSpore. Where MindSpore's O1 casts each
    white-list op's output back to float32, minigrad's autocast leaves it in float16 (PyTorch's
    rule); the network's outputs are cast to float32 in both.

    Args:
        network: a Cell.
        amp_level: "O0" (default), "O1", "O2" or "O3".
        dtype: the low-precision dtype: float16 (default) or ``minigrad.bfloat16`` (MindSpore
            2.x's ``dtype``, which takes ``mstype.float16`` or ``mstype.bfloat16``).

    Raises:
        TypeError: ``network`` is not a Cell, or ``amp_level`` not a str.
        ValueError: an unknown ``amp_level``, or a ``dtype`` other than float16 or bfloat16.
            Nothing is changed then.
    """
    owner = "auto_mixed_precision"
    _check_cell("network", network, owner)
    check_in("amp_level", amp_level, LEVELS, owner=owner)
    low = _low_dtype(dtype, owner)
    if amp_level == "O0":
        return network
    if amp_level == "O1":
        _apply_autocast(network, low)
    else:
        _compute_in_low(network, amp_level == "O2", low)
    return _OutputTo32(network)


def _low_dtype(value, owner):
    """float16 or bfloat16 (a dtype, type or name), else ValueError naming ``dtype``."""
    try:
        low = dtypes.as_dtype(value, "dtype", owner=owner)
    except (TypeError, ValueError):
        low = None
    check_relation("dtype", value, low is not None and dtypes.is_low_precision(low),
                   "float16 or bfloat16", owner=owner)
    return low


def _cast_model_type(value, owner):
    """float16, bfloat16 or float32 (a dtype, type or name), else TypeError (MindSpore's
    check_type_name)."""
    try:
        dtype = None if value is None else dtypes.as_dtype(value, "cast_model_type")
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or not (dtypes.is_low_precision(dtype) or dtype == dtypes.float32):
        raise TypeError(f"{owner}: 'cast_model_type' must be float16, bfloat16 or float32, but "
                        f"got {value!r}")
    return dtype


def build_train_network(network, optimizer, loss_fn=None, level="O0", boost_level="O0", **kwargs):
    """Build the training cell for an AMP level (see the module docstring for the table).

    Args:
        network: the backbone (or the network with its loss when ``loss_fn`` is None).
        optimizer: a minigrad optimizer over ``network``'s parameters.
        loss_fn: the loss Cell, or None.
        level: "O0", "O1", "O2", "O3" or "auto" (GPU only: O2). Default "O0".
        boost_level: accepted for MindSpore compatibility; only "O0".

    Other Parameters:
        dtype: the level's low-precision dtype, float16 (default) or ``minigrad.bfloat16``:
            O1's autocast dtype and O2/O3's ``cast_model_type``; with bfloat16, O2 has no loss
            scale by default (see the module docstring).
        cast_model_type: float16, bfloat16 or float32, overriding the level's default.
        keep_batchnorm_fp32: a bool, overriding the level's default.
        loss_scale_manager: a ``LossScaleManager`` or None, overriding the level's default.

    Returns:
        ``TrainOneStepWithLossScaleCell`` when the manager has an update cell (dynamic, or fixed
        with ``drop_overflow_update=True``), else ``TrainOneStepCell(network, optimizer,
        sens=loss_scale)``; in training mode.

    Raises:
        TypeError: for a non-str level, a cast_model_type other than float16/bfloat16/float32, a
            non-bool keep_batchnorm_fp32, a loss_scale_manager that is not a LossScaleManager, a
            network that is not a Cell, a loss_fn that is not a callable instance, or an optimizer
            that cannot run a step.
        ValueError: for an unknown level or keyword argument, a ``dtype`` other than float16 or
            bfloat16, or an optimizer that holds none of the network's parameters (made for
            another network).

    Everything is checked before the network is cast in place: a refused build leaves the
    network, the optimizer and the manager as they were.
    """
    from minigrad.nn.loss_scale import TrainOneStepWithLossScaleCell

    level = _check_level(level)
    check_in("boost_level", boost_level, ("O0", "O1", "O2"), owner="build_train_network")
    check_relation("boost_level", boost_level, boost_level == "O0",
                   "'O0' (MindSpore's boost levels 'O1' and 'O2' are not implemented)",
                   owner="build_train_network")
    low = _low_dtype(kwargs.pop("dtype", dtypes.float16), "build_train_network")
    config = _level_config(level, low)
    for key, value in kwargs.items():
        if key not in config:
            raise ValueError(f"build_train_network: unsupported argument {key!r}; expected one of "
                             f"{sorted(config) + ['dtype']}")
        config[key] = value
    manager = config["loss_scale_manager"]
    if manager is not None and not isinstance(manager, LossScaleManager):
        raise TypeError("build_train_network: 'loss_scale_manager' must be a LossScaleManager or "
                        f"None, but got {type(manager).__name__}")
    if not isinstance(config["keep_batchnorm_fp32"], bool):
        raise TypeError(f"build_train_network: 'keep_batchnorm_fp32' must be a bool, but got "
                        f"{config['keep_batchnorm_fp32']!r}")
    cast_type = _cast_model_type(config["cast_model_type"], "build_train_network")
    # everything checked before the network is cast in place: a refused build leaves it as it was
    _check_cell("network", network, "build_train_network")
    if loss_fn is not None:
        check_loss_fn(loss_fn)
    check_optimizer(optimizer)
    check_optimizer_owns(network, optimizer, "build_train_network")

    if level == "O1" and not dtypes.is_low_precision(cast_type):
        _apply_autocast(network, low)
    cast_network(network, cast_type, config["keep_batchnorm_fp32"])
    if loss_fn is not None:
        network = (_WithLossCellFp32(network, loss_fn) if dtypes.is_low_precision(cast_type)
                   else WithLossCell(network, loss_fn))

    loss_scale = 1.0
    if manager is not None:
        loss_scale = manager.get_loss_scale()
        update_cell = manager.get_update_cell()
        if update_cell is not None:
            return TrainOneStepWithLossScaleCell(network, optimizer,
                                                 scale_sense=update_cell).set_train()
    return TrainOneStepCell(network, optimizer, loss_scale).set_train()
