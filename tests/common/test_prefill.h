/* test_prefill.h - shared by the streamed-prefill tests (test_lsprefill,
 * test_lsprefill_cuda, test_gpu_engine): a prompt from a seed, and whether two
 * prefills hold the same history, index keys and logits byte for byte. */
#ifndef DHS_TEST_PREFILL_H
#define DHS_TEST_PREFILL_H

#include <stdint.h>
#include <string.h>

#include "model/model.h"

/* n tokens in [0, V), a pure function of seed */
static inline void th_tokens(uint64_t seed, int32_t V, int64_t n, int32_t *tok)
{
    for (int64_t t = 0; t < n; t++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        tok[t] = (int32_t)((seed >> 33) % (uint64_t)V);
    }
}

static inline int th_keys_equal(const dhs_ref_keys *a, const dhs_ref_keys *b)
{
    if (a->cap != b->cap || a->dim != b->dim || a->fp8 != b->fp8) return 0;
    size_t n = (size_t)a->cap * (size_t)a->dim;
    if (a->fp8) return !memcmp(a->codes, b->codes, n) && !memcmp(a->scales, b->scales, sizeof(float) * (size_t)a->cap);
    return !memcmp(a->data, b->data, sizeof(float) * n);
}

/* what differs between prefills a and b of model m: NULL when nothing; else
   "rows", "keys" or "logits", and *layer the first layer (rows) or group
   (keys) that differs */
static inline const char *th_prefill_diff(const dhs_ref_model *m, const dhs_ref_prefill *a, const dhs_ref_prefill *b,
                                          int32_t *layer)
{
    *layer = -1;
    if (a->n != b->n) return "positions";
    for (int32_t l = 0; l < dhs_ref_model_cfg(m)->n_layers; l++)
        if (memcmp(a->rows[l], b->rows[l], (size_t)a->n * DHS_REF_ROW_BYTES)) {
            *layer = l;
            return "rows";
        }
    for (int32_t g = 0; g < dhs_ref_n_groups(m); g++)
        if (!th_keys_equal(&a->keys[g], &b->keys[g])) {
            *layer = g;
            return "keys";
        }
    if (memcmp(a->logits, b->logits, sizeof(float) * (size_t)dhs_ref_model_cfg(m)->vocab)) return "logits";
    return NULL;
}

#endif
