/* backend.c - accounted choke points and fault injection shared by backends. */
#include <stdlib.h>
#include <string.h>

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
