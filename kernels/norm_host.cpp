/* Host passes of batch norm over a channels-last batch: the (rows, C) matrix of an (N, C, H, W)
   array stored channels-last (or an (N, C) batch), with one value per channel in each vector.
   Each pass does in one sweep what ``minigrad.ops.normalization`` otherwise does in several
   NumPy passes (``ops._util.per_channel``), with the same operations in the same order, each
   rounded to float32 (the library is built with -ffp-contract=off: no fused multiply-adds), so
   the bits are NumPy's, except for which NaN a result carries where two NaNs meet (the
   compiler may swap the operands of a product or a sum, and x86 keeps the first operand's
   NaN); tests/core/test_fp16_host_passes.py checks them. Single-threaded, as the other host
   passes. */
#include <cstdint>

typedef std::int64_t i64;

/* io = io * a + b per channel: the normalised output from x - mean (forward). */
extern "C" void mg_bn_scale_shift(float* __restrict io, const float* __restrict a,
                                  const float* __restrict b, i64 rows, i64 c)
{
    for (i64 r = 0; r < rows; ++r) {
        float* row = io + r * c;
        for (i64 j = 0; j < c; ++j)
            row[j] = row[j] * a[j] + b[j];
    }
}

/* io = ((io * k + g) - s) * a per channel: dx from x - mean (backward through the batch
   statistics: k = -r^2 * sum(g (x - mean)) / M, s = sum(g) / M, a = gamma * r). */
extern "C" void mg_bn_dx(float* __restrict io, const float* __restrict g,
                         const float* __restrict k, const float* __restrict s,
                         const float* __restrict a, i64 rows, i64 c)
{
    for (i64 r = 0; r < rows; ++r) {
        float* row = io + r * c;
        const float* grow = g + r * c;
        for (i64 j = 0; j < c; ++j)
            row[j] = ((row[j] * k[j] + grow[j]) - s[j]) * a[j];
    }
}
