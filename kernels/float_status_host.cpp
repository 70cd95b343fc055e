/* The float status kernels of float_status.cu built for the CPU through host_shim.h.
   launch_<kernel>(grid, kernel arguments...) runs the kernel as `grid` blocks, like a CUDA
   launch; host_threads() is the largest useful grid. */
#include "host_shim.h"
#include "float_status.cu"

#define MG_HOST_LAUNCHER(kernel)                                                                \
    extern "C" void launch_##kernel(u64 grid, const u64* table, int n_arrays, u64 n_chunks,    \
                                    u64 chunk, float inv_scale, float* status)                  \
    {                                                                                           \
        mg_launch(grid, kernel, table, n_arrays, n_chunks, chunk, inv_scale, status);           \
    }

MG_HOST_LAUNCHER(check_fp16)
MG_HOST_LAUNCHER(check_fp32)
MG_HOST_LAUNCHER(check_unscale_fp16)
MG_HOST_LAUNCHER(check_unscale_fp32)
MG_HOST_LAUNCHER(check_unscale_fp16_to_fp32)

extern "C" int host_threads(void) { return mg_host_threads(); }
