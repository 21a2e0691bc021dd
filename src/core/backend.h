/* backend.h - the small vtable every backend implements (CPU reference in
 * src/cpu, CUDA in src/cuda). The core never touches device memory except
 * through these calls; on the CPU backend "device" memory is plain host
 * memory that emulates the device tier.
 *
 * Streams: the backend has a *compute stream* (resolver gathers, attention in
 * the engine) and a *side stream* (backups, population). Work on the compute
 * stream is ordered: a gather issued before a reader is visible to it. Side
 * stream copies complete later and are tracked by tickets.
 */
#ifndef DHS_CORE_BACKEND_H
#define DHS_CORE_BACKEND_H

#include "dhs.h"
#include "core/dres_spec.h"

typedef uint64_t dhs_ticket; /* 0 = nothing to wait for */

/* one row to move: src and dst are row starts, row_bytes each */
typedef struct dhs_copy_pair {
    const void *src;
    void *dst;
} dhs_copy_pair;

/* one run of bytes, host memory to host memory */
typedef struct dhs_copy_run {
    void *dst;
    const void *src;
    size_t bytes;
} dhs_copy_run;

/* one piece of a publish list: bytes from src (pinned host memory the device can read) to dst
   (device-tier memory) */
typedef struct dhs_pub {
    uint64_t dst, src, bytes;
} dhs_pub;

typedef struct dhs_backend_ops {
    const char *name;
    /* device tier: pools (accounted by the caller through be_* wrappers) */
    dhs_status (*dev_alloc)(dhs_backend *be, size_t bytes, void **out);
    void (*dev_free)(dhs_backend *be, void *p, size_t bytes);
    /* pinned host memory, mapped for device reads */
    dhs_status (*host_alloc)(dhs_backend *be, size_t bytes, void **out);
    void (*host_free)(dhs_backend *be, void *p, size_t bytes);
    /* resolver recovery: rows host -> device on the compute stream, visible to
       every later reader on that stream. pairs[] live in host memory. */
    dhs_status (*gather_h2d)(dhs_backend *be, const dhs_copy_pair *pairs, int64_t n, uint32_t row_bytes);
    /* rows copied on the side stream (backup d2h, population h2d, d2d);
       bytes are read when the copy executes, which may be late. */
    dhs_status (*copy_rows_async)(dhs_backend *be, const dhs_copy_pair *pairs, int64_t n,
                                  uint32_t row_bytes, dhs_ticket *t);
    /* synchronous copy between the engine's buffers and device/host memory
       (imports, tail writes): src/dst may be host or device. */
    dhs_status (*copy_sync)(dhs_backend *be, void *dst, const void *src, size_t bytes);
    /* host-to-host runs (an import's rows into pinned host rows), ordered after
       every reader issued so far, done on return; `threads` host threads at
       most (be_memcpy_runs) */
    dhs_status (*copy_host_runs)(dhs_backend *be, const dhs_copy_run *runs, int64_t n, int32_t threads);
    /* returns when every compute-stream operation issued so far has completed (no copy); NULL: the
       core orders its reads with copy_sync instead */
    dhs_status (*sync_compute)(dhs_backend *be);
    /* a ticket that completes when every reader issued so far finished */
    dhs_status (*record_readers)(dhs_backend *be, dhs_ticket *t);
    int (*done)(dhs_backend *be, dhs_ticket t);
    dhs_status (*wait)(dhs_backend *be, dhs_ticket t);
    /* device resolver (core/dres_spec.h), all on the compute stream, no host
       synchronisation; NULL when the backend lacks it. `st` is a host copy of
       the state descriptor (its pointers are device-tier memory); `rd` is the
       round descriptor in device-tier memory. */
    /* readies the split resolve for G groups of up to nsrc sources each
       (dres_create, outside any round; may be called again, grows only) */
    dhs_status (*dres_init)(dhs_backend *be, int32_t G, int32_t nsrc);
    /* mode (dres_spec.h DRES_MODE_*): DRES_MODE_SPLIT (the core sets it only with payload and nsrc > 1,
       never with DIRECT): source 0's rows are copied on the compute
       stream; sources 1..nsrc-1 follow one by one on the backend's copy queue
       (CUDA: forked from the compute stream after source 0's copy; CPU:
       deferred until dres_wait), each made visible to the compute stream by
       dres_wait(si); DRES_MODE_DIRECT: nothing can be staged or copied, so the call launches one
       kernel (CUDA: the direct kernel, which stores the error word itself) */
    dhs_status (*dres_resolve)(dhs_backend *be, const dres_state *st, const dres_round *rd, int32_t k,
                               const int32_t *sel, int32_t *loc, int payload, int mode);
    /* compute-stream work issued after this call sees the rows of sources
       1..si of the group's last split resolve (si = nsrc - 1 joins the copy
       queue back into the compute stream); only after a split resolve */
    dhs_status (*dres_wait)(dhs_backend *be, const dres_state *st, const dres_round *rd, int32_t si);
    dhs_status (*dres_promote)(dhs_backend *be, const dres_state *st, const dres_round *rd, int payload);
    /* dres_promote of every group, in group order as far as it shows: st_dev
       is the [G] state array in device-tier memory, st_host its host copy
       (same contents) */
    dhs_status (*dres_promote_all)(dhs_backend *be, const dres_state *st_dev, const dres_state *st_host, int32_t G,
                                   const dres_round *rd, int payload);
    dhs_status (*dres_reset)(dhs_backend *be, const dres_state *st, int32_t slot);
    /* the round's tail locations (dres_tail_loc_one) of every group, source and round position b <
       n_round into loc (device-tier memory), on the compute stream; st_dev / st_host as in
       dres_promote_all, nsrc_max the largest group's sources; NULL when the backend lacks it */
    dhs_status (*dres_tail_locs)(dhs_backend *be, const dres_state *st_dev, const dres_state *st_host, int32_t G,
                                 int32_t nsrc_max, int32_t n_round, const dres_round *rd, int32_t req_stride,
                                 int64_t src_stride, int32_t *loc);
    /* the round's page tables (dres_page_table_one) of every group, source and round position b < n_round
       into tab (device-tier memory), on the compute stream; the arguments as dres_tail_locs; NULL when the
       backend lacks it */
    dhs_status (*dres_page_tables)(dhs_backend *be, const dres_state *st_dev, const dres_state *st_host, int32_t G,
                                   int32_t nsrc_max, int32_t n_round, const dres_round *rd, int32_t page_stride,
                                   int64_t src_stride, int32_t *tab);
    /* host (pinned) -> device copy ordered on the compute stream, no host
       sync: publishes control-plane tables; src must stay unchanged until the
       compute stream passes it (the core republishes only after round_end). */
    dhs_status (*publish)(dhs_backend *be, void *dst, const void *src, size_t bytes);
    /* n publishes in one call (a round begin's descriptor and changed tables): the same rules as
       publish for every piece, and the list itself is pinned host memory (mapped) that stays unchanged
       until the compute stream passes the call; no two pieces' destinations overlap. NULL: the core
       calls publish per piece. */
    dhs_status (*publish_list)(dhs_backend *be, const dhs_pub *list, int32_t n);
    /* advance emulated time by one round (CPU async mode; no-op elsewhere) */
    void (*tick)(dhs_backend *be);
    void (*destroy)(dhs_backend *be);
} dhs_backend_ops;

struct dhs_backend {
    const dhs_backend_ops *ops;
    void *impl;
    /* fault injection: fail the nth call of each kind (0 = off) */
    uint64_t fault_nth[DHS_FAULT_COUNT_];
    uint64_t fault_calls[DHS_FAULT_COUNT_];
    uint64_t faults_injected;
    /* accounting of everything allocated through the wrappers below */
    uint64_t dev_bytes, host_bytes;
    /* 1: the backend moves no bytes (dhs_cpu_options.payload_free): contexts on it
       simulate placement only (the core allocates no pool or host rows and issues
       copies of no rows, whose tickets still complete as payload copies would) */
    int payload_free;
};

/* Returns 1 (and counts it) when this call of `kind` must fail. */
static inline int be_fault(dhs_backend *be, dhs_fault_kind kind)
{
    if (!be->fault_nth[kind]) return 0;
    if (++be->fault_calls[kind] == be->fault_nth[kind]) {
        be->fault_nth[kind] = 0;
        be->faults_injected++;
        return 1;
    }
    return 0;
}

/* Accounted choke points (src/core/backend.c). */
dhs_status be_dev_alloc(dhs_backend *be, size_t bytes, void **out);
void be_dev_free(dhs_backend *be, void *p, size_t bytes);
dhs_status be_host_alloc(dhs_backend *be, size_t bytes, void **out);
void be_host_free(dhs_backend *be, void *p, size_t bytes);
dhs_status be_gather(dhs_backend *be, const dhs_copy_pair *pairs, int64_t n, uint32_t row_bytes);
dhs_status be_copy_sync(dhs_backend *be, void *dst, const void *src, size_t bytes);
/* one fault point per run, in order (nothing is copied when one fails), then the backend's copy */
dhs_status be_copy_host_runs(dhs_backend *be, const dhs_copy_run *runs, int64_t n, int32_t threads);
/* Copies the runs with `threads` host threads (0: automatic, as many as the
   machine has cores with 32 MiB or more each; 1: the calling thread; at most
   8, and never more than there are bytes), each taking an equal share of the
   bytes laid end to end. A thread that cannot start leaves its share to the
   calling thread. */
void be_memcpy_runs(const dhs_copy_run *runs, int64_t n, int32_t threads);
dhs_status be_copy_async(dhs_backend *be, const dhs_copy_pair *pairs, int64_t n, uint32_t row_bytes, dhs_ticket *t);

/* Shared by backends: initialise the common part. */
void be_init_common(dhs_backend *be, const dhs_backend_ops *ops, void *impl);

#endif
