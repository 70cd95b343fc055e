/* fp16 <-> fp32 conversion for the CPU, bit for bit what NumPy's astype gives, but vectorised.

   NumPy converts one element at a time in software (about 1-2 ns an element); the F16C
   instructions (vcvtph2ps / vcvtps2ph, x86 since 2012) convert 8 at a time. Results agree with
   NumPy everywhere (round to nearest even, subnormals kept, overflow to inf) except for NaNs:
   the hardware quietens a signalling NaN, NumPy keeps its payload as it is. Blocks that hold a
   NaN are therefore redone with the scalar code below, which is NumPy's rule. Without F16C
   (other CPUs, other compilers) the scalar code does everything.

   mg_half_to_float(src, dst, n) and mg_float_to_half(src, dst, n) read and write dense
   arrays of n elements. mg_float_to_half returns how many finite inputs became +-inf, so the
   caller can let NumPy raise its "overflow encountered in cast" warning. mg_convert_vectorized()
   says whether the F16C path was compiled in (the scalar code alone is slower than NumPy's). */
#include <cstdint>
#include <cstring>
#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#define MG_F16C 1
#endif

typedef std::uint16_t u16;
typedef std::uint32_t u32;
typedef std::int64_t i64;

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

extern "C" void mg_half_to_float(const u16* src, float* dst, i64 n)
{
    u32* out = reinterpret_cast<u32*>(dst);
    i64 i = 0;
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

extern "C" i64 mg_float_to_half(const float* src, u16* dst, i64 n)
{
    const u32* in = reinterpret_cast<const u32*>(src);
    i64 i = 0, overflows = 0;
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
