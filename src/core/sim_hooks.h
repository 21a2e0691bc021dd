/* sim_hooks.h - private hooks for the simulator (not part of the public API). */
#ifndef DHS_CORE_SIM_HOOKS_H
#define DHS_CORE_SIM_HOOKS_H

#include "dhs.h"

/* Next-use oracle for the offline OPT (Belady) policy: returns the logical
   time of the next access of `row` by (request id, group) after now, or
   UINT64_MAX when it is never used again. Called on every hot-cache insert and
   touch when set; its value is the policy's `key`. */
typedef uint64_t (*dhs_next_use_fn)(void *user, uint32_t req_id, int32_t group, int64_t row);
void dhs_ctx_set_next_use(dhs_ctx *ctx, dhs_next_use_fn fn, void *user);
/* Selects the policy by ops directly (used for OPT, which dhs_policy lacks). */
dhs_status dhs_ctx_set_policy_ops(dhs_ctx *ctx, const void *policy_ops);

#endif
