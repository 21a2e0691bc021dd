/*
 * gpu.h - the reference model's target pass on the GPU (model/refmodel.cu,
 * extern "C" launchers; stubs returning DHS_ERR_UNSUPPORTED without CUDA in
 * model/gpu_stub.c). The engine (engine.c) keeps the control plane on the
 * host (drafter, verification, library calls); per layer the GPU computes:
 *
 *   rows    rmsnorm, latent + RoPE, the 656-byte row (FP8 encode), and on a
 *           producer the FP8 index key, written to per-query destinations
 *   select  indexer queries, scores over the query's visible keys (device key
 *           store), top-k with the CPU's tie rule (score descending, then lower
 *           position; -1 padding), sorted like dhs_ref_topk
 *   attend  sparse MLA-style attention reading only base[q] + loc[q][e]*656
 *           for the located rows, then the MLP (residual updates of x)
 *   logits  after the last layer
 *
 * Every reduction has the CPU model's fixed order (dhs_ref_dot's 8 lanes,
 * entry order for the softmax sums, heads in order) with one IEEE operation
 * per step (_rn intrinsics, no contraction); RoPE cos/sin come from the host
 * (dhs_ref_rope_cs) and the softmax exp is dhs_ref_expf's twin when the
 * model sets exp_portable. So with exp_portable the GPU's logits equal the
 * CPU model's bit for bit; otherwise CUDA's expf may differ in the last bit.
 *
 * Queries are addressed q = i * k_max + j (batch item i, query j); items with
 * fewer than k_max queries leave the rest invalid (pos < 0: skipped).
 * All pointers named *_dev are device pointers; host arrays are copied in.
 * Work is issued on the stream given at creation; functions that return host
 * data synchronise it.
 */
#ifndef DHS_REF_GPU_H
#define DHS_REF_GPU_H

#include <stdint.h>

#include "dev/topk_spec.h" /* dhs_topk_pages */
#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dhs_ref_gpu dhs_ref_gpu;

typedef struct dhs_ref_gpu_desc {
    int32_t vocab, d_model, n_layers, n_heads, d_v, mlp_hidden, idx_heads, idx_dim, topk;
    float alpha, logit_scale;
    float idx_wscale;   /* 1 / sqrtf(idx_heads * idx_dim), as the CPU computes it */
    float att_scale;    /* 1 / sqrtf(576) */
    int32_t exp_portable, key_fp8;
    int32_t topk_fused;         /* 0: the model's own top-k kernel (k_topk); 1: the library's fused
                                   top-k (dev/topk.cu dhs_cuda_topk_fused_n, selection only,
                                   per-query counts pos[q] + 1): the same selections; a NaN score
                                   then fails the pass (DHS_ERR_INVALID_ARG: select, or step_wait
                                   for the device step) instead of ranking above +inf; 2: the
                                   same output by dhs_cuda_topk_split_n (many blocks per query,
                                   a workspace of ~164 KiB per query) */
    int32_t max_queries;        /* batch items x k_max */
    int32_t k_max;              /* queries a batch item has at most; 1: every query reads its own keys, so
                                   the indexer scores each alone (k_scores_fp8r); 0 or more: groups of a
                                   session's queries (k_scores_fp8v) */
    int64_t max_positions;      /* longest session (scores buffer) */
    const float *emb, *w_out;   /* host [V][d] */
    const float *fp8_lut;       /* dhs_ref_fp8_table() (the .cu lives in libdhs, below model/) */
    void (*rope_cs)(int64_t pos, float *c, float *s); /* dhs_ref_rope_cs */
    dhs_ref_layer_weights layer[DHS_REF_MAX_LAYERS]; /* host */
    int32_t producer[DHS_REF_MAX_LAYERS];
    const dhs_ref_iq_synth *iq_synth; /* the locality device (model/iqsynth.h), copied at creation; NULL: off */
} dhs_ref_gpu_desc;

/* 1 when a CUDA device is usable */
int dhs_ref_gpu_available(void);

/* Uploads the weights; stream: a cudaStream_t (NULL: a stream of its own). */
dhs_status dhs_ref_gpu_create(const dhs_ref_gpu_desc *d, void *stream, dhs_ref_gpu **out);
void dhs_ref_gpu_destroy(dhs_ref_gpu *g);
const char *dhs_ref_gpu_error(const dhs_ref_gpu *g);

/* device memory owned by the caller (session key stores, resident rows) */
dhs_status dhs_ref_gpu_alloc(dhs_ref_gpu *g, uint64_t bytes, void **dev);
void dhs_ref_gpu_free(dhs_ref_gpu *g, void *dev);
dhs_status dhs_ref_gpu_upload(dhs_ref_gpu *g, void *dev, const void *host, uint64_t bytes);
/* pinned host memory (the streamed prefill's host history) */
dhs_status dhs_ref_gpu_host_alloc(dhs_ref_gpu *g, uint64_t bytes, void **host);
void dhs_ref_gpu_host_free(dhs_ref_gpu *g, void *host);
/* ---- queues of the streamed prefill (model/lsprefill.h): queue 0 is the model's
   stream (its kernels), 1 and 2 two more streams (loads, write-backs);
   dhs_ref_gpu_queues creates them and n_events events (once per model).
   queue_copy: an asynchronous copy on a queue (cudaMemcpyDefault: pinned host
   or device on either side); queue_record: event ev after the queue's work so
   far; queue_wait: the queue's later work waits for event ev; queues_sync
   waits for all three. */
dhs_status dhs_ref_gpu_queues(dhs_ref_gpu *g, int64_t n_events);
dhs_status dhs_ref_gpu_queue_copy(dhs_ref_gpu *g, int32_t queue, void *dst, const void *src, uint64_t bytes);
dhs_status dhs_ref_gpu_queue_record(dhs_ref_gpu *g, int32_t queue, int64_t ev);
dhs_status dhs_ref_gpu_queue_wait(dhs_ref_gpu *g, int32_t queue, int64_t ev);
dhs_status dhs_ref_gpu_queues_sync(dhs_ref_gpu *g);
dhs_status dhs_ref_gpu_memset(dhs_ref_gpu *g, void *dev, int value, uint64_t bytes);
/* ---- the locality meter's probe of a device step, double-buffered: probe_copy copies `bytes` (a
   multiple of 4) from src on the model's stream to dst[par] (pinned host or device memory), where par
   is a device-side bit that probe_flip toggles (both capturable, so a graph replayed every round
   alternates the buffers): the host reads the buffer of step t while step t + 1 writes the other one,
   with no copy of its own between two steps. The bit starts at 0. */
dhs_status dhs_ref_gpu_probe_copy(dhs_ref_gpu *g, void *dst0, void *dst1, const void *src, uint64_t bytes);
dhs_status dhs_ref_gpu_probe_flip(dhs_ref_gpu *g);

/* A round's queries: nq = items x k_max slots; tokens[q], pos[q] (< 0:
   invalid slot); RoPE tables are computed here from pos. Embeds x. */
dhs_status dhs_ref_gpu_begin(dhs_ref_gpu *g, int32_t nq, const int32_t *tokens, const int64_t *pos);

/* Layer l's rows of every valid query: the encoded row goes to rowdst[q]
   (device address), and on a producer the FP8 key of position pos[q] to the
   key store (codes [cap/8][idx_dim][8], scales [cap]) at kcodes[q] /
   kscales[q] (device bases). rows_host: when not NULL, the nq x 656 rows are
   also copied back (synchronises). */
dhs_status dhs_ref_gpu_rows(dhs_ref_gpu *g, int32_t l, void *const *rowdst, void *const *kcodes,
                            void *const *kscales, uint8_t *rows_host);

/* Producer l: selections of every valid query over its visible keys (the
   key stores at kcodes/kscales, positions 0..pos[q]) into the device
   selection buffer; sel_host (nq x k int32) receives them (synchronises). */
dhs_status dhs_ref_gpu_select(dhs_ref_gpu *g, int32_t l, void *const *kcodes, void *const *kscales, int32_t *sel_host);

/* Attention + MLP of layer l: query q reads rows base[q] + loc*656 for its k
   locations; loc_host: nq x k int32 copied in, or NULL to use the device
   selection buffer as locations (resident storage: location = row). */
dhs_status dhs_ref_gpu_attend(dhs_ref_gpu *g, int32_t l, const void *const *base, const int32_t *loc_host);

/* logits of every query slot: nq x V floats (invalid slots untouched) */
dhs_status dhs_ref_gpu_logits(dhs_ref_gpu *g, float *logits_host);

/* ---- device step (docs/MODEL.md "Device step"): the same kernels with every
   per-round input in fixed buffers, so a whole target pass is issued without
   a host synchronisation or an allocation, and can be captured as one CUDA
   graph and replayed every round.
   Per round: dhs_ref_gpu_step_inputs (host views of pinned mirrors; waits
   until the previous upload read them) -> the engine fills tokens[q], pos[q]
   (q < nq; pos < 0: no query) and, for every layer l, the device pointer
   tables at [l * stride + q]: rowdst (where query q's row of layer l goes),
   base (the rows its locations index), kcodes / kscales (its key store; read
   on producers), and rope[q * 64 ..]: position pos[q]'s 32 cos then 32 sin
   (dhs_ref_rope_cs; the engine computes a plain item's next one while the
   GPU runs the step before) -> dhs_ref_gpu_step_upload(nq): the tokens,
   positions and RoPE values are read by the step itself (its first kernel,
   from the pinned mirror's device address: the host issues no copy for them,
   and the mirror may be rewritten only after dhs_ref_gpu_step_wait; a
   dhs_ref_gpu_step_inputs before it waits for the step); the other arrays
   one copy each (asynchronous). Then the step (launches only):
     embed; per layer: rows(l), on a producer select(l) (selections into
     dhs_ref_gpu_step_sel(): [q][topk] int32, -1 padding, i.e. the layout of
     dhs_resolve_device when q = b * k_max + j), attend(l, loc_dev: [q][topk]
     device locations, NULL: the selections, i.e. resident rows); logits
     (copied into a pinned host buffer).
   dhs_ref_gpu_step_wait synchronises and returns the logits (nq x V).
   The grids depend only on nq (scores cover every position up to the
   model's max_positions), so a step captured for nq stays valid while nq
   holds: dhs_ref_gpu_capture_begin / _end (keep: instantiate it, replacing
   the previous graph) around the launches, dhs_ref_gpu_graph_launch per
   round after the upload. */
typedef struct dhs_ref_gpu_step_in {
    int32_t *tokens;
    int64_t *pos;
    void **rowdst, **base, **kcodes, **kscales; /* [n_layers][stride] */
    float *rope;                                /* [stride][64]: cos, sin of pos[q] (dhs_ref_rope_cs) */
    int32_t stride;                             /* max_queries */
    int32_t *rloc;  /* compact tables with row locations: [n_src][stride], else NULL */
} dhs_ref_gpu_step_in;

dhs_status dhs_ref_gpu_step_inputs(dhs_ref_gpu *g, dhs_ref_gpu_step_in *in);
dhs_status dhs_ref_gpu_step_upload(dhs_ref_gpu *g, int32_t nq);
/* the last dhs_ref_gpu_step_upload's host time: its copy calls and its event record (0 without one) */
void dhs_ref_gpu_upload_times(const dhs_ref_gpu *g, double *copy_s, double *event_s);
/* the tables' stride (max queries), without dhs_ref_gpu_step_inputs' wait: for work issued while a
   step runs (the engine's round opened ahead) */
int32_t dhs_ref_gpu_step_stride(const dhs_ref_gpu *g);
/* dhs_ref_gpu_step_inputs calls that had to wait for a step still reading the inputs block, and whether
   the step reads that block itself (1) or the upload copies it (0) */
void dhs_ref_gpu_step_counts(const dhs_ref_gpu *g, uint64_t *inputs_waits, int *inputs_in_step);
/* Compact tables (set once, before the first step; the engine's default): the upload of a
   round is O(what changed), not O(layers x queries).
   - base / kcodes / kscales stay on the device between rounds; the host mirrors keep what the
     engine wrote (the GPU never writes them). dhs_ref_gpu_step_tables(q0, n) copies columns
     q0 .. q0+n-1 of every layer's three tables (one 2D copy, asynchronous): the engine calls
     it for the queries whose session changed since their columns were last copied.
   - rowdst is computed on the device at the start of every step (dhs_ref_gpu_step_embed): for
     layer l and a valid query q, rowdst = base[l][q] + (int64_t)r * 656 with r = pos[q]
     (rows_at_pos: resident rows, row = position) or r = rloc[layer_src[l]][q] (the rows'
     locations: the library's dhs_tail_locations, written by the engine into in.rloc every
     round: n_src x nq int32, one 2D copy in dhs_ref_gpu_step_upload); NULL for pos[q] < 0.
   dhs_ref_gpu_step_upload then copies tokens, positions, RoPE values and rloc, not the tables.
   layer_src: [n_layers] values in 0 .. n_src-1. DHS_ERR_STATE when called twice or while
   capturing; DHS_ERR_INVALID_ARG for a bad source; step_tables outside compact mode:
   DHS_ERR_STATE. */
dhs_status dhs_ref_gpu_step_compact(dhs_ref_gpu *g, const int32_t *layer_src, int32_t n_src, int rows_at_pos);
/* Compact tables with row locations, written on the device: the device array rowdst reads
   ([n_src][stride] int32), for dhs_round_tail_locations_device on the same stream. From this call on,
   dhs_ref_gpu_step_upload no longer copies in.rloc (the library writes the array every round). NULL
   without compact row locations or while capturing. */
int32_t *dhs_ref_gpu_step_rloc_device(dhs_ref_gpu *g);
dhs_status dhs_ref_gpu_step_tables(dhs_ref_gpu *g, int32_t q0, int32_t n);
dhs_status dhs_ref_gpu_step_embed(dhs_ref_gpu *g);
dhs_status dhs_ref_gpu_step_rows(dhs_ref_gpu *g, int32_t l);
dhs_status dhs_ref_gpu_step_select(dhs_ref_gpu *g, int32_t l);
/* the same with the page-table lookup fused into the top-k (dev/topk_spec.h dhs_topk_pages: each selected
   row's location in every source of pg, from dhs_round_page_tables_device's tables); pg NULL = step_select.
   Needs the split top-k (DHS_ERR_UNSUPPORTED otherwise) */
dhs_status dhs_ref_gpu_step_select_pages(dhs_ref_gpu *g, int32_t l, const dhs_topk_pages *pg);
int32_t *dhs_ref_gpu_step_sel(dhs_ref_gpu *g);
dhs_status dhs_ref_gpu_step_attend(dhs_ref_gpu *g, int32_t l, const int32_t *loc_dev);
dhs_status dhs_ref_gpu_step_logits(dhs_ref_gpu *g);
dhs_status dhs_ref_gpu_step_wait(dhs_ref_gpu *g, const float **logits);
dhs_status dhs_ref_gpu_capture_begin(dhs_ref_gpu *g);
dhs_status dhs_ref_gpu_capture_end(dhs_ref_gpu *g, int keep);
int32_t dhs_ref_gpu_graph_queries(const dhs_ref_gpu *g); /* nq of the captured graph, 0: none */
dhs_status dhs_ref_gpu_graph_launch(dhs_ref_gpu *g);

/* ---- deployment weights (model/deploy.h): the bytes of weights one GPU of a real deployment reads
   per step, read from a buffer of our own so the step costs what that deployment's would.
   dhs_ref_gpu_weights_alloc: a zeroed device buffer of `bytes` (0 frees it; replaces an earlier one;
   not while capturing); dhs_ref_gpu_step_weights: reads `bytes` of it on the model's stream (launch
   only, capturable), continuing where the previous read stopped and wrapping, so consecutive reads
   touch different memory; DHS_ERR_INVALID_ARG when bytes exceed the buffer or none is allocated. */
dhs_status dhs_ref_gpu_weights_alloc(dhs_ref_gpu *g, uint64_t bytes);
dhs_status dhs_ref_gpu_step_weights(dhs_ref_gpu *g, uint64_t bytes);

/* ---- profiling (dhs bench serve's per-step breakdown): events on the
   model's stream. dhs_ref_gpu_prof_enable(g, n) makes room for n marks per
   collection (0: off). dhs_ref_gpu_prof_begin arms the marks of one profiled
   stretch (outside it, and while capturing, marks are no-ops); a mark records an event that
   opens an interval of `phase` (DHS_REF_PH_*), ending at the next mark; the
   model marks DHS_REF_PH_TOPK itself inside dhs_ref_gpu_step_select, the
   engine marks the rest (and the library's resolver phases through
   dhs_cuda_set_marker). dhs_ref_gpu_prof_collect synchronises, adds each
   interval's microseconds to us[phase] and disarms; DHS_ERR_STATE when marks
   were lost (more than n). A graph round is timed as a whole. */
/* phases: DHS_REF_PH_* in model/model.h */
dhs_status dhs_ref_gpu_prof_enable(dhs_ref_gpu *g, int32_t max_marks);
dhs_status dhs_ref_gpu_prof_begin(dhs_ref_gpu *g);
void dhs_ref_gpu_prof_mark(dhs_ref_gpu *g, int32_t phase);
dhs_status dhs_ref_gpu_prof_collect(dhs_ref_gpu *g, double *us, int32_t n_phases);
/* HBM read + write GB/s of a device-to-device copy of `bytes` (median of 5;
   the attention roofline); 0 on an error or without CUDA */
double dhs_ref_gpu_hbm_gbps(uint64_t bytes);

/* The split-K sparse attention alone (model/attn_kern.cuh), on device
   buffers, for tests and benchmarks: nq queries of nh heads, k entries each;
   aq_dev [nq][nh][576] queries, aidx_dev [nq][k] valid locations in entry
   order, anv_dev [nq] their count (<= 0: the query's ao is left alone),
   base_dev [nq] row bases, lut_dev the 256 FP8 decodes; partials pm_dev,
   ps_dev [nq][dhs_ref_gpu_attn_chunks(k)][nh] floats, po_dev the same x 512;
   ao_dev [nq][nh][512]. cnt_dev: int32 [nq], zero before the first call and
   left zero by each: one launch whose last chunk per query merges (the
   model's path); NULL: a second kernel merges (the same bits). Asynchronous on stream (NULL: the default stream).
   DHS_ERR_INVALID_ARG for nh outside 1..2 or k outside 1..2048. */
int32_t dhs_ref_gpu_attn_chunks(int32_t k);
/* The selection kernels alone, on device buffers, for benchmarks: which = 0:
   the indexer scores of nq queries over positions 0..pos_dev[q] (FP8 keys
   kcodes_dev[q] / kscales_dev[q] in the model's layout, idx_heads x idx_dim
   queries iq_dev, weights iw_dev) into scores_dev [nq][max_positions], the
   grid the device step uses; 1: the model's top-k (k_topk) of those scores
   into sel_dev [nq][k]; 2: the library's fused top-k (dhs_cuda_topk_fused_n)
   of the same, NaN counts into nanc_dev [nq]; 3: the scores of 0 with every
   query scored alone (no sharing of keys between queries with the same
   kcodes/kscales pointers: the order before the grouping, same bits); 4:
   the scores of 0 by the previous kernel (k_scores_fp8: table decoding, one
   position per thread; same bits; with DHS_REF_SCORES_PREV=1 in the
   environment the model, and 0 and 3 here, use it too); 5: the scores of 0
   by the new kernel with its keys staged through registers instead of
   cp.async (same bits; DHS_REF_SCORES_SYNC=1: the model uses it).
   Asynchronous on stream. DHS_ERR_INVALID_ARG for sizes outside the
   model's limits. */
#define DHS_REF_GPU_SCORES 0
#define DHS_REF_GPU_TOPK 1
#define DHS_REF_GPU_TOPK_FUSED 2
#define DHS_REF_GPU_SCORES_ALONE 3
#define DHS_REF_GPU_SCORES_PREV 4
#define DHS_REF_GPU_SCORES_SYNC 5
dhs_status dhs_ref_gpu_select_kernel(void *stream, int32_t which, int32_t nq, int32_t idx_heads, int32_t idx_dim,
                                     int32_t k, int64_t max_positions, const int64_t *pos_dev, const float *iq_dev,
                                     const float *iw_dev, void *const *kcodes_dev, float *const *kscales_dev,
                                     const float *lut_dev, float *scores_dev, int32_t *sel_dev, int32_t *nanc_dev);
dhs_status dhs_ref_gpu_attn(void *stream, int32_t nq, int32_t nh, int32_t k, float att_scale, int32_t exp_portable,
                            const uint8_t *const *base_dev, const float *aq_dev, const int32_t *aidx_dev,
                            const int32_t *anv_dev, const float *lut_dev, float *pm_dev, float *ps_dev,
                            float *po_dev, int32_t *cnt_dev, float *ao_dev);

#ifdef __cplusplus
}
#endif
#endif
