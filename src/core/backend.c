/* backend.c - accounted choke points and fault injection shared by backends,
 * and the parallel host copy they share. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/backend.h"

void be_init_common(dhs_backend *be, const dhs_backend_ops *ops, void *impl)
{
    memset(be, 0, sizeof *be);
    be->ops = ops;
    be->impl = impl;
}

dhs_status be_dev_alloc(dhs_backend *be, size_t bytes, void **out)
{
    *out = NULL;
    if (be_fault(be, DHS_FAULT_DEVICE_ALLOC)) return DHS_ERR_DEVICE_NOMEM;
    dhs_status s = be->ops->dev_alloc(be, bytes, out);
    if (s == DHS_OK) be->dev_bytes += bytes;
    return s;
}

void be_dev_free(dhs_backend *be, void *p, size_t bytes)
{
    if (!p) return;
    be->ops->dev_free(be, p, bytes);
    be->dev_bytes -= bytes;
}

dhs_status be_host_alloc(dhs_backend *be, size_t bytes, void **out)
{
    *out = NULL;
    if (be_fault(be, DHS_FAULT_HOST_ALLOC)) return DHS_ERR_NOMEM;
    dhs_status s = be->ops->host_alloc(be, bytes, out);
    if (s == DHS_OK) be->host_bytes += bytes;
    return s;
}

void be_host_free(dhs_backend *be, void *p, size_t bytes)
{
    if (!p) return;
    be->ops->host_free(be, p, bytes);
    be->host_bytes -= bytes;
}

dhs_status be_gather(dhs_backend *be, const dhs_copy_pair *pairs, int64_t n, uint32_t row_bytes)
{
    if (n == 0) return DHS_OK;
    if (be_fault(be, DHS_FAULT_COPY)) return DHS_ERR_BACKEND;
    return be->ops->gather_h2d(be, pairs, n, row_bytes);
}

/* Issued even with n == 0: the core calls it with no rows in payload-free
   mode, and the ticket must complete exactly when the payload copy's would
   (same fault point, same delay, same place in the backend's order), or a
   payload-free context publishes backups and populations at other times. */
dhs_status be_copy_async(dhs_backend *be, const dhs_copy_pair *pairs, int64_t n, uint32_t row_bytes, dhs_ticket *t)
{
    *t = 0;
    if (be_fault(be, DHS_FAULT_COPY)) return DHS_ERR_BACKEND;
    return be->ops->copy_rows_async(be, pairs, n, row_bytes, t);
}

dhs_status be_copy_sync(dhs_backend *be, void *dst, const void *src, size_t bytes)
{
    if (be_fault(be, DHS_FAULT_COPY)) return DHS_ERR_BACKEND;
    return be->ops->copy_sync(be, dst, src, bytes);
}

dhs_status be_copy_host_runs(dhs_backend *be, const dhs_copy_run *runs, int64_t n, int32_t threads)
{
    for (int64_t i = 0; i < n; i++)
        if (be_fault(be, DHS_FAULT_COPY)) return DHS_ERR_BACKEND;
    return n > 0 ? be->ops->copy_host_runs(be, runs, n, threads) : DHS_OK;
}

/* ----------------------------------------------------------- parallel copy */
#define MEMCPY_MAX_THREADS 8
#define MEMCPY_MIN_SHARE ((uint64_t)32 << 20)

typedef struct {
    const dhs_copy_run *runs;
    int64_t n;
    uint64_t lo, hi; /* bytes [lo, hi) of the runs laid end to end */
} memcpy_share;

static void *memcpy_share_run(void *arg)
{
    const memcpy_share *s = arg;
    uint64_t at = 0;
    for (int64_t i = 0; i < s->n && at < s->hi; i++) {
        const uint64_t b = s->runs[i].bytes, a0 = at > s->lo ? at : s->lo, a1 = at + b < s->hi ? at + b : s->hi;
        if (a0 < a1) memcpy((uint8_t *)s->runs[i].dst + (a0 - at), (const uint8_t *)s->runs[i].src + (a0 - at), (size_t)(a1 - a0));
        at += b;
    }
    return NULL;
}

void be_memcpy_runs(const dhs_copy_run *runs, int64_t n, int32_t threads)
{
    uint64_t total = 0;
    for (int64_t i = 0; i < n; i++) total += runs[i].bytes;
    int64_t t = threads;
    if (t <= 0) { /* automatic: the cores, each with 32 MiB or more */
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        t = cores > 0 ? cores : 1;
        if ((uint64_t)t > total / MEMCPY_MIN_SHARE) t = (int64_t)(total / MEMCPY_MIN_SHARE);
    }
    if (t > MEMCPY_MAX_THREADS) t = MEMCPY_MAX_THREADS;
    if ((uint64_t)t > total) t = (int64_t)total;
    if (t < 1) t = 1;
    memcpy_share sh[MEMCPY_MAX_THREADS];
    pthread_t tid[MEMCPY_MAX_THREADS];
    int started[MEMCPY_MAX_THREADS] = {0};
    for (int64_t i = 0; i < t; i++)
        sh[i] = (memcpy_share){runs, n, total / (uint64_t)t * (uint64_t)i, i == t - 1 ? total : total / (uint64_t)t * (uint64_t)(i + 1)};
    for (int64_t i = 1; i < t; i++) started[i] = pthread_create(&tid[i], NULL, memcpy_share_run, &sh[i]) == 0;
    memcpy_share_run(&sh[0]);
    for (int64_t i = 1; i < t; i++) {
        if (started[i]) pthread_join(tid[i], NULL);
        else memcpy_share_run(&sh[i]); /* no thread: the caller copies that share too */
    }
}

void dhs_backend_destroy(dhs_backend *be)
{
    if (be) be->ops->destroy(be);
}

const char *dhs_backend_name(const dhs_backend *be)
{
    return be ? be->ops->name : "none";
}

void dhs_backend_fault_at(dhs_backend *be, dhs_fault_kind kind, uint64_t nth)
{
    if (!be || (int)kind < 0 || kind >= DHS_FAULT_COUNT_) return;
    be->fault_nth[kind] = nth;
    be->fault_calls[kind] = 0;
}

uint64_t dhs_backend_faults_injected(const dhs_backend *be)
{
    return be ? be->faults_injected : 0;
}
