"""BatchNorm1d, BatchNorm2d and LayerNorm, and ``running_stats``: the record through which a
skipped loss-scaled step takes back the moving statistics its forward pass wrote.

A batch holding inf or NaN makes the loss non-finite and the step is skipped, but the forward
pass has already folded that batch into BatchNorm's ``moving_mean``/``moving_variance``: every
later evaluation would be NaN. So each BatchNorm forward that updates them first records the
values it replaces (``running_stats.save``, once per Parameter until the next ``commit``), and
the loss-scaling faces end every step with ``running_stats.commit()`` (the step was applied)
or ``running_stats.rollback()`` (it was skipped: the statistics are restored bit for bit, in
place). The faces that do so: ``nn.TrainOneStepWithLossScaleCell`` (and
``Model(amp_level="O2")``), ``amp.GradScaler`` (``step`` skipped: rollback; ``update``:
commit) and ``mixed_precision.LossScaleOptimizer.apply_gradients``. No peer framework does
this; it is minigrad's rule that a skipped step leaves every piece of state as it was.

The record is per thread and holds one copy of each statistic written since the last commit;
a loop with no loss scaling never rolls back, and its records only ever hold that one copy.
"""
import threading
import weakref

from minigrad import dtype as dtypes, ops
from minigrad.nn.cell import Cell, check_tensor
from minigrad.nn.init import init_tensor
from minigrad._checks import (check_bool, check_float, check_int, check_positive,
                              check_positive_int)
from minigrad.nn.layers.spatial_args import check_data_format
from minigrad.parameter import Parameter


class RunningStatsRecord(threading.local):
    """The running statistics written since the last ``commit``, per thread (module docstring)."""

    def __init__(self):
        self.saved = {}  # id(param) -> (weak reference to param, the array it held)

    def save(self, *params):
        """Remember the current values of ``params`` (Parameters about to be written in place),
        unless they were saved since the last ``commit``."""
        saved = self.saved
        for p in params:
            key = id(p)
            entry = saved.get(key)
            if entry is None or entry[0]() is not p:
                saved[key] = (weakref.ref(p), p.data.copy())

    def commit(self):
        """Keep every statistic written so far: the step they belong to was applied."""
        self.saved.clear()

    def rollback(self):
        """Restore every statistic saved since the last ``commit``, in place (same arrays, same
        bits, ``version`` unchanged: nothing else saw the skipped values), then forget them."""
        for ref, old in self.saved.values():
            param = ref()
            if param is not None and param.data.shape == old.shape:
                param.data[...] = old
        self.saved.clear()


running_stats = RunningStatsRecord()


class _BatchNorm(Cell):
    """y = γ (x - μ) / sqrt(σ² + eps) + β per channel (axis 1), statistics over the other axes.

    In training μ, σ² are the batch statistics and the moving statistics are updated MindSpore
    style: moving = momentum · moving + (1 - momentum) · batch. In evaluation the moving
    statistics are used. ``use_batch_statistics`` overrides the choice: None (default) follows
    ``training``, True always uses (and updates) batch statistics, False always the moving ones.

    The moving statistics are non-trainable float32 Parameters ``moving_mean`` and
    ``moving_variance`` (the parameter-casting helper leaves them float32); the statistics are
    computed in float32 whatever the input dtype. A loss-scaled step that is skipped restores
    them (``running_stats``, in this module).
    """
    _ndims = ()
    _fp32_params = ("moving_mean", "moving_variance")

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init="ones",
                 beta_init="zeros", moving_mean_init="zeros", moving_var_init="ones",
                 use_batch_statistics=None):
        super().__init__()
        self.num_features = check_positive_int("num_features", num_features)
        self.eps = check_positive("eps", eps)
        self.momentum = check_float("momentum", momentum, low=0.0, high=1.0)
        self.affine = check_bool("affine", affine)
        if use_batch_statistics is not None:
            check_bool("use_batch_statistics", use_batch_statistics)
        self.use_batch_statistics = use_batch_statistics
        shape = (num_features,)
        self.gamma = Parameter(init_tensor("gamma_init", gamma_init, shape), requires_grad=affine)
        self.beta = Parameter(init_tensor("beta_init", beta_init, shape), requires_grad=affine)
        self.moving_mean = Parameter(
            init_tensor("moving_mean_init", moving_mean_init, shape, dtypes.float32),
            requires_grad=False)
        self.moving_variance = Parameter(
            init_tensor("moving_var_init", moving_var_init, shape, dtypes.float32),
            requires_grad=False)

    def construct(self, x):
        check_tensor(type(self).__name__, "x", x)
        if x.ndim not in self._ndims:
            ranks = " or ".join(map(str, self._ndims))
            raise ValueError(f"{type(self).__name__} expects an input of {ranks} dimensions, got "
                             f"shape {x.shape}")
        if x.shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}(num_features={self.num_features}) got an "
                             f"input with {x.shape[1]} channels (shape {x.shape})")
        use_batch = self.use_batch_statistics
        if use_batch is None:
            use_batch = self.training
        if use_batch:  # the update below writes them: a skipped step restores them
            running_stats.save(self.moving_mean, self.moving_variance)
        # ops.batch_norm follows PyTorch: running = (1 - m) running + m batch, so m = 1 - momentum
        return ops.batch_norm(x, self.gamma, self.beta, self.moving_mean, self.moving_variance,
                              training=use_batch, momentum=1.0 - self.momentum, eps=self.eps)

    def extend_repr(self):
        return (f"num_features={self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, use_batch_statistics={self.use_batch_statistics}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization of an (N, C) or (N, C, L) input; see ``_BatchNorm`` for the formula.

    Args: num_features (C), eps=1e-5, momentum=0.9, affine=True, gamma_init="ones",
    beta_init="zeros", moving_mean_init="zeros", moving_var_init="ones", use_batch_statistics=None.
    """
    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of an (N, C, H, W) input; see ``_BatchNorm`` for the formula.

    Args: num_features (C), eps=1e-5, momentum=0.9, affine=True, gamma_init="ones",
    beta_init="zeros", moving_mean_init="zeros", moving_var_init="ones", use_batch_statistics=None,
    data_format="NCHW" (the only layout minigrad computes; another value is a ValueError).
    """
    _ndims = (4,)

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init="ones",
                 beta_init="zeros", moving_mean_init="zeros", moving_var_init="ones",
                 use_batch_statistics=None, data_format="NCHW"):
        super().__init__(num_features, eps, momentum, affine, gamma_init, beta_init,
                         moving_mean_init, moving_var_init, use_batch_statistics)
        self.data_format = check_data_format(data_format)


class LayerNorm(Cell):
    """y = γ (x - μ) / sqrt(σ² + epsilon) + β, μ and σ² over the axes from ``begin_norm_axis`` on.

    Args:
        normalized_shape: shape of γ and β (a tuple/list, or an int for one axis).
        begin_norm_axis: first normalized axis (default -1).
        begin_params_axis: first axis that γ and β cover (default -1).
        gamma_init: initializer of γ; default "ones".
        beta_init: initializer of β; default "zeros".
        epsilon: default 1e-7 (MindSpore's default).

    Raises:
        TypeError: for a ``normalized_shape`` that is not an int or a tuple/list of ints, or an
            axis that is not an int (checked when the layer is built).
        ValueError: for a non-positive size or ``epsilon``, or a negative ``begin_params_axis``
            that covers another number of axes than ``normalized_shape`` has; an axis out of
            range for the input is refused at the call.
    """

    def __init__(self, normalized_shape, begin_norm_axis=-1, begin_params_axis=-1,
                 gamma_init="ones", beta_init="zeros", epsilon=1e-7):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        if not isinstance(normalized_shape, (tuple, list)):
            raise TypeError(f"normalized_shape must be a tuple or list of ints, got "
                            f"{normalized_shape!r}")
        self.normalized_shape = tuple(check_positive_int("normalized_shape", n)
                                      for n in normalized_shape)
        self.epsilon = check_positive("epsilon", epsilon)
        self.begin_norm_axis = check_int("begin_norm_axis", begin_norm_axis, owner="LayerNorm")
        self.begin_params_axis = check_int("begin_params_axis", begin_params_axis,
                                           owner="LayerNorm")
        covered = len(self.normalized_shape)
        if self.begin_params_axis < 0 and -self.begin_params_axis != covered:
            raise ValueError(f"LayerNorm: begin_params_axis={begin_params_axis} makes gamma and "
                             f"beta cover the last {-begin_params_axis} axes, but "
                             f"normalized_shape {self.normalized_shape} has {covered}")
        self.gamma = Parameter(init_tensor("gamma_init", gamma_init, self.normalized_shape))
        self.beta = Parameter(init_tensor("beta_init", beta_init, self.normalized_shape))

    def construct(self, x):
        return ops.layer_norm(x, self.gamma, self.beta, begin_norm_axis=self.begin_norm_axis,
                              begin_params_axis=self.begin_params_axis, eps=self.epsilon)

    def extend_repr(self):
        return (f"normalized_shape={self.normalized_shape}, "
                f"begin_norm_axis={self.begin_norm_axis}, "
                f"begin_params_axis={self.begin_params_axis}, epsilon={self.epsilon}")
