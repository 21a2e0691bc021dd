/* tpshare.c - tensor-parallel shared recovery on the CPU backend (tpshare.h,
 * docs/MULTIGPU.md). The resolver leaves a call's copy list in ctx->tp_pairs
 * (resolve.c); the exchange copies each entry from host on one rank and
 * from that rank's pool on the others. */
#include "dev/tpshare.h"

#include <string.h>

#include "core/internal.h"

dhs_status dhs_tp_share(dhs_ctx *ctx, int32_t rank, int32_t ranks)
{
    if (!ctx || ranks < 1 || ranks > DHS_TP_MAX_RANKS || rank < 0 || rank >= ranks) return DHS_ERR_INVALID_ARG;
    if (ctx->round_open || ctx->tp_n) return DHS_ERR_STATE;
    if (ranks > 1 && (ctx->dres || ctx->be->payload_free || strcmp(dhs_backend_name(ctx->be), "cpu") != 0))
        return DHS_ERR_UNSUPPORTED;
    ctx->tp_rank = rank;
    ctx->tp_ranks = ranks;
    return DHS_OK;
}

void dhs_tp_get_stats(const dhs_ctx *ctx, dhs_tp_stats *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!ctx) return;
    out->host_rows = ctx->tp_host_rows;
    out->peer_rows = ctx->tp_peer_rows;
    out->exchanges = ctx->tp_exchanges;
    out->pending = ctx->tp_n;
}

/* byte offset of a pending destination in its rank's pool */
static uint64_t dst_off(const dhs_ctx *ctx, int64_t i) { return (uint64_t)((const uint8_t *)ctx->tp_pairs[i].dst - ctx->pool); }

dhs_status dhs_tp_exchange(dhs_ctx *const *ctxs, int32_t ranks)
{
    if (!ctxs || ranks < 1 || ranks > DHS_TP_MAX_RANKS) return DHS_ERR_INVALID_ARG;
    for (int32_t r = 0; r < ranks; r++) {
        const dhs_ctx *c = ctxs[r];
        if (!c) return DHS_ERR_INVALID_ARG;
        int32_t want = ranks > 1 ? ranks : 0; /* one rank: sharing off (tp_ranks 0 or 1) */
        if ((c->tp_ranks > 1 ? c->tp_ranks : 0) != want || (ranks > 1 && c->tp_rank != r)) return DHS_ERR_INVALID_ARG;
    }
    const dhs_ctx *c0 = ctxs[0];
    const int64_t n = c0->tp_n;
    const uint32_t rb = c0->row_stride;
    /* the ranks must hold the same plan: same list length, same pool geometry, same destinations,
       and replicated host rows (the same bytes at every rank's source of entry i); the CPU
       backend reads both tiers directly, so this costs one compare per entry and rank */
    for (int32_t r = 1; r < ranks; r++) {
        const dhs_ctx *c = ctxs[r];
        if (c->tp_n != n || c->row_stride != rb || c->n_pages != c0->n_pages) return DHS_ERR_STATE;
        for (int64_t i = 0; i < n; i++)
            if (dst_off(c, i) != dst_off(c0, i) || memcmp(c->tp_pairs[i].src, c0->tp_pairs[i].src, rb) != 0) return DHS_ERR_STATE;
    }
    if (n == 0) return DHS_OK;
    int64_t own[DHS_TP_MAX_RANKS], peer[DHS_TP_MAX_RANKS]; /* rows each rank copied, counted as issued */
    /* phase 1: each rank copies its share (entries i = rank mod ranks) from host;
       the list is copied into the rank's scratch copy list, the pending one stays for a retry */
    for (int32_t r = 0; r < ranks; r++) {
        dhs_ctx *c = ctxs[r];
        dhs_status s = pairs_reserve(c, n / ranks + 1);
        if (s != DHS_OK) return s;
        int64_t m = 0;
        for (int64_t i = r; i < n; i += ranks) c->pairs[m++] = c->tp_pairs[i];
        s = be_gather(c->be, c->pairs, m, rb);
        if (s != DHS_OK) return s;
        own[r] = m;
        peer[r] = 0;
    }
    /* phase 2, the all-gather: every rank copies the other ranks' shares from their pools
       (NVLink peer reads under NCCL on GPUs; plain copies between the emulated pools here) */
    for (int32_t r = 0; r < ranks && ranks > 1; r++) {
        dhs_ctx *c = ctxs[r];
        dhs_status s = pairs_reserve(c, n);
        if (s != DHS_OK) return s;
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++) {
            int32_t o = (int32_t)(i % ranks);
            if (o == r) continue;
            c->pairs[m++] = (dhs_copy_pair){ctxs[o]->pool + dst_off(ctxs[o], i), c->tp_pairs[i].dst};
        }
        s = be_gather(c->be, c->pairs, m, rb);
        if (s != DHS_OK) return s;
        peer[r] = m;
    }
    for (int32_t r = 0; r < ranks; r++) {
        dhs_ctx *c = ctxs[r];
        c->tp_host_rows += (uint64_t)own[r];
        c->tp_peer_rows += (uint64_t)peer[r];
        c->tp_exchanges++;
        c->tp_n = 0;
    }
    return DHS_OK;
}
