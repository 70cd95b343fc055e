/* The FP8 cast kernels of fp8_cast.cu built for the CPU through host_shim.h.
   launch_fp8_cast_<format>(grid, kernel arguments...) runs the kernel as `grid` blocks. */
#include "host_shim.h"
#include "fp8_cast.cu"

extern "C" void launch_fp8_cast_e4m3(u64 grid, const float* x, u8* out, u64 n, float scale,
                                     u32* saturated)
{
    mg_launch(grid, fp8_cast_e4m3, x, out, n, scale, saturated);
}

extern "C" void launch_fp8_cast_e5m2(u64 grid, const float* x, u8* out, u64 n, float scale,
                                     u32* saturated)
{
    mg_launch(grid, fp8_cast_e5m2, x, out, n, scale, saturated);
}
