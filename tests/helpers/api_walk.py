"""The public API as tests/core/test_api_walk.py walks it: what is public, a valid call of each
callable (its baseline), the kinds of value substituted for each argument, and the acceptances
the API documents; and the public methods of the public classes, each called on a valid instance.

A public callable is a function or class that one of ``PACKAGES`` exports (``__all__``, else
every name without a leading underscore) and that minigrad defines; one reached under several
names is walked once, under its first name in ``PACKAGES`` order.
"""
import importlib
import inspect
import math

import numpy

from minigrad._checks import describe

PACKAGES = ("minigrad", "minigrad.autograd", "minigrad.ops", "minigrad.optim", "minigrad.nn",
            "minigrad.thor", "minigrad.amp", "minigrad.mixed_precision", "minigrad.train",
            "minigrad.dataset", "minigrad.communication", "minigrad.testing")


def public_callables():
    """``{short name: callable}``: ``"ops.reshape"``, ``"Tensor"``, ``"nn.Dense"``..."""
    found, seen = {}, set()
    for package in PACKAGES:
        module = importlib.import_module(package)
        names = getattr(module, "__all__", None) or [n for n in dir(module)
                                                     if not n.startswith("_")]
        prefix = package.partition(".")[2]
        for name in names:
            try:
                obj = getattr(module, name, None)
            except ImportError:  # an optional extra's name (bfloat16 without ml_dtypes)
                continue
            if (obj is None or inspect.ismodule(obj) or not callable(obj)
                    or not (getattr(obj, "__module__", None) or "").startswith("minigrad")
                    or id(obj) in seen):
                continue
            seen.add(id(obj))
            found[f"{prefix}.{name}" if prefix else name] = obj
    return found


def parameters(obj):
    """The named parameters of ``obj`` (``*args`` and ``**kwargs`` left out)."""
    signature = inspect.signature(obj)
    return [p for p in signature.parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def public_methods(callables):
    """``{short name: (class, attribute)}``: every public method (a name without a leading
    underscore, defined in minigrad) of the public classes in ``callables`` that takes arguments
    besides ``self``, once per function: ``"amp.GradScaler.update"``, ``"Tensor.astype"``.
    A method is named after the public class that defines it (``"nn.Cell.to_float"``), else
    after the first public class that inherits it; ``class`` is the class named."""
    names_of = {id(obj): name for name, obj in callables.items()}
    walked = set(names_of)
    found, seen = {}, set()
    for name, cls in sorted(callables.items()):
        if not inspect.isclass(cls):
            continue
        for attribute in sorted(dir(cls)):
            if attribute.startswith("_"):
                continue
            raw = inspect.getattr_static(cls, attribute)
            function = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
            if (not inspect.isfunction(function) or id(function) in seen
                    or not (function.__module__ or "").startswith("minigrad")):
                continue
            seen.add(id(function))
            if id(function) in walked:  # a public function bound as a method too
                continue
            if not method_parameters(getattr(cls, attribute), with_star=True):
                continue
            owner = next(k for k in cls.__mro__ if attribute in vars(k))
            # the most basic public class that has it (the owner when the owner is public)
            named = [k for k in cls.__mro__ if issubclass(k, owner) and id(k) in names_of][-1]
            name_of = names_of[id(named)]
            found[f"{name_of}.{attribute}"] = (named, attribute)
    return found


def method_parameters(method, with_star=False):
    """The parameters of an (unbound) method after ``self``: the named ones, and with
    ``with_star`` its ``*args`` too (walked as one positional value)."""
    signature = inspect.signature(method)
    listed = list(signature.parameters.values())
    if listed and listed[0].name in ("self", "cls") and listed[0].kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
        listed = listed[1:]
    kinds = (inspect.Parameter.VAR_KEYWORD,) if with_star else (
        inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [p for p in listed if p.kind not in kinds]


def call_method(instance, attribute, kwargs):
    """``instance.attribute(**kwargs)``, a ``"*name"`` entry of ``kwargs`` passed positionally
    (a method's ``*args``)."""
    kwargs = dict(kwargs)
    positional = ()
    for key in [k for k in kwargs if k.startswith("*")]:
        positional = tuple(kwargs.pop(key))
    return getattr(instance, attribute)(*positional, **kwargs)


# ---- kinds of value --------------------------------------------------------------------------

def kind(value):
    """The kind of a value as the walk counts them."""
    from minigrad import Tensor
    if value is None:
        return "none"
    if isinstance(value, numpy.bool_):
        return "np_bool"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, numpy.integer):
        return "np_int"
    if isinstance(value, numpy.floating):
        return "np_float" if math.isfinite(value) else "np_nonfinite"
    if isinstance(value, int):
        if abs(value) >= 2 ** 62:
            return "huge"
        return "int" if value >= 0 else "negative"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf"
        if value >= 1e18 or value <= -1e18:
            return "huge_float"
        return "float" if value >= 0 else "negative_float"
    if isinstance(value, str):
        if value == "":
            return "str_empty"
        if value.strip().lower() in ("nan", "inf", "-inf", "1", "0.5"):
            return "str_number"
        return "str"
    if isinstance(value, Tensor):
        return "tensor"
    if isinstance(value, numpy.ndarray):
        return "array0d" if value.ndim == 0 else "array"
    if isinstance(value, list):
        return "list"
    if isinstance(value, tuple):
        return "tuple"
    return "object"


KINDS = ("none", "np_bool", "bool", "np_int", "np_float", "np_nonfinite", "huge", "int",
         "negative", "nan", "inf", "huge_float", "float", "negative_float", "str_empty",
         "str_number", "str", "tensor", "array0d", "array", "list", "tuple", "object")


# the kinds an int, a float, a bool stand for (NumPy scalars count as the Python kind they hold:
# minigrad._checks' rule)
_SAME = {
    "int": {"int", "np_int"},
    "negative": {"negative", "np_int"},
    # a float setting takes any finite real (1e30 included) unless its range says otherwise
    "float": {"float", "int", "np_int", "np_float", "huge", "huge_float"},
    "negative_float": {"negative_float", "negative"},
    "list": {"list", "tuple"},  # the sequence rule: a tuple or a list
    "tuple": {"list", "tuple"},
    "bool": {"bool", "np_bool"},
    "tensor": {"tensor"},
    "none": {"none"},
}


def is_number(value):
    """Whether ``value`` is a real number (Python or NumPy), not a bool."""
    return isinstance(value, (int, float, numpy.integer, numpy.floating)) and not isinstance(
        value, (bool, numpy.bool_))


def baseline_kinds(value):
    """The kinds a valid baseline value vouches for: its own kind and those that stand for it
    (an int for a float, a NumPy scalar for the Python number)."""
    own = kind(value)
    return _SAME.get(own, {own})


# Operands of an op: a Tensor, a number, a bool, an array or nested lists of numbers (NumPy
# scalars and 0-d arrays too), any finite or non-finite value (data, not a setting).
OPERAND = frozenset({"int", "negative", "float", "negative_float", "huge_float", "inf", "nan",
                     "np_int", "np_float", "np_nonfinite", "np_bool", "bool", "array0d", "array",
                     "tensor", "list", "tuple"})
# a float setting that may be any real number: ints, floats, NumPy scalars, 0-d arrays
ANY_REAL = frozenset({"int", "negative", "float", "negative_float", "np_int", "np_float"})


def shown(message, value):
    """Whether ``message`` shows ``value`` (as ``_checks.describe`` writes it, its repr, or as a
    tuple for a list)."""
    forms = {describe(value), repr(value), str(value)}
    if isinstance(value, (list, tuple)):  # the whole, or the entry the message is about
        forms.add(repr(tuple(value)))
        forms.update(f"got {describe(item)}" for item in value)
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        forms.add(repr(int(value)))
    return any(form in message for form in forms)


# ---- baselines: a valid call of every callable with arguments it cannot go without ------------

def _t(*shape, dtype="float32"):
    from minigrad import Tensor
    return Tensor(numpy.ones(shape, dtype=dtype))


def _net():
    from minigrad import nn
    return nn.Dense(3, 2)


def _params():
    return _net().trainable_params()


def _opt():
    from minigrad import nn
    return nn.SGD(_params(), 0.1)


def _data():
    from minigrad import dataset
    return dataset.NumpySlicesDataset({"x": numpy.ones((4, 3), numpy.float32)}, shuffle=False)


def _status():
    from minigrad import amp
    return amp.alloc_status()


def _arrays():
    return [numpy.ones(3, numpy.float16)]


def _encoder_layer():
    from minigrad import nn
    return nn.TransformerEncoderLayer(4, 2, dim_feedforward=8)


def _loss_net():
    from minigrad import nn
    return nn.WithLossCell(_net(), nn.MSELoss())


def _fn(x):
    return (x * x).sum()


# {name: a function returning the keyword arguments of a valid call}; arguments left out take
# their defaults (and are walked too)
BASELINES = {
    "Model": lambda: dict(network=_net()),
    "Parameter": lambda: dict(default_input=_t(2)),
    "Tensor": lambda: dict(data=[1.0, 2.0]),
    "from_dlpack": lambda: dict(obj=numpy.ones(2, numpy.float32)),
    "get_auto_parallel_context": lambda: dict(key="parallel_mode"),
    "get_context": lambda: dict(key="device_target"),
    "grad": lambda: dict(fn=_fn),
    "value_and_grad": lambda: dict(fn=_fn),
    "load_checkpoint": lambda: dict(ckpt_file_name=_CKPT["path"]),
    "load_param_into_net": lambda: dict(net=_net(), parameter_dict=_parameter_dict()),
    "save_checkpoint": lambda: dict(save_obj=_net(), ckpt_file_name=_CKPT["out"]),
    "set_seed": lambda: dict(seed=1),
    "autograd.backward": lambda: dict(tensors=_scalar_with_graph()),
    "autograd.grad": lambda: dict(**dict(zip(("outputs", "inputs"), _output_and_input()))),
    "ops.Conv2D": lambda: dict(out_channel=2, kernel_size=3),
    "ops.MultitypeFuncGraph": lambda: dict(name="add"),
    "ops.abs": lambda: dict(x=_t(2)),
    "ops.add": lambda: dict(a=_t(2), b=_t(2)),
    "ops.arange": lambda: dict(start=0, stop=4, step=1),
    "ops.avg_pool2d": lambda: dict(x=_t(1, 1, 4, 4), kernel_size=2),
    "ops.batch_norm": lambda: dict(x=_t(2, 3), gamma=_t(3), beta=_t(3), running_mean=_t(3),
                                   running_var=_t(3), training=True),
    "ops.broadcast_to": lambda: dict(x=_t(3), shape=(2, 3)),
    "ops.cast": lambda: dict(a=_t(2), dtype=numpy.float16),
    "ops.clip": lambda: dict(x=_t(2), min=0.0, max=1.0),
    "ops.clip_by_global_norm": lambda: dict(x=(_t(2),), clip_norm=1.0),
    "ops.concat": lambda: dict(tensors=[_t(2), _t(2)]),
    "ops.conv2d": lambda: dict(x=_t(1, 1, 4, 4), weight=_t(2, 1, 3, 3)),
    "ops.dense": lambda: dict(x=_t(2, 3), weight=_t(4, 3)),
    "ops.depend": lambda: dict(value=_t(2), expr=_t(2)),
    "ops.div": lambda: dict(a=_t(2), b=_t(2)),
    "ops.dropout": lambda: dict(x=_t(2)),
    "ops.dtype": lambda: dict(input=_t(2)),
    "ops.embedding": lambda: dict(ids=_t(2, dtype="int32"), table=_t(4, 3)),
    "ops.equal": lambda: dict(a=_t(2), b=_t(2)),
    "ops.erf": lambda: dict(x=_t(2)),
    "ops.exp": lambda: dict(x=_t(2)),
    "ops.expand_dims": lambda: dict(x=_t(2), axis=0),
    "ops.fill": lambda: dict(type=numpy.float32, shape=(2,), value=1.0),
    "ops.full": lambda: dict(shape=(2,), value=1.0),
    "ops.full_like": lambda: dict(x=_t(2), value=1.0),
    "ops.gelu": lambda: dict(x=_t(2)),
    "ops.getitem": lambda: dict(x=_t(3), index=1),
    "ops.greater": lambda: dict(a=_t(2), b=_t(2)),
    "ops.greater_equal": lambda: dict(a=_t(2), b=_t(2)),
    "ops.im2col": lambda: dict(x=_t(1, 1, 4, 4), kernel=2),
    "ops.layer_norm": lambda: dict(x=_t(2, 3), gamma=_t(3), beta=_t(3), begin_norm_axis=-1,
                                   begin_params_axis=-1),
    "ops.leaky_relu": lambda: dict(x=_t(2)),
    "ops.less": lambda: dict(a=_t(2), b=_t(2)),
    "ops.less_equal": lambda: dict(a=_t(2), b=_t(2)),
    "ops.log": lambda: dict(x=_t(2)),
    "ops.log_softmax": lambda: dict(x=_t(2)),
    "ops.matmul": lambda: dict(a=_t(2, 3), b=_t(3, 2)),
    "ops.max": lambda: dict(x=_t(2, 3)),
    "ops.max_pool2d": lambda: dict(x=_t(1, 1, 4, 4), kernel_size=2),
    "ops.maximum": lambda: dict(a=_t(2), b=_t(2)),
    "ops.mean": lambda: dict(x=_t(2, 3)),
    "ops.min": lambda: dict(x=_t(2, 3)),
    "ops.minimum": lambda: dict(a=_t(2), b=_t(2)),
    "ops.mul": lambda: dict(a=_t(2), b=_t(2)),
    "ops.neg": lambda: dict(x=_t(2)),
    "ops.not_equal": lambda: dict(a=_t(2), b=_t(2)),
    "ops.ones": lambda: dict(shape=(2,)),
    "ops.ones_like": lambda: dict(x=_t(2)),
    "ops.partial": lambda: dict(func=_fn),
    "ops.pow": lambda: dict(a=_t(2), b=_t(2)),
    "ops.reciprocal": lambda: dict(x=_t(2)),
    "ops.relu": lambda: dict(x=_t(2)),
    "ops.reshape": lambda: dict(x=_t(2, 3), shape=(3, 2)),
    "ops.same_padding": lambda: dict(in_hw=(4, 4), kernel=(3, 3)),
    "ops.scaled_dot_product_attention": lambda: dict(query=_t(1, 2, 4), key=_t(1, 2, 4),
                                                     value=_t(1, 2, 4)),
    "ops.sigmoid": lambda: dict(x=_t(2)),
    "ops.softmax": lambda: dict(x=_t(2)),
    "ops.split": lambda: dict(x=_t(4), sections_or_indices=2),
    "ops.sqrt": lambda: dict(x=_t(2)),
    "ops.square": lambda: dict(x=_t(2)),
    "ops.squeeze": lambda: dict(x=_t(1, 2)),
    "ops.stack": lambda: dict(tensors=[_t(2), _t(2)]),
    "ops.sub": lambda: dict(a=_t(2), b=_t(2)),
    "ops.sum": lambda: dict(x=_t(2, 3)),
    "ops.swapaxes": lambda: dict(x=_t(2, 3), axis1=0, axis2=1),
    "ops.tanh": lambda: dict(x=_t(2)),
    "ops.to_device": lambda: dict(a=_t(2), device="CPU"),
    "ops.transpose": lambda: dict(x=_t(2, 3)),
    "ops.where": lambda: dict(condition=_t(2, dtype="bool"), x=_t(2), y=_t(2)),
    "ops.zeros": lambda: dict(shape=(2,)),
    "ops.zeros_like": lambda: dict(x=_t(2)),
    "optim.Optimizer": lambda: dict(learning_rate=0.1, parameters=_params()),
    "optim.default_decay_filter": lambda: dict(param=_params()[0]),
    "optim.SGD": lambda: dict(params=_params()),
    "optim.Momentum": lambda: dict(params=_params(), learning_rate=0.1, momentum=0.9),
    "optim.Adam": lambda: dict(params=_params()),
    "optim.AdamWeightDecay": lambda: dict(params=_params()),
    "optim.RMSProp": lambda: dict(params=_params()),
    "optim.ExponentialDecayLR": lambda: dict(learning_rate=0.1, decay_rate=0.9, decay_steps=4),
    "optim.NaturalExpDecayLR": lambda: dict(learning_rate=0.1, decay_rate=0.9, decay_steps=4),
    "optim.InverseDecayLR": lambda: dict(learning_rate=0.1, decay_rate=0.9, decay_steps=4),
    "optim.CosineDecayLR": lambda: dict(min_lr=0.01, max_lr=0.1, decay_steps=4),
    "optim.PolynomialDecayLR": lambda: dict(learning_rate=0.1, end_learning_rate=0.01,
                                            decay_steps=4, power=1.0),
    "optim.WarmUpLR": lambda: dict(learning_rate=0.1, warmup_steps=4),
    "optim.piecewise_constant_lr": lambda: dict(milestone=[2, 4], learning_rates=[0.1, 0.01]),
    "optim.exponential_decay_lr": lambda: dict(learning_rate=0.1, decay_rate=0.9, total_step=4,
                                               step_per_epoch=2, decay_epoch=1),
    "optim.natural_exp_decay_lr": lambda: dict(learning_rate=0.1, decay_rate=0.9, total_step=4,
                                               step_per_epoch=2, decay_epoch=1),
    "optim.inverse_decay_lr": lambda: dict(learning_rate=0.1, decay_rate=0.9, total_step=4,
                                           step_per_epoch=2, decay_epoch=1),
    "optim.cosine_decay_lr": lambda: dict(min_lr=0.01, max_lr=0.1, total_step=4,
                                          step_per_epoch=2, decay_epoch=1),
    "optim.polynomial_decay_lr": lambda: dict(learning_rate=0.1, end_learning_rate=0.01,
                                              total_step=4, step_per_epoch=2, decay_epoch=1,
                                              power=1.0),
    "optim.warmup_lr": lambda: dict(learning_rate=0.1, total_step=4, step_per_epoch=2,
                                    warmup_epoch=1),
    "optim.THOR": lambda: dict(net=_thor_net(), learning_rate=_t(), damping=_t(), momentum=0.9),
    "optim.thor": lambda: dict(net=_thor_net(), learning_rate=_t(), damping=_t(), momentum=0.9),
    "nn.BatchNorm1d": lambda: dict(num_features=3),
    "nn.BatchNorm2d": lambda: dict(num_features=3),
    "nn.Constant": lambda: dict(value=1.0),
    "nn.Conv2d": lambda: dict(in_channels=1, out_channels=2, kernel_size=3),
    "nn.Conv2dThor": lambda: dict(in_channels=1, out_channels=2, kernel_size=3),
    "nn.Dense": lambda: dict(in_channels=3, out_channels=2),
    "nn.DenseThor": lambda: dict(in_channels=3, out_channels=2),
    "nn.DistributedGradReducer": lambda: dict(parameters=_params()),
    "nn.DynamicLossScaleUpdateCell": lambda: dict(loss_scale_value=2.0 ** 10, scale_factor=2,
                                                  scale_window=10),
    "nn.Embedding": lambda: dict(vocab_size=4, embedding_size=3),
    "nn.EmbeddingThor": lambda: dict(vocab_size=4, embedding_size=3),
    "nn.FixedLossScaleUpdateCell": lambda: dict(loss_scale_value=2.0 ** 10),
    "nn.LayerNorm": lambda: dict(normalized_shape=(3,)),
    "nn.MultiheadAttention": lambda: dict(embed_dim=4, num_heads=2),
    "nn.TrainOneStepCell": lambda: _train_cell_args(scale_sense=False),
    "nn.TrainOneStepWithLossScaleCell": lambda: _train_cell_args(),
    "nn.TransformerEncoder": lambda: dict(encoder_layer=_encoder_layer(), num_layers=1),
    "nn.TransformerEncoderLayer": lambda: dict(d_model=4, nhead=2, dim_feedforward=8),
    "nn.WithLossCell": lambda: dict(backbone=_net(), loss_fn=_mse()),
    "nn.generate_square_subsequent_mask": lambda: dict(size=3),
    "nn.get_activation": lambda: dict(name="relu"),
    "nn.initializer": lambda: dict(init="zeros", shape=(2,)),
    "amp.clear_status": lambda: dict(status=_status()),
    "amp.check_overflow": lambda: dict(status=_status()),
    "amp.check_and_unscale": lambda: dict(status=_status(), arrays=_arrays(), inv_scale=0.5),
    "amp.check_and_unscale_to_fp32": lambda: dict(status=_status(), arrays=_arrays(),
                                                  inv_scale=0.5),
    "amp.get_status": lambda: dict(status=_status()),
    "amp.underflow_stats": lambda: dict(names=["w"], scaled_grads=_arrays()),
    "amp.all_finite": lambda: dict(inputs=(_t(2),)),
    "amp.StaticLossScaler": lambda: dict(scale_value=2.0 ** 10),
    "amp.DynamicLossScaler": lambda: dict(scale_value=2.0 ** 10, scale_factor=2, scale_window=10),
    "amp.build_train_network": lambda: _net_and_opt(loss_fn=_mse()),
    "amp.cast_network": lambda: dict(network=_net(), cast_model_type=numpy.float16,
                                     keep_batchnorm_fp32=True),
    "amp.auto_mixed_precision": lambda: dict(network=_net()),
    "mixed_precision.FixedLossScale": lambda: dict(loss_scale_value=2.0 ** 10),
    "mixed_precision.get": lambda: dict(identifier="dynamic"),
    "mixed_precision.LossScaleOptimizer": lambda: dict(optimizer=_opt()),
    "mixed_precision.Policy": lambda: dict(name="mixed_float16"),
    "mixed_precision.set_global_policy": lambda: dict(policy="float32"),
    "train.RunContext": lambda: dict(original_args={}),
    "train.TopKCategoricalAccuracy": lambda: dict(k=2),
    "train.get_metric_fn": lambda: dict(name="accuracy"),
    "dataset.BatchDataset": lambda: dict(parent=_data(), batch_size=2),
    "dataset.MapDataset": lambda: dict(parent=_data(), operations=[_identity]),
    "dataset.NumpySlicesDataset": lambda: dict(data=numpy.ones((4, 3), numpy.float32)),
    "dataset.RepeatDataset": lambda: dict(parent=_data()),
    "dataset.ShuffleDataset": lambda: dict(parent=_data(), buffer_size=2),
    "communication.get_rank": lambda: dict(),
    "communication.all_reduce": lambda: dict(array=numpy.ones(2, numpy.float32)),
    "communication.all_reduce_": lambda: dict(array=numpy.ones(2, numpy.float32)),
    "communication.all_reduce_start": lambda: dict(array=numpy.ones(2, numpy.float32)),
    "communication.broadcast": lambda: dict(array=numpy.ones(2, numpy.float32)),
    "communication.broadcast_": lambda: dict(array=numpy.ones(2, numpy.float32)),
    "communication.all_gather": lambda: dict(array=numpy.ones(2, numpy.float32)),
    "communication.all_gather_object": lambda: dict(obj=1),
    "communication.broadcast_object": lambda: dict(obj=1),
    "communication.any_rank": lambda: dict(flag=True),
    "communication.check_same_model": lambda: dict(parameters=_params()),
    "communication.broadcast_parameters": lambda: dict(parameters=_params()),
    "communication.synchronize_parameters": lambda: dict(parameters=_params()),
    "communication.reduce_flag": lambda: dict(flag=True),
    "communication.plan_shares": lambda: dict(costs=[1.0, 2.0], size=1),
    "communication.share_work": lambda: dict(costs=[1.0, 2.0], compute=_compute),
    "communication.all_reduce_buffer": lambda: dict(size=4, dtype=numpy.float32),
    "testing.assert_forward": lambda: dict(actual=_t(2), expected=numpy.ones(2)),
    "testing.check_backward": lambda: dict(fn=_fn, inputs=[numpy.ones(2)]),
    "testing.check_double_backward": lambda: dict(fn=_fn, inputs=[numpy.ones(2)]),
    "testing.noncontiguous": lambda: dict(array=numpy.ones((2, 3))),
    "testing.numerical_grad": lambda: dict(fn=_fn, inputs=[numpy.ones(2)],
                                           grad_outputs=numpy.ones(())),
    "testing.tolerance": lambda: dict(dtype=numpy.float32),
}


# {method name: a function returning (a valid instance, the keyword arguments of a valid call)};
# a ``"*name"`` entry is the method's ``*args`` (walked as one positional value)
METHOD_BASELINES = {
    # training: Model, the managers, the callbacks' hooks
    "Model.train": lambda: (_model(), dict(epoch=1, train_dataset=_labelled_data())),
    "Model.eval": lambda: (_model(metrics={"loss"}), dict(valid_dataset=_labelled_data())),
    # a network of any input shape: predict's own rule is the kind of its inputs
    "Model.predict": lambda: (_class("Model")(_class("nn.ReLU")()),
                              {"*predict_data": (_t(2, 3),)}),
    "DynamicLossScaleManager.update_loss_scale": lambda: (_manager("Dynamic"),
                                                          dict(overflow=True)),
    "FixedLossScaleManager.update_loss_scale": lambda: (_manager("Fixed"), dict(overflow=True)),
    **{name: (lambda name=name, klass=klass: _callback(klass, name.rpartition(".")[2]))
       for name, klass in (
           ("LossMonitor.on_train_step_end", "LossMonitor"),
           ("TimeMonitor.on_train_epoch_begin", "TimeMonitor"),
           ("TimeMonitor.on_train_epoch_end", "TimeMonitor"),
           ("train.History.on_train_epoch_begin", "History"),
           ("train.History.on_train_epoch_end", "History"),
           ("train.History.on_train_step_end", "History"),
           ("train.LossScaleMonitor.on_train_step_end", "LossScaleMonitor"),
           ("train.ModelCheckpoint.on_train_begin", "ModelCheckpoint"),
           ("train.ModelCheckpoint.on_train_end", "ModelCheckpoint"),
           ("train.ModelCheckpoint.on_train_step_end", "ModelCheckpoint"),
           ("train.ProgressBar.on_train_epoch_begin", "ProgressBar"),
           ("train.ProgressBar.on_train_epoch_end", "ProgressBar"),
           ("train.ProgressBar.on_train_step_end", "ProgressBar"))},
    "train.ConvertModelUtils.convert_to_thor_model": lambda: _thor_model_args(),
    "ops.MultitypeFuncGraph.register": lambda: (_class("ops.MultitypeFuncGraph")("add"),
                                                {"*type_names": ("Tensor",)}),
    "nn.ConvertNetUtils.convert_to_thor_net": lambda: (_class("nn.ConvertNetUtils")(),
                                                       dict(net=_net())),
    "Accuracy.update": lambda: (_class("Accuracy")(), {"*inputs": (_t(2, 3), _labels())}),
    "train.Loss.update": lambda: (_class("train.Loss")(), {"*inputs": (_t(),)}),
    # Tensor
    **{f"Tensor.{name}": (lambda: (_t(2, 3), dict(other=_t(2, 3))))
       for name in ("add", "sub", "mul", "div")},
    "Tensor.matmul": lambda: (_t(2, 3), dict(other=_t(3, 2))),
    "Tensor.pow": lambda: (_t(2, 3), dict(exponent=2.0)),
    "Tensor.astype": lambda: (_t(2, 3), dict(dtype=numpy.float16)),
    "Tensor.broadcast_to": lambda: (_t(3), dict(shape=(2, 3))),
    "Tensor.expand_dims": lambda: (_t(2, 3), dict(axis=0)),
    "Tensor.unsqueeze": lambda: (_t(2, 3), dict(dim=0)),
    "Tensor.swapaxes": lambda: (_t(2, 3), dict(a=0, b=1)),
    "Tensor.reshape": lambda: (_t(2, 3), {"*shape_": ((3, 2),)}),
    "Tensor.view": lambda: (_t(2, 3), {"*shape_": ((3, 2),)}),
    "Tensor.transpose": lambda: (_t(2, 3), {"*axes": ((1, 0),)}),
    "Tensor.permute": lambda: (_t(2, 3), {"*axes": ((1, 0),)}),
    "Tensor.clip": lambda: (_t(2, 3), dict(min=0.0)),
    "Tensor.clamp": lambda: (_t(2, 3), dict(min=0.0)),
    "Tensor.to": lambda: (_t(2, 3), {"*args": ("CPU",)}),
    "Tensor.register_hook": lambda: (_leaf(), dict(hook=_identity)),
    "Tensor.backward": lambda: (_scalar_with_graph(), {}),
    "Parameter.set_data": lambda: (_params()[0], dict(data=_t(2, 3))),
    # the loss scalers of every face
    "amp.GradScaler.scale": lambda: (_class("amp.GradScaler")(), dict(outputs=_t(2))),
    "amp.GradScaler.unscale_": lambda: _scaler_step(),
    "amp.GradScaler.step": lambda: _scaler_step(),
    "amp.GradScaler.update": lambda: (_scaler_step(stepped=True)[0], {}),
    "amp.GradScaler.load_state_dict": lambda: (
        _class("amp.GradScaler")(), dict(state_dict=_class("amp.GradScaler")().state_dict())),
    "amp.GradScaler.set_backoff_factor": lambda: (_class("amp.GradScaler")(),
                                                  dict(new_factor=0.25)),
    "amp.GradScaler.set_growth_factor": lambda: (_class("amp.GradScaler")(),
                                                 dict(new_factor=4.0)),
    "amp.GradScaler.set_growth_interval": lambda: (_class("amp.GradScaler")(),
                                                   dict(new_interval=10)),
    "amp.LossScaler.scale": lambda: (_class("amp.DynamicLossScaler")(2.0 ** 10, 2, 10),
                                     dict(inputs=_t(2))),
    "amp.LossScaler.unscale": lambda: (_class("amp.DynamicLossScaler")(2.0 ** 10, 2, 10),
                                       dict(inputs=_t(2))),
    "amp.DynamicLossScaler.adjust": lambda: (_class("amp.DynamicLossScaler")(2.0 ** 10, 2, 10),
                                             dict(grads_finite=True)),
    "amp.StaticLossScaler.adjust": lambda: (_class("amp.StaticLossScaler")(2.0 ** 10),
                                            dict(grads_finite=True)),
    "mixed_precision.LossScale.update": lambda: (_class("mixed_precision.DynamicLossScale")(),
                                                 dict(grads=[_t(2)])),
    "mixed_precision.FixedLossScale.update": lambda: (
        _class("mixed_precision.FixedLossScale")(2.0 ** 10), dict(grads=[_t(2)])),
    "mixed_precision.LossScale.from_config": lambda: (
        _class("mixed_precision.DynamicLossScale"),
        dict(config=_class("mixed_precision.DynamicLossScale")().get_config())),
    "mixed_precision.LossScaleOptimizer.apply_gradients": lambda: _tf_optimizer(
        lambda opt, params: dict(grads_and_vars=[(_t(*p.shape), p) for p in params])),
    "mixed_precision.LossScaleOptimizer.get_scaled_loss": lambda: _tf_optimizer(
        lambda opt, params: dict(loss=_t())),
    "mixed_precision.LossScaleOptimizer.get_unscaled_gradients": lambda: _tf_optimizer(
        lambda opt, params: dict(grads=[_t(*p.shape) for p in params])),
    "mixed_precision.LossScaleOptimizer.minimize": lambda: _tf_optimizer(
        lambda opt, params: dict(loss=lambda: (params[0] * params[0]).sum())),
    # the dataset pipeline
    "dataset.Dataset.batch": lambda: (_data(), dict(batch_size=2)),
    "dataset.Dataset.map": lambda: (_data(), dict(operations=[_identity])),
    "dataset.Dataset.shuffle": lambda: (_data(), dict(buffer_size=2)),
    "dataset.Dataset.repeat": lambda: (_data(), dict(count=2)),
    "dataset.Dataset.create_tuple_iterator": lambda: (_data(), {}),
    "dataset.Dataset.create_dict_iterator": lambda: (_data(), {}),
    "dataset.NumpySlicesDataset.take": lambda: (_data(), dict(indices=[0, 1])),
    # cells
    "nn.Cell.apply": lambda: (_net(), dict(fn=_identity)),
    "nn.Cell.cast_parameters": lambda: (_net(), dict(dtype=numpy.float16)),
    "nn.Cell.to_float": lambda: (_net(), dict(dtype=numpy.float16)),
    "nn.Cell.insert_child_to_cell": lambda: (_net(), dict(child_name="child", child_cell=_net())),
    "nn.Cell.insert_param_to_cell": lambda: (_net(), dict(param_name="extra",
                                                          param=_params()[0])),
    "nn.Cell.register_forward_hook": lambda: (_net(), dict(hook=_hook)),
    "nn.Cell.register_forward_pre_hook": lambda: (_net(), dict(hook=_hook)),
    "nn.CellList.append": lambda: (_class("nn.CellList")(), dict(cell=_net())),
    "nn.CellList.extend": lambda: (_class("nn.CellList")(), dict(cells=[_net()])),
    "nn.CellList.insert": lambda: (_class("nn.CellList")([_net()]), dict(index=0, cell=_net())),
    "nn.LossBase.get_loss": lambda: (_mse(), dict(x=_t(2))),
    "nn.ParameterTuple.clone": lambda: (_class("nn.ParameterTuple")(_params()),
                                        dict(prefix="copy")),
    "nn.DistributedGradReducer.reduce_arrays": lambda: (
        _class("nn.DistributedGradReducer")(_params()),
        dict(arrays=[numpy.ones((2, 3)), numpy.ones(2)])),
    "nn.TrainOneStepWithLossScaleCell.set_sense_scale": lambda: (
        _class("nn.TrainOneStepWithLossScaleCell")(**_train_cell_args()), dict(sens=_t())),
    "nn.TrainOneStepWithLossScaleCell.process_loss_scale": lambda: (
        _class("nn.TrainOneStepWithLossScaleCell")(**_train_cell_args()), dict(overflow=False)),
    "nn.TrainOneStepWithLossScaleCell.start_overflow_check": lambda: (
        _class("nn.TrainOneStepWithLossScaleCell")(**_train_cell_args()),
        dict(pre_cond=_t(), compute_input=_t())),
    "nn.TrainOneStepWithLossScaleCell.get_overflow_status": lambda: (
        _class("nn.TrainOneStepWithLossScaleCell")(**_train_cell_args()),
        dict(status=_status_tensor(), compute_output=(_t(2),))),
    **{f"nn.{name}.sample": (lambda name=name: (_initializer(name), dict(shape=(2, 3))))
       for name in ("Constant", "HeNormal", "HeUniform", "Normal", "TruncatedNormal",
                    "Uniform", "XavierUniform")},
    "nn.HeNormal.std": lambda: (_initializer("HeNormal"), dict(shape=(2, 3))),
    # optimizers
    "optim.Optimizer.apply_gradients": lambda: _opt_and(
        lambda params: dict(grads=tuple(_t(*p.shape) for p in params))),
    "optim.Optimizer.takes_scaled_gradients": lambda: _opt_and(
        lambda params: dict(grads=tuple(_t(*p.shape) for p in params))),
    "optim.Optimizer.get_lr_parameter": lambda: _opt_and(lambda params: dict(param=params[0])),
    "optim.Optimizer.load_state_dict": lambda: _opt_and(lambda params: {}, state=True),
    "optim.THOR.apply_gradients": lambda: _thor_and(
        lambda params: dict(grads=tuple(_t(*p.shape) for p in params))),
    "optim.THOR.load_state_dict": lambda: _thor_and(lambda params: {}, state=True),
}


def _mse():
    from minigrad import nn
    return nn.MSELoss()


def _identity(x):
    return x


def _compute(indices):
    return [float(i) for i in indices]


def _scalar_with_graph():
    from minigrad import Tensor
    x = Tensor(numpy.ones(2, numpy.float32), requires_grad=True)
    return (x * x).sum()


def _output_and_input():
    from minigrad import Tensor
    x = Tensor(numpy.ones(2, numpy.float32), requires_grad=True)
    return (x * x).sum(), x


def _net_and_opt(**more):
    from minigrad import nn
    net = _net()
    return dict(network=net, optimizer=nn.SGD(net.trainable_params(), 0.1), **more)


def _train_cell_args(scale_sense=True):
    from minigrad import nn
    loss_net = _loss_net()
    kwargs = dict(network=loss_net, optimizer=nn.SGD(loss_net.trainable_params(), 0.1))
    if scale_sense:
        kwargs["scale_sense"] = nn.FixedLossScaleUpdateCell(2.0 ** 10)
    return kwargs


def _parameter_dict():
    return {p.name: p for p in _params()}


# a checkpoint file to load and a path to write, set by the test's fixture
_CKPT = {}


def _thor_net():
    from minigrad import nn
    return nn.SequentialCell(nn.DenseThor(3, 2))


def _class(name):
    return public_callables()[name]


def _labelled_data():
    from minigrad import dataset
    return dataset.NumpySlicesDataset({"x": numpy.ones((4, 3), numpy.float32),
                                       "y": numpy.ones((4, 2), numpy.float32)},
                                      shuffle=False).batch(2)


def _model(metrics=None, thor=False):
    from minigrad import nn
    from minigrad.train import Model
    net = _thor_net() if thor else _net()
    optimizer = nn.SGD(net.trainable_params(), 0.1)
    return Model(net, loss_fn=_mse(), optimizer=optimizer, metrics=metrics)


def _manager(kind):
    import minigrad
    return getattr(minigrad, f"{kind}LossScaleManager")()


def _callback(name, hook):
    """(a callback ``name``, its hook's arguments) as Model calls the hook: the hooks of the
    training's and the epoch's start already called."""
    from minigrad import train
    callback, run_context = getattr(train, name)(), _run_context()
    for before in ("on_train_begin", "on_train_epoch_begin"):
        if before == hook:
            break
        getattr(callback, before)(run_context)
    return callback, dict(run_context=run_context)


def _run_context():
    from minigrad.train import RunContext
    from minigrad.train.callback.hooks import CallbackParam
    net = _net()
    return RunContext(CallbackParam(
        train_network=_class("nn.TrainOneStepCell")(**_train_cell_args(scale_sense=False)),
        network=net, optimizer=_sgd(net), loss_fn=_mse(), train_dataset=_labelled_data(),
        epoch_num=1, batch_num=2, cur_epoch_num=1, cur_step_num=1, net_outputs=_t(), mode="train",
        dataset_sink_mode=False, parallel_mode="stand_alone", device_number=1))


def _leaf():
    from minigrad import Tensor
    return Tensor(numpy.ones(2, numpy.float32), requires_grad=True)


def _hook(*args):
    return None


def _scaler_step(stepped=False):
    from minigrad import Tensor
    scaler, optimizer = _class("amp.GradScaler")(), _opt()
    for p in optimizer.parameters:
        p.grad = Tensor(numpy.ones(p.shape, numpy.float32))
    if stepped:
        scaler.scale(_t())
        scaler.step(optimizer)
    return scaler, dict(optimizer=optimizer)


def _tf_optimizer(make):
    optimizer = _class("mixed_precision.LossScaleOptimizer")(_opt())
    params = list(optimizer.inner_optimizer.parameters)
    return optimizer, make(optimizer, params)


def _opt_and(make, state=False):
    optimizer = _opt()
    params = list(optimizer.parameters)
    kwargs = make(params)
    if state:
        kwargs["state_dict"] = _opt().state_dict()
    return optimizer, kwargs


def _thor_and(make, state=False):
    from minigrad import optim
    net = _thor_net()
    optimizer = optim.THOR(net, learning_rate=_t(), damping=_t(), momentum=0.9)
    params = list(optimizer.parameters)
    kwargs = make(params)
    if state:
        kwargs["state_dict"] = optimizer.state_dict()
    return optimizer, kwargs


def _status_tensor():
    from minigrad import Tensor
    return Tensor(numpy.zeros(8, numpy.float32))


def _initializer(name):
    from minigrad import nn
    return getattr(nn, name)(1.0) if name == "Constant" else getattr(nn, name)()


def _labels():
    from minigrad import Tensor
    return Tensor(numpy.array([0, 2], numpy.int32))


def _sgd(net):
    from minigrad import nn
    return nn.SGD(net.trainable_params(), 0.1)


def _thor_model_args():
    """(ConvertModelUtils, the arguments converting a Model over a THOR optimizer)."""
    from minigrad import optim
    from minigrad.train import Model
    net = _thor_net()
    optimizer = optim.THOR(net, learning_rate=_t(), damping=_t(), momentum=0.9)
    model = Model(net, loss_fn=_mse(), optimizer=optimizer)
    return _class("train.ConvertModelUtils")(), dict(model=model, network=net, loss_fn=_mse(),
                                                     optimizer=optimizer)
