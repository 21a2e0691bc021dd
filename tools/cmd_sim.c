/* cmd_sim.c - `dhs sim`: replay a selection trace through the real core
 * (payload-free) for policies x hot-cache sizes; census, host rows per token,
 * miss-ratio curves; text, JSON, CSV, SVG (docs/SIM.md).
 * Exit status: 0 success, 2 bad flags or a bad trace, 1 a replay failure. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cmds.h"
#include "sim/sim.h"
#include "sim/tracestats.h"
#include "outfile.h"
#include "tool.h"

#define MAX_SIZES 32

#define PROG "dhs sim"

static const char *const imports[] = {"device", "host", NULL};
static const char *const reclaims[] = {"most-pages", "oldest", "newest", NULL};

/* replays are independent (own context, backend and reader; the OPT oracle
   is read-only): a small pool of threads takes them in order and each result
   lands in its own slot, so the output does not depend on the thread count */
typedef struct sim_job {
    dhs_sim_config cfg;
    int policy, rc, running;
    uint64_t round;
    dhs_sim_result *res;
    char tag[64];
    char err[512];
} sim_job;

typedef struct sim_pool {
    sim_job *jobs;
    int n, next, done;
    int failed;
    tool_progress *prog;
    const char *trace;
    const dhs_sim_trace_info *info;
    const dhs_sim_oracle *oracle;
    pthread_mutex_t mu;
} sim_pool;

static void sim_progress(void *user, uint64_t done, uint64_t total)
{
    sim_pool *P = user;
    pthread_mutex_lock(&P->mu);
    tool_progress_msg(P->prog, 0, "dhs sim: %d/%d replays done; a replay at round %" PRIu64 "/%" PRIu64, P->done, P->n, done,
                      total);
    pthread_mutex_unlock(&P->mu);
}

static void *sim_worker(void *arg)
{
    sim_pool *P = arg;
    for (;;) {
        pthread_mutex_lock(&P->mu);
        int i = P->failed ? P->n : P->next++;
        pthread_mutex_unlock(&P->mu);
        if (i >= P->n) return NULL;
        sim_job *j = &P->jobs[i];
        j->rc = dhs_sim_replay(P->trace, P->info, &j->cfg, j->policy, P->oracle, j->res, j->err, sizeof j->err);
        pthread_mutex_lock(&P->mu);
        P->done++;
        if (j->rc) P->failed = 1;
        tool_progress_msg(P->prog, 0, "dhs sim: %d/%d replays done (last: %s)", P->done, P->n, j->tag);
        pthread_mutex_unlock(&P->mu);
    }
}

static int bad(const char *msg, const char *val)
{
    if (val) return args_fail(PROG, "%s '%s'", msg, val);
    return args_fail(PROG, "%s", msg);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

static void print_result_json(FILE *f, const dhs_sim_result *r, int check, int32_t hot_eff)
{
    const dhs_stats *s = &r->st;
    fprintf(f,
            "    {\"policy\": \"%s\", \"hot\": %d, \"host_rows\": %" PRIu64 ", \"entries\": %" PRIu64
            ", \"census\": {\"direct\": %" PRIu64 ", \"hot\": %" PRIu64 ", \"host\": %" PRIu64 "},\n"
            "     \"host_rows_per_token\": %.4f, \"host_bytes\": %" PRIu64 ", \"host_bytes_per_token\": %.1f, \"miss_ratio\": %.6f,"
            " \"direct_share\": %.6f, \"hot_share\": %.6f, \"host_share\": %.6f,\n"
            "     \"tokens\": %" PRIu64 ", \"staging_rows\": %" PRIu64 ", \"admissions\": %" PRIu64 ", \"reclaims\": %" PRIu64
            ", \"reclaimed_pages\": %" PRIu64 ", \"repopulated_pages\": %" PRIu64 ", \"device_bytes\": %" PRIu64
            ", \"replay_s\": %.4f, \"replay_mentries_per_s\": %.2f",
            dhs_sim_policy_str(r->policy), r->hot_rows, r->host_rows, s->entries, s->census_direct, s->census_hot,
            s->census_host, r->host_rows_per_token, r->host_bytes, r->tokens ? (double)r->host_bytes / (double)r->tokens : 0.0,
            r->miss_ratio, r->direct_share, r->hot_share, r->host_share, r->tokens, s->staging_rows, s->admissions,
            s->reclaims, s->reclaimed_pages, s->repopulated_pages, r->device_bytes, r->replay_s, r->mentries_per_s);
    fprintf(f, ", \"hot_effective\": %d", hot_eff);
    fprintf(f, ", \"peak_open_requests\": %d, \"peak_host_bytes\": %" PRIu64 ", \"peak_request_bytes\": %" PRIu64, r->peak_open_requests,
            r->peak_host_bytes, r->peak_request_bytes);
    if (check) fprintf(f, ", \"invariant_violations\": %" PRIu64, r->invariant_violations);
    if (r->policy == DHS_SIM_OPT)
        fprintf(f, ", \"oracle_calls\": %" PRIu64 ", \"oracle_stale\": %" PRIu64 ", \"opt_references\": %" PRIu64
                   ", \"opt_hot_path_references\": %" PRIu64 ", \"opt_record_s\": %.4f, \"opt_inexact_keys\": %" PRIu64,
                r->oracle_calls, r->oracle_stale, r->opt_refs, r->opt_hot_refs, r->opt_record_s, r->opt_fallback_unknown);
    fprintf(f, "}");
}

/* even (res[i]) vs per-layer (res[n_res + i]) at the same total rows per request */
static void print_per_layer(FILE *f, int json, const char *src, const dhs_sim_result *res, int n_res, int n_pol,
                            const int64_t *hot, int n_hot, const dhs_trace_hot_split *plan, int32_t n_groups)
{
    if (json) {
        fprintf(f, " \"per_layer\": {\"planned_from\": ");
        json_str(f, src);
        fprintf(f, ", \"runs\": [");
    } else {
        fprintf(f, "\nper-layer hot cache: sizes planned from the LRU curves of %s (greedy by hit gain per row, every\n"
                   "layer at least one page), the same rows per request as the even split; replayed through the core:\n",
                src);
        fprintf(f, "%-6s %7s %9s %9s | %10s %8s | %10s %8s | %9s  %s\n", "policy", "hot", "rows/req", "used", "even r/tok",
                "even hit", "layer r/tok", "layer hit", "r/tok cut", "curves: even / per-layer hit");
    }
    for (int hi = 0, k = 0; hi < n_hot; hi++)
        for (int pi = 0; pi < n_pol; pi++, k++) {
            const dhs_sim_result *e = &res[hi * n_pol + pi], *l = &res[n_res + hi * n_pol + pi];
            const double cut = e->host_rows_per_token > 0 ? 1 - l->host_rows_per_token / e->host_rows_per_token : 0;
            if (json) {
                fprintf(f, "%s\n  {\"policy\": \"%s\", \"hot\": %" PRId64 ", \"budget_rows\": %" PRId64
                           ", \"rows_used\": %" PRId64 ", \"curve_even_hit_rate\": %.4f, \"curve_per_layer_hit_rate\": %.4f,"
                           " \"even\": {\"host_rows\": %" PRIu64 ", \"host_rows_per_token\": %.4f, \"hit_rate\": %.6f},"
                           " \"per_layer\": {\"host_rows\": %" PRIu64 ", \"host_rows_per_token\": %.4f, \"hit_rate\": %.6f},"
                           " \"host_rows_per_token_cut_pct\": %.2f, \"rows_per_group\": [",
                        k ? "," : "", dhs_sim_policy_str(e->policy), hot[hi], plan[hi].budget, plan[hi].used,
                        plan[hi].even_hit, plan[hi].sized_hit, e->host_rows, e->host_rows_per_token, e->hit_rate,
                        l->host_rows, l->host_rows_per_token, l->hit_rate, 100 * cut);
                for (int32_t g = 0; g < n_groups; g++) fprintf(f, "%s%" PRId64, g ? ", " : "", plan[hi].rows[g]);
                fprintf(f, "]}");
            } else {
                fprintf(f, "%-6s %7" PRId64 " %9" PRId64 " %9" PRId64 " | %10.2f %8.4f | %10.2f %8.4f | %8.2f%%  %.4f / %.4f\n",
                        dhs_sim_policy_str(e->policy), hot[hi], plan[hi].budget, plan[hi].used, e->host_rows_per_token,
                        e->hit_rate, l->host_rows_per_token, l->hit_rate, 100 * cut, plan[hi].even_hit, plan[hi].sized_hit);
            }
        }
    if (json) {
        fprintf(f, "\n ]},\n");
        return;
    }
    for (int hi = 0; hi < n_hot; hi++) {
        fprintf(f, "rows per layer at B=%" PRId64 ":", hot[hi]);
        for (int32_t g = 0; g < n_groups; g++) fprintf(f, " %" PRId64, plan[hi].rows[g]);
        fprintf(f, "\n");
    }
}

int cmd_sim(int argc, char **argv)
{
    const char *trace = NULL, *csv = NULL, *plot = NULL, *pol_list = NULL, *output = NULL, *per_layer = NULL;
    int policies[DHS_SIM_POLICIES], n_pol = 0, json = 0, quiet = 0, import = 0, reclaim = 0, jobs = 0;
    int64_t hot[MAX_SIZES] = {2048, 4096, 8192, 16384}, devmib = 0;
    int n_hot = 4;
    dhs_sim_config cfg = dhs_sim_config_default();
    arg_spec sp[] = {
        A_IN("--trace", &trace, "selection trace (required; dhs trace gen, docs/TRACE.md)"),
        {.name = "--policies", .type = ARG_STR, .dest = &pol_list, .meta = "LIST",
         .help = "comma list of lru,clock,fifo,lfu,opt; opt = offline Belady with the trace's next uses (the bound)",
         .def = "lru,clock,fifo,lfu,opt"},
        {.name = "--hot", .type = ARG_I64_LIST, .dest = hot, .ilo = 1, .ihi = 1 << 24, .count = &n_hot, .max = MAX_SIZES,
         .help = "hot-cache rows B per request and group (multiples of --page-rows)"},
        A_IN("--hot-per-layer", &per_layer,
             "also replay, for every --hot B and policy, a hot cache sized per group (layer) at the same total "
             "rows per request: the sizes are planned from this trace's LRU curves (it may be the --trace itself "
             "or another; docs/LOCALITY.md); prints even vs per-layer side by side"),
        A_INT("--page-rows", &cfg.page_rows, 1, 1 << 16, "rows per page"),
        {.name = "--tail-rows", .type = ARG_INT, .dest = &cfg.tail_rows, .ilo = 0, .ihi = 1 << 20,
         .help = "tail rows per request and source (0 = max(128, 2 K_max))"},
        A_DBL("--opt-fit", &cfg.opt_fit, 0, 1e6,
              "device pool beyond required allocations, as a share of the largest optional history live at once "
              "(0: it does not fit, the hot cache decides; 1: every imported row stays resident)"),
        {.name = "--device-mib", .type = ARG_I64, .dest = &devmib, .ilo = 1, .ihi = (int64_t)1 << 30,
         .help = "device pool size in MiB (overrides --opt-fit)", .def = "from --opt-fit"},
        {.name = "--import", .type = ARG_ENUM, .dest = &import, .choices = imports,
         .help = "prefill rows arrive on the device (resident-first) or on host"},
        {.name = "--reclaim", .type = ARG_ENUM, .dest = &reclaim, .choices = reclaims, .help = "reclaim order"},
        A_BOOL("--check", &cfg.check_invariants, "check every invariant after every event (slow; exit 1 on a violation)"),
        A_BOOL("--json", &json, "JSON on stdout instead of the table (with version, commit, date, host, device)"),
        A_OUT("--csv", &csv, "one CSV row per policy and size"),
        A_OUT("--plot", &plot, "SVG: miss ratio against hot-cache size, one line per policy"),
        A_OUT("--output", &output, "write the results to FILE instead of stdout"),
        {.name = "--jobs", .type = ARG_INT, .dest = &jobs, .ilo = 1, .ihi = 64,
         .help = "replays run in parallel (results do not depend on it)", .def = "online CPUs, at most 8"},
        {.name = "--quiet", .alias = 'q', .type = ARG_BOOL, .dest = &quiet, .help = "no progress on stderr"},
    };
    arg_cmd cmd = {
        .prog = PROG,
        .synopsis = "--trace FILE [flags]",
        .about = "Replays a selection trace (dhs trace gen, docs/TRACE.md) through the real core in\n"
                 "payload-free mode for every policy and hot-cache size; prints the census\n"
                 "(direct / hot / host entries), host rows per token and miss-ratio curves.\n"
                 "Progress goes to stderr (a line every 5 s off a terminal). docs/SIM.md explains it.",
        .specs = sp,
        .n_specs = (int)(sizeof sp / sizeof sp[0]),
    };
    int pr = args_parse(&cmd, argc, argv, NULL, NULL);
    if (pr) return args_exit(pr);
    if (!trace) return bad("--trace FILE is required", NULL);
    if (pol_list) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", pol_list);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int p;
            if (dhs_sim_policy_parse(t, &p)) return bad("unknown policy (one of lru,clock,fifo,lfu,opt)", t);
            int dup = 0;
            for (int i = 0; i < n_pol; i++) dup |= policies[i] == p;
            if (!dup) policies[n_pol++] = p;
        }
        if (!n_pol) return bad("--policies wants a list", pol_list);
    }
    cfg.import_flags = import == 0 ? DHS_IMPORT_DEVICE : DHS_IMPORT_HOST;
    cfg.reclaim_order = (dhs_reclaim_order)reclaim;
    if (devmib) cfg.device_bytes = (uint64_t)devmib << 20;
    if (!n_pol) {
        for (int p = 0; p < DHS_SIM_POLICIES; p++) policies[n_pol++] = p;
    }
    for (int i = 0; i < n_hot; i++)
        if (hot[i] % cfg.page_rows) {
            char b[64];
            snprintf(b, sizeof b, "%" PRId64, hot[i]);
            return bad("hot-cache sizes must be multiples of --page-rows:", b);
        }
    if (tool_output(PROG, output)) return EXIT_USAGE;
    char err[512];
    dhs_sim_trace_info info;
    tool_progress prog;
    tool_progress_init(&prog, quiet, 5.0);
    tool_progress_msg(&prog, 1, "dhs sim: scanning %s", trace);
    if (dhs_sim_scan(trace, &info, err, sizeof err)) {
        tool_progress_end(&prog);
        fprintf(stderr, "dhs sim: %s\n", err);
        return EXIT_USAGE;
    }
    if (devmib) {
        /* the core addresses at most 2^31-1 pool rows (pages of --page-rows rows, each as wide as the
           trace's widest row): a larger pool is dhs_ctx_create's DHS_ERR_INVALID_ARG, refused here */
        dhs_arch a;
        dhs_trace_header_to_arch(&info.hdr, &a);
        uint64_t stride = 16;
        for (int32_t s = 0; s < a.n_sources; s++)
            if (((a.sources[s].row_bytes + 15u) & ~15u) > stride) stride = (a.sources[s].row_bytes + 15u) & ~15u;
        uint64_t pb = stride * (uint64_t)cfg.page_rows, max_pages = (uint64_t)(INT32_MAX / cfg.page_rows);
        if (cfg.device_bytes / pb > max_pages) {
            tool_progress_end(&prog);
            dhs_sim_trace_info_free(&info);
            return args_fail(PROG, "--device-mib %" PRId64 ": %" PRIu64 " pages of %d rows pass the core's 2^31-1 pool rows; "
                             "at most %" PRIu64 " for this trace (%" PRIu64 "-byte rows)", devmib, cfg.device_bytes / pb,
                             cfg.page_rows, ((max_pages + 1) * pb - 1) >> 20, stride);
        }
    }
    int progress = prog.on;
    int has_opt = 0;
    for (int i = 0; i < n_pol; i++) has_opt |= policies[i] == DHS_SIM_OPT;
    dhs_sim_oracle *oracle = NULL;
    if (has_opt) {
        tool_progress_msg(&prog, 1, "dhs sim: OPT oracle pass over %" PRIu64 " rounds ...", info.rounds);
        if (dhs_sim_oracle_build(trace, &info, &oracle, err, sizeof err)) {
            tool_progress_end(&prog);
            fprintf(stderr, "dhs sim: %s\n", err);
            dhs_sim_trace_info_free(&info);
            return EXIT_RUNTIME;
        }
    }
    int n_res = n_pol * n_hot, n_pl = per_layer ? n_res : 0;
    /* per-layer plans, one per --hot size (sim/tracestats.h: the greedy `dhs trace stats --budget` uses) */
    dhs_trace_hot_split *plan = per_layer ? calloc((size_t)n_hot, sizeof *plan) : NULL;
    if (per_layer) {
        if (!plan) { dhs_sim_trace_info_free(&info); dhs_sim_oracle_free(oracle); fprintf(stderr, "dhs sim: out of memory\n"); return EXIT_RUNTIME; }
        dhs_trace_loc_stats *LS = malloc(sizeof *LS);
        int bad_plan = !LS;
        if (!LS) snprintf(err, sizeof err, "out of memory");
        for (int hi = 0; hi < n_hot && !bad_plan; hi++) {
            tool_progress_msg(&prog, 1, "dhs sim: planning per-layer sizes for B=%" PRId64 " from %s", hot[hi], per_layer);
            if (dhs_trace_hot_plan(per_layer, hot[hi], cfg.page_rows, LS, &plan[hi], err, sizeof err)) bad_plan = 1;
            else if (LS->n_groups != info.hdr.n_groups || LS->n_groups > DHS_MAX_SOURCES) {
                snprintf(err, sizeof err, "%s has %d groups, the trace %d (at most %d)", per_layer, LS->n_groups,
                         info.hdr.n_groups, DHS_MAX_SOURCES);
                bad_plan = 1;
            }
        }
        free(LS);
        if (bad_plan) {
            tool_progress_end(&prog);
            fprintf(stderr, "dhs sim: --hot-per-layer: %s\n", err);
            free(plan);
            dhs_sim_oracle_free(oracle);
            dhs_sim_trace_info_free(&info);
            return EXIT_USAGE;
        }
    }
    dhs_sim_result *res = calloc((size_t)(n_res + n_pl), sizeof *res);
    if (!res) { free(plan); dhs_sim_trace_info_free(&info); dhs_sim_oracle_free(oracle); fprintf(stderr, "dhs sim: out of memory\n"); return EXIT_RUNTIME; }
    double tot_s = 0;
    uint64_t tot_e = 0;
    int rc = 0;
    {
        sim_job *jb = calloc((size_t)(n_res + n_pl), sizeof *jb);
        if (!jb) { fprintf(stderr, "dhs sim: out of memory\n"); rc = EXIT_RUNTIME; goto done; }
        int k = 0;
        for (int hi = 0; hi < n_hot; hi++)
            for (int pi = 0; pi < n_pol; pi++, k++) {
                jb[k].cfg = cfg;
                jb[k].cfg.hot_rows = (int32_t)hot[hi];
                jb[k].cfg.progress = progress ? sim_progress : NULL;
                jb[k].policy = policies[pi];
                jb[k].res = &res[k];
                snprintf(jb[k].tag, sizeof jb[k].tag, "%s B=%" PRId64, dhs_sim_policy_str(policies[pi]), hot[hi]);
            }
        for (int hi = 0; hi < n_hot && per_layer; hi++) /* results n_res.. : per-layer, same order */
            for (int pi = 0; pi < n_pol; pi++, k++) {
                jb[k] = jb[k - n_res];
                jb[k].res = &res[k];
                for (int32_t g = 0; g < info.hdr.n_groups; g++) jb[k].cfg.group_hot_rows[g] = (int32_t)plan[hi].rows[g];
                snprintf(jb[k].tag, sizeof jb[k].tag, "%s B=%" PRId64 " per layer", dhs_sim_policy_str(policies[pi]), hot[hi]);
            }
        if (!jobs) {
            long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
            jobs = ncpu < 1 ? 1 : ncpu > 8 ? 8 : (int)ncpu;
        }
        const int n_jobs = n_res + n_pl;
        sim_pool P = {jb, n_jobs, 0, 0, 0, &prog, trace, &info, oracle, PTHREAD_MUTEX_INITIALIZER};
        for (int i = 0; i < n_jobs; i++) jb[i].cfg.progress_user = &P;
        int nt = jobs < n_jobs ? jobs : n_jobs;
        tool_progress_msg(&prog, 1, "dhs sim: %d replays of %" PRIu64 " rounds on %d threads ...", n_jobs, info.rounds, nt);
        pthread_t th[64];
        int started = 0;
        for (int i = 1; i < nt; i++)
            if (pthread_create(&th[started], NULL, sim_worker, &P) == 0) started++;
        sim_worker(&P);
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < n_jobs && !rc; i++) {
            if (jb[i].rc) {
                tool_progress_end(&prog);
                fprintf(stderr, "dhs sim: %s: %s\n", jb[i].tag, jb[i].err);
                rc = EXIT_RUNTIME;
            }
            tot_s += res[i].replay_s;
            tot_e += res[i].selected_entries;
        }
        free(jb);
    }
    tool_progress_end(&prog);
    if (rc) goto done;
    double mps = tot_s > 0 ? (double)tot_e / tot_s / 1e6 : 0;
    const dhs_trace_header *h = &info.hdr;
    if (json) {
        printf("{");
        tool_prov_fields(stdout, "none");
        printf("\"trace\": {\"file\": ");
        json_str(stdout, trace);
        printf(", \"name\": ");
        json_str(stdout, h->name);
        printf(", \"groups\": %d, \"sources\": %d, \"requests\": %d, \"peak_live\": %d, \"k_max\": %d, \"max_k\": %d, "
               "\"rounds\": %" PRIu64 ", \"request_rounds\": %" PRIu64 ", \"selected_entries\": %" PRIu64
               ", \"tokens\": %" PRIu64 ", \"max_positions\": %" PRId64 "},\n",
               h->n_groups, h->n_sources, info.n_requests, info.peak_live, h->k_max, info.max_k, info.rounds, info.items,
               info.selected_entries, info.tokens, info.max_positions);
        char devmib[32];
        if (cfg.device_bytes) snprintf(devmib, sizeof devmib, "%" PRIu64, cfg.device_bytes >> 20);
        else snprintf(devmib, sizeof devmib, "null");
        printf(" \"config\": {\"mode\": \"payload_free\", \"import\": \"%s\", \"opt_fit\": %g, \"device_mib\": %s, \"page_rows\": %d, "
               "\"tail_rows\": %d, \"reclaim\": \"%s\"},\n",
               cfg.import_flags == DHS_IMPORT_DEVICE ? "device" : "host", cfg.opt_fit, devmib, cfg.page_rows, cfg.tail_rows,
               dhs_reclaim_order_str(cfg.reclaim_order));
        printf(" \"results\": [\n");
        for (int i = 0; i < n_res; i++) {
            dhs_sim_config ce = cfg;
            ce.hot_rows = res[i].hot_rows;
            print_result_json(stdout, &res[i], cfg.check_invariants, dhs_sim_effective_hot(&info, &ce));
            printf("%s\n", i + 1 < n_res ? "," : "");
        }
        printf(" ],\n");
        /* policy vs capacity (DESIGN §7): what doubling B buys against what a better policy buys */
        printf(" \"policy_vs_capacity\": [");
        int first = 1;
        for (int hi = 0; hi < n_hot; hi++) {
            dhs_sim_pvc v;
            if (dhs_sim_policy_vs_capacity(res, n_res, (int32_t)hot[hi], &v)) continue;
            printf("%s\n  {\"hot\": %" PRId64 ", \"lru_host_rows\": %" PRIu64 ", \"best_online\": \"%s\", \"best_online_cut_vs_lru\": %.4f",
                   first ? "" : ",", hot[hi], v.lru_host_rows, dhs_sim_policy_str(v.best_online), v.best_online_cut_vs_lru);
            if (v.opt_cut_vs_lru >= 0) printf(", \"opt_cut_vs_lru\": %.4f", v.opt_cut_vs_lru);
            if (v.lru_cut_by_doubling >= 0) printf(", \"lru_cut_by_doubling_hot\": %.4f", v.lru_cut_by_doubling);
            printf("}");
            first = 0;
        }
        printf("\n ],\n");
        if (per_layer) print_per_layer(stdout, 1, per_layer, res, n_res, n_pol, hot, n_hot, plan, h->n_groups);
        if (oracle)
            printf(" \"opt_oracle\": {\"references\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"build_s\": %.3f},\n",
                   dhs_sim_oracle_refs(oracle), dhs_sim_oracle_bytes(oracle), dhs_sim_oracle_build_s(oracle));
        printf(" \"replay_mentries_per_s_by_policy\": {");
        for (int pi = 0; pi < n_pol; pi++) {
            double e = 0, t = 0;
            for (int i = 0; i < n_res; i++)
                if (res[i].policy == policies[pi]) e += (double)res[i].selected_entries, t += res[i].replay_s;
            printf("%s\"%s\": %.2f", pi ? ", " : "", dhs_sim_policy_str(policies[pi]), t > 0 ? e / t / 1e6 : 0.0);
        }
        printf("},\n \"replay_mentries_per_s\": %.2f}\n", mps);
    } else {
        printf("trace %s: %d groups, %d requests (%d live at most), %" PRIu64 " rounds, %" PRIu64 " selected entries, %" PRIu64
               " tokens\n",
               trace, h->n_groups, info.n_requests, info.peak_live, info.rounds, info.selected_entries, info.tokens);
        printf("device pool: %s; import %s; payload-free replay through the core\n\n",
               cfg.device_bytes ? "fixed by --device-mib" : "required allocations + opt-fit x peak optional history",
               cfg.import_flags == DHS_IMPORT_DEVICE ? "device" : "host");
        printf("%-6s %7s %12s %10s %10s %8s %8s %8s %9s\n", "policy", "hot", "host_rows", "rows/tok", "miss_ratio", "direct",
               "hot", "host", "Mentry/s");
        for (int i = 0; i < n_res; i++) {
            const dhs_sim_result *r = &res[i];
            printf("%-6s %7d %12" PRIu64 " %10.2f %10.4f %8.4f %8.4f %8.4f %9.1f\n", dhs_sim_policy_str(r->policy), r->hot_rows,
                   r->host_rows, r->host_rows_per_token, r->miss_ratio, r->direct_share, r->hot_share, r->host_share,
                   r->mentries_per_s);
        }
        printf("\nmiss-ratio curves (hot-path entries served from host):\n%-6s", "hot");
        for (int pi = 0; pi < n_pol; pi++) printf(" %9s", dhs_sim_policy_str(policies[pi]));
        printf("\n");
        for (int hi = 0; hi < n_hot; hi++) {
            printf("%-6" PRId64, hot[hi]);
            for (int pi = 0; pi < n_pol; pi++) {
                const dhs_sim_result *r = dhs_sim_find(res, n_res, policies[pi], (int32_t)hot[hi]);
                printf(" %9.4f", r ? r->miss_ratio : 0.0);
            }
            printf("\n");
        }
        if (per_layer) print_per_layer(stdout, 0, per_layer, res, n_res, n_pol, hot, n_hot, plan, h->n_groups);
        if (cfg.check_invariants) {
            uint64_t v = 0;
            for (int i = 0; i < n_res + n_pl; i++) v += res[i].invariant_violations;
            printf("invariants checked after every event: %" PRIu64 " violation(s)\n", v);
        }
        for (int i = 0; i < n_res; i++)
            if (res[i].policy == DHS_SIM_OPT && res[i].opt_fallback_unknown)
                printf("note: OPT B=%d: %" PRIu64 " keys of rows promoted from staging were not exact\n", res[i].hot_rows,
                       res[i].opt_fallback_unknown);
        printf("\nreplay: %.1f M selected entries/s (%" PRIu64 " entries in %.2f s over %d runs); by policy:", mps, tot_e, tot_s, n_res + n_pl);
        for (int pi = 0; pi < n_pol; pi++) {
            double e = 0, t = 0;
            for (int i = 0; i < n_res; i++)
                if (res[i].policy == policies[pi]) e += (double)res[i].selected_entries, t += res[i].replay_s;
            printf(" %s %.1f", dhs_sim_policy_str(policies[pi]), t > 0 ? e / t / 1e6 : 0.0);
        }
        printf("\n");
        if (has_opt)
            printf("OPT oracle: %" PRIu64 " references numbered in %.2f s, %.1f MiB\n", dhs_sim_oracle_refs(oracle),
                   dhs_sim_oracle_build_s(oracle), (double)dhs_sim_oracle_bytes(oracle) / 1048576.0);
    }
    for (int i = 0; i < n_res + n_pl; i++)
        if (res[i].invariant_violations) {
            fprintf(stderr, "dhs sim: %s B=%d%s: %" PRIu64 " invariant violation(s)\n", dhs_sim_policy_str(res[i].policy),
                    res[i].hot_rows, res[i].per_group ? " per layer" : "", res[i].invariant_violations);
            rc = 1;
        }
    if (csv) {
        FILE *f = out_fopen(csv);
        if (!f) { fprintf(stderr, "dhs sim: cannot write %s\n", csv); rc = EXIT_RUNTIME; goto done; }
        fprintf(f, "policy,hot,host_rows,entries,census_direct,census_hot,census_host,host_rows_per_token,host_bytes,miss_ratio,"
                   "direct_share,hot_share,host_share,tokens,staging_rows,reclaims,device_bytes,replay_s,replay_mentries_per_s\n");
        for (int i = 0; i < n_res; i++) {
            const dhs_sim_result *r = &res[i];
            fprintf(f, "%s,%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.4f,%" PRIu64 ",%.6f,%.6f,%.6f,%.6f,%" PRIu64
                       ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.4f,%.2f\n",
                    dhs_sim_policy_str(r->policy), r->hot_rows, r->host_rows, r->st.entries, r->st.census_direct, r->st.census_hot,
                    r->st.census_host, r->host_rows_per_token, r->host_bytes, r->miss_ratio, r->direct_share, r->hot_share,
                    r->host_share, r->tokens, r->st.staging_rows, r->st.reclaims, r->device_bytes, r->replay_s, r->mentries_per_s);
        }
        if (fclose(f)) { fprintf(stderr, "dhs sim: cannot write %s\n", csv); rc = EXIT_RUNTIME; goto done; }
    }
    if (plot) {
        dhs_plot_series ser[DHS_SIM_POLICIES];
        double xs[DHS_SIM_POLICIES][MAX_SIZES], ys[DHS_SIM_POLICIES][MAX_SIZES];
        for (int pi = 0; pi < n_pol; pi++) {
            int n = 0;
            for (int hi = 0; hi < n_hot; hi++) {
                const dhs_sim_result *r = dhs_sim_find(res, n_res, policies[pi], (int32_t)hot[hi]);
                if (!r) continue;
                xs[pi][n] = (double)hot[hi];
                ys[pi][n] = r->miss_ratio;
                n++;
            }
            ser[pi] = (dhs_plot_series){dhs_sim_policy_str(policies[pi]), n, xs[pi], ys[pi]};
        }
        char title[300];
        snprintf(title, sizeof title, "miss ratio vs hot-cache size (%s)", h->name[0] ? h->name : trace);
        if (dhs_plot_svg(out_path(plot), title, "hot-cache rows B per request and group", "miss ratio (hot-path entries from host)", ser,
                         n_pol, 1)) {
            fprintf(stderr, "dhs sim: cannot write %s\n", plot);
            rc = EXIT_RUNTIME;
        }
    }
done:
    free(plan);
    free(res);
    dhs_sim_oracle_free(oracle);
    dhs_sim_trace_info_free(&info);
    return rc;
}
