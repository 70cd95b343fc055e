"""MaxPool2d and AvgPool2d (NCHW) with MindSpore's pad modes."""
from minigrad import ops
from minigrad.nn.cell import Cell
from minigrad._checks import check_int_tuple
from minigrad.nn.layers.spatial_args import check_data_format, check_pad_mode
from minigrad.ops.conv import same_padding


class _Pool2d(Cell):
    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", data_format="NCHW"):
        super().__init__()
        self.kernel_size = check_int_tuple("kernel_size", kernel_size, 2, low=1)
        self.stride = check_int_tuple("stride", stride, 2, low=1)
        self.pad_mode = check_pad_mode(pad_mode, ("same", "valid"))
        self.data_format = check_data_format(data_format)

    def _padding(self, x):
        if self.pad_mode != "same":
            return 0
        return same_padding(x.shape[2:], self.kernel_size, self.stride)

    def extend_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, pad_mode={self.pad_mode}"


class MaxPool2d(_Pool2d):
    """Maximum over kernel_size windows of an (N, C, H, W) input.

    Args:
        kernel_size: int or (h, w); default 1 (MindSpore's).
        stride: int or (h, w); default 1 (MindSpore's).
        pad_mode: "valid" (default; output (H - kh) // sh + 1) or "same" (output ceil(H / sh),
            padding with -inf, the extra row/column at the bottom/right).
        data_format: "NCHW" (the default and the only layout minigrad computes).

    Raises:
        TypeError / ValueError: naming the argument for a non-positive size, another pad_mode or
            a data_format other than "NCHW".
    """

    def construct(self, x):
        return ops.max_pool2d(x, self.kernel_size, self.stride, self._padding(x))


class AvgPool2d(_Pool2d):
    """Mean over kernel_size windows of an (N, C, H, W) input (fp32 accumulation for fp16).

    Arguments as ``MaxPool2d``; with pad_mode "same" a window's mean counts only the elements
    inside the input (padding is excluded, as in MindSpore and TensorFlow).
    """

    def construct(self, x):
        return ops.avg_pool2d(x, self.kernel_size, self.stride, self._padding(x),
                              count_include_pad=False)
