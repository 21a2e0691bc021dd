/* engine.c - serves sessions of the reference model round by round.
 *
 * One round (DESIGN.md §5) for a batch of sessions, each with K_i queries at
 * positions n_i .. n_i+K_i-1 (anchor + K_i-1 drafter proposals):
 *   1. drafter: catch up on committed tokens, propose K_i-1 tokens
 *   2. hierarchical: dhs_round_begin
 *   3. target, layer by layer over the whole batch:
 *        rows (and index keys) of all K_i positions -> write (tail)
 *        producer: indexer + top-k per query -> resolve (hier: dhs_resolve)
 *        attention of every query over its selected locations, MLP
 *   4. verification (greedy or speculative sampling) -> A_i, bonus token
 *   5. hierarchical: dhs_round_end(A); model state of rejected positions
 *      (index keys) discarded
 * The only difference between the storage modes is where rows are written
 * and how a selection becomes (base, locations): resident arrays with
 * location = row, or the library's pool with the resolver's locations.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhs_plan.h"
#include "dhs_cuda.h"
#include "model/deploy.h"
#include "model/gpu.h"
#include "model/locmeter.h"
#include "model/model.h"
#include "util/rng.h"
#include "sim/trace.h"
#include "sim/util.h"

typedef struct sess {
    int active;
    int32_t slot;          /* drafter ring slot */
    dhs_req req;           /* hierarchical */
    int64_t prompt;        /* prompt positions */
    int64_t n;             /* committed positions n_r */
    int32_t *tokens;       /* [max_positions + 1]: tokens[0..n) committed, tokens[n] = anchor */
    uint8_t *rows[DHS_MAX_SOURCES];     /* resident: [rows_cap(src)][656] */
    dhs_ref_keys keys[DHS_MAX_SOURCES]; /* per group */
    float *pend_lat[DHS_MAX_SOURCES];   /* m > 1 sources: [P][576] latents of position t at t % P */
    float *pend_key[DHS_MAX_SOURCES];   /* m > 1 groups: [P][idx_dim] */
    void *gk_codes[DHS_MAX_SOURCES];    /* GPU: per group, device key store (codes or float keys) */
    void *gk_scales[DHS_MAX_SOURCES];   /* GPU, FP8 keys: per group, device scales */
    void *grows[DHS_MAX_SOURCES];       /* GPU resident: per source, device rows [rows_cap][656] */
    int64_t dn;            /* drafter KV valid for positions < dn (from max(0, dn - W)) */
    uint64_t rng;
    uint64_t orng;         /* the acceptance model's draws (cfg.oracle) */
    int64_t rope_pos;      /* device step: rope_cs holds this position's RoPE values (-1: none) */
    float rope_cs[64];     /* computed while the GPU ran the round before (a plain item's next query) */
    uint64_t epoch;        /* device step, compact tables: this start's number (1, 2, ...) */
} sess;

struct dhs_ref_engine {
    const dhs_ref_model *m;
    dhs_ref_engine_cfg cfg;
    int32_t V, d, k, kmax, ng, ns, P;
    sess *s;                /* [max_sessions] */
    uint8_t *slot_used;     /* [max_slots] */
    float *ring;            /* [max_slots * ring_rows][2*draft_dim] */
    int64_t ring_rows;
    dhs_ref_scratch *sc;
    /* round buffers, indexed by batch position i < max_slots */
    int32_t *blk;           /* [slots][kmax] tokens of the queries */
    float *dprob;           /* [slots][kmax][V] drafter distributions */
    float *X, *XN;          /* [slots][kmax][d] */
    int32_t *sel;           /* [ng][slots][kmax][k] */
    int32_t *loc;           /* [ng][slots][nsrc_max][kmax][k] */
    int32_t nsrc_max;
    uint8_t *rowbuf;        /* [slots][kmax+1][656] */
    uint8_t *fetch;         /* [k][656] rows read with dhs_read_location (fetch_rows) */
    int32_t *fidx;          /* [k] */
    float *prob;            /* [V] */
    float *lbuf;            /* [max_slots][kmax][V]: the logits when the caller asks for none (round_out.logits NULL) */
    dhs_resolve_item *items;/* [slots] */
    dhs_req *reqs;          /* [slots] */
    int32_t *acc0;          /* [slots] zeros: the accepted counts of a width-1 round (cfg.end_early) */
    int ended_early;        /* this round was ended with dhs_round_end_early (cfg.end_early) */
    /* cfg.end_early 2 (ahead): the round after this one, declared by dhs_ref_engine_next (next_n items,
       width 1), is opened right after this round's early end, while its step runs; ahead_* is that
       opened round until dhs_ref_engine_round runs it (ahead_tl: its tail locations were written too) */
    int32_t next_n, ahead_n;
    int32_t *next_ids, *ahead_ids; /* [slots] */
    int32_t *ones;                 /* [slots] ones: the widths of a round opened ahead */
    int ahead_open, ahead_tl;
    dhs_trace_item *titems; /* [slots] */
    const int32_t **tsel;   /* [slots][ng] */
    dhs_ref_gpu *gpu;       /* cfg.gpu: the GPU target pass */
    int32_t *gtok;          /* [slots*kmax] query tokens (q = i*kmax + j) */
    int64_t *gpos;          /* [slots*kmax] query positions, -1: no query */
    void **gp_rowdst, **gp_kc, **gp_ks; /* [slots*kmax] device addresses per query */
    const void **gp_base;   /* [slots*kmax] */
    int32_t *gloc;          /* [slots*kmax][k] locations of one layer */
    float *glog;            /* [slots*kmax][V] */
    int32_t *gtail;         /* device step, hier: [slots][ns][kmax] tail locations of the round */
    int32_t *gloc_dev;      /* device step, hier: [nsrc_max][N][kmax][k] locations (dhs_resolve_device) */
    int32_t *ptab_dev;      /* cfg.page_tables: [ns][N][pt_stride] the round's page tables (dhs_round_page_tables_device) */
    int32_t pt_stride;      /* pages per request and source in ptab_dev */
    int compact;            /* device step with compact tables (cfg.full_tables 0) */
    int32_t *rloc_dev;      /* compact tables, locations written by the library on the device (cfg.tail_host 0) */
    uint64_t epochs;        /* session starts so far (sess.epoch) */
    uint64_t *tab_epoch;    /* compact: [max_slots] the session whose tables batch item i's columns
                               hold on the device (its epoch; 0: none) */
    dhs_ref_step_times stt; /* device step host times */
    dhs_ref_import_times imp; /* session starts: imports and the GPU setup */
    double gpu_idle_since;  /* when the last plain round's step wait returned (0: none, or not comparable) */
    /* the host parts of a round (dhs_ref_step_times host_rounds): when the last round returned (0:
       none, failed, or a session started since), its tail, and this round's call and target times */
    double x_exit, x_tail, x_enter, x_done;
    /* the last round's tail by part and this round's control plane by part (host_parts) */
    double x_logits, x_meter, x_verify, x_end, x_inputs, x_tables, x_upcopy, x_upevent;
    double t_logits, t_meter, t_verify, t_end; /* x_logits .. x_end of the round before (its tail) */
    double x_tailloc;       /* this round's dhs_tail_locations time (step times tailloc_s) */
    int prof_now;           /* this round is profiled (marks on) */
    int split_now;          /* this round's step uses the split resolve (copy_overlap and the round may miss) */
    int graph_split;        /* the captured graph's split_now */
    int direct_now;         /* this round's step resolves with DHS_RESOLVE_DIRECT (direct_resolve, cannot miss) */
    int graph_direct;       /* the captured graph's direct_now */
    uint64_t wlayer;        /* deploy: weight bytes each layer of this round's step reads */
    uint64_t graph_wlayer;  /* the captured graph's wlayer */
    uint64_t wchunk;        /* the weight buffer's size: a layer reads in chunks of at most this */
    double prof_us[DHS_REF_PH_N], prof_wall_s;
    uint64_t prof_rounds, step_calls;
    char err[160];
    uint64_t shadow_bad;    /* located rows differing from the model's own copy */
    char shadow_first[256];
    uint64_t rounds;
    /* device step with a locmeter: two pinned [ng][kmax][k] buffers of batch item 0's queries, written by
       the steps in turn (dhs_ref_gpu_probe_copy / _flip); probe_par: the one the next step writes */
    int32_t *probe_h[2];
    int probe_par;   /* the buffer the next step writes (the host's copy of the device bit) */
    int probe_step;  /* the buffer the last launched step writes */
    /* the last step's probe (its buffer probe_snap), fed to the meter after the next launch (the GPU then
       runs the next step, which writes the other buffer: neither the meter's work nor a copy of the
       probe is on the path between two steps), or before a session ends or the meter is read
       (dhs_ref_engine_meter_flush) */
    const int32_t *probe_snap;
    int32_t snap_id, snap_K; /* the probe's session and queries; snap_K 0: nothing pending */
    int64_t snap_n;          /* that session's positions then */
    uint64_t snap_round;     /* e->rounds then */
};

/* the locality meter: the K queries of session id in group g (host selections, k apart) in round
   `round`, the session then at n positions */
static void loc_observe_at(dhs_ref_engine *e, int32_t id, int32_t g, const int32_t *sel, int32_t K, int64_t n,
                           uint64_t round)
{
    if (!e->cfg.locmeter) return;
    const double t = dhs_wall_s();
    int64_t visible = (n + 1) / dhs_ref_group_m(e->m, g);
    (void)dhs_ref_locmeter_observe(e->cfg.locmeter, id, round, g, sel, K, visible);
    e->stt.meter_s += dhs_wall_s() - t;
}

static void loc_observe(dhs_ref_engine *e, int32_t id, int32_t g, const int32_t *sel, int32_t K)
{
    loc_observe_at(e, id, g, sel, K, e->s[id].n, e->rounds);
}

void dhs_ref_engine_meter_flush(dhs_ref_engine *e)
{
    if (!e || !e->snap_K) return;
    for (int32_t g = 0; g < e->ng; g++)
        loc_observe_at(e, e->snap_id, g, e->probe_snap + (int64_t)g * e->kmax * e->k, e->snap_K, e->snap_n, e->snap_round);
    e->snap_K = 0;
}

#define ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))

static int64_t rows_cap(const dhs_ref_engine *e, int32_t mm) { return (e->cfg.max_positions + mm - 1) / mm + 1; }

static void set_err(dhs_ref_engine *e, const char *what, dhs_status st)
{
    snprintf(e->err, sizeof e->err, "%s: %s (%d)", what, dhs_status_str(st), (int)st);
}

const char *dhs_ref_engine_error(const dhs_ref_engine *e) { return e->err; }

uint64_t dhs_ref_engine_shadow_mismatches(const dhs_ref_engine *e, const char **first)
{
    if (first) *first = e->shadow_first;
    return e->shadow_bad;
}

/* shadow mode: the bytes attention is about to read for entry q of query j
   (row `row`, location `loc`) against the row the model wrote */
static void shadow_check(dhs_ref_engine *e, const sess *s, int32_t id, int32_t l, int32_t src, int32_t j, int32_t q,
                         int32_t row, int32_t loc, const uint8_t *bytes)
{
    if (!memcmp(bytes, s->rows[src] + (int64_t)row * DHS_REF_ROW_BYTES, DHS_REF_ROW_BYTES)) return;
    if (!e->shadow_bad++)
        snprintf(e->shadow_first, sizeof e->shadow_first,
                 "round %" PRIu64 " session %d (n=%" PRId64 ") layer %d source %d query %d entry %d: row %d at location %d "
                 "holds other bytes",
                 e->rounds, id, s->n, l, src, j, q, row, loc);
}
int64_t dhs_ref_engine_ring_rows(const dhs_ref_engine *e) { return e->ring_rows; }

uint64_t dhs_ref_engine_model_bytes(const dhs_ref_model *m, int64_t positions, int resident, int64_t ring_rows)
{
    uint64_t b = 0;
    for (int32_t g = 0; g < dhs_ref_n_groups(m); g++)
        b += (uint64_t)((positions + dhs_ref_group_m(m, g) - 1) / dhs_ref_group_m(m, g)) * dhs_ref_key_bytes(m);
    if (resident)
        for (int32_t s = 0; s < dhs_ref_n_sources(m); s++)
            b += (uint64_t)((positions + dhs_ref_source_m(m, s) - 1) / dhs_ref_source_m(m, s)) * DHS_REF_ROW_BYTES;
    b += (uint64_t)ring_rows * dhs_ref_draft_row_bytes(m);
    return b;
}

static dhs_status gpu_create(dhs_ref_engine *e)
{
    const dhs_ref_model *m = e->m;
    const dhs_ref_cfg *c = dhs_ref_model_cfg(m);
    for (int32_t src = 0; src < e->ns; src++)
        if (dhs_ref_source_m(m, src) != 1) return DHS_ERR_UNSUPPORTED;
    dhs_ref_gpu_desc *d = calloc(1, sizeof *d);
    if (!d) return DHS_ERR_NOMEM;
    dhs_ref_model_gpu_desc(m, d);
    d->topk_fused = e->cfg.topk_impl == DHS_REF_TOPK_SPLIT ? 2 : e->cfg.topk_impl == DHS_REF_TOPK_FUSED;
    d->max_queries = e->cfg.max_slots * e->kmax;
    d->k_max = e->kmax;
    d->max_positions = e->cfg.max_positions + 8;
    dhs_status st = dhs_ref_gpu_create(d, e->cfg.gpu_stream, &e->gpu);
    free(d);
    if (st != DHS_OK) {
        set_err(e, "dhs_ref_gpu_create", st);
        return st;
    }
    if (e->cfg.deploy) {
        /* a buffer of twice the largest layer read (at most 8 GiB: a larger layer reads it in several
           chunks), at least 512 MiB, far beyond the 50 MiB L2: every read is HBM traffic */
        double most = dhs_deploy_step_bytes(e->cfg.deploy, (double)e->cfg.max_slots * e->kmax, NULL) / c->n_layers;
        uint64_t b = (uint64_t)(2 * most);
        if (b < (512ull << 20)) b = 512ull << 20;
        if (b > (8ull << 30)) b = 8ull << 30;
        if ((st = dhs_ref_gpu_weights_alloc(e->gpu, b)) != DHS_OK) {
            set_err(e, "dhs_ref_gpu_weights_alloc", st);
            return st;
        }
        e->wchunk = b;
    }
    /* a profiled round: about 10 marks per layer */
    if (e->cfg.profile_every > 0 && (st = dhs_ref_gpu_prof_enable(e->gpu, 16 * c->n_layers + 16)) != DHS_OK) {
        set_err(e, "dhs_ref_gpu_prof_enable", st);
        return st;
    }
    size_t Q = (size_t)e->cfg.max_slots * (size_t)e->kmax;
    e->gtok = calloc(Q, sizeof(int32_t));
    e->gpos = calloc(Q, sizeof(int64_t));
    e->gp_rowdst = calloc(Q, sizeof(void *));
    e->gp_kc = calloc(Q, sizeof(void *));
    e->gp_ks = calloc(Q, sizeof(void *));
    e->gp_base = calloc(Q, sizeof(void *));
    e->gloc = calloc(Q * (size_t)e->k, sizeof(int32_t));
    e->glog = calloc(Q * (size_t)e->V, sizeof(float));
    if (!e->gtok || !e->gpos || !e->gp_rowdst || !e->gp_kc || !e->gp_ks || !e->gp_base || !e->gloc || !e->glog)
        return DHS_ERR_NOMEM;
    if (e->cfg.step != DHS_REF_STEP_HOST && !e->cfg.full_tables) {
        int32_t lsrc[DHS_REF_MAX_LAYERS];
        for (int32_t l = 0; l < c->n_layers; l++) lsrc[l] = dhs_ref_layer(m, l)->source;
        if (!(e->tab_epoch = calloc((size_t)e->cfg.max_slots, sizeof(uint64_t)))) return DHS_ERR_NOMEM;
        if ((st = dhs_ref_gpu_step_compact(e->gpu, lsrc, e->ns, !e->cfg.ctx)) != DHS_OK) {
            set_err(e, "dhs_ref_gpu_step_compact", st);
            return st;
        }
        e->compact = 1;
        if (e->cfg.ctx && !e->cfg.tail_calls && !e->cfg.tail_host &&
            !(e->rloc_dev = dhs_ref_gpu_step_rloc_device(e->gpu))) {
            set_err(e, "dhs_ref_gpu_step_rloc_device", DHS_ERR_STATE);
            return DHS_ERR_STATE;
        }
    }
    if (e->cfg.step != DHS_REF_STEP_HOST && e->cfg.ctx) {
        int32_t N = e->cfg.ctx_requests;
        if (N < 1 || N > e->cfg.max_slots || dhs_pool_row_stride(e->cfg.ctx) != DHS_REF_ROW_BYTES) {
            snprintf(e->err, sizeof e->err, "device step: ctx_requests %d (1..%d) and a pool row stride of %d bytes needed",
                     N, e->cfg.max_slots, DHS_REF_ROW_BYTES);
            return DHS_ERR_INVALID_ARG;
        }
        if (!e->compact && !(e->gtail = calloc(Q * (size_t)e->ns, sizeof(int32_t)))) return DHS_ERR_NOMEM;
        uint64_t lb = (uint64_t)e->nsrc_max * (uint64_t)N * (uint64_t)e->kmax * (uint64_t)e->k * sizeof(int32_t);
        if ((st = dhs_ref_gpu_alloc(e->gpu, lb, (void **)&e->gloc_dev)) != DHS_OK ||
            (st = dhs_ref_gpu_memset(e->gpu, e->gloc_dev, 0xff, lb)) != DHS_OK) {
            set_err(e, "device step location buffer", st);
            return st;
        }
        /* page tables ride with the device's tail locations (both written on the step's stream), where the
           step can read them: the split top-k, which writes at most DHS_TOPK_PAGES_MAX_SRC sources' locations;
           elsewhere (no ptab_dev) the direct kernels */
        int pt_fit = e->cfg.page_tables && e->cfg.direct_resolve && e->rloc_dev && e->cfg.topk_impl == DHS_REF_TOPK_SPLIT;
        for (int32_t g = 0; pt_fit && g < dhs_ref_n_groups(m); g++) {
            int32_t nsrc = 0;
            (void)dhs_ref_group_sources(m, g, &nsrc);
            pt_fit = nsrc <= DHS_TOPK_PAGES_MAX_SRC;
        }
        if (pt_fit) {
            const int64_t p = e->cfg.page_rows, pts = (e->cfg.max_positions + e->kmax + p - 1) / p + 1;
            const uint64_t tb = (uint64_t)e->ns * (uint64_t)N * (uint64_t)pts * sizeof(int32_t);
            if (pts > INT32_MAX || (st = dhs_ref_gpu_alloc(e->gpu, tb, (void **)&e->ptab_dev)) != DHS_OK) {
                set_err(e, "device step page tables", pts > INT32_MAX ? DHS_ERR_INVALID_ARG : st);
                return pts > INT32_MAX ? DHS_ERR_INVALID_ARG : st;
            }
            e->pt_stride = (int32_t)pts;
        }
    }
    return DHS_OK;
}

/* GPU: the session's device key stores (and resident rows) from its prefill */
static dhs_status gpu_start(dhs_ref_engine *e, sess *s, const dhs_ref_prefill *p)
{
    const dhs_ref_cfg *c = dhs_ref_model_cfg(e->m);
    int64_t cap = ALIGN_UP(rows_cap(e, 1), DHS_REF_KEY_BLOCK);
    int64_t nb = (p->n + DHS_REF_KEY_BLOCK - 1) / DHS_REF_KEY_BLOCK;
    uint64_t per = (uint64_t)c->idx_dim * DHS_REF_KEY_BLOCK * (c->key_fp8 ? 1u : sizeof(float));
    dhs_status st;
    for (int32_t g = 0; g < e->ng; g++) {
        if ((st = dhs_ref_gpu_alloc(e->gpu, (uint64_t)cap / DHS_REF_KEY_BLOCK * per, &s->gk_codes[g])) != DHS_OK ||
            (st = dhs_ref_gpu_memset(e->gpu, s->gk_codes[g], 0, (uint64_t)cap / DHS_REF_KEY_BLOCK * per)) != DHS_OK ||
            (st = dhs_ref_gpu_upload(e->gpu, s->gk_codes[g], c->key_fp8 ? (const void *)p->keys[g].codes : (const void *)p->keys[g].data,
                                     (uint64_t)nb * per)) != DHS_OK)
            return st;
        if (c->key_fp8 &&
            ((st = dhs_ref_gpu_alloc(e->gpu, (uint64_t)cap * sizeof(float), &s->gk_scales[g])) != DHS_OK ||
             (st = dhs_ref_gpu_memset(e->gpu, s->gk_scales[g], 0, (uint64_t)cap * sizeof(float))) != DHS_OK ||
             (st = dhs_ref_gpu_upload(e->gpu, s->gk_scales[g], p->keys[g].scales, (uint64_t)p->n * sizeof(float))) != DHS_OK))
            return st;
    }
    if (!e->cfg.ctx)
        for (int32_t src = 0; src < e->ns; src++) {
            uint64_t bytes = (uint64_t)rows_cap(e, 1) * DHS_REF_ROW_BYTES;
            if ((st = dhs_ref_gpu_alloc(e->gpu, bytes, &s->grows[src])) != DHS_OK ||
                (st = dhs_ref_gpu_memset(e->gpu, s->grows[src], 0, bytes)) != DHS_OK ||
                (st = dhs_ref_gpu_upload(e->gpu, s->grows[src], p->rows[src], (uint64_t)p->n * DHS_REF_ROW_BYTES)) != DHS_OK)
                return st;
        }
    return DHS_OK;
}

dhs_status dhs_ref_engine_create(const dhs_ref_model *m, const dhs_ref_engine_cfg *cfg, dhs_ref_engine **out)
{
    if (!m || !cfg || !out || cfg->max_sessions < 1 || cfg->max_slots < 1 || cfg->k_max < 1 ||
        cfg->max_positions < 1 || cfg->page_rows < 1 ||
        (cfg->import_mode != DHS_REF_IMPORT_DEVICE && cfg->import_mode != DHS_REF_IMPORT_HOST) ||
        (cfg->oracle && (!cfg->oracle_n || !cfg->oracle_accept || cfg->verify != DHS_REF_VERIFY_GREEDY)))
        return DHS_ERR_INVALID_ARG;
    *out = NULL;
    const dhs_ref_cfg *c = dhs_ref_model_cfg(m);
    dhs_ref_engine *e = calloc(1, sizeof *e);
    if (!e) return DHS_ERR_NOMEM;
    e->m = m;
    e->cfg = *cfg;
    if (e->cfg.temperature <= 0.0f) e->cfg.temperature = 1.0f;
    e->V = c->vocab;
    e->d = c->d_model;
    e->k = c->topk;
    e->kmax = cfg->k_max;
    e->ng = dhs_ref_n_groups(m);
    e->ns = dhs_ref_n_sources(m);
    e->P = (c->comp_m > 1 ? c->comp_m : 1) + cfg->k_max;
    for (int32_t g = 0; g < e->ng; g++) {
        int32_t n;
        dhs_ref_group_sources(m, g, &n);
        if (n > e->nsrc_max) e->nsrc_max = n;
    }
    size_t S = (size_t)cfg->max_slots, K = (size_t)cfg->k_max;
    e->ring_rows = dhs_ring_rows(c->draft_window, cfg->k_max, cfg->page_rows);
    e->s = calloc((size_t)cfg->max_sessions, sizeof *e->s);
    e->slot_used = calloc(S, 1);
    e->ring = calloc(S * (size_t)e->ring_rows, dhs_ref_draft_row_bytes(m));
    e->sc = dhs_ref_scratch_create(m);
    e->blk = calloc(S * K, sizeof(int32_t));
    e->dprob = calloc(S * K * (size_t)e->V, sizeof(float));
    e->X = calloc(S * K * (size_t)e->d, sizeof(float));
    e->XN = calloc(S * K * (size_t)e->d, sizeof(float));
    e->sel = calloc((size_t)e->ng * S * K * (size_t)e->k, sizeof(int32_t));
    e->loc = calloc((size_t)e->ng * S * (size_t)e->nsrc_max * K * (size_t)e->k, sizeof(int32_t));
    e->rowbuf = aligned_alloc(16, S * (K + 1) * DHS_REF_ROW_BYTES);
    e->fetch = aligned_alloc(16, (size_t)e->k * DHS_REF_ROW_BYTES);
    e->fidx = calloc((size_t)e->k, sizeof(int32_t));
    e->prob = calloc((size_t)e->V, sizeof(float));
    e->lbuf = calloc(S * K * (size_t)e->V, sizeof(float));
    e->items = calloc(S, sizeof *e->items);
    e->reqs = calloc(S, sizeof *e->reqs);
    e->acc0 = calloc(S, sizeof *e->acc0);
    e->next_ids = calloc(S, sizeof *e->next_ids);
    e->ones = calloc(S, sizeof *e->ones);
    e->ahead_ids = calloc(S, sizeof *e->ahead_ids);
    e->titems = calloc(S, sizeof *e->titems);
    e->tsel = calloc(S * (size_t)e->ng, sizeof *e->tsel);
    if (!e->titems || !e->tsel ||
        !e->s || !e->slot_used || !e->ring || !e->sc || !e->blk || !e->dprob || !e->X || !e->XN || !e->sel ||
        !e->loc || !e->rowbuf || !e->fetch || !e->fidx || !e->prob || !e->lbuf || !e->items || !e->reqs || !e->acc0 ||
        !e->next_ids || !e->ahead_ids || !e->ones) {
        dhs_ref_engine_destroy(e);
        return DHS_ERR_NOMEM;
    }
    memset(e->rowbuf, 0, S * (K + 1) * DHS_REF_ROW_BYTES);
    for (size_t i = 0; i < S; i++) e->ones[i] = 1;
    if (cfg->topk_impl != DHS_REF_TOPK_MODEL && cfg->topk_impl != DHS_REF_TOPK_FUSED && cfg->topk_impl != DHS_REF_TOPK_SPLIT) {
        dhs_ref_engine_destroy(e);
        return DHS_ERR_INVALID_ARG;
    }
    if (cfg->step != DHS_REF_STEP_HOST && (!cfg->gpu || cfg->trace || cfg->step < 0 || cfg->step > DHS_REF_STEP_GRAPH)) {
        dhs_ref_engine_destroy(e);
        return DHS_ERR_UNSUPPORTED; /* the device step is the GPU pass's; a trace needs host selections */
    }
    if (cfg->gpu) {
        dhs_status st = gpu_create(e);
        if (st == DHS_OK && cfg->locmeter && cfg->step != DHS_REF_STEP_HOST) {
            const uint64_t pb = sizeof(int32_t) * (uint64_t)e->ng * (uint64_t)e->kmax * (uint64_t)e->k;
            st = dhs_ref_gpu_host_alloc(e->gpu, pb, (void **)&e->probe_h[0]);
            if (st == DHS_OK) st = dhs_ref_gpu_host_alloc(e->gpu, pb, (void **)&e->probe_h[1]);
        }
        if (st != DHS_OK) {
            dhs_ref_engine_destroy(e);
            return st;
        }
    }
    *out = e;
    return DHS_OK;
}

static void sess_free(dhs_ref_engine *e, sess *s)
{
    for (int32_t i = 0; i < DHS_MAX_SOURCES; i++) {
        if (s->gk_codes[i]) dhs_ref_gpu_free(e->gpu, s->gk_codes[i]);
        if (s->gk_scales[i]) dhs_ref_gpu_free(e->gpu, s->gk_scales[i]);
        if (s->grows[i]) dhs_ref_gpu_free(e->gpu, s->grows[i]);
    }
    free(s->tokens);
    for (int32_t i = 0; i < DHS_MAX_SOURCES; i++) {
        free(s->rows[i]);
        free(s->pend_lat[i]);
        free(s->pend_key[i]);
        dhs_ref_keys_free(&s->keys[i]);
    }
    if (s->active && s->slot >= 0) e->slot_used[s->slot] = 0;
    memset(s, 0, sizeof *s);
}

void dhs_ref_engine_destroy(dhs_ref_engine *e)
{
    if (!e) return;
    if (e->s)
        for (int32_t i = 0; i < e->cfg.max_sessions; i++)
            if (e->s[i].active) {
                if (e->cfg.ctx) dhs_request_close(e->cfg.ctx, e->s[i].req);
                sess_free(e, &e->s[i]);
            }
    free(e->s);
    free(e->slot_used);
    free(e->ring);
    dhs_ref_scratch_destroy(e->sc);
    free(e->blk);
    free(e->dprob);
    free(e->X);
    free(e->XN);
    free(e->sel);
    free(e->loc);
    free(e->rowbuf);
    free(e->fetch);
    free(e->fidx);
    free(e->prob);
    free(e->lbuf);
    free(e->items);
    free(e->reqs);
    free(e->acc0);
    free(e->next_ids);
    free(e->ones);
    free(e->ahead_ids);
    free(e->titems);
    free(e->tsel);
    free(e->gtok);
    free(e->gpos);
    free(e->gp_rowdst);
    free(e->gp_kc);
    free(e->gp_ks);
    free(e->gp_base);
    free(e->gloc);
    free(e->glog);
    free(e->gtail);
    free(e->tab_epoch);
    if (e->gloc_dev) dhs_ref_gpu_free(e->gpu, e->gloc_dev);
    if (e->ptab_dev) dhs_ref_gpu_free(e->gpu, e->ptab_dev);
    for (int b = 0; b < 2; b++)
        if (e->probe_h[b]) dhs_ref_gpu_host_free(e->gpu, e->probe_h[b]);
    dhs_ref_gpu_destroy(e->gpu);
    free(e);
}

/* a token from logits by the verification rule's sampling (greedy: argmax) */
static int32_t pick(dhs_ref_engine *e, sess *s, const float *logits)
{
    if (e->cfg.verify == DHS_REF_VERIFY_GREEDY) return dhs_ref_argmax(logits, e->V);
    dhs_ref_softmax(logits, e->V, e->cfg.temperature, e->prob);
    return dhs_ref_sample(e->prob, e->V, dhs_rng_f24(&s->rng));
}

dhs_status dhs_ref_engine_start(dhs_ref_engine *e, int32_t id, const dhs_ref_prefill *p, dhs_req req)
{
    return dhs_ref_engine_start_shared(e, id, p, req, 0);
}

dhs_status dhs_ref_engine_start_shared(dhs_ref_engine *e, int32_t id, const dhs_ref_prefill *p, dhs_req req, int64_t shared)
{
    const dhs_ref_model *m = e->m;
    const dhs_ref_cfg *c = dhs_ref_model_cfg(m);
    e->gpu_idle_since = 0; /* an import between rounds is not a round's exposed host time */
    e->x_exit = 0;
    if (id < 0 || id >= e->cfg.max_sessions || e->s[id].active || !p || p->n < 1 ||
        p->n + e->kmax + 1 > e->cfg.max_positions || shared < 0 || shared > p->n)
        return DHS_ERR_INVALID_ARG;
    /* rows in the request's open import: only the hierarchy without a shadow copy reads none of them here */
    if (p->in_import && (!e->cfg.ctx || e->cfg.shadow || shared)) return DHS_ERR_INVALID_ARG;
    int32_t slot = -1;
    for (int32_t i = 0; i < e->cfg.max_slots; i++)
        if (!e->slot_used[i]) {
            slot = i;
            break;
        }
    if (slot < 0) return DHS_ERR_STATE;
    sess *s = &e->s[id];
    memset(s, 0, sizeof *s);
    s->slot = -1;
    s->rope_pos = -1;
    s->tokens = malloc(sizeof(int32_t) * (size_t)(e->cfg.max_positions + 1));
    if (!s->tokens) goto nomem;
    for (int32_t g = 0; g < e->ng && !e->gpu; g++) {
        int32_t mm = dhs_ref_group_m(m, g);
        if (dhs_ref_keys_init_model(m, &s->keys[g], rows_cap(e, mm))) goto nomem;
        /* the prefill's keys: ceil(n/m) rows, same blocked layout */
        dhs_ref_keys_copy(&s->keys[g], &p->keys[g], (p->n + mm - 1) / mm);
        if (mm > 1) {
            if (!(s->pend_key[g] = calloc((size_t)e->P * (size_t)c->idx_dim, sizeof(float)))) goto nomem;
            for (int64_t t = p->n / mm * mm, j = 0; t < p->n; t++, j++)
                memcpy(s->pend_key[g] + (t % e->P) * c->idx_dim, p->tail_key[g] + j * c->idx_dim,
                       sizeof(float) * (size_t)c->idx_dim);
        }
    }
    for (int32_t src = 0; src < e->ns; src++) {
        int32_t mm = dhs_ref_source_m(m, src);
        if (mm > 1) {
            if (!(s->pend_lat[src] = calloc((size_t)e->P * DHS_REF_LAT, sizeof(float)))) goto nomem;
            for (int64_t t = p->n / mm * mm, j = 0; t < p->n; t++, j++)
                memcpy(s->pend_lat[src] + (t % e->P) * DHS_REF_LAT, p->tail_lat[src] + j * DHS_REF_LAT,
                       sizeof(float) * DHS_REF_LAT);
        }
        if ((!e->cfg.ctx || e->cfg.shadow) && !e->gpu) {
            size_t bytes = (size_t)rows_cap(e, mm) * DHS_REF_ROW_BYTES;
            if (!(s->rows[src] = aligned_alloc(16, bytes))) goto nomem;
            size_t have = (size_t)((p->n + mm - 1) / mm) * DHS_REF_ROW_BYTES;
            memcpy(s->rows[src], p->rows[src], have);
            memset(s->rows[src] + have, 0, bytes - have);
        }
    }
    if (e->gpu) {
        const double tk = dhs_wall_s();
        dhs_status st = gpu_start(e, s, p);
        e->imp.keys_s += dhs_wall_s() - tk;
        if (st != DHS_OK) {
            set_err(e, "GPU session start", st);
            sess_free(e, s);
            return st;
        }
    }
    if (e->cfg.ctx) {
        const void *rows[DHS_MAX_SOURCES];
        uint64_t bytes = 0;
        /* on a shared prefix: the rows after it (from the boundary row) */
        for (int32_t src = 0; src < e->ns; src++) {
            const int64_t mm = dhs_ref_source_m(m, src), r0 = shared / mm;
            rows[src] = p->in_import ? NULL : p->rows[src] + (size_t)r0 * DHS_REF_ROW_BYTES;
            bytes += (uint64_t)((p->n + mm - 1) / mm - r0) * DHS_REF_ROW_BYTES;
        }
        const unsigned flags = e->cfg.import_mode == DHS_REF_IMPORT_HOST ? DHS_IMPORT_HOST : DHS_IMPORT_DEVICE;
        const double ti = dhs_wall_s();
        /* a history generated into the request's host rows (dhs_ref_prefill_synthetic_into): its open
           import, begun with the same flag, commits (the rows are already there) */
        dhs_mem m0 = {0}, m1 = {0}; /* the optional bytes the import placed (none for a host import) */
        (void)dhs_get_mem(e->cfg.ctx, &m0);
        dhs_status st = p->in_import ? dhs_request_import_commit(e->cfg.ctx, req)
                                     : dhs_request_import(e->cfg.ctx, req, p->n, rows, flags);
        const double dt = dhs_wall_s() - ti;
        if (st == DHS_OK && dhs_get_mem(e->cfg.ctx, &m1) == DHS_OK && m1.optional_bytes > m0.optional_bytes)
            e->imp.placed_bytes += m1.optional_bytes - m0.optional_bytes;
        if (st == DHS_OK) {
            e->imp.imports++;
            e->imp.import_bytes += bytes;
            e->imp.import_s += dt;
        }
        if (st != DHS_OK) {
            set_err(e, p->in_import ? "dhs_request_import_commit" : "dhs_request_import", st);
            sess_free(e, s);
            return st;
        }
        s->req = req;
    }
    memcpy(s->tokens, p->tokens, sizeof(int32_t) * (size_t)p->n);
    s->prompt = s->n = p->n;
    s->rng = e->cfg.seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(id + 1));
    s->orng = (e->cfg.seed + 0x5851F42D4C957F2Dull) ^ (0xD1B54A32D192ED03ull * (uint64_t)(id + 1));
    s->tokens[s->n] = pick(e, s, p->logits); /* the first anchor */
    s->dn = p->n - c->draft_window > 0 ? p->n - c->draft_window : 0;
    s->slot = slot;
    s->epoch = ++e->epochs; /* a new session: its batch item's tables are uploaded again */
    s->active = 1;
    e->slot_used[slot] = 1;
    if (e->cfg.trace) dhs_trace_write_start((dhs_trace_writer *)e->cfg.trace, (uint32_t)id, p->n);
    return DHS_OK;
nomem:
    sess_free(e, s);
    return DHS_ERR_NOMEM;
}

dhs_status dhs_ref_engine_finish(dhs_ref_engine *e, int32_t id)
{
    if (id < 0 || id >= e->cfg.max_sessions || !e->s[id].active) return DHS_ERR_INVALID_ARG;
    sess *s = &e->s[id];
    dhs_status st = DHS_OK;
    if (e->cfg.ctx) {
        st = dhs_request_close(e->cfg.ctx, s->req);
        if (st != DHS_OK) set_err(e, "dhs_request_close", st);
    }
    if (e->cfg.trace) dhs_trace_write_end((dhs_trace_writer *)e->cfg.trace, (uint32_t)id);
    dhs_ref_engine_meter_flush(e); /* the session's last probe first */
    dhs_ref_locmeter_forget(e->cfg.locmeter, id);
    sess_free(e, s);
    return st;
}

int64_t dhs_ref_engine_positions(const dhs_ref_engine *e, int32_t id) { return e->s[id].n; }

const float *dhs_ref_engine_draft_row(const dhs_ref_engine *e, int32_t id, int64_t pos)
{
    return e->ring + dhs_ring_row(e->ring_rows, e->s[id].slot, pos) * 2 * dhs_ref_model_cfg(e->m)->draft_dim;
}
int64_t dhs_ref_engine_generated(const dhs_ref_engine *e, int32_t id) { return e->s[id].n + 1 - e->s[id].prompt; }

const int32_t *dhs_ref_engine_tokens(const dhs_ref_engine *e, int32_t id, int64_t *n)
{
    *n = e->s[id].n + 1;
    return e->s[id].tokens;
}

/* ------------------------------------------------------------- round pieces */
static float *Xat(dhs_ref_engine *e, float *A, int32_t i, int32_t j)
{
    return A + ((int64_t)i * e->kmax + j) * e->d;
}

static int32_t *sel_at(dhs_ref_engine *e, int32_t g, int32_t i, int32_t j)
{
    return e->sel + (((int64_t)g * e->cfg.max_slots + i) * e->kmax + j) * e->k;
}

/* locations of item i for the si-th source of group g: [K_i][k] */
static int32_t *loc_at(dhs_ref_engine *e, int32_t g, int32_t i, int32_t si, int32_t Ki)
{
    return e->loc + (((int64_t)g * e->cfg.max_slots + i) * e->nsrc_max * e->kmax) * e->k + (int64_t)si * Ki * e->k;
}

/* drafter: catch up on committed tokens, then propose K-1 tokens */
static void draft(dhs_ref_engine *e, sess *s, int32_t i, int32_t K)
{
    const dhs_ref_model *m = e->m;
    int32_t *blk = e->blk + (int64_t)i * e->kmax;
    blk[0] = s->tokens[s->n];
    if (K < 2) return; /* nothing proposed: the ring catches up when a wider round comes */
    /* a ring row depends only on its (token, position), and position t shares its row with t +
       ring_rows: the last ring_rows committed positions give the ring every round's catch-up would
       (a round of width 1 took 0.9 us a request for it on the serving host, 55 us a round at C = 64) */
    const int64_t from = s->n - s->dn > e->ring_rows ? s->n - e->ring_rows : s->dn;
    for (int64_t t = from; t < s->n; t++) dhs_ref_draft_kv(m, s->tokens[t], t, e->ring, e->ring_rows, s->slot);
    s->dn = s->n;
    float *logits = e->prob; /* reused: drafter logits, then its distribution */
    for (int32_t j = 0; j + 1 < K; j++) {
        float *q = e->dprob + ((int64_t)i * e->kmax + j) * e->V;
        dhs_ref_draft_step(m, blk[j], s->n + j, e->ring, e->ring_rows, s->slot, logits, e->sc);
        if (e->cfg.verify == DHS_REF_VERIFY_GREEDY) {
            blk[j + 1] = dhs_ref_argmax(logits, e->V);
            const int32_t id = (int32_t)(s - e->s);
            const int64_t pos = s->n + j + 1; /* the token draft j + 1 proposes */
            if (e->cfg.oracle && e->cfg.oracle[id] && pos < e->cfg.oracle_n[id]) {
                int32_t x = e->cfg.oracle[id][pos];
                double u = dhs_rng_unit(&s->orng);
                int32_t other = (int32_t)(dhs_rng_next(&s->orng) % (uint64_t)(e->V > 1 ? e->V - 1 : 1));
                blk[j + 1] = u < e->cfg.oracle_accept[id] || e->V < 2 ? x : (x + 1 + other) % e->V;
            }
        } else {
            dhs_ref_softmax(logits, e->V, e->cfg.temperature, q);
            blk[j + 1] = dhs_ref_sample(q, e->V, dhs_rng_f24(&s->rng));
        }
    }
}

/* verification: returns A, writes the A+1 emitted tokens */
static int32_t verify(dhs_ref_engine *e, sess *s, int32_t i, int32_t K, const float *logits, int32_t *emitted)
{
    const int32_t *blk = e->blk + (int64_t)i * e->kmax;
    int32_t A = 0, V = e->V;
    if (e->cfg.verify == DHS_REF_VERIFY_GREEDY) {
        while (A < K - 1 && blk[A + 1] == dhs_ref_argmax(logits + (int64_t)A * V, V)) A++;
        for (int32_t j = 0; j < A; j++) emitted[j] = blk[j + 1];
        emitted[A] = dhs_ref_argmax(logits + (int64_t)A * V, V);
        return A;
    }
    /* speculative sampling (Leviathan et al. 2023) */
    float *p = e->prob;
    for (; A < K - 1; A++) {
        const float *q = e->dprob + ((int64_t)i * e->kmax + A) * V;
        int32_t x = blk[A + 1];
        dhs_ref_softmax(logits + (int64_t)A * V, V, e->cfg.temperature, p);
        float u = dhs_rng_f24(&s->rng);
        if (u * q[x] < p[x]) { /* accept with probability min(1, p/q) */
            emitted[A] = x;
            continue;
        }
        /* rejected: sample from the residual max(0, p - q) (normalised) */
        float tot = 0.0f;
        for (int32_t v = 0; v < V; v++) {
            p[v] = p[v] > q[v] ? p[v] - q[v] : 0.0f;
            tot += p[v];
        }
        if (tot <= 0.0f) dhs_ref_softmax(logits + (int64_t)A * V, V, e->cfg.temperature, p);
        emitted[A] = dhs_ref_sample(p, V, dhs_rng_f24(&s->rng));
        return A;
    }
    dhs_ref_softmax(logits + (int64_t)A * V, V, e->cfg.temperature, p);
    emitted[A] = dhs_ref_sample(p, V, dhs_rng_f24(&s->rng));
    return A;
}

/* rows of layer l's source for the block of session s: encodes them into buf,
   sets the index keys (producer), returns the first row and row count */
static int32_t block_rows(dhs_ref_engine *e, sess *s, int32_t l, int32_t i, int32_t K, uint8_t *buf, int64_t *first)
{
    const dhs_ref_model *m = e->m;
    const dhs_ref_layer_info *li = dhs_ref_layer(m, l);
    int32_t mm = li->m, D = dhs_ref_model_cfg(m)->idx_dim;
    float lat[DHS_REF_LAT], key[DHS_REF_MAX_IDX_DIM];
    if (mm == 1) {
        for (int32_t j = 0; j < K; j++) {
            int64_t t = s->n + j;
            const float *xn = Xat(e, e->XN, i, j);
            dhs_ref_latent(m, l, t, xn, lat);
            dhs_ref_row_encode(lat, buf + (int64_t)j * DHS_REF_ROW_BYTES);
            if (li->producer) {
                dhs_ref_index_key(m, l, xn, key);
                dhs_ref_keys_set(&s->keys[li->group], t, key);
            }
        }
        *first = s->n;
        return K;
    }
    /* compressed: per-position state into the pending rings, then every row
       the block touches is rebuilt from its positions (the incomplete last
       row included: it is rewritten as positions arrive) */
    for (int32_t j = 0; j < K; j++) {
        int64_t t = s->n + j;
        const float *xn = Xat(e, e->XN, i, j);
        dhs_ref_latent(m, l, t, xn, s->pend_lat[li->source] + (t % e->P) * DHS_REF_LAT);
        if (li->producer) dhs_ref_index_key(m, l, xn, s->pend_key[li->group] + (t % e->P) * D);
    }
    int64_t last = s->n + K - 1, r0 = s->n / mm, r1 = last / mm;
    for (int64_t r = r0; r <= r1; r++) {
        const float *lp[DHS_REF_MAX_M], *kp[DHS_REF_MAX_M];
        int32_t cnt = 0;
        for (int64_t t = r * mm; t < (r + 1) * mm && t <= last; t++, cnt++) {
            lp[cnt] = s->pend_lat[li->source] + (t % e->P) * DHS_REF_LAT;
            if (li->producer) kp[cnt] = s->pend_key[li->group] + (t % e->P) * D;
        }
        dhs_ref_mean(lp, cnt, DHS_REF_LAT, lat);
        dhs_ref_row_encode(lat, buf + (r - r0) * DHS_REF_ROW_BYTES);
        if (li->producer) {
            dhs_ref_mean(kp, cnt, D, key);
            dhs_ref_keys_set(&s->keys[li->group], r, key);
        }
    }
    *first = r0;
    return (int32_t)(r1 - r0 + 1);
}

/* the index of layer li's source among its group's sources (the slice of the
   group's locations its attention reads) */
static int32_t src_in_group(const dhs_ref_model *m, const dhs_ref_layer_info *li)
{
    int32_t nsrc, si = 0;
    const int32_t *gsrc = dhs_ref_group_sources(m, li->group, &nsrc);
    while (si < nsrc - 1 && gsrc[si] != li->source) si++;
    return si;
}

/* the target pass on the GPU (model/gpu.h); same library calls as the CPU pass */
static dhs_status gpu_target(dhs_ref_engine *e, int32_t n, const int32_t *ids, const int32_t *K, float *logits)
{
    const dhs_ref_model *m = e->m;
    const dhs_ref_cfg *c = dhs_ref_model_cfg(m);
    dhs_ctx *ctx = e->cfg.ctx;
    int32_t kmax = e->kmax, k = e->k, nq = n * kmax;
    dhs_status st;
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < kmax; j++) {
            int32_t q = i * kmax + j;
            e->gtok[q] = j < K[i] ? e->blk[q] : 0;
            e->gpos[q] = j < K[i] ? e->s[ids[i]].n + j : -1;
        }
    if ((st = dhs_ref_gpu_begin(e->gpu, nq, e->gtok, e->gpos)) != DHS_OK) goto gpu_fail;
    for (int32_t l = 0; l < c->n_layers; l++) {
        const dhs_ref_layer_info *li = dhs_ref_layer(m, l);
        int32_t g = li->group, src = li->source, si = src_in_group(m, li);
        for (int32_t q = 0; q < nq; q++) {
            sess *s = &e->s[ids[q / kmax]];
            e->gp_kc[q] = s->gk_codes[g];
            e->gp_ks[q] = s->gk_scales[g];
            e->gp_rowdst[q] = ctx ? NULL : (uint8_t *)s->grows[src] + (e->gpos[q] > 0 ? e->gpos[q] : 0) * DHS_REF_ROW_BYTES;
            e->gp_base[q] = ctx ? dhs_source_pool(ctx, src) : s->grows[src];
        }
        /* rows (and keys) of every position of the block, written before any query */
        if ((st = dhs_ref_gpu_rows(e->gpu, l, ctx ? NULL : e->gp_rowdst, e->gp_kc, e->gp_ks, ctx ? e->rowbuf : NULL)) != DHS_OK)
            goto gpu_fail;
        if (ctx)
            for (int32_t i = 0; i < n; i++) {
                sess *s = &e->s[ids[i]];
                if ((st = dhs_write_rows(ctx, s->req, src, s->n, K[i], e->rowbuf + (int64_t)i * kmax * DHS_REF_ROW_BYTES)) !=
                    DHS_OK) {
                    set_err(e, "dhs_write_rows", st);
                    return st;
                }
            }
        if (li->producer) {
            if ((st = dhs_ref_gpu_select(e->gpu, l, e->gp_kc, e->gp_ks, sel_at(e, g, 0, 0))) != DHS_OK) goto gpu_fail;
            for (int32_t i = 0; i < n; i++) loc_observe(e, ids[i], g, sel_at(e, g, i, 0), K[i]);
            if (ctx) {
                for (int32_t i = 0; i < n; i++)
                    e->items[i] = (dhs_resolve_item){e->s[ids[i]].req, K[i], sel_at(e, g, i, 0), loc_at(e, g, i, 0, K[i])};
                if ((st = dhs_resolve(ctx, g, k, n, e->items)) != DHS_OK) {
                    set_err(e, "dhs_resolve", st);
                    return st;
                }
            }
        }
        if (ctx) {
            for (int32_t i = 0; i < n; i++)
                memcpy(e->gloc + (int64_t)i * kmax * k, loc_at(e, g, i, si, K[i]), sizeof(int32_t) * (size_t)K[i] * (size_t)k);
            st = dhs_ref_gpu_attend(e->gpu, l, e->gp_base, e->gloc);
        } else {
            st = dhs_ref_gpu_attend(e->gpu, l, e->gp_base, NULL); /* location = row: the selection itself */
        }
        if (st != DHS_OK) goto gpu_fail;
        if (ctx && (l + 1 == c->n_layers || dhs_ref_layer(m, l + 1)->group != g) &&
            (st = dhs_group_done(ctx, g)) != DHS_OK) {
            set_err(e, "dhs_group_done", st);
            return st;
        }
    }
    if ((st = dhs_ref_gpu_logits(e->gpu, e->glog)) != DHS_OK) goto gpu_fail;
    for (int32_t i = 0; i < n; i++)
        memcpy(logits + (int64_t)i * kmax * e->V, e->glog + (int64_t)i * kmax * e->V, sizeof(float) * (size_t)K[i] * (size_t)e->V);
    return DHS_OK;
gpu_fail:
    snprintf(e->err, sizeof e->err, "GPU model: %s (%s)", dhs_ref_gpu_error(e->gpu), dhs_status_str(st));
    return st;
}

/* ------------------------------------------------------------- device step */
const char *dhs_ref_topk_str(int topk)
{
    return topk == DHS_REF_TOPK_SPLIT ? "split" : topk == DHS_REF_TOPK_FUSED ? "fused" : "model";
}

int dhs_ref_topk_parse(const char *s, int *out)
{
    if (!s) return -1;
    if (!strcmp(s, "model")) *out = DHS_REF_TOPK_MODEL;
    else if (!strcmp(s, "fused")) *out = DHS_REF_TOPK_FUSED;
    else if (!strcmp(s, "split")) *out = DHS_REF_TOPK_SPLIT;
    else return -1;
    return 0;
}

const char *dhs_ref_import_str(int mode) { return mode == DHS_REF_IMPORT_HOST ? "host" : "device"; }

void dhs_ref_engine_import_times(const dhs_ref_engine *e, dhs_ref_import_times *t) { *t = e->imp; }

const char *dhs_ref_step_str(int step)
{
    return step == DHS_REF_STEP_DEVICE ? "device" : step == DHS_REF_STEP_GRAPH ? "graph" : "host";
}

void dhs_ref_engine_step_times(const dhs_ref_engine *e, dhs_ref_step_times *t)
{
    *t = e->stt;
    if (e->gpu) dhs_ref_gpu_step_counts(e->gpu, &t->inputs_waits, &t->inputs_in_step);
}

static dhs_status step_gpu_fail(dhs_ref_engine *e, const char *what, dhs_status st)
{
    snprintf(e->err, sizeof e->err, "GPU model (%s): %s (%s)", what, dhs_ref_gpu_error(e->gpu), dhs_status_str(st));
    return st;
}

/* the top-k's page-table lookup for group g: its sources' locations at their places in gloc_dev (source si
   of the group at si * slice), from the round's tables (gpu_create checked the group's source count) */
static void page_desc(const dhs_ref_engine *e, int32_t g, int64_t slice, dhs_topk_pages *pg)
{
    int32_t nsrc = 0;
    const int32_t *gsrc = dhs_ref_group_sources(e->m, g, &nsrc);
    memset(pg, 0, sizeof *pg);
    pg->tab = e->ptab_dev;
    pg->src_stride = (int64_t)e->cfg.ctx_requests * e->pt_stride;
    pg->page_stride = e->pt_stride;
    pg->page_rows = e->cfg.page_rows;
    pg->q_per_req = e->kmax;
    pg->nsrc = nsrc;
    for (int32_t s = 0; s < nsrc; s++) pg->src[s] = gsrc[s];
    pg->locs = e->gloc_dev;
    pg->loc_stride = slice;
}

/* the step itself: launches and library calls only (capturable) */
static dhs_status gpu_step_issue(dhs_ref_engine *e)
{
    const dhs_ref_model *m = e->m;
    const dhs_ref_cfg *c = dhs_ref_model_cfg(m);
    dhs_ctx *ctx = e->cfg.ctx;
    const int64_t slice = (int64_t)e->cfg.ctx_requests * e->kmax * e->k; /* one source's locations */
    dhs_status st;
    dhs_ref_gpu *G = e->prof_now ? e->gpu : NULL; /* marks only on a profiled round (armed) */
    dhs_ref_gpu_prof_mark(G, DHS_REF_PH_OTHER);
    if ((st = dhs_ref_gpu_step_embed(e->gpu)) != DHS_OK) return step_gpu_fail(e, "embed", st);
    for (int32_t l = 0; l < c->n_layers; l++) {
        const dhs_ref_layer_info *li = dhs_ref_layer(m, l);
        int32_t g = li->group, si = src_in_group(m, li);
        /* rows (and keys) of every position of the block, in place, before any query */
        dhs_ref_gpu_prof_mark(G, DHS_REF_PH_OTHER);
        if ((st = dhs_ref_gpu_step_rows(e->gpu, l)) != DHS_OK) return step_gpu_fail(e, "rows", st);
        /* a round that cannot miss with page tables: the top-k writes every source's locations itself */
        const int by_pages = ctx && e->direct_now && e->ptab_dev;
        if (li->producer) {
            dhs_ref_gpu_prof_mark(G, DHS_REF_PH_INDEXER); /* the model marks DHS_REF_PH_TOPK itself */
            dhs_topk_pages pg;
            if (by_pages) page_desc(e, g, slice, &pg);
            if ((st = dhs_ref_gpu_step_select_pages(e->gpu, l, by_pages ? &pg : NULL)) != DHS_OK)
                return step_gpu_fail(e, "select", st);
            if (e->probe_h[0] && /* the queries of batch item 0 back to the host, for the locality meter */
                (st = dhs_ref_gpu_probe_copy(e->gpu, e->probe_h[0] + (int64_t)g * e->kmax * e->k,
                                             e->probe_h[1] + (int64_t)g * e->kmax * e->k, dhs_ref_gpu_step_sel(e->gpu),
                                             sizeof(int32_t) * (uint64_t)e->kmax * (uint64_t)e->k)) != DHS_OK)
                return step_gpu_fail(e, "locality probe", st);
            dhs_ref_gpu_prof_mark(G, DHS_REF_PH_OTHER);
            if (ctx && !by_pages && (st = dhs_resolve_device(ctx, g, e->k, dhs_ref_gpu_step_sel(e->gpu), e->gloc_dev,
                                                e->split_now    ? DHS_RESOLVE_SPLIT
                                                : e->direct_now ? DHS_RESOLVE_DIRECT
                                                                : 0)) != DHS_OK) {
                set_err(e, e->split_now    ? "dhs_resolve_device (DHS_RESOLVE_SPLIT)"
                           : e->direct_now ? "dhs_resolve_device (DHS_RESOLVE_DIRECT)"
                                           : "dhs_resolve_device",
                        st);
                return st;
            }
        } else if (ctx && e->split_now) {
            /* this source's recovered rows, copied while the group's earlier layers ran; a profiled
               round counts the wait as miss copy */
            dhs_ref_gpu_prof_mark(G, DHS_REF_PH_COPY);
            if ((st = dhs_source_wait(ctx, g, si)) != DHS_OK) {
                set_err(e, "dhs_source_wait", st);
                return st;
            }
        }
        /* resident: location = row, the selection itself */
        dhs_ref_gpu_prof_mark(G, DHS_REF_PH_ATTEND);
        if ((st = dhs_ref_gpu_step_attend(e->gpu, l, ctx ? e->gloc_dev + (int64_t)si * slice : NULL)) != DHS_OK)
            return step_gpu_fail(e, "attend", st);
        if (e->wlayer) { /* the deployment's weights of this layer */
            dhs_ref_gpu_prof_mark(G, DHS_REF_PH_WEIGHTS);
            for (uint64_t done = 0; done < e->wlayer;) {
                uint64_t n = e->wlayer - done < e->wchunk ? e->wlayer - done : e->wchunk;
                if ((st = dhs_ref_gpu_step_weights(e->gpu, n)) != DHS_OK) return step_gpu_fail(e, "weights", st);
                done += n;
            }
        }
        dhs_ref_gpu_prof_mark(G, DHS_REF_PH_OTHER);
        if (ctx && !by_pages && (l + 1 == c->n_layers || dhs_ref_layer(m, l + 1)->group != g) &&
            (st = dhs_group_done(ctx, g)) != DHS_OK) {
            set_err(e, "dhs_group_done", st);
            return st;
        }
    }
    if ((st = dhs_ref_gpu_step_logits(e->gpu)) != DHS_OK) return step_gpu_fail(e, "logits", st);
    /* the next step writes the locality probe's other buffer */
    if (e->probe_h[0] && (st = dhs_ref_gpu_probe_flip(e->gpu)) != DHS_OK) return step_gpu_fail(e, "locality probe", st);
    dhs_ref_gpu_prof_mark(G, DHS_REF_PH_OTHER); /* closes the last interval */
    return DHS_OK;
}

void dhs_ref_engine_mark(void *engine, int mark)
{
    dhs_ref_engine *e = engine;
    if (!e || !e->prof_now) return;
    dhs_ref_gpu_prof_mark(e->gpu, mark == DHS_CUDA_MARK_PLAN   ? DHS_REF_PH_RESOLVE
                                  : mark == DHS_CUDA_MARK_COPY ? DHS_REF_PH_COPY
                                                               : DHS_REF_PH_OTHER);
}

void dhs_ref_engine_profile(const dhs_ref_engine *e, double us[DHS_REF_PH_N], uint64_t *rounds, double *wall_s)
{
    for (int i = 0; i < DHS_REF_PH_N; i++) us[i] = e->prof_us[i];
    *rounds = e->prof_rounds;
    *wall_s = e->prof_wall_s;
}

/* cfg.page_tables: the round's page tables, on the step's stream after the round begin's tables, for a round
   that cannot miss only (the one that reads them, in its top-k instead of resolving; dhs_round_may_miss gives
   the step the same answer: nothing between here and the launch changes it) */
static dhs_status page_tables(dhs_ref_engine *e)
{
    if (!e->ptab_dev) return DHS_OK;
    int mm = 1;
    dhs_status st = dhs_round_may_miss(e->cfg.ctx, -1, &mm);
    if (st == DHS_OK && !mm)
        st = dhs_round_page_tables_device(e->cfg.ctx, e->pt_stride, (int64_t)e->cfg.ctx_requests * e->pt_stride, e->ptab_dev);
    if (st != DHS_OK) set_err(e, "dhs_round_page_tables_device", st);
    return st;
}

/* the library's host work for the step in flight (dhs_background: the tail backups that fell due),
   timed apart: overlapped with the device, not exposed */
static dhs_status background(dhs_ref_engine *e)
{
    if (!e->cfg.ctx) return DHS_OK;
    const double t0 = dhs_wall_s();
    const dhs_status st = dhs_background(e->cfg.ctx);
    e->stt.background_s += dhs_wall_s() - t0;
    e->stt.background_calls++;
    if (st != DHS_OK) set_err(e, "dhs_background", st);
    return st;
}

/* cfg.end_early: a round whose queries are all of width 1 accepts 0 proposals before verification (it
   has none), so it ends with dhs_round_end_early while the step runs (device step: after the launch;
   host step: at the equivalent point, after the target's compute) instead of after verification */
static dhs_status end_early(dhs_ref_engine *e, int32_t n, const int32_t *K)
{
    e->ended_early = 0;
    if (!e->cfg.ctx || !e->cfg.end_early) return DHS_OK;
    for (int32_t i = 0; i < n; i++)
        if (K[i] != 1) return DHS_OK;
    const double t0 = dhs_wall_s();
    const dhs_status st = dhs_round_end_early(e->cfg.ctx, e->acc0);
    e->stt.end_s += dhs_wall_s() - t0;
    if (st != DHS_OK) {
        set_err(e, "dhs_round_end_early", st);
        return st;
    }
    e->ended_early = 1;
    e->stt.early_ends++;
    return DHS_OK;
}

/* cfg.end_early 2 (ahead): after this round's early end, while its step runs, the next round
   (dhs_ref_engine_next: the same requests continuing, width 1) is opened with dhs_round_begin and, on
   the device step with device-written locations, gets its tail locations: the library's part of the
   next round's control plane under this step instead of between two steps (the round begin no longer
   waits for an early-ended round's step: docs/API.md). Its host time is in begin_s / tailloc_s and in
   ahead_s, in no exposed part. */
static dhs_status open_ahead(dhs_ref_engine *e)
{
    dhs_ctx *ctx = e->cfg.ctx;
    const int32_t n = e->next_n;
    e->next_n = 0;
    if (!ctx || e->cfg.end_early < 2 || !e->ended_early || n == 0) return DHS_OK;
    const double t0 = dhs_wall_s();
    for (int32_t i = 0; i < n; i++) e->reqs[i] = e->s[e->next_ids[i]].req;
    dhs_status st = dhs_round_begin(ctx, n, e->reqs, e->ones);
    const double t1 = dhs_wall_s();
    e->stt.begin_s += t1 - t0;
    if (st != DHS_OK) {
        set_err(e, "dhs_round_begin (the next round, opened ahead)", st);
        return st;
    }
    memcpy(e->ahead_ids, e->next_ids, sizeof(int32_t) * (size_t)n);
    e->ahead_n = n;
    e->ahead_open = 1;
    e->ahead_tl = 0;
    if (e->gpu && e->cfg.step != DHS_REF_STEP_HOST && e->compact && e->rloc_dev && !e->cfg.tail_calls) {
        /* the stride only: dhs_ref_gpu_step_inputs would wait for the step, which reads its inputs */
        if ((st = dhs_round_tail_locations_device(ctx, e->kmax, dhs_ref_gpu_step_stride(e->gpu), e->rloc_dev)) != DHS_OK) {
            set_err(e, "dhs_round_tail_locations_device (the next round, opened ahead)", st);
            return st;
        }
        if ((st = page_tables(e)) != DHS_OK) return st;
        e->ahead_tl = 1;
        e->stt.tailloc_s += dhs_wall_s() - t1;
    }
    e->stt.ahead_rounds++;
    e->stt.ahead_s += dhs_wall_s() - t0;
    return DHS_OK;
}

dhs_status dhs_ref_engine_next(dhs_ref_engine *e, int32_t n, const int32_t *ids, const int32_t *K)
{
    if (!e || n < 0 || n > e->cfg.max_slots || (n > 0 && (!ids || !K))) return DHS_ERR_INVALID_ARG;
    e->next_n = 0;
    if (e->cfg.end_early < 2 || !e->cfg.ctx) return DHS_OK; /* nothing is opened ahead: ignored */
    for (int32_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= e->cfg.max_sessions || !e->s[ids[i]].active) return DHS_ERR_INVALID_ARG;
        if (K[i] != 1) return DHS_OK; /* a round of width > 1 is not known before verification */
    }
    memcpy(e->next_ids, ids, sizeof(int32_t) * (size_t)n);
    e->next_n = n;
    return DHS_OK;
}

/* one round's host parts (dhs_ref_step_times host_rounds): the last round's tail, the caller's
   time between the rounds, this round's head up to t_target, the control plane and prelaunch */
static void host_parts(dhs_ref_engine *e, double t_target, double control, double prelaunch)
{
    e->stt.host_rounds++;
    e->stt.tail_s += e->x_tail;
    e->stt.tail_logits_s += e->t_logits;
    e->stt.tail_meter_s += e->t_meter;
    e->stt.tail_verify_s += e->t_verify;
    e->stt.tail_end_s += e->t_end;
    if (control > 0) {
        e->stt.ctl_inputs_s += e->x_inputs;
        e->stt.ctl_tables_s += e->x_tables;
        e->stt.ctl_upload_s += control - e->x_inputs - e->x_tables;
        e->stt.ctl_upload_copy_s += e->x_upcopy;
        e->stt.ctl_upload_event_s += e->x_upevent;
    }
    e->stt.between_s += e->x_enter - e->x_exit;
    e->stt.head_s += t_target - e->x_enter;
    e->stt.xcontrol_s += control;
    e->stt.prelaunch_s += prelaunch;
}

/* compact tables (model/gpu.h dhs_ref_gpu_step_compact): the round's row locations ([src][q],
   hierarchical only: resident rows are at their positions; by default written by the device with
   dhs_round_tail_locations_device, cfg.tail_host: dhs_round_tail_locations into the mirror, cfg.tail_calls:
   one dhs_tail_locations per item and source), and the base / key-store pointers of every layer only
   for the items whose session is not the one their device columns hold, uploaded per run of
   consecutive such items */
static dhs_status compact_tables(dhs_ref_engine *e, int32_t n, const int32_t *ids, const int32_t *K,
                                 const dhs_ref_gpu_step_in *in)
{
    const dhs_ref_model *m = e->m;
    const int32_t L = dhs_ref_model_cfg(m)->n_layers, kmax = e->kmax;
    dhs_ctx *ctx = e->cfg.ctx;
    dhs_status st;
    if (ctx && e->ahead_tl) {
        e->ahead_tl = 0; /* written when the round was opened ahead, under the last step */
    } else if (ctx) {
        const double t0 = dhs_wall_s();
        if (e->cfg.tail_calls) { /* one call per item and source (the comparison: test_gpu_engine --bench-control) */
            for (int32_t i = 0; i < n; i++) {
                const sess *s = &e->s[ids[i]];
                for (int32_t src = 0; src < e->ns; src++)
                    if ((st = dhs_tail_locations(ctx, s->req, src, s->n, K[i], in->rloc + (int64_t)src * in->stride +
                                                                                  (int64_t)i * kmax)) != DHS_OK) {
                        set_err(e, "dhs_tail_locations", st);
                        return st;
                    }
            }
        } else if (e->rloc_dev) { /* written by the device on the step's stream, nothing uploaded */
            if ((st = dhs_round_tail_locations_device(ctx, kmax, in->stride, e->rloc_dev)) != DHS_OK) {
                set_err(e, "dhs_round_tail_locations_device", st);
                return st;
            }
            if ((st = page_tables(e)) != DHS_OK) return st;
        } else if ((st = dhs_round_tail_locations(ctx, kmax, in->stride, in->rloc)) != DHS_OK) {
            /* the round's items in dhs_round_begin's order (e->reqs), every source: rows n_i .. n_i + K_i - 1
               (every source has one position per row here) */
            set_err(e, "dhs_round_tail_locations", st);
            return st;
        }
        e->x_tailloc += dhs_wall_s() - t0;
    }
    e->stt.all_items += (uint64_t)n;
    for (int32_t i = 0, run0 = -1; i <= n; i++) {
        const sess *s = i < n ? &e->s[ids[i]] : NULL;
        if (s && e->tab_epoch[i] != s->epoch) {
            for (int32_t l = 0; l < L; l++) {
                const dhs_ref_layer_info *li = dhs_ref_layer(m, l);
                const int32_t g = li->group, src = li->source;
                void *base = ctx ? (void *)(uintptr_t)dhs_source_pool(ctx, src) : s->grows[src];
                const int64_t o = (int64_t)l * in->stride + (int64_t)i * kmax;
                for (int32_t j = 0; j < kmax; j++) {
                    in->base[o + j] = base;
                    in->kcodes[o + j] = s->gk_codes[g];
                    in->kscales[o + j] = s->gk_scales[g];
                }
            }
            if (run0 < 0) run0 = i;
            continue;
        }
        if (run0 < 0) continue;
        if ((st = dhs_ref_gpu_step_tables(e->gpu, run0 * kmax, (i - run0) * kmax)) != DHS_OK)
            return step_gpu_fail(e, "tables", st);
        for (int32_t r = run0; r < i; r++) e->tab_epoch[r] = e->s[ids[r]].epoch;
        e->stt.table_items += (uint64_t)(i - run0);
        run0 = -1;
    }
    return DHS_OK;
}

/* the target pass as one device step: the host control plane once per round
   (tail locations; compact tables: the changed items' pointer tables, else every
   layer's tables; the upload), then the step
   (eager, or a CUDA graph), then the logits */
static dhs_status gpu_step(dhs_ref_engine *e, int32_t n, const int32_t *ids, const int32_t *K, float *logits,
                           const float **vlog)
{
    const dhs_ref_model *m = e->m;
    const dhs_ref_cfg *c = dhs_ref_model_cfg(m);
    dhs_ctx *ctx = e->cfg.ctx;
    const int32_t kmax = e->kmax, nq = n * kmax, ns = e->ns;
    dhs_ref_gpu_step_in in;
    dhs_status st;
    double t0 = dhs_wall_s();
    e->x_tailloc = 0;
    if (ctx && n > e->cfg.ctx_requests) return DHS_ERR_INVALID_ARG;
    if ((st = dhs_ref_gpu_step_inputs(e->gpu, &in)) != DHS_OK) return step_gpu_fail(e, "inputs", st);
    /* a round that failed after its launch left its predecessor's probe unfed, in the buffer this step
       writes: fed now (the step before has completed: dhs_ref_gpu_step_inputs waited for it) */
    if (e->snap_K && e->probe_snap == e->probe_h[e->probe_par]) dhs_ref_engine_meter_flush(e);
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < kmax; j++) {
            int32_t q = i * kmax + j;
            sess *s = &e->s[ids[i]];
            in.tokens[q] = j < K[i] ? e->blk[q] : 0;
            in.pos[q] = j < K[i] ? s->n + j : -1;
            if (j >= K[i]) continue;
            float *r = in.rope + (int64_t)q * 64;
            if (s->rope_pos == in.pos[q]) { /* computed during the last step */
                memcpy(r, s->rope_cs, sizeof s->rope_cs);
                e->stt.rope_ahead++;
            } else {
                dhs_ref_rope_cs(in.pos[q], r, r + 32);
                e->stt.rope_now++;
            }
        }
    const double t_in = dhs_wall_s();
    e->x_inputs = t_in - t0;
    if (e->compact) {
        if ((st = compact_tables(e, n, ids, K, &in)) != DHS_OK) return st;
        goto upload;
    }
    /* where the block's rows go (they count as written; the step writes them) */
    if (ctx) {
        const double tl = dhs_wall_s();
        for (int32_t i = 0; i < n; i++) {
            const sess *s = &e->s[ids[i]];
            for (int32_t src = 0; src < ns; src++)
                if ((st = dhs_tail_locations(ctx, s->req, src, s->n, K[i], e->gtail + ((int64_t)i * ns + src) * kmax)) !=
                    DHS_OK) {
                    set_err(e, "dhs_tail_locations", st);
                    return st;
                }
        }
        e->x_tailloc += dhs_wall_s() - tl;
    }
    for (int32_t l = 0; l < c->n_layers; l++) {
        const dhs_ref_layer_info *li = dhs_ref_layer(m, l);
        const int32_t g = li->group, src = li->source;
        const int64_t o = (int64_t)l * in.stride;
        uint8_t *pool = ctx ? (uint8_t *)(uintptr_t)dhs_source_pool(ctx, src) : NULL;
        for (int32_t q = 0; q < nq; q++) {
            const int32_t i = q / kmax, j = q % kmax;
            const sess *s = &e->s[ids[i]];
            const int64_t t = in.pos[q];
            in.kcodes[o + q] = s->gk_codes[g];
            in.kscales[o + q] = s->gk_scales[g];
            in.base[o + q] = ctx ? (void *)pool : s->grows[src];
            if (t < 0)
                in.rowdst[o + q] = NULL;
            else if (ctx)
                in.rowdst[o + q] = pool + (int64_t)e->gtail[((int64_t)i * ns + src) * kmax + j] * DHS_REF_ROW_BYTES;
            else
                in.rowdst[o + q] = (uint8_t *)s->grows[src] + t * DHS_REF_ROW_BYTES;
        }
    }
upload:
    e->x_tables = dhs_wall_s() - t_in;
    if ((st = dhs_ref_gpu_step_upload(e->gpu, nq)) != DHS_OK) return step_gpu_fail(e, "upload", st);
    dhs_ref_gpu_upload_times(e->gpu, &e->x_upcopy, &e->x_upevent);
    double t1 = dhs_wall_s();
    int captured = 0;
    /* a profiled round runs eagerly with marks (a graph round is timed as a whole) */
    const int prof = e->cfg.profile_every > 0 && ++e->step_calls % (uint64_t)e->cfg.profile_every == 0;
    if (prof && (st = dhs_ref_gpu_prof_begin(e->gpu)) != DHS_OK) return step_gpu_fail(e, "profile", st);
    e->prof_now = prof; /* read by gpu_step_issue and dhs_ref_engine_mark while the step is issued */
    /* the split resolve only where a copy can happen: its queue's fork and joins cost graph time
       even when nothing is copied (measured on the H200: bench/RESULTS.md) */
    /* a round that cannot miss resolves with DHS_RESOLVE_DIRECT: one kernel a group, no promotion */
    e->split_now = e->direct_now = 0;
    const int may_split = e->cfg.copy_overlap && e->nsrc_max > 1; /* one source per group: nothing to split */
    if (ctx && (may_split || e->cfg.direct_resolve)) {
        int mm = 0;
        const dhs_status ms = dhs_round_may_miss(ctx, -1, &mm);
        if (ms != DHS_OK) {
            set_err(e, "dhs_round_may_miss", ms);
            return ms;
        }
        e->split_now = may_split && mm;
        e->direct_now = e->cfg.direct_resolve && !mm;
    }
    /* the deployment's weight bytes of this round: its queries (speculative: every verified query is a
       token of the batch) */
    e->wlayer = 0;
    if (e->cfg.deploy) {
        int64_t toks = 0;
        for (int32_t i = 0; i < n; i++) toks += K[i];
        e->wlayer = (uint64_t)(dhs_deploy_step_bytes(e->cfg.deploy, (double)toks, NULL) / c->n_layers);
    }
    const double t_launch = dhs_wall_s();
    if (e->cfg.step == DHS_REF_STEP_GRAPH && !prof) {
        /* first round, the batch size changed, the split or direct mode did, or the weight bytes did */
        if (dhs_ref_gpu_graph_queries(e->gpu) != nq || e->graph_split != e->split_now ||
            e->graph_direct != e->direct_now || e->graph_wlayer != e->wlayer) {
            e->graph_split = e->split_now;
            e->graph_direct = e->direct_now;
            e->graph_wlayer = e->wlayer;
            if ((st = dhs_ref_gpu_capture_begin(e->gpu)) != DHS_OK) return step_gpu_fail(e, "capture", st);
            dhs_status is = gpu_step_issue(e);
            st = dhs_ref_gpu_capture_end(e->gpu, is == DHS_OK);
            if (is != DHS_OK) return is;
            if (st != DHS_OK) return step_gpu_fail(e, "capture", st);
            captured = 1;
        }
        if ((st = dhs_ref_gpu_graph_launch(e->gpu)) != DHS_OK) return step_gpu_fail(e, "graph launch", st);
    } else {
        st = gpu_step_issue(e);
        e->prof_now = 0;
        if (st != DHS_OK) return st; /* its last launch, the probe's flip, not issued: the bits agree */
    }
    /* the step runs and toggles the probe's device bit: the host's follows now, whatever fails below */
    e->probe_step = e->probe_par;
    e->probe_par ^= 1;
    double t2 = dhs_wall_s();
    if ((st = background(e)) != DHS_OK) return st; /* the due tail backups, while the GPU runs the step */
    if ((st = end_early(e, n, K)) != DHS_OK) return st; /* a width-1 round's end, beside the step */
    if ((st = open_ahead(e)) != DHS_OK) return st;       /* and the next round's opening */
    dhs_ref_engine_meter_flush(e); /* the last step's probe, while the GPU runs this one */
    /* the next round's RoPE values while the GPU runs this one: a plain item's next query is at n + 1
       (a speculative item's depends on its acceptance: computed before its upload) */
    for (int32_t i = 0; i < n; i++) {
        sess *s = &e->s[ids[i]];
        if (K[i] != 1) continue;
        s->rope_pos = s->n + 1;
        dhs_ref_rope_cs(s->rope_pos, s->rope_cs, s->rope_cs + 32);
    }
    const float *lg = NULL;
    if ((st = dhs_ref_gpu_step_wait(e->gpu, &lg)) != DHS_OK) return step_gpu_fail(e, "wait", st);
    double t3 = dhs_wall_s();
    if (e->probe_h[0]) { /* batch item 0's queries, fed to the meter after the next launch */
        const double tm = dhs_wall_s();
        dhs_ref_engine_meter_flush(e); /* the last probe, if the flush after this launch did not run */
        /* the buffer this step wrote stays as it is until the step after next: no copy here (a snapshot of
           item 0's queries cost 29-33 us between two steps at 32K, C = 64: bench/RESULTS.md) */
        e->probe_snap = e->probe_h[e->probe_step];
        e->snap_id = ids[0];
        e->snap_K = K[0];
        e->snap_n = e->s[ids[0]].n;
        e->snap_round = e->rounds;
        e->x_meter = dhs_wall_s() - tm;
        e->stt.meter_s += e->x_meter;
    }
    if (!prof && !captured && e->gpu_idle_since > 0 && e->x_exit > 0) { /* the GPU waited for the host since the last round */
        e->stt.exposed_rounds++;
        e->stt.exposed_s += t_launch - e->gpu_idle_since;
        host_parts(e, t0, t1 - t0, t_launch - t1);
    }
    e->x_done = t3;
    e->gpu_idle_since = !prof && !captured ? t3 : 0;
    const double tlg = dhs_wall_s();
    *vlog = lg; /* verified where the step left them (pinned, untouched until the next step's launch) */
    if (logits) { /* the caller's copy */
        for (int32_t i = 0; i < n; i++)
            memcpy(logits + (int64_t)i * kmax * e->V, lg + (int64_t)i * kmax * e->V, sizeof(float) * (size_t)K[i] * (size_t)e->V);
        *vlog = logits;
    }
    e->x_logits = dhs_wall_s() - tlg;
    if (prof) { /* its phases, not in stt: those are the serving rounds */
        double us[DHS_REF_PH_N] = {0};
        if ((st = dhs_ref_gpu_prof_collect(e->gpu, us, DHS_REF_PH_N)) != DHS_OK) return step_gpu_fail(e, "profile", st);
        for (int i = 0; i < DHS_REF_PH_N; i++) e->prof_us[i] += us[i];
        e->prof_rounds++;
        e->prof_wall_s += t3 - t0;
        return DHS_OK;
    }
    e->stt.rounds++;
    e->stt.split_rounds += (uint64_t)e->split_now;
    e->stt.direct_rounds += (uint64_t)e->direct_now;
    e->stt.page_table_rounds += (uint64_t)(e->direct_now && e->ptab_dev);
    if (captured) {
        e->stt.captures++;
        e->stt.capture_s += t3 - t0;
    } else {
        e->stt.control_s += t1 - t0;
        e->stt.tailloc_s += e->x_tailloc;
        e->stt.launch_s += t2 - t1;
        e->stt.wait_s += t3 - t2;
    }
    return DHS_OK;
}

dhs_status dhs_ref_engine_round(dhs_ref_engine *e, int32_t n, const int32_t *ids, const int32_t *K,
                                dhs_ref_round_out *out)
{
    const dhs_ref_model *m = e->m;
    const dhs_ref_cfg *c = dhs_ref_model_cfg(m);
    dhs_ctx *ctx = e->cfg.ctx;
    int32_t V = e->V, k = e->k, kmax = e->kmax;
    dhs_status st;
    if (n < 1 || n > e->cfg.max_slots || !ids || !K || !out) return DHS_ERR_INVALID_ARG;
    for (int32_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= e->cfg.max_sessions || !e->s[ids[i]].active || K[i] < 1 || K[i] > kmax)
            return DHS_ERR_INVALID_ARG;
        if (e->s[ids[i]].n + K[i] + 1 > e->cfg.max_positions) return DHS_ERR_ROW_RANGE;
    }
    e->ended_early = 0;
    e->x_logits = e->x_meter = e->x_inputs = e->x_tables = 0;
    /* the logits verified: the caller's out->logits, or (NULL) the engine's buffer or the device step's */
    float *LG = out->logits ? out->logits : e->lbuf;
    const float *vlog = LG;
    /* 1. proposals */
    double ta = dhs_wall_s();
    e->x_enter = ta;
    for (int32_t i = 0; i < n; i++) draft(e, &e->s[ids[i]], i, K[i]);
    double tb = dhs_wall_s();
    e->stt.all_rounds++;
    e->stt.draft_s += tb - ta;
    /* 2. open the round (done already when it was opened ahead, under the last step) */
    if (ctx && e->ahead_open) {
        e->ahead_open = 0;
        int same = n == e->ahead_n;
        for (int32_t i = 0; i < n && same; i++) same = ids[i] == e->ahead_ids[i] && K[i] == 1;
        if (!same) { /* an open round cannot be taken back: the caller declared another one */
            snprintf(e->err, sizeof e->err, "the round opened ahead (%d items, width 1) is not the round asked for "
                     "(%d items)", e->ahead_n, n);
            return DHS_ERR_STATE;
        }
    } else if (ctx) {
        e->ahead_tl = 0;
        for (int32_t i = 0; i < n; i++) e->reqs[i] = e->s[ids[i]].req;
        st = dhs_round_begin(ctx, n, e->reqs, K);
        e->stt.begin_s += dhs_wall_s() - tb;
        if (st != DHS_OK) {
            set_err(e, "dhs_round_begin", st);
            return st;
        }
    }
    /* 3. the target, layer by layer over the batch */
    if (e->gpu && e->cfg.step != DHS_REF_STEP_HOST) {
        st = gpu_step(e, n, ids, K, out->logits, &vlog); /* its host parts: gpu_step */
        e->x_exit = 0;
        if (st != DHS_OK) return st;
        goto verification;
    }
    {
        const double tt = dhs_wall_s();
        if (e->x_exit > 0) host_parts(e, tt, 0, 0);
        e->x_exit = 0;
    }
    if (e->gpu) {
        st = gpu_target(e, n, ids, K, LG);
        if (st == DHS_OK) st = background(e); /* the equivalent point: after the target's compute */
        if (st == DHS_OK) st = end_early(e, n, K);
        if (st == DHS_OK) st = open_ahead(e);
        if (st != DHS_OK) return st;
        e->x_done = dhs_wall_s();
        goto verification;
    }
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < K[i]; j++) dhs_ref_embed(m, e->blk[(int64_t)i * kmax + j], Xat(e, e->X, i, j));
    for (int32_t l = 0; l < c->n_layers; l++) {
        const dhs_ref_layer_info *li = dhs_ref_layer(m, l);
        int32_t g = li->group, src = li->source, si = src_in_group(m, li), nsrc;
        dhs_ref_group_sources(m, g, &nsrc); /* the group's source count: the resident locations below */
        /* rows and keys of every position of the block, written before any query */
        for (int32_t i = 0; i < n; i++) {
            sess *s = &e->s[ids[i]];
            for (int32_t j = 0; j < K[i]; j++) dhs_ref_rmsnorm(m, Xat(e, e->X, i, j), Xat(e, e->XN, i, j));
            uint8_t *buf = e->rowbuf + (int64_t)i * (kmax + 1) * DHS_REF_ROW_BYTES;
            int64_t first;
            int32_t nrows = block_rows(e, s, l, i, K[i], buf, &first);
            if (ctx && (st = dhs_write_rows(ctx, s->req, src, first, nrows, buf)) != DHS_OK) {
                set_err(e, "dhs_write_rows", st);
                return st;
            }
            if (!ctx || e->cfg.shadow) memcpy(s->rows[src] + first * DHS_REF_ROW_BYTES, buf, (size_t)nrows * DHS_REF_ROW_BYTES);
        }
        /* producer: selections of every query, then their locations */
        if (li->producer) {
            for (int32_t i = 0; i < n; i++) {
                sess *s = &e->s[ids[i]];
                for (int32_t j = 0; j < K[i]; j++) {
                    if (e->cfg.topk_impl == DHS_REF_TOPK_MODEL) {
                        if (dhs_ref_select(m, l, s->n + j, Xat(e, e->XN, i, j), &s->keys[g], sel_at(e, g, i, j), e->sc) < 0)
                            return DHS_ERR_NOMEM;
                        continue;
                    }
                    int32_t c = dhs_ref_select_fused(m, l, s->n + j, Xat(e, e->XN, i, j), &s->keys[g], sel_at(e, g, i, j), e->sc);
                    if (c < 0) {
                        snprintf(e->err, sizeof e->err, "fused top-k (layer %d, position %lld): %s%s", l,
                                 (long long)(s->n + j), dhs_status_str((dhs_status)c),
                                 c == DHS_ERR_INVALID_ARG ? " (a NaN index score: rejected)" : "");
                        return (dhs_status)c;
                    }
                }
            }
            for (int32_t i = 0; i < n; i++) loc_observe(e, ids[i], g, sel_at(e, g, i, 0), K[i]);
            if (ctx) {
                for (int32_t i = 0; i < n; i++)
                    e->items[i] = (dhs_resolve_item){e->s[ids[i]].req, K[i], sel_at(e, g, i, 0), loc_at(e, g, i, 0, K[i])};
                if ((st = dhs_resolve(ctx, g, k, n, e->items)) != DHS_OK) {
                    set_err(e, "dhs_resolve", st);
                    return st;
                }
            } else {
                /* resident: the location of row s is s in the source's array */
                for (int32_t i = 0; i < n; i++)
                    for (int32_t q = 0; q < nsrc; q++)
                        memcpy(loc_at(e, g, i, q, K[i]), sel_at(e, g, i, 0), sizeof(int32_t) * (size_t)K[i] * (size_t)k);
            }
        }
        /* attention over the located rows, then the MLP */
        for (int32_t i = 0; i < n; i++) {
            sess *s = &e->s[ids[i]];
            const uint8_t *base = ctx ? (const uint8_t *)dhs_source_pool(ctx, src) : s->rows[src];
            const int32_t *locs = loc_at(e, g, i, si, K[i]);
            for (int32_t j = 0; j < K[i]; j++) {
                const int32_t *lj = locs + (int64_t)j * k;
                if (ctx && e->cfg.fetch_rows) {
                    /* the located rows, read through the library into host memory */
                    for (int32_t q = 0; q < k; q++) {
                        e->fidx[q] = -1;
                        if (lj[q] < 0) continue;
                        if ((st = dhs_read_location(ctx, src, lj[q], e->fetch + (int64_t)q * DHS_REF_ROW_BYTES)) != DHS_OK) {
                            set_err(e, "dhs_read_location", st);
                            return st;
                        }
                        e->fidx[q] = q;
                        if (e->cfg.shadow)
                            shadow_check(e, s, ids[i], l, src, j, q, sel_at(e, g, i, j)[q], lj[q],
                                         e->fetch + (int64_t)q * DHS_REF_ROW_BYTES);
                    }
                    dhs_ref_attend_mlp(m, l, s->n + j, Xat(e, e->XN, i, j), e->fetch, DHS_REF_ROW_BYTES, e->fidx,
                                       Xat(e, e->X, i, j), e->sc);
                } else {
                    if (ctx && e->cfg.shadow)
                        for (int32_t q = 0; q < k; q++)
                            if (lj[q] >= 0)
                                shadow_check(e, s, ids[i], l, src, j, q, sel_at(e, g, i, j)[q], lj[q],
                                             base + (int64_t)lj[q] * DHS_REF_ROW_BYTES);
                    dhs_ref_attend_mlp(m, l, s->n + j, Xat(e, e->XN, i, j), base, DHS_REF_ROW_BYTES, lj,
                                       Xat(e, e->X, i, j), e->sc);
                }
            }
        }
        /* the group's last consumer issued: its staging can serve the next group */
        if (ctx && (l + 1 == c->n_layers || dhs_ref_layer(m, l + 1)->group != g) &&
            (st = dhs_group_done(ctx, g)) != DHS_OK) {
            set_err(e, "dhs_group_done", st);
            return st;
        }
    }
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < K[i]; j++)
            dhs_ref_logits(m, Xat(e, e->X, i, j), LG + ((int64_t)i * kmax + j) * V);
    if ((st = background(e)) != DHS_OK) return st; /* the equivalent point: after the target's compute */
    if ((st = end_early(e, n, K)) != DHS_OK) return st;
    if ((st = open_ahead(e)) != DHS_OK) return st;
    e->x_done = dhs_wall_s();
verification:
    if (out->block)
        for (int32_t i = 0; i < n; i++)
            memcpy(out->block + (int64_t)i * kmax, e->blk + (int64_t)i * kmax, sizeof(int32_t) * (size_t)K[i]);
    /* 4. verification */
    const double tv = dhs_wall_s();
    for (int32_t i = 0; i < n; i++)
        out->accepted[i] = verify(e, &e->s[ids[i]], i, K[i], vlog + (int64_t)i * kmax * V,
                                  out->emitted + (int64_t)i * kmax);
    e->x_verify = dhs_wall_s() - tv;
    e->stt.verify_s += e->x_verify;
    e->x_end = 0;
    /* 5. close the round, commit the accepted prefix (done beside the step when it ended early: width 1
       accepts 0) */
    if (e->ended_early)
        for (int32_t i = 0; i < n; i++)
            if (out->accepted[i] != 0) {
                snprintf(e->err, sizeof e->err, "round ended early with item %d accepting %d", i, out->accepted[i]);
                return DHS_ERR_STATE;
            }
    if (ctx && !e->ended_early) {
        double te = dhs_wall_s();
        st = dhs_round_end(ctx, out->accepted);
        e->x_end = dhs_wall_s() - te;
        e->stt.end_s += e->x_end;
        if (st != DHS_OK) {
            set_err(e, "dhs_round_end", st);
            return st;
        }
    }
    if (e->cfg.trace) {
        for (int32_t i = 0; i < n; i++) {
            const int32_t **sp = e->tsel + (int64_t)i * e->ng;
            for (int32_t g = 0; g < e->ng; g++) sp[g] = sel_at(e, g, i, 0);
            e->titems[i] = (dhs_trace_item){(uint32_t)ids[i], K[i], e->s[ids[i]].n, out->accepted[i], sp};
        }
        dhs_trace_status ts = dhs_trace_write_round((dhs_trace_writer *)e->cfg.trace, n, e->titems);
        if (ts != DHS_TRACE_OK) {
            snprintf(e->err, sizeof e->err, "trace: %s", dhs_trace_writer_error((dhs_trace_writer *)e->cfg.trace));
            return DHS_ERR_BACKEND;
        }
    }
    e->rounds++;
    for (int32_t i = 0; i < n; i++) {
        sess *s = &e->s[ids[i]];
        int32_t A = out->accepted[i];
        const int32_t *em = out->emitted + (int64_t)i * kmax;
        int64_t n0 = s->n, n1 = s->n + A + 1;
        for (int32_t j = 0; j <= A; j++) s->tokens[n0 + 1 + j] = em[j]; /* tokens[n0] is the anchor */
        s->n = n1;
        /* drafter KV holds positions < n0 + K - 1 with the block's tokens (a round of width 1 drafted
           nothing and caught nothing up: dn stays) */
        if (K[i] > 1) s->dn = n0 + K[i] - 1 < n1 ? n0 + K[i] - 1 : n1;
        /* discard the index keys of rejected positions (and of the
           incomplete row, rebuilt by the next round) */
        for (int32_t g = 0; g < e->ng && !e->gpu; g++) { /* GPU: rewritten before they are read */
            int32_t mm = dhs_ref_group_m(m, g);
            dhs_ref_keys_clear(&s->keys[g], n1 / mm, (n0 + K[i] - 1) / mm + 1);
        }
    }
    e->x_exit = dhs_wall_s();
    e->x_tail = e->x_exit - e->x_done;
    e->t_logits = e->x_logits, e->t_meter = e->x_meter, e->t_verify = e->x_verify, e->t_end = e->x_end;
    return DHS_OK;
}

/* ------------------------------------------------------------- library config */
static int32_t widest_group(const dhs_ref_model *m)
{
    int32_t w = 1;
    for (int32_t g = 0; g < dhs_ref_n_groups(m); g++) {
        int32_t n;
        dhs_ref_group_sources(m, g, &n);
        if (n > w) w = n;
    }
    return w;
}

/* the library's own accounting (dhs_config_sizes), so the budget below can
   never drift from what dhs_ctx_create reserves */
static dhs_sizes hier_sizes(const dhs_ref_model *m, const dhs_config *c)
{
    dhs_arch a;
    dhs_sizes z;
    dhs_ref_arch(m, &a);
    if (dhs_config_sizes(&a, c, &z) != DHS_OK) memset(&z, 0, sizeof z);
    return z;
}

uint64_t dhs_ref_hier_required_bytes(const dhs_ref_model *m, const dhs_config *c)
{
    return hier_sizes(m, c).request_bytes;
}

uint64_t dhs_ref_hier_staging_bytes(const dhs_ref_model *m, const dhs_config *c)
{
    return hier_sizes(m, c).staging_bytes;
}

dhs_status dhs_ref_hier_set_group_hot(const dhs_ref_model *m, dhs_config *c, const int32_t *rows, int32_t n)
{
    dhs_arch a;
    dhs_ref_arch(m, &a);
    if (!rows || n != a.n_groups || n > DHS_MAX_SOURCES) return DHS_ERR_INVALID_ARG;
    dhs_config d = *c;
    for (int32_t g = 0; g < n; g++) d.group_hot_rows[g] = rows[g];
    dhs_sizes z0, z1;
    if (dhs_config_sizes(&a, c, &z0) != DHS_OK || dhs_config_sizes(&a, &d, &z1) != DHS_OK) return DHS_ERR_INVALID_ARG;
    const uint64_t old_fixed = z0.staging_bytes + (uint64_t)c->max_requests * z0.request_bytes;
    const uint64_t hist = c->device_bytes > old_fixed ? c->device_bytes - old_fixed : 0;
    d.device_bytes = z1.staging_bytes + (uint64_t)d.max_requests * z1.request_bytes + hist;
    *c = d;
    return DHS_OK;
}

dhs_config dhs_ref_hier_config(const dhs_ref_model *m, int32_t slots, int64_t positions, int32_t k_max,
                               double history_sessions, int64_t history_positions, int32_t page_rows)
{
    const dhs_ref_cfg *mc = dhs_ref_model_cfg(m);
    dhs_config c = dhs_config_default();
    int32_t p = page_rows;
    c.page_rows = p;
    c.max_requests = slots;
    c.sel_k = mc->topk;
    c.spec_width = k_max;
    c.hot_rows = ALIGN_UP(2 * mc->topk, p);
    c.tail_rows = ALIGN_UP(2 * k_max + 2 * (mc->comp_m > 1 ? mc->comp_m : 1), p);
    if (c.tail_rows < 2 * p) c.tail_rows = 2 * p;
    c.max_rows = positions + 2 * k_max + 8;
    c.staging_arenas = widest_group(m);
    uint64_t page = (uint64_t)p * DHS_REF_ROW_BYTES;
    int64_t hist_pages = 0; /* complete imported pages of one session, all sources */
    for (int32_t s = 0; s < dhs_ref_n_sources(m); s++) hist_pages += history_positions / dhs_ref_source_m(m, s) / p;
    c.device_bytes = dhs_ref_hier_staging_bytes(m, &c) + (uint64_t)slots * dhs_ref_hier_required_bytes(m, &c) +
                     (uint64_t)(history_sessions * (double)hist_pages) * page;
    return c;
}
