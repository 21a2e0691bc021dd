/* xfer.c - prefill-to-decode KV import over UCX (dhs_xfer.h, docs/XFER.md).
 *
 * Wire protocol on the TCP setup channel (native byte order, one version):
 *   sender -> receiver  hello: xfer_hello, n_sources x xfer_src, the
 *                       sender's worker address, the packed remote keys
 *   receiver -> sender  result: xfer_result (after the commit or the abort)
 * The data moves as UCX RMA gets issued by the receiver from the sender's
 * registered buffers into the receiver's registered host rows: only the
 * receiver writes into its memory, so a failed transfer ends when the
 * receiver has cancelled its own operations, whatever the sender does.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "dhs_xfer.h"

#define XFER_MAGIC 0x58534844u /* "DHSX" */
#define XFER_VERSION 1u
#define XFER_MAX_BLOB (1u << 20) /* largest worker address, remote key or sender row stride accepted */

struct dhs_xfer {
    ucp_context_h ctx;
    ucp_worker_h w;
    int efd; /* the worker's event fd (UCP_FEATURE_WAKEUP), -1 when the transports offer none */
};

typedef struct xfer_hello {
    uint32_t magic, version, n_sources, reserved;
    int64_t n_positions;
    uint64_t addr_len;
} xfer_hello;

typedef struct xfer_src {
    uint32_t row_bytes, m;
    uint64_t stride, n_rows, addr, len, rkey_len;
} xfer_src;

typedef struct xfer_result {
    uint32_t magic;
    int32_t status;     /* dhs_xfer_status of the receiver */
    int32_t dhs_status; /* with DHS_XFER_ERR_IMPORT */
    uint32_t reserved;
} xfer_result;

const char *dhs_xfer_status_str(dhs_xfer_status s)
{
    switch (s) {
    case DHS_XFER_OK: return "ok";
    case DHS_XFER_ERR_ARG: return "invalid argument";
    case DHS_XFER_ERR_NOMEM: return "out of memory";
    case DHS_XFER_ERR_SOCKET: return "socket error";
    case DHS_XFER_ERR_PEER: return "peer closed the connection or died";
    case DHS_XFER_ERR_TIMEOUT: return "timed out";
    case DHS_XFER_ERR_PROTOCOL: return "protocol mismatch";
    case DHS_XFER_ERR_UCX: return "UCX error";
    case DHS_XFER_ERR_IMPORT: return "import call failed";
    case DHS_XFER_ERR_REJECTED: return "receiver did not complete the import";
    case DHS_XFER_ERR_CHECK: return "rows refused by the check";
    }
    return "unknown status";
}

const char *dhs_xfer_ucx_version(void) { return ucp_get_version_string(); }

static dhs_xfer_status fail(char *err, size_t n, dhs_xfer_status s, const char *fmt, ...)
{
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return s;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------ context */
dhs_xfer_status dhs_xfer_create(dhs_xfer **out, char *err, size_t err_len)
{
    if (!out) return fail(err, err_len, DHS_XFER_ERR_ARG, "out is NULL");
    *out = NULL;
    dhs_xfer *x = calloc(1, sizeof *x);
    if (!x) return fail(err, err_len, DHS_XFER_ERR_NOMEM, "out of memory");
    ucp_config_t *cfg = NULL;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        free(x);
        return fail(err, err_len, DHS_XFER_ERR_UCX, "ucp_config_read: %s", ucs_status_string(st));
    }
    ucp_params_t p;
    memset(&p, 0, sizeof p);
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP; /* waits sleep on the worker's fd, not in a spin */
    st = ucp_init(&p, cfg, &x->ctx);
    if (st != UCS_OK) {
        p.features = UCP_FEATURE_RMA;
        st = ucp_init(&p, cfg, &x->ctx);
    }
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        free(x);
        return fail(err, err_len, DHS_XFER_ERR_UCX, "ucp_init: %s", ucs_status_string(st));
    }
    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof wp);
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(x->ctx, &wp, &x->w);
    if (st != UCS_OK) {
        ucp_cleanup(x->ctx);
        free(x);
        return fail(err, err_len, DHS_XFER_ERR_UCX, "ucp_worker_create: %s", ucs_status_string(st));
    }
    x->efd = -1;
    if ((p.features & UCP_FEATURE_WAKEUP) && ucp_worker_get_efd(x->w, &x->efd) != UCS_OK) x->efd = -1;
    *out = x;
    return DHS_XFER_OK;
}

void dhs_xfer_destroy(dhs_xfer *x)
{
    if (!x) return;
    ucp_worker_destroy(x->w);
    ucp_cleanup(x->ctx);
    free(x);
}

/* ------------------------------------------------------------------ sockets */
dhs_xfer_status dhs_xfer_listen(const char *ip, int port, int *fd_out, int *port_out, char *err, size_t err_len)
{
    if (!fd_out || port < 0 || port > 65535) return fail(err, err_len, DHS_XFER_ERR_ARG, "bad listen arguments");
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, ip ? ip : "127.0.0.1", &a.sin_addr) != 1)
        return fail(err, err_len, DHS_XFER_ERR_ARG, "not an IPv4 address: %s", ip);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(err, err_len, DHS_XFER_ERR_SOCKET, "socket: %s", strerror(errno));
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    socklen_t al = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 8) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
        int e = errno;
        close(fd);
        return fail(err, err_len, DHS_XFER_ERR_SOCKET, "bind/listen on %s:%d: %s", ip ? ip : "127.0.0.1", port,
                    strerror(e));
    }
    *fd_out = fd;
    if (port_out) *port_out = ntohs(a.sin_port);
    return DHS_XFER_OK;
}

static int wait_fd(int fd, short ev, double timeout_s)
{
    struct pollfd p = {fd, ev, 0};
    int ms = timeout_s <= 0 ? 0 : timeout_s > 1e6 ? 1000000000 : (int)(timeout_s * 1000.0) + 1;
    int r;
    do r = poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    return r;
}

dhs_xfer_status dhs_xfer_accept(int listen_fd, double timeout_s, int *fd_out, char *err, size_t err_len)
{
    if (!fd_out) return fail(err, err_len, DHS_XFER_ERR_ARG, "fd_out is NULL");
    int r = wait_fd(listen_fd, POLLIN, timeout_s);
    if (r == 0) return fail(err, err_len, DHS_XFER_ERR_TIMEOUT, "no connection within %.1f s", timeout_s);
    if (r < 0) return fail(err, err_len, DHS_XFER_ERR_SOCKET, "poll: %s", strerror(errno));
    int fd = accept(listen_fd, NULL, NULL);
    if (fd < 0) return fail(err, err_len, DHS_XFER_ERR_SOCKET, "accept: %s", strerror(errno));
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *fd_out = fd;
    return DHS_XFER_OK;
}

dhs_xfer_status dhs_xfer_connect(const char *ip, int port, double timeout_s, int *fd_out, char *err, size_t err_len)
{
    if (!fd_out || port <= 0 || port > 65535) return fail(err, err_len, DHS_XFER_ERR_ARG, "bad connect arguments");
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, ip ? ip : "127.0.0.1", &a.sin_addr) != 1)
        return fail(err, err_len, DHS_XFER_ERR_ARG, "not an IPv4 address: %s", ip);
    const double end = now_s() + timeout_s;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return fail(err, err_len, DHS_XFER_ERR_SOCKET, "socket: %s", strerror(errno));
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            int one = 1;
            (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            *fd_out = fd;
            return DHS_XFER_OK;
        }
        int e = errno;
        close(fd);
        if ((e != ECONNREFUSED && e != EINTR) || now_s() >= end)
            return fail(err, err_len, e == ECONNREFUSED ? DHS_XFER_ERR_TIMEOUT : DHS_XFER_ERR_SOCKET,
                        "connect to %s:%d: %s", ip ? ip : "127.0.0.1", port, strerror(e));
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Nothing to progress: sleeps until the worker has an event or fd is readable, at most timeout_s
   (without a worker event fd: at most 1 ms, so a transport that needs this side's progress waits
   that long at worst). */
static void idle_wait(dhs_xfer *x, int fd, double timeout_s)
{
    if (x->efd >= 0) {
        ucs_status_t st = ucp_worker_arm(x->w);
        if (st == UCS_ERR_BUSY) return; /* events came in meanwhile: progress them */
        if (st == UCS_OK) {
            struct pollfd p[2] = {{x->efd, POLLIN, 0}, {fd, POLLIN, 0}};
            int ms = timeout_s <= 0 ? 0 : (int)(timeout_s * 1000.0) + 1;
            (void)poll(p, 2, ms);
            return;
        }
    }
    wait_fd(fd, POLLIN, timeout_s < 0.001 ? timeout_s : 0.001);
}

static dhs_xfer_status send_all(int fd, const void *buf, size_t n, double timeout_s, char *err, size_t err_len)
{
    const uint8_t *p = buf;
    const double end = now_s() + timeout_s;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) { p += w; n -= (size_t)w; continue; }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            double left = end - now_s();
            if (left <= 0) return fail(err, err_len, DHS_XFER_ERR_TIMEOUT, "send: timed out");
            wait_fd(fd, POLLOUT, left);
            continue;
        }
        return fail(err, err_len, DHS_XFER_ERR_PEER, "send: %s", w < 0 ? strerror(errno) : "connection closed");
    }
    return DHS_XFER_OK;
}

/* Reads exactly n bytes; progresses the worker (when given) while it waits, so a sender serves gets. */
static dhs_xfer_status recv_all(dhs_xfer *x, int fd, void *buf, size_t n, double timeout_s, char *err, size_t err_len)
{
    uint8_t *p = buf;
    const double end = now_s() + timeout_s;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r > 0) { p += r; n -= (size_t)r; continue; }
        if (r == 0) return fail(err, err_len, DHS_XFER_ERR_PEER, "connection closed by the peer");
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return fail(err, err_len, DHS_XFER_ERR_PEER, "recv: %s", strerror(errno));
        if (now_s() >= end) return fail(err, err_len, DHS_XFER_ERR_TIMEOUT, "no message within %.1f s", timeout_s);
        if (!x) { wait_fd(fd, POLLIN, end - now_s()); continue; }
        if (ucp_worker_progress(x->w)) continue; /* serving gets (a sender under tcp) */
        double left = end - now_s();
        idle_wait(x, fd, left < 0.1 ? left : 0.1);
    }
    return DHS_XFER_OK;
}

/* 0: nothing to read; 1: the peer closed the connection (or it broke); 2: unexpected bytes */
static int peer_state(int fd)
{
    if (wait_fd(fd, POLLIN, 0) <= 0) return 0;
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0) return 1;
    if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : 1;
    return 2;
}

/* ------------------------------------------------------------------ sender */
dhs_xfer_status dhs_xfer_send(dhs_xfer *x, int fd, const dhs_xfer_rows *rows, double timeout_s, char *err,
                              size_t err_len)
{
    if (!x || !rows || fd < 0 || timeout_s <= 0) return fail(err, err_len, DHS_XFER_ERR_ARG, "bad send arguments");
    const int32_t ns = rows->n_sources;
    if (ns < 1 || ns > DHS_MAX_SOURCES || rows->n_positions < 0)
        return fail(err, err_len, DHS_XFER_ERR_ARG, "n_sources %d / n_positions %lld out of range", ns,
                    (long long)rows->n_positions);
    xfer_src src[DHS_MAX_SOURCES];
    ucp_mem_h memh[DHS_MAX_SOURCES] = {0};
    void *rkey[DHS_MAX_SOURCES] = {0};
    ucp_address_t *addr = NULL;
    size_t addr_len = 0;
    uint8_t *msg = NULL;
    dhs_xfer_status ret = DHS_XFER_OK;
    memset(src, 0, sizeof src);
    for (int32_t s = 0; s < ns; s++) {
        uint32_t rb = rows->row_bytes[s], m = rows->m[s];
        uint64_t stride = rows->stride[s] ? rows->stride[s] : rb;
        if (rb == 0 || m == 0 || stride < rb) {
            ret = fail(err, err_len, DHS_XFER_ERR_ARG, "source %d: row_bytes %u, m %u, stride %llu", s, rb, m,
                       (unsigned long long)stride);
            goto out;
        }
        uint64_t nr = (uint64_t)((rows->n_positions + m - 1) / m);
        src[s] = (xfer_src){rb, m, stride, nr, (uint64_t)(uintptr_t)rows->rows[s], 0, 0};
        if (nr == 0) continue;
        if (!rows->rows[s]) { ret = fail(err, err_len, DHS_XFER_ERR_ARG, "source %d: rows NULL", s); goto out; }
        src[s].len = (nr - 1) * stride + rb;
        ucp_mem_map_params_t mp;
        memset(&mp, 0, sizeof mp);
        mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        mp.address = (void *)(uintptr_t)rows->rows[s];
        mp.length = src[s].len;
        ucs_status_t st = ucp_mem_map(x->ctx, &mp, &memh[s]);
        if (st != UCS_OK) {
            memh[s] = NULL;
            ret = fail(err, err_len, DHS_XFER_ERR_UCX, "ucp_mem_map (source %d): %s", s, ucs_status_string(st));
            goto out;
        }
        size_t kl = 0;
        st = ucp_rkey_pack(x->ctx, memh[s], &rkey[s], &kl);
        if (st != UCS_OK) {
            rkey[s] = NULL;
            ret = fail(err, err_len, DHS_XFER_ERR_UCX, "ucp_rkey_pack (source %d): %s", s, ucs_status_string(st));
            goto out;
        }
        src[s].rkey_len = kl;
    }
    ucs_status_t st = ucp_worker_get_address(x->w, &addr, &addr_len);
    if (st != UCS_OK) {
        addr = NULL;
        ret = fail(err, err_len, DHS_XFER_ERR_UCX, "ucp_worker_get_address: %s", ucs_status_string(st));
        goto out;
    }
    size_t total = sizeof(xfer_hello) + (size_t)ns * sizeof(xfer_src) + addr_len;
    for (int32_t s = 0; s < ns; s++) total += src[s].rkey_len;
    msg = malloc(total);
    if (!msg) { ret = fail(err, err_len, DHS_XFER_ERR_NOMEM, "out of memory"); goto out; }
    xfer_hello h = {XFER_MAGIC, XFER_VERSION, (uint32_t)ns, 0, rows->n_positions, addr_len};
    size_t off = 0;
    memcpy(msg + off, &h, sizeof h), off += sizeof h;
    memcpy(msg + off, src, (size_t)ns * sizeof(xfer_src)), off += (size_t)ns * sizeof(xfer_src);
    memcpy(msg + off, addr, addr_len), off += addr_len;
    for (int32_t s = 0; s < ns; s++)
        if (src[s].rkey_len) memcpy(msg + off, rkey[s], src[s].rkey_len), off += src[s].rkey_len;
    ret = send_all(fd, msg, total, timeout_s, err, err_len);
    if (ret != DHS_XFER_OK) goto out;
    /* serve the receiver's gets until it answers */
    xfer_result res;
    ret = recv_all(x, fd, &res, sizeof res, timeout_s, err, err_len);
    if (ret != DHS_XFER_OK) goto out;
    if (res.magic != XFER_MAGIC) { ret = fail(err, err_len, DHS_XFER_ERR_PROTOCOL, "bad answer from the receiver"); goto out; }
    if (res.status != DHS_XFER_OK)
        ret = fail(err, err_len, DHS_XFER_ERR_REJECTED, "receiver: %s (dhs status %d)",
                   dhs_xfer_status_str((dhs_xfer_status)res.status), res.dhs_status);
out:
    free(msg);
    if (addr) ucp_worker_release_address(x->w, addr);
    for (int32_t s = 0; s < ns && s < DHS_MAX_SOURCES; s++) {
        if (rkey[s]) ucp_rkey_buffer_release(rkey[s]);
        if (memh[s]) ucp_mem_unmap(x->ctx, memh[s]);
    }
    return ret;
}

/* ------------------------------------------------------------------ receiver */
typedef struct get_state {
    int64_t done, failed;
    ucs_status_t first_err;
    int ep_error;
    ucs_status_t ep_status;
} get_state;

static void get_done(void *req, ucs_status_t status, void *user)
{
    get_state *g = user;
    g->done++;
    if (status != UCS_OK && g->failed++ == 0) g->first_err = status;
    ucp_request_free(req);
}

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    get_state *g = arg;
    if (!g->ep_error++) g->ep_status = status;
}

/* Closes ep (force: without the peer) and progresses until the close and
   every outstanding get completed or `wait_s` passed. 1 when every get completed. */
static int ep_close_drain(dhs_xfer *x, ucp_ep_h ep, int force, get_state *g, int64_t issued, double wait_s)
{
    ucp_request_param_t p;
    memset(&p, 0, sizeof p);
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void *req = ucp_ep_close_nbx(ep, &p);
    const double end = now_s() + wait_s;
    while (now_s() < end) {
        int closing = UCS_PTR_IS_PTR(req) && ucp_request_check_status(req) == UCS_INPROGRESS;
        if (!closing && g->done >= issued) break;
        ucp_worker_progress(x->w);
    }
    /* a close still in progress is left to the worker (freed at its destruction): only the gets write
       into the host rows */
    if (UCS_PTR_IS_PTR(req) && ucp_request_check_status(req) != UCS_INPROGRESS) ucp_request_free(req);
    return g->done >= issued;
}

dhs_xfer_status dhs_xfer_recv(dhs_xfer *x, int fd, dhs_ctx *ctx, const dhs_arch *arch, dhs_req r,
                              const dhs_xfer_recv_opts *opts, dhs_xfer_recv_info *info, char *err, size_t err_len)
{
    dhs_xfer_recv_info dummy;
    if (!info) info = &dummy;
    memset(info, 0, sizeof *info);
    if (!x || !ctx || !arch || fd < 0) return fail(err, err_len, DHS_XFER_ERR_ARG, "bad receive arguments");
    dhs_xfer_recv_opts o = {10.0, 8u << 20, 256, NULL, NULL, NULL, 0};
    if (opts) {
        o = *opts;
        if (o.timeout_s <= 0) o.timeout_s = 10.0;
        if (o.chunk_bytes == 0) o.chunk_bytes = 8u << 20;
        if (o.max_inflight <= 0) o.max_inflight = 256;
    }
    const int32_t ns = arch->n_sources;
    xfer_hello h;
    xfer_src src[DHS_MAX_SOURCES];
    uint8_t *blob = NULL;
    ucp_mem_h memh[DHS_MAX_SOURCES] = {0};
    ucp_rkey_h rk[DHS_MAX_SOURCES] = {0};
    void *host_rows[DHS_MAX_SOURCES] = {0};
    ucp_ep_h ep = NULL;
    get_state g;
    memset(&g, 0, sizeof g);
    int64_t issued = 0;
    int drained = 1;
    dhs_xfer_status ret = recv_all(NULL, fd, &h, sizeof h, o.timeout_s, err, err_len);
    const double t0 = now_s();
    if (ret != DHS_XFER_OK) goto answer;
    if (h.magic != XFER_MAGIC || h.version != XFER_VERSION) {
        ret = fail(err, err_len, DHS_XFER_ERR_PROTOCOL, "sender speaks version %u (magic %08x), this is %u", h.version,
                   h.magic, XFER_VERSION);
        goto answer;
    }
    if ((int32_t)h.n_sources != ns || h.addr_len == 0 || h.addr_len > XFER_MAX_BLOB) {
        ret = fail(err, err_len, DHS_XFER_ERR_PROTOCOL, "sender has %u sources, the arch %d", h.n_sources, ns);
        goto answer;
    }
    info->n_positions = h.n_positions;
    ret = recv_all(NULL, fd, src, (size_t)ns * sizeof(xfer_src), o.timeout_s, err, err_len);
    if (ret != DHS_XFER_OK) goto answer;
    const uint32_t stride = dhs_pool_row_stride(ctx);
    size_t blob_len = h.addr_len;
    for (int32_t s = 0; s < ns; s++) {
        const dhs_source_desc *d = &arch->sources[s];
        uint64_t nr = h.n_positions < 0 ? 0 : (uint64_t)((h.n_positions + d->m - 1) / d->m);
        if (src[s].row_bytes != d->row_bytes || src[s].m != d->m || src[s].n_rows != nr || src[s].stride < d->row_bytes ||
            src[s].stride > XFER_MAX_BLOB || /* keeps (rows - 1) * stride far from overflowing */
            src[s].rkey_len > XFER_MAX_BLOB || (nr > 0 && src[s].len != (nr - 1) * src[s].stride + d->row_bytes)) {
            ret = fail(err, err_len, DHS_XFER_ERR_PROTOCOL,
                       "source %d: sender rows %u B, m %u, %llu rows; the arch has %u B, m %u (%llu rows)", s,
                       src[s].row_bytes, src[s].m, (unsigned long long)src[s].n_rows, d->row_bytes, d->m,
                       (unsigned long long)nr);
            goto answer;
        }
        blob_len += src[s].rkey_len;
        info->bytes += nr * d->row_bytes;
    }
    blob = malloc(blob_len);
    if (!blob) { ret = fail(err, err_len, DHS_XFER_ERR_NOMEM, "out of memory"); goto answer; }
    ret = recv_all(NULL, fd, blob, blob_len, o.timeout_s, err, err_len);
    if (ret != DHS_XFER_OK) goto answer;

    /* the import: from here on every failure aborts it */
    dhs_status ds = dhs_request_import_begin(ctx, r, h.n_positions, DHS_IMPORT_HOST, host_rows);
    if (ds != DHS_OK) {
        info->import_status = ds;
        ret = fail(err, err_len, DHS_XFER_ERR_IMPORT, "dhs_request_import_begin: %s", dhs_status_str(ds));
        goto answer;
    }
    info->began = 1;
    ucs_status_t st;
    for (int32_t s = 0; s < ns; s++) {
        if (!host_rows[s] || src[s].n_rows == 0) continue; /* no row, or payload_free */
        ucp_mem_map_params_t mp;
        memset(&mp, 0, sizeof mp);
        mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        mp.address = host_rows[s];
        mp.length = src[s].n_rows * stride;
        if ((st = ucp_mem_map(x->ctx, &mp, &memh[s])) != UCS_OK) {
            memh[s] = NULL;
            ret = fail(err, err_len, DHS_XFER_ERR_UCX, "ucp_mem_map (source %d): %s", s, ucs_status_string(st));
            goto answer;
        }
    }
    ucp_ep_params_t ep_p;
    memset(&ep_p, 0, sizeof ep_p);
    ep_p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      (o.no_peer_errors ? 0 : UCP_EP_PARAM_FIELD_ERR_HANDLER);
    ep_p.address = (const ucp_address_t *)blob;
    ep_p.err_mode = o.no_peer_errors ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
    ep_p.err_handler.cb = ep_error;
    ep_p.err_handler.arg = &g;
    if ((st = ucp_ep_create(x->w, &ep_p, &ep)) != UCS_OK) {
        ep = NULL;
        ret = fail(err, err_len, DHS_XFER_ERR_UCX, "ucp_ep_create: %s", ucs_status_string(st));
        goto answer;
    }
    size_t koff = h.addr_len;
    for (int32_t s = 0; s < ns; s++) {
        if (src[s].rkey_len == 0) continue;
        if (memh[s] && (st = ucp_ep_rkey_unpack(ep, blob + koff, &rk[s])) != UCS_OK) {
            rk[s] = NULL;
            ret = fail(err, err_len, DHS_XFER_ERR_UCX, "ucp_ep_rkey_unpack (source %d): %s", s, ucs_status_string(st));
            goto answer;
        }
        koff += src[s].rkey_len;
    }
    /* the gets: one per chunk of a source whose rows are spaced alike on both sides, else one per row */
    int64_t total = 0;
    for (int32_t s = 0; s < ns; s++) {
        if (!memh[s]) continue;
        if (src[s].stride == stride) total += (int64_t)((src[s].len + o.chunk_bytes - 1) / o.chunk_bytes);
        else total += (int64_t)src[s].n_rows;
    }
    info->gets = total;
    const double t1 = now_s();
    info->t_setup_s = t1 - t0;
    int32_t s_cur = 0;
    uint64_t off_cur = 0; /* byte offset (contiguous) or row (per row) within source s_cur */
    double last = now_s();
    int64_t seen = 0, spins = 0;
    while (g.done < total || issued < total) {
        /* issue up to max_inflight */
        while (issued < total && issued - g.done < o.max_inflight && !g.failed && !g.ep_error) {
            while (s_cur < ns && (!memh[s_cur] || off_cur >= (src[s_cur].stride == stride ? src[s_cur].len : src[s_cur].n_rows))) {
                s_cur++;
                off_cur = 0;
            }
            if (s_cur >= ns) break;
            const xfer_src *sc = &src[s_cur];
            uint64_t loff, roff, len;
            if (sc->stride == stride) {
                len = sc->len - off_cur < o.chunk_bytes ? sc->len - off_cur : o.chunk_bytes;
                loff = roff = off_cur;
                off_cur += len;
            } else {
                loff = off_cur * stride;
                roff = off_cur * sc->stride;
                len = sc->row_bytes;
                off_cur++;
            }
            ucp_request_param_t rp;
            memset(&rp, 0, sizeof rp);
            rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH;
            rp.cb.send = get_done;
            rp.user_data = &g;
            rp.memh = memh[s_cur];
            ucs_status_ptr_t q = ucp_get_nbx(ep, (uint8_t *)host_rows[s_cur] + loff, len, sc->addr + roff, rk[s_cur], &rp);
            issued++;
            if (q == NULL) g.done++;
            else if (UCS_PTR_IS_ERR(q)) {
                g.done++;
                if (g.failed++ == 0) g.first_err = UCS_PTR_STATUS(q);
            }
        }
        if (g.failed || g.ep_error) break;
        if (g.done >= total) break;
        if (ucp_worker_progress(x->w) || g.done != seen) {
            if (g.done != seen) {
                seen = g.done;
                last = now_s();
                if (o.progress) o.progress(o.user, g.done, total);
            }
            continue;
        }
        /* idle: watch the connection (the sender's death or close) and the clock; sleep on the
           worker's events after a few empty spins */
        if ((++spins & 15) == 0) {
            int ps = peer_state(fd);
            if (ps) {
                ret = fail(err, err_len, ps == 1 ? DHS_XFER_ERR_PEER : DHS_XFER_ERR_PROTOCOL,
                           ps == 1 ? "the sender closed the connection after %lld of %lld gets"
                                   : "unexpected bytes from the sender after %lld of %lld gets",
                           (long long)g.done, (long long)total);
                goto answer;
            }
            if (now_s() - last > o.timeout_s) {
                ret = fail(err, err_len, DHS_XFER_ERR_TIMEOUT, "no get completed for %.1f s (%lld of %lld done)",
                           o.timeout_s, (long long)g.done, (long long)total);
                goto answer;
            }
            idle_wait(x, fd, 0.05);
        }
    }
    if (g.failed || g.ep_error) {
        ucs_status_t e = g.failed ? g.first_err : g.ep_status;
        int gone = peer_state(fd) == 1 || g.ep_error;
        ret = fail(err, err_len, gone ? DHS_XFER_ERR_PEER : DHS_XFER_ERR_UCX, "get failed after %lld of %lld: %s",
                   (long long)g.done, (long long)total, ucs_status_string(e));
        goto answer;
    }
    info->t_data_s = now_s() - t1;
    /* every get completed; a sender that closed meanwhile gave up: its bytes are not trusted */
    int ps = peer_state(fd);
    if (ps) {
        ret = fail(err, err_len, ps == 1 ? DHS_XFER_ERR_PEER : DHS_XFER_ERR_PROTOCOL,
                   "the sender closed the connection before the commit");
        goto answer;
    }
    drained = ep_close_drain(x, ep, 0, &g, issued, o.timeout_s);
    ep = NULL;
    for (int32_t s = 0; s < ns; s++) {
        if (rk[s]) ucp_rkey_destroy(rk[s]);
        rk[s] = NULL;
        if (memh[s]) ucp_mem_unmap(x->ctx, memh[s]);
        memh[s] = NULL;
    }
    if (o.check) {
        const double tc = now_s();
        int refused = o.check(o.user, h.n_positions, host_rows);
        info->t_check_s = now_s() - tc;
        if (refused) {
            ret = fail(err, err_len, DHS_XFER_ERR_CHECK, "the check refused the received rows");
            goto answer;
        }
    }
    ds = dhs_request_import_commit(ctx, r);
    if (ds != DHS_OK) {
        info->import_status = ds;
        ret = fail(err, err_len, DHS_XFER_ERR_IMPORT, "dhs_request_import_commit: %s", dhs_status_str(ds));
        goto answer;
    }
    info->t_total_s = now_s() - t0 - info->t_check_s;
answer:
    /* cancel what is outstanding before the memory goes: the gets are this side's own operations */
    if (ep) drained = ep_close_drain(x, ep, 1, &g, issued, 5.0);
    if (drained) {
        for (int32_t s = 0; s < ns; s++) {
            if (rk[s]) ucp_rkey_destroy(rk[s]);
            if (memh[s]) ucp_mem_unmap(x->ctx, memh[s]);
        }
        if (ret != DHS_XFER_OK && info->began) {
            ds = dhs_request_import_abort(ctx, r);
            info->aborted = ds == DHS_OK;
        }
    } else if (ret == DHS_XFER_OK) {
        ret = fail(err, err_len, DHS_XFER_ERR_UCX, "outstanding gets did not complete");
    }
    /* (not drained: UCX may still write into the host rows, so neither they nor the registrations are
       released; the import stays open and the request must not be closed before this process ends) */
    free(blob);
    xfer_result res = {XFER_MAGIC, (int32_t)ret, (int32_t)info->import_status, 0};
    (void)send_all(fd, &res, sizeof res, 1.0, NULL, 0); /* the sender may be gone: nothing to do then */
    return ret;
}
