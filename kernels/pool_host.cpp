/* Max pooling over channels-last images in one pass each way (minigrad/ops/_pool_host.py).

   mg_maxpool_float reads each window once and writes its maximum and argmax together. Taps are
   visited in row-major window order, padding taps skipped (they read as -inf, which never
   wins), with the rules of the NumPy path (minigrad/ops/pooling.py) so the bits are its bits:

       best = (best > v || best is NaN) ? best : v     NumPy's maximum(best, v): ties and a
                                                        first NaN give v, a NaN best stays
       arg  = v > best ? k : arg                        strict: the first maximum keeps a tie

   mg_maxpool_grad gathers each input element's gradient from the windows that read it, in tap
   order: g where the window's argmax is the tap, else +0. Where windows are disjoint (stride
   >= kernel on both axes) an element gets at most one share, copied as bits (2- or 4-byte
   elements: fp16 or float32); where they overlap, the shares are added in float32 in tap
   order starting from +0, as the NumPy path adds them into a zeroed array. Rows of the output
   (forward) and of dx (backward) are shared among the pass threads (host_threads.h): each
   element is written by one thread, so the bits do not depend on the thread count. */
#include <cstdint>

#include "host_threads.h"
#include "windows.h"

typedef std::int64_t i64;
typedef std::uint8_t u8;
typedef std::uint16_t u16;
typedef std::uint32_t u32;

// Elements written per thread below which a pass stays on fewer threads.
const i64 kPoolValues = 1 << 15;

namespace {

/* Geometry p (int64[15]): n, c, h, w, x strides (n, h, w) in elements (channels adjacent),
   kh, kw, ho, wo, stride (h, w), padding (top, left). */
struct Pool {
    i64 n, c, h, w, s_n, s_h, s_w, kh, kw, ho, wo, sh, sw, top, left;
    explicit Pool(const i64* p)
        : n(p[0]), c(p[1]), h(p[2]), w(p[3]), s_n(p[4]), s_h(p[5]), s_w(p[6]), kh(p[7]),
          kw(p[8]), ho(p[9]), wo(p[10]), sh(p[11]), sw(p[12]), top(p[13]), left(p[14]) {}
    MgWindows windows() const { return {n, h, w, kh, kw, ho, wo, sh, sw, top, left, 1, 1}; }
};

/* One tap of a window over c channels: the running maximum and argmax (rules above). */
inline void max_tap(float* __restrict best, u8* __restrict where, const float* __restrict v,
                    u8 k, i64 c)
{
    for (i64 ch = 0; ch < c; ++ch) {
        const float m = best[ch], e = v[ch];
        where[ch] = e > m ? k : where[ch];
        best[ch] = (m > e || m != m) ? m : e;
    }
}

/* One window's share of an element's gradient over c channels: g's bits where the argmax is
   tap k, else +0 (copied, or added in float32). */
template <class Bits>
inline void copy_share(Bits* __restrict out, const Bits* __restrict g, const u8* __restrict arg,
                       u8 k, i64 c)
{
    for (i64 ch = 0; ch < c; ++ch)
        out[ch] = (Bits)(g[ch] * (Bits)(arg[ch] == k));
}

inline void add_share(float* __restrict out, const float* __restrict g, const u8* __restrict arg,
                      u8 k, i64 c)
{
    for (i64 ch = 0; ch < c; ++ch)
        out[ch] += arg[ch] == k ? g[ch] : 0.0f;
}

/* dx from g: each element from +0 (0 bits), then share(out, g, arg, tap, c) for every window
   reading it, in tap order. */
template <class T, class Share>
void gather(const Pool& q, const T* g, const u8* arg, T* dx, Share share)
{
    q.windows().gather(dx, q.c, q.c, kPoolValues, [&](T* out, i64 window, i64 tap) {
        share(out, g + window * q.c, arg + window * q.c, (u8)tap, q.c);
    });
}

}  // namespace

/* out, arg: C-ordered (n, ho, wo, c); at most 255 taps (arg is the tap index). */
extern "C" void mg_maxpool_float(const float* __restrict x, float* __restrict out,
                                 u8* __restrict arg, const i64* p)
{
    const Pool q(p);
    if (q.n * q.ho * q.wo * q.c == 0)
        return;
    mg_parallel_for(q.n * q.ho, kPoolValues / (q.wo * q.c), [&](i64 r0, i64 r1) {
        for (i64 r = r0; r < r1; ++r) {
            const i64 b = r / q.ho, oy = r % q.ho;
            for (i64 ox = 0; ox < q.wo; ++ox) {
                float* best = out + (r * q.wo + ox) * q.c;
                u8* where = arg + (r * q.wo + ox) * q.c;
                for (i64 ch = 0; ch < q.c; ++ch) {
                    best[ch] = -__builtin_inff();
                    where[ch] = 0;
                }
                for (i64 i = 0; i < q.kh; ++i) {
                    const i64 y = oy * q.sh - q.top + i;
                    if (y < 0 || y >= q.h)
                        continue;
                    for (i64 j = 0; j < q.kw; ++j) {
                        const i64 xx = ox * q.sw - q.left + j;
                        if (xx < 0 || xx >= q.w)
                            continue;
                        max_tap(best, where, x + b * q.s_n + y * q.s_h + xx * q.s_w,
                                (u8)(i * q.kw + j), q.c);
                    }
                }
            }
        }
    });
}

/* g, arg: C-ordered (n, ho, wo, c); dx: C-ordered (n, h, w, c). mode 2 or 4: disjoint windows,
   elements of that many bytes, g's bits copied; mode 0: overlapping windows, float32 sums. */
extern "C" void mg_maxpool_grad(const void* g, const u8* arg, void* dx, const i64* p, int mode)
{
    const Pool q(p);
    if (mode == 2)
        gather(q, static_cast<const u16*>(g), arg, static_cast<u16*>(dx),
               [](auto... a) { copy_share<u16>(a...); });
    else if (mode == 4)
        gather(q, static_cast<const u32*>(g), arg, static_cast<u32*>(dx),
               [](auto... a) { copy_share<u32>(a...); });
    else
        gather(q, static_cast<const float*>(g), arg, static_cast<float*>(dx),
               [](auto... a) { add_share(a...); });
}
