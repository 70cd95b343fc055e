"""A walk over the whole public API: every public function and class of minigrad's packages, each
argument given values of every kind (None, strs, ints where sequences go, sequences where ints
go, 0-d arrays, NumPy scalars, Tensors, bools, huge, negative and non-finite numbers).

Each call must end in one of two ways:

* a TypeError or ValueError whose message names the argument and shows the value;
* an acceptance: the value is of a kind the valid baseline value vouches for (an int where the
  baseline passes an int, None where the default is None...), or one ``ACCEPTED`` lists with
  the reason the API documents.

Any other exception, or a value accepted without a reason, fails the test. A public callable
without a baseline (``helpers.api_walk.BASELINES``; none is needed when every argument has a
default) and not in ``NOT_WALKED`` fails ``test_every_public_callable_has_a_baseline``, saying
what to add, so new API is walked from the day it is exported.

Public methods are walked the same way (``helpers.api_walk.public_methods``: every method of a
public class whose name has no leading underscore and that takes arguments), each called on a
fresh valid instance (``METHOD_BASELINES``, else one built from the class's baseline); a method
that refuses a value must leave the instance's state as it was (nothing half-applied). A method
with required arguments and no baseline, not matched by ``METHODS_NOT_WALKED``, fails
``test_every_public_method_has_a_baseline``.

The walk makes 160 times the hypothesis profile's ``max_examples`` calls over the functions and
40 times over the methods (``ci``, the suite's: 4,000 and 1,000; ``HYPOTHESIS_PROFILE=wide``:
160,000 and 40,000); ``MINIGRAD_API_WALK_ALL=1`` adds the exhaustive
pass of every fixed value through every argument. With ``-s`` the walk prints how
many calls it made and how many distinct messages it saw.
"""
import fnmatch
import math
import os
import warnings

import numpy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import api_walk as walk
from helpers.api_walk import ANY_REAL, OPERAND
from helpers.api_walk_gaps import GAPS
from helpers.state import reachable_state

CALLABLES = walk.public_callables()
METHODS = walk.public_methods(CALLABLES)
GAPS_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "helpers", "api_walk_gaps.py")

# Callables whose arguments the walk does not call, and why.
NOT_WALKED = {
    "communication.init": "joins the MPI job for the rest of the process (a call with a valid "
                          "value cannot be undone); tests/communication checks backend_name",
    "communication.release": "leaves the MPI job (takes no arguments)",
    "communication.PendingAllReduce": "made by all_reduce_start, not by users",
    "communication.GlobalComm": "a namespace of MindSpore's constants (takes no arguments)",
    "amp.StepReport": "a record the scalers return; its fields are not user input",
    "amp.OptState": "an enum of the scaler's per-optimizer states, not user input",
    "amp.LossScaler": "the abstract base of StaticLossScaler and DynamicLossScaler, walked there",
    "amp.ScaleCore": "the shared loss-scale rule under every face; its arguments come through "
                     "the faces, walked there (GradScaler, DynamicLossScale, the managers)",
    "optim.ThorReport": "a record THOR's steps return; its fields are not user input",
    "optim.LayerReport": "a record THOR's steps return; its fields are not user input",
    "mixed_precision.LossScale": "abstract: the base of FixedLossScale and DynamicLossScale",
    "train.Metric": "abstract: the base of the metrics, walked through them",
    "dataset.Dataset": "the base of the pipeline nodes, built through its subclasses",
    "dataset.Cifar10Dataset": "reads a folder of files; tests/dataset/test_cifar10.py walks "
                              "its arguments with real files",
    "dataset.MnistDataset": "reads a folder of files; tests/dataset/test_mnist.py walks its "
                            "arguments with real files",
    "dataset.GeneratorDataset": "takes its arguments through *args (the source's kind picks "
                                "the subclass); tests/dataset/test_generator.py checks them",
}

# Public methods the walk does not call (fnmatch patterns of ``METHODS`` names), and why. A
# public method with arguments that no pattern covers needs a ``helpers.api_walk.METHOD_BASELINES``
# entry (none is needed when its class has a baseline and every argument has a default).
METHODS_NOT_WALKED = {
    "*.construct": "a Cell's forward pass (called through the Cell) on data of the shape the "
                   "layer documents; each layer refuses a non-Tensor input by name "
                   "(check_tensor, tests/nn/test_forward_refusals.py) and its ops check the rest "
                   "(ops.*); walking every forward needs a data baseline per layer",
    "train.Callback.*": "the base Callback's hooks do nothing but call their older MindSpore "
                        "twins (begin, step_end...), which do nothing; a subclass overrides "
                        "those it needs, and the hooks that do something are walked there",
    "optim.*.update": "the per-parameter rule Optimizer.step calls with the optimizer's own "
                      "state (a subclass overrides it; users call step)",
    "optim.*.init_state": "the per-parameter state Optimizer builds for itself (a subclass "
                          "overrides it)",
    "autograd.Function.*": "the protocol of autograd's ops (each op calls them with its own "
                           "arrays); users call the ops, walked as ops.*",
    "ops.*.op": "the function of a primitive, walked under its own name (ops.concat...)",
    "ops.AvgPool.padding": "the padding a pooling primitive computes for its own input",
    "amp.ScaleCore.*": "the shared loss-scale rule under every face; its arguments come through "
                       "the faces' methods, walked there",
    "amp.LossScaler.adjust": "abstract: StaticLossScaler's and DynamicLossScaler's, walked there",
    "LossScaleManager.update_loss_scale": "abstract: the managers' methods, walked there",
    "optim.LearningRateSchedule.*": "abstract: the base of the schedules",
    "amp.OverflowStatus.*": "the float status of one step, which amp's checks and the train "
                            "cells fill (float_status); users read it, the checks write it",
    "optim.THOR.reduce_factors": "the train cells' protocol with THOR: called each step with "
                                 "THOR's own records",
    "optim.THOR.set_backward_scale": "the train cells' protocol with THOR: called before each "
                                     "backprop with the cell's loss scale",
    "optim.THOR.bind_loss_cell": "the train cells' protocol with THOR: called by the cell that "
                                 "wraps it",
    "nn.DynamicLossScaleUpdateCell.read": "the update cell's exchange with its train cell's "
                                          "loss_scale Parameter (the train cell calls it)",
    "nn.DynamicLossScaleUpdateCell.write": "the update cell's exchange with its train cell's "
                                           "loss_scale Parameter (the train cell calls it)",
    "nn.TrainOneStepCell.loss_and_grads": "a step's own piece, called by construct with the "
                                          "cell's inputs (a subclass overrides it)",
    "nn.TrainOneStepCell.grad_reducer": "a step's own piece, called by construct with the "
                                        "step's gradients (a subclass overrides it)",
    "train.Metric.update": "abstract: each metric's update, walked in its class",
    "nn.Initializer.sample": "abstract: each initializer's sample, walked in its class",
}

# Arguments whose valid values size what the call allocates: a finite value of magnitude above
# ``_SMALL`` (or, for a step, below ``1 / _SMALL``) is not tried there (arange(0, 1e10) and
# arange(0, 4, 1e-10) are valid and would fill 80 GB or more)
SIZES_MEMORY = {("ops.arange", "start"), ("ops.arange", "stop"), ("ops.arange", "step")}
_SMALL = 1e6


def _allocates_too_much(name, argument, value):
    if (name, argument) not in SIZES_MEMORY or not walk.is_number(value):
        return False
    size = abs(float(value))
    if not math.isfinite(size):
        return False
    return size > _SMALL or (argument == "step" and 0 < size < 1 / _SMALL)

# The test helpers whose verdict on valid input is an AssertionError (values that differ)
VERDICTS = {"testing.assert_forward", "testing.check_backward", "testing.check_double_backward"}

# Acceptances the API documents, per callable and argument (``"*"``: every argument of the
# callable): {name: {argument: (kinds, reason)}}.
_DATA = "data: a Tensor, a number, a bool or an array of numbers, finite or not (check_operand)"
_ATTRIBUTE = (frozenset({"str_number"}), "an attribute name: any non-empty str without '.'")
_WORKERS = (frozenset({"int", "np_int"}), "a count of workers (MindSpore's; None: the default)")
_AXIS = (frozenset({"negative"}), "an axis, counted from the end when negative (check_axis)")
ACCEPTED = {
    "Tensor": {"data": (OPERAND, _DATA)},
    "Parameter": {"default_input": (OPERAND, _DATA)},
    "testing.assert_forward": {"actual": (OPERAND, _DATA), "expected": (OPERAND, _DATA)},
    **dict.fromkeys(("testing.check_backward", "testing.check_double_backward",
                     "testing.numerical_grad"),
                    {"inputs": (OPERAND, _DATA), "grad_outputs": (OPERAND | {"none"}, _DATA),
                     "grad_grad_inputs": (OPERAND | {"none"}, _DATA),
                     "atol": (ANY_REAL | {"huge", "huge_float"},
                              "a tolerance: any real >= 0 (a large one passes every gradient)"),
                     "rtol": (ANY_REAL | {"huge", "huge_float"}, "a tolerance, as atol"),
                     "eps": (ANY_REAL | {"huge", "huge_float"},
                             "a finite-difference step: any real > 0 (the verdict on too large a "
                             "step is the checker's AssertionError)"),
                     "no_grads": (frozenset({"int", "np_int", "list", "tuple"}),
                                  "positions of inputs not to differentiate (check_int_tuple)")}),
    **dict.fromkeys(("optim.Optimizer", "optim.SGD", "optim.Momentum", "optim.Adam",
                     "optim.AdamWeightDecay", "optim.RMSProp"),
                    {"learning_rate": (frozenset({"array0d", "array", "tensor", "list", "tuple"}),
                                       "MindSpore's learning rates: a float, a 0-d or 1-D Tensor "
                                       "or array, or an Iterable of one rate per step")}),
    **dict.fromkeys(("communication.all_gather_object", "communication.broadcast_object"),
                    {"obj": (frozenset(walk.KINDS), "any picklable value")}),
    **dict.fromkeys(("communication.all_reduce", "communication.all_reduce_",
                     "communication.all_reduce_start", "communication.broadcast",
                     "communication.broadcast_", "communication.all_gather"),
                    {"array": (frozenset({"array0d"}), "a 0-d array is an array: one value "
                                                       "per rank")}),
    **dict.fromkeys(("communication.any_rank", "communication.reduce_flag"),
                    {"flag": (frozenset({"int"}), "the int 0 or 1 is a flag (an overflow "
                                                  "count of one step); 3 is refused")}),
    # loss scaling and the float status
    "DynamicLossScaleManager": dict.fromkeys(
        ("init_loss_scale", "scale_factor"),
        (ANY_REAL | {"huge", "huge_float"}, "MindSpore's loss scale and factor take any number "
                                            "(its defaults, 2**24 and 2, are ints)")),
    "mixed_precision.DynamicLossScale": {
        "initial_loss_scale": (ANY_REAL | {"huge", "huge_float"},
                               "TensorFlow's initial_loss_scale is a float (default 2**15)"),
        "increment_period": (frozenset({"float", "np_float"}),
                             "a whole float is a step count: TensorFlow converts it with int() "
                             "(1.5 is refused)"),
        "floor": (frozenset({"none"}), "None: no floor but float32's smallest normal scale, "
                                       "as PyTorch's GradScaler")},
    "mixed_precision.get": {"identifier": (ANY_REAL | {"huge", "huge_float"},
                                           "a number is a FixedLossScale (TensorFlow's get)")},
    "mixed_precision.Policy": {
        "loss_scale": (ANY_REAL | {"huge", "huge_float", "none"},
                       "a number is a FixedLossScale (TensorFlow's get); None: no loss scaling")},
    "mixed_precision.LossScaleOptimizer": {
        "loss_scale": (ANY_REAL | {"huge", "huge_float", "bool"},
                       "a number is a FixedLossScale (TensorFlow's get); a bool is TF 2.4's "
                       "dynamic, the second positional argument in its order"),
        "initial_scale": (ANY_REAL | {"huge", "huge_float"}, "TF 2.4's first loss scale: a float"),
        "dynamic_growth_steps": (frozenset({"int", "np_int", "float", "np_float"}),
                                 "TF 2.4's growth steps: an int, or a whole float as "
                                 "DynamicLossScale's increment_period")},
    "amp.GradScaler.scale": {"outputs": (frozenset({"list", "tuple"}),
                                         "PyTorch's outputs: a Tensor or a (nested) list or tuple "
                                         "of Tensors, each scaled (an empty one stays empty)")},
    **dict.fromkeys(("amp.LossScaler.scale", "amp.LossScaler.unscale"), {
        "inputs": (frozenset({"list", "tuple"}),
                   "MindSpore's inputs: a Tensor or a tuple of Tensors, each scaled (an empty "
                   "one stays empty)")}),
    "amp.GradScaler.update": {"new_scale": (frozenset({"int", "np_int", "float", "np_float",
                                                       "huge", "huge_float", "tensor"}),
                                            "PyTorch's new_scale: a positive float or a "
                                            "one-element Tensor (inf in float32 is refused)")},
    "amp.alloc_status": {"like": (frozenset({"array0d", "array", "tensor"}),
                                  "a Tensor or array: the status goes on its device")},
    "amp.all_finite": {"inputs": (frozenset({"tensor"}),
                                  "one Tensor stands for a tuple of one")},
    "amp.check_and_unscale": {
        "arrays": (frozenset({"array0d", "array", "tensor"}),
                   "one Tensor or array stands for a list of one"),
        "inv_scale": (frozenset({"array0d", "tensor"}),
                      "a one-element Tensor or array holding the factor, as PyTorch's inv_scale "
                      "tensor")},
    "amp.check_and_unscale_to_fp32": {
        "inv_scale": (frozenset({"array0d", "tensor"}),
                      "a one-element Tensor or array holding the factor, as PyTorch's inv_scale "
                      "tensor")},
    "amp.custom_fwd": {"cast_inputs": (frozenset({"str"}),
                                       "a dtype's name ('half', 'float32': check_dtype)")},
    "Model.eval": {"callbacks": (frozenset({"list", "tuple"}),
                                 "a list of Callbacks; an empty one is none, as None")},
    "Model.predict": {"*predict_data": (frozenset({"array0d", "array", "tensor"}),
                                        "the network's input: a Tensor or an array (MindSpore's "
                                        "predict_data), whatever shape the network takes")},
    "Model": {"eval_indexes": (frozenset({"list", "tuple"}),
                               "[loss, predictions, labels]: positions in eval_network's outputs"),
              "metrics": (frozenset({"list", "tuple", "object"}),
                          "a dict of Metrics or a set/list of names (MindSpore's dict or set, "
                          "Keras' list); an empty one is no metrics, as None")},
    "nn.initializer": {"init": (ANY_REAL | {"huge", "huge_float", "array", "tensor"},
                                "a number initialises every element to it (nn.Constant); a "
                                "Tensor or array of the shape is used as is (MindSpore)")},
    "ops.reshape": {"shape": ({"negative"}, "-1 stands for the size reshape infers")},
    "ops.full": {"value": (OPERAND - {"array", "list", "tuple"}, "the fill value: any number")},
    "ops.full_like": {"value": (OPERAND - {"array", "list", "tuple"}, "the fill value")},
    "ops.fill": {"value": (OPERAND - {"array", "list", "tuple"}, "the fill value")},
    **dict.fromkeys(("ops.clip", "Tensor.clip", "Tensor.clamp"), {
        "min": (ANY_REAL | {"inf", "np_nonfinite", "huge", "huge_float", "array0d", "tensor"},
                "a bound: any real number, a 0-d array or a Tensor (an infinite bound clips "
                "nothing on that side)"),
        "max": (ANY_REAL | {"inf", "np_nonfinite", "huge", "huge_float", "array0d", "tensor"},
                "a bound, as min")}),
    **dict.fromkeys(("Tensor.add", "Tensor.sub", "Tensor.mul", "Tensor.div", "Tensor.matmul"),
                    {"other": (OPERAND, _DATA)}),
    "Tensor.pow": {"exponent": (OPERAND, _DATA)},
    "Tensor.backward": {"gradient": (OPERAND, "the seed: " + _DATA),
                        "inputs": (frozenset({"tensor"}), "PyTorch's inputs: a Tensor or a "
                                                          "sequence of Tensors")},
    **dict.fromkeys(("Tensor.reshape", "Tensor.view"), {
        "*shape_": (frozenset({"int", "np_int", "negative"}),
                    "the new shape as ints (t.reshape(6) or t.reshape(2, 3)); -1 stands for the "
                    "size reshape infers")}),
    **dict.fromkeys(("Tensor.transpose", "Tensor.permute"), {
        "*axes": (frozenset({"int", "np_int", "negative"}),
                  "the axes as ints (t.permute(1, 0)), counted from the end when negative")}),
    "Tensor.swapaxes": dict.fromkeys(("a", "b"), _AXIS),
    "Tensor.unsqueeze": {"dim": _AXIS},
    "ops.leaky_relu": {"alpha": (ANY_REAL, "any finite slope, negative included (PyTorch's "
                                           "negative_slope, MindSpore's alpha)")},
    **dict.fromkeys(("ops.zeros", "ops.ones"), {
        "dtype": (frozenset({"none"}), "None: float32, as MindSpore's ops.zeros/ops.ones and "
                                       "PyTorch's torch.zeros/torch.ones")}),
    "ops.depend": {"expr": (frozenset(walk.KINDS), "the result of what runs before value (an "
                                                   "optimizer's True, a tuple, None): anything")},
    "ops.embedding": {"ids": (frozenset({"int", "np_int", "array0d", "array", "list", "tuple"}),
                              "integer ids: an int, an integer array or nested lists of ints "
                              "(NumPy's integer indexing)")},
    "ops.split": {"sections_or_indices": (frozenset({"list", "tuple"}),
                                          "a list of cut indices, as numpy.split takes")},
    "ops.getitem": {"index": (frozenset({"negative", "bool", "np_bool", "none", "np_int", "list",
                                         "tuple", "array0d", "array", "tensor"}),
                              "NumPy's and PyTorch's indices: an int counted from the end when "
                              "negative, a bool or None (a new axis), integer or bool arrays, "
                              "Tensors or lists, a tuple of them")},
    "autograd.grad": {"grad_outputs": (OPERAND, "the seeds: a Tensor, an array or a number "
                                                "(broadcast to the output), or one per output")},
    "autograd.backward": {"grad_tensors": (OPERAND, "the seeds, as autograd.grad's grad_outputs"),
                          "inputs": (frozenset({"tensor", "list", "tuple"}),
                                     "a Tensor or a sequence of Tensors (PyTorch's inputs)")},
    **dict.fromkeys(("grad", "value_and_grad"), {
        "grad_position": (frozenset({"negative", "list", "tuple"}),
                          "a position counted from the end when negative, or a tuple of "
                          "positions (MindSpore); the range is checked when the inputs are"),
        "weights": (frozenset({"tensor", "list", "tuple"}),
                    "a Parameter or a list/tuple of Parameters (a Cell's trainable_params())")}),
    "testing.noncontiguous": {"array": (frozenset({"array0d"}), "a 0-d array, returned as it is "
                                                                "(no stride to change)")},
    "from_dlpack": {"obj": (frozenset({"array0d", "tensor"}),
                            "any array that speaks DLPack: a 0-d one, a Tensor (__dlpack__)")},
}
# Acceptances of the training API: checkpoints, the context, nn, optim, train and dataset.
ACCEPTED.update({
    "Model.train": {
        "callbacks": (frozenset({"list", "tuple"}), "a list of Callbacks; an empty one is none, "
                                                     "as None"),
        "sink_size": (frozenset({"int", "np_int"}),
                      "MindSpore's sink_size: -1 or a positive count of steps per sink (ignored: "
                      "minigrad feeds the data step by step)")},
    "dataset.Dataset.batch": {"num_parallel_workers": _WORKERS},
    "dataset.Dataset.map": {
        **dict.fromkeys(("input_columns", "output_columns"),
                        (frozenset({"str", "str_number", "list", "tuple"}),
                         "MindSpore's column names: a str or a list of strs")),
        "num_parallel_workers": _WORKERS},
    **dict.fromkeys(("dataset.Dataset.create_tuple_iterator",
                     "dataset.Dataset.create_dict_iterator"), {
        "num_epochs": (frozenset({"int", "np_int"}), "a count of epochs (-1: no limit)"),
        "columns": (frozenset({"str", "str_number", "list", "tuple"}),
                    "MindSpore's column names: a str or a list of strs")}),
    "dataset.Dataset.repeat": {"count": (frozenset({"huge", "none"}),
                                         "a loop bound, never stored in an array: any positive "
                                         "int, beyond int64 too (repeat(2 ** 70)); None: "
                                         "without end")},
    "dataset.NumpySlicesDataset.take": {"indices": (frozenset({"int", "np_int", "negative",
                                                               "array0d", "array"}),
                                                    "an int or an array of ints: a row or a "
                                                    "batch, negative from the end")},
    **dict.fromkeys(("optim.Optimizer.apply_gradients", "optim.THOR.apply_gradients"), {
        "scale": (frozenset({"tensor"}), "a loss scale: a positive finite number or a "
                                         "one-element Tensor holding it (a train cell's "
                                         "scale_sense)")}),
    "optim.Optimizer.get_lr_parameter": {"param": (frozenset({"list"}),
                                                   "MindSpore's param: a Parameter or a list of "
                                                   "them (an empty list gives an empty list)")},
    **dict.fromkeys(("nn.Cell.cells_and_names", "nn.Cell.parameters_and_names"), {
        "name_prefix": (frozenset({"str", "str_number"}), "a prefix of the paths: any str")}),
    "nn.Cell.insert_child_to_cell": {"child_name": _ATTRIBUTE},
    "nn.Cell.insert_param_to_cell": {"param_name": _ATTRIBUTE},
    "nn.CellList.insert": {"index": (frozenset({"negative"}), "as list.insert: a negative index "
                                                              "counts from the end")},
    "nn.ParameterTuple.clone": {"init": (ANY_REAL | {"huge", "huge_float", "array", "tensor"},
                                         "what nn.initializer takes: a number initialises every "
                                         "element to it; a Tensor or array of the shape is used "
                                         "as is")},
    "nn.TrainOneStepWithLossScaleCell.get_overflow_status": {
        "compute_output": (frozenset({"tensor"}), "MindSpore's compute_output: a Tensor or a "
                                                  "tuple of Tensors (the gradients)")},
    **dict.fromkeys(("mixed_precision.LossScale.update", "mixed_precision.FixedLossScale.update"),
                    {"grads": (frozenset({"tensor", "object"}),
                               "TensorFlow's grads: a Tensor or any nesting of lists, tuples and "
                               "dicts of them (nest.flatten; an empty one holds none)")}),
    "mixed_precision.LossScaleOptimizer.minimize": {
        "loss": (frozenset({"tensor"}), "Keras's loss: a function returning the loss, or a loss "
                                        "Tensor (which carries its graph)"),
        "grad_loss": (OPERAND, "the seed of backprop: " + _DATA)},
    "train.Loss.update": {"*inputs": (OPERAND, "the loss of a batch: " + _DATA)},
    "train.ConvertModelUtils.convert_to_thor_model": {
        "metrics": (frozenset({"list", "tuple", "object"}),
                    "Model's metrics: a dict of Metrics or a set/list of names; an empty one is "
                    "no metrics, as None")},
    "nn.LossBase.get_loss": {"x": (OPERAND, _DATA), "weights": (OPERAND, _DATA)},
    "nn.TrainOneStepWithLossScaleCell.start_overflow_check": dict.fromkeys(
        ("pre_cond", "compute_input"),
        (frozenset(walk.KINDS), "MindSpore's ordering arguments: pre_cond is what runs before "
                                "(eager execution orders it), compute_input is returned "
                                "unchanged; any value")),
    "dataset.RepeatDataset": {"count": (frozenset({"huge"}),
                                        "a loop bound, never stored in an array: any positive "
                                        "int, beyond int64 too (repeat(2 ** 70))")},
    "dataset.MapDataset": dict.fromkeys(
        ("input_columns", "output_columns"),
        (frozenset({"str", "str_number", "list", "tuple"}),
         "MindSpore's column names: a str or a list of strs")),
    "dataset.NumpySlicesDataset": {
        "column_names": (frozenset({"str", "str_number", "list", "tuple"}),
                         "MindSpore's column names: a str or a list of strs"),
        "data": (frozenset({"list"}), "MindSpore: a list is one column, numpy.array(data)"),
        "num_parallel_workers": (frozenset({"int", "np_int"}),
                                 "a count of workers (MindSpore's; None: the default)"),
        "sampler": (frozenset({"list", "tuple"}),
                    "row indices that fix the order, negative from the end (IndexedSource)"),
    },
    "train.CheckpointConfig": {
        **dict.fromkeys(("save_checkpoint_seconds", "keep_checkpoint_per_n_minutes"),
                        (frozenset({"none", "float", "np_float", "huge", "huge_float"}),
                         "a time: any number >= 0, fractions included (MindSpore takes an "
                         "int); None or 0 turns it off")),
        "keep_checkpoint_max": (frozenset({"none"}), "None turns it off (MindSpore)"),
        "append_info": (frozenset({"list", "tuple"}),
                        "MindSpore's append_info: a list of 'epoch_num', 'step_num' and dicts"),
    },
    **dict.fromkeys(("optim.THOR", "optim.thor"),
                    {"split_indices": (frozenset({"list", "tuple"}),
                                       "MindSpore's split_indices: increasing layer indices "
                                       "closing each all-reduce group")}),
    "nn.DistributedGradReducer": {"mean": (frozenset({"bool", "np_bool"}),
                                           "a flag (None: the context's gradients_mean)")},
    "nn.DynamicLossScaleUpdateCell": {"scale_factor": (frozenset({"float", "np_float", "huge",
                                                                  "huge_float"}),
                                                       "a growth factor > 1, any real (the one "
                                                       "ScaleCore's rule)")},
    "nn.TrainOneStepWithLossScaleCell": {"scale_sense": (frozenset({"tensor"}),
                                                         "MindSpore's scale_sense: an update "
                                                         "Cell or a Tensor of shape () or (1,)")},
    **dict.fromkeys(("nn.HeNormal", "nn.HeUniform"),
                    {"negative_slope": (frozenset({"negative", "negative_float"}),
                                        "the slope of a leaky ReLU, any real (the gain squares "
                                        "it; PyTorch's kaiming_uniform_ takes any a)")}),
    "load_checkpoint": {"filter_prefix": (frozenset({"str", "str_number", "list", "tuple"}),
                                          "MindSpore's filter_prefix: a str or a list/tuple of "
                                          "non-empty strs")},
    "save_checkpoint": {"ckpt_file_name": (frozenset({"str_number"}),
                                           "a file name: any non-empty str ('nan' saves "
                                           "nan.ckpt)"),
                        "append_dict": (frozenset({"object"}),
                                        "a dict of extra values; an empty one appends nothing")},
})
# An op's operands are data (any Tensor, number or array); the names below, in every op.
_OPERANDS = ("x", "a", "b", "y", "condition", "input", "value", "expr", "query", "key",
             "attn_mask", "gamma", "beta", "running_mean", "running_var", "weight", "bias",
             "table")
for _name in CALLABLES:
    if _name.startswith("ops.") and _name[4].islower():
        for _argument in _OPERANDS:
            ACCEPTED.setdefault(_name, {}).setdefault(_argument, (OPERAND, _DATA))

# Acceptances by argument name, wherever it appears (the API spells one kind of argument with
# one name); mostly arguments whose default is None, which vouches for nothing else.
_INTS = frozenset({"int", "np_int"})
_SIZES = (_INTS | {"list", "tuple"},
          "an int or a tuple/list of ints (check_int_tuple); 0 and 1 are valid sizes")
_AXES = (_INTS | {"negative", "list", "tuple"},
         "an axis or axes, counted from the end when negative; checked against the input's "
         "dimensions when the op runs (a ValueError naming the axis)")
_COUNT = (_INTS, "a count or a size (None: the default)")
_INDEX = (_INTS | {"negative"}, "an index, counted from the end when negative")
_REAL = (ANY_REAL | {"huge", "huge_float"}, "a real-valued setting (None: the default)")
_FLAG = (frozenset({"bool", "np_bool"}), "a flag (None: the default)")
_NAME = (frozenset({"str", "str_number"}), "a name or a file name: any non-empty str")
ACCEPTED_BY_ARGUMENT = {
    **dict.fromkeys(("kernel_size", "stride", "strides", "dilation", "padding", "pad", "kernel",
                     "in_hw", "shape", "normalized_shape"), _SIZES),
    **dict.fromkeys(("axis", "axes", "axis1", "axis2", "begin_norm_axis", "begin_params_axis"),
                    _AXES),
    **dict.fromkeys(("num_samples", "data_size", "max_consecutive_skips", "num_threads", "kdim",
                     "vdim", "degree", "bucket_bytes", "factor_frequency", "inverse_frequency",
                     "k", "seed", "fisher_seed"), _COUNT),
    **dict.fromkeys(("count", "ignore_index", "padding_idx"), _INDEX),
    **dict.fromkeys(("cap", "floor", "kl_clip", "p", "keep_prob", "factor_decay", "scale",
                     "mean", "sigma", "gain", "start", "stop", "step"), _REAL),
    **dict.fromkeys(("shuffle", "use_tqdm", "use_batch_statistics", "retain_graph",
                     "allow_unused", "cache_enabled", "shared", "dynamic", "reverse", "sparse"),
                    _FLAG),
    **dict.fromkeys(("name", "prefix", "directory"), _NAME),
    **dict.fromkeys(("dtype", "output_type", "cast_model_type", "type"),
                    (frozenset({"str"}), "a dtype's name ('half', 'float16'...: check_dtype)")),
    **dict.fromkeys(("weight_init", "bias_init"),
                    (ANY_REAL | {"none", "huge", "huge_float", "array", "tensor"},
                     "a constant initial value (nn.Constant), a Tensor or array of the "
                     "parameter's shape (used as is), or None: Dense's and Conv2d's default "
                     "initializers")),
    **dict.fromkeys(("gamma_init", "beta_init", "moving_mean_init", "moving_var_init",
                     "embedding_table", "value"),
                    (ANY_REAL | {"huge", "huge_float"}, "a constant initial value")),
    **dict.fromkeys(("weight", "attn_mask", "sens", "bias"),
                    (OPERAND - {"huge_float"}, "a Tensor, a number or an array (check_operand)")),
}

FIXED_VALUES = [
    None, "abc", "nan", "", True, False, numpy.bool_(True), 0, 3, -7, 10 ** 30, -(10 ** 30),
    2 ** 63, 1.5, -0.5, 1e30, math.inf, -math.inf, math.nan, numpy.float32(3.0),
    numpy.float16(math.inf), numpy.int64(3), numpy.uint8(3), numpy.array(2.0), numpy.array(3),
    numpy.ones(2), [2], [2, 3], (2, 3), [], [1.5], ["a"], [None], {}, object(),
]


# values like those hypothesis draws (small ints, floats, short strs, lists of small ints), for
# the exhaustive pass
DRAWN_LIKE = [1, 2, 5, 64, -1, -2, 0.0, 1.0, 0.25, 2.0, 1e-3, 1e10, -1.0, "a", "A", "0", " ",
              "half",
              [0], [1, 2], [-1], [6, 6, 6, 6], [0, -3]]


def _tensor():
    from minigrad import Tensor
    return Tensor(numpy.float32(1.0))


def _values():
    """Every kind of value: the fixed ones above, a Tensor, and drawn numbers, strs and lists of
    small ints (kept small: a drawn size must not allocate gigabytes)."""
    return st.one_of(
        st.sampled_from(FIXED_VALUES),
        st.builds(_tensor),
        st.integers(min_value=-10, max_value=64),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=4),
        st.lists(st.integers(min_value=-3, max_value=6), max_size=4),
    )


def _cases():
    """(name, argument) for every walked callable, sorted."""
    cases = []
    for name, obj in sorted(CALLABLES.items()):
        if name in NOT_WALKED:
            continue
        for param in walk.parameters(obj):
            cases.append((name, param.name))
    return cases


CASES = _cases()


def method_skipped(name):
    """The ``METHODS_NOT_WALKED`` reason for method ``name``, or None."""
    for pattern, reason in METHODS_NOT_WALKED.items():
        if fnmatch.fnmatchcase(name, pattern):
            return reason
    return None


def _method_cases():
    """(name, argument) for every walked method, sorted; a method's ``*args`` is walked (as one
    positional value, ``"*name"``) where its baseline passes it."""
    cases = []
    for name, (cls, attribute) in sorted(METHODS.items()):
        if method_skipped(name) is not None:
            continue
        given = walk.METHOD_BASELINES.get(name, lambda: (None, {}))
        try:
            given = given()[1]
        except Exception:  # noqa: BLE001 -- test_method_baselines_are_valid_calls reports it
            given = {}
        for param in walk.method_parameters(getattr(cls, attribute), with_star=True):
            if param.kind is param.VAR_POSITIONAL:
                if f"*{param.name}" in given:
                    cases.append((name, f"*{param.name}"))
            else:
                cases.append((name, param.name))
    return cases


METHOD_CASES = _method_cases()


class Tally:
    calls = 0
    messages = set()
    accepted = 0


@pytest.fixture(scope="module", autouse=True)
def _checkpoint_and_report(tmp_path_factory):
    from minigrad import nn
    from minigrad.train import save_checkpoint
    folder = tmp_path_factory.mktemp("walk")
    walk._CKPT["path"] = save_checkpoint(nn.Dense(3, 2), str(folder / "net.ckpt"))
    walk._CKPT["out"] = str(folder / "out.ckpt")
    yield
    print(f"\nAPI walk: {len(CALLABLES)} public callables and {len(METHODS)} methods, "
          f"{len(CASES) + len(METHOD_CASES)} arguments, "
          f"{Tally.calls} calls, {Tally.accepted} accepted, {len(Tally.messages)} distinct "
          f"messages")


@pytest.fixture(autouse=True)
def _in_a_scratch_folder(tmp_path, monkeypatch):
    """Run in an empty folder: a walked ModelCheckpoint(directory='abc') makes that folder."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _restore_globals():
    """The walk calls setters (the global policy, the auto-parallel context, the seed):
    restore them after each test."""
    from minigrad import communication, mixed_precision
    policy = mixed_precision.global_policy()
    parallel = communication.get_auto_parallel_context("parallel_mode")
    yield
    mixed_precision.set_global_policy(policy)
    communication.reset_auto_parallel_context()
    communication.set_auto_parallel_context(parallel_mode=parallel)


def _accepted_kinds(name, argument, base, default=None):
    kinds = set(walk.baseline_kinds(base)) | set(walk.baseline_kinds(default))
    for table_argument, (extra, _) in ACCEPTED.get(name, {}).items():
        if table_argument in (argument, "*"):
            kinds |= set(extra)
    if argument in ACCEPTED_BY_ARGUMENT:
        kinds |= set(ACCEPTED_BY_ARGUMENT[argument][0])
    return kinds


def _baseline(name, obj):
    make = walk.BASELINES.get(name)
    kwargs = make() if make is not None else {}
    defaults = {p.name: p.default for p in walk.parameters(obj)
                if p.default is not p.empty}
    return kwargs, defaults


def _method_baseline(name):
    """(a valid instance, keyword arguments, defaults) of method ``name``: its
    ``METHOD_BASELINES`` entry, else an instance built from its class's baseline."""
    cls, attribute = METHODS[name]
    make = walk.METHOD_BASELINES.get(name)
    if make is not None:
        instance, kwargs = make()
    else:
        class_name = next(n for n, obj in CALLABLES.items() if obj is cls)
        instance, kwargs = cls(**_baseline(class_name, cls)[0]), {}
    defaults = {p.name: p.default for p in walk.method_parameters(getattr(cls, attribute))
                if p.default is not p.empty}
    return instance, dict(kwargs), defaults


def outcome(name, argument, value):
    """Call ``name`` (a callable, or a method of a valid instance) with its baseline and
    ``argument=value``: None when the outcome is right, else what is wrong with it. A method
    that refuses the value must leave its instance's state as it was."""
    instance = None
    if name in METHODS:
        instance, kwargs, defaults = _method_baseline(name)
        attribute = METHODS[name][1]

        def obj(**given):
            return walk.call_method(instance, attribute, given)
    else:
        obj = CALLABLES[name]
        kwargs, defaults = _baseline(name, obj)
    default = defaults.get(argument)
    base = kwargs.get(argument, default)
    if argument.startswith("*"):  # a method's *args: one positional value
        base = base[0] if base else None
        kwargs[argument] = (value,)
    else:
        kwargs[argument] = value
    if _allocates_too_much(name, argument, value):
        return None
    Tally.calls += 1
    call = f"{name}({argument}={walk.describe(value)})"
    before = reachable_state(instance) if instance is not None else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj(**kwargs)
    except (TypeError, ValueError) as error:
        message = str(error)
        Tally.messages.add(message)
        named = argument.lstrip("*").rstrip("_") if argument.startswith("*") else argument
        if named not in message:
            return f"{call} raised {type(error).__name__} without naming {named!r}: {message}"
        if instance is not None and reachable_state(instance) != before:
            return f"{call} raised {type(error).__name__} but changed the instance's state"
        # data (an op's operand) is described by its shape and dtype, not shown
        is_data = OPERAND - {"huge_float"} <= _accepted_kinds(name, argument, base, default)
        # a method's *args shows as the tuple of positional values the call passed
        if not is_data and not walk.shown(message, value) and not (
                argument.startswith("*") and walk.shown(message, (value,))):
            return (f"{call} raised {type(error).__name__} without showing the value: "
                    f"{message}")
        return None
    except AssertionError as error:
        if name not in VERDICTS or walk.kind(value) not in _accepted_kinds(name, argument, base,
                                                                          default):
            return (f"{call} raised AssertionError (not a TypeError or ValueError): "
                    f"{error}")
        return None  # a gradient checker's verdict on valid input
    except Exception as error:  # noqa: BLE001 -- the walk reports every other kind
        return f"{call} raised {type(error).__name__} (not a TypeError or ValueError): {error}"
    Tally.accepted += 1
    value_kind = walk.kind(value)
    if value_kind in _accepted_kinds(name, argument, base, default):
        return None
    return (f"{call} was accepted: a value of kind {value_kind!r} where the baseline passes "
            f"{walk.describe(base)}; refuse it through minigrad._checks, or add "
            f"ACCEPTED[{name!r}][{argument!r}] with the reason the API accepts it")


def test_every_public_callable_has_a_baseline():
    missing = []
    for name, obj in sorted(CALLABLES.items()):
        if name in NOT_WALKED or name in walk.BASELINES:
            continue
        required = [p.name for p in walk.parameters(obj) if p.default is p.empty]
        if required:
            missing.append(f"{name} (needs {', '.join(required)})")
    assert not missing, (
        "public callables without a valid baseline call: add an entry to "
        "tests/helpers/api_walk.py BASELINES (or to NOT_WALKED with the reason): "
        + "; ".join(missing))


def test_baselines_are_valid_calls():
    failures = []
    for name, obj in sorted(CALLABLES.items()):
        if name in NOT_WALKED:
            continue
        kwargs, _ = _baseline(name, obj)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                obj(**kwargs)
        except Exception as error:  # noqa: BLE001 -- every failure is listed
            failures.append(f"{name}: {type(error).__name__}: {error}")
    assert not failures, "\n".join(failures)


def test_every_public_method_has_a_baseline():
    missing = []
    for name, (cls, attribute) in sorted(METHODS.items()):
        if method_skipped(name) is not None or name in walk.METHOD_BASELINES:
            continue
        class_name = next(n for n, obj in CALLABLES.items() if obj is cls)
        required = [p.name for p in walk.method_parameters(getattr(cls, attribute))
                    if p.default is p.empty]
        named = walk.method_parameters(getattr(cls, attribute))  # *args walked from a baseline
        if required or not named or class_name in NOT_WALKED:
            missing.append(f"{name} (needs an instance and "
                           f"{', '.join(required) or 'its *args'})")
    assert not missing, (
        "public methods without a valid baseline call: add an entry to "
        "tests/helpers/api_walk.py METHOD_BASELINES (or a pattern to METHODS_NOT_WALKED with "
        "the reason): " + "; ".join(missing))


def test_method_baselines_are_valid_calls():
    failures = []
    for name, (cls, attribute) in sorted(METHODS.items()):
        if method_skipped(name) is not None:
            continue
        try:
            instance, kwargs, _ = _method_baseline(name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                walk.call_method(instance, attribute, kwargs)
        except Exception as error:  # noqa: BLE001 -- every failure is listed
            failures.append(f"{name}: {type(error).__name__}: {error}")
    assert not failures, "\n".join(failures)


def test_tables_name_only_public_callables():
    stale = [n for n in (*walk.BASELINES, *NOT_WALKED, *ACCEPTED)
             if n not in CALLABLES and n not in METHODS]
    stale += [n for n in walk.METHOD_BASELINES if n not in METHODS]
    stale += [p for p in METHODS_NOT_WALKED if not fnmatch.filter(METHODS, p)]
    assert not stale, f"entries for names that are not public callables or methods: {stale}"


@settings(suppress_health_check=list(HealthCheck), deadline=None,
          max_examples=settings().max_examples * 160)
@given(case=st.sampled_from(CASES), value=_values())
def test_every_argument_refuses_bad_values_by_name(case, value):
    name, argument = case
    failure = outcome(name, argument, value)
    assert failure is None or case in GAPS, failure


@settings(suppress_health_check=list(HealthCheck), deadline=None,
          max_examples=settings().max_examples * 40)
@given(case=st.sampled_from(METHOD_CASES), value=_values())
def test_every_method_argument_refuses_bad_values_by_name(case, value):
    name, argument = case
    failure = outcome(name, argument, value)
    assert failure is None or case in GAPS, failure


def test_fixed_values_everywhere():
    """Every fixed value in every argument (the exhaustive pass hypothesis samples from), and
    every entry of ``GAPS`` still a gap (an entry whose argument now passes must go)."""
    if os.environ.get("MINIGRAD_API_WALK_ALL") != "1":
        pytest.skip("set MINIGRAD_API_WALK_ALL=1 for the exhaustive pass")
    failures, gaps = [], {}
    for name, argument in CASES + METHOD_CASES:
        for value in FIXED_VALUES + DRAWN_LIKE + [_tensor()]:
            failure = outcome(name, argument, value)
            if failure is not None:
                gaps.setdefault((name, argument), failure.splitlines()[0])
    failures = [f for case, f in gaps.items() if case not in GAPS]
    closed = [case for case in GAPS if case not in gaps]
    if os.environ.get("MINIGRAD_API_WALK_WRITE_GAPS"):
        _write_gaps(os.environ["MINIGRAD_API_WALK_WRITE_GAPS"], gaps)
    assert not failures, "\n".join(failures)
    assert not closed, f"GAPS entries that the walk no longer finds: remove {closed}"


def _write_gaps(path, gaps):
    lines = []
    for (name, argument), failure in sorted(gaps.items()):
        head = f"    ({name!r}, {argument!r}): "
        room = 100 - len(head) - 3
        text = repr(failure[:room])
        while len(text) > room + 2:
            failure = failure[:len(failure[:room]) - (len(text) - room - 2) - 1]
            text = repr(failure[:room])
        lines.append(f"{head}{text},")
    with open(GAPS_FILE) as source:
        head = source.read().partition("GAPS = {")[0]
    with open(path, "w") as out:
        out.write(head + "GAPS = {\n" + "\n".join(lines) + "\n}\n")
