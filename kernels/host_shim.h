/* Host shim: lets a C++ compiler (GCC or Clang) build CUDA kernel sources for the CPU.

   A "launch" runs one block per host thread (OpenMP when available). A block has a single
   thread: threadIdx.x == 0 and blockDim.x == 1 are compile-time constants, so a kernel's
   thread-strided loops become unit-stride loops. blockIdx and gridDim are per-host-thread
   variables set by mg_launch. Below them are the CPU versions of float_status.cu's target
   primitives: a vector is 64 bytes here (one AVX-512 register, or several narrower ones),
   written with the GCC/Clang vector extension so that values stay in SIMD registers.
   Include this before the .cu file. */
#ifndef MG_HOST_SHIM_H
#define MG_HOST_SHIM_H

#include <cstring>

#include "host_threads.h"

#define MG_HOST_SHIM 1
#define MG_ILP 4
#define __global__
#define __device__
#define __forceinline__ inline __attribute__((always_inline))

struct mg_const_index {
    static constexpr unsigned x = 0, y = 0, z = 0;
};
struct mg_const_dim {
    static constexpr unsigned x = 1, y = 1, z = 1;
};
struct mg_dim3 {
    unsigned long long x, y, z;
};
static thread_local mg_dim3 blockIdx;
static thread_local mg_dim3 gridDim;

#ifdef MG_EMULATE_THREADS
/* Test builds (-DMG_EMULATE_THREADS=64): blocks of that many threads, run one after another,
   highest first, so that the GPU's thread-strided loops and warp vote also run on the CPU. */
struct mg_emulated_dim {
    static constexpr unsigned x = MG_EMULATE_THREADS, y = 1, z = 1;
};
static constexpr mg_emulated_dim blockDim{};
static thread_local mg_dim3 threadIdx;
static thread_local bool mg_warp_votes[(MG_EMULATE_THREADS + 31) / 32];
static inline bool __any_sync(unsigned, bool predicate)
{
    bool& vote = mg_warp_votes[threadIdx.x / 32];
    vote = vote || predicate;
    return vote; /* lane 0 runs last in its warp, so it sees every lane's vote */
}
template <class Thread>
static inline void mg_run_block_threads(Thread thread)
{
    std::memset(mg_warp_votes, 0, sizeof mg_warp_votes);
    for (long long t = MG_EMULATE_THREADS - 1; t >= 0; --t) {
        threadIdx.x = (unsigned long long)t;
        thread();
    }
}
#else
static constexpr mg_const_index threadIdx{};
static constexpr mg_const_dim blockDim{};
/* A warp of one thread. */
static inline bool __any_sync(unsigned, bool predicate) { return predicate; }
template <class Thread>
static inline void mg_run_block_threads(Thread thread) { thread(); }
#endif

template <class T>
static inline T __ldg(const T* p) { return *p; }

static inline unsigned int __float_as_uint(float f)
{
    unsigned int u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

static inline float __uint_as_float(unsigned int u)
{
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

/* fp16 <-> fp32 through the compiler's _Float16, rounding to nearest even like the GPU's
   cvt.rn and NumPy's astype. No -ffast-math: products keep IEEE semantics and subnormals. */
static inline float mg_half_to_float(unsigned int h)
{
    return (float)__builtin_bit_cast(_Float16, (unsigned short)h);
}

static inline unsigned int mg_float_to_half(float f)
{
    return __builtin_bit_cast(unsigned short, (_Float16)f);
}

static inline float mg_mul(float a, float b) { return a * b; }

typedef unsigned int mg_vec __attribute__((vector_size(64)));
typedef float mg_f32x16 __attribute__((vector_size(64)));

static inline mg_vec mg_load(const mg_vec* p) { return *p; }

static inline void mg_store(mg_vec* p, const mg_vec& v) { *p = v; }

static inline mg_vec mg_fold(mg_vec acc, const mg_vec& v, unsigned int mask, unsigned int carry)
{
    return acc | ((v & mask) + carry);
}

static inline mg_vec mg_fold_word(mg_vec acc, unsigned int w, unsigned int mask, unsigned int carry)
{
    mg_vec word = {};
    word[0] = w;
    return mg_fold(acc, word, mask, carry);
}

static inline unsigned int mg_lanes_or(const mg_vec& acc)
{
    unsigned int any = 0;
    for (int i = 0; i < 16; ++i)
        any |= acc[i];
    return any;
}

static inline void mg_unscale_float_vec(mg_vec& v, float inv_scale)
{
    v = (mg_vec)((mg_f32x16)v * inv_scale);
}

/* fp16 vectors: widen to fp32, multiply, narrow with nearest-even (or store the fp32 values,
   mg_widen_half_vec, whose ALIGNED says whether out is 16-byte aligned: the CPU stores unaligned
   vectors at the same speed, so it does not matter here), in the widest SIMD the target has;
   compilers do not vectorise the _Float16 conversions of the lane-by-lane form. */
#if defined(__AVX512F__)
#include <immintrin.h>
template <bool ALIGNED>
static inline void mg_widen_half_vec(float* out, const mg_vec& v, float inv_scale)
{
    const __m512 s = _mm512_set1_ps(inv_scale);
    __m512i x = (__m512i)v;
    _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(x)), s));
    _mm512_storeu_ps(out + 16, _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(x, 1)), s));
}
static inline __m256i mg_unscale_half16(__m256i h, __m512 s)
{
    return _mm512_cvtps_ph(_mm512_mul_ps(_mm512_cvtph_ps(h), s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline void mg_unscale_half_vec(mg_vec& v, float inv_scale)
{
    const __m512 s = _mm512_set1_ps(inv_scale);
    __m512i x = (__m512i)v;
    __m256i lo = mg_unscale_half16(_mm512_castsi512_si256(x), s);
    __m256i hi = mg_unscale_half16(_mm512_extracti64x4_epi64(x, 1), s);
    v = (mg_vec)_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
#elif defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
template <bool ALIGNED>
static inline void mg_widen_half_vec(float* out, const mg_vec& v, float inv_scale)
{
    __m128i h[4];
    std::memcpy(h, &v, sizeof h);
    const __m256 s = _mm256_set1_ps(inv_scale);
    for (int k = 0; k < 4; ++k)
        _mm256_storeu_ps(out + 8 * k, _mm256_mul_ps(_mm256_cvtph_ps(h[k]), s));
}
static inline void mg_unscale_half_vec(mg_vec& v, float inv_scale)
{
    __m128i h[4];
    std::memcpy(h, &v, sizeof h);
    const __m256 s = _mm256_set1_ps(inv_scale);
    for (__m128i& x : h)
        x = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_cvtph_ps(x), s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    std::memcpy(&v, h, sizeof h);
}
#else
template <bool ALIGNED>
static inline void mg_widen_half_vec(float* out, const mg_vec& v, float inv_scale)
{
    unsigned short h[32];
    std::memcpy(h, &v, sizeof h);
    for (int k = 0; k < 32; ++k)
        out[k] = mg_half_to_float(h[k]) * inv_scale;
}
static inline void mg_unscale_half_vec(mg_vec& v, float inv_scale)
{
    unsigned short h[32];
    std::memcpy(h, &v, sizeof h);
    for (unsigned short& x : h)
        x = (unsigned short)mg_float_to_half(mg_half_to_float(x) * inv_scale);
    std::memcpy(&v, h, sizeof h);
}
#endif

/* Host threads a launch uses: the host passes' count (host_threads.h: OpenMP's while OpenBLAS's
   products run on the same team, else one). */
static inline int mg_host_threads() { return mg_pass_threads(); }

/* Run `kernel(args...)` as `grid` blocks, one per host thread (the caller keeps grid at most
   mg_host_threads(), and 1 for work too small to repay waking other threads). */
template <class Kernel, class... Args>
static void mg_launch(unsigned long long grid, Kernel kernel, Args... args)
{
#pragma omp parallel for num_threads(grid) schedule(static, 1) if (grid > 1)
    for (long long b = 0; b < (long long)grid; ++b) {
        blockIdx.x = (unsigned long long)b;
        gridDim.x = grid;
        mg_run_block_threads([&]() { kernel(args...); });
    }
}

#endif
