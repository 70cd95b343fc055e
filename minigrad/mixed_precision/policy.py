"""Keras's dtype policies (``tf.keras.mixed_precision.Policy``, ``set_global_policy``): the
compute and variable dtypes of the cells created under them.

A policy governs layers, as in Keras, never plain tensor arithmetic. Every Cell created while
``set_global_policy`` has set ``"mixed_float16"`` (or ``"float16"``) computes in the policy's
compute dtype, as ``Cell.to_float`` makes it: its floating inputs and its own Parameters are cast
to float16 when it is called. Its Parameters are kept in the variable dtype (float32 for
``"mixed_float16"``, float16 for ``"float16"``). ``"mixed_bfloat16"`` and ``"bfloat16"`` are
the same with bfloat16 (the ``minigrad[lowp]`` extra), and have no loss scale by default.
Losses and the training wrappers are not layers: they take no policy (a loss computes in float32
anyway). ``"float32"``, the default, leaves the cells created under it as plain cells. Tensors
themselves are untouched: under
``"mixed_float16"``, ``Tensor(256.0, float16) ** 2`` is inf, as in TensorFlow::

    mixed_precision.set_global_policy("mixed_float16")
    net = nn.SequentialCell([nn.Dense(784, 64, activation="relu"), nn.Dense(64, 10),
                             nn.Softmax().to_float(mstype.float32)])   # Keras's dtype="float32"
    mixed_precision.set_global_policy("float32")

``Model`` trains a network built under a policy with a loss scale (``"mixed_float16"``: a
``DynamicLossScale()`` by default) with loss scaling, as Keras's ``fit`` wraps the optimizer in a
``LossScaleOptimizer``. TF 2.1-2.3's ``Policy(name, loss_scale=...)`` chooses that loss scale.
"""
from minigrad import dtype as dtypes
from minigrad._checks import check_in, check_type
from minigrad._config import config
from minigrad.mixed_precision.loss_scale import _get

# name -> (compute dtype, variable dtype); Keras's names. The bfloat16 ones need ml_dtypes.
_POLICIES = {"float32": ("float32", "float32"), "mixed_float16": ("float16", "float32"),
             "float16": ("float16", "float16"), "mixed_bfloat16": ("bfloat16", "float32"),
             "bfloat16": ("bfloat16", "bfloat16")}


class Policy:
    """A dtype policy: ``Policy("mixed_float16")``, ``Policy("mixed_bfloat16")``,
    ``Policy("float32")``, ``Policy("float16")`` or ``Policy("bfloat16")``.

    Args:
        name: the policy's name.
        loss_scale: TF 2.1-2.3's argument: the loss scale ``Model`` training uses for networks
            built under this policy; anything ``mixed_precision.get`` accepts (an int or float:
            a ``FixedLossScale``, ``"dynamic"``, a ``LossScale``, None: no loss scaling).
            Default "auto": ``DynamicLossScale()`` for ``"mixed_float16"``, None otherwise
            (``"mixed_bfloat16"`` needs none: bfloat16 has float32's exponent range, as Keras
            says).

    Attributes:
        name: the policy's name.
        compute_dtype: the dtype the cells compute in (a string, as in Keras).
        variable_dtype: the dtype their Parameters are kept in.
        loss_scale: the ``LossScale`` or None.

    Raises:
        TypeError: ``name`` is not a str. ValueError: an unknown name, or a ``loss_scale``
            ``get`` refuses. ImportError: a bfloat16 policy without ml_dtypes
            (``pip install 'minigrad[lowp]'``).
    """

    def __init__(self, name, loss_scale="auto"):
        check_in("name", name, sorted(_POLICIES), owner="Policy")
        if "bfloat16" in name:
            dtypes.as_dtype("bfloat16", "name", owner="Policy")  # ImportError without ml_dtypes
        self.name = name
        self.compute_dtype, self.variable_dtype = _POLICIES[name]
        self._default_loss_scale = isinstance(loss_scale, str) and loss_scale == "auto"
        if self._default_loss_scale:
            loss_scale = "dynamic" if name == "mixed_float16" else None
        self.loss_scale = _get(loss_scale, "loss_scale", owner="Policy")

    def __eq__(self, other):
        return isinstance(other, Policy) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        if self._default_loss_scale:
            return f'<Policy "{self.name}">'
        return f'<Policy "{self.name}", loss_scale={self.loss_scale!r}>'


def set_global_policy(policy):
    """Set the policy of the cells created from now on (in the calling thread): a ``Policy``, its
    name, or None (``"float32"``). Tensors and the cells created before keep what they have.

    Raises:
        TypeError: ``policy`` is neither a Policy, a str nor None. ValueError: an unknown name.
        ImportError: as ``Policy``.
    """
    policy = "float32" if policy is None else policy
    if not isinstance(policy, Policy):
        check_type("policy", policy, (Policy, str), expected="a Policy, a policy's name or None")
        policy = Policy(check_in("policy", policy, sorted(_POLICIES)))
    config.dtype_policy = None if policy.name == "float32" else policy


def global_policy():
    """The policy ``set_global_policy`` set (``Policy("float32")`` when none is set)."""
    return config.dtype_policy or Policy("float32")
