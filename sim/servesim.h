/*
 * servesim.h - discrete-event serving simulator (`dhs serve-sim`, docs/SIM.md).
 *
 * One GPU (one attention data-parallel decode rank) serves requests with
 * continuous batching. Each iteration: arrivals join a FIFO queue; the head of
 * the queue is admitted while capacity allows (head-of-line: the first refusal
 * stops admission for the iteration); an admitted request is prefilled (by
 * default on a separate prefill instance, prefill_remote = 1: its slot and
 * memory are held meanwhile) and its first token ends the prefill; it then
 * joins the decode batch at the next step boundary; one decode step runs for
 * every joined request. Time advances by the cost model below; nothing runs
 * on a GPU.
 *
 * Modes (what decides capacity and step cost):
 *   RESIDENT  every row on the device: a request is admitted when its whole
 *             final context (prompt + output) of payload rows and index keys
 *             fits the KV budget; no hierarchy cost.
 *   FIXED     HiSparse-like: payload on host, a fixed hot cache of B rows per
 *             request, no optional history (resident_first = 0, import to host).
 *   ADAPTIVE  the load-adaptive hierarchy: imported history stays on device
 *             while capacity allows, reclaimed for admissions, refilled later.
 * FIXED and ADAPTIVE run the real core on a payload-free context: admission
 * (DHS_WAIT queues the request), reclaim, refill and the resolver's census
 * all come from the core. The context models one attention layer's pool (the
 * payload part of the budget divided by the layers; staging counted once);
 * index keys (prompt + output positions x layers x idx_bytes) come from their
 * own share of the budget. Host rows copied per step come from the core and
 * are scaled by the layer count in the cost model.
 *
 * Selections: the trace generator's locality model and code (sim/
 * tracegen.h, dhs_selgen): one producer, m = 1, parameters in
 * dhs_serve_config.loc (dhs_locality, the same defaults as dhs trace gen).
 * Each request's stream is seeded from (seed, request index).
 *
 * Memory: requests are made as they arrive (a request trace is streamed, one
 * line at a time), and a request's state (and its locality state from join
 * to completion) is freed when it completes: the simulation holds the
 * requests in the system (queued or running), not the whole workload. The
 * latency metrics keep one value per request (TTFT, TPOT, E2EL) and one per
 * token chunk (ITL), as exact percentiles need them.
 *
 * Decode step cost (microseconds), batch of requests i with K_i queries,
 * context L_i, E entries resolved and H host rows copied (one layer):
 *   t = base_us + token_us * sum K_i
 *     + layers * (attn_layer_us + idx_layer_us)
 *     + layers * sum_i K_i * (attn_us + idx_us_per_ktok * L_i / 1000)
 *     + [FIXED, ADAPTIVE] layers * (resolver_us + resolver_ns_per_entry * E / 1000
 *                                   + (H > 0 ? gather_us + H * row_bytes / (pcie_gbps * 1000) : 0))
 *     + [speculation] draft_us * (max K_i - 1)
 * With spec_auto, K_i come from dhs_spec_auto_choose (include/dhs_spec_auto.h)
 * over the same terms: a further query of request i costs u_i = token_us +
 * layers * (attn_us + idx_us_per_ktok * L_i / 1000) [+ layers * (k *
 * resolver_ns_per_entry / 1000 + h_x * row_bytes / (pcie_gbps * 1000))], the
 * round at K = 1 costs base_us + layers * (attn_layer_us + idx_layer_us)
 * [+ layers * (resolver_us + gather_us)] + sum_i (u_i with h_1 for h_x), where
 * h_1 and h_x are the host rows of a request's first and of each further
 * query, fitted (least squares, the past weighted 0.9 a step) to the rank's
 * recent steps; K_i is capped by the tokens a request has left; each request's
 * acceptance estimate learns from its own rounds.
 * Prefill of a prompt of P positions: prefill_us_per_token * P.
 * Defaults and their sources: dhs_serve_cost_default() and docs/SIM.md.
 *
 * Data-parallel ranks (dp_ranks R > 1): R such ranks, each with its own
 * budget (kv_gib, max_batch: the configured ones), its own core context, queue
 * and batch. Each arriving request is placed on one rank at arrival
 * (dhs_serve_placement) and stays there. The ranks step together: a step of
 * the group takes the longest of the ranks' step times (every rank waits for
 * the slowest; a rank with an empty batch waits too). R = 1 is the single-rank
 * simulator, output unchanged.
 */
#ifndef DHS_SIM_SERVESIM_H
#define DHS_SIM_SERVESIM_H

#include <stdint.h>

#include "dhs.h"
#include "sim/tracegen.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DHS_SERVE_RESIDENT = 0, DHS_SERVE_FIXED = 1, DHS_SERVE_ADAPTIVE = 2, DHS_SERVE_MODES_ } dhs_serve_mode;
const char *dhs_serve_mode_str(dhs_serve_mode m);

typedef struct dhs_serve_cost {
    int32_t layers;               /* attention layers with their own selection (61) */
    uint32_t row_bytes;           /* payload row, d_KV (656: FP8 MLA) */
    uint32_t idx_bytes;           /* index key per position and layer (132) */
    double base_us;               /* per decode step, independent of the batch */
    double token_us;              /* per query token in the step (dense and expert compute) */
    double attn_us;               /* per query and layer: sparse attention over k rows */
    double attn_layer_us;         /* per layer and decode step, independent of the batch: latency-bound
                                     attention kernels (launches, one pass over the layer) (0) */
    double idx_us_per_ktok;       /* per query and layer per 1000 context positions: indexer scores */
    double idx_layer_us;          /* per layer and decode step, independent of the batch: the indexer's and
                                     top-k's latency-bound part (0) */
    double pcie_gbps;             /* zero-copy gather bandwidth, GB/s */
    double gather_us;             /* per layer with at least one miss: gather latency */
    double resolver_us;           /* per layer and step: resolver launch and plan */
    double resolver_ns_per_entry; /* per resolved entry */
    double draft_us;              /* per drafted token position and step (whole batch) */
    double prefill_us_per_token;  /* per prompt position */
} dhs_serve_cost;

dhs_serve_cost dhs_serve_cost_default(void);


typedef enum { DHS_ARRIVAL_POISSON = 0, DHS_ARRIVAL_CLOSED = 1, DHS_ARRIVAL_TRACE = 2 } dhs_arrival_kind;

/* one request of a request trace (Mooncake JSONL, BurstGPT CSV) */
typedef struct dhs_serve_req {
    double t_s;           /* arrival, seconds from the first request */
    int64_t input_len;    /* prompt positions */
    int64_t output_len;   /* tokens to generate */
} dhs_serve_req;

typedef struct dhs_serve_workload {
    dhs_arrival_kind arrival;
    double rate;                 /* POISSON: requests per second */
    int32_t concurrency;         /* CLOSED: requests in flight */
    int32_t n_requests;          /* requests issued (TRACE: at most this many of the trace, 0 = all) */
    int64_t context_min, context;  /* prompt positions, uniform (POISSON, CLOSED) */
    int64_t output_min, output_len;/* output tokens, uniform */
    const char *trace_path;      /* TRACE: Mooncake JSONL or BurstGPT CSV, streamed (dhs_serve_trace_open) */
    double time_scale;           /* TRACE: arrival times divided by this (rate multiplier) */
    uint64_t seed;
} dhs_serve_workload;

/* where an arriving request goes among the data-parallel ranks */
typedef enum {
    DHS_PLACE_ROUND_ROBIN = 0,    /* arrival i to rank i mod R */
    DHS_PLACE_LEAST_SESSIONS = 1, /* the rank holding the fewest live (queued or running) requests */
    DHS_PLACE_MISS_AWARE = 2,     /* the rank with the least predicted step time (its live requests' attention,
                                     indexer and predicted host-row misses, dhs_serve_predict), among the
                                     ranks whose predicted resident bytes and slots still take the request;
                                     ties: fewer predicted resident bytes, then the lower rank */
    DHS_PLACE_N_
} dhs_serve_placement;
const char *dhs_serve_placement_str(dhs_serve_placement p);

#define DHS_SERVE_MAX_RANKS 64

typedef struct dhs_serve_config {
    dhs_serve_mode mode;
    int32_t dp_ranks;            /* data-parallel ranks, 1..DHS_SERVE_MAX_RANKS (1) */
    dhs_serve_placement placement; /* with dp_ranks > 1 (round robin) */
    int spec;                    /* speculative decoding on */
    int32_t n_sched;             /* block-width schedule: K = sched_k[i] for the first i with batch <= sched_batch[i] */
    int32_t sched_batch[8];
    int32_t sched_k[8];
    double accept_p;             /* each proposal accepted with this probability, in order */
    double accept_spread;        /* each request's own probability: accept_p + U(-spread, spread), clamped
                                    to [0, 1] (0: every request accept_p, the draws of earlier versions) */
    int spec_auto;               /* with spec: K per request and step from dhs_spec_auto (its acceptance
                                    estimate and this cost model's marginal costs), at most the
                                    schedule's widest K, instead of the schedule */
    int32_t k;                   /* selection length (2048) */
    int32_t hot_rows;            /* B (4096) */
    int32_t page_rows;           /* 64 */
    int32_t tail_rows;           /* 128 */
    int32_t max_batch;           /* request slots (128) */
    double kv_gib;               /* device memory for KV, index keys and staging, GiB (40) */
    double idx_share;            /* share of the budget for index keys; 0 = auto (see docs/SIM.md) */
    int32_t stage_layers;        /* live layer groups whose staging is reserved (chi, 4) */
    /* an explicit split of the budget (0 = derived from kv_gib as above): what --calibrate sets so a
       simulated configuration holds what the measured run held (docs/SIM.md, Calibration) */
    uint64_t layer_pool_bytes;   /* one layer's payload pool: hot caches, tails and imported history
                                    (the core's staging on top); kv_gib, idx_share, stage_layers unused for it */
    uint64_t idx_cap_bytes;      /* the index keys' budget (admission) */
    dhs_policy policy;           /* the core's hot-cache replacement policy (LRU) */
    int64_t max_context;         /* longest prompt; longer trace prompts are clamped (131072) */
    int64_t max_output;          /* longest output; longer trace outputs are clamped (4096) */
    dhs_serve_cost cost;
    dhs_locality loc;            /* selection locality (dhs_locality_default) */
    dhs_locality_model lm;       /* measured-overlap model (tracegen.h), one layer: the simulated pool is one
                                    layer's; n_layers 0 (default) = loc above */
    int prefill_remote;          /* 1: disaggregated prefill (default): the slot is reserved at
                                    admission, the prompt is prefilled elsewhere and the request
                                    joins the decode batch when its KV arrived; 0: local prefill
                                    runs on this rank and stalls decoding */
    /* optional: called about every 1024 decode steps with the requests
       completed, the requests of the run and the simulated seconds (the tool
       prints progress from it; nothing here prints) */
    void (*progress)(void *user, int64_t done, int64_t total, double sim_s);
    void *progress_user;
} dhs_serve_config;

dhs_serve_config dhs_serve_config_default(void);
/* Parses "8@32,6@64,5@127,4": K=8 up to 32 sessions, 6 up to 64, 5 up to
   127, 4 beyond. 0 on success. */
int dhs_serve_parse_schedule(const char *s, dhs_serve_config *c);
int32_t dhs_serve_block_width(const dhs_serve_config *c, int32_t batch);

#define DHS_SERVE_BATCH_HIST 1025 /* step statistics per batch size 0..1024 */

typedef struct dhs_serve_result {
    /* vLLM `bench serve` keys */
    double duration;             /* s, first arrival (t = 0) to last completion */
    int64_t completed, total_input_tokens, total_output_tokens;
    double request_throughput, output_throughput, total_token_throughput;
    double mean_ttft_ms, median_ttft_ms, p99_ttft_ms;
    double mean_tpot_ms, median_tpot_ms, p99_tpot_ms;
    double mean_itl_ms, median_itl_ms, p99_itl_ms;
    double mean_e2el_ms, median_e2el_ms, p99_e2el_ms;
    /* simulator extras */
    int32_t max_running;         /* most requests admitted at once */
    double mean_batch;           /* requests per decode step */
    double mean_step_ms;         /* decode step time */
    double accept_length;        /* mean tokens per request per step */
    uint64_t steps, waits;       /* decode steps; iterations where the queue head was refused */
    uint64_t entries, host_rows; /* one layer's resolved entries and host rows */
    uint64_t census_direct, census_hot, census_host;
    double host_rows_per_token;  /* one layer */
    uint64_t reclaims, repopulated_pages;
    uint64_t device_pool_bytes;  /* the core's pool (one layer + staging) */
    uint64_t idx_budget_bytes;
    double wall_s;
    /* memory: requests made and not yet completed (queued or running) at
       most at once, and the bytes of per-request state (request and
       locality state) they held at most at once */
    int64_t peak_live_requests;
    uint64_t peak_request_bytes;
    /* decode step time by batch size: sum (ms) and count */
    double step_ms_sum[DHS_SERVE_BATCH_HIST];
    uint64_t step_n[DHS_SERVE_BATCH_HIST];
    /* decode step time percentiles (the group's step with dp_ranks > 1) */
    double p50_step_ms, p99_step_ms;
    /* data-parallel ranks (dp_ranks > 1; for one rank: rank 0 = the totals).
       misses: one layer's host rows copied; per step: over the group's steps */
    int32_t dp_ranks;
    int32_t rank_sessions[DHS_SERVE_MAX_RANKS];     /* requests placed on the rank */
    int32_t rank_max_running[DHS_SERVE_MAX_RANKS];  /* most admitted at once on the rank */
    double rank_misses_per_step[DHS_SERVE_MAX_RANKS];
    double rank_mean_step_ms[DHS_SERVE_MAX_RANKS];  /* the rank's own step time, over the group's steps (0 when idle) */
    double miss_max_per_step;    /* mean over steps of the most misses on one rank */
    double miss_mean_per_step;   /* mean over steps of the ranks' mean misses */
    double wait_share;           /* 1 - (mean rank step time) / (group step time): time ranks wait for the slowest */
} dhs_serve_result;

/* The placement's prediction for one request of prompt P and output O
   positions (its mean context P + O/2), under configuration c: host-row misses
   per decode step and layer (query 0, a FIXED-hierarchy estimate from the
   locality model: the random tail and new topics land in host rows with the
   share of the context that the hot cache and tail do not hold; 0 resident or
   when the context fits in k), predicted device bytes (index keys, plus the hot
   cache and tail per layer, or the whole context resident) and its share of a
   step's time in microseconds (token, attention, indexer and miss cost). */
typedef struct dhs_serve_pred {
    double misses;
    double bytes;
    double step_us;
} dhs_serve_pred;
dhs_serve_pred dhs_serve_predict(const dhs_serve_config *c, int64_t prompt, int64_t output);

/* Runs one simulation. 0 on success, else -1 with err set. */
int dhs_serve_run(const dhs_serve_config *c, const dhs_serve_workload *w, dhs_serve_result *r, char *err, size_t err_len);

/* Equal-batch decode step time: for each batch size that resident serving
   and at least one hierarchy mode ran at least min_steps steps of (over the
   runs with speculation off), the mean step time of each mode. ms[m] < 0:
   mode m has too few steps at that batch. Returns the rows written (at most
   max), in increasing batch size. */
typedef struct dhs_serve_eqb {
    int32_t batch;
    double ms[DHS_SERVE_MODES_];     /* mean step ms per mode (ms[0]: resident) */
    double overhead[DHS_SERVE_MODES_]; /* ms[m] / ms[0] - 1, or 0 where ms[m] < 0 */
} dhs_serve_eqb;
int dhs_serve_equal_batch(const dhs_serve_result *const *runs, const dhs_serve_mode *modes, const int *spec, int n_runs,
                          uint64_t min_steps, dhs_serve_eqb *out, int max);

/* Request traces, read one request at a time: Mooncake JSONL
   ({"timestamp": ms, "input_length", "output_length"} per line) or BurstGPT
   CSV (header with "Timestamp" in seconds, "Request tokens", "Response
   tokens"; rows with 0 response tokens are failures and skipped, as are rows
   with 0 request tokens). The format is detected from the first line. A
   negative timestamp or length, a malformed line, or a timestamp below the
   previous request's (a streamed trace must be in arrival order) is an error
   naming the line. Arrival times are relative to the first request. */
typedef struct dhs_serve_trace dhs_serve_trace;
int dhs_serve_trace_open(const char *path, dhs_serve_trace **out, char *err, size_t err_len); /* 0 or -1 */
/* 1: *q is the next request; 0: end of the trace; -1: error (err names the line) */
int dhs_serve_trace_next(dhs_serve_trace *t, dhs_serve_req *q, char *err, size_t err_len);
void dhs_serve_trace_close(dhs_serve_trace *t);
/* A pass over the whole trace (checks every line, O(1) memory): the number
   of requests. 0 or -1 with err (also for a trace without requests). */
int dhs_serve_trace_count(const char *path, int32_t *n, char *err, size_t err_len);
/* The whole trace in memory (tests and small tools; the simulator streams). */
int dhs_serve_load_trace(const char *path, dhs_serve_req **out, int32_t *n, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif
