/*
 * locmeter.h - what the reference model's selections show of their locality
 * (docs/LOCALITY.md "The reference model under a locality"): per producer
 * group, the consecutive-step overlap of query 0's top-k and the hit rate of
 * an LRU cache of B rows per session and group, measured on the selections
 * the model made. The engine feeds it (dhs_ref_engine_cfg.locmeter): the CPU
 * model and the GPU host step every session's query 0; the GPU device and
 * graph steps the queries of the round's first batch item (copied back each
 * round and fed after the next round's launch, beside the GPU's step), so a
 * session is measured while it is first in the batch.
 *
 * alpha = |S_r ∩ S_{r-1}| / k of query 0 over pairs of consecutive rounds of
 * a session whose selections hold k rows (no padding; with speculation the
 * two queries are A+1 positions apart); random = k / V over the same pairs;
 * draft = the same overlap between queries j and j+1 of one round (adjacent
 * positions); LRU: every row of every query one access, in query and
 * selection order (a session's first observed round is all misses). Sessions are tracked up to
 * max_tracked at once (later ones are not measured until a tracked one is
 * forgotten).
 */
#ifndef DHS_MODEL_LOCMETER_H
#define DHS_MODEL_LOCMETER_H

#include <stdint.h>

#include "dhs.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dhs_ref_locmeter dhs_ref_locmeter;

typedef struct dhs_ref_loc_group {
    uint64_t pairs;        /* consecutive-round pairs measured */
    double alpha;          /* mean overlap over them (0 when none) */
    double random;         /* mean k / V over them */
    uint64_t hits, accesses; /* LRU of lru_rows rows */
    uint64_t draft_pairs;  /* speculative rounds: pairs of queries j, j+1 of one round (consecutive positions) */
    double draft;          /* their mean overlap */
} dhs_ref_loc_group;

/* positions: the largest row index + 1 of any session (rows >= it are ignored) */
dhs_status dhs_ref_locmeter_create(int32_t n_groups, int32_t k, int32_t lru_rows, int64_t positions, int32_t max_tracked,
                                   dhs_ref_locmeter **out);
void dhs_ref_locmeter_destroy(dhs_ref_locmeter *m);
/* the K queries' selections (K x k entries, query j at sel + j*k, -1 padding) of
   session id in the engine's round `round` for group g, query 0 seeing `visible` rows */
dhs_status dhs_ref_locmeter_observe(dhs_ref_locmeter *m, int32_t id, uint64_t round, int32_t g, const int32_t *sel,
                                    int32_t K, int64_t visible);
/* session id finished: its state is dropped */
void dhs_ref_locmeter_forget(dhs_ref_locmeter *m, int32_t id);
void dhs_ref_locmeter_get(const dhs_ref_locmeter *m, int32_t g, dhs_ref_loc_group *out);
int32_t dhs_ref_locmeter_lru_rows(const dhs_ref_locmeter *m);

#ifdef __cplusplus
}
#endif
#endif
