/* test_gpu_engine.c - the engine's GPU path (engine.c gpu_target: query slots
 * q = i*k_max + j, device key stores, resident device rows, rows copied back
 * and written to the library, selections back, locations up, logits back)
 * with the GPU API of model/gpu.h emulated on the CPU by the model's own
 * functions. This test defines every dhs_ref_gpu_* symbol itself, so neither
 * the CUDA kernels nor the stubs are linked; it checks the orchestration, not
 * the kernels (test_gpu_model does that on a GPU):
 * - emulated-GPU resident and hierarchical engines (CPU backend: reclaim,
 *   speculation, late copies, invariants) give byte-identical logits;
 * - their tokens equal a plain CPU run's, and per round the emulated-GPU
 *   logits equal the CPU engine's bit for bit;
 * - the device step (engine.c gpu_step, docs/MODEL.md "Device step": the
 *   round's inputs and pointer tables uploaded once, rows written in place at
 *   dhs_tail_locations, dhs_resolve_device on the CPU backend's device
 *   resolver, logits back once) gives the same: identical to resident, tokens
 *   equal to the CPU run's, and no call of the per-layer host API. The CUDA
 *   graph (capture) is not emulated: the CPU backend executes library calls
 *   at once, so test_gpu_model checks --step graph on a GPU;
 * - compact tables (the default control plane): a batch item's pointer tables are uploaded again
 *   exactly when its session changed; the row destinations computed from the uploaded tail
 *   locations; freed device blocks stay poisoned so a stale table entry is seen; the CPU engine,
 *   compact and full tables (cfg.full_tables) equal bit for bit (test_tables);
 * - topk_impl fused (docs/MODEL.md "Top-k"): the emulation selects like
 *   refmodel.cu then does - one batched call of the fused top-k's CPU twin
 *   (dhs_topk_fused_ref_batch) over a [q][max_positions] scores buffer with
 *   counts pos[q] + 1 (n_of = pos, n_add = 1) - host and device steps: the
 *   same tokens as the CPU run (which uses dhs_topk_fused_ref);
 * - the GPU model's streamed prefill (model/lsprefill.c dhs_ref_prefill_streamed_gpu,
 *   queues emulated: copies at once, a wait must name a recorded event): history,
 *   keys and logits byte-identical to the CPU's full-residency prefill, and its
 *   cross-queue waits exactly the schedule's cross-queue dependencies.
 * Env: DHS_TEST_SEED. `test_gpu_engine --bench-control --help`: the control plane's host time per
 * round, full against compact tables, the step's launches doing nothing.
 */
#include <inttypes.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev/topk_spec.h"
#include "model/deploy.h"
#include "model/gpu.h"
#include "model/lsprefill.h"
#include "model/model.h"
#include "model/run.h"
#include "sim/tracegen.h"

#include "test_help.h"
#include "test_prefill.h"

/* ---------------------------------------------------------------- the emulation */
static const dhs_ref_model *g_model; /* the model the emulation computes with */
static int g_emulated_calls;
static int g_host_api_calls; /* dhs_ref_gpu_begin / rows / select / attend / logits */
static int g_step_calls;     /* dhs_ref_gpu_step_* launches */
static int g_fused_selects;  /* selections through the fused top-k's CPU twin (desc.topk_fused) */
static int g_split_creates;  /* GPU models created with desc.topk_fused == 2 (dhs_cuda_topk_split_n) */
static int g_page_selects;   /* selections whose locations came from page tables (step_select_pages) */

struct dhs_ref_gpu {
    const dhs_ref_model *m;
    int32_t maxq, nq, d, k, V;
    int32_t *tok;
    int64_t *pos;
    float *x, *xn, *logits;
    int32_t *sel, *loc;
    uint8_t *stage;
    dhs_ref_scratch *sc;
    int32_t L;
    int32_t *tok_h;         /* device step: pinned mirrors (host views) */
    int64_t *pos_h;
    void **tab_h, **tab;    /* [4][L][maxq]: mirror and the "device" copy */
    float *logits_h;
    int fused;              /* desc.topk_fused: what refmodel.cu does with dhs_cuda_topk_fused_n, on its CPU twin */
    int64_t maxpos;
    float *scores;          /* fused: [maxq][maxpos] */
    int32_t *nanc;          /* fused: [maxq] */
    float *cs_h;            /* device step: the engine's RoPE values [maxq][64] */
    int compact, rows_at_pos, n_rsrc; /* dhs_ref_gpu_step_compact */
    int32_t *lsrc;          /* [L] */
    int32_t *rloc_h, *rloc; /* [n_rsrc][maxq]: mirror and the "device" copy */
    int rloc_dev;           /* dhs_ref_gpu_step_rloc_device: the library writes rloc */
    int in_pending;         /* refmodel.cu: the step reads tokens / positions / RoPE from the mirrors itself;
                               set by the upload, read by embed, cleared by step_wait */
    uint64_t in_waits;      /* dhs_ref_gpu_step_inputs calls made while a step still read the mirrors */
    int probe_par;          /* refmodel.cu's device-side probe bit (dhs_ref_gpu_probe_copy / _flip) */
};

/* device allocations (dhs_ref_gpu_alloc): a freed one is poisoned and kept (never reused) until the
   test's model goes, so a table entry naming a freed key store or freed rows is seen, not read */
typedef struct { uint8_t *p; uint64_t bytes; int live; } g_block;
static g_block *g_blocks;
static int64_t g_nblocks, g_capblocks;
static uint64_t g_dead_refs;  /* table pointers of valid queries into freed device memory */
static uint64_t g_ptr_checks; /* table pointers checked */
static uint64_t g_bad_rowdst; /* compact tables: valid queries with a negative row location (never uploaded: the
                                 poison) or no row destination; their rows go to the staging buffer instead */

/* -1: inside a freed block (that many bytes from p), 1: inside a live one, 0: not ours (the pool) */
static int ptr_state(const void *ptr, uint64_t bytes)
{
    const uint8_t *x = ptr;
    for (int64_t i = 0; i < g_nblocks; i++)
        if (x >= g_blocks[i].p && x < g_blocks[i].p + g_blocks[i].bytes)
            return g_blocks[i].live && x + bytes <= g_blocks[i].p + g_blocks[i].bytes ? 1 : -1;
    return 0;
}

static int g_noop;

static void check_ptr(const void *ptr, uint64_t bytes)
{
    if (!ptr || g_noop) return;
    g_ptr_checks++;
    g_dead_refs += ptr_state(ptr, bytes) < 0;
}

static void blocks_release(void)
{
    for (int64_t i = 0; i < g_nblocks; i++) free(g_blocks[i].p);
    free(g_blocks);
    g_blocks = NULL;
    g_nblocks = g_capblocks = 0;
}

/* --bench-control (g_noop): the step's launches do nothing (the control plane is what is timed) */

/* the device step's uploaded RoPE rows that differ from dhs_ref_rope_cs of their position */
static uint64_t g_rope_bad, g_rope_rows;
/* steps whose inputs mirrors (tokens, positions; RoPE poisoned when read) changed between the step's read
   and dhs_ref_gpu_step_wait: on the GPU the step might have read the new values */
static uint64_t g_inputs_raced, g_inputs_steps;

int dhs_ref_gpu_available(void) { return 1; }
const char *dhs_ref_gpu_error(const dhs_ref_gpu *g)
{
    (void)g;
    return "emulated";
}

void dhs_ref_gpu_destroy(dhs_ref_gpu *g)
{
    if (!g) return;
    free(g->tok);
    free(g->pos);
    free(g->x);
    free(g->xn);
    free(g->logits);
    free(g->sel);
    free(g->loc);
    free(g->stage);
    dhs_ref_scratch_destroy(g->sc);
    free(g->tok_h);
    free(g->pos_h);
    free(g->tab_h);
    free(g->tab);
    free(g->logits_h);
    free(g->scores);
    free(g->nanc);
    free(g->cs_h);
    free(g->lsrc);
    free(g->rloc_h);
    free(g->rloc);
    free(g);
}

dhs_status dhs_ref_gpu_create(const dhs_ref_gpu_desc *d, void *stream, dhs_ref_gpu **out)
{
    (void)stream;
    if (!g_model || !d->fp8_lut || !d->rope_cs) return DHS_ERR_INVALID_ARG;
    dhs_ref_gpu *g = calloc(1, sizeof *g);
    if (!g) return DHS_ERR_NOMEM;
    g->m = g_model;
    g->maxq = d->max_queries;
    g->d = d->d_model;
    g->k = d->topk;
    g->V = d->vocab;
    size_t Q = (size_t)g->maxq;
    g->tok = calloc(Q, sizeof(int32_t));
    g->pos = calloc(Q, sizeof(int64_t));
    g->x = calloc(Q * (size_t)g->d, sizeof(float));
    g->xn = calloc(Q * (size_t)g->d, sizeof(float));
    g->logits = calloc(Q * (size_t)g->V, sizeof(float));
    g->sel = calloc(Q * (size_t)g->k, sizeof(int32_t));
    g->loc = calloc(Q * (size_t)g->k, sizeof(int32_t));
    g->stage = aligned_alloc(16, Q * DHS_REF_ROW_BYTES);
    g->sc = dhs_ref_scratch_create(g->m);
    g->L = d->n_layers;
    g->tok_h = calloc(Q, sizeof(int32_t));
    g->pos_h = calloc(Q, sizeof(int64_t));
    g->tab_h = calloc(4 * (size_t)g->L * Q, sizeof(void *));
    g->tab = calloc(4 * (size_t)g->L * Q, sizeof(void *));
    g->logits_h = calloc(Q * (size_t)g->V, sizeof(float));
    g->cs_h = calloc(Q * 64, sizeof(float));
    g->fused = d->topk_fused != 0;
    g_split_creates += d->topk_fused == 2;
    /* the locality device: the run set it on its model after creating ours (same config) */
    if (d->iq_synth) dhs_ref_model_set_iq_synth((dhs_ref_model *)(uintptr_t)g_model, d->iq_synth);
    g->maxpos = d->max_positions;
    if (g_noop && g->sel) /* --bench-control: every query selects rows 0 .. k-1 (the step selects nothing) */
        for (size_t q = 0; q < Q; q++)
            for (int32_t i = 0; i < g->k; i++) g->sel[q * (size_t)g->k + (size_t)i] = i;
    if (g->fused) {
        g->scores = calloc(Q * (size_t)g->maxpos, sizeof(float));
        g->nanc = calloc(Q, sizeof(int32_t));
        if (!g->scores || !g->nanc) {
            dhs_ref_gpu_destroy(g);
            return DHS_ERR_NOMEM;
        }
    }
    if (!g->tok || !g->pos || !g->x || !g->xn || !g->logits || !g->sel || !g->loc || !g->stage || !g->sc || !g->tok_h ||
        !g->pos_h || !g->tab_h || !g->tab || !g->logits_h) {
        dhs_ref_gpu_destroy(g);
        return DHS_ERR_NOMEM;
    }
    *out = g;
    return DHS_OK;
}

dhs_status dhs_ref_gpu_alloc(dhs_ref_gpu *g, uint64_t bytes, void **dev)
{
    (void)g;
    *dev = NULL;
    if (g_nblocks == g_capblocks) {
        int64_t cap = g_capblocks ? 2 * g_capblocks : 256;
        g_block *nb = realloc(g_blocks, sizeof *nb * (size_t)cap);
        if (!nb) return DHS_ERR_DEVICE_NOMEM;
        g_blocks = nb;
        g_capblocks = cap;
    }
    uint64_t b = (bytes + 15) / 16 * 16;
    *dev = aligned_alloc(16, b ? b : 16);
    if (!*dev) return DHS_ERR_DEVICE_NOMEM;
    g_blocks[g_nblocks++] = (g_block){*dev, b ? b : 16, 1};
    return DHS_OK;
}

void dhs_ref_gpu_free(dhs_ref_gpu *g, void *dev)
{
    (void)g;
    for (int64_t i = 0; i < g_nblocks; i++)
        if (g_blocks[i].p == dev && g_blocks[i].live) {
            g_blocks[i].live = 0;
            memset(dev, 0xA5, g_blocks[i].bytes);
            return;
        }
    free(dev); /* not a block of ours: cannot happen */
}

dhs_status dhs_ref_gpu_upload(dhs_ref_gpu *g, void *dev, const void *host, uint64_t bytes)
{
    (void)g;
    memcpy(dev, host, bytes);
    return DHS_OK;
}

/* the streamed prefill's pinned host memory and queues (model/lsprefill.c):
   copies run at once; an event must be recorded before a queue waits on it */
static int64_t g_qn;       /* events made by dhs_ref_gpu_queues */
static uint8_t *g_qrec;    /* [g_qn] recorded */
static int g_qbad;         /* waits on an event not recorded yet, or out of range */
static int64_t g_qwaits;   /* cross-queue waits */

dhs_status dhs_ref_gpu_host_alloc(dhs_ref_gpu *g, uint64_t bytes, void **host)
{
    (void)g;
    *host = aligned_alloc(16, (bytes + 15) / 16 * 16);
    return *host ? DHS_OK : DHS_ERR_NOMEM;
}
void dhs_ref_gpu_host_free(dhs_ref_gpu *g, void *host)
{
    (void)g;
    free(host);
}
dhs_status dhs_ref_gpu_queues(dhs_ref_gpu *g, int64_t n_events)
{
    (void)g;
    free(g_qrec);
    g_qrec = calloc((size_t)(n_events ? n_events : 1), 1);
    g_qn = n_events;
    return g_qrec ? DHS_OK : DHS_ERR_NOMEM;
}
dhs_status dhs_ref_gpu_queue_copy(dhs_ref_gpu *g, int32_t queue, void *dst, const void *src, uint64_t bytes)
{
    (void)g;
    if (queue < 0 || queue > 2) return DHS_ERR_INVALID_ARG;
    memcpy(dst, src, bytes);
    return DHS_OK;
}
dhs_status dhs_ref_gpu_probe_copy(dhs_ref_gpu *g, void *dst0, void *dst1, const void *src, uint64_t bytes)
{
    if (!dst0 || !dst1 || !src || (bytes & 3u)) return DHS_ERR_INVALID_ARG;
    if (!g_noop) memcpy(g->probe_par ? dst1 : dst0, src, bytes);
    return DHS_OK;
}
dhs_status dhs_ref_gpu_probe_flip(dhs_ref_gpu *g)
{
    g->probe_par ^= 1;
    return DHS_OK;
}
dhs_status dhs_ref_gpu_queue_record(dhs_ref_gpu *g, int32_t queue, int64_t ev)
{
    (void)g;
    if (queue < 0 || queue > 2 || ev < 0 || ev >= g_qn) return DHS_ERR_INVALID_ARG;
    g_qrec[ev] = 1;
    return DHS_OK;
}
dhs_status dhs_ref_gpu_queue_wait(dhs_ref_gpu *g, int32_t queue, int64_t ev)
{
    (void)g;
    g_qwaits++;
    if (queue < 0 || queue > 2 || ev < 0 || ev >= g_qn || !g_qrec[ev]) {
        g_qbad++;
        return DHS_ERR_STATE;
    }
    return DHS_OK;
}
dhs_status dhs_ref_gpu_queues_sync(dhs_ref_gpu *g)
{
    (void)g;
    return DHS_OK;
}

dhs_status dhs_ref_gpu_memset(dhs_ref_gpu *g, void *dev, int value, uint64_t bytes)
{
    (void)g;
    memset(dev, value, bytes);
    return DHS_OK;
}

dhs_status dhs_ref_gpu_begin(dhs_ref_gpu *g, int32_t nq, const int32_t *tokens, const int64_t *pos)
{
    g_host_api_calls++;
    if (nq < 1 || nq > g->maxq) return DHS_ERR_INVALID_ARG;
    g->nq = nq;
    g_emulated_calls++;
    for (int32_t q = 0; q < nq; q++) {
        g->tok[q] = tokens[q];
        g->pos[q] = pos[q];
        if (pos[q] >= 0) dhs_ref_embed(g->m, tokens[q], g->x + (int64_t)q * g->d);
    }
    return DHS_OK;
}

/* a key store at device address (codes, scales) seen as dhs_ref_keys */
static dhs_ref_keys keys_view(const dhs_ref_model *m, void *codes, void *scales)
{
    const dhs_ref_cfg *c = dhs_ref_model_cfg(m);
    dhs_ref_keys k;
    memset(&k, 0, sizeof k);
    k.dim = c->idx_dim;
    k.fp8 = c->key_fp8;
    k.cap = (int64_t)1 << 40; /* capacity is the engine's business */
    if (k.fp8) {
        k.codes = codes;
        k.scales = scales;
    } else {
        k.data = codes;
    }
    return k;
}

dhs_status dhs_ref_gpu_rows(dhs_ref_gpu *g, int32_t l, void *const *rowdst, void *const *kcodes, void *const *kscales,
                            uint8_t *rows_host)
{
    g_host_api_calls++;
    const dhs_ref_layer_info *li = dhs_ref_layer(g->m, l);
    float lat[DHS_REF_LAT], key[DHS_REF_MAX_IDX_DIM];
    for (int32_t q = 0; q < g->nq; q++) {
        if (g->pos[q] < 0) continue;
        float *xn = g->xn + (int64_t)q * g->d;
        dhs_ref_rmsnorm(g->m, g->x + (int64_t)q * g->d, xn);
        dhs_ref_latent(g->m, l, g->pos[q], xn, lat);
        dhs_ref_row_encode(lat, rowdst ? (uint8_t *)rowdst[q] : g->stage + (int64_t)q * DHS_REF_ROW_BYTES);
        if (li->producer) {
            dhs_ref_keys kv = keys_view(g->m, kcodes[q], kscales[q]);
            dhs_ref_index_key(g->m, l, xn, key);
            dhs_ref_keys_set(&kv, g->pos[q], key);
        }
    }
    if (rows_host) memcpy(rows_host, g->stage, (size_t)g->nq * DHS_REF_ROW_BYTES);
    return DHS_OK;
}

/* fused: the model's scores of every valid query over 0..pos[q] into the
   [q][maxpos] buffer, then one batched call with the kernel's arguments
   (counts = pos + 1: n_of = pos, n_add = 1; pos < 0 skipped, its sel row
   untouched), as refmodel.cu launch_topk does; a NaN fails the pass */
static dhs_status fused_select(dhs_ref_gpu *g, int32_t l, void *const *kc, void *const *ks)
{
    g_fused_selects++;
    for (int32_t q = 0; q < g->nq; q++) {
        if (g->pos[q] < 0) continue;
        dhs_ref_keys kv = keys_view(g->m, kc[q], ks[q]);
        dhs_ref_index_scores_at(g->m, l, g->pos[q], g->xn + (int64_t)q * g->d, &kv, g->pos[q] + 1,
                                g->scores + (int64_t)q * g->maxpos);
    }
    dhs_status st = dhs_topk_fused_ref_batch(g->scores, g->maxpos, g->nq, g->maxpos, g->pos, 1, g->k, NULL, 0, g->sel, NULL,
                                             g->nanc);
    if (st != DHS_OK) return st;
    for (int32_t q = 0; q < g->nq; q++)
        if (g->nanc[q]) return DHS_ERR_INVALID_ARG;
    return DHS_OK;
}

dhs_status dhs_ref_gpu_select(dhs_ref_gpu *g, int32_t l, void *const *kcodes, void *const *kscales, int32_t *sel_host)
{
    g_host_api_calls++;
    if (g->fused) {
        dhs_status st = fused_select(g, l, kcodes, kscales);
        if (st != DHS_OK) return st;
        if (sel_host) memcpy(sel_host, g->sel, sizeof(int32_t) * (size_t)g->nq * (size_t)g->k);
        return DHS_OK;
    }
    for (int32_t q = 0; q < g->nq; q++) {
        if (g->pos[q] < 0) continue;
        dhs_ref_keys kv = keys_view(g->m, kcodes[q], kscales[q]);
        if (dhs_ref_select(g->m, l, g->pos[q], g->xn + (int64_t)q * g->d, &kv, g->sel + (int64_t)q * g->k, g->sc) < 0)
            return DHS_ERR_NOMEM;
    }
    if (sel_host) memcpy(sel_host, g->sel, sizeof(int32_t) * (size_t)g->nq * (size_t)g->k);
    return DHS_OK;
}

dhs_status dhs_ref_gpu_attend(dhs_ref_gpu *g, int32_t l, const void *const *base, const int32_t *loc_host)
{
    g_host_api_calls++;
    const int32_t *loc = g->sel;
    if (loc_host) {
        memcpy(g->loc, loc_host, sizeof(int32_t) * (size_t)g->nq * (size_t)g->k);
        loc = g->loc;
    }
    for (int32_t q = 0; q < g->nq; q++) {
        if (g->pos[q] < 0) continue;
        dhs_ref_attend_mlp(g->m, l, g->pos[q], g->xn + (int64_t)q * g->d, base[q], DHS_REF_ROW_BYTES,
                           loc + (int64_t)q * g->k, g->x + (int64_t)q * g->d, g->sc);
    }
    return DHS_OK;
}

dhs_status dhs_ref_gpu_logits(dhs_ref_gpu *g, float *logits_host)
{
    g_host_api_calls++;
    for (int32_t q = 0; q < g->nq; q++)
        if (g->pos[q] >= 0) dhs_ref_logits(g->m, g->x + (int64_t)q * g->d, g->logits + (int64_t)q * g->V);
    memcpy(logits_host, g->logits, sizeof(float) * (size_t)g->nq * (size_t)g->V);
    return DHS_OK;
}

/* the device step: the same model functions, every input read from the
   "device" copies of the tables (what the upload copied) */
static void **tab_at(dhs_ref_gpu *g, int which, int32_t l) { return g->tab + ((size_t)which * (size_t)g->L + (size_t)l) * (size_t)g->maxq; }

dhs_status dhs_ref_gpu_step_inputs(dhs_ref_gpu *g, dhs_ref_gpu_step_in *in)
{
    if (g->in_pending) { /* refmodel.cu synchronises with the step here: counted, the engine never should */
        g->in_waits++;
        g->in_pending = 0;
    }
    const size_t LQ = (size_t)g->L * (size_t)g->maxq;
    in->tokens = g->tok_h;
    in->pos = g->pos_h;
    in->rowdst = g->tab_h;
    in->base = g->tab_h + LQ;
    in->kcodes = g->tab_h + 2 * LQ;
    in->kscales = g->tab_h + 3 * LQ;
    in->rope = g->cs_h;
    in->stride = g->maxq;
    in->rloc = g->rloc_h;
    return DHS_OK;
}

static uint64_t g_table_cols; /* columns copied by dhs_ref_gpu_step_tables */

dhs_status dhs_ref_gpu_step_compact(dhs_ref_gpu *g, const int32_t *layer_src, int32_t n_src, int rows_at_pos)
{
    if (g->compact) return DHS_ERR_STATE;
    if (!layer_src || n_src < 1) return DHS_ERR_INVALID_ARG;
    for (int32_t l = 0; l < g->L; l++)
        if (layer_src[l] < 0 || layer_src[l] >= n_src) return DHS_ERR_INVALID_ARG;
    g->lsrc = malloc(sizeof(int32_t) * (size_t)g->L);
    if (!g->lsrc) return DHS_ERR_NOMEM;
    memcpy(g->lsrc, layer_src, sizeof(int32_t) * (size_t)g->L);
    if (!rows_at_pos) {
        g->rloc_h = malloc(sizeof(int32_t) * (size_t)n_src * (size_t)g->maxq);
        g->rloc = malloc(sizeof(int32_t) * (size_t)n_src * (size_t)g->maxq);
        if (!g->rloc_h || !g->rloc) return DHS_ERR_NOMEM;
        memset(g->rloc_h, 0xA5, sizeof(int32_t) * (size_t)n_src * (size_t)g->maxq);
    }
    g->n_rsrc = n_src;
    g->rows_at_pos = rows_at_pos;
    g->compact = 1;
    return DHS_OK;
}

int32_t *dhs_ref_gpu_step_rloc_device(dhs_ref_gpu *g)
{
    if (!g->compact || g->rows_at_pos) return NULL;
    g->rloc_dev = 1;
    return g->rloc;
}

dhs_status dhs_ref_gpu_step_tables(dhs_ref_gpu *g, int32_t q0, int32_t n)
{
    if (!g->compact) return DHS_ERR_STATE;
    if (q0 < 0 || n < 1 || q0 + n > g->maxq) return DHS_ERR_INVALID_ARG;
    g_table_cols += (uint64_t)n;
    if (g_noop) return DHS_OK;
    const size_t LQ = (size_t)g->L * (size_t)g->maxq;
    for (size_t r = 0; r < 3 * (size_t)g->L; r++) /* base, kcodes, kscales of every layer: the 2D copy */
        memcpy(g->tab + LQ + r * (size_t)g->maxq + (size_t)q0, g->tab_h + LQ + r * (size_t)g->maxq + (size_t)q0,
               sizeof(void *) * (size_t)n);
    return DHS_OK;
}

void dhs_ref_gpu_upload_times(const dhs_ref_gpu *g, double *copy_s, double *event_s)
{
    (void)g; /* the emulation's upload is a memcpy: no copy call or event to time */
    *copy_s = *event_s = 0.0;
}

dhs_status dhs_ref_gpu_step_upload(dhs_ref_gpu *g, int32_t nq)
{
    if (nq < 1 || nq > g->maxq) return DHS_ERR_INVALID_ARG;
    g->nq = nq;
    g->in_pending = 1; /* tokens, positions, RoPE values: read by the step (embed) from the mirrors */
    if (g_noop) return DHS_OK; /* --bench-control: a real upload is a DMA the host only issues */
    if (g->compact) { /* the row locations (rewritten every round: poisoned after the copy); the tables
                         stay on the "device" as dhs_ref_gpu_step_tables left them */
        if (!g->rows_at_pos && !g->rloc_dev) {
            for (int32_t r = 0; r < g->n_rsrc; r++)
                memcpy(g->rloc + (size_t)r * (size_t)g->maxq, g->rloc_h + (size_t)r * (size_t)g->maxq,
                       sizeof(int32_t) * (size_t)nq);
            memset(g->rloc_h, 0xA5, sizeof(int32_t) * (size_t)g->n_rsrc * (size_t)g->maxq);
        }
        return DHS_OK;
    }
    for (size_t r = 0; r < 4 * (size_t)g->L; r++) /* the first nq of every row, as the 2D copy */
        memcpy(g->tab + r * (size_t)g->maxq, g->tab_h + r * (size_t)g->maxq, sizeof(void *) * (size_t)nq);
    /* the host may rewrite its mirrors now (the GPU's copy is asynchronous; the engine must not
       rely on that): poison them so a late read through them would show */
    memset(g->tab_h, 0xA5, sizeof(void *) * 4 * (size_t)g->L * (size_t)g->maxq);
    return DHS_OK;
}

/* deployment weights: the buffer's size, the bytes read, and what the engine owes for the steps so far
   (g_deploy set by the test: every step of n valid queries reads L * floor(step_bytes(n) / L)) */
static const dhs_deploy *g_deploy;
static uint64_t g_wbuf_bytes, g_weight_bytes, g_weight_owed;
static int g_weight_too_large;

dhs_status dhs_ref_gpu_weights_alloc(dhs_ref_gpu *g, uint64_t bytes)
{
    (void)g;
    g_wbuf_bytes = bytes;
    return DHS_OK;
}

dhs_status dhs_ref_gpu_step_weights(dhs_ref_gpu *g, uint64_t bytes)
{
    (void)g;
    g_step_calls++;
    if (bytes > g_wbuf_bytes) {
        g_weight_too_large++;
        return DHS_ERR_INVALID_ARG;
    }
    g_weight_bytes += bytes;
    return DHS_OK;
}

/* refmodel.cu's k_inputs: the step reads the inputs block from the pinned mirrors as its first kernel,
   after the upload and before dhs_ref_gpu_step_wait (the engine must not rewrite them in between) */
static void step_read_inputs(dhs_ref_gpu *g)
{
    const int32_t nq = g->nq;
    memcpy(g->tok, g->tok_h, sizeof(int32_t) * (size_t)nq);
    memcpy(g->pos, g->pos_h, sizeof(int64_t) * (size_t)nq);
    for (int32_t q = 0; q < nq; q++) { /* what refmodel.cu reads as RoPE: the engine's values */
        if (g->pos_h[q] < 0) continue;
        float want[64];
        dhs_ref_rope_cs(g->pos_h[q], want, want + 32);
        g_rope_bad += memcmp(g->cs_h + (int64_t)q * 64, want, sizeof want) != 0;
        g_rope_rows++;
    }
    memset(g->cs_h, 0xA5, sizeof(float) * 64 * (size_t)g->maxq); /* a stale value would show next round */
}

int32_t dhs_ref_gpu_step_stride(const dhs_ref_gpu *g) { return g->maxq; }

void dhs_ref_gpu_step_counts(const dhs_ref_gpu *g, uint64_t *inputs_waits, int *inputs_in_step)
{
    *inputs_waits = g->in_waits;
    *inputs_in_step = 1;
}

dhs_status dhs_ref_gpu_step_embed(dhs_ref_gpu *g)
{
    g_step_calls++;
    g_emulated_calls++;
    if (g_noop) return DHS_OK;
    if (!g->in_pending) return DHS_ERR_STATE; /* a step without an upload since the last wait */
    step_read_inputs(g);
    if (g->compact) /* refmodel.cu k_rowdst: rowdst = base + (int64_t)row * 656 */
        for (int32_t l = 0; l < g->L; l++)
            for (int32_t q = 0; q < g->nq; q++) {
                void **rd = tab_at(g, 0, l), **base = tab_at(g, 1, l);
                const int64_t t = g->pos[q];
                const int64_t r = g->rows_at_pos ? t : (int64_t)g->rloc[(size_t)g->lsrc[l] * (size_t)g->maxq + (size_t)q];
                g_bad_rowdst += t >= 0 && r < 0;
                rd[q] = t < 0 || r < 0 ? NULL : (uint8_t *)base[q] + r * DHS_REF_ROW_BYTES;
            }
    if (g->compact && g->rloc_dev) /* written by the library every round: a location it skipped would show */
        memset(g->rloc, 0xA5, sizeof(int32_t) * (size_t)g->n_rsrc * (size_t)g->maxq);
    if (g_deploy) {
        int32_t valid = 0;
        for (int32_t q = 0; q < g->nq; q++) valid += g->pos[q] >= 0;
        g_weight_owed += (uint64_t)g->L * (uint64_t)(dhs_deploy_step_bytes(g_deploy, valid, NULL) / g->L);
    }
    for (int32_t q = 0; q < g->nq; q++)
        if (g->pos[q] >= 0) dhs_ref_embed(g->m, g->tok[q], g->x + (int64_t)q * g->d);
    return DHS_OK;
}

dhs_status dhs_ref_gpu_step_rows(dhs_ref_gpu *g, int32_t l)
{
    g_step_calls++;
    const dhs_ref_layer_info *li = dhs_ref_layer(g->m, l);
    void **rd = tab_at(g, 0, l), **kc = tab_at(g, 2, l), **ks = tab_at(g, 3, l);
    float lat[DHS_REF_LAT], key[DHS_REF_MAX_IDX_DIM];
    for (int32_t q = 0; q < g->nq; q++) {
        if (g->pos[q] < 0) continue;
        check_ptr(rd[q], DHS_REF_ROW_BYTES);
        if (li->producer) {
            check_ptr(kc[q], 1);
            check_ptr(ks[q], 4);
        }
        if (g_noop) continue;
        float *xn = g->xn + (int64_t)q * g->d;
        dhs_ref_rmsnorm(g->m, g->x + (int64_t)q * g->d, xn);
        dhs_ref_latent(g->m, l, g->pos[q], xn, lat);
        if (!rd[q]) g_bad_rowdst++;
        dhs_ref_row_encode(lat, rd[q] ? (uint8_t *)rd[q] : g->stage + (int64_t)q * DHS_REF_ROW_BYTES);
        if (li->producer) {
            dhs_ref_keys kv = keys_view(g->m, kc[q], ks[q]);
            dhs_ref_index_key(g->m, l, xn, key);
            dhs_ref_keys_set(&kv, g->pos[q], key);
        }
    }
    return DHS_OK;
}

/* profiling marks: the emulated "time" is the count of emulated launches
   (g_step_calls), so each phase's total is an exact count the test predicts */
static int g_prof_cap, g_prof_n, g_prof_lost, g_prof_armed;
static int32_t g_prof_ph[4096];
static int g_prof_tick[4096];
dhs_status dhs_ref_gpu_prof_enable(dhs_ref_gpu *g, int32_t max_marks)
{
    (void)g;
    if (max_marks < 0 || max_marks > 4096) return DHS_ERR_INVALID_ARG;
    g_prof_cap = max_marks;
    g_prof_n = g_prof_lost = 0;
    return DHS_OK;
}
dhs_status dhs_ref_gpu_prof_begin(dhs_ref_gpu *g)
{
    if (!g || !g_prof_cap) return DHS_ERR_STATE;
    g_prof_n = g_prof_lost = 0;
    g_prof_armed = 1;
    return DHS_OK;
}
void dhs_ref_gpu_prof_mark(dhs_ref_gpu *g, int32_t phase)
{
    if (!g || !g_prof_armed) return;
    if (g_prof_n >= g_prof_cap) {
        g_prof_lost++;
        return;
    }
    g_prof_ph[g_prof_n] = phase;
    g_prof_tick[g_prof_n++] = g_step_calls;
}
dhs_status dhs_ref_gpu_prof_collect(dhs_ref_gpu *g, double *us, int32_t n_phases)
{
    (void)g;
    g_prof_armed = 0;
    if (g_prof_lost) {
        g_prof_n = g_prof_lost = 0;
        return DHS_ERR_STATE;
    }
    for (int i = 0; i + 1 < g_prof_n; i++)
        if (g_prof_ph[i] >= 0 && g_prof_ph[i] < n_phases) us[g_prof_ph[i]] += g_prof_tick[i + 1] - g_prof_tick[i];
    g_prof_n = 0;
    return DHS_OK;
}

dhs_status dhs_ref_gpu_step_select(dhs_ref_gpu *g, int32_t l)
{
    g_step_calls++;                          /* the indexer's scores */
    dhs_ref_gpu_prof_mark(g, DHS_REF_PH_TOPK); /* as the kernel does, between scores and top-k */
    g_step_calls++;                          /* the top-k */
    void **kc = tab_at(g, 2, l), **ks = tab_at(g, 3, l);
    if (g_noop) return DHS_OK; /* the selections --bench-control set once */
    for (int32_t q = 0; q < g->nq; q++) {
        int32_t *sq = g->sel + (int64_t)q * g->k;
        if (g->pos[q] < 0) { /* padding: the resolver must not read it */
            for (int32_t i = 0; i < g->k; i++) sq[i] = INT32_MAX;
            continue;
        }
        if (g->fused) continue;
        dhs_ref_keys kv = keys_view(g->m, kc[q], ks[q]);
        if (dhs_ref_select(g->m, l, g->pos[q], g->xn + (int64_t)q * g->d, &kv, sq, g->sc) < 0) return DHS_ERR_NOMEM;
    }
    if (g->fused) return fused_select(g, l, kc, ks); /* skips pos < 0: their INT32_MAX rows stay */
    return DHS_OK;
}

/* the split top-k's page-table lookup (dev/topk.cu tk_pages_write) on the CPU: every valid query's entries
   located in each source of pg from the tables dhs_round_page_tables_device wrote (host memory on the CPU
   backend); a skipped query (pos < 0) leaves its locations as they were, as the kernel does */
dhs_status dhs_ref_gpu_step_select_pages(dhs_ref_gpu *g, int32_t l, const dhs_topk_pages *pg)
{
    if (!pg) return dhs_ref_gpu_step_select(g, l);
    if (!g->fused) return DHS_ERR_UNSUPPORTED;
    dhs_status st = dhs_ref_gpu_step_select(g, l);
    if (st != DHS_OK || g_noop) return st;
    g_page_selects++;
    for (int32_t q = 0; q < g->nq; q++) {
        if (g->pos[q] < 0) continue;
        const int64_t b = q / pg->q_per_req;
        for (int32_t i = 0; i < g->k; i++) {
            const int32_t row = g->sel[(int64_t)q * g->k + i];
            for (int32_t s = 0; s < pg->nsrc; s++) {
                const int32_t e =
                    row < 0 ? -1 : pg->tab[pg->src[s] * pg->src_stride + b * pg->page_stride + row / pg->page_rows];
                pg->locs[s * pg->loc_stride + (int64_t)q * g->k + i] = e < 0 ? -1 : e * pg->page_rows + row % pg->page_rows;
            }
        }
    }
    return DHS_OK;
}

int32_t *dhs_ref_gpu_step_sel(dhs_ref_gpu *g) { return g->sel; }

dhs_status dhs_ref_gpu_step_attend(dhs_ref_gpu *g, int32_t l, const int32_t *loc_dev)
{
    g_step_calls++;
    const int32_t *loc = loc_dev ? loc_dev : g->sel;
    void **base = tab_at(g, 1, l);
    for (int32_t q = 0; q < g->nq; q++) {
        if (g->pos[q] < 0) continue;
        check_ptr(base[q], 1);
        if (g_noop) continue;
        dhs_ref_attend_mlp(g->m, l, g->pos[q], g->xn + (int64_t)q * g->d, base[q], DHS_REF_ROW_BYTES,
                           loc + (int64_t)q * g->k, g->x + (int64_t)q * g->d, g->sc);
    }
    return DHS_OK;
}

dhs_status dhs_ref_gpu_step_logits(dhs_ref_gpu *g)
{
    g_step_calls++;
    if (g_noop) return DHS_OK;
    for (int32_t q = 0; q < g->nq; q++)
        if (g->pos[q] >= 0) dhs_ref_logits(g->m, g->x + (int64_t)q * g->d, g->logits_h + (int64_t)q * g->V);
    return DHS_OK;
}

dhs_status dhs_ref_gpu_step_wait(dhs_ref_gpu *g, const float **logits)
{
    if (g->in_pending && !g_noop) { /* the mirrors as the step read them, until now */
        int same = memcmp(g->tok, g->tok_h, sizeof(int32_t) * (size_t)g->nq) == 0 &&
                   memcmp(g->pos, g->pos_h, sizeof(int64_t) * (size_t)g->nq) == 0;
        for (size_t i = 0; i < sizeof(float) * 64 * (size_t)g->maxq && same; i++) same = ((const uint8_t *)g->cs_h)[i] == 0xA5;
        g_inputs_raced += !same;
        g_inputs_steps++;
    }
    g->in_pending = 0;
    *logits = g->logits_h;
    return DHS_OK;
}

/* not emulated (see the top) */
dhs_status dhs_ref_gpu_capture_begin(dhs_ref_gpu *g)
{
    (void)g;
    return DHS_ERR_UNSUPPORTED;
}
dhs_status dhs_ref_gpu_capture_end(dhs_ref_gpu *g, int keep)
{
    (void)g, (void)keep;
    return DHS_ERR_UNSUPPORTED;
}
int32_t dhs_ref_gpu_graph_queries(const dhs_ref_gpu *g)
{
    (void)g;
    return 0;
}
dhs_status dhs_ref_gpu_graph_launch(dhs_ref_gpu *g)
{
    (void)g;
    return DHS_ERR_UNSUPPORTED;
}

/* ---------------------------------------------------------------- tests */
/* the emulated GPU model for c's next run (c->gpu_model 1, c->step step): a model of c's config, so the
   run's own weights, in g_model; the caller destroys it */
static dhs_ref_model *use_gpu_model(dhs_ref_run_cfg *c, int step)
{
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&c->model, &m), DHS_OK);
    g_model = m;
    c->gpu_model = 1;
    c->step = step;
    return m;
}

/* engines side by side: CPU resident vs emulated-GPU resident, per round */

/* the locality meter on the device step: batch item 0's selections are copied back in the step and
   fed to the meter after the next round's launch (off the critical path), the last one when its
   session ends or the run reads the meter (dhs_ref_engine_meter_flush). With one slot, batch item 0
   is every round's only session, so the device step's meter must see what the CPU model's sees:
   every figure of every layer equal, speculative rounds included (the draft pairs), and the tokens
   equal */
static void test_meter(uint64_t seed)
{
    dhs_locality_model lm;
    memset(&lm, 0, sizeof lm);
    snprintf(lm.preset, sizeof lm.preset, "custom:test");
    const double a[4] = {0.05, 0.25, 0.44, 0.60};
    lm.n_layers = 4;
    for (int i = 0; i < 4; i++) lm.alpha[i] = a[i];
    lm.alpha_exp[0] = 1;
    lm.ref_context = 68665;
    lm.ref_k = 2048;
    dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
    c.model = dhs_ref_cfg_geometry(DHS_REF_GEOM_DSV32);
    c.model.n_layers = 4;
    c.model.topk = 192;
    c.model.seed = seed;
    c.geometry = "deepseek-v3.2";
    c.synthetic = 1;
    c.sessions = 3;
    c.context = 700;
    c.tokens = 9;
    c.spec = 2;
    c.seed = seed;
    c.slots = 1;
    c.history = 0.5;
    c.arrival = 1;
    c.locality = &lm;
    c.compare = 0; /* the hierarchical engine alone: its host parts are its own and the run loop's */
    dhs_ref_run_result cpu, gpu;
    int r1 = dhs_ref_run(&c, &cpu);
    dhs_ref_model *m = use_gpu_model(&c, DHS_REF_STEP_DEVICE);
    int r2 = dhs_ref_run(&c, &gpu);
    CHECKF(r1 == 0 && r2 == 0, "meter runs: %s / %s", cpu.errmsg, gpu.errmsg);
    if (r1 == 0 && r2 == 0) {
        CHECKF(cpu.loc_on && gpu.loc_on && gpu.gpu_model == 1 && gpu.step_hier.rounds == gpu.rounds, "meter: locality %d / %d, "
               "GPU model %d, device-step rounds %" PRIu64 " of %" PRIu64, cpu.loc_on, gpu.loc_on, gpu.gpu_model,
               gpu.step_hier.rounds, gpu.rounds);
        for (int32_t i = 0; i < c.sessions; i++)
            CHECKF(cpu.tokens_of[i] == gpu.tokens_of[i], "meter: session %d: tokens differ from the CPU run", i);
        uint64_t pairs = 0;
        for (int32_t l = 0; l < c.model.n_layers; l++) {
            pairs += gpu.loc_pairs[l] + gpu.loc_draft_pairs[l];
            CHECKF(cpu.loc_pairs[l] == gpu.loc_pairs[l] && cpu.loc_draft_pairs[l] == gpu.loc_draft_pairs[l] &&
                       cpu.loc_accesses[l] == gpu.loc_accesses[l] && cpu.loc_alpha[l] == gpu.loc_alpha[l] &&
                       cpu.loc_hit[l] == gpu.loc_hit[l] && cpu.loc_draft[l] == gpu.loc_draft[l] &&
                       cpu.loc_random[l] == gpu.loc_random[l],
                   "meter layer %d: CPU pairs %" PRIu64 " draft pairs %" PRIu64 " accesses %" PRIu64 " alpha %.6f hit %.6f "
                   "draft %.6f; device step %" PRIu64 " %" PRIu64 " %" PRIu64 " %.6f %.6f %.6f",
                   l, cpu.loc_pairs[l], cpu.loc_draft_pairs[l], cpu.loc_accesses[l], cpu.loc_alpha[l], cpu.loc_hit[l],
                   cpu.loc_draft[l], gpu.loc_pairs[l], gpu.loc_draft_pairs[l], gpu.loc_accesses[l], gpu.loc_alpha[l],
                   gpu.loc_hit[l], gpu.loc_draft[l]);
        }
        CHECKF(pairs > 0, "meter: no pairs measured");
        CHECKF(gpu.step_hier.meter_s > 0 && gpu.step_hier.host_rounds > 0, "meter: host time %.6f s over %" PRIu64 " rounds",
               gpu.step_hier.meter_s, gpu.step_hier.host_rounds);
        const dhs_ref_step_times *t = &gpu.step_hier;
        const double hr = (double)t->host_rounds;
        printf("  locality meter, device step (fed after the next launch) == CPU model: %d layers, %" PRIu64
               " pairs; host us per round (%" PRIu64 " of %" PRIu64 " rounds): tail %.1f, between %.1f, head %.1f, "
               "control %.1f, prelaunch %.1f = exposed %.1f; meter %.1f per round\n",
               c.model.n_layers, pairs, t->host_rounds, gpu.rounds, 1e6 * t->tail_s / hr, 1e6 * t->between_s / hr,
               1e6 * t->head_s / hr, 1e6 * t->xcontrol_s / hr, 1e6 * t->prelaunch_s / hr,
               t->exposed_rounds ? 1e6 * t->exposed_s / (double)t->exposed_rounds : 0.0,
               1e6 * t->meter_s / (double)(t->all_rounds ? t->all_rounds : 1));
        /* the parts cover the exposed window exactly */
        CHECKF(t->host_rounds == t->exposed_rounds &&
                   fabs(t->tail_s + t->between_s + t->head_s + t->xcontrol_s + t->prelaunch_s - t->exposed_s) <= 1e-6 + 1e-9 * hr,
               "meter: host parts %.9f s over %" PRIu64 " rounds, exposed %.9f s over %" PRIu64, t->tail_s + t->between_s +
               t->head_s + t->xcontrol_s + t->prelaunch_s, t->host_rounds, t->exposed_s, t->exposed_rounds);
        /* the tail's and the control plane's parts: inside their part (the logits are copied out only
           when both engines run, and the meter's probe is handed over, not copied), every exposed round
           verifies, and the control parts add up */
        const double tsub = t->tail_logits_s + t->tail_meter_s + t->tail_verify_s + t->tail_end_s;
        const double csub = t->ctl_inputs_s + t->ctl_tables_s + t->ctl_upload_s;
        CHECKF(t->tail_logits_s >= 0 && t->tail_meter_s >= 0 && t->tail_verify_s > 0 && t->tail_end_s >= 0 &&
                   tsub <= t->tail_s + 1e-9 && t->ctl_inputs_s >= 0 && t->ctl_tables_s >= 0 && t->ctl_upload_s > 0 &&
                   fabs(csub - t->xcontrol_s) <= 1e-6 + 1e-9 * hr,
               "meter: tail %.9f s by part %.9f / %.9f / %.9f / %.9f; control %.9f s by part %.9f / %.9f / %.9f", t->tail_s,
               t->tail_logits_s, t->tail_meter_s, t->tail_verify_s, t->tail_end_s, t->xcontrol_s, t->ctl_inputs_s,
               t->ctl_tables_s, t->ctl_upload_s);
    }
    dhs_ref_run_result_free(&cpu);
    dhs_ref_run_result_free(&gpu);
    dhs_ref_model_destroy(m);
    g_model = NULL;
}

/* CPU engine (the model's top-k) vs the emulated-GPU engine with topk_impl */
static void test_rounds(dhs_ref_cfg mc, const char *name, int topk_impl)
{
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&mc, &m), DHS_OK);
    if (!m) return;
    g_model = m;
    const int32_t S = 3, KM = 4, V = mc.vocab, R = 5;
    const int64_t ctx_len = 600;
    dhs_ref_engine_cfg ec;
    memset(&ec, 0, sizeof ec);
    ec.max_sessions = S;
    ec.max_slots = S;
    ec.k_max = KM;
    ec.max_positions = ctx_len + (int64_t)R * KM + 8;
    ec.seed = mc.seed;
    ec.page_rows = 64;
    dhs_ref_engine *a = NULL, *b = NULL;
    CHECK_ST(dhs_ref_engine_create(m, &ec, &a), DHS_OK);
    ec.gpu = 1;
    ec.topk_impl = topk_impl;
    const int split0 = g_split_creates;
    CHECK_ST(dhs_ref_engine_create(m, &ec, &b), DHS_OK);
    CHECKF((g_split_creates > split0) == (topk_impl == DHS_REF_TOPK_SPLIT), "%s: top-k %s gave a split GPU model %d", name,
           dhs_ref_topk_str(topk_impl), g_split_creates - split0);
    int fused0 = g_fused_selects;
    float *L1 = calloc((size_t)S * KM * (size_t)V, sizeof(float)), *L2 = calloc((size_t)S * KM * (size_t)V, sizeof(float));
    int32_t A1[3], A2[3], E1[12], E2[12], ids[3] = {2, 0, 1}, K[3];
    int calls0 = g_emulated_calls;
    uint64_t rows = 0, differ = 0;
    if (!a || !b || !L1 || !L2) goto done;
    for (int32_t i = 0; i < S; i++) {
        int64_t n = ctx_len - 11 * i;
        int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
        dhs_ref_prefill p;
        dhs_ref_prompt(mc.seed, i, V, n, tok);
        dhs_status st = mc.key_fp8 ? dhs_ref_prefill_synthetic(m, tok, n, 7 + (uint64_t)i, &p) : dhs_ref_prefill_run(m, tok, n, &p);
        free(tok);
        CHECK_ST(st, DHS_OK);
        if (st != DHS_OK) goto done;
        CHECK_ST(dhs_ref_engine_start(a, i, &p, (dhs_req){0, 0}), DHS_OK);
        CHECK_ST(dhs_ref_engine_start(b, i, &p, (dhs_req){0, 0}), DHS_OK);
        dhs_ref_prefill_free(&p);
    }
    for (int32_t r = 0; r < R; r++) {
        for (int32_t i = 0; i < S; i++) K[i] = 1 + (r + 2 * i) % KM;
        dhs_ref_round_out o1 = {L1, A1, E1, NULL}, o2 = {L2, A2, E2, NULL};
        CHECK_ST(dhs_ref_engine_round(a, S, ids, K, &o1), DHS_OK);
        CHECK_ST(dhs_ref_engine_round(b, S, ids, K, &o2), DHS_OK);
        for (int32_t i = 0; i < S; i++) {
            for (int32_t j = 0; j < K[i]; j++, rows++)
                differ += memcmp(L1 + ((size_t)i * KM + (size_t)j) * (size_t)V, L2 + ((size_t)i * KM + (size_t)j) * (size_t)V,
                                 sizeof(float) * (size_t)V) != 0;
            CHECKF(A1[i] == A2[i] && !memcmp(E1 + i * KM, E2 + i * KM, sizeof(int32_t) * (size_t)(A1[i] + 1)),
                   "%s round %d item %d: tokens differ", name, r, i);
        }
    }
    CHECKF(differ == 0, "%s: %" PRIu64 " of %" PRIu64 " logit rows differ", name, differ, rows);
    CHECKF(g_emulated_calls - calls0 == R, "%s: the GPU path ran %d rounds of %d", name, g_emulated_calls - calls0, R);
    CHECKF((g_fused_selects > fused0) == (topk_impl != DHS_REF_TOPK_MODEL), "%s: fused selections %d with top-k %s", name,
           g_fused_selects - fused0, dhs_ref_topk_str(topk_impl));
    printf("  %-24s CPU vs emulated-GPU engine: %" PRIu64 " logit rows, %" PRIu64 " differ\n", name, rows, differ);
done:
    free(L1);
    free(L2);
    dhs_ref_engine_destroy(a);
    dhs_ref_engine_destroy(b);
    dhs_ref_model_destroy(m);
    g_model = NULL;
}

/* compact tables (engine.c compact_tables, model/gpu.h dhs_ref_gpu_step_compact): the device step
   re-uploads a batch item's pointer tables exactly when its session changed since its columns were
   last uploaded: a session replaced at the same batch position, an id reused by a new session, items
   moving between positions, a smaller then larger batch. The CPU engine, the compact device step and
   the full-table device step (cfg.full_tables) give the same logits bit for bit every round, and no
   step reads through a pointer into a finished session's freed key store or rows */
static void test_tables(uint64_t seed)
{
    dhs_ref_cfg mc = dhs_ref_cfg_geometry(DHS_REF_GEOM_GLM53);
    mc.n_layers = 6;
    mc.topk = 128;
    mc.seed = seed;
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&mc, &m), DHS_OK);
    if (!m) return;
    g_model = m;
    const int32_t S = 3, KM = 3, V = mc.vocab, R = 6;
    dhs_ref_engine_cfg ec;
    memset(&ec, 0, sizeof ec);
    ec.max_sessions = 5;
    ec.max_slots = S;
    ec.k_max = KM;
    ec.max_positions = 400 + (int64_t)R * KM + 8;
    ec.seed = mc.seed;
    ec.page_rows = 64;
    dhs_ref_engine *e[3] = {NULL, NULL, NULL}; /* CPU, compact, full tables */
    CHECK_ST(dhs_ref_engine_create(m, &ec, &e[0]), DHS_OK);
    ec.gpu = 1;
    ec.step = DHS_REF_STEP_DEVICE;
    CHECK_ST(dhs_ref_engine_create(m, &ec, &e[1]), DHS_OK);
    ec.full_tables = 1;
    CHECK_ST(dhs_ref_engine_create(m, &ec, &e[2]), DHS_OK);
    float *Lg[3];
    for (int k = 0; k < 3; k++) Lg[k] = calloc((size_t)S * KM * (size_t)V, sizeof(float));
    /* per round: finish (-1: none), start (-1: none; a start reuses a finished id with a new prompt), the batch */
    static const int32_t fin[6] = {-1, -1, 1, 0, -1, -1}, sta[6] = {-1, -1, 3, 0, -1, -1};
    static const int32_t nb[6] = {3, 3, 3, 3, 2, 3};
    static const int32_t bat[6][3] = {{0, 1, 2}, {0, 1, 2}, {0, 3, 2}, {0, 3, 2}, {2, 3, -1}, {2, 3, 0}};
    const uint64_t want_items = 3 + 0 + 1 + 1 + 1 + 1, dead0 = g_dead_refs, checks0 = g_ptr_checks;
    uint64_t rows = 0, differ = 0, cols0 = g_table_cols;
    int32_t prompts = 0;
    for (int k = 0; k < 3; k++)
        if (!e[k] || !Lg[k]) goto done;
    for (int32_t r = -1; r < R; r++) {
        int32_t starts[3] = {-1, -1, -1};
        if (r < 0) starts[0] = 0, starts[1] = 1, starts[2] = 2;
        else starts[0] = sta[r];
        if (r >= 0 && fin[r] >= 0)
            for (int k = 0; k < 3; k++) CHECK_ST(dhs_ref_engine_finish(e[k], fin[r]), DHS_OK);
        for (int32_t si = 0; si < 3 && starts[si] >= 0; si++, prompts++) {
            const int64_t n = 300 + 13 * prompts;
            int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
            dhs_ref_prefill p;
            dhs_ref_prompt(mc.seed + 17, prompts, V, n, tok);
            dhs_status st = dhs_ref_prefill_synthetic(m, tok, n, 29 + (uint64_t)prompts, &p);
            free(tok);
            CHECK_ST(st, DHS_OK);
            if (st != DHS_OK) goto done;
            for (int k = 0; k < 3; k++) CHECK_ST(dhs_ref_engine_start(e[k], starts[si], &p, (dhs_req){0, 0}), DHS_OK);
            dhs_ref_prefill_free(&p);
        }
        if (r < 0) continue;
        int32_t K[3], A[3][3], E[3][9];
        for (int32_t i = 0; i < nb[r]; i++) K[i] = 1 + (r + i) % KM;
        for (int k = 0; k < 3; k++) {
            dhs_ref_round_out o = {Lg[k], A[k], E[k], NULL};
            CHECK_ST(dhs_ref_engine_round(e[k], nb[r], bat[r], K, &o), DHS_OK);
        }
        for (int32_t i = 0; i < nb[r]; i++) {
            for (int32_t j = 0; j < K[i]; j++, rows++) {
                const size_t at = ((size_t)i * KM + (size_t)j) * (size_t)V;
                differ += memcmp(Lg[0] + at, Lg[1] + at, sizeof(float) * (size_t)V) != 0 ||
                          memcmp(Lg[0] + at, Lg[2] + at, sizeof(float) * (size_t)V) != 0;
            }
            CHECKF(A[0][i] == A[1][i] && A[0][i] == A[2][i], "tables round %d item %d: accepted %d / %d / %d", r, i, A[0][i],
                   A[1][i], A[2][i]);
        }
    }
    dhs_ref_step_times tc, tf;
    dhs_ref_engine_step_times(e[1], &tc);
    dhs_ref_engine_step_times(e[2], &tf);
    CHECKF(differ == 0, "tables: %" PRIu64 " of %" PRIu64 " logit rows differ (CPU / compact / full tables)", differ, rows);
    CHECKF(tc.table_items == want_items && tc.all_items == 17, "compact tables: %" PRIu64 " of %" PRIu64
           " items re-uploaded, expected %" PRIu64 " of 17", tc.table_items, tc.all_items, want_items);
    CHECKF(g_table_cols - cols0 == want_items * (uint64_t)KM, "compact tables: %" PRIu64 " columns copied, expected %" PRIu64,
           g_table_cols - cols0, want_items * (uint64_t)KM);
    CHECKF(tf.table_items == 0 && tf.all_items == 0, "full tables counted %" PRIu64 " compact items", tf.table_items);
    CHECKF(g_dead_refs == dead0 && g_ptr_checks > checks0, "tables: %" PRIu64 " pointers into freed device memory",
           g_dead_refs - dead0);
    printf("  tables         CPU == compact == full tables: %" PRIu64 " logit rows over %d rounds (sessions replaced, an id "
           "reused, moves, n 3-2-3); %" PRIu64 " of %" PRIu64 " items re-uploaded\n", rows, R, tc.table_items, tc.all_items);
done:
    for (int k = 0; k < 3; k++) {
        free(Lg[k]);
        dhs_ref_engine_destroy(e[k]);
    }
    dhs_ref_model_destroy(m);
    g_model = NULL;
}

/* dhs_ref_run with the GPU path (emulated) for both storages, CPU backend */
/* copy_overlap: the device step's split resolve (dhs_resolve_device with DHS_RESOLVE_SPLIT + dhs_source_wait); the CPU
   backend defers the later sources' copies until the wait, so a missing wait diverges here */
static void test_run(dhs_ref_geometry g, int32_t layers, dhs_ref_verify verify, int step, int topk_impl, uint64_t seed,
                     int copy_overlap, int tail_host)
{
    dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
    c.model = dhs_ref_cfg_geometry(g);
    c.model.n_layers = layers;
    c.model.topk = 192;
    c.model.seed = seed;
    c.geometry = dhs_ref_geometry_str(g);
    c.synthetic = 1;
    c.sessions = 4;
    c.context = 700;
    c.tokens = 7;
    c.spec = 3;
    c.verify = verify;
    c.seed = seed;
    c.slots = 2;
    c.history = 0.5;
    c.arrival = 1;
    c.async_delay = 2;
    c.check = 1;
    c.topk_impl = topk_impl; /* the CPU run too: dhs_topk_fused_ref there */
    c.copy_overlap = copy_overlap;
    c.tail_host = tail_host;
    dhs_ref_run_result cpu, gpu;
    int r1 = dhs_ref_run(&c, &cpu);
    dhs_ref_model *m = use_gpu_model(&c, step);
    int calls0 = g_emulated_calls, host0 = g_host_api_calls, step0 = g_step_calls, fused0 = g_fused_selects,
        split0 = g_split_creates;
    int r2 = dhs_ref_run(&c, &gpu);
    CHECKF(r1 == 0 && r2 == 0, "%s: %s / %s", c.geometry, cpu.errmsg, gpu.errmsg);
    if (r1 == 0 && r2 == 0) {
        CHECKF(gpu.gpu_model == 1 && g_emulated_calls - calls0 >= (int)(2 * gpu.rounds), "%s: GPU path not taken", c.geometry);
        if (step != DHS_REF_STEP_HOST) {
            CHECKF(g_host_api_calls == host0, "%s: the device step called the per-layer host API %d times", c.geometry,
                   g_host_api_calls - host0);
            CHECKF(g_step_calls - step0 >= (int)(2 * gpu.rounds * (uint64_t)(2 * layers + 2)), "%s: %d step launches in %" PRIu64
                   " rounds", c.geometry, g_step_calls - step0, gpu.rounds);
            CHECKF(gpu.lib_cfg.resolver == DHS_RESOLVER_DEVICE, "%s: the device step did not use the device resolver",
                   c.geometry);
            CHECKF(gpu.step_hier.rounds == gpu.rounds && gpu.step_res.rounds == gpu.rounds, "%s: device-step rounds",
                   c.geometry);
            /* the split resolve in the rounds that may miss (dhs_round_may_miss: most of them here), only
               where groups have several sources (GLM's FOLLOW layers; DeepSeek-V3.2 has one per group),
               never on the resident engine or without copy_overlap */
            const int want_split = copy_overlap && g == DHS_REF_GEOM_GLM53;
            CHECKF((want_split ? gpu.step_hier.split_rounds > 0 && gpu.step_hier.split_rounds <= gpu.rounds
                               : gpu.step_hier.split_rounds == 0) && gpu.step_res.split_rounds == 0,
                   "%s: %" PRIu64 " of %" PRIu64 " rounds split (copy_overlap %d)", c.geometry,
                   gpu.step_hier.split_rounds, gpu.rounds, copy_overlap);
        } else {
            CHECKF(g_step_calls == step0, "%s: the host step launched the device step", c.geometry);
        }
        if (topk_impl != DHS_REF_TOPK_MODEL)
            CHECKF(g_fused_selects - fused0 >= (int)(2 * gpu.rounds), "%s: the fused top-k was not used (%d selections)",
                   c.geometry, g_fused_selects - fused0);
        else
            CHECKF(g_fused_selects == fused0, "%s: the model top-k run used the fused top-k", c.geometry);
        /* both engines' GPU models in split mode with split, none otherwise */
        CHECKF((g_split_creates - split0 >= 2) == (topk_impl == DHS_REF_TOPK_SPLIT) &&
                   (topk_impl == DHS_REF_TOPK_SPLIT || g_split_creates == split0),
               "%s: %d split GPU models with top-k %s", c.geometry, g_split_creates - split0, dhs_ref_topk_str(topk_impl));
        CHECKF(gpu.identical, "%s: emulated-GPU hier vs resident: %" PRIu64 " logit rows differ", c.geometry, gpu.logit_mismatches);
        CHECKF(gpu.st.reclaims > 0 && gpu.st.census_host > 0, "%s: no reclaim / host recovery", c.geometry);
        CHECKF(gpu.invariant_violations == 0, "%s: invariants", c.geometry);
        for (int32_t i = 0; i < c.sessions; i++)
            CHECKF(cpu.tokens_of[i] == gpu.tokens_of[i], "%s: session %d: tokens differ from the CPU run", c.geometry, i);
        printf("  %-14s %d layers %s, %s step%s%s, %s top-k: emulated-GPU hier == resident, %" PRIu64
               " reclaims, tokens == CPU run\n",
               c.geometry, layers, verify == DHS_REF_VERIFY_GREEDY ? "greedy" : "sample", dhs_ref_step_str(step),
               step != DHS_REF_STEP_HOST ? (copy_overlap ? " (copy overlap)" : " (one copy per group)") : "",
               step != DHS_REF_STEP_HOST && tail_host ? " (tail locations by the host)" : "",
               dhs_ref_topk_str(topk_impl), gpu.st.reclaims);
    }
    dhs_ref_run_result_free(&cpu);
    dhs_ref_run_result_free(&gpu);
    dhs_ref_model_destroy(m);
    g_model = NULL;
}

/* page tables (cfg.page_tables): a device step whose histories are all on the device decodes through
   rounds that cannot miss; with page tables those rounds take their locations from the top-k's page-table
   lookup (no resolve call) and give the bits of DHS_RESOLVE_DIRECT: hier == resident, tokens == the CPU run,
   with and without speculation; every direct round went through the tables, and none without them */
static void test_page_tables(uint64_t seed)
{
    /* (speculation, page tables, end_early): the last also opens the next round ahead (its tables then) */
    static const int var[5][3] = {{1, 0, 0}, {1, 1, 0}, {3, 0, 0}, {3, 1, 0}, {1, 1, 2}};
    for (int v = 0; v < 5; v++) {
        const int spec = var[v][0], pt = var[v][1];
        dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
        c.model = dhs_ref_cfg_geometry(DHS_REF_GEOM_GLM53);
        c.model.n_layers = 6;
        c.model.topk = 64;
        c.model.seed = seed;
        c.geometry = dhs_ref_geometry_str(DHS_REF_GEOM_GLM53);
        c.synthetic = 1;
        c.sessions = 3;
        c.context = 300;
        c.tokens = 70; /* past a page of decoded rows: decoded pages join the optional history */
        c.spec = spec;
        c.seed = seed;
        c.slots = 3;
        c.history = 1.0;
        c.check = 1;
        c.topk_impl = DHS_REF_TOPK_SPLIT;
        c.direct_resolve = 1;
        c.page_tables = pt;
        c.end_early = var[v][2];
        dhs_ref_run_result cpu, gpu;
        int r1 = dhs_ref_run(&c, &cpu);
        dhs_ref_model *m = use_gpu_model(&c, DHS_REF_STEP_DEVICE);
        const int pages0 = g_page_selects;
        int r2 = dhs_ref_run(&c, &gpu);
        CHECKF(r1 == 0 && r2 == 0, "page tables %d spec %d: %s / %s", pt, spec, cpu.errmsg, gpu.errmsg);
        if (r1 == 0 && r2 == 0) {
            const uint64_t dr = gpu.step_hier.direct_rounds, pr = gpu.step_hier.page_table_rounds;
            CHECKF(dr > 0, "page tables %d spec %d: no round that cannot miss (%" PRIu64 " rounds)", pt, spec, gpu.rounds);
            CHECKF(pt ? pr == dr && g_page_selects > pages0 : pr == 0 && g_page_selects == pages0,
                   "page tables %d spec %d: %" PRIu64 " of %" PRIu64 " direct rounds through page tables, %d selections",
                   pt, spec, pr, dr, g_page_selects - pages0);
            CHECKF(gpu.identical, "page tables %d spec %d: hier vs resident: %" PRIu64 " logit rows differ", pt, spec,
                   gpu.logit_mismatches);
            CHECKF(gpu.invariant_violations == 0, "page tables %d spec %d: invariants", pt, spec);
            for (int32_t i = 0; i < c.sessions; i++)
                CHECKF(cpu.tokens_of[i] == gpu.tokens_of[i], "page tables %d spec %d: session %d: tokens differ", pt,
                       spec, i);
            printf("  page tables %s, spec %d%s: %" PRIu64 " of %" PRIu64 " rounds direct, %" PRIu64
                   " through page tables; hier == resident, tokens == CPU run\n",
                   pt ? "on" : "off", spec, var[v][2] ? ", round end ahead" : "", dr, gpu.rounds, pr);
        }
        dhs_ref_run_result_free(&cpu);
        dhs_ref_run_result_free(&gpu);
        dhs_ref_model_destroy(m);
        g_model = NULL;
    }
}

/* --round-end ahead on the emulated device step (eager: the emulation has no graphs): width-1 rounds end early and, once
   every session is admitted, the next round is opened under the step (its round begin and device tail
   locations before this round's wait). The hierarchy's logits equal the resident engine's, the
   invariants hold after every round (with the next round open), the tokens equal those of --round-end
   early and of the CPU run, and rounds were opened ahead (not the ones with arrivals or the last). */
static dhs_ref_run_cfg glm_device_cfg(uint64_t seed, int32_t layers, int32_t topk, int64_t context, int32_t spec);

static void test_round_ahead(uint64_t seed)
{
    {
        const int step = DHS_REF_STEP_DEVICE;
        dhs_ref_run_cfg c = glm_device_cfg(seed, 5, 192, 600, 1);
        c.tokens = 8;
        c.slots = 3;
        c.arrival = 1;
        c.async_delay = 2;
        c.gpu_model = 0; /* the CPU run first */
        c.step = dhs_ref_run_cfg_default().step;
        dhs_ref_run_result r[3];
        int rc[3];
        rc[0] = dhs_ref_run(&c, &r[0]); /* the CPU run */
        dhs_ref_model *m = use_gpu_model(&c, step);
        for (int ah = 0; ah < 2; ah++) {
            c.end_early = 1 + ah;
            rc[1 + ah] = dhs_ref_run(&c, &r[1 + ah]);
        }
        const char *sn = dhs_ref_step_str(step);
        CHECKF(rc[0] == 0 && rc[1] == 0 && rc[2] == 0, "%s step: %s / %s / %s", sn, r[0].errmsg, r[1].errmsg, r[2].errmsg);
        if (rc[0] == 0 && rc[1] == 0 && rc[2] == 0) {
            CHECKF(r[2].identical && r[2].invariant_violations == 0, "%s step ahead: identical %d, %" PRIu64 " violations",
                   sn, r[2].identical, r[2].invariant_violations);
            CHECKF(r[1].tokens_digest == r[2].tokens_digest && r[0].tokens_digest == r[2].tokens_digest,
                   "%s step: tokens %016" PRIx64 " (CPU) %016" PRIx64 " (early) %016" PRIx64 " (ahead)", sn,
                   r[0].tokens_digest, r[1].tokens_digest, r[2].tokens_digest);
            /* the round opened under the step neither waited for that step's read of its inputs nor
               rewrote them while it could still read them */
            CHECKF(r[2].step_hier.inputs_waits == 0 && r[1].step_hier.inputs_waits == 0,
                   "%s step: inputs that waited for the step before: %" PRIu64 " (early) %" PRIu64 " (ahead)", sn,
                   r[1].step_hier.inputs_waits, r[2].step_hier.inputs_waits);
            CHECKF(r[1].step_hier.ahead_rounds == 0 && r[2].step_hier.ahead_rounds > 0 &&
                       r[2].step_hier.ahead_rounds + 2 < r[2].step_hier.early_ends,
                   "%s step: %" PRIu64 " rounds opened ahead of %" PRIu64 " ended early (early run: %" PRIu64 ")", sn,
                   r[2].step_hier.ahead_rounds, r[2].step_hier.early_ends, r[1].step_hier.ahead_rounds);
            printf("  glm-5.3 5 layers, %s step, round end ahead: %" PRIu64 " of %" PRIu64 " rounds opened under the step "
                   "before them, tokens == early == CPU run\n", sn, r[2].step_hier.ahead_rounds, r[2].step_hier.early_ends);
        }
        for (int i = 0; i < 3; i++) dhs_ref_run_result_free(&r[i]);
        dhs_ref_model_destroy(m);
        g_model = NULL;
    }
}

/* the emulated device step's engine over a library context: C sessions and slots, width 1 */
static dhs_ref_engine_cfg device_engine_cfg(int32_t C, int64_t max_pos, dhs_ctx *ctx, int32_t ctx_requests)
{
    dhs_ref_engine_cfg ec;
    memset(&ec, 0, sizeof ec);
    ec.max_sessions = C;
    ec.max_slots = C;
    ec.k_max = 1;
    ec.max_positions = max_pos;
    ec.page_rows = 16;
    ec.ctx = ctx;
    ec.gpu = 1;
    ec.step = DHS_REF_STEP_DEVICE;
    ec.ctx_requests = ctx_requests;
    return ec;
}

/* dhs_ref_engine_next on a hierarchical engine (emulated device step, 2 sessions): a bad id is refused and
   declares nothing; a width other than 1 or cfg.end_early 1 opens nothing ahead; a declared round is
   opened under the step of the round before it (counted in ahead_rounds, and that round runs without a
   round begin of its own); a round other than the declared one is refused (DHS_ERR_STATE: the round
   opened ahead cannot be taken back). */
static void test_next_refusals(uint64_t seed)
{
    dhs_ref_cfg mc = dhs_ref_cfg_geometry(DHS_REF_GEOM_GLM53);
    mc.n_layers = 5;
    mc.topk = 64;
    mc.seed = seed;
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&mc, &m), DHS_OK);
    if (!m) return;
    g_model = m;
    const int32_t C = 2;
    const int64_t context = 200, max_pos = context + 64;
    dhs_arch arch;
    dhs_ref_arch(m, &arch);
    dhs_config cfg = dhs_ref_hier_config(m, C, max_pos, 1, (double)C, context, 16);
    cfg.resolver = DHS_RESOLVER_DEVICE;
    cfg.policy = DHS_POLICY_CLOCK;
    dhs_backend *be = NULL;
    dhs_ctx *ctx = NULL;
    dhs_ref_engine *e[2] = {NULL, NULL}; /* end_early 2, then 1 */
    CHECK_ST(dhs_backend_cpu_create(NULL, &be), DHS_OK);
    if (be) CHECK_ST(dhs_ctx_create(&arch, &cfg, be, &ctx), DHS_OK);
    int32_t ids[2] = {0, 1}, K[2] = {1, 1}, K2[2] = {2, 1}, A[2], E[2 * 2], tok[200];
    float lg[2 * 2 * 256];
    for (int w = 0; w < 2 && ctx; w++) {
        dhs_ref_engine_cfg ec = device_engine_cfg(C, max_pos, ctx, cfg.max_requests);
        ec.end_early = 2 - w;
        CHECK_ST(dhs_ref_engine_create(m, &ec, &e[w]), DHS_OK);
        if (!e[w]) break;
        for (int32_t i = 0; i < C && w == 0; i++) {
            dhs_req req;
            dhs_ref_prefill p;
            dhs_ref_prompt(7, i, mc.vocab, context, tok);
            CHECK_ST(dhs_request_open(ctx, max_pos, &req), DHS_OK);
            CHECK_ST(dhs_ref_prefill_synthetic(m, tok, context, 11 + (uint64_t)i, &p), DHS_OK);
            CHECK_ST(dhs_ref_engine_start(e[w], i, &p, req), DHS_OK);
            dhs_ref_prefill_free(&p);
        }
    }
    if (e[0] && e[1] && (int)mc.vocab <= 256) {
        dhs_ref_round_out o = {lg, A, E, NULL};
        dhs_ref_step_times t;
        const int32_t bad[2] = {0, 5};
        CHECK_ST(dhs_ref_engine_next(e[0], 2, bad, K), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_ref_engine_next(e[0], -1, ids, K), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_ref_engine_next(e[1], 2, ids, K), DHS_OK); /* end_early 1: ignored */
        CHECK_ST(dhs_ref_engine_next(e[0], 2, ids, K2), DHS_OK); /* width 2: nothing opened ahead */
        CHECK_ST(dhs_ref_engine_round(e[0], 2, ids, K, &o), DHS_OK);
        dhs_ref_engine_step_times(e[0], &t);
        CHECKF(t.ahead_rounds == 0 && t.early_ends == 1, "after a width-2 declaration: %" PRIu64 " ahead, %" PRIu64 " early",
               t.ahead_rounds, t.early_ends);
        CHECK_ST(dhs_ref_engine_next(e[0], 2, ids, K), DHS_OK);
        CHECK_ST(dhs_ref_engine_round(e[0], 2, ids, K, &o), DHS_OK);
        dhs_ref_engine_step_times(e[0], &t);
        CHECKF(t.ahead_rounds == 1, "a declared round: %" PRIu64 " rounds opened ahead, want 1", t.ahead_rounds);
        const double begin_s = t.begin_s;
        char msg[200];
        CHECKF(dhs_check_invariants(ctx, msg, sizeof msg) == 0, "with the round open ahead: %s", msg);
        CHECK_ST(dhs_ref_engine_round(e[0], 1, ids + 1, K, &o), DHS_ERR_STATE); /* not the round opened */
        dhs_ref_engine_step_times(e[0], &t);
        CHECKF(t.begin_s == begin_s, "the refused round called dhs_round_begin");
    }
    for (int w = 0; w < 2; w++) dhs_ref_engine_destroy(e[w]);
    dhs_ctx_destroy(ctx);
    dhs_backend_destroy(be);
    dhs_ref_model_destroy(m);
    g_model = NULL;
}

/* profiled rounds of the device step (profile_every): every 2nd round runs
   eagerly with marks; each phase's emulated time is the number of launches
   in it, so the attribution is checked exactly; those rounds are left out of
   the round times and the logits stay identical */
static void test_profile(uint64_t seed)
{
    dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
    const int32_t layers = 5;
    c.model = dhs_ref_cfg_geometry(DHS_REF_GEOM_GLM53);
    c.model.n_layers = layers;
    c.model.topk = 192;
    c.model.seed = seed;
    c.geometry = "glm-5.3";
    c.synthetic = 1;
    c.sessions = 3;
    c.context = 600;
    c.tokens = 6;
    c.spec = 2;
    c.seed = seed;
    c.slots = 2;
    c.history = 0.5;
    c.check = 1;
    c.gpu_model = 1;
    c.step = DHS_REF_STEP_DEVICE;
    c.profile_every = 2;
    c.keep_round_times = 1;
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&c.model, &m), DHS_OK);
    if (!m) return;
    g_model = m;
    int32_t producers = 0;
    for (int32_t l = 0; l < layers; l++) producers += dhs_ref_layer(m, l)->producer;
    dhs_ref_run_result r;
    int rc = dhs_ref_run(&c, &r);
    CHECKF(rc == 0, "profile run: %s", r.errmsg);
    if (rc == 0) {
        CHECKF(r.identical, "profiled run: hier vs resident: %" PRIu64 " logit rows differ", r.logit_mismatches);
        for (int e = 0; e < 2; e++) {
            uint64_t pr = r.prof_rounds[e], unprof = e ? r.step_hier.rounds : r.step_res.rounds;
            CHECKF(pr == r.rounds / 2 && pr + unprof == r.rounds, "engine %d: %" PRIu64 " profiled + %" PRIu64
                   " rounds of %" PRIu64, e, pr, unprof, r.rounds);
            double want[DHS_REF_PH_N] = {0};
            want[DHS_REF_PH_OTHER] = (double)((layers + 2) * pr);  /* embed, rows of each layer, logits */
            want[DHS_REF_PH_INDEXER] = (double)(producers * pr);
            want[DHS_REF_PH_TOPK] = (double)(producers * pr);
            want[DHS_REF_PH_ATTEND] = (double)(layers * pr);
            for (int p = 0; p < DHS_REF_PH_N; p++) /* RESOLVE, COPY: the CPU backend has no marker: 0 */
                CHECKF(r.prof_us[e][p] == want[p], "engine %d phase %d: %.0f launches, expected %.0f", e, p,
                       r.prof_us[e][p], want[p]);
        }
        CHECKF(r.n_round_s == r.rounds - r.prof_rounds[1], "%" PRIu64 " round times of %" PRIu64 " rounds (%" PRIu64
               " profiled)", r.n_round_s, r.rounds, r.prof_rounds[1]);
        uint64_t tk = 0;
        for (uint64_t i = 0; i < r.n_round_s; i++) {
            const dhs_ref_round_time *t = &r.round_t[i];
            CHECKF(t->s >= 0 && t->sessions >= 1 && t->tokens >= t->sessions, "round %" PRIu64 ": %.6f s, %u sessions, %u tokens",
                   i, t->s, t->sessions, t->tokens);
            tk += t->tokens;
        }
        CHECKF(tk < r.decode_tokens, "round tokens %" PRIu64 " of %" PRIu64 " decode tokens (profiled rounds excluded)",
               tk, r.decode_tokens);
        printf("  profile        every 2nd round: %" PRIu64 " profiled rounds per engine, phases attributed exactly, "
               "identical\n", r.prof_rounds[1]);
    }
    dhs_ref_run_result_free(&r);
    dhs_ref_model_destroy(m);
    g_model = NULL;
}

/* a few GLM-5.3 layers on the device step over synthetic histories: 3 sessions in 2 slots, half the
   history on the device, checked */
static dhs_ref_run_cfg glm_device_cfg(uint64_t seed, int32_t layers, int32_t topk, int64_t context, int32_t spec)
{
    dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
    c.model = dhs_ref_cfg_geometry(DHS_REF_GEOM_GLM53);
    c.model.n_layers = layers;
    c.model.topk = topk;
    c.model.seed = seed;
    c.geometry = "glm-5.3";
    c.synthetic = 1;
    c.sessions = 3;
    c.context = context;
    c.tokens = 6;
    c.spec = spec;
    c.seed = seed;
    c.slots = 2;
    c.history = 0.5;
    c.check = 1;
    c.gpu_model = 1;
    c.step = DHS_REF_STEP_DEVICE;
    return c;
}

/* RoPE values of the device step: every uploaded row equals dhs_ref_rope_cs of its position; with spec
   1 the engine computed every plain item's next one during the step before (dhs_ref_step_times
   rope_ahead), so only each session's first round computes its own in the control plane (rope_now) */
static void test_rope_ahead(uint64_t seed)
{
    dhs_ref_run_cfg c = glm_device_cfg(seed, 4, 128, 400, 1);
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&c.model, &m), DHS_OK);
    if (!m) return;
    g_model = m;
    g_rope_bad = g_rope_rows = 0;
    dhs_ref_run_result r;
    int rc = dhs_ref_run(&c, &r);
    CHECKF(rc == 0 && r.identical, "spec 1 device step: %s", r.errmsg);
    CHECKF(g_rope_rows > 0 && g_rope_bad == 0, "%" PRIu64 " of %" PRIu64 " uploaded RoPE rows differ", g_rope_bad, g_rope_rows);
    CHECKF(r.step_hier.inputs_in_step == 1 && r.step_hier.inputs_waits == 0 && r.step_res.inputs_waits == 0,
           "inputs read by the step: %d, inputs that waited for a step: %" PRIu64 " / %" PRIu64, r.step_hier.inputs_in_step,
           r.step_res.inputs_waits, r.step_hier.inputs_waits);
    const dhs_ref_step_times *t[2] = {&r.step_res, &r.step_hier};
    for (int k = 0; k < 2; k++)
        CHECKF(t[k]->rope_now == (uint64_t)c.sessions && t[k]->rope_ahead + t[k]->rope_now == g_rope_rows / 2,
               "engine %d: RoPE ahead %" PRIu64 ", now %" PRIu64 " (uploaded %" PRIu64 " over both)", k,
               t[k]->rope_ahead, t[k]->rope_now, g_rope_rows);
    printf("  rope ahead     spec 1: %" PRIu64 " of %" PRIu64 " queries' RoPE computed during the step before, values equal\n",
           r.step_hier.rope_ahead, r.step_hier.rope_ahead + r.step_hier.rope_now);
    dhs_ref_run_result_free(&r);
    dhs_ref_model_destroy(m);
    g_model = NULL;
}

/* a deployment's weight reads (dhs_ref_engine_cfg.deploy): every device step reads, after each layer,
   the deployment's bytes for the round's queries divided over the layers, in both engines; the tokens
   and logits do not change (the reads compute nothing) */
static void test_deploy_step(uint64_t seed)
{
    dhs_ref_run_cfg c = glm_device_cfg(seed, 6, 192, 600, 3);
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&c.model, &m), DHS_OK);
    if (!m) return;
    g_model = m;
    dhs_ref_run_result plain, dep;
    int r1 = dhs_ref_run(&c, &plain);
    CHECKF(r1 == 0 && g_weight_bytes == 0, "no deployment: %s, %" PRIu64 " weight bytes", plain.errmsg, g_weight_bytes);
    c.deploy = g_deploy = dhs_deploy_find("glm-5.3-8xh200");
    g_weight_bytes = g_weight_owed = 0;
    g_weight_too_large = 0;
    int r2 = dhs_ref_run(&c, &dep);
    CHECKF(r2 == 0, "deployment run: %s", dep.errmsg);
    if (r1 == 0 && r2 == 0) {
        CHECKF(g_weight_owed > 0 && g_weight_bytes == g_weight_owed, "read %" PRIu64 " weight bytes, owed %" PRIu64,
               g_weight_bytes, g_weight_owed);
        CHECKF(g_weight_too_large == 0 && g_wbuf_bytes >= (512ull << 20), "buffer %" PRIu64 " B, %d reads too large",
               g_wbuf_bytes, g_weight_too_large);
        CHECKF(dep.identical && plain.identical, "identical: %d / %d", dep.identical, plain.identical);
        for (int32_t i = 0; i < c.sessions; i++)
            CHECKF(plain.tokens_of[i] == dep.tokens_of[i], "session %d: tokens changed by the weight reads", i);
        printf("  deployment     glm-5.3-8xh200: %.2f GB of weights read over %" PRIu64 " rounds of 2 engines, "
               "as owed; tokens unchanged\n", (double)g_weight_bytes / 1e9, dep.rounds);
    }
    /* a host step cannot read them */
    c.step = DHS_REF_STEP_HOST;
    dhs_ref_run_result h;
    CHECKF(dhs_ref_run(&c, &h) != 0, "a host step with a deployment was accepted");
    dhs_ref_run_result_free(&h);
    g_deploy = NULL;
    dhs_ref_run_result_free(&plain);
    dhs_ref_run_result_free(&dep);
    dhs_ref_model_destroy(m);
    g_model = NULL;
}

/* what the device step refuses: no GPU pass, a trace, an unknown step, compressed sources */
static void test_step_refusals(uint64_t seed)
{
    dhs_ref_cfg mc = dhs_ref_cfg_tiny();
    mc.seed = seed;
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&mc, &m), DHS_OK);
    if (!m) return;
    g_model = m;
    dhs_ref_engine_cfg ec;
    memset(&ec, 0, sizeof ec);
    ec.max_sessions = 2;
    ec.max_slots = 2;
    ec.k_max = 2;
    ec.max_positions = 400;
    ec.page_rows = 64;
    ec.step = DHS_REF_STEP_DEVICE;
    dhs_ref_engine *e = NULL;
    CHECK_ST(dhs_ref_engine_create(m, &ec, &e), DHS_ERR_UNSUPPORTED); /* no GPU pass */
    CHECK(e == NULL);
    ec.gpu = 1;
    ec.trace = (void *)&ec; /* any trace: the selections stay on the device */
    CHECK_ST(dhs_ref_engine_create(m, &ec, &e), DHS_ERR_UNSUPPORTED);
    ec.trace = NULL;
    ec.step = 3;
    CHECK_ST(dhs_ref_engine_create(m, &ec, &e), DHS_ERR_UNSUPPORTED);
    ec.step = DHS_REF_STEP_GRAPH;
    CHECK_ST(dhs_ref_engine_create(m, &ec, &e), DHS_OK); /* resident, emulated GPU */
    dhs_ref_engine_destroy(e);
    g_model = NULL;
    dhs_ref_model_destroy(m);
    /* the driver: the CPU model, and compressed sources (the model stays on the CPU) */
    dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
    c.sessions = 2;
    c.context = 300;
    c.tokens = 2;
    c.step = DHS_REF_STEP_DEVICE;
    dhs_ref_run_result r;
    CHECK(dhs_ref_run(&c, &r) == -1 && strstr(r.errmsg, "--step device needs the GPU model"));
    dhs_ref_run_result_free(&r);
    c.model.layout = DHS_REF_LAYOUT_COMPRESSED;
    c.gpu_model = 1;
    CHECK(dhs_ref_run(&c, &r) == -1 && strstr(r.errmsg, "m = 1 sources"));
    dhs_ref_run_result_free(&r);
}

/* the GPU model's streamed prefill (model/lsprefill.c dhs_ref_prefill_streamed_gpu) on the
   emulation: its pointers, positions, key stores, the last chunk's logits and the
   schedule's cross-queue waits, against the CPU model's full-residency prefill */
static void test_streamed_prefill(dhs_ref_geometry geo, int32_t layers, uint64_t seed)
{
    dhs_ref_cfg cfg = dhs_ref_cfg_geometry(geo);
    cfg.n_layers = layers;
    cfg.topk = 256;
    cfg.seed = seed;
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&cfg, &m), DHS_OK);
    if (!m) return;
    g_model = m;
    const int64_t n = 300;
    const int32_t L = dhs_ref_model_cfg(m)->n_layers, V = dhs_ref_model_cfg(m)->vocab;
    int32_t tok[300];
    th_tokens(seed, V, n, tok);
    dhs_ref_prefill ref;
    CHECK_ST(dhs_ref_prefill_run(m, tok, n, &ref), DHS_OK);
    const int64_t chunks[] = {64, 37, 300};
    const int32_t bufs[] = {2, 4, L + 1};
    int runs = 0, same = 0;
    for (int fused = 0; fused < 2; fused++)
        for (int ci = 0; ci < 3; ci++)
            for (int bi = 0; bi < 3; bi++) {
                dhs_ref_prefill got;
                dhs_ref_ls_stats st;
                uint64_t dev = 0;
                int bad0 = g_qbad;
                int64_t w0 = g_qwaits;
                dhs_status s = dhs_ref_prefill_streamed_gpu(m, tok, n, chunks[ci], bufs[bi], NULL, fused, &got, &st, &dev);
                CHECKF(s == DHS_OK, "%s streamed GPU prefill chunk %lld R=%d: %s", dhs_ref_geometry_str(geo),
                       (long long)chunks[ci], bufs[bi], dhs_status_str(s));
                if (s != DHS_OK) continue;
                runs++;
                int32_t at;
                const char *diff = th_prefill_diff(m, &ref, &got, &at);
                int ok = diff == NULL;
                CHECKF(ok, "%s streamed GPU prefill chunk %lld R=%d fused %d: %s differ (layer or group %d)",
                       dhs_ref_geometry_str(geo), (long long)chunks[ci], bufs[bi], fused, diff, at);
                same += ok;
                CHECKF(g_qbad == bad0, "%s chunk %lld R=%d: %d waits on events not recorded", dhs_ref_geometry_str(geo),
                       (long long)chunks[ci], bufs[bi], g_qbad - bad0);
                /* exactly the schedule's dependencies across queues (load 1, compute 0, write-back 2) became waits */
                dhs_ls_params lp = {L, bufs[bi], (int32_t)((n + chunks[ci] - 1) / chunks[ci]), NULL};
                int64_t cap = dhs_ls_max_events(&lp), ne = 0, want = 0;
                dhs_ls_event *ev = malloc(sizeof *ev * (size_t)cap);
                CHECK_ST(dhs_ls_schedule(&lp, ev, cap, &ne), DHS_OK);
                for (int64_t i = 0; i < ne; i++)
                    for (int32_t k = 0; k < ev[i].n_deps; k++) want += ev[ev[i].deps[k]].op != ev[i].op;
                free(ev);
                CHECKF(g_qwaits - w0 == want, "%s chunk %lld R=%d: %lld cross-queue waits, the schedule has %lld",
                       dhs_ref_geometry_str(geo), (long long)chunks[ci], bufs[bi], (long long)(g_qwaits - w0), (long long)want);
                CHECK(dev == (uint64_t)bufs[bi] * (uint64_t)n * DHS_REF_ROW_BYTES +
                                 (uint64_t)dhs_ref_n_groups(m) * (uint64_t)ref.keys[0].cap * (uint64_t)(ref.keys[0].dim + 4));
                dhs_ref_prefill_free(&got);
            }
    printf("%-14s L=%d n=%lld: %d streamed GPU prefills on the emulation (chunks 64, 37, 300; R = 2, 4, L+1; model and "
           "fused top-k), %d byte-identical to the CPU's full residency\n",
           dhs_ref_geometry_str(geo), L, (long long)n, runs, same);
    dhs_ref_prefill_free(&ref);
    dhs_ref_model_destroy(m);
    g_model = NULL;
}

/* ---------------------------------------------------------------- --bench-control */
/* one hierarchical engine's device step (GLM-5.3 geometry, every layer; CPU backend, device resolver)
   over C sessions of K = 1 with the step's launches doing nothing: the control plane's host time per
   round (dhs_ref_step_times control_s: inputs, tail locations, pointer tables, the upload; tailloc_s:
   its tail locations) over `rounds` rounds after `warm` rounds; full: 1 cfg.full_tables (per-call tail
   locations), 2 compact tables with one dhs_tail_locations per item and source (cfg.tail_calls), 3
   compact tables with one dhs_round_tail_locations (cfg.tail_host), 0 compact tables with
   dhs_round_tail_locations_device (the default; on the CPU backend its "launch" runs on the host) */
static int bench_one(const dhs_ref_model *m, int32_t C, int full, int32_t warm, int32_t rounds, int64_t context,
                     double *control_us, double *tailloc_us, double *items)
{
    const dhs_ref_cfg *mc = dhs_ref_model_cfg(m);
    const int64_t max_pos = context + warm + rounds + 16;
    dhs_arch arch;
    dhs_ref_arch(m, &arch);
    dhs_config cfg = dhs_ref_hier_config(m, C, max_pos, 1, (double)C, context, 16);
    cfg.resolver = DHS_RESOLVER_DEVICE;
    cfg.policy = DHS_POLICY_CLOCK;
    dhs_backend *be = NULL;
    dhs_ctx *ctx = NULL;
    dhs_ref_engine *e = NULL;
    int rc = -1;
    int32_t *ids = calloc((size_t)C, sizeof(int32_t)), *K = calloc((size_t)C, sizeof(int32_t));
    int32_t *A = calloc((size_t)C, sizeof(int32_t)), *E = calloc((size_t)C, sizeof(int32_t));
    float *lg = calloc((size_t)C * (size_t)mc->vocab, sizeof(float));
    int32_t *tok = calloc((size_t)context, sizeof(int32_t));
    dhs_status st = dhs_backend_cpu_create(NULL, &be);
    if (st == DHS_OK) st = dhs_ctx_create(&arch, &cfg, be, &ctx);
    dhs_ref_engine_cfg ec = device_engine_cfg((int32_t)C, max_pos, ctx, cfg.max_requests);
    ec.full_tables = full == 1;
    ec.tail_calls = full == 1 || full == 2; /* the full tables' path always calls per item and source */
    ec.tail_host = full == 3;
    if (st == DHS_OK) st = dhs_ref_engine_create(m, &ec, &e);
    if (st != DHS_OK || !ids || !K || !A || !E || !lg || !tok) {
        fprintf(stderr, "bench-control: set-up failed: %s\n", dhs_status_str(st));
        goto out;
    }
    for (int32_t i = 0; i < C; i++) {
        dhs_req req;
        dhs_ref_prefill p;
        dhs_ref_prompt(7, i, mc->vocab, context, tok);
        if ((st = dhs_request_open(ctx, max_pos, &req)) != DHS_OK ||
            (st = dhs_ref_prefill_synthetic(m, tok, context, 11 + (uint64_t)i, &p)) != DHS_OK) {
            fprintf(stderr, "bench-control: session %d: %s\n", i, dhs_status_str(st));
            goto out;
        }
        st = dhs_ref_engine_start(e, i, &p, req);
        dhs_ref_prefill_free(&p);
        if (st != DHS_OK) {
            fprintf(stderr, "bench-control: start %d: %s (%s)\n", i, dhs_status_str(st), dhs_ref_engine_error(e));
            goto out;
        }
        ids[i] = i;
        K[i] = 1;
    }
    dhs_ref_step_times t0, t1;
    for (int32_t r = 0; r < warm + rounds; r++) {
        if (r == warm) dhs_ref_engine_step_times(e, &t0);
        dhs_ref_round_out o = {lg, A, E, NULL};
        if ((st = dhs_ref_engine_round(e, C, ids, K, &o)) != DHS_OK) {
            fprintf(stderr, "bench-control: round %d: %s (%s)\n", r, dhs_status_str(st), dhs_ref_engine_error(e));
            goto out;
        }
    }
    dhs_ref_engine_step_times(e, &t1);
    const double nr = (double)(t1.rounds - t0.rounds);
    *control_us = 1e6 * (t1.control_s - t0.control_s) / nr;
    *tailloc_us = 1e6 * (t1.tailloc_s - t0.tailloc_s) / nr;
    *items = (double)(t1.table_items - t0.table_items) / nr;
    rc = 0;
out:
    dhs_ref_engine_destroy(e);
    dhs_ctx_destroy(ctx);
    dhs_backend_destroy(be);
    free(ids);
    free(K);
    free(A);
    free(E);
    free(lg);
    free(tok);
    return rc;
}

static int bench_control(int argc, char **argv)
{
    int32_t rounds = 200, warm = 5, reps = 3, layers = 0;
    int64_t context = 64;
    char conc[64] = "16,64";
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: test_gpu_engine --bench-control [--concurrency C1,C2,...] [--rounds N] [--reps N]\n"
                   "                       [--context P] [--layers L]\n"
                   "The device step's host control plane (engine.c gpu_step before the launch: inputs, tail\n"
                   "locations, pointer tables, the upload) per round, GLM-5.3 geometry (78 layers = 78 sources,\n"
                   "21 groups; --layers to cut), K = 1, hierarchical on the CPU backend with the device\n"
                   "resolver, the GPU emulated with launches that do nothing. Four control planes in this\n"
                   "process, rotating: full tables (every layer's tables rebuilt and uploaded each round,\n"
                   "cfg.full_tables = 1), compact tables with one dhs_tail_locations per item and source\n"
                   "(cfg.tail_calls = 1), compact tables with one dhs_round_tail_locations per round\n"
                   "(cfg.tail_host = 1) and compact tables with dhs_round_tail_locations_device (the default;\n"
                   "on the CPU backend the device's loop runs on the host, so its figure is the host's marks\n"
                   "plus that loop). Prints us per round (the best of --reps runs of --rounds rounds each, after 5\n"
                   "warm-up rounds): the control plane, its tail locations, the rest (the engine's own work),\n"
                   "and the batch items whose tables were re-uploaded per round. Defaults: 16,64; 200 rounds;\n"
                   "3 reps; P = 64.\n");
            return 0;
        }
        if (!v) {
            fprintf(stderr, "test_gpu_engine: %s needs a value (--help)\n", a);
            return 2;
        }
        if (!strcmp(a, "--concurrency")) snprintf(conc, sizeof conc, "%s", v);
        else if (!strcmp(a, "--rounds")) rounds = atoi(v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--context")) context = atoll(v);
        else if (!strcmp(a, "--layers")) layers = atoi(v);
        else {
            fprintf(stderr, "test_gpu_engine: unknown option %s (--help)\n", a);
            return 2;
        }
        i++;
    }
    if (rounds < 1 || reps < 1 || context < 32 || layers < 0) {
        fprintf(stderr, "test_gpu_engine: --rounds and --reps >= 1, --context >= 32, --layers >= 0\n");
        return 2;
    }
    dhs_ref_cfg mc = dhs_ref_cfg_geometry(DHS_REF_GEOM_GLM53);
    if (layers) mc.n_layers = layers;
    mc.topk = 16;
    mc.seed = 1;
    dhs_ref_model *m = NULL;
    if (dhs_ref_model_create(&mc, &m) != DHS_OK) {
        fprintf(stderr, "test_gpu_engine: model\n");
        return 1;
    }
    g_model = m;
    g_noop = 1;
    printf("control plane per round (us, best of %d x %d rounds), GLM-5.3 %d layers / %d sources / %d groups, K = 1\n",
           reps, rounds, dhs_ref_model_cfg(m)->n_layers, dhs_ref_n_sources(m), dhs_ref_n_groups(m));
    printf("%5s | %28s | %28s | %28s | %28s | %8s\n", "", "full tables, per-call loc", "compact, per-call loc",
           "compact, one host call", "compact, device (default)", "items");
    printf("%5s | %8s %9s %9s | %8s %9s %9s | %8s %9s %9s | %8s %9s %9s | %8s\n", "C", "control", "tail loc", "engine",
           "control", "tail loc", "engine", "control", "tail loc", "engine", "control", "tail loc", "engine", "uploaded");
    int rc = 0;
    for (char *p = conc; *p && !rc;) {
        int32_t C = (int32_t)strtol(p, &p, 10);
        if (*p == ',') p++;
        if (C < 1) {
            rc = 2;
            break;
        }
        /* best of the reps by control time; the engine's own part (control minus tail locations) too */
        double ctl[4] = {1e30, 1e30, 1e30, 1e30}, tl[4] = {0, 0, 0, 0}, own[4] = {1e30, 1e30, 1e30, 1e30}, items = 0;
        for (int r = 0; r < reps && !rc; r++)
            for (int h = 0; h < 4 && !rc; h++) {
                const int mode = (r + h) % 4; /* rotating which goes first */
                double us = 0, t = 0, it = 0;
                if (bench_one(m, C, mode, warm, rounds, context, &us, &t, &it)) rc = 1;
                if (us < ctl[mode]) ctl[mode] = us, tl[mode] = t;
                if (us - t < own[mode]) own[mode] = us - t;
                if (!mode) items = it;
            }
        if (!rc)
            printf("%5d | %8.1f %9.1f %9.1f | %8.1f %9.1f %9.1f | %8.1f %9.1f %9.1f | %8.1f %9.1f %9.1f | %8.2f\n", C,
                   ctl[1], tl[1], own[1], ctl[2], tl[2], own[2], ctl[3], tl[3], own[3], ctl[0], tl[0], own[0], items);
        fflush(stdout);
    }
    g_noop = 0;
    g_model = NULL;
    dhs_ref_model_destroy(m);
    blocks_release();
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--bench-control")) return bench_control(argc, argv);
    if (argc > 1) {
        printf("usage: test_gpu_engine            the tests (env DHS_TEST_SEED)\n"
               "       test_gpu_engine --bench-control [--help]   the control plane's host time per round\n");
        return strcmp(argv[1], "--help") && strcmp(argv[1], "-h") ? 2 : 0;
    }
    uint64_t seed = th_seed("test_gpu_engine");
    dhs_ref_cfg glm = dhs_ref_cfg_geometry(DHS_REF_GEOM_GLM53), ds = dhs_ref_cfg_geometry(DHS_REF_GEOM_DSV32),
                tiny = dhs_ref_cfg_tiny();
    glm.seed = ds.seed = tiny.seed = seed;
    glm.n_layers = 10;
    glm.topk = 256;
    ds.n_layers = 5;
    ds.topk = 256;
    test_rounds(glm, "glm-5.3 (10 layers)", DHS_REF_TOPK_MODEL);
    test_rounds(ds, "deepseek-v3.2 (5 layers)", DHS_REF_TOPK_MODEL);
    tiny.layout = DHS_REF_LAYOUT_FOLLOW;
    test_rounds(tiny, "tiny follow", DHS_REF_TOPK_MODEL);
    test_rounds(tiny, "tiny follow fused top-k", DHS_REF_TOPK_FUSED);
    test_rounds(tiny, "tiny follow split top-k", DHS_REF_TOPK_SPLIT);
    test_step_refusals(seed);
    test_tables(seed + 13);
    test_run(DHS_REF_GEOM_GLM53, 14, DHS_REF_VERIFY_GREEDY, DHS_REF_STEP_HOST, DHS_REF_TOPK_MODEL, seed, 1, 0);
    test_run(DHS_REF_GEOM_DSV32, 5, DHS_REF_VERIFY_SAMPLE, DHS_REF_STEP_HOST, DHS_REF_TOPK_MODEL, seed + 1, 1, 0);
    test_run(DHS_REF_GEOM_GLM53, 14, DHS_REF_VERIFY_GREEDY, DHS_REF_STEP_DEVICE, DHS_REF_TOPK_MODEL, seed + 2, 1, 0);
    test_run(DHS_REF_GEOM_DSV32, 5, DHS_REF_VERIFY_SAMPLE, DHS_REF_STEP_DEVICE, DHS_REF_TOPK_MODEL, seed + 3, 1, 0);
    test_run(DHS_REF_GEOM_GLM53, 14, DHS_REF_VERIFY_SAMPLE, DHS_REF_STEP_DEVICE, DHS_REF_TOPK_MODEL, seed + 9, 0, 0);
    test_run(DHS_REF_GEOM_DSV32, 5, DHS_REF_VERIFY_GREEDY, DHS_REF_STEP_DEVICE, DHS_REF_TOPK_MODEL, seed + 12, 1, 1);
    test_profile(seed + 4);
    test_round_ahead(seed + 14);
    test_page_tables(seed + 31);
    test_next_refusals(seed + 15);
    test_rope_ahead(seed + 12);
    test_deploy_step(seed + 10);
    /* topk_impl fused: the GPU model's launch arguments emulated on the kernel's CPU twin */
    test_run(DHS_REF_GEOM_GLM53, 7, DHS_REF_VERIFY_GREEDY, DHS_REF_STEP_HOST, DHS_REF_TOPK_FUSED, seed + 5, 1, 0);
    test_run(DHS_REF_GEOM_DSV32, 5, DHS_REF_VERIFY_SAMPLE, DHS_REF_STEP_DEVICE, DHS_REF_TOPK_FUSED, seed + 6, 1, 0);
    /* split, the default (dhs_ref_run_cfg_default): the same twin, the GPU models in split mode */
    CHECKF(dhs_ref_run_cfg_default().topk_impl == DHS_REF_TOPK_SPLIT, "the run's default top-k is %s, not split",
           dhs_ref_topk_str(dhs_ref_run_cfg_default().topk_impl));
    test_run(DHS_REF_GEOM_GLM53, 7, DHS_REF_VERIFY_GREEDY, DHS_REF_STEP_DEVICE, DHS_REF_TOPK_SPLIT, seed + 11, 1, 0);
    test_meter(seed + 12);
    test_streamed_prefill(DHS_REF_GEOM_GLM53, 8, seed + 7);
    test_streamed_prefill(DHS_REF_GEOM_DSV32, 5, seed + 8);
    CHECKF(g_bad_rowdst == 0, "%" PRIu64 " valid queries of the device step had no row destination", g_bad_rowdst);
    CHECKF(g_inputs_steps > 0 && g_inputs_raced == 0,
           "%" PRIu64 " of %" PRIu64 " steps saw their inputs mirrors rewritten before their wait", g_inputs_raced, g_inputs_steps);
    CHECKF(g_dead_refs == 0 && g_ptr_checks > 0, "%" PRIu64 " of %" PRIu64 " table pointers named freed device memory",
           g_dead_refs, g_ptr_checks);
    free(g_qrec);
    blocks_release();
    return th_summary();
}
