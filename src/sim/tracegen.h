/*
 * tracegen.h - synthetic selection traces with a documented locality model
 * (docs/TRACE.md "Synthetic generator"). The output is a function of the
 * parameters alone: same parameters and seed, identical bytes.
 *
 * Per request and round, query j (position n_r + j, V_j visible rows) of
 * producer 0 selects, in this score order:
 *   1. attention sinks: rows 0 .. sinks-1;
 *   2. the local window: the newest `window_full` rows, and each older row of
 *      the last `window` rows with a fixed per-row probability window_density;
 *   3. topical sets: `clusters` clusters per request, each a band of
 *      2*cluster_radius+1 rows around a center of which a fixed per-row share
 *      cluster_density belongs to the topic; a cluster is on or off (Markov:
 *      off->on topic_on, on->off topic_off per round), its center drifts by
 *      a uniform step in [-drift, drift] per round and jumps to a new place
 *      with probability topic_switch; at most k - tail_min*k rows;
 *   4. a random tail: uniform visible rows until k distinct rows are chosen.
 * When V_j <= k the selection is rows 0..V_j-1 ascending, then -1 padding.
 * Queries j >= 1 of a round repeat query 0's topical and tail rows, each kept
 * with probability 1 - spec_jitter, then refill from the tail. Producer g >= 1
 * copies producer g-1's query: each non-sink row kept when a fixed
 * per-(producer,row) hash falls below o_g (o_g drawn per request uniform in
 * [overlap_min, overlap_max]), otherwise replaced by the first free row of a
 * fixed probe sequence row +- (1..shift_radius); rows lost to collisions are
 * refilled from producer g-1's replaced rows, so producers stay as stable
 * across rounds as producer 0.
 */
#ifndef DHS_SIM_TRACEGEN_H
#define DHS_SIM_TRACEGEN_H

#include <stddef.h>
#include <stdint.h>

#include "sim/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dhs_tracegen_params {
    uint64_t seed;
    /* workload */
    int32_t n_requests;        /* requests (8) */
    int32_t n_rounds;          /* rounds at most (200); fewer when every request finished */
    int32_t batch;             /* live requests at most; 0 = n_requests */
    int64_t out_len;           /* output tokens per request, drawn in [out_len/2, out_len]; 0 = until the end */
    int64_t context;           /* largest imported prefix, positions (32768) */
    int64_t context_min;       /* smallest prefix; 0 = context/2 */
    int32_t spec;              /* queries per request per round, K (1) */
    double accept;             /* acceptance probability of each proposal, in order (0.7) */
    /* architecture */
    int32_t k;                 /* selection length (2048) */
    int32_t n_producers;       /* groups (1) */
    int32_t sources_per_producer; /* payload sources per group (1) */
    uint32_t row_bytes;        /* 576 */
    uint32_t m;                /* positions per row (1) */
    /* locality model (rows) */
    int32_t sinks;             /* 4 */
    int32_t window;            /* 512 */
    int32_t window_full;       /* 64 */
    double window_density;     /* 0.5 */
    int32_t clusters;          /* 64 */
    int32_t cluster_radius;    /* 32 */
    double cluster_density;    /* 0.5 */
    double topic_on;           /* 0.3 */
    double topic_off;          /* 0.1 */
    int32_t drift;             /* 2 */
    double topic_switch;       /* 0.005 */
    double tail_min;           /* 0.05 */
    double spec_jitter;        /* 0.05 */
    double overlap_min;        /* 0.7 */
    double overlap_max;        /* 1.0 */
    int32_t shift_radius;      /* 8 */
    int32_t sorted;            /* 0: score order (above); 1: ascending rows */
    char name[DHS_TRACE_NAME_MAX + 1]; /* "synthetic" */
} dhs_tracegen_params;

typedef struct dhs_tracegen_summary {
    int32_t requests_started, requests_ended;
    uint64_t rounds, items, entries, padding;
    uint64_t bytes;            /* file size */
} dhs_tracegen_summary;

dhs_tracegen_params dhs_tracegen_default(void);
/* DHS_TRACE_OK or ERR_INVALID_ARG with the reason in err (may be NULL). */
dhs_trace_status dhs_tracegen_check(const dhs_tracegen_params *p, char *err, size_t err_len);
/* The header the generator writes (meta = the parameters as JSON). */
dhs_trace_status dhs_tracegen_header(const dhs_tracegen_params *p, dhs_trace_header *h);
/* Generates into an open writer whose header is dhs_tracegen_header(p); the
   caller closes it. s may be NULL. */
dhs_trace_status dhs_tracegen_run(const dhs_tracegen_params *p, dhs_trace_writer *w, dhs_tracegen_summary *s,
                                  char *err, size_t err_len);
/* Opens `path`, generates, closes. On error the file is removed. */
dhs_trace_status dhs_tracegen_write(const dhs_tracegen_params *p, const char *path, dhs_tracegen_summary *s,
                                    char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif
