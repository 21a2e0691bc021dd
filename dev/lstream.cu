/* lstream.cu - CUDA executor of the layer-streamed prefill schedule
 * (dev/lstream.h): loads on one stream (H2D from pinned host history),
 * compute on a second (the synthetic layer's two kernels), write-backs on a
 * third (D2H of the chunk's new rows). Each event records a cudaEvent; a
 * dependency on an event of another stream becomes cudaStreamWaitEvent, one
 * on the same stream is already ordered by the stream. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include "dev/lstream.h"

/* phase 1: the chunk's history rows of the layer (layer 0 first sets the activations from the embedding) */
/* row t of x is at (t - xo) * W: xo = 0 (x covers every row) or the chunk start (x_window) */
__global__ void ls_kv_kernel(uint32_t *buf, uint32_t *x, int64_t t0, int64_t xo, int64_t rows, int32_t W, int32_t layer)
{
    const int64_t total = rows * W;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = t0 + e / W;
        int32_t w = (int32_t)(e % W);
        uint32_t xv;
        if (layer == 0) {
            xv = dhs_ls_embed_word(t, w);
            x[(t - xo) * W + w] = xv;
        } else {
            xv = x[(t - xo) * W + w];
        }
        buf[t * W + w] = dhs_ls_kv_word(layer, xv);
    }
}

/* phase 2: activations from this row, the previous row and a far earlier one */
__global__ void ls_act_kernel(const uint32_t *buf, uint32_t *x, int64_t t0, int64_t xo, int64_t rows, int32_t W, int32_t layer,
                              int32_t work)
{
    const int64_t total = rows * W;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = t0 + e / W;
        int32_t w = (int32_t)(e % W);
        int64_t f = dhs_ls_far_row(layer, t);
        x[(t - xo) * W + w] = dhs_ls_act_word(x[(t - xo) * W + w], buf[t * W + w], t > 0 ? buf[(t - 1) * W + w] : 0u, buf[f * W + w], work);
    }
}

extern "C" int dhs_cuda_ls_compute(const dhs_ls_synth *m, int32_t layer, int32_t chunk, uint32_t *d_buf, uint32_t *d_x, void *stream)
{
    if (!dhs_ls_synth_ok(m) || !d_buf || !d_x || layer < 0 || layer >= m->n_layers || chunk < 0 || chunk >= m->n_chunks) return -1;
    const int64_t t0 = dhs_ls_chunk_start(m, chunk), rows = dhs_ls_chunk_len(m, chunk), total = rows * m->row_words;
    const int64_t xo = m->x_window ? t0 : 0;
    if (total == 0) return 0;
    int64_t blocks = (total + 255) / 256;
    if (blocks > 8192) blocks = 8192;
    cudaStream_t s = (cudaStream_t)stream;
    ls_kv_kernel<<<(unsigned)blocks, 256, 0, s>>>(d_buf, d_x, t0, xo, rows, m->row_words, layer);
    ls_act_kernel<<<(unsigned)blocks, 256, 0, s>>>(d_buf, d_x, t0, xo, rows, m->row_words, layer, m->work);
    return (int)cudaGetLastError();
}

extern "C" int dhs_cuda_ls_run(const dhs_ls_synth *m, const dhs_ls_event *ev, int64_t n, uint32_t *h_hist, uint32_t *const *d_bufs,
                               uint32_t *d_x, void *const *streams, unsigned op_mask)
{
    if (!dhs_ls_synth_ok(m) || (n > 0 && !ev) || n < 0 || !h_hist || !d_bufs || !d_x || !streams) return -1;
    for (int64_t i = 0; i < n; i++)
        if (ev[i].op < 0 || ev[i].op > 2 || ev[i].layer < 0 || ev[i].layer >= m->n_layers || ev[i].chunk < 0 ||
            ev[i].chunk >= m->n_chunks || ev[i].buffer < 0 || !d_bufs[ev[i].buffer] || ev[i].n_deps < 0 ||
            ev[i].n_deps > DHS_LS_MAX_DEPS)
            return -1;
    cudaEvent_t *done = (cudaEvent_t *)calloc((size_t)n + 1, sizeof(cudaEvent_t));
    if (!done) return (int)cudaErrorMemoryAllocation;
    const int64_t lw = dhs_ls_layer_words(m), W = m->row_words;
    cudaError_t err = cudaSuccess;
    for (int64_t i = 0; i < n && err == cudaSuccess; i++) {
        const dhs_ls_event *e = &ev[i];
        if (!(op_mask & (1u << e->op))) continue;
        cudaStream_t st = (cudaStream_t)streams[e->op];
        for (int32_t d = 0; d < e->n_deps && err == cudaSuccess; d++) {
            int32_t j = e->deps[d];
            if (j < 0 || j >= i) {
                err = cudaErrorInvalidValue;
                break;
            }
            if (done[j] && (cudaStream_t)streams[ev[j].op] != st) err = cudaStreamWaitEvent(st, done[j], 0);
        }
        if (err != cudaSuccess) break;
        uint32_t *buf = d_bufs[e->buffer];
        const int64_t start = dhs_ls_chunk_start(m, e->chunk), len = dhs_ls_chunk_len(m, e->chunk);
        if (e->op == DHS_LS_LOAD) {
            if (start > 0)
                err = cudaMemcpyAsync(buf, h_hist + (int64_t)e->layer * lw, sizeof(uint32_t) * (size_t)(start * W),
                                      cudaMemcpyHostToDevice, st);
        } else if (e->op == DHS_LS_COMPUTE) {
            err = (cudaError_t)dhs_cuda_ls_compute(m, e->layer, e->chunk, buf, d_x, st);
        } else if (len > 0) {
            err = cudaMemcpyAsync(h_hist + (int64_t)e->layer * lw + start * W, buf + start * W, sizeof(uint32_t) * (size_t)(len * W),
                                  cudaMemcpyDeviceToHost, st);
        }
        if (err == cudaSuccess) err = cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming);
        if (err == cudaSuccess) err = cudaEventRecord(done[i], st);
    }
    /* destroying a recorded event is legal before it completes: its resources go when it does */
    for (int64_t i = 0; i < n; i++)
        if (done[i]) cudaEventDestroy(done[i]);
    free(done);
    return (int)err;
}
