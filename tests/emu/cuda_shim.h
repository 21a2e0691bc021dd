/* cuda_shim.h - just enough of CUDA to run C-style kernels on the CPU (a
 * development check for machines without a GPU, not a CTest test): one
 * std::thread per CUDA thread, blocks one after another; __shared__ becomes a
 * function-level static (shared by the block's threads), __syncthreads a
 * std::barrier, __shfl_xor_sync a per-warp exchange through memory; the _rn
 * intrinsics are plain IEEE operations (build with -ffp-contract=off). A
 * kernel that syncs in divergent code deadlocks here instead of misbehaving. */
#pragma once
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>
struct dim3e { unsigned x = 1, y = 1, z = 1; };
extern thread_local dim3e threadIdx, blockIdx;
extern dim3e gridDim, blockDim;
struct uint4 { unsigned x, y, z, w; };
struct float4 { float x, y, z, w; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); } /* one rounding, as the GPU's */
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline float __fdiv_rn(float a, float b) { volatile float r = a / b; return r; }
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
void __syncthreads();
int __syncthreads_or(int p);
float __shfl_xor_sync(unsigned mask, float v, int off);
extern float emu_dyn[];
void emu_launch(dim3e grid, dim3e block, std::function<void()> body);
