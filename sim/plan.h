/*
 * plan.h - the memory planner behind `dhs plan` (DESIGN §6, §8; docs/PLAN.md).
 *
 * Given a model's KV layout (sources, groups, index keys), a context length,
 * hot-cache and tail sizes and drafter parameters, it computes the GPU bytes
 * one session needs when every history row stays on the GPU ("resident") and
 * when history lives on host behind a bounded hot cache ("hierarchical"),
 * the per-GPU draft ring and staging totals, sessions per GPU for an HBM
 * budget, and the pinned host memory per session.
 *
 * Struct in, struct out: nothing here prints or exits. Errors come back as a
 * dhs_status plus a one-line message in a caller buffer.
 *
 * Conventions (all figures in bytes; GiB = 2^30 bytes):
 *   - a group g has n_sources payload sources of row_bytes each (possibly
 *     different), all with m_g positions per row, and (optionally) one
 *     index-key store of index_key_bytes per row at the same m_g;
 *   - rows_g(L) = pr(ceil(L / m_g)) with pr(x) = p * ceil(x / p): history is
 *     counted in whole pages of p rows (the seed's 4.444 GiB needs this);
 *   - resident = Σ_g rows_g·(Σ_src row_bytes + index_key_bytes) + window
 *                (+ draft ring with a drafter);
 *   - hierarchical = index keys + B·Σ row_bytes + T·Σ row_bytes + window
 *                + metadata + draft ring + staging share;
 *   - staging share = χ·K_max·k·max(row_bytes), only when K_max·k > B
 *     (the union of one round's selections can overflow the hot cache).
 *
 * Example:
 *   dhs_plan_arch a; char err[256];
 *   dhs_plan_preset("glm-5.3", &a, err, sizeof err);
 *   dhs_plan_params p = dhs_plan_params_default();
 *   p.context = 100000;
 *   dhs_plan_result r;
 *   if (dhs_plan_compute(&a, &p, &r, err, sizeof err) == DHS_OK)
 *       use dhs_plan_gib(r.resident_total), r.sessions_hier, ...
 */
#ifndef DHS_PLAN_PLAN_H
#define DHS_PLAN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "dhs_plan.h"
#include "dhs.h"

#define DHS_PLAN_MAX_GROUPS 1024
#define DHS_PLAN_MAX_SOURCES_PER_GROUP 1024
#define DHS_PLAN_MAX_ROW_BYTES (1u << 20)
#define DHS_PLAN_MAX_CONTEXT ((int64_t)1 << 40)
#define DHS_PLAN_NAME_LEN 64

/* ------------------------------------------------------------ architecture */
typedef struct dhs_plan_group {
    int32_t n_sources;          /* payload sources sharing this group's selection (>= 1) */
    int32_t m;                  /* token positions per row (>= 1) */
    uint64_t sum_row_bytes;     /* Σ row_bytes over the group's sources */
    uint32_t max_row_bytes;     /* largest row of the group (staging arena row) */
    uint32_t index_key_bytes;   /* d_idx of the group's index-key store, 0 = none */
    int32_t producers;          /* layers running the indexer over this group (informational) */
} dhs_plan_group;

typedef struct dhs_plan_arch {
    char name[DHS_PLAN_NAME_LEN];
    int32_t n_groups;
    dhs_plan_group groups[DHS_PLAN_MAX_GROUPS];
    int32_t k;                  /* default selection length (index_topk) */
    int32_t live_sources;       /* default χ: payload sources live at once (0 = largest group) */
    int32_t window_rows;        /* sliding-window rows per layer kept on device (0 = none) */
    int32_t window_layers;      /* layers that keep such a window */
    uint32_t window_row_bytes;
    /* consumer kinds, informational (layers by DESIGN §1 kind) */
    int32_t n_own, n_follow, n_reuse, n_reindex;
} dhs_plan_arch;

/* Built-in presets: "deepseek-v3.2", "glm-5.2", "glm-5.3", "deepseek-v4.1-flash".
   Each is an embedded JSON text in the custom-arch schema (dhs_plan_preset_json). */
dhs_status dhs_plan_preset(const char *name, dhs_plan_arch *out, char *err, size_t errlen);
const char *dhs_plan_preset_json(const char *name); /* NULL when unknown */
int dhs_plan_preset_count(void);
const char *dhs_plan_preset_name(int i);             /* NULL when out of range */

/* Parse the custom-arch JSON schema (docs/PLAN.md). Unknown keys, non-integral
   or negative numbers and inconsistent fields are errors. */
dhs_status dhs_plan_arch_from_json(const char *text, dhs_plan_arch *out, char *err, size_t errlen);
/* Read a file and parse it as above (missing/unreadable file is an error). */
dhs_status dhs_plan_arch_load(const char *path, dhs_plan_arch *out, char *err, size_t errlen);

/* Totals over groups. */
int32_t dhs_plan_arch_sources(const dhs_plan_arch *a);
int32_t dhs_plan_arch_producers(const dhs_plan_arch *a);
int32_t dhs_plan_arch_index_stores(const dhs_plan_arch *a);
int32_t dhs_plan_arch_max_group_sources(const dhs_plan_arch *a);

/* ------------------------------------------------------------ parameters */
typedef struct dhs_plan_params {
    int64_t context;           /* L: positions per session (>= 1) */
    int32_t page_rows;         /* p (>= 1) */
    int32_t hot_rows;          /* B per request and group; -1 = 2·k; rounded up to p */
    int32_t tail_rows;         /* T per request and source; -1 = p; rounded up to p; >= k_max */
    int32_t k;                 /* selection length; -1 = arch default */
    int32_t k_max;             /* queries per request per round (1 = no speculation) */
    int32_t slots;             /* N request slots per GPU: sizes the ring/staging totals */
    int32_t live_sources;      /* χ; -1 = arch default; 1..sources */
    int64_t drafter_window;    /* W; the ring exists when W > 0 or draft_row_bytes > 0 */
    uint64_t draft_row_bytes;  /* drafter KV bytes per ring row, all draft layers */
    double hbm_gib;            /* HBM per GPU */
    double weights_gib;        /* weights (and activations) per GPU */
    double extra_gib;          /* other fixed per-GPU allocations (drafter weights, runtime) */
    double host_gib;           /* host memory for KV backing; 0 = not given */
} dhs_plan_params;

dhs_plan_params dhs_plan_params_default(void);

/* ------------------------------------------------------------ result */
typedef struct dhs_plan_result {
    /* effective inputs (defaults resolved, sizes page-rounded) */
    int64_t context;
    int32_t page_rows, hot_rows, tail_rows, k, k_max, slots, live_sources;
    int64_t drafter_window;
    uint64_t draft_row_bytes;
    int has_drafter;           /* ring present */
    int staging_needed;        /* K_max·k > B */

    /* per session, resident serving */
    uint64_t res_payload;      /* Σ_g rows_g·Σ row_bytes */
    uint64_t res_index;        /* Σ_g rows_g·index_key_bytes */
    uint64_t res_window;
    uint64_t res_ring;
    uint64_t resident_total;

    /* per session, hierarchical serving */
    uint64_t index_keys;       /* = res_index */
    uint64_t hot;              /* B·Σ row_bytes */
    uint64_t tail;             /* T·Σ row_bytes */
    uint64_t window;
    uint64_t meta_reverse;     /* int32 slot_of per history row per group + host-valid bitmap */
    uint64_t meta_slots;       /* per hot slot per group: row_of int64, prot, fill, policy links */
    uint64_t meta_pages;       /* optional-page state/map, hot and tail page lists */
    uint64_t metadata;         /* sum of the three */
    uint64_t ring;             /* R_d·draft_row_bytes (one slot) */
    uint64_t staging;          /* χ·K_max·k·max_row (one slot's share) */
    uint64_t hier_total;
    uint64_t hier_no_meta;     /* hier_total - metadata: comparable with the seed's figures */

    /* per GPU */
    int64_t ring_rows;         /* R_d */
    uint64_t ring_total;       /* N·R_d·draft_row_bytes (dhs_ring_bytes) */
    uint64_t staging_total;    /* χ·N·K_max·k·max_row (dhs_staging_bytes) */
    double free_gib;           /* hbm - weights - extra (may be <= 0) */
    int64_t sessions_resident; /* floor(free / resident_total) */
    int64_t sessions_hier;     /* floor(free / hier_total) */

    /* host */
    uint64_t host_per_session; /* Σ_g rows_g·Σ row_bytes (pinned backing) */
    int64_t sessions_host;     /* floor(host_gib / host_per_session), -1 when host_gib = 0 */
} dhs_plan_result;

/* Computes the plan. DHS_ERR_INVALID_ARG with a message on bad input or
   arithmetic overflow; *out is then unspecified. */
dhs_status dhs_plan_compute(const dhs_plan_arch *a, const dhs_plan_params *p, dhs_plan_result *out,
                            char *err, size_t errlen);

double dhs_plan_gib(uint64_t bytes);

#endif
