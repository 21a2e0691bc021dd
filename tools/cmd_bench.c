/* dhs bench - benchmarks that print measured figures next to a baseline run
 * in the same process (ratios), never pass/fail timings.
 *
 *   dhs bench resolve   resolver entries/s at k = 2048 for several hot-cache
 *                       sizes B with the same misses per call, next to a
 *                       HiSparse-style slot-scan lookup of the same selections.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "cmds.h"
#include "dhs.h"
#include "sim/util.h"
#include "tool.h"

typedef struct {
    double us_per_call, mentries_per_s, scan_us_per_call, host_rows_per_call, direct, hot, host;
} resolve_fig;

/* HiSparse-style lookup: every slot of the cache is compared with the
   selection (a marker array stands in for the kernel's shared-memory set),
   so its cost grows with B. Returns hits (to keep the work observable). */
static int64_t scan_lookup(const int64_t *slot_rows, int32_t B, const int32_t *sel, int32_t k, uint32_t *mark,
                           uint32_t stamp, int32_t *out)
{
    for (int32_t i = 0; i < k; i++) mark[sel[i]] = stamp;
    int64_t hits = 0;
    for (int32_t q = 0; q < B; q++)
        if (slot_rows[q] >= 0 && mark[slot_rows[q]] == stamp) { hits++; out[q & 2047] = q; }
    return hits;
}

static int bench_resolve_one(int32_t B, int32_t k, int32_t misses, int32_t rounds, int32_t row_bytes, dhs_policy pol,
                             resolve_fig *f)
{
    int32_t warm = B / misses + 8;
    int64_t hist = (int64_t)B + (int64_t)misses * (rounds + warm + 64) + 2 * k + 64;
    int64_t total = hist + warm + rounds + 8; /* imported history + one new row per round */
    dhs_backend *be;
    if (dhs_backend_cpu_create(NULL, &be) != DHS_OK) return -1;
    dhs_arch a = dhs_arch_default();
    a.sources[0].row_bytes = (uint32_t)row_bytes;
    dhs_config c = dhs_config_default();
    c.max_requests = 1;
    c.max_k = k;
    c.hot_rows = B;
    c.max_rows = total;
    c.policy = pol;
    c.resident_first = 0; /* history on host: every lookup goes through the hot cache */
    c.device_bytes = (uint64_t)(B + c.tail_rows + 4 * c.page_rows) * (uint64_t)row_bytes;
    dhs_ctx *ctx;
    if (dhs_ctx_create(&a, &c, be, &ctx) != DHS_OK) { dhs_backend_destroy(be); return -1; }
    uint8_t *rows = aligned_alloc(64, (size_t)total * (size_t)row_bytes);
    for (int64_t i = 0; i < total * row_bytes; i++) rows[i] = (uint8_t)(i * 131 + 7);
    dhs_req r;
    const void *src[1] = {rows};
    if (dhs_request_open(ctx, hist, &r) != DHS_OK || dhs_request_import(ctx, r, hist, src, DHS_IMPORT_HOST) != DHS_OK) {
        dhs_ctx_destroy(ctx); dhs_backend_destroy(be); free(rows);
        return -1;
    }
    /* sliding selection: last round's rows minus the `misses` oldest plus
       `misses` never-seen rows -> k - misses hits and `misses` misses */
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)k), *loc = malloc(sizeof(int32_t) * (size_t)k);
    int64_t *slot_rows = malloc(sizeof(int64_t) * (size_t)B);
    uint32_t *mark = calloc((size_t)hist, sizeof(uint32_t));
    int32_t scan_out[2048];
    for (int32_t q = 0; q < B; q++) slot_rows[q] = (q * 7919) % hist;
    int64_t cursor = 0;
    double t_res = 0, t_scan = 0;
    int64_t sink = 0;
    dhs_reset_stats(ctx);
    for (int32_t round = 0; round < warm + rounds; round++) {
        for (int32_t i = 0; i < k; i++) sel[i] = (int32_t)((cursor + i) % hist);
        /* shuffle order deterministically so the selection is not sorted */
        for (int32_t i = k - 1; i > 0; i--) {
            int32_t j = (int32_t)(((uint64_t)i * 2654435761u + (uint64_t)round) % (uint64_t)(i + 1));
            int32_t t = sel[i]; sel[i] = sel[j]; sel[j] = t;
        }
        cursor += misses;
        int32_t one = 1, acc = 0;
        int64_t n;
        dhs_request_positions(ctx, r, &n);
        dhs_round_begin(ctx, 1, &r, &one);
        dhs_write_rows(ctx, r, 0, n, 1, rows + (uint64_t)n * row_bytes);
        dhs_resolve_item it = {r, 1, sel, loc};
        if (round == warm) dhs_reset_stats(ctx);
        double t0 = dhs_wall_s();
        dhs_status s = dhs_resolve(ctx, 0, k, 1, &it);
        double t1 = dhs_wall_s();
        sink += scan_lookup(slot_rows, B, sel, k, mark, (uint32_t)round + 1, scan_out);
        double t2 = dhs_wall_s();
        if (s != DHS_OK) { fprintf(stderr, "resolve failed: %s\n", dhs_status_str(s)); break; }
        if (round >= warm) { t_res += t1 - t0; t_scan += t2 - t1; }
        dhs_round_end(ctx, &acc);
    }
    dhs_stats st;
    dhs_get_stats(ctx, &st);
    f->us_per_call = 1e6 * t_res / rounds;
    f->mentries_per_s = (double)k * rounds / t_res / 1e6;
    f->scan_us_per_call = 1e6 * t_scan / rounds + (double)(sink & 0) ;
    f->host_rows_per_call = (double)st.host_rows_copied / rounds;
    double e = (double)(st.census_direct + st.census_hot + st.census_host);
    f->direct = st.census_direct / e;
    f->hot = st.census_hot / e;
    f->host = st.census_host / e;
    dhs_ctx_destroy(ctx);
    dhs_backend_destroy(be);
    free(rows); free(sel); free(loc); free(slot_rows); free(mark);
    return 0;
}

static const char *const bench_backends[] = {"cpu", NULL};
static const char *const bench_policies[] = {"lru", "clock", "fifo", "lfu", NULL};

static int bench_resolve(int argc, char **argv)
{
    int64_t Bs[8] = {2048, 8192, 65536};
    int nB = 3;
    int64_t k = 2048, misses = 64, rounds = 2000, row_bytes = 576, repeats64 = 5;
    int pol_i = 0, backend = 0, json = 0;
    const char *output = NULL;
    arg_spec sp[] = {
        {.name = "--backend", .type = ARG_ENUM, .dest = &backend, .choices = bench_backends,
         .help = "the resolver runs on the host (bench/gpu_bench.cu measures the GPU)"},
        {.name = "--hot", .type = ARG_I64_LIST, .dest = Bs, .ilo = 64, .ihi = 1 << 22, .count = &nB, .max = 8,
         .help = "hot-cache sizes B (multiples of 64, each >= k)"},
        A_I64("--k", &k, 1, 1 << 16, "entries per call"),
        A_I64("--misses", &misses, 1, 1 << 16, "misses per call (at most k)"),
        A_I64("--rounds", &rounds, 1, 1 << 24, "timed calls per size"),
        A_I64("--row-bytes", &row_bytes, 16, 1 << 16, "row size, a multiple of 16"),
        {.name = "--policy", .type = ARG_ENUM, .dest = &pol_i, .choices = bench_policies, .help = "hot-cache replacement"},
        A_I64("--repeat", &repeats64, 1, 16, "interleaved repeats (the median is reported)"),
        A_BOOL("--json", &json, "one JSON object (with version, commit, date, host, device)"),
        A_OUT("--output", &output, "write the results to FILE instead of stdout"),
    };
    arg_cmd cmd = {
        .prog = "dhs bench resolve",
        .about = "Resolver entries per second at k entries per call and a fixed number of misses per call,\n"
                 "for each hot-cache size B; next to it a HiSparse-style slot scan of the same selections\n"
                 "(the in-process baseline). Figures are ratios on this machine, not pass/fail timings.",
        .specs = sp,
        .n_specs = (int)(sizeof sp / sizeof sp[0]),
    };
    int pr = args_parse(&cmd, argc, argv, NULL, NULL);
    if (pr) return args_exit(pr);
    dhs_policy pol = (dhs_policy)pol_i;
    if (row_bytes % 16) return args_fail(cmd.prog, "--row-bytes must be a multiple of 16, got %lld", (long long)row_bytes);
    int repeats = (int)repeats64;
    if (misses > k) return args_fail(cmd.prog, "--misses (%lld) must not exceed --k (%lld)", (long long)misses, (long long)k);
    resolve_fig f[8], rep[8][16];
    for (int i = 0; i < nB; i++)
        if (Bs[i] % 64 || Bs[i] < k) return args_fail(cmd.prog, "--hot values must be multiples of 64 and >= --k (%lld), got %lld", (long long)k, (long long)Bs[i]);
    if (tool_output(cmd.prog, output)) return EXIT_RUNTIME;
    /* repeats interleave the sizes so drift in machine load hits all alike;
       the median of each size is reported, with the spread (min..max) */
    for (int r = 0; r < repeats; r++)
        for (int i = 0; i < nB; i++)
            if (bench_resolve_one((int32_t)Bs[i], (int32_t)k, (int32_t)misses, (int32_t)rounds, (int32_t)row_bytes, pol, &rep[i][r])) {
                fprintf(stderr, "dhs bench resolve: setup failed for B=%lld\n", (long long)Bs[i]);
                return EXIT_RUNTIME;
            }
    double lo[8], hi[8];
    for (int i = 0; i < nB; i++) {
        /* sort repeats by us_per_call (insertion sort, n <= 16) */
        for (int a = 1; a < repeats; a++)
            for (int b = a; b > 0 && rep[i][b].us_per_call < rep[i][b - 1].us_per_call; b--) {
                resolve_fig t = rep[i][b]; rep[i][b] = rep[i][b - 1]; rep[i][b - 1] = t;
            }
        f[i] = rep[i][repeats / 2];
        lo[i] = rep[i][0].us_per_call;
        hi[i] = rep[i][repeats - 1].us_per_call;
    }
    if (json) {
        printf("{");
        tool_prov_fields(stdout, "cpu");
        printf("\"bench\": \"resolve\", \"backend\": \"cpu\", \"k\": %lld, \"misses_per_call\": %lld, \"policy\": \"%s\", \"results\": [",
               (long long)k, (long long)misses, dhs_policy_str(pol));
        for (int i = 0; i < nB; i++)
            printf("%s{\"hot\": %lld, \"us_per_call\": %.3f, \"us_min\": %.3f, \"us_max\": %.3f, \"mentries_per_s\": %.2f, "
                   "\"ratio_to_first\": %.3f, \"scan_baseline_us_per_call\": %.3f, \"host_rows_per_call\": %.1f}",
                   i ? ", " : "", (long long)Bs[i], f[i].us_per_call, lo[i], hi[i], f[i].mentries_per_s,
                   f[i].us_per_call / f[0].us_per_call, f[i].scan_us_per_call, f[i].host_rows_per_call);
        printf("]}\n");
        return 0;
    }
    printf("resolver, CPU backend, one core: k = %lld entries per call, %lld misses per call, %s, %lld-byte rows,\n"
           "median of %d interleaved repeats of %lld calls (min..max in brackets)\n",
           (long long)k, (long long)misses, dhs_policy_str(pol), (long long)row_bytes, repeats, (long long)rounds);
    printf("%8s %22s %12s %8s | %16s %8s | %9s\n", "B", "us/call", "M entries/s", "vs B0", "scan baseline us", "vs B0",
           "host/call");
    for (int i = 0; i < nB; i++)
        printf("%8lld %7.2f [%5.1f..%5.1f] %12.2f %7.2fx | %16.2f %7.2fx | %9.1f\n", (long long)Bs[i], f[i].us_per_call, lo[i],
               hi[i], f[i].mentries_per_s, f[i].us_per_call / f[0].us_per_call, f[i].scan_us_per_call,
               f[i].scan_us_per_call / f[0].scan_us_per_call, f[i].host_rows_per_call);
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    static const arg_sub subs[] = {
        {"resolve", bench_resolve, "resolver entries/s vs hot-cache size (k = 2048), with a slot-scan baseline"},
    };
    return args_dispatch("dhs bench", "Benchmarks print measured figures next to an in-process baseline (ratios).", subs,
                         (int)(sizeof subs / sizeof subs[0]), argc, argv);
}
