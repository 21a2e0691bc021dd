/* tracestats.h - statistics of a selection trace (what `dhs trace info`
 * prints): padding, duplicates, distinct rows, overlap with the request's
 * previous round, reuse distance, speculative and producer overlap. Reads the
 * whole trace through the validating reader. Keys: docs/TRACE.md. */
#ifndef DHS_SIM_TRACESTATS_H
#define DHS_SIM_TRACESTATS_H

#include <stdint.h>

#include "sim/trace.h"

typedef struct dhs_trace_stats {
    dhs_trace_header hdr;
    dhs_trace_totals totals;
    uint64_t bytes;              /* file size read */
    uint64_t requests, ended;
    uint64_t selected;           /* non-padding entries */
    uint64_t padding, duplicates;
    uint64_t unsorted_queries;
    uint64_t distinct_rows;      /* first touches, per request and group */
    double padding_share;
    double mean_union_rows;      /* distinct rows per request-round and group */
    double mean_new_rows;        /* rows never selected before by the request */
    double prev_round_overlap;   /* NaN when undefined */
    double mean_reuse_distance;  /* NaN when undefined */
    double first_touch_share;    /* NaN when undefined */
    double spec_overlap;         /* NaN when undefined */
    double producer_overlap;     /* NaN when undefined */
    double mean_accepted, mean_prefix;
    int64_t max_positions;
    double read_s, total_s;      /* time in the reader, and in all */
} dhs_trace_stats;

/* DHS_TRACE_OK, or an error status with the reason in err. `progress`, when
   not NULL, is called every 65536 request-rounds with the rounds read. */
dhs_trace_status dhs_trace_stats_compute(const char *path, dhs_trace_stats *out, char *err, size_t errlen,
                                         void (*progress)(void *user, uint64_t rounds), void *user);

/* Locality per group (= layer for a generated trace): consecutive-step
   overlap alpha (|S_r cap S_r-1| / k of query 0, over request-rounds whose
   query 0 and the previous round's have no padding), overlap with group g-1's
   query 0 of the same round, and the hit rate of an LRU cache of B rows per
   request and group (every selected row of every query is an access, in
   trace order). Targets come from the trace's meta ("locality" written by
   dhs trace gen --locality). Keys: docs/LOCALITY.md. */
#define DHS_TRACE_LOC_MAX_B 8
typedef struct dhs_trace_loc_stats {
    int32_t n_groups, n_b;
    int64_t B[DHS_TRACE_LOC_MAX_B];
    uint64_t request_rounds;
    double alpha[DHS_TRACE_MAX_GROUPS];          /* NaN when undefined */
    uint64_t alpha_n[DHS_TRACE_MAX_GROUPS];      /* request-rounds counted */
    double random_alpha[DHS_TRACE_MAX_GROUPS];   /* mean k/V over the same request-rounds */
    double cross[DHS_TRACE_MAX_GROUPS];          /* [0] NaN */
    double hit[DHS_TRACE_MAX_GROUPS][DHS_TRACE_LOC_MAX_B];
    double hit_all[DHS_TRACE_LOC_MAX_B];
    int has_target;
    char preset[64];
    double alpha_target[DHS_TRACE_MAX_GROUPS];   /* the recorded model's alpha, mean over the same request-rounds; NaN without one */
} dhs_trace_loc_stats;

/* B: n_b capacities (1..DHS_TRACE_LOC_MAX_B), each >= 1. */
dhs_trace_status dhs_trace_loc_stats_compute(const char *path, const int64_t *B, int32_t n_b, dhs_trace_loc_stats *out,
                                             char *err, size_t errlen);

/* Hot-cache rows per group from measured LRU curves (what `dhs trace stats
   --budget`, `dhs plan --hot-per-layer` and `dhs sim --hot-per-layer` use).
   Every group starts at min_rows (0: no cache) and is raised, greedily by
   measured hit gain per row, to one of S's cache sizes above min_rows while
   the total stays within budget; a greedy, not guaranteed optimal where a
   curve is not concave. A group's hit at min_rows is S's measured hit when
   min_rows is one of S's sizes, else 0. The even split gives every group the
   largest size of S (or min_rows) of which n_groups fit the budget. Hit
   rates are means over groups (each group weighs the same). */
typedef struct dhs_trace_hot_split {
    int64_t budget, min_rows;
    int64_t even_rows;                     /* per group, the even split */
    double even_hit, sized_hit;            /* mean LRU hit rate over groups */
    int64_t used;                          /* rows the per-group split takes, <= budget */
    int64_t rows[DHS_TRACE_MAX_GROUPS];    /* per group */
} dhs_trace_hot_split;
/* 0, or -1 with err (budget below n_groups * min_rows, min_rows < 0). */
int dhs_trace_hot_split_compute(const dhs_trace_loc_stats *S, int64_t budget, int64_t min_rows, dhs_trace_hot_split *out,
                                char *err, size_t errlen);

/* The per-layer plan of a hot cache of B rows per group on average, from the
   LRU curves of the trace at `path`: candidate sizes page_rows, B/2, B, 2B, 4B
   (multiples of page_rows, at most DHS_TRACE_LOC_MAX_B), budget n_groups * B,
   every group at least page_rows (the library's smallest hot cache). B must
   be a positive multiple of page_rows. Fills *S (the curves, may be NULL to
   discard) and *out. DHS_TRACE_OK or an error with err. */
dhs_trace_status dhs_trace_hot_plan(const char *path, int64_t B, int32_t page_rows, dhs_trace_loc_stats *S,
                                    dhs_trace_hot_split *out, char *err, size_t errlen);

#endif
