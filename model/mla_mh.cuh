/* mla_mh.cuh - the sm_80+ instructions the multi-head sparse MLA kernel
 * (model/mla_mh.cu) is made of, shared with its benchmark (model/mla_bench.cu,
 * which measures the mma.sync peak with the same instruction). */
#ifndef DHS_MLA_MH_CUH
#define DHS_MLA_MH_CUH

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

static __device__ __forceinline__ void mh_cp16(void *smem, const void *gmem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
static __device__ __forceinline__ void mh_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
static __device__ __forceinline__ void mh_wait_all(void) { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

/* d += a b: m16n8k16, A row-major bf16 (4 registers), B column-major bf16 (2), f32 accumulators */
static __device__ __forceinline__ void mh_mma(float *d, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* four 8x8 b16 matrices; lane l gives the row address of matrix l / 8 */
static __device__ __forceinline__ void mh_ldsm4(uint32_t *r, const void *p)
{
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
static __device__ __forceinline__ void mh_ldsm4t(uint32_t *r, const void *p)
{
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

static __device__ __forceinline__ uint32_t mh_pack(float lo, float hi)
{
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x = lo: the lower address */
    return *(const uint32_t *)&v;
}
static __device__ __forceinline__ float mh_bf(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

/* two FP8 E4M3 codes (low byte first) times the tile scale, each rounded once to bf16 */
static __device__ __forceinline__ uint32_t mh_dec2(uint32_t w16, float ts)
{
    const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)w16, __NV_E4M3);
    const float2 f = __half22float2(__half2(hr));
    return mh_pack(__fmul_rn(f.x, ts), __fmul_rn(f.y, ts));
}

/* the Hopper bulk copy (TMA engine): one instruction per row instead of one per 16 bytes, completion
   counted in bytes on an mbarrier in shared memory (sm_90) */
static __device__ __forceinline__ void mh_mbar_init(uint64_t *bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"((unsigned)__cvta_generic_to_shared(bar)), "r"(count));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/* one arrival that also expects bytes more transfer on the current phase */
static __device__ __forceinline__ void mh_mbar_expect(uint64_t *bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"((unsigned)__cvta_generic_to_shared(bar)),
                 "r"(bytes)
                 : "memory");
}
static __device__ __forceinline__ void mh_bulk(void *smem, const void *gmem, unsigned bytes, uint64_t *bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     (unsigned)__cvta_generic_to_shared(smem)),
                 "l"(gmem), "r"(bytes), "r"((unsigned)__cvta_generic_to_shared(bar))
                 : "memory");
}
/* wait until the phase with this parity completed */
static __device__ __forceinline__ void mh_mbar_wait(uint64_t *bar, unsigned parity)
{
    asm volatile("{\n\t.reg .pred p;\n"
                 "MH_WAIT:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
                 "@!p bra MH_WAIT;\n}\n" ::"r"((unsigned)__cvta_generic_to_shared(bar)),
                 "r"(parity)
                 : "memory");
}

#endif
