/*
 * dhs_spec_auto.h - speculation width chosen online (DESIGN §5: the drafter
 * asks how many queries K_r each request verifies this round; the history
 * they fetch is the library's business).
 *
 * Per request the controller keeps an estimate a_r of the probability that a
 * draft is accepted, in order (every accepted draft extends the accepted
 * prefix; the first rejection ends it), from the rounds the engine reports.
 * With K queries a request gains in expectation
 *     E_r(K) = 1 + a_r + a_r^2 + ... + a_r^(K-1)    tokens
 * (the last query's own token always counts). A round costs
 *     S = fixed_us + sum_r query_us[r] * (K_r - 1) + draft_us * (max_r K_r - 1)
 * where fixed_us is the round with every K_r = 1, query_us[r] what each
 * further query of request r adds to the step (attention and indexer over its
 * context, the copies of the rows its extra selection misses beyond the
 * rows its other queries fetch: with real draft-position locality far fewer
 * than a first query's) and draft_us what each further draft position of the
 * widest request adds (serial drafting). dhs_spec_auto_choose picks K_r in
 * [1, cap_r] maximising the round's expected tokens per microsecond,
 * sum_r E_r(K_r) / S, exactly: for each widest width W it takes the
 * increments (r, K) in order of a_r^K / query_us[r] while each one raises the
 * ratio (the optimum of a ratio of a concave sum over a linear cost), and
 * keeps the best W. So widths shrink as the batch grows (the step's fixed
 * part is shared by more tokens) and as a request's acceptance falls, and
 * never pass cap_r (the context's spec_width, the tokens the request has left, the
 * staging room the engine grants it).
 *
 * Host memory only (a few doubles per slot, allocated at create); no device
 * work; not thread-safe (one controller per engine thread).
 */
#ifndef DHS_SPEC_AUTO_H
#define DHS_SPEC_AUTO_H

#include <stdint.h>

#include "dhs.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dhs_spec_auto dhs_spec_auto;

typedef struct dhs_spec_auto_cfg {
    int32_t max_slots;   /* requests tracked at once: slots 0 .. max_slots - 1 (the engine's own numbering) */
    int32_t spec_max;    /* widest K ever chosen (1..64; at most the context's spec_width) */
    double prior_accept; /* a_r before any observation, in [0, 1] */
    double prior_weight; /* pseudo-proposals behind the prior (>= 0; 0: the first round decides) */
    double decay;        /* weight of the past at each observation, in (0, 1]: 1 = plain counts */
} dhs_spec_auto_cfg;

/* spec_max 8, prior_accept 0.6, prior_weight 4, decay 0.95 */
dhs_spec_auto_cfg dhs_spec_auto_cfg_default(int32_t max_slots);

/* DHS_ERR_INVALID_ARG for NULL or a field out of range; DHS_ERR_NOMEM */
dhs_status dhs_spec_auto_create(const dhs_spec_auto_cfg *cfg, dhs_spec_auto **out);
void dhs_spec_auto_destroy(dhs_spec_auto *sa); /* NULL is a no-op */

/* A new request in `slot`: its estimate back to the prior. */
dhs_status dhs_spec_auto_reset(dhs_spec_auto *sa, int32_t slot);

/* The round's outcome of `slot`: it verified K queries and accepted
   `accepted` of its K - 1 drafts (0 .. K - 1). DHS_ERR_INVALID_ARG (nothing
   changed) for a slot out of range, K outside 1..spec_max or accepted
   outside 0..K - 1. */
dhs_status dhs_spec_auto_observe(dhs_spec_auto *sa, int32_t slot, int32_t K, int32_t accepted);

/* The current acceptance estimate of `slot`. */
dhs_status dhs_spec_auto_estimate(const dhs_spec_auto *sa, int32_t slot, double *accept);

/* Widths of one round: n requests (slots[i] distinct), caps cap[i] >= 1
   (NULL: spec_max; a cap above spec_max counts as spec_max), query_us[i] > 0
   the cost of each further query of request i, fixed_us > 0 (the round at
   K = 1 everywhere) and draft_us >= 0, all in the same unit (microseconds). Writes K[i] in 1..min(cap[i], spec_max); when
   tokens_per_us is not NULL, the expected tokens per microsecond of that
   choice. DHS_ERR_INVALID_ARG (nothing written) for bad arguments, n = 0
   included. */
dhs_status dhs_spec_auto_choose(dhs_spec_auto *sa, int32_t n, const int32_t *slots, const int32_t *cap,
                                const double *query_us, double fixed_us, double draft_us, int32_t *K,
                                double *tokens_per_us);

/* ---- the miss cost of widening a round, measured.
   A further query of a request selects rows its other queries did not, and
   those that are not on the device are copied from host: the round's host
   rows grow with its width. After each round the engine reports how many
   requests it served, how many queries they verified in all, how many rows
   it copied from host and (when it measured it) how long those copies took.
   The controller keeps a decayed least-squares fit
       host_rows ~ first_rows * requests + extra_rows * (queries - requests)
   (extra_rows pulled towards 0, ridge 1, so that widths get tried before
   their misses are known) and the copy time per row: the decayed measured
   copy time over the decayed rows of the rounds that measured it, row_us
   (dhs_spec_auto_set_row_us) before any. dhs_spec_auto_choose_round then
   charges each further query extra_rows * row_us on top of the caller's
   query_us, each request's first query first_rows * row_us on top of
   fixed_us, and keeps the round's expected extra rows,
   extra_rows * sum_r (K_r - 1), within the staging room the caller grants.
   So widths narrow when copies are dear or the staging room is short and
   widen back when misses are free (host rows that do not grow with K). */

/* One round's outcome: `requests` served, `queries` verified in all
   (>= requests), host_rows >= 0 copied from host, copy_us the time those
   copies took (microseconds; < 0: not measured, only the row fit learns).
   DHS_ERR_INVALID_ARG (nothing changed) for requests < 1, queries <
   requests, a negative or non-finite host_rows, a non-finite copy_us. */
dhs_status dhs_spec_auto_observe_round(dhs_spec_auto *sa, int32_t requests, int32_t queries, double host_rows,
                                       double copy_us);

/* The copy time per row (microseconds, >= 0, finite) used until a round
   reports a measured copy time (default 0: misses free until measured). */
dhs_status dhs_spec_auto_set_row_us(dhs_spec_auto *sa, double row_us);

/* The current miss model: rows a request's first query copies, rows each
   further query adds, microseconds per row copied. Any output may be NULL. */
dhs_status dhs_spec_auto_miss_model(const dhs_spec_auto *sa, double *first_rows, double *extra_rows, double *row_us);

/* dhs_spec_auto_choose with the miss cost: query_us[i] and fixed_us are the
   round's costs without host copies; the controller adds the miss model's
   (above). room_rows: the expected extra rows the round may copy beyond its
   first queries' (the staging room left; < 0: unbounded); increments are
   taken in the order of dhs_spec_auto_choose while the room lasts. K[i] in
   1..min(cap[i], spec_max); tokens_per_us (when not NULL) the expected
   tokens per microsecond with the copies charged. Errors as
   dhs_spec_auto_choose, and for a non-finite room_rows. */
dhs_status dhs_spec_auto_choose_round(dhs_spec_auto *sa, int32_t n, const int32_t *slots, const int32_t *cap,
                                      const double *query_us, double fixed_us, double draft_us, double room_rows,
                                      int32_t *K, double *tokens_per_us);

#ifdef __cplusplus
}
#endif
#endif
