/* Direct convolution on the host, float32, channels-last (minigrad/ops/_image_host.py).

   x is a zero-padded (N, Hp, Wp, C) batch, w the kernel as a (kh, kw, C, O) array, and g or out
   the (N, Ho, Wo, O) output side, all C-ordered, with O a multiple of 16 (one 16-float vector):

     mg_conv_direct_float:  out[n, y, x, o] = sum_{i, j, c} x[n, sh*y + i, sw*x + j, c] * w[i, j, c, o]
     mg_conv_wgrad_float:   w[i, j, c, o]   = sum_{n, y, x} x[n, sh*y + i, sw*x + j, c] * g[n, y, x, o]

   The first is also the input gradient of a stride-1 convolution (g padded, the kernel flipped
   and its channel axes swapped). No patch matrix is written: the forward kernel keeps a block
   of output pixels times one or two vectors of output channels in registers and adds every
   tap's products into it, so each input value is read from cache once per block; the weight
   kernel keeps a block of input channels times one or two vectors of output channels, and
   sweeps one image's pixels. Both take a kernel row's taps (j, c), kw·c adjacent floats of a
   pixel row and of w, as one run of channels, so a 3-channel input fills the registers as
   well as a wide one. Each sum is accumulated in float32, with fused multiply-adds
   under GCC (the pragma below turns contraction on for this file alone), in the order
   (i, j, c) for the forward sums and (n, y, x) within a fixed chunk of images for the weight
   sums, the chunks then added in order: not the BLAS's order, so results agree with the
   patch-matrix path to float32 rounding, not bit for bit. The output rows (forward) and the
   chunks of images (weights) are shared among the pass threads (host_threads.h); no result
   depends on their number. */
#pragma GCC optimize("fp-contract=fast")
#include <cstdint>
#include <cstring>
#include <vector>

#include "host_threads.h"

typedef std::int64_t i64;

// Multiply-adds per thread below which a kernel stays on fewer threads (about 0.1 ms of work).
const i64 kParallelFlops = 1 << 22;
// Most chunks of images the weight gradient is split into (each has its own dW to add).
const i64 kWeightChunks = 8;
typedef float vec __attribute__((vector_size(64)));  // 16 floats; the compiler splits it as needed

static inline vec load(const float* p)
{
    vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

static inline void store(float* p, vec v) { std::memcpy(p, &v, sizeof v); }

/* P output pixels of one row (input pixels sx floats apart) times B vectors of output channels
   from ob: the sum over the taps and input channels, stored to out. */
template <int P, int B>
static inline void direct_block(const float* __restrict x, i64 sx, i64 s_row,
                                const float* __restrict w, i64 c, i64 o, i64 kh, i64 kw,
                                float* __restrict out, i64 ob)
{
    vec acc[P][B];
    for (int p = 0; p < P; ++p)
        for (int b = 0; b < B; ++b)
            acc[p][b] = vec{};
    /* a kernel row's taps read kw·c adjacent floats of a pixel row: one run of "channels" */
    for (i64 i = 0; i < kh; ++i) {
        const float* xt = x + i * s_row;
        const float* wt = w + i * kw * c * o + ob;
        for (i64 k = 0; k < kw * c; ++k) {
            vec wv[B];
            for (int b = 0; b < B; ++b)
                wv[b] = load(wt + k * o + 16 * b);
            for (int p = 0; p < P; ++p) {
                const float xv = xt[p * sx + k];
                for (int b = 0; b < B; ++b)
                    acc[p][b] += xv * wv[b];
            }
        }
    }
    for (int p = 0; p < P; ++p)
        for (int b = 0; b < B; ++b)
            store(out + p * o + ob + 16 * b, acc[p][b]);
}

/* Blocks of P pixels of one output row from pixel x0 while P fit, for the channel vectors
   [o_lo, o_hi) in groups of B; returns the first pixel left. */
template <int P, int B>
static inline i64 direct_row(const float* x, i64 sx, i64 s_row, const float* w, i64 c, i64 o,
                             i64 kh, i64 kw, float* out, i64 x0, i64 wo, i64 o_lo, i64 o_hi)
{
    for (; x0 + P <= wo; x0 += P)
        for (i64 ob = o_lo; ob < o_hi; ob += 16 * B)
            direct_block<P, B>(x + x0 * sx, sx, s_row, w, c, o, kh, kw, out + x0 * o, ob);
    return x0;
}

template <int B>
static void direct_rows(const float* x, const float* w, float* out, const i64* p, i64 o_lo,
                        i64 o_hi)
{
    /* two vectors of channels: 8 pixels (16 accumulators); one: 12 pixels */
    constexpr int P = B == 1 ? 12 : 8;
    const i64 n = p[0], hp = p[1], wp = p[2], c = p[3], o = p[4], kh = p[5], kw = p[6];
    const i64 sh = p[7], sw = p[8];
    const i64 ho = (hp - kh) / sh + 1, wo = (wp - kw) / sw + 1;
    const i64 row_flops = wo * (o_hi - o_lo) * kh * kw * c;
    mg_parallel_for(n * ho, kParallelFlops / (row_flops ? row_flops : 1), [&](i64 r0, i64 r1) {
        for (i64 ny = r0; ny < r1; ++ny) {
            const i64 b = ny / ho, y = ny % ho;
            const float* xr = x + (b * hp + y * sh) * wp * c;
            float* row = out + ny * wo * o;
            i64 x0 = direct_row<P, B>(xr, sw * c, wp * c, w, c, o, kh, kw, row, 0, wo, o_lo,
                                      o_hi);
            x0 = direct_row<4, B>(xr, sw * c, wp * c, w, c, o, kh, kw, row, x0, wo, o_lo, o_hi);
            direct_row<1, B>(xr, sw * c, wp * c, w, c, o, kh, kw, row, x0, wo, o_lo, o_hi);
        }
    });
}

/* p: n, hp, wp, c, o, kh, kw, stride (h, w): 9 values. */
extern "C" void mg_conv_direct_float(const float* x, const float* w, float* out, const i64* p)
{
    const i64 o = p[4], pairs = o / 32 * 32;
    if (pairs)
        direct_rows<2>(x, w, out, p, 0, pairs);
    if (o % 32)
        direct_rows<1>(x, w, out, p, pairs, o);
}

/* Adds to w[c0 + k, ob + 16 b] (k < CB) the products of one image: x at the tap and c0, its
   output pixels sx floats apart in a row and sy between rows; g the image's gradient rows. */
template <int CB, int B>
static inline void wgrad_block(const float* __restrict x, i64 sx, i64 sy,
                               const float* __restrict g, i64 o, i64 ho, i64 wo,
                               float* __restrict w, i64 ob)
{
    vec acc[CB][B];
    for (int k = 0; k < CB; ++k)
        for (int b = 0; b < B; ++b)
            acc[k][b] = load(w + k * o + ob + 16 * b);
    for (i64 y = 0; y < ho; ++y) {
        const float* xr = x + y * sy;
        const float* gr = g + y * wo * o;
        for (i64 px = 0; px < wo; ++px) {
            vec gv[B];
            for (int b = 0; b < B; ++b)
                gv[b] = load(gr + px * o + ob + 16 * b);
            for (int k = 0; k < CB; ++k) {
                const float xv = xr[px * sx + k];
                for (int b = 0; b < B; ++b)
                    acc[k][b] += xv * gv[b];
            }
        }
    }
    for (int k = 0; k < CB; ++k)
        for (int b = 0; b < B; ++b)
            store(w + k * o + ob + 16 * b, acc[k][b]);
}

template <int B>
static inline void wgrad_channels(const float* x, i64 sx, i64 sy, const float* g, i64 c, i64 o,
                                  i64 ho, i64 wo, float* w, i64 ob)
{
    /* two vectors of channels: blocks of 8 input channels (16 accumulators); one: 16 */
    constexpr int CB = B == 1 ? 16 : 8;
    i64 k = 0;
    for (; k + CB <= c; k += CB)
        wgrad_block<CB, B>(x + k, sx, sy, g, o, ho, wo, w + k * o, ob);
    for (; k + 4 <= c; k += 4)
        wgrad_block<4, B>(x + k, sx, sy, g, o, ho, wo, w + k * o, ob);
    for (; k < c; ++k)
        wgrad_block<1, B>(x + k, sx, sy, g, o, ho, wo, w + k * o, ob);
}

/* p as for mg_conv_direct_float; w is overwritten. The images are split into mg_chunks fixed
   chunks: each chunk's sum (images in order) goes to its own array, in parallel, and the
   chunks' arrays are added in order into w, so w is the same on any number of threads. */
extern "C" void mg_conv_wgrad_float(const float* x, const float* g, float* w, const i64* p)
{
    const i64 n = p[0], hp = p[1], wp = p[2], c = p[3], o = p[4], kh = p[5], kw = p[6];
    const i64 sh = p[7], sw = p[8];
    const i64 ho = (hp - kh) / sh + 1, wo = (wp - kw) / sw + 1, pairs = o / 32 * 32;
    const i64 size = kh * kw * c * o, image_flops = ho * wo * size;
    // each chunk past the first writes and adds back a whole dW: a few chunks suffice
    const i64 chunks = mg_chunks(n, (kParallelFlops + image_flops - 1) / image_flops,
                                 kWeightChunks);
    std::vector<float> partial((chunks - 1) * size);  // chunk 0 sums into w itself
    mg_parallel_for(chunks, 1, [&](i64 k0, i64 k1) {
        for (i64 k = k0; k < k1; ++k) {
            float* own = k == 0 ? w : partial.data() + (k - 1) * size;
            std::memset(own, 0, sizeof(float) * size);
            for (i64 b = n * k / chunks; b < n * (k + 1) / chunks; ++b) {
                const float* gi = g + b * ho * wo * o;
                /* a kernel row's taps (j, c) are kw·c adjacent floats: one run of channels */
                for (i64 i = 0; i < kh; ++i) {
                    const float* xt = x + (b * hp + i) * wp * c;
                    float* wt = own + i * kw * c * o;
                    for (i64 ob = 0; ob < pairs; ob += 32)
                        wgrad_channels<2>(xt, sw * c, sh * wp * c, gi, kw * c, o, ho, wo, wt, ob);
                    if (o % 32)
                        wgrad_channels<1>(xt, sw * c, sh * wp * c, gi, kw * c, o, ho, wo, wt,
                                          pairs);
                }
            }
        }
    });
    for (i64 k = 1; k < chunks; ++k) {
        const float* __restrict own = partial.data() + (k - 1) * size;
        for (i64 i = 0; i < size; ++i)
            w[i] += own[i];
    }
}
