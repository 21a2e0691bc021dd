/* cmd_serve_sim.c - `dhs serve-sim`: discrete-event serving simulator with
 * latency-throughput curves for resident, fixed-hot-cache and adaptive
 * serving, with and without speculation (docs/SIM.md). Output keys follow
 * vLLM's `bench serve`. Exit status: 0 success, 2 bad flags or input, 1 a
 * simulation failure. */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cmds.h"
#include "sim/servesim.h"
#include "sim/sim.h"

#define MAX_POINTS 32

static void usage(FILE *f)
{
    dhs_serve_config c = dhs_serve_config_default();
    const dhs_serve_cost *k = &c.cost;
    fprintf(f,
            "usage: dhs serve-sim [flags]\n\n"
            "Discrete-event serving simulator: continuous batching on one GPU rank; admission,\n"
            "reclaim, refill and the resolver census come from the real core (payload-free).\n"
            "Sweeps a load axis for each mode, with and without speculation; prints vLLM-style\n"
            "metrics, latency-throughput curves and the equal-batch step-time overhead of the\n"
            "hierarchy against resident serving. Model and constants: docs/SIM.md.\n\n"
            "load (one of):\n"
            "  --concurrency LIST     closed loop: requests in flight (default 1,8,24,48)\n"
            "  --rates LIST           Poisson arrivals, requests/s (e.g. 0.5,1,2,4)\n"
            "  --requests-trace FILE  Mooncake JSONL or BurstGPT CSV arrivals and lengths\n"
            "  --rate-scales LIST     with a trace: arrival-rate multipliers (1)\n"
            "workload:\n"
            "  --requests N           requests per point (48; trace: first N, 0 = all)\n"
            "  --context L            longest prompt, positions (32768); --context-min (L/2)\n"
            "  --output-len T         longest output, tokens (128); --output-min (T/2)\n"
            "  --seed S               (1)\n"
            "  --prefill remote|local prefill on a separate instance while the slot is held\n"
            "                         (remote, disaggregated) or on this rank, stalling decode\n"
            "modes:\n"
            "  --modes LIST           resident,fixed,adaptive (all)\n"
            "  --spec on|off|both     speculative decoding (both)\n"
            "  --spec-schedule S      block width by batch: K@max_batch,...,K (%s)\n"
            "  --accept-p P           acceptance per proposal, geometric (%.2f)\n"
            "scale:\n"
            "  --k K                  selection length (%d)\n"
            "  --hot B                hot-cache rows per request (%d)\n"
            "  --page-rows P          (%d)\n"
            "  --max-batch N          request slots (%d)\n"
            "  --kv-gib G             device memory for KV, index keys and staging per rank (%.0f)\n"
            "  --idx-share F          share of it for index keys (0 = auto)\n"
            "  --stage-layers X       live layer groups with staging reserved (%d)\n"
            "  --max-context L        clamp for trace prompts (%" PRId64 "); --max-output (%" PRId64 ")\n"
            "cost model (microseconds unless stated):\n"
            "  --layers N (%d) --row-bytes B (%u) --idx-bytes B (%u)\n"
            "  --base-us (%g) --token-us (%g) --attn-us (%g) --idx-us-per-ktok (%g)\n"
            "  --pcie-gbps (%g) --gather-us (%g) --resolver-us (%g) --resolver-ns (%g)\n"
            "  --draft-us (%g) --prefill-us-per-token (%g)\n"
            "output:\n"
            "  --json                 JSON on stdout instead of the table\n"
            "  --csv FILE             one CSV row per run\n"
            "  --plot FILE            SVG: median TPOT against output throughput, one line per mode\n"
            "  --jobs J               runs simulated in parallel (online CPUs, at most 8)\n"
            "  -q, --quiet            no progress on stderr\n"
            "  -h, --help             this help\n",
            "8@32,6@64,5@127,4", c.accept_p, c.k, c.hot_rows, c.page_rows, c.max_batch, c.kv_gib, c.stage_layers, c.max_context,
            c.max_output, k->layers, k->row_bytes, k->idx_bytes, k->base_us, k->token_us, k->attn_us, k->idx_us_per_ktok,
            k->pcie_gbps, k->gather_us, k->resolver_us, k->resolver_ns_per_entry, k->draft_us, k->prefill_us_per_token);
}

enum {
    O_CONC = 256, O_RATES, O_RTRACE, O_RSCALES, O_REQS, O_CTX, O_CTXMIN, O_OUT, O_OUTMIN, O_SEED, O_MODES, O_SPEC, O_SCHED,
    O_ACCEPT, O_K, O_HOT, O_PAGE, O_MAXB, O_KV, O_IDXSHARE, O_STAGE, O_MAXCTX, O_MAXOUT, O_LAYERS, O_ROWB, O_IDXB, O_BASE,
    O_TOKEN, O_ATTN, O_IDXUS, O_PCIE, O_GATHER, O_RESUS, O_RESNS, O_DRAFT, O_PREFILL, O_JSON, O_CSV, O_PLOT, O_PREFILL_AT, O_JOBS
};

static int bad(const char *msg, const char *val)
{
    fprintf(stderr, "dhs serve-sim: %s%s%s%s (see dhs serve-sim --help)\n", msg, val ? " '" : "", val ? val : "", val ? "'" : "");
    return 2;
}

static int parse_f64_list(const char *s, double lo, double hi, double *out, int max)
{
    int n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n >= max || arg_f64(t, lo, hi, &out[n])) return -1;
        n++;
    }
    return n;
}

typedef struct run_rec {
    dhs_serve_mode mode;
    int spec;
    double load; /* concurrency, rate or rate scale */
    dhs_serve_config c;
    dhs_serve_workload w;
    char tag[96];
    int rc;
    char err[512];
    dhs_serve_result r;
} run_rec;

/* runs are independent (own context and backend): a small pool of threads
   takes them in order; results land in their own slots, so the output does
   not depend on the thread count */
typedef struct pool {
    run_rec *runs;
    int n, next, done, progress, failed;
    pthread_mutex_t mu;
} pool;

static void *worker(void *arg)
{
    pool *P = arg;
    for (;;) {
        pthread_mutex_lock(&P->mu);
        int i = P->failed ? P->n : P->next++;
        pthread_mutex_unlock(&P->mu);
        if (i >= P->n) return NULL;
        run_rec *x = &P->runs[i];
        x->rc = dhs_serve_run(&x->c, &x->w, &x->r, x->err, sizeof x->err);
        pthread_mutex_lock(&P->mu);
        P->done++;
        if (x->rc) P->failed = 1;
        if (P->progress) fprintf(stderr, "\rdhs serve-sim: %d/%d runs done (%s)            ", P->done, P->n, x->tag);
        pthread_mutex_unlock(&P->mu);
    }
}

static void print_run_json(FILE *f, const run_rec *x, const char *load_key)
{
    const dhs_serve_result *r = &x->r;
    fprintf(f,
            "    {\"mode\": \"%s\", \"spec\": %s, \"%s\": %g, \"completed\": %" PRId64 ", \"duration\": %.4f, "
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
            ", \"index_key_budget_bytes\": %" PRIu64 ", \"wall_s\": %.3f}",
            dhs_serve_mode_str(x->mode), x->spec ? "true" : "false", load_key, x->load, r->completed, r->duration, r->total_input_tokens,
            r->total_output_tokens, r->request_throughput, r->output_throughput, r->total_token_throughput, r->mean_ttft_ms,
            r->median_ttft_ms, r->p99_ttft_ms, r->mean_tpot_ms, r->median_tpot_ms, r->p99_tpot_ms, r->mean_itl_ms, r->median_itl_ms,
            r->p99_itl_ms, r->mean_e2el_ms, r->median_e2el_ms, r->p99_e2el_ms, r->max_running, r->mean_batch, r->mean_step_ms,
            r->accept_length, r->steps, r->waits, r->host_rows_per_token, r->census_direct, r->census_hot, r->census_host, r->reclaims,
            r->repopulated_pages, r->device_pool_bytes, r->idx_budget_bytes, r->wall_s);
}

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
    double loads[MAX_POINTS];
    int n_loads = 0, json = 0, quiet = 0, spec_on = 1, spec_off = 1, load_set = 0, jobs = 0;
    int modes[DHS_SERVE_MODES_] = {1, 1, 1};
    const char *rtrace = NULL, *csv = NULL, *plot = NULL;
    static const struct option opts[] = {
        {"concurrency", required_argument, 0, O_CONC}, {"rates", required_argument, 0, O_RATES},
        {"requests-trace", required_argument, 0, O_RTRACE}, {"rate-scales", required_argument, 0, O_RSCALES},
        {"requests", required_argument, 0, O_REQS}, {"context", required_argument, 0, O_CTX},
        {"context-min", required_argument, 0, O_CTXMIN}, {"output-len", required_argument, 0, O_OUT},
        {"output-min", required_argument, 0, O_OUTMIN}, {"seed", required_argument, 0, O_SEED},
        {"modes", required_argument, 0, O_MODES}, {"spec", required_argument, 0, O_SPEC},
        {"spec-schedule", required_argument, 0, O_SCHED}, {"accept-p", required_argument, 0, O_ACCEPT},
        {"k", required_argument, 0, O_K}, {"hot", required_argument, 0, O_HOT}, {"page-rows", required_argument, 0, O_PAGE},
        {"max-batch", required_argument, 0, O_MAXB}, {"kv-gib", required_argument, 0, O_KV},
        {"idx-share", required_argument, 0, O_IDXSHARE}, {"stage-layers", required_argument, 0, O_STAGE},
        {"max-context", required_argument, 0, O_MAXCTX}, {"max-output", required_argument, 0, O_MAXOUT},
        {"layers", required_argument, 0, O_LAYERS}, {"row-bytes", required_argument, 0, O_ROWB},
        {"idx-bytes", required_argument, 0, O_IDXB}, {"base-us", required_argument, 0, O_BASE},
        {"token-us", required_argument, 0, O_TOKEN}, {"attn-us", required_argument, 0, O_ATTN},
        {"idx-us-per-ktok", required_argument, 0, O_IDXUS}, {"pcie-gbps", required_argument, 0, O_PCIE},
        {"gather-us", required_argument, 0, O_GATHER}, {"resolver-us", required_argument, 0, O_RESUS},
        {"resolver-ns", required_argument, 0, O_RESNS}, {"draft-us", required_argument, 0, O_DRAFT},
        {"prefill-us-per-token", required_argument, 0, O_PREFILL}, {"prefill", required_argument, 0, O_PREFILL_AT},
        {"json", no_argument, 0, O_JSON}, {"jobs", required_argument, 0, O_JOBS},
        {"csv", required_argument, 0, O_CSV}, {"plot", required_argument, 0, O_PLOT}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int o;
    int64_t v;
    double d;
#define I64(lo, hi, dst, what)                                          \
    do {                                                                \
        if (arg_i64(optarg, lo, hi, &v)) return bad(what, optarg);      \
        dst = v;                                                        \
    } while (0)
#define F64(lo, hi, dst, what)                                          \
    do {                                                                \
        if (arg_f64(optarg, lo, hi, &d)) return bad(what, optarg);      \
        dst = d;                                                        \
    } while (0)
    while ((o = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
        switch (o) {
        case 'h': usage(stdout); return 0;
        case 'q': quiet = 1; break;
        case O_CONC:
        case O_RATES:
        case O_RSCALES:
            n_loads = parse_f64_list(optarg, o == O_CONC ? 1 : 1e-9, o == O_CONC ? 1 << 20 : 1e9, loads, MAX_POINTS);
            if (n_loads < 1) return bad("wants a comma list of positive numbers", optarg);
            if (o == O_CONC)
                for (int i = 0; i < n_loads; i++)
                    if (loads[i] != floor(loads[i])) return bad("--concurrency wants integers", optarg);
            if (o != O_RSCALES) w.arrival = o == O_CONC ? DHS_ARRIVAL_CLOSED : DHS_ARRIVAL_POISSON;
            load_set = o;
            break;
        case O_RTRACE: rtrace = optarg; break;
        case O_REQS: I64(0, 1 << 24, w.n_requests, "--requests wants 0..2^24"); break;
        case O_CTX: I64(1, (int64_t)1 << 30, w.context, "--context wants a positive integer"); break;
        case O_CTXMIN: I64(1, (int64_t)1 << 30, w.context_min, "--context-min wants a positive integer"); break;
        case O_OUT: I64(1, 1 << 24, w.output_len, "--output-len wants a positive integer"); break;
        case O_OUTMIN: I64(1, 1 << 24, w.output_min, "--output-min wants a positive integer"); break;
        case O_SEED: I64(0, INT64_MAX, w.seed, "--seed wants an integer >= 0"); break;
        case O_MODES: {
            modes[0] = modes[1] = modes[2] = 0;
            char buf[128];
            snprintf(buf, sizeof buf, "%s", optarg);
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int m = !strcmp(t, "resident") ? 0 : !strcmp(t, "fixed") ? 1 : !strcmp(t, "adaptive") ? 2 : -1;
                if (m < 0) return bad("unknown mode (resident, fixed, adaptive)", t);
                modes[m] = 1;
            }
            break;
        }
        case O_SPEC:
            if (!strcmp(optarg, "on")) spec_on = 1, spec_off = 0;
            else if (!strcmp(optarg, "off")) spec_on = 0, spec_off = 1;
            else if (!strcmp(optarg, "both")) spec_on = spec_off = 1;
            else return bad("--spec wants on, off or both", optarg);
            break;
        case O_SCHED:
            if (dhs_serve_parse_schedule(optarg, &c)) return bad("--spec-schedule wants K@batch,...,K", optarg);
            break;
        case O_ACCEPT: F64(0, 1, c.accept_p, "--accept-p wants a number in [0, 1]"); break;
        case O_K: I64(1, 65536, c.k, "--k wants 1..65536"); break;
        case O_HOT: I64(1, 1 << 24, c.hot_rows, "--hot wants a positive integer"); break;
        case O_PAGE: I64(1, 65536, c.page_rows, "--page-rows wants 1..65536"); break;
        case O_MAXB: I64(1, 1024, c.max_batch, "--max-batch wants 1..1024"); break;
        case O_KV: F64(1e-6, 1e6, c.kv_gib, "--kv-gib wants a positive number"); break;
        case O_IDXSHARE: F64(0, 0.999, c.idx_share, "--idx-share wants [0, 1)"); break;
        case O_STAGE: I64(0, 1024, c.stage_layers, "--stage-layers wants 0..1024"); break;
        case O_MAXCTX: I64(1, (int64_t)1 << 30, c.max_context, "--max-context wants a positive integer"); break;
        case O_MAXOUT: I64(1, 1 << 24, c.max_output, "--max-output wants a positive integer"); break;
        case O_LAYERS: I64(1, 1024, c.cost.layers, "--layers wants 1..1024"); break;
        case O_ROWB: I64(16, 1 << 20, c.cost.row_bytes, "--row-bytes wants 16..2^20"); break;
        case O_IDXB: I64(0, 1 << 20, c.cost.idx_bytes, "--idx-bytes wants 0..2^20"); break;
        case O_BASE: F64(0, 1e9, c.cost.base_us, "--base-us wants a number >= 0"); break;
        case O_TOKEN: F64(0, 1e9, c.cost.token_us, "--token-us wants a number >= 0"); break;
        case O_ATTN: F64(0, 1e9, c.cost.attn_us, "--attn-us wants a number >= 0"); break;
        case O_IDXUS: F64(0, 1e9, c.cost.idx_us_per_ktok, "--idx-us-per-ktok wants a number >= 0"); break;
        case O_PCIE: F64(1e-3, 1e6, c.cost.pcie_gbps, "--pcie-gbps wants a positive number"); break;
        case O_GATHER: F64(0, 1e9, c.cost.gather_us, "--gather-us wants a number >= 0"); break;
        case O_RESUS: F64(0, 1e9, c.cost.resolver_us, "--resolver-us wants a number >= 0"); break;
        case O_RESNS: F64(0, 1e9, c.cost.resolver_ns_per_entry, "--resolver-ns wants a number >= 0"); break;
        case O_DRAFT: F64(0, 1e9, c.cost.draft_us, "--draft-us wants a number >= 0"); break;
        case O_PREFILL: F64(0, 1e9, c.cost.prefill_us_per_token, "--prefill-us-per-token wants a number >= 0"); break;
        case O_PREFILL_AT:
            if (!strcmp(optarg, "remote")) c.prefill_remote = 1;
            else if (!strcmp(optarg, "local")) c.prefill_remote = 0;
            else return bad("--prefill wants remote or local", optarg);
            break;
        case O_JSON: json = 1; break;
        case O_JOBS: I64(1, 64, jobs, "--jobs wants 1..64"); break;
        case O_CSV: csv = optarg; break;
        case O_PLOT: plot = optarg; break;
        default: return bad("unknown option or missing value", optind - 1 < argc ? argv[optind - 1] : "?");
        }
    }
#undef I64
#undef F64
    if (optind < argc) return bad("unexpected argument", argv[optind]);
    if (c.hot_rows % c.page_rows) return bad("--hot must be a multiple of --page-rows", NULL);
    if (w.context_min > w.context) return bad("--context-min above --context", NULL);
    if (w.output_min > w.output_len) return bad("--output-min above --output-len", NULL);
    if (load_set == O_RSCALES && !rtrace) return bad("--rate-scales needs --requests-trace", NULL);
    if (rtrace && (load_set == O_CONC || load_set == O_RATES)) return bad("--requests-trace takes --rate-scales, not --concurrency/--rates", NULL);
    if (!modes[0] && !modes[1] && !modes[2]) return bad("--modes is empty", NULL);
    if (!jobs) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = ncpu < 1 ? 1 : ncpu > 8 ? 8 : (int)ncpu;
    }
    dhs_serve_req *treq = NULL;
    if (rtrace) {
        char err[512];
        if (dhs_serve_load_trace(rtrace, &treq, &w.n_trace, err, sizeof err)) {
            fprintf(stderr, "dhs serve-sim: %s\n", err);
            return 2;
        }
        w.trace = treq;
        w.arrival = DHS_ARRIVAL_TRACE;
        if (!n_loads) { loads[0] = 1; n_loads = 1; }
    }
    if (!n_loads) {
        loads[0] = 1; loads[1] = 8; loads[2] = 24; loads[3] = 48;
        n_loads = 4;
    }
    const char *load_key = w.arrival == DHS_ARRIVAL_CLOSED ? "concurrency" : w.arrival == DHS_ARRIVAL_POISSON ? "request_rate" : "rate_scale";
    int progress = !quiet && isatty(STDERR_FILENO);
    int n_runs_max = 3 * 2 * n_loads, n_runs = 0, rc = 0;
    run_rec *runs = calloc((size_t)n_runs_max, sizeof *runs);
    if (!runs) { free(treq); fprintf(stderr, "dhs serve-sim: out of memory\n"); return 1; }
    for (int m = 0; m < DHS_SERVE_MODES_; m++) {
        if (!modes[m]) continue;
        for (int sp = 0; sp < 2; sp++) {
            if ((sp == 0 && !spec_off) || (sp == 1 && !spec_on)) continue;
            for (int li = 0; li < n_loads; li++) {
                run_rec *x = &runs[n_runs++];
                x->mode = (dhs_serve_mode)m;
                x->spec = sp;
                x->load = loads[li];
                x->c = c;
                x->c.mode = x->mode;
                x->c.spec = sp;
                snprintf(x->tag, sizeof x->tag, "%s%s %s=%g", dhs_serve_mode_str(x->mode), sp ? "+spec" : "", load_key, loads[li]);
                x->c.progress = progress && jobs == 1;
                x->c.progress_tag = x->tag;
                x->w = w;
                if (w.arrival == DHS_ARRIVAL_CLOSED) x->w.concurrency = (int32_t)loads[li];
                else if (w.arrival == DHS_ARRIVAL_POISSON) x->w.rate = loads[li];
                else x->w.time_scale = loads[li];
            }
        }
    }
    {
        pool P = {runs, n_runs, 0, 0, progress && jobs > 1, 0, PTHREAD_MUTEX_INITIALIZER};
        int nt = jobs < n_runs ? jobs : n_runs;
        pthread_t th[64];
        int started = 0;
        for (int i = 1; i < nt; i++)
            if (pthread_create(&th[started], NULL, worker, &P) == 0) started++;
        worker(&P);
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
        if (P.progress) fprintf(stderr, "\r%80s\r", "");
    }
    for (int i = 0; i < n_runs; i++)
        if (runs[i].rc) {
            fprintf(stderr, "dhs serve-sim: %s: %s\n", runs[i].tag, runs[i].err);
            rc = 1;
            break;
        }
    if (rc) goto done;
    /* equal-batch step time, speculation off: every batch size that resident and a hierarchy both ran */
    double eb_ms[DHS_SERVE_MODES_][DHS_SERVE_BATCH_HIST];
    uint64_t eb_n[DHS_SERVE_MODES_][DHS_SERVE_BATCH_HIST];
    memset(eb_ms, 0, sizeof eb_ms);
    memset(eb_n, 0, sizeof eb_n);
    for (int i = 0; i < n_runs; i++) {
        if (runs[i].spec) continue;
        for (int b = 0; b < DHS_SERVE_BATCH_HIST; b++) {
            eb_ms[runs[i].mode][b] += runs[i].r.step_ms_sum[b];
            eb_n[runs[i].mode][b] += runs[i].r.step_n[b];
        }
    }
    const uint64_t min_n = 3;
    if (json) {
        const dhs_serve_cost *k = &c.cost;
        printf("{\"config\": {\"arrival\": \"%s\", \"requests\": %d, \"context\": %" PRId64 ", \"context_min\": %" PRId64
               ", \"output_len\": %" PRId64 ", \"output_min\": %" PRId64 ", \"seed\": %" PRIu64 ", \"k\": %d, \"hot\": %d, \"page_rows\": %d, "
               "\"prefill\": \"%s\", \"max_batch\": %d, \"kv_gib\": %g, \"idx_share\": %g, \"stage_layers\": %d, \"accept_p\": %g, \"spec_schedule\": \"",
               load_key, w.n_requests, w.context, w.context_min ? w.context_min : w.context / 2, w.output_len,
               w.output_min ? w.output_min : (w.output_len + 1) / 2, w.seed, c.k, c.hot_rows, c.page_rows,
               c.prefill_remote ? "remote" : "local", c.max_batch, c.kv_gib,
               c.idx_share, c.stage_layers, c.accept_p);
        for (int i = 0; i < c.n_sched; i++) {
            if (c.sched_batch[i] == INT32_MAX) printf("%s%d", i ? "," : "", c.sched_k[i]);
            else printf("%s%d@%d", i ? "," : "", c.sched_k[i], c.sched_batch[i]);
        }
        printf("\",\n  \"cost_model\": {\"layers\": %d, \"row_bytes\": %u, \"idx_bytes\": %u, \"base_us\": %g, \"token_us\": %g, \"attn_us\": %g, "
               "\"idx_us_per_ktok\": %g, \"pcie_gbps\": %g, \"gather_us\": %g, \"resolver_us\": %g, \"resolver_ns_per_entry\": %g, "
               "\"draft_us\": %g, \"prefill_us_per_token\": %g}},\n",
               k->layers, k->row_bytes, k->idx_bytes, k->base_us, k->token_us, k->attn_us, k->idx_us_per_ktok, k->pcie_gbps, k->gather_us,
               k->resolver_us, k->resolver_ns_per_entry, k->draft_us, k->prefill_us_per_token);
        printf(" \"runs\": [\n");
        for (int i = 0; i < n_runs; i++) {
            print_run_json(stdout, &runs[i], load_key);
            printf("%s\n", i + 1 < n_runs ? "," : "");
        }
        printf(" ],\n \"equal_batch\": [");
        int first = 1;
        for (int b = 1; b < DHS_SERVE_BATCH_HIST; b++) {
            if (eb_n[0][b] < min_n || (eb_n[1][b] < min_n && eb_n[2][b] < min_n)) continue;
            double res = eb_ms[0][b] / (double)eb_n[0][b];
            printf("%s\n  {\"batch\": %d, \"resident_step_ms\": %.3f", first ? "" : ",", b, res);
            for (int m = 1; m < 3; m++)
                if (eb_n[m][b] >= min_n) {
                    double s = eb_ms[m][b] / (double)eb_n[m][b];
                    printf(", \"%s_step_ms\": %.3f, \"%s_overhead\": %.4f", dhs_serve_mode_str((dhs_serve_mode)m), s,
                           dhs_serve_mode_str((dhs_serve_mode)m), s / res - 1);
                }
            printf("}");
            first = 0;
        }
        printf("\n ]}\n");
    } else {
        printf("serve-sim: %s load, %d requests per point, prompts %" PRId64 "..%" PRId64 ", outputs %" PRId64 "..%" PRId64
               ", k %d, B %d, %.0f GiB KV per rank\n\n",
               load_key, w.arrival == DHS_ARRIVAL_TRACE && (w.n_requests == 0 || w.n_requests > w.n_trace) ? w.n_trace : w.n_requests,
               w.context_min ? w.context_min : w.context / 2, w.context, w.output_min ? w.output_min : (w.output_len + 1) / 2,
               w.output_len, c.k, c.hot_rows, c.kv_gib);
        printf("%-9s %-4s %8s %5s %7s %8s | %9s %9s %9s | %8s %8s %8s | %7s %7s | %5s %6s %8s\n", "mode", "spec", load_key[0] == 'c' ? "conc" : "load",
               "done", "req/s", "tok/s", "ttft_mean", "ttft_med", "ttft_p99", "tpot_mean", "tpot_med", "tpot_p99", "itl_med", "itl_p99",
               "maxrun", "batch", "host/tok");
        for (int i = 0; i < n_runs; i++) {
            const dhs_serve_result *r = &runs[i].r;
            printf("%-9s %-4s %8g %5" PRId64 " %7.3f %8.1f | %9.1f %9.1f %9.1f | %8.2f %8.2f %8.2f | %7.2f %7.2f | %5d %6.1f %8.1f\n",
                   dhs_serve_mode_str(runs[i].mode), runs[i].spec ? "on" : "off", runs[i].load, r->completed, r->request_throughput,
                   r->output_throughput, r->mean_ttft_ms, r->median_ttft_ms, r->p99_ttft_ms, r->mean_tpot_ms, r->median_tpot_ms,
                   r->p99_tpot_ms, r->median_itl_ms, r->p99_itl_ms, r->max_running, r->mean_batch, r->host_rows_per_token);
        }
        printf("\nequal-batch decode step time, speculation off (overhead against resident):\n");
        printf("%6s %12s %12s %9s %12s %9s\n", "batch", "resident_ms", "fixed_ms", "fixed", "adaptive_ms", "adaptive");
        for (int b = 1; b < DHS_SERVE_BATCH_HIST; b++) {
            if (eb_n[0][b] < min_n || (eb_n[1][b] < min_n && eb_n[2][b] < min_n)) continue;
            if (b > 4 && (b & (b - 1)) && b % 8) continue; /* a readable subset: 1..4, powers of two, multiples of 8 */
            double res = eb_ms[0][b] / (double)eb_n[0][b];
            printf("%6d %12.3f", b, res);
            for (int m = 1; m < 3; m++) {
                if (eb_n[m][b] >= min_n) {
                    double s = eb_ms[m][b] / (double)eb_n[m][b];
                    printf(" %12.3f %+8.1f%%", s, 100 * (s / res - 1));
                } else {
                    printf(" %12s %9s", "-", "-");
                }
            }
            printf("\n");
        }
    }
    if (csv) {
        FILE *f = fopen(csv, "w");
        if (!f) { fprintf(stderr, "dhs serve-sim: cannot write %s\n", csv); rc = 2; goto done; }
        fprintf(f, "mode,spec,%s,completed,duration,total_input_tokens,total_output_tokens,request_throughput,output_throughput,"
                   "total_token_throughput,mean_ttft_ms,median_ttft_ms,p99_ttft_ms,mean_tpot_ms,median_tpot_ms,p99_tpot_ms,mean_itl_ms,"
                   "median_itl_ms,p99_itl_ms,mean_e2el_ms,median_e2el_ms,p99_e2el_ms,max_running,mean_batch,mean_step_ms,accept_length,"
                   "host_rows_per_token_per_layer,admission_waits\n",
                load_key);
        for (int i = 0; i < n_runs; i++) {
            const dhs_serve_result *r = &runs[i].r;
            fprintf(f, "%s,%d,%g,%" PRId64 ",%.4f,%" PRId64 ",%" PRId64 ",%.4f,%.2f,%.2f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%.2f,%.3f,%.3f,%.2f,%" PRIu64 "\n",
                    dhs_serve_mode_str(runs[i].mode), runs[i].spec, runs[i].load, r->completed, r->duration, r->total_input_tokens,
                    r->total_output_tokens, r->request_throughput, r->output_throughput, r->total_token_throughput, r->mean_ttft_ms,
                    r->median_ttft_ms, r->p99_ttft_ms, r->mean_tpot_ms, r->median_tpot_ms, r->p99_tpot_ms, r->mean_itl_ms, r->median_itl_ms,
                    r->p99_itl_ms, r->mean_e2el_ms, r->median_e2el_ms, r->p99_e2el_ms, r->max_running, r->mean_batch, r->mean_step_ms,
                    r->accept_length, r->host_rows_per_token, r->waits);
        }
        if (fclose(f)) { fprintf(stderr, "dhs serve-sim: cannot write %s\n", csv); rc = 2; goto done; }
    }
    if (plot) {
        dhs_plot_series ser[6];
        double xs[6][MAX_POINTS], ys[6][MAX_POINTS];
        char names[6][32];
        int ns = 0;
        for (int m = 0; m < 3; m++)
            for (int sp = 0; sp < 2; sp++) {
                int n = 0;
                for (int i = 0; i < n_runs; i++)
                    if ((int)runs[i].mode == m && runs[i].spec == sp) {
                        xs[ns][n] = runs[i].r.output_throughput;
                        ys[ns][n] = runs[i].r.median_tpot_ms;
                        n++;
                    }
                if (!n) continue;
                snprintf(names[ns], sizeof names[ns], "%s%s", dhs_serve_mode_str((dhs_serve_mode)m), sp ? " + spec" : "");
                ser[ns] = (dhs_plot_series){names[ns], n, xs[ns], ys[ns]};
                ns++;
            }
        if (dhs_plot_svg(plot, "latency vs throughput (one GPU rank)", "output throughput (tokens/s)", "median TPOT (ms)", ser, ns, 0)) {
            fprintf(stderr, "dhs serve-sim: cannot write %s\n", plot);
            rc = 2;
        }
    }
done:
    free(runs);
    free(treq);
    return rc;
}
