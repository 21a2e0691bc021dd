/* cmd_sim.c - `dhs sim`: replay a selection trace through the real core
 * (payload-free) for policies x hot-cache sizes; census, host rows per token,
 * miss-ratio curves; text, JSON, CSV, SVG (docs/SIM.md).
 * Exit status: 0 success, 2 bad flags or a bad trace, 1 a replay failure. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cmds.h"
#include "sim/sim.h"

#define MAX_SIZES 32

static void sim_usage(FILE *f)
{
    fprintf(f,
            "usage: dhs sim --trace FILE [flags]\n\n"
            "Replays a selection trace (dhs trace gen, docs/TRACE.md) through the real core in\n"
            "payload-free mode for every policy and hot-cache size; prints the census\n"
            "(direct / hot / host entries), host rows per token and miss-ratio curves.\n\n"
            "  --trace FILE         selection trace (required)\n"
            "  --policies LIST      comma list of lru,clock,fifo,lfu,opt (lru,clock,fifo,lfu,opt);\n"
            "                       opt = offline Belady with the trace's next uses (the bound)\n"
            "  --hot LIST           hot-cache rows B per request and group (2048,4096,8192,16384)\n"
            "  --page-rows P        rows per page (64); B must be a multiple\n"
            "  --tail-rows T        tail rows per request and source (0 = max(128, 2 K_max))\n"
            "  --opt-fit F          device pool beyond required allocations, as a share of the\n"
            "                       largest optional history live at once (0: it does not fit, the\n"
            "                       hot cache decides; 1: every imported row stays resident)\n"
            "  --device-mib M       device pool size in MiB (overrides --opt-fit)\n"
            "  --import device|host prefill rows arrive on the device (resident-first) or on host (device)\n"
            "  --reclaim ORDER      most-pages | oldest | newest (most-pages)\n"
            "  --check              check every invariant after every event (slow; exit 1 on a violation)\n"
            "  --json               JSON on stdout instead of the table\n"
            "  --csv FILE           one CSV row per policy and size\n"
            "  --plot FILE          SVG: miss ratio against hot-cache size, one line per policy\n"
            "  -q, --quiet          no progress on stderr\n"
            "  -h, --help           this help\n");
}

enum { O_TRACE = 256, O_POLICIES, O_HOT, O_PAGE, O_TAIL, O_OPTFIT, O_DEVMIB, O_IMPORT, O_RECLAIM, O_CHECK, O_JSON, O_CSV, O_PLOT };

static int bad(const char *msg, const char *val)
{
    fprintf(stderr, "dhs sim: %s%s%s%s (see dhs sim --help)\n", msg, val ? " '" : "", val ? val : "", val ? "'" : "");
    return 2;
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

static void print_result_json(FILE *f, const dhs_sim_result *r, int check)
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
    if (check) fprintf(f, ", \"invariant_violations\": %" PRIu64, r->invariant_violations);
    if (r->policy == DHS_SIM_OPT)
        fprintf(f, ", \"oracle_calls\": %" PRIu64 ", \"oracle_stale\": %" PRIu64 ", \"opt_references\": %" PRIu64
                   ", \"opt_hot_path_references\": %" PRIu64 ", \"opt_record_s\": %.4f, \"opt_inexact_keys\": %" PRIu64,
                r->oracle_calls, r->oracle_stale, r->opt_refs, r->opt_hot_refs, r->opt_record_s, r->opt_fallback_unknown);
    fprintf(f, "}");
}

static const dhs_sim_result *find(const dhs_sim_result *res, int n, int policy, int32_t hot)
{
    for (int i = 0; i < n; i++)
        if (res[i].policy == policy && res[i].hot_rows == hot) return &res[i];
    return NULL;
}

int cmd_sim(int argc, char **argv)
{
    const char *trace = NULL, *csv = NULL, *plot = NULL;
    int policies[DHS_SIM_POLICIES], n_pol = 0, json = 0, quiet = 0;
    int64_t hot[MAX_SIZES];
    int n_hot = 0;
    dhs_sim_config cfg = dhs_sim_config_default();
    static const struct option opts[] = {
        {"trace", required_argument, 0, O_TRACE}, {"policies", required_argument, 0, O_POLICIES},
        {"hot", required_argument, 0, O_HOT}, {"page-rows", required_argument, 0, O_PAGE},
        {"tail-rows", required_argument, 0, O_TAIL}, {"opt-fit", required_argument, 0, O_OPTFIT},
        {"device-mib", required_argument, 0, O_DEVMIB}, {"import", required_argument, 0, O_IMPORT},
        {"reclaim", required_argument, 0, O_RECLAIM}, {"check", no_argument, 0, O_CHECK},
        {"json", no_argument, 0, O_JSON}, {"csv", required_argument, 0, O_CSV}, {"plot", required_argument, 0, O_PLOT},
        {"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    int64_t v;
    double d;
    while ((c = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
        switch (c) {
        case 'h': sim_usage(stdout); return 0;
        case 'q': quiet = 1; break;
        case O_TRACE: trace = optarg; break;
        case O_POLICIES: {
            n_pol = 0;
            char buf[256];
            snprintf(buf, sizeof buf, "%s", optarg);
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int p;
                if (dhs_sim_policy_parse(t, &p)) return bad("unknown policy", t);
                int dup = 0;
                for (int i = 0; i < n_pol; i++) dup |= policies[i] == p;
                if (!dup) policies[n_pol++] = p;
            }
            if (!n_pol) return bad("--policies wants a list", optarg);
            break;
        }
        case O_HOT:
            n_hot = arg_i64_list(optarg, 1, 1 << 24, hot, MAX_SIZES);
            if (n_hot < 1) return bad("--hot wants a comma list of row counts", optarg);
            break;
        case O_PAGE:
            if (arg_i64(optarg, 1, 1 << 16, &v)) return bad("--page-rows wants 1..65536", optarg);
            cfg.page_rows = (int32_t)v;
            break;
        case O_TAIL:
            if (arg_i64(optarg, 0, 1 << 20, &v)) return bad("--tail-rows wants 0..2^20", optarg);
            cfg.tail_rows = (int32_t)v;
            break;
        case O_OPTFIT:
            if (arg_f64(optarg, 0, 1e6, &d)) return bad("--opt-fit wants a number >= 0", optarg);
            cfg.opt_fit = d;
            break;
        case O_DEVMIB:
            if (arg_i64(optarg, 1, (int64_t)1 << 30, &v)) return bad("--device-mib wants a positive integer", optarg);
            cfg.device_bytes = (uint64_t)v << 20;
            break;
        case O_IMPORT:
            if (!strcmp(optarg, "device")) cfg.import_flags = DHS_IMPORT_DEVICE;
            else if (!strcmp(optarg, "host")) cfg.import_flags = DHS_IMPORT_HOST;
            else return bad("--import wants device or host", optarg);
            break;
        case O_RECLAIM:
            if (!strcmp(optarg, "most-pages")) cfg.reclaim_order = DHS_RECLAIM_MOST_PAGES;
            else if (!strcmp(optarg, "oldest")) cfg.reclaim_order = DHS_RECLAIM_OLDEST;
            else if (!strcmp(optarg, "newest")) cfg.reclaim_order = DHS_RECLAIM_NEWEST;
            else return bad("--reclaim wants most-pages, oldest or newest", optarg);
            break;
        case O_CHECK: cfg.check_invariants = 1; break;
        case O_JSON: json = 1; break;
        case O_CSV: csv = optarg; break;
        case O_PLOT: plot = optarg; break;
        default: return bad("unknown option or missing value", optind - 1 < argc ? argv[optind - 1] : "?");
        }
    }
    if (optind < argc) return bad("unexpected argument", argv[optind]);
    if (!trace) return bad("--trace FILE is required", NULL);
    if (!n_pol) {
        for (int p = 0; p < DHS_SIM_POLICIES; p++) policies[n_pol++] = p;
    }
    if (!n_hot) {
        hot[0] = 2048; hot[1] = 4096; hot[2] = 8192; hot[3] = 16384;
        n_hot = 4;
    }
    for (int i = 0; i < n_hot; i++)
        if (hot[i] % cfg.page_rows) {
            char b[64];
            snprintf(b, sizeof b, "%" PRId64, hot[i]);
            return bad("hot-cache sizes must be multiples of --page-rows:", b);
        }
    char err[512];
    dhs_sim_trace_info info;
    if (dhs_sim_scan(trace, &info, err, sizeof err)) {
        fprintf(stderr, "dhs sim: %s\n", err);
        return 2;
    }
    int progress = !quiet && isatty(STDERR_FILENO);
    int has_opt = 0;
    for (int i = 0; i < n_pol; i++) has_opt |= policies[i] == DHS_SIM_OPT;
    dhs_sim_oracle *oracle = NULL;
    if (has_opt) {
        if (progress) fprintf(stderr, "\rdhs sim: OPT oracle pass...");
        if (dhs_sim_oracle_build(trace, &info, &oracle, err, sizeof err)) {
            fprintf(stderr, "dhs sim: %s\n", err);
            dhs_sim_trace_info_free(&info);
            return 1;
        }
    }
    int n_res = n_pol * n_hot;
    dhs_sim_result *res = calloc((size_t)n_res, sizeof *res);
    if (!res) { dhs_sim_trace_info_free(&info); dhs_sim_oracle_free(oracle); fprintf(stderr, "dhs sim: out of memory\n"); return 1; }
    double tot_s = 0;
    uint64_t tot_e = 0;
    int k = 0, rc = 0;
    for (int hi = 0; hi < n_hot && !rc; hi++) {
        for (int pi = 0; pi < n_pol; pi++) {
            cfg.hot_rows = (int32_t)hot[hi];
            if (progress)
                fprintf(stderr, "\rdhs sim: %-5s B=%-6d (%d/%d)      ", dhs_sim_policy_str(policies[pi]), cfg.hot_rows, k + 1, n_res);
            if (dhs_sim_replay(trace, &info, &cfg, policies[pi], oracle, &res[k], err, sizeof err)) {
                fprintf(stderr, "%sdhs sim: %s B=%d: %s\n", progress ? "\n" : "", dhs_sim_policy_str(policies[pi]),
                        cfg.hot_rows, err);
                rc = 1;
                break;
            }
            tot_s += res[k].replay_s;
            tot_e += res[k].selected_entries;
            k++;
        }
    }
    if (progress) fprintf(stderr, "\r%60s\r", "");
    if (rc) goto done;
    double mps = tot_s > 0 ? (double)tot_e / tot_s / 1e6 : 0;
    const dhs_trace_header *h = &info.hdr;
    if (json) {
        printf("{\"trace\": {\"file\": ");
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
            print_result_json(stdout, &res[i], cfg.check_invariants);
            printf("%s\n", i + 1 < n_res ? "," : "");
        }
        printf(" ],\n");
        /* policy vs capacity (DESIGN §7): what doubling B buys against what a better policy buys */
        printf(" \"policy_vs_capacity\": [");
        int first = 1;
        for (int hi = 0; hi < n_hot; hi++) {
            const dhs_sim_result *lru = find(res, n_res, DHS_POLICY_LRU, (int32_t)hot[hi]);
            if (!lru) continue;
            const dhs_sim_result *best = NULL, *opt = find(res, n_res, DHS_SIM_OPT, (int32_t)hot[hi]);
            for (int pi = 0; pi < n_pol; pi++) {
                if (policies[pi] == DHS_SIM_OPT) continue;
                const dhs_sim_result *r = find(res, n_res, policies[pi], (int32_t)hot[hi]);
                if (r && (!best || r->host_rows < best->host_rows)) best = r;
            }
            const dhs_sim_result *dbl = find(res, n_res, DHS_POLICY_LRU, (int32_t)(2 * hot[hi]));
            double lr = (double)lru->host_rows;
            printf("%s\n  {\"hot\": %" PRId64 ", \"lru_host_rows\": %" PRIu64 ", \"best_online\": \"%s\", \"best_online_cut_vs_lru\": %.4f",
                   first ? "" : ",", hot[hi], lru->host_rows, dhs_sim_policy_str(best->policy),
                   lr > 0 ? 1 - (double)best->host_rows / lr : 0.0);
            if (opt) printf(", \"opt_cut_vs_lru\": %.4f", lr > 0 ? 1 - (double)opt->host_rows / lr : 0.0);
            if (dbl) printf(", \"lru_cut_by_doubling_hot\": %.4f", lr > 0 ? 1 - (double)dbl->host_rows / lr : 0.0);
            printf("}");
            first = 0;
        }
        printf("\n ],\n");
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
                const dhs_sim_result *r = find(res, n_res, policies[pi], (int32_t)hot[hi]);
                printf(" %9.4f", r ? r->miss_ratio : 0.0);
            }
            printf("\n");
        }
        if (cfg.check_invariants) {
            uint64_t v = 0;
            for (int i = 0; i < n_res; i++) v += res[i].invariant_violations;
            printf("invariants checked after every event: %" PRIu64 " violation(s)\n", v);
        }
        for (int i = 0; i < n_res; i++)
            if (res[i].policy == DHS_SIM_OPT && res[i].opt_fallback_unknown)
                printf("note: OPT B=%d: %" PRIu64 " keys of rows promoted from staging were not exact\n", res[i].hot_rows,
                       res[i].opt_fallback_unknown);
        printf("\nreplay: %.1f M selected entries/s (%" PRIu64 " entries in %.2f s over %d runs); by policy:", mps, tot_e, tot_s, n_res);
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
    for (int i = 0; i < n_res; i++)
        if (res[i].invariant_violations) {
            fprintf(stderr, "dhs sim: %s B=%d: %" PRIu64 " invariant violation(s)\n", dhs_sim_policy_str(res[i].policy),
                    res[i].hot_rows, res[i].invariant_violations);
            rc = 1;
        }
    if (csv) {
        FILE *f = fopen(csv, "w");
        if (!f) { fprintf(stderr, "dhs sim: cannot write %s\n", csv); rc = 2; goto done; }
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
        if (fclose(f)) { fprintf(stderr, "dhs sim: cannot write %s\n", csv); rc = 2; goto done; }
    }
    if (plot) {
        dhs_plot_series ser[DHS_SIM_POLICIES];
        double xs[DHS_SIM_POLICIES][MAX_SIZES], ys[DHS_SIM_POLICIES][MAX_SIZES];
        for (int pi = 0; pi < n_pol; pi++) {
            int n = 0;
            for (int hi = 0; hi < n_hot; hi++) {
                const dhs_sim_result *r = find(res, n_res, policies[pi], (int32_t)hot[hi]);
                if (!r) continue;
                xs[pi][n] = (double)hot[hi];
                ys[pi][n] = r->miss_ratio;
                n++;
            }
            ser[pi] = (dhs_plot_series){dhs_sim_policy_str(policies[pi]), n, xs[pi], ys[pi]};
        }
        char title[300];
        snprintf(title, sizeof title, "miss ratio vs hot-cache size (%s)", h->name[0] ? h->name : trace);
        if (dhs_plot_svg(plot, title, "hot-cache rows B per request and group", "miss ratio (hot-path entries from host)", ser,
                         n_pol, 1)) {
            fprintf(stderr, "dhs sim: cannot write %s\n", plot);
            rc = 2;
        }
    }
done:
    free(res);
    dhs_sim_oracle_free(oracle);
    dhs_sim_trace_info_free(&info);
    return rc;
}
