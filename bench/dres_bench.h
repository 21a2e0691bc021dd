/* dres_bench.h - C interface of the device resolver benchmark (bench/dres_bench.cu).
 *
 * One engine, two front ends: `dhs bench resolve --backend cuda` (tools/cmd_bench.c, built into the
 * tool when DHS_CUDA=ON) and the standalone `dres_bench` (bench/dres_bench_main.c, the flags that
 * bench/gpu_dres.sh passes). Both fill a dhs_bench_resolve_opts and call dhs_bench_resolve_cuda.
 *
 * A sweep is the cross product of its four lists (batch x hot rows B x misses M x queries K);
 * every configuration is timed on the same stream in one process: ours (plan + copy kernels as the
 * backend launches them, eager), ours as a CUDA graph, the O(B) scan baseline, the gather ceiling
 * (M > 0), and for M = 0 R back-to-back resolves captured in one graph (per call = graph time / R).
 *
 * Plain C (the tool is C11); dhs_bench_resolve_defaults and dhs_bench_resolve_validate are inline so
 * that a build without CUDA can check flags without the engine.
 */
#ifndef DHS_BENCH_DRES_BENCH_H
#define DHS_BENCH_DRES_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DHS_BENCH_LIST_MAX 8      /* values per list */
#define DHS_BENCH_MAX_BATCH 256   /* requests per call */
#define DHS_BENCH_MAX_HOT 65536   /* hot rows B per request (multiple of 64, >= k) */
#define DHS_BENCH_MAX_QUERIES 4   /* K */
#define DHS_BENCH_MIN_K 64
#define DHS_BENCH_MAX_K 2048      /* the scan baseline's shared-memory hash holds 8 k keys at K > 1 */
#define DHS_BENCH_MAX_ROW 8192    /* row bytes, multiple of 16 */

/* plan paths (bits of dhs_bench_resolve_opts.plan_paths): the plan kernel's few-miss path where a request
   fits it, copying its own rows (the library's default), the block-wide miss path only, and the few-miss
   path leaving its rows to the copy kernel (dres_state.plan_flags 0, DRES_PLAN_BLOCK_ONLY,
   DRES_PLAN_COPY_KERNEL) */
enum { DHS_BENCH_PATH_FEW = 1, DHS_BENCH_PATH_BLOCK = 2, DHS_BENCH_PATH_COPY = 4 };
/* layouts (bits) */
enum { DHS_BENCH_COMPACT = 1, DHS_BENCH_SCATTERED = 2 };
/* host page kinds of the scattered span; ALL measures each kind the machine allows */
enum { DHS_BENCH_PAGES_DEFAULT, DHS_BENCH_PAGES_THP, DHS_BENCH_PAGES_2M, DHS_BENCH_PAGES_1G, DHS_BENCH_PAGES_ALL };

typedef struct dhs_bench_sweep {
    int64_t batch[DHS_BENCH_LIST_MAX], hot[DHS_BENCH_LIST_MAX], misses[DHS_BENCH_LIST_MAX],
        queries[DHS_BENCH_LIST_MAX];
    int n_batch, n_hot, n_misses, n_queries; /* n_batch == 0: the sweep is off */
} dhs_bench_sweep;

typedef struct dhs_bench_resolve_opts {
    dhs_bench_sweep compact;   /* the compact layout: each request's miss rows contiguous */
    dhs_bench_sweep scattered; /* every miss row at a random place of a multi-GiB span; configurations
                                  with M = 0 read no host memory and are left out */
    dhs_bench_sweep breakdown; /* plan kernel alone and copy kernel alone (compact layout); off if empty */
    int layouts;               /* DHS_BENCH_COMPACT | DHS_BENCH_SCATTERED */
    int plan_paths;            /* DHS_BENCH_PATH_* bits; 0 = DHS_BENCH_PATH_FEW. Both: every configuration is timed
                                  with each, on the same selections (the scan and ceiling once) */
    int32_t k, row_bytes;
    int32_t reps;              /* timed repetitions of every timing (p50 / p90) */
    int32_t graph_calls;       /* R: resolves captured back to back in one graph (M = 0 configurations) */
    int32_t carveout;          /* the resolver kernels' preferred shared-memory carveout (dhs_dres_set_carveout),
                                  percent, or -1: left at the driver's default */
    int32_t copy_blocks;       /* the copy kernel's grid; 0: the library's (DHS_DRES_COPY_BLOCKS_PER_SM x SMs) */
    int fresh_rounds;          /* without misses, every call a new round (each hit protected by an atomic, as a
                                  decode step's first call of a group); 0: the calls repeat one round */
    int direct;                /* compact layout, M = 0: also every configuration's selections as tail rows (a round
                                  that cannot miss): the direct kernel (DRES_MODE_DIRECT) against the plan and copy
                                  kernels on them, eager and per call in a graph of graph_calls */
    double span_gib;           /* scattered span (halved down to 0.5 GiB when it cannot be had) */
    int host_pages;            /* DHS_BENCH_PAGES_* */
    int64_t max_batch_misses;  /* > 0: leave out configurations with batch x M above it */
    int json;                  /* JSON lines on stdout and nothing else there (table and comments on stderr) */
    FILE *json_file;           /* non-NULL: the JSON lines here, the table on stdout */
    int progress;              /* a progress line per configuration on stderr */
    const char *prov;          /* JSON members ("\"a\": 1, ") put first in the run record, or NULL */
    const char *prog;          /* prefix of messages on stderr */
} dhs_bench_resolve_opts;

static inline void dhs_bench_sweep_set(dhs_bench_sweep *s, const int64_t *b, int nb, const int64_t *h, int nh,
                                       const int64_t *m, int nm, const int64_t *q, int nq)
{
    s->n_batch = nb;
    s->n_hot = nh;
    s->n_misses = nm;
    s->n_queries = nq;
    for (int i = 0; i < nb; i++) s->batch[i] = b[i];
    for (int i = 0; i < nh; i++) s->hot[i] = h[i];
    for (int i = 0; i < nm; i++) s->misses[i] = m[i];
    for (int i = 0; i < nq; i++) s->queries[i] = q[i];
}

/* The tool's defaults: batch 1,8,64,256 x B 2048,4096,16384,65536 x M 0,32,300,2048 x K 1,4 in both
   layouts (the scattered one with the same lists), k = 2048, 656-byte rows, 60 repetitions, R = 16,
   an 8 GiB span of default pinned pages, no breakdown. */
static inline void dhs_bench_resolve_defaults(dhs_bench_resolve_opts *o)
{
    static const int64_t b[] = {1, 8, 64, 256}, h[] = {2048, 4096, 16384, 65536}, m[] = {0, 32, 300, 2048},
                         q[] = {1, 4};
    memset(o, 0, sizeof *o);
    dhs_bench_sweep_set(&o->compact, b, 4, h, 4, m, 4, q, 2);
    o->scattered = o->compact;
    o->layouts = DHS_BENCH_COMPACT | DHS_BENCH_SCATTERED;
    o->plan_paths = DHS_BENCH_PATH_FEW;
    o->k = 2048;
    o->row_bytes = 656;
    o->reps = 60;
    o->graph_calls = 16;
    o->carveout = -1;
    o->copy_blocks = 0;
    o->fresh_rounds = 0;
    o->direct = 0;
    o->span_gib = 8;
    o->host_pages = DHS_BENCH_PAGES_DEFAULT;
    o->prog = "dres_bench";
}

/* 0 when the options can run; else -1 and why (one line, no newline). */
static inline int dhs_bench_sweep_validate(const dhs_bench_sweep *s, int32_t k, const char *what, char *why, size_t n)
{
    for (int i = 0; i < s->n_batch; i++)
        if (s->batch[i] < 1 || s->batch[i] > DHS_BENCH_MAX_BATCH)
            return snprintf(why, n, "%s: batch %lld is not in 1..%d", what, (long long)s->batch[i], DHS_BENCH_MAX_BATCH), -1;
    if (s->n_batch && (s->n_hot < 1 || s->n_misses < 1 || s->n_queries < 1))
        return snprintf(why, n, "%s: an empty list", what), -1;
    for (int i = 0; i < s->n_hot; i++)
        if (s->hot[i] % 64 || s->hot[i] < k || s->hot[i] > DHS_BENCH_MAX_HOT)
            return snprintf(why, n, "%s: hot rows %lld must be a multiple of 64 in k (%d)..%d", what,
                            (long long)s->hot[i], (int)k, DHS_BENCH_MAX_HOT), -1;
    for (int i = 0; i < s->n_misses; i++)
        if (s->misses[i] < 0 || s->misses[i] > k)
            return snprintf(why, n, "%s: misses %lld is not in 0..k (%d)", what, (long long)s->misses[i], (int)k), -1;
    for (int i = 0; i < s->n_queries; i++)
        if (s->queries[i] < 1 || s->queries[i] > DHS_BENCH_MAX_QUERIES)
            return snprintf(why, n, "%s: queries %lld is not in 1..%d", what, (long long)s->queries[i],
                            DHS_BENCH_MAX_QUERIES), -1;
    return 0;
}

static inline int dhs_bench_resolve_validate(const dhs_bench_resolve_opts *o, char *why, size_t n)
{
    if (o->k < DHS_BENCH_MIN_K || o->k > DHS_BENCH_MAX_K)
        return snprintf(why, n, "k %d is not in %d..%d", (int)o->k, DHS_BENCH_MIN_K, DHS_BENCH_MAX_K), -1;
    if (o->row_bytes < 16 || o->row_bytes > DHS_BENCH_MAX_ROW || o->row_bytes % 16)
        return snprintf(why, n, "row bytes %d must be a multiple of 16 in 16..%d", (int)o->row_bytes, DHS_BENCH_MAX_ROW), -1;
    if (o->reps < 10 || o->reps > 100000) return snprintf(why, n, "reps %d is not in 10..100000", (int)o->reps), -1;
    if (o->copy_blocks < 0 || o->copy_blocks > 65536)
        return snprintf(why, n, "copy blocks %d is not in 0..65536", (int)o->copy_blocks), -1;
    if (o->carveout < -1 || o->carveout > 100)
        return snprintf(why, n, "carveout %d is not in -1..100", (int)o->carveout), -1;
    if (o->graph_calls < 1 || o->graph_calls > 256)
        return snprintf(why, n, "graph calls %d is not in 1..256", (int)o->graph_calls), -1;
    if (!(o->span_gib >= 0.5 && o->span_gib <= 1024)) return snprintf(why, n, "span %g GiB is not in 0.5..1024", o->span_gib), -1;
    if (o->host_pages < DHS_BENCH_PAGES_DEFAULT || o->host_pages > DHS_BENCH_PAGES_ALL)
        return snprintf(why, n, "unknown host page kind %d", o->host_pages), -1;
    if (!(o->layouts & (DHS_BENCH_COMPACT | DHS_BENCH_SCATTERED))) return snprintf(why, n, "no layout"), -1;
    if (o->plan_paths & ~(DHS_BENCH_PATH_FEW | DHS_BENCH_PATH_BLOCK | DHS_BENCH_PATH_COPY))
        return snprintf(why, n, "unknown plan path bits %#x", (unsigned)o->plan_paths), -1;
    if ((o->layouts & DHS_BENCH_COMPACT) && dhs_bench_sweep_validate(&o->compact, o->k, "compact", why, n)) return -1;
    if ((o->layouts & DHS_BENCH_SCATTERED) && dhs_bench_sweep_validate(&o->scattered, o->k, "scattered", why, n)) return -1;
    if (dhs_bench_sweep_validate(&o->breakdown, o->k, "breakdown", why, n)) return -1;
    return 0;
}

/* Runs the benchmark on CUDA device 0. 0 done; 3 a runtime error (no device, allocation failure, a
   failed CUDA call), with a message on stderr; 2 options that dhs_bench_resolve_validate rejects. */
int dhs_bench_resolve_cuda(const dhs_bench_resolve_opts *o);

/* Names of the host page kinds, indexed by DHS_BENCH_PAGES_*, NULL-terminated. */
static inline const char *const *dhs_bench_page_names(void)
{
    static const char *const names[] = {"default", "thp", "2m", "1g", "all", NULL};
    return names;
}

#ifdef __cplusplus
}
#endif
#endif
