/* test_share_cuda.c - shared prefixes on the CUDA backend: the exactness, boundary and reclaim tests of
 * tests/core/test_share.c with every context on the GPU (shared optional pages in the device pool, shared
 * pinned host chunks, the device resolver's mirrors of both). N sessions on one prefix decode byte for
 * byte as N private copies, read back with dhs_read_location. Exit 77 (a skip) without a device.
 */
#define SHARE_BACKEND 1
#define SHARE_NO_MAIN 1
#include "dhs.h"
static dhs_status share_backend(const void *o, dhs_backend **be)
{
    (void)o;
    return dhs_backend_cuda_create(0, be);
}
#include "core/test_share.c"

int main(void)
{
    dhs_backend *probe = NULL;
    if (dhs_backend_cuda_create(0, &probe) != DHS_OK) {
        printf("test_share_cuda: no CUDA device (or built without CUDA): skipped\n");
        return 77;
    }
    dhs_backend_destroy(probe);
    const uint64_t seed = th_seed("test_share_cuda");
    test_boundary();
    test_boundary_after_round();
    test_exact(4, 2600, 0, DHS_IMPORT_DEVICE, 0, 30, 0, seed);
    test_exact(3, 2301, 777, DHS_IMPORT_HOST, 1, 20, 0, seed + 1);
    test_exact(3, 1030, 2000, DHS_IMPORT_DEVICE, 1, 20, 1, seed + 2); /* the device resolver on the GPU */
    test_reclaim();
    test_faults();
    test_random(dhs_mix64(seed + 3), 300);
    (void)test_errors; /* compares the pool's bytes on the host: a device pointer here */
    return th_summary();
}
