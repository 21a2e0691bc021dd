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

#endif
