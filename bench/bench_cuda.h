/* bench_cuda.h - what the CUDA benchmarks share: a CUDA call that fails ends the benchmark with its
   file, line, call and error string (benchmarks are programs, not the library, so they may exit), with
   status DHS_BENCH_CK_EXIT (1 unless the includer defines it; the dhs tool's engines use 3, runtime). */
#ifndef DHS_BENCH_CUDA_H
#define DHS_BENCH_CUDA_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#ifndef DHS_BENCH_CK_EXIT
#define DHS_BENCH_CK_EXIT 1
#endif

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (cudaError_t)(x);                                                     \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(DHS_BENCH_CK_EXIT);                                                           \
        }                                                                                      \
    } while (0)

#endif
