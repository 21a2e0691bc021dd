/* sizing.c - closed-form sizes of the draft ring and staging (DESIGN §6). */
#include <stdlib.h>

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

dhs_spec_schedule dhs_spec_schedule_default(void)
{
    dhs_spec_schedule s = {.n_steps = 3, .min_sessions = {0, 33, 128}, .width = {8, 6, 4}};
    return s;
}

int dhs_spec_schedule_parse(const char *str, dhs_spec_schedule *out)
{
    if (!str || !out) return -1;
    dhs_spec_schedule s = {0};
    const char *p = str;
    while (*p) {
        if (s.n_steps == DHS_MAX_SCHEDULE_STEPS) return -1;
        char *end;
        long w = strtol(p, &end, 10);
        if (end == p || *end != '@' || w < 1 || w > 64) return -1;
        p = end + 1;
        long m = strtol(p, &end, 10);
        if (end == p || m < 0 || m > (1L << 30)) return -1;
        if (s.n_steps > 0 && m <= s.min_sessions[s.n_steps - 1]) return -1;
        s.width[s.n_steps] = (int32_t)w;
        s.min_sessions[s.n_steps] = (int32_t)m;
        s.n_steps++;
        p = end;
        if (*p == ',') p++;
        else if (*p) return -1;
    }
    if (s.n_steps == 0) return -1;
    *out = s;
    return 0;
}

int32_t dhs_spec_width(const dhs_spec_schedule *s, int32_t sessions)
{
    if (!s || s->n_steps < 1) return 1;
    int32_t w = s->width[0];
    for (int32_t i = 0; i < s->n_steps; i++)
        if (sessions >= s->min_sessions[i]) w = s->width[i];
    return w;
}
