/* gather.cu - row gather kernel: n rows, each from pairs[i].src to pairs[i].dst.
 *
 * This is the resolver's recovery copy (pinned host -> device pool). On PCIe
 * a zero-copy load from pinned host memory is latency bound: bandwidth =
 * bytes in flight / round trip (docs/FACTS.md §3: ~75-100 KB in flight
 * to sustain ~50 GB/s). So the kernel's whole job is to keep many 16-byte
 * loads in flight:
 *   - one warp per row (lane l moves 16-byte vectors l, l+32, ...);
 *   - each block owns a contiguous range of rows; it fetches their {src,dst}
 *     pairs 256 at a time with ONE coalesced 16-byte load per thread into
 *     shared memory. When pairs live in mapped host memory (the backend's
 *     staging ring) this matters: PCIe reads are limited by requests in
 *     flight, and a 16-byte read per row costs as much as a 128-byte one
 *     (measured, bench/RESULTS.md: a per-warp pair read made 16384-row
 *     gathers 11% slower than with pairs in device memory);
 *   - up to DHS_GATHER_ROWS rows per warp and DHS_GATHER_VECS vectors per lane
 *     are loaded before the first store, so a warp keeps up to
 *     4 x 2 KiB in flight when it owns several rows (small grids);
 *   - loads bypass L1 (ld.global.nc.L1::no_allocate), stores are .cg.
 * Rows larger than 32 * DHS_GATHER_VECS * 16 = 2 KiB take several passes.
 *
 * Grid: one warp per row, capped (dhs_cuda_gather_grid); block b moves rows
 * [b * R, (b + 1) * R) with R = ceil(n / blocks).
 */
#include <stdint.h>

#include "cuda/gather.cuh"
#include "cuda/ldst.cuh"

#ifndef DHS_GATHER_VECS
#define DHS_GATHER_VECS 4 /* 16-byte vectors per lane per pass */
#endif
#ifndef DHS_GATHER_ROWS
#define DHS_GATHER_ROWS 4 /* rows of one warp loaded together */
#endif

/* the load of cuda/ldst.cuh without `volatile`: the compiler may move it (the gather's loads of a pass are
   issued before its stores in the source anyway); kept as it was measured, the ceiling the resolver's copies
   are compared with */
static __device__ __forceinline__ uint4 ld_nc_v4(const uint4 *p)
{
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

static __device__ __forceinline__ ulonglong2 ld_nc_pair(const ulonglong2 *p)
{
    ulonglong2 v;
    asm("ld.global.nc.L1::no_allocate.v2.u64 {%0,%1}, [%2];" : "=l"(v.x), "=l"(v.y) : "l"(p));
    return v;
}

/* pairs: [n] {src, dst} as two 64-bit addresses; vecs: 16-byte vectors per row;
   block b moves rows [b * rows_per_block, (b + 1) * rows_per_block) */
static __global__ void __launch_bounds__(DHS_GATHER_THREADS)
    dhs_gather_rows_kernel(const ulonglong2 *__restrict__ pairs, int64_t n, uint32_t vecs, int64_t rows_per_block)
{
    __shared__ ulonglong2 sp[DHS_GATHER_THREADS]; /* this pass's pairs: one coalesced load */
    const uint32_t lane = threadIdx.x & 31u;
    const int warp = (int)(threadIdx.x >> 5);
    const int64_t lo = (int64_t)blockIdx.x * rows_per_block;
    const int64_t hi = lo + rows_per_block < n ? lo + rows_per_block : n;

    for (int64_t base = lo; base < hi; base += DHS_GATHER_THREADS) {
        const int cnt = hi - base < DHS_GATHER_THREADS ? (int)(hi - base) : DHS_GATHER_THREADS;
        if ((int)threadIdx.x < cnt) sp[threadIdx.x] = ld_nc_pair(pairs + base + threadIdx.x);
        __syncthreads();
        /* warp w: rows w, w + 8, w + 16, ... of the pass, DHS_GATHER_ROWS at a time */
        for (int j = warp; j < cnt; j += DHS_GATHER_WARPS * DHS_GATHER_ROWS) {
            const uint4 *src[DHS_GATHER_ROWS];
            uint4 *dst[DHS_GATHER_ROWS];
#pragma unroll
            for (int u = 0; u < DHS_GATHER_ROWS; u++) {
                const int row = j + u * DHS_GATHER_WARPS;
                const ulonglong2 pr = row < cnt ? sp[row] : make_ulonglong2(0, 0);
                src[u] = (const uint4 *)pr.x;
                dst[u] = (uint4 *)pr.y;
            }
            for (uint32_t v0 = 0; v0 < vecs; v0 += 32 * DHS_GATHER_VECS) {
                uint4 r[DHS_GATHER_ROWS][DHS_GATHER_VECS];
#pragma unroll
                for (int u = 0; u < DHS_GATHER_ROWS; u++) {
#pragma unroll
                    for (int c = 0; c < DHS_GATHER_VECS; c++) {
                        const uint32_t v = v0 + (uint32_t)c * 32u + lane;
                        if (j + u * DHS_GATHER_WARPS < cnt && v < vecs) r[u][c] = ld_nc_v4(src[u] + v);
                    }
                }
#pragma unroll
                for (int u = 0; u < DHS_GATHER_ROWS; u++) {
#pragma unroll
                    for (int c = 0; c < DHS_GATHER_VECS; c++) {
                        const uint32_t v = v0 + (uint32_t)c * 32u + lane;
                        if (j + u * DHS_GATHER_WARPS < cnt && v < vecs) dhs_st_cg_v4(dst[u] + v, r[u][c]);
                    }
                }
            }
        }
        __syncthreads(); /* sp is rewritten by the next pass */
    }
}

extern "C" int32_t dhs_cuda_gather_grid(int64_t n, int32_t max_blocks)
{
    if (n <= 0) return 0;
    int64_t b = (n + DHS_GATHER_WARPS - 1) / DHS_GATHER_WARPS;
    if (max_blocks > 0 && b > max_blocks) b = max_blocks;
    return (int32_t)b;
}

extern "C" cudaError_t dhs_cuda_gather_launch(const dhs_copy_pair *pairs, int64_t n, uint32_t row_bytes,
                                              int32_t blocks, cudaStream_t s)
{
    if (n <= 0) return cudaSuccess;
    if (blocks <= 0 || (row_bytes & 15u) != 0 || row_bytes == 0) return cudaErrorInvalidValue;
    const int64_t per_block = (n + blocks - 1) / blocks;
    const int64_t used = (n + per_block - 1) / per_block; /* <= blocks */
    dhs_gather_rows_kernel<<<(unsigned)used, DHS_GATHER_THREADS, 0, s>>>((const ulonglong2 *)pairs, n, row_bytes / 16u,
                                                                         per_block);
    return cudaGetLastError();
}
