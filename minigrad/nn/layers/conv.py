"""Conv2d (NCHW) with MindSpore's pad modes."""
from minigrad import ops
from minigrad.fp8 import gemm as fp8_gemm
from minigrad.fp8.autocast import get_fp8_recipe
from minigrad.nn.cell import Cell, check_tensor
from minigrad.nn.init import check_init, default_initializers, init_tensor
from minigrad._checks import check_bool, check_int_tuple, check_positive_int
from minigrad.nn.layers.spatial_args import check_data_format, check_pad_mode_padding
from minigrad.ops.conv import same_padding
from minigrad.parameter import Parameter


class Conv2d(Cell):
    """2-D convolution (cross-correlation) of an (N, C_in, H, W) input.

    out[n, o] = bias[o] + Σ_{c in group of o} Σ_{i, j} weight[o, c, i, j] ·
    x_padded[n, c, h·s_h + i·d_h, w·s_w + j·d_w]

    Args:
        in_channels: a positive int divisible by ``group``.
        out_channels: a positive int divisible by ``group``.
        kernel_size: int or (height, width).
        stride: int or (height, width). Default 1.
        dilation: int or (height, width). Default 1.
        pad_mode: "same" (default; output size ceil(H / stride), extra padding at the bottom/right),
            "valid" (no padding) or "pad" (explicit ``padding``).
        padding: int or (top, bottom, left, right); must be 0 unless pad_mode is "pad".
        group: number of channel groups (default 1).
        has_bias: default False.
        weight_init: initializer of ``weight`` (out_channels, in_channels / group, kh, kw).
            Default None: MindSpore 2.x's (and PyTorch's) ``HeUniform(negative_slope=√5)``,
            U(±1/√fan_in) with fan_in = in_channels / group · kh · kw.
        bias_init: initializer of ``bias`` (out_channels,). Default None: U(±1/√fan_in).
            (MindSpore 1.x's defaults were "normal", σ = 0.01, and "zeros".)
        data_format: "NCHW" (the default and the only layout minigrad computes).

    Raises:
        TypeError / ValueError: naming the argument for a wrong type, a non-positive size, an
            unknown pad_mode, padding with a pad_mode other than "pad", channels not divisible
            by ``group``, or a data_format other than "NCHW".
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same", padding=0,
                 dilation=1, group=1, has_bias=False, weight_init=None, bias_init=None,
                 data_format="NCHW"):
        super().__init__()
        self.in_channels = check_positive_int("in_channels", in_channels)
        self.out_channels = check_positive_int("out_channels", out_channels)
        self.kernel_size = check_int_tuple("kernel_size", kernel_size, 2, low=1)
        self.stride = check_int_tuple("stride", stride, 2, low=1)
        self.dilation = check_int_tuple("dilation", dilation, 2, low=1)
        self.group = check_positive_int("group", group)
        self.pad_mode, self.padding = check_pad_mode_padding(pad_mode, padding)
        self.has_bias = check_bool("has_bias", has_bias)
        self.data_format = check_data_format(data_format)
        if in_channels % group or out_channels % group:
            raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must "
                             f"be divisible by group ({group})")
        shape = (out_channels, in_channels // group) + self.kernel_size
        weight_init, bias_init = default_initializers(weight_init, bias_init, shape)
        self.weight = Parameter(init_tensor("weight_init", weight_init, shape))
        check_init("bias_init", bias_init, (out_channels,))  # even with no bias to make
        self.bias = (Parameter(init_tensor("bias_init", bias_init, (out_channels,)))
                     if has_bias else None)

    def construct(self, x):
        check_tensor(type(self).__name__, "x", x)
        padding = self.padding
        if self.pad_mode == "same":
            padding = same_padding(x.shape[2:], self.kernel_size, self.stride, self.dilation)
        args = {"stride": self.stride, "padding": padding, "dilation": self.dilation,
                "groups": self.group}
        recipe = get_fp8_recipe()  # inside fp8_autocast: the GEMM in FP8
        if recipe is not None:
            return fp8_gemm.conv2d(self, x, self.weight, self.bias, recipe, **args)
        return ops.conv2d(x, self.weight, self.bias, **args)

    def extend_repr(self):
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"kernel_size={self.kernel_size}, stride={self.stride}, pad_mode={self.pad_mode}, "
                f"padding={self.padding}, dilation={self.dilation}, group={self.group}, "
                f"has_bias={self.has_bias}")
