"""``Model``: MindSpore's high-level train / eval / predict loop around a network.

    model = Model(net, loss_fn=nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                  optimizer=nn.Momentum(net.trainable_params(), 0.1, 0.9),
                  metrics={"acc": Accuracy()}, amp_level="O2")
    model.train(10, train_ds, callbacks=[LossMonitor(), ProgressBar()])
    model.eval(test_ds)          # {'acc': 0.98}

The train network is built once, at construction: ``minigrad.amp.build_train_network(network,
optimizer, loss_fn, level=amp_level, ...)`` — WithLossCell + TrainOneStepCell at O0, fp16 casting
and a ``TrainOneStepWithLossScaleCell`` at O2 — or the network itself when there is neither an
optimizer nor a loss function (it is then already a training cell).

Keras's way is taken too, as ``fit`` does it: a network built under a dtype policy with a loss
scale (``mixed_precision.set_global_policy("mixed_float16")``: a ``DynamicLossScale()``), or an
optimizer given as a ``mixed_precision.LossScaleOptimizer``, trains in a
``TrainOneStepWithLossScaleCell`` whose update cell shares that loss scale (the policy already
set the compute dtypes, so the network is not cast); a skipped step counts in the
``LossScaleOptimizer``'s ``iterations``, as in Keras.
"""
import collections.abc
import warnings

import numpy

from minigrad import dtype as dtypes, ops
from minigrad._checks import (
    check_bool,
    check_callable,
    check_in,
    check_int,
    check_int_tuple,
    check_items,
    check_positive_int,
    check_relation,
    check_type,
    describe,
)
from minigrad._config import no_grad
from minigrad.nn.cell import Cell
from minigrad.nn.loss_scale import TrainOneStepWithLossScaleCell
from minigrad.tensor import Tensor
from minigrad.train.callback.hooks import CallbackList, CallbackParam, RunContext
from minigrad.train.metrics import Loss, get_metrics

AMP_LEVELS = ("O0", "O1", "O2", "O3", "auto")
_AMP_KWARGS = ("loss_scale_manager", "keep_batchnorm_fp32", "dtype", "boost_config_dict",
               "acc_level")


class _EvalCell(Cell):
    """``(loss, outputs, label)`` of ``network(*data)`` against the last input (the label).

    With ``add_cast_fp32`` (fp16 AMP levels) the outputs are cast to float32 first.
    """
    _takes_policy = False  # not a layer: no Keras dtype policy

    def __init__(self, network, loss_fn, add_cast_fp32=False):
        super().__init__(auto_prefix=False)
        self._network = network
        self._loss_fn = loss_fn
        self.add_cast_fp32 = add_cast_fp32

    def construct(self, *inputs):
        *data, label = inputs
        outputs = self._network(*data)
        if self.add_cast_fp32:
            outputs = ops.cast(outputs, dtypes.acc_dtype(outputs.dtype))  # fp16 -> fp32 only
        return self._loss_fn(outputs, label), outputs, label


class Model:
    """Train, evaluate and predict with a network (MindSpore's ``Model``).

    Args:
        network: the backbone; or, when ``loss_fn`` is None, a network that returns the loss
            (or a complete training cell, when ``optimizer`` is None too).
        loss_fn: a loss Cell ``loss_fn(logits, labels)``, or None.
        optimizer: an optimizer over ``network``'s parameters, or None.
        metrics: ``{name: Metric}`` or a set of names (``{"accuracy", "loss"}``) for ``eval``.
        eval_network: a Cell used by ``eval`` instead of ``network`` + ``loss_fn``.
        eval_indexes: with ``eval_network``: ``[loss, predictions, labels]`` positions in its
            outputs (``Loss`` gets the first, other metrics the other two); None: every metric
            gets all outputs.
        amp_level: "O0" (default: fp32), "O1", "O2" (fp16 network, fp32 BatchNorm and loss,
            dynamic loss scaling), "O3" (all fp16, no loss scaling) or "auto" (GPU: O2); see
            ``minigrad.amp.build_train_network``. Applied to ``network`` in place.
        boost_level: accepted for MindSpore compatibility; only "O0".
        loss_scale_manager: a ``minigrad.amp`` ``FixedLossScaleManager`` or
            ``DynamicLossScaleManager`` (overrides the level's default). The update cell it makes
            shares its scale, so ``get_loss_scale()`` follows training step by step.

    Other Parameters:
        keep_batchnorm_fp32: passed to ``build_train_network`` when given.
        dtype: the amp level's low-precision dtype, float16 (default) or ``minigrad.bfloat16``,
            passed to ``build_train_network`` when given (with bfloat16, O2 has no loss scale by
            default).

    A ``network`` created under a Keras dtype policy with a loss scale, or an ``optimizer``
    that is a ``mixed_precision.LossScaleOptimizer``, trains with that loss scale, as Keras's
    ``fit`` does (see the module docstring); ``amp_level`` is then "O0" and no
    ``loss_scale_manager`` is given.

    Raises:
        TypeError: for a non-str ``amp_level``, a ``network`` or ``eval_network`` that is not
            a Cell, a ``loss_fn`` that is not callable, ``eval_indexes`` that are not ints, or a
            ``loss_scale_manager`` that is not one.
        ValueError: for an unknown ``amp_level``/``boost_level``/keyword; ``amp_level`` other
            than "O0" or a ``loss_scale_manager`` without an ``optimizer``; ``metrics`` with
            neither ``loss_fn`` nor ``eval_network``; ``eval_indexes`` not a list of 3; an
            ``amp_level`` other than "O0" or a ``loss_scale_manager`` with a Keras loss scale.

    Every argument is checked before the network is cast: a refused ``Model`` leaves the
    network and the optimizer as they were.
    """

    def __init__(self, network, loss_fn=None, optimizer=None, metrics=None, eval_network=None,
                 eval_indexes=None, amp_level="O0", boost_level="O0", loss_scale_manager=None,
                 **kwargs):
        if not isinstance(network, Cell):
            check_type("network", network, Cell, owner="Model")
        for key in kwargs:
            if key not in _AMP_KWARGS:
                raise ValueError(f"Model: unsupported argument {key!r}; expected one of "
                                 f"{('loss_scale_manager',) + _AMP_KWARGS[1:]}")
        if loss_fn is not None:
            check_callable("loss_fn", loss_fn, owner="Model")
        if eval_network is not None:
            check_type("eval_network", eval_network, Cell, owner="Model")
        if eval_indexes is not None:
            check_int_tuple("eval_indexes", eval_indexes, 3, low=0, scalar=False, owner="Model")
        if loss_scale_manager is not None:
            from minigrad.amp import LossScaleManager
            check_type("loss_scale_manager", loss_scale_manager, LossScaleManager,
                       expected="a FixedLossScaleManager or DynamicLossScaleManager",
                       owner="Model")
        check_in("amp_level", amp_level, AMP_LEVELS, owner="Model")
        check_in("boost_level", boost_level, ("O0", "O1", "O2"), owner="Model")
        if boost_level != "O0":
            raise NotImplementedError(f"Model: boost_level {boost_level!r} is not implemented; "
                                      f"use 'O0'")
        if optimizer is None and amp_level != "O0":
            raise ValueError(f"Model: amp_level={amp_level!r} needs an 'optimizer' (auto mixed "
                             f"precision builds the train network around it)")
        if optimizer is None and loss_scale_manager is not None:
            raise ValueError("Model: the argument 'optimizer' can not be None when "
                             "'loss_scale_manager' is set")
        self._keras_scale = _keras_loss_scale(network, optimizer)
        if self._keras_scale is not None and (amp_level != "O0" or loss_scale_manager is not None):
            raise ValueError(f"Model: the network's Keras dtype policy (or the "
                             f"LossScaleOptimizer) scales the loss already; pass amp_level='O0' "
                             f"and no loss_scale_manager, got amp_level={amp_level!r} and "
                             f"loss_scale_manager={loss_scale_manager!r}")
        self._network = network
        self._loss_fn = loss_fn
        self._optimizer = optimizer
        self._amp_level = amp_level
        self._loss_scale_manager = loss_scale_manager
        self._metric_fns = get_metrics(metrics)
        amp_config = {k: v for k, v in kwargs.items() if k in ("keep_batchnorm_fp32", "dtype")}
        if loss_scale_manager is not None:
            amp_config["loss_scale_manager"] = loss_scale_manager
        # the eval network first: its checks run before the train network casts the network
        self._eval_network, self._eval_indexes = self._build_eval_network(eval_network,
                                                                          eval_indexes)
        self._train_network = self._build_train_network(amp_config)
        self._predict_network = network

    # ---- construction -------------------------------------------------------------------------
    def _build_train_network(self, amp_config):
        network, loss_fn, optimizer = self._network, self._loss_fn, self._optimizer
        if optimizer is None:
            if loss_fn is None:
                return network
            from minigrad.nn import WithLossCell
            return WithLossCell(network, loss_fn)
        if self._keras_scale is not None:
            return _keras_train_network(network, loss_fn, optimizer, self._keras_scale)
        from minigrad.amp import build_train_network
        return build_train_network(network, optimizer, loss_fn, level=self._amp_level, **amp_config)

    def _build_eval_network(self, eval_network, eval_indexes):
        if eval_network is not None:
            if eval_indexes is not None and not (isinstance(eval_indexes, list)
                                                 and len(eval_indexes) == 3):
                raise ValueError(f"Model: 'eval_indexes' must be None or a list of 3 ints "
                                 f"[loss, predictions, labels], got {eval_indexes!r}")
            return eval_network, eval_indexes
        if self._metric_fns and self._loss_fn is None:
            raise ValueError("Model: 'metrics' need either 'loss_fn' or 'eval_network' "
                             "(both are None)")
        if self._loss_fn is None:
            return None, None
        add_cast = self._amp_level in ("O2", "O3", "auto")
        return _EvalCell(self._network, self._loss_fn, add_cast), [0, 1, 2]

    train_network = property(lambda self: self._train_network)
    eval_network = property(lambda self: self._eval_network)
    predict_network = property(lambda self: self._predict_network)

    # ---- training -----------------------------------------------------------------------------
    def train(self, epoch, train_dataset, callbacks=None, dataset_sink_mode=False, sink_size=-1,
              initial_epoch=0):
        """Train for epochs ``initial_epoch + 1 .. epoch`` over ``train_dataset``.

        Each step calls the train network on one batch (``train_network(*batch)``: the labels are
        the last column) and then the callbacks (see ``minigrad.train.callback``). As in
        MindSpore, the network is put back in train mode before a step if something (an
        ``eval`` or ``predict`` run by a callback) switched it to inference mode.

        Args:
            epoch: the last epoch number (int ≥ 1).
            train_dataset: a ``minigrad.dataset`` dataset, or any re-iterable of tuples of Tensors.
            callbacks: a Callback or a list of them, called in order.
            dataset_sink_mode: accepted for MindSpore compatibility; minigrad always feeds the
                data step by step (a warning says so when True), and ``sink_size`` is ignored.
            initial_epoch: epochs already done (for resuming); the epoch counter starts after it.

        Raises:
            TypeError: for an ``epoch``/``initial_epoch`` that is not an int, a non-bool
                ``dataset_sink_mode``, or a ``train_dataset`` that is not a dataset (one batch
                ``(x, y)`` given in place of a dataset says how to make one).
            ValueError: for ``epoch`` < 1, ``initial_epoch`` outside ``[0, epoch)``, or a dataset
                that yields no batch.
        """
        epoch = check_positive_int("epoch", epoch, owner="Model.train")
        check_int("initial_epoch", initial_epoch, low=0, high=epoch - 1, owner="Model.train")
        check_relation("sink_size", check_int("sink_size", sink_size, low=-1,
                                              owner="Model.train"),
                       sink_size != 0, "-1 (the whole dataset) or a positive int",
                       owner="Model.train")
        _check_dataset(train_dataset, "train_dataset", "Model.train")
        _warn_sink(dataset_sink_mode)
        callbacks = CallbackList(callbacks)
        batch_num = _check_size(train_dataset, "train_dataset", "Model.train")
        cb_params = CallbackParam(
            train_network=self._train_network, network=self._network, optimizer=self._optimizer,
            loss_fn=self._loss_fn, train_dataset=train_dataset, epoch_num=epoch,
            batch_num=batch_num, cur_epoch_num=initial_epoch,
            cur_step_num=initial_epoch * (batch_num or 0), net_outputs=None, mode="train",
            dataset_sink_mode=False, parallel_mode="stand_alone", device_number=1)
        run_context = RunContext(cb_params)
        network, backbone = self._train_network, self._network
        network.set_train(True)
        iterator = _epochs(train_dataset, epoch - initial_epoch)

        callbacks("on_train_begin", run_context)
        for epoch_index in range(initial_epoch, epoch):
            cb_params.cur_epoch_num = epoch_index + 1
            callbacks("on_train_epoch_begin", run_context)
            for inputs in iterator:
                cb_params.cur_step_num += 1
                callbacks("on_train_step_begin", run_context)
                if not (network.training and backbone.training):  # a callback ran eval/predict
                    network.set_train(True)
                outputs = network(*inputs)
                cb_params.net_outputs = outputs
                callbacks("on_train_step_end", run_context)
                if run_context.get_stop_requested():
                    break
            callbacks("on_train_epoch_end", run_context)
            if run_context.get_stop_requested():
                break
        callbacks("on_train_end", run_context)

    # ---- evaluation and prediction ------------------------------------------------------------
    def eval(self, valid_dataset, callbacks=None, dataset_sink_mode=False):
        """Evaluate the metrics over one pass of ``valid_dataset`` (eval mode, no graph).

        Returns:
            ``{metric name: value}``.

        Raises:
            ValueError: if the Model has no metrics.
        """
        if not self._metric_fns:
            raise ValueError("Model.eval needs metrics: Model(..., metrics={'acc': Accuracy()})")
        if self._eval_network is None:
            raise ValueError("Model.eval needs 'loss_fn' or 'eval_network'")
        _check_dataset(valid_dataset, "valid_dataset", "Model.eval")
        _check_size(valid_dataset, "valid_dataset", "Model.eval")
        _warn_sink(dataset_sink_mode)
        callbacks = CallbackList(callbacks)
        cb_params = CallbackParam(
            eval_network=self._eval_network, valid_dataset=valid_dataset, metrics=self._metric_fns,
            batch_num=_size(valid_dataset), cur_epoch_num=1, epoch_num=1, cur_step_num=0,
            net_outputs=None, mode="eval")
        run_context = RunContext(cb_params)
        for metric in self._metric_fns.values():
            metric.clear()
        self._eval_network.set_train(False)
        callbacks("on_eval_begin", run_context)
        callbacks("on_eval_epoch_begin", run_context)
        with no_grad():
            for inputs in _epochs(valid_dataset, 1):
                cb_params.cur_step_num += 1
                callbacks("on_eval_step_begin", run_context)
                outputs = self._eval_network(*inputs)
                cb_params.net_outputs = outputs
                self._update_metrics(outputs)
                callbacks("on_eval_step_end", run_context)
        results = {name: metric.eval() for name, metric in self._metric_fns.items()}
        cb_params.metrics = results
        callbacks("on_eval_epoch_end", run_context)
        callbacks("on_eval_end", run_context)
        return results

    def _update_metrics(self, outputs):
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        indexes = self._eval_indexes
        for metric in self._metric_fns.values():
            if indexes is None:
                metric.update(*outputs)
            elif isinstance(metric, Loss):  # weighted by the batch's sample count
                metric.update(outputs[indexes[0]], num_samples=_batch_size(outputs[indexes[2]]))
            else:
                metric.update(outputs[indexes[1]], outputs[indexes[2]])

    def predict(self, *predict_data):
        """``network(*predict_data)`` in eval mode without recording a graph.

        Args:
            *predict_data: the network's inputs, each a Tensor or a NumPy array, or a non-empty
                list or tuple of them (MindSpore's ``Union[Tensor, list[Tensor],
                tuple[Tensor]]``).

        Raises:
            TypeError: for an input of another kind (None, a number, a str...), naming it
                (``predict_data[0]``).
            ValueError: for an empty list or tuple.
        """
        for index, item in enumerate(predict_data):
            _check_input(f"predict_data[{index}]", item)
        self._predict_network.set_train(False)
        with no_grad():
            return self._predict_network(*predict_data)


def _keras_loss_scale(network, optimizer):
    """The ``mixed_precision.LossScale`` Keras's ``fit`` would scale with: the optimizer's, when
    it is a ``LossScaleOptimizer``; else that of the policy ``network`` was created under; or
    None."""
    from minigrad.mixed_precision import LossScaleOptimizer
    if isinstance(optimizer, LossScaleOptimizer):
        return optimizer.loss_scale
    if optimizer is None:
        return None
    return getattr(network.dtype_policy, "loss_scale", None)


def _keras_train_network(network, loss_fn, optimizer, scale):
    """``TrainOneStepWithLossScaleCell`` over the inner optimizer, its update cell sharing the
    Keras loss scale's core (the TF rule: a dynamic scale backs off by its multiplier, floor 1)."""
    from minigrad import nn
    from minigrad.mixed_precision import DynamicLossScale, LossScaleOptimizer
    wrapper = optimizer if isinstance(optimizer, LossScaleOptimizer) else None
    if wrapper is not None:
        optimizer = wrapper.inner_optimizer
    core = scale.core
    if isinstance(scale, DynamicLossScale):
        update = nn.DynamicLossScaleUpdateCell(float(core.scale), scale.multiplier,
                                               scale.increment_period, core=core)
    else:
        update = nn.FixedLossScaleUpdateCell(float(core.scale), core=core)
    net = network if loss_fn is None else nn.WithLossCell(network, loss_fn)
    if wrapper is None:
        return TrainOneStepWithLossScaleCell(net, optimizer, update).set_train()
    return _KerasTrainStep(net, optimizer, update, wrapper).set_train()


class _KerasTrainStep(TrainOneStepWithLossScaleCell):
    """The loss-scaled step of Keras's ``fit`` with a ``LossScaleOptimizer``: a skipped step
    counts in its ``iterations``, as Keras's does."""

    def __init__(self, network, optimizer, scale_sense, loss_scale_optimizer):
        super().__init__(network, optimizer, scale_sense)
        self._count_skipped = loss_scale_optimizer.count_skipped_step

    def construct(self, *inputs):
        outputs = super().construct(*inputs)
        if self.last_report is not None and self.last_report.skipped:
            self._count_skipped()
        return outputs


def _batch_size(labels):
    shape = getattr(labels, "shape", ())
    return int(shape[0]) if len(shape) else 1


def _epochs(dataset, num_epochs):
    """An object whose every ``for`` loop yields one epoch of tuples."""
    if hasattr(dataset, "create_tuple_iterator"):
        return dataset.create_tuple_iterator(num_epochs=num_epochs)
    return _Reiterable(dataset)


class _Reiterable:
    """Each ``for`` over it is a fresh pass over a plain iterable of batches."""

    def __init__(self, iterable):
        self.iterable = iterable

    def __iter__(self):
        for batch in self.iterable:
            yield tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)


def _size(dataset):
    if hasattr(dataset, "get_dataset_size"):
        return dataset.get_dataset_size()
    try:
        return len(dataset)
    except TypeError:
        return None


def _check_size(dataset, name, owner):
    """The number of batches of ``dataset`` (None when it has no length), which must not be 0."""
    size = _size(dataset)
    check_relation(name, dataset, size != 0,
                   "a dataset that yields a batch (its size is 0; a batch larger than the data "
                   "with drop_remainder=True gives that)", owner=owner)
    return size


def _check_dataset(dataset, name, owner):
    """A dataset, or a re-iterable of batches; a tuple of Tensors or arrays (``(x, y)``, one
    batch) is refused with the way to make a dataset of it."""
    if hasattr(dataset, "create_tuple_iterator"):
        return
    if isinstance(dataset, tuple) and dataset and all(hasattr(v, "shape") for v in dataset):
        raise TypeError(f"{owner}: {name} must be a dataset, got a tuple of {len(dataset)} "
                        f"arrays; wrap them: NumpySlicesDataset((x, y)).batch(32) (or pass a list "
                        f"of (x, y) batches)")
    if (isinstance(dataset, (str, bytes, collections.abc.Mapping, collections.abc.Set))
            or not hasattr(dataset, "__iter__") or hasattr(dataset, "shape")):
        raise TypeError(f"{owner}: {name} must be a minigrad.dataset dataset or a re-iterable of "
                        f"batches, got {describe(dataset)} ({type(dataset).__name__})")
    if isinstance(dataset, (list, tuple)):  # a list of batches: each one checked here
        for index, batch in enumerate(dataset):
            check_relation(name, dataset, _is_batch(batch),
                           f"a list of batches, each {_INPUT} (batch {index} is "
                           f"{describe(batch)})", error=TypeError, owner=owner)


def _is_batch(batch):
    """Whether ``batch`` is one batch of a list of batches (see ``_INPUT``)."""
    if isinstance(batch, (list, tuple)):
        return len(batch) > 0 and all(isinstance(v, (Tensor, numpy.ndarray)) for v in batch)
    return isinstance(batch, (Tensor, numpy.ndarray))


_INPUT = "a Tensor or a NumPy array, or a non-empty list or tuple of them"


def _check_input(name, value):
    """``value`` if it is a network input ``Model.predict`` takes (see ``_INPUT``)."""
    if isinstance(value, (list, tuple)):
        check_items(name, value, (Tensor, numpy.ndarray), expected=_INPUT,
                    owner="Model.predict")
        return check_relation(name, value, len(value) > 0, _INPUT, owner="Model.predict")
    return check_type(name, value, (Tensor, numpy.ndarray), expected=_INPUT,
                      owner="Model.predict")


def _warn_sink(dataset_sink_mode):
    check_bool("dataset_sink_mode", dataset_sink_mode, owner="Model")
    if dataset_sink_mode:
        warnings.warn("dataset_sink_mode=True is not supported by minigrad; the data is fed step "
                      "by step", stacklevel=3)

