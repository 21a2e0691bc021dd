/* test_xfer.c - prefill-to-decode import over UCX between two processes on
 * loopback (fork): a sender child exposes a request's rows, the parent
 * receives them into the host tier of its dhs_ctx (dhs_xfer_recv) and
 * commits. Checked, with the invariant checker after every transfer:
 *   - a complete transfer imports every row exactly (read back through
 *     resolve rounds), with dense sender rows (one get per chunk for the
 *     source as wide as the pool stride, one per row for narrower ones) and
 *     with rows at the pool stride (one get per chunk for every source);
 *   - the sender killed (SIGKILL) mid-transfer: the receiver reports
 *     DHS_XFER_ERR_PEER, aborts the import, and the request is as before
 *     (0 positions, host memory back, invariants), then a retry succeeds;
 *   - the sender giving up and closing the connection mid-transfer (alive):
 *     the same;
 *   - a sender whose rows do not fit the arch, and one that never sends its
 *     setup: refused before any import begins, the request untouched.
 * Skips (77) when built without UCX. UCX_TLS picks the transports (the CTest
 * sets tcp on loopback).
 */
#include "test_help.h"

#ifndef DHS_HAVE_UCX
int main(void)
{
    printf("test_xfer: built without UCX (configure with -DDHS_UCX=ON and libucx-dev): skipped\n");
    return 77;
}
#else
#include <signal.h>
#include <sys/wait.h>

#include "dhs_xfer.h"

#define KSEL 16

enum { SEND_OK, SEND_STRIDED, SEND_GIVE_UP, SEND_WRONG_ROWS, SEND_SILENT };

static dhs_config small_cfg(void)
{
    dhs_config c = dhs_config_default();
    c.max_requests = 4;
    c.sel_k = KSEL;
    c.spec_width = 2;
    c.hot_rows = 32;
    c.page_rows = 8;
    c.tail_rows = 24;
    c.max_rows = 4096;
    c.device_bytes = 600ull * 8 * 64;
    c.repop_pages = 8;
    return c;
}

/* The sender: rows of request `uid` (version 0), as th_fill_row makes them. Exits with 0 when
   dhs_xfer_send answered what the mode expects, else 1; never returns. */
static void sender_child(const dhs_arch *arch, int port, uint64_t uid, int64_t n, int mode)
{
    char err[256] = "";
    dhs_xfer_rows xr;
    memset(&xr, 0, sizeof xr);
    xr.n_sources = arch->n_sources;
    xr.n_positions = n;
    uint32_t stride = 0;
    for (int32_t s = 0; s < arch->n_sources; s++)
        if (arch->sources[s].row_bytes > stride) stride = arch->sources[s].row_bytes;
    for (int32_t s = 0; s < arch->n_sources; s++) {
        uint32_t rb = arch->sources[s].row_bytes;
        int64_t m = arch->sources[s].m, nr = (n + m - 1) / m;
        uint64_t st = mode == SEND_STRIDED ? stride : rb;
        uint8_t *buf = th_alloc((size_t)nr * st + 16);
        for (int64_t row = 0; row < nr; row++) th_fill_row(buf + (size_t)row * st, rb, uid, s, row, 0);
        xr.rows[s] = buf;
        xr.row_bytes[s] = mode == SEND_WRONG_ROWS && s == 0 ? rb + 16 : rb;
        xr.m[s] = (uint32_t)m;
        xr.stride[s] = mode == SEND_STRIDED ? st : 0;
    }
    dhs_xfer *x = NULL;
    int fd = -1;
    if (dhs_xfer_create(&x, err, sizeof err) != DHS_XFER_OK || dhs_xfer_connect(NULL, port, 10, &fd, err, sizeof err) != DHS_XFER_OK) {
        printf("sender: %s\n", err);
        _exit(1);
    }
    int rc = 1;
    if (mode == SEND_SILENT) {
        sleep(2); /* connected, never sends its setup */
        rc = 0;
    } else {
        /* GIVE_UP: the receiver's progress hook stalls, the sender's short timeout fires */
        dhs_xfer_status s = dhs_xfer_send(x, fd, &xr, mode == SEND_GIVE_UP ? 0.3 : 30.0, err, sizeof err);
        dhs_xfer_status want = mode == SEND_GIVE_UP ? DHS_XFER_ERR_TIMEOUT
                               : mode == SEND_WRONG_ROWS ? DHS_XFER_ERR_REJECTED
                                                         : DHS_XFER_OK;
        rc = s == want ? 0 : 1;
        if (rc) printf("sender: %s (%s), wanted %s\n", dhs_xfer_status_str(s), err, dhs_xfer_status_str(want));
        if (mode == SEND_GIVE_UP) {
            close(fd);
            fd = -1;
            sleep(2); /* closed the connection, still alive */
        }
    }
    if (fd >= 0) close(fd);
    dhs_xfer_destroy(x);
    fflush(stdout);
    _exit(rc);
}

typedef struct hook {
    pid_t child;
    int kill_after;   /* SIGKILL the sender after this many gets (0: never) */
    double stall_s;   /* sleep once after the first get (the sender gives up meanwhile) */
    int fired;
    int64_t at, total;
} hook;

static void on_progress(void *user, int64_t done, int64_t total)
{
    hook *h = user;
    if (h->fired) return;
    if (h->kill_after && done >= h->kill_after) {
        kill(h->child, SIGKILL);
        h->fired = 1;
    } else if (h->stall_s > 0 && done >= 1) {
        struct timespec ts = {(time_t)h->stall_s, (long)((h->stall_s - (double)(time_t)h->stall_s) * 1e9)};
        nanosleep(&ts, NULL);
        h->fired = 1;
    }
    h->at = done;
    h->total = total;
}

/* One transfer into request `slot`: forks the sender, receives, reaps it. Returns the receiver's status. */
static dhs_xfer_status transfer(th_env *e, int slot, int64_t n, int mode, hook *hk, const dhs_xfer_recv_opts *base,
                                dhs_xfer_recv_info *info, int *child_ok)
{
    char err[256] = "";
    int lfd = -1, port = 0, fd = -1;
    CHECK(dhs_xfer_listen(NULL, 0, &lfd, &port, err, sizeof err) == DHS_XFER_OK);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(lfd);
        sender_child(&e->arch, port, e->rq[slot].uid, n, mode);
    }
    CHECK(pid > 0);
    dhs_xfer *x = NULL;
    dhs_xfer_status s = dhs_xfer_create(&x, err, sizeof err);
    CHECKF(s == DHS_XFER_OK, "dhs_xfer_create: %s", err);
    if (s == DHS_XFER_OK) s = dhs_xfer_accept(lfd, 10, &fd, err, sizeof err);
    if (s == DHS_XFER_OK) {
        dhs_xfer_recv_opts o = *base;
        if (hk) {
            hk->child = pid;
            o.progress = on_progress;
            o.user = hk;
        }
        s = dhs_xfer_recv(x, fd, e->ctx, &e->arch, e->rq[slot].h, &o, info, err, sizeof err);
        close(fd);
    }
    printf("  transfer mode %d, %lld positions: %s%s%s\n", mode, (long long)n, dhs_xfer_status_str(s), *err ? ": " : "",
           err);
    close(lfd);
    dhs_xfer_destroy(x);
    int ws = 0;
    waitpid(pid, &ws, 0);
    *child_ok = WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
    if (hk && hk->kill_after) *child_ok = WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL;
    CHECK_INV(e->ctx);
    return s;
}

static void check_untouched(th_env *e, int slot, const dhs_mem *before, const char *what)
{
    int64_t pos = -1;
    CHECK_ST(dhs_request_positions(e->ctx, e->rq[slot].h, &pos), DHS_OK);
    dhs_mem m;
    dhs_get_mem(e->ctx, &m);
    CHECKF(pos == 0 && m.host_bytes_allocated == before->host_bytes_allocated && m.pages_free == before->pages_free,
           "%s: %lld positions, host bytes %llu (before %llu)", what, (long long)pos,
           (unsigned long long)m.host_bytes_allocated, (unsigned long long)before->host_bytes_allocated);
    int32_t K1 = 1; /* not imported, no round yet: still importable (a round would make it empty) */
    void *hr[DHS_MAX_SOURCES];
    CHECK_ST(dhs_request_import_begin(e->ctx, e->rq[slot].h, 1, DHS_IMPORT_HOST, hr), DHS_OK);
    CHECK_ST(dhs_round_begin(e->ctx, 1, &e->rq[slot].h, &K1), DHS_ERR_STATE);
    CHECK_ST(dhs_request_import_abort(e->ctx, e->rq[slot].h), DHS_OK);
    CHECK_INV(e->ctx);
}

int main(void)
{
    dhs_arch arch = th_arch_two_groups(4); /* 64 B + 48 B (m = 1) and 32 B (m = 4): pool stride 64 */
    dhs_config cfg = small_cfg();
    th_env e;
    CHECK_ST(th_env_init(&e, &arch, &cfg, NULL), DHS_OK);
    const int64_t n = 3000 + 5; /* 3,005 positions: partial page, incomplete compressed row */
    dhs_xfer_recv_opts small = {5.0, 4096, 1, NULL, NULL, NULL, 0}; /* one 4 KiB get at a time: many steps */
    dhs_xfer_recv_opts dflt = {10.0, 0, 0, NULL, NULL, NULL, 0};
    dhs_xfer_recv_info info;
    int child_ok = 0;
    const char *tls = getenv("UCX_TLS");
    printf("UCX_TLS=%s\n", tls ? tls : "(unset)");

    CHECK_ST(th_open(&e, 0, n + 16), DHS_OK);
    dhs_mem before;
    dhs_get_mem(e.ctx, &before);

    /* 1. the sender is killed after 3 gets */
    hook hk = {0, 3, 0, 0, 0, 0};
    dhs_xfer_status s = transfer(&e, 0, n, SEND_OK, &hk, &small, &info, &child_ok);
    CHECKF(s == DHS_XFER_ERR_PEER, "killed sender: %s", dhs_xfer_status_str(s));
    CHECKF(hk.fired && hk.at < hk.total, "the kill did not happen mid-transfer (%lld of %lld gets)", (long long)hk.at,
           (long long)hk.total);
    CHECK(child_ok);
    CHECK(info.began && info.aborted);
    check_untouched(&e, 0, &before, "after the killed sender");

    /* 2. the sender gives up (its timeout) and closes the connection while the receiver stalls */
    hook stall = {0, 0, 1.0, 0, 0, 0};
    s = transfer(&e, 0, n, SEND_GIVE_UP, &stall, &small, &info, &child_ok);
    CHECKF(s == DHS_XFER_ERR_PEER, "sender that closed: %s", dhs_xfer_status_str(s));
    CHECK(child_ok);
    CHECK(info.began && info.aborted);
    check_untouched(&e, 0, &before, "after the closed connection");

    /* 3. rows that do not fit the arch: refused before any import */
    s = transfer(&e, 0, n, SEND_WRONG_ROWS, NULL, &dflt, &info, &child_ok);
    CHECKF(s == DHS_XFER_ERR_PROTOCOL, "wrong rows: %s", dhs_xfer_status_str(s));
    CHECK(child_ok && !info.began && !info.aborted);
    check_untouched(&e, 0, &before, "after the wrong rows");

    /* 4. a sender that never sends its setup: timeout, nothing begun */
    dhs_xfer_recv_opts quick = {0.5, 0, 0, NULL, NULL, NULL, 0};
    s = transfer(&e, 0, n, SEND_SILENT, NULL, &quick, &info, &child_ok);
    CHECKF(s == DHS_XFER_ERR_TIMEOUT, "silent sender: %s", dhs_xfer_status_str(s));
    CHECK(child_ok && !info.began);
    check_untouched(&e, 0, &before, "after the silent sender");

    /* 5. the retry: complete, every row exact */
    s = transfer(&e, 0, n, SEND_OK, NULL, &dflt, &info, &child_ok);
    CHECKF(s == DHS_XFER_OK, "retry: %s", dhs_xfer_status_str(s));
    CHECK(child_ok && info.began && !info.aborted);
    uint64_t want_bytes = (uint64_t)n * 64 + (uint64_t)n * 48 + (uint64_t)((n + 3) / 4) * 32;
    CHECKF(info.bytes == want_bytes, "%llu bytes, want %llu", (unsigned long long)info.bytes,
           (unsigned long long)want_bytes);
    /* source 0 in one get (< 8 MiB), sources 1 and 2 (narrower than the stride) row by row */
    CHECKF(info.gets == 1 + n + (n + 3) / 4, "%lld gets", (long long)info.gets);
    if (s == DHS_XFER_OK) e.rq[0].n = n;
    int64_t pos = -1;
    CHECK_ST(dhs_request_positions(e.ctx, e.rq[0].h, &pos), DHS_OK);
    CHECK(pos == n);
    CHECKF(th_sweep(&e, 0, KSEL) == 0, "rows imported over UCX differ");

    /* 6. rows at the pool stride: one get per 4 KiB chunk of every source */
    CHECK_ST(th_open(&e, 1, 0), DHS_OK);
    const int64_t n2 = 1500;
    hook count = {0, 0, 0, 0, 0, 0};
    dhs_xfer_recv_opts chunky = {5.0, 4096, 4, NULL, NULL, NULL, 0};
    s = transfer(&e, 1, n2, SEND_STRIDED, &count, &chunky, &info, &child_ok);
    CHECKF(s == DHS_XFER_OK, "strided: %s", dhs_xfer_status_str(s));
    CHECK(child_ok);
    int64_t g0 = (n2 * 64 + 4095) / 4096, g2 = ((((n2 + 3) / 4 - 1) * 64 + 32) + 4095) / 4096;
    CHECKF(info.gets == g0 + ((n2 - 1) * 64 + 48 + 4095) / 4096 + g2, "%lld gets", (long long)info.gets);
    if (s == DHS_XFER_OK) e.rq[1].n = n2;
    CHECKF(th_sweep(&e, 1, KSEL) == 0, "strided rows imported over UCX differ");
    CHECK_INV(e.ctx);

    th_env_free(&e);
    return th_summary();
}
#endif
