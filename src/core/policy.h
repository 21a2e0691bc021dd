/* policy.h - hot-cache replacement policies behind one interface.
 *
 * A policy orders the occupied slots of one hot cache (B slots). The core
 * keeps free slots itself and asks for a victim only when none is free.
 * Every call is O(1) or O(log B); victim() skips slots protected in the
 * current round (prot[slot] == epoch) and returns -1 when every occupied slot
 * is protected. Contract of the caller (the core keeps it): within one epoch
 * protection only grows, and a victim returned is evicted (remove + insert)
 * before the next victim() call of that epoch or asked for again unchanged;
 * so FIFO and LFU may skip, for the rest of the epoch, the protected slots a
 * scan already passed (amortised O(1) / O(log B) per miss). A call that finds
 * no victim forgets that state. `key` is the policy's extra input: ignored by LRU/CLOCK/FIFO,
 * the access time for LFU ties, the next-use time for OPT (simulator oracle).
 */
#ifndef DHS_CORE_POLICY_H
#define DHS_CORE_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "dhs.h"

typedef struct dhs_policy_ops {
    const char *name;
    size_t (*state_bytes)(int32_t B);
    void (*init)(void *st, int32_t B);
    void (*insert)(void *st, int32_t slot, uint64_t key); /* slot newly filled */
    void (*touch)(void *st, int32_t slot, uint64_t key);  /* hit on an occupied slot */
    void (*remove)(void *st, int32_t slot);               /* slot emptied */
    int32_t (*victim)(void *st, const uint32_t *prot, uint32_t epoch);
    /* optional: the `key` of an insert or touch of `row` by (request slot,
       group), given the user pointer of dhs_ctx_set_policy_ops; NULL: the
       context's access clock. The offline OPT policy of the simulator
       (sim/policy_opt.c) answers the row's next use from its oracle here. */
    uint64_t (*key)(void *user, uint32_t req_id, int32_t group, int64_t row);
} dhs_policy_ops;

/* DHS_POLICY_OPT is simulator-only: it needs a next-use oracle (key). */
#define DHS_POLICY_OPT ((dhs_policy)DHS_POLICY_COUNT_)
const dhs_policy_ops *dhs_policy_get(dhs_policy p);

typedef struct dhs_ctx dhs_ctx;
/* Replaces the context's policy with `ops` (kept by pointer: it and `user`
   must outlive the context), before any request is open (DHS_ERR_STATE
   after). This is how a policy the public enum lacks plugs in: the
   simulator's OPT and its recording LRU, a test's counting wrapper. */
dhs_status dhs_ctx_set_policy_ops(dhs_ctx *ctx, const dhs_policy_ops *ops, void *user);

#endif
