/* lstream.h - layer-streamed prefill scheduler (FlashOffloading rolling
 * buffers; docs/FLASHOFFLOAD.md). Internal header: the integrator's engine
 * drives it, library users never see it, so the shape can still change
 * without an API break (include/dhs.h stays as it is).
 *
 * The history of every layer lives on the host. A prefill runs C chunks
 * (forward passes) over L layers; the device holds R layer buffers:
 *   - buffer 0 is bound to layer 0 for the whole prefill (loaded once, never
 *     evicted: its compute is the pipeline's head start);
 *   - layers 1..L-1 rotate over buffers 1..R-1 round robin in (chunk, layer)
 *     order; when L-1 <= R-1 each layer keeps its own buffer (full residency,
 *     nothing reloaded after chunk 0);
 *   - per layer instance u = (chunk, layer): load(u) copies the layer's host
 *     history rows [0, prefix + chunk*chunk_rows) into its buffer (skipped when
 *     the buffer still holds that layer from the previous chunk), compute(u)
 *     appends the chunk's rows and advances the activations, writeback(u)
 *     copies the chunk's new rows back to the host history;
 *   - a buffer is loaded for a new occupant only after the previous occupant's
 *     compute AND write-back completed (the load depends on both); a load also
 *     waits for the write-back of the same layer's previous chunk (the host
 *     history must be complete); when no buffer is free the schedule stops
 *     prefetching and waits (the load is emitted later);
 *   - onload_layer_map[l] (>= 0): when compute of layer l is issued, loads are
 *     issued up to onload_layer_map[l] layer instances ahead (crossing chunk
 *     boundaries); NULL = 1 for every layer.
 * dhs_ls_schedule emits a deterministic event list; every dependency names an
 * earlier event. An executor runs each op on its own queue (load, compute,
 * write-back) in list order per queue and honours the dependencies across
 * queues: the CPU executor below (memcpy on emulated buffers, any order that
 * respects the dependencies) and the CUDA executor (dev/lstream.cu,
 * three streams and cudaEvents).
 *
 * The synthetic model (dhs_ls_synth) makes "compute" a deterministic function
 * of the layer's history rows and the activations, so a streamed prefill can be
 * compared byte for byte with a full-residency one. */
#ifndef DHS_LSTREAM_H
#define DHS_LSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "dhs.h"

#ifndef DHS_HD
#if defined(__CUDACC__)
#define DHS_HD __host__ __device__
#else
#define DHS_HD
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define DHS_LS_DEFAULT_BUFFERS 4
#define DHS_LS_MAX_DEPS 4

typedef enum dhs_ls_op { DHS_LS_LOAD = 0, DHS_LS_COMPUTE = 1, DHS_LS_WRITEBACK = 2 } dhs_ls_op;

typedef struct dhs_ls_event {
    int32_t op;     /* dhs_ls_op */
    int32_t chunk;  /* forward pass 0..C-1 */
    int32_t layer;  /* 0..L-1 */
    int32_t buffer; /* device layer buffer 0..R-1 */
    int32_t n_deps;
    int32_t deps[DHS_LS_MAX_DEPS]; /* indices of earlier events that must have completed */
} dhs_ls_event;

typedef struct dhs_ls_params {
    int32_t n_layers;                /* L >= 1 */
    int32_t n_buffers;               /* R >= 2 */
    int32_t n_chunks;                /* C >= 1 */
    const int32_t *onload_layer_map; /* [L] prefetch depth >= 0, or NULL (all 1) */
} dhs_ls_params;

/* events a schedule has at most: 3 * L * C; -1 for invalid params */
int64_t dhs_ls_max_events(const dhs_ls_params *p);
/* the buffer of layer instance (chunk, layer); -1 when out of range */
int32_t dhs_ls_buffer_of(const dhs_ls_params *p, int32_t chunk, int32_t layer);
/* Writes the schedule to ev[0..*n_events-1] (cap >= dhs_ls_max_events).
   DHS_ERR_INVALID_ARG: bad params, a map entry < 0, NULL pointers, cap too small
   (nothing written then); DHS_ERR_NOMEM when its bookkeeping (12 bytes per
   layer instance, freed before return) cannot be allocated. */
dhs_status dhs_ls_schedule(const dhs_ls_params *p, dhs_ls_event *ev, int64_t cap, int64_t *n_events);

/* ------------------------------------------------------------ synthetic model */
typedef struct dhs_ls_synth {
    int32_t n_layers;    /* L */
    int32_t n_chunks;    /* C */
    int32_t row_words;   /* W: uint32 words per history row */
    int32_t work;        /* extra mixing rounds per word in compute (GPU load knob) */
    int64_t prefix_rows; /* history rows already on the host before the prefill (prefix hit) */
    int64_t chunk_rows;  /* rows appended per chunk */
    int64_t prompt_rows; /* rows the prefill appends; 0 = C * chunk_rows. Otherwise
                            (C-1) * chunk_rows < prompt_rows <= C * chunk_rows: the last
                            chunk takes the remainder (dhs_ls_synth_ok) */
    int32_t x_window;    /* 0: activations x[total_rows][W], row t at t * W; 1: x holds the
                            current chunk only, x[chunk_rows][W], row t at (t - chunk start) * W
                            (what a real prefill keeps: activation memory scales with the chunk) */
} dhs_ls_synth;

/* rows the prefill appends (the prompt) */
static inline DHS_HD int64_t dhs_ls_prompt_rows(const dhs_ls_synth *m)
{
    return m->prompt_rows > 0 ? m->prompt_rows : (int64_t)m->n_chunks * m->chunk_rows;
}
/* rows of one layer after the prefill: prefix + prompt */
static inline DHS_HD int64_t dhs_ls_total_rows(const dhs_ls_synth *m) { return m->prefix_rows + dhs_ls_prompt_rows(m); }
/* first row chunk `chunk` appends */
static inline DHS_HD int64_t dhs_ls_chunk_start(const dhs_ls_synth *m, int32_t chunk) { return m->prefix_rows + (int64_t)chunk * m->chunk_rows; }
/* rows chunk `chunk` appends: chunk_rows, the remainder for the last one */
static inline DHS_HD int64_t dhs_ls_chunk_len(const dhs_ls_synth *m, int32_t chunk)
{
    int64_t left = dhs_ls_prompt_rows(m) - (int64_t)chunk * m->chunk_rows;
    return left < m->chunk_rows ? (left > 0 ? left : 0) : m->chunk_rows;
}
/* uint32 words of the activation buffer x */
static inline DHS_HD int64_t dhs_ls_x_words(const dhs_ls_synth *m)
{
    return (m->x_window ? m->chunk_rows : dhs_ls_total_rows(m)) * m->row_words;
}
/* 1 when the shape is valid: L >= 1, C >= 1, W >= 1, work >= 0, prefix >= 0,
   chunk_rows >= 0, prompt_rows 0 or in ((C-1) * chunk_rows, C * chunk_rows] */
static inline DHS_HD int dhs_ls_synth_ok(const dhs_ls_synth *m)
{
    if (!m || m->n_layers < 1 || m->n_chunks < 1 || m->row_words < 1 || m->work < 0 || m->prefix_rows < 0 || m->chunk_rows < 0)
        return 0;
    if (m->prompt_rows < 0) return 0;
    if (m->prompt_rows > 0 && (m->prompt_rows <= (int64_t)(m->n_chunks - 1) * m->chunk_rows ||
                               m->prompt_rows > (int64_t)m->n_chunks * m->chunk_rows))
        return 0;
    return 1;
}
/* uint32 words of one layer buffer (= one layer's whole history) */
static inline DHS_HD int64_t dhs_ls_layer_words(const dhs_ls_synth *m) { return dhs_ls_total_rows(m) * m->row_words; }

static inline DHS_HD uint32_t dhs_ls_mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}
/* word w of prefix row t of layer l (the history present before the prefill) */
static inline DHS_HD uint32_t dhs_ls_prefix_word(int32_t l, int64_t t, int32_t w)
{
    return dhs_ls_mix((uint32_t)l * 0x9e3779b9u ^ dhs_ls_mix((uint32_t)t * 0x85ebca6bu + (uint32_t)w + 0x1234u));
}
/* word w of token t's input activation (entering layer 0) */
static inline DHS_HD uint32_t dhs_ls_embed_word(int64_t t, int32_t w)
{
    return dhs_ls_mix((uint32_t)t * 0xc2b2ae35u ^ ((uint32_t)w + 0x5bd1e995u) ^ (uint32_t)(t >> 32));
}
/* compute phase 1: the history row word layer l appends for token t */
static inline DHS_HD uint32_t dhs_ls_kv_word(int32_t l, uint32_t x) { return dhs_ls_mix(x ^ ((uint32_t)l + 1u) * 0x27d4eb2fu); }
/* the earlier row token t > 0 also reads at layer l */
static inline DHS_HD int64_t dhs_ls_far_row(int32_t l, int64_t t)
{
    return t > 0 ? (int64_t)(dhs_ls_mix((uint32_t)t ^ ((uint32_t)l << 20) ^ (uint32_t)(t >> 32)) % (uint64_t)t) : 0;
}
/* compute phase 2: new activation word from the old one, this token's row word,
   the previous row's word (0 for t = 0) and a far earlier row's word */
static inline DHS_HD uint32_t dhs_ls_act_word(uint32_t x, uint32_t kv, uint32_t prev, uint32_t far, int32_t work)
{
    uint32_t a = kv + 3u * prev + 5u * far;
    for (int32_t r = 0; r < work; r++) a = dhs_ls_mix(a + (uint32_t)r);
    return dhs_ls_mix(x + a);
}

/* ------------------------------------------------------------ chunk size from a memory budget
 * Device bytes of a prefill that keeps min(R, L) layer buffers of layer_bytes
 * each (R = L: full residency) and act_row_bytes of activations per chunk row:
 *     min(R, L) * layer_bytes + act_row_bytes * chunk_rows
 * -1 for invalid arguments (L < 1, R < 2, negative sizes) or an int64 overflow. */
int64_t dhs_ls_prefill_bytes(int64_t layer_bytes, int32_t n_layers, int32_t n_buffers, int64_t act_row_bytes, int64_t chunk_rows);
/* The largest chunk (rows) whose dhs_ls_prefill_bytes fits in budget_bytes:
 *   c = (budget - min(R, L) * layer_bytes) / act_row_bytes, then
 *   - max_rows > 0 (the prompt's rows) and c >= max_rows: *chunk_rows = max_rows
 *     (one chunk holds the whole prompt; no rounding);
 *   - otherwise c rounded down to a multiple of `multiple` (0 or 1: no rounding).
 * Full residency: R = L; a streamed prefill: R buffers (R > L counts as L).
 * DHS_ERR_TOO_LARGE when not even the smallest chunk fits (min(multiple, max_rows)
 * rows, at least 1: the budget is below the layer buffers plus one chunk);
 * DHS_ERR_INVALID_ARG for NULL, L < 1, R < 2, budget < 0, layer_bytes < 0,
 * act_row_bytes < 1, multiple < 0, max_rows < 0. *chunk_rows is written only on DHS_OK. */
dhs_status dhs_ls_max_chunk(int64_t budget_bytes, int64_t layer_bytes, int32_t n_layers, int32_t n_buffers, int64_t act_row_bytes,
                            int64_t multiple, int64_t max_rows, int64_t *chunk_rows);

/* host history [L][total_rows][W]: prefix rows filled, the rest zero */
void dhs_ls_synth_init_host(const dhs_ls_synth *m, uint32_t *hist);
/* activations of chunk `chunk`'s rows (x as m->x_window says; other rows
   untouched): layer 0 starts from the embedding; reads/writes buf = the layer's buffer */
void dhs_ls_cpu_compute(const dhs_ls_synth *m, int32_t layer, int32_t chunk, uint32_t *buf, uint32_t *x);

/* CPU executor: runs ev[order[i]] for i = 0..n-1 (order NULL = list order) on
   emulated device buffers bufs[R][layer_words] with memcpy; hist is the host
   history, x the activations [dhs_ls_x_words]. Each event's dependencies must
   have run before it: otherwise DHS_ERR_STATE (events up to there ran).
   DHS_ERR_INVALID_ARG for an invalid shape (dhs_ls_synth_ok) or an event out
   of range, DHS_ERR_NOMEM when its
   bookkeeping (n bytes) cannot be allocated. */
dhs_status dhs_ls_run_cpu(const dhs_ls_synth *m, int32_t n_buffers, const dhs_ls_event *ev, int64_t n, const int64_t *order,
                          uint32_t *hist, uint32_t *bufs, uint32_t *x);
/* Full-residency reference: L device buffers (bufs[L][layer_words]), each layer
   loaded once, every chunk computed and written back in order. */
void dhs_ls_run_full_cpu(const dhs_ls_synth *m, uint32_t *hist, uint32_t *bufs, uint32_t *x);

/* ------------------------------------------------------------ CUDA executor
 * (dev/lstream.cu; DHS_CUDA builds only). Device/pinned pointers;
 * streams[3] = load, compute, write-back cudaStream_t (may be equal: one stream
 * runs the schedule serially). Issues every event with op bit set in op_mask
 * (1 << dhs_ls_op; 7 = all) on its stream in list order, a cudaEvent after each
 * and cudaStreamWaitEvent for dependencies on other streams; does not wait for
 * completion. Returns a cudaError_t value, -1 for bad arguments. */
int dhs_cuda_ls_run(const dhs_ls_synth *m, const dhs_ls_event *ev, int64_t n, uint32_t *h_hist, uint32_t *const *d_bufs,
                    uint32_t *d_x, void *const *streams, unsigned op_mask);
/* compute(layer, chunk) on one buffer: the two kernels of the synthetic layer */
int dhs_cuda_ls_compute(const dhs_ls_synth *m, int32_t layer, int32_t chunk, uint32_t *d_buf, uint32_t *d_x, void *stream);

#ifdef __cplusplus
}
#endif

#endif
