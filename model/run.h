/*
 * run.h - the serving driver of the reference model (what `dhs run` and the
 * tests run): sessions arrive over the run, are admitted through
 * dhs_request_open (which may answer DHS_WAIT), prefill once (in parallel
 * threads; the prefill is a pure function of the seed), decode `tokens` tokens
 * with rounds of up to `spec` queries and finish. In the compare mode a
 * resident engine runs the same schedule next to the hierarchical one and
 * every round's logits are compared with memcmp, and every emitted token.
 *
 * Schedule: session i arrives at round i*arrival with a prompt of
 * context - (13 i mod 32) positions (context > 64; else context), so page and
 * compressed-row boundaries differ between sessions. Admission is in arrival
 * order; a DHS_WAIT holds back later arrivals. A round batches every admitted
 * unfinished session with K_i = min(spec, tokens - generated_i).
 */
#ifndef DHS_REF_RUN_H
#define DHS_REF_RUN_H

#include <stdio.h>

#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;
struct dhs_locality_model;

typedef struct dhs_ref_progress {
    int64_t round;
    int32_t active, waiting, done, sessions;
    uint64_t tokens, logit_mismatches;
} dhs_ref_progress;

typedef struct dhs_ref_run_cfg {
    dhs_ref_cfg model;
    const char *geometry;    /* name of the model's KV geometry (trace header; NULL: "tiny") */
    int synthetic;           /* 1: prompts import a deterministic synthetic history
                                (dhs_ref_prefill_synthetic: the model computes only the last
                                prompt position), generated when the session is admitted;
                                0: the model prefills every prompt up front */
    int32_t sessions;
    int64_t context;
    int32_t tokens;          /* generated per session, the first (from the prefill) included */
    int32_t spec;            /* K_max */
    int compare;             /* 1: resident and hierarchical side by side */
    int hier;                /* without compare: 1 hierarchical, 0 resident */
    dhs_policy policy;
    dhs_resolver resolver;   /* library resolver (host | device: CLOCK epochs, policy ignored) */
    dhs_ref_verify verify;
    float temperature;
    uint64_t seed;           /* prompts, sampling, CPU backend completion order */
    int32_t slots;           /* request slots (0: sessions/2, at least 1); resident only (no
                                compare): at most this many sessions active at once */
    double history;          /* device budget holds this many sessions' imported history */
    uint64_t device_bytes;   /* 0: derived (dhs_ref_hier_config) */
    int32_t page_rows;
    int32_t arrival;         /* rounds between arrivals */
    int32_t async_delay;     /* CPU backend: side copies complete this many rounds late (random order) */
    int cuda;                /* 1: the CUDA backend (device 0); located rows are read with
                                dhs_read_location. 0: the CPU backend */
    int fetch_rows;          /* CPU backend: read located rows with dhs_read_location too */
    int gpu_model;           /* 1: the target pass of both engines runs on the GPU (model/gpu.h;
                                m = 1 sources; the hierarchy must then be on the GPU too: cuda);
                                0: the model computes on the CPU (with cuda it reads located
                                rows back with dhs_read_location) */
    int step;                /* GPU model's target pass: DHS_REF_STEP_HOST | _DEVICE | _GRAPH
                                (docs/MODEL.md "Device step"); not host: needs gpu_model and m = 1
                                sources, the hierarchy then uses the device resolver (resolver is
                                overridden), both engines take the step, no trace */
    int32_t copy_queue_blocks; /* cuda: dhs_cuda_set_copy_queue_blocks (0: the default) */
    uint64_t host_cache_bytes; /* the hierarchy's dhs_config.host_cache_bytes: closed sessions' host rows
                                  reused by later imports (0: off) */
    int host_cache_fill;     /* 1: at the hierarchy's creation, dhs_host_cache_fill pins one span per
                                source of every request slot, each the rows of the longest session, so
                                that imports copy into pinned memory (t_host_fill; host_cache_bytes 0 is
                                then raised to what the spans take) */
    int import_mode;         /* hierarchical: DHS_REF_IMPORT_DEVICE (0, the default) | DHS_REF_IMPORT_HOST:
                                the flag every session's (and a shared prefix holder's) import passes;
                                the prefill's rows are in host memory either way (dhs_ref_engine_cfg.import_mode,
                                docs/SERVE.md "Imports") */
    int32_t repop_pages;     /* hierarchical: dhs_config.repop_pages, optional pages repopulated per round
                                (0: the library's default) */
    int copy_overlap;        /* device/graph step, hierarchical engine: the split resolve
                                (dhs_ref_engine_cfg.copy_overlap; docs/MODEL.md "Device step") */
    int direct_resolve;      /* device/graph step, hierarchical engine: DHS_RESOLVE_DIRECT in rounds that
                                cannot miss (dhs_ref_engine_cfg.direct_resolve) */
    int page_tables;         /* with direct_resolve: such rounds located through page tables in the top-k
                                (dhs_ref_engine_cfg.page_tables: used where the step can); 1 by
                                default */
    int decoded_optional;    /* hierarchical: dhs_config.decoded_optional (decoded pages that left the tail
                                ring join the optional history) */
    int tail_host;           /* device/graph step, hierarchical engine: 1 = the round's tail locations
                                written by the host and uploaded (dhs_ref_engine_cfg.tail_host); 0: by the
                                device */
    int end_early;           /* hierarchical engine: width-1 rounds end with dhs_round_end_early while the
                                step runs; 2: and the next round is opened there when it is known
                                (dhs_ref_engine_cfg.end_early, dhs_ref_engine_next) */
    const struct dhs_deploy *deploy; /* device/graph step: a real deployment's weight reads in both
                                engines' steps (dhs_ref_engine_cfg.deploy, model/deploy.h); NULL: none */
    int topk_impl;           /* both engines' decode top-k: DHS_REF_TOPK_MODEL | _FUSED (the
                                library's fused top-k, docs/MODEL.md "Top-k"; any backend and step)
                                | _SPLIT (the same; its many-blocks form on the GPU) */
    int32_t threads;         /* prefill threads (0: 1) */
    int32_t prefill_buffers; /* 0: the model's full-residency prefill (dhs_ref_prefill_run); R >= 2:
                                layer-streamed through R layer buffers, byte-identical to it
                                (model/lsprefill.h; docs/FLASHOFFLOAD.md section 2): on the GPU model
                                (gpu_model) dhs_ref_prefill_streamed_gpu, one prompt at a time; else
                                the CPU reference dhs_ref_prefill_streamed. Not with synthetic */
    int64_t prefill_chunk;   /* the streamed prefill's chunk (positions per compute; 0: 2048) */
    int32_t synth_parallel;  /* synthetic histories (geometry runs): up to this many sessions admitted
                                in one round are generated at once, each then started in arrival
                                order (0 or 1: one at a time, open-generate-start per session); every
                                one in flight holds its whole history in host memory */
    int import_twice;        /* synthetic histories into the hierarchy alone (no resident engine, no
                                --check shadow, no shared prefix): 0 (default): generated straight into
                                the request's host rows (dhs_request_import_begin with
                                DHS_IMPORT_DEVICE, then commit), so the history's bytes exist once;
                                1: into the prefill's own buffers, then dhs_request_import (twice
                                while importing) */
    int32_t profile_every;   /* device step: every this many rounds one round runs eagerly with
                                events between its phases (result prof_*); 0: never */
    int keep_round_times;    /* 1: result round_t, one entry per decode round (profiled
                                rounds left out: they run eagerly with events) */
    int64_t shared_prefix;   /* every session's prompt begins with the same shared_prefix positions (0:
                                none): the same tokens (synthetic: the same history stream there) */
    int share_private;       /* with shared_prefix: 0 the hierarchy holds the prefix once (a holder
                                request prefilled with it; sessions open with dhs_request_open_shared
                                and import only their own rows; the holder closes once every session
                                was admitted); 1 every session imports its whole prompt (private
                                copies: the same tokens, for comparing) */
    int spec_auto;           /* 1: each round's K_r per session from dhs_spec_auto_choose_round (model/run.c:
                                acceptance observed per session, the round's time fitted against its
                                queries, host rows and copy time fed back), at most spec and the tokens
                                left; 0: K_r = min(spec, tokens left) */
    double accept_lo, accept_hi; /* the acceptance model (greedy only; docs/SERVE.md "Acceptance"): with
                                accept_hi >= 0 and oracle, session i's drafts propose its oracle token
                                with probability a_i, uniform in [accept_lo, accept_hi] from (seed, i);
                                accept_hi < 0: the drafter's own proposals */
    const int32_t *const *oracle; /* [sessions]: each session's token stream from an earlier run (by position;
                                NULL entries: none), oracle_n its length (dhs_ref_engine_cfg.oracle) */
    const int64_t *oracle_n;
    int keep_tokens;         /* 1: result tok_seq/tok_len, every session's tokens (prompt included) */
    int check;               /* dhs_check_invariants after every round, and every located row
                                checked against the model's own copy (shadow) */
    const struct dhs_locality_model *locality; /* NULL (or n_layers 0): the model's own indexer
                                queries. Else the locality device (model.h dhs_ref_iq_synth, a
                                benchmark device): every producer layer l's query is synthetic,
                                calibrated at start so that the top-k's consecutive-step overlap is
                                dhs_locality_alpha(locality, l, prompt of session 0, k); the result's
                                loc_* give target, calibration and measurement per layer */
    const int32_t *group_hot_rows; /* NULL: one hot-cache size (2 topk) for every group; else n_group_hot
                                entries, one per group of the model, each a multiple of page_rows
                                (dhs_config.group_hot_rows; 0 = the default); the derived device budget
                                follows them */
    int32_t n_group_hot;
    const char *trace;       /* selection trace file or NULL */
    void (*progress)(void *user, const dhs_ref_progress *p);
    void *user;
} dhs_ref_run_cfg;

/* defaults: tiny model, 16 sessions x 4096, 64 tokens, spec 4, compare,
   LRU, greedy, slots 8, history 2, page 64, arrival 2, async delay 1 */
dhs_ref_run_cfg dhs_ref_run_cfg_default(void);

typedef struct dhs_ref_round_time {
    double s;                   /* wall time of the round */
    uint32_t tokens, sessions;  /* tokens it emitted, sessions in it */
} dhs_ref_round_time;

typedef struct dhs_ref_run_result {
    int identical;              /* compare mode: every logit row and token equal, every session done */
    uint64_t logit_mismatches;  /* query rows (K_i x V floats) whose bytes differ */
    uint64_t token_mismatches;
    uint64_t logit_rows_compared;
    uint64_t sessions_done, tokens, decode_tokens, rounds, max_active;
    uint64_t proposals, accepted;
    uint64_t invariant_violations;
    uint64_t shadow_mismatches;  /* check: located rows whose bytes differ from what the model wrote */
    double t_prefill, t_resident, t_hier, t_total; /* seconds (decode times: engine rounds only) */
    int64_t prefill_loads;          /* streamed prefill (prefill_buffers): layer loads over every prompt */
    uint64_t prefill_buffer_bytes;  /* ... its R buffers' rows (largest prompt) */
    uint64_t prefill_resident_bytes; /* ... every layer's rows at once (full residency, largest prompt) */
    double t_start;                     /* seconds in dhs_ref_engine_start (history imports) */
    double t_host_fill;                 /* seconds in dhs_host_cache_fill (host_cache_fill) */
    dhs_ref_import_times imp;           /* the hierarchical engine's session starts: dhs_request_import
                                           calls, bytes and seconds (only the library call), and the
                                           GPU setup (index keys) apart (resident engine: keys_s only,
                                           when the hierarchy does not run) */
    uint64_t opt_bytes_peak;            /* hierarchy: largest dhs_mem.optional_bytes after an admission or round */
    uint64_t opt_fill_rounds;           /* ... decode rounds (rounds, profiled ones included) run when
                                           optional_bytes last reached a new peak (0: at the imports, before
                                           any round) */
    int opt_filling_at_end;             /* 1: the run's last round still raised that peak (the optional
                                           pages were still being filled when the run ended) */
    uint64_t synthetic_positions;       /* history positions imported synthetic (all sessions) */
    int gpu_model;                      /* 1: the model computed on the GPU */
    int step;                           /* the target pass's step (DHS_REF_STEP_*) */
    int topk_impl;                      /* DHS_REF_TOPK_* of the run */
    dhs_ref_step_times step_res, step_hier; /* device step: host times of each engine */
    uint64_t tokens_digest;             /* FNV-1a over tokens_of (every session's tokens), to compare runs */
    uint64_t host_bytes_peak;           /* hierarchy: largest dhs_mem.host_bytes_allocated after a round or admission */
    uint64_t host_shared_peak;          /* ... largest host_bytes_shared */
    uint64_t sessions_peak;             /* ... most sessions admitted at once (the holder not counted) */
    uint64_t shared_opens;              /* sessions opened on the shared prefix */
    double prof_us[2][DHS_REF_PH_N];               /* profile_every: [resident, hierarchical] device us per phase
                                           (DHS_REF_PH_*, model/gpu.h), summed over prof_rounds */
    uint64_t prof_rounds[2];
    double prof_wall_s[2];
    dhs_ref_round_time *round_t;        /* keep_round_times: every decode round of the measured
                                           engine (hierarchical if it runs, else resident) */
    uint64_t n_round_s;
    dhs_config lib_cfg;         /* the library configuration used */
    dhs_stats st;               /* library statistics at the end */
    uint64_t hp_ns[DHS_HP_COUNT_], hp_calls[DHS_HP_COUNT_]; /* dhs_get_host_time over the hierarchical
                                           engine's rounds from its second on (the first follows the
                                           imports); zero without a hierarchy */
    dhs_mem mem;
    uint64_t bytes_resident_session;    /* at context + tokens positions */
    uint64_t bytes_hier_hot_tail;       /* library required allocations per request */
    uint64_t bytes_hier_staging_share;  /* staging arenas / slots */
    uint64_t bytes_keys_ring;           /* index keys + drafter ring per session */
    int64_t positions;                  /* context + tokens */
    uint64_t *tokens_of;                /* [sessions] hash of each session's tokens (FNV-1a) */
    int32_t **tok_seq;                  /* keep_tokens: [sessions] each session's tokens by position */
    int64_t *tok_len;
    int32_t tok_n;                      /* entries of tok_seq / tok_len */
    uint64_t queries, batch_items;      /* sum over decode rounds of K_r and of the sessions in them */
    int32_t k_lo, k_hi;                 /* smallest and largest K_r of a round (1 and spec without spec_auto) */
    double accept_model_mean;           /* the acceptance model: mean a_i over sessions (-1: no model) */
    /* locality device (cfg.locality): per layer (producers; others -1) the target overlap, the
       calibration's overlap at its chosen coefficients, and what the run measured on query 0 of
       the measured engine's selections (model/locmeter.h: alpha over loc_pairs consecutive-round
       pairs, the random k/V over them, the hit rate of an LRU of loc_lru_rows rows per session
       and group). The library's own hot hits over every layer: st.census_hot / st.entries. */
    int loc_on;
    char loc_preset[32];
    int32_t loc_lru_rows;
    double loc_calib_s;                 /* seconds of the calibration */
    double loc_target[DHS_REF_MAX_LAYERS], loc_calib[DHS_REF_MAX_LAYERS], loc_alpha[DHS_REF_MAX_LAYERS];
    double loc_random[DHS_REF_MAX_LAYERS], loc_hit[DHS_REF_MAX_LAYERS], loc_corr[DHS_REF_MAX_LAYERS];
    double loc_draft[DHS_REF_MAX_LAYERS];  /* speculative rounds: overlap of queries j, j+1 of a round */
    uint64_t loc_pairs[DHS_REF_MAX_LAYERS], loc_accesses[DHS_REF_MAX_LAYERS], loc_draft_pairs[DHS_REF_MAX_LAYERS];
    int error;                  /* 1: the run stopped on an error (errmsg) */
    int budget_too_small;       /* 1 with error: the device budget can never hold one session */
    char errmsg[512];
} dhs_ref_run_result;

/* Runs; returns 0 when the run completed (identical or not), -1 on an error
   (errmsg). The result owns tokens_of: free with dhs_ref_run_result_free. */
int dhs_ref_run(const dhs_ref_run_cfg *cfg, dhs_ref_run_result *res);
void dhs_ref_run_result_free(dhs_ref_run_result *res);
/* cfg->model, geometry and synthetic for a KV geometry: tiny keeps the model
   config (its layout and k); the real ones replace it (dhs_ref_cfg_geometry)
   and import a synthetic history (DESIGN §12) */
void dhs_ref_run_set_geometry(dhs_ref_run_cfg *cfg, dhs_ref_geometry g);
/* the locality device's per-layer table (cfg.locality): layer, target, calibrated, measured
   alpha, pairs, random k/V, draft overlap (speculative rounds), LRU hit; producers only */
void dhs_ref_print_locality(FILE *f, const dhs_ref_run_result *res, int32_t n_layers);
/* the same as "locality": {preset, lru_rows, calib_s, layers: [{layer, target, calibrated,
   alpha, pairs, random, lru_hit}], library_hot_hit} in j */
void dhs_ref_run_json_locality(struct cJSON *j, const dhs_ref_run_result *res, int32_t n_layers);
/* lines of the human output: the KV geometry (sources, producers, row and
   key bytes, k), the small hidden size, whether the history is synthetic */
void dhs_ref_print_geometry(FILE *f, const dhs_ref_run_cfg *cfg, const dhs_ref_run_result *res);
/* the same in a `dhs run --json` object: "hidden", "synthetic_history_positions",
   config.geometry, throughput.model_on (objects "config"/"throughput" if present) */
void dhs_ref_run_json_geometry(struct cJSON *j, const dhs_ref_run_cfg *cfg, const dhs_ref_run_result *res);

#ifdef __cplusplus
}
#endif
#endif
