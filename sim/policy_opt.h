/* policy_opt.h - offline Belady (OPT) replacement for the simulator.
 *
 * OPT evicts the unprotected slot whose `key` is largest: the key is the
 * logical time of the row's next access as a next-use oracle reports it
 * through the ops' `key` function (src/core/policy.h), UINT64_MAX when it is
 * never used again. Install a copy with the oracle as its key:
 *
 *   dhs_policy_ops ops = *dhs_policy_opt();
 *   ops.key = oracle;                               // (user, req, group, row) -> next use
 *   dhs_ctx_set_policy_ops(ctx, &ops, user);        // before any request opens; ops outlives ctx
 *
 * Cost: insert / touch / remove O(1) (they only record the key: a selected
 * slot is protected for its round); victim() O(1) for a candidate never used
 * again, else O(log B) per slot it looks at, plus re-entering the previous
 * round's selected slots into a max-heap (lazy deletion, amortised O(1)
 * compaction). See policy_opt.c.
 *
 * Keys from the oracle must be >= DHS_OPT_KEY_BASE (the core asks `key` on
 * every insert, touch and staging promotion). Without a key function every
 * key is the core's access clock and OPT degenerates to MRU.
 */
#ifndef DHS_CORE_POLICY_OPT_H
#define DHS_CORE_POLICY_OPT_H

#include <stdint.h>

#include "core/policy.h"

#define DHS_OPT_KEY_BASE ((uint64_t)1 << 62) /* oracle keys are >= this */
#define DHS_OPT_KEY_NEVER UINT64_MAX         /* never used again */

const dhs_policy_ops *dhs_policy_opt(void);

#endif
