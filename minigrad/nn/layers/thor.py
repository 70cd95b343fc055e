"""THOR layers: Dense, Conv2d and Embedding that record the statistics of their Kronecker factors.

Each layer computes exactly what its parent computes. When its optimizer asks for it
(``thor_record``, set by ``optim.THOR`` before each step), the forward pass also stores, in
float32 whatever the network's dtype:

- ``a``: ``Σ_r a_r a_rᵀ`` over the rows ``a_r`` of the layer's input (Dense: the input vectors;
  Conv2d: every im2col patch, one row per sample and output position, the standard KFC factor;
  Embedding: the token counts, the diagonal of ``Σ onehot onehotᵀ``), and the number of rows;
- ``g``: ``Σ_r d_r d_rᵀ`` over the rows ``d_r`` of the gradient arriving at the layer's output
  before bias and activation (a hook on the product's output), and the batch size.

With them go ``Σ ‖a_r‖²`` and ``Σ ‖d_r‖²`` (the factors' traces, for the report).
``thor_record = None`` records nothing (no cost). The optimizer divides the loss scale and the
batch-mean factor back out, so the factors do not depend on the loss scale (see
``optim.thor_blocks``). With ``thor_fisher = "mc"`` (THOR's Monte-Carlo Fisher) ``g`` is taken
only from the backward pass of the loss on sampled labels (``thor_sampling`` is True while it
runs; see ``optim.thor_fisher``), not from the training loss's.

A layer records its last call of a step: a layer shared by two calls in one step is not
supported by THOR.
"""
from minigrad import backend, ops
from minigrad._config import is_grad_enabled
from minigrad.nn.layers.basic import Dense
from minigrad.nn.layers.conv import Conv2d
from minigrad.nn.layers.embedding import Embedding
from minigrad.ops.conv import im2col, same_padding

RECORD_MODES = (None, "factors")


def _fp32(array):
    return array if array.dtype.itemsize >= 4 else array.astype("float32")


class _Recorder:
    """What the three layers share: the record flag, the pending statistics and the hook."""
    thor_kind = None

    def _init_recording(self):
        self.thor_record = None   # set by the optimizer: None or "factors"
        self.thor_pending = None  # the statistics of the last recorded call
        self.thor_fisher = "empirical"  # "mc": G from the sampled pass only
        self.thor_sampling = False      # True while THOR's sampled pass runs

    @property
    def thor(self):
        """MindSpore's flag: True when this step records the full factors."""
        return self.thor_record == "factors"

    def _recording(self):
        return self.thor_record is not None and is_grad_enabled()

    def _record_rows(self, rows, batch, kind="dense"):
        """Store the input statistics of ``rows`` (R, d): a float32 array (a CuPy one on GPU)."""
        xp = backend.get_array_module(rows)
        pending = {"rows": rows.shape[0], "batch": batch, "g": None, "g_trace": None}
        if kind == "counts":
            counts = xp.bincount(rows.reshape(-1), minlength=self.vocab_size).astype("float32")
            pending["a_trace"] = float(rows.size)
            pending["a"] = counts
        else:
            rows = _fp32(rows)
            pending["a_trace"] = float(xp.vdot(rows.reshape(-1), rows.reshape(-1)))
            pending["a"] = rows.T @ rows
        self.thor_pending = pending

    def _watch(self, output, to_rows):
        """Record the gradient reaching ``output`` (a Tensor) as rows, through a hook."""
        if not output.requires_grad:
            self.thor_pending = None
            return
        pending = self.thor_pending

        def hook(grad):
            if (self.thor_fisher == "mc") != self.thor_sampling:
                return  # the pass G is not taken from
            rows = _fp32(to_rows(grad.data))
            flat = rows.reshape(-1)
            xp = backend.get_array_module(rows)
            pending["g_trace"] = float(xp.vdot(flat, flat))
            pending["g"] = rows.T @ rows
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
        if group != 1:
            raise ValueError(f"Conv2dThor: 'group' must be 1 (THOR's factor A treats all input "
                             f"channels as one Kronecker block), but got {group!r}")
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
