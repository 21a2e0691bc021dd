/* cuda_backend.c - the CUDA backend: device pools in cudaMalloc memory, host
 * backing in mapped pinned memory, row copies by the gather kernel (gather.cu).
 *
 * Host code in C11 against the CUDA runtime C API. See docs/CUDA.md.
 *
 * Streams and ordering
 *   compute: gather_h2d (resolver recovery), copy_sync, record_readers; the
 *            engine's attention runs here (dhs_cuda_stream / dhs_cuda_set_stream).
 *   side:    copy_rows_async. Each side copy first waits (cudaStreamWaitEvent,
 *            no host sync) for everything issued on compute so far, so it reads
 *            bytes a gather or an engine kernel wrote before it was issued.
 *
 * Copy engines for runs
 *   A call whose pairs form at most 4 contiguous runs of >= 16 rows on
 *   average (a page backed up, a page populated) becomes one cudaMemcpyAsync
 *   per run on the same stream instead of a kernel: the copy engines move it
 *   without taking SMs from attention. Scattered rows (resolver misses) use
 *   the gather kernel.
 *
 * Pair staging (no allocation, no host sync in steady state)
 *   The core's pairs[] live in ordinary host memory and may be reused as soon
 *   as a call returns, so each call copies them into a ring of mapped pinned
 *   memory (one ring per stream) that the kernel reads zero-copy. A ring
 *   region may be overwritten only after the kernel that read it finished:
 *   every launch records an event for its segment [start, end), and a new
 *   region that overlaps live segments first synchronises the youngest of
 *   them (all older ones are done too: one stream, in order). With a ring of
 *   >= 64K pairs this wait happens only when the ring wraps onto work still
 *   queued. A call larger than the ring grows it (synchronises, reallocates):
 *   the only allocation after warm-up.
 *
 * Tickets
 *   A ticket is a sequence number t >= 1 with an event recorded at issue in
 *   slot t % DHS_CU_TICKETS. Before a slot is reused its previous event is
 *   synchronised (1024 tickets later, long complete in practice), so a ticket
 *   whose slot holds another number has completed. done() never claims
 *   completion of a copy that failed: on a CUDA error it returns 0 and wait()
 *   returns DHS_ERR_BACKEND.
 */
#include <stdint.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "core/backend.h"
#include "cuda/dres.cuh"
#include "cuda/gather.cuh"
#include "cuda/publish.cuh"
#include "dhs_cuda.h"

#define DHS_CU_TICKETS 1024   /* ticket event slots */
#define DHS_CU_SEGS 256       /* live staged segments per ring */
#define DHS_CU_RING_MIN 65536 /* initial pairs per ring (1 MiB pinned) */
#define DHS_CU_BLOCKS_PER_SM 4
#define DHS_CU_MEMCPY_RUNS 4      /* at most this many contiguous runs ... */
#define DHS_CU_MEMCPY_MIN_ROWS 16 /* ... of this many rows on average: copy engines */

typedef struct cu_seg {
    int64_t start, end; /* [start, end) pairs of the ring read by one launch */
    cudaEvent_t ev;     /* recorded after that launch */
} cu_seg;

/* Staged pairs for one stream. Invariant: live segments are
   seg[(seg_first + i) % DHS_CU_SEGS], i < seg_count, oldest first, in the
   order their launches were issued on the ring's stream. */
typedef struct cu_ring {
    dhs_copy_pair *buf; /* [cap] mapped pinned; host pointer == device pointer (UVA) */
    int64_t cap;
    int64_t head; /* next pair to hand out */
    cu_seg seg[DHS_CU_SEGS];
    int seg_first, seg_count;
} cu_ring;

typedef struct cu_ticket_slot {
    uint64_t seq; /* ticket recorded in this slot, 0 = never used */
    int done;     /* 1 once its event was seen complete */
    cudaEvent_t ev;
} cu_ticket_slot;

typedef struct cu_backend {
    dhs_backend base; /* base.impl == this */
    int device;
    int32_t sms;
    int32_t max_blocks;        /* gather grid cap */
    cudaStream_t compute;      /* current compute stream (own or the engine's) */
    cudaStream_t own_compute;  /* created here */
    cudaStream_t side;         /* created here */
    cudaEvent_t fence;         /* compute -> side / old -> new compute ordering */
    cu_ring ring_compute, ring_side;
    cu_ticket_slot tickets[DHS_CU_TICKETS];
    uint64_t next_ticket; /* >= 1 */
    cudaError_t last_err;
    void *dres_scratch;      /* device: the plan kernel's first-error key (dres.cuh) */
    int32_t dres_copy_blocks; /* persistent copy grid of the device resolver */
    dhs_cuda_mark_fn mark;    /* profiling hook (dhs_cuda_set_marker) or NULL */
    void *mark_user;
    /* the split resolve's copy queue (dhs_resolve_device with DHS_RESOLVE_SPLIT): one stream,
       events [G][nsrc_max] made by dres_init (outside any capture) */
    cudaStream_t split;
    cudaEvent_t *split_ev;
    int32_t split_G, split_nsrc;
    int32_t split_blocks; /* copy grid on the queue (split_blocks_default) */
} cu_backend;

static const dhs_backend_ops cu_ops;

/* The split resolve's queue copies run beside the compute stream's kernels:
   a quarter of the multiprocessors (33 blocks on an H200) keeps enough rows
   in flight for the link and leaves the attention the rest. At 100K, C = 20
   (H200, GLM-5.3 geometry; bench/RESULTS.md) the step took 60.09 ms with 33 blocks against
   66.87 ms with one per multiprocessor. */
static int32_t split_blocks_default(int32_t sms) { return sms / 4 > 0 ? sms / 4 : 1; }

static cu_backend *cu_of(dhs_backend *be) { return (cu_backend *)be->impl; }

/* Records a failed CUDA call and clears the runtime's last-error slot so a
   later launch check does not report it again. */
static cudaError_t cu_fail(cu_backend *c, cudaError_t e)
{
    c->last_err = e;
    (void)cudaGetLastError();
    return e;
}

#define CU_TRY(c, expr)                                                                            \
    do {                                                                                           \
        cudaError_t e_ = (expr);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            cu_fail((c), e_);                                                                      \
            return DHS_ERR_BACKEND;                                                                \
        }                                                                                          \
    } while (0)

/* Makes the backend's device current (a no-op when it already is). */
static dhs_status cu_enter(cu_backend *c)
{
    int d = -1;
    CU_TRY(c, cudaGetDevice(&d));
    if (d != c->device) CU_TRY(c, cudaSetDevice(c->device));
    return DHS_OK;
}

/* --------------------------------------------------------------- tickets */

static dhs_status ticket_issue(cu_backend *c, cudaStream_t s, dhs_ticket *t)
{
    uint64_t seq = c->next_ticket;
    cu_ticket_slot *sl = &c->tickets[seq % DHS_CU_TICKETS];
    if (sl->seq && !sl->done) CU_TRY(c, cudaEventSynchronize(sl->ev));
    CU_TRY(c, cudaEventRecord(sl->ev, s));
    sl->seq = seq;
    sl->done = 0;
    c->next_ticket = seq + 1;
    *t = seq;
    return DHS_OK;
}

static int cu_done(dhs_backend *be, dhs_ticket t)
{
    cu_backend *c = cu_of(be);
    if (t == 0 || t >= c->next_ticket) return 1; /* nothing to wait for / never issued */
    cu_ticket_slot *sl = &c->tickets[t % DHS_CU_TICKETS];
    if (sl->seq != t || sl->done) return 1; /* slot reused: t completed before */
    cudaError_t e = cudaEventQuery(sl->ev);
    if (e == cudaSuccess) {
        sl->done = 1;
        return 1;
    }
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return 0;
    }
    cu_fail(c, e);
    return 0;
}

static dhs_status cu_wait(dhs_backend *be, dhs_ticket t)
{
    cu_backend *c = cu_of(be);
    if (t == 0 || t >= c->next_ticket) return DHS_OK;
    cu_ticket_slot *sl = &c->tickets[t % DHS_CU_TICKETS];
    if (sl->seq != t || sl->done) return DHS_OK;
    CU_TRY(c, cudaEventSynchronize(sl->ev));
    sl->done = 1;
    return DHS_OK;
}

/* ------------------------------------------------------------ pair rings */

static dhs_status ring_drain(cu_backend *c, cu_ring *r)
{
    if (r->seg_count) {
        cu_seg *y = &r->seg[(r->seg_first + r->seg_count - 1) % DHS_CU_SEGS];
        CU_TRY(c, cudaEventSynchronize(y->ev));
    }
    r->seg_first = 0;
    r->seg_count = 0;
    return DHS_OK;
}

static dhs_status ring_grow(cu_backend *c, cu_ring *r, int64_t n)
{
    dhs_status s = ring_drain(c, r);
    if (s != DHS_OK) return s;
    int64_t cap = r->cap ? r->cap : DHS_CU_RING_MIN;
    while (cap < n) cap *= 2;
    void *p = NULL, *dp = NULL;
    cudaError_t e = cudaHostAlloc(&p, (size_t)cap * sizeof(dhs_copy_pair), cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cu_fail(c, e);
        return DHS_ERR_NOMEM;
    }
    e = cudaHostGetDevicePointer(&dp, p, 0);
    if (e != cudaSuccess || dp != p) {
        if (e != cudaSuccess) cu_fail(c, e);
        cudaFreeHost(p);
        return DHS_ERR_UNSUPPORTED;
    }
    if (r->buf) CU_TRY(c, cudaFreeHost(r->buf));
    r->buf = (dhs_copy_pair *)p;
    r->cap = cap;
    r->head = 0;
    return DHS_OK;
}

/* Hands out n pairs at *off, free of every launch still reading them. */
static dhs_status ring_reserve(cu_backend *c, cu_ring *r, int64_t n, int64_t *off)
{
    if (n > r->cap) {
        dhs_status s = ring_grow(c, r, n);
        if (s != DHS_OK) return s;
    }
    if (r->head + n > r->cap) r->head = 0;
    const int64_t a = r->head, b = a + n;
    /* youngest live segment overlapping [a, b): wait for it; older ones are done too */
    for (int i = r->seg_count - 1; i >= 0; i--) {
        cu_seg *g = &r->seg[(r->seg_first + i) % DHS_CU_SEGS];
        if (g->start < b && a < g->end) {
            CU_TRY(c, cudaEventSynchronize(g->ev));
            r->seg_first = (r->seg_first + i + 1) % DHS_CU_SEGS;
            r->seg_count -= i + 1;
            break;
        }
    }
    if (r->seg_count == DHS_CU_SEGS) { /* 256 launches old: complete in practice */
        CU_TRY(c, cudaEventSynchronize(r->seg[r->seg_first].ev));
        r->seg_first = (r->seg_first + 1) % DHS_CU_SEGS;
        r->seg_count--;
    }
    *off = a;
    return DHS_OK;
}

/* Marks [off, off + n) as read by the launch just issued on s. */
static dhs_status ring_commit(cu_backend *c, cu_ring *r, int64_t off, int64_t n, cudaStream_t s)
{
    cu_seg *g = &r->seg[(r->seg_first + r->seg_count) % DHS_CU_SEGS];
    CU_TRY(c, cudaEventRecord(g->ev, s));
    g->start = off;
    g->end = off + n;
    r->seg_count++;
    r->head = off + n;
    return DHS_OK;
}

static int pair_follows(const dhs_copy_pair *a, const dhs_copy_pair *b, uint32_t row_bytes)
{
    return (const uint8_t *)b->src == (const uint8_t *)a->src + row_bytes &&
           (uint8_t *)b->dst == (uint8_t *)a->dst + row_bytes;
}

/* Moves n rows on stream s. Few long contiguous runs (a page backed up or
   populated) go to the copy engines, one cudaMemcpyAsync per run, leaving the
   SMs to attention; anything else is staged in the ring for the gather
   kernel. DHS_ERR_MISALIGNED (nothing issued) if an address is not 16-byte
   aligned. */
static dhs_status launch_rows(cu_backend *c, cu_ring *r, cudaStream_t s, const dhs_copy_pair *pairs,
                              int64_t n, uint32_t row_bytes)
{
    if (n < 0 || (n > 0 && !pairs) || row_bytes == 0 || row_bytes % DHS_ALIGN) return DHS_ERR_INVALID_ARG;
    if (n == 0) return DHS_OK;
    /* stage, check alignment and count runs in one pass; the region is
       committed only if the kernel is launched */
    int64_t off = 0;
    dhs_status st = ring_reserve(c, r, n, &off);
    if (st != DHS_OK) return st;
    dhs_copy_pair *d = r->buf + off;
    uintptr_t bits = 0;
    int64_t runs = 1;
    d[0] = pairs[0];
    bits |= (uintptr_t)pairs[0].src | (uintptr_t)pairs[0].dst;
    for (int64_t i = 1; i < n; i++) {
        d[i] = pairs[i];
        bits |= (uintptr_t)pairs[i].src | (uintptr_t)pairs[i].dst;
        runs += !pair_follows(&pairs[i - 1], &pairs[i], row_bytes);
    }
    if (bits & (DHS_ALIGN - 1)) return DHS_ERR_MISALIGNED;
    if (runs <= DHS_CU_MEMCPY_RUNS && n >= DHS_CU_MEMCPY_MIN_ROWS * runs) {
        for (int64_t i = 0; i < n;) {
            int64_t j = i + 1;
            while (j < n && pair_follows(&pairs[j - 1], &pairs[j], row_bytes)) j++;
            CU_TRY(c, cudaMemcpyAsync(pairs[i].dst, pairs[i].src, (size_t)(j - i) * row_bytes, cudaMemcpyDefault, s));
            i = j;
        }
        return DHS_OK;
    }
    CU_TRY(c, dhs_cuda_gather_launch(d, n, row_bytes, dhs_cuda_gather_grid(n, c->max_blocks), s));
    return ring_commit(c, r, off, n, s);
}

/* ------------------------------------------------------------------- ops */

static dhs_status cu_dev_alloc(dhs_backend *be, size_t bytes, void **out)
{
    cu_backend *c = cu_of(be);
    *out = NULL;
    if (cu_enter(c) != DHS_OK) return DHS_ERR_BACKEND;
    cudaError_t e = cudaMalloc(out, bytes ? bytes : DHS_ALIGN);
    if (e != cudaSuccess) {
        cu_fail(c, e);
        *out = NULL;
        return DHS_ERR_DEVICE_NOMEM;
    }
    return DHS_OK;
}

static void cu_dev_free(dhs_backend *be, void *p, size_t bytes)
{
    (void)bytes;
    cu_backend *c = cu_of(be);
    if (!p || cu_enter(c) != DHS_OK) return;
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess) cu_fail(c, e);
}

static dhs_status cu_host_alloc(dhs_backend *be, size_t bytes, void **out)
{
    cu_backend *c = cu_of(be);
    *out = NULL;
    if (cu_enter(c) != DHS_OK) return DHS_ERR_BACKEND;
    void *p = NULL, *dp = NULL;
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : DHS_ALIGN, cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cu_fail(c, e);
        return DHS_ERR_NOMEM;
    }
    /* the gather kernel dereferences host row pointers directly */
    e = cudaHostGetDevicePointer(&dp, p, 0);
    if (e != cudaSuccess || dp != p) {
        if (e != cudaSuccess) cu_fail(c, e);
        cudaFreeHost(p);
        return DHS_ERR_UNSUPPORTED;
    }
    *out = p;
    return DHS_OK;
}

static void cu_host_free(dhs_backend *be, void *p, size_t bytes)
{
    (void)bytes;
    cu_backend *c = cu_of(be);
    if (!p || cu_enter(c) != DHS_OK) return;
    cudaError_t e = cudaFreeHost(p);
    if (e != cudaSuccess) cu_fail(c, e);
}

static dhs_status cu_gather_h2d(dhs_backend *be, const dhs_copy_pair *pairs, int64_t n, uint32_t row_bytes)
{
    cu_backend *c = cu_of(be);
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    return launch_rows(c, &c->ring_compute, c->compute, pairs, n, row_bytes);
}

static dhs_status cu_copy_rows_async(dhs_backend *be, const dhs_copy_pair *pairs, int64_t n,
                                     uint32_t row_bytes, dhs_ticket *t)
{
    cu_backend *c = cu_of(be);
    *t = 0;
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    if (n == 0) return DHS_OK;
    /* see what compute-stream work issued so far wrote (gathers, engine kernels) */
    CU_TRY(c, cudaEventRecord(c->fence, c->compute));
    CU_TRY(c, cudaStreamWaitEvent(c->side, c->fence, 0));
    s = launch_rows(c, &c->ring_side, c->side, pairs, n, row_bytes);
    if (s != DHS_OK) return s;
    return ticket_issue(c, c->side, t);
}

static dhs_status cu_copy_sync(dhs_backend *be, void *dst, const void *src, size_t bytes)
{
    cu_backend *c = cu_of(be);
    if (bytes == 0) return DHS_OK;
    if (!dst || !src) return DHS_ERR_INVALID_ARG;
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    /* on the compute stream: ordered after every gather and reader issued so far */
    CU_TRY(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, c->compute));
    CU_TRY(c, cudaStreamSynchronize(c->compute));
    return DHS_OK;
}

static dhs_status cu_sync_compute(dhs_backend *be)
{
    cu_backend *c = cu_of(be);
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    CU_TRY(c, cudaStreamSynchronize(c->compute));
    return DHS_OK;
}

static dhs_status cu_copy_host_runs(dhs_backend *be, const dhs_copy_run *runs, int64_t n, int32_t threads)
{
    cu_backend *c = cu_of(be);
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    /* after every gather and reader issued so far on the compute stream (as copy_sync orders its copy),
       then the bytes on host threads: a pinned-to-pageable cudaMemcpy runs on one */
    CU_TRY(c, cudaStreamSynchronize(c->compute));
    be_memcpy_runs(runs, n, threads);
    return DHS_OK;
}

static dhs_status cu_record_readers(dhs_backend *be, dhs_ticket *t)
{
    cu_backend *c = cu_of(be);
    *t = 0;
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    return ticket_issue(c, c->compute, t);
}

static void cu_tick(dhs_backend *be) { (void)be; }

/* ------------------------------------------------- device resolver (dres.cu) */

/* events of the split queue for G groups of up to nsrc sources (grows;
   outside a round, so never inside a capture) */
static dhs_status cu_dres_init(dhs_backend *be, int32_t G, int32_t nsrc)
{
    cu_backend *c = cu_of(be);
    if (G <= 0 || nsrc <= 0) return DHS_ERR_INVALID_ARG;
    if (G <= c->split_G && nsrc <= c->split_nsrc) return DHS_OK;
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    if (!c->split) CU_TRY(c, cudaStreamCreateWithFlags(&c->split, cudaStreamNonBlocking));
    const int32_t G2 = G > c->split_G ? G : c->split_G, n2 = nsrc > c->split_nsrc ? nsrc : c->split_nsrc;
    cudaEvent_t *ev = (cudaEvent_t *)calloc((size_t)G2 * (size_t)n2, sizeof(cudaEvent_t));
    if (!ev) return DHS_ERR_NOMEM;
    for (int64_t i = 0; i < (int64_t)G2 * n2; i++)
        if (cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming) != cudaSuccess) {
            for (int64_t j = 0; j < i; j++) cudaEventDestroy(ev[j]);
            free(ev);
            cu_fail(c, cudaErrorMemoryAllocation);
            return DHS_ERR_BACKEND;
        }
    if (c->split_ev) {
        cudaStreamSynchronize(c->split);
        for (int64_t i = 0; i < (int64_t)c->split_G * c->split_nsrc; i++) cudaEventDestroy(c->split_ev[i]);
        free(c->split_ev);
    }
    c->split_ev = ev;
    c->split_G = G2;
    c->split_nsrc = n2;
    return DHS_OK;
}

/* All on the compute stream (and, split, the copy queue), fixed grids, no host
   sync, no allocation: a call can be captured into a CUDA graph. */
static dhs_status cu_dres_resolve(dhs_backend *be, const dres_state *st, const dres_round *rd, int32_t k,
                                  const int32_t *sel, int32_t *loc, int payload, int mode)
{
    cu_backend *c = cu_of(be);
    const int split = (mode & DRES_MODE_SPLIT) != 0, direct = (mode & DRES_MODE_DIRECT) != 0;
    if (!st || !rd || !sel || !loc || k <= 0 || k > st->sel_k || st->N <= 0) return DHS_ERR_INVALID_ARG;
    if (split && (st->group < 0 || st->group >= c->split_G || st->nsrc > c->split_nsrc)) return DHS_ERR_STATE;
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    const dhs_dres_split sp = {c->split, split ? c->split_ev + (int64_t)st->group * c->split_nsrc : NULL,
                               c->split_blocks};
    if (c->mark) c->mark(c->mark_user, DHS_CUDA_MARK_PLAN);
    CU_TRY(c, dhs_dres_resolve_launch_mark(st, rd, k, sel, loc, payload, c->dres_scratch, c->dres_copy_blocks, c->compute,
                                           c->mark, c->mark_user, split ? &sp : NULL, direct));
    if (c->mark) c->mark(c->mark_user, DHS_CUDA_MARK_END);
    return DHS_OK;
}

static dhs_status cu_dres_wait(dhs_backend *be, const dres_state *st, const dres_round *rd, int32_t si)
{
    cu_backend *c = cu_of(be);
    (void)rd;
    if (!st || si < 0 || si >= st->nsrc) return DHS_ERR_INVALID_ARG;
    if (st->group < 0 || st->group >= c->split_G || si >= c->split_nsrc) return DHS_ERR_STATE;
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    CU_TRY(c, cudaStreamWaitEvent(c->compute, c->split_ev[(int64_t)st->group * c->split_nsrc + si], 0));
    return DHS_OK;
}

static dhs_status cu_dres_promote(dhs_backend *be, const dres_state *st, const dres_round *rd, int payload)
{
    cu_backend *c = cu_of(be);
    if (!st || !rd || st->N <= 0) return DHS_ERR_INVALID_ARG;
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    if (c->mark) c->mark(c->mark_user, DHS_CUDA_MARK_PLAN);
    CU_TRY(c, dhs_dres_promote_launch(st, rd, payload, c->dres_copy_blocks, c->compute));
    if (c->mark) c->mark(c->mark_user, DHS_CUDA_MARK_END);
    return DHS_OK;
}

static dhs_status cu_dres_promote_all(dhs_backend *be, const dres_state *st_dev, const dres_state *st_host, int32_t G,
                                      const dres_round *rd, int payload)
{
    cu_backend *c = cu_of(be);
    if (!st_dev || !st_host || !rd || G <= 0) return DHS_ERR_INVALID_ARG;
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    if (c->mark) c->mark(c->mark_user, DHS_CUDA_MARK_PLAN);
    CU_TRY(c, dhs_dres_promote_all_launch(st_dev, st_host, G, rd, payload, c->dres_copy_blocks, c->compute));
    if (c->mark) c->mark(c->mark_user, DHS_CUDA_MARK_END);
    return DHS_OK;
}

static dhs_status cu_dres_tail_locs(dhs_backend *be, const dres_state *st_dev, const dres_state *st_host, int32_t G,
                                    int32_t nsrc_max, int32_t n_round, const dres_round *rd, int32_t req_stride,
                                    int64_t src_stride, int32_t *loc)
{
    cu_backend *c = cu_of(be);
    if (!st_dev || !st_host || !rd || !loc || G <= 0 || nsrc_max <= 0 || n_round < 0) return DHS_ERR_INVALID_ARG;
    if (n_round == 0) return DHS_OK;
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    CU_TRY(c, dhs_dres_tail_locs_launch(st_dev, G, nsrc_max, n_round, rd, req_stride, src_stride, loc, c->compute));
    return DHS_OK;
}

static dhs_status cu_dres_page_tables(dhs_backend *be, const dres_state *st_dev, const dres_state *st_host, int32_t G,
                                      int32_t nsrc_max, int32_t n_round, const dres_round *rd, int32_t page_stride,
                                      int64_t src_stride, int32_t *tab)
{
    cu_backend *c = cu_of(be);
    if (!st_dev || !st_host || !rd || !tab || G <= 0 || nsrc_max <= 0 || n_round < 0) return DHS_ERR_INVALID_ARG;
    if (n_round == 0) return DHS_OK;
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    CU_TRY(c, dhs_dres_page_tables_launch(st_dev, G, nsrc_max, n_round, rd, page_stride, src_stride, tab, c->compute));
    return DHS_OK;
}

static dhs_status cu_dres_reset(dhs_backend *be, const dres_state *st, int32_t slot)
{
    cu_backend *c = cu_of(be);
    if (!st || slot < 0 || slot >= st->N) return DHS_ERR_INVALID_ARG;
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    CU_TRY(c, dhs_dres_reset_launch(st, slot, c->compute));
    return DHS_OK;
}

/* src: pinned host memory that stays unchanged until the compute stream
   passes this copy (backend.h) */
static dhs_status cu_publish(dhs_backend *be, void *dst, const void *src, size_t bytes)
{
    cu_backend *c = cu_of(be);
    if (bytes == 0) return DHS_OK;
    if (!dst || !src) return DHS_ERR_INVALID_ARG;
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    CU_TRY(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, c->compute));
    return DHS_OK;
}

/* one launch of the publish kernel (publish.cuh) for the whole list, where a cudaMemcpyAsync per piece
   cost the host 1.6-3.9 us each on the H200 hosts measured and the launch 3.5-3.9 us (bench/RESULTS.md);
   a list of at most DHS_CU_PUB_COPY_MAX pieces (a round begin that publishes only its descriptor) goes
   out as copies, which cost no more than the launch on either host */
#define DHS_CU_PUB_COPY_MAX 1
static dhs_status cu_publish_list(dhs_backend *be, const dhs_pub *list, int32_t n)
{
    cu_backend *c = cu_of(be);
    if (n < 0 || (n > 0 && !list)) return DHS_ERR_INVALID_ARG;
    if (n == 0) return DHS_OK;
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    if (n <= DHS_CU_PUB_COPY_MAX) {
        for (int32_t i = 0; i < n; i++)
            if (list[i].bytes)
                CU_TRY(c, cudaMemcpyAsync((void *)(uintptr_t)list[i].dst, (const void *)(uintptr_t)list[i].src,
                                          (size_t)list[i].bytes, cudaMemcpyDefault, c->compute));
        return DHS_OK;
    }
    CU_TRY(c, dhs_cuda_publish_launch(list, n, c->compute));
    return DHS_OK;
}

static void cu_free_all(cu_backend *c)
{
    if (c->own_compute) cudaStreamSynchronize(c->own_compute);
    if (c->compute && c->compute != c->own_compute) cudaStreamSynchronize(c->compute);
    if (c->side) cudaStreamSynchronize(c->side);
    if (c->split) cudaStreamSynchronize(c->split);
    for (int64_t i = 0; c->split_ev && i < (int64_t)c->split_G * c->split_nsrc; i++) cudaEventDestroy(c->split_ev[i]);
    free(c->split_ev);
    if (c->split) cudaStreamDestroy(c->split);
    cu_ring *rings[2] = {&c->ring_compute, &c->ring_side};
    for (int k = 0; k < 2; k++) {
        cu_ring *r = rings[k];
        if (r->buf) cudaFreeHost(r->buf);
        for (int i = 0; i < DHS_CU_SEGS; i++)
            if (r->seg[i].ev) cudaEventDestroy(r->seg[i].ev);
    }
    for (int i = 0; i < DHS_CU_TICKETS; i++)
        if (c->tickets[i].ev) cudaEventDestroy(c->tickets[i].ev);
    if (c->fence) cudaEventDestroy(c->fence);
    if (c->dres_scratch) cudaFree(c->dres_scratch);
    if (c->side) cudaStreamDestroy(c->side);
    if (c->own_compute) cudaStreamDestroy(c->own_compute);
    (void)cudaGetLastError();
    free(c);
}

static void cu_destroy(dhs_backend *be)
{
    cu_backend *c = cu_of(be);
    if (cu_enter(c) != DHS_OK) { /* device gone: release host state only */
        free(c);
        return;
    }
    cu_free_all(c);
}

static const dhs_backend_ops cu_ops = {
    .name = "cuda",
    .dev_alloc = cu_dev_alloc,
    .dev_free = cu_dev_free,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .gather_h2d = cu_gather_h2d,
    .copy_rows_async = cu_copy_rows_async,
    .copy_sync = cu_copy_sync,
    .sync_compute = cu_sync_compute,
    .copy_host_runs = cu_copy_host_runs,
    .record_readers = cu_record_readers,
    .done = cu_done,
    .wait = cu_wait,
    .dres_init = cu_dres_init,
    .dres_resolve = cu_dres_resolve,
    .dres_wait = cu_dres_wait,
    .dres_promote = cu_dres_promote,
    .dres_promote_all = cu_dres_promote_all,
    .dres_tail_locs = cu_dres_tail_locs,
    .dres_page_tables = cu_dres_page_tables,
    .dres_reset = cu_dres_reset,
    .publish = cu_publish,
    .publish_list = cu_publish_list,
    .tick = cu_tick,
    .destroy = cu_destroy,
};

/* ---------------------------------------------------------------- create */

dhs_status dhs_backend_cuda_create(int device, dhs_backend **out)
{
    if (!out) return DHS_ERR_INVALID_ARG;
    *out = NULL;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        return DHS_ERR_UNSUPPORTED;
    }
    if (device < 0 || device >= count) return DHS_ERR_INVALID_ARG;
    int uva = 0, map = 0, sms = 0;
    if (cudaSetDevice(device) != cudaSuccess ||
        cudaDeviceGetAttribute(&uva, cudaDevAttrUnifiedAddressing, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&map, cudaDevAttrCanMapHostMemory, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return DHS_ERR_UNSUPPORTED;
    }
    if (!uva || !map) return DHS_ERR_UNSUPPORTED;

    cu_backend *c = (cu_backend *)calloc(1, sizeof *c);
    if (!c) return DHS_ERR_NOMEM;
    be_init_common(&c->base, &cu_ops, c);
    c->device = device;
    c->sms = sms;
    c->max_blocks = DHS_CU_BLOCKS_PER_SM * sms;
    c->dres_copy_blocks = DHS_DRES_COPY_BLOCKS_PER_SM * sms;
    c->split_blocks = split_blocks_default(sms);
    c->next_ticket = 1;

    cudaError_t e = cudaStreamCreateWithFlags(&c->own_compute, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->fence, cudaEventDisableTiming);
    for (int i = 0; e == cudaSuccess && i < DHS_CU_TICKETS; i++)
        e = cudaEventCreateWithFlags(&c->tickets[i].ev, cudaEventDisableTiming);
    for (int i = 0; e == cudaSuccess && i < DHS_CU_SEGS; i++) {
        e = cudaEventCreateWithFlags(&c->ring_compute.seg[i].ev, cudaEventDisableTiming);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->ring_side.seg[i].ev, cudaEventDisableTiming);
    }
    if (e != cudaSuccess) {
        cu_free_all(c);
        return DHS_ERR_BACKEND;
    }
    c->compute = c->own_compute;
    /* the device resolver's error key: a few bytes, initialised once */
    e = cudaMalloc(&c->dres_scratch, dhs_dres_scratch_bytes());
    if (e == cudaSuccess) e = dhs_dres_scratch_init(c->dres_scratch, c->own_compute);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->own_compute);
    if (e != cudaSuccess) {
        cu_free_all(c);
        return DHS_ERR_BACKEND;
    }
    if (ring_grow(c, &c->ring_compute, DHS_CU_RING_MIN) != DHS_OK ||
        ring_grow(c, &c->ring_side, DHS_CU_RING_MIN) != DHS_OK) {
        cu_free_all(c);
        return DHS_ERR_NOMEM;
    }
    *out = &c->base;
    return DHS_OK;
}

/* ------------------------------------------------------------ dhs_cuda.h */

static cu_backend *cu_check(const dhs_backend *be)
{
    return (be && be->ops == &cu_ops) ? (cu_backend *)be->impl : NULL;
}

void *dhs_cuda_stream(dhs_backend *be)
{
    cu_backend *c = cu_check(be);
    return c ? (void *)c->compute : NULL;
}

void *dhs_cuda_side_stream(dhs_backend *be)
{
    cu_backend *c = cu_check(be);
    return c ? (void *)c->side : NULL;
}

dhs_status dhs_cuda_set_stream(dhs_backend *be, void *stream)
{
    cu_backend *c = cu_check(be);
    if (!c) return DHS_ERR_INVALID_ARG;
    cudaStream_t next = stream ? (cudaStream_t)stream : c->own_compute;
    if (next == c->compute) return DHS_OK;
    dhs_status s = cu_enter(c);
    if (s != DHS_OK) return s;
    /* later work on `next` (and the ring's in-order reasoning) follows all of the old stream */
    CU_TRY(c, cudaEventRecord(c->fence, c->compute));
    CU_TRY(c, cudaStreamWaitEvent(next, c->fence, 0));
    c->compute = next;
    return DHS_OK;
}

dhs_status dhs_cuda_set_gather_blocks(dhs_backend *be, int32_t max_blocks)
{
    cu_backend *c = cu_check(be);
    if (!c || max_blocks < 0) return DHS_ERR_INVALID_ARG;
    c->max_blocks = max_blocks ? max_blocks : DHS_CU_BLOCKS_PER_SM * c->sms;
    return DHS_OK;
}

dhs_status dhs_cuda_set_copy_queue_blocks(dhs_backend *be, int32_t blocks)
{
    cu_backend *c = cu_check(be);
    if (!c || blocks < 0) return DHS_ERR_INVALID_ARG;
    c->split_blocks = blocks ? blocks : split_blocks_default(c->sms);
    return DHS_OK;
}

dhs_status dhs_cuda_set_marker(dhs_backend *be, dhs_cuda_mark_fn fn, void *user)
{
    cu_backend *c = cu_check(be);
    if (!c) return DHS_ERR_INVALID_ARG;
    c->mark = fn;
    c->mark_user = fn ? user : NULL;
    return DHS_OK;
}

int dhs_cuda_last_error(const dhs_backend *be)
{
    const cu_backend *c = cu_check(be);
    return c ? (int)c->last_err : 0;
}
