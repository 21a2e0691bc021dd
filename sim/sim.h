/*
 * sim.h - trace replay through the real core (`dhs sim`, docs/SIM.md).
 *
 * A selection trace (docs/TRACE.md) is replayed through a dhs_ctx on a
 * payload-free CPU backend (dhs_cpu_options.payload_free: no bytes move, every decision and
 * census is the core's own) for one replacement policy and one hot-cache size
 * B at a time:
 *   START(r, P)  -> dhs_request_open(final positions of r) and
 *                   dhs_request_import(P positions, rows NULL, cfg.import_flags)
 *   ROUND        -> dhs_round_begin(requests, K_r); dhs_write_rows of each
 *                   request's block rows for every source (data NULL);
 *                   per group, in order: dhs_resolve with the recorded
 *                   selections, then dhs_group_done (staged rows promoted,
 *                   the group's staging arenas free for the next group);
 *                   dhs_round_end(recorded A_r)
 *   END(r)       -> dhs_request_close
 * The context is sized from a first scan of the trace (dhs_sim_scan): request
 * slots = most requests live at once, max_k = largest k, k_max = the header's,
 * max_rows = the longest request; the device pool holds the staging arenas,
 * every slot's required allocations (hot caches + tails) and `opt_fit` times
 * the largest optional history ever live at once (0 by default: at steady
 * state optional history does not fit and the hot cache decides).
 *
 * OPT (offline Belady, sim/policy_opt.h) needs each row's next use: a
 * pass over the trace (dhs_sim_oracle_build) numbers the references — per
 * round, request and group, each distinct selected row once, in entry order —
 * and stores for every reference the number of the same (request, group,
 * row)'s next reference. For each configuration dhs_sim_replay first replays
 * with LRU and a recording callback to learn which references reach the hot
 * cache (the others are served from the tail or ready optional pages; which
 * ones does not depend on the policy), and keys every reference by its row's
 * next hot-path reference. The OPT replay walks each round the same way
 * before resolving, leaving per (request, group, row) the key of its current
 * reference, and the core's next-use oracle returns it: O(1) per call, valid
 * for any order and number of oracle calls within the round.
 *
 * Example:
 *   dhs_sim_trace_info info; char err[256];
 *   if (dhs_sim_scan("t.dtr", &info, err, sizeof err)) { puts(err); ... }
 *   dhs_sim_config c = dhs_sim_config_default(); c.hot_rows = 4096;
 *   dhs_sim_oracle *o = NULL; dhs_sim_oracle_build("t.dtr", &info, &o, err, sizeof err);
 *   dhs_sim_result r;
 *   dhs_sim_replay("t.dtr", &info, &c, DHS_SIM_OPT, o, &r, err, sizeof err);
 *   ... r.st.host_rows_copied ...
 *   dhs_sim_oracle_free(o); dhs_sim_trace_info_free(&info);
 *
 * Nothing here prints (except dhs_sim_progress callbacks the caller installs).
 */
#ifndef DHS_SIM_SIM_H
#define DHS_SIM_SIM_H

#include <stdint.h>
#include <stdio.h>

#include "dhs.h"
#include "sim/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* policies of the replay: dhs_policy values, plus OPT */
#define DHS_SIM_OPT ((int)DHS_POLICY_COUNT_)
#define DHS_SIM_POLICIES (DHS_SIM_OPT + 1)
const char *dhs_sim_policy_str(int policy);        /* "lru", ..., "opt" */
int dhs_sim_policy_parse(const char *s, int *out); /* 0 on success */

/* ------------------------------------------------------------- scan */
typedef struct dhs_sim_trace_info {
    dhs_trace_header hdr;
    int32_t n_requests;        /* declared */
    int32_t peak_live;         /* most requests between START and END at once */
    int32_t max_k;             /* largest k over groups */
    int64_t max_positions;     /* largest n_r + K_r or prefix over requests */
    int64_t *final_positions;  /* [n_requests] largest n_r + K_r (or prefix) of each request, 0 if absent */
    int64_t *prefix;           /* [n_requests] imported positions */
    int32_t *lifecycle;        /* [n_life] +1 + id: START, -(1 + id): END, in trace order */
    int64_t n_life;
    uint64_t rounds, items, queries, entries, selected_entries;
    uint64_t tokens;           /* sum over items of A_r + 1 (committed positions) */
    double scan_s;
} dhs_sim_trace_info;

/* Reads and validates the whole trace. 0 on success, else -1 with err set. */
int dhs_sim_scan(const char *path, dhs_sim_trace_info *info, char *err, size_t err_len);
void dhs_sim_trace_info_free(dhs_sim_trace_info *info);
/* Largest sum over live requests of their optional-eligible pages (complete
   pages of imported rows, all sources) at page size page_rows. */
int64_t dhs_sim_peak_opt_pages(const dhs_sim_trace_info *info, int32_t page_rows);

/* ------------------------------------------------------------- OPT oracle */
typedef struct dhs_sim_oracle dhs_sim_oracle;
/* Pass over the trace numbering references (see above). 0 or -1 with err. */
int dhs_sim_oracle_build(const char *path, const dhs_sim_trace_info *info, dhs_sim_oracle **out, char *err,
                         size_t err_len);
uint64_t dhs_sim_oracle_refs(const dhs_sim_oracle *o);  /* references numbered */
uint64_t dhs_sim_oracle_bytes(const dhs_sim_oracle *o); /* memory held */
double dhs_sim_oracle_build_s(const dhs_sim_oracle *o);
void dhs_sim_oracle_free(dhs_sim_oracle *o);

/* ------------------------------------------------------------- replay */
typedef struct dhs_sim_config {
    int32_t hot_rows;          /* B (multiple of page_rows) */
    int32_t group_hot_rows[DHS_MAX_SOURCES]; /* per trace group: 0 = hot_rows, else that group's B
                                  (a multiple of page_rows; dhs_config.group_hot_rows); all 0 by default */
    int32_t page_rows;         /* p (64) */
    int32_t tail_rows;         /* 0 = max(128, 2 k_max) rounded up to pages */
    double opt_fit;            /* device pool beyond required allocations, as a share of the
                                  largest optional history live at once (0) */
    uint64_t device_bytes;     /* nonzero: pool size M, overrides opt_fit */
    unsigned import_flags;     /* DHS_IMPORT_DEVICE (prefill output on the device) */
    dhs_reclaim_order reclaim_order;
    int32_t repop_pages;       /* 64 */
    int payload;               /* 0 payload-free (default); 1 move real bytes (tests) */
    int check_invariants;      /* run dhs_check_invariants after every event (slow) */
    /* optional: called every 1024 rounds of a replay with the rounds done
       and the trace's rounds (the tool prints progress from it) */
    void (*progress)(void *user, uint64_t rounds_done, uint64_t rounds_total);
    void *progress_user;
} dhs_sim_config;

dhs_sim_config dhs_sim_config_default(void);

typedef struct dhs_sim_result {
    int policy;
    int32_t hot_rows;
    int per_group;             /* 1: the run had per-group sizes (cfg.group_hot_rows) */
    double hit_rate;           /* census hot / (census hot + census host) = 1 - miss_ratio */
    dhs_stats st;              /* the core's counters over the whole replay */
    uint64_t device_bytes;     /* pool M the context had */
    uint64_t selected_entries; /* non-padding entries resolved */
    uint64_t tokens;           /* committed positions generated (sum of A_r + 1) */
    uint64_t host_rows;        /* rows recovered from host (distinct misses) */
    uint64_t host_bytes;       /* host_rows times the group's source row bytes (all sources) */
    double host_rows_per_token;
    double miss_ratio;         /* census host / (census hot + census host): hot-path entries from host */
    double direct_share, hot_share, host_share; /* of all entries */
    double replay_s;           /* wall seconds of the replay (reader + core + oracle walk) */
    double mentries_per_s;     /* selected_entries / replay_s / 1e6 */
    uint64_t invariant_violations;
    /* memory: the core's host bytes (per-request metadata, staging, ...)
       and requests open at most at once, sampled after each START; the
       replay's own per-request arrays (OPT: one entry per row a live request
       can select) at most at once. All follow the live requests, not the
       trace's. */
    uint64_t peak_host_bytes;
    int32_t peak_open_requests;
    uint64_t peak_request_bytes;
    /* OPT only */
    double opt_record_s;                 /* the recording replay that finds the hot-path references */
    uint64_t opt_refs, opt_hot_refs;     /* references numbered; those that reached the hot cache */
    uint64_t oracle_calls, oracle_stale; /* stale: asked about a row not referenced this round */
    uint64_t opt_fallback_unknown;       /* inexact keys: the OPT replay's hot-path entries differing
                                            from the recording replay's */
} dhs_sim_result;

/* Replays the trace with `policy` (OPT needs `oracle`). 0 on success, else -1
   with err set (trace error, a core call failing, an admission that waited). */
int dhs_sim_replay(const char *path, const dhs_sim_trace_info *info, const dhs_sim_config *cfg, int policy,
                   const dhs_sim_oracle *oracle, dhs_sim_result *res, char *err, size_t err_len);

/* The pool size dhs_sim_replay uses for cfg (bytes); 0 with err on failure. */
/* Policy against capacity (DESIGN §7) at one hot-cache size B: what the best
   online policy and OPT cut from LRU's host rows, and what doubling B cuts
   from LRU's. Fields are -1 where the runs needed are missing. */
typedef struct dhs_sim_pvc {
    int32_t hot_rows;
    uint64_t lru_host_rows;
    int best_online;              /* policy with the fewest host rows, OPT excluded */
    double best_online_cut_vs_lru;
    double opt_cut_vs_lru;        /* -1: no OPT run at B */
    double lru_cut_by_doubling;   /* -1: no LRU run at 2B */
} dhs_sim_pvc;
/* 0 and *out filled when res holds an LRU run at B, else -1. */
int dhs_sim_policy_vs_capacity(const dhs_sim_result *res, int n_res, int32_t hot_rows, dhs_sim_pvc *out);
/* The run of `policy` at `hot_rows` (uniform, not per-group) in res, or NULL. */
const dhs_sim_result *dhs_sim_find(const dhs_sim_result *res, int n_res, int policy, int32_t hot_rows);

/* The hot-cache rows a replay gives the core: B, or, when the pool is
   derived (device_bytes 0) and no request of the trace can hold B rows, the
   largest request's rows rounded up to pages (same decisions, less state).
   dhs_sim_effective_hot_rows: the same for any B (a per-group size). */
int32_t dhs_sim_effective_hot(const dhs_sim_trace_info *info, const dhs_sim_config *cfg);
int32_t dhs_sim_effective_hot_rows(const dhs_sim_trace_info *info, const dhs_sim_config *cfg, int32_t B);

uint64_t dhs_sim_device_bytes(const dhs_sim_trace_info *info, const dhs_sim_config *cfg, char *err, size_t err_len);

/* ------------------------------------------------------------- plots */
typedef struct dhs_plot_series {
    const char *name;
    int n;
    const double *x, *y;
} dhs_plot_series;

/* Writes a line chart as a standalone SVG (no external tool). log2x: x axis
   in log2 scale. 0 on success, -1 when the file cannot be written. */
int dhs_plot_svg(const char *path, const char *title, const char *xlabel, const char *ylabel,
                 const dhs_plot_series *series, int n_series, int log2x);

#ifdef __cplusplus
}
#endif
#endif
