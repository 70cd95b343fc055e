/* Which sliding windows read an input element: shared by the gradient passes that gather each
   input element's sum from the windows reading it (col2im in image_host.cpp, max pooling's
   gradient in pool_host.cpp), so each element is written once, by one thread. */
#ifndef MG_WINDOWS_H
#define MG_WINDOWS_H

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

#endif
