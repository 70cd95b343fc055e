/* Which sliding windows read an input element: shared by the gradient passes that gather each
   input element's sum from the windows reading it (col2im in image_host.cpp, max pooling's
   gradient in pool_host.cpp), so each element is written once, by one thread. */
#ifndef MG_WINDOWS_H
#define MG_WINDOWS_H

#include "host_threads.h"

/* Along one axis: the windows o (0 <= o < count) whose tap t (t = 0..k-1) reads input element
   e, where window o's tap t reads o·stride - pad + t·dilation. Calls f(t, o) in tap order. */
template <class F>
static inline void mg_windows_reading(long long e, long long pad, long long stride,
                                      long long dilation, long long k, long long count, F f)
{
    for (long long t = 0; t < k; ++t) {
        const long long at = e + pad - t * dilation;
        if (at >= 0 && at % stride == 0 && at / stride < count)
            f(t, at / stride);
    }
}

/* The windows of a 2-D sliding-window op over (n, h, w) images: a kh x kw kernel giving ho x wo
   windows at stride (sh, sw), with (top, left) padding and dilation (dh, dw). */
struct MgWindows {
    long long n, h, w, kh, kw, ho, wo, sh, sw, top, left, dh, dw;

    /* f(tap, oy, ox) for every window (oy, ox) that reads input element (y, x), the row-major
       tap index tap = i·kw + j, in tap order. */
    template <class F>
    void reading(long long y, long long x, F f) const
    {
        mg_windows_reading(y, top, sh, dh, kh, ho, [&](long long i, long long oy) {
            mg_windows_reading(x, left, sw, dw, kw, wo, [&](long long j, long long ox) {
                f(i * kw + j, oy, ox);
            });
        });
    }

    /* An input gradient gathered element by element: for each pixel (b, y, x), its `count`
       values at dx + ((b·h + y)·w + x)·stride start at 0 and get share(out, window, tap) for
       every window reading the pixel, in tap order, `window` being the output pixel
       (b·ho + oy)·wo + ox. The rows of pixels are shared among the pass threads; grain: values
       per thread below which fewer threads run. */
    template <class T, class Share>
    void gather(T* dx, long long stride, long long count, long long grain, Share share) const
    {
        if (n * h * w * count == 0)
            return;
        mg_parallel_for(n * h, grain / (w * count), [&](long long r0, long long r1) {
            for (long long r = r0; r < r1; ++r)
                for (long long x = 0; x < w; ++x) {
                    T* out = dx + (r * w + x) * stride;
                    for (long long k = 0; k < count; ++k)
                        out[k] = 0;
                    const long long b = r / h;
                    reading(r % h, x, [&](long long tap, long long oy, long long ox) {
                        share(out, (b * ho + oy) * wo + ox, tap);
                    });
                }
        });
    }
};

#endif
