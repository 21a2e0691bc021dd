/* dres.h - the core side of the device resolver (dres.c): the hooks that
 * ctx.c, resolve.c, residency.c and check.c call when
 * cfg.resolver == DHS_RESOLVER_DEVICE (ctx->dres != NULL). */
#ifndef DHS_CORE_DRES_H
#define DHS_CORE_DRES_H

#include "core/internal.h"

/* device bytes of the resolver state for arch/config (0 in host mode) */
uint64_t dres_state_bytes(const dhs_arch *a, const dhs_config *c, int64_t stage_rows);
/* dhs_ctx_create: allocates and initialises everything; ctx->dres set */
dhs_status dres_create(dhs_ctx *ctx);
void dres_destroy(dhs_ctx *ctx);
/* request open/close: resets the slot's hot state on the device */
dhs_status dres_request_reset(dhs_ctx *ctx, int32_t slot);
/* end of dhs_round_begin (round fields set, tail rooms made): publishes the
   round descriptor and the round's dirty requests' tables; on failure the
   round is not opened (in_round flags undone) */
dhs_status dres_round_begin(dhs_ctx *ctx);
/* end of a successful dhs_request_import: publishes the request's tables
   when no round is open (else dres_round_begin does) */
void dres_publish_request(dhs_ctx *ctx, int32_t slot);
/* tests: the publish list takes at most cap pieces (cap > 0, up to its capacity; 0 leaves it) before it
   is issued and waited for, so that path runs without thousands of changed tables; returns how many
   lists were issued full so far (-1: host resolver) */
int64_t dres_set_publish_cap(dhs_ctx *ctx, int32_t cap);
/* dhs_resolve after host validation */
dhs_status dres_resolve_items(dhs_ctx *ctx, int32_t g, int32_t k, int32_t n_items, const dhs_resolve_item *items);
dhs_status dres_group_done(dhs_ctx *ctx, int32_t g);
/* dhs_round_may_miss's answer for an open round (group -1: any group; checked by the caller) */
int dres_may_miss(const dhs_ctx *ctx, int32_t group);
/* dhs_round_tail_locations_device after its checks: one launch on the compute stream (the round
   descriptor's first rows and the published tail pages); DHS_ERR_UNSUPPORTED when the backend lacks it */
dhs_status dres_tail_locations(dhs_ctx *ctx, int32_t req_stride, int64_t src_stride, int32_t *loc);
/* dhs_round_page_tables_device after its checks: one launch on the compute stream */
dhs_status dres_page_tables(dhs_ctx *ctx, int32_t page_stride, int64_t src_stride, int32_t *tab);
/* dhs_round_end after its argument checks: promotion, the one sync, error word; wait 0
   (dhs_round_end_early): a fence before the promotion, queued for dres_settle, and the word left to it */
dhs_status dres_round_end(dhs_ctx *ctx, int wait);
/* before a round begins: after early round ends, no wait for their steps: the fence after the last
   round begin's publishes, the word read once an early-ended round's fence completed (the oldest
   waited for when two are queued); full (dhs_sync): the compute stream. Then the error word's status
   (cleared), as dhs_round_end reports it, once every early-ended round's word was read */
dhs_status dres_settle(dhs_ctx *ctx, int full);
/* joins every split resolve's copy queue into the compute stream (round end, context destruction) */
dhs_status dres_join_all(dhs_ctx *ctx);
dhs_status dres_add_stats(const dhs_ctx *ctx, dhs_stats *out);
dhs_status dres_reset_stats(dhs_ctx *ctx);
/* dhs_check_invariants: violations found (first described in msg if msg) */
int dres_check(const dhs_ctx *ctx, char *msg, size_t msg_len);

#endif
