"""FP8 numerics on the CPU (and through CuPy): the E4M3/E5M2 casts, quantization with a scale and
its error statistics, and the scaling recipes of Transformer Engine, torchao and MXFP8.

``quantize(x, "E4M3", scale)`` gives the FP8 bytes and what the cast did (amax, scale, share
clipped, share flushed to zero, SQNR); the recipes choose the scales. FP8 here is a numerics and
teaching feature: the GEMMs run in float32 on the dequantized values, so it is never faster than
float32 on a CPU.
"""
from minigrad.fp8.autocast import fp8_autocast, get_fp8_recipe, update_scales
from minigrad.fp8.formats import E4M3, E5M2, Fp8Format, decode, encode
from minigrad.fp8.quantize import Quantized, QuantStats, dequantize, quantize
from minigrad.fp8 import plots, saturation
from minigrad.fp8.report import format_report, fp8_states, tensor_report, what_if
from minigrad.fp8.recipes import (
    RECIPES,
    CurrentScaling,
    DelayedScaling,
    MXFP8BlockScaling,
    Recipe,
    RowwiseScaling,
    ScalingState,
    TensorwiseScaling,
)

__all__ = ["plots", "saturation", "fp8_autocast", "get_fp8_recipe", "update_scales", "E4M3",
           "E5M2", "Fp8Format", "decode", "encode", "Quantized", "QuantStats", "dequantize",
           "quantize", "RECIPES", "CurrentScaling", "DelayedScaling", "MXFP8BlockScaling",
           "Recipe", "RowwiseScaling", "ScalingState", "TensorwiseScaling", "format_report",
           "fp8_states", "tensor_report", "what_if"]
