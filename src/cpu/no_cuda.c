/* no_cuda.c - the CUDA entry points of a build without CUDA (DHS_CUDA=OFF):
 * they exist so that engines and tests link either way, and report
 * DHS_ERR_UNSUPPORTED / NULL. The real ones are in src/cuda/cuda_backend.c. */
#ifndef DHS_HAVE_CUDA

#include <stddef.h>

#include "dhs.h"
#include "dhs_cuda.h"

dhs_status dhs_backend_cuda_create(int device, dhs_backend **out)
{
    (void)device;
    if (out) *out = NULL;
    return DHS_ERR_UNSUPPORTED;
}

void *dhs_cuda_stream(dhs_backend *be)
{
    (void)be;
    return NULL;
}

void *dhs_cuda_side_stream(dhs_backend *be)
{
    (void)be;
    return NULL;
}

dhs_status dhs_cuda_set_stream(dhs_backend *be, void *stream)
{
    (void)be;
    (void)stream;
    return DHS_ERR_UNSUPPORTED;
}

dhs_status dhs_cuda_set_gather_blocks(dhs_backend *be, int32_t max_blocks)
{
    (void)be;
    (void)max_blocks;
    return DHS_ERR_UNSUPPORTED;
}

dhs_status dhs_cuda_set_copy_queue_blocks(dhs_backend *be, int32_t blocks)
{
    (void)be;
    (void)blocks;
    return DHS_ERR_UNSUPPORTED;
}

dhs_status dhs_cuda_set_marker(dhs_backend *be, dhs_cuda_mark_fn fn, void *user)
{
    (void)be, (void)fn, (void)user;
    return DHS_ERR_UNSUPPORTED;
}

int dhs_cuda_last_error(const dhs_backend *be)
{
    (void)be;
    return 0;
}

#else
/* ISO C forbids an empty translation unit */
typedef int dhs_no_cuda_unused_;
#endif
