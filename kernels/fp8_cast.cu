/* FP8 casts that count what they clip: the saturation counter beside the sticky inf/NaN flag.

   fp8_cast_e4m3 / fp8_cast_e5m2 write out[i] = fp8(x[i] * scale), rounded to nearest even and
   saturated to +-max (448 for E4M3, 57344 for E5M2; +-inf saturate too), and add to
   saturated[0] the number of elements with |x[i] * scale| > max. NaN is not counted (the float
   status flag reports it) and becomes the canonical NaN byte 0x7F, as CUDA's conversion gives
   it (ml_dtypes keeps the sign of a NaN, and E5M2's quiet NaN there is 0x7E). Like the status
   flag, the counter only grows: the host resets it.

   On the GPU the conversion is cuda_fp8.h's __nv_cvt_float_to_fp8 with __NV_SATFINITE (one
   cvt.rn.satfinite instruction on sm_89 and newer). On the CPU (host_shim.h) it is
   mg_fp8_satfinite below, written out in float arithmetic: the spacing q of x's binade is a
   power of two, so |x| / q is exact and rintf rounds it to nearest even. Each thread counts its
   own clips and adds them to the counter once, so a launch costs at most one atomic per thread
   that clipped anything. The bytes are little-endian in a word, as on every GPU and x86/ARM
   host. */

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;

#ifndef MG_HOST_SHIM
#include <cuda_fp8.h>
template <bool E5M2>
__device__ __forceinline__ u32 mg_fp8_satfinite(float v)
{
    return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, E5M2 ? __NV_E5M2 : __NV_E4M3);
}
#else
#include <math.h>
template <bool E5M2>
static inline u32 mg_fp8_satfinite(float v)
{
    const int man = E5M2 ? 2 : 3, min_exp = E5M2 ? -14 : -6, bias = E5M2 ? 15 : 7;
    const float max = E5M2 ? 57344.0f : 448.0f;
    const u32 max_byte = E5M2 ? 0x7Bu : 0x7Eu;
    const u32 sign = (__float_as_uint(v) >> 24) & 0x80u;
    const float a = fabsf(v);
    if (a != a)
        return 0x7Fu;
    if (!(a <= max))
        return sign | max_byte;
    int e;
    frexpf(a, &e); /* a = f * 2^e, f in [0.5, 1): the binade's exponent is e - 1 */
    const int exp = e - 1 > min_exp ? e - 1 : min_exp;
    const float r = rintf(a / ldexpf(1.0f, exp - man)); /* units of the spacing */
    if (ldexpf(r, exp - man) > max)
        return sign | max_byte;
    if (r >= (float)(2 << man)) /* rounded up into the next binade */
        return sign | ((u32)(exp + 1 + bias) << man);
    if (r < (float)(1 << man)) /* subnormal (exp == min_exp) or zero */
        return sign | (u32)r;
    return sign | ((u32)(exp + bias) << man) | ((u32)r - (1u << man));
}
struct uint4 {
    u32 x, y, z, w;
};
static inline void atomicAdd(u32* counter, u32 value)
{
    __atomic_fetch_add(counter, value, __ATOMIC_RELAXED);
}
#endif

template <bool E5M2>
__device__ __forceinline__ u32 fp8_cast_one(float v, u32& clipped)
{
    clipped += (u32)(fabsf(v) > (E5M2 ? 57344.0f : 448.0f));
    return mg_fp8_satfinite<E5M2>(v);
}

/* Four values per step: one 16-byte read-only load of x, one 4-byte store of their bytes (x is
   16-byte aligned, out 4-byte aligned: the caller makes sure); then the n % 4 left over. */
template <bool E5M2>
__device__ __forceinline__ void fp8_cast(const float* x, u8* out, u64 n, float scale,
                                         u32* saturated)
{
    u32 clipped = 0;
    const u64 start = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    const u64 n4 = n / 4;
    for (u64 i = start; i < n4; i += stride) {
        const uint4 w = __ldg(reinterpret_cast<const uint4*>(x) + i);
        const u32 b0 = fp8_cast_one<E5M2>(__uint_as_float(w.x) * scale, clipped);
        const u32 b1 = fp8_cast_one<E5M2>(__uint_as_float(w.y) * scale, clipped);
        const u32 b2 = fp8_cast_one<E5M2>(__uint_as_float(w.z) * scale, clipped);
        const u32 b3 = fp8_cast_one<E5M2>(__uint_as_float(w.w) * scale, clipped);
        reinterpret_cast<u32*>(out)[i] = b0 | (b1 << 8) | (b2 << 16) | (b3 << 24);
    }
    for (u64 i = 4 * n4 + start; i < n; i += stride)
        out[i] = (u8)fp8_cast_one<E5M2>(x[i] * scale, clipped);
    if (clipped)
        atomicAdd(saturated, clipped);
}

extern "C" __global__ void fp8_cast_e4m3(const float* x, u8* out, u64 n, float scale,
                                         u32* saturated)
{
    fp8_cast<false>(x, out, n, scale, saturated);
}

extern "C" __global__ void fp8_cast_e5m2(const float* x, u8* out, u64 n, float scale,
                                         u32* saturated)
{
    fp8_cast<true>(x, out, n, scale, saturated);
}
