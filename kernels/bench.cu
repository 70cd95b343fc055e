/* Kernels of the benchmark tool (minigrad.bench): they time and bound the float-status
   kernels, and no training step runs them.

   mg_hold_stream  nvbench's "blocking kernel". One thread, launched before the timed calls,
                   keeps the stream busy until the host sets *release; the start event queued
                   behind it fires only once every timed call is queued, so the host's enqueue
                   gaps stay out of the GPU time. release and timed_out point to pinned host
                   memory (a kernel reads it at the host's address under unified addressing).
                   After timeout_ns it gives up and sets *timed_out: a timed call that waits for
                   the device (a synchronous copy, say) costs one flagged sample, not a deadlock.

   mg_read_xor     The read-only ceiling: about the least work a kernel can do and still read
                   every byte once. It XORs all 32-bit words of n_vecs 16-byte vectors into
                   out[0] (which the host zeroes): 16-byte read-only loads, four in flight per
                   thread, a grid-stride loop, one atomic per block. Blocks of MG_READ_THREADS.

   Like float_status.cu, this source needs no header: the vector types, __ldg, the warp
   shuffles, atomicXor and __nanosleep are NVRTC built-ins, and nvcc includes the runtime
   header itself. */

typedef unsigned int u32;
typedef unsigned long long u64;

#define MG_READ_THREADS 256

__device__ __forceinline__ u64 mg_globaltimer()
{
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void mg_hold_stream(const volatile int* release, volatile int* timed_out,
                                          u64 timeout_ns)
{
    const u64 start = mg_globaltimer();
    while (*release == 0) {
        if (mg_globaltimer() - start > timeout_ns) {
            *timed_out = 1;
            return;
        }
        __nanosleep(1000);
    }
}

__device__ __forceinline__ u32 mg_xor_words(const uint4& v)
{
    return v.x ^ v.y ^ v.z ^ v.w;
}

extern "C" __global__ void mg_read_xor(const uint4* p, u64 n_vecs, u32* out)
{
    __shared__ u32 warp_xor[MG_READ_THREADS / 32];
    const u64 stride = (u64)gridDim.x * blockDim.x;
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u32 acc = 0;
    for (; i + 3 * stride < n_vecs; i += 4 * stride) {
        const uint4 a = __ldg(p + i), b = __ldg(p + i + stride);
        const uint4 c = __ldg(p + i + 2 * stride), d = __ldg(p + i + 3 * stride);
        acc ^= mg_xor_words(a) ^ mg_xor_words(b) ^ mg_xor_words(c) ^ mg_xor_words(d);
    }
    for (; i < n_vecs; i += stride)
        acc ^= mg_xor_words(__ldg(p + i));
    for (int offset = 16; offset > 0; offset >>= 1)
        acc ^= __shfl_xor_sync(0xFFFFFFFFu, acc, offset);
    if ((threadIdx.x & 31) == 0)
        warp_xor[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        u32 block = 0;
        for (u32 w = 0; w < blockDim.x / 32; ++w)
            block ^= warp_xor[w];
        atomicXor(out, block);
    }
}
