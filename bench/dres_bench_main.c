/* dres_bench_main.c - the standalone `dres_bench`: the flags bench/gpu_dres.sh passes, mapped onto the
 * one engine (dhs_bench_resolve_cuda, bench/dres_bench.cu) that `dhs bench resolve --backend cuda`
 * runs too. Its sweep is the historical one of bench/RESULTS.md: every compact configuration, a
 * scattered subset (batch 1, 64, 256 x B 4096 x misses 300, 2048 x K 1) and the plan / copy breakdown
 * (batch 1, 64, 256 x B 4096 x misses 0, 2048 x K 1).
 *
 * Usage: dres_bench [--json] [--json-file F] [--quick] [--lat] [--one N,B,M,K] [--reps N] [--span-gib G]
 *                   [--host-pages default|thp|2m|1g|all]
 *   --json: JSON lines on stdout instead of the table;
 *   --json-file F: the table on stdout and the JSON lines in F;
 *   --quick: batch 1, 64, 256 and B 2048, 4096, 65536;
 *   --lat: only configurations with batch x misses <= 8192 (latency-bound);
 *   --one N,B,M,K: that configuration alone (compact layout, no breakdown: for a profiler).
 * Exit status: 0 done, 2 usage, 3 runtime (no device, a failed CUDA call).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dres_bench.h"

static int usage(void)
{
    fprintf(stderr, "usage: dres_bench [--json] [--json-file F] [--quick] [--lat] [--one N,B,M,K] [--reps N] "
                    "[--span-gib G] [--host-pages default|thp|2m|1g|all]\n");
    return 2;
}

int main(int argc, char **argv)
{
    dhs_bench_resolve_opts o;
    dhs_bench_resolve_defaults(&o);
    static const int64_t sb[] = {1, 64, 256}, sh[] = {4096}, sm[] = {300, 2048}, bm[] = {0, 2048}, q1[] = {1},
                         qb[] = {1, 64, 256}, qh[] = {2048, 4096, 65536};
    dhs_bench_sweep_set(&o.scattered, sb, 3, sh, 1, sm, 2, q1, 1);
    dhs_bench_sweep_set(&o.breakdown, sb, 3, sh, 1, bm, 2, q1, 1);
    o.prog = "dres_bench";
    int quick = 0, one = 0;
    long long on[4];
    const char *jpath = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) o.json = 1;
        else if (!strcmp(a, "--quick")) quick = 1;
        else if (!strcmp(a, "--lat")) o.max_batch_misses = 8192;
        else if (!strcmp(a, "--one") && v && sscanf(v, "%lld,%lld,%lld,%lld", &on[0], &on[1], &on[2], &on[3]) == 4) {
            one = 1;
            i++;
        } else if (!strcmp(a, "--reps") && v) {
            o.reps = atoi(v);
            if (o.reps < 10) o.reps = 10;
            i++;
        } else if (!strcmp(a, "--span-gib") && v) {
            o.span_gib = atof(v);
            i++;
        } else if (!strcmp(a, "--json-file") && v) {
            jpath = v;
            i++;
        } else if (!strcmp(a, "--host-pages") && v) {
            const char *const *names = dhs_bench_page_names();
            int k = 0;
            while (names[k] && strcmp(names[k], v)) k++;
            if (!names[k]) return usage();
            o.host_pages = k;
            i++;
        } else return usage();
    }
    if (quick) {
        dhs_bench_sweep_set(&o.compact, qb, 3, qh, 3, o.compact.misses, o.compact.n_misses, o.compact.queries,
                            o.compact.n_queries);
    }
    if (one) {
        const int64_t b[] = {on[0]}, h[] = {on[1]}, m[] = {on[2]}, q[] = {on[3]};
        dhs_bench_sweep_set(&o.compact, b, 1, h, 1, m, 1, q, 1);
        o.layouts = DHS_BENCH_COMPACT;
        o.breakdown.n_batch = 0;
    }
    char why[256];
    if (dhs_bench_resolve_validate(&o, why, sizeof why)) {
        fprintf(stderr, "dres_bench: %s\n", why);
        return 2;
    }
    if (jpath && !(o.json_file = fopen(jpath, "w"))) {
        perror("--json-file");
        return 2;
    }
    int rc = dhs_bench_resolve_cuda(&o);
    if (o.json_file) fclose(o.json_file);
    return rc;
}
