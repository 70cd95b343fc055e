"""TF's ``LossScaleOptimizer``: scale the loss, unscale the gradients, skip non-finite steps.

::

    opt = LossScaleOptimizer(nn.Momentum(net.trainable_params(), 0.1, 0.9), "dynamic")
    loss, grads = value_and_grad(lambda x, y: opt.get_scaled_loss(loss_fn(net(x), y)),
                                 None, opt.parameters)(x, y)
    opt.apply_gradients(zip(opt.get_unscaled_gradients(grads), opt.parameters))

``minimize(loss, var_list)`` does all of it in one call (``loss`` a zero-argument function, or a
Tensor: it carries its graph, so no ``GradientTape`` is needed). Keras's hyper-parameters are
read and set through the wrapper on the inner optimizer, by Keras's names or minigrad's
(``opt.learning_rate``, ``opt.beta_1`` is the inner Adam's ``beta1``); other attributes are
the wrapper's own, as Keras has it.

One difference from TF: with a ``FixedLossScale`` TF applies non-finite gradients; here
``apply_gradients`` skips them for every loss scale, so a non-finite step never reaches the
parameters or the optimizer state. As Keras's, ``iterations`` counts every ``apply_gradients``
call, the skipped ones included (TF's ``testIterationsIncremented``); the inner optimizer's
``global_step``, which learning-rate schedules and Adam's bias correction read, counts the
applied updates only, as in the MindSpore and PyTorch faces (Keras's schedules read
``iterations``), so the three faces train to the same bits.

In data-parallel mode the overflow flag is all-reduced where it is decided, and
``apply_gradients`` all-reduces the gradients before it decides (``nn.DistributedGradReducer``),
so every rank applies or skips the same step and reports the same parameters.
"""
import numpy

from minigrad import backend, communication
from minigrad import dtype as dtypes
from minigrad._checks import (check_bool, check_callable, check_float, check_int, check_items,
                              check_non_negative, check_operand, check_positive_int,
                              check_relation, check_type)
from minigrad.amp import float_status
from minigrad.autograd import GradOperation
from minigrad.amp.core import float32_scale
from minigrad.mixed_precision.loss_scale import DynamicLossScale, FixedLossScale, _as_period, _get
from minigrad.nn.layers.normalization import running_stats
from minigrad.nn.distributed import DistributedGradReducer
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor

# Keras's hyper-parameters (set through ``_set_hyper``) that the wrapper delegates to the inner
# optimizer: Keras's name (or minigrad's) -> the inner optimizer's attribute, with its check
_OPEN_UNIT = {"low": 0.0, "high": 1.0, "low_open": True, "high_open": True}
_HYPERPARAMETERS = {
    "learning_rate": ("learning_rate", None), "lr": ("learning_rate", None),
    "beta_1": ("beta1", _OPEN_UNIT), "beta_2": ("beta2", _OPEN_UNIT),
    "beta1": ("beta1", _OPEN_UNIT), "beta2": ("beta2", _OPEN_UNIT),
    "momentum": ("momentum", {"low": 0.0}), "rho": ("decay", {"low": 0.0}),
}


class _DefaultScale:
    """The default of ``LossScaleOptimizer``'s ``loss_scale``: a dynamic scale (TF 2.4's
    ``dynamic=True``), told apart from an explicit None, which TF refuses."""

    def __repr__(self):
        return "'dynamic'"


_DEFAULT_SCALE = _DefaultScale()
_OWNER = "LossScaleOptimizer"


class LossScaleOptimizer:
    """Wrap a minigrad optimizer with a loss scale.

    Two spellings, as TensorFlow has them:

    * ``tf.keras.mixed_precision.experimental.LossScaleOptimizer(optimizer, loss_scale)``:
      ``LossScaleOptimizer(opt, "dynamic")``, ``LossScaleOptimizer(opt, 128)``,
      ``LossScaleOptimizer(opt, DynamicLossScale(...))``;
    * TF >= 2.4's ``tf.keras.mixed_precision.LossScaleOptimizer(inner_optimizer, dynamic=True,
      initial_scale=None, dynamic_growth_steps=None)``: ``dynamic=True`` is a
      ``DynamicLossScale(initial_scale or 2**15, dynamic_growth_steps or 2000)``,
      ``dynamic=False`` a ``FixedLossScale(initial_scale)``.

    Args:
        optimizer: a minigrad ``Optimizer`` (has ``parameters`` and ``apply_gradients``), not
            another ``LossScaleOptimizer`` (as TF refuses it).
        loss_scale: anything ``mixed_precision.get`` accepts except None, or a NumPy scalar
            (taken as its Python number; ``get``, as TF's, takes only int and float). Left out,
            it is "dynamic" (or what the TF 2.4 keywords say); an explicit None raises
            ``ValueError("loss_scale cannot be None.")`` as TF's. A bool as the second positional
            argument is ``dynamic`` (the TF 2.4 order).
        dynamic: the TF 2.4 keyword (not with ``loss_scale``): a dynamic scale or a fixed one.
        initial_scale: the TF 2.4 keyword (not with ``loss_scale``): the first scale.
        dynamic_growth_steps: the TF 2.4 keyword (not with ``loss_scale``): clean steps before
            the scale grows.

    Attributes:
        loss_scale: the ``LossScale``. Calling it gives the current scale as a float32 Tensor
            (the experimental API); ``float(opt.loss_scale)`` and ``opt.loss_scale.numpy()``
            read it as TF 2.4's ``loss_scale`` Tensor is read.
        dynamic_counter: clean steps since the scale last changed (None for a fixed scale).
        dynamic, initial_scale, dynamic_growth_steps: as TF 2.4's properties.
        iterations: Keras's step count: one more for every ``apply_gradients`` (``minimize``)
            call, applied or skipped (the inner optimizer's ``global_step`` plus the steps this
            wrapper skipped); setting it sets ``global_step`` and forgets the skips.

    Raises:
        TypeError: ``optimizer`` is not an optimizer; ``loss_scale`` together with a TF 2.4
            keyword; ``dynamic`` not a bool.
        ValueError: a bad ``loss_scale`` (None included); ``optimizer`` is a LossScaleOptimizer;
            ``dynamic=False`` without ``initial_scale`` or with ``dynamic_growth_steps`` (TF's
            errors).
    """

    def __init__(self, optimizer, loss_scale=_DEFAULT_SCALE, *, dynamic=None, initial_scale=None,
                 dynamic_growth_steps=None):
        if isinstance(optimizer, LossScaleOptimizer):
            raise ValueError(f"LossScaleOptimizer cannot wrap another LossScaleOptimizer, but "
                             f"got: {optimizer!r}")
        check_relation("optimizer", optimizer, hasattr(optimizer, "apply_gradients")
                       and hasattr(optimizer, "parameters"),
                       "a minigrad Optimizer (with parameters and apply_gradients)",
                       error=TypeError, owner=_OWNER)
        if loss_scale is None:  # TF: an explicit None is an error, not the default
            raise ValueError("LossScaleOptimizer: loss_scale cannot be None. (leave it out for a "
                             "dynamic loss scale, or pass 'dynamic', a number or a LossScale)")
        if isinstance(loss_scale, bool):  # TF 2.4's positional order: (inner_optimizer, dynamic)
            if dynamic is not None:
                raise TypeError("LossScaleOptimizer: got 'dynamic' both positionally and by "
                                "keyword")
            check_relation("loss_scale", loss_scale, loss_scale or initial_scale is not None,
                           "True, or False with initial_scale (a bool there is TF 2.4's "
                           "'dynamic')", owner=_OWNER)
            loss_scale, dynamic = _DEFAULT_SCALE, loss_scale
        keras = any(v is not None for v in (dynamic, initial_scale, dynamic_growth_steps))
        if keras and loss_scale is not _DEFAULT_SCALE:
            raise TypeError("LossScaleOptimizer: pass either 'loss_scale' (the experimental "
                            "API) or 'dynamic'/'initial_scale'/'dynamic_growth_steps' (TF 2.4), "
                            "not both")
        if keras:
            scale = _keras_loss_scale(True if dynamic is None else dynamic, initial_scale,
                                      dynamic_growth_steps)
        else:
            if isinstance(loss_scale, numpy.number) and numpy.ndim(loss_scale) == 0:
                loss_scale = loss_scale.item()  # a scale computed with NumPy: its Python number
            scale = _get("dynamic" if loss_scale is _DEFAULT_SCALE else loss_scale,
                         "loss_scale", owner=_OWNER)
        self.inner_optimizer = optimizer
        self.loss_scale = scale
        self._skipped = 0  # steps skipped through this wrapper: iterations counts them
        self._loss = None
        self._checked = None   # (ids of the unscaled arrays, overflow) from get_unscaled_gradients
        self._reducer = (DistributedGradReducer(optimizer.parameters)
                         if communication.is_data_parallel() else None)

    def __repr__(self):
        return f"LossScaleOptimizer({self.inner_optimizer!r}, loss_scale={self.loss_scale!r})"

    @property
    def dynamic(self):
        """Whether the loss scale changes with overflows (TF 2.4's ``dynamic``)."""
        return self.loss_scale.core.dynamic

    @property
    def dynamic_counter(self):
        """Clean steps since the scale last changed, or None for a fixed scale (TF 2.4)."""
        return self.loss_scale.core.counter if self.dynamic else None

    @property
    def initial_scale(self):
        """The scale the optimizer started with (TF 2.4's ``initial_scale``)."""
        config = self.loss_scale.get_config()
        return config.get("initial_loss_scale", config.get("loss_scale_value"))

    @property
    def dynamic_growth_steps(self):
        """Clean steps between growths, or None for a fixed scale (TF 2.4)."""
        return self.loss_scale.core.growth_interval

    @property
    def iterations(self):
        """Keras's ``iterations``: the steps applied (the inner optimizer's ``global_step``)
        plus the steps skipped through this wrapper, as Keras's ``LossScaleOptimizer`` counts a
        skipped step too."""
        return self.inner_optimizer.global_step + self._skipped

    @iterations.setter
    def iterations(self, value):
        value = check_int("iterations", value, low=0, owner="LossScaleOptimizer")
        self.inner_optimizer.global_step, self._skipped = value, 0

    def count_skipped_step(self):
        """Count a step skipped outside ``apply_gradients`` (``Model.train``'s loss-scaled
        step, as Keras's ``fit``) in ``iterations``."""
        self._skipped += 1

    parameters = property(lambda self: self.inner_optimizer.parameters)
    last_report = property(lambda self: self.loss_scale.last_report)

    def __getattr__(self, name):
        # reached only when normal lookup fails: a hyper-parameter of the inner optimizer
        inner = self.__dict__.get("inner_optimizer")
        entry = _HYPERPARAMETERS.get(name)
        if entry is not None and inner is not None and hasattr(inner, entry[0]):
            return getattr(inner, entry[0])
        raise AttributeError(f"'LossScaleOptimizer' object has no attribute {name!r}")

    def __setattr__(self, name, value):
        inner = self.__dict__.get("inner_optimizer")
        entry = _HYPERPARAMETERS.get(name)
        if entry is None or inner is None or not hasattr(inner, entry[0]):
            object.__setattr__(self, name, value)
        elif entry[0] == "learning_rate":
            _set_learning_rate(inner, value)
        else:
            setattr(inner, entry[0], check_float(name, value, **entry[1],
                                                 owner="LossScaleOptimizer"))

    def minimize(self, loss, var_list=None, grad_loss=None, tape=None):
        """Keras's ``minimize``: the gradients of ``loss * scale`` with respect to ``var_list``,
        unscaled, then ``apply_gradients`` (which skips the step on inf/NaN and updates the
        scale).

        Args:
            loss: a zero-argument function returning the loss (TF 2's eager form), or a loss
                Tensor (its graph is kept: minigrad needs no tape).
            var_list: a Parameter, a list of them, or a zero-argument function returning one;
                None: the inner optimizer's parameters. They must be the inner optimizer's.
            grad_loss: None, or the gradient to seed ``loss`` with (Keras's ``grad_loss``).
            tape: must be None (minigrad has no ``GradientTape``).

        Returns:
            True if the gradients were applied, False if the step was skipped.

        Raises:
            TypeError: ``tape`` given; ``loss`` neither a function nor a Tensor; a ``var_list``
                that is not a Parameter or an iterable of them; a ``grad_loss`` that is not a
                Tensor, a number or an array.
            ValueError: an empty ``var_list``; as ``apply_gradients`` (a parameter of the
                optimizer without a gradient).
        """
        owner = "LossScaleOptimizer.minimize"
        check_relation("tape", tape, tape is None, "None (minigrad has no GradientTape; pass the "
                       "loss as a function, or a Tensor, which carries its graph)",
                       error=TypeError, owner=owner)
        if grad_loss is not None and not isinstance(grad_loss, Tensor):
            check_operand("grad_loss", grad_loss, owner=owner)
        params = self._var_list(var_list)
        if isinstance(loss, Tensor):
            scaled = self.get_scaled_loss(_seeds(loss, grad_loss))

            def forward():  # the graph exists already
                return scaled
        else:
            check_callable("loss", loss, owner="LossScaleOptimizer.minimize")

            def forward():
                return self.get_scaled_loss(_seeds(loss(), grad_loss))
        seed = Tensor(numpy.float32(1.0)) if grad_loss is None else grad_loss
        grads = GradOperation(get_by_list=True, sens_param=True)(forward, params)(seed)
        return self.apply_gradients(zip(self.get_unscaled_gradients(grads), params))

    def _var_list(self, var_list):
        if var_list is None:
            return list(self.parameters)
        if callable(var_list) and not isinstance(var_list, Tensor):
            var_list = var_list()
        owner = "LossScaleOptimizer.minimize"
        if isinstance(var_list, Tensor):
            return [check_type("var_list", var_list, Parameter, owner=owner)]
        var_list = check_items("var_list", var_list, Parameter, expected="a Parameter, an "
                               "iterable of them or a function returning one", owner=owner)
        return check_relation("var_list", var_list, len(var_list) > 0, "a non-empty list of "
                              "Parameters (None: the optimizer's)", owner=owner)

    def get_scaled_loss(self, loss):
        """``loss * scale`` (the scale cast to the loss dtype); ``loss`` may be a zero-arg
        callable.

        Raises:
            TypeError: for a ``loss`` that is neither a Tensor nor a function.
        """
        if not isinstance(loss, Tensor):
            if callable(loss):
                return lambda: self.get_scaled_loss(loss())
            check_type("loss", loss, Tensor, expected="a Tensor or a zero-argument function "
                       "returning one", owner="LossScaleOptimizer.get_scaled_loss")
        self._loss = loss
        return loss * self.loss_scale.core.scale

    def get_unscaled_gradients(self, grads):
        """A new list: each gradient times 1/scale (None kept; fp16 gradients come back fp32).

        Gradients that carry a graph (the inner gradients of a gradient penalty, computed
        inside the loss) are unscaled by recorded ops, so the penalty stays differentiable;
        an inf or NaN among them reaches the loss, the outer gradients and ``apply_gradients``'
        check.

        Raises:
            TypeError: for ``grads`` that are not an iterable of Tensors (or None).
        """
        if not isinstance(grads, (list, tuple)):
            grads = _check_grads("grads", grads, "get_unscaled_gradients")
        try:  # each step's gradients: looked at one by one only on failure
            recorded = any(g is not None and g.requires_grad for g in grads)
        except AttributeError:
            _check_grads("grads", grads, "get_unscaled_gradients")
            raise
        if recorded:
            inverse = float_status.inverse(self.loss_scale.core.scale)
            return [None if g is None else g.astype(dtypes.acc_dtype(g.dtype)) * inverse
                    for g in grads]
        # unscale_and_check scales fp32/fp64 arrays in place (so copy those: the caller keeps
        # its gradients) and returns fp16 ones as new fp32 arrays (no copy needed)
        arrays = [None if g is None else g.data if g.dtype == dtypes.float16 else g.data.copy()
                  for g in grads]
        arrays, overflow = float_status.unscale_and_check(arrays, self.loss_scale.core.scale)
        self._checked = ([id(a) for a in arrays if a is not None], overflow)
        return [None if a is None else Tensor(a, device=backend.device_of(a)) for a in arrays]

    def apply_gradients(self, grads_and_vars):
        """Update the loss scale and apply the (unscaled) gradients unless one is inf/NaN.

        Args:
            grads_and_vars: ``(gradient, parameter)`` pairs, or gradients in the order of
                ``optimizer.parameters``.

        Returns:
            True if the gradients were applied, False if the step was skipped (``iterations``
            counts it all the same, as Keras's).

        Raises:
            TypeError: ``grads_and_vars`` that is not an iterable of pairs or gradients.
            ValueError: naming the parameters that have no gradient, or a count mismatch.
        """
        if not isinstance(grads_and_vars, (list, tuple)):
            grads_and_vars = check_items("grads_and_vars", grads_and_vars, object,
                                         expected=_PAIRS, owner="apply_gradients")
        grads = self._ordered(list(grads_and_vars), grads_and_vars)
        try:  # each step's gradients: looked at one by one only on failure
            arrays = [g.data for g in grads]
        except AttributeError:
            check_relation("grads_and_vars", grads_and_vars, all(
                isinstance(g, Tensor) for g in grads), _PAIRS + ", each gradient a Tensor",
                error=TypeError, owner="apply_gradients")
            raise
        checked = self._checked
        if checked is not None and checked[0] == [id(a) for a in arrays]:
            overflow = checked[1]
        else:
            overflow = float_status.check(arrays)
        self._checked = None
        if self._reducer is not None:  # every rank, every step: the report names agree too
            grads = self._reducer(grads)
            arrays = [g.data for g in grads]
        names = [p.name for p in self.parameters]
        apply = self.loss_scale._decide(overflow, self._loss, names, arrays)
        self._loss = None
        if apply:
            self.inner_optimizer.apply_gradients(tuple(grads))
            running_stats.commit()
        else:  # the forward passes' BatchNorm statistics go with the skipped step
            running_stats.rollback()
            self._skipped += 1  # Keras counts the skipped step in iterations
        return apply

    def _ordered(self, items, given):
        params = list(self.parameters)
        if items and isinstance(items[0], tuple):
            try:  # each step's pairs: looked at one by one only on failure
                by_param = {id(v): g for g, v in items}
            except (TypeError, ValueError):  # an item that is no (gradient, parameter) pair
                check_relation("grads_and_vars", given, False, _PAIRS, error=TypeError,
                               owner="apply_gradients")
            missing = [p.name for p in params if by_param.get(id(p)) is None]
            if missing:
                raise ValueError(f"apply_gradients: no gradient for parameters {missing}")
            return [by_param[id(p)] for p in params]
        if len(items) != len(params):
            check_relation("grads_and_vars", given, False, f"(gradient, parameter) pairs or "
                           f"{len(params)} gradients, one per parameter (not {len(items)})",
                           owner="apply_gradients")
        return items


def _seeds(loss, grad_loss):
    """``loss``, once ``grad_loss`` (None or a seed) is known to broadcast to its shape: checked
    before the loss is scaled and backprop runs, naming ``grad_loss``."""
    if grad_loss is not None and isinstance(loss, Tensor):
        shape = tuple(numpy.shape(grad_loss.data if isinstance(grad_loss, Tensor) else grad_loss))
        try:
            fits = numpy.broadcast_shapes(shape, loss.shape) == loss.shape
        except ValueError:
            fits = False
        check_relation("grad_loss", grad_loss, fits, f"a seed that broadcasts to the loss's "
                       f"shape {loss.shape} (not {shape})", owner="LossScaleOptimizer.minimize")
    return loss


_PAIRS = "an iterable of (gradient, parameter) pairs or of gradients"


def _check_grads(name, grads, owner):
    """``grads`` as a list, each a Tensor or None, or a TypeError naming ``name``."""
    return check_items(name, grads, (Tensor, type(None)), expected="an iterable of Tensors (or "
                       "None)", owner=owner)


def _set_learning_rate(inner, value):
    """Keras's ``opt.learning_rate = value`` on a minigrad optimizer with a fixed rate (its 0-d
    ``learning_rate`` Parameter takes the value)."""
    rate = inner.learning_rate
    if not isinstance(rate, Parameter):
        raise TypeError(f"LossScaleOptimizer: the inner optimizer's learning rate is "
                        f"{type(rate).__name__}, not a fixed rate that can be set")
    value = check_non_negative("learning_rate", value, owner="LossScaleOptimizer")
    rate.set_data(Tensor(numpy.float32(value)))


def _keras_loss_scale(dynamic, initial_scale, dynamic_growth_steps):
    """The ``LossScale`` of TF 2.4's ``LossScaleOptimizer`` arguments (TF's checks and errors;
    each argument checked under its own name before the loss scale is made)."""
    dynamic = check_bool("dynamic", dynamic, owner=_OWNER)
    if initial_scale is not None:
        float32_scale(initial_scale, "initial_scale", _OWNER)
        check_relation("initial_scale", initial_scale, dynamic or initial_scale >= 1,
                       "at least 1 for a fixed loss scale (dynamic=False)", owner=_OWNER)
    if dynamic_growth_steps is not None:
        check_positive_int("dynamic_growth_steps",
                           _as_period(dynamic_growth_steps, "dynamic_growth_steps", _OWNER),
                           owner=_OWNER)
    if dynamic:
        return DynamicLossScale(2 ** 15 if initial_scale is None else initial_scale,
                                2000 if dynamic_growth_steps is None else dynamic_growth_steps)
    if initial_scale is None:
        raise ValueError('"initial_scale" must be specified if "dynamic" is False')
    if dynamic_growth_steps is not None:
        raise ValueError(f'"dynamic_growth_steps" must be None if "dynamic" is False, but got: '
                         f"{dynamic_growth_steps}")
    return FixedLossScale(initial_scale)
