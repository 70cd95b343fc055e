"""``Function``: one differentiable op, forward on raw arrays, backward on gradient arrays (or on
Tensors, for higher-order gradients). ``minigrad.autograd.engine`` runs the reverse pass over a
graph of them.

A subclass implements::

    class Exp(Function):
        saves = {"out": OUTPUT}          # what backward reads of the op's inputs and output
        def forward(self, x):            # arrays in, array (or tuple of arrays) out
            self.out = xp.exp(x)         # keep only what backward needs
            return self.out
        def backward(self, g):           # one gradient per output
            return g * self.out          # one gradient per input (None: no gradient)

``Exp.apply(tensor)`` runs it and, when gradients are recorded, links the output tensors to the
node so that ``Tensor.backward`` can walk the graph. Non-tensor arguments go to ``forward`` as
keyword arguments. ``backward`` must not modify the gradients it receives.

A subclass whose ``forward`` is a staticmethod taking ``ctx`` is a custom function PyTorch's
way instead, on Tensors (``minigrad.autograd.custom``); its ``apply`` is that module's.

Higher-order gradients: ``backward`` is written once, for arrays and for Tensors. A backward with
``create_graph`` calls it with Tensor gradients (``graph_backward``) on a copy of the node whose
attributes named in ``saves`` are Tensors of the graph: ``saves`` maps each attribute that holds
an input array to the input's position, the one that holds the output to ``OUTPUT`` (the output
array, or the op's wider fp32 result that was rounded to it), and an attribute derived from
those to a function of the node that recomputes it from them. The rule's arithmetic (operators,
``.sum``, ``.reshape``, ``.T``, ``widen``/``store``, and the few array-or-Tensor helpers of
``minigrad.ops._dual``) then records the ops that produce the gradients, so they can be
differentiated again: the gradient rule stays one piece of code. Attributes not named (masks,
shapes, scales) are constants. ``saves = None`` (the default) marks a backward that runs on
arrays only: a ``create_graph`` backward through it raises an error naming the op.

Memory: a node holds, for the engine, each input it sends a gradient to. An input Tensor that
the rule may read (named by position in ``saves``, or every input when ``saves`` is None or
computes an attribute) is held as itself; of the others, a leaf is held as itself too, and a
non-leaf only as an ``Edge`` (its producing node and output index), so that its array is freed
as soon as nothing else needs it: ReLU's and the residual add's inputs, whose rules read a mask
or nothing, do not keep a BatchNorm output alive until backward.

Autocast: a class's ``autocast`` label says how ``minigrad.amp.autocast`` treats the op's
inputs while ``_config.config.autocast_dtype`` is set: ``"low"`` ops (matmul, Dense, conv) take
float32 inputs in the low-precision dtype, ``"fp32"`` ops (softmax, exp, log, pow, sums, norms,
losses) take fp16 inputs in float32; unlabelled ops (None) run in their inputs' dtype. The casts
are ``autocast_inputs``, which the ops install (it records ``ops.cast`` nodes, so gradients
return in the inputs' dtypes). A class defined with another label raises ValueError. Backward
ops recorded by ``create_graph`` run without autocast, in the dtypes of the forward.

FP8: the FP8 formats (``minigrad.dtype.FP8``) are storage formats. Only the ops that move or
rearrange elements without computing on them (cast, device moves, reshape, transpose, broadcast,
indexing, concatenation, stacking, splitting) set ``storage = True`` and take FP8 inputs; every
other op raises a TypeError naming itself and the dtype (``dtype.check_compute``).
"""
import inspect

from minigrad import dtype as dtypes
from minigrad._config import config, using_config
from minigrad._fp16_host import store
from minigrad.tensor import Tensor, make

AUTOCAST_LABELS = (None, "low", "fp32")  # a Function's ``autocast`` label (module docstring)
OUTPUT = "output"  # a ``saves`` role: the attribute holds the op's output (module docstring)
_FP8 = frozenset(dtypes.FP8)  # empty without ml_dtypes


class Edge:
    """Where a node sends the gradient of a non-leaf input whose Tensor it does not keep: the
    input's producing node (``_ctx``) and output index (``_index``), as the engine reads them
    from a Tensor (module docstring, Memory)."""
    __slots__ = ("_ctx", "_index", "requires_grad")

    def __init__(self, tensor):
        self._ctx, self._index, self.requires_grad = tensor._ctx, tensor._index, True

    def __repr__(self):
        return f"<Edge to output {self._index} of {self._ctx!r}>"


def _kept_inputs(saves):
    """The input positions whose Tensors a node of a class with ``saves`` keeps (None: all)."""
    if saves is None or not all(type(role) is int for role in saves.values()):
        return None
    return frozenset(saves.values())


class Function:
    # inputs: the input Tensors (or Edges, module docstring) while the graph is alive
    # needs_grad: per input, whether it wants a gradient
    # n_outputs / out_hooks: for the engine; out_hooks[i] lists hooks on output i
    inputs = None
    needs_grad = ()
    n_outputs = 1
    out_hooks = None
    freed = False
    materialize_grads = True  # the engine gives zeros to outputs that received no gradient
    saves = None  # {attribute: input position, OUTPUT or fn(node)}; None: backward on arrays only
    autocast = None  # None, "low" or "fp32": the op's autocast label (module docstring)
    autocast_inputs = None  # (label, inputs) -> inputs cast for autocast; installed by the ops
    storage = False  # True: the op only moves elements, so it takes FP8 inputs (module docstring)
    kept_inputs = None  # positions of the input Tensors a node keeps (None: all); from ``saves``

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.autocast not in AUTOCAST_LABELS:
            raise ValueError(f"{cls.__qualname__}.autocast must be one of {AUTOCAST_LABELS}, "
                             f"got {cls.autocast!r}")
        cls.kept_inputs = _kept_inputs(cls.saves)
        if isinstance(inspect.getattr_static(cls, "forward"), staticmethod):
            from minigrad.autograd import custom  # PyTorch's kind of Function, built on this one
            cls.apply = classmethod(custom.apply)

    def forward(self, *arrays, **kwargs):
        raise NotImplementedError

    def backward(self, *grads):
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs, **kwargs):
        """Run the op on tensors; return a Tensor (or a tuple of them for several outputs)."""
        if cls.autocast is not None and config.autocast_dtype is not None:
            inputs = Function.autocast_inputs(cls.autocast, inputs)
        if _FP8 and not cls.storage:
            for t in inputs:
                if t.data.dtype in _FP8:
                    dtypes.check_compute(t.data.dtype, cls.__name__)
        fn = cls()
        out = fn.forward(*[t.data for t in inputs], **kwargs)
        record = None
        if config.grad_enabled:
            needs = tuple([t.requires_grad for t in inputs])
            if True in needs:
                record = fn
                kept = cls.kept_inputs
                fn.inputs = inputs if kept is None else tuple(
                    t if i in kept or t._ctx is None else Edge(t) for i, t in enumerate(inputs))
                fn.needs_grad = needs
        if type(out) is tuple:
            fn.n_outputs = len(out)
            if record:
                fn.out_meta = [(o.shape, o.dtype) for o in out]
            return tuple(make(o, record, i) for i, o in enumerate(out))
        return make(out, record, 0)

    def graph_backward(self, grads):
        """``backward`` on the Tensor gradients ``grads``, recorded in the graph (the step of a
        ``create_graph`` backward): the rule runs on a copy of the node whose ``saves``
        attributes are the input Tensors, the output Tensor and what ``saves`` derives from them.

        Raises:
            RuntimeError: naming the op when its backward runs on arrays only (``saves`` is
                None), or returns an array where a Tensor was expected.
        """
        name = type(self).__name__
        if self.saves is None:
            raise RuntimeError(f"second derivative not supported for {name}: its backward runs "
                               f"on arrays only, so create_graph cannot differentiate it again")
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)
        for attribute, role in self.saves.items():
            if attribute not in view.__dict__:  # a forward that did not need this one
                continue
            if role == OUTPUT:
                value = make(store(view.__dict__[attribute], self.inputs[0].data.dtype), self, 0)
            elif callable(role):
                value = role(view)
            else:
                value = self.inputs[role]
            setattr(view, attribute, value)
        with using_config(grad_enabled=True, autocast_dtype=None):
            in_grads = view.backward(*grads)
        for g in in_grads if type(in_grads) is tuple else (in_grads,):
            if g is not None and not isinstance(g, Tensor):
                raise RuntimeError(f"second derivative not supported for {name}: its backward "
                                   f"returned a {type(g).__name__} under create_graph, not a "
                                   f"Tensor of the graph")
        return in_grads

    def release(self):
        """Drop references to inputs and saved arrays so the graph can be garbage-collected."""
        self.__dict__.clear()
        self.freed = True

    def __repr__(self):
        return f"<{type(self).__name__} backward>"


class Copy(Function):
    """out = a copy of x;  dx = g. A ``create_graph`` backward hands out gradient Tensors through
    it where two would share memory (as ``_fresh`` copies arrays)."""
    saves = {}

    def forward(self, x):
        return x.copy()

    def backward(self, g):
        return g
