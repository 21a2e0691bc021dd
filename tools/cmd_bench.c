/* dhs bench - benchmarks that print measured figures next to a baseline run
 * in the same process (ratios), never pass/fail timings.
 *
 *   dhs bench resolve   --backend cpu: resolver entries/s at k = 2048 for several
 *                       hot-cache sizes B with the same misses per call, next to
 *                       a HiSparse-style slot-scan lookup of the same selections.
 *                       --backend cuda: the device resolver's kernels against an
 *                       O(B) scan kernel and the gather ceiling (bench/dres_bench.cu,
 *                       linked in when the CUDA backend is built).
 *   dhs bench serve     the reference model served under one device KV budget,
 *                       resident vs fixed-hot vs adaptive (cmd_bench_serve.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "dres_bench.h"
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
    c.sel_k = k;
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

static const char *const bench_backends[] = {"cpu", "cuda", NULL};
static const char *const bench_policies[] = {"lru", "clock", "fifo", "lfu", NULL};
static const char *const bench_layouts[] = {"compact", "scattered", "both", NULL};

/* --backend cuda: the device resolver's kernels (bench/dres_bench.cu, linked into the tool when the CUDA
   backend is built) on the lists given; exit 2 on bad lists and when no CUDA backend or device is there
   (the one "not available here" status of every command) */
static int bench_resolve_cuda(const char *prog, const dhs_bench_resolve_opts *o, const char *output)
{
    char why[256];
    if (dhs_bench_resolve_validate(o, why, sizeof why)) return args_fail(prog, "--backend cuda: %s", why);
    if (tool_check_backend(prog, "cuda")) return EXIT_USAGE; /* one line on stderr: why */
#ifdef DHS_BENCH_RESOLVE_CUDA
    if (tool_output(prog, output)) return EXIT_USAGE;
    dhs_bench_resolve_opts r = *o;
    char *prov = NULL;
    size_t prov_n = 0;
    FILE *pf = open_memstream(&prov, &prov_n);
    if (pf) {
        tool_prov_fields(pf, "cuda");
        fclose(pf);
    }
    r.prov = prov;
    int rc = dhs_bench_resolve_cuda(&r);
    free(prov);
    return rc;
#else
    (void)output;
    fprintf(stderr, "%s: --backend cuda: this dhs was built without the CUDA backend\n", prog);
    return EXIT_USAGE;
#endif
}

/* a flag given that only the other backend takes: a usage error naming it, else 0 */
typedef struct flag_seen {
    int seen;
    const char *flag;
} flag_seen;
static int other_backend_flag(const char *prog, const flag_seen *f, size_t n, const char *only)
{
    for (size_t i = 0; i < n; i++)
        if (f[i].seen) return args_fail(prog, "%s applies to --backend %s only", f[i].flag, only);
    return 0;
}

static int bench_resolve(int argc, char **argv)
{
    int64_t Bs[8] = {2048, 8192, 65536};
    int nB = 3;
    int64_t batch[8] = {1, 8, 64, 256}, mis[8] = {64}, qs[8] = {1, 4};
    int nbatch = 4, nmis = 1, nq = 2;
    int64_t k = 2048, rounds = 2000, row_bytes = 576, repeats64 = 5;
    int32_t reps = 60, graph_calls = 16, carveout = -1, copy_blocks = 0;
    double span_gib = 8;
    int pol_i = 0, backend = 0, json = 0, layout = 2, pages = 0, brk = 0, quiet = 0, plan_path = 0, seen_path = 0,
        fresh = 0, direct = 0;
    static const char *const plan_paths[] = {"few", "block", "both", "copy", "all", NULL};
    static const int plan_bits[] = {DHS_BENCH_PATH_FEW, DHS_BENCH_PATH_BLOCK, DHS_BENCH_PATH_FEW | DHS_BENCH_PATH_BLOCK,
                                    DHS_BENCH_PATH_COPY, DHS_BENCH_PATH_FEW | DHS_BENCH_PATH_BLOCK | DHS_BENCH_PATH_COPY};
    int seen_hot = 0, seen_mis = 0, seen_row = 0, seen_batch = 0, seen_q = 0, seen_rounds = 0, seen_pol = 0,
        seen_repeat = 0, seen_reps = 0, seen_graph = 0, seen_layout = 0, seen_span = 0, seen_pages = 0, seen_carve = 0,
        seen_cblk = 0;
    const char *output = NULL;
    arg_spec sp[] = {
        {.name = "--backend", .type = ARG_ENUM, .dest = &backend, .choices = bench_backends,
         .help = "cpu: the host resolver on one core; cuda: the device resolver's plan + copy kernels against an "
                 "O(B) scan baseline and the gather ceiling (needs a CUDA build and a device, else exit 2)"},
        {.name = "--hot", .type = ARG_I64_LIST, .dest = Bs, .ilo = 64, .ihi = 1 << 22, .count = &nB, .max = 8,
         .seen = &seen_hot, .def = "cpu 2048,8192,65536; cuda 2048,4096,16384,65536",
         .help = "hot-cache sizes B (multiples of 64, each >= k; cuda: at most 65536)"},
        {.name = "--hot-rows", .type = ARG_I64_LIST, .dest = Bs, .ilo = 64, .ihi = 1 << 22, .count = &nB, .max = 8,
         .seen = &seen_hot, .def = "as --hot", .help = "the same as --hot"},
        {.name = "--batch", .type = ARG_I64_LIST, .dest = batch, .ilo = 1, .ihi = 256, .count = &nbatch, .max = 8,
         .seen = &seen_batch, .help = "cuda: requests per call"},
        {.name = "--misses", .type = ARG_I64_LIST, .dest = mis, .ilo = 0, .ihi = 1 << 16, .count = &nmis, .max = 8,
         .seen = &seen_mis, .def = "cpu 64; cuda 0,32,300,2048",
         .help = "misses per call (cpu: one value, 1..k) or per request (cuda: each at most k)"},
        {.name = "--queries", .type = ARG_I64_LIST, .dest = qs, .ilo = 1, .ihi = 4, .count = &nq, .max = 8,
         .seen = &seen_q, .help = "cuda: queries K per request (the K selections share their rows)"},
        A_I64("--k", &k, 1, 1 << 16, "entries per call (cuda: per query, 64..2048)"),
        {.name = "--row-bytes", .type = ARG_I64, .dest = &row_bytes, .ilo = 16, .ihi = 1 << 16, .seen = &seen_row,
         .def = "cpu 576; cuda 656", .help = "row size, a multiple of 16 (cuda: at most 8192)"},
        {.name = "--rounds", .type = ARG_I64, .dest = &rounds, .ilo = 1, .ihi = 1 << 24, .seen = &seen_rounds,
         .help = "cpu: timed calls per size"},
        {.name = "--policy", .type = ARG_ENUM, .dest = &pol_i, .choices = bench_policies, .seen = &seen_pol,
         .help = "cpu: hot-cache replacement"},
        {.name = "--repeat", .type = ARG_I64, .dest = &repeats64, .ilo = 1, .ihi = 16, .seen = &seen_repeat,
         .help = "cpu: interleaved repeats (the median is reported)"},
        {.name = "--reps", .type = ARG_INT, .dest = &reps, .ilo = 10, .ihi = 100000, .seen = &seen_reps,
         .help = "cuda: timed repetitions of every timing (p50 and p90 of them)"},
        {.name = "--graph-calls", .type = ARG_INT, .dest = &graph_calls, .ilo = 1, .ihi = 256, .seen = &seen_graph,
         .help = "cuda: R, resolves captured back to back in ONE graph for the M = 0 configurations (per call = "
                 "graph time / R: a resolve inside a captured decode step, without the per-launch event floor)"},
        {.name = "--carveout", .type = ARG_INT, .dest = &carveout, .ilo = -1, .ihi = 100, .seen = &seen_carve,
         .help = "cuda: the resolver kernels' preferred shared-memory carveout, percent of the SM's L1 / shared "
                 "storage (an experiment: whether the plan and copy kernels share an SM); -1 = the driver's "
                 "default"},
        {.name = "--copy-blocks", .type = ARG_INT, .dest = &copy_blocks, .ilo = 0, .ihi = 65536, .seen = &seen_cblk,
         .help = "cuda: the copy kernel's grid in blocks; 0 = the library's (its blocks per SM x the SMs)"},
        A_BOOL("--fresh-rounds", &fresh,
               "cuda: without misses, every call starts a new round, so each hit is protected by an atomic as in a "
               "decode step's first call of a group (without it the calls repeat one round and, after the first, "
               "only read the hot slots' round stamps); with misses every call already starts from a fresh state"),
        A_BOOL("--direct", &direct,
               "cuda: each compact configuration without misses again with every row in the tail window (a round "
               "that cannot miss): the direct kernel (DHS_RESOLVE_DIRECT) against the plan and copy kernels on the "
               "same selections, eager and per call in a graph ('# direct' lines, 'direct' JSON records)"),
        {.name = "--layout", .type = ARG_ENUM, .dest = &layout, .choices = bench_layouts, .seen = &seen_layout,
         .help = "cuda: host rows of the misses: each request's contiguous (compact), or each at a random place "
                 "of a multi-GiB span (scattered; configurations with misses only)"},
        {.name = "--span-gib", .type = ARG_DOUBLE, .dest = &span_gib, .dlo = 0.5, .dhi = 1024, .seen = &seen_span,
         .help = "cuda: GiB of the scattered span (halved down to 0.5 when it cannot be had)"},
        {.name = "--host-pages", .type = ARG_ENUM, .dest = &pages, .choices = dhs_bench_page_names(),
         .seen = &seen_pages,
         .help = "cuda: pages of the scattered span: cudaHostAlloc (default), mmap + MADV_HUGEPAGE (thp), "
                 "hugetlbfs 2 MiB / 1 GiB (2m, 1g) registered with cudaHostRegister; all: every kind the machine "
                 "allows, the others reported as not available (implies --layout scattered unless given)"},
        A_BOOL("--breakdown", &brk, "cuda: also the plan kernel alone and the copy kernel alone (compact layout); in a "
                                    "build with -DDHS_DRES_PHASE_TIMING=ON also the plan kernel's phase times"),
        {.name = "--plan-path", .type = ARG_ENUM, .dest = &plan_path, .choices = plan_paths, .seen = &seen_path,
         .help = "cuda: the plan kernel's miss path: few (the library's: a request with at most 64 miss entries takes "
                 "the few-miss path, which copies its own rows), block (the block-wide path for every request), "
                 "both (few and block), copy (the few-miss path leaving its rows to the copy kernel, the default "
                 "until 2026-12-06), all (the three); several paths: each configuration timed with each, same "
                 "selections, a 'path' column"},
        {.name = "--quiet", .alias = 'q', .type = ARG_BOOL, .dest = &quiet, .help = "cuda: no progress on stderr"},
        A_BOOL("--json", &json, "cpu: one JSON object (with version, commit, date, host, device); cuda: one JSON "
                                "object per line (a run record, then one per configuration), nothing else on stdout"),
        A_OUT("--output", &output, "write the results to FILE instead of stdout"),
    };
    arg_cmd cmd = {
        .prog = "dhs bench resolve",
        .about = "--backend cpu: resolver entries per second at k entries per call and a fixed number of misses\n"
                 "per call, for each hot-cache size B; next to it a HiSparse-style slot scan of the same\n"
                 "selections (the in-process baseline).\n"
                 "--backend cuda: the device resolver (plan + copy kernels, eager and as a graph) for every\n"
                 "configuration batch x B x misses x K, next to an O(B) scan resolver kernel and the gather\n"
                 "ceiling (the same host rows to the same destinations); p50/p90 us, miss GB/s, ratios; the\n"
                 "empty-kernel floor once per run. Progress on stderr.\n"
                 "Figures are ratios on this machine, not pass/fail timings.",
        .specs = sp,
        .n_specs = (int)(sizeof sp / sizeof sp[0]),
    };
    int pr = args_parse(&cmd, argc, argv, NULL, NULL);
    if (pr) return args_exit(pr);
    if (backend == 1) {
        const flag_seen cpu_only[] = {{seen_rounds, "--rounds"}, {seen_pol, "--policy"}, {seen_repeat, "--repeat"}};
        int r = other_backend_flag(cmd.prog, cpu_only, sizeof cpu_only / sizeof cpu_only[0], "cpu");
        if (r) return r;
        static const int64_t hot_d[] = {2048, 4096, 16384, 65536}, mis_d[] = {0, 32, 300, 2048};
        if (!seen_hot) {
            memcpy(Bs, hot_d, sizeof hot_d);
            nB = 4;
        }
        if (!seen_mis) {
            memcpy(mis, mis_d, sizeof mis_d);
            nmis = 4;
        }
        if (!seen_row) row_bytes = 656;
        if (seen_pages && pages != DHS_BENCH_PAGES_DEFAULT && seen_layout && layout == 0)
            return args_fail(cmd.prog, "--host-pages %s places the scattered span: not with --layout compact",
                             dhs_bench_page_names()[pages]);
        if (seen_pages && !seen_layout) layout = 1;
        dhs_bench_resolve_opts o;
        dhs_bench_resolve_defaults(&o);
        dhs_bench_sweep_set(&o.compact, batch, nbatch, Bs, nB, mis, nmis, qs, nq);
        o.scattered = o.compact;
        if (brk) o.breakdown = o.compact;
        o.plan_paths = plan_bits[plan_path];
        o.layouts = layout == 0 ? DHS_BENCH_COMPACT : layout == 1 ? DHS_BENCH_SCATTERED : DHS_BENCH_COMPACT | DHS_BENCH_SCATTERED;
        o.k = (int32_t)k;
        o.row_bytes = (int32_t)row_bytes;
        o.reps = reps;
        o.graph_calls = graph_calls;
        o.carveout = carveout;
        o.copy_blocks = copy_blocks;
        o.fresh_rounds = fresh;
        o.direct = direct;
        o.span_gib = span_gib;
        o.host_pages = pages;
        o.json = json;
        o.progress = !quiet;
        o.prog = cmd.prog;
        return bench_resolve_cuda(cmd.prog, &o, output);
    }
    {
        const flag_seen cuda_only[] = {{seen_batch, "--batch"}, {seen_q, "--queries"},     {seen_reps, "--reps"},
                                       {seen_graph, "--graph-calls"}, {seen_layout, "--layout"},
                                       {seen_span, "--span-gib"}, {seen_pages, "--host-pages"},
                                       {brk, "--breakdown"},          {quiet, "--quiet"},
                                       {seen_path, "--plan-path"},    {seen_carve, "--carveout"},
                                       {seen_cblk, "--copy-blocks"},  {fresh, "--fresh-rounds"},
                                       {direct, "--direct"}};
        int r = other_backend_flag(cmd.prog, cuda_only, sizeof cuda_only / sizeof cuda_only[0], "cuda");
        if (r) return r;
    }
    if (nmis != 1 || mis[0] < 1)
        return args_fail(cmd.prog, "--backend cpu takes one --misses value, at least 1 (got %d value%s, first %lld)", nmis,
                         nmis == 1 ? "" : "s", (long long)mis[0]);
    const int64_t misses = mis[0];
    dhs_policy pol = (dhs_policy)pol_i;
    if (row_bytes % 16) return args_fail(cmd.prog, "--row-bytes must be a multiple of 16, got %lld", (long long)row_bytes);
    int repeats = (int)repeats64;
    if (misses > k) return args_fail(cmd.prog, "--misses (%lld) must not exceed --k (%lld)", (long long)misses, (long long)k);
    resolve_fig f[8], rep[8][16];
    for (int i = 0; i < nB; i++)
        if (Bs[i] % 64 || Bs[i] < k) return args_fail(cmd.prog, "--hot values must be multiples of 64 and >= --k (%lld), got %lld", (long long)k, (long long)Bs[i]);
    if (tool_output(cmd.prog, output)) return EXIT_USAGE;
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
        {"resolve", bench_resolve, "the resolver vs hot-cache size (k = 2048) next to a slot-scan baseline (cpu or cuda)"},
        {"serve", cmd_bench_serve, "the reference model served under one device KV budget: resident vs the hierarchy "
                                   "over a concurrency sweep (cuda; cpu at small sizes)"},
    };
    return args_dispatch("dhs bench", "Benchmarks print measured figures next to an in-process baseline (ratios).", subs,
                         (int)(sizeof subs / sizeof subs[0]), argc, argv);
}
