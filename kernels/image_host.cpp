/* Host passes of the image ops over float32 arrays (minigrad/ops/_image_host.py).

   mg_im2col_float writes a convolution's patch matrix in one pass over the output, with the
   zero padding read as zeros in place (no padded copy of the input) and the input in any
   axis order (its strides in elements): row (n, y, x), columns (i, j, c) in that order,

       dst[((n*Ho + y)*Wo + x)*kh*kw*C + (i*kw + j)*C + c]
           = src[n, c, y*sh - top + i*dh, x*sw - left + j*dw]   (0 outside the input).

   It only copies, so its bits are the input's.

   mg_col2im_float is the way back: a convolution's input gradient from its tap-major patch
   gradients d (kh*kw, N*Ho*Wo, Cg), each element gathered from the windows that read it,

       dx[n, y, x, c] = sum over taps (i, j) in row-major order, from +0, of
                        d[i*kw + j, (n*Ho + oy)*Wo + ox, c]   where oy*sh - top + i*dh = y
                                                                and ox*sw - left + j*dw = x,

   the sums of NumPy's tap-by-tap adds into a zeroed array, in the same order (the same bits,
   up to which payload survives where two NaNs meet). Each element is written once: the rows
   of both passes are shared among the pass threads (host_threads.h). */
#include <cstdint>
#include <cstring>

#include "host_threads.h"
#include "windows.h"

typedef std::int64_t i64;

// Floats written per thread below which the pass stays on fewer threads (256 KiB).
const i64 kParallelValues = 1 << 16;

/* Copy n floats, src read with stride s (a loop the compiler vectorises: a libc memcpy call
   per pixel costs more than the copy of its few channels). */
static inline void copy_run(float* __restrict dst, const float* __restrict src, i64 n, i64 s)
{
    if (s == 1) {
        for (i64 k = 0; k < n; ++k)
            dst[k] = src[k];
    } else {
        for (i64 k = 0; k < n; ++k)
            dst[k] = src[k * s];
    }
}

static inline void zero_run(float* dst, i64 n)
{
    for (i64 k = 0; k < n; ++k)
        dst[k] = 0.0f;
}

/* p: n, c, h, w, src strides (n, c, h, w) in elements, kh, kw, ho, wo, stride (h, w),
   padding (top, left), dilation (h, w); 18 values. */
extern "C" void mg_im2col_float(const float* __restrict src, float* __restrict dst,
                                const i64* p)
{
    const i64 n = p[0], c = p[1], h = p[2], w = p[3];
    const i64 s_n = p[4], s_c = p[5], s_h = p[6], s_w = p[7];
    const i64 kh = p[8], kw = p[9], ho = p[10], wo = p[11];
    const i64 st_h = p[12], st_w = p[13], top = p[14], left = p[15], d_h = p[16], d_w = p[17];
    const i64 width = kh * kw * c;
    /* a row of taps whose pixels follow each other in memory is one run of kw * c floats */
    const bool runs = s_c == 1 && s_w * d_w == c;
    mg_parallel_for(n * ho, kParallelValues / (wo * width), [&](i64 r0, i64 r1) {
      for (i64 ny = r0; ny < r1; ++ny) {
        const i64 b = ny / ho, y = ny % ho;
        float* out = dst + ny * wo * width;
        for (i64 x = 0; x < wo; ++x) {
            const i64 x0 = x * st_w - left;
            /* the taps j0 <= j < j1 of this window read inside the row */
            const i64 j0 = x0 >= 0 ? 0 : (-x0 + d_w - 1) / d_w;
            const i64 j1 = x0 + (kw - 1) * d_w < w ? kw : x0 >= w ? 0 : (w - 1 - x0) / d_w + 1;
            for (i64 i = 0; i < kh; ++i) {
                const i64 yy = y * st_h - top + i * d_h;
                float* tap = out + (x * kh + i) * kw * c;
                if (yy < 0 || yy >= h || j0 >= j1) {
                    zero_run(tap, kw * c);
                    continue;
                }
                const float* row = src + b * s_n + yy * s_h;
                zero_run(tap, j0 * c);
                if (runs) {
                    copy_run(tap + j0 * c, row + (x0 + j0 * d_w) * s_w, (j1 - j0) * c, 1);
                } else {
                    for (i64 j = j0; j < j1; ++j)
                        copy_run(tap + j * c, row + (x0 + j * d_w) * s_w, c, s_c);
                }
                zero_run(tap + j1 * c, (kw - j1) * c);
            }
        }
      }
    });
}

static inline void add_run(float* __restrict dst, const float* __restrict src, i64 n)
{
    for (i64 k = 0; k < n; ++k)
        dst[k] += src[k];
}

/* p: n, h, w, c (dx's channels in all; dx points at the group's first), cg, kh, kw, ho, wo,
   stride (h, w), padding (top, left), dilation (h, w); 15 values. d is C-ordered
   (kh*kw, n*ho*wo, cg); dx is (n, h, w, c), C-ordered, written at its first cg channels. */
extern "C" void mg_col2im_float(const float* __restrict d, float* __restrict dx, const i64* p)
{
    const i64 n = p[0], c = p[3], cg = p[4], ho = p[7], wo = p[8];
    const MgWindows windows{n, p[1], p[2], p[5], p[6], ho, wo, p[9], p[10], p[11], p[12], p[13],
                            p[14]};
    const i64 tap_rows = n * ho * wo * cg;  // one tap's patch gradients
    windows.gather(dx, c, cg, kParallelValues, [&](float* out, i64 window, i64 tap) {
        add_run(out, d + tap * tap_rows + window * cg, cg);
    });
}
