/* Host passes of batch norm in training over a channels-last batch: the (rows, C) matrix of an
   (N, C, H, W) array stored channels-last (or an (N, C) batch), with one value per channel in
   each vector. ``minigrad.ops._norm_host`` calls them; without them ``minigrad.ops.normalization``
   runs about twice as many NumPy passes over the batch (the statistics, x - mean, its square
   sum, the scale and shift), and at these sizes each pass costs what a read of the batch from
   memory costs.

   Forward: mg_bn_moments (one read: the mean and biased variance) and mg_bn_normalize (one read,
   one write). Backward: mg_bn_grad_sums (one read of x and g: the two sums of the gradient rule)
   and mg_bn_dx (one read of each, one write).

   The elementwise passes apply the NumPy code's operations in its order, each rounded to float32
   (the library is built with -ffp-contract=off: no fused multiply-adds), so given the same
   vectors their bits are NumPy's, except for which NaN a result carries where two NaNs meet.
   The sums are added in float64, so they differ from NumPy's float32 sums by
   NumPy's rounding error, not by theirs: tests/ops/test_norm_host.py checks both.

   Each pass runs over blocks of whole rows with the per-channel vectors repeated to the block's
   width, so the inner loop runs over a few hundred values however few channels there are. The
   blocks are shared among the pass threads (host_threads.h); the sums are taken per fixed
   chunk of blocks and added in chunk order, so no result depends on the thread count. */
#include <cstdint>
#include <vector>

#include "host_threads.h"

typedef std::int64_t i64;

namespace {

// A block holds whole rows and about kBlockValues values (one row if a row is longer).
const i64 kBlockValues = 256;
// Blocks per thread below which a pass stays on fewer threads (256 blocks: 256 KiB of floats).
const i64 kParallelBlocks = 256;

struct Blocks {
    i64 rows, c, per, width;  // per: rows in a full block; width = per * c values
    Blocks(i64 rows_, i64 c_)
        : rows(rows_), c(c_), per(c_ >= kBlockValues ? 1 : kBlockValues / c_), width(per * c) {}

    // The c values of v repeated over one block's width.
    template <class T>
    std::vector<T> tile(const float* v) const
    {
        std::vector<T> out(width);
        for (i64 k = 0; k < width; ++k)
            out[k] = v[k % c];
        return out;
    }

    i64 count() const { return (rows + per - 1) / per; }

    // f(offset, n) for blocks [first, last): n values from value offset (the last block of
    // the batch may be short).
    template <class F>
    void each(i64 first, i64 last, F f) const
    {
        for (i64 r = first * per; r < rows && r < last * per; r += per) {
            const i64 n = (rows - r < per ? rows - r : per) * c;
            f(r * c, n);
        }
    }

    // f(offset, n) for every block, the blocks shared among the pass threads.
    template <class F>
    void each_parallel(F f) const
    {
        mg_parallel_for(count(), kParallelBlocks,
                        [&](i64 first, i64 last) { each(first, last, f); });
    }

    // Two sums per channel over the rows, in float64: terms(i, k, first, second) gives the
    // two terms of value i, at position k of its block. Each position of a block's width
    // gets its own sums, folded to the channels at the end. The blocks are split into
    // mg_chunks fixed chunks, summed in parallel and then added in chunk order: the same bits
    // on any number of threads.
    template <class Terms>
    void channel_sums(Terms terms, std::vector<double>& first, std::vector<double>& second) const
    {
        const i64 chunks = mg_chunks(count(), kParallelBlocks);
        std::vector<double> partial(chunks * 2 * width, 0.0);
        mg_parallel_for(chunks, 1, [&](i64 k0, i64 k1) {
            for (i64 k = k0; k < k1; ++k) {
                double* __restrict p1 = partial.data() + k * 2 * width;
                double* __restrict p2 = p1 + width;
                each(count() * k / chunks, count() * (k + 1) / chunks, [&](i64 at, i64 n) {
                    for (i64 j = 0; j < n; ++j) {
                        double t1, t2;
                        terms(at + j, j, t1, t2);
                        p1[j] += t1;
                        p2[j] += t2;
                    }
                });
            }
        });
        first.assign(c, 0.0);
        second.assign(c, 0.0);
        for (i64 k = 0; k < chunks; ++k)
            for (i64 j = 0; j < width; ++j) {
                first[j % c] += partial[(2 * k) * width + j];
                second[j % c] += partial[(2 * k + 1) * width + j];
            }
    }
};

}  // namespace

/* mean and biased variance of each channel over the rows, as float32 (rounded once from
   float64). The sums are taken of d = x - x[row 0] (exact in float64): the shift keeps
   Σd² - (Σd)²/rows free of cancellation when the mean is large against the spread. A channel
   with an inf or NaN gets a NaN variance. */
extern "C" void mg_bn_moments(const float* __restrict x, float* __restrict mean,
                              float* __restrict var, i64 rows, i64 c)
{
    const Blocks blocks(rows, c);
    const std::vector<double> shift = blocks.tile<double>(x);
    const double* __restrict k0 = shift.data();
    std::vector<double> sum, sumsq;
    blocks.channel_sums([&](i64 i, i64 k, double& d, double& d2) {
        d = static_cast<double>(x[i]) - k0[k];
        d2 = d * d;
    }, sum, sumsq);
    const double m = static_cast<double>(rows);
    for (i64 j = 0; j < c; ++j) {
        const double mean_d = sum[j] / m;
        const double v = sumsq[j] / m - mean_d * mean_d;
        mean[j] = static_cast<float>(shift[j] + mean_d);
        var[j] = static_cast<float>(v > 0.0 ? v : (v == v ? 0.0 : v));
    }
}

/* out = ((x - mean) * a) + b per channel: the normalised output (a = gamma * r). ``out`` may be
   ``x`` (an fp16 batch's widened copy is written in place). */
extern "C" void mg_bn_normalize(const float* x, float* out, const float* mean, const float* a,
                                const float* b, i64 rows, i64 c)
{
    const Blocks blocks(rows, c);
    const std::vector<float> tm = blocks.tile<float>(mean), ta = blocks.tile<float>(a),
                             tb = blocks.tile<float>(b);
    const float* __restrict pm = tm.data();
    const float* __restrict pa = ta.data();
    const float* __restrict pb = tb.data();
    blocks.each_parallel([&](i64 at, i64 n) {
        const float* xb = x + at;
        float* ob = out + at;
        for (i64 k = 0; k < n; ++k)
            ob[k] = ((xb[k] - pm[k]) * pa[k]) + pb[k];
    });
}

/* sum_g = Σ g and sum_gc = Σ g·(x - mean) per channel over the rows, with x - mean rounded to
   float32 (as mg_bn_dx computes it) and the products and sums in float64; float32 results. */
extern "C" void mg_bn_grad_sums(const float* __restrict x, const float* __restrict g,
                                const float* __restrict mean, float* __restrict sum_g,
                                float* __restrict sum_gc, i64 rows, i64 c)
{
    const Blocks blocks(rows, c);
    const std::vector<float> tm = blocks.tile<float>(mean);
    const float* __restrict pm = tm.data();
    std::vector<double> sum, sum_c;
    blocks.channel_sums([&](i64 i, i64 k, double& gi, double& gc) {
        const float centred = x[i] - pm[k];
        gi = static_cast<double>(g[i]);
        gc = gi * static_cast<double>(centred);
    }, sum, sum_c);
    for (i64 j = 0; j < c; ++j) {
        sum_g[j] = static_cast<float>(sum[j]);
        sum_gc[j] = static_cast<float>(sum_c[j]);
    }
}

/* out = ((((x - mean) * k) + g) - s) * a per channel: dx through the batch statistics
   (k = -r^2 * sum(g (x - mean)) / M, s = sum(g) / M, a = gamma * r). ``out`` may be ``x``. */
extern "C" void mg_bn_dx(const float* x, const float* g, float* out, const float* mean,
                         const float* k, const float* s, const float* a, i64 rows, i64 c)
{
    const Blocks blocks(rows, c);
    const std::vector<float> tm = blocks.tile<float>(mean), tk = blocks.tile<float>(k),
                             ts = blocks.tile<float>(s), ta = blocks.tile<float>(a);
    const float* __restrict pm = tm.data();
    const float* __restrict pk = tk.data();
    const float* __restrict ps = ts.data();
    const float* __restrict pa = ta.data();
    blocks.each_parallel([&](i64 at, i64 n) {
        const float* xb = x + at;
        const float* gb = g + at;
        float* ob = out + at;
        for (i64 i = 0; i < n; ++i)
            ob[i] = ((((xb[i] - pm[i]) * pk[i]) + gb[i]) - ps[i]) * pa[i];
    });
}
