/* Float status kernels: the software version of an overflow status register.

   A check scans fp16 or fp32 arrays and, if any element is +-inf or NaN, stores 1.0f into
   status[0]. It never stores anything else, so the flag is sticky: only the host clears it.
   The fused variant also multiplies every element by inv_scale in the same pass (the flag is
   computed from the values before the multiplication), in place. The widening variant reads
   fp16 and writes fp32(x) * inv_scale to separate fp32 arrays: one pass where a conversion
   followed by the fp32 kernel would take two (fp16 gradients are unscaled into fp32, since
   their true values are often below fp16's range).

   Work description (one launch covers many arrays of one dtype):
     table[3*t + 0]  address of array t (aligned to its element size)
     table[3*t + 1]  number of elements of array t (> 0)
     table[3*t + 2]  index of the first chunk of array t; chunks are `chunk` elements long
     table[3*n_arrays + t]  (widening kernel only) address of the fp32 output of array t, of
                            the same length, aligned to 4 bytes
   Blocks take chunks in a grid-stride loop and threads stride through a chunk, so the same
   code runs on a GPU and, through host_shim.h (one block per core, blockDim.x == 1 at compile
   time), as plain vectorisable loops on a CPU.

   The test works on raw bits, so no <cuda_fp16.h> is needed, nor any other header: under
   NVRTC (CuPy's compiler) uint4, __ldg, __any_sync and the bit casts are built in, nvcc
   includes the runtime header itself, and host_shim.h defines them for the CPU. A value is
   non-finite iff its exponent bits are all ones. Adding one to an all-ones exponent carries
   into the lane's top bit, so `acc |= (w & MASK) + CARRY` tests both fp16 halves (or the fp32)
   of a 32-bit word without a compare, and one test of `acc & TOP` at the end tells whether any
   lane overflowed.

   What differs between targets is a handful of primitives: the GPU ones are below, the CPU
   ones in host_shim.h. */

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#ifndef MG_HOST_SHIM
/* Conversions and the product through PTX: round-to-nearest-even with subnormals kept,
   whatever -ftz setting the module is compiled with. */
__device__ __forceinline__ float mg_half_to_float(u32 h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((u16)h));
    return f;
}
__device__ __forceinline__ u32 mg_float_to_half(float f)
{
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ float mg_mul(float a, float b)
{
    float c;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(c) : "f"(a), "f"(b));
    return c;
}
#endif

/* Unscale one 32-bit word: two fp16 values, or one fp32. */
__device__ __forceinline__ u32 unscale_half2(u32 w, float inv_scale)
{
    u32 lo = mg_float_to_half(mg_mul(mg_half_to_float(w & 0xFFFFu), inv_scale));
    u32 hi = mg_float_to_half(mg_mul(mg_half_to_float(w >> 16), inv_scale));
    return lo | (hi << 16);
}
__device__ __forceinline__ u32 unscale_float(u32 w, float inv_scale)
{
    return __float_as_uint(mg_mul(__uint_as_float(w), inv_scale));
}

#ifndef MG_HOST_SHIM
/* On the GPU a vector is 16 bytes (one 128-bit load per thread) and its four words are four
   registers, so the vector steps go lane by lane. The flag accumulator is such a vector too. */
typedef uint4 mg_vec;
/* Loads and stores of whole vectors, made global-memory accesses: the arrays' addresses come
   from the table, so the compiler cannot tell their address space and would use generic ones.
   (The check-only kernels load through the read-only cache instead, __ldg.) */
__device__ __forceinline__ mg_vec mg_load(const mg_vec* p)
{
    return __ldca(p);
}
__device__ __forceinline__ void mg_store(mg_vec* p, const mg_vec& v)
{
    __stwb(p, v);
}
__device__ __forceinline__ mg_vec mg_fold(mg_vec acc, const mg_vec& v, u32 mask, u32 carry)
{
    acc.x |= (v.x & mask) + carry;
    acc.y |= (v.y & mask) + carry;
    acc.z |= (v.z & mask) + carry;
    acc.w |= (v.w & mask) + carry;
    return acc;
}
__device__ __forceinline__ mg_vec mg_fold_word(mg_vec acc, u32 w, u32 mask, u32 carry)
{
    acc.x |= (w & mask) + carry;
    return acc;
}
__device__ __forceinline__ u32 mg_lanes_or(const mg_vec& acc)
{
    return acc.x | acc.y | acc.z | acc.w;
}
template <u32 (*UNSCALE_WORD)(u32, float)>
__device__ __forceinline__ void unscale_words(mg_vec& v, float inv_scale)
{
    v.x = UNSCALE_WORD(v.x, inv_scale);
    v.y = UNSCALE_WORD(v.y, inv_scale);
    v.z = UNSCALE_WORD(v.z, inv_scale);
    v.w = UNSCALE_WORD(v.w, inv_scale);
}
__device__ __forceinline__ void mg_unscale_half_vec(mg_vec& v, float inv_scale)
{
    unscale_words<unscale_half2>(v, inv_scale);
}
__device__ __forceinline__ void mg_unscale_float_vec(mg_vec& v, float inv_scale)
{
    unscale_words<unscale_float>(v, inv_scale);
}
/* The eight fp16 values of a vector as fp32 times inv_scale, stored at out: two 16-byte stores
   where out is 16-byte aligned (ALIGNED), else eight 4-byte stores. */
template <bool ALIGNED>
__device__ __forceinline__ void mg_widen_half_vec(float* out, const mg_vec& v, float inv_scale)
{
    const u32 w[4] = {v.x, v.y, v.z, v.w};
    float f[8];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        f[2 * k] = mg_mul(mg_half_to_float(w[k] & 0xFFFFu), inv_scale);
        f[2 * k + 1] = mg_mul(mg_half_to_float(w[k] >> 16), inv_scale);
    }
    if (ALIGNED) {
        const mg_vec lo = {__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                           __float_as_uint(f[3])};
        const mg_vec hi = {__float_as_uint(f[4]), __float_as_uint(f[5]), __float_as_uint(f[6]),
                           __float_as_uint(f[7])};
        mg_store((mg_vec*)out, lo);
        mg_store((mg_vec*)out + 1, hi);
    } else {
#pragma unroll
        for (int k = 0; k < 8; ++k)
            __stwb(out + k, f[k]);
    }
}
#define MG_ILP 4 /* independent vector loads in flight per thread */
#endif

struct Fp16 {
    typedef u16 elem;
    static constexpr u32 MASK = 0x7C007C00u, CARRY = 0x04000400u, TOP = 0x80008000u;
    __device__ static __forceinline__ u32 unscale(u32 w, float s) { return unscale_half2(w, s); }
    __device__ static __forceinline__ void unscale_vec(mg_vec& v, float s) { mg_unscale_half_vec(v, s); }
};

struct Fp32 {
    typedef u32 elem;
    static constexpr u32 MASK = 0x7F800000u, CARRY = 0x00800000u, TOP = 0x80000000u;
    __device__ static __forceinline__ u32 unscale(u32 w, float s) { return unscale_float(w, s); }
    __device__ static __forceinline__ void unscale_vec(mg_vec& v, float s) { mg_unscale_float_vec(v, s); }
};

/* How n elements of size `elem` starting at p split around vector boundaries: `head` scalar
   elements up to the first boundary, `vecs` whole vectors, then scalar elements from `tail`. */
struct mg_span {
    u64 head, vecs, tail;
};
__device__ __forceinline__ mg_span aligned_span(const void* p, u64 n, u64 elem)
{
    const u64 bytes = sizeof(mg_vec);
    mg_span s;
    s.head = ((bytes - ((u64)p & (bytes - 1))) & (bytes - 1)) / elem;
    if (s.head > n)
        s.head = n;
    s.vecs = (n - s.head) / (bytes / elem);
    s.tail = s.head + s.vecs * (bytes / elem);
    return s;
}

/* Elements [0, n) of one chunk, split by `s`. Vector loads need addresses aligned to the vector
   size, so the elements before the first boundary and after the last one go one by one
   (visit.elem(acc, i), i counted from the chunk's start); the vectors go in thread-strided
   groups: visit.vecs<COUNT>(acc, i, stride) takes vectors i, i + stride, ... (COUNT of them,
   counted from the first whole vector). MG_ILP vectors per group while whole groups remain:
   their loads are all issued before any use, so each thread keeps MG_ILP vectors in flight,
   which is what lets a streaming kernel approach memory bandwidth. */
template <class Visit>
__device__ __forceinline__ mg_vec walk(mg_vec acc, const mg_span& s, u64 n, const Visit& visit)
{
    for (u64 i = threadIdx.x; i < s.head; i += blockDim.x)
        acc = visit.elem(acc, i);
    u64 i = threadIdx.x;
    for (; i + (MG_ILP - 1) * blockDim.x < s.vecs; i += MG_ILP * blockDim.x)
        acc = visit.template vecs<MG_ILP>(acc, i, blockDim.x);
    for (; i < s.vecs; i += blockDim.x)
        acc = visit.template vecs<1>(acc, i, blockDim.x);
    for (u64 j = s.tail + threadIdx.x; j < n; j += blockDim.x)
        acc = visit.elem(acc, j);
    return acc;
}

/* The check, and with UNSCALE the unscale in place, of a chunk p whose first whole vector is
   v. The check-only kernel reads through the read-only cache. An element alone is a word whose
   other fp16 lane is zero (and stays zero when unscaled). */
template <class F, bool UNSCALE>
struct InPlace {
    typename F::elem* p;
    mg_vec* v;
    float inv_scale;

    __device__ __forceinline__ mg_vec elem(mg_vec acc, u64 i) const
    {
        const u32 w = p[i];
        acc = mg_fold_word(acc, w, F::MASK, F::CARRY);
        if (UNSCALE)
            p[i] = (typename F::elem)F::unscale(w, inv_scale);
        return acc;
    }
    template <int COUNT>
    __device__ __forceinline__ mg_vec vecs(mg_vec acc, u64 i, u64 stride) const
    {
        mg_vec r[COUNT];
#pragma unroll
        for (int k = 0; k < COUNT; ++k)
            r[k] = UNSCALE ? mg_load(v + i + k * stride) : __ldg(v + i + k * stride);
#pragma unroll
        for (int k = 0; k < COUNT; ++k) {
            acc = mg_fold(acc, r[k], F::MASK, F::CARRY);
            if (UNSCALE) {
                F::unscale_vec(r[k], inv_scale);
                mg_store(v + i + k * stride, r[k]);
            }
        }
        return acc;
    }
};

/* The check of a chunk p of fp16 values, written widened and unscaled to out (its fp32
   output); v is p's first whole vector and vout the output of its first value. ALIGNED: vout is
   16-byte aligned, so each vector's eight floats go out as two 16-byte stores. */
template <bool ALIGNED>
struct Widen {
    const u16* p;
    float* out;
    const mg_vec* v;
    float* vout;
    float inv_scale;

    __device__ __forceinline__ mg_vec elem(mg_vec acc, u64 i) const
    {
        acc = mg_fold_word(acc, p[i], Fp16::MASK, Fp16::CARRY);
        out[i] = mg_mul(mg_half_to_float(p[i]), inv_scale);
        return acc;
    }
    template <int COUNT>
    __device__ __forceinline__ mg_vec vecs(mg_vec acc, u64 i, u64 stride) const
    {
        const u64 per_vec = sizeof(mg_vec) / sizeof(u16);
        mg_vec r[COUNT];
#pragma unroll
        for (int k = 0; k < COUNT; ++k)
            r[k] = __ldg(v + i + k * stride);
#pragma unroll
        for (int k = 0; k < COUNT; ++k) {
            acc = mg_fold(acc, r[k], Fp16::MASK, Fp16::CARRY);
            mg_widen_half_vec<ALIGNED>(vout + (i + k * stride) * per_vec, r[k], inv_scale);
        }
        return acc;
    }
};

/* Elements [0, n) of one chunk p, checked and with UNSCALE unscaled in place. */
template <class F, bool UNSCALE>
__device__ mg_vec walk_chunk(mg_vec acc, typename F::elem* p, u64 n, float inv_scale)
{
    const mg_span s = aligned_span(p, n, sizeof(typename F::elem));
    const InPlace<F, UNSCALE> visit = {p, (mg_vec*)(p + s.head), inv_scale};
    return walk(acc, s, n, visit);
}

/* Elements [0, n) of one chunk of fp16 values p, checked and written widened and unscaled to
   out (4-byte aligned). Vectors are aligned on the input; where that puts the output of each
   vector on a 16-byte boundary too (always for fresh arrays: their addresses are multiples of
   256), the output goes out in 16-byte stores. */
__device__ mg_vec widen_chunk(mg_vec acc, const u16* p, float* out, u64 n, float inv_scale)
{
    const mg_span s = aligned_span(p, n, sizeof(u16));
    const mg_vec* v = (const mg_vec*)(p + s.head);
    float* vout = out + s.head;
    if (((u64)vout & 15) == 0) {
        const Widen<true> visit = {p, out, v, vout, inv_scale};
        return walk(acc, s, n, visit);
    }
    const Widen<false> visit = {p, out, v, vout, inv_scale};
    return walk(acc, s, n, visit);
}

/* The array holding `chunk`: the last t with table[3t+2] <= chunk (binary search). */
__device__ __forceinline__ int array_of_chunk(const u64* table, int n_arrays, u64 chunk)
{
    int lo = 0, hi = n_arrays - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (table[3 * mid + 2] <= chunk)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

template <class F, bool UNSCALE, bool WIDEN>
__device__ void float_status(const u64* table, int n_arrays, u64 n_chunks, u64 chunk,
                             float inv_scale, float* status)
{
    mg_vec acc = {};
    for (u64 c = blockIdx.x; c < n_chunks; c += gridDim.x) {
        int t = array_of_chunk(table, n_arrays, c);
        u64 first = (c - table[3 * t + 2]) * chunk;
        u64 n = table[3 * t + 1] - first;
        if (n > chunk)
            n = chunk;
        if (WIDEN)
            acc = widen_chunk(acc, (const u16*)table[3 * t] + first,
                              (float*)table[3 * n_arrays + t] + first, n, inv_scale);
        else
            acc = walk_chunk<F, UNSCALE>(acc, (typename F::elem*)table[3 * t] + first, n, inv_scale);
    }
    /* Every writer stores the same value, so plain stores race harmlessly: no atomics, and
       at most one store per warp. */
    if (__any_sync(0xFFFFFFFFu, (mg_lanes_or(acc) & F::TOP) != 0) && (threadIdx.x & 31) == 0)
        status[0] = 1.0f;
}

#define MG_STATUS_KERNEL(name, F, UNSCALE, WIDEN)                                               \
    extern "C" __global__ void name(const u64* table, int n_arrays, u64 n_chunks, u64 chunk,    \
                                    float inv_scale, float* status)                             \
    {                                                                                           \
        float_status<F, UNSCALE, WIDEN>(table, n_arrays, n_chunks, chunk, inv_scale, status);   \
    }

MG_STATUS_KERNEL(check_fp16, Fp16, false, false)
MG_STATUS_KERNEL(check_fp32, Fp32, false, false)
MG_STATUS_KERNEL(check_unscale_fp16, Fp16, true, false)
MG_STATUS_KERNEL(check_unscale_fp32, Fp32, true, false)
MG_STATUS_KERNEL(check_unscale_fp16_to_fp32, Fp16, false, true)
