"""``Function``: one differentiable op, forward on raw arrays, backward on gradient arrays.

A subclass implements::

    class Exp(Function):
        def forward(self, x):            # arrays in, array (or tuple of arrays) out
            self.y = xp.exp(x)           # keep only what backward needs
            return self.y
        def backward(self, gy):          # one gradient per output
            return gy * self.y           # one gradient per input (None: no gradient)

``Exp.apply(tensor)`` runs it and, when gradients are recorded, links the output tensors to the
node so that ``Tensor.backward`` can walk the graph. Non-tensor arguments go to ``forward`` as
keyword arguments. ``backward`` must not modify the gradients it receives.

Autocast: a class's ``autocast`` label says how ``minigrad.amp.autocast`` treats the op's
inputs while ``_config.config.autocast_dtype`` is set: ``"low"`` ops (matmul, Dense, conv) take
float32 inputs in the low-precision dtype, ``"fp32"`` ops (softmax, exp, log, pow, sums, norms,
losses) take fp16 inputs in float32; unlabelled ops (None) run in their inputs' dtype. The casts
are ``autocast_inputs``, which the ops install (it records ``ops.cast`` nodes, so gradients
return in the inputs' dtypes).
"""
from minigrad._config import config
from minigrad.tensor import make


class Function:
    # inputs: the input tensors while the graph is alive (None once freed)
    # needs_grad: per input, whether it wants a gradient
    # n_outputs / out_hooks: for the engine; out_hooks[i] lists hooks on output i
    inputs = None
    needs_grad = ()
    n_outputs = 1
    out_hooks = None
    freed = False
    autocast = None  # None, "low" or "fp32": the op's autocast label (module docstring)
    autocast_inputs = None  # (label, inputs) -> inputs cast for autocast; installed by the ops

    def forward(self, *arrays, **kwargs):
        raise NotImplementedError

    def backward(self, *grads):
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs, **kwargs):
        """Run the op on tensors; return a Tensor (or a tuple of them for several outputs)."""
        if cls.autocast is not None and config.autocast_dtype is not None:
            inputs = Function.autocast_inputs(cls.autocast, inputs)
        fn = cls()
        out = fn.forward(*[t.data for t in inputs], **kwargs)
        record = None
        if config.grad_enabled:
            needs = tuple([t.requires_grad for t in inputs])
            if True in needs:
                record = fn
                fn.inputs = inputs
                fn.needs_grad = needs
        if type(out) is tuple:
            fn.n_outputs = len(out)
            if record:
                fn.out_meta = [(o.shape, o.dtype) for o in out]
            return tuple(make(o, record, i) for i, o in enumerate(out))
        return make(out, record, 0)

    def release(self):
        """Drop references to inputs and saved arrays so the graph can be garbage-collected."""
        self.__dict__.clear()
        self.freed = True

    def __repr__(self):
        return f"<{type(self).__name__} backward>"
