/* internal.h - private state of a dhs_ctx. Not part of the public API.
 *
 * Memory layout: ONE device pool of `n_pages` pages, each `page_rows` rows of
 * `row_stride` bytes (the largest row_bytes of the architecture). A location
 * is a row index into that pool (page * page_rows + offset), as FlashMLA's
 * `indices`. Hot caches, tails, optional history and staging arenas are all
 * pages of this pool, owned by exactly one (request, use) at a time.
 *
 * Per request and group (the selection-state unit) the core keeps one plan
 * state (reverse index, hot slots, tail window, optional page states); each
 * source of the group has its own physical pages and host backing, laid out
 * identically, so one plan is replayed per source.
 */
#ifndef DHS_CORE_INTERNAL_H
#define DHS_CORE_INTERNAL_H

#include <stdint.h>
#include <time.h>

#include "core/backend.h"
#include "core/policy.h"
#include "dhs.h"

#define HOST_CHUNK_ROWS 1024

enum opt_state { OPT_ABSENT = 0, OPT_PENDING = 1, OPT_READY = 2, OPT_RETIRING = 3 };

enum page_use { PAGE_FREE = 0, PAGE_HOT, PAGE_TAIL, PAGE_OPT, PAGE_STAGING, PAGE_DEFERRED };
#define PAGE_OWNER_SHARED (-2)

/* per source of a group, per request: physical pages and host rows */
typedef struct src_state {
    int32_t *hot_pages;    /* [B / p] */
    int32_t *tail_pages;   /* [T / p], inside request.tp */
    int32_t *opt_pages;    /* [n_opt_pages] physical page or -1 */
    uint8_t **host_chunks; /* [max_rows / HOST_CHUNK_ROWS + 1] pinned host chunks */
    int32_t *chunk_span;   /* [same] k > 0: chunks [i, i + k) are one allocation (one pinning call); 0: inside one;
                              k < 0: an allocation of -k chunks borrowed from a shared prefix (only the chunks
                              this request maps are in its table; every row of them is committed, valid on
                              host and never written again) */
    int64_t n_host_chunks;
    int64_t *wr;           /* rows < *wr hold valid bytes for this source (its written high-water mark); points
                              into request.cm, so the round end's commit walks one array per request */
} src_state;

typedef struct grp_state {
    /* hot cache */
    int32_t *slot_of;   /* [max_rows_g] hot slot of a row or -1 (reverse index) */
    int64_t *row_of;    /* [B] row in a slot or -1 */
    uint32_t *prot;     /* [B] round epoch in which the slot was selected */
    uint32_t *fill;     /* [B] resolve-call id that filled the slot */
    uint32_t prot_epoch;/* epoch n_prot counts for */
    int32_t n_prot;     /* slots with prot == prot_epoch: lets a miss skip victim() when all are */
    int32_t *free_slots;
    int32_t n_free;
    void *pol;          /* policy state */
    /* history and tail (rows of this group's sources) */
    int64_t *hist;         /* committed complete rows (*hist); points into request.cm like src_state.wr */
    int64_t import_rows;   /* complete rows that came from import (optional-eligible) */
    /* the tail ring serves rows [tail_lo, written_hi) (at most tail_rows). It keeps
       committed rows after their host copy completed, until the ring needs their
       room (tail_room), so recent rows and the imported partial page stay direct */
    int64_t *tail_lo;      /* rows < tail_lo have a complete host copy (or are optional-ready); in request.cm */
    int64_t *backed_hi;    /* rows [tail_lo, backed_hi) also have a complete host copy; in request.cm */
    int64_t backup_hi;     /* rows [backed_hi, backup_hi) have a backup in flight */
    dhs_ticket backup_ticket;
    uint64_t *host_valid;  /* bitmap [max_rows_g]: complete host copy */
    /* optional history pages */
    int64_t n_opt_pages;   /* complete pages of the history that may be optional: import_rows / p at the
                              import, then grown by housekeeping (opt_grow, decoded_optional) to the complete
                              committed pages, so decoded history is repopulated like imported history */
    int64_t opt_cap;       /* entries the four optional-page arrays hold (>= n_opt_pages; the ones past
                              n_opt_pages absent, page -1) */
    uint8_t *opt_state;    /* [n_opt_pages] enum opt_state */
    uint8_t *opt_backing;  /* [n_opt_pages] 1 when a reclaim backup is in flight */
    dhs_ticket *opt_ticket;/* [n_opt_pages] copy or readers ticket */
    int64_t opt_held;      /* pages (per source) held in any non-absent state */
    int64_t opt_ready;     /* pages in OPT_READY (kept by opt_set) */
    int64_t opt_busy;      /* pages with a copy in flight: OPT_PENDING or opt_backing (kept by opt_set and
                              opt_backing_set), so housekeeping skips a quiet group without a scan */
    /* staging this round: rows beyond the hot cache, slot_of[row] = B + idx */
    int32_t n_staged;      /* staged rows used this round */
    int32_t n_staged_call; /* n_staged when the current resolve call began */
    int64_t *staged_row;   /* [spec_width * sel_k] row of each staged index */
    uint8_t tables_dirty;  /* this group's mirrored tables may have changed (see request.tables_dirty) */
    int64_t opt_dlo, opt_dhi; /* the optional-page entries [opt_dlo, opt_dhi) changed since this group's tables were
                              last published (opt_set; empty when opt_dhi <= opt_dlo): the publish compares
                              only them unless the request is TABLES_ALL (a decoded page changes one entry of
                              ~1,563 at 100K rows, and a full comparison per source cost the round begin ~2x) */
    src_state *src;        /* [n_sources_of_group] */
} grp_state;

enum { TABLES_SOME = 1, TABLES_ALL = 2 };

typedef struct request {
    uint32_t gen;
    int in_use;
    int imported;
    int importing;      /* a two-phase import is open (dhs_request_import_begin .. commit/abort):
                           host backing allocated, nothing of it visible, no round may use the request */
    int64_t import_n;   /* positions of the open two-phase import */
    int import_dev;     /* its commit places as DHS_IMPORT_DEVICE (leading pages to optional pages) */
    int in_round;
    int32_t K;          /* queries this round */
    int64_t n;          /* committed positions n_r */
    int64_t expected;   /* positions announced at open */
    int64_t shared_n;   /* dhs_request_open_shared: the prefix positions (0: not opened on a prefix); while
                           n == shared_n and no round is open for it, dhs_request_import appends the rest */
    uint64_t admit_seq; /* admission order */
    int64_t due_n;      /* dhs_round_end looks at the request's groups for a tail backup only once its committed
                           positions reach due_n: the first n at which some group has rows due (backup_due_hi
                           above backup_hi; req_due_update). Never above that position (dhs_check_invariants);
                           0 (a new request, an import) means "look at the next round end" */
    int reclaiming;     /* reclaim in progress (optional pages being given back) */
    int64_t opt_pending;/* optional pages of every group in OPT_PENDING (kept by opt_set): while any is, a
                           population may be reading rows of the tail ring, so tail_room takes its slow
                           path (tail_room_move waits for such a copy before the ring lets its rows go) */
    int tables_dirty;   /* a table the device resolver mirrors (hot/tail/optional pages, host chunks,
                           optional-page readiness) may have changed since dres_round_begin last
                           published this request's: set by every such change, cleared by the publish
                           (dres_check verifies a clean request's mirror). TABLES_SOME: only the groups
                           whose grp_state.tables_dirty is set; TABLES_ALL: every group (a new request
                           in the slot, an import given back) */
    grp_state *g;       /* [n_groups] */
    /* the fields the round end reads and writes for every group and source, contiguous so that a commit
       touches a few cache lines per request instead of one per group and source: cm[g] is group g's
       committed rows (grp_state.hist), cm[n_groups + ctx->grp_src0[g] + si] source si's written rows
       (src_state.wr), cm[n_groups + n_sources + g] group g's tail_lo (grp_state.tail_lo: the round begin's
       tail room and the device resolver's round descriptor read it for every group of every request),
       cm[2 n_groups + n_sources + g] its backed_hi (grp_state.backed_hi: the tail room's steady case, the
       ring's start moved over rows whose copy completed, reads only these two) */
    int64_t *cm;        /* [cm_len]: committed rows, written marks, tail_lo, backed_hi */
    int32_t *tp;        /* [n_sources][tail_rows / page_rows] every source's tail pages (src_state.tail_pages
                           points into it at source grp_src0[g] + si), so a round's tail locations touch
                           a few cache lines per request */
} request;

typedef struct arena {
    int32_t first_page;   /* arenas are contiguous page runs */
    int32_t n_pages;
    int busy;
    dhs_ticket readers;   /* free once this completes (after release) */
    int released;
} arena;

typedef struct deferred_free {
    int32_t page;
    dhs_ticket t;
} deferred_free;

struct dhs_ctx {
    dhs_arch arch;
    dhs_config cfg;
    dhs_backend *be;
    const dhs_policy_ops *pol;
    void *pol_user;         /* dhs_ctx_set_policy_ops: the user pointer of pol->key */

    /* architecture derived */
    int32_t *grp_m;         /* [n_groups] positions per row */
    int32_t *grp_nsrc;      /* [n_groups] */
    int32_t **grp_srcs;     /* [n_groups][nsrc] source ids */
    int32_t *src_grp_idx;   /* [n_sources] index of the source within its group */
    int32_t *grp_src0;      /* [n_groups] the first source of group g in request.cm's source part (sum of
                               grp_nsrc before g) */
    uint32_t row_stride;    /* pool row bytes */
    int64_t *grp_max_rows;  /* [n_groups] */

    /* pool */
    uint8_t *pool;          /* device tier, n_pages * page_rows * row_stride bytes */
    int64_t n_pages;
    int32_t *free_pages;
    int64_t n_free_pages;
    uint8_t *page_use;      /* [n_pages] enum page_use */
    int32_t *page_owner;    /* [n_pages] request slot, -1, or PAGE_OWNER_SHARED (an optional page
                               that a shared prefix gave to more than one request) */
    int32_t *page_ref;      /* [n_pages] holders of an optional page beyond the first (shared prefix):
                               page_release_at drops one and frees the page at the last */
    int64_t page_refs;      /* sum of page_ref */
    int64_t pages_shared;   /* pages with page_ref > 0 */
    int64_t pages_req;      /* hot + tail + staging (+ deferred) */
    int64_t pages_opt;
    int64_t pages_res;      /* reserve */
    int64_t req_pages_per_request;

    /* staging arenas: grp_arena[g] = first of grp_nsrc[g] arenas held this round, -1 none */
    int32_t *grp_arena;
    arena *arenas;
    int32_t n_arenas;
    int32_t arena_rows_per_slot; /* K_max * k rows per request slot */

    deferred_free *deferred;
    int64_t n_deferred, cap_deferred;

    /* requests */
    request *req;
    int32_t n_open;
    uint64_t admit_seq;
    int32_t repop_cursor;

    /* housekeeping's work list: the slots of requests that may have something to complete or issue (a
       tail backup or optional-page copy in flight, committed rows not backed up yet); a request leaves it
       when a pass finds nothing outstanding. work_on[slot] = 1 while listed. Housekeeping visits these,
       not every slot and group (dhs_check_invariants verifies that no request with work is missing) */
    int32_t *work;          /* [max_requests] */
    uint8_t *work_on;       /* [max_requests] */
    int32_t n_work;
    int32_t *work_tmp;      /* [max_requests] scratch: the slots one pass backs up in one copy */
    uint32_t *named;        /* [max_requests] dhs_round_begin's duplicate check: slot named when = named_stamp */
    uint32_t named_stamp;
    /* one housekeeping pass asks the backend about a fence once: the round's tail backup is one ticket
       for every request and group of the round (0: no memo) */
    dhs_ticket memo_t;
    int memo_done, memo_on;
    /* the pages one repopulation pass populates, in one copy (grown on demand, up to repop_pages) */
    struct repop_ent { int32_t slot, g; int64_t hp; int32_t host_rows; } *repop; /* host_rows: of the page's p
                                                        (per source), those copied from host (the rest from the ring) */
    int32_t repop_cap;

    /* round */
    int round_open;
    uint32_t epoch;         /* round counter (protection) */
    uint32_t call_id;       /* resolve call counter */
    int32_t n_round;
    int32_t *round_reqs;    /* [max_requests] slots in the round, in order */
    uint64_t clock;         /* access time for policies */

    /* scratch for the resolver */
    int64_t *scratch_code;  /* [spec_width * sel_k * max_requests] per entry logical location */
    dhs_copy_pair *pairs;
    int64_t cap_pairs;

    /* tensor-parallel shared recovery (tpshare.h): this context is rank
       tp_rank of tp_ranks (0 of 1: off). A resolve with misses leaves its copy
       list here (tp_n pairs, swapped out of `pairs`) for dhs_tp_exchange;
       while tp_n > 0 the rank refuses resolve, group_done and round_end. */
    int32_t tp_rank, tp_ranks;
    dhs_copy_pair *tp_pairs;
    int64_t tp_cap, tp_n;
    uint64_t tp_host_rows, tp_peer_rows, tp_exchanges;

    uint64_t meta_bytes;    /* host metadata bytes (accounted) */
    /* host rows of closed requests kept for reuse (cfg.host_cache_bytes): spans as be_host_alloc gave
       them, hcache_bytes in all, at most hcache_cap of them */
    struct host_span { void *p; size_t bytes; } *hcache;
    int32_t hcache_n, hcache_cap;
    uint64_t hcache_bytes;
    /* host spans that more than one request holds (shared prefix): refs >= 2 holders each; a span
       leaves the table when one holder is left, and is released when that one gives it up */
    struct shared_span { void *p; size_t bytes; int32_t refs; } *sspan;
    int32_t sspan_n, sspan_cap;
    uint64_t sspan_bytes;
    dhs_stats st;
    /* 1: housekeeping visits every open request and group and queries every fence per request and
       group, as before the work list (residency.c advance_all); only bench/control_bench.c sets it,
       to time the incremental path against it in one process */
    int full_sweep;
    /* 1: the round end backs up the complete pages of the tail only (backup_due_hi), so a round that adds
       rows inside a page costs no backup and no housekeeping; set at dhs_ctx_create when the ring leaves
       room for it (tail_rows >= page_rows + 2 * spec_width, see page_backups_fit). 0: every committed row
       is backed up at the round end that commits it (the policy before page backups; bench/control_bench.c
       clears it to time that policy in the same process) */
    int page_backups;
    /* dhs_background's deferral (docs/API.md "Background work"). bg_called: dhs_background ran since the
       last round end; bg_defer: the last round end found bg_called set. While either is set the round end
       lists the requests whose rows fell due on the work list instead of copying them, and housekeeping
       leaves them there: dhs_background issues them. What needs host copies (tail_room when the ring is
       short, dhs_sync, sharing) forces them as without. An engine that stops calling dhs_background
       gets the round end's copies back one round later. */
    int bg_called, bg_defer;
    uint64_t hp_ns[DHS_HP_COUNT_], hp_calls[DHS_HP_COUNT_]; /* dhs_get_host_time */
    struct dres_ctx *dres;  /* device resolver state (dres.c); NULL in host resolver mode */
};

/* monotonic ns for the host-phase timers (dhs_get_host_time) */
static inline uint64_t hp_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
static inline void hp_add(dhs_ctx *ctx, dhs_host_phase p, uint64_t t0)
{
    ctx->hp_ns[p] += hp_now() - t0;
    ctx->hp_calls[p]++;
}

static inline uint8_t *pool_row(const dhs_ctx *ctx, int64_t loc)
{
    return ctx->pool + (uint64_t)loc * ctx->row_stride;
}

/* host rows are spaced by row_stride like pool rows, so one copy of
   row_stride bytes moves a row of any source */
static inline uint8_t *host_row(const dhs_ctx *ctx, const src_state *ss, int64_t row)
{
    return ss->host_chunks[row / HOST_CHUNK_ROWS] + (uint64_t)(row % HOST_CHUNK_ROWS) * ctx->row_stride;
}

/* B of group g: dhs_config.group_hot_rows[g] when set, else hot_rows (a valid config) */
static inline int32_t cfg_hot_rows(const dhs_config *c, int32_t g)
{
    return c->group_hot_rows[g] > 0 ? c->group_hot_rows[g] : c->hot_rows;
}
static inline int32_t grp_hot_rows(const dhs_ctx *ctx, int32_t g) { return cfg_hot_rows(&ctx->cfg, g); }

/* Whether the tail ring has room for page backups: a page's backup goes out at the round end that
   completes it, and dhs_round_begin's tail_room needs rows up to hist + rows_per_round - tail_rows backed
   up. With hist mod page_rows <= page_rows - 1 unbacked rows, a round of at most spec_width rows (m >= 1)
   needs no row past the last complete page while tail_rows >= page_rows + spec_width, and the page's copy
   has at least spec_width more rows (one round or more) to complete before tail_room would wait for it:
   tail_rows >= page_rows + 2 * spec_width (the default 128 / 64 / 1 leaves 63 rounds). */
static inline int page_backups_fit(const dhs_config *c)
{
    return (int64_t)c->tail_rows >= (int64_t)c->page_rows + 2 * (int64_t)c->spec_width;
}

/* request.cm's parts (request.cm above): the written marks (sources in group order) and the groups'
   tail_lo, read straight from the array where a loop over every group or source of a request must not
   touch the group states */
static inline int64_t *cm_wr(const dhs_ctx *ctx, const request *rq) { return rq->cm + ctx->arch.n_groups; }
static inline int64_t *cm_tail_lo(const dhs_ctx *ctx, const request *rq)
{
    return rq->cm + ctx->arch.n_groups + ctx->arch.n_sources;
}
static inline int64_t *cm_backed_hi(const dhs_ctx *ctx, const request *rq)
{
    return rq->cm + 2 * (int64_t)ctx->arch.n_groups + ctx->arch.n_sources;
}
/* request.cm's entries */
static inline size_t cm_len(const dhs_ctx *ctx) { return (size_t)(3 * ctx->arch.n_groups + ctx->arch.n_sources); }

/* Rows of group g that positions [0, pos) fill: complete ones (floor) and all, the last one partial
   (ceil). Most groups have m = 1; the round's loops over every group of every request took an int64
   division each on the serving host. */
static inline int64_t grp_rows_floor(const dhs_ctx *ctx, int32_t g, int64_t pos)
{
    const int64_t m = ctx->grp_m[g];
    return m == 1 ? pos : pos / m;
}
static inline int64_t grp_rows_ceil(const dhs_ctx *ctx, int32_t g, int64_t pos)
{
    const int64_t m = ctx->grp_m[g];
    return m == 1 ? pos : (pos + m - 1) / m;
}

/* The pool row of `row` of a source whose tail ring pages are tail_pages (the ring index row % T) */
static inline int64_t tail_row_loc(const int32_t *tail_pages, int32_t T, int32_t p, int64_t row)
{
    const int32_t t = (int32_t)(row % T);
    return (int64_t)tail_pages[t / p] * p + t % p;
}

/* The committed rows of a group that are due for a host backup: the complete pages (page_backups), else
   every committed row. Rows above it are backed up when something needs them on host (tail_room, dhs_sync,
   sharing: backup_complete with force backs up every committed row). */
/* the due tail backups are left to dhs_background (see dhs_ctx.bg_called) */
static inline int bg_deferring(const dhs_ctx *ctx) { return ctx->bg_called || ctx->bg_defer; }

static inline int64_t backup_due_hi(const dhs_ctx *ctx, const grp_state *gs)
{
    if (!ctx->page_backups) return *gs->hist;
    const int64_t p = ctx->cfg.page_rows;
    return *gs->hist / p * p;
}

/* The committed rows of a group at which its next rows fall due (backup_due_hi > backup_hi). */
static inline int64_t backup_next_due_rows(const dhs_ctx *ctx, const grp_state *gs)
{
    if (!ctx->page_backups) return gs->backup_hi + 1;
    const int64_t p = ctx->cfg.page_rows;
    return (gs->backup_hi / p + 1) * p;
}

static inline int bit_get(const uint64_t *b, int64_t i) { return (int)((b[i >> 6] >> (i & 63)) & 1u); }
static inline void bit_set(uint64_t *b, int64_t i) { b[i >> 6] |= (uint64_t)1 << (i & 63); }
static inline void bit_clr(uint64_t *b, int64_t i) { b[i >> 6] &= ~((uint64_t)1 << (i & 63)); }

/* pool.c: accounted host allocation, device page pool, copy list growth */
void *ctx_calloc(dhs_ctx *ctx, size_t n, size_t size); /* plain calloc, counted, fault-injectable */
void ctx_free(dhs_ctx *ctx, void *p, size_t n, size_t size);
int32_t page_alloc(dhs_ctx *ctx, enum page_use use, int32_t owner);
void page_release(dhs_ctx *ctx, int32_t page); /* deferred until readers completed */
dhs_ticket page_release_ticket(dhs_ctx *ctx);  /* the readers so far (0: all completed) */
void page_release_at(dhs_ctx *ctx, int32_t page, dhs_ticket t); /* deferred until t (0: now) */
void page_free_now(dhs_ctx *ctx, int32_t page);
/* grows ctx->pairs (the copy list) to hold n pairs, keeping its contents */
dhs_status pairs_reserve(dhs_ctx *ctx, int64_t n);

/* pool.c: handle lookup (NULL + *err on a bad handle) */
request *req_get(const dhs_ctx *ctx, dhs_req r, dhs_status *err);
/* request.c: per-request state release */
/* The rows [first_row, first_row + n_rows) of a source that dhs_write_rows and dhs_tail_locations may
   hand to the engine in this round (one rule for both): DHS_ERR_ROW_RANGE unless the range lies in the
   block (from the committed complete rows to the block's end) and starts no later than the source's
   first row not written yet (no gap of unwritten rows), for any int64 first_row without overflow;
   DHS_ERR_STATE when the tail ring cannot take it (dhs_round_begin made room: never). */
dhs_status block_rows_check(const dhs_ctx *ctx, const request *rq, int32_t source, int64_t first_row, int32_t n_rows);
void request_free_all(dhs_ctx *ctx, request *rq);

/* residency.c: admission, reclaim, repopulation, tail backups (+ dhs_request_import) */
dhs_status res_admit(dhs_ctx *ctx, request *rq);
void res_housekeeping(dhs_ctx *ctx);
dhs_status res_drain(dhs_ctx *ctx);
void res_repopulate(dhs_ctx *ctx);
dhs_status host_ensure(dhs_ctx *ctx, request *rq, int32_t g, src_state *ss, int64_t rows);
/* a span of host rows no request holds any more: kept in the cache when it fits, else freed */
void host_span_release(dhs_ctx *ctx, void *p, size_t bytes);
/* a span (chunk_span != 0 at its first chunk) that a request gives up: kept while another request
   holds it (shared prefix), else host_span_release */
void host_span_put(dhs_ctx *ctx, void *p, size_t bytes);
/* frees every cached span */
void host_cache_drop(dhs_ctx *ctx);
/* all: every committed row (else only backup_due_hi's) */
dhs_status backup_issue(dhs_ctx *ctx, request *rq, int32_t g, int all);
/* the due rows of the round's requests whose positions reached due_n, in one copy (dhs_round_end) */
dhs_status backup_issue_round(dhs_ctx *ctx, const int32_t *accepted);
/* the same requests listed for dhs_background instead (deferral: ctx->bg_called) */
void backup_defer_round(dhs_ctx *ctx, const int32_t *accepted);
/* recomputes rq->due_n from its groups */
void req_due_update(const dhs_ctx *ctx, request *rq);
void backup_complete(dhs_ctx *ctx, request *rq, int32_t g, int force);
/* Makes the ring of group g hold rows up to hi (exclusive). Called only between rounds, or for a request
   outside the round: inside a round a row must not change where it is served. A ring that holds them
   already costs only request.cm (the round begin asks for every group of every request); a short one
   moves tail_lo in tail_room_move (residency.c). DHS_ERR_BACKEND: a backup did not complete, nothing
   moved. */
dhs_status tail_room_move(dhs_ctx *ctx, request *rq, int32_t g, int64_t need);
static inline dhs_status tail_room(dhs_ctx *ctx, request *rq, int32_t g, int64_t hi)
{
    const int64_t need = hi - ctx->cfg.tail_rows;
    int64_t *tail_lo = cm_tail_lo(ctx, rq);
    if (need <= tail_lo[g]) return DHS_OK;
    /* the steady case: the ring's start moves over rows whose host copy completed (request.cm only,
       no group state: at C = 64 x 21 groups every ring moves every round) */
    if (need <= cm_backed_hi(ctx, rq)[g] && !rq->opt_pending) {
        tail_lo[g] = need;
        return DHS_OK;
    }
    return tail_room_move(ctx, rq, g, need);
}
/* residency.c: shared prefixes (dhs_request_open_shared in request.c). sspan_reserve makes room for n
   more shared host spans, sspan_trim frees the empty table; share_back_up completes the parent's host
   copies of its rows below rows_g[g] (per group); share_setup gives the admitted child cq the parent's
   first P positions (the caller closes it on failure) */
dhs_status sspan_reserve(dhs_ctx *ctx, int64_t n);
void sspan_trim(dhs_ctx *ctx);
dhs_status share_back_up(dhs_ctx *ctx, request *rq, const int64_t *rows_g);
dhs_status share_setup(dhs_ctx *ctx, request *pq, request *cq, int32_t slot, int64_t P);
/* puts request slot on housekeeping's work list (no-op when listed) */
void work_add(dhs_ctx *ctx, int32_t slot);

#endif
