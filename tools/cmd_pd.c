/* dhs pd-bench - prefill-to-decode import over UCX between two processes
 * (docs/XFER.md): a forked prefill process holds a request's rows per
 * source and sends them (libdhs_xfer's sender); this process, the decode
 * side, receives them straight into the host tier of its dhs_ctx
 * (dhs_request_import_begin, RMA gets into the registered host rows,
 * commit), checks every byte, closes the request, and repeats. Reports the
 * import's GB/s (the gets alone, and end to end: setup, registration,
 * gets, commit) next to a plain memcpy of the same bytes in this process.
 * Built only with DHS_UCX (libucx-dev); otherwise it says so and exits 2.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cmds.h"
#include "dhs.h"
#include "tool.h"

#ifdef DHS_HAVE_UCX
#include "dhs_xfer.h"
#endif

typedef struct pd_opts {
    int64_t positions;
    int32_t sources, row_bytes, iters, inflight, json, no_peer_errors, backend;
    int64_t chunk_kib;
    double timeout_s;
    const char *output;
    int32_t host_cache;
} pd_opts;

static const char *const pd_backends[] = {"cpu", "cuda", NULL};

#ifdef DHS_HAVE_UCX
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* the rows' bytes: word w of row `row` of source s of import `it` (so no import can pass with another's bytes) */
static inline uint64_t pd_word(int32_t it, int32_t s, int64_t row, uint64_t w)
{
    uint64_t x = ((uint64_t)it << 56) ^ ((uint64_t)s << 44) ^ ((uint64_t)row << 12) ^ w;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static void pd_fill(uint8_t *p, uint32_t rb, int32_t it, int32_t s, int64_t row)
{
    for (uint32_t w = 0; w < rb / 8; w++) {
        uint64_t v = pd_word(it, s, row, w);
        memcpy(p + (size_t)w * 8, &v, 8);
    }
}

typedef struct pd_check {
    const pd_opts *o;
    uint32_t stride;
    int32_t iter;
    int64_t bad_rows;
} pd_check;

static int pd_verify(void *user, int64_t n, void *const *host_rows)
{
    pd_check *c = user;
    uint8_t want[4096];
    for (int32_t s = 0; s < c->o->sources; s++)
        for (int64_t row = 0; row < n; row++) {
            pd_fill(want, (uint32_t)c->o->row_bytes, c->iter, s, row);
            if (memcmp(want, (const uint8_t *)host_rows[s] + (size_t)row * c->stride, (size_t)c->o->row_bytes)) c->bad_rows++;
        }
    return c->bad_rows != 0;
}

/* The prefill process: one connection and one dhs_xfer_send per import; exits 0 when every import was
   committed by the receiver. */
static void pd_sender(const pd_opts *o, int port)
{
    char err[256] = "";
    dhs_xfer_rows xr;
    memset(&xr, 0, sizeof xr);
    xr.n_sources = o->sources;
    xr.n_positions = o->positions;
    uint8_t *buf[DHS_MAX_SOURCES] = {0};
    for (int32_t s = 0; s < o->sources; s++) {
        buf[s] = aligned_alloc(64, ((size_t)o->positions * (size_t)o->row_bytes + 63) & ~(size_t)63);
        if (!buf[s]) { fprintf(stderr, "prefill: out of memory\n"); _exit(EXIT_RUNTIME); }
        xr.rows[s] = buf[s];
        xr.row_bytes[s] = (uint32_t)o->row_bytes;
        xr.m[s] = 1;
    }
    dhs_xfer *x = NULL;
    if (dhs_xfer_create(&x, err, sizeof err) != DHS_XFER_OK) {
        fprintf(stderr, "prefill: %s\n", err);
        _exit(EXIT_RUNTIME);
    }
    int rc = EXIT_OK;
    for (int32_t it = 0; it < o->iters && rc == EXIT_OK; it++) {
        for (int32_t s = 0; s < o->sources; s++)
            for (int64_t row = 0; row < o->positions; row++)
                pd_fill(buf[s] + (size_t)row * (size_t)o->row_bytes, (uint32_t)o->row_bytes, it, s, row);
        int fd = -1;
        dhs_xfer_status st = dhs_xfer_connect(NULL, port, o->timeout_s, &fd, err, sizeof err);
        if (st == DHS_XFER_OK) st = dhs_xfer_send(x, fd, &xr, o->timeout_s * 10, err, sizeof err);
        if (fd >= 0) close(fd);
        if (st != DHS_XFER_OK) {
            fprintf(stderr, "prefill: import %d: %s: %s\n", it, dhs_xfer_status_str(st), err);
            rc = EXIT_RUNTIME;
        }
    }
    dhs_xfer_destroy(x);
    for (int32_t s = 0; s < o->sources; s++) free(buf[s]);
    _exit(rc);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int pd_run(const char *prog, const pd_opts *o)
{
    char err[256] = "";
    const uint64_t bytes = (uint64_t)o->sources * (uint64_t)o->positions * (uint64_t)o->row_bytes;
    /* the decode side's context: one group of `sources` sources, room for one request */
    dhs_arch a;
    memset(&a, 0, sizeof a);
    a.n_groups = 1;
    a.n_sources = o->sources;
    for (int32_t s = 0; s < o->sources; s++) a.sources[s] = (dhs_source_desc){(uint32_t)o->row_bytes, 1, 0};
    a.n_consumers = o->sources;
    for (int32_t s = 0; s < o->sources; s++)
        a.consumers[s] = (dhs_consumer_desc){s ? DHS_CONSUMER_FOLLOW : DHS_CONSUMER_OWN, s, 0};
    dhs_config c = dhs_config_default();
    c.max_requests = 1;
    c.max_rows = o->positions;
    c.hot_rows = 256;
    c.sel_k = 256;
    dhs_sizes z;
    if (dhs_config_sizes(&a, &c, &z) != DHS_OK) return args_fail(prog, "no context fits these sizes");
    c.device_bytes = z.min_device_bytes + 4 * z.page_bytes * (uint64_t)o->sources;
    /* --host-cache: a closed import's host rows serve the next (pinned, registered once by UCX's cache) */
    if (o->host_cache) c.host_cache_bytes = 2 * (uint64_t)o->sources * (uint64_t)(o->positions + 1024) * (uint64_t)o->row_bytes;
    dhs_backend *be = NULL;
    dhs_status ds = o->backend ? dhs_backend_cuda_create(0, &be) : dhs_backend_cpu_create(NULL, &be);
    if (ds != DHS_OK) {
        fprintf(stderr, "%s: %s backend: %s\n", prog, pd_backends[o->backend], dhs_status_str(ds));
        return EXIT_RUNTIME;
    }
    dhs_ctx *ctx = NULL;
    if ((ds = dhs_ctx_create(&a, &c, be, &ctx)) != DHS_OK) {
        fprintf(stderr, "%s: dhs_ctx_create: %s\n", prog, dhs_status_str(ds));
        dhs_backend_destroy(be);
        return EXIT_RUNTIME;
    }
    int lfd = -1, port = 0;
    if (dhs_xfer_listen(NULL, 0, &lfd, &port, err, sizeof err) != DHS_XFER_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        dhs_ctx_destroy(ctx);
        dhs_backend_destroy(be);
        return EXIT_RUNTIME;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork(); /* before any UCX context exists in this process */
    if (pid == 0) {
        close(lfd);
        pd_sender(o, port);
    }
    int rc = EXIT_OK;
    dhs_xfer *x = NULL;
    double *t_data = calloc((size_t)o->iters, sizeof(double)), *t_total = calloc((size_t)o->iters, sizeof(double));
    double t_setup_sum = 0;
    int64_t gets = 0, bad = 0;
    int32_t done = 0;
    if (pid < 0) { perror("fork"); rc = EXIT_RUNTIME; goto out; }
    if (dhs_xfer_create(&x, err, sizeof err) != DHS_XFER_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        rc = EXIT_RUNTIME;
        goto out;
    }
    for (int32_t it = 0; it < o->iters; it++) {
        dhs_req r;
        if ((ds = dhs_request_open(ctx, o->positions, &r)) != DHS_OK) {
            fprintf(stderr, "%s: dhs_request_open: %s\n", prog, dhs_status_str(ds));
            rc = EXIT_RUNTIME;
            break;
        }
        pd_check chk = {o, dhs_pool_row_stride(ctx), it, 0};
        dhs_xfer_recv_opts ro = {o->timeout_s, (uint64_t)o->chunk_kib << 10, o->inflight, pd_verify, NULL, &chk,
                                 o->no_peer_errors};
        dhs_xfer_recv_info info;
        int fd = -1;
        dhs_xfer_status st = dhs_xfer_accept(lfd, o->timeout_s, &fd, err, sizeof err);
        if (st == DHS_XFER_OK) st = dhs_xfer_recv(x, fd, ctx, &a, r, &ro, &info, err, sizeof err);
        if (fd >= 0) close(fd);
        if (st != DHS_XFER_OK) {
            fprintf(stderr, "%s: import %d: %s: %s\n", prog, it, dhs_xfer_status_str(st), err);
            rc = st == DHS_XFER_ERR_CHECK ? EXIT_CHECK : EXIT_RUNTIME;
            bad += chk.bad_rows;
            dhs_request_close(ctx, r);
            break;
        }
        int64_t n = -1;
        dhs_request_positions(ctx, r, &n);
        char msg[256];
        if (n != o->positions || dhs_check_invariants(ctx, msg, sizeof msg)) {
            fprintf(stderr, "%s: import %d: %lld positions after the commit, invariants: %s\n", prog, it, (long long)n,
                    msg);
            rc = EXIT_CHECK;
        }
        dhs_request_close(ctx, r);
        t_data[done] = info.t_data_s;
        t_total[done] = info.t_total_s;
        t_setup_sum += info.t_setup_s;
        gets = info.gets;
        done++;
        if (rc != EXIT_OK) break;
    }
out:;
    int ws = 0;
    if (pid > 0) {
        if (rc != EXIT_OK) kill(pid, SIGKILL);
        waitpid(pid, &ws, 0);
        if (rc == EXIT_OK && !(WIFEXITED(ws) && WEXITSTATUS(ws) == 0)) {
            fprintf(stderr, "%s: the prefill process failed\n", prog);
            rc = EXIT_RUNTIME;
        }
    }
    dhs_xfer_destroy(x);
    close(lfd);
    dhs_ctx_destroy(ctx);
    dhs_backend_destroy(be);
    if (rc == EXIT_OK && done == o->iters) {
        /* the baseline: memcpy of the same bytes between two warm buffers of this process */
        uint8_t *src = aligned_alloc(64, (bytes + 63) & ~(uint64_t)63), *dst = aligned_alloc(64, (bytes + 63) & ~(uint64_t)63);
        double *t_mc = calloc((size_t)o->iters, sizeof(double));
        if (!src || !dst || !t_mc) { fprintf(stderr, "%s: out of memory\n", prog); free(src); free(dst); free(t_mc); rc = EXIT_RUNTIME; goto end; }
        memset(src, 0x5a, bytes);
        memset(dst, 0, bytes);
        for (int32_t it = 0; it < o->iters; it++) {
            double t0 = now_s();
            memcpy(dst, src, bytes);
            t_mc[it] = now_s() - t0;
            src[(size_t)it % bytes] ^= dst[(size_t)(it * 7) % bytes]; /* keeps every copy observable */
        }
        qsort(t_data, (size_t)done, sizeof(double), cmp_dbl);
        qsort(t_total, (size_t)done, sizeof(double), cmp_dbl);
        qsort(t_mc, (size_t)o->iters, sizeof(double), cmp_dbl);
        const double gb = (double)bytes / 1e9;
        double data_best = gb / t_data[0], data_med = gb / t_data[done / 2];
        double tot_best = gb / t_total[0], tot_med = gb / t_total[done / 2];
        double mc_best = gb / t_mc[0], mc_med = gb / t_mc[o->iters / 2];
        const char *tls = getenv("UCX_TLS");
        const char *ucxv = dhs_xfer_ucx_version();
        if (o->json) {
            printf("{");
            tool_prov_fields(stdout, pd_backends[o->backend]);
            printf("\"bench\": \"pd\", \"ucx\": \"%s\", \"ucx_tls\": \"%s\", \"peer_errors\": %s, \"sources\": %d, "
                   "\"positions\": %lld, \"row_bytes\": %d, \"bytes\": %llu, \"imports\": %d, \"gets\": %lld, "
                   "\"chunk_bytes\": %llu, \"inflight\": %d, \"data_gbps_best\": %.3f, \"data_gbps_median\": %.3f, "
                   "\"import_gbps_best\": %.3f, \"import_gbps_median\": %.3f, \"setup_ms_mean\": %.3f, "
                   "\"memcpy_gbps_best\": %.3f, \"memcpy_gbps_median\": %.3f, \"host_cache\": %s, \"bad_rows\": 0}\n",
                   ucxv, tls ? tls : "", o->no_peer_errors ? "false" : "true", o->sources,
                   (long long)o->positions, o->row_bytes, (unsigned long long)bytes, done, (long long)gets,
                   (unsigned long long)o->chunk_kib << 10, o->inflight, data_best, data_med, tot_best, tot_med,
                   1e3 * t_setup_sum / done, mc_best, mc_med, o->host_cache ? "true" : "false");
        } else {
            printf("dhs pd-bench: %d source(s) x %lld rows x %d B = %.1f MB per import, %d imports, %s backend\n",
                   o->sources, (long long)o->positions, o->row_bytes, (double)bytes / 1e6, done,
                   pd_backends[o->backend]);
            printf("UCX %s, UCX_TLS=%s, peer error handling %s, %lld gets per import (chunks of %lld KiB, "
                   "%d in flight)\n",
                   ucxv, tls ? tls : "(unset)", o->no_peer_errors ? "off" : "on", (long long)gets,
                   (long long)o->chunk_kib, o->inflight);
            printf("%-34s %10s %10s\n", "GB/s", "best", "median");
            printf("%-34s %10.3f %10.3f\n", "UCX gets into the host tier", data_best, data_med);
            printf("%-34s %10.3f %10.3f\n", "import end to end (+setup, commit)", tot_best, tot_med);
            printf("%-34s %10.3f %10.3f\n", "memcpy of the same bytes", mc_best, mc_med);
            printf("gets / memcpy: %.2f (best), setup %.2f ms per import (begin, registration, endpoint%s); every byte "
                   "checked\n",
                   data_best / mc_best, 1e3 * t_setup_sum / done, o->host_cache ? "; host rows reused" : "");
        }
        free(src);
        free(dst);
        free(t_mc);
    }
    if (bad) fprintf(stderr, "%s: %lld rows differ\n", prog, (long long)bad);
end:
    free(t_data);
    free(t_total);
    return rc;
}
#endif

int cmd_pd(int argc, char **argv)
{
    pd_opts o = {32768, 2, 656, 3, 256, 0, 0, 0, 8192, 10.0, NULL, 0};
    arg_spec specs[] = {
        A_I64("--positions", &o.positions, 1, 1 << 24, "prefill positions (rows per source, m = 1)"),
        A_INT("--sources", &o.sources, 1, 64, "payload sources (layers) of the request"),
        A_INT("--row-bytes", &o.row_bytes, 16, 4096, "bytes per row, a multiple of 16 (656: a DSA FP8 row)"),
        A_INT("--iters", &o.iters, 1, 1000, "imports (each a fresh request); best and median reported"),
        A_I64("--chunk-kib", &o.chunk_kib, 4, 1 << 20, "largest single get, KiB"),
        A_INT("--inflight", &o.inflight, 1, 1 << 16, "gets outstanding at once"),
        A_DBL("--timeout", &o.timeout_s, 0.1, 3600, "seconds without progress before an import is aborted"),
        A_BOOL("--no-peer-errors", &o.no_peer_errors,
               "endpoints without peer error handling, so UCX may use shared memory (a sender's death is then "
               "not detected reliably: benchmarks only)"),
        A_ENUM("--backend", &o.backend, pd_backends, "decode side's backend (cuda: pinned host rows)"),
        A_BOOL("--host-cache", &o.host_cache,
               "keep each closed import's host rows for the next (dhs_config.host_cache_bytes): no fresh pinning "
               "or first touch after the first import"),
        A_BOOL("--json", &o.json, "one JSON object (with version, commit, date, host, device)"),
        A_OUT("--output", &o.output, "write the results to FILE instead of stdout"),
    };
    arg_cmd cmd = {
        .prog = "dhs pd-bench",
        .synopsis = "[flags]",
        .about = "Prefill-to-decode import over UCX, two processes on loopback: a forked prefill process sends a\n"
                 "request's rows (libdhs_xfer), this process receives them with RMA gets straight into the host\n"
                 "tier of its context (dhs_request_import_begin .. commit), checks every byte and closes the\n"
                 "request; --iters times. Reports GB/s of the gets and of the whole import next to a memcpy of\n"
                 "the same bytes. UCX_TLS picks the transports (e.g. UCX_TLS=tcp on a machine without RDMA).\n"
                 "Needs a build with -DDHS_UCX=ON (libucx-dev); otherwise exits 2 saying so (not available here).",
        .specs = specs,
        .n_specs = (int)(sizeof specs / sizeof specs[0]),
        .footer = "Exit status: 0 done, 1 a byte or invariant check failed, 2 bad usage (or no UCX in this build: "
                  "not available here), 3 runtime error.",
    };
    int pr = args_parse(&cmd, argc, argv, NULL, NULL);
    if (pr != ARGS_OK) return args_exit(pr);
    if (o.row_bytes % 16) return args_fail(cmd.prog, "--row-bytes %d is not a multiple of 16", o.row_bytes);
#ifndef DHS_HAVE_UCX
    fprintf(stderr, "%s: this build has no UCX transport (configure with -DDHS_UCX=ON; scripts/deps.sh installs "
                    "libucx-dev)\n",
            cmd.prog);
    return EXIT_USAGE;
#else
    if (o.backend && tool_check_backend(cmd.prog, "cuda")) return EXIT_USAGE;
    if (tool_output(cmd.prog, o.output)) return EXIT_USAGE;
    return pd_run(cmd.prog, &o);
#endif
}
