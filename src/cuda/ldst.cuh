/* ldst.cuh - the 16-byte row loads and stores of the copy kernels (CUDA device code only; included by .cu
 * files): ld.global.nc with L1::no_allocate (the rows are read once, from mapped pinned host memory or device
 * memory) and st.global.cg (stored past L1). Both are volatile asm: issued where written, never merged. */
#ifndef DHS_CUDA_LDST_CUH
#define DHS_CUDA_LDST_CUH

#include <cuda_runtime.h>

static __device__ __forceinline__ uint4 dhs_ld_nc_v4(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

static __device__ __forceinline__ void dhs_st_cg_v4(uint4 *p, uint4 v)
{
    asm volatile("st.global.cg.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}

#endif
