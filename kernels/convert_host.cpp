/* Host-only fp16 kernels for the CPU: fp16 <-> fp32 conversion, and the fp16 passes of ReLU and
   of Dense's bias (forward epilogue, backward column sum) fused with their conversions. Every
   result is bit for bit what the NumPy code it replaces gives (tests/core/test_fp16_host.py,
   tests/core/test_fp16_host_passes.py). The conversions and the ReLU passes run on the pass
   threads (end of file); the others on the calling thread.

   Conversion. NumPy converts one element at a time in software (about 1-2 ns an element); the
   F16C instructions (vcvtph2ps / vcvtps2ph, x86 since 2012) convert 8 at a time (16 with
   AVX-512, whose vcvtph2ps/vcvtps2ph round the same way). Results agree with
   NumPy everywhere (round to nearest even, subnormals kept, overflow to inf) except for NaNs:
   the hardware quietens a signalling NaN, NumPy keeps its payload as it is. Blocks that hold a
   NaN are therefore redone with the scalar code below, which is NumPy's rule. Without F16C
   (other CPUs, other compilers) the scalar code does everything.

   mg_half_to_float(src, dst, n) and mg_float_to_half(src, dst, n) read and write dense
   arrays of n elements. mg_float_to_half returns how many finite inputs became +-inf, so the
   caller can let NumPy raise its "overflow encountered in cast" warning. mg_convert_vectorized()
   says whether the F16C path was compiled in (the scalar code alone is slower than NumPy's).

   The fused fp16 kernels (after the conversions below) are used by minigrad/_fp16_host.py. */
#include <atomic>
#include <type_traits>
#include <cstdint>
#include <cstring>

#include "host_threads.h"
#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#define MG_F16C 1
#endif

typedef std::uint16_t u16;
typedef std::uint32_t u32;
typedef std::int64_t i64;

// Elements per thread below which a pass stays on fewer threads (256 KiB of floats).
static const i64 kParallelValues = 1 << 16;

/* pass(arrays..., n) as ranges of the n elements on the pass threads, each array pointer moved
   to its range; the counts that a counting pass returns, added. */
template <class Pass, class... P>
static i64 elementwise(i64 n, Pass pass, P*... arrays)
{
    std::atomic<i64> total{0};
    mg_parallel_for(n, kParallelValues, [&](i64 begin, i64 end) {
        if constexpr (std::is_void<decltype(pass(arrays..., n))>::value)
            pass(arrays + begin..., end - begin);
        else
            total.fetch_add(pass(arrays + begin..., end - begin), std::memory_order_relaxed);
    });
    return total.load();
}

static inline u32 half_to_float_bits(u32 h)
{
    u32 sign = (h & 0x8000u) << 16, exp = h & 0x7C00u, man = h & 0x3FFu;
    if (exp == 0x7C00u)  /* inf, and NaN with its payload (signalling or not) */
        return sign | 0x7F800000u | (man << 13);
    if (exp != 0)        /* normal: rebias the exponent from 15 to 127 */
        return sign | ((exp >> 10) + 112u) << 23 | (man << 13);
    if (man == 0)
        return sign;
    u32 e = 113;         /* subnormal man * 2^-24: shift the leading one into the hidden bit */
    do {
        man <<= 1;
        --e;
    } while (!(man & 0x400u));
    return sign | (e << 23) | ((man & 0x3FFu) << 13);
}

/* Shift right by `shift` bits, rounding to nearest, ties to even. */
static inline u32 round_shift(u32 x, u32 shift)
{
    u32 kept = x >> shift, rest = x & ((1u << shift) - 1), half = 1u << (shift - 1);
    return kept + (rest > half || (rest == half && (kept & 1u)));
}

static inline u32 float_to_half_bits(u32 f)
{
    u32 sign = (f >> 16) & 0x8000u, a = f & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {  /* NaN: the top of the payload, never turned into inf */
        u32 man = (a & 0x7FFFFFu) >> 13;
        return sign | 0x7C00u | (man ? man : 1u);
    }
    if (a >= 0x477FF000u)   /* >= 65520 (half way above 65504, odd): inf */
        return sign | 0x7C00u;
    if (a >= 0x38800000u)   /* normal in fp16: rebias from 127 to 15; the carry may bump exp */
        return sign | round_shift(a - 0x38000000u, 13);
    if (a <= 0x33000000u)   /* <= 2^-25 (a tie with 0, which is even): zero */
        return sign;
    u32 man = (a & 0x7FFFFFu) | 0x800000u;  /* fp16 subnormal: count units of 2^-24 */
    return sign | round_shift(man, 126u - (a >> 23));
}

static void half_to_float_scalar(const u16* src, u32* dst, i64 n)
{
    for (i64 i = 0; i < n; ++i)
        dst[i] = half_to_float_bits(src[i]);
}

static i64 float_to_half_scalar(const u32* src, u16* dst, i64 n)
{
    i64 overflows = 0;
    for (i64 i = 0; i < n; ++i) {
        u32 h = float_to_half_bits(src[i]);
        overflows += (h & 0x7FFFu) == 0x7C00u && (src[i] & 0x7FFFFFFFu) != 0x7F800000u;
        dst[i] = (u16)h;
    }
    return overflows;
}

static void half_to_float_range(const u16* src, float* dst, i64 n)
{
    u32* out = reinterpret_cast<u32*>(dst);
    i64 i = 0;
#ifdef __AVX512F__  /* 16 at a time: ~10 % faster than 8 on the training step's arrays */
    for (; i + 16 <= n; i += 16) {
        __m512 f = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
        if (_mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q))
            half_to_float_scalar(src + i, out + i, 16);
        else
            _mm512_storeu_ps(dst + i, f);
    }
#endif
#ifdef MG_F16C
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        __m256 f = _mm256_cvtph_ps(h);
        if (_mm256_movemask_ps(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)))
            half_to_float_scalar(src + i, out + i, 8);
        else
            _mm256_storeu_ps(dst + i, f);
    }
#endif
    half_to_float_scalar(src + i, out + i, n - i);
}

static i64 float_to_half_range(const float* src, u16* dst, i64 n)
{
    const u32* in = reinterpret_cast<const u32*>(src);
    i64 i = 0, overflows = 0;
#ifdef __AVX512F__
    const __m512 limit16 = _mm512_set1_ps(65504.0f);
    for (; i + 16 <= n; i += 16) {
        __m512 f = _mm512_loadu_ps(src + i);
        if (_mm512_cmp_ps_mask(_mm512_abs_ps(f), limit16, _CMP_NLE_UQ))
            overflows += float_to_half_scalar(in + i, dst + i, 16);
        else
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                                _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
#endif
#ifdef MG_F16C
    const __m256 limit = _mm256_set1_ps(65504.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 f = _mm256_loadu_ps(src + i);
        /* NaN, or a magnitude that may round to inf: the scalar code counts and converts */
        __m256 big = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), f), limit, _CMP_NLE_UQ);
        if (_mm256_movemask_ps(big))
            overflows += float_to_half_scalar(in + i, dst + i, 8);
        else
            _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                             _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
    }
#endif
    return overflows + float_to_half_scalar(in + i, dst + i, n - i);
}

extern "C" int mg_convert_vectorized(void)
{
#ifdef MG_F16C
    return 1;
#else
    return 0;
#endif
}

/* bfloat16 <-> float32, the twin of the fp16 conversion for ml_dtypes' bfloat16 (used by
   minigrad/_fp16_host.py). bfloat16 is the top half of a float32, so no F16C is needed: plain
   loops that the compiler vectorizes. Every result is ml_dtypes' astype bit for bit
   (tests/core/test_fp16_host_bf16.py):

   mg_bf16_to_float(src, dst, n) widens by a shift: exact, NaN payloads and signalling NaNs kept.

   mg_float_to_bf16(src, dst, n) rounds away the low 16 bits to nearest, ties to even: adding
   0x7FFF plus the kept part's lowest bit carries into the kept part exactly when the dropped part
   is over half, or half with an odd kept part. The carry runs through the exponent, so subnormals
   round as they are (no flush), the largest finite values round up to inf (0x7F7F8000 and above)
   and nothing wraps (the largest non-NaN pattern is 0xFF800000). A NaN becomes the quiet NaN
   0x7FC0 with its sign, payload dropped, as ml_dtypes gives. It returns how many inputs were
   signalling NaNs: NumPy reports "invalid value encountered in cast" for those (ml_dtypes'
   conversion raises the CPU's invalid flag on them), so the caller lets astype redo the array
   for its warning. Overflow and underflow are never reported, here or by astype. */
static void bf16_to_float_range(const u16* __restrict src, float* __restrict dst, i64 n)
{
    u32* out = reinterpret_cast<u32*>(dst);
    for (i64 i = 0; i < n; ++i)
        out[i] = (u32)src[i] << 16;
}

static i64 float_to_bf16_range(const float* __restrict src, u16* __restrict dst, i64 n)
{
    const u32* in = reinterpret_cast<const u32*>(src);
    i64 signalling = 0;
    for (i64 i = 0; i < n; ++i) {
        u32 f = in[i], a = f & 0x7FFFFFFFu;
        u32 rounded = (f + 0x7FFFu + ((f >> 16) & 1u)) >> 16;
        u32 nan = ((f >> 16) & 0x8000u) | 0x7FC0u;
        signalling += a > 0x7F800000u && a < 0x7FC00000u;
        dst[i] = (u16)(a > 0x7F800000u ? nan : rounded);
    }
    return signalling;
}

/* ---- Fused fp16 kernels ------------------------------------------------------------------------

   Inside a training step every separate NumPy pass costs 5-10 us of cold caches on top of its
   bytes, so these do in one pass what the NumPy code does in several. Each documents the NumPy
   code it replaces; the fp32 arithmetic is the same single IEEE operation in the same order
   (the library is built with -ffp-contract=off), and conversions are the ones above. Where NumPy
   would warn (an inf or NaN result), a kernel says so and the caller redoes the NumPy code. */

typedef std::uint8_t u8;

/* Columns handled per pass: a block's fp32 bias or sums (4 KiB) stay in L1. */
static const i64 MG_COLUMN_BLOCK = 1024;

/* Whether any of n fp16 values is inf or NaN (a max of magnitudes: vectorises, unlike a count). */
static bool any_nonfinite_half(const u16* h, i64 n)
{
    u16 largest = 0;
    for (i64 i = 0; i < n; ++i) {
        u16 magnitude = h[i] & 0x7FFFu;
        largest = magnitude > largest ? magnitude : largest;
    }
    return largest >= 0x7C00u;
}

/* ReLU forward on fp16 bit patterns, what ReLU.forward's NumPy code gives:
       mask = x > 0                  (0 < bits <= 0x7C00 as int16: +inf included, NaN not)
       out  = x where mask or x is NaN (either sign, payload kept, as numpy.maximum(x, 0) keeps
              it), else +0 */
static void relu_half_range(const u16* __restrict x, u16* __restrict out, u8* __restrict mask, i64 n)
{
    for (i64 i = 0; i < n; ++i) {
        std::int16_t s = static_cast<std::int16_t>(x[i]);
        bool positive = s > 0 && s <= 0x7C00;
        bool nan = (x[i] & 0x7FFFu) > 0x7C00u;
        mask[i] = positive;
        out[i] = positive || nan ? x[i] : 0;
    }
}

/* ReLU backward: dx = g where mask else +0 (g's bits as they are, NaN included). The select is
   an AND with a mask of all ones or all zeros: a branch on a mask that is half ones at random
   is mispredicted on every other element (about 25 times slower than this vector pass). */
static void relu_half_backward_range(const u16* __restrict g, const u8* __restrict mask,
                                      u16* __restrict out, i64 n)
{
    for (i64 i = 0; i < n; ++i)
        out[i] = g[i] & static_cast<u16>(-static_cast<u16>(mask[i] != 0));
}

/* ReLU forward on fp32 bit patterns, what ``x > 0`` and ``numpy.maximum(x, 0)`` give:
       mask = x > 0          (0 < bits <= 0x7F800000 as int32: +inf included, NaN not)
       out  = x where mask or x is NaN (payload kept), else +0 (so -0 gives +0) */
static void relu_float_range(const u32* __restrict x, u32* __restrict out, u8* __restrict mask,
                              i64 n)
{
    for (i64 i = 0; i < n; ++i) {
        std::int32_t s = static_cast<std::int32_t>(x[i]);
        bool positive = s > 0 && s <= 0x7F800000;
        bool nan = (x[i] & 0x7FFFFFFFu) > 0x7F800000u;
        mask[i] = positive;
        out[i] = x[i] & (0u - static_cast<u32>(positive || nan));
    }
}

/* fp32 ReLU backward, what NumPy's ``g * mask`` gives: g times 1.0 or 0.0 (so -0 for a
   negative g, NaN for an infinite one, where the mask is off; NaNs quietened). g * 1.0 is
   written as g with a signalling NaN quietened: compilers assume no signalling NaNs and fold
   the product away. */
static void relu_float_backward_range(const u32* __restrict g, const u8* __restrict mask,
                                       u32* __restrict out, i64 n)
{
    for (i64 i = 0; i < n; ++i) {
        u32 on = g[i] | ((g[i] & 0x7FFFFFFFu) > 0x7F800000u ? 0x00400000u : 0u);
        float zeroed;
        std::memcpy(&zeroed, &g[i], sizeof zeroed);
        zeroed *= 0.0f;
        u32 off;
        std::memcpy(&off, &zeroed, sizeof off);
        u32 keep = 0u - static_cast<u32>(mask[i] != 0);
        out[i] = (on & keep) | (off & ~keep);
    }
}

/* out[j] = fp16(y[j] + bias[j]) for j < n; returns whether one is inf or NaN. */
static bool add_to_half_scalar(const float* y, const float* bias, u16* out, i64 n)
{
    bool nonfinite = false;
    for (i64 j = 0; j < n; ++j) {
        float sum = y[j] + bias[j];
        u32 bits;
        std::memcpy(&bits, &sum, sizeof bits);
        u16 h = (u16)float_to_half_bits(bits);
        nonfinite |= (h & 0x7FFFu) >= 0x7C00u;
        out[j] = h;
    }
    return nonfinite;
}

static bool add_to_half(const float* y, const float* bias, u16* out, i64 n)
{
    i64 j = 0;
    bool nonfinite = false;
#ifdef MG_F16C
    const __m256 limit = _mm256_set1_ps(65504.0f);
    for (; j + 8 <= n; j += 8) {
        __m256 sum = _mm256_add_ps(_mm256_loadu_ps(y + j), _mm256_loadu_ps(bias + j));
        __m256 big = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), sum), limit, _CMP_NLE_UQ);
        if (_mm256_movemask_ps(big))  /* NaN, or may round to inf: the scalar code decides */
            nonfinite |= add_to_half_scalar(y + j, bias + j, out + j, 8);
        else
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j),
                             _mm256_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT));
    }
#endif
    return add_to_half_scalar(y + j, bias + j, out + j, n - j) || nonfinite;
}

/* Dense's fp16 forward epilogue on the fp32 product y (C-ordered rows x cols; y is not written):
       out[i, j] = fp16(y[i, j] + fp32(b[j]))
   i.e. `y += b.astype(float32); y.astype(float16)`. Returns nonzero when an output is inf or NaN. */
extern "C" i64 mg_add_bias_to_half(const float* __restrict y, const u16* __restrict b,
                                   u16* __restrict out, i64 rows, i64 cols)
{
    float bias[MG_COLUMN_BLOCK];
    i64 bad = 0;
    for (i64 j0 = 0; j0 < cols; j0 += MG_COLUMN_BLOCK) {
        i64 width = cols - j0 < MG_COLUMN_BLOCK ? cols - j0 : MG_COLUMN_BLOCK;
        half_to_float_range(b + j0, bias, width);
        for (i64 i = 0; i < rows; ++i)
            bad += add_to_half(y + i * cols + j0, bias, out + i * cols + j0, width);
    }
    return bad;
}

/* g32[j] = fp32(g[j]) and sums[j] = sums[j] + g32[j] for j < n. */
static void widen_and_add(const u16* g, float* g32, float* sums, i64 n)
{
    i64 j = 0;
#ifdef MG_F16C
    for (; j + 8 <= n; j += 8) {
        __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + j)));
        if (_mm256_movemask_ps(_mm256_cmp_ps(f, f, _CMP_UNORD_Q))) {  /* NaN: NumPy's payload */
            half_to_float_scalar(g + j, reinterpret_cast<u32*>(g32 + j), 8);
            f = _mm256_loadu_ps(g32 + j);
        } else {
            _mm256_storeu_ps(g32 + j, f);
        }
        _mm256_storeu_ps(sums + j, _mm256_add_ps(_mm256_loadu_ps(sums + j), f));
    }
#endif
    half_to_float_scalar(g + j, reinterpret_cast<u32*>(g32 + j), n - j);
    for (; j < n; ++j)
        sums[j] = sums[j] + g32[j];
}

/* Dense's fp16 backward for the bias, fused with widening the output gradient g (C-ordered
   rows x cols fp16):
       g32 = fp32(g);   gb[j] = fp16(sum over i of g32[i, j])
   The sums run as NumPy's `g32.sum(axis=0)` does for a C-ordered array with more than one
   column: from +0 (a column of -0 sums to +0), adding the rows in order, one fp32 add each.
   Returns nonzero when a value of gb is inf or NaN (g32 is right even then). */
extern "C" i64 mg_half_to_float_colsum(const u16* __restrict g, float* __restrict g32,
                                       u16* __restrict gb, i64 rows, i64 cols)
{
    float sums[MG_COLUMN_BLOCK];
    i64 bad = 0;
    for (i64 j0 = 0; j0 < cols; j0 += MG_COLUMN_BLOCK) {
        i64 width = cols - j0 < MG_COLUMN_BLOCK ? cols - j0 : MG_COLUMN_BLOCK;
        for (i64 j = 0; j < width; ++j)
            sums[j] = 0.0f;
        for (i64 i = 0; i < rows; ++i)
            widen_and_add(g + i * cols + j0, g32 + i * cols + j0, sums, width);
        float_to_half_range(sums, gb + j0, width);
        bad += any_nonfinite_half(gb + j0, width);
    }
    return bad;
}

/* Two fp16 arrays added in fp32 and rounded once, what
       `(a.astype(float32) + b.astype(float32)).astype(float16)` gives:
       out[i] = fp16(fp32(a[i]) + fp32(b[i]))
   (fp32's 24 significand bits >= 2*11 + 2: the double rounding gives the correctly rounded
   fp16 sum; of two NaNs, the add instruction's operand order picks the payload). Returns how
   many blocks hold an inf or NaN sum: the caller then adds through NumPy, for its warnings. */
static i64 add_halves_range(const u16* __restrict a, const u16* __restrict b,
                            u16* __restrict out, i64 n)
{
    float wa[MG_COLUMN_BLOCK], wb[MG_COLUMN_BLOCK];
    i64 bad = 0;
    for (i64 i = 0; i < n; i += MG_COLUMN_BLOCK) {
        const i64 m = n - i < MG_COLUMN_BLOCK ? n - i : MG_COLUMN_BLOCK;
        half_to_float_range(a + i, wa, m);
        half_to_float_range(b + i, wb, m);
        for (i64 k = 0; k < m; ++k)
            wa[k] = wa[k] + wb[k];
        float_to_half_range(wa, out + i, m);
        bad += any_nonfinite_half(out + i, m);
    }
    return bad;
}

/* ---- The passes above on the pass threads ------------------------------------------------------

   Each exported conversion and ReLU pass splits its n elements into contiguous ranges, one per
   pass thread (host_threads.h); every element's result is the same, and the counts the ranges
   return are added. */

extern "C" void mg_half_to_float(const u16* src, float* dst, i64 n)
{
    elementwise(n, half_to_float_range, src, dst);
}

extern "C" i64 mg_float_to_half(const float* src, u16* dst, i64 n)
{
    return elementwise(n, float_to_half_range, src, dst);
}

extern "C" void mg_bf16_to_float(const u16* __restrict src, float* __restrict dst, i64 n)
{
    elementwise(n, bf16_to_float_range, src, dst);
}

extern "C" i64 mg_float_to_bf16(const float* __restrict src, u16* __restrict dst, i64 n)
{
    return elementwise(n, float_to_bf16_range, src, dst);
}

extern "C" void mg_relu_half(const u16* __restrict x, u16* __restrict out, u8* __restrict mask,
                             i64 n)
{
    elementwise(n, relu_half_range, x, out, mask);
}

extern "C" void mg_relu_half_backward(const u16* __restrict g, const u8* __restrict mask,
                                      u16* __restrict out, i64 n)
{
    elementwise(n, relu_half_backward_range, g, mask, out);
}

extern "C" void mg_relu_float(const u32* __restrict x, u32* __restrict out, u8* __restrict mask,
                              i64 n)
{
    elementwise(n, relu_float_range, x, out, mask);
}

extern "C" void mg_relu_float_backward(const u32* __restrict g, const u8* __restrict mask,
                                       u32* __restrict out, i64 n)
{
    elementwise(n, relu_float_backward_range, g, mask, out);
}

extern "C" i64 mg_add_halves(const u16* __restrict a, const u16* __restrict b,
                             u16* __restrict out, i64 n)
{
    return elementwise(n, add_halves_range, a, b, out);
}
