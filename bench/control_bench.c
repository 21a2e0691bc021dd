/* control_bench.c - the host control plane's cost per round, on the CPU.
 *
 * Drives decode rounds (K = 1, every request in every round) of C requests
 * at a GLM-5.3-like geometry (21 groups: 2 of one source, 19 of four; 78
 * sources of 656-byte rows, k 2048, page 64, hot 4096 rows) with a 100K-token
 * imported history each, on the payload-free CPU backend (no pools, no host
 * rows: only the library's bookkeeping runs). Per round it times:
 *   begin   dhs_round_begin (housekeeping, tail room, the round's opening)
 *   caller  what the engine does on the host for a device step between the
 *           two: dhs_round_may_miss and the round's tail locations
 *           (model/engine.c gpu_step: dhs_round_tail_locations_device with the
 *           device resolver, else dhs_round_tail_locations; --tail-locations
 *           each: one dhs_tail_locations per request and source)
 *   end     dhs_round_end (commit, the round's tail backup)
 * and counts the backend calls of each phase (fence queries, waits, copy
 * launches, publishes): on the H200 host each such call costs host time the
 * CPU backend does not show (--call-us adds a busy wait per call to model it).
 *
 * Baselines in the same process: each configuration runs three times from the
 * same setup: "full-sweep", the housekeeping before the work list (every open
 * request and group visited each round, every fence queried per request and
 * group: dhs_ctx's full_sweep) with every committed row backed up at its round
 * end; "per-round", the work list with every committed row backed up at its
 * round end (dhs_ctx.page_backups = 0: every request on the list every round);
 * then the library's path, "per-page": a group's tail rows are backed up when
 * their page completes. Both knobs are kept for this comparison only. Figures
 * are medians over the rounds (bk_rows: mean rows backed up per round);
 * ratios are per-round / per-page.
 *
 * --background: the library's path twice, without and then with dhs_background
 * called between the engine's host work and dhs_round_end (where an engine
 * calls it: the step is in flight on the device), so the round end issues no
 * backup and the complete pages go out from dhs_background. Its host time is
 * printed apart ("bg"): overlapped with the device's step, not exposed.
 * Ratios are per-page / background (medians and means of begin and end).
 *
 * On the CUDA backend (--backend cuda) the same rounds run against real
 * pinned host rows (imported from one zero buffer) and device pools, so the
 * backend calls cost what they cost on the serving host; the host time of
 * each call kind is summed apart (us per round by kind). --resolver device
 * adds the device resolver's control plane (the round descriptor and table
 * publishes in dhs_round_begin, the error-word wait and the batched promote
 * in dhs_round_end); no resolves are issued, so no selection changes the
 * caches and only the control plane is timed.
 *
 * Usage: control_bench [--concurrency 2,20,64,256] [--context N] [--rounds N]
 *                      [--call-us X] [--history-on-device F] [--async-delay N]
 *                      [--backend cpu|cuda] [--resolver host|device]
 *                      [--mode full-sweep|per-round|per-page] [--stagger]
 *                      [--background] [--hot-rows N] [--tail-locations each|round|device]
 *                      [--publish list|each|both]
 *
 * --publish each: the backend's publish_list is hidden, so a round begin
 * publishes its descriptor and changed tables with one backend publish per
 * piece (the path before publish_list, kept by the core for backends without
 * it); both: every mode runs each, then list, and a ratio line compares the
 * two (begin medians, the library's own, and calls included).
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/internal.h"
#include "dhs.h"
#include "dhs_cuda.h"

/* --overlap: the engine's step on the CUDA backend (bench/step_spin.cu); without CUDA there is no step */
#ifdef DHS_HAVE_CUDA
int cb_step_init(void *stream, int n);
int cb_step_launch(int t, double us);
int cb_step_wait(int t);
double cb_step_gap_us(int t);
double cb_step_us(int t);
void cb_step_free(void);
#else
static int cb_step_init(void *stream, int n) { (void)stream, (void)n; return -1; }
static int cb_step_launch(int t, double us) { (void)t, (void)us; return -1; }
static int cb_step_wait(int t) { (void)t; return -1; }
static double cb_step_gap_us(int t) { (void)t; return -1; }
static double cb_step_us(int t) { (void)t; return -1; }
static void cb_step_free(void) {}
#endif
static double step_us = -1; /* --overlap: the step's microseconds (-1: not that comparison) */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ------------------------------------------------ a counting backend */
enum { K_DONE, K_WAIT, K_RECORD, K_COPY_ASYNC, K_GATHER, K_COPY_SYNC, K_PUBLISH, K_PUBLISH_LIST, K_PROMOTE, K_TICK, K_N };
static const char *k_names[K_N] = {"done",      "wait",         "record",  "copy_async", "gather",
                                   "copy_sync", "publish", "publish_list", "promote", "tick"};
static const dhs_backend_ops *inner;
static dhs_backend_ops counting;
static uint64_t calls[K_N];
static double call_s[K_N]; /* host seconds inside each kind of call */
static double call_us;
static long hot_rows = 4096; /* --hot-rows: B per request and group */
enum { TL_EACH, TL_ROUND, TL_DEVICE };
static int tail_calls = -1; /* --tail-locations; main sets the engine's default (device with the device resolver) */
static int stagger; /* --stagger: histories of context - (i * 64 / C) positions */
static int pub_each; /* this run hides the backend's publish_list: the core publishes piece by piece */

/* counts the call; returns its start time (after the modelled cost) */
static double cost(int k)
{
    calls[k]++;
    double t0 = now_s();
    if (call_us > 0) {
        double t = t0 + 1e-6 * call_us;
        while (now_s() < t) {
        }
    }
    return t0;
}
#define TIMED(k, expr)                                                                                              \
    do {                                                                                                            \
        double t0_ = cost(k);                                                                                       \
        __typeof__(expr) r_ = (expr);                                                                               \
        call_s[k] += now_s() - t0_;                                                                                 \
        return r_;                                                                                                  \
    } while (0)
static int c_done(dhs_backend *be, dhs_ticket t) { TIMED(K_DONE, inner->done(be, t)); }
static dhs_status c_wait(dhs_backend *be, dhs_ticket t) { TIMED(K_WAIT, inner->wait(be, t)); }
static dhs_status c_record(dhs_backend *be, dhs_ticket *t) { TIMED(K_RECORD, inner->record_readers(be, t)); }
static dhs_status c_copy_async(dhs_backend *be, const dhs_copy_pair *p, int64_t n, uint32_t rb, dhs_ticket *t)
{
    TIMED(K_COPY_ASYNC, inner->copy_rows_async(be, p, n, rb, t));
}
static dhs_status c_gather(dhs_backend *be, const dhs_copy_pair *p, int64_t n, uint32_t rb)
{
    TIMED(K_GATHER, inner->gather_h2d(be, p, n, rb));
}
static dhs_status c_copy_sync(dhs_backend *be, void *d, const void *s, size_t b)
{
    TIMED(K_COPY_SYNC, inner->copy_sync(be, d, s, b));
}
static dhs_status c_publish(dhs_backend *be, void *d, const void *s, size_t b)
{
    TIMED(K_PUBLISH, inner->publish(be, d, s, b));
}
static dhs_status c_publish_list(dhs_backend *be, const dhs_pub *l, int32_t n)
{
    TIMED(K_PUBLISH_LIST, inner->publish_list(be, l, n));
}
/* the CPU backend's emulated clock: it runs the async copies whose time came (memcpy of their rows) */
static void c_tick(dhs_backend *be)
{
    calls[K_TICK]++;
    const double t0 = now_s();
    inner->tick(be);
    call_s[K_TICK] += now_s() - t0;
}
static dhs_status c_promote_all(dhs_backend *be, const dres_state *sd, const dres_state *sh, int32_t G,
                                const dres_round *rd, int payload)
{
    TIMED(K_PROMOTE, inner->dres_promote_all(be, sd, sh, G, rd, payload));
}
static dhs_status c_promote(dhs_backend *be, const dres_state *st, const dres_round *rd, int payload)
{
    TIMED(K_PROMOTE, inner->dres_promote(be, st, rd, payload));
}

/* ------------------------------------------------ geometry */
static dhs_arch glm53(void)
{
    dhs_arch a;
    memset(&a, 0, sizeof a);
    a.n_groups = 21;
    for (int32_t g = 0; g < 21; g++) {
        int32_t ns = g < 2 ? 1 : 4;
        for (int32_t i = 0; i < ns; i++) {
            dhs_source_desc *s = &a.sources[a.n_sources++];
            s->row_bytes = 656;
            s->m = 1;
            s->group = g;
        }
    }
    a.index_key_bytes = 132;
    return a;
}

typedef struct {
    double *us[4];         /* begin, caller, end, dhs_background: per round */
    double *gap, *step;    /* --overlap on CUDA: the stream's idle us before each round's step, the step's us */
    double *own[2];        /* begin, end outside backend calls (the library's own host work): per round */
    uint64_t calls[4][K_N];
    double call_s[4][K_N]; /* host seconds in each kind of backend call */
    int64_t rounds;
    uint64_t bk0, bk1;     /* backup_rows after the warm-up and at the end */
    uint64_t hp0[DHS_HP_COUNT_], hp1[DHS_HP_COUNT_]; /* dhs_get_host_time after the warm-up and at the end */
} phase_sum;

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the median of n values (sorts them) */
static double median(double *v, int64_t n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : 0.0;
}

static int parse_list(const char *s, long *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 4096) return -1;
        out[n++] = v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static int run_one(long C, long context, long rounds, double hist_frac, long async_delay, int mode, int cuda,
                   int dev_res, phase_sum *ps)
{
    dhs_backend *be;
    if (cuda) {
        dhs_status bs = dhs_backend_cuda_create(0, &be);
        if (bs != DHS_OK) {
            fprintf(stderr, "control_bench: dhs_backend_cuda_create: %s\n", dhs_status_str(bs));
            return -1;
        }
    } else {
        dhs_cpu_options o = {0};
        o.payload_free = !dev_res; /* the device resolver needs payloads */
        o.async_delay = (int32_t)async_delay;
        if (dhs_backend_cpu_create(&o, &be) != DHS_OK) return -1;
    }
    /* modes 4 and 5 (--overlap): rounds ended with dhs_round_end_early around a step on the compute stream;
       5 opens round t + 1 before waiting for step t (the backend's stream is asked before its ops are wrapped) */
    const int stepped = mode >= 4 && cuda;
    if (stepped && cb_step_init(dhs_cuda_stream(be), (int)(rounds + 4)) != 0) {
        fprintf(stderr, "control_bench: --overlap: no events or stream for the step\n");
        dhs_backend_destroy(be);
        return -1;
    }
    inner = be->ops;
    counting = *inner;
    counting.done = c_done;
    counting.wait = c_wait;
    counting.record_readers = c_record;
    counting.copy_rows_async = c_copy_async;
    counting.gather_h2d = c_gather;
    counting.copy_sync = c_copy_sync;
    if (inner->publish) counting.publish = c_publish;
    counting.publish_list = inner->publish_list && !pub_each ? c_publish_list : NULL;
    if (inner->tick) counting.tick = c_tick;
    if (inner->dres_promote_all) counting.dres_promote_all = c_promote_all;
    if (inner->dres_promote) counting.dres_promote = c_promote;
    be->ops = &counting;
    dhs_arch a = glm53();
    dhs_config c = dhs_config_default();
    c.max_requests = (int32_t)C;
    c.sel_k = 2048;
    c.spec_width = 1;
    c.page_rows = 64;
    c.hot_rows = (int32_t)hot_rows;
    c.tail_rows = 128;
    c.max_rows = context + rounds + 16;
    c.policy = DHS_POLICY_CLOCK;
    c.staging_arenas = 4;
    c.resolver = dev_res ? DHS_RESOLVER_DEVICE : DHS_RESOLVER_HOST;
    dhs_sizes z;
    dhs_status zs = dhs_config_sizes(&a, &c, &z);
    if (zs != DHS_OK) {
        fprintf(stderr, "control_bench: dhs_config_sizes: %s\n", dhs_status_str(zs));
        dhs_backend_destroy(be);
        return -1;
    }
    uint64_t hist = (uint64_t)(context / 64) * 64 * 78 * z.row_stride;
    c.device_bytes = z.min_device_bytes + (uint64_t)(C - 1) * z.request_bytes + (uint64_t)(hist_frac * (double)C * (double)hist);
    dhs_ctx *ctx;
    dhs_status cs = dhs_ctx_create(&a, &c, be, &ctx);
    if (cs != DHS_OK) {
        /* the CPU backend with payloads (--resolver device) keeps the device pool in host memory */
        fprintf(stderr, "control_bench: dhs_ctx_create with a %.2f GiB device pool (%ld requests of %.1f MiB): %s%s\n",
                (double)c.device_bytes / 1073741824.0, C, (double)z.request_bytes / 1048576.0, dhs_status_str(cs),
                cs == DHS_ERR_DEVICE_NOMEM ? " (a smaller --hot-rows, --history-on-device or --concurrency fits)" : "");
        dhs_backend_destroy(be);
        return -1;
    }
    ctx->page_backups = mode >= 2 && ctx->page_backups; /* before any import: due_n follows the policy */
    dhs_req *r = calloc((size_t)C, sizeof *r);
    int32_t *K = malloc(sizeof(int32_t) * (size_t)C), *acc = calloc((size_t)C, sizeof(int32_t));
    int32_t loc[1];
    const void *rows[DHS_MAX_SOURCES] = {0};
    /* with payloads: every source imports the same zero rows (read only) */
    uint8_t *zero = be->payload_free ? NULL : calloc((size_t)context, z.row_stride);
    if (!be->payload_free && !zero) {
        dhs_ctx_destroy(ctx);
        dhs_backend_destroy(be);
        free(r), free(K), free(acc);
        return -1;
    }
    for (int32_t s = 0; s < a.n_sources; s++) rows[s] = zero;
    /* the round's tail locations ([source][request], K = 1): host memory, or device memory for the device call */
    const int tl = tail_calls;
    const size_t loc_bytes = sizeof(int32_t) * (size_t)C * (size_t)a.n_sources;
    int32_t *rloc = NULL;
    if (tl == TL_DEVICE ? be_dev_alloc(be, loc_bytes, (void **)&rloc) != DHS_OK : !(rloc = malloc(loc_bytes))) {
        fprintf(stderr, "control_bench: no room for the round's tail locations\n");
        dhs_ctx_destroy(ctx);
        free(zero);
        dhs_backend_destroy(be);
        free(r), free(K), free(acc);
        return -1;
    }
    int rc = 0;
    char msg[256];
    for (long i = 0; i < C && !rc; i++) {
        K[i] = 1;
        const long ci = stagger ? context - (i * 64 / C) % 64 : context;
        /* the positions the run reaches are announced, as an engine announces prompt + output: the host rows
           are pinned at the import, none is allocated inside a round */
        dhs_status os = dhs_request_open(ctx, context + rounds + 16, &r[i]);
        if (os == DHS_OK) os = dhs_request_import(ctx, r[i], ci, rows, DHS_IMPORT_HOST);
        if (os != DHS_OK) {
            fprintf(stderr, "control_bench: request %ld: open and import of %ld positions: %s\n", i, ci, dhs_status_str(os));
            rc = -1;
        }
    }
    ctx->full_sweep = mode == 0;
    for (long t = 0; t < rounds + 4 && !rc; t++) {
        uint64_t c0[K_N], c1[K_N], c2[K_N], c3[K_N], cb[K_N];
        double s0[K_N], s1[K_N], s2[K_N], s3[K_N], sb[K_N];
        memcpy(c0, calls, sizeof calls);
        memcpy(s0, call_s, sizeof call_s);
        double t0 = now_s();
        dhs_status bs = dhs_round_begin(ctx, (int32_t)C, r, K);
        if (bs != DHS_OK) {
            fprintf(stderr, "control_bench: dhs_round_begin (round %ld): %s\n", t, dhs_status_str(bs));
            rc = -2;
            break;
        }
        double t1 = now_s();
        memcpy(c1, calls, sizeof calls);
        memcpy(s1, call_s, sizeof call_s);
        int mm = 0;
        if (dhs_round_may_miss(ctx, -1, &mm) != DHS_OK) { rc = -3; break; }
        int64_t n = 0;
        const dhs_status ts = tl == TL_ROUND    ? dhs_round_tail_locations(ctx, 1, C, rloc)
                              : tl == TL_DEVICE ? dhs_round_tail_locations_device(ctx, 1, C, rloc)
                                                : DHS_OK;
        if (ts != DHS_OK) {
            fprintf(stderr, "control_bench: the round's tail locations (round %ld): %s\n", t, dhs_status_str(ts));
            rc = -3;
        }
        for (long i = 0; i < C && !rc && tl == TL_EACH; i++) {
            if (dhs_request_positions(ctx, r[i], &n) != DHS_OK) rc = -3;
            for (int32_t s = 0; s < a.n_sources && !rc; s++)
                if (dhs_tail_locations(ctx, r[i], s, n, 1, loc) != DHS_OK) rc = -3;
        }
        if (!rc && stepped && cb_step_launch((int)t, step_us) != 0) {
            fprintf(stderr, "control_bench: the step's launch failed (round %ld)\n", t);
            rc = -7;
        }
        /* the step is in flight: dhs_background (mode 3), timed apart from the exposed phases */
        double tb0 = now_s();
        memcpy(cb, calls, sizeof calls);
        memcpy(sb, call_s, sizeof call_s);
        if (!rc && mode == 3) {
            dhs_status gs = dhs_background(ctx);
            if (gs != DHS_OK) {
                fprintf(stderr, "control_bench: dhs_background (round %ld): %s\n", t, dhs_status_str(gs));
                rc = -6;
            }
        }
        double t2 = now_s();
        memcpy(c2, calls, sizeof calls);
        memcpy(s2, call_s, sizeof call_s);
        if (rc || (mode >= 4 ? dhs_round_end_early(ctx, acc) : dhs_round_end(ctx, acc)) != DHS_OK) {
            rc = rc ? rc : -4;
            break;
        }
        double t3 = now_s();
        memcpy(c3, calls, sizeof calls);
        memcpy(s3, call_s, sizeof call_s);
        /* the engine reads a step's outputs: this round's (4), or the one before (5: this round's step
           runs while the host forms the next round) */
        if (stepped && (mode == 4 || t > 0) && cb_step_wait((int)(mode == 4 ? t : t - 1)) != 0) {
            rc = -7;
            break;
        }
        if (t == 3) {
            ps->bk0 = ctx->st.backup_rows;
            dhs_get_host_time(ctx, ps->hp0, NULL);
        }
        if (t < 4) continue; /* warm-up: the first backups, the ring's first wrap */
        ps->us[0][ps->rounds] = 1e6 * (t1 - t0);
        ps->us[1][ps->rounds] = 1e6 * (tb0 - t1);
        ps->us[2][ps->rounds] = 1e6 * (t3 - t2);
        ps->us[3][ps->rounds] = 1e6 * (t2 - tb0);
        ps->own[0][ps->rounds] = ps->us[0][ps->rounds];
        ps->own[1][ps->rounds] = ps->us[2][ps->rounds];
        for (int k = 0; k < K_N; k++) {
            ps->own[0][ps->rounds] -= 1e6 * (s1[k] - s0[k]);
            ps->own[1][ps->rounds] -= 1e6 * (s3[k] - s2[k]);
        }
        for (int k = 0; k < K_N; k++) {
            ps->calls[0][k] += c1[k] - c0[k];
            ps->calls[1][k] += cb[k] - c1[k];
            ps->calls[2][k] += c3[k] - c2[k];
            ps->calls[3][k] += c2[k] - cb[k];
            ps->call_s[0][k] += s1[k] - s0[k];
            ps->call_s[1][k] += sb[k] - s1[k];
            ps->call_s[2][k] += s3[k] - s2[k];
            ps->call_s[3][k] += s2[k] - sb[k];
        }
        ps->rounds++;
    }
    if (stepped && !rc) {
        if (cb_step_wait((int)(rounds + 3)) != 0) rc = -7;
        for (long t = 4; t < rounds + 4 && !rc; t++) {
            ps->gap[t - 4] = cb_step_gap_us((int)t);
            ps->step[t - 4] = cb_step_us((int)t);
        }
    }
    if (stepped) cb_step_free();
    ps->bk1 = ctx->st.backup_rows;
    dhs_get_host_time(ctx, ps->hp1, NULL);
    if (!rc && dhs_check_invariants(ctx, msg, sizeof msg) != 0) {
        fprintf(stderr, "control_bench: invariants: %s\n", msg);
        rc = -5;
    }
    free(r);
    free(K);
    free(acc);
    dhs_ctx_destroy(ctx);
    if (tl == TL_DEVICE) be_dev_free(be, rloc, loc_bytes);
    else free(rloc);
    free(zero);
    dhs_backend_destroy(be);
    return rc;
}

static uint64_t tot_calls(const phase_sum *p, int ph)
{
    uint64_t t = 0;
    for (int k = 0; k < K_N; k++) t += p->calls[ph][k];
    return t;
}

int main(int argc, char **argv)
{
    long Cs[16] = {2, 20, 64, 256}, nC = 4, context = 100000, rounds = 32, async_delay = 2;
    double hist_frac = 0.1;
    int cuda = 0, dev_res = 0, only = -1, background = 0, pub_mode = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--stagger")) { /* takes no value */
            stagger = 1;
            continue;
        }
        if (!strcmp(a, "--background")) {
            background = 1;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            puts("usage: control_bench [--concurrency 2,20,64,256] [--context N] [--rounds N] [--call-us X]\n"
                 "                     [--history-on-device F] [--async-delay N] [--backend cpu|cuda]\n"
                 "                     [--resolver host|device] [--mode full-sweep|per-round|per-page] [--stagger]\n"
                 "                     [--background] [--hot-rows N] [--tail-locations each|round|device]\n"
                 "                     [--publish list|each|both]\n"
                 "  host microseconds per decode round in dhs_round_begin, the engine's host work\n"
                 "  (dhs_round_may_miss + dhs_tail_locations of every request and source) and\n"
                 "  dhs_round_end, with backend calls per round, at C requests of a GLM-5.3-like\n"
                 "  geometry (78 sources, 21 groups, k 2048) on the payload-free CPU backend; each\n"
                 "  configuration runs the full-sweep and per-round baselines (every committed row backed\n"
                 "  up at its round end), then the library's page backups (medians, means of begin and end,\n"
                 "  rows backed up per round; ratios per-round / per-page in the same process). --call-us: a busy wait per backend call (what a CUDA call costs on the\n"
                 "  serving host); --history-on-device: the fraction of the C histories the device\n"
                 "  budget holds (default 0.1); --async-delay: rounds a copy takes (default 2);\n"
                 "  --backend cuda: the CUDA backend with real pinned host rows (an import of C x context x 78\n"
                 "  rows of 656 B: keep C x context small enough for host memory), host time per call kind\n"
                 "  printed; --resolver device: the device resolver's control plane (publishes, the\n"
                 "  round end's wait and promote; no resolves are issued); --mode: that policy only;\n"
                 "  --stagger: request i's history is context - (i * 64 / C) mod 64 positions, so its pages\n"
                 "  complete at different rounds (by default every request completes a page in the same round);\n"
                 "  --background: per-page without, then with dhs_background between the engine's host work\n"
                 "  and dhs_round_end (the step's window): begin/end medians and means of both, the host time\n"
                 "  in dhs_background (bg_us: overlapped with the device, not exposed) and their ratios.\n"
                 "  Each configuration also prints the library's own host time: begin and end medians\n"
                 "  outside every backend call (on the CPU backend its emulated clock, `tick`, runs the\n"
                 "  async copies' memcpys inside dhs_round_begin; it counts as a call). --hot-rows: hot-cache rows per\n"
                 "  request and group (default 4096, a multiple of 64); with --resolver device the CPU backend keeps\n"
                 "  the device pool in host memory: C = 256 needs a smaller one (e.g. 512) on a 24 GiB host.\n"
                 "  --tail-locations each|round|device: the engine's tail locations, one dhs_tail_locations per request\n"
                 "  and source, one dhs_round_tail_locations, or dhs_round_tail_locations_device (device resolver only;\n"
                 "  the default there, round otherwise: the reference engine's defaults)\n"
                 "  --publish list|each|both: a round begin's publishes in one backend call (list, the default), one\n"
                 "  call per piece (each: the backend's publish_list hidden), or both, each then list, with the ratio\n"
                 "  each / list of the begin medians\n"
                 "  --overlap US: two runs of rounds ended with dhs_round_end_early around a step of US microseconds\n"
                 "  (CUDA: one spinning kernel on the compute stream, events around it; CPU: no step): 'early' waits\n"
                 "  for each round's step before the next round begins; 'overlap' begins round t + 1, issues its\n"
                 "  control plane and launches its step before waiting for step t (an overlapped engine). On CUDA\n"
                 "  each prints gap_us, the stream's idle time between two steps (what the host's round work\n"
                 "  exposes), measured with events, and the ratio early / overlap");
            return 0;
        }
        if (!v) { fprintf(stderr, "control_bench: %s needs a value\n", a); return 2; }
        char *end;
        if (!strcmp(a, "--concurrency")) {
            nC = parse_list(v, Cs, 16);
            if (nC < 1) { fprintf(stderr, "control_bench: bad --concurrency %s\n", v); return 2; }
        } else if (!strcmp(a, "--context")) {
            context = strtol(v, &end, 10);
            if (*end || context < 128 || context > 1000000) { fprintf(stderr, "control_bench: bad --context\n"); return 2; }
        } else if (!strcmp(a, "--rounds")) {
            rounds = strtol(v, &end, 10);
            if (*end || rounds < 1 || rounds > 100000) { fprintf(stderr, "control_bench: bad --rounds\n"); return 2; }
        } else if (!strcmp(a, "--async-delay")) {
            async_delay = strtol(v, &end, 10);
            if (*end || async_delay < 0 || async_delay > 64) { fprintf(stderr, "control_bench: bad --async-delay\n"); return 2; }
        } else if (!strcmp(a, "--backend")) {
            if (strcmp(v, "cpu") && strcmp(v, "cuda")) { fprintf(stderr, "control_bench: bad --backend %s\n", v); return 2; }
            cuda = !strcmp(v, "cuda");
        } else if (!strcmp(a, "--resolver")) {
            if (strcmp(v, "host") && strcmp(v, "device")) { fprintf(stderr, "control_bench: bad --resolver %s\n", v); return 2; }
            dev_res = !strcmp(v, "device");
        } else if (!strcmp(a, "--mode")) {
            only = !strcmp(v, "full-sweep") ? 0 : !strcmp(v, "per-round") ? 1 : !strcmp(v, "per-page") ? 2 : -2;
            if (only == -2) { fprintf(stderr, "control_bench: bad --mode %s\n", v); return 2; }
        } else if (!strcmp(a, "--tail-locations")) {
            tail_calls = !strcmp(v, "each") ? TL_EACH : !strcmp(v, "round") ? TL_ROUND : !strcmp(v, "device") ? TL_DEVICE : -2;
            if (tail_calls == -2) { fprintf(stderr, "control_bench: bad --tail-locations %s\n", v); return 2; }
        } else if (!strcmp(a, "--publish")) {
            pub_mode = !strcmp(v, "list") ? 0 : !strcmp(v, "each") ? 1 : !strcmp(v, "both") ? 2 : -1;
            if (pub_mode < 0) { fprintf(stderr, "control_bench: bad --publish %s\n", v); return 2; }
        } else if (!strcmp(a, "--hot-rows")) {
            hot_rows = strtol(v, &end, 10);
            if (*end || hot_rows < 64 || hot_rows > 1048576 || hot_rows % 64) {
                fprintf(stderr, "control_bench: bad --hot-rows (64..1048576, a multiple of 64)\n");
                return 2;
            }
        } else if (!strcmp(a, "--call-us")) {
            call_us = strtod(v, &end);
            if (*end || call_us < 0 || call_us > 1000) { fprintf(stderr, "control_bench: bad --call-us\n"); return 2; }
        } else if (!strcmp(a, "--overlap")) {
            step_us = strtod(v, &end);
            if (*end || !(step_us >= 0 && step_us <= 1e6)) { fprintf(stderr, "control_bench: bad --overlap (0..1e6 us)\n"); return 2; }
        } else if (!strcmp(a, "--history-on-device")) {
            hist_frac = strtod(v, &end);
            if (*end || hist_frac < 0 || hist_frac > 1) { fprintf(stderr, "control_bench: bad --history-on-device\n"); return 2; }
        } else {
            fprintf(stderr, "control_bench: unknown option %s (--help)\n", a);
            return 2;
        }
        i++;
    }
    if (tail_calls == TL_DEVICE && !dev_res) {
        fprintf(stderr, "control_bench: --tail-locations device needs --resolver device\n");
        return 2;
    }
    if (tail_calls < 0) tail_calls = dev_res ? TL_DEVICE : TL_ROUND;
    if (step_us >= 0 && (background || only >= 0)) {
        fprintf(stderr, "control_bench: --overlap runs its own two modes: no --background or --mode with it\n");
        return 2;
    }
    static const char *tl_name[3] = {"each", "round", "device"};
    printf("control_bench: context %ld%s, %ld rounds per mode, hot rows %ld, call cost %.2f us, history on device %.2f, "
           "copy delay %ld, backend %s, resolver %s, tail locations %s, publish %s%s\n",
           context, stagger ? " (staggered)" : "", rounds, hot_rows, call_us, hist_frac, async_delay, cuda ? "cuda" : "cpu",
           dev_res ? "device" : "host", tl_name[tail_calls], pub_mode == 0 ? "list" : pub_mode == 1 ? "each" : "each, list",
           background ? ", background" : "");
    printf("%6s %-16s %9s %9s %9s %9s | %7s %7s %8s | %7s %7s %7s | calls/round in begin (by kind)\n", "C", "mode",
           "begin_us", "caller_us", "end_us", "total_us", "b_mean", "e_mean", "bk_rows", "b_calls", "c_calls", "e_calls");
    for (int ci = 0; ci < nC; ci++) {
        double med[6][4], mean[6][4], gap_med[6] = {0};
        static const char *mode_name[6] = {"full-sweep", "per-round", "per-page", "background", "early", "overlap"};
        memset(med, 0, sizeof med);
        memset(mean, 0, sizeof mean);
        for (int m = 0; m < 6; m++) { /* the baselines first, then the library's path, same setup */
            if (step_us >= 0 ? m < 4 : m >= 4) continue;
            if (step_us < 0 && (background ? m < 2 : (m == 3 || (only >= 0 && m != only)))) continue;
            double pv_begin[2][2] = {{0}}; /* [each, list][calls included, own] */
            for (int pv = pub_mode == 0; pv <= (pub_mode != 1); pv++) {
            pub_each = pv == 0;
            char mname[32];
            snprintf(mname, sizeof mname, "%s%s", mode_name[m], pub_mode == 2 ? (pv ? "/list" : "/each") : "");
            phase_sum p;
            memset(&p, 0, sizeof p);
            for (int ph = 0; ph < 4; ph++) p.us[ph] = calloc((size_t)rounds, sizeof(double));
            for (int ph = 0; ph < 2; ph++) p.own[ph] = calloc((size_t)rounds, sizeof(double));
            p.gap = calloc((size_t)rounds, sizeof(double));
            p.step = calloc((size_t)rounds, sizeof(double));
            int rc = run_one(Cs[ci], context, rounds, hist_frac, async_delay, m, cuda, dev_res, &p);
            if (rc) { fprintf(stderr, "control_bench: C = %ld failed (%d)\n", Cs[ci], rc); return 1; }
            double n = (double)p.rounds;
            double own_med[2];
            for (int ph = 0; ph < 2; ph++) {
                own_med[ph] = median(p.own[ph], p.rounds);
                free(p.own[ph]);
            }
            for (int ph = 0; ph < 4; ph++) {
                mean[m][ph] = 0;
                for (int64_t i = 0; i < p.rounds; i++) mean[m][ph] += p.us[ph][i] / n;
                med[m][ph] = median(p.us[ph], p.rounds);
                free(p.us[ph]);
            }
            pv_begin[pv][0] = med[m][0];
            pv_begin[pv][1] = own_med[0];
            printf("%6ld %-16s %9.1f %9.1f %9.1f %9.1f | %7.1f %7.1f %7.1f | %7.1f %7.1f %8.1f |", Cs[ci], mname,
                   med[m][0], med[m][1], med[m][2], med[m][0] + med[m][1] + med[m][2], mean[m][0], mean[m][2],
                   (double)(p.bk1 - p.bk0) / n, tot_calls(&p, 0) / n, tot_calls(&p, 1) / n, tot_calls(&p, 2) / n);
            for (int k = 0; k < K_N; k++)
                if (p.calls[0][k]) printf(" %s %.1f", k_names[k], (double)p.calls[0][k] / n);
            printf("\n");
            printf("%6s %-16s library's own host time (outside backend calls, the CPU backend's emulated clock "
                   "included in the calls): begin median %.1f us, end median %.1f us\n", "", "", own_med[0], own_med[1]);
            /* the library's own phase clocks (dhs_get_host_time), backend calls included: where begin and end go */
            printf("%6s %-16s library phases, us per round (means, calls included):", "", "");
            static const dhs_host_phase shown[] = {DHS_HP_HOUSEKEEPING, DHS_HP_SWEEP, DHS_HP_ADVANCE, DHS_HP_REPOPULATE,
                                                   DHS_HP_TAIL_ROOM, DHS_HP_PUBLISH, DHS_HP_DEVICE, DHS_HP_BACKUP,
                                                   DHS_HP_BACKGROUND};
            for (size_t k = 0; k < sizeof shown / sizeof shown[0]; k++)
                printf(" %s %.1f", dhs_host_phase_str(shown[k]), 1e-3 * (double)(p.hp1[shown[k]] - p.hp0[shown[k]]) / n);
            printf("\n");
            if (m >= 4 && cuda) {
                double gm = 0;
                for (int64_t i = 0; i < p.rounds; i++) gm += p.gap[i] / n;
                gap_med[m] = median(p.gap, p.rounds);
                printf("%6ld %-16s gap_us median %.1f mean %.1f (the compute stream idle between two steps), step "
                       "median %.1f us\n", Cs[ci], "", gap_med[m], gm, median(p.step, p.rounds));
            }
            free(p.gap);
            free(p.step);
            if (m == 3)
                printf("%6ld %-16s bg_us median %.1f mean %.1f (dhs_background: host time overlapped with the step, "
                       "not exposed), %.1f calls/round\n", Cs[ci], "", med[m][3], mean[m][3], tot_calls(&p, 3) / n);
            /* host us per round inside the backend's calls, by phase and kind (means) */
            for (int ph = 0; ph < 4; ph++) {
                double tot = 0;
                for (int k = 0; k < K_N; k++) tot += p.call_s[ph][k];
                if (tot <= 0) continue;
                printf("%6s %-16s %s in calls %.1f us/round:", "", "",
                       ph == 0 ? "begin" : ph == 1 ? "caller" : ph == 2 ? "end" : "bg",
                       1e6 * tot / n);
                for (int k = 0; k < K_N; k++)
                    if (p.calls[ph][k])
                        printf(" %s %.1f x %.2f", k_names[k], (double)p.calls[ph][k] / n,
                               1e6 * p.call_s[ph][k] / (double)p.calls[ph][k]);
                printf("\n");
            }
            } /* pv */
            if (pub_mode == 2)
                printf("%6ld %-16s begin medians each / list: %.2f (calls included %.1f -> %.1f us), own %.2f "
                       "(%.1f -> %.1f us)\n", Cs[ci], "ratio", pv_begin[1][0] > 0 ? pv_begin[0][0] / pv_begin[1][0] : 0.0,
                       pv_begin[0][0], pv_begin[1][0], pv_begin[1][1] > 0 ? pv_begin[0][1] / pv_begin[1][1] : 0.0,
                       pv_begin[0][1], pv_begin[1][1]);
        }
        if (step_us >= 0)
            printf("%6ld %-16s begin medians early / overlap %.2f (%.1f -> %.1f us)%s", Cs[ci], "ratio",
                   med[5][0] > 0 ? med[4][0] / med[5][0] : 0.0, med[4][0], med[5][0],
                   cuda ? "" : " (no device step on the CPU backend)\n");
        if (step_us >= 0 && cuda)
            printf(", stream idle between steps early / overlap %.2f (%.1f -> %.1f us)\n",
                   gap_med[5] > 0 ? gap_med[4] / gap_med[5] : 0.0, gap_med[4], gap_med[5]);
        if (step_us >= 0)
            ;
        else if (background)
            printf("%6ld %-16s %9.2f %9s %9.2f %9.2f | %7.2f %7.2f   (per-page / background: medians | means; "
                   "exposed us per round %.1f -> %.1f mean)\n", Cs[ci], "ratio",
                   med[3][0] > 0 ? med[2][0] / med[3][0] : 0.0, "", med[3][2] > 0 ? med[2][2] / med[3][2] : 0.0,
                   (med[2][0] + med[2][1] + med[2][2]) / (med[3][0] + med[3][1] + med[3][2]),
                   mean[3][0] > 0 ? mean[2][0] / mean[3][0] : 0.0, mean[3][2] > 0 ? mean[2][2] / mean[3][2] : 0.0,
                   mean[2][0] + mean[2][1] + mean[2][2], mean[3][0] + mean[3][1] + mean[3][2]);
        else if (only < 0)
        printf("%6ld %-16s %9.2f %9s %9.2f %9.2f | %7.2f %7.2f   (per-round / per-page: medians | means)\n", Cs[ci],
               "ratio", med[2][0] > 0 ? med[1][0] / med[2][0] : 0.0, "", med[2][2] > 0 ? med[1][2] / med[2][2] : 0.0,
               (med[1][0] + med[1][1] + med[1][2]) / (med[2][0] + med[2][1] + med[2][2]),
               mean[2][0] > 0 ? mean[1][0] / mean[2][0] : 0.0, mean[2][2] > 0 ? mean[1][2] / mean[2][2] : 0.0);
        fflush(stdout);
    }
    return 0;
}
