/* bench_cuda.h - what the CUDA benchmarks share: a CUDA call that fails ends the benchmark with its
   file, line, call and error string (benchmarks are programs, not the library, so they may exit). */
#ifndef DHS_BENCH_CUDA_H
#define DHS_BENCH_CUDA_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (cudaError_t)(x);                                                     \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#endif
