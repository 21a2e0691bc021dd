/*
 * tpshare.h - tensor-parallel shared recovery (docs/MULTIGPU.md; issue 15).
 * INTERNAL and experimental: not in the public headers, not exported from
 * the shared library, no Python binding, until the GPU path (NCCL all-gather
 * over NVLink) exists and has been measured. CPU backend only.
 *
 * R contexts, one per tensor-parallel rank, hold replicated KV: created with
 * the same arch and config, driven by the same calls with the same arguments
 * (requests, imports, writes, selections, acceptances), so their selections,
 * pool layouts and decisions are the same. Without sharing every rank copies
 * every miss from host: R times the PCIe bytes of one copy. With sharing:
 *
 *   for each rank r: dhs_resolve(ctx[r], ...)   plans and hands out locations;
 *                                              the call's copy list (its misses,
 *                                              in order) is kept, nothing copied
 *   dhs_tp_exchange(ctx, R)                     entry i of the list is copied
 *                                              from host by rank i mod R only,
 *                                              then every rank copies the other
 *                                              entries from their owners' pools
 *                                              (the all-gather)
 *
 * after which every rank's pool equals single-rank recovery byte for byte and
 * the host rows copied, summed over the ranks, equal one rank's.
 *
 * Contract:
 * - dhs_tp_share(ctx, rank, ranks): sets the rank (0 <= rank < ranks, ranks in
 *   1..DHS_TP_MAX_RANKS; ranks = 1 turns sharing off). Only outside a round
 *   (DHS_ERR_STATE), host resolver and payload contexts, CPU backend
 *   (DHS_ERR_UNSUPPORTED otherwise, the CUDA backend included).
 * - After a dhs_resolve that recovered rows, the rank refuses dhs_resolve,
 *   dhs_group_done and dhs_round_end (DHS_ERR_STATE) until dhs_tp_exchange
 *   succeeds, and the call's locations must not be read before that.
 *   dhs_resolve itself copies nothing in this mode, so a copy fault cannot
 *   make one rank's resolve fail and the others' succeed.
 * - dhs_tp_exchange(ctxs, ranks): ctxs[r] must be rank r of `ranks`, every
 *   rank with the same pending list (same length, same pool rows: checked;
 *   the same host bytes per entry: checked; DHS_ERR_STATE when the ranks
 *   diverged, nothing copied). No pending rows:
 *   DHS_OK, nothing done. A failed copy (DHS_ERR_BACKEND, a fault of kind
 *   DHS_FAULT_COPY on any rank's backend) or a failed scratch allocation
 *   (DHS_ERR_NOMEM) leaves every rank's state as it was: the pending rows'
 *   bytes are undefined, the pending lists stay, and calling dhs_tp_exchange
 *   again redoes every copy (host rows of recovered history never change).
 * - Faults elsewhere (an allocation or backup copy failing on one rank only)
 *   can make one rank's decisions differ from the others'; the next exchange
 *   with misses then answers DHS_ERR_STATE (divergence is detected, not
 *   repaired: the ranks must be rebuilt). A GPU engine keeps the ranks in
 *   lockstep by failing the step on every rank.
 */
#ifndef DHS_CORE_TPSHARE_H
#define DHS_CORE_TPSHARE_H

#include "dhs.h"

#define DHS_TP_MAX_RANKS 64

dhs_status dhs_tp_share(dhs_ctx *ctx, int32_t rank, int32_t ranks);
dhs_status dhs_tp_exchange(dhs_ctx *const *ctxs, int32_t ranks);

typedef struct dhs_tp_stats {
    uint64_t host_rows;  /* rows this rank copied from host (its shares) */
    uint64_t peer_rows;  /* rows it received from other ranks */
    uint64_t exchanges;  /* successful exchanges with rows */
    int64_t pending;     /* copy-list entries awaiting an exchange */
} dhs_tp_stats;
void dhs_tp_get_stats(const dhs_ctx *ctx, dhs_tp_stats *out);

#endif
