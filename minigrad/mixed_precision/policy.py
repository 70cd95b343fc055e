"""Keras's dtype policies (``tf.keras.mixed_precision.Policy``, ``set_global_policy``) on
minigrad's autocast.

``"mixed_float16"`` means what it means in Keras: variables (parameters) stay float32 and the
compute-heavy ops run in float16. In minigrad that is autocast (``minigrad.amp.autocast``): the
matmul and convolution ops take fp16 inputs and the range-sensitive ones fp32, whatever the
parameters' dtype. So ``set_global_policy("mixed_float16")`` turns autocast on for the calling
thread until ``set_global_policy("float32")``; the loss still needs a loss scale
(``LossScaleOptimizer``), as in Keras::

    mixed_precision.set_global_policy("mixed_float16")
    opt = mixed_precision.LossScaleOptimizer(nn.SGD(net.trainable_params(), 0.1))
"""
from minigrad import dtype as dtypes
from minigrad._config import config

# name -> (compute dtype, variable dtype); Keras's names. "mixed_bfloat16" has no NumPy type.
_POLICIES = {"float32": ("float32", "float32"), "mixed_float16": ("float16", "float32"),
             "float16": ("float16", "float16")}


class Policy:
    """A dtype policy: ``Policy("mixed_float16")``, ``Policy("float32")`` or ``Policy("float16")``.

    Attributes:
        name: the policy's name.
        compute_dtype: the dtype the matmul-like ops run in (a string, as in Keras).
        variable_dtype: the dtype parameters are kept in.

    Raises:
        TypeError: ``name`` is not a str. ValueError: an unknown name (``"mixed_bfloat16"``
            included: NumPy has no bfloat16).
    """

    def __init__(self, name):
        if not isinstance(name, str):
            raise TypeError(f"Policy: 'name' must be a str, but got {name!r} of type "
                            f"{type(name).__name__}")
        if name not in _POLICIES:
            raise ValueError(f"Policy: cannot convert value {name!r} to a mixed precision Policy; "
                             f"expected one of {sorted(_POLICIES)}")
        self.name = name
        self.compute_dtype, self.variable_dtype = _POLICIES[name]

    def __eq__(self, other):
        return isinstance(other, Policy) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f'<Policy "{self.name}">'


def set_global_policy(policy):
    """Set the policy of the calling thread: a ``Policy``, its name, or None (``"float32"``).

    ``"mixed_float16"`` turns autocast on (fp16 compute, parameters as they are);
    ``"float32"`` turns it off. ``"float16"`` runs the labelled ops in fp16 as well; its
    parameters are the network's to cast (``Cell.to_float``, ``cast_parameters``).

    Raises:
        TypeError / ValueError: as ``Policy``.
    """
    policy = Policy("float32") if policy is None else policy
    policy = policy if isinstance(policy, Policy) else Policy(policy)
    if policy.compute_dtype == "float16":
        config.autocast_dtype = dtypes.float16
    else:
        config.autocast_dtype = None


def global_policy():
    """The calling thread's ``Policy``: ``"mixed_float16"`` while autocast is on, else
    ``"float32"``."""
    return Policy("mixed_float16" if config.autocast_dtype is not None else "float32")
