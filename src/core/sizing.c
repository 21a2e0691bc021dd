/* sizing.c - closed-form sizes of the draft ring and staging (DESIGN §6). */
#include <stdint.h>
#include <stdlib.h>

#include "dhs_plan.h"
#include "dhs.h"

/* Every figure is checked before it is formed: arguments out of range give
   0 (rows) / -1 (a ring row); a byte total past 2^64-1 gives UINT64_MAX (a
   budget nothing can meet), never a wrapped small number. */
int64_t dhs_ring_rows(int64_t window, int32_t k_max, int32_t page_rows)
{
    if (window < 0 || k_max < 1 || page_rows < 1) return 0;
    int64_t p = page_rows;
    /* window + k_max + p - 1 rounded up to p: needs window + k_max + 2(p-1) */
    if (window > INT64_MAX - k_max - 2 * (p - 1)) return 0;
    int64_t pages = (window + k_max + p - 1 + p - 1) / p;
    if (pages > INT64_MAX / p) return 0;
    return p * pages;
}

uint64_t dhs_ring_bytes(int64_t window, int32_t k_max, int32_t page_rows, int32_t slots,
                        uint64_t bytes_per_draft_row)
{
    int64_t rows = dhs_ring_rows(window, k_max, page_rows);
    if (slots < 0 || rows == 0) return 0;
    uint64_t a, b;
    if (__builtin_mul_overflow((uint64_t)slots, (uint64_t)rows, &a) || __builtin_mul_overflow(a, bytes_per_draft_row, &b))
        return UINT64_MAX;
    return b;
}

int64_t dhs_ring_row(int64_t ring_rows, int32_t slot, int64_t t)
{
    if (ring_rows <= 0 || slot < 0 || t < 0) return -1;
    int64_t base;
    if (__builtin_mul_overflow((int64_t)slot, ring_rows, &base) || base > INT64_MAX - (ring_rows - 1)) return -1;
    return base + t % ring_rows;
}

uint64_t dhs_staging_bytes(int32_t live_sources, int32_t slots, int32_t k_max, int32_t k,
                           uint64_t row_bytes)
{
    if (live_sources < 0 || slots < 0 || k_max < 0 || k < 0) return 0;
    /* the four int32 factors fit in 2^124: two checked steps after the first */
    uint64_t a = (uint64_t)live_sources * (uint64_t)slots, b, c, d; /* < 2^62 */
    if (__builtin_mul_overflow(a, (uint64_t)k_max, &b) || __builtin_mul_overflow(b, (uint64_t)k, &c) ||
        __builtin_mul_overflow(c, row_bytes, &d))
        return UINT64_MAX;
    return d;
}

dhs_spec_schedule dhs_spec_schedule_default(void)
{
    dhs_spec_schedule s = {.n_steps = 3, .min_sessions = {0, 33, 128}, .width = {8, 6, 4}};
    return s;
}

dhs_status dhs_spec_schedule_parse(const char *str, dhs_spec_schedule *out)
{
    if (!str || !out) return DHS_ERR_INVALID_ARG;
    dhs_spec_schedule s = {0};
    const char *p = str;
    while (*p) {
        if (s.n_steps == DHS_MAX_SCHEDULE_STEPS) return DHS_ERR_INVALID_ARG;
        char *end;
        long w = strtol(p, &end, 10);
        if (end == p || *end != '@' || w < 1 || w > 64) return DHS_ERR_INVALID_ARG;
        p = end + 1;
        long m = strtol(p, &end, 10);
        if (end == p || m < 0 || m > (1L << 30)) return DHS_ERR_INVALID_ARG;
        if (s.n_steps > 0 && m <= s.min_sessions[s.n_steps - 1]) return DHS_ERR_INVALID_ARG;
        s.width[s.n_steps] = (int32_t)w;
        s.min_sessions[s.n_steps] = (int32_t)m;
        s.n_steps++;
        p = end;
        if (*p == ',') p++;
        else if (*p) return DHS_ERR_INVALID_ARG;
    }
    if (s.n_steps == 0) return DHS_ERR_INVALID_ARG;
    *out = s;
    return DHS_OK;
}

int32_t dhs_spec_width(const dhs_spec_schedule *s, int32_t sessions)
{
    /* a schedule not made by dhs_spec_schedule_parse/_default may hold any
       n_steps: never read past the arrays */
    if (!s || s->n_steps < 1 || s->n_steps > DHS_MAX_SCHEDULE_STEPS) return 1;
    int32_t w = s->width[0];
    for (int32_t i = 0; i < s->n_steps; i++)
        if (sessions >= s->min_sessions[i]) w = s->width[i];
    return w;
}
