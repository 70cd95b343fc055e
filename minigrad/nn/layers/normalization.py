"""BatchNorm1d, BatchNorm2d and LayerNorm."""
from minigrad import dtype as dtypes, ops
from minigrad.nn import running_stats
from minigrad.nn.cell import Cell
from minigrad.nn.init import initializer
from minigrad.nn.layers import _check
from minigrad.parameter import Parameter


class _BatchNorm(Cell):
    """y = γ (x - μ) / sqrt(σ² + eps) + β per channel (axis 1), statistics over the other axes.

    In training μ, σ² are the batch statistics and the moving statistics are updated MindSpore
    style: moving = momentum · moving + (1 - momentum) · batch. In evaluation the moving
    statistics are used. ``use_batch_statistics`` overrides the choice: None (default) follows
    ``training``, True always uses (and updates) batch statistics, False always the moving ones.

    The moving statistics are non-trainable float32 Parameters ``moving_mean`` and
    ``moving_variance`` (the parameter-casting helper leaves them float32); the statistics are
    computed in float32 whatever the input dtype. A loss-scaled step that is skipped restores
    them (``minigrad.nn.running_stats``).
    """
    _ndims = ()
    _fp32_params = ("moving_mean", "moving_variance")

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init="ones",
                 beta_init="zeros", moving_mean_init="zeros", moving_var_init="ones",
                 use_batch_statistics=None):
        super().__init__()
        self.num_features = _check.positive_int("num_features", num_features)
        self.eps = _check.real("eps", eps, lambda v: v > 0, "> 0")
        self.momentum = _check.real("momentum", momentum, lambda v: 0 <= v <= 1, "in [0, 1]")
        self.affine = _check.boolean("affine", affine)
        if use_batch_statistics is not None:
            _check.boolean("use_batch_statistics", use_batch_statistics)
        self.use_batch_statistics = use_batch_statistics
        shape = (num_features,)
        self.gamma = Parameter(initializer(gamma_init, shape), requires_grad=affine)
        self.beta = Parameter(initializer(beta_init, shape), requires_grad=affine)
        self.moving_mean = Parameter(initializer(moving_mean_init, shape, dtypes.float32), requires_grad=False)
        self.moving_variance = Parameter(initializer(moving_var_init, shape, dtypes.float32), requires_grad=False)

    def construct(self, x):
        if x.ndim not in self._ndims:
            raise ValueError(f"{type(self).__name__} expects an input of {' or '.join(map(str, self._ndims))} "
                             f"dimensions, got shape {x.shape}")
        if x.shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}(num_features={self.num_features}) got an input "
                             f"with {x.shape[1]} channels (shape {x.shape})")
        use_batch = self.training if self.use_batch_statistics is None else self.use_batch_statistics
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
        super().__init__(num_features, eps, momentum, affine, gamma_init, beta_init, moving_mean_init,
                         moving_var_init, use_batch_statistics)
        self.data_format = _check.data_format(data_format)


class LayerNorm(Cell):
    """y = γ (x - μ) / sqrt(σ² + epsilon) + β, μ and σ² over the axes from ``begin_norm_axis`` on.

    Args:
        normalized_shape: shape of γ and β (a tuple/list, or an int for one axis).
        begin_norm_axis: first normalized axis (default -1).
        begin_params_axis: first axis that γ and β cover (default -1).
        gamma_init, beta_init: default "ones", "zeros".
        epsilon: default 1e-7 (MindSpore's default).
    """

    def __init__(self, normalized_shape, begin_norm_axis=-1, begin_params_axis=-1, gamma_init="ones",
                 beta_init="zeros", epsilon=1e-7):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        if not isinstance(normalized_shape, (tuple, list)):
            raise TypeError(f"normalized_shape must be a tuple or list of ints, got {normalized_shape!r}")
        self.normalized_shape = tuple(_check.positive_int("normalized_shape", n) for n in normalized_shape)
        self.epsilon = _check.real("epsilon", epsilon, lambda v: v > 0, "> 0")
        self.begin_norm_axis, self.begin_params_axis = begin_norm_axis, begin_params_axis
        self.gamma = Parameter(initializer(gamma_init, self.normalized_shape))
        self.beta = Parameter(initializer(beta_init, self.normalized_shape))

    def construct(self, x):
        return ops.layer_norm(x, self.gamma, self.beta, begin_norm_axis=self.begin_norm_axis,
                              begin_params_axis=self.begin_params_axis, eps=self.epsilon)

    def extend_repr(self):
        return (f"normalized_shape={self.normalized_shape}, begin_norm_axis={self.begin_norm_axis}, "
                f"begin_params_axis={self.begin_params_axis}, epsilon={self.epsilon}")
