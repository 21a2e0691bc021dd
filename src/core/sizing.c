/* sizing.c - closed-form sizes of the draft ring and staging (DESIGN §6). */
#include "dhs.h"

int64_t dhs_ring_rows(int64_t window, int32_t k_max, int32_t page_rows)
{
    if (window < 0 || k_max < 1 || page_rows < 1) return 0;
    int64_t p = page_rows;
    return p * ((window + k_max + p - 1 + p - 1) / p);
}

uint64_t dhs_ring_bytes(int64_t window, int32_t k_max, int32_t page_rows, int32_t slots,
                        uint64_t bytes_per_draft_row)
{
    if (slots < 0) return 0;
    return (uint64_t)slots * (uint64_t)dhs_ring_rows(window, k_max, page_rows) * bytes_per_draft_row;
}

int64_t dhs_ring_row(int64_t ring_rows, int32_t slot, int64_t t)
{
    if (ring_rows <= 0 || slot < 0 || t < 0) return -1;
    return (int64_t)slot * ring_rows + t % ring_rows;
}

uint64_t dhs_staging_bytes(int32_t live_sources, int32_t slots, int32_t k_max, int32_t k,
                           uint64_t row_bytes)
{
    if (live_sources < 0 || slots < 0 || k_max < 0 || k < 0) return 0;
    return (uint64_t)live_sources * (uint64_t)slots * (uint64_t)k_max * (uint64_t)k * row_bytes;
}
