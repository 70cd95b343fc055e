"""THOR layers: Dense, Conv2d and Embedding that record the statistics of their Kronecker factors.

Each layer computes exactly what its parent computes. When its optimizer asks for it
(``thor_record`` "factors" or "traces", set by ``optim.THOR`` before each step), the forward pass
also keeps, in float32 whatever the network's dtype:

- ``a_rows``: the rows ``a_r`` of the layer's input (Dense: the input vectors; Conv2d: every
  im2col patch, one row per sample and output position, the standard KFC factor), or for an
  Embedding the token counts (the diagonal of ``Σ onehot onehotᵀ``); ``rows``, their number;
  ``batch``, the number of samples; ``a_trace = Σ ‖a_r‖²``;
- ``g_rows``: the rows ``d_r`` of the gradient arriving at the layer's output before bias and
  activation (a hook on the product's output), and ``g_trace = Σ ‖d_r‖²``.

The optimizer forms the products ``Σ a aᵀ`` and ``Σ d dᵀ`` only when it needs the factors, so
a step that only tests the traces (the trace rule) costs two dot products per layer; it divides
the loss scale and the loss's batch-mean factor back out (see ``thor.blocks``).
``thor_record = None`` records nothing (no cost). With ``thor_fisher = "mc"`` (THOR's
Monte-Carlo Fisher) ``g_rows`` is taken only from the backward pass of the loss on sampled
labels (``thor_sampling`` is True while it runs; see ``thor.fisher``); ``g_trace`` always
comes from the training loss's backward pass (the trace rule's statistic).

A layer records its last call of a step: a layer shared by two calls in one step is not
supported by THOR.
"""
from minigrad import backend, ops
from minigrad._checks import check_positive_int, check_relation
from minigrad._config import is_grad_enabled
from minigrad.nn.layers.basic import Dense
from minigrad.nn.layers.conv import Conv2d
from minigrad.nn.layers.embedding import Embedding
from minigrad.ops.conv import im2col, same_padding

RECORD_MODES = (None, "traces", "factors")


def _fp32(array):
    return array if array.dtype.itemsize >= 4 else array.astype("float32")


class _Recorder:
    """What the three layers share: the record flag, the pending statistics and the hook."""
    thor_kind = None

    def _init_recording(self):
        self.thor_record = None   # set by the optimizer: None, "traces" or "factors"
        self.thor_pending = None  # the statistics of the last recorded call
        self.thor_fisher = "empirical"  # "mc": G from the sampled pass only
        self.thor_sampling = False      # True while THOR's sampled pass runs

    @property
    def thor(self):
        """MindSpore's flag: True when this step may refresh the factors (records them)."""
        return self.thor_record == "factors"

    def _recording(self):
        return self.thor_record is not None and is_grad_enabled()

    def _record_rows(self, rows, batch, kind="dense"):
        """Keep the input rows ``rows`` (R, d) as float32 (an Embedding: its token counts)."""
        xp = backend.get_array_module(rows)
        pending = {"rows": rows.shape[0], "batch": batch, "g_rows": None, "g_trace": None}
        if kind == "counts":
            counts = xp.bincount(rows.reshape(-1), minlength=self.vocab_size).astype("float32")
            pending["a_trace"] = float(rows.size)
            pending["a_rows"] = counts
        else:
            rows = _fp32(rows)
            pending["a_trace"] = xp.vdot(rows.reshape(-1), rows.reshape(-1))  # read later
            pending["a_rows"] = rows
        self.thor_pending = pending

    def _watch(self, output, to_rows):
        """Keep the gradient reaching ``output`` (a Tensor) as rows, through a hook."""
        if not output.requires_grad:
            self.thor_pending = None
            return
        pending = self.thor_pending

        def hook(grad):
            sampled = self.thor_fisher == "mc"
            if self.thor_sampling and not sampled:
                return
            rows = _fp32(to_rows(grad.data))
            if not self.thor_sampling:  # the training loss's pass: the trace rule's statistic
                flat = rows.reshape(-1)
                pending["g_trace"] = backend.get_array_module(rows).vdot(flat, flat)
            if self.thor_sampling or not sampled:
                pending["g_rows"] = rows
        output.register_hook(hook)


class DenseThor(Dense, _Recorder):
    """``nn.Dense`` that records THOR's factors: A from its input rows, G from the gradient at
    ``x Wᵀ + b`` (the bias does not change it; the activation comes after).

    Args: as ``nn.Dense``. The weight (out, in) is preconditioned as ``G⁻¹ · grad · A⁻¹``.
    """
    thor_kind = "dense"

    def __init__(self, in_channels, out_channels, weight_init="normal", bias_init="zeros",
                 has_bias=True, activation=None):
        super().__init__(in_channels, out_channels, weight_init, bias_init, has_bias, activation)
        self._init_recording()

    def construct(self, x):
        if not self._recording():
            return super().construct(x)
        if not hasattr(x, "shape") or x.shape[-1] != self.in_channels:
            return super().construct(x)  # the parent raises its error
        self._record_rows(x.data.reshape(-1, self.in_channels), x.shape[0] if x.ndim > 1 else 1)
        y = ops.dense(x, self.weight, self.bias)
        self._watch(y, lambda g: g.reshape(-1, self.out_channels))
        return self.activation(y) if self.activation is not None else y


class Conv2dThor(Conv2d, _Recorder):
    """``nn.Conv2d`` that records THOR's factors: A from the im2col patches (one row per sample
    and output position, columns in the weight's (c, i, j) order), G from the output gradient
    (one row per sample and position).

    Args: as ``nn.Conv2d`` (stride, padding, dilation, non-square kernels all carried).

    Raises:
        ValueError: ``group`` other than 1 (the factors treat the input channels as one block),
            and the errors of ``nn.Conv2d``.
    """
    thor_kind = "conv"

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same",
                 padding=0, dilation=1, group=1, has_bias=False, weight_init="normal",
                 bias_init="zeros", data_format="NCHW"):
        group = check_positive_int("group", group, owner="Conv2dThor")
        check_relation("group", group, group == 1, "1 (THOR's factor A treats all input channels "
                       "as one Kronecker block)", owner="Conv2dThor")
        super().__init__(in_channels, out_channels, kernel_size, stride, pad_mode, padding,
                         dilation, group, has_bias, weight_init, bias_init, data_format)
        self._init_recording()

    def construct(self, x):
        if not self._recording():
            return super().construct(x)
        padding = self.padding
        if self.pad_mode == "same":
            padding = same_padding(x.shape[2:], self.kernel_size, self.stride, self.dilation)
        patches = im2col(x, self.kernel_size, self.stride, padding, self.dilation)
        self._record_rows(patches.reshape(-1, patches.shape[-1]), x.shape[0])
        y = ops.conv2d(x, self.weight, self.bias, stride=self.stride, padding=padding,
                       dilation=self.dilation, groups=1)
        self._watch(y, lambda g: g.transpose(0, 2, 3, 1).reshape(-1, self.out_channels))
        return y


class EmbeddingThor(Embedding, _Recorder):
    """``nn.Embedding`` that records THOR's factors: a diagonal A (the token counts: an embedding
    is a Dense layer on one-hot inputs) and G from the gradient at the looked-up rows.

    Args: as ``nn.Embedding``. The table (vocab, embedding) is preconditioned as
    ``diag(A)⁻¹ · grad · G⁻¹``.
    """
    thor_kind = "embedding"

    def __init__(self, vocab_size, embedding_size, use_one_hot=False, embedding_table="normal",
                 padding_idx=None):
        super().__init__(vocab_size, embedding_size, use_one_hot, embedding_table, padding_idx)
        self._init_recording()

    def construct(self, ids):
        if not self._recording() or ids.dtype.kind not in "iu":
            return super().construct(ids)
        self._record_rows(ids.data.reshape(-1), ids.shape[0] if ids.ndim > 0 else 1, "counts")
        y = super().construct(ids)
        self._watch(y, lambda g: g.reshape(-1, self.embedding_size))
        return y
