"""The scale rules of the FP8 libraries, one short function each, on plain numbers and arrays.

A scale multiplies a tensor before the cast (``fp8 = cast(x · scale)``), so ``scale = max /
amax`` maps the largest magnitude onto the format's largest value. The libraries agree on that
formula and differ on the edge cases, which each function below follows exactly:

=====================  ===================  ====================  ====================  =========
amax                   TE delayed           TE current            torchao tensorwise    MXFP8
=====================  ===================  ====================  ====================  =========
0                      previous scale kept  1.0                   max / 1e-12           2^127
inf                    previous scale kept  1.0                   0 (max / inf)         NaN
NaN                    previous scale kept  1.0                   NaN                   NaN
tiny (max/amax = inf)  FLT_MAX              FLT_MAX               max / 1e-12           2^127
power of two           never                optional, rounds down optional, rounds down  always,
                                                                                        amax up
=====================  ===================  ====================  ====================  =========

Sources: Transformer Engine ``transformer_engine/common/recipe/delayed_scaling.cu`` and
``recipe_common.cuh`` (NVIDIA/TransformerEngine; the FLT_MAX clamp is TE issue #786), torchao
``torchao/float8/float8_utils.py`` (``amax_to_scale``), and the OCP Microscaling (MX) spec v1.0
with TE's MXFP8 guide for ``float_to_e8m0``.
"""
import numpy

FLT_MAX = float(numpy.finfo(numpy.float32).max)
TORCHAO_EPS = 1e-12  # torchao.float8.float8_utils.EPS, the floor under amax


def delayed_scale(history, scale, fp8_max, margin=0, amax_compute_algo="max"):
    """Transformer Engine's delayed-scaling update: ``(new_history, new_scale, amax)``.

    ``history`` (float32, newest amax in slot 0) gives ``amax``: its maximum (``"max"``; NaN
    entries are skipped, as CUDA's ``fmaxf``) or slot 0 (``"most_recent"``). Then::

        new_scale = (fp8_max · 2^-margin) / amax      in float32, if amax is finite and > 0
                  = scale                              otherwise (0, inf, NaN: keep the old one)
        new_scale = FLT_MAX                            where the division overflows to inf

    and the history rolls by one (slot 0 moves to the end and a zeroed slot 0 waits for the
    next step's amax), so the window holds the last ``len(history)`` amaxes.
    """
    history = numpy.asarray(history, dtype=numpy.float32)
    amax = numpy.fmax.reduce(history) if amax_compute_algo == "max" else history[0]
    new_history = numpy.roll(history, -1)
    new_history[0] = 0.0
    scaled_max = numpy.float32(fp8_max) * numpy.float32(2.0) ** numpy.float32(-margin)
    if numpy.isfinite(amax) and amax > 0:
        with numpy.errstate(over="ignore"):
            new_scale = scaled_max / numpy.float32(amax)
        scale = FLT_MAX if numpy.isinf(new_scale) else float(new_scale)
    return new_history, float(scale), float(amax)


def current_scale(amax, fp8_max, power_2_scale=False, amax_epsilon=0.0):
    """Transformer Engine's current (per-tensor, just-in-time) scale, in float32::

        amax = max(amax, amax_epsilon)
        scale = 1.0                        if amax is 0, inf or NaN
              = fp8_max / amax             (round to nearest), FLT_MAX where that is inf
        power_2_scale: keep sign and exponent bits only (& 0xFF800000), i.e. round down to a
        power of two
    """
    amax = numpy.float32(amax)
    if amax < amax_epsilon:
        amax = numpy.float32(amax_epsilon)
    if amax == 0 or not numpy.isfinite(amax):
        return 1.0
    with numpy.errstate(over="ignore"):
        scale = numpy.float32(fp8_max) / amax
    if numpy.isinf(scale):
        scale = numpy.float32(FLT_MAX)
    if power_2_scale:
        scale = (numpy.asarray(scale).view(numpy.uint32) & numpy.uint32(0xFF800000)).view(
            numpy.float32)
    return float(scale)


def tensorwise_scale(amax, fp8_max, round_scales_to_power_of_2=False):
    """torchao's ``amax_to_scale``, element-wise on an array of amaxes (one per tensor or row)::

        scale = float32(fp8_max / clamp(float64(amax), min=1e-12))
        round_scales_to_power_of_2: scale = 2^floor(log2(scale))

    computed in float64 (torchao: eager and compiled code round ``1 / float32`` differently).
    An amax of inf gives 0 and NaN gives NaN, as in torchao (nothing replaces them).
    """
    amax = numpy.asarray(amax, dtype=numpy.float64)
    with numpy.errstate(divide="ignore", invalid="ignore"):
        scale = (fp8_max / numpy.where(amax < TORCHAO_EPS, TORCHAO_EPS, amax)).astype(
            numpy.float32)
        if round_scales_to_power_of_2:
            scale = numpy.exp2(numpy.floor(numpy.log2(scale))).astype(numpy.float32)
    return scale


def float_to_e8m0(value):
    """The E8M0 byte (biased exponent, bias 127) of a block scale ``value`` (float32 array),
    rounded up: the float32 exponent, plus one where the mantissa is not zero (and the value
    is not already the largest power of two, 2^127, or a subnormal at most 2^-127). 0 gives 0,
    inf and NaN give the NaN byte 0xFF."""
    value = numpy.asarray(value, dtype=numpy.float32)
    bits = value.view(numpy.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(numpy.int64)
    mantissa = bits & 0x7FFFFF
    up = (mantissa > 0) & (exponent < 254) & ~((exponent == 0) & (mantissa <= 0x400000))
    return numpy.where(numpy.isfinite(value), exponent + up, 255).astype(numpy.uint8)


def mx_scale(block_amax, fp8_max):
    """The MXFP8 multiplier of each 32-value block: ``2^(127 - e)``, ``e = float_to_e8m0(amax /
    fp8_max)`` (so that ``amax · scale <= fp8_max``: the exponent is rounded up), NaN for the
    NaN byte."""
    e = float_to_e8m0(numpy.asarray(block_amax, dtype=numpy.float32) / numpy.float32(fp8_max))
    scale = numpy.ldexp(1.0, 127 - e.astype(numpy.int64))
    return numpy.where(e == 255, numpy.nan, scale).astype(numpy.float32)
