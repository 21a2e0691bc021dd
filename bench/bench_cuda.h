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

/* Device-to-device copy bandwidth in GB/s (bytes read + written): the median of 10 timed 1 GiB copies on
   st after two warm-ups. The benchmarks' HBM roofline is measured with it in the same run. */
static inline double bench_d2d_gbs(cudaStream_t st)
{
    const size_t bytes = (size_t)1 << 30;
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemsetAsync(a, 1, bytes, st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float t[10];
    int n = 0;
    for (int i = 0; i < 12; i++) {
        CK(cudaEventRecord(e0, st));
        CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 2) { /* insertion into the sorted prefix */
            int j = n++;
            while (j > 0 && t[j - 1] > ms) {
                t[j] = t[j - 1];
                j--;
            }
            t[j] = ms;
        }
    }
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return 2.0 * (double)bytes / ((double)t[n / 2] * 1e-3) / 1e9;
}

#endif
