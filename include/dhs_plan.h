/*
 * dhs_plan.h - dhisparse: what an engine calls when it sizes and configures a
 * context, not every step (those calls are in dhs.h, which this includes):
 * closed-form sizing of the draft ring and the staging reservation
 * (DESIGN §6), the speculation-width schedule (DESIGN §5) and the parsers of
 * the configuration's names. dhs_config_sizes, which needs a whole
 * architecture and configuration, stays in dhs.h beside them.
 */
#ifndef DHS_PLAN_H
#define DHS_PLAN_H

#include "dhs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- parsers */
/* The names dhs_policy_str / dhs_resolver_str print ("lru", "clock", "fifo",
   "lfu"; "host", "device"): DHS_OK, or DHS_ERR_INVALID_ARG (NULL or an
   unknown name) with *out untouched. */
dhs_status dhs_policy_parse(const char *s, dhs_policy *out);
dhs_status dhs_resolver_parse(const char *s, dhs_resolver *out);

/* ---------------------------------------------------------------- sizing */
/* No sizing helper overflows: arguments out of range give 0 (a row count or
   byte total) or -1 (a ring row); a byte total past 2^64-1 gives UINT64_MAX.
   DESIGN §6. Draft ring rows per request slot: R_d = p * ceil((W + K_max + p - 1) / p);
   0 when window < 0, spec_width < 1, page_rows < 1 or R_d would pass INT64_MAX. */
int64_t dhs_ring_rows(int64_t window, int32_t spec_width, int32_t page_rows);
/* Ring bytes for `slots` request slots: slots * R_d * bytes_per_draft_row;
   0 when slots < 0 or R_d is 0, UINT64_MAX when the product passes 2^64-1. */
uint64_t dhs_ring_bytes(int64_t window, int32_t spec_width, int32_t page_rows, int32_t slots,
                        uint64_t bytes_per_draft_row);
/* Physical ring row of draft position t in slot i: i * R_d + (t mod R_d);
   -1 when ring_rows < 1, slot < 0, t < 0 or the slot's rows would pass INT64_MAX. */
int64_t dhs_ring_row(int64_t ring_rows, int32_t slot, int64_t t);
/* Staging reservation M_stage = chi * N * K_max * k * d_KV; 0 when a count
   is negative, UINT64_MAX when the product passes 2^64-1. */
uint64_t dhs_staging_bytes(int32_t live_sources, int32_t slots, int32_t spec_width, int32_t k,
                           uint64_t row_bytes);

/* Block-width schedule (DESIGN §5): the speculation width K narrows as load
   rises. Step i applies from sessions >= min_sessions[i]; steps are sorted by
   min_sessions. Default: K = 8 up to 32 sessions, 6 from 33 (so 6 at 64),
   4 from 128. */
#define DHS_MAX_SCHEDULE_STEPS 8
typedef struct dhs_spec_schedule {
    int32_t n_steps;
    int32_t min_sessions[DHS_MAX_SCHEDULE_STEPS];
    int32_t width[DHS_MAX_SCHEDULE_STEPS];
} dhs_spec_schedule;
dhs_spec_schedule dhs_spec_schedule_default(void);
/* Parses "8@0,6@33,4@128" (width@min_sessions, ascending; width 1..64,
   min_sessions 0..2^30, at most DHS_MAX_SCHEDULE_STEPS steps). DHS_OK, or
   DHS_ERR_INVALID_ARG with *out untouched (numbers too large for long
   included). */
dhs_status dhs_spec_schedule_parse(const char *s, dhs_spec_schedule *out);
/* Width K for `sessions` concurrent sessions (>= 1; any int32 is answered);
   1 for a NULL schedule or n_steps outside 1..DHS_MAX_SCHEDULE_STEPS. */
int32_t dhs_spec_width(const dhs_spec_schedule *s, int32_t sessions);

#ifdef __cplusplus
}
#endif
#endif
