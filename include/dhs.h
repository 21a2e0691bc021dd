/*
 * dhs.h - dhisparse public API: a load-adaptive KV hierarchy for natively
 * sparse-attention LLMs (DeepSeek-V3.2 DSA, GLM-5.x IndexShare, V4.1-style
 * shared sources). See docs/API.md and docs/DESIGN.md.
 *
 * This header is what an engine calls every step and at request boundaries.
 * Sizing helpers, the speculation-width schedule and the string parsers are
 * in dhs_plan.h; the CUDA backend's own calls in dhs_cuda.h; the online
 * speculation width in dhs_spec_auto.h.
 *
 * Vocabulary (DESIGN.md §1): a *source* is one physical KV payload store with
 * rows of `row_bytes` bytes, each covering `m` token positions. A *group* is
 * the unit of selection state: one index producer and the payload sources that
 * share its selections (OWN: one source; FOLLOW: several). Every source of a
 * group has the same residency structure, so one resolver plan serves all of
 * them, each source copying its own bytes into its own pool.
 *
 * A *location* is a row index into the source's device pool (FlashMLA
 * `indices` convention: page*page_rows + offset; -1 = invalid).
 *
 * Example usage (CPU backend, one request, one decode step):
 *
 *   dhs_arch arch = dhs_arch_default();            // one group, one source, 576 B rows
 *   dhs_config cfg = dhs_config_default();
 *   dhs_backend *be; dhs_backend_cpu_create(NULL, &be);
 *   dhs_ctx *ctx;   dhs_ctx_create(&arch, &cfg, be, &ctx);
 *   dhs_req r;      dhs_request_open(ctx, 1000, &r);         // may return DHS_WAIT
 *   const void *rows[1] = { prefill_rows };                   // 1000 rows
 *   dhs_request_import(ctx, r, 1000, rows, DHS_IMPORT_DEVICE);
 *   int32_t K = 1;
 *   dhs_round_begin(ctx, 1, &r, &K);
 *   dhs_write_rows(ctx, r, 0, 1000, 1, new_row);              // KV of position 1000
 *   dhs_resolve_item it = { .req = r, .n_queries = 1, .sel = sel, .loc = loc };
 *   dhs_resolve(ctx, 0, k, 1, &it);                           // loc[i] -> pool row
 *   ... attention reads dhs_source_pool(ctx, 0) + loc[i] * dhs_pool_row_stride(ctx) ...
 *   int32_t accepted = 0;
 *   dhs_round_end(ctx, &accepted);
 *   dhs_request_close(ctx, r);
 *   dhs_ctx_destroy(ctx); dhs_backend_destroy(be);
 *
 * Threading: a dhs_ctx is not thread-safe; one engine thread drives it.
 * On error every call changes no state unless documented otherwise.
 * The library never prints and never exits.
 */
#ifndef DHS_H
#define DHS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */
/* Stable numbering: append only. */
typedef enum dhs_status {
    DHS_OK = 0,
    DHS_WAIT = 1,                  /* not an error: capacity is short, retry later; nothing changed */
    DHS_ERR_NOMEM = -1,            /* host allocation failed (or injected) */
    DHS_ERR_DEVICE_NOMEM = -2,     /* device-tier allocation failed (or injected) */
    DHS_ERR_BACKEND = -3,          /* a backend copy/fence failed (or injected) */
    DHS_ERR_INVALID_ARG = -4,      /* a null pointer, a bad count or a bad config value */
    DHS_ERR_MISALIGNED = -5,       /* a buffer not aligned to DHS_ALIGN */
    DHS_ERR_UNKNOWN_REQUEST = -6,  /* handle that never existed: slot out of range, generation 0 or not issued yet */
    DHS_ERR_UNKNOWN_SOURCE = -7,   /* source or group index out of range */
    DHS_ERR_ROW_RANGE = -8,        /* a row outside the request's rows */
    DHS_ERR_NOT_VISIBLE = -9,      /* a selected row outside the query's visible set (I3) */
    DHS_ERR_K_TOO_LARGE = -10,     /* k above dhs_config.sel_k */
    DHS_ERR_TOO_MANY_QUERIES = -11,/* K_r above dhs_config.spec_width */
    DHS_ERR_STATE = -12,           /* call not valid in this state (no round open, import twice, ...) */
    DHS_ERR_ACCEPTED_RANGE = -13,  /* accepted count outside 0..K_r-1 */
    DHS_ERR_NOT_IN_ROUND = -14,    /* request not part of the open round */
    DHS_ERR_TOO_LARGE = -15,       /* request can never fit (more pages than the pools hold) */
    DHS_ERR_STAGING = -16,         /* staging arenas exhausted this round */
    DHS_ERR_UNSUPPORTED = -17,     /* backend lacks the feature */
    DHS_ERR_CLOSED = -18,          /* handle of a closed request: its slot is free or holds a newer generation */
    DHS_STATUS_LAST_ = -18
} dhs_status;

const char *dhs_status_str(dhs_status s);

/* Library version: DHS_VERSION_MAJOR.MINOR.PATCH of the headers compiled
   against; dhs_version() returns the linked library's as "MAJOR.MINOR.PATCH". */
#define DHS_VERSION_MAJOR 0
#define DHS_VERSION_MINOR 3
#define DHS_VERSION_PATCH 0
#define DHS_VERSION_STRING "0.3.0"
const char *dhs_version(void);

#define DHS_ALIGN 16 /* row buffers must be 16-byte aligned (16-byte loads on GPU) */

/* ---------------------------------------------------------- architecture */
typedef enum dhs_consumer_kind {
    DHS_CONSUMER_OWN = 0,     /* own indexer, own source */
    DHS_CONSUMER_FOLLOW = 1,  /* producer's selection, own payload source */
    DHS_CONSUMER_REUSE = 2,   /* previous consumer's locations and payload; no resolver call */
    DHS_CONSUMER_REINDEX = 3  /* fresh selection over a shared source */
} dhs_consumer_kind;

#define DHS_MAX_SOURCES 128
#define DHS_MAX_CONSUMERS 256

typedef struct dhs_source_desc {
    uint32_t row_bytes; /* d_KV, multiple of 16 */
    uint32_t m;         /* token positions per row (1 = uncompressed) */
    int32_t group;      /* selection-state group (index producer) it belongs to */
} dhs_source_desc;

typedef struct dhs_consumer_desc {
    dhs_consumer_kind kind;
    int32_t source;     /* payload source read */
    int32_t group;      /* group whose selection it uses */
} dhs_consumer_desc;

typedef struct dhs_arch {
    int32_t n_groups;
    int32_t n_sources;
    dhs_source_desc sources[DHS_MAX_SOURCES];
    int32_t n_consumers;                        /* optional: describes layers */
    dhs_consumer_desc consumers[DHS_MAX_CONSUMERS];
    uint32_t index_key_bytes;                   /* d_idx per producer (planner only) */
} dhs_arch;

/* one group, one 576-byte source, m = 1, one OWN consumer */
dhs_arch dhs_arch_default(void);
/* validates: groups non-empty, sources' m equal within a group, sizes */
dhs_status dhs_arch_validate(const dhs_arch *a);
const char *dhs_consumer_kind_str(dhs_consumer_kind k);

/* ---------------------------------------------------------------- config */
typedef enum dhs_policy {
    DHS_POLICY_LRU = 0,   /* exact LRU (doubly linked list, O(1) touch) */
    DHS_POLICY_CLOCK = 1, /* second chance with a hand */
    DHS_POLICY_FIFO = 2,
    DHS_POLICY_LFU = 3,   /* least frequently used, ties by age (O(log B) heap) */
    DHS_POLICY_COUNT_
} dhs_policy;
const char *dhs_policy_str(dhs_policy p);

typedef enum dhs_reclaim_order {
    DHS_RECLAIM_MOST_PAGES = 0,  /* requests holding most optional pages first */
    DHS_RECLAIM_OLDEST = 1,      /* oldest admission first */
    DHS_RECLAIM_NEWEST = 2,      /* newest admission first */
    DHS_RECLAIM_COUNT_
} dhs_reclaim_order;
const char *dhs_reclaim_order_str(dhs_reclaim_order o);

/* Where the per-layer resolver runs (docs/API.md "Device resolver").
   HOST: dhs_resolve plans on the host with the configured policy.
   DEVICE: the hot state (reverse index, slot table, protection, CLOCK hand)
     lives in device-tier memory and every resolve call runs on the backend's
     compute stream (the C specification on the CPU backend, kernels on CUDA);
     the host publishes the round descriptor and table changes at
     dhs_round_begin. Requires policy = DHS_POLICY_CLOCK (the device runs CLOCK
     with round epochs), else dhs_ctx_create and dhs_config_sizes return
     DHS_ERR_INVALID_ARG, and a backend with a payload (not
     dhs_cpu_options.payload_free: DHS_ERR_INVALID_ARG from dhs_ctx_create)
     that implements the device resolver, else DHS_ERR_UNSUPPORTED. */
typedef enum dhs_resolver {
    DHS_RESOLVER_HOST = 0,
    DHS_RESOLVER_DEVICE = 1,
    DHS_RESOLVER_COUNT_
} dhs_resolver;
const char *dhs_resolver_str(dhs_resolver r);

typedef struct dhs_config {
    int32_t max_requests;      /* request slots N */
    int32_t sel_k;             /* largest selection length k (rows a query selects) */
    int32_t spec_width;        /* largest queries per request per round (K_max), 1 = no speculation */
    int32_t hot_rows;          /* B, hot-cache rows per request and group (multiple of page_rows);
                                  group_hot_rows overrides it per group */
    int32_t tail_rows;         /* tail ring rows per request and source (multiple of page_rows) */
    int32_t page_rows;         /* p */
    int64_t max_rows;          /* largest history rows per request (reverse-index size) */
    uint64_t device_bytes;     /* M: device pool capacity over all sources */
    uint64_t reserve_bytes;    /* M_res: admission reserve */
    int32_t staging_arenas;    /* chi: staging arenas, each serving one source of a live group
                                  (0 = automatic: as many as the widest group has sources, or
                                  none when K_max*k per resolve call fits the hot cache;
                                  -1 = no staging: overflow returns DHS_ERR_STAGING) */
    int32_t repop_pages;       /* pages populated per repopulation attempt (all requests) */
    dhs_policy policy;
    dhs_reclaim_order reclaim_order;
    int32_t resident_first;    /* 1: keep imported history on device while capacity allows */
    int32_t resolver;          /* dhs_resolver: DHS_RESOLVER_HOST (default) or DHS_RESOLVER_DEVICE */
    uint64_t host_cache_bytes; /* pinned host rows of closed requests kept, up to this many bytes, for
                                  later requests' host rows: an import into reused memory neither pins
                                  nor first-touches it (0, the default: freed at close). Counted in
                                  dhs_mem.host_bytes_allocated and host_bytes_cached; dropped when a
                                  host allocation fails, then retried */
    int32_t copy_threads;      /* host threads an import copies its rows into host rows with (0, the
                                  default: as many as the machine has cores with 32 MiB or more each;
                                  1: the calling thread; at most 8); negative: DHS_ERR_INVALID_ARG */
    int32_t group_hot_rows[DHS_MAX_SOURCES]; /* per-group hot-cache rows: entry g (g < n_groups)
                                  0 = hot_rows (the default: every entry 0, one size for every
                                  group), else that group's B (a multiple of page_rows, page_rows
                                  to 2^30); entries g >= n_groups must be 0. Admission, the
                                  required bytes, staging (automatic staging_arenas compares
                                  with the smallest B), both resolvers and dhs_config_sizes use
                                  each group's own B. Anything else: DHS_ERR_INVALID_ARG from
                                  dhs_ctx_create and dhs_config_sizes (docs/API.md "Per-group
                                  hot-cache sizes") */
    int32_t decoded_optional;  /* non-zero (the default): with resident_first, the complete pages decoding
                                  adds join the optional history once they have left the tail ring, so
                                  they are repopulated (served directly, never missed) while capacity
                                  allows, like imported pages; 0: they live on host and in the hot cache
                                  (docs/API.md section 8) */
} dhs_config;

dhs_config dhs_config_default(void);

/* What a context with this architecture and configuration reserves besides
   optional history, so an engine can size device_bytes: the pool must hold
   at least min_device_bytes, plus request_bytes for every further request to
   be admitted at once, plus the imported history it wants resident. */
typedef struct dhs_sizes {
    uint32_t row_stride;          /* bytes per pool row (largest row_bytes) */
    uint64_t page_bytes;          /* page_rows * row_stride */
    uint64_t request_bytes;       /* required device bytes per admitted request (hot + tail, all sources) */
    uint64_t staging_bytes;       /* staging arenas reserved at creation (M_stage) */
    int32_t staging_arenas;       /* chi reserved */
    int64_t staging_rows_per_slot;/* overflow rows per request and arena */
    uint64_t reserve_bytes;       /* M_res rounded up to pages */
    uint64_t min_device_bytes;    /* staging + reserve + one request */
    uint64_t resolver_bytes;      /* device resolver state (resolver = DEVICE, else 0): per-slot
                                     reverse index, slot table, tables and scratch. Metadata
                                     OUTSIDE M (like the host reverse index): allocated on the
                                     device tier at dhs_ctx_create on top of device_bytes and
                                     counted in dhs_mem.device_bytes_allocated */
} dhs_sizes;
/* DHS_ERR_INVALID_ARG for NULL or an invalid arch/config (as dhs_ctx_create),
   DHS_ERR_TOO_LARGE when a byte figure would pass 2^64-1; *out is written
   only on DHS_OK. */
dhs_status dhs_config_sizes(const dhs_arch *arch, const dhs_config *cfg, dhs_sizes *out);

/* ---------------------------------------------------------------- backend */
typedef struct dhs_backend dhs_backend;

typedef struct dhs_cpu_options {
    int32_t async_delay;   /* copies/reader fences complete this many ticks late (0 = at once) */
    int32_t random_order;  /* 1: late completions in random order */
    uint64_t seed;         /* for random_order */
    int32_t payload_free;  /* 1: a backend that moves no bytes, for simulating placement: a
                              context on it has no pools and no host rows and copies nothing
                              (import/write data pointers may be NULL); every decision, status,
                              location, census and accounting figure is the same as on a payload
                              backend with the same options, late copies included (their tickets
                              complete at the same time); only dhs_mem's device_bytes_allocated
                              and host_bytes_allocated (and host_bytes_shared) differ, and fault injection sees no
                              synchronous copies or host-row allocations. The device resolver
                              needs a payload: dhs_ctx_create answers DHS_ERR_INVALID_ARG */
} dhs_cpu_options;

dhs_status dhs_backend_cpu_create(const dhs_cpu_options *opt, dhs_backend **out);
/* CUDA backend: returns DHS_ERR_UNSUPPORTED when built without CUDA or no device is present */
dhs_status dhs_backend_cuda_create(int device, dhs_backend **out);
void dhs_backend_destroy(dhs_backend *be); /* NULL is a no-op */
const char *dhs_backend_name(const dhs_backend *be);

/* Fault injection: make the nth (1-based) allocation or copy from now fail;
   0 disables. Costs one branch when off. The device resolver's publishes
   (its tables and round descriptor, host to device) count as copies. */
typedef enum dhs_fault_kind { DHS_FAULT_HOST_ALLOC = 0, DHS_FAULT_DEVICE_ALLOC = 1, DHS_FAULT_COPY = 2, DHS_FAULT_COUNT_ } dhs_fault_kind;
void dhs_backend_fault_at(dhs_backend *be, dhs_fault_kind kind, uint64_t nth);
uint64_t dhs_backend_faults_injected(const dhs_backend *be);

/* ---------------------------------------------------------------- context */
typedef struct dhs_ctx dhs_ctx;
/* Opaque handle value: (slot, generation). A handle whose request closed
   answers DHS_ERR_CLOSED from every call taking a dhs_req, whether its slot
   is free or was reused by a newer request; a handle never issued answers
   DHS_ERR_UNKNOWN_REQUEST. */
typedef struct dhs_req { uint32_t id; uint32_t gen; } dhs_req;

/* The context keeps a copy of arch and cfg; be must outlive it. */
dhs_status dhs_ctx_create(const dhs_arch *arch, const dhs_config *cfg, dhs_backend *be, dhs_ctx **out);
void dhs_ctx_destroy(dhs_ctx *ctx); /* NULL is a no-op; frees every byte on both tiers */

/* Device pool of a source: dhs_source_pool_rows() rows, row i at byte
   i * dhs_pool_row_stride() (the largest row_bytes of the architecture; a
   source with smaller rows uses the first row_bytes of each). All sources
   share one pool, so every location vector indexes the same tensor. On the
   CPU backend this is host memory emulating the device tier. */
const void *dhs_source_pool(const dhs_ctx *ctx, int32_t source);
int64_t dhs_source_pool_rows(const dhs_ctx *ctx, int32_t source);
uint32_t dhs_pool_row_stride(const dhs_ctx *ctx);

/* ---------------------------------------------------------------- requests */
/* Admission (DESIGN §3): reserves the request's required allocations (hot
   caches and tails of every source; staging arenas are reserved once at
   context creation). `expected_positions` is validated against max_rows and
   recorded: dhs_request_import pins host rows for max(imported, expected)
   positions (one allocation per source), so decoding up to it allocates no
   host memory; optional history takes whatever capacity is spare at import.
   Returns DHS_WAIT when even reclaiming every optional page cannot make room;
   nothing is changed then. Reclaim may take whole other requests' optional
   pages (after their host backup and earlier readers completed). */
dhs_status dhs_request_open(dhs_ctx *ctx, int64_t expected_positions, dhs_req *out);

/* Import a request's prefill history: n_positions positions; rows[src] points
   to ceil(n_positions / m) rows of that source (16-byte aligned). Flags:
   DHS_IMPORT_DEVICE: rows are device-tier buffers (prefill output): complete
     pages go to optional history while capacity allows, their host backup
     deferred; the rest is copied to host.
   DHS_IMPORT_HOST: rows already exist on host; copied into host backing, and
     optional pages are populated later by repopulation.
   Only valid once, before the request's first round. The caller's buffers may
   be reused when the call returns. n_positions = 0 is valid (rows may be
   NULL): the request starts empty and counts as imported (a second import
   answers DHS_ERR_STATE). DHS_ERR_BACKEND when a copy fails (either flag);
   nothing of the import remains and the call can be retried. */
#define DHS_IMPORT_DEVICE 1u
#define DHS_IMPORT_HOST 2u
dhs_status dhs_request_import(dhs_ctx *ctx, dhs_req r, int64_t n_positions,
                              const void *const *rows, unsigned flags);

/* Pins host rows ahead of imports: adds `count` spans to the host-row cache
   (dhs_config.host_cache_bytes), each able to hold `rows` rows of one source
   (rounded up to whole 1,024-row host chunks), pinned and touched, so that the
   next imports of up to `count` source histories of at most `rows` rows each
   copy at memory speed instead of pinning their own (an import takes the
   smallest cached span that holds a source's rows, as for a closed request's).
   A server calls it at start (or while idle) to move the pinning out of the
   imports on its critical path. The spans count in
   dhs_mem.host_bytes_allocated and host_bytes_cached, and an allocation that
   fails later drops the cache as before. DHS_OK; DHS_ERR_INVALID_ARG (ctx
   NULL, rows < 1, count < 0, rows past every group's rows (max_rows / m +
   1), or the spans would pass host_cache_bytes or the cache's span slots: 2
   per source of each request slot) or DHS_ERR_NOMEM / DHS_ERR_BACKEND (an
   allocation failed), with nothing added. count = 0 and a payload-free backend add
   nothing and return DHS_OK. */
dhs_status dhs_host_cache_fill(dhs_ctx *ctx, int64_t rows, int32_t count);

/* Two-phase host import, for a transport that receives the prefill rows
   straight into the host tier (docs/API.md "Two-phase import"):
   dhs_request_import_begin allocates the request's host backing (pinned,
   one allocation per source, rows up to max(n_positions, expected)) and
   writes host_rows[src] (dhs_arch.n_sources entries): where row i of source
   src goes, at host_rows[src] + i * dhs_pool_row_stride(ctx) for
   0 <= i < ceil(n_positions / m); the first row_bytes of each row count.
   host_rows[src] is NULL when the source has no row to receive, and on a
   payload-free backend. The caller fills those rows (any thread, any transport;
   the library reads nothing of them until the commit), then either
   dhs_request_import_commit: completes the import exactly as
     dhs_request_import(DHS_IMPORT_HOST) of the same rows (host rows valid,
     the last partial page copied into the tail ring, optional pages
     populated later by repopulation); with flags DHS_IMPORT_DEVICE at begin,
     exactly as dhs_request_import(DHS_IMPORT_DEVICE) of the same rows (the
     leading complete pages also copied from the host rows into optional
     pages while capacity allows; every host row valid at once); or
   dhs_request_import_abort: frees what begin took; the request is as
     before begin (not imported, so any import may follow).
   Between begin and commit/abort nothing of the import is visible: the
   request has 0 positions, dhs_round_begin naming it answers DHS_ERR_STATE,
   a second begin or a dhs_request_import answers DHS_ERR_STATE.
   dhs_request_close ends an open import too (its host rows are freed: the
   transport must have stopped writing). Statuses: begin as
   dhs_request_import (DHS_ERR_STATE: imported, after a round, in the
   round, or an import open; DHS_ERR_INVALID_ARG: flags other than
   DHS_IMPORT_HOST or DHS_IMPORT_DEVICE, or host_rows NULL; DHS_ERR_ROW_RANGE; DHS_ERR_NOMEM: nothing
   taken); commit and abort answer DHS_ERR_STATE when no import is open;
   commit answers DHS_ERR_BACKEND when a copy into the tail ring fails: the
   import stays open and the commit may be retried (or aborted). */
dhs_status dhs_request_import_begin(dhs_ctx *ctx, dhs_req r, int64_t n_positions, unsigned flags,
                                    void **host_rows);
dhs_status dhs_request_import_commit(dhs_ctx *ctx, dhs_req r);
dhs_status dhs_request_import_abort(dhs_ctx *ctx, dhs_req r);

/* Shared prefix (docs/API.md "Shared prefixes"): opens a request whose
   first prefix_positions positions are the committed positions of request
   `parent`, as if imported from them, without copying or pinning them again.
   The child shares the parent's pinned host rows of every complete
   1,024-row host chunk of the prefix and the parent's ready optional
   (device) pages of the prefix; both are reference-counted and freed when
   their last holder closes or gives them up, in any order. The rows of the
   partial host chunk and the partial page at the boundary are copied into
   the child's own host rows and tail ring (copy on write), so the child
   appends its own rows after the prefix; it has its own hot cache, tail
   ring and optional pages beyond the shared ones. Parent and child then
   decode independently (either may close first; a closed parent leaves its
   shared rows to the children). The call first completes the parent's
   outstanding host copies of its committed rows (its tail backups, the
   deferred host copy of device-imported pages), waiting for them, so that
   the shared rows never change again.
   expected_positions as dhs_request_open (host rows are pinned up to
   max(prefix, expected) at once). The child counts as imported. Its own
   prompt after the prefix is then imported ONCE, before its first round,
   with dhs_request_import(ctx, child, n_positions, rows, flags): n_positions
   is the child's total (>= prefix; equal: nothing happens) and rows[src]
   holds only the rows from row floor(prefix / m) to ceil(n_positions / m) - 1
   of each source (an incomplete compressed row at the boundary is given
   again, over the child's positions). The rows go to the child's host rows
   (its optional pages are populated later, as after DHS_IMPORT_HOST) and
   the last partial page to its ring. DHS_ERR_ROW_RANGE: n_positions below
   the prefix or above max_rows; DHS_ERR_STATE: a second time or after a
   round; DHS_ERR_BACKEND: a copy failed, the child keeps its prefix and
   the import may be retried.
   Statuses (nothing changed on any error; after a failure past the
   admission the parent's host copies may have completed and the admission
   may have reclaimed, as dhs_request_open does): DHS_ERR_INVALID_ARG (ctx or out NULL);
   DHS_ERR_UNKNOWN_REQUEST / DHS_ERR_CLOSED (parent handle);
   DHS_ERR_STATE (parent has a two-phase import open, or is in the open
   round); DHS_ERR_ROW_RANGE (prefix_positions < 0 or above the parent's
   committed positions; expected_positions outside 0..max_rows; a prefix
   that ends inside a compressed row, prefix % m != 0 for some group, unless
   it is all of the parent's positions); DHS_ERR_BACKEND (completing the
   parent's host copies failed); otherwise as dhs_request_open (DHS_WAIT,
   DHS_ERR_TOO_LARGE, DHS_ERR_NOMEM, DHS_ERR_DEVICE_NOMEM). A prefix of 0
   positions opens an empty imported request. */
dhs_status dhs_request_open_shared(dhs_ctx *ctx, dhs_req parent, int64_t prefix_positions,
                                   int64_t expected_positions, dhs_req *out);

/* Close: releases every allocation of the request (after its readers). */
dhs_status dhs_request_close(dhs_ctx *ctx, dhs_req r);

/* Committed positions n_r of a request. */
dhs_status dhs_request_positions(const dhs_ctx *ctx, dhs_req r, int64_t *n);

/* ---------------------------------------------------------------- rounds */
/* Opens a round: requests reqs[i] verify K[i] queries at positions
   n_r .. n_r + K[i] - 1 (1 <= K[i] <= spec_width). Also runs housekeeping:
   completes copies, publishes populated pages, retires reclaimed ones,
   repopulates (bounded). Then makes room in each request's tail ring for its
   whole block next to the committed rows still being backed up, waiting for
   that backup when the ring is short (docs/API.md: tail_rows sizing); if
   that backup copy fails twice it returns DHS_ERR_BACKEND and opens no
   round (retryable). */
dhs_status dhs_round_begin(dhs_ctx *ctx, int32_t n, const dhs_req *reqs, const int32_t *K);

/* Writes rows of the current block into the tail: rows first_row ..
   first_row + n_rows - 1 of `source`, each row covering positions < n_r + K_r.
   Rows of a compressed source's incomplete group may be rewritten. The block
   may be written in parts, with resolves between them: no write overwrites a
   row handed out in the round or one whose host copy is incomplete.
   DHS_ERR_ROW_RANGE for first_row < the committed complete rows or a range
   past the block's end (any int64 first_row, no overflow); DHS_ERR_BACKEND
   when the copy fails: rows not written before stay unwritten, rows written
   before hold undefined bytes until the call is retried. */
dhs_status dhs_write_rows(dhs_ctx *ctx, dhs_req r, int32_t source, int64_t first_row,
                          int32_t n_rows, const void *data);

typedef struct dhs_resolve_item {
    dhs_req req;
    int32_t n_queries;  /* K_r of the open round (all queries) */
    const int32_t *sel; /* [n_queries][k] selected rows, -1 = padding */
    int32_t *loc;       /* out: [n_sources_of_group][n_queries][k] pool rows, -1 for -1 */
} dhs_resolve_item;

/* Rows of the current block that a selection names must have been written
   (dhs_write_rows) for the group's first source (the producer's own layer)
   before the call. The other sources of a FOLLOW group compute their rows at
   their own layer: they receive tail locations now and must write the rows
   before their attention reads them; dhs_round_end refuses to commit rows
   some source never wrote.
   Resolves selections of `group` for a batch of requests: direct (tail, ready
   optional pages) -> hot -> recover from host. Every source of the group gets
   its own location vector (same plan, its own bytes). All inputs are
   validated before any state changes. n_items = 0 (items may be NULL) returns
   DHS_OK after the group/round/k checks and changes nothing. A call after
   dhs_group_done(group) in the same round is valid: it hands out fresh
   locations, valid until the next dhs_group_done(group) or the round end. */
dhs_status dhs_resolve(dhs_ctx *ctx, int32_t group, int32_t k, int32_t n_items,
                       const dhs_resolve_item *items);

/* Device resolver (resolver = DHS_RESOLVER_DEVICE; docs/API.md "Device
   resolver"): the graph-capturable per-layer call. Resolves `group` for the
   whole open round from selections in device memory and writes locations to
   device memory, on the backend's compute stream: no host synchronisation,
   no allocation, nothing read back.
     sel[b][j][i] at ((b * W) + j) * k + i   (b = round position, as in
       the reqs array of dhs_round_begin; W = dhs_config.spec_width)
     loc[si][b][j][i] at (((si * N) + b) * W + j) * k + i   (si = source
       index within the group, N = dhs_config.max_requests)
   Rows b >= n_round and queries j >= K_b are padding: never read from sel,
   -1 in loc. The host checks only what needs no data: ctx and flags
   (DHS_ERR_INVALID_ARG for a bit other than DHS_RESOLVE_SPLIT and
   DHS_RESOLVE_DIRECT), group
   (DHS_ERR_UNKNOWN_SOURCE), an open round (DHS_ERR_NOT_IN_ROUND), 1 <= k <=
   sel_k (DHS_ERR_INVALID_ARG / DHS_ERR_K_TOO_LARGE), sel and loc non-NULL
   (DHS_ERR_INVALID_ARG) and 4-byte aligned (DHS_ERR_MISALIGNED); host
   resolver mode: DHS_ERR_STATE. Entries are checked on the device: a bad
   entry (< -1: DHS_ERR_ROW_RANGE; not visible to its query, however large:
   DHS_ERR_NOT_VISIBLE) and a miss that finds no staging row
   (DHS_ERR_STAGING) yield -1 in every source's location and set the
   context's error word (the first error wins); the other entries are
   resolved. dhs_round_end reports the word (see there). Rows of the current
   block that a selection names must be written (dhs_tail_locations + the
   engine's own kernel, or dhs_write_rows) before attention reads them.

   flags = DHS_RESOLVE_SPLIT (docs/API.md "Overlapped recovery"): the same
   checks, locations, decisions and state, except WHEN the recovered rows of
   sources 1..n-1 of the group land. Source 0's rows are in place for
   compute-stream work issued after the call, as without the flag. The
   other sources' rows follow one source at a time on the backend's copy
   queue, so their transfer overlaps whatever the engine issues next on the
   compute stream (source 0's attention, the next layers' kernels). Before
   issuing a reader of source si >= 1 the engine calls dhs_source_wait(ctx,
   group, si). dhs_source_wait of the last source, dhs_group_done,
   dhs_round_end and a later resolve of the group join the queue back into
   the compute stream. Capturable: the queue forks from the compute stream
   and joins it again at one of those calls, which must be captured too (a
   captured step that ends with a group's copies still forked fails at
   capture end). On the CPU backend the copies of sources si >= 1 wait for
   dhs_source_wait or the join, so an engine that reads a source without
   waiting for it reads stale rows there as well. The flag changes nothing
   for a group of one source or on a payload-free backend. */
#define DHS_RESOLVE_SPLIT 1u
/* flags = DHS_RESOLVE_DIRECT: for a round that cannot miss in `group`
   (dhs_round_may_miss(ctx, group) answers 0, checked here: DHS_ERR_STATE
   otherwise, nothing launched). Every valid entry is then served directly
   (tail, ready optional pages): the same locations, state and error word as
   without the flag, in one kernel instead of two (CUDA: a direct kernel
   spread over the SMs, no hot-cache reads, no copy kernel), and the group
   needs no promotion, so dhs_group_done launches nothing for it unless an
   earlier resolve of the round left one pending. A step captured with the flag must be replayed only in rounds
   that cannot miss: replayed in one that can, an entry the flag's kernel
   cannot serve yields -1 and DHS_ERR_STATE in the error word (reported by
   dhs_round_end), never a wrong row. With DHS_RESOLVE_SPLIT the split is
   ignored (nothing can be copied). */
#define DHS_RESOLVE_DIRECT 2u
dhs_status dhs_resolve_device(dhs_ctx *ctx, int32_t group, int32_t k, const int32_t *sel_dev, int32_t *loc_dev,
                              unsigned flags);

/* Makes the rows of source si (0 <= si < sources of the group, as in loc[si]
   of dhs_resolve_device) of the group's last DHS_RESOLVE_SPLIT resolve
   visible to compute-stream work issued after this call, and those of every
   source below si too (the queue copies sources in order); si = the last
   source also joins the copy queue. Host call, no synchronisation,
   capturable; a no-op for si = 0 or when the group has no outstanding split
   resolve. DHS_ERR_UNKNOWN_SOURCE (group or si out of range),
   DHS_ERR_NOT_IN_ROUND, DHS_ERR_STATE (host resolver mode). */
dhs_status dhs_source_wait(dhs_ctx *ctx, int32_t group, int32_t si);

/* Where the current block's rows go: loc[i] = the pool row (location) of row
   first_row + i of `source` of request r, so the engine's own KV-write kernel
   writes them in place (either resolver mode). Host call, no
   synchronisation, nothing copied. The rows count as written (as with
   dhs_write_rows) for validation and for the commit at dhs_round_end: the
   engine must have written them before the round ends. Same checks as
   dhs_write_rows, one rule for both (request, source, round, then
   DHS_ERR_ROW_RANGE for a range outside the block or starting after the
   source's first row not written yet, for any int64 first_row). */
dhs_status dhs_tail_locations(dhs_ctx *ctx, dhs_req r, int32_t source, int64_t first_row, int32_t n_rows,
                              int32_t *loc);

/* dhs_tail_locations for every request of the open round and every source in one call (an
   engine's per-round control plane: one call instead of requests x sources). For request i of
   the round (dhs_round_begin's order) and source s, the block's rows [c, ceil((n_i + K_i) / m)),
   c = the committed rows of the source's group and m its positions per row (rows n_i .. n_i + K_i
   - 1 where m = 1), go to loc[s * src_stride + i * req_stride + j], j = row - c; the rest of each
   req_stride run is left alone. The rows count as written, as with dhs_tail_locations.
   DHS_ERR_INVALID_ARG when a block has more rows than req_stride, when src_stride < n_round x
   req_stride (more than one source) or loc is NULL with requests in the round; the other errors
   as dhs_tail_locations. Every request and source is checked before anything is written: an
   error writes nothing and marks nothing. */
dhs_status dhs_round_tail_locations(dhs_ctx *ctx, int32_t req_stride, int64_t src_stride, int32_t *loc);

/* dhs_round_tail_locations written by the device: loc_dev is device memory (host memory on the CPU
   backend), same layout and the same values, written by one launch on the backend's compute stream
   (visible to compute-stream work issued after the call; no host synchronisation). The host only marks
   the rows written, so its cost does not grow with the sources' tail pages: an engine whose step reads
   the locations on the device never copies them. Needs the device resolver (DHS_ERR_STATE in host
   mode); the same checks and errors as dhs_round_tail_locations, and an error launches nothing and
   marks nothing. Call it after dhs_round_begin and before the step reads loc_dev; not capturable (the
   values change every round, the launch does not: an engine may issue the call each round outside its
   graph). */
dhs_status dhs_round_tail_locations_device(dhs_ctx *ctx, int32_t req_stride, int64_t src_stride, int32_t *loc_dev);

/* Page tables for the open round, written by the device: the vLLM / FlashMLA "block table" form of the
   direct rows, so an engine whose top-k (or index transform) already maps a logical row s to block_table[s /
   page_rows] * page_rows + s % page_rows can serve a group that cannot miss without any resolve call.
   For request i of the round (dhs_round_begin's order) and source src, entry P of its pages [0, ceil(ceil((n_i
   + K_i) / m) / page_rows)) (m the source group's positions per row) goes to tab_dev[src * src_stride + i *
   page_stride + P]: the pool page (dhs_source_pool row index / page_rows) that holds logical rows P *
   page_rows .. + page_rows - 1 at their offsets, for every row of that page the round's selections can name
   that the round serves directly, or -1 where it serves the page's rows through the hot cache or host (an
   optional page not on the device). A row read through an entry has the bytes dhs_resolve_device would
   have located for it (the same copy, or another copy of the same committed row); where dhs_round_may_miss
   reports 0 for a group, every page of every request has an entry >= 0 for each of the group's sources,
   so the locations need no resolve (dhs_resolve_device and dhs_group_done may then be skipped for the
   group: nothing is staged or promoted). The rest of each page_stride run is left alone. The entries hold
   for the open round only (dhs_round_begin may move a request's rows). Needs the device resolver
   (DHS_ERR_STATE in host mode); tab_dev is device memory (host memory on the CPU backend), written by one
   launch on the backend's compute stream after the round begin's tables (no host synchronisation).
   DHS_ERR_INVALID_ARG: ctx NULL, a negative stride, tab_dev NULL with requests in the round, a request
   with more pages than page_stride, or src_stride < n_round x page_stride with more than one source;
   DHS_ERR_MISALIGNED; DHS_ERR_NOT_IN_ROUND. An error launches nothing. */
dhs_status dhs_round_page_tables_device(dhs_ctx *ctx, int32_t page_stride, int64_t src_stride, int32_t *tab_dev);

/* *may_miss = 1 when a selection of the open round may have to recover a row from host
   memory in `group` (-1: any group): some request of the round has a
   committed row below its tail window that is not in a ready optional page
   (rows the hot cache holds count as possible misses too); 0 when every row
   the round's queries can select is served directly (tail, ready optional
   pages), so no resolve of the round copies anything. Host call, reads host
   state only, no synchronisation; the answer holds for the whole round
   (nothing of the round's requests moves inside it). An engine can use it to skip the split
   resolve's copy queue when nothing can be copied (the reference model
   captures its step again when the answer changes). DHS_ERR_INVALID_ARG
   (ctx or may_miss NULL), DHS_ERR_UNKNOWN_SOURCE (group),
   DHS_ERR_NOT_IN_ROUND; *may_miss is written only on DHS_OK. */
dhs_status dhs_round_may_miss(const dhs_ctx *ctx, int32_t group, int *may_miss);

/* Declares that every consumer of `group` in this round has been issued:
   its staged rows are promoted into the hot cache and its staging arenas can
   serve the next layer group once these readers complete. The round end does
   it for every group still open; call it earlier when the next layer group
   needs the arenas (with the default arena count, one group at a time can
   overflow). After this call NO location of this group handed out in the
   round is valid for readers issued later: promotion may overwrite hot slots
   selected in the round. */
dhs_status dhs_group_done(dhs_ctx *ctx, int32_t group);

/* Closes the round: accepted[i] proposals of reqs[i] accepted
   (0 <= accepted[i] <= K[i] - 1), n_r' = n_r + accepted + 1; completed rows
   join history with host backup scheduled; rejected rows are discarded.
   accepted may be NULL when the round has no requests (n = 0).
   Device resolver: after the argument checks it promotes every group whose
   last resolve the host saw (dhs_resolve_device, dhs_resolve) was not
   followed by dhs_group_done, waits for the compute stream ONCE (the only
   host synchronisation of a round; after it the host may rewrite the pinned
   mirrors it publishes from) and reads the error word. That mark persists
   across rounds, because a CUDA graph replays the calls made while it was
   captured: a step captured with dhs_group_done after every group's last
   resolve costs no promotion launch at the round end; one captured without
   gets the promotion every round. Replaying resolves that the last host
   calls for their group do not reflect (a group declared done eagerly after
   the capture, then a replay without that call) is not supported. When the word is set
   (a bad entry or staging exhaustion of some dhs_resolve_device call of the
   round) it returns that status (DHS_ERR_ROW_RANGE, DHS_ERR_NOT_VISIBLE or
   DHS_ERR_STAGING), clears the word and commits nothing: the round stays
   open; the engine discards the round's outputs and may call dhs_round_end
   again, which commits. */
dhs_status dhs_round_end(dhs_ctx *ctx, const int32_t *accepted);

/* dhs_round_end without its wait for the device: for an engine that knows
   the accepted counts before its step completes (a round of width-1 queries
   accepts 0 proposals: there are none), so it can close the round while the
   step runs, after launching it, and take the round end off the host's
   critical path between two steps. The same checks, commit, promotion and
   tail backups as dhs_round_end; every copy and promotion it issues is
   ordered after the device work issued before it (the step's writes of the
   round's rows). Device resolver: nothing waits for the step, so the engine
   may open the next round, issue its control plane and launch its step while
   the device still runs this one (an overlapped schedule). The next
   dhs_round_begin waits only for the device to pass the previous round
   begin's publishes (they precede this round's step); it reads the error
   word once this round's fence (after its last resolve) has completed, and
   waits for that fence at the latest in the round begin after the NEXT early
   round end (or in dhs_round_end, dhs_sync). The call that reads a set word
   returns its status (DHS_ERR_ROW_RANGE, DHS_ERR_NOT_VISIBLE,
   DHS_ERR_STAGING) with the word cleared: a round begin then opens no round
   (a retry opens it); dhs_round_end commits nothing and leaves its round open.
   So the error of an early-ended round may be reported one round late (the
   word keeps the first error: one report may then stand for the bad entries
   of more than one round), and
   rounds ended early are committed even when their word was set: an engine
   that must redo a round with a bad entry ends it with dhs_round_end. The
   rows it commits must be written when the device runs the step: the same
   written-row checks (DHS_ERR_STATE) apply.
   Host resolver: identical to dhs_round_end (it has no wait). */
dhs_status dhs_round_end_early(dhs_ctx *ctx, const int32_t *accepted);

/* Completes every outstanding copy and fence (for shutdown and tests).
   Inside a round nothing of the round's requests moves: their completed
   copies are published by the next dhs_round_begin (one location per row
   per round). Device resolver: DHS_ERR_STATE while a round is open. */
dhs_status dhs_sync(dhs_ctx *ctx);

/* Host work the library may do while the device runs the engine's step
   (docs/API.md "Background work"): call it after launching the step and
   before waiting for its outputs, inside an open round or outside one. It
   completes the tail backups whose copies finished and issues the tail
   backups that fell due (complete pages) in one copy, ordered after the
   device work issued so far. No host synchronisation, no wait for the
   device; not inside a stream capture (its copy joins the compute stream's
   order). Inside a round it changes no location or decision of the round.
   Deferral: from the first call on, dhs_round_end lists the rows that fell
   due instead of copying them and dhs_round_begin's housekeeping leaves them
   listed; the next dhs_background issues them (one round later than the
   round end would: the ring holds up to spec_width more rows awaiting their
   copy). dhs_round_begin still waits for and forces the copies when the ring
   is short (tail_rows sizing), and so do dhs_sync and sharing; one round end
   without a call before it restores the previous behaviour. DHS_OK;
   DHS_ERR_INVALID_ARG (ctx NULL); DHS_ERR_NOMEM / DHS_ERR_BACKEND when a
   host-row allocation or the copy failed: nothing of that copy is marked,
   the rows stay due and the next call (or a forced backup) retries. */
dhs_status dhs_background(dhs_ctx *ctx);

/* ---------------------------------------------------------------- stats */
typedef struct dhs_stats {
    uint64_t entries;            /* resolved entries (excluding -1) */
    uint64_t census_direct, census_hot, census_host;
    uint64_t distinct_misses;    /* distinct rows recovered from host */
    uint64_t host_rows_copied;   /* rows gathered host -> device by the resolver */
    uint64_t host_bytes_copied;
    uint64_t backup_rows, backup_bytes;   /* device -> host */
    uint64_t populate_rows, populate_bytes;
    uint64_t staging_rows, staging_rows_peak;
    uint64_t admissions, waits, reclaims, reclaimed_pages, repopulated_pages, retired_pages;
    uint64_t rounds, accepted, rejected_rows;
    uint64_t resolve_calls;
} dhs_stats;

/* Host time the library spends inside its own calls, by phase (monotonic
   clock; nanoseconds and calls since the context was created or
   dhs_reset_stats). What an engine's critical path pays between two steps is
   its own work plus these; the backend's calls (CUDA copies, fence queries)
   are inside the phase that makes them. The sub-phases of a call are part of
   its total: BEGIN holds HOUSEKEEPING (completions, reclaim, backups;
   SWEEP, ADVANCE and REPOPULATE of it; FENCE within SWEEP and ADVANCE),
   TAIL_ROOM and PUBLISH (the device resolver's round
   descriptor and tables); END holds DEVICE (the device resolver's promote
   launch and the round's one wait) and BACKUP (the committed tail rows'
   copy). dhs_tail_locations is not timed: an engine calls it once per
   request and source (4,992 times a round at 64 GLM-5.3 requests), where
   two clock reads would cost more than the call. */
typedef enum dhs_host_phase {
    DHS_HP_BEGIN = 0,        /* dhs_round_begin */
    DHS_HP_HOUSEKEEPING = 1, /* of BEGIN */
    DHS_HP_REPOPULATE = 2,   /* of HOUSEKEEPING */
    DHS_HP_TAIL_ROOM = 3,    /* of BEGIN */
    DHS_HP_PUBLISH = 4,      /* of BEGIN (device resolver) */
    DHS_HP_END = 5,          /* dhs_round_end */
    DHS_HP_DEVICE = 6,       /* of END (device resolver) */
    DHS_HP_BACKUP = 7,       /* of END */
    DHS_HP_RESOLVE = 8,      /* dhs_resolve and dhs_resolve_device */
    DHS_HP_SWEEP = 9,        /* of HOUSEKEEPING: deferred frees whose readers completed */
    DHS_HP_ADVANCE = 10,     /* of HOUSEKEEPING: the work list (completions, due backups issued) */
    DHS_HP_FENCE = 11,       /* the backend's fence queries of the housekeeping's completion checks
                                (one call per query the memo did not answer; also within BACKGROUND) */
    DHS_HP_BACKGROUND = 12,  /* dhs_background: host time overlapped with the device's step */
    DHS_HP_COUNT_
} dhs_host_phase;
const char *dhs_host_phase_str(dhs_host_phase p);
/* ns[DHS_HP_COUNT_] and calls[DHS_HP_COUNT_] (either may be NULL);
   DHS_ERR_INVALID_ARG for a NULL ctx. Reads host state only. */
dhs_status dhs_get_host_time(const dhs_ctx *ctx, uint64_t *ns, uint64_t *calls);

/* Device resolver: the resolver counters (entries, census, misses, copies,
   staging rows, resolve calls) live in device memory; dhs_get_stats waits
   for the compute stream and reads them back (a synchronisation: not for
   inside a captured step). staging_rows_peak stays 0 there.
   DHS_ERR_INVALID_ARG for NULL; DHS_ERR_BACKEND when the wait or the read
   back fails (*out untouched; dhs_reset_stats then resets nothing). */
dhs_status dhs_get_stats(const dhs_ctx *ctx, dhs_stats *out);
dhs_status dhs_reset_stats(dhs_ctx *ctx);

typedef struct dhs_mem {
    uint64_t pool_bytes;     /* M: pool capacity */
    uint64_t required_bytes; /* M_req: required allocations (hot, tail, staging) */
    uint64_t optional_bytes; /* M_opt: optional history pages (any state) */
    uint64_t reserve_bytes;  /* M_res: admission reserve */
    uint64_t device_bytes_allocated; /* every device-tier byte the library holds */
    uint64_t host_bytes_allocated;   /* every host byte (pinned + metadata) */
    int64_t pages_total, pages_free;
    int32_t requests_open;
    uint64_t host_bytes_cached;      /* of host_bytes_allocated: closed requests' host rows kept for
                                        reuse (dhs_config.host_cache_bytes) */
    uint64_t host_bytes_shared;      /* of host_bytes_allocated: pinned host rows that more than one
                                        request holds (dhs_request_open_shared), counted once */
    uint64_t device_bytes_shared;    /* of optional_bytes: optional pages more than one request maps */
} dhs_mem;
/* DHS_ERR_INVALID_ARG for NULL; reads host state only. */
dhs_status dhs_get_mem(const dhs_ctx *ctx, dhs_mem *out);

/* ---------------------------------------------------------------- checks */
/* Invariant checkers, usable inside assert(): return 0 when everything holds,
   else the number of violations found; the first is described in msg.
   Device resolver: synchronises the compute stream to read the device's
   state, and leaves an early-ended round's error word and fences as they
   were (a check after every call does not change when a word is reported). */
int dhs_check_invariants(const dhs_ctx *ctx, char *msg, size_t msg_len);

/* Reads the bytes a location addresses (for tests and verification). */
dhs_status dhs_read_location(const dhs_ctx *ctx, int32_t source, int32_t loc, void *out);

#ifdef __cplusplus
}
#endif
#endif
