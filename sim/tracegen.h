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

/* The locality model above, one struct for every generator of selections:
   the trace generator (dhs trace gen) and the serving simulator (dhs
   serve-sim) both draw from it. Defaults in brackets. */
typedef struct dhs_locality {
    int32_t sinks;             /* 4 */
    int32_t window;            /* 512 */
    int32_t window_full;       /* 64 */
    double window_density;     /* 0.5 */
    int32_t clusters;          /* 64 */
    int32_t cluster_radius;    /* 32 */
    double cluster_density;    /* 0.5 */
    double topic_on;           /* 0.3 per round */
    double topic_off;          /* 0.1 per round */
    int32_t drift;             /* 2 rows per round */
    double topic_switch;       /* 0.005 per round */
    double tail_min;           /* 0.05 of k */
    double spec_jitter;        /* 0.05 */
} dhs_locality;

dhs_locality dhs_locality_default(void);

/* The measured-overlap model (docs/LOCALITY.md). Off (n_layers = 0) the
   generator is the model above, byte for byte. On, producer g is layer
   min(g, n_layers-1) and, in place of sinks/window/clusters/tail:
     query 0 of round r keeps each row of its own query 0 of round r-1 with
       probability a = alpha[l], or with alpha_exp[l] = 1
       a = alpha[l] * (ref_context / V) * (k / ref_k) (the same multiple of
       the random k/V as at the measurement), clamped to [0, 1];
     the other rows: each row of producer g-1's query 0 of this round that it
       did not select at r-1 is taken with probability `cross` (IndexCache's
       cross-layer overlap; producer 0 has none);
     then uniform visible rows it did not select at r-1 (so the measured
       consecutive-step overlap is a, not a + k/V), falling back to any free
       row only when too few remain.
   Queries j >= 1 keep each row of query 0 with probability `draft`, then the
   same uniform fill. Selections stay k distinct visible rows; a history of at
   most k rows is rows 0..V-1 then -1 padding, as above. */
#define DHS_LOCALITY_MAX_LAYERS 128
typedef struct dhs_locality_model {
    char preset[32];           /* "synthetic" (off), "random", "dsv32-swe", or "custom:NAME" */
    int32_t n_layers;          /* 0 = off */
    double alpha[DHS_LOCALITY_MAX_LAYERS];
    int32_t alpha_exp[DHS_LOCALITY_MAX_LAYERS]; /* 0 or 1 */
    int64_t ref_context;       /* positions where alpha was measured */
    int32_t ref_k;             /* the k it was measured with */
    double cross;              /* [0, 1] */
    double draft;              /* [0, 1] */
} dhs_locality_model;

/* "synthetic", "random", "dsv32-swe", or a JSON file (format: docs/LOCALITY.md) into *m.
   0, or -1 with the reason in err. */
int dhs_locality_model_load(const char *spec, dhs_locality_model *m, char *err, size_t err_len);
/* a layer's target consecutive-step overlap at V visible rows */
double dhs_locality_alpha(const dhs_locality_model *m, int32_t layer, int64_t V, int32_t k);

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
    dhs_locality loc;
    double overlap_min;        /* 0.7 */
    double overlap_max;        /* 1.0 */
    int32_t shift_radius;      /* 8 */
    int32_t sorted;            /* 0: score order (above); 1: ascending rows */
    dhs_locality_model lm;     /* measured-overlap model; n_layers 0 = off */
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

/* ------------------------------------------------------------------
 * The selection stream on its own, for callers that run their own rounds
 * (dhs serve-sim): the same model and code as dhs_tracegen_run, one request
 * at a time. Memory: the generator holds scratch for the longest history it
 * has seen (grown on demand); a request holds its clusters and producers
 * only, whatever its length.
 */
typedef struct dhs_selgen dhs_selgen;
typedef struct dhs_selreq dhs_selreq;

/* Uses k, n_producers, m, loc, overlap_min/max, shift_radius and sorted of p
   (checked as dhs_tracegen_check does). NULL on a bad p (reason in err) or
   out of memory. */
dhs_selgen *dhs_selgen_create(const dhs_tracegen_params *p, char *err, size_t err_len);
void dhs_selgen_free(dhs_selgen *G);
/* A request with n committed positions: its stream seeded with `seed`,
   window key, clusters and producer overlaps drawn. NULL when out of memory. */
dhs_selreq *dhs_selreq_start(const dhs_selgen *G, uint64_t seed, int64_t n);
void dhs_selreq_free(dhs_selreq *q);
/* One round of request q at n committed positions with K queries: the
   clusters step (when the history exceeds k), then query j (positions n + j,
   rows 0 .. (n + j + 1)/m - 1 visible) of every producer g into
   out[(g * K + j) * k .. + k). 0, or -1 out of memory. */
int dhs_selgen_round(dhs_selgen *G, dhs_selreq *q, int64_t n, int32_t K, int32_t *out);
/* Bytes a request of this generator holds (dhs_selreq_start). */
size_t dhs_selreq_bytes(const dhs_selgen *G);

#ifdef __cplusplus
}
#endif
#endif
