/* cmd_trace.c - `dhs trace gen|info`: synthetic selection traces and their
 * statistics (format: docs/TRACE.md; statistics: sim/tracestats.c).
 * Exit status: 0 success, 2 bad usage or a bad file (unreadable, truncated,
 * corrupted, unwritable), 3 out of memory. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cmds.h"
#include "sim/trace.h"
#include "sim/tracegen.h"
#include "sim/tracestats.h"
#include "sim/util.h"
#include "outfile.h"
#include "tool.h"

/* ---------------------------------------------------------------- gen */
static const char *const orders[] = {"score", "sorted", NULL};

static int trace_gen(int argc, char **argv)
{
    dhs_tracegen_params p = dhs_tracegen_default();
    const char *out = NULL, *name = NULL, *locality = NULL;
    int loc_layer = 0;
    int64_t row_bytes = p.row_bytes, m = p.m;
    int order = p.sorted ? 1 : 0;
    arg_spec sp[] = {
        A_OUT("--out", &out, "output trace (required)"),
        A_U64("--seed", &p.seed, "random seed"),
        A_INT("--requests", &p.n_requests, 1, DHS_TRACE_MAX_REQUESTS, "requests"),
        A_INT("--rounds", &p.n_rounds, 1, INT32_MAX, "rounds at most"),
        {.name = "--batch", .type = ARG_INT, .dest = &p.batch, .ilo = 1, .ihi = INT32_MAX,
         .help = "live requests at most; later ones arrive when one ends", .def = "all"},
        A_I64("--out-len", &p.out_len, 0, INT64_C(1) << 36, "tokens per request, drawn in [T/2, T]; 0 = until the last round"),
        A_I64("--context", &p.context, 1, INT64_C(1) << 36, "largest imported prefix, positions"),
        {.name = "--context-min", .type = ARG_I64, .dest = &p.context_min, .ilo = 1, .ihi = INT64_C(1) << 36,
         .help = "smallest prefix", .def = "context/2"},
        A_INT("--spec", &p.spec, 1, DHS_TRACE_MAX_QUERIES, "queries per request per round (1 = no speculation)"),
        A_DBL("--accept", &p.accept, 0, 1, "acceptance probability per proposal"),
        A_INT("--k", &p.k, 1, DHS_TRACE_MAX_K, "rows per selection"),
        A_INT("--producers", &p.n_producers, 1, DHS_TRACE_MAX_GROUPS, "index producers / groups"),
        A_INT("--sources-per-producer", &p.sources_per_producer, 1, DHS_TRACE_MAX_SOURCES, "payload sources per producer"),
        A_I64("--row-bytes", &row_bytes, 1, UINT32_MAX, "bytes per row"),
        A_I64("--m", &m, 1, DHS_TRACE_MAX_M, "positions per row"),
        A_INT("--sinks", &p.loc.sinks, 0, 1 << 20, "attention sinks"),
        A_INT("--window", &p.loc.window, 0, 1 << 24, "local window"),
        A_INT("--window-full", &p.loc.window_full, 0, 1 << 24, "newest rows always selected"),
        A_DBL("--window-density", &p.loc.window_density, 0, 1, "share of the older window selected"),
        A_INT("--clusters", &p.loc.clusters, 0, 1 << 20, "topical sets per request"),
        A_INT("--cluster-radius", &p.loc.cluster_radius, 0, 1 << 20, "half-width of a topical band"),
        A_DBL("--cluster-density", &p.loc.cluster_density, 0, 1, "share of a band belonging to the topic"),
        A_DBL("--topic-on", &p.loc.topic_on, 0, 1, "off -> on per round"),
        A_DBL("--topic-off", &p.loc.topic_off, 0, 1, "on -> off per round"),
        A_INT("--drift", &p.loc.drift, 0, 1 << 20, "center step per round, uniform in [-D, D]"),
        A_DBL("--topic-switch", &p.loc.topic_switch, 0, 1, "per-round chance a set jumps elsewhere"),
        A_DBL("--tail-min", &p.loc.tail_min, 0, 1, "share of k kept for the random tail"),
        A_DBL("--spec-jitter", &p.loc.spec_jitter, 0, 1, "share of query 0's rows replaced in queries j > 0"),
        A_DBL("--overlap-min", &p.overlap_min, 0, 1, "adjacent-producer overlap, lower bound"),
        A_DBL("--overlap-max", &p.overlap_max, 0, 1, "adjacent-producer overlap, upper bound"),
        A_INT("--shift-radius", &p.shift_radius, 1, 1 << 20, "replaced rows move by 1..R"),
        {.name = "--order", .type = ARG_ENUM, .dest = &order, .choices = orders, .help = "order of rows within a query"},
        {.name = "--name", .type = ARG_STR, .dest = &name, .meta = "NAME", .help = "trace name", .def = p.name},
        {.name = "--locality", .type = ARG_STR, .dest = &locality, .meta = "PRESET|FILE.json",
         .help = "synthetic (the window/cluster model above, unchanged), random (uniform: alpha = k/N), dsv32-swe "
                 "(DeepSeek-V3.2 measured overlap; producer = layer), or a JSON model (docs/LOCALITY.md)",
         .def = "synthetic"},
        A_INT("--locality-layer", &loc_layer, 0, DHS_LOCALITY_MAX_LAYERS - 1,
              "producer g follows the model's layer L + g (e.g. one producer as a deep layer)"),
    };
    arg_cmd cmd = {
        .prog = "dhs trace gen",
        .synopsis = "--out FILE [flags]",
        .about = "Writes a synthetic selection trace. Deterministic: the same flags and seed give\n"
                 "the same bytes. Locality model and every parameter: docs/TRACE.md.",
        .specs = sp,
        .n_specs = (int)(sizeof sp / sizeof sp[0]),
    };
    int pr = args_parse(&cmd, argc, argv, NULL, NULL);
    if (pr) return args_exit(pr);
    p.row_bytes = (uint32_t)row_bytes;
    p.m = (uint32_t)m;
    p.sorted = order;
    if (!out) return args_fail(cmd.prog, "--out FILE is required");
    if (name) {
        if (strlen(name) > DHS_TRACE_NAME_MAX) return args_fail(cmd.prog, "--name longer than %d bytes", DHS_TRACE_NAME_MAX);
        snprintf(p.name, sizeof p.name, "%s", name);
    }
    char err[512];
    if (dhs_locality_model_load(locality, &p.lm, err, sizeof err)) {
        fprintf(stderr, "dhs trace gen: --locality %s\n", err);
        return EXIT_USAGE;
    }
    if (loc_layer > 0 && p.lm.n_layers > 0) { /* drop the layers before L; the last layer repeats */
        int32_t L = loc_layer < p.lm.n_layers ? loc_layer : p.lm.n_layers - 1;
        memmove(p.lm.alpha, p.lm.alpha + L, (size_t)(p.lm.n_layers - L) * sizeof *p.lm.alpha);
        memmove(p.lm.alpha_exp, p.lm.alpha_exp + L, (size_t)(p.lm.n_layers - L) * sizeof *p.lm.alpha_exp);
        p.lm.n_layers -= L;
    }
    if (dhs_tracegen_check(&p, err, sizeof err)) {
        fprintf(stderr, "dhs trace gen: %s\n", err);
        return EXIT_USAGE;
    }
    printf("seed %" PRIu64 "\n", p.seed);
    fflush(stdout);
    double t0 = dhs_wall_s();
    dhs_tracegen_summary s;
    dhs_trace_status st = dhs_tracegen_write(&p, out_path(out), &s, err, sizeof err);
    if (st) {
        fprintf(stderr, "dhs trace gen: %s (%s)\n", err, dhs_trace_status_str(st));
        return st == DHS_TRACE_ERR_NOMEM ? EXIT_RUNTIME : EXIT_USAGE;
    }
    double dt = dhs_wall_s() - t0;
    printf("wrote %s: %d requests, %" PRIu64 " rounds, %" PRIu64 " request-rounds, %" PRIu64
           " entries (%.2f%% padding), %" PRIu64 " bytes, %.2f s\n",
           out, s.requests_started, s.rounds, s.items, s.entries,
           s.entries ? 100.0 * (double)s.padding / (double)s.entries : 0.0, s.bytes, dt);
    return 0;
}

/* ---------------------------------------------------------------- info */
/* a number, or n/a when undefined (NaN) */
static const char *num(char *b, double x, int prec)
{
    if (isnan(x)) snprintf(b, 32, "n/a");
    else snprintf(b, 32, "%.*f", prec, x);
    return b;
}

static void info_progress(void *user, uint64_t rounds)
{
    tool_progress_msg(user, 0, "dhs trace info: %" PRIu64 " rounds read", rounds);
}

static int trace_info(int argc, char **argv)
{
    int json = 0, quiet = 0;
    const char *output = NULL;
    char *pos[1];
    int npos = 0;
    arg_spec sp[] = {
        A_BOOL("--json", &json, "one JSON object (with version, commit, date, host, device)"),
        A_OUT("--output", &output, "write the results to FILE instead of stdout"),
        {.name = "--quiet", .alias = 'q', .type = ARG_BOOL, .dest = &quiet, .help = "no progress on stderr"},
    };
    arg_cmd cmd = {
        .prog = "dhs trace info",
        .synopsis = "FILE [--json]",
        .about = "Reads the whole trace (validating it) and prints its header and totals:\n"
                 "requests, rounds, entries, padding share, duplicate rows within a query,\n"
                 "distinct rows, overlap with the request's previous round, mean reuse\n"
                 "distance, overlap between speculative queries and between adjacent producers,\n"
                 "and the reader's throughput. Keys: docs/TRACE.md.",
        .specs = sp,
        .n_specs = (int)(sizeof sp / sizeof sp[0]),
        .min_pos = 1,
        .max_pos = 1,
    };
    int pr = args_parse(&cmd, argc, argv, pos, &npos);
    if (pr) return args_exit(pr);
    const char *path = pos[0];
    if (args_check_in(cmd.prog, NULL, path)) return EXIT_USAGE;
    if (tool_output(cmd.prog, output)) return EXIT_USAGE;
    tool_progress prog;
    tool_progress_init(&prog, quiet, 5.0);
    char err[1024];
    dhs_trace_stats S;
    dhs_trace_status st = dhs_trace_stats_compute(path, &S, err, sizeof err, info_progress, &prog);
    tool_progress_end(&prog);
    if (st) {
        fprintf(stderr, "dhs trace info: %s\n", err);
        return st == DHS_TRACE_ERR_NOMEM ? EXIT_RUNTIME : EXIT_USAGE;
    }
    {
        double mrate = S.read_s > 0 ? (double)S.totals.entries / S.read_s / 1e6 : 0.0;
        if (json) {
            cJSON *o = cJSON_CreateObject(), *arr;
            tool_prov_cjson(o, "none");
            cJSON_AddStringToObject(o, "file", path);
            cJSON_AddNumberToObject(o, "trace_version", S.hdr.version);
            cJSON_AddStringToObject(o, "name", S.hdr.name);
            cJSON_AddStringToObject(o, "meta", S.hdr.meta);
            cJSON_AddNumberToObject(o, "groups", S.hdr.n_groups);
            arr = cJSON_AddArrayToObject(o, "k");
            for (int32_t g = 0; g < S.hdr.n_groups; g++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(S.hdr.k[g]));
            arr = cJSON_AddArrayToObject(o, "sources");
            for (int32_t s = 0; s < S.hdr.n_sources; s++) {
                cJSON *so = cJSON_CreateObject();
                cJSON_AddNumberToObject(so, "row_bytes", S.hdr.sources[s].row_bytes);
                cJSON_AddNumberToObject(so, "m", S.hdr.sources[s].m);
                cJSON_AddNumberToObject(so, "group", S.hdr.sources[s].group);
                cJSON_AddItemToArray(arr, so);
            }
            cJSON_AddNumberToObject(o, "requests_declared", S.hdr.n_requests);
            cJSON_AddNumberToObject(o, "k_max", S.hdr.k_max);
            cJSON_AddBoolToObject(o, "sorted_flag", (S.hdr.flags & DHS_TRACE_F_SORTED) != 0);
            cJSON_AddNumberToObject(o, "requests", (double)S.requests);
            cJSON_AddNumberToObject(o, "requests_ended", (double)S.ended);
            cJSON_AddNumberToObject(o, "rounds", (double)S.totals.rounds);
            cJSON_AddNumberToObject(o, "request_rounds", (double)S.totals.items);
            cJSON_AddNumberToObject(o, "queries", (double)S.totals.queries);
            cJSON_AddNumberToObject(o, "entries", (double)S.totals.entries);
            cJSON_AddNumberToObject(o, "selected_entries", (double)S.selected);
            cJSON_AddNumberToObject(o, "padding_entries", (double)S.padding);
            cJSON_AddNumberToObject(o, "padding_share", S.padding_share);
            cJSON_AddNumberToObject(o, "duplicate_entries", (double)S.duplicates);
            cJSON_AddNumberToObject(o, "unsorted_queries", (double)S.unsorted_queries);
            cJSON_AddNumberToObject(o, "distinct_rows", (double)S.distinct_rows);
            cJSON_AddNumberToObject(o, "mean_union_rows", S.mean_union_rows);
            cJSON_AddNumberToObject(o, "mean_new_rows", S.mean_new_rows);
            /* cJSON prints NaN as null */
            cJSON_AddNumberToObject(o, "prev_round_overlap", S.prev_round_overlap);
            cJSON_AddNumberToObject(o, "mean_reuse_distance", S.mean_reuse_distance);
            cJSON_AddNumberToObject(o, "first_touch_share", S.first_touch_share);
            cJSON_AddNumberToObject(o, "spec_overlap", S.spec_overlap);
            cJSON_AddNumberToObject(o, "producer_overlap", S.producer_overlap);
            cJSON_AddNumberToObject(o, "mean_accepted", S.mean_accepted);
            cJSON_AddNumberToObject(o, "mean_prefix", S.mean_prefix);
            cJSON_AddNumberToObject(o, "max_positions", (double)S.max_positions);
            cJSON_AddNumberToObject(o, "bytes", (double)S.bytes);
            cJSON_AddNumberToObject(o, "read_s", S.read_s);
            cJSON_AddNumberToObject(o, "read_mentries_per_s", mrate);
            cJSON_AddNumberToObject(o, "total_s", S.total_s);
            char *s = cJSON_Print(o);
            if (s) puts(s);
            free(s);
            cJSON_Delete(o);
        } else {
            printf("file                 %s\n", path);
            printf("trace_version        %u\n", S.hdr.version);
            printf("name                 %s\n", S.hdr.name);
            printf("meta                 %s\n", S.hdr.meta);
            printf("groups               %d   k =", S.hdr.n_groups);
            for (int32_t g = 0; g < S.hdr.n_groups; g++) printf(" %d", S.hdr.k[g]);
            printf("\nsources              %d  ", S.hdr.n_sources);
            for (int32_t s = 0; s < S.hdr.n_sources && s < 8; s++)
                printf(" [%d] row_bytes=%u m=%u group=%d", s, S.hdr.sources[s].row_bytes, S.hdr.sources[s].m,
                       S.hdr.sources[s].group);
            printf("%s\n", S.hdr.n_sources > 8 ? " ..." : "");
            printf("requests_declared    %d\n", S.hdr.n_requests);
            printf("k_max                %d\n", S.hdr.k_max);
            printf("sorted_flag          %s\n", S.hdr.flags & DHS_TRACE_F_SORTED ? "yes" : "no");
            printf("requests             %" PRIu64 " (%" PRIu64 " ended)\n", S.requests, S.ended);
            printf("rounds               %" PRIu64 "\n", S.totals.rounds);
            printf("request_rounds       %" PRIu64 "\n", S.totals.items);
            printf("queries              %" PRIu64 "\n", S.totals.queries);
            printf("entries              %" PRIu64 "\n", S.totals.entries);
            printf("selected_entries     %" PRIu64 "\n", S.selected);
            printf("padding_share        %.4f\n", S.padding_share);
            printf("duplicate_entries    %" PRIu64 "\n", S.duplicates);
            printf("unsorted_queries     %" PRIu64 "\n", S.unsorted_queries);
            printf("distinct_rows        %" PRIu64 "   (per request and group)\n", S.distinct_rows);
            printf("mean_union_rows      %.1f   (distinct rows per request-round and group)\n", S.mean_union_rows);
            printf("mean_new_rows        %.1f   (never selected before by the request)\n", S.mean_new_rows);
            char b1[32], b2[32], b3[32], b4[32], b5[32];
            printf("prev_round_overlap   %s   (share of a round's union selected in the request's previous round)\n",
                   num(b1, S.prev_round_overlap, 4));
            printf("mean_reuse_distance  %s   (request-rounds since a re-selected row's last selection)\n",
                   num(b2, S.mean_reuse_distance, 3));
            printf("first_touch_share    %s\n", num(b3, S.first_touch_share, 4));
            printf("spec_overlap         %s   (rows of query j>0 also in query 0)\n", num(b4, S.spec_overlap, 4));
            printf("producer_overlap     %s   (rows of producer g>0 also in producer g-1)\n", num(b5, S.producer_overlap, 4));
            printf("mean_accepted        %.3f\n", S.mean_accepted);
            printf("mean_prefix          %.1f\n", S.mean_prefix);
            printf("max_positions        %" PRId64 "\n", S.max_positions);
            printf("bytes                %" PRIu64 "\n", S.bytes);
            printf("read_s               %.3f   (%.1f M entries/s through the reader; %.3f s with statistics)\n",
                   S.read_s, mrate, S.total_s);
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- stats */
static int trace_stats(int argc, char **argv)
{
    int json = 0;
    const char *output = NULL, *cache = NULL;
    int64_t budget = 0;
    char *pos[1];
    int npos = 0;
    arg_spec sp[] = {
        A_BOOL("--json", &json, "one JSON object (with version, commit, date, host, device)"),
        A_OUT("--output", &output, "write the results to FILE instead of stdout"),
        {.name = "--cache", .type = ARG_STR, .dest = &cache, .meta = "B1,B2,..",
         .help = "LRU capacities in rows per request and group (at most 8)", .def = "k,2k,4k,8k of group 0"},
        A_I64("--budget", &budget, 0, INT64_C(1) << 40,
              "also size caches per group: N rows per request over all groups, each group 0 or a --cache size, "
              "greedy on the measured hit curves, against the same N split evenly"),
    };
    arg_cmd cmd = {
        .prog = "dhs trace stats",
        .synopsis = "FILE [--cache B1,B2,..] [--json]",
        .about = "Locality of any trace, per group (a generated trace's producer = a layer):\n"
                 "alpha = consecutive-step overlap of query 0 (|S_r & S_r-1| / k), its random\n"
                 "baseline k/V, overlap with group g-1's query 0 of the same round, and the hit\n"
                 "rate of an LRU cache of B rows per request and group. A trace written by\n"
                 "dhs trace gen --locality records its targets; they are printed next to the\n"
                 "measured alpha. Keys: docs/LOCALITY.md.",
        .specs = sp,
        .n_specs = (int)(sizeof sp / sizeof sp[0]),
        .min_pos = 1,
        .max_pos = 1,
    };
    int pr = args_parse(&cmd, argc, argv, pos, &npos);
    if (pr) return args_exit(pr);
    const char *path = pos[0];
    if (args_check_in(cmd.prog, NULL, path)) return EXIT_USAGE;
    int64_t B[DHS_TRACE_LOC_MAX_B];
    int32_t nb = 0;
    if (cache) {
        const char *s = cache;
        while (*s) {
            char *end;
            long long v = strtoll(s, &end, 10);
            if (end == s || v < 1 || v > (INT64_C(1) << 36) || (*end && *end != ',') || nb == DHS_TRACE_LOC_MAX_B)
                return args_fail(cmd.prog, "--cache wants 1..%d row counts >= 1, comma-separated", DHS_TRACE_LOC_MAX_B);
            B[nb++] = v;
            s = *end ? end + 1 : end;
        }
        if (nb == 0) return args_fail(cmd.prog, "--cache is empty");
    } else {
        dhs_trace_reader *r;
        char e2[512];
        if (dhs_trace_reader_open(path, 0, &r, e2, sizeof e2)) {
            fprintf(stderr, "dhs trace stats: %s\n", e2);
            return EXIT_USAGE;
        }
        int64_t k = dhs_trace_reader_header(r)->k[0];
        dhs_trace_reader_close(r);
        for (nb = 0; nb < 4; nb++) B[nb] = k << nb;
    }
    if (tool_output(cmd.prog, output)) return EXIT_RUNTIME;
    char err[1024];
    dhs_trace_loc_stats *S = malloc(sizeof *S);
    if (!S) return EXIT_RUNTIME;
    dhs_trace_status st = dhs_trace_loc_stats_compute(path, B, nb, S, err, sizeof err);
    if (st) {
        fprintf(stderr, "dhs trace stats: %s\n", err);
        free(S);
        return st == DHS_TRACE_ERR_NOMEM ? EXIT_RUNTIME : EXIT_USAGE;
    }
    /* per-group sizing: every group 0 (no cache) or one of the --cache sizes (sim/tracestats.h) */
    dhs_trace_hot_split Z;
    if (budget > 0 && dhs_trace_hot_split_compute(S, budget, 0, &Z, err, sizeof err)) {
        fprintf(stderr, "dhs trace stats: %s\n", err);
        free(S);
        return EXIT_USAGE;
    }
    if (json) {
        cJSON *o = cJSON_CreateObject();
        tool_prov_cjson(o, "none");
        cJSON_AddStringToObject(o, "file", path);
        cJSON_AddStringToObject(o, "preset", S->has_target ? S->preset : "");
        if (budget > 0) {
            cJSON *z = cJSON_AddObjectToObject(o, "sizing");
            cJSON_AddNumberToObject(z, "budget_rows", (double)budget);
            cJSON_AddNumberToObject(z, "even_rows_per_group", (double)Z.even_rows);
            cJSON_AddNumberToObject(z, "even_hit_rate", Z.even_hit);
            cJSON_AddNumberToObject(z, "sized_rows", (double)Z.used);
            cJSON_AddNumberToObject(z, "sized_hit_rate", Z.sized_hit);
            cJSON *za = cJSON_AddArrayToObject(z, "rows_per_group");
            for (int32_t g = 0; g < S->n_groups; g++) cJSON_AddItemToArray(za, cJSON_CreateNumber((double)Z.rows[g]));
        }
        cJSON_AddNumberToObject(o, "request_rounds", (double)S->request_rounds);
        cJSON *ba = cJSON_AddArrayToObject(o, "cache_rows");
        for (int32_t b = 0; b < S->n_b; b++) cJSON_AddItemToArray(ba, cJSON_CreateNumber((double)S->B[b]));
        cJSON *ha = cJSON_AddArrayToObject(o, "hit_rate_all");
        for (int32_t b = 0; b < S->n_b; b++) cJSON_AddItemToArray(ha, cJSON_CreateNumber(S->hit_all[b]));
        cJSON *ga = cJSON_AddArrayToObject(o, "groups");
        for (int32_t g = 0; g < S->n_groups; g++) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddNumberToObject(x, "group", g);
            cJSON_AddNumberToObject(x, "alpha", S->alpha[g]); /* NaN prints as null */
            cJSON_AddNumberToObject(x, "alpha_target", S->alpha_target[g]);
            cJSON_AddNumberToObject(x, "alpha_rounds", (double)S->alpha_n[g]);
            cJSON_AddNumberToObject(x, "random_alpha", S->random_alpha[g]);
            cJSON_AddNumberToObject(x, "cross", S->cross[g]);
            cJSON *hh = cJSON_AddArrayToObject(x, "hit_rate");
            for (int32_t b = 0; b < S->n_b; b++) cJSON_AddItemToArray(hh, cJSON_CreateNumber(S->hit[g][b]));
            cJSON_AddItemToArray(ga, x);
        }
        char *s = cJSON_Print(o);
        if (s) puts(s);
        free(s);
        cJSON_Delete(o);
    } else {
        char b1[32], b2[32], b3[32], b4[32];
        printf("file %s   preset %s   request-rounds %" PRIu64 "\n", path, S->has_target ? S->preset : "(none recorded)",
               S->request_rounds);
        printf("group  alpha   target  random(k/V)  cross   LRU hit rate at B =");
        for (int32_t b = 0; b < S->n_b; b++) printf(" %" PRId64, S->B[b]);
        printf("\n");
        for (int32_t g = 0; g < S->n_groups; g++) {
            printf("%5d  %-6s  %-6s  %-11s  %-6s ", g, num(b1, S->alpha[g], 4), num(b2, S->alpha_target[g], 4),
                   num(b3, S->random_alpha[g], 4), num(b4, S->cross[g], 4));
            for (int32_t b = 0; b < S->n_b; b++) printf(" %s", num(b1, S->hit[g][b], 4));
            printf("\n");
        }
        printf("all                                        ");
        for (int32_t b = 0; b < S->n_b; b++) printf(" %s", num(b1, S->hit_all[b], 4));
        printf("\n");
        if (budget > 0) {
            printf("sizing: %" PRId64 " rows per request over %d groups\n", budget, S->n_groups);
            printf("  even      %" PRId64 " rows per group: hit rate %.4f\n", Z.even_rows, Z.even_hit);
            printf("  per group %" PRId64 " rows used:      hit rate %.4f   rows per group:", Z.used, Z.sized_hit);
            for (int32_t g = 0; g < S->n_groups; g++) printf(" %" PRId64, Z.rows[g]);
            printf("\n");
        }
    }
    free(S);
    return 0;
}

/* ---------------------------------------------------------------- entry */
int cmd_trace(int argc, char **argv)
{
    static const arg_sub subs[] = {
        {"gen", trace_gen, "write a synthetic selection trace (locality model: docs/TRACE.md)"},
        {"info", trace_info, "print a trace's header and totals (reuse, overlap, padding)"},
        {"stats", trace_stats, "per-group alpha, cross-group overlap and LRU hit rate vs B (docs/LOCALITY.md)"},
    };
    return args_dispatch("dhs trace", "Selection traces (format: docs/TRACE.md).", subs, (int)(sizeof subs / sizeof subs[0]),
                         argc, argv);
}
