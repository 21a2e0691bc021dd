/* run.c - the serving driver of the reference model (see run.h). */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dhs_plan.h"
#include "dhs_cuda.h"
#include "model/locmeter.h"
#include "model/lsprefill.h"
#include "model/run.h"
#include "sim/trace.h"
#include "sim/tracegen.h"
#include "sim/util.h"
#include "dhs_spec_auto.h"
#include "util/rng.h"

dhs_ref_run_cfg dhs_ref_run_cfg_default(void)
{
    dhs_ref_run_cfg c;
    memset(&c, 0, sizeof c);
    c.model = dhs_ref_cfg_tiny();
    c.sessions = 16;
    c.context = 4096;
    c.tokens = 64;
    c.spec = 4;
    c.compare = 1;
    c.hier = 1;
    c.policy = DHS_POLICY_LRU;
    c.verify = DHS_REF_VERIFY_GREEDY;
    c.temperature = 1.0f;
    c.seed = 1;
    c.slots = 8;
    c.history = 2.0;
    c.page_rows = 64;
    c.arrival = 2;
    c.async_delay = 1;
    c.threads = 1;
    c.copy_overlap = 1;
    c.direct_resolve = 1;
    c.page_tables = 1; /* 0.5-0.8 % off the 100K, C = 2 step against the direct kernels (H100) */
    c.decoded_optional = 1;
    c.topk_impl = DHS_REF_TOPK_SPLIT; /* the fastest on the H200, the same selections as the others */
    c.accept_hi = -1;
    return c;
}

void dhs_ref_run_result_free(dhs_ref_run_result *r)
{
    if (!r) return;
    free(r->tokens_of);
    free(r->round_t);
    for (int32_t i = 0; r->tok_seq && i < r->tok_n; i++) free(r->tok_seq[i]);
    free(r->tok_seq);
    free(r->tok_len);
    r->tok_seq = NULL;
    r->tok_len = NULL;
    r->tok_n = 0;
    r->tokens_of = NULL;
    r->round_t = NULL;
    r->n_round_s = 0;
}

void dhs_ref_run_set_geometry(dhs_ref_run_cfg *c, dhs_ref_geometry g)
{
    c->geometry = dhs_ref_geometry_str(g);
    c->synthetic = g != DHS_REF_GEOM_TINY;
    if (g == DHS_REF_GEOM_TINY) return;
    uint64_t seed = c->model.seed;
    c->model = dhs_ref_cfg_geometry(g);
    c->model.seed = seed;
}

static int32_t count_producers(const dhs_ref_model *m)
{
    int32_t prod = 0;
    for (int32_t l = 0; l < dhs_ref_model_cfg(m)->n_layers; l++) prod += dhs_ref_layer(m, l)->producer;
    return prod;
}

void dhs_ref_print_geometry(FILE *f, const dhs_ref_run_cfg *cfg, const dhs_ref_run_result *res)
{
    dhs_ref_model *m = NULL;
    char hid[160];
    if (dhs_ref_model_create(&cfg->model, &m) != DHS_OK) return;
    dhs_ref_cfg_hidden_str(&cfg->model, hid, sizeof hid);
    fprintf(f, "  geometry     %s: %d payload sources of %d-byte rows, %d index producers with %u-byte keys, k=%d; "
               "hidden size kept small (%s); model computed on the %s\n",
            cfg->geometry ? cfg->geometry : "tiny", dhs_ref_n_sources(m), DHS_REF_ROW_BYTES, count_producers(m),
            dhs_ref_key_bytes(m), cfg->model.topk, hid, res->gpu_model ? "GPU" : "CPU");
    if (cfg->synthetic)
        fprintf(f, "  history      synthetic (DESIGN §12): %" PRIu64 " prompt positions imported as deterministic rows and "
                   "keys; the model computed each prompt's last position and every decode step\n",
                res->synthetic_positions);
    dhs_ref_model_destroy(m);
}

static double lib_hot_hit(const dhs_ref_run_result *res)
{
    return res->st.entries ? (double)res->st.census_hot / (double)res->st.entries : -1;
}

void dhs_ref_print_locality(FILE *f, const dhs_ref_run_result *res, int32_t n_layers)
{
    if (!res->loc_on) return;
    fprintf(f, "  locality     %s through the model's own indexer (synthetic indexer queries calibrated in %.1f s; "
               "docs/LOCALITY.md)\n",
            res->loc_preset, res->loc_calib_s);
    fprintf(f, "  %5s %8s %10s %8s %6s %9s %8s %8s\n", "layer", "target", "calibrated", "alpha", "pairs", "random", "draft",
            "LRU hit");
    double st = 0, sa = 0, sh = 0;
    int32_t n = 0;
    for (int32_t l = 0; l < n_layers && l < DHS_REF_MAX_LAYERS; l++) {
        if (res->loc_target[l] < 0) continue;
        fprintf(f, "  %5d %8.4f %10.4f %8.4f %6" PRIu64 " %9.4f %8.4f %8.4f\n", l, res->loc_target[l], res->loc_calib[l],
                res->loc_alpha[l], res->loc_pairs[l], res->loc_random[l], res->loc_draft[l], res->loc_hit[l]);
        st += res->loc_target[l];
        sa += res->loc_alpha[l];
        sh += res->loc_hit[l];
        n++;
    }
    if (n)
        fprintf(f, "  %5s %8.4f %10s %8.4f %6s %9s %8s %8.4f   (LRU of %d rows per session and layer; library hot hits, all "
                   "layers: %.4f)\n",
                "mean", st / n, "", sa / n, "", "", "", sh / n, res->loc_lru_rows, lib_hot_hit(res));
}

void dhs_ref_run_json_locality(cJSON *j, const dhs_ref_run_result *res, int32_t n_layers)
{
    if (!res->loc_on) return;
    cJSON *o = cJSON_AddObjectToObject(j, "locality");
    cJSON_AddStringToObject(o, "preset", res->loc_preset);
    cJSON_AddNumberToObject(o, "lru_rows", res->loc_lru_rows);
    cJSON_AddNumberToObject(o, "calib_s", res->loc_calib_s);
    cJSON_AddNumberToObject(o, "library_hot_hit", lib_hot_hit(res));
    cJSON *a = cJSON_AddArrayToObject(o, "layers");
    for (int32_t l = 0; l < n_layers && l < DHS_REF_MAX_LAYERS; l++) {
        if (res->loc_target[l] < 0) continue;
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "layer", l);
        cJSON_AddNumberToObject(x, "target", res->loc_target[l]);
        cJSON_AddNumberToObject(x, "calibrated", res->loc_calib[l]);
        cJSON_AddNumberToObject(x, "corr", res->loc_corr[l]);
        cJSON_AddNumberToObject(x, "alpha", res->loc_alpha[l]);
        cJSON_AddNumberToObject(x, "pairs", (double)res->loc_pairs[l]);
        cJSON_AddNumberToObject(x, "random", res->loc_random[l]);
        cJSON_AddNumberToObject(x, "draft", res->loc_draft[l]);
        cJSON_AddNumberToObject(x, "draft_pairs", (double)res->loc_draft_pairs[l]);
        cJSON_AddNumberToObject(x, "lru_hit", res->loc_hit[l]);
        cJSON_AddNumberToObject(x, "accesses", (double)res->loc_accesses[l]);
        cJSON_AddItemToArray(a, x);
    }
}

void dhs_ref_run_json_geometry(cJSON *j, const dhs_ref_run_cfg *cfg, const dhs_ref_run_result *res)
{
    char hid[160];
    dhs_ref_cfg_hidden_str(&cfg->model, hid, sizeof hid);
    cJSON_AddStringToObject(j, "hidden", hid); /* the hidden size is small; the KV geometry is real */
    cJSON_AddNumberToObject(j, "synthetic_history_positions", (double)res->synthetic_positions);
    cJSON *cf = cJSON_GetObjectItem(j, "config"), *t = cJSON_GetObjectItem(j, "throughput");
    if (cf) {
        cJSON_AddStringToObject(cf, "geometry", cfg->geometry ? cfg->geometry : "tiny");
        dhs_ref_model *m = NULL;
        if (dhs_ref_model_create(&cfg->model, &m) == DHS_OK) {
            cJSON_AddNumberToObject(cf, "payload_sources", dhs_ref_n_sources(m));
            cJSON_AddNumberToObject(cf, "index_producers", count_producers(m));
            cJSON_AddNumberToObject(cf, "index_key_bytes", dhs_ref_key_bytes(m));
            dhs_ref_model_destroy(m);
        }
    }
    if (t) cJSON_AddStringToObject(t, "model_on", res->gpu_model ? "gpu" : "cpu");
}

/* ---------------------------------------------------------------- prefill threads */
typedef struct prefill_job {
    const dhs_ref_model *m;
    const dhs_ref_run_cfg *c;
    dhs_ref_prefill *pf;   /* [sessions] */
    const int64_t *len;    /* [sessions] */
    const int32_t *ids;    /* the sessions to prefill, or NULL: all */
    int32_t n;             /* how many */
    int synthetic;         /* dhs_ref_prefill_synthetic (its stream from the seed and session) */
    void *(*into)[DHS_MAX_SOURCES]; /* [sessions]: synthetic rows written there (a request's open import), or NULL */
    size_t into_stride;
    int32_t next;
    dhs_status failed;     /* the first failure's status (DHS_OK: none) */
    dhs_ref_run_result *r; /* streamed prefill counts (prefill_loads, ...) */
    pthread_mutex_t mu;
} prefill_job;

/* one prompt's history: full residency, or streamed through c->prefill_buffers
   layer buffers (on the GPU model with gpu_model) */
static dhs_status prefill_one(const dhs_ref_model *m, const dhs_ref_run_cfg *c, const int32_t *tok, int64_t n,
                              dhs_ref_prefill *out, dhs_ref_ls_stats *st)
{
    memset(st, 0, sizeof *st);
    if (c->prefill_buffers == 0) return dhs_ref_prefill_run(m, tok, n, out);
    const int64_t chunk = c->prefill_chunk > 0 ? c->prefill_chunk : 2048;
    uint64_t dev_bytes = 0;
    if (c->gpu_model)
        return dhs_ref_prefill_streamed_gpu(m, tok, n, chunk, c->prefill_buffers, NULL, c->topk_impl != DHS_REF_TOPK_MODEL,
                                            out, st, &dev_bytes);
    return dhs_ref_prefill_streamed(m, tok, n, chunk, c->prefill_buffers, NULL, out, st);
}

/* The shared prefix's history stream and prompt: independent of every session's */
#define SHARED_STREAM 0x5A17ED9F1C3B7E21ull
#define SHARED_SESSION (-1) /* dhs_ref_prompt's session of the shared prefix's tokens */

/* session i's prompt (i = SHARED_SESSION: the shared prefix's), its first shared_prefix tokens the shared
   prefix's */
static void run_prompt(const dhs_ref_run_cfg *c, int32_t i, int32_t vocab, int64_t n, int32_t *tok)
{
    if (i != SHARED_SESSION) dhs_ref_prompt(c->seed, i, vocab, n, tok);
    if (c->shared_prefix > 0 || i == SHARED_SESSION)
        dhs_ref_prompt(c->seed ^ SHARED_STREAM, 0, vocab, i == SHARED_SESSION || n < c->shared_prefix ? n : c->shared_prefix, tok);
}

/* The holder of the shared prefix: a request prefilled with the shared prompt's shared_prefix positions
   (a synthetic history: one more, since its last position is the model's own and so is not every
   session's), imported. */
static dhs_status shared_holder(const dhs_ref_model *m, const dhs_ref_run_cfg *c, dhs_ctx *ctx, dhs_req *h)
{
    const int64_t n = c->shared_prefix + (c->synthetic ? 1 : 0);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
    dhs_ref_prefill pf;
    memset(&pf, 0, sizeof pf);
    if (!tok) return DHS_ERR_NOMEM;
    run_prompt(c, SHARED_SESSION, dhs_ref_model_cfg(m)->vocab, n, tok);
    dhs_ref_ls_stats ls;
    dhs_status st = c->synthetic ? dhs_ref_prefill_synthetic_shared(m, tok, n, c->seed ^ SHARED_STREAM, c->shared_prefix,
                                                                    c->seed ^ SHARED_STREAM, &pf)
                                 : prefill_one(m, c, tok, n, &pf, &ls);
    free(tok);
    if (st == DHS_OK) st = dhs_request_open(ctx, n, h);
    if (st == DHS_OK) {
        const void *rows[DHS_MAX_SOURCES];
        for (int32_t src = 0; src < dhs_ref_n_sources(m); src++) rows[src] = pf.rows[src];
        st = dhs_request_import(ctx, *h, n, rows, c->import_mode == DHS_REF_IMPORT_HOST ? DHS_IMPORT_HOST : DHS_IMPORT_DEVICE);
        if (st != DHS_OK) dhs_request_close(ctx, *h);
    }
    dhs_ref_prefill_free(&pf);
    return st;
}

static void *prefill_worker(void *arg)
{
    prefill_job *J = arg;
    for (;;) {
        pthread_mutex_lock(&J->mu);
        int32_t k = J->next < J->n ? J->next++ : -1;
        pthread_mutex_unlock(&J->mu);
        if (k < 0) return NULL;
        int32_t i = J->ids ? J->ids[k] : k;
        int32_t *tok = malloc(sizeof(int32_t) * (size_t)J->len[i]);
        dhs_status st = DHS_ERR_NOMEM;
        dhs_ref_ls_stats ls;
        memset(&ls, 0, sizeof ls);
        if (tok) {
            run_prompt(J->c, i, dhs_ref_model_cfg(J->m)->vocab, J->len[i], tok);
            const uint64_t stream = J->c->seed ^ 0x5EEDull * (uint64_t)(i + 1);
            st = J->synthetic && J->into ? dhs_ref_prefill_synthetic_into(J->m, tok, J->len[i], stream, J->c->shared_prefix,
                                                                          J->c->seed ^ SHARED_STREAM, J->into[i],
                                                                          J->into_stride, &J->pf[i])
                 : J->synthetic ? dhs_ref_prefill_synthetic_shared(J->m, tok, J->len[i], stream, J->c->shared_prefix,
                                                                   J->c->seed ^ SHARED_STREAM, &J->pf[i])
                              : prefill_one(J->m, J->c, tok, J->len[i], &J->pf[i], &ls);
            free(tok);
        }
        pthread_mutex_lock(&J->mu);
        if (st != DHS_OK && J->failed == DHS_OK) J->failed = st;
        if (st == DHS_OK && J->r) {
            J->r->prefill_loads += ls.loads;
            if (ls.buffer_bytes > J->r->prefill_buffer_bytes) J->r->prefill_buffer_bytes = ls.buffer_bytes;
            if (ls.resident_bytes > J->r->prefill_resident_bytes) J->r->prefill_resident_bytes = ls.resident_bytes;
        }
        pthread_mutex_unlock(&J->mu);
    }
}

/* prefill the n sessions ids (NULL: 0..n-1) on up to nt threads (this one
   included); each prefill is a pure function of its session, so the bytes do
   not depend on nt; the GPU model's streamed prefill runs one prompt at a time
   (the model's scratch is shared). Returns the first failure's status. */
static dhs_status prefill_list_into(const dhs_ref_model *m, const dhs_ref_run_cfg *c, const int64_t *len, dhs_ref_prefill *pf,
                                    const int32_t *ids, int32_t n, int32_t nt, int synthetic, dhs_ref_run_result *r,
                                    void *(*into)[DHS_MAX_SOURCES], size_t into_stride)
{
    prefill_job J;
    memset(&J, 0, sizeof J);
    J.into = into;
    J.into_stride = into_stride;
    J.m = m;
    J.c = c;
    J.pf = pf;
    J.len = len;
    J.ids = ids;
    J.n = n;
    J.synthetic = synthetic;
    J.r = r;
    pthread_mutex_init(&J.mu, NULL);
    if (nt < 1 || (!synthetic && c->prefill_buffers && c->gpu_model)) nt = 1;
    if (nt > n) nt = n;
    if (nt > 256) nt = 256;
    pthread_t th[256];
    int32_t started = 0;
    for (; started < nt - 1; started++)
        if (pthread_create(&th[started], NULL, prefill_worker, &J)) break;
    prefill_worker(&J); /* this thread works too */
    for (int32_t t = 0; t < started; t++) pthread_join(th[t], NULL);
    pthread_mutex_destroy(&J.mu);
    return J.failed;
}

static dhs_status prefill_list(const dhs_ref_model *m, const dhs_ref_run_cfg *c, const int64_t *len, dhs_ref_prefill *pf,
                               const int32_t *ids, int32_t n, int32_t nt, int synthetic, dhs_ref_run_result *r)
{
    return prefill_list_into(m, c, len, pf, ids, n, nt, synthetic, r, NULL, 0);
}

/* ---------------------------------------------------------------- the run */
enum { S_FUTURE = 0, S_WAITING, S_ACTIVE, S_DONE };

static uint64_t fnv1a(const int32_t *t, int64_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t i = 0; i < n; i++)
        for (int b = 0; b < 4; b++) {
            h ^= (uint8_t)((uint32_t)t[i] >> (8 * b));
            h *= 0x100000001b3ull;
        }
    return h;
}

/* the hierarchy's host bytes and sessions at their peaks */
static void mem_peaks(const dhs_ctx *ctx, dhs_ref_run_result *r, int64_t sessions)
{
    dhs_mem mm;
    if (dhs_get_mem(ctx, &mm) != DHS_OK) return;
    if (mm.host_bytes_allocated > r->host_bytes_peak) r->host_bytes_peak = mm.host_bytes_allocated;
    if (mm.host_bytes_shared > r->host_shared_peak) r->host_shared_peak = mm.host_bytes_shared;
    if ((uint64_t)sessions > r->sessions_peak) r->sessions_peak = (uint64_t)sessions;
    if (mm.optional_bytes > r->opt_bytes_peak) { /* optional pages still being filled (imports, repopulation) */
        r->opt_bytes_peak = mm.optional_bytes;
        r->opt_fill_rounds = r->rounds;
    }
}

#define FAIL(...)                                             \
    do {                                                      \
        snprintf(r->errmsg, sizeof r->errmsg, __VA_ARGS__);   \
        r->error = 1;                                         \
        goto done;                                            \
    } while (0)

int dhs_ref_run(const dhs_ref_run_cfg *cfg, dhs_ref_run_result *r)
{
    double t_start = dhs_wall_s();
    dhs_ref_run_cfg c = *cfg;
    memset(r, 0, sizeof *r);
    if (c.slots < 1) c.slots = c.sessions / 2 > 1 ? c.sessions / 2 : 1;
    int use_res = c.compare || !c.hier, use_hier = c.compare || c.hier;
    int32_t S = c.sessions, KM = c.spec;
    dhs_ref_model *m = NULL;
    dhs_backend *be = NULL;
    dhs_ctx *ctx = NULL;
    int hp_base_taken = 0; /* dhs_get_host_time read after the hierarchical engine's first round */
    uint64_t hp0_ns[DHS_HP_COUNT_] = {0}, hp0_calls[DHS_HP_COUNT_] = {0};
    dhs_ref_engine *er = NULL, *eh = NULL;
    dhs_trace_writer *tw = NULL;
    dhs_ref_locmeter *lm = NULL;
    dhs_req *adm_req = NULL;
    int32_t *adm = NULL, *state = NULL, *ids = NULL, *Kv = NULL, *A_res = NULL, *A_hier = NULL, *E_res = NULL, *E_hier = NULL;
    int64_t *arrive = NULL, *len = NULL;
    float *L_res = NULL, *L_hier = NULL;
    dhs_ref_prefill *pf = NULL;
    void *(*into_rows)[DHS_MAX_SOURCES] = NULL; /* [sessions]: the host rows of a session's open import */
    int32_t n_done = 0;
    /* spec_auto: the controller, its caps and query costs, the acceptance model's rates; the round-time
       fit (decayed sums of weight, Q, Q^2, t, Q t over rounds: t = fixed + per_query * Q, Q the round's
       queries, t without its host copies), the stats and copy profile of the previous round */
    dhs_spec_auto *sa = NULL;
    int32_t *sa_cap = NULL;
    double *sa_q = NULL, *acc_a = NULL, tf[5] = {0, 0, 0, 0, 0}, prof_copy_prev = 0;
    uint64_t prof_rounds_prev = 0, rows_prev = 0, sa_rounds = 0;
    if (S < 1 || KM < 1 || c.tokens < 1 || c.context < 1 || c.page_rows < 1 || c.shared_prefix < 0) FAIL("bad run configuration");
    r->step = c.step;
    r->topk_impl = c.topk_impl;
    if (c.topk_impl != DHS_REF_TOPK_MODEL && c.topk_impl != DHS_REF_TOPK_FUSED && c.topk_impl != DHS_REF_TOPK_SPLIT) FAIL("bad top-k implementation %d", c.topk_impl);
    if (c.step != DHS_REF_STEP_HOST) {
        if (!c.gpu_model) FAIL("--step %s needs the GPU model (--backend cuda)", dhs_ref_step_str(c.step));
        if (c.trace) FAIL("--step %s keeps the selections on the device: no --trace", dhs_ref_step_str(c.step));
        c.resolver = DHS_RESOLVER_DEVICE; /* dhs_resolve_device inside the step */
    }
    if (dhs_ref_model_create(&c.model, &m) != DHS_OK) {
        const char *why = dhs_ref_cfg_check(&c.model);
        FAIL("cannot create the model: %s", why ? why : "out of memory");
    }
    int32_t V = c.model.vocab;
    state = calloc((size_t)S, sizeof *state);
    arrive = calloc((size_t)S, sizeof *arrive);
    len = calloc((size_t)S, sizeof *len);
    pf = calloc((size_t)S, sizeof *pf);
    into_rows = calloc((size_t)S, sizeof *into_rows);
    ids = calloc((size_t)S, sizeof *ids);
    adm = calloc((size_t)S, sizeof *adm);
    adm_req = calloc((size_t)S, sizeof *adm_req);
    Kv = calloc((size_t)S, sizeof *Kv);
    L_res = calloc((size_t)S * (size_t)KM * (size_t)V, sizeof(float));
    L_hier = calloc((size_t)S * (size_t)KM * (size_t)V, sizeof(float));
    A_res = calloc((size_t)S, sizeof(int32_t));
    A_hier = calloc((size_t)S, sizeof(int32_t));
    E_res = calloc((size_t)S * (size_t)KM, sizeof(int32_t));
    E_hier = calloc((size_t)S * (size_t)KM, sizeof(int32_t));
    r->tokens_of = calloc((size_t)S, sizeof(uint64_t));
    if (c.keep_tokens) {
        r->tok_seq = calloc((size_t)S, sizeof *r->tok_seq);
        r->tok_len = calloc((size_t)S, sizeof *r->tok_len);
        r->tok_n = r->tok_seq && r->tok_len ? S : 0;
        if (!r->tok_n) FAIL("out of memory");
    }
    r->k_lo = INT32_MAX;
    r->accept_model_mean = -1;
    if (c.accept_hi >= 0) { /* the acceptance model: a_i uniform in [lo, hi], a pure function of (seed, i) */
        if (!(c.accept_lo >= 0 && c.accept_lo <= c.accept_hi && c.accept_hi <= 1)) FAIL("bad acceptance range");
        if (c.verify != DHS_REF_VERIFY_GREEDY) FAIL("the acceptance model needs greedy verification");
        acc_a = calloc((size_t)S, sizeof *acc_a);
        if (!acc_a) FAIL("out of memory");
        double sum = 0;
        for (int32_t i = 0; i < S; i++) {
            uint64_t g = c.seed ^ (0xA0761D6478BD642Full * (uint64_t)(i + 1));
            acc_a[i] = c.accept_lo + (c.accept_hi - c.accept_lo) * dhs_rng_unit(&g);
            sum += acc_a[i];
        }
        r->accept_model_mean = sum / S;
    }
    if (c.spec_auto) {
        dhs_spec_auto_cfg sc = dhs_spec_auto_cfg_default(S);
        sc.spec_max = KM;
        if (dhs_spec_auto_create(&sc, &sa) != DHS_OK) FAIL("spec auto: spec %d out of 1..64, or out of memory", KM);
        /* before any copy is timed: a 656-byte row over a 25 GB/s host link */
        dhs_spec_auto_set_row_us(sa, DHS_REF_ROW_BYTES / 25e3);
        sa_cap = calloc((size_t)S, sizeof *sa_cap);
        sa_q = calloc((size_t)S, sizeof *sa_q);
        if (!sa_cap || !sa_q) FAIL("out of memory");
    }
    if (!state || !arrive || !len || !pf || !into_rows || !ids || !adm || !adm_req || !Kv || !L_res || !L_hier || !A_res || !A_hier || !E_res || !E_hier ||
        !r->tokens_of)
        FAIL("out of memory");
    int64_t max_len = 0;
    for (int32_t i = 0; i < S; i++) {
        len[i] = c.context - (c.context > 64 ? (13 * i) % 32 : 0);
        arrive[i] = (int64_t)i * c.arrival;
        if (len[i] > max_len) max_len = len[i];
    }
    int64_t max_pos = max_len + c.tokens + KM + 2;
    int64_t min_len = max_len;
    for (int32_t i = 0; i < S; i++) min_len = len[i] < min_len ? len[i] : min_len;
    if (c.shared_prefix > 0) {
        if (c.shared_prefix >= min_len)
            FAIL("--shared-prefix %" PRId64 " must be below the shortest prompt (%" PRId64 " positions: the last is the "
                 "session's own)", c.shared_prefix, min_len);
        for (int32_t s2 = 0; s2 < dhs_ref_n_sources(m); s2++)
            if (c.shared_prefix % dhs_ref_source_m(m, s2))
                FAIL("--shared-prefix %" PRId64 " must end on a row of every source (m = %d)", c.shared_prefix,
                     dhs_ref_source_m(m, s2));
    }
    const int sharing = c.shared_prefix > 0 && !c.share_private && use_hier;
    dhs_req holder = {0, 0};
    int holder_open = 0;
    r->positions = c.context + c.tokens;

    /* the locality device: calibrate the synthetic indexer queries on session 0's history */
    const int loc_on = c.locality && c.locality->n_layers > 0;
    for (int32_t l = 0; l < DHS_REF_MAX_LAYERS; l++)
        r->loc_target[l] = r->loc_calib[l] = r->loc_alpha[l] = r->loc_random[l] = r->loc_hit[l] = r->loc_corr[l] =
            r->loc_draft[l] = -1;
    if (loc_on) {
        double tc = dhs_wall_s();
        const int32_t k = c.model.topk;
        r->loc_on = 1;
        snprintf(r->loc_preset, sizeof r->loc_preset, "%s", c.locality->preset);
        dhs_ref_iq_synth *iq = calloc(1, sizeof *iq);
        if (!iq) FAIL("out of memory");
        iq->seed = c.seed ^ 0x10CA11u;
        iq->w = 1.0f / sqrtf((float)(c.model.idx_heads * c.model.idx_dim));
        for (int32_t l = 0; l < c.model.n_layers; l++)
            if (dhs_ref_layer(m, l)->producer) r->loc_target[l] = dhs_locality_alpha(c.locality, l, len[0], k);
        /* the keys it is calibrated on: session 0's synthetic history, or its prompt's keys
           computed by the model with its own queries */
        dhs_ref_prefill p0;
        memset(&p0, 0, sizeof p0);
        int64_t ncal = c.synthetic ? len[0] - 1 : len[0];
        if (ncal < 2 * (int64_t)k) {
            free(iq);
            FAIL("--locality needs a history of at least 2k = %d positions (session 0 has %" PRId64 ")", 2 * k, ncal);
        }
        if (!c.synthetic) {
            int32_t *tok = malloc(sizeof(int32_t) * (size_t)len[0]);
            dhs_status ps = tok ? DHS_OK : DHS_ERR_NOMEM;
            if (tok) {
                dhs_ref_prompt(c.seed, 0, c.model.vocab, len[0], tok);
                ps = dhs_ref_prefill_run(m, tok, len[0], &p0);
                free(tok);
            }
            if (ps != DHS_OK) {
                free(iq);
                FAIL("locality calibration prefill: %s", dhs_status_str(ps));
            }
        }
        long np = sysconf(_SC_NPROCESSORS_ONLN);
        dhs_status cs = dhs_ref_iq_calibrate(m, c.synthetic ? NULL : p0.keys, c.seed ^ 0x5EEDull, ncal, len[0], 8, r->loc_target,
                                             np < 1 ? 1 : np > 16 ? 16 : (int32_t)np, iq, r->loc_calib);
        dhs_ref_prefill_free(&p0);
        if (cs == DHS_OK) {
            for (int32_t l = 0; l < c.model.n_layers; l++)
                if (r->loc_target[l] >= 0) /* consecutive queries' correlation */
                    r->loc_corr[l] = (double)iq->a[l] * iq->a[l] + (double)iq->b[l] * iq->d[l];
            dhs_ref_model_set_iq_synth(m, iq);
        }
        free(iq);
        if (cs != DHS_OK) FAIL("locality calibration: %s", dhs_status_str(cs));
        r->loc_calib_s = dhs_wall_s() - tc;
    }

    /* prefill: once per session, shared by both storage modes */
    double t0 = dhs_wall_s();
    if (c.synthetic && c.prefill_buffers) FAIL("a streamed prefill needs the model's own prefill (not a synthetic history)");
    if (!c.synthetic) {
        dhs_status ps = prefill_list(m, &c, len, pf, NULL, S, c.threads, 0, r);
        if (ps != DHS_OK) FAIL("prefill failed: %s", dhs_status_str(ps));
    }
    r->t_prefill = dhs_wall_s() - t0;

    /* library */
    dhs_arch arch;
    dhs_ref_arch(m, &arch);
    if (use_hier) {
        /* sharing a prefix: one slot more, for its holder (the sessions stay within `slots`) */
        r->lib_cfg = dhs_ref_hier_config(m, c.slots + sharing, max_pos, KM, c.history, c.context, c.page_rows);
        r->lib_cfg.policy = c.resolver == DHS_RESOLVER_DEVICE ? DHS_POLICY_CLOCK : c.policy;
        r->lib_cfg.resolver = c.resolver;
        r->lib_cfg.host_cache_bytes = c.host_cache_bytes;
        if (c.host_cache_fill && !c.host_cache_bytes) r->lib_cfg.host_cache_bytes = UINT64_MAX; /* what the spans take */
        if (c.group_hot_rows && dhs_ref_hier_set_group_hot(m, &r->lib_cfg, c.group_hot_rows, c.n_group_hot) != DHS_OK)
            FAIL("--group-hot-rows: %d sizes for a model of %d groups, each 0 or a multiple of the page rows %d (at "
                 "least one page)", c.n_group_hot, arch.n_groups, r->lib_cfg.page_rows);
        if (c.device_bytes) r->lib_cfg.device_bytes = c.device_bytes;
        if (c.repop_pages > 0) r->lib_cfg.repop_pages = c.repop_pages;
        r->lib_cfg.decoded_optional = c.decoded_optional;
        dhs_cpu_options co = {.async_delay = c.async_delay, .random_order = c.async_delay > 0, .seed = c.seed};
        dhs_status st = c.cuda ? dhs_backend_cuda_create(0, &be) : dhs_backend_cpu_create(&co, &be);
        if (st != DHS_OK && c.cuda) FAIL("no CUDA backend: %s (built without CUDA, or no device)", dhs_status_str(st));
        if (st == DHS_OK && c.cuda && (st = dhs_cuda_set_copy_queue_blocks(be, c.copy_queue_blocks)) != DHS_OK)
            FAIL("copy queue blocks %d: %s", c.copy_queue_blocks, dhs_status_str(st));
        if (st == DHS_OK) st = dhs_ctx_create(&arch, &r->lib_cfg, be, &ctx);
        if (st != DHS_OK) {
            r->budget_too_small = st == DHS_ERR_TOO_LARGE && c.device_bytes != 0;
            FAIL("cannot create the hierarchy (device budget %.2f MiB): %s", (double)r->lib_cfg.device_bytes / 1048576.0,
                 dhs_status_str(st));
        }
        if (c.host_cache_fill) { /* every slot's host rows pinned now, not in the imports */
            double tf = dhs_wall_s();
            for (int32_t s = 0; s < arch.n_sources; s++) {
                const int32_t ms = dhs_ref_source_m(m, s);
                dhs_status fs = dhs_host_cache_fill(ctx, (max_pos + ms - 1) / ms, r->lib_cfg.max_requests);
                if (fs != DHS_OK) FAIL("pinning the host rows of %d sessions ahead (--host-cache-fill): %s",
                                       r->lib_cfg.max_requests, dhs_status_str(fs));
            }
            r->t_host_fill = dhs_wall_s() - tf;
        }
        r->bytes_hier_hot_tail = dhs_ref_hier_required_bytes(m, &r->lib_cfg);
        r->bytes_hier_staging_share = dhs_ref_hier_staging_bytes(m, &r->lib_cfg) / (uint64_t)r->lib_cfg.max_requests;
    }
    int64_t ring_rows = dhs_ring_rows(c.model.draft_window, KM, c.page_rows);
    r->bytes_resident_session = dhs_ref_engine_model_bytes(m, r->positions, 1, ring_rows);
    r->bytes_keys_ring = dhs_ref_engine_model_bytes(m, r->positions, 0, ring_rows);
    if (c.trace) {
        dhs_trace_header h;
        char err[200], name[64];
        snprintf(name, sizeof name, "refmodel-%s-%s", c.geometry ? c.geometry : "tiny",
                 dhs_ref_layout_str(c.model.layout));
        if (dhs_trace_header_from_arch(&h, &arch, c.model.topk, KM, S, name) != DHS_TRACE_OK)
            FAIL("cannot describe the model as a trace header");
        snprintf(h.meta, sizeof h.meta,
                 "{\"generator\":\"dhs run\",\"layout\":\"%s\",\"sessions\":%d,\"context\":%" PRId64
                 ",\"tokens\":%d,\"spec\":%d,\"verify\":\"%s\",\"seed\":%" PRIu64 "}",
                 dhs_ref_layout_str(c.model.layout), S, c.context, c.tokens, KM,
                 c.verify == DHS_REF_VERIFY_GREEDY ? "greedy" : "sample", c.seed);
        if (dhs_trace_writer_open(c.trace, &h, &tw, err, sizeof err) != DHS_TRACE_OK) FAIL("trace %s: %s", c.trace, err);
    }
    dhs_ref_engine_cfg ec;
    memset(&ec, 0, sizeof ec);
    ec.max_sessions = S;
    ec.max_slots = S;
    ec.k_max = KM;
    ec.max_positions = max_pos;
    ec.verify = c.verify;
    ec.temperature = c.temperature;
    ec.seed = c.seed;
    ec.page_rows = c.page_rows;
    if (c.gpu_model) { /* normally with cuda; the CPU backend serves tests of the engine's GPU path */
        int m1 = 1;
        for (int32_t s = 0; s < dhs_ref_n_sources(m); s++) m1 &= dhs_ref_source_m(m, s) == 1;
        r->gpu_model = m1; /* compressed sources: the model stays on the CPU */
    }
    ec.gpu = r->gpu_model;
    if (c.step != DHS_REF_STEP_HOST && !ec.gpu) FAIL("--step %s needs the GPU model: m = 1 sources (not the compressed layout)",
                                                     dhs_ref_step_str(c.step));
    ec.step = c.step;
    ec.profile_every = c.step != DHS_REF_STEP_HOST ? c.profile_every : 0;
    ec.topk_impl = c.topk_impl;
    ec.copy_overlap = use_hier && c.copy_overlap;
    ec.direct_resolve = use_hier && c.direct_resolve;
    ec.page_tables = use_hier && c.direct_resolve && c.page_tables; /* where the step can: the engine decides */
    ec.tail_host = c.tail_host;
    ec.end_early = use_hier ? c.end_early : 0;
    ec.import_mode = c.import_mode;
    if (c.deploy && c.step == DHS_REF_STEP_HOST) FAIL("a deployment's weight reads need --step device or graph");
    ec.deploy = c.deploy;
    ec.ctx_requests = use_hier ? r->lib_cfg.max_requests : 0;
    /* the device step indexes its per-request arrays by the library's request slot: a shared prefix's
       holder takes one slot more than there are sessions */
    if (ec.ctx_requests > ec.max_slots) ec.max_slots = ec.ctx_requests;
    if (acc_a && c.oracle) {
        ec.oracle = c.oracle;
        ec.oracle_n = c.oracle_n;
        ec.oracle_accept = acc_a;
    }
    if (loc_on) { /* the meter follows the measured engine (the hierarchical one when it runs) */
        r->loc_lru_rows = use_hier ? r->lib_cfg.hot_rows : 2 * c.model.topk;
        if (dhs_ref_locmeter_create(dhs_ref_n_groups(m), c.model.topk, r->loc_lru_rows, max_pos, 8, &lm) != DHS_OK)
            FAIL("out of memory");
    }
    if (use_res) {
        ec.ctx = NULL;
        ec.locmeter = use_hier ? NULL : lm;
        ec.trace = use_hier ? NULL : tw;
        dhs_status es = dhs_ref_engine_create(m, &ec, &er);
        if (es != DHS_OK) FAIL("resident engine: %s", dhs_status_str(es));
    }
    if (use_hier) {
        ec.ctx = ctx;
        ec.locmeter = lm;
        ec.fetch_rows = !ec.gpu && (c.cuda || c.fetch_rows);
        ec.shadow = c.check && !ec.gpu;
        ec.trace = tw;
        ec.gpu_stream = ec.gpu ? dhs_cuda_stream(be) : NULL; /* attention after the resolver's gathers */
        dhs_status es = dhs_ref_engine_create(m, &ec, &eh);
        if (es != DHS_OK) FAIL("hierarchical engine: %s", dhs_status_str(es));
        /* the resolver's phases in the profile (CUDA backend only) */
        if (c.profile_every > 0 && c.cuda && ec.gpu) dhs_cuda_set_marker(be, dhs_ref_engine_mark, eh);
    }
    dhs_ref_engine *ref = er ? er : eh; /* the schedule follows this engine's tokens */
    if (sharing) {
        double tp = dhs_wall_s();
        dhs_status hs = shared_holder(m, &c, ctx, &holder);
        if (hs != DHS_OK) FAIL("the shared prefix's holder: %s", dhs_status_str(hs));
        holder_open = 1;
        r->t_prefill += dhs_wall_s() - tp;
    }


    /* rounds */
    int64_t round = 0;
    uint64_t cap_rounds = 0, prof_seen = 0;
    while (n_done < S) {
        for (int32_t i = 0; i < S; i++)
            if (state[i] == S_FUTURE && arrive[i] <= round) state[i] = S_WAITING;
        /* admissions in arrival order; a wait holds back later arrivals too. Synthetic
           histories are generated now (only the admitted sessions' are held), up to
           synth_parallel at once: open a group, generate it, start it in order */
        int32_t n_active = 0;
        for (int32_t i = 0; i < S; i++) n_active += state[i] == S_ACTIVE;
        int32_t par = c.synthetic && c.synth_parallel > 1 ? c.synth_parallel : 1, next_i = 0;
        for (int blocked = 0; !blocked;) {
            int32_t na = 0;
            for (; next_i < S && na < par; next_i++) {
                if (state[next_i] != S_WAITING) continue;
                if ((!ctx || sharing) && n_active + na >= c.slots) { /* resident (and the holder's extra slot): at most `slots` sessions at once */
                    blocked = 1;
                    break;
                }
                dhs_req req = {0, 0};
                if (ctx) {
                    dhs_status st = holder_open ? dhs_request_open_shared(ctx, holder, c.shared_prefix, max_pos, &req)
                                                : dhs_request_open(ctx, max_pos, &req);
                    if (st == DHS_WAIT) {
                        blocked = 1;
                        break;
                    }
                    if (st != DHS_OK) FAIL("%s: %s", holder_open ? "dhs_request_open_shared" : "dhs_request_open", dhs_status_str(st));
                    r->shared_opens += holder_open;
                }
                adm[na] = next_i;
                adm_req[na++] = req;
            }
            if (na == 0) break;
            if (c.synthetic) {
                double tp = dhs_wall_s();
                /* the hierarchy alone: each history generated straight into its request's host rows */
                const int into = !c.import_twice && eh && !er && !holder_open && !ec.shadow;
                for (int32_t a = 0; into && a < na; a++) {
                    dhs_status bs = dhs_request_import_begin(ctx, adm_req[a], len[adm[a]],
                                                             c.import_mode == DHS_REF_IMPORT_HOST ? DHS_IMPORT_HOST
                                                                                                  : DHS_IMPORT_DEVICE,
                                                             into_rows[adm[a]]);
                    if (bs != DHS_OK) FAIL("session %d: dhs_request_import_begin: %s", adm[a], dhs_status_str(bs));
                }
                dhs_status ps = prefill_list_into(m, &c, len, pf, adm, na, na, 1, NULL, into ? into_rows : NULL,
                                                  into ? dhs_pool_row_stride(ctx) : 0);
                if (ps != DHS_OK) FAIL("synthetic prefill of session %d: %s", adm[0], dhs_status_str(ps));
                r->t_prefill += dhs_wall_s() - tp;
            }
            double ts = dhs_wall_s();
            for (int32_t a = 0; a < na; a++) {
                int32_t i = adm[a];
                if (c.synthetic) r->synthetic_positions += (uint64_t)pf[i].synthetic;
                if (er && dhs_ref_engine_start(er, i, &pf[i], adm_req[a]) != DHS_OK) FAIL("resident start of session %d failed", i);
                if (eh && dhs_ref_engine_start_shared(eh, i, &pf[i], adm_req[a], holder_open ? c.shared_prefix : 0) != DHS_OK)
                    FAIL("session %d: %s", i, dhs_ref_engine_error(eh));
                dhs_ref_prefill_free(&pf[i]);
                state[i] = S_ACTIVE;
                n_active++;
            }
            r->t_start += dhs_wall_s() - ts;
            if (ctx) mem_peaks(ctx, r, n_active);
        }
        /* every session admitted: the holder's own hot cache and tail go back (the sessions keep the
           shared rows) */
        if (holder_open) {
            int all = 1;
            for (int32_t i = 0; i < S; i++) all &= state[i] == S_ACTIVE || state[i] == S_DONE;
            if (all) {
                if (dhs_request_close(ctx, holder) != DHS_OK) FAIL("closing the shared prefix's holder");
                holder_open = 0;
            }
        }
        /* the batch */
        int32_t n = 0;
        for (int32_t i = 0; i < S; i++) {
            if (state[i] != S_ACTIVE) continue;
            int64_t left = c.tokens - dhs_ref_engine_generated(ref, i);
            if (left <= 0) continue;
            ids[n] = i;
            Kv[n] = (int32_t)(left < KM ? left : KM);
            n++;
        }
        if (sa && n > 0) {
            /* the fit: per-query cost b = cov(Q, t) / var(Q), pulled (weight 0.25 query^2) towards half
               the mean time per query (the rounds before a probe have little spread in Q); before any
               round a wide guess. Copies are charged by the controller (miss model) */
            double fixed = 1000, b = 100;
            if (tf[0] > 0) {
                double W = tf[0], mq = tf[1] / W, mt = tf[3] / W, var = tf[2] / W - mq * mq,
                       cov = tf[4] / W - mq * mt, b0 = mq > 0 ? 0.5 * mt / mq : 1;
                b = (cov + 0.25 * b0) / ((var > 0 ? var : 0) + 0.25);
                if (b < 1e-3) b = 1e-3;
                double a = mt - b * mq;
                if (a < 0.01 * mt) a = 0.01 * mt;
                if (a < 1e-3) a = 1e-3;
                fixed = a + b * n;
            }
            for (int32_t i = 0; i < n; i++) {
                sa_cap[i] = Kv[i];
                sa_q[i] = b;
            }
            /* staging is reserved for spec_width * k rows per request and arena (DESIGN §6), so no width
               up to spec overflows it: the room is unbounded here */
            dhs_status ss = dhs_spec_auto_choose_round(sa, n, ids, sa_cap, sa_q, fixed, 0.0, -1.0, Kv, NULL);
            if (ss != DHS_OK) FAIL("dhs_spec_auto_choose_round: %s", dhs_status_str(ss));
            /* a probe every 6th round: one query less per session (one more where the choice is 1), so
               that the fit sees rounds of different widths at one load (without them a load that keeps
               its width keeps whatever split of fixed and per-query cost the prior gave) */
            if (++sa_rounds % 6 == 0)
                for (int32_t i = 0; i < n; i++) Kv[i] = Kv[i] > 1 ? Kv[i] - 1 : sa_cap[i] > 1 ? 2 : 1;
        }
        if ((uint64_t)n > r->max_active) r->max_active = (uint64_t)n;
        if (n > 0) {
            /* the logits are compared only when both engines run: otherwise none is copied out */
            dhs_ref_round_out o_res = {er && eh ? L_res : NULL, A_res, E_res, NULL},
                              o_hier = {er && eh ? L_hier : NULL, A_hier, E_hier, NULL};
            double t_res0 = r->t_resident;
            if (er) {
                double ta = dhs_wall_s();
                dhs_status st = dhs_ref_engine_round(er, n, ids, Kv, &o_res);
                r->t_resident += dhs_wall_s() - ta;
                if (st != DHS_OK) FAIL("resident round %" PRId64 ": %s", round, dhs_status_str(st));
            }
            double t_round = 0;
            if (eh && c.end_early == 2) {
                /* --round-end ahead: the next round is known now when every round has width 1 (spec 1, no
                   controller), every session continues and nobody can be admitted before it (no arrival
                   waiting or to come, no holder) */
                int ahead = !sa && !holder_open && KM == 1;
                for (int32_t i = 0; i < S && ahead; i++) ahead = state[i] == S_ACTIVE || state[i] == S_DONE;
                for (int32_t i = 0; i < n && ahead; i++) ahead = c.tokens - dhs_ref_engine_generated(ref, ids[i]) > 1;
                dhs_status ns = dhs_ref_engine_next(eh, ahead ? n : 0, ids, Kv);
                if (ns != DHS_OK) FAIL("dhs_ref_engine_next: %s", dhs_status_str(ns));
            }
            if (eh) {
                double ta = dhs_wall_s();
                dhs_status st = dhs_ref_engine_round(eh, n, ids, Kv, &o_hier);
                t_round = dhs_wall_s() - ta;
                r->t_hier += t_round;
                if (st != DHS_OK) FAIL("round %" PRId64 ": %s", round, dhs_ref_engine_error(eh));
                /* the library's host time from the second round on (the first follows the imports) */
                if (ctx && !hp_base_taken) hp_base_taken = dhs_get_host_time(ctx, hp0_ns, hp0_calls) == DHS_OK;
            } else {
                t_round = r->t_resident - t_res0;
            }
            if (c.keep_round_times) {
                /* a profiled round (eager, with events) is not a serving round: left out */
                double pus[DHS_REF_PH_N], pw;
                uint64_t prn;
                dhs_ref_engine_profile(eh ? eh : er, pus, &prn, &pw);
                if (prn == prof_seen) {
                    if (r->n_round_s == cap_rounds) {
                        uint64_t nc = cap_rounds ? 2 * cap_rounds : 256;
                        dhs_ref_round_time *a = realloc(r->round_t, sizeof *a * nc);
                        if (!a) FAIL("out of memory");
                        r->round_t = a;
                        cap_rounds = nc;
                    }
                    const int32_t *Ar = eh ? A_hier : A_res;
                    uint32_t tk = 0;
                    for (int32_t i = 0; i < n; i++) tk += (uint32_t)Ar[i] + 1;
                    r->round_t[r->n_round_s++] = (dhs_ref_round_time){t_round, tk, (uint32_t)n};
                }
                prof_seen = prn;
            }
            const int32_t *A = er ? A_res : A_hier;
            uint64_t Q = 0;
            for (int32_t i = 0; i < n; i++) {
                Q += (uint64_t)Kv[i];
                if (Kv[i] < r->k_lo) r->k_lo = Kv[i];
                if (Kv[i] > r->k_hi) r->k_hi = Kv[i];
            }
            r->queries += Q;
            r->batch_items += (uint64_t)n;
            if (sa) {
                for (int32_t i = 0; i < n; i++) dhs_spec_auto_observe(sa, ids[i], Kv[i], A[i]); /* valid by construction */
                /* the round's host rows (the stats, a wait on the device resolver's counters) and, on a
                   profiled round, its measured copy time */
                double rows = 0, copy_us = -1, row_us = 0;
                if (ctx) {
                    dhs_stats sn;
                    if (dhs_get_stats(ctx, &sn) == DHS_OK) {
                        rows = (double)(sn.host_rows_copied - rows_prev);
                        rows_prev = sn.host_rows_copied;
                    }
                    double pus[DHS_REF_PH_N], pw;
                    uint64_t prn;
                    dhs_ref_engine_profile(eh, pus, &prn, &pw);
                    if (prn == prof_rounds_prev + 1) copy_us = pus[DHS_REF_PH_COPY] - prof_copy_prev;
                    prof_rounds_prev = prn;
                    prof_copy_prev = pus[DHS_REF_PH_COPY];
                }
                dhs_spec_auto_observe_round(sa, n, (int32_t)Q, rows, copy_us);
                dhs_spec_auto_miss_model(sa, NULL, NULL, &row_us);
                double t = 1e6 * t_round - rows * row_us;
                if (t < 0) t = 0;
                const double d = 0.95, q = (double)Q;
                tf[0] = d * tf[0] + 1;
                tf[1] = d * tf[1] + q;
                tf[2] = d * tf[2] + q * q;
                tf[3] = d * tf[3] + t;
                tf[4] = d * tf[4] + q * t;
            }
            for (int32_t i = 0; i < n; i++) {
                r->proposals += (uint64_t)(Kv[i] - 1);
                r->accepted += (uint64_t)A[i];
                r->decode_tokens += (uint64_t)A[i] + 1;
            }
            if (er && eh) {
                int diverged = 0;
                for (int32_t i = 0; i < n; i++) {
                    for (int32_t j = 0; j < Kv[i]; j++) {
                        size_t off = ((size_t)i * (size_t)KM + (size_t)j) * (size_t)V;
                        r->logit_rows_compared++;
                        if (memcmp(L_res + off, L_hier + off, sizeof(float) * (size_t)V)) r->logit_mismatches++;
                    }
                    if (A_res[i] != A_hier[i] || memcmp(E_res + (size_t)i * (size_t)KM, E_hier + (size_t)i * (size_t)KM,
                                                        sizeof(int32_t) * (size_t)(A_res[i] + 1))) {
                        r->token_mismatches++;
                        diverged = 1;
                    }
                }
                if (diverged) FAIL("tokens diverged in round %" PRId64 " (run stopped)", round);
            }
            if (eh && c.check) {
                const char *first;
                r->shadow_mismatches = dhs_ref_engine_shadow_mismatches(eh, &first);
                if (r->shadow_mismatches) FAIL("%s", first);
            }
            if (ctx && c.check) {
                char msg[200];
                int nv = dhs_check_invariants(ctx, msg, sizeof msg);
                if (nv) {
                    r->invariant_violations += (uint64_t)nv;
                    FAIL("round %" PRId64 ": invariant violated: %s", round, msg);
                }
            }
            r->rounds++;
            if (ctx) mem_peaks(ctx, r, n);
        }
        /* completions */
        for (int32_t i = 0; i < S; i++) {
            if (state[i] != S_ACTIVE || dhs_ref_engine_generated(ref, i) < c.tokens) continue;
            int64_t na;
            const int32_t *ta = dhs_ref_engine_tokens(ref, i, &na);
            r->tokens_of[i] = fnv1a(ta, na);
            if (r->tok_seq) {
                r->tok_seq[i] = malloc(sizeof(int32_t) * (size_t)na);
                if (!r->tok_seq[i]) FAIL("out of memory");
                memcpy(r->tok_seq[i], ta, sizeof(int32_t) * (size_t)na);
                r->tok_len[i] = na;
            }
            if (er && eh) {
                int64_t nb;
                const int32_t *tb = dhs_ref_engine_tokens(eh, i, &nb);
                if (na != nb || memcmp(ta, tb, sizeof(int32_t) * (size_t)na)) r->token_mismatches++;
            }
            r->tokens += (uint64_t)dhs_ref_engine_generated(ref, i);
            if (er) dhs_ref_engine_finish(er, i);
            if (eh && dhs_ref_engine_finish(eh, i) != DHS_OK) FAIL("session %d: %s", i, dhs_ref_engine_error(eh));
            state[i] = S_DONE;
            n_done++;
        }
        int waiting = 0, active = 0, future = 0;
        for (int32_t i = 0; i < S; i++) {
            future += state[i] == S_FUTURE;
            waiting += state[i] == S_WAITING;
            active += state[i] == S_ACTIVE;
        }
        if (n == 0 && !future && waiting && !active) {
            r->budget_too_small = 1;
            FAIL("admission waits with no session active: the device budget is too small for one session");
        }
        if (c.progress) {
            dhs_ref_progress p = {round, active, waiting, n_done, S, r->decode_tokens + (uint64_t)n_done,
                                  r->logit_mismatches};
            c.progress(c.user, &p);
        }
        round++;
    }
done:
    r->sessions_done = (uint64_t)n_done;
    dhs_ref_engine_meter_flush(er); /* the meter's last probe (device step) before it is read */
    dhs_ref_engine_meter_flush(eh);
    if (ctx) {
        dhs_sync(ctx);
        dhs_get_stats(ctx, &r->st);
        if (hp_base_taken && dhs_get_host_time(ctx, r->hp_ns, r->hp_calls) == DHS_OK)
            for (int p = 0; p < DHS_HP_COUNT_; p++) {
                r->hp_ns[p] -= hp0_ns[p];
                r->hp_calls[p] -= hp0_calls[p];
            }
        dhs_get_mem(ctx, &r->mem);
    }
    r->identical = er && eh && !r->error && r->logit_mismatches == 0 && r->token_mismatches == 0 && n_done == S;
    if (er) dhs_ref_engine_step_times(er, &r->step_res);
    if (eh) dhs_ref_engine_step_times(eh, &r->step_hier);
    if (eh || er) dhs_ref_engine_import_times(eh ? eh : er, &r->imp);
    r->opt_filling_at_end = r->rounds > 0 && r->opt_fill_rounds == r->rounds;
    if (er) dhs_ref_engine_profile(er, r->prof_us[0], &r->prof_rounds[0], &r->prof_wall_s[0]);
    if (eh) dhs_ref_engine_profile(eh, r->prof_us[1], &r->prof_rounds[1], &r->prof_wall_s[1]);
    if (r->tokens_of) {
        uint64_t h = 1469598103934665603ull;
        for (int32_t i = 0; i < S; i++)
            for (int b = 0; b < 8; b++) h = (h ^ ((r->tokens_of[i] >> (8 * b)) & 255)) * 1099511628211ull;
        r->tokens_digest = h;
    }
    if (lm)
        for (int32_t l = 0; l < c.model.n_layers && l < DHS_REF_MAX_LAYERS; l++) {
            if (r->loc_target[l] < 0) continue;
            dhs_ref_loc_group lg;
            dhs_ref_locmeter_get(lm, dhs_ref_layer(m, l)->group, &lg);
            r->loc_pairs[l] = lg.pairs;
            r->loc_accesses[l] = lg.accesses;
            r->loc_alpha[l] = lg.pairs ? lg.alpha : -1;
            r->loc_random[l] = lg.pairs ? lg.random : -1;
            r->loc_hit[l] = lg.accesses ? (double)lg.hits / (double)lg.accesses : -1;
            r->loc_draft_pairs[l] = lg.draft_pairs;
            r->loc_draft[l] = lg.draft_pairs ? lg.draft : -1;
        }
    dhs_ref_engine_destroy(er);
    dhs_ref_engine_destroy(eh);
    dhs_ref_locmeter_destroy(lm);
    if (tw && dhs_trace_writer_close(tw) != DHS_TRACE_OK && !r->error) {
        snprintf(r->errmsg, sizeof r->errmsg, "trace: closing %s failed", c.trace);
        r->error = 1;
    }
    dhs_ctx_destroy(ctx);
    dhs_backend_destroy(be);
    if (pf)
        for (int32_t i = 0; i < S; i++) dhs_ref_prefill_free(&pf[i]);
    free(state);
    free(arrive);
    free(len);
    free(pf);
    free(into_rows);
    free(ids);
    free(adm);
    free(adm_req);
    free(Kv);
    free(L_res);
    free(L_hier);
    free(A_res);
    free(A_hier);
    free(E_res);
    free(E_hier);
    free(sa_cap);
    free(sa_q);
    free(acc_a);
    dhs_spec_auto_destroy(sa);
    if (r->k_lo == INT32_MAX) r->k_lo = 0;
    dhs_ref_model_destroy(m);
    r->t_total = dhs_wall_s() - t_start;
    return r->error ? -1 : 0;
}
