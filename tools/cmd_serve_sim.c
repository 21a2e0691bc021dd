/* cmd_serve_sim.c - `dhs serve-sim`: discrete-event serving simulator with
 * latency-throughput curves for resident, fixed-hot-cache and adaptive
 * serving, with and without speculation (docs/SIM.md). Output keys follow
 * vLLM's `bench serve`. Exit status: 0 success, 2 bad flags or input (a
 * configuration that cannot hold its requests included), 3 a runtime failure. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cmds.h"
#include "model/model.h"
#include "model/run.h"
#include "sim/servecal.h"
#include "sim/servesim.h"
#include "sim/sim.h"
#include "serve_sizes.h"
#include "outfile.h"
#include "tool.h"

#define MAX_POINTS 32

#define PROG "dhs serve-sim"

static int bad(const char *msg, const char *val)
{
    if (val) return args_fail(PROG, "%s '%s'", msg, val);
    return args_fail(PROG, "%s", msg);
}

typedef struct run_rec {
    dhs_serve_mode mode;
    int spec;
    int width; /* with spec: 0 the schedule, > 0 that fixed K, -1 chosen online (dhs_spec_auto) */
    dhs_serve_placement place;
    double load; /* concurrency, rate or rate scale */
    dhs_serve_config c;
    dhs_serve_workload w;
    char tag[96];
    int rc;
    char err[512];
    dhs_serve_result r;
    struct pool *pool;
} run_rec;

/* runs are independent (own context and backend): a small pool of threads
   takes them in order; results land in their own slots, so the output does
   not depend on the thread count */
typedef struct pool {
    run_rec *runs;
    int n, next, done, failed;
    int keep_going; /* --calibrate: a failed run is reported in its row, the others still run */
    tool_progress *prog;
    pthread_mutex_t mu;
} pool;

/* within a run: a line every few seconds (also off a terminal) */
static void run_progress(void *user, int64_t done, int64_t total, double sim_s)
{
    run_rec *x = user;
    pool *P = x->pool;
    pthread_mutex_lock(&P->mu);
    tool_progress_msg(P->prog, 0, "dhs serve-sim: %d/%d runs done; %s: %" PRId64 "/%" PRId64 " requests, %.1f s simulated", P->done, P->n,
                      x->tag, done, total, sim_s);
    pthread_mutex_unlock(&P->mu);
}

static void *worker(void *arg)
{
    pool *P = arg;
    for (;;) {
        pthread_mutex_lock(&P->mu);
        int i = P->failed && !P->keep_going ? P->n : P->next++;
        pthread_mutex_unlock(&P->mu);
        if (i >= P->n) return NULL;
        run_rec *x = &P->runs[i];
        x->rc = dhs_serve_run(&x->c, &x->w, &x->r, x->err, sizeof x->err);
        pthread_mutex_lock(&P->mu);
        P->done++;
        if (x->rc) P->failed = 1;
        tool_progress_msg(P->prog, 0, "dhs serve-sim: %d/%d runs done (last: %s)", P->done, P->n, x->tag);
        pthread_mutex_unlock(&P->mu);
    }
}

/* "off", "on" (the schedule), "K=4", "auto" */
static const char *spec_label(const run_rec *x, char *buf, size_t n)
{
    if (!x->spec) return "off";
    if (x->width < 0) return "auto";
    if (x->width == 0) return "on";
    snprintf(buf, n, "K=%d", x->width);
    return buf;
}

static void print_run_json(FILE *f, const run_rec *x, const char *load_key)
{
    char wl[16];
    const dhs_serve_result *r = &x->r;
    fprintf(f,
            "    {\"mode\": \"%s\", \"spec\": %s, \"spec_width\": \"%s\", \"%s\": %g, \"completed\": %" PRId64 ", \"duration\": %.4f, "
            "\"total_input_tokens\": %" PRId64 ", \"total_output_tokens\": %" PRId64 ",\n"
            "     \"request_throughput\": %.4f, \"output_throughput\": %.2f, \"total_token_throughput\": %.2f,\n"
            "     \"mean_ttft_ms\": %.3f, \"median_ttft_ms\": %.3f, \"p99_ttft_ms\": %.3f, \"mean_tpot_ms\": %.3f, \"median_tpot_ms\": %.3f, "
            "\"p99_tpot_ms\": %.3f,\n"
            "     \"mean_itl_ms\": %.3f, \"median_itl_ms\": %.3f, \"p99_itl_ms\": %.3f, \"mean_e2el_ms\": %.3f, \"median_e2el_ms\": %.3f, "
            "\"p99_e2el_ms\": %.3f,\n"
            "     \"max_running\": %d, \"mean_batch\": %.2f, \"mean_step_ms\": %.3f, \"accept_length\": %.3f, \"steps\": %" PRIu64
            ", \"admission_waits\": %" PRIu64 ",\n"
            "     \"host_rows_per_token_per_layer\": %.2f, \"census\": {\"direct\": %" PRIu64 ", \"hot\": %" PRIu64 ", \"host\": %" PRIu64
            "}, \"reclaims\": %" PRIu64 ", \"repopulated_pages\": %" PRIu64 ", \"layer_pool_bytes\": %" PRIu64
            ", \"index_key_budget_bytes\": %" PRIu64 ", \"peak_live_requests\": %" PRId64 ", \"peak_request_bytes\": %" PRIu64
            ", \"wall_s\": %.3f",
            dhs_serve_mode_str(x->mode), x->spec ? "true" : "false", spec_label(x, wl, sizeof wl), load_key, x->load, r->completed, r->duration, r->total_input_tokens,
            r->total_output_tokens, r->request_throughput, r->output_throughput, r->total_token_throughput, r->mean_ttft_ms,
            r->median_ttft_ms, r->p99_ttft_ms, r->mean_tpot_ms, r->median_tpot_ms, r->p99_tpot_ms, r->mean_itl_ms, r->median_itl_ms,
            r->p99_itl_ms, r->mean_e2el_ms, r->median_e2el_ms, r->p99_e2el_ms, r->max_running, r->mean_batch, r->mean_step_ms,
            r->accept_length, r->steps, r->waits, r->host_rows_per_token, r->census_direct, r->census_hot, r->census_host, r->reclaims,
            r->repopulated_pages, r->device_pool_bytes, r->idx_budget_bytes, r->peak_live_requests, r->peak_request_bytes, r->wall_s);
    if (r->dp_ranks <= 1) {
        fprintf(f, "}");
        return;
    }
    /* data-parallel ranks: the group's step time, what each rank held, missed and waited */
    fprintf(f, ",\n     \"dp\": {\"ranks\": %d, \"placement\": \"%s\", \"p50_step_ms\": %.3f, \"p99_step_ms\": %.3f, "
               "\"mean_step_ms\": %.3f, \"output_throughput\": %.2f, \"miss_max_per_step\": %.2f, \"miss_mean_per_step\": %.2f, "
               "\"miss_spread\": %.4f, \"wait_share\": %.4f,\n      \"rank_sessions\": [",
            r->dp_ranks, dhs_serve_placement_str(x->place), r->p50_step_ms, r->p99_step_ms, r->mean_step_ms, r->output_throughput,
            r->miss_max_per_step, r->miss_mean_per_step, r->miss_mean_per_step > 0 ? r->miss_max_per_step / r->miss_mean_per_step : 1.0,
            r->wait_share);
    for (int i = 0; i < r->dp_ranks; i++) fprintf(f, "%s%d", i ? ", " : "", r->rank_sessions[i]);
    fprintf(f, "], \"rank_max_running\": [");
    for (int i = 0; i < r->dp_ranks; i++) fprintf(f, "%s%d", i ? ", " : "", r->rank_max_running[i]);
    fprintf(f, "], \"rank_misses_per_step\": [");
    for (int i = 0; i < r->dp_ranks; i++) fprintf(f, "%s%.2f", i ? ", " : "", r->rank_misses_per_step[i]);
    fprintf(f, "], \"rank_mean_step_ms\": [");
    for (int i = 0; i < r->dp_ranks; i++) fprintf(f, "%s%.3f", i ? ", " : "", r->rank_mean_step_ms[i]);
    fprintf(f, "]}}"); /* closes dp and the run */
}

static void run_pool(run_rec *runs, int n_runs, int jobs, int keep_going, tool_progress *prog)
{
    pool P = {runs, n_runs, 0, 0, 0, keep_going, prog, PTHREAD_MUTEX_INITIALIZER};
    for (int i = 0; i < n_runs; i++) runs[i].pool = &P;
    tool_progress_msg(prog, 1, "dhs serve-sim: %d runs on %d threads ...", n_runs, jobs < n_runs ? jobs : n_runs);
    int nt = jobs < n_runs ? jobs : n_runs;
    pthread_t th[64];
    int started = 0;
    for (int i = 1; i < nt; i++)
        if (pthread_create(&th[started], NULL, worker, &P) == 0) started++;
    worker(&P);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    tool_progress_end(prog);
}

/* ------------------------------------------------------------- --calibrate FILE
 * The cost model from a `dhs bench serve --json` file (dhs_serve_calibrate,
 * rules in docs/SIM.md "Calibration"), then each configuration the file
 * measured simulated under it and printed beside the measurement. */
typedef struct cal_rec {
    int ran;
    dhs_serve_meas m;
    /* measured figures shown beside the simulation */
    double tok_s, tpot_p50_ms, held, step_ms, batch, host_rows_per_token;
    int64_t context;
    int32_t conc;
    char mode[16];
    char why[600]; /* skipped: bench serve's reason */
    int sized;     /* z: bench serve's sizes of this configuration (hierarchy modes) */
    sv_size z;
} cal_rec;

typedef struct cal_file {
    char backend[32], geometry[32], step[32];
    double budget_bytes, tokens, spec, waves, topk, layers, sources, producers, row_bytes;
    cal_rec *recs;
    int n_recs, n_ran, n_phases;
} cal_file;

/* a number member; 0 if present and finite */
static int jnum(const cJSON *o, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return -1;
    *out = v->valuedouble;
    return 0;
}

static int jstr(const cJSON *o, const char *key, char *buf, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v) || !v->valuestring) return -1;
    snprintf(buf, n, "%s", v->valuestring);
    return 0;
}

static int cal_read(const char *path, cal_file *F, char *err, size_t en)
{
    memset(F, 0, sizeof *F);
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, en, "%s: cannot read", path); return -1; }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t r; buf && (r = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
        len += r;
        if (len + 1 == cap) {
            char *nb = cap < ((size_t)1 << 30) ? realloc(buf, cap * 2) : NULL;
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) { snprintf(err, en, "%s: out of memory (or above 1 GiB)", path); return -1; }
    buf[len] = 0;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    int rc = -1;
    const cJSON *cf, *ra;
    if (!j) { snprintf(err, en, "%s: not JSON", path); goto out; }
    if (!cJSON_IsObject(j) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "bench")) ||
        strcmp(cJSON_GetObjectItemCaseSensitive(j, "bench")->valuestring, "serve")) {
        snprintf(err, en, "%s: not a `dhs bench serve --json` output (no \"bench\": \"serve\")", path);
        goto out;
    }
    cf = cJSON_GetObjectItemCaseSensitive(j, "config");
    ra = cJSON_GetObjectItemCaseSensitive(j, "records");
    if (!cJSON_IsObject(cf) || !cJSON_IsArray(ra)) { snprintf(err, en, "%s: bench serve output without config or records", path); goto out; }
    {
        static const char *const keys[] = {"device_budget_bytes", "tokens", "spec", "waves", "topk", "layers",
                                           "payload_sources", "index_producers", "row_bytes"};
        double *dst[] = {&F->budget_bytes, &F->tokens, &F->spec, &F->waves, &F->topk, &F->layers, &F->sources, &F->producers, &F->row_bytes};
        for (int i = 0; i < 9; i++)
            if (jnum(cf, keys[i], dst[i]) || *dst[i] < 0) {
                snprintf(err, en, "%s: config.%s missing or not a number >= 0 (a bench serve output of this version has it)", path, keys[i]);
                goto out;
            }
        if (jstr(cf, "geometry", F->geometry, sizeof F->geometry) || jstr(cf, "backend", F->backend, sizeof F->backend)) {
            snprintf(err, en, "%s: config.geometry or config.backend missing", path);
            goto out;
        }
        if (jstr(cf, "step", F->step, sizeof F->step)) snprintf(F->step, sizeof F->step, "?");
        {
            double sp = 0;
            if (!jnum(cf, "shared_prefix", &sp) && sp > 0) {
                snprintf(err, en, "%s: a --shared-prefix run (%g positions): the simulator does not model shared prefixes", path, sp);
                goto out;
            }
        }
        /* the simulator's flag ranges bound what a file may ask for; the budget up to 2^50 B (1 PiB) */
        if (F->budget_bytes <= 0 || F->budget_bytes > 0x1p50 || F->tokens < 2 || F->tokens > (1 << 24) || F->spec < 1 || F->spec > 256 || F->spec >= F->tokens ||
            F->waves < 1 || F->waves > 1024 || F->topk < 1 || F->topk > 65536 || F->layers < 1 || F->layers > 1024 || F->sources < 1 ||
            F->producers > F->layers || F->row_bytes < 16 || F->row_bytes > (1 << 20)) {
            snprintf(err, en, "%s: config out of range (budget %g B (at most 2^50), tokens %g, spec %g, waves %g, k %g, layers %g, sources %g, "
                     "producers %g, row bytes %g)", path, F->budget_bytes, F->tokens, F->spec, F->waves, F->topk, F->layers,
                     F->sources, F->producers, F->row_bytes);
            goto out;
        }
    }
    F->n_recs = cJSON_GetArraySize(ra);
    if (F->n_recs > 256) { snprintf(err, en, "%s: %d records: at most 256", path, F->n_recs); goto out; }
    F->recs = calloc((size_t)(F->n_recs ? F->n_recs : 1), sizeof *F->recs);
    if (!F->recs) { snprintf(err, en, "out of memory"); goto out; }
    for (int i = 0; i < F->n_recs; i++) {
        const cJSON *o = cJSON_GetArrayItem(ra, i);
        cal_rec *r = &F->recs[i];
        double ctx, conc;
        if (!cJSON_IsObject(o) || jstr(o, "mode", r->mode, sizeof r->mode) || jnum(o, "context", &ctx) || jnum(o, "max_concurrency", &conc) ||
            ctx < 1 || ctx > (double)((int64_t)1 << 30) || conc < 1 || conc > 1024 || conc != floor(conc)) {
            snprintf(err, en, "%s: records[%d]: mode, context (1..2^30) or max_concurrency (1..1024) missing or bad", path, i);
            goto out;
        }
        int md = !strcmp(r->mode, "resident") ? 0 : !strcmp(r->mode, "fixed") ? 1 : !strcmp(r->mode, "adaptive") ? 2 : -1;
        if (md < 0) { snprintf(err, en, "%s: records[%d]: unknown mode '%s'", path, i, r->mode); goto out; }
        r->context = (int64_t)ctx;
        r->conc = (int32_t)conc;
        if (cJSON_GetObjectItemCaseSensitive(o, "skipped")) {
            if (jstr(o, "skipped", r->why, sizeof r->why)) snprintf(r->why, sizeof r->why, "skipped");
            continue;
        }
        double tot, rounds;
        if (jnum(o, "output_throughput", &r->tok_s) || jnum(o, "median_tpot_ms", &r->tpot_p50_ms) || jnum(o, "sessions_held", &r->held) ||
            jnum(o, "step_mean_ms", &r->step_ms) || jnum(o, "mean_batch", &r->batch) || jnum(o, "host_rows_per_token", &r->host_rows_per_token) ||
            jnum(o, "total_output_tokens", &tot) || jnum(o, "decode_rounds", &rounds)) {
            snprintf(err, en, "%s: records[%d] (%s, C %d): a measured figure missing (output_throughput, median_tpot_ms, sessions_held, "
                     "step_mean_ms, mean_batch, host_rows_per_token, total_output_tokens, decode_rounds)", path, i, r->mode, r->conc);
            goto out;
        }
        if (rounds < 1 || r->batch <= 0 || tot <= 0) { snprintf(err, en, "%s: records[%d]: no decode rounds", path, i); goto out; }
        r->ran = 1;
        F->n_ran++;
        dhs_serve_meas *m = &r->m;
        m->mode = (dhs_serve_mode)md;
        m->context = r->context;
        m->concurrency = r->conc;
        m->mean_batch = r->batch;
        m->tokens_per_round = tot / (rounds * r->batch);
        m->step_us = r->step_ms * 1000.0;
        m->host_rows_per_token = r->host_rows_per_token;
        const cJSON *su = cJSON_GetObjectItemCaseSensitive(o, "step_us");
        if (cJSON_IsObject(su)) {
            if (jnum(su, "other", &m->other_us) || jnum(su, "indexer", &m->indexer_us) || jnum(su, "topk", &m->topk_us) ||
                jnum(su, "resolve", &m->resolve_us) || jnum(su, "miss_copy", &m->miss_copy_us) || jnum(su, "attention", &m->attention_us)) {
                snprintf(err, en, "%s: records[%d].step_us lacks a phase (other, indexer, topk, resolve, miss_copy, attention)", path, i);
                goto out;
            }
            m->has_phases = 1;
            F->n_phases++;
        } else if (su && !cJSON_IsNull(su)) {
            snprintf(err, en, "%s: records[%d].step_us is neither null nor an object", path, i);
            goto out;
        }
    }
    if (!F->n_ran) { snprintf(err, en, "%s: no record that ran (every configuration was skipped): nothing to calibrate", path); goto out; }
    rc = 0;
out:
    cJSON_Delete(j);
    return rc;
}

/* the hierarchy's sizes bench serve used for this geometry (dhs_ref_hier_config), and for each
   hierarchy record the sizes its run had (bench_serve_sizes: the same code bench serve sized it with) */
static int cal_geometry(cal_file *F, uint32_t *key_bytes, int32_t *hot, int32_t *tail, int32_t *page, char *err, size_t en)
{
    dhs_ref_geometry g;
    if (dhs_ref_geometry_parse(F->geometry, &g)) { snprintf(err, en, "unknown geometry '%s'", F->geometry); return -1; }
    dhs_ref_run_cfg rc = dhs_ref_run_cfg_default();
    dhs_ref_run_set_geometry(&rc, g);
    rc.model.topk = (int32_t)F->topk;
    rc.tokens = (int32_t)F->tokens;
    rc.spec = (int32_t)F->spec;
    /* bench serve: the device and graph steps resolve on the device (CLOCK policy); the host step on the host */
    rc.step = !strcmp(F->step, "graph") ? DHS_REF_STEP_GRAPH : !strcmp(F->step, "device") ? DHS_REF_STEP_DEVICE : DHS_REF_STEP_HOST;
    rc.resolver = rc.step != DHS_REF_STEP_HOST ? DHS_RESOLVER_DEVICE : DHS_RESOLVER_HOST;
    dhs_ref_model *m = NULL;
    if (dhs_ref_model_create(&rc.model, &m) != DHS_OK) { snprintf(err, en, "cannot create the %s model", F->geometry); return -1; }
    dhs_config c = dhs_ref_hier_config(m, 1, 1 << 20, (int32_t)F->spec, 0.0, 0, rc.page_rows);
    *key_bytes = dhs_ref_key_bytes(m);
    *hot = c.hot_rows;
    *tail = c.tail_rows;
    *page = c.page_rows;
    for (int i = 0; i < F->n_recs; i++) {
        cal_rec *r = &F->recs[i];
        if (!r->ran || r->m.mode == DHS_SERVE_RESIDENT) continue;
        dhs_ref_run_cfg b = rc;
        b.context = r->context;
        char why[200];
        r->sized = !bench_serve_sizes(m, &b, r->conc, &r->z, why, sizeof why);
    }
    dhs_ref_model_destroy(m);
    return 0;
}

typedef struct cal_args {
    const char *path;
    dhs_serve_config c;
    dhs_serve_workload w;
    const arg_spec *sp;
    int n_sp, json, quiet, jobs;
} cal_args;

static int given(const cal_args *A, const char *name)
{
    for (int i = 0; i < A->n_sp; i++)
        if (!strcmp(A->sp[i].name, name)) return A->sp[i].seen && *A->sp[i].seen;
    return 0;
}

static const char *const cal_flags[DHS_CAL_N_] = {"--base-us",     "--token-us",  "--attn-us",   "--attn-layer-us",
                                                  "--idx-us-per-ktok", "--idx-layer-us", "--resolver-us", "--resolver-ns", "--pcie-gbps",
                                                  "--gather-us",   "--draft-us",  "--prefill-us-per-token"};

static double ratio(double sim, double meas) { return meas > 0 ? sim / meas : NAN; }

static void jratio(cJSON *o, const char *key, double v)
{
    if (isfinite(v)) cJSON_AddNumberToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

/* the simulated split of record r's budget: bench serve's (bench_serve_lib_bytes), the library's pool M
   shared by its payload sources less the staging and the reserve, per layer; the index keys get what C
   sessions need. 0: not a hierarchy record, or the split does not fit (the simulator's own split then) */
static int cal_split(const cal_rec *r, double budget_bytes, int64_t tokens, const dhs_serve_cost *cost, uint64_t *pool,
                     uint64_t *idx_cap, uint64_t *lib)
{
    if (r->m.mode == DHS_SERVE_RESIDENT || !r->sized) return 0;
    uint64_t M = bench_serve_lib_bytes(&r->z, r->m.mode == DHS_SERVE_FIXED ? 1 : 2, r->conc, (uint64_t)budget_bytes);
    if (!M || M <= r->z.staging + r->z.reserve || r->z.sources < 1) return 0;
    *lib = M;
    *pool = (M - r->z.staging - r->z.reserve) / (uint64_t)r->z.sources;
    /* the simulator's admission charges each request (prompt + output) x layers x idx_bytes */
    double pos = (double)(r->context + tokens);
    *idx_cap = (uint64_t)r->conc * (uint64_t)(pos * cost->layers * cost->idx_bytes);
    return 1;
}

static int serve_calibrate(const cal_args *A)
{
    static const char *const conflicts[] = {"--concurrency", "--rates", "--requests-trace", "--rate-scales", "--requests", "--context",
                                            "--context-min", "--output-len", "--output-min", "--modes", "--dp-ranks", "--placement",
                                            "--spec", "--spec-schedule", "--prefill", "--csv", "--plot", "--max-context", "--max-output"};
    for (size_t i = 0; i < sizeof conflicts / sizeof conflicts[0]; i++)
        if (given(A, conflicts[i]))
            return args_fail(PROG, "--calibrate simulates the configurations the file measured: %s does not go with it", conflicts[i]);
    char err[900];
    cal_file F;
    if (cal_read(A->path, &F, err, sizeof err)) {
        fprintf(stderr, PROG ": %s\n", err);
        free(F.recs);
        return EXIT_USAGE;
    }
    uint32_t key_bytes;
    int32_t hot, tail, page;
    if (cal_geometry(&F, &key_bytes, &hot, &tail, &page, err, sizeof err)) {
        fprintf(stderr, PROG ": %s: %s\n", A->path, err);
        free(F.recs);
        return EXIT_USAGE;
    }
    dhs_serve_meas meas[256];
    int nm = 0;
    for (int i = 0; i < F.n_recs; i++)
        if (F.recs[i].ran) meas[nm++] = F.recs[i].m;
    dhs_serve_cal_geom g = {(int32_t)F.layers, (int32_t)F.producers, (int32_t)F.sources, (int32_t)F.spec, (int32_t)F.topk,
                            (uint32_t)F.row_bytes, (int64_t)F.tokens};
    dhs_serve_calib cal;
    dhs_serve_cost start = A->c.cost;
    if (dhs_serve_calibrate(meas, nm, &g, &start, &cal, err, sizeof err)) {
        fprintf(stderr, PROG ": %s: %s\n", A->path, err);
        free(F.recs);
        return EXIT_USAGE;
    }
    /* index keys: key bytes per position of each producer; the simulator counts idx_bytes for every layer */
    dhs_serve_cost cost = cal.cost;
    cost.idx_bytes = (uint32_t)lround((double)key_bytes * F.producers / F.layers);
    char idx_from[240], layers_from[240], row_from[160], acc_from[240];
    snprintf(idx_from, sizeof idx_from, "measured: %u-byte keys of the %s geometry x %g producers / %g layers (per layer, as the simulator counts)",
             key_bytes, F.geometry, F.producers, F.layers);
    snprintf(layers_from, sizeof layers_from, "measured: config.layers (%g payload sources, %g index producers)", F.sources, F.producers);
    snprintf(row_from, sizeof row_from, "measured: config.row_bytes");
    snprintf(acc_from, sizeof acc_from, "%s", cal.accept_from);
    double accept_p = cal.accept_p;
    /* explicit flags win */
    for (int i = 0; i < DHS_CAL_N_; i++)
        if (given(A, cal_flags[i])) {
            dhs_serve_cost tmp = A->c.cost;
            *dhs_serve_cal_field(&cost, (dhs_serve_cal_const)i) = *dhs_serve_cal_field(&tmp, (dhs_serve_cal_const)i);
            snprintf(cal.from[i], sizeof cal.from[i], "flag: %s (overrides the calibration)", cal_flags[i]);
        }
    if (given(A, "--layers")) cost.layers = A->c.cost.layers, snprintf(layers_from, sizeof layers_from, "flag: --layers (overrides the file)");
    if (given(A, "--row-bytes")) cost.row_bytes = A->c.cost.row_bytes, snprintf(row_from, sizeof row_from, "flag: --row-bytes (overrides the file)");
    if (given(A, "--idx-bytes")) cost.idx_bytes = A->c.cost.idx_bytes, snprintf(idx_from, sizeof idx_from, "flag: --idx-bytes (overrides the geometry)");
    if (given(A, "--accept-p")) accept_p = A->c.accept_p, snprintf(acc_from, sizeof acc_from, "flag: --accept-p (overrides the calibration)");
    double kv_gib = given(A, "--kv-gib") ? A->c.kv_gib : F.budget_bytes / 1073741824.0;
    int32_t k = given(A, "--k") ? A->c.k : (int32_t)F.topk;
    if (given(A, "--page-rows")) page = A->c.page_rows;
    if (given(A, "--hot")) hot = A->c.hot_rows;
    if (hot < page || hot % page) {
        fprintf(stderr, PROG ": --hot (%d) must be a positive multiple of the page rows (%d)\n", hot, page);
        free(F.recs);
        return EXIT_USAGE;
    }

    /* one simulation per configuration that ran */
    run_rec *runs = calloc((size_t)F.n_ran, sizeof *runs);
    int *rec_of = calloc((size_t)F.n_ran, sizeof *rec_of), *split_ok = calloc((size_t)F.n_ran, sizeof *split_ok);
    uint64_t *lib_bytes = calloc((size_t)F.n_ran, sizeof *lib_bytes);
    if (!runs || !rec_of || !split_ok || !lib_bytes) {
        free(runs);
        free(rec_of);
        free(split_ok);
        free(lib_bytes);
        free(F.recs);
        fprintf(stderr, PROG ": out of memory\n");
        return EXIT_RUNTIME;
    }
    int n_runs = 0;
    for (int i = 0; i < F.n_recs; i++) {
        const cal_rec *r = &F.recs[i];
        if (!r->ran) continue;
        run_rec *x = &runs[n_runs];
        rec_of[n_runs++] = i;
        x->mode = r->m.mode;
        x->spec = F.spec > 1;
        x->load = r->conc;
        x->c = A->c;
        x->c.mode = x->mode;
        x->c.spec = x->spec;
        x->c.dp_ranks = 1;
        x->c.n_sched = 1; /* bench serve's width at every batch */
        x->c.sched_k[0] = (int32_t)F.spec;
        x->c.sched_batch[0] = INT32_MAX;
        x->c.accept_p = accept_p;
        x->c.k = k;
        x->c.hot_rows = hot;
        x->c.page_rows = page;
        x->c.tail_rows = tail;
        x->c.max_batch = given(A, "--max-batch") ? A->c.max_batch : r->conc;
        x->c.kv_gib = kv_gib;
        x->c.max_context = r->context;
        x->c.max_output = (int64_t)F.tokens;
        x->c.prefill_remote = 1;
        x->c.cost = cost;
        x->c.loc = dhs_serve_locality_for_k(k);
        if (r->sized) x->c.policy = r->z.lib.policy;
        split_ok[n_runs - 1] = cal_split(r, kv_gib * 1073741824.0, (int64_t)F.tokens, &cost, &x->c.layer_pool_bytes,
                                         &x->c.idx_cap_bytes, &lib_bytes[n_runs - 1]);
        x->w = A->w;
        x->w.arrival = DHS_ARRIVAL_CLOSED;
        x->w.concurrency = r->conc;
        x->w.n_requests = r->conc * (int32_t)F.waves;
        x->w.context = x->w.context_min = r->context;
        x->w.output_len = x->w.output_min = (int64_t)F.tokens;
        x->w.trace_path = NULL;
        snprintf(x->tag, sizeof x->tag, "%s context=%" PRId64 " C=%d", r->mode, r->context, r->conc);
        x->c.progress = A->quiet ? NULL : run_progress;
        x->c.progress_user = x;
    }
    tool_progress prog;
    tool_progress_init(&prog, A->quiet, 5.0);
    run_pool(runs, n_runs, A->jobs, 1, &prog);

    /* simulated figures in bench serve's terms: decode tokens per second of decode time (the first
       token ends the prefill), host rows per decode token over all layers */
    double sim_tok[256], sim_rows[256];
    for (int i = 0; i < n_runs; i++) {
        const dhs_serve_result *s = &runs[i].r;
        double dec = (double)(s->total_output_tokens - s->completed), t = (double)s->steps * s->mean_step_ms * 1e-3;
        sim_tok[i] = t > 0 ? dec / t : 0;
        sim_rows[i] = dec > 0 ? (double)s->host_rows * cost.layers / dec : 0;
    }
    int failed = 0;
    for (int i = 0; i < n_runs; i++) failed += runs[i].rc != 0;
    const char *names[DHS_CAL_N_ + 3] = {"layers", "row_bytes", "idx_bytes"};
    for (int i = 0; i < DHS_CAL_N_; i++) names[3 + i] = dhs_serve_cal_name((dhs_serve_cal_const)i);
    if (A->json) {
        cJSON *j = cJSON_CreateObject();
        tool_prov_cjson(j, "none");
        cJSON_AddStringToObject(j, "calibrate", A->path);
        cJSON *src = cJSON_AddObjectToObject(j, "measured_on");
        cJSON_AddStringToObject(src, "backend", F.backend);
        cJSON_AddStringToObject(src, "geometry", F.geometry);
        cJSON_AddStringToObject(src, "step", F.step);
        cJSON_AddNumberToObject(src, "device_budget_bytes", F.budget_bytes);
        cJSON_AddNumberToObject(src, "tokens", F.tokens);
        cJSON_AddNumberToObject(src, "spec", F.spec);
        cJSON_AddNumberToObject(src, "waves", F.waves);
        cJSON_AddNumberToObject(src, "records_ran", F.n_ran);
        cJSON_AddNumberToObject(src, "records_with_step_breakdown", F.n_phases);
        cJSON *cfg = cJSON_AddObjectToObject(j, "config");
        cJSON_AddNumberToObject(cfg, "kv_gib", kv_gib);
        cJSON_AddNumberToObject(cfg, "k", k);
        cJSON_AddNumberToObject(cfg, "hot", hot);
        cJSON_AddNumberToObject(cfg, "page_rows", page);
        cJSON_AddNumberToObject(cfg, "tail_rows", tail);
        args_json_set_u64(cfg, "seed", A->w.seed);
        cJSON *cb = cJSON_AddObjectToObject(j, "calibration");
        for (int i = 0; i < DHS_CAL_N_ + 3; i++) {
            cJSON *e = cJSON_AddObjectToObject(cb, names[i]);
            double v = i == 0 ? cost.layers : i == 1 ? cost.row_bytes : i == 2 ? cost.idx_bytes : *dhs_serve_cal_field(&cost, (dhs_serve_cal_const)(i - 3));
            cJSON_AddNumberToObject(e, "value", v);
            cJSON_AddStringToObject(e, "from", i == 0 ? layers_from : i == 1 ? row_from : i == 2 ? idx_from : cal.from[i - 3]);
        }
        cJSON *ap = cJSON_AddObjectToObject(cb, "accept_p");
        cJSON_AddNumberToObject(ap, "value", accept_p);
        cJSON_AddStringToObject(ap, "from", acc_from);
        cJSON *fit = cJSON_AddObjectToObject(j, "fit");
        cJSON_AddStringToObject(fit, "over", cal.fit_resident ? "resident" : "hierarchy");
        cJSON_AddNumberToObject(fit, "points", cal.fit_points);
        cJSON_AddNumberToObject(fit, "base_us", cal.cost.base_us);
        cJSON_AddNumberToObject(fit, "token_us", cal.cost.token_us);
        cJSON_AddNumberToObject(fit, "rms_residual_us", cal.fit_rms_us);
        cJSON_AddNumberToObject(fit, "max_residual_us", cal.fit_max_us);
        cJSON *cmp = cJSON_AddArrayToObject(j, "comparison");
        for (int i = 0; i < n_runs; i++) {
            const cal_rec *r = &F.recs[rec_of[i]];
            const dhs_serve_result *s = &runs[i].r;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "mode", r->mode);
            cJSON_AddNumberToObject(o, "context", (double)r->context);
            cJSON_AddNumberToObject(o, "concurrency", r->conc);
            cJSON *me = cJSON_AddObjectToObject(o, "measured");
            cJSON_AddNumberToObject(me, "output_throughput", r->tok_s);
            cJSON_AddNumberToObject(me, "median_tpot_ms", r->tpot_p50_ms);
            cJSON_AddNumberToObject(me, "sessions_held", r->held);
            cJSON_AddNumberToObject(me, "step_mean_ms", r->step_ms);
            cJSON_AddNumberToObject(me, "mean_batch", r->batch);
            cJSON_AddNumberToObject(me, "host_rows_per_token", r->host_rows_per_token);
            if (r->m.mode != DHS_SERVE_RESIDENT) {
                cJSON *sp = cJSON_AddObjectToObject(o, "device_split");
                cJSON_AddBoolToObject(sp, "as_measured", split_ok[i]);
                if (split_ok[i]) {
                    cJSON_AddNumberToObject(sp, "library_bytes", (double)lib_bytes[i]);
                    cJSON_AddNumberToObject(sp, "layer_pool_bytes", (double)runs[i].c.layer_pool_bytes);
                    cJSON_AddNumberToObject(sp, "layer_pool_rows", (double)(runs[i].c.layer_pool_bytes / cost.row_bytes));
                    cJSON_AddNumberToObject(sp, "index_key_bytes", (double)runs[i].c.idx_cap_bytes);
                    cJSON_AddNumberToObject(sp, "prompt_partial_page_rows", (double)(r->context % page));
                }
                cJSON_AddStringToObject(sp, "policy", dhs_policy_str(runs[i].c.policy));
            }
            if (runs[i].rc) {
                cJSON_AddNullToObject(o, "simulated");
                cJSON_AddStringToObject(o, "error", runs[i].err);
            } else {
                cJSON *si = cJSON_AddObjectToObject(o, "simulated");
                cJSON_AddNumberToObject(si, "output_throughput", sim_tok[i]);
                cJSON_AddNumberToObject(si, "median_tpot_ms", s->median_tpot_ms);
                cJSON_AddNumberToObject(si, "sessions_held", s->max_running);
                cJSON_AddNumberToObject(si, "step_mean_ms", s->mean_step_ms);
                cJSON_AddNumberToObject(si, "mean_batch", s->mean_batch);
                cJSON_AddNumberToObject(si, "host_rows_per_token", sim_rows[i]);
                cJSON_AddNumberToObject(si, "completed", (double)s->completed);
                cJSON *ra = cJSON_AddObjectToObject(o, "ratio");
                jratio(ra, "output_throughput", ratio(sim_tok[i], r->tok_s));
                jratio(ra, "median_tpot_ms", ratio(s->median_tpot_ms, r->tpot_p50_ms));
                jratio(ra, "sessions_held", ratio(s->max_running, r->held));
                jratio(ra, "step_mean_ms", ratio(s->mean_step_ms, r->step_ms));
            }
            cJSON_AddItemToArray(cmp, o);
        }
        cJSON *sk = cJSON_AddArrayToObject(j, "skipped");
        for (int i = 0; i < F.n_recs; i++) {
            const cal_rec *r = &F.recs[i];
            if (r->ran) continue;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "mode", r->mode);
            cJSON_AddNumberToObject(o, "context", (double)r->context);
            cJSON_AddNumberToObject(o, "concurrency", r->conc);
            cJSON_AddStringToObject(o, "skipped", r->why);
            cJSON_AddItemToArray(sk, o);
        }
        char *txt = cJSON_Print(j);
        if (txt) puts(txt);
        free(txt);
        cJSON_Delete(j);
    } else {
        printf("serve-sim --calibrate %s: bench serve on %s (geometry %s, %s step), device budget %.4g GiB, k %d, %d layers, "
               "spec %g, %g tokens per session, waves %g (sessions per slot); %d configurations ran, %d with a per-step breakdown\n"
               "simulated with: %.4g GiB KV, k %d, hot cache %d rows, tail %d, pages of %d rows, seed %" PRIu64 "\n\n",
               A->path, F.backend, F.geometry, F.step, F.budget_bytes / 1073741824.0, (int)F.topk, (int)F.layers, F.spec, F.tokens,
               F.waves, F.n_ran, F.n_phases, kv_gib, k, hot, tail, page, A->w.seed);
        printf("calibrated cost model:\n");
        for (int i = 0; i < DHS_CAL_N_ + 3; i++) {
            double v = i == 0 ? cost.layers : i == 1 ? cost.row_bytes : i == 2 ? cost.idx_bytes : *dhs_serve_cal_field(&cost, (dhs_serve_cal_const)(i - 3));
            printf("  %-22s %12.5g  %s\n", names[i], v, i == 0 ? layers_from : i == 1 ? row_from : i == 2 ? idx_from : cal.from[i - 3]);
        }
        printf("  %-22s %12.5g  %s\n", "accept_p", accept_p, acc_from);
        printf("base_us/token_us fit over %d %s records: residual rms %.4g us, largest %.4g us\n\n", cal.fit_points,
               cal.fit_resident ? "resident" : "hierarchy", cal.fit_rms_us, cal.fit_max_us);
        printf("device split per hierarchy record (as bench serve sized the run: the library's pool M less staging and reserve, "
               "shared by %d payload sources -> one simulated layer; index keys: what C sessions need):\n", (int)F.sources);
        for (int i = 0; i < n_runs; i++) {
            const cal_rec *r = &F.recs[rec_of[i]];
            if (r->m.mode == DHS_SERVE_RESIDENT) continue;
            const dhs_serve_config *xc = &runs[i].c;
            if (!split_ok[i]) {
                printf("  %-9s C=%-4d not as measured (bench serve's sizes do not fit %.4g GiB): the simulator's own split of "
                       "--kv-gib, policy %s\n", r->mode, r->conc, kv_gib, dhs_policy_str(xc->policy));
                continue;
            }
            double rows = (double)(xc->layer_pool_bytes / cost.row_bytes), need = (double)r->conc * (hot + tail);
            printf("  %-9s C=%-4d M %.3f GiB -> %.1f MiB per layer = %.0f rows: hot caches and tails %.0f, room for history "
                   "%.0f rows (%.2f of the %d prompts); index keys %.3f GiB; policy %s\n",
                   r->mode, r->conc, (double)lib_bytes[i] / 1073741824.0, (double)xc->layer_pool_bytes / 1048576.0, rows, need,
                   rows > need ? rows - need : 0, rows > need ? (rows - need) / ((double)r->conc * (double)r->context) : 0, r->conc,
                   (double)xc->idx_cap_bytes / 1073741824.0, dhs_policy_str(xc->policy));
        }
        printf("\n");
        printf("simulated vs measured (ratio = simulated / measured; tok/s: decode tokens per second of decode time):\n");
        printf("%-9s %7s %4s | %9s %9s %6s | %8s %8s %6s | %4s %4s %6s | %8s %8s %6s | %8s %8s\n", "mode", "context", "C", "tok/s", "sim",
               "ratio", "TPOT p50", "sim", "ratio", "held", "sim", "ratio", "step ms", "sim", "ratio", "host/tok", "sim");
        for (int i = 0; i < n_runs; i++) {
            const cal_rec *r = &F.recs[rec_of[i]];
            const dhs_serve_result *s = &runs[i].r;
            if (runs[i].rc) {
                printf("%-9s %7" PRId64 " %4d | simulation failed: %s\n", r->mode, r->context, r->conc, runs[i].err);
                continue;
            }
            printf("%-9s %7" PRId64 " %4d | %9.1f %9.1f %6.3f | %8.3f %8.3f %6.3f | %4.0f %4d %6.3f | %8.3f %8.3f %6.3f | %8.1f %8.1f\n",
                   r->mode, r->context, r->conc, r->tok_s, sim_tok[i], ratio(sim_tok[i], r->tok_s), r->tpot_p50_ms, s->median_tpot_ms,
                   ratio(s->median_tpot_ms, r->tpot_p50_ms), r->held, s->max_running, ratio(s->max_running, r->held), r->step_ms,
                   s->mean_step_ms, ratio(s->mean_step_ms, r->step_ms), r->host_rows_per_token, sim_rows[i]);
        }
        for (int i = 0; i < F.n_recs; i++)
            if (!F.recs[i].ran)
                printf("%-9s %7" PRId64 " %4d | not measured: %s\n", F.recs[i].mode, F.recs[i].context, F.recs[i].conc, F.recs[i].why);
        {
            int floor_note = 0;
            for (int i = 0; i < n_runs; i++) {
                const cal_rec *r = &F.recs[rec_of[i]];
                const dhs_serve_config *xc = &runs[i].c;
                if (r->m.mode != DHS_SERVE_ADAPTIVE || !split_ok[i] || runs[i].rc) continue;
                double rows = (double)(xc->layer_pool_bytes / cost.row_bytes), need = (double)r->conc * (hot + tail);
                if (rows - need < (double)r->conc * (double)r->context) continue; /* history does not all fit */
                if (!floor_note)
                    printf("\nhost rows where every prompt fits on the device (docs/SIM.md, Calibration): the library keeps the "
                           "last partial page of each prompt (context mod %d rows) in the tail ring, so the simulator reads none "
                           "of the prompt from the host; files measured before that change (H200 runs up to 2026-12-02 run 32) "
                           "read those rows from the host once selected, at most:\n", page);
                floor_note = 1;
                printf("  %-9s C=%-4d %" PRId64 " rows per prompt and layer -> at most %.1f host rows per token from them "
                       "(simulated %.1f, measured %.1f)\n", r->mode, r->conc, r->context % page,
                       (double)(r->context % page) * cost.layers / (F.tokens - 1), sim_rows[i], r->host_rows_per_token);
            }
        }
        if (!F.n_phases)
            printf("\nno per-step breakdown in the file (a CPU run): the attention and indexer are folded into token_us and the "
                   "hierarchy's constants are defaults; the figures that count come from a GPU file (docs/SIM.md, Calibration)\n");
    }
    for (int i = 0; i < n_runs; i++)
        if (runs[i].rc) fprintf(stderr, PROG ": %s: %s\n", runs[i].tag, runs[i].err);
    free(runs);
    free(rec_of);
    free(split_ok);
    free(lib_bytes);
    free(F.recs);
    return failed ? EXIT_RUNTIME : 0;
}

/* A run that stopped on dhs_serve_run's sizing messages was given a configuration
   that cannot hold its requests (--kv-gib, --max-batch, the lengths): a usage error */
static int run_err_is_config(const char *e)
{
    return strstr(e, "never fit") || strstr(e, "raise --kv-gib") || strstr(e, "below the staging reservation");
}

static const char *const specs_on[] = {"both", "on", "off", "auto", "compare", NULL};
static const char *const prefills[] = {"remote", "local", NULL};

int cmd_serve_sim(int argc, char **argv)
{
    dhs_serve_config c = dhs_serve_config_default();
    dhs_serve_workload w;
    memset(&w, 0, sizeof w);
    w.arrival = DHS_ARRIVAL_CLOSED;
    w.n_requests = 48;
    w.context = 32768;
    w.output_len = 128;
    w.seed = 1;
    double conc[MAX_POINTS] = {1, 8, 24, 48}, rates[MAX_POINTS], scales[MAX_POINTS] = {1};
    double widths[8] = {2, 4};
    int n_widths = 2;
    int n_conc = 4, n_rates = 0, n_scales = 1, seen_conc = 0, seen_rates = 0, seen_scales = 0;
    int json = 0, quiet = 0, spec = 0, prefill = c.prefill_remote ? 0 : 1, jobs = 0;
    int64_t row_bytes = c.cost.row_bytes, idx_bytes = c.cost.idx_bytes;
    const char *calib = NULL, *locality = NULL;
    int loc_layer = 30;
    const char *rtrace = NULL, *csv = NULL, *plot = NULL, *mode_list = NULL, *sched = NULL, *output = NULL, *place_list = NULL;
    arg_spec sp[] = {
        {.name = "--concurrency", .type = ARG_F64_LIST, .dest = conc, .dlo = 1, .dhi = 1 << 20, .count = &n_conc,
         .max = MAX_POINTS, .seen = &seen_conc, .help = "load: closed loop, requests in flight (integers)"},
        {.name = "--rates", .type = ARG_F64_LIST, .dest = rates, .dlo = 1e-9, .dhi = 1e9, .count = &n_rates,
         .max = MAX_POINTS, .seen = &seen_rates, .help = "load: Poisson arrivals, requests/s (e.g. 0.5,1,2,4)", .def = "none"},
        A_IN("--requests-trace", &rtrace, "load: Mooncake JSONL or BurstGPT CSV arrivals and lengths"),
        {.name = "--rate-scales", .type = ARG_F64_LIST, .dest = scales, .dlo = 1e-9, .dhi = 1e9, .count = &n_scales,
         .max = MAX_POINTS, .seen = &seen_scales, .help = "with a trace: arrival-rate multipliers"},
        A_IN("--calibrate", &calib,
             "a `dhs bench serve --json` output: derive the cost model from its measurements (docs/SIM.md, Calibration), "
             "simulate each configuration it measured (mode, context, concurrency, budget, tokens, k, layers, spec; the hierarchy "
             "under the device split and policy bench serve gave the run) and print "
             "simulated beside measured; cost-model flags (--base-us ... --prefill-us-per-token, --layers, --row-bytes, "
             "--idx-bytes, --accept-p) and --kv-gib, --k, --hot, --page-rows, --max-batch given with it override the "
             "calibrated or measured values; the load and workload flags do not go with it"),
        A_INT("--requests", &w.n_requests, 0, 1 << 24, "requests per point (trace: the first N, 0 = all)"),
        A_I64("--context", &w.context, 1, (int64_t)1 << 30, "longest prompt, positions"),
        {.name = "--context-min", .type = ARG_I64, .dest = &w.context_min, .ilo = 1, .ihi = (int64_t)1 << 30,
         .help = "shortest prompt", .def = "context/2"},
        A_I64("--output-len", &w.output_len, 1, 1 << 24, "longest output, tokens"),
        {.name = "--output-min", .type = ARG_I64, .dest = &w.output_min, .ilo = 1, .ihi = 1 << 24,
         .help = "shortest output", .def = "output-len/2"},
        A_U64("--seed", &w.seed, "workload seed"),
        {.name = "--prefill", .type = ARG_ENUM, .dest = &prefill, .choices = prefills,
         .help = "prefill on a separate instance while the slot is held (remote, disaggregated) or on this rank, "
                 "stalling decode"},
        {.name = "--modes", .type = ARG_STR, .dest = &mode_list, .meta = "LIST", .help = "comma list of resident,fixed,adaptive",
         .def = "resident,fixed,adaptive"},
        A_INT("--dp-ranks", &c.dp_ranks, 1, DHS_SERVE_MAX_RANKS,
              "data-parallel ranks stepping together (each its own --kv-gib and --max-batch; a step waits for the slowest)"),
        {.name = "--placement", .type = ARG_STR, .dest = &place_list, .meta = "LIST",
         .help = "with --dp-ranks > 1: comma list of round-robin,least-sessions,miss-aware (one run per placement, same arrivals)",
         .def = "all three"},
        {.name = "--spec", .type = ARG_ENUM, .dest = &spec, .choices = specs_on,
         .help = "speculative decoding: both (off and the schedule), on, off, auto (K per request and step chosen "
                 "online by dhs_spec_auto from each request's acceptance and the step's costs, at most the schedule's "
                 "widest K), compare (off, each fixed K of --spec-widths, and auto, side by side)"},
        {.name = "--spec-widths", .type = ARG_F64_LIST, .dest = widths, .dlo = 2, .dhi = 64, .count = &n_widths, .max = 8,
         .help = "with --spec compare: the fixed widths K", .def = "2,4"},
        A_DBL("--accept-spread", &c.accept_spread, 0, 1,
              "each request's acceptance is --accept-p + U(-spread, spread), clamped to [0, 1]"),
        {.name = "--spec-schedule", .type = ARG_STR, .dest = &sched, .meta = "S", .help = "block width by batch: K@max_batch,...,K",
         .def = "8@32,6@64,5@127,4"},
        A_DBL("--accept-p", &c.accept_p, 0, 1, "acceptance per proposal, geometric"),
        A_INT("--k", &c.k, 1, 65536, "selection length"),
        A_INT("--hot", &c.hot_rows, 1, 1 << 24, "hot-cache rows per request (a multiple of --page-rows)"),
        A_INT("--page-rows", &c.page_rows, 1, 65536, "rows per page"),
        A_INT("--max-batch", &c.max_batch, 1, 1024, "request slots"),
        A_DBL("--kv-gib", &c.kv_gib, 1e-6, 1e6, "device memory for KV, index keys and staging per rank"),
        {.name = "--idx-share", .type = ARG_DOUBLE, .dest = &c.idx_share, .dlo = 0, .dhi = 0.999,
         .help = "share of it for index keys (0 = auto)"},
        A_INT("--stage-layers", &c.stage_layers, 0, 1024, "live layer groups with staging reserved"),
        A_I64("--max-context", &c.max_context, 1, (int64_t)1 << 30, "clamp for trace prompts"),
        A_I64("--max-output", &c.max_output, 1, 1 << 24, "clamp for trace outputs"),
        A_INT("--layers", &c.cost.layers, 1, 1024, "cost model: attention layers"),
        A_I64("--row-bytes", &row_bytes, 16, 1 << 20, "cost model: payload row bytes"),
        A_I64("--idx-bytes", &idx_bytes, 0, 1 << 20, "cost model: index key bytes per position and layer"),
        A_DBL("--base-us", &c.cost.base_us, 0, 1e9, "cost model: per decode step, us"),
        A_DBL("--token-us", &c.cost.token_us, 0, 1e9, "cost model: per query token, us"),
        A_DBL("--attn-us", &c.cost.attn_us, 0, 1e9, "cost model: attention per query and layer, us"),
        A_DBL("--attn-layer-us", &c.cost.attn_layer_us, 0, 1e9,
              "cost model: attention per layer and step, independent of the batch (latency-bound kernels), us"),
        A_DBL("--idx-us-per-ktok", &c.cost.idx_us_per_ktok, 0, 1e9, "cost model: indexer per query, layer and 1000 positions, us"),
        A_DBL("--idx-layer-us", &c.cost.idx_layer_us, 0, 1e9,
              "cost model: indexer and top-k per layer and step, independent of the batch (latency-bound kernels), us"),
        A_DBL("--pcie-gbps", &c.cost.pcie_gbps, 1e-3, 1e6, "cost model: zero-copy gather bandwidth, GB/s"),
        A_DBL("--gather-us", &c.cost.gather_us, 0, 1e9, "cost model: gather latency per layer with a miss, us"),
        A_DBL("--resolver-us", &c.cost.resolver_us, 0, 1e9, "cost model: resolver per layer and step, us"),
        A_DBL("--resolver-ns", &c.cost.resolver_ns_per_entry, 0, 1e9, "cost model: per resolved entry, ns"),
        A_DBL("--draft-us", &c.cost.draft_us, 0, 1e9, "cost model: per drafted position and step, us"),
        A_DBL("--prefill-us-per-token", &c.cost.prefill_us_per_token, 0, 1e9, "cost model: per prompt position, us"),
        {.name = "--locality", .type = ARG_STR, .dest = &locality, .meta = "PRESET|FILE.json",
         .help = "selection locality: synthetic, random (alpha = k/N), dsv32-swe, or a JSON model (docs/LOCALITY.md)",
         .def = "synthetic"},
        A_INT("--locality-layer", &loc_layer, 0, 127, "the model's layer the simulated pool follows (one layer's pool)"),
        A_BOOL("--json", &json, "JSON on stdout instead of the table (with version, commit, date, host, device)"),
        A_OUT("--csv", &csv, "one CSV row per run"),
        A_OUT("--plot", &plot, "SVG: median TPOT against output throughput, one line per mode"),
        A_OUT("--output", &output, "write the results to FILE instead of stdout"),
        {.name = "--jobs", .type = ARG_INT, .dest = &jobs, .ilo = 1, .ihi = 64, .help = "runs simulated in parallel",
         .def = "online CPUs, at most 8"},
        {.name = "--quiet", .alias = 'q', .type = ARG_BOOL, .dest = &quiet, .help = "no progress on stderr"},
    };
    arg_cmd cmd = {
        .prog = PROG,
        .about = "Discrete-event serving simulator: continuous batching on one GPU rank; admission,\n"
                 "reclaim, refill and the resolver census come from the real core (payload-free).\n"
                 "Sweeps one load axis (--concurrency, --rates, or --requests-trace with --rate-scales)\n"
                 "for each mode, with and without speculation; prints vLLM-style metrics,\n"
                 "latency-throughput curves and the equal-batch step-time overhead of the hierarchy\n"
                 "against resident serving. Model and constants: docs/SIM.md.",
        .specs = sp,
        .n_specs = (int)(sizeof sp / sizeof sp[0]),
    };
    /* which flags were given (--calibrate: explicit flags override the calibration) */
    int seen_any[sizeof sp / sizeof sp[0]];
    memset(seen_any, 0, sizeof seen_any);
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++)
        if (!sp[i].seen) sp[i].seen = &seen_any[i];
    int pr = args_parse(&cmd, argc, argv, NULL, NULL);
    if (pr) return args_exit(pr);
    c.cost.row_bytes = (uint32_t)row_bytes;
    c.cost.idx_bytes = (uint32_t)idx_bytes;
    c.prefill_remote = prefill == 0;
    if (locality && calib) return args_fail(PROG, "--locality is not for --calibrate (the bench runs the synthetic model)");
    if (locality) {
        char lerr[512];
        dhs_locality_model lm;
        if (dhs_locality_model_load(locality, &lm, lerr, sizeof lerr)) {
            fprintf(stderr, "%s: --locality %s\n", PROG, lerr);
            return EXIT_USAGE;
        }
        if (lm.n_layers > 0) { /* one layer of the model: the simulated pool is one layer's */
            int32_t l = loc_layer < lm.n_layers ? loc_layer : lm.n_layers - 1;
            lm.alpha[0] = lm.alpha[l];
            lm.alpha_exp[0] = lm.alpha_exp[l];
            lm.n_layers = 1;
        }
        c.lm = lm;
    }
    if (calib) {
        if (!jobs) {
            long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
            jobs = ncpu < 1 ? 1 : ncpu > 8 ? 8 : (int)ncpu;
        }
        if (tool_output(PROG, output)) return EXIT_USAGE;
        cal_args A = {calib, c, w, sp, (int)(sizeof sp / sizeof sp[0]), json, quiet, jobs};
        return serve_calibrate(&A);
    }
    /* the speculation variants: (spec, width) */
    int var_spec[2 + 8 + 1], var_width[2 + 8 + 1], n_var = 0;
    if (spec != 1 && spec != 3) var_spec[n_var] = 0, var_width[n_var++] = 0;         /* off */
    if (spec == 0 || spec == 1) var_spec[n_var] = 1, var_width[n_var++] = 0;         /* the schedule */
    for (int i = 0; i < n_widths; i++)
        if (widths[i] != floor(widths[i])) return bad("--spec-widths wants integers", NULL);
    for (int i = 0; spec == 4 && i < n_widths; i++) var_spec[n_var] = 1, var_width[n_var++] = (int)widths[i];
    if (spec >= 3) var_spec[n_var] = 1, var_width[n_var++] = -1;                      /* auto */
    int modes[DHS_SERVE_MODES_] = {1, 1, 1};
    if (mode_list) {
        modes[0] = modes[1] = modes[2] = 0;
        char buf[128];
        snprintf(buf, sizeof buf, "%s", mode_list);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int m = !strcmp(t, "resident") ? 0 : !strcmp(t, "fixed") ? 1 : !strcmp(t, "adaptive") ? 2 : -1;
            if (m < 0) return bad("unknown mode (resident, fixed, adaptive)", t);
            modes[m] = 1;
        }
    }
    int places[DHS_PLACE_N_] = {1, c.dp_ranks > 1, c.dp_ranks > 1};
    if (place_list) {
        if (c.dp_ranks == 1) return bad("--placement needs --dp-ranks 2..64", NULL);
        memset(places, 0, sizeof places);
        char buf[128];
        snprintf(buf, sizeof buf, "%s", place_list);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int p = -1;
            for (int i = 0; i < DHS_PLACE_N_; i++)
                if (!strcmp(t, dhs_serve_placement_str((dhs_serve_placement)i))) p = i;
            if (p < 0) return bad("--placement: unknown placement (one of round-robin, least-sessions, miss-aware)", t);
            places[p] = 1;
        }
    }
    if (sched && (!args_list_ok(sched) || dhs_serve_parse_schedule(sched, &c))) return bad("--spec-schedule wants K@batch,...,K", sched);
    if (seen_conc + seen_rates + (rtrace != NULL) > 1)
        return bad("choose one load axis: --concurrency, --rates or --requests-trace", NULL);
    for (int i = 0; seen_conc && i < n_conc; i++)
        if (conc[i] != floor(conc[i])) return bad("--concurrency wants integers", NULL);
    if (seen_scales && !rtrace) return bad("--rate-scales needs --requests-trace", NULL);
    double *loads = conc;
    int n_loads = n_conc;
    if (seen_rates) {
        w.arrival = DHS_ARRIVAL_POISSON;
        loads = rates;
        n_loads = n_rates;
    } else if (rtrace) {
        loads = scales;
        n_loads = n_scales;
    }
    if (c.hot_rows % c.page_rows) return bad("--hot must be a multiple of --page-rows", NULL);
    if (w.context_min > w.context) return bad("--context-min above --context", NULL);
    if (w.output_min > w.output_len) return bad("--output-min above --output-len", NULL);
    if (!modes[0] && !modes[1] && !modes[2]) return bad("--modes is empty", NULL);
    if (!rtrace && w.n_requests == 0) return bad("--requests 0 (all) is for --requests-trace; the synthetic load wants 1 or more", NULL);
    if (!rtrace && modes[0]) {
        /* resident: the longest request's KV and index keys must fit one rank's --kv-gib (dhs_serve_run's admission) */
        double pos = (double)(w.context < c.max_context ? w.context : c.max_context) +
                     (double)(w.output_len < c.max_output ? w.output_len : c.max_output);
        double need = pos * c.cost.layers * (double)(c.cost.row_bytes + c.cost.idx_bytes);
        if (need > c.kv_gib * 1073741824.0)
            return args_fail(PROG, "--kv-gib %g: the longest request (%.0f positions, --context + --output-len) needs %.4g GiB "
                             "resident (%d layers x %u bytes per position)", c.kv_gib, pos, need / 1073741824.0, c.cost.layers,
                             c.cost.row_bytes + c.cost.idx_bytes);
    }
    if (!jobs) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = ncpu < 1 ? 1 : ncpu > 8 ? 8 : (int)ncpu;
    }
    int32_t n_trace = 0;
    if (rtrace) {
        /* one pass over the whole trace before any run: every line checked, the
           requests counted; the runs then stream it */
        char err[512];
        if (dhs_serve_trace_count(rtrace, &n_trace, err, sizeof err)) {
            fprintf(stderr, "dhs serve-sim: %s\n", err);
            return EXIT_USAGE;
        }
        w.trace_path = rtrace;
        w.arrival = DHS_ARRIVAL_TRACE;
    }
    if (tool_output(PROG, output)) return EXIT_USAGE;
    const char *load_key = w.arrival == DHS_ARRIVAL_CLOSED ? "concurrency" : w.arrival == DHS_ARRIVAL_POISSON ? "request_rate" : "rate_scale";
    tool_progress prog;
    tool_progress_init(&prog, quiet, 5.0);
    int n_runs_max = 3 * n_var * DHS_PLACE_N_ * n_loads, n_runs = 0, rc = 0;
    run_rec *runs = calloc((size_t)n_runs_max, sizeof *runs);
    if (!runs) { fprintf(stderr, "dhs serve-sim: out of memory\n"); return EXIT_RUNTIME; }
    for (int m = 0; m < DHS_SERVE_MODES_; m++) {
        if (!modes[m]) continue;
        for (int vi = 0; vi < n_var; vi++) {
            int sp = var_spec[vi];
            for (int li = 0; li < n_loads; li++)
            for (int pl = 0; pl < DHS_PLACE_N_; pl++) {
                if (!places[pl]) continue;
                run_rec *x = &runs[n_runs++];
                x->mode = (dhs_serve_mode)m;
                x->spec = sp;
                x->width = var_width[vi];
                x->place = (dhs_serve_placement)pl;
                x->load = loads[li];
                x->c = c;
                x->c.mode = x->mode;
                x->c.spec = sp;
                x->c.placement = x->place;
                if (x->width > 0) { /* one fixed width at every batch */
                    x->c.n_sched = 1;
                    x->c.sched_k[0] = x->width;
                    x->c.sched_batch[0] = INT32_MAX;
                }
                x->c.spec_auto = x->width < 0;
                char wl[16], sl[24] = "";
                if (sp) snprintf(sl, sizeof sl, "+spec%s%s", x->width ? " " : "", x->width ? spec_label(x, wl, sizeof wl) : "");
                if (c.dp_ranks > 1)
                    snprintf(x->tag, sizeof x->tag, "%s%s %s=%g %s", dhs_serve_mode_str(x->mode), sl, load_key, loads[li],
                             dhs_serve_placement_str(x->place));
                else
                    snprintf(x->tag, sizeof x->tag, "%s%s %s=%g", dhs_serve_mode_str(x->mode), sl, load_key, loads[li]);
                x->c.progress = quiet ? NULL : run_progress;
                x->c.progress_user = x;
                x->w = w;
                if (w.arrival == DHS_ARRIVAL_CLOSED) x->w.concurrency = (int32_t)loads[li];
                else if (w.arrival == DHS_ARRIVAL_POISSON) x->w.rate = loads[li];
                else x->w.time_scale = loads[li];
            }
        }
    }
    run_pool(runs, n_runs, jobs, 0, &prog);
    for (int i = 0; i < n_runs; i++)
        if (runs[i].rc) {
            fprintf(stderr, "dhs serve-sim: %s: %s\n", runs[i].tag, runs[i].err);
            rc = run_err_is_config(runs[i].err) ? EXIT_USAGE : EXIT_RUNTIME;
            break;
        }
    if (rc) goto done;
    /* equal-batch step time, speculation off: every batch size that resident and a hierarchy both ran */
    const dhs_serve_result *rp[3 * 11 * DHS_PLACE_N_ * MAX_POINTS];
    dhs_serve_mode rm[3 * 11 * DHS_PLACE_N_ * MAX_POINTS];
    int rs[3 * 11 * DHS_PLACE_N_ * MAX_POINTS];
    for (int i = 0; i < n_runs; i++) rp[i] = &runs[i].r, rm[i] = runs[i].mode, rs[i] = runs[i].spec;
    static dhs_serve_eqb eqb[DHS_SERVE_BATCH_HIST];
    int n_eqb = dhs_serve_equal_batch(rp, rm, rs, n_runs, 3, eqb, DHS_SERVE_BATCH_HIST);
    char trace_name[600] = "";
    if (rtrace) {
        const char *base = strrchr(rtrace, '/');
        snprintf(trace_name, sizeof trace_name, "%s", base ? base + 1 : rtrace);
    }
    if (json) {
        const dhs_serve_cost *k = &c.cost;
        printf("{");
        tool_prov_fields(stdout, "none");
        if (rtrace) {
            cJSON *tn = cJSON_CreateString(rtrace);
            char *q = cJSON_PrintUnformatted(tn);
            printf("\"config\": {\"arrival\": \"%s\", \"requests_trace\": %s, \"trace_requests\": %d, \"requests\": %d, "
                   "\"max_context\": %" PRId64 ", \"max_output\": %" PRId64 ", ",
                   load_key, q ? q : "null", n_trace, w.n_requests == 0 || w.n_requests > n_trace ? n_trace : w.n_requests,
                   c.max_context, c.max_output);
            cJSON_free(q);
            cJSON_Delete(tn);
        } else {
            printf("\"config\": {\"arrival\": \"%s\", \"requests\": %d, \"context\": %" PRId64 ", \"context_min\": %" PRId64
                   ", \"output_len\": %" PRId64 ", \"output_min\": %" PRId64 ", ",
                   load_key, w.n_requests, w.context, w.context_min ? w.context_min : w.context / 2, w.output_len,
                   w.output_min ? w.output_min : (w.output_len + 1) / 2);
        }
        printf("\"seed\": %" PRIu64 ", \"k\": %d, \"hot\": %d, \"page_rows\": %d, "
               "\"prefill\": \"%s\", \"max_batch\": %d, \"kv_gib\": %g, \"idx_share\": %g, \"stage_layers\": %d, \"accept_p\": %g, \"spec_schedule\": \"",
               w.seed, c.k, c.hot_rows, c.page_rows, c.prefill_remote ? "remote" : "local", c.max_batch, c.kv_gib,
               c.idx_share, c.stage_layers, c.accept_p);
        for (int i = 0; i < c.n_sched; i++) {
            if (c.sched_batch[i] == INT32_MAX) printf("%s%d", i ? "," : "", c.sched_k[i]);
            else printf("%s%d@%d", i ? "," : "", c.sched_k[i], c.sched_batch[i]);
        }
        printf("\"");
        if (c.dp_ranks > 1) printf(", \"dp_ranks\": %d", c.dp_ranks);
        printf(",\n  \"cost_model\": {\"layers\": %d, \"row_bytes\": %u, \"idx_bytes\": %u, \"base_us\": %g, \"token_us\": %g, \"attn_us\": %g, "
               "\"attn_layer_us\": %g, \"idx_us_per_ktok\": %g, \"idx_layer_us\": %g, \"pcie_gbps\": %g, \"gather_us\": %g, \"resolver_us\": %g, \"resolver_ns_per_entry\": %g, "
               "\"draft_us\": %g, \"prefill_us_per_token\": %g}},\n",
               k->layers, k->row_bytes, k->idx_bytes, k->base_us, k->token_us, k->attn_us, k->attn_layer_us, k->idx_us_per_ktok, k->idx_layer_us, k->pcie_gbps, k->gather_us,
               k->resolver_us, k->resolver_ns_per_entry, k->draft_us, k->prefill_us_per_token);
        printf(" \"runs\": [\n");
        for (int i = 0; i < n_runs; i++) {
            print_run_json(stdout, &runs[i], load_key);
            printf("%s\n", i + 1 < n_runs ? "," : "");
        }
        printf(" ],\n \"equal_batch\": [");
        for (int i = 0; i < n_eqb; i++) {
            const dhs_serve_eqb *e = &eqb[i];
            printf("%s\n  {\"batch\": %d, \"resident_step_ms\": %.3f", i ? "," : "", e->batch, e->ms[0]);
            for (int m = 1; m < 3; m++)
                if (e->ms[m] >= 0)
                    printf(", \"%s_step_ms\": %.3f, \"%s_overhead\": %.4f", dhs_serve_mode_str((dhs_serve_mode)m), e->ms[m],
                           dhs_serve_mode_str((dhs_serve_mode)m), e->overhead[m]);
            printf("}");
        }
        printf("\n ]}\n");
    } else {
        if (rtrace)
            printf("serve-sim: requests trace %s (%d requests, prompts clamped to %" PRId64 ", outputs to %" PRId64
                   "), %d requests per point, arrival-rate scales as the load, k %d, B %d, %.0f GiB KV per rank\n\n",
                   trace_name, n_trace, c.max_context, c.max_output,
                   w.n_requests == 0 || w.n_requests > n_trace ? n_trace : w.n_requests, c.k, c.hot_rows, c.kv_gib);
        else
            printf("serve-sim: %s load, %d requests per point, prompts %" PRId64 "..%" PRId64 ", outputs %" PRId64 "..%" PRId64
                   ", k %d, B %d, %.0f GiB KV per rank\n\n",
                   load_key, w.n_requests, w.context_min ? w.context_min : w.context / 2, w.context,
                   w.output_min ? w.output_min : (w.output_len + 1) / 2, w.output_len, c.k, c.hot_rows, c.kv_gib);
        printf("%-9s %-5s %8s %5s %7s %8s | %9s %9s %9s | %8s %8s %8s | %7s %7s | %5s %6s %8s\n", "mode", "spec", load_key[0] == 'c' ? "conc" : "load",
               "done", "req/s", "tok/s", "ttft_mean", "ttft_med", "ttft_p99", "tpot_mean", "tpot_med", "tpot_p99", "itl_med", "itl_p99",
               "maxrun", "batch", "host/tok");
        for (int i = 0; i < n_runs; i++) {
            const dhs_serve_result *r = &runs[i].r;
            char wl[16];
            printf("%-9s %-5s %8g %5" PRId64 " %7.3f %8.1f | %9.1f %9.1f %9.1f | %8.2f %8.2f %8.2f | %7.2f %7.2f | %5d %6.1f %8.1f\n",
                   dhs_serve_mode_str(runs[i].mode), spec_label(&runs[i], wl, sizeof wl), runs[i].load, r->completed, r->request_throughput,
                   r->output_throughput, r->mean_ttft_ms, r->median_ttft_ms, r->p99_ttft_ms, r->mean_tpot_ms, r->median_tpot_ms,
                   r->p99_tpot_ms, r->median_itl_ms, r->p99_itl_ms, r->max_running, r->mean_batch, r->host_rows_per_token);
        }
        if (c.dp_ranks > 1) {
            printf("\n%d data-parallel ranks (a step waits for the slowest rank; misses: host rows per step, one layer):\n", c.dp_ranks);
            printf("%-9s %-5s %8s %-14s | %8s %8s %8s | %8s | %9s %9s %7s %6s | %s\n", "mode", "spec", load_key[0] == 'c' ? "conc" : "load",
                   "placement", "step_p50", "step_p99", "step_mn", "tok/s", "miss_max", "miss_mean", "spread", "wait", "sessions per rank");
            for (int i = 0; i < n_runs; i++) {
                const dhs_serve_result *r = &runs[i].r;
                char wl[16];
                printf("%-9s %-5s %8g %-14s | %8.2f %8.2f %8.2f | %8.1f | %9.1f %9.1f %7.3f %5.1f%% |", dhs_serve_mode_str(runs[i].mode),
                       spec_label(&runs[i], wl, sizeof wl), runs[i].load, dhs_serve_placement_str(runs[i].place), r->p50_step_ms, r->p99_step_ms,
                       r->mean_step_ms, r->output_throughput, r->miss_max_per_step, r->miss_mean_per_step,
                       r->miss_mean_per_step > 0 ? r->miss_max_per_step / r->miss_mean_per_step : 1.0, 100 * r->wait_share);
                for (int k = 0; k < r->dp_ranks; k++) printf(" %d", r->rank_sessions[k]);
                printf("\n");
            }
        }
        printf("\nequal-batch decode step time, speculation off (overhead against resident):\n");
        printf("%6s %12s %12s %9s %12s %9s\n", "batch", "resident_ms", "fixed_ms", "fixed", "adaptive_ms", "adaptive");
        for (int i = 0; i < n_eqb; i++) {
            const dhs_serve_eqb *e = &eqb[i];
            int bt = e->batch;
            if (bt > 4 && (bt & (bt - 1)) && bt % 8) continue; /* a readable subset: 1..4, powers of two, multiples of 8 */
            printf("%6d %12.3f", bt, e->ms[0]);
            for (int m = 1; m < 3; m++) {
                if (e->ms[m] >= 0) printf(" %12.3f %+8.1f%%", e->ms[m], 100 * e->overhead[m]);
                else printf(" %12s %9s", "-", "-");
            }
            printf("\n");
        }
    }
    if (csv) {
        FILE *f = out_fopen(csv);
        if (!f) { fprintf(stderr, "dhs serve-sim: cannot write %s\n", csv); rc = EXIT_RUNTIME; goto done; }
        fprintf(f, "mode,spec,%s,completed,duration,total_input_tokens,total_output_tokens,request_throughput,output_throughput,"
                   "total_token_throughput,mean_ttft_ms,median_ttft_ms,p99_ttft_ms,mean_tpot_ms,median_tpot_ms,p99_tpot_ms,mean_itl_ms,"
                   "median_itl_ms,p99_itl_ms,mean_e2el_ms,median_e2el_ms,p99_e2el_ms,max_running,mean_batch,mean_step_ms,accept_length,"
                   "host_rows_per_token_per_layer,admission_waits,spec_width%s\n",
                load_key, c.dp_ranks > 1 ? ",dp_ranks,placement,p50_step_ms,p99_step_ms,miss_max_per_step,miss_mean_per_step,wait_share" : "");
        for (int i = 0; i < n_runs; i++) {
            const dhs_serve_result *r = &runs[i].r;
            fprintf(f, "%s,%d,%g,%" PRId64 ",%.4f,%" PRId64 ",%" PRId64 ",%.4f,%.2f,%.2f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%.2f,%.3f,%.3f,%.2f,%" PRIu64,
                    dhs_serve_mode_str(runs[i].mode), runs[i].spec, runs[i].load, r->completed, r->duration, r->total_input_tokens,
                    r->total_output_tokens, r->request_throughput, r->output_throughput, r->total_token_throughput, r->mean_ttft_ms,
                    r->median_ttft_ms, r->p99_ttft_ms, r->mean_tpot_ms, r->median_tpot_ms, r->p99_tpot_ms, r->mean_itl_ms, r->median_itl_ms,
                    r->p99_itl_ms, r->mean_e2el_ms, r->median_e2el_ms, r->p99_e2el_ms, r->max_running, r->mean_batch, r->mean_step_ms,
                    r->accept_length, r->host_rows_per_token, r->waits);
            char wl[16];
            fprintf(f, ",%s", spec_label(&runs[i], wl, sizeof wl));
            if (c.dp_ranks > 1)
                fprintf(f, ",%d,%s,%.3f,%.3f,%.2f,%.2f,%.4f", r->dp_ranks, dhs_serve_placement_str(runs[i].place), r->p50_step_ms,
                        r->p99_step_ms, r->miss_max_per_step, r->miss_mean_per_step, r->wait_share);
            fprintf(f, "\n");
        }
        if (fclose(f)) { fprintf(stderr, "dhs serve-sim: cannot write %s\n", csv); rc = EXIT_RUNTIME; goto done; }
    }
    if (plot) {
        /* one line per mode and speculation (and placement, with several ranks) */
        enum { NS = 3 * 11 * DHS_PLACE_N_ };
        dhs_plot_series ser[NS];
        static double xs[NS][MAX_POINTS], ys[NS][MAX_POINTS];
        char names[NS][48];
        int ns = 0;
        for (int m = 0; m < 3; m++)
            for (int vi = 0; vi < n_var; vi++)
                for (int pl = 0; pl < DHS_PLACE_N_; pl++) {
                    int n = 0, sp = var_spec[vi];
                    char sl[24] = "", wl[16];
                    for (int i = 0; i < n_runs; i++)
                        if ((int)runs[i].mode == m && runs[i].spec == sp && runs[i].width == var_width[vi] &&
                            (int)runs[i].place == pl) {
                            if (sp) snprintf(sl, sizeof sl, " + spec%s%s", runs[i].width ? " " : "",
                                             runs[i].width ? spec_label(&runs[i], wl, sizeof wl) : "");
                            xs[ns][n] = runs[i].r.output_throughput;
                            ys[ns][n] = runs[i].r.median_tpot_ms;
                            n++;
                        }
                    if (!n) continue;
                    if (c.dp_ranks > 1)
                        snprintf(names[ns], sizeof names[ns], "%s%s, %s", dhs_serve_mode_str((dhs_serve_mode)m), sl,
                                 dhs_serve_placement_str((dhs_serve_placement)pl));
                    else
                        snprintf(names[ns], sizeof names[ns], "%s%s", dhs_serve_mode_str((dhs_serve_mode)m), sl);
                    ser[ns] = (dhs_plot_series){names[ns], n, xs[ns], ys[ns]};
                    ns++;
                }
        if (dhs_plot_svg(out_path(plot), c.dp_ranks > 1 ? "latency vs throughput (data-parallel ranks)" : "latency vs throughput (one GPU rank)",
                         "output throughput (tokens/s)", "median TPOT (ms)", ser, ns, 0)) {
            fprintf(stderr, "dhs serve-sim: cannot write %s\n", plot);
            rc = EXIT_RUNTIME;
        }
    }
done:
    free(runs);
    return rc;
}
