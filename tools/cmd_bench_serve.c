/* dhs bench serve - the reference model served through the hierarchy under
 * one device KV budget, against all-resident storage (docs/SERVE.md).
 *
 * For each prompt length L and each storage mode
 *   resident  every row of a session on the device: admits what fits
 *             (floor(budget / resident bytes per session));
 *   fixed     the hierarchy with a fixed hot cache: no imported history on the
 *             device (history 0), the budget only bounds how many sessions open;
 *   adaptive  the hierarchy with the budget's spare room holding imported
 *             history as optional, reclaimable pages;
 * and each concurrency C of the sweep, a closed loop: C request slots,
 * C x waves sessions (prompt ~L, synthetic history at the real KV geometry)
 * arriving at once, each admitted when a slot frees, decoding --tokens
 * tokens. Measured per configuration: decode tokens/s, TPOT p50/p99 (per
 * round: its time / the tokens a session emitted in it), sessions held at
 * once, admission waits, rows copied from host per token and PCIe GB/s; with
 * the GPU model a per-step breakdown (indexer, top-k, resolve, miss copy,
 * attention, other) from profiled rounds (every --profile-every-th round
 * runs eagerly with events) and the attention time against its HBM roofline
 * (bytes read / D2D bandwidth measured in this process). The summary puts the
 * modes side by side: sessions held (hierarchical / resident), best decode
 * throughput (ratio) and the step time at equal batch where resident fits.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/resource.h>

#include <cjson/cJSON.h>

#include "dhs_plan.h"
#include "args.h"
#include "cmds.h"
#include "dhs.h"
#include "model/deploy.h"
#include "model/gpu.h"
#include "model/model.h"
#include "model/run.h"
#include "sim/tracegen.h"
#include "serve_sizes.h"
#include "sim/util.h"
#include "outfile.h"
#include "tool.h"

#define PROG "dhs bench serve"
#define MAXL 4
#define MAXC 16
#define MAXS 8 /* widths in --spec */

static const char *const sv_backends[] = {"cpu", "cuda", NULL};
static const char *const sv_geometries[] = {"tiny", "glm-5.3", "deepseek-v3.2", NULL};
static const char *const sv_steps[] = {"host", "device", "graph", NULL};
static const char *const sv_topk_impls[] = {"model", "fused", "split", NULL}; /* DHS_REF_TOPK_* order */
static const char *const sv_on_off[] = {"off", "on", NULL};
static const char *const sv_tail_where[] = {"device", "host", NULL};
static const char *const sv_round_ends[] = {"wait", "early", "ahead", NULL};
static const char *const sv_imports[] = {"device", "host", NULL}; /* DHS_REF_IMPORT_* order */
static const char *const sv_copies[] = {"once", "twice", NULL}; /* dhs_ref_run_cfg.import_twice */
static const char *const mode_names[] = {"resident", "fixed", "adaptive"};
static const char *const prefix_tags[] = {"", "+shared", "+private"}; /* sv_rec.prefix */
static const char *const phase_names[DHS_REF_PH_N] = {"other", "indexer", "topk", "resolve", "miss_copy", "attention",
                                                      "weights"};

typedef struct sv_rec {
    int mode;
    int32_t spec;           /* the width: K (fixed) or 0 (auto, at most spec_max) */
    int32_t spec_max;       /* the context's spec_width */
    double mean_k, accept;  /* queries per session and round; accepted / proposed drafts */
    int32_t k_lo, k_hi;     /* smallest and largest K of a round */
    int64_t context;
    int32_t conc;
    int ok;                 /* ran */
    char why[600];          /* not run / failed: why */
    uint64_t device_bytes;  /* what this configuration holds on the device (model) */
    uint64_t sessions, held, waits, decode_tokens, rounds;
    double tok_s, tpot_p50_ms, tpot_p99_ms, tpot_mean_ms, step_mean_ms, duration_s;
    uint64_t hp_ns[DHS_HP_COUNT_], hp_calls[DHS_HP_COUNT_]; /* the library's host time by phase (dhs_get_host_time) */
    double prefill_s, start_s, decode_s; /* of duration_s: generating histories, importing them, rounds */
    double host_fill_s;                  /* --host-cache-fill: pinning every slot's host rows at the start */
    dhs_ref_import_times imp;            /* the hierarchy's imports: only the dhs_request_import calls timed
                                            (import_s), the GPU session setup apart (keys_s) */
    uint64_t repop_pages;                /* optional pages repopulated from host over the run */
    uint64_t opt_peak, opt_fill_rounds;  /* optional device bytes at their peak, decode rounds to reach it */
    int opt_filling;                     /* the last round still raised the peak */
    int32_t synth_parallel;  /* histories generated at once */
    dhs_ref_step_times st;   /* device step: the engine's host times (control, launch, wait, graph captures) */
    double prof_wall_s;      /* the profiled (eager) rounds' wall time, not in st */
    double host_rows_per_token, pcie_gbps, reclaims;
    double comp_us[DHS_REF_PH_N]; /* per profiled step */
    uint64_t prof_rounds;
    double attn_bytes_per_step, attn_roofline_us;
    double mean_batch;      /* sessions per decode round (mean) */
    int32_t token_mismatches; /* sessions whose tokens differ from the same session in an earlier run */
    int prefix;             /* --shared-prefix: 0 none (or resident), 1 the hierarchy holds it once, 2 private copies */
    uint64_t host_peak, host_shared_peak; /* the hierarchy's host bytes at their peak, and of them held by several */
    uint64_t rss_peak;      /* the process's peak resident set after this run (getrusage; monotone over a sweep) */
    uint64_t tok_digest;    /* FNV-1a over every session's token hash in session order: equal across processes
                               for the same sessions (a session's tokens depend only on its prompt and history) */
    dhs_ref_run_result *loc;  /* --locality: the run's result (loc_* and st), pointers cleared; free() */
    int32_t n_layers;
} sv_rec;

/* every session's tokens (FNV-1a, dhs_ref_run_result.tokens_of) from the first run that served it: a
   session's tokens depend only on its prompt and history, never on the batch or the storage, so every
   later run must give the same */
typedef struct sv_tokens {
    uint64_t *hash;
    uint8_t *seen;
    int32_t n;
    /* the acceptance model (--accept): every session's token stream from the first run that served it
       (by position, prompt included), the oracle of later runs' drafts */
    int32_t **seq;
    int64_t *len;
} sv_tokens;

static void tk_free(sv_tokens *tk)
{
    for (int32_t i = 0; tk->seq && i < tk->n; i++) free(tk->seq[i]);
    free(tk->seq), free(tk->len), free(tk->hash), free(tk->seen);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pctl(const double *s, uint64_t n, double p)
{
    if (!n) return 0;
    uint64_t i = (uint64_t)ceil(p * (double)n) - (p > 0);
    return s[i < n ? i : n - 1];
}

static uint64_t host_mem_total(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024ull;
}

/* m: the model of base->model (created once by the command) */
int bench_serve_sizes(const dhs_ref_model *m, const dhs_ref_run_cfg *base, int32_t C, sv_size *z, char *why, size_t wn)
{
    int64_t max_pos = base->context + base->tokens + base->spec + 2;
    int64_t positions = base->context + base->tokens;
    int64_t ring = dhs_ring_rows(base->model.draft_window, base->spec, base->page_rows);
    z->resident_session = dhs_ref_engine_model_bytes(m, positions, 1, ring);
    z->keys_session = dhs_ref_engine_model_bytes(m, positions, 0, ring);
    z->host_session = (uint64_t)dhs_ref_n_sources(m) * (uint64_t)positions * DHS_REF_ROW_BYTES;
    dhs_config c = dhs_ref_hier_config(m, C, max_pos, base->spec, 0.0, base->context, base->page_rows);
    if (base->group_hot_rows && dhs_ref_hier_set_group_hot(m, &c, base->group_hot_rows, base->n_group_hot) != DHS_OK) {
        snprintf(why, wn, "--group-hot-rows: %d sizes for a model of %d groups (or a size the library refuses)",
                 base->n_group_hot, dhs_ref_n_groups(m));
        return -1;
    }
    c.resolver = base->step != DHS_REF_STEP_HOST ? DHS_RESOLVER_DEVICE : base->resolver;
    c.policy = c.resolver == DHS_RESOLVER_DEVICE ? DHS_POLICY_CLOCK : base->policy; /* as dhs_ref_run */
    dhs_arch a;
    dhs_ref_arch(m, &a);
    dhs_sizes s;
    if (dhs_config_sizes(&a, &c, &s) != DHS_OK) {
        snprintf(why, wn, "the hierarchy's configuration is invalid at %d sessions", C);
        return -1;
    }
    uint64_t M = c.device_bytes > s.min_device_bytes ? c.device_bytes : s.min_device_bytes;
    z->hier_fixed_lib = M + s.reserve_bytes + s.resolver_bytes;
    z->resolver = s.resolver_bytes;
    z->fixed_M = M;
    z->staging = s.staging_bytes;
    z->reserve = s.reserve_bytes;
    c.device_bytes = M;
    z->lib = c;
    z->sources = dhs_ref_n_sources(m);
    return 0;
}

uint64_t bench_serve_lib_bytes(const sv_size *z, int mode, int32_t C, uint64_t budget)
{
    uint64_t keys = (uint64_t)C * z->keys_session;
    if (z->hier_fixed_lib + keys > budget) return 0;
    return mode == 1 ? z->fixed_M : budget - keys - z->resolver;
}

/* 1: C sessions of the hierarchy (history 0) and their index keys fit the device budget */
static int hier_fits(const dhs_ref_model *m, const dhs_ref_run_cfg *base, int32_t C, uint64_t budget)
{
    sv_size z;
    char why[200];
    return !bench_serve_sizes(m, base, C, &z, why, sizeof why) && z.hier_fixed_lib + (uint64_t)C * z.keys_session <= budget;
}

typedef struct sv_opts {
    int backend, geometry, step, json, quiet, waves, topk_impl, copy_overlap, direct_resolve, page_tables, host_fill, import_twice, tail_host,
        end_early, decoded_optional;
    int import_mode;         /* DHS_REF_IMPORT_*: the hierarchy's imports' flag (--import) */
    int32_t repop_pages;     /* dhs_config.repop_pages (0: the library's default) */
    const char *deployment; /* NULL or "none": no weight reads */
    const char *locality;   /* NULL: the model's own indexer queries */
    const char *group_hot;  /* NULL: one hot-cache size; else a comma list, one per group */
    int32_t copy_queue_blocks;
    int32_t layers;          /* 0: the geometry's; else its first N layers */
    int64_t contexts[MAXL];
    int n_contexts;
    int64_t concs[MAXC];
    int n_concs;
    double budget_gib, host_gib, host_cache_gib;
    double res_budget_gib;   /* resident mode's device budget (0: budget_gib) */
    int64_t shared_prefix;   /* every prompt begins with the same positions (0: none) */
    int32_t tokens, spec, profile_every; /* spec: the widest width run (the capacity lines' spec_width) */
    int32_t specs[MAXS], n_specs, spec_max; /* --spec: widths (0: auto), auto's widest */
    double accept_lo, accept_hi;             /* --accept: the model's range; accept_hi < 0: the drafter's */
    uint64_t seed;
    const char *plot, *output;
    uint64_t mem;            /* host memory (MemTotal) */
    int and_cap;             /* --and-capacity */
} sv_opts;

/* a host part of record q, in us per measured round (dhs_ref_step_times host_rounds) */
#define HP(q, f) ((q)->st.host_rounds ? 1e6 * (q)->st.f / (double)(q)->st.host_rounds : 0.0)
/* the library's host time of phase p in record q, in us per round (dhs_get_host_time) */
#define LHP(q, p) ((q)->hp_calls[DHS_HP_BEGIN] ? 1e-3 * (double)(q)->hp_ns[p] / (double)(q)->hp_calls[DHS_HP_BEGIN] : 0.0)

static void progress(void *user, const dhs_ref_progress *p)
{
    tool_progress *tp = ((void **)user)[0];
    const char *tag = ((void **)user)[1];
    tool_progress_msg(tp, 0, PROG ": %s: round %" PRId64 ", active %d, waiting %d, done %d/%d", tag, p->round, p->active,
                      p->waiting, p->done, p->sessions);
}

/* the host bytes of C sessions' histories: private copies, or the shared prefix's complete 1,024-row
   host chunks held once (the library shares whole chunks; the rest of each prompt is the session's) */
static double host_need(const dhs_ref_model *m, const sv_size *z, int32_t C, int64_t shared_prefix, int shared)
{
    const double shared_b = shared ? (double)dhs_ref_n_sources(m) * (double)(shared_prefix / 1024 * 1024) * DHS_REF_ROW_BYTES : 0.0;
    return shared_b + (double)C * ((double)z->host_session - shared_b);
}

static void run_one(const sv_opts *o, const dhs_ref_model *m, const dhs_ref_run_cfg *base, int mode, int prefix, int64_t L,
                    int32_t C, int32_t spec, uint64_t budget, double hbm_gbps, tool_progress *tp, sv_tokens *tk, sv_rec *r)
{
    memset(r, 0, sizeof *r);
    r->mode = mode;
    r->prefix = prefix;
    r->context = L;
    r->conc = C;
    r->spec = spec;
    r->spec_max = spec ? spec : o->spec_max;
    dhs_ref_run_cfg c = *base;
    c.spec = r->spec_max;
    c.spec_auto = spec == 0;
    c.accept_lo = o->accept_lo;
    c.accept_hi = o->accept_hi;
    c.keep_tokens = o->accept_hi >= 0;
    c.oracle = o->accept_hi >= 0 ? (const int32_t *const *)tk->seq : NULL;
    c.oracle_n = tk->len;
    c.context = L;
    c.sessions = C * o->waves;
    c.slots = C;
    c.arrival = 0;
    c.compare = 0;
    c.hier = mode != 0;
    c.history = 0;
    c.shared_prefix = o->shared_prefix; /* the same prompts in every mode */
    c.share_private = prefix != 1;
    sv_size z;
    if (bench_serve_sizes(m, &c, C, &z, r->why, sizeof r->why)) return;
    if (mode == 0) {
        r->device_bytes = (uint64_t)C * z.resident_session;
        if (r->device_bytes > budget) {
            snprintf(r->why, sizeof r->why, "does not fit: %d x %.2f GiB resident > %.2f GiB budget", C,
                     (double)z.resident_session / 1073741824.0, (double)budget / 1073741824.0);
            return;
        }
    } else {
        uint64_t keys = (uint64_t)C * z.keys_session;
        if (z.hier_fixed_lib + keys > budget) {
            snprintf(r->why, sizeof r->why, "does not fit: hot caches, tails and staging %.2f GiB + index keys %.2f GiB > "
                     "%.2f GiB budget", (double)z.hier_fixed_lib / 1073741824.0, (double)keys / 1073741824.0,
                     (double)budget / 1073741824.0);
            return;
        }
        /* the library's M: fixed = what C sessions need (derived, history 0); adaptive = the whole
           budget less the resolver state (outside M) and the engine's index keys: the spare room
           holds imported history as optional pages (bench_serve_lib_bytes, which serve-sim
           --calibrate simulates) */
        c.device_bytes = mode == 1 ? 0 : bench_serve_lib_bytes(&z, mode, C, budget);
        r->device_bytes = mode == 1 ? z.hier_fixed_lib + keys : budget;
    }
    const double host_b = host_need(m, &z, C, o->shared_prefix, prefix == 1);
    if (o->host_gib > 0 && mode != 0 && host_b > o->host_gib * 1073741824.0) {
        snprintf(r->why, sizeof r->why, "host memory: %d sessions' histories %.2f GiB%s > %.1f GiB host budget", C,
                 host_b / 1073741824.0, prefix == 1 ? " (the shared prefix once)" : "", o->host_gib);
        return;
    }
    /* synthetic histories of the sessions admitted together are generated at once, as many as
       host memory holds beside the host tier's histories (a margin of 8 GiB), at most 8 */
    double spare = (double)o->mem - 8.0 * 1073741824.0 - (mode ? host_b : 0.0);
    /* what one history in generation holds beside the host tier's rows: its rows and keys, generous (twice),
       or its keys (once: the rows go straight into the request's host rows, counted in host_b) */
    double per = mode && !o->import_twice ? (double)z.keys_session
                                          : (double)z.resident_session + (double)z.host_session;
    int32_t par = spare > per ? (int32_t)(spare / per) : 1;
    if (par > 8) par = 8;
    c.synth_parallel = par < 1 ? 1 : par > C ? C : par;
    r->synth_parallel = c.synth_parallel;
    c.keep_round_times = 1;
    c.import_twice = o->import_twice;
    c.profile_every = o->backend == 1 && c.step != DHS_REF_STEP_HOST ? o->profile_every : 0;
    char tag[96], ks[16];
    if (spec) snprintf(ks, sizeof ks, "%d", spec);
    else snprintf(ks, sizeof ks, "auto");
    snprintf(tag, sizeof tag, "%s%s L=%" PRId64 " C=%d K=%s", mode_names[mode], prefix_tags[prefix], L, C, ks);
    void *pu[2] = {tp, tag};
    c.progress = progress;
    c.user = pu;
    tool_progress_msg(tp, 1, PROG ": %s: %d sessions ...", tag, c.sessions);
    dhs_ref_run_result R;
    double t0 = dhs_wall_s();
    int rc = dhs_ref_run(&c, &R);
    r->duration_s = dhs_wall_s() - t0;
    struct rusage ru;
    if (!getrusage(RUSAGE_SELF, &ru)) r->rss_peak = (uint64_t)ru.ru_maxrss * 1024u;
    if (rc) {
        snprintf(r->why, sizeof r->why, "failed: %s", R.errmsg);
        dhs_ref_run_result_free(&R);
        return;
    }
    r->ok = 1;
    if (R.loc_on && (r->loc = malloc(sizeof *r->loc))) {
        *r->loc = R;
        r->loc->tokens_of = NULL;
        r->loc->round_t = NULL;
        r->n_layers = c.model.n_layers;
    }
    r->tok_digest = 0xcbf29ce484222325ull;
    for (int32_t i = 0; i < c.sessions; i++)
        for (int b = 0; b < 8; b++) r->tok_digest = (r->tok_digest ^ (uint8_t)(R.tokens_of[i] >> (8 * b))) * 0x100000001b3ull;
    for (int32_t i = 0; i < c.sessions && i < tk->n; i++) {
        if (!tk->seen[i]) {
            tk->seen[i] = 1;
            tk->hash[i] = R.tokens_of[i];
        } else if (tk->hash[i] != R.tokens_of[i]) {
            r->token_mismatches++;
        }
        if (R.tok_seq && R.tok_seq[i] && tk->seq && !tk->seq[i]) { /* the oracle of later runs: taken over */
            tk->seq[i] = R.tok_seq[i];
            tk->len[i] = R.tok_len[i];
            R.tok_seq[i] = NULL;
        }
    }
    r->mean_k = R.batch_items ? (double)R.queries / (double)R.batch_items : 0;
    r->k_lo = R.k_lo;
    r->k_hi = R.k_hi;
    r->accept = R.proposals ? (double)R.accepted / (double)R.proposals : 0;
    r->sessions = R.sessions_done;
    r->held = R.max_active;
    r->host_peak = R.host_bytes_peak;
    r->host_shared_peak = R.host_shared_peak;
    r->waits = R.st.waits;
    r->rounds = R.n_round_s;
    r->reclaims = (double)R.st.reclaims;
    uint64_t nr = R.n_round_s;
    double *tp_ms = malloc(sizeof(double) * (nr ? nr : 1));
    if (!tp_ms) {
        snprintf(r->why, sizeof r->why, "out of memory");
        r->ok = 0;
        dhs_ref_run_result_free(&R);
        return;
    }
    double sum_s = 0, sum_tp = 0, sess = 0;
    uint64_t tok = 0;
    for (uint64_t i = 0; i < nr; i++) {
        const dhs_ref_round_time *t = &R.round_t[i];
        sum_s += t->s;
        tok += t->tokens;
        sess += t->sessions;
        /* TPOT of this round: its time over the tokens one session emitted in it (mean) */
        tp_ms[i] = 1e3 * t->s * (double)t->sessions / (double)t->tokens;
        sum_tp += tp_ms[i];
    }
    r->decode_tokens = tok;
    r->prefill_s = R.t_prefill;
    memcpy(r->hp_ns, R.hp_ns, sizeof r->hp_ns);
    memcpy(r->hp_calls, R.hp_calls, sizeof r->hp_calls);
    r->start_s = R.t_start;
    r->host_fill_s = R.t_host_fill;
    r->imp = R.imp;
    r->repop_pages = mode ? R.st.repopulated_pages : 0;
    r->opt_peak = R.opt_bytes_peak;
    r->opt_fill_rounds = R.opt_fill_rounds;
    r->opt_filling = R.opt_filling_at_end;
    r->decode_s = c.hier ? R.t_hier : R.t_resident;
    r->st = c.hier ? R.step_hier : R.step_res;
    r->prof_wall_s = R.prof_wall_s[c.hier ? 1 : 0];
    r->tok_s = sum_s > 0 ? (double)tok / sum_s : 0;
    r->mean_batch = nr ? sess / (double)nr : 0;
    if (nr) {
        r->step_mean_ms = 1e3 * sum_s / (double)nr;
        r->tpot_mean_ms = sum_tp / (double)nr;
        qsort(tp_ms, nr, sizeof(double), cmp_d);
        r->tpot_p50_ms = pctl(tp_ms, nr, 0.50);
        r->tpot_p99_ms = pctl(tp_ms, nr, 0.99);
    }
    free(tp_ms);
    uint64_t dt = R.decode_tokens ? R.decode_tokens : 1;
    r->host_rows_per_token = mode ? (double)R.st.host_rows_copied / (double)dt : 0;
    r->pcie_gbps = mode && r->decode_s > 0 ? (double)(R.st.host_bytes_copied + R.st.populate_bytes) / r->decode_s / 1e9 : 0;
    int e = mode ? 1 : 0;
    r->prof_rounds = R.prof_rounds[e];
    if (r->prof_rounds)
        for (int p = 0; p < DHS_REF_PH_N; p++) r->comp_us[p] = R.prof_us[e][p] / (double)r->prof_rounds;
    /* attention reads k rows of 656 bytes per query and layer: per step, with the mean
       sessions of a round and the queries of each (spec) */
    r->attn_bytes_per_step = r->mean_batch * r->mean_k * (double)c.model.topk * (double)c.model.n_layers * DHS_REF_ROW_BYTES;
    r->attn_roofline_us = hbm_gbps > 0 ? r->attn_bytes_per_step / (hbm_gbps * 1e9) * 1e6 : 0;
    dhs_ref_run_result_free(&R);
}

/* ---------------------------------------------------------------- output */
static cJSON *rec_json(const sv_rec *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "mode", mode_names[r->mode]);
    if (r->prefix) cJSON_AddStringToObject(o, "prefix", r->prefix == 1 ? "shared" : "private");
    cJSON_AddNumberToObject(o, "context", (double)r->context);
    cJSON_AddNumberToObject(o, "max_concurrency", r->conc);
    if (r->spec) cJSON_AddNumberToObject(o, "spec", r->spec);
    else cJSON_AddStringToObject(o, "spec", "auto");
    cJSON_AddNumberToObject(o, "spec_max", r->spec_max);
    if (!r->ok) {
        cJSON_AddStringToObject(o, "skipped", r->why);
        return o;
    }
    /* the keys of vLLM's `bench serve` result, then ours */
    cJSON_AddNumberToObject(o, "duration", r->duration_s);
    cJSON_AddNumberToObject(o, "peak_rss_bytes", (double)r->rss_peak);
    if (r->mode) {
        cJSON_AddNumberToObject(o, "host_bytes_peak", (double)r->host_peak);
        cJSON_AddNumberToObject(o, "host_bytes_shared_peak", (double)r->host_shared_peak);
    }
    cJSON_AddNumberToObject(o, "prefill_s", r->prefill_s);
    cJSON_AddNumberToObject(o, "start_s", r->start_s);
    cJSON_AddNumberToObject(o, "host_fill_s", r->host_fill_s);
    /* the hierarchy's imports (resident: none): seconds inside dhs_request_import per session, history
       bytes over those seconds; keys_s the GPU model's session setup (index keys), apart */
    cJSON_AddNumberToObject(o, "imports", (double)r->imp.imports);
    cJSON_AddNumberToObject(o, "import_bytes", (double)r->imp.import_bytes);
    cJSON_AddNumberToObject(o, "import_s", r->imp.import_s);
    cJSON_AddNumberToObject(o, "import_s_per_session", r->imp.imports ? r->imp.import_s / (double)r->imp.imports : 0.0);
    cJSON_AddNumberToObject(o, "import_gbps", r->imp.import_s > 0 ? (double)r->imp.import_bytes / r->imp.import_s / 1e9 : 0.0);
    cJSON_AddNumberToObject(o, "keys_s", r->imp.keys_s);
    cJSON_AddNumberToObject(o, "repopulated_pages", (double)r->repop_pages);
    cJSON_AddNumberToObject(o, "optional_bytes_peak", (double)r->opt_peak);
    cJSON_AddNumberToObject(o, "optional_fill_rounds", (double)r->opt_fill_rounds);
    cJSON_AddBoolToObject(o, "optional_filling_at_end", r->opt_filling);
    cJSON_AddNumberToObject(o, "decode_s", r->decode_s);
    cJSON_AddNumberToObject(o, "histories_at_once", r->synth_parallel);
    cJSON_AddNumberToObject(o, "completed", (double)r->sessions);
    cJSON_AddNumberToObject(o, "total_output_tokens", (double)r->decode_tokens);
    cJSON_AddNumberToObject(o, "output_throughput", r->tok_s);
    cJSON_AddNumberToObject(o, "mean_tpot_ms", r->tpot_mean_ms);
    cJSON_AddNumberToObject(o, "median_tpot_ms", r->tpot_p50_ms);
    cJSON_AddNumberToObject(o, "p99_tpot_ms", r->tpot_p99_ms);
    cJSON_AddNumberToObject(o, "sessions_held", (double)r->held);
    cJSON_AddNumberToObject(o, "admission_waits", (double)r->waits);
    cJSON_AddNumberToObject(o, "reclaims", r->reclaims);
    cJSON_AddNumberToObject(o, "decode_rounds", (double)r->rounds);
    cJSON_AddNumberToObject(o, "step_mean_ms", r->step_mean_ms);
    cJSON_AddNumberToObject(o, "mean_batch", r->mean_batch);
    cJSON_AddNumberToObject(o, "host_rows_per_token", r->host_rows_per_token);
    cJSON_AddNumberToObject(o, "mean_k", r->mean_k);
    cJSON_AddNumberToObject(o, "k_min", r->k_lo);
    cJSON_AddNumberToObject(o, "k_max", r->k_hi);
    cJSON_AddNumberToObject(o, "acceptance", r->accept);
    cJSON_AddNumberToObject(o, "pcie_gbps", r->pcie_gbps);
    cJSON_AddNumberToObject(o, "device_bytes", (double)r->device_bytes);
    cJSON_AddNumberToObject(o, "token_mismatches", r->token_mismatches);
    char dg[20];
    snprintf(dg, sizeof dg, "%016" PRIx64, r->tok_digest);
    cJSON_AddStringToObject(o, "tokens_digest", dg);
    if (r->loc) dhs_ref_run_json_locality(o, r->loc, r->n_layers); /* target, calibrated, measured per layer */
    if (r->st.rounds) { /* where a round's wall time goes on the host (device step) */
        cJSON *h = cJSON_AddObjectToObject(o, "step_host");
        double n = (double)r->st.rounds;
        cJSON_AddNumberToObject(h, "rounds", n);
        cJSON_AddNumberToObject(h, "control_us", 1e6 * r->st.control_s / n);
        cJSON_AddNumberToObject(h, "launch_us", 1e6 * r->st.launch_s / n);
        cJSON_AddNumberToObject(h, "wait_us", 1e6 * r->st.wait_s / n);
        cJSON_AddNumberToObject(h, "graph_captures", (double)r->st.captures);
        cJSON_AddNumberToObject(h, "capture_ms", 1e3 * r->st.capture_s);
        cJSON_AddNumberToObject(h, "split_rounds", (double)r->st.split_rounds);
        cJSON_AddNumberToObject(h, "direct_rounds", (double)r->st.direct_rounds);
        cJSON_AddNumberToObject(h, "page_table_rounds", (double)r->st.page_table_rounds);
        /* the round's library work before and after the step (admission, tail locations, the
           hierarchy's copies and bookkeeping): decode time less the step's and the profiled rounds' */
        double in_step = r->st.control_s + r->st.launch_s + r->st.wait_s + r->st.capture_s;
        cJSON_AddNumberToObject(h, "outside_step_us", 1e6 * (r->decode_s - r->prof_wall_s - in_step) / n);
        /* of which (every round, profiled ones too): the host drafter, dhs_round_begin, dhs_round_end */
        double na = r->st.all_rounds ? (double)r->st.all_rounds : 1.0;
        cJSON_AddNumberToObject(h, "draft_us", 1e6 * r->st.draft_s / na);
        cJSON_AddNumberToObject(h, "round_begin_us", 1e6 * r->st.begin_s / na);
        cJSON_AddNumberToObject(h, "round_end_us", 1e6 * r->st.end_s / na);
        cJSON_AddNumberToObject(h, "early_ends", (double)r->st.early_ends); /* --round-end early */
        /* the step reads its inputs block itself (no copy call on the host's path), and waits for it */
        cJSON_AddBoolToObject(h, "inputs_in_step", r->st.inputs_in_step != 0);
        cJSON_AddNumberToObject(h, "inputs_waits", (double)r->st.inputs_waits);
        cJSON_AddNumberToObject(h, "ahead_rounds", (double)r->st.ahead_rounds); /* --round-end ahead */
        cJSON_AddNumberToObject(h, "ahead_us", r->st.ahead_rounds ? 1e6 * r->st.ahead_s / (double)r->st.ahead_rounds : 0.0);
        /* what the GPU waits for: the host's wall time from one plain round's step completing to the next
           one's launch (the critical path; host CPU time is the figures above) */
        cJSON_AddNumberToObject(h, "exposed_us", r->st.exposed_rounds ? 1e6 * r->st.exposed_s / (double)r->st.exposed_rounds : 0.0);
        cJSON_AddNumberToObject(h, "exposed_rounds", (double)r->st.exposed_rounds);
    }
    if (r->hp_calls[DHS_HP_BEGIN]) { /* the library's own host time by phase: us per round (resolve:
                                        its calls of the round summed) */
        cJSON *h = cJSON_AddObjectToObject(o, "lib_host_us");
        const double n = (double)r->hp_calls[DHS_HP_BEGIN];
        cJSON_AddNumberToObject(h, "rounds", n);
        for (int p = 0; p < DHS_HP_COUNT_; p++) cJSON_AddNumberToObject(h, dhs_host_phase_str((dhs_host_phase)p), 1e-3 * (double)r->hp_ns[p] / n);
        cJSON_AddNumberToObject(h, "resolve_calls", (double)r->hp_calls[DHS_HP_RESOLVE] / n);
    }
    if (r->st.host_rounds) { /* the host's time around the target by part, any step (model.h dhs_ref_step_times) */
        cJSON *h = cJSON_AddObjectToObject(o, "host_parts_us");
        const double n = (double)r->st.host_rounds, na = r->st.all_rounds ? (double)r->st.all_rounds : 1.0;
        cJSON_AddNumberToObject(h, "rounds", n);
        cJSON_AddNumberToObject(h, "tail", 1e6 * r->st.tail_s / n);
        cJSON_AddNumberToObject(h, "between", 1e6 * r->st.between_s / n);
        cJSON_AddNumberToObject(h, "head", 1e6 * r->st.head_s / n);
        cJSON_AddNumberToObject(h, "control", 1e6 * r->st.xcontrol_s / n);
        /* of the control plane: the library's dhs_tail_locations calls (per device-step round) */
        cJSON_AddNumberToObject(h, "control_tail_locations", r->st.rounds ? 1e6 * r->st.tailloc_s / (double)r->st.rounds : 0.0);
        cJSON_AddNumberToObject(h, "prelaunch", 1e6 * r->st.prelaunch_s / n);
        /* of the tail: the logits out, the locality meter's hand-over (the benchmark's instrument), the
           verification, dhs_round_end; of the control plane: the queries' inputs, the tables, the upload */
        cJSON_AddNumberToObject(h, "tail_logits", 1e6 * r->st.tail_logits_s / n);
        cJSON_AddNumberToObject(h, "tail_meter", 1e6 * r->st.tail_meter_s / n);
        cJSON_AddNumberToObject(h, "tail_verify", 1e6 * r->st.tail_verify_s / n);
        cJSON_AddNumberToObject(h, "tail_end", 1e6 * r->st.tail_end_s / n);
        cJSON_AddNumberToObject(h, "control_inputs", 1e6 * r->st.ctl_inputs_s / n);
        cJSON_AddNumberToObject(h, "control_tables", 1e6 * r->st.ctl_tables_s / n);
        cJSON_AddNumberToObject(h, "control_upload", 1e6 * r->st.ctl_upload_s / n);
        cJSON_AddNumberToObject(h, "control_upload_copy", 1e6 * r->st.ctl_upload_copy_s / n);
        cJSON_AddNumberToObject(h, "control_upload_event", 1e6 * r->st.ctl_upload_event_s / n);
        cJSON_AddNumberToObject(h, "total", 1e6 * (r->st.tail_s + r->st.between_s + r->st.head_s + r->st.xcontrol_s + r->st.prelaunch_s) / n);
        /* every round */
        cJSON_AddNumberToObject(h, "meter", 1e6 * r->st.meter_s / na);
        cJSON_AddNumberToObject(h, "verify", 1e6 * r->st.verify_s / na);
        /* dhs_background while the step runs: host CPU time overlapped with the device, in no part above */
        cJSON_AddNumberToObject(h, "background", 1e6 * r->st.background_s / na);
    }
    if (r->prof_rounds) {
        cJSON *b = cJSON_AddObjectToObject(o, "step_us");
        double tot = 0;
        for (int p = 0; p < DHS_REF_PH_N; p++) {
            cJSON_AddNumberToObject(b, phase_names[p], r->comp_us[p]);
            tot += r->comp_us[p];
        }
        cJSON_AddNumberToObject(b, "total", tot);
        cJSON_AddNumberToObject(b, "profiled_rounds", (double)r->prof_rounds);
        cJSON_AddNumberToObject(o, "attention_roofline_us", r->attn_roofline_us);
        cJSON_AddNumberToObject(o, "attention_bytes_per_step", r->attn_bytes_per_step);
    } else {
        cJSON_AddNullToObject(o, "step_us");
    }
    return o;
}

/* after every configuration: the records so far in FILE.partial (a run cut short keeps them) */
static void write_partial(const char *output, const sv_rec *R, int n)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s.partial", output) >= (int)sizeof path) return;
    cJSON *j = cJSON_CreateObject();
    cJSON *ra = cJSON_AddArrayToObject(j, "records");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(ra, rec_json(&R[i]));
    char *txt = cJSON_Print(j);
    FILE *f = txt ? fopen(path, "w") : NULL;
    if (f) {
        fputs(txt, f);
        fclose(f);
    }
    free(txt);
    cJSON_Delete(j);
}

static void print_table(const sv_rec *R, int n, FILE *f)
{
    /* a --shared-prefix run: wider mode names (+shared, +private) and the host bytes */
    int sp = 0;
    for (int i = 0; i < n; i++) sp |= R[i].prefix != 0;
    const int w = sp ? 17 : 9;
    fprintf(f, "%-*s %7s %4s %4s | %5s %6s %4s %9s %9s %9s %7s %8s %8s %8s%s | %s\n", w, "mode", "context", "C", "K", "held",
            "mean K", "acc", "tok/s", "TPOT p50", "TPOT p99", "waits", "host/tok", "PCIe", "import", sp ? "  host GiB" : "",
            "step us: indexer topk resolve copy attention(roofline) weights other");
    for (int i = 0; i < n; i++) {
        const sv_rec *r = &R[i];
        char mn[32], ks[16];
        snprintf(mn, sizeof mn, "%s%s", mode_names[r->mode], prefix_tags[r->prefix]);
        if (r->spec) snprintf(ks, sizeof ks, "%d", r->spec);
        else snprintf(ks, sizeof ks, "auto");
        if (!r->ok) {
            fprintf(f, "%-*s %7" PRId64 " %4d %4s | %s\n", w, mn, r->context, r->conc, ks, r->why);
            continue;
        }
        fprintf(f, "%-*s %7" PRId64 " %4d %4s | %5" PRIu64 " %6.2f %3.0f%% %9.1f %7.2fms %7.2fms %7" PRIu64 " %8.1f %5.2fGB/s", w,
                mn, r->context, r->conc, ks, r->held, r->mean_k, 100 * r->accept, r->tok_s, r->tpot_p50_ms, r->tpot_p99_ms,
                r->waits, r->host_rows_per_token, r->pcie_gbps);
        if (r->imp.imports) /* seconds in dhs_request_import per session */
            fprintf(f, " %7.3fs", r->imp.import_s / (double)r->imp.imports);
        else
            fprintf(f, " %8s", "-");
        if (sp) fprintf(f, " %9.2f", (double)r->host_peak / 1073741824.0);
        fprintf(f, " |");
        if (r->prof_rounds)
            fprintf(f, " %.0f %.0f %.0f %.0f %.0f(%.0f) %.0f %.0f\n", r->comp_us[1], r->comp_us[2], r->comp_us[3],
                    r->comp_us[4], r->comp_us[5], r->attn_roofline_us, r->comp_us[DHS_REF_PH_WEIGHTS], r->comp_us[0]);
        else
            fprintf(f, " -\n");
    }
}

/* latency (TPOT p50) against throughput, one polyline per mode and context */
static int write_svg(const char *path, const sv_rec *R, int n)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    double xmax = 1, ymax = 1;
    for (int i = 0; i < n; i++)
        if (R[i].ok) {
            if (R[i].tok_s > xmax) xmax = R[i].tok_s;
            if (R[i].tpot_p50_ms > ymax) ymax = R[i].tpot_p50_ms;
        }
    xmax *= 1.1, ymax *= 1.1;
    const int W = 720, H = 480, X0 = 70, Y0 = 420, PW = 600, PH = 380;
    static const char *const col[3] = {"#d62728", "#1f77b4", "#2ca02c"};
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", X0, Y0, X0 + PW, Y0);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", X0, Y0, X0, Y0 - PH);
    for (int t = 0; t <= 4; t++) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%.0f</text>\n", X0 + PW * t / 4, Y0 + 16, xmax * t / 4);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.1f</text>\n", X0 - 4, Y0 - PH * t / 4 + 4, ymax * t / 4);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">decode throughput (tokens/s)</text>\n", X0 + PW / 2, Y0 + 34);
    fprintf(f, "<text x=\"16\" y=\"%d\" transform=\"rotate(-90 16 %d)\" text-anchor=\"middle\">TPOT p50 (ms)</text>\n",
            Y0 - PH / 2, Y0 - PH / 2);
    int leg = 0;
    for (int mode = 0; mode < 3; mode++)
        for (int i = 0; i < n; i++) {
            if (R[i].mode != mode || !R[i].ok) continue;
            int first = 1;
            for (int j = 0; j < i; j++) first &= !(R[j].mode == mode && R[j].context == R[i].context && R[j].ok);
            if (!first) continue;
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", col[mode],
                    leg % 2 ? " stroke-dasharray=\"6 3\"" : "");
            for (int j = i; j < n; j++)
                if (R[j].mode == mode && R[j].context == R[i].context && R[j].ok)
                    fprintf(f, "%.1f,%.1f ", X0 + PW * R[j].tok_s / xmax, Y0 - PH * R[j].tpot_p50_ms / ymax);
            fprintf(f, "\"/>\n");
            for (int j = i; j < n; j++)
                if (R[j].mode == mode && R[j].context == R[i].context && R[j].ok)
                    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%s L=%" PRId64 " C=%d</title></circle>\n",
                            X0 + PW * R[j].tok_s / xmax, Y0 - PH * R[j].tpot_p50_ms / ymax, col[mode], mode_names[mode],
                            R[j].context, R[j].conc);
            fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s, context %" PRId64 "</text>\n", X0 + 10, Y0 - PH + 14 * leg,
                    col[mode], mode_names[mode], R[i].context);
            leg++;
        }
    fprintf(f, "</svg>\n");
    return fclose(f) ? -1 : 0;
}

/* ---------------------------------------------------------------- main */
int cmd_bench_serve(int argc, char **argv)
{
    sv_opts o;
    memset(&o, 0, sizeof o);
    o.backend = 0;
    o.geometry = 1;
    o.step = 2;
    o.copy_overlap = 1;
    o.direct_resolve = 1;
    o.page_tables = 1;
    o.decoded_optional = 1;
    o.topk_impl = DHS_REF_TOPK_SPLIT;
    o.contexts[0] = 32768, o.contexts[1] = 100000;
    o.n_contexts = 2;
    o.budget_gib = 12;
    o.tokens = 16;
    o.spec = 1;
    o.waves = 2;
    o.profile_every = 8;
    o.seed = 1;
    const char *modes_s = "resident,fixed,adaptive", *spec_s = "1", *accept_s = "drafter";
    int seen_step = 0, seen_prof = 0, seen_geom = 0, seen_tail = 0, seen_cqb = 0;
    arg_spec sp[] = {
        {.name = "--backend", .type = ARG_ENUM, .dest = &o.backend, .choices = sv_backends,
         .help = "cuda: the model computes on the GPU through the device hierarchy (the figures that count); cpu: "
                 "the same driver on the CPU backend (small sizes; what CI checks)"},
        {.name = "--geometry", .type = ARG_ENUM, .dest = &o.geometry, .choices = sv_geometries, .seen = &seen_geom,
         .help = "KV geometry (docs/MODEL.md): the real ones import a synthetic history (DESIGN §12)"},
        {.name = "--layers", .type = ARG_INT, .dest = &o.layers, .ilo = 1, .ihi = DHS_REF_MAX_LAYERS,
         .def = "the geometry's",
         .help = "the geometry's stack cut to its first N layers: the same row and key formats, producer schedule "
                 "and k with fewer payload sources (long contexts on a small machine)"},
        {.name = "--context", .type = ARG_I64_LIST, .dest = o.contexts, .ilo = 256, .ihi = 1 << 22,
         .count = &o.n_contexts, .max = MAXL, .def = "32768,100000", .help = "prompt lengths, one sweep each"},
        {.name = "--concurrency", .type = ARG_I64_LIST, .dest = o.concs, .ilo = 1, .ihi = 4096, .count = &o.n_concs,
         .max = MAXC,
         .def = "1,2,4,... up to what each mode holds, and that maximum",
         .help = "request slots C of the closed loop (sessions held at once at most)"},
        A_BOOL("--and-capacity", &o.and_cap,
               "with --concurrency: each mode also runs at what it holds (its capacity), in its place in the list "
               "when the list does not have it"),
        A_STR("--modes", &modes_s, "LIST", "storage modes to sweep: resident, fixed, adaptive (comma-separated)"),
        A_DBL("--device-budget-gib", &o.budget_gib, 0.001, 1 << 16,
              "device KV budget (GiB): rows, hot caches, tails, staging, index keys; the room a large MoE's weights leave"),
        {.name = "--resident-budget-gib", .type = ARG_DOUBLE, .dest = &o.res_budget_gib, .dlo = 0.001, .dhi = 1 << 16,
         .def = "--device-budget-gib",
         .help = "the resident mode's device budget (GiB): a resident run on a larger device than the hierarchy's, "
                 "e.g. the reference tokens of contexts resident cannot hold under the hierarchy's budget"},
        A_ENUM("--history-copies", &o.import_twice, sv_copies,
               "the hierarchical modes' synthetic histories: once (default): generated straight into the "
               "request's host rows (dhs_request_import_begin with the --import flag), the bytes held once; "
               "twice: into the prefill's buffers, then dhs_request_import (both copies while importing)"),
        A_DBL("--host-budget-gib", &o.host_gib, 0, 1 << 20,
              "pinned host memory for the histories (GiB); 0: 90% of this machine's RAM"),
        A_I64("--shared-prefix", &o.shared_prefix, 0, (int64_t)1 << 24,
              "every prompt begins with the same L positions (synthetic history: the same rows); each hierarchy "
              "configuration then runs twice, the prefix held once (dhs_request_open_shared) and private copies, and "
              "the host budget counts the shared prefix once"),
        A_INT("--tokens", &o.tokens, 2, 1 << 20, "tokens generated per session"),
        A_STR("--spec", &spec_s, "LIST",
              "speculation widths, each run at every mode, context and concurrency, side by side: K in 1..8 (queries "
              "per session and round; 1: plain decode) or auto (K per session and round chosen online by "
              "dhs_spec_auto_choose_round from its acceptance and the round's measured cost, misses included; at "
              "most --spec-max); e.g. auto,1,2,4"),
        {.name = "--spec-max", .type = ARG_INT, .dest = &o.spec_max, .ilo = 1, .ihi = 8,
         .def = "the widest fixed width of --spec, else 4",
         .help = "auto: the widest K (the context's spec_width)"},
        A_STR("--accept", &accept_s, "MODEL",
              "acceptance (greedy verification): drafter: the reference drafter's own proposals (about 30% "
              "accepted); A or LO:HI: the acceptance model, session i's drafts propose the target's own next "
              "token (from the first run that served the session, K = 1 first) with probability a_i, uniform "
              "in [LO, HI] from (--seed, i) (docs/SERVE.md \"Acceptance\"); the tokens stay the target's"),
        A_INT("--waves", &o.waves, 1, 64, "sessions per request slot, arriving as slots free (closed loop)"),
        {.name = "--step", .type = ARG_ENUM, .dest = &o.step, .choices = sv_steps, .seen = &seen_step,
         .help = "cuda: the GPU model's decode step (dhs run --step); cpu: host only"},
        {.name = "--profile-every", .type = ARG_INT, .dest = &o.profile_every, .ilo = 0, .ihi = 1 << 20,
         .seen = &seen_prof,
         .help = "cuda, device/graph step: every N-th round runs eagerly with events between its phases (the "
                 "breakdown); those rounds are left out of tokens/s and TPOT; 0: no breakdown"},
        {.name = "--tail-locations", .type = ARG_ENUM, .dest = &o.tail_host, .choices = sv_tail_where, .seen = &seen_tail,
         .help = "cuda, device/graph step: device (default): the library writes the round's tail locations on the "
                 "device (dhs_round_tail_locations_device); host: the host writes them and the step uploads them "
                 "(dhs_round_tail_locations)"},
        A_ENUM("--round-end", &o.end_early, sv_round_ends,
               "hierarchical: wait (default): dhs_round_end after verification; early: a round whose queries are all "
               "of width 1 ends with dhs_round_end_early while the step runs, off the host's path between two "
               "steps; ahead: as early, and the next round, when known, is opened under the step too (its "
               "dhs_round_begin and tail locations; dhs run --round-end)"),
        A_ENUM("--copy-overlap", &o.copy_overlap, sv_on_off,
               "cuda, device/graph step: on (default): the recovery of a group's later sources overlaps its "
               "earlier layers (dhs run --copy-overlap); off: one copy per group before its first layer"),
        A_ENUM("--direct-resolve", &o.direct_resolve, sv_on_off,
               "cuda, device/graph step: on (default): a round that cannot miss resolves with DHS_RESOLVE_DIRECT, "
               "one kernel a group and no promotion (dhs run --direct-resolve); off: never"),
        A_ENUM("--page-tables", &o.page_tables, sv_on_off,
               "cuda, device/graph step, with --direct-resolve on: on (default): a round that cannot miss takes its "
               "locations from dhs_round_page_tables_device inside the split top-k, no resolve call per group (dhs run "
               "--page-tables; another --topk-impl: as off); off: DHS_RESOLVE_DIRECT"),
        A_ENUM("--decoded-optional", &o.decoded_optional, sv_on_off,
               "on (default): the complete pages decoding adds join the optional history once they leave the tail "
               "ring (dhs run --decoded-optional); off: they stay on host and in the hot cache"),
        A_DBL("--host-cache-gib", &o.host_cache_gib, 0, 1 << 20,
              "the hierarchy keeps closed sessions' pinned host rows, up to this many GiB, for the next sessions' "
              "imports (dhs_config.host_cache_bytes; 0: freed at close)"),
        {.name = "--host-cache-fill", .type = ARG_BOOL, .dest = &o.host_fill,
         .help = "the hierarchy pins every slot's host rows when it starts (dhs_host_cache_fill, one span per "
                 "source and slot), so that imports copy into pinned memory; the pinning is reported apart "
                 "(host_fill_s); with --host-cache-gib 0 the cache takes what the spans need"},
        A_ENUM("--import", &o.import_mode, sv_imports,
               "how the hierarchical modes import each session's history, which the prefill (synthetic for the real "
               "geometries) leaves in host memory: device (default): dhs_request_import(DHS_IMPORT_DEVICE), the rows taken as the device "
               "tier's, complete pages copied straight into device pages while the budget has room (on cuda: "
               "pageable host -> device, and device -> host backups later); host: DHS_IMPORT_HOST, the rows copied "
               "into the host tier on threads (what a decode node that receives KV into host memory does) and the "
               "device pages filled by repopulation over the rounds (--repop-pages). Records give import_s_per_session "
               "and import_gbps (the library call only), keys_s, repopulated_pages and optional_fill_rounds "
               "(docs/SERVE.md \"Imports\")"),
        A_INT("--repop-pages", &o.repop_pages, 0, 1 << 24,
              "optional pages the hierarchy repopulates from host per round (dhs_config.repop_pages; 0: the "
              "library's default, 64)"),
        {.name = "--copy-queue-blocks", .type = ARG_INT, .dest = &o.copy_queue_blocks, .ilo = 0, .ihi = 1 << 16,
         .seen = &seen_cqb,
         .help = "cuda: thread blocks of each copy on the split resolve's queue (0: a quarter of the multiprocessors)"},
        A_ENUM("--topk-impl", &o.topk_impl, sv_topk_impls,
               "the decode top-k, the same selections and tokens each (dhs run --topk-impl): split (default): the "
               "library's fused top-k in its many-blocks-per-query form; fused: one block per query; model: the "
               "model's own kernel"),
        {.name = "--deployment", .type = ARG_STR, .dest = &o.deployment, .meta = "NAME",
         .help = "cuda, device/graph step: each step also reads the HBM bytes of weights one GPU of this "
                 "deployment reads at the step's tokens (glm-5.3-8xh200, deepseek-v3.2-8xh200; docs/SERVE.md); "
                 "none: no weights (the worst case for the hierarchy's share)",
         .def = "none"},
        {.name = "--locality", .type = ARG_STR, .dest = &o.locality, .meta = "PRESET|FILE.json",
         .help = "benchmark device, default off: the model's indexer queries become synthetic, calibrated so its own "
                 "top-k has the consecutive-step overlap of random, dsv32-swe or a JSON model per layer; every record "
                 "gets target, calibrated and measured overlap and LRU hit per layer (docs/LOCALITY.md)"},
        {.name = "--group-hot-rows", .type = ARG_STR, .dest = &o.group_hot, .meta = "B0,B1,..",
         .help = "hot-cache rows per group (layer) of the hierarchical modes, one per group, multiples of the page "
                 "rows (0 = the default 2 topk): dhs_config.group_hot_rows; the sizing and the fixed budget follow "
                 "them; dhs plan --hot-per-layer prints such a list"},
        A_U64("--seed", &o.seed, "model weights, prompts"),
        A_OUT("--plot", &o.plot, "write the latency-throughput plot (SVG) to FILE"),
        {.name = "--quiet", .alias = 'q', .type = ARG_BOOL, .dest = &o.quiet, .help = "no progress on stderr"},
        A_BOOL("--json", &o.json, "one JSON object (provenance, configuration, records, summary) instead of the table"),
        A_OUT("--output", &o.output, "write the results to FILE instead of stdout"),
    };
    arg_cmd cmd = {
        .prog = PROG,
        .about = "The reference model served under one device KV budget: resident (every row on the device, admits\n"
                 "what fits), fixed (the hierarchy, no imported history on the device) and adaptive (the spare\n"
                 "room holds imported history) over a concurrency sweep, for each prompt length. Closed loop:\n"
                 "C slots, C x waves sessions. Prints tokens/s, TPOT p50/p99, sessions held, waits, host rows\n"
                 "per token, PCIe GB/s and (cuda) a per-step breakdown with the attention's HBM roofline; the\n"
                 "summary puts the modes side by side (sessions held, best throughput, step time at equal\n"
                 "batch). --spec auto,1,2,4 runs each width at every configuration and puts them side by\n"
                 "side (mean K, acceptance; auto chooses K per session and round online; --accept sets the\n"
                 "acceptance). The hidden size stays small (docs/MODEL.md); the KV geometry is real. docs/SERVE.md.",
        .specs = sp,
        .n_specs = (int)(sizeof sp / sizeof sp[0]),
    };
    int pr = args_parse(&cmd, argc, argv, NULL, NULL);
    if (pr) return args_exit(pr);
    /* modes */
    int use[3] = {0, 0, 0};
    {
        char buf[128];
        snprintf(buf, sizeof buf, "%s", modes_s);
        for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
            int k = -1;
            for (int i = 0; i < 3; i++)
                if (!strcmp(t, mode_names[i])) k = i;
            if (k < 0) return args_fail(PROG, "--modes: unknown mode '%s' (resident, fixed, adaptive)", t);
            if (use[k]) return args_fail(PROG, "--modes: '%s' twice", t);
            use[k] = 1;
        }
        if (!use[0] && !use[1] && !use[2]) return args_fail(PROG, "--modes: none given");
    }
    if (o.backend == 0 && seen_step && o.step != 0)
        return args_fail(PROG, "--step %s needs --backend cuda (the CPU backend has only the host step)", sv_steps[o.step]);
    if (o.backend == 0) o.step = 0;
    if (o.backend == 0 && seen_tail)
        return args_fail(PROG, "--tail-locations applies to --backend cuda with --step device or graph");
    if (o.backend == 0 && seen_cqb)
        return args_fail(PROG, "--copy-queue-blocks applies to --backend cuda (the CPU backend has no copy queue)");
    if (o.backend == 0 && seen_prof && o.profile_every)
        return args_fail(PROG, "--profile-every needs --backend cuda with --step device or graph");
    if (o.backend == 1 && o.step == 0 && seen_prof && o.profile_every)
        return args_fail(PROG, "--profile-every needs --step device or graph");
    const dhs_deploy *deploy = NULL;
    if (o.deployment && strcmp(o.deployment, "none")) {
        deploy = dhs_deploy_find(o.deployment);
        if (!deploy) {
            char names[160] = "";
            for (const char *const *n = dhs_deploy_names(); *n; n++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s, ", *n);
            return args_fail(PROG, "--deployment: unknown '%s' (%snone)", o.deployment, names);
        }
        if (o.step == 0) return args_fail(PROG, "--deployment %s needs --backend cuda with --step device or graph", o.deployment);
    }
    {
        char buf[128];
        if (strlen(spec_s) >= sizeof buf) return args_fail(PROG, "--spec: too long");
        snprintf(buf, sizeof buf, "%s", spec_s);
        int widest = 0, has_auto = 0;
        for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
            int32_t k = 0;
            if (strcmp(t, "auto")) {
                char *end;
                long v = strtol(t, &end, 10);
                if (*end || end == t || v < 1 || v > 8) return args_fail(PROG, "--spec: '%s' is neither auto nor a width in 1..8", t);
                k = (int32_t)v;
            }
            for (int i = 0; i < o.n_specs; i++)
                if (o.specs[i] == k) return args_fail(PROG, "--spec: '%s' twice", t);
            if (o.n_specs == MAXS) return args_fail(PROG, "--spec: at most %d widths", MAXS);
            o.specs[o.n_specs++] = k;
            if (k > widest) widest = k;
            has_auto |= k == 0;
        }
        if (!o.n_specs) return args_fail(PROG, "--spec: none given");
        if (!o.spec_max) o.spec_max = widest ? widest : 4;
        else if (!has_auto) return args_fail(PROG, "--spec-max applies to --spec auto");
        o.spec = widest > o.spec_max || !has_auto ? widest : o.spec_max;
    }
    o.accept_hi = -1;
    if (strcmp(accept_s, "drafter")) {
        char *end;
        double lo = strtod(accept_s, &end), hi = lo;
        if (end != accept_s && *end == ':') hi = strtod(end + 1, &end);
        if (end == accept_s || *end || !(lo >= 0 && lo <= hi && hi <= 1))
            return args_fail(PROG, "--accept: '%s' is neither drafter, A nor LO:HI with 0 <= LO <= HI <= 1", accept_s);
        o.accept_lo = lo, o.accept_hi = hi;
        /* the oracle streams come from a run without drafts: K = 1 runs first at every configuration */
        int has1 = 0;
        for (int i = 0; i < o.n_specs; i++) has1 |= o.specs[i] == 1;
        if (!has1 && o.n_specs == MAXS) return args_fail(PROG, "--accept adds --spec 1: at most %d widths", MAXS - 1);
        if (!has1) o.specs[o.n_specs++] = 1;
        for (int i = 0; i < o.n_specs; i++)
            if (o.specs[i] == 1) {
                o.specs[i] = o.specs[0];
                o.specs[0] = 1;
            }
    }
    if (o.tokens <= o.spec) return args_fail(PROG, "--tokens (%d) must exceed the widest --spec (%d)", o.tokens, o.spec);
    if (o.and_cap && !o.n_concs) return args_fail(PROG, "--and-capacity adds to a --concurrency list: give one");
    for (int i = 0; i < o.n_concs; i++)
        for (int j = 0; j < i; j++)
            if (o.concs[i] <= o.concs[j]) return args_fail(PROG, "--concurrency values must increase");
    if (tool_check_backend(PROG, sv_backends[o.backend])) return EXIT_USAGE;
    if (tool_output(PROG, o.output)) return EXIT_USAGE;
    if (o.output && o.json) { /* FILE.partial is this run's to write and remove: not a file already there */
        char pp[4096];
        struct stat pst;
        if (snprintf(pp, sizeof pp, "%s.partial", o.output) >= (int)sizeof pp)
            return args_fail(PROG, "--output %s: the name is too long for its .partial file", o.output);
        if (lstat(pp, &pst) == 0)
            return args_fail(PROG, "--output %s: %s exists (the records of a run cut short, or a file of yours): move "
                             "it away first; this run writes its records there as it goes and removes it at the end",
                             o.output, pp);
    }
    uint64_t budget = (uint64_t)(o.budget_gib * 1073741824.0);
    if (o.res_budget_gib <= 0) o.res_budget_gib = o.budget_gib;
    const uint64_t res_budget = (uint64_t)(o.res_budget_gib * 1073741824.0);
    uint64_t mem = host_mem_total();
    o.mem = mem;
    double host_gib = o.host_gib > 0 ? o.host_gib : 0.9 * (double)mem / 1073741824.0;
    o.host_gib = host_gib;

    dhs_ref_run_cfg base = dhs_ref_run_cfg_default();
    base.model.seed = o.seed;
    dhs_ref_geometry g;
    dhs_ref_geometry_parse(sv_geometries[o.geometry], &g);
    dhs_ref_run_set_geometry(&base, g);
    base.model.seed = o.seed;
    if (o.layers > base.model.n_layers)
        return args_fail(PROG, "--layers %d: the %s geometry has %d layers", o.layers, sv_geometries[o.geometry],
                         base.model.n_layers);
    if (o.layers) base.model.n_layers = o.layers;
    if (o.layers && dhs_ref_cfg_check(&base.model)) /* a stack too short for the geometry's producer schedule */
        return args_fail(PROG, "--layers %d: the %s geometry needs at least %d layers (%s)", o.layers,
                         sv_geometries[o.geometry],
                         base.model.layout == DHS_REF_LAYOUT_FOLLOW ? base.model.follow_lead + 1 : 1,
                         dhs_ref_cfg_check(&base.model));
    base.tokens = o.tokens;
    base.spec = o.spec;
    base.seed = o.seed;
    base.cuda = o.backend == 1;
    base.gpu_model = base.cuda;
    base.step = o.step;
    base.topk_impl = o.topk_impl;
    base.copy_overlap = o.copy_overlap;
    base.direct_resolve = o.direct_resolve;
    base.page_tables = o.page_tables;
    base.decoded_optional = o.decoded_optional;
    base.tail_host = o.tail_host;
    base.end_early = o.end_early;
    base.deploy = deploy;
    base.copy_queue_blocks = o.copy_queue_blocks;
    base.host_cache_bytes = (uint64_t)(o.host_cache_gib * 1073741824.0);
    base.host_cache_fill = o.host_fill;
    base.import_mode = o.import_mode;
    base.repop_pages = o.repop_pages;
    base.async_delay = 0;
    base.threads = 1;
    base.resolver = o.step != 0 ? DHS_RESOLVER_DEVICE : DHS_RESOLVER_HOST;
    base.shared_prefix = o.shared_prefix;
    for (int li = 0; li < o.n_contexts && o.shared_prefix > 0; li++)
        if (o.shared_prefix >= o.contexts[li] - (o.contexts[li] > 64 ? 31 : 0)) {
            fprintf(stderr, PROG ": --shared-prefix %" PRId64 " must be below every session's prompt (context %" PRId64
                            ": the shortest has %" PRId64 " positions)\n",
                    o.shared_prefix, o.contexts[li], o.contexts[li] - (o.contexts[li] > 64 ? 31 : 0));
            return EXIT_USAGE;
        }
    static dhs_locality_model lm; /* static: large */
    if (o.locality) {
        char lerr[256] = "";
        if (dhs_locality_model_load(o.locality, &lm, lerr, sizeof lerr) || lm.n_layers == 0) {
            fprintf(stderr, PROG ": --locality %s\n",
                    lm.n_layers == 0 && !lerr[0] ? "synthetic: the model's own queries are the default (random, dsv32-swe or a JSON file)" : lerr);
            return EXIT_USAGE;
        }
        base.locality = &lm;
    }
    static int32_t ghot[DHS_MAX_SOURCES];
    if (o.group_hot) {
        int32_t n = tool_group_hot_rows(PROG, o.group_hot, base.page_rows, ghot);
        if (n < 0) return EXIT_USAGE;
        base.group_hot_rows = ghot;
        base.n_group_hot = n;
    }
    dhs_ref_model *m = NULL; /* sizing only (each run makes its own): one model for every context */
    if (dhs_ref_model_create(&base.model, &m) != DHS_OK) {
        fprintf(stderr, PROG ": cannot create the model\n");
        return EXIT_RUNTIME;
    }
    if (o.group_hot && base.n_group_hot != dhs_ref_n_groups(m)) {
        fprintf(stderr, PROG ": --group-hot-rows: %d sizes for a model of %d groups\n", base.n_group_hot, dhs_ref_n_groups(m));
        dhs_ref_model_destroy(m);
        return EXIT_USAGE;
    }
    double hbm = base.cuda ? dhs_ref_gpu_hbm_gbps(1ull << 30) : 0;

    tool_progress tp;
    tool_progress_init(&tp, o.quiet, 5.0);
    sv_rec *R = calloc((size_t)(o.n_contexts * 5 * (MAXC + 1) * o.n_specs), sizeof(sv_rec)); /* resident + 2 modes x 2 prefixes */
    if (!R) {
        dhs_ref_model_destroy(m);
        return EXIT_RUNTIME;
    }
    int nr = 0;
    int32_t held_max[MAXL][3], caps[MAXL][2];
    char cap_line[MAXL][300];
    memset(held_max, 0, sizeof held_max);
    int32_t max_sessions = 4096 * o.waves;
    sv_tokens tk = {calloc((size_t)max_sessions, sizeof(uint64_t)), calloc((size_t)max_sessions, 1), max_sessions,
                    calloc((size_t)max_sessions, sizeof(int32_t *)), calloc((size_t)max_sessions, sizeof(int64_t))};
    if (!tk.hash || !tk.seen || !tk.seq || !tk.len) {
        free(tk.seq), free(tk.len);
        free(R), tk_free(&tk);
        dhs_ref_model_destroy(m);
        return EXIT_RUNTIME;
    }
    /* not even one session's history fits the host budget: refused before any work */
    for (int li = 0; li < o.n_contexts && (use[1] || use[2]); li++) {
        sv_size z1;
        char why[200];
        base.context = o.contexts[li];
        if (bench_serve_sizes(m, &base, 1, &z1, why, sizeof why) == 0 && host_need(m, &z1, 1, o.shared_prefix, o.shared_prefix > 0) >
                                                                               host_gib * 1073741824.0) {
            fprintf(stderr, PROG ": context %" PRId64 ": host memory holds no session: one session's history is %.2f GiB, the "
                            "host budget %.1f GiB (--host-budget-gib; this machine has %.1f GiB)\n",
                    o.contexts[li], host_need(m, &z1, 1, o.shared_prefix, o.shared_prefix > 0) / 1073741824.0, host_gib,
                    (double)mem / 1073741824.0);
            free(R), tk_free(&tk);
            dhs_ref_model_destroy(m);
            return EXIT_USAGE;
        }
    }
    uint64_t mism_total = 0;
    for (int li = 0; li < o.n_contexts; li++) {
        int64_t L = o.contexts[li];
        base.context = L;
        memset(tk.seen, 0, (size_t)max_sessions); /* a session's prompt depends on the context */
        for (int32_t i = 0; i < max_sessions; i++) {
            free(tk.seq[i]);
            tk.seq[i] = NULL;
            tk.len[i] = 0;
        }
        /* how many each mode can hold under the budget (host memory caps the hierarchy) */
        sv_size z1;
        char why[200];
        if (bench_serve_sizes(m, &base, 1, &z1, why, sizeof why)) {
            fprintf(stderr, PROG ": %s\n", why);
            free(R), tk_free(&tk);
            dhs_ref_model_destroy(m);
            return EXIT_RUNTIME;
        }
        int32_t cap_res = (int32_t)(res_budget / z1.resident_session);
        char res_note[96] = "";
        if (res_budget != budget)
            snprintf(res_note, sizeof res_note, " under its %.2f GiB (%d under the hierarchy's %.2f GiB)", o.res_budget_gib,
                     (int32_t)(budget / z1.resident_session), o.budget_gib);
        int32_t cap_host = (int32_t)(host_gib * 1073741824.0 / (double)z1.host_session);
        int32_t cap_host_priv = cap_host;
        if (o.shared_prefix > 0) { /* the prefix's complete host chunks once, the rest per session */
            const double sb = host_need(m, &z1, 1, o.shared_prefix, 1) - host_need(m, &z1, 0, o.shared_prefix, 1);
            const double once = host_need(m, &z1, 0, o.shared_prefix, 1);
            cap_host = sb > 0 && host_gib * 1073741824.0 > once ? (int32_t)((host_gib * 1073741824.0 - once) / sb) : 0;
            if (cap_host > 1 << 20) cap_host = 1 << 20;
        }
        int32_t cap_dev = 0; /* doubling, then bisection */
        for (int32_t C = 1; C <= 4096 && hier_fits(m, &base, C, budget); C *= 2) cap_dev = C;
        for (int32_t step = cap_dev / 2; step >= 1; step /= 2)
            if (hier_fits(m, &base, cap_dev + step, budget)) cap_dev += step;
        int32_t cap_hier = cap_dev < cap_host ? cap_dev : cap_host;
        held_max[li][0] = cap_res;
        held_max[li][1] = held_max[li][2] = cap_hier;
        caps[li][0] = cap_dev, caps[li][1] = cap_host;
        snprintf(cap_line[li], sizeof cap_line[li],
                 "context %" PRId64 ": resident %.2f GiB/session -> holds %d%s; the hierarchy holds %d on the device, host "
                 "memory (%.1f GiB, %.2f GiB of history per session) caps it at %d%s",
                 L, (double)z1.resident_session / 1073741824.0, cap_res, res_note, cap_dev, host_gib,
                 (double)z1.host_session / 1073741824.0, cap_host, cap_host < cap_dev ? " (binds)" : "");
        if (o.shared_prefix > 0) {
            size_t ln = strlen(cap_line[li]);
            snprintf(cap_line[li] + ln, sizeof cap_line[li] - ln,
                     "; with the %" PRId64 "-position prefix held once (private copies: %d)", o.shared_prefix, cap_host_priv);
        }
        tool_progress_msg(&tp, 1, PROG ": %s", cap_line[li]);
        for (int mode = 0; mode < 3; mode++) {
            if (!use[mode]) continue;
            int64_t cs[MAXC + 1];
            int nc = 0;
            int32_t cap = held_max[li][mode];
            if (o.n_concs) {
                /* the capacity in its place in the ascending list, unless it is there: a resident capacity
                   below the list's largest C (which it cannot hold) is its best throughput */
                int placed = !o.and_cap || cap < 1;
                for (int i = 0; i < o.n_concs; i++) {
                    if (!placed && cap <= o.concs[i]) {
                        if (cap < o.concs[i]) cs[nc++] = cap;
                        placed = 1;
                    }
                    cs[nc++] = o.concs[i];
                }
                if (!placed) cs[nc++] = cap;
            } else {
                for (int64_t C = 1; C < cap && nc < MAXC; C *= 2) cs[nc++] = C;
                if (cap >= 1) cs[nc++] = cap;
                if (cap < 1) cs[nc++] = 1; /* reported as not fitting */
            }
            /* with a shared prefix each hierarchy configuration twice: held once, then private copies */
            const int twice = mode && o.shared_prefix > 0;
            for (int k = 0; k < nc * (twice ? 2 : 1); k++)
            for (int si = 0; si < o.n_specs; si++) {
                const int prefix = twice ? 1 + k % 2 : 0, i = twice ? k / 2 : k;
                run_one(&o, m, &base, mode, prefix, L, (int32_t)cs[i], o.specs[si], mode ? budget : res_budget, hbm, &tp, &tk,
                        &R[nr]);
                mism_total += (uint64_t)R[nr].token_mismatches;
                const sv_rec *q = &R[nr];
                if (!q->ok && o.n_concs == 0 && cap >= 1 && cs[i] <= cap && prefix != 2 && si == 0)
                    fprintf(stderr, PROG ": %s%s L=%" PRId64 " C=%" PRId64 ": %s\n", mode_names[mode], prefix_tags[prefix], L,
                            cs[i], q->why);
                if (q->ok)
                    tool_progress_msg(&tp, 1,
                                      PROG ": %s%s L=%" PRId64 " C=%" PRId64 ": %.1f s (histories %.1f s, %d at once; pinned "
                                      "ahead %.1f s; starts %.1f s: imports (%s) %.3f s per session, %.2f GB/s, keys %.1f s; "
                                      "decode %.1f s; %" PRIu64 " pages repopulated, optional pages peaked after %" PRIu64
                                      " rounds%s; peak RSS %.2f GiB): held %" PRIu64 ", %.1f tokens/s, step %.2f ms, waits %" PRIu64
                                      ", reclaims %.0f; graph captures %" PRIu64 " (%.1f ms); host us per round: "
                                      "round_begin %.0f, round_end %.0f, exposed %.0f (tail %.0f, between %.0f, head %.0f, "
                                      "control %.0f (tail locations %.0f), prelaunch %.0f; overlapped: background %.0f); library us per round: housekeeping %.0f (advance %.0f, fence %.0f, "
                                      "sweep %.0f, repopulate %.0f), "
                                      "tail_room %.0f, publish %.0f, end's device %.0f, backup %.0f, resolve %.0f",
                                      mode_names[mode], prefix_tags[prefix], L, cs[i],
                                      q->duration_s, q->prefill_s, q->synth_parallel, q->host_fill_s, q->start_s,
                                      sv_imports[o.import_mode],
                                      q->imp.imports ? q->imp.import_s / (double)q->imp.imports : 0.0,
                                      q->imp.import_s > 0 ? (double)q->imp.import_bytes / q->imp.import_s / 1e9 : 0.0,
                                      q->imp.keys_s, q->decode_s, q->repop_pages, q->opt_fill_rounds,
                                      q->opt_filling ? ", still filling at the end" : "",
                                      (double)q->rss_peak / 1073741824.0, q->held, q->tok_s,
                                      q->step_mean_ms, q->waits, q->reclaims, q->st.captures, 1e3 * q->st.capture_s,
                                      q->st.all_rounds ? 1e6 * q->st.begin_s / (double)q->st.all_rounds : 0.0,
                                      q->st.all_rounds ? 1e6 * q->st.end_s / (double)q->st.all_rounds : 0.0,
                                      q->st.exposed_rounds ? 1e6 * q->st.exposed_s / (double)q->st.exposed_rounds : 0.0,
                                      HP(q, tail_s), HP(q, between_s), HP(q, head_s), HP(q, xcontrol_s),
                                      q->st.rounds ? 1e6 * q->st.tailloc_s / (double)q->st.rounds : 0.0, HP(q, prelaunch_s),
                                      q->st.all_rounds ? 1e6 * q->st.background_s / (double)q->st.all_rounds : 0.0,
                                      LHP(q, DHS_HP_HOUSEKEEPING), LHP(q, DHS_HP_ADVANCE), LHP(q, DHS_HP_FENCE),
                                      LHP(q, DHS_HP_SWEEP), LHP(q, DHS_HP_REPOPULATE), LHP(q, DHS_HP_TAIL_ROOM),
                                      LHP(q, DHS_HP_PUBLISH), LHP(q, DHS_HP_DEVICE), LHP(q, DHS_HP_BACKUP), LHP(q, DHS_HP_RESOLVE));
                nr++;
                if (o.output && o.json) write_partial(o.output, R, nr);
            }
        }
    }
    tool_progress_end(&tp);

    /* the widths side by side: per context, mode and concurrency that ran more than one width, auto
       against the best fixed width (throughput) */
    cJSON *spec_sum = cJSON_CreateArray();
    char *spec_lines = calloc((size_t)nr + 1, 400);
    size_t spec_len = 0;
    for (int i = 0; i < nr && o.n_specs > 1; i++) {
        const sv_rec *a = &R[i];
        int first = 1; /* the first record of its (context, mode, C) */
        for (int j = 0; j < i; j++) first &= !(R[j].context == a->context && R[j].mode == a->mode && R[j].prefix == a->prefix && R[j].conc == a->conc);
        if (!first) continue;
        const sv_rec *au = NULL, *bf = NULL;
        cJSON *s = cJSON_CreateObject();
        cJSON_AddNumberToObject(s, "context", (double)a->context);
        cJSON_AddStringToObject(s, "mode", mode_names[a->mode]);
        if (a->prefix) cJSON_AddStringToObject(s, "prefix", a->prefix == 1 ? "shared" : "private");
        cJSON_AddNumberToObject(s, "max_concurrency", a->conc);
        cJSON *ws = cJSON_AddArrayToObject(s, "widths");
        char line[400];
        int ln = snprintf(line, sizeof line, "widths at %s%s L=%" PRId64 " C=%d:", mode_names[a->mode], prefix_tags[a->prefix],
                      a->context, a->conc);
        for (int j = i; j < nr; j++) {
            const sv_rec *q = &R[j];
            if (q->context != a->context || q->mode != a->mode || q->prefix != a->prefix || q->conc != a->conc || !q->ok) continue;
            if (!q->spec) au = q;
            else if (!bf || q->tok_s > bf->tok_s) bf = q;
            cJSON *w = cJSON_CreateObject();
            if (q->spec) cJSON_AddNumberToObject(w, "spec", q->spec);
            else cJSON_AddStringToObject(w, "spec", "auto");
            cJSON_AddNumberToObject(w, "output_throughput", q->tok_s);
            cJSON_AddNumberToObject(w, "median_tpot_ms", q->tpot_p50_ms);
            cJSON_AddNumberToObject(w, "p99_tpot_ms", q->tpot_p99_ms);
            cJSON_AddNumberToObject(w, "mean_k", q->mean_k);
            cJSON_AddNumberToObject(w, "host_rows_per_token", q->host_rows_per_token);
            cJSON_AddItemToArray(ws, w);
            char ks[48];
            if (q->spec) snprintf(ks, sizeof ks, "K=%d", q->spec);
            else snprintf(ks, sizeof ks, "auto (mean K %.2f)", q->mean_k);
            if (ln < (int)sizeof line)
                ln += snprintf(line + ln, sizeof line - (size_t)ln, " %s %.1f tok/s, TPOT %.2f/%.2f ms;", ks, q->tok_s,
                               q->tpot_p50_ms, q->tpot_p99_ms);
        }
        if (au && bf) {
            cJSON_AddNumberToObject(s, "best_fixed_spec", bf->spec);
            cJSON_AddNumberToObject(s, "auto_vs_best_fixed", au->tok_s / bf->tok_s);
            if (ln < (int)sizeof line)
                snprintf(line + ln, sizeof line - (size_t)ln, " auto / best fixed (K=%d) %.3fx", bf->spec, au->tok_s / bf->tok_s);
        }
        cJSON_AddItemToArray(spec_sum, s);
        if (spec_lines) spec_len += (size_t)snprintf(spec_lines + spec_len, 400, "%.398s\n", line);
    }

    /* summary per context: sessions held, best throughput, step time at equal batch */
    cJSON *sum = cJSON_CreateArray();
    char lines[MAXL][600];
    for (int li = 0; li < o.n_contexts; li++) {
        int64_t L = o.contexts[li];
        const sv_rec *best[3] = {NULL, NULL, NULL};
        uint64_t held[3] = {0, 0, 0};
        for (int i = 0; i < nr; i++) {
            if (R[i].context != L || !R[i].ok) continue;
            int md = R[i].mode;
            if (!best[md] || R[i].tok_s > best[md]->tok_s) best[md] = &R[i];
            if (R[i].held > held[md]) held[md] = R[i].held;
        }
        /* equal batch: the largest C both resident and adaptive ran */
        const sv_rec *eq_r = NULL, *eq_h = NULL;
        for (int i = 0; i < nr; i++)
            for (int j = 0; j < nr; j++)
                if (R[i].context == L && R[j].context == L && R[i].ok && R[j].ok && R[i].mode == 0 && R[j].mode == 2 &&
                    R[i].conc == R[j].conc && (!eq_r || R[i].conc > eq_r->conc))
                    eq_r = &R[i], eq_h = &R[j];
        int hm = held[2] >= held[1] ? 2 : 1;
        const sv_rec *bh = best[2] && (!best[1] || best[2]->tok_s >= best[1]->tok_s) ? best[2] : best[1];
        cJSON *s = cJSON_CreateObject();
        cJSON_AddNumberToObject(s, "context", (double)L);
        cJSON_AddNumberToObject(s, "resident_sessions_held", (double)held[0]);
        cJSON_AddNumberToObject(s, "hier_sessions_held", (double)held[hm]);
        cJSON_AddNumberToObject(s, "resident_capacity", held_max[li][0]);
        cJSON_AddNumberToObject(s, "hier_capacity", held_max[li][2]);
        cJSON_AddNumberToObject(s, "hier_device_capacity", caps[li][0]);
        cJSON_AddNumberToObject(s, "host_capacity", caps[li][1]);
        cJSON_AddBoolToObject(s, "host_binds", caps[li][1] < caps[li][0]);
        if (held[0]) cJSON_AddNumberToObject(s, "sessions_ratio", (double)held[hm] / (double)held[0]);
        if (best[0]) cJSON_AddNumberToObject(s, "resident_best_tok_s", best[0]->tok_s);
        if (bh) cJSON_AddNumberToObject(s, "hier_best_tok_s", bh->tok_s);
        if (bh) cJSON_AddStringToObject(s, "hier_best_mode", mode_names[bh->mode]);
        if (best[0] && bh) cJSON_AddNumberToObject(s, "throughput_ratio", bh->tok_s / best[0]->tok_s);
        if (eq_r) {
            cJSON_AddNumberToObject(s, "equal_batch", eq_r->conc);
            cJSON_AddNumberToObject(s, "equal_batch_step_ratio", eq_h->step_mean_ms / eq_r->step_mean_ms);
        }
        cJSON_AddItemToArray(sum, s);
        snprintf(lines[li], sizeof lines[li],
                 "context %" PRId64 ": sessions held resident %" PRIu64 ", hierarchical %" PRIu64 " (%.1fx; capacity %d vs %d)"
                 "; best tokens/s resident %.1f, hierarchical %.1f (%s, %.2fx); step at equal batch %d: %.3fx resident",
                 L, held[0], held[hm], held[0] ? (double)held[hm] / (double)held[0] : 0.0, held_max[li][0],
                 held_max[li][2], best[0] ? best[0]->tok_s : 0.0, bh ? bh->tok_s : 0.0, bh ? mode_names[bh->mode] : "-",
                 best[0] && bh ? bh->tok_s / best[0]->tok_s : 0.0, eq_r ? eq_r->conc : 0,
                 eq_r ? eq_h->step_mean_ms / eq_r->step_mean_ms : 0.0);
    }
    /* shared prefix: per context, the most sessions each prefix mode held and its host bytes at that point */
    char share_lines[MAXL][400];
    for (int li = 0; li < o.n_contexts; li++) {
        share_lines[li][0] = 0;
        if (o.shared_prefix <= 0) continue;
        const sv_rec *top[3] = {NULL, NULL, NULL};
        for (int i = 0; i < nr; i++)
            if (R[i].context == o.contexts[li] && R[i].ok && R[i].prefix &&
                (!top[R[i].prefix] || R[i].held > top[R[i].prefix]->held ||
                 (R[i].held == top[R[i].prefix]->held && R[i].host_peak < top[R[i].prefix]->host_peak)))
                top[R[i].prefix] = &R[i];
        snprintf(share_lines[li], sizeof share_lines[li],
                 "context %" PRId64 ", shared prefix %" PRId64 ": sessions held with the prefix held once %" PRIu64
                 " (host rows %.2f GiB, %.2f GiB of it shared), with private copies %" PRIu64 " (host rows %.2f GiB)",
                 o.contexts[li], o.shared_prefix, top[1] ? top[1]->held : 0, top[1] ? (double)top[1]->host_peak / 1073741824.0 : 0.0,
                 top[1] ? (double)top[1]->host_shared_peak / 1073741824.0 : 0.0, top[2] ? top[2]->held : 0,
                 top[2] ? (double)top[2]->host_peak / 1073741824.0 : 0.0);
    }
    int prc = 0;
    if (o.plot && write_svg(out_path(o.plot), R, nr)) {
        fprintf(stderr, PROG ": cannot write %s\n", o.plot);
        prc = EXIT_RUNTIME;
    }
    const char *be = sv_backends[o.backend];
    if (o.json) {
        cJSON *j = cJSON_CreateObject();
        tool_prov_cjson(j, be);
        cJSON_AddStringToObject(j, "bench", "serve");
        cJSON *cf = cJSON_AddObjectToObject(j, "config");
        cJSON_AddStringToObject(cf, "backend", be);
        cJSON_AddStringToObject(cf, "geometry", sv_geometries[o.geometry]);
        char hid[160];
        dhs_ref_cfg_hidden_str(&base.model, hid, sizeof hid);
        cJSON_AddStringToObject(cf, "hidden", hid);
        cJSON_AddStringToObject(cf, "step", sv_steps[o.step]);
        cJSON_AddStringToObject(cf, "topk_impl", sv_topk_impls[o.topk_impl]);
        cJSON_AddBoolToObject(cf, "copy_overlap", o.copy_overlap && o.step != 0);
        cJSON_AddStringToObject(cf, "tail_locations", sv_tail_where[o.tail_host]);
        cJSON_AddStringToObject(cf, "round_end", sv_round_ends[o.end_early]);
        cJSON_AddNumberToObject(cf, "host_cache_bytes", o.host_cache_gib * 1073741824.0);
        cJSON_AddBoolToObject(cf, "host_cache_fill", o.host_fill);
        cJSON_AddStringToObject(cf, "import", sv_imports[o.import_mode]);
        cJSON_AddNumberToObject(cf, "repop_pages", o.repop_pages ? o.repop_pages : dhs_config_default().repop_pages);
        cJSON_AddBoolToObject(cf, "decoded_optional", o.decoded_optional);
        cJSON_AddStringToObject(cf, "deployment", deploy ? deploy->name : "none");
        if (deploy) {
            cJSON *wb = cJSON_AddArrayToObject(cf, "weight_bytes_per_step"); /* at each --concurrency, spec tokens each */
            for (int i = 0; i < o.n_concs; i++)
                cJSON_AddItemToArray(wb, cJSON_CreateNumber(dhs_deploy_step_bytes(deploy, (double)o.concs[i] * o.spec, NULL)));
        }
        cJSON_AddNumberToObject(cf, "copy_queue_blocks", o.copy_queue_blocks);
        if (o.group_hot) {
            cJSON *gh = cJSON_AddArrayToObject(cf, "group_hot_rows");
            for (int32_t g = 0; gh && g < base.n_group_hot; g++) cJSON_AddItemToArray(gh, cJSON_CreateNumber(ghot[g]));
        }
        cJSON_AddNumberToObject(cf, "device_budget_bytes", (double)budget);
        cJSON_AddNumberToObject(cf, "resident_budget_bytes", (double)res_budget);
        cJSON_AddStringToObject(cf, "history_copies", sv_copies[o.import_twice]);
        cJSON_AddNumberToObject(cf, "host_budget_bytes", host_gib * 1073741824.0);
        cJSON_AddNumberToObject(cf, "shared_prefix", (double)o.shared_prefix);
        cJSON_AddNumberToObject(cf, "host_mem_total_bytes", (double)mem);
        cJSON_AddNumberToObject(cf, "tokens", o.tokens);
        cJSON_AddNumberToObject(cf, "spec", o.spec);
        cJSON_AddStringToObject(cf, "spec_list", spec_s);
        cJSON_AddNumberToObject(cf, "spec_max", o.spec_max);
        if (o.accept_hi >= 0) {
            cJSON *ac = cJSON_AddObjectToObject(cf, "accept");
            cJSON_AddNumberToObject(ac, "lo", o.accept_lo);
            cJSON_AddNumberToObject(ac, "hi", o.accept_hi);
        } else {
            cJSON_AddStringToObject(cf, "accept", "drafter");
        }
        cJSON_AddNumberToObject(cf, "waves", o.waves);
        cJSON_AddNumberToObject(cf, "topk", base.model.topk);
        int32_t prod = 0;
        for (int32_t l = 0; l < base.model.n_layers; l++) prod += dhs_ref_layer(m, l)->producer;
        cJSON_AddNumberToObject(cf, "layers", base.model.n_layers);
        cJSON_AddNumberToObject(cf, "payload_sources", dhs_ref_n_sources(m));
        cJSON_AddNumberToObject(cf, "index_producers", prod);
        cJSON_AddNumberToObject(cf, "row_bytes", DHS_REF_ROW_BYTES);
        cJSON_AddNumberToObject(cf, "profile_every", o.step ? o.profile_every : 0);
        cJSON_AddNumberToObject(j, "hbm_gbps", hbm);
        cJSON *ra = cJSON_AddArrayToObject(j, "records");
        for (int i = 0; i < nr; i++) cJSON_AddItemToArray(ra, rec_json(&R[i]));
        cJSON_AddItemToObject(j, "summary", sum);
        cJSON_AddItemToObject(j, "spec_summary", spec_sum);
        cJSON_AddBoolToObject(j, "tokens_identical", mism_total == 0);
        cJSON_AddNumberToObject(j, "token_mismatches", (double)mism_total);
        char *txt = cJSON_Print(j);
        if (txt) puts(txt);
        free(txt);
        cJSON_Delete(j);
        if (o.output) { /* complete: the partial records are in the file */
            char path[4096];
            if (snprintf(path, sizeof path, "%s.partial", o.output) < (int)sizeof path) remove(path);
        }
    } else {
        char hid[160], auto_s[48] = "";
        dhs_ref_cfg_hidden_str(&base.model, hid, sizeof hid);
        for (int i = 0; i < o.n_specs; i++)
            if (!o.specs[i]) snprintf(auto_s, sizeof auto_s, " (auto at most %d)", o.spec_max);
        printf("dhs bench serve: %s backend, geometry %s (hidden size kept small: %s), %s step; device KV budget "
               "%.2f GiB, host %.1f GiB; %d tokens per session, spec %s%s, acceptance %s, %d sessions per slot\n",
               be, sv_geometries[o.geometry], hid, sv_steps[o.step], o.budget_gib, host_gib, o.tokens, spec_s, auto_s,
               accept_s, o.waves);
        if (res_budget != budget) printf("resident mode's device budget %.2f GiB\n", o.res_budget_gib);
        if (o.layers) printf("the geometry cut to its first %d layers (--layers)\n", o.layers);
        if (hbm > 0) printf("HBM (D2D copy, read + write) %.0f GB/s: the attention roofline\n", hbm);
        if (deploy) {
            printf("deployment %s (%s): weights read per step", deploy->name, deploy->about);
            for (int i = 0; i < o.n_concs; i++)
                printf("%s C = %d: %.2f GB", i ? "," : "", (int)o.concs[i],
                       dhs_deploy_step_bytes(deploy, (double)o.concs[i] * o.spec, NULL) / 1e9);
            printf(" (docs/SERVE.md)\n");
        }
        for (int li = 0; li < o.n_contexts; li++) printf("%s\n", cap_line[li]);
        print_table(R, nr, stdout);
        for (int li = 0; li < o.n_contexts; li++) printf("%s\n", lines[li]);
        for (int li = 0; li < o.n_contexts; li++)
            if (share_lines[li][0]) printf("%s\n", share_lines[li]);
        if (spec_lines && spec_len) fputs(spec_lines, stdout);
        cJSON_Delete(spec_sum);
        for (int li = 0; li < o.n_contexts && o.locality; li++) { /* per layer, from the widest hierarchical run */
            const sv_rec *q = NULL;
            for (int i = 0; i < nr; i++)
                if (R[i].ok && R[i].loc && R[i].context == o.contexts[li] && (!q || (R[i].mode && !q->mode) ||
                                                                             (!!R[i].mode == !!q->mode && R[i].conc > q->conc)))
                    q = &R[i];
            if (!q) continue;
            printf("context %" PRId64 ", %s C=%d, per layer (the model's own top-k under --locality; draft: queries j, j+1 "
                   "of a round):\n", o.contexts[li], mode_names[q->mode], q->conc);
            dhs_ref_print_locality(stdout, q->loc, q->n_layers);
        }
        printf("tokens: every session's tokens %s across the modes and concurrencies that served it%s\n",
               mism_total ? "DIFFER" : "equal", mism_total ? " (a bug: docs/SERVE.md)" : "");
        cJSON_Delete(sum);
    }
    for (int i = 0; i < nr; i++) free(R[i].loc);
    free(R), tk_free(&tk);
    free(spec_lines);
    dhs_ref_model_destroy(m);
    return prc ? prc : mism_total ? EXIT_CHECK : 0;
}
