/*
 * dhs_xfer.h - prefill-to-decode KV import over UCX (docs/XFER.md).
 *
 * An optional module beside the library (libdhs_xfer, built with
 * -DDHS_UCX=ON and Debian's libucx-dev); the core never depends on it.
 *
 * The prefill side (sender) holds a request's rows per source in its own
 * memory; the decode side (receiver) opens the request in its dhs_ctx, and
 * dhs_xfer_recv pulls the rows with UCX RMA gets straight into the host
 * rows dhs_request_import_begin hands out (registered with ucp_mem_map, so
 * a transport with zero-copy gets - shared memory, RDMA - writes them
 * there with no staging copy), then commits the import. A TCP socket
 * carries the setup (addresses, remote keys) and the final answer.
 *
 * Failure: the receiver alone writes into its memory (the gets are its
 * operations), so when the sender dies, closes the connection or stops
 * progressing (timeout), the receiver cancels its outstanding gets, frees
 * the UCX resources and calls dhs_request_import_abort: the request is as
 * before (0 positions, nothing half-received visible, a retry may follow).
 *
 * Neither side prints or exits; every call returns a dhs_xfer_status and,
 * on failure, a message in err (err may be NULL).
 */
#ifndef DHS_XFER_H
#define DHS_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "dhs.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dhs_xfer_status {
    DHS_XFER_OK = 0,
    DHS_XFER_ERR_ARG = -1,      /* a NULL pointer, a bad count or size */
    DHS_XFER_ERR_NOMEM = -2,    /* host allocation failed */
    DHS_XFER_ERR_SOCKET = -3,   /* listen / accept / connect failed */
    DHS_XFER_ERR_PEER = -4,     /* the peer closed the connection or died before the transfer completed */
    DHS_XFER_ERR_TIMEOUT = -5,  /* no progress for the timeout */
    DHS_XFER_ERR_PROTOCOL = -6, /* the peer speaks another version, or its rows do not fit the receiver's arch */
    DHS_XFER_ERR_UCX = -7,      /* a UCX call failed */
    DHS_XFER_ERR_IMPORT = -8,   /* a dhs_request_import_* call failed (its status in dhs_xfer_recv_info) */
    DHS_XFER_ERR_REJECTED = -9, /* sender: the receiver answered that it did not complete the import */
    DHS_XFER_ERR_CHECK = -10    /* receiver: the caller's check refused the rows (import aborted) */
} dhs_xfer_status;

const char *dhs_xfer_status_str(dhs_xfer_status s);
/* The linked UCX library's version, "MAJOR.MINOR.PATCH". */
const char *dhs_xfer_ucx_version(void);

/* One UCP context and worker (RMA), for any number of transfers, one at a
   time, on one thread. UCX reads its UCX_* environment (e.g. UCX_TLS). */
typedef struct dhs_xfer dhs_xfer;
dhs_xfer_status dhs_xfer_create(dhs_xfer **out, char *err, size_t err_len);
void dhs_xfer_destroy(dhs_xfer *x); /* NULL is a no-op */

/* TCP setup channel. listen: ip (NULL = "127.0.0.1"), port 0 = any; the
   bound port in *port_out. accept / connect wait at most timeout_s. */
dhs_xfer_status dhs_xfer_listen(const char *ip, int port, int *fd_out, int *port_out, char *err, size_t err_len);
dhs_xfer_status dhs_xfer_accept(int listen_fd, double timeout_s, int *fd_out, char *err, size_t err_len);
dhs_xfer_status dhs_xfer_connect(const char *ip, int port, double timeout_s, int *fd_out, char *err, size_t err_len);

/* The sender's rows of one request: source s holds ceil(n_positions / m[s])
   rows of row_bytes[s] bytes, stride[s] bytes apart (0: row_bytes[s]) from
   rows[s]. Sources, row sizes and m must equal the receiver's arch. */
typedef struct dhs_xfer_rows {
    int32_t n_sources;
    int64_t n_positions;
    const void *rows[DHS_MAX_SOURCES];
    uint32_t row_bytes[DHS_MAX_SOURCES];
    uint32_t m[DHS_MAX_SOURCES];
    uint64_t stride[DHS_MAX_SOURCES];
} dhs_xfer_rows;

/* Prefill side: exposes the rows (registered, remote keys packed), sends
   the setup over the connected socket fd and serves the receiver's gets
   until it answers. DHS_XFER_OK: the receiver committed the import; the
   buffers may be reused on return (either way). DHS_XFER_ERR_REJECTED:
   the receiver aborted (its reason in err); DHS_XFER_ERR_PEER: it went
   away; DHS_XFER_ERR_TIMEOUT: no answer within timeout_s. */
dhs_xfer_status dhs_xfer_send(dhs_xfer *x, int fd, const dhs_xfer_rows *rows, double timeout_s, char *err,
                              size_t err_len);

/* Receiver options (NULL: defaults). */
typedef struct dhs_xfer_recv_opts {
    double timeout_s;       /* longest wait without progress (setup message, gets); default 10 */
    uint64_t chunk_bytes;   /* largest single get (default 8 MiB) */
    int32_t max_inflight;   /* most gets outstanding at once (default 256) */
    /* called before the commit with the received rows (host_rows as
       dhs_request_import_begin gave them): nonzero refuses them, the import
       is aborted and the call answers DHS_XFER_ERR_CHECK. NULL: none. */
    int (*check)(void *user, int64_t n_positions, void *const *host_rows);
    /* called after every completed get with the gets done and issued so far
       (a test's fault hook, a progress meter). NULL: none. */
    void (*progress)(void *user, int64_t done, int64_t total);
    void *user;
    /* 1: the endpoint without peer error handling (UCP_ERR_HANDLING_MODE_NONE),
       so that UCX may move the rows over shared memory (UCX 1.13 offers peer
       error handling over tcp and IB only). The sender's death is then no
       longer detected reliably (UCX may treat it as fatal to this process):
       for benchmarks, not for serving. 0 (default): peer error handling. */
    int32_t no_peer_errors;
} dhs_xfer_recv_opts;

typedef struct dhs_xfer_recv_info {
    int64_t n_positions;    /* announced by the sender */
    uint64_t bytes;         /* row bytes pulled (payload: rows x row_bytes over every source) */
    int64_t gets;           /* get operations issued */
    int began;              /* 1 when dhs_request_import_begin succeeded */
    int aborted;            /* 1 when the import was aborted (nothing of it remains) */
    dhs_status import_status; /* the failing dhs call's status with DHS_XFER_ERR_IMPORT */
    double t_setup_s;       /* setup message received -> first get issued (begin, registration, endpoint) */
    double t_data_s;        /* first get issued -> last get completed */
    double t_check_s;       /* in opts->check */
    double t_total_s;       /* setup message received -> commit done, less t_check_s */
} dhs_xfer_recv_info;

/* Decode side: reads the sender's setup from the connected socket fd,
   checks it against arch (the one ctx was created with), calls
   dhs_request_import_begin(ctx, r, n_positions, DHS_IMPORT_HOST), pulls
   every source's rows into the host rows it gave (registered with
   ucp_mem_map), runs opts->check, commits, and answers the sender. On any
   failure after the begin the import is aborted (info->aborted): the
   sender's death or its closing the connection (DHS_XFER_ERR_PEER), no
   progress for timeout_s (DHS_XFER_ERR_TIMEOUT), a failed get
   (DHS_XFER_ERR_PEER when the connection is gone, else DHS_XFER_ERR_UCX).
   A failure before the begin leaves the request untouched. info may be
   NULL. */
dhs_xfer_status dhs_xfer_recv(dhs_xfer *x, int fd, dhs_ctx *ctx, const dhs_arch *arch, dhs_req r,
                              const dhs_xfer_recv_opts *opts, dhs_xfer_recv_info *info, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif
