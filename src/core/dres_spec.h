/* dres_spec.h - the device resolver's specification (DESIGN §11).
 *
 * One text for both backends: the state is flat struct-of-arrays (base
 * pointers + strides, no pointer chains), the per-entry rules are the inline
 * functions below, and every decision is fixed by data, not by loop order:
 *
 *   1. validate: an entry s of query j of request b is -1 (padding), or a
 *      row with 0 <= s and (s + 1) * m <= n_b + j + 1 (visible, I3). A bad
 *      entry yields -1 in every source's location vector and sets the error
 *      word (the first error wins; reported by the next host call). It never
 *      reads any table.
 *   2. direct: s >= tail_lo -> tail ring index s mod T; else a ready optional
 *      page (opt_ready[s / p]) -> optional row s.
 *   3. hot: slot_of[s] = q, 0 <= q < B -> hot slot q; q >= B -> staged row
 *      q - B (staged earlier in this round). Every hot slot that any query of
 *      the request selects is protected (used[q] = epoch) BEFORE any victim is
 *      chosen, and its reference bit is set.
 *   4. recover: the distinct misses of the request's union, ordered by their
 *      first occurrence in the flattened [K][k] selection. The i-th distinct
 *      miss takes: the i-th free slot (slots are filled in order: free slot i
 *      is `filled + i`); then the victims in CLOCK order (below); then, when
 *      no unprotected slot is left, staging row n_staged + i' (only while
 *      the staging owner word is -1 or this group: another group's staged
 *      rows hold the arenas until its promotion; else, and when the rows
 *      per slot are used up, the miss yields -1 and DHS_ERR_STAGING). Each distinct
 *      miss is copied once per source; its copy-list entry is
 *      (request b, i, source) in that order.
 *   5. locations: every entry's location per source from its logical code.
 *
 * CLOCK with round epochs (the device policy): a per (request, group) hand
 * sweeps the slots in increasing order, wrapping at B. A slot is skipped
 * when protected this round (used == epoch) or marked in the current
 * promotion pass; otherwise a set reference bit is cleared and the slot
 * skipped, and a clear one makes the slot the next victim. A warp sweeps 32
 * slots at once with the same result (dres_sweep_window): the first `need`
 * eligible slots of the window are victims and only the reference bits of
 * the slots before the last victim taken (or of the whole window, if too few
 * were found) are cleared. The sweep is amortised O(misses): each pass over
 * a slot either takes it or clears its bit; protected slots are counted
 * (n_prot) so a miss never sweeps when none can be a victim.
 *
 * Promotion (group_done, round_end): the last min(n_staged, B) staged rows,
 * in staging order, each take a free slot, else the next CLOCK victim among
 * slots not promoted in this pass (the round's protection is over); their
 * bytes are copied from the arena to the slot; the other staged rows just
 * drop (they keep their host copies). Idempotent: n_staged = 0 does nothing.
 *
 * The CPU backend runs this as loops (dres_cpu.c); the CUDA backend as
 * kernels (src/cuda/dres.cu). tests/test_dres*.c compare the two.
 */
#ifndef DHS_CORE_DRES_SPEC_H
#define DHS_CORE_DRES_SPEC_H

#include <stdint.h>

#ifdef __CUDACC__
#define DHS_HD static __host__ __device__ __forceinline__
#else
#define DHS_HD static inline
#endif

#define DRES_PROMO_BIT 0x80000000u /* used[q] = epoch ^ this: promoted in this pass */
#define DRES_PLAN_BLOCK_ONLY 1     /* dres_state.plan_flags: the CUDA plan kernel's block-only variant (the
                                      previous hit pass, never the few-miss path) */
#define DRES_PLAN_COPY_KERNEL 2    /* dres_state.plan_flags: the few-miss path leaves its rows to the copy kernel (without
                                      it, the library's default, the path copies them itself with payload, not split) */

/* dres_cpu_resolve / backend dres_resolve `mode` bits */
#define DRES_MODE_SPLIT 1  /* copy source 0's recovered rows only; the others follow (the split resolve) */
#define DRES_MODE_DIRECT 2 /* the round cannot miss (dhs_round_may_miss 0): a valid entry that is not served
                              directly is an error (DHS_ERR_STATE, -1 locations), never a hot lookup, so the
                              call stages and copies nothing and needs no promotion */

/* logical location codes: kind in the top 3 bits of a 32-bit value */
enum { DRES_PAD = -1 };
enum { DRES_K_TAIL = 1, DRES_K_OPT = 2, DRES_K_HOT = 3, DRES_K_STAGE = 4, DRES_K_MISS = 5, DRES_K_BAD = 6 };
#define DRES_CODE(kind, v) ((int64_t)(((uint64_t)(kind) << 40) | (uint64_t)(v)))
#define DRES_KIND(c) ((int)((uint64_t)(c) >> 40))
#define DRES_VAL(c) ((int64_t)((uint64_t)(c) & ((((uint64_t)1) << 40) - 1)))

/* per (request slot, group) counters, meta[slot * DRES_META + i] */
enum {
    DRES_M_FILLED = 0,   /* slots [0, filled) have been filled at least once; the rest are free */
    DRES_M_HAND = 1,     /* CLOCK hand */
    DRES_M_PROT_EPOCH = 2,
    DRES_M_NPROT = 3,    /* slots with used == prot_epoch */
    DRES_M_NSTAGED = 4,  /* staged rows this round */
    DRES_META = 8
};

/* per-group counters in dres_state.stats (uint64) */
enum {
    DRES_S_ENTRIES = 0, DRES_S_DIRECT, DRES_S_HOT, DRES_S_HOST, DRES_S_MISSES, DRES_S_STAGED,
    DRES_S_PROMOTED, DRES_S_CALLS, DRES_S_COUNT
};

/* Round descriptor, published by the host at dhs_round_begin (one
   stream-ordered copy), read by every call of the round. Arrays are indexed
   by the round position b (0 <= b < n_round); tail_lo by [group][b]. */
typedef struct dres_round {
    int32_t n_round;
    uint32_t epoch;
    int32_t n_groups;
    int32_t pad_;
    /* followed in memory by: int32 slot[N], int32 K[N], int64 n[N], int64 tail_lo[n_groups][N];
       the offsets below are in bytes from the start of the descriptor */
    int64_t off_slot, off_K, off_n, off_tail_lo;
    int64_t bytes; /* whole descriptor */
    int64_t off_first; /* int64 first[n_groups][N]: the group's committed rows of request b (the block's
                          first row); read only by the tail locations (dres_tail_loc_one) */
} dres_round;

/* The flat state of one group. Pointers are device-tier memory (host memory
   on the CPU backend) unless noted; strides are in elements. */
typedef struct dres_state {
    int32_t group;
    int32_t N;             /* request slots */
    int32_t B, T, p;       /* hot rows, tail rows, page rows */
    int32_t nsrc;          /* sources of the group */
    int32_t m;             /* positions per row */
    int32_t spec_width;    /* queries per request (dhs_config.spec_width) */
    int32_t sel_k;         /* selection length (dhs_config.sel_k) */
    uint32_t row_stride;   /* bytes per pool row (and per host row) */
    int64_t max_rows;      /* slot_of stride */
    int64_t max_opt_pages; /* opt_ready stride; opt_pages stride per source */
    int64_t host_chunk_rows;
    int64_t n_host_chunks; /* chunk-table stride per (slot, source) */
    int32_t stage_rows;    /* staging rows per request slot and arena: K_max * sel_k * the group's
                              OWN/REINDEX calls per round (dhs_sizes.staging_rows_per_slot) */
    int32_t plan_flags;    /* CUDA only, 0 in the library: DRES_PLAN_BLOCK_ONLY makes every request take the
                              block-wide miss path (benchmarks and tests compare the two paths; the
                              decisions are the same) */
    /* hot state (device only) */
    int32_t *slot_of;      /* [N][max_rows] -1 absent, q < B hot, B + i staged index i */
    int32_t *row_of;       /* [N][B] -1 empty */
    uint32_t *used;        /* [N][B] epoch of the last selection (protected iff == epoch) */
    uint8_t *ref;          /* [N][B] CLOCK reference bit */
    int32_t *meta;         /* [N][DRES_META] */
    int32_t *staged_row;   /* [N][stage_rows] */
    /* tables published by the host */
    int32_t *hot_pages;    /* [N][nsrc][B / p] */
    int32_t *tail_pages;   /* [N][nsrc][T / p] */
    int32_t *opt_pages;    /* [N][nsrc][max_opt_pages] physical page or -1 */
    uint8_t *opt_ready;    /* [N][max_opt_pages] 1 = serve from the optional page */
    uint64_t *host_chunks; /* [N][nsrc][n_host_chunks] device-readable addresses of pinned chunks */
    int32_t *arena_page;   /* [nsrc] first page of the arena each source stages into (-1: none) */
    int32_t *src_id;       /* [nsrc] the arch's source index of each source of the group */
    /* scratch and outputs (device) */
    int32_t *dmiss;        /* [N][spec_width * sel_k] distinct misses of the call, first-occurrence order */
    int32_t *ndmiss;       /* [N] */
    int32_t *victim;       /* [N][spec_width * sel_k] victims of the call (scratch) */
    uint64_t *pairs;       /* [N][spec_width * sel_k][nsrc][2] copy list: src, dst byte addresses */
    int32_t *npairs;       /* [N] pairs of request b in the last call (misses * nsrc) */
    int64_t *code;         /* [N][spec_width * sel_k] logical code per entry of the last call */
    uint64_t *stats;       /* [DRES_S_COUNT] */
    int32_t *err;          /* [1] first error as -dhs_status, 0 = none */
    /* pool */
    uint8_t *pool;
    /* staging arena owner, ONE word shared by every group's state: -1 free,
       else the group whose staged rows occupy the arenas. Arenas are assigned
       statically (every group stages into arena_page[0, nsrc)), so a group
       may stage only while the word is -1 or its own id (it then sets it);
       promotion of the owning group sets it back to -1. */
    int32_t *stage_owner;
} dres_state;

/* ------------------------------------------------------------ rules */
/* 1. validation of one entry; 0 = a row to resolve, 1 = padding, else -status */
DHS_HD int32_t dres_validate(int64_t s, int64_t m, int64_t n, int32_t j, int64_t max_rows)
{
    if (s == -1) return 1;
    if (s < 0) return 8;                           /* DHS_ERR_ROW_RANGE */
    /* as the host resolver: a row >= 0 the query cannot see is NOT_VISIBLE, however large (s is an
       int32 selection and m small: no overflow) */
    if ((s + 1) * m > n + j + 1) return 9;         /* DHS_ERR_NOT_VISIBLE */
    if (s >= max_rows) return 8;                   /* never: n + j < max_rows * m (the slot_of bound) */
    return 0;
}

/* 2. direct lookup: the code of a row served without the hot cache, or 0 */
DHS_HD int64_t dres_direct(int64_t s, int64_t tail_lo, int32_t T, int32_t p, const uint8_t *opt_ready_b,
                           int64_t max_opt_pages)
{
    if (s >= tail_lo) return DRES_CODE(DRES_K_TAIL, s % T);
    if (s / p < max_opt_pages && opt_ready_b[s / p]) return DRES_CODE(DRES_K_OPT, s);
    return 0;
}

/* 3. hot lookup from slot_of: hot slot, staged index or miss */
DHS_HD int64_t dres_hot(int64_t s, int32_t q, int32_t B)
{
    if (q < 0) return DRES_CODE(DRES_K_MISS, s);
    if (q >= B) return DRES_CODE(DRES_K_STAGE, q - B);
    return DRES_CODE(DRES_K_HOT, q);
}

/* 5. physical pool row of a code for source si of request slot r */
DHS_HD int64_t dres_phys(const dres_state *st, int32_t r, int32_t si, int64_t code)
{
    const int32_t p = st->p;
    const int64_t v = DRES_VAL(code);
    switch (DRES_KIND(code)) {
    case DRES_K_TAIL:
        return (int64_t)st->tail_pages[((int64_t)r * st->nsrc + si) * (st->T / p) + v / p] * p + v % p;
    case DRES_K_OPT:
        return (int64_t)st->opt_pages[((int64_t)r * st->nsrc + si) * st->max_opt_pages + v / p] * p + v % p;
    case DRES_K_HOT:
        return (int64_t)st->hot_pages[((int64_t)r * st->nsrc + si) * (st->B / p) + v / p] * p + v % p;
    case DRES_K_STAGE:
        return (int64_t)st->arena_page[si] * p + (int64_t)r * st->stage_rows + v;
    default:
        return -1;
    }
}

/* host address of row s of source si of request slot r */
DHS_HD uint64_t dres_host_row(const dres_state *st, int32_t r, int32_t si, int64_t s)
{
    const uint64_t chunk = st->host_chunks[((int64_t)r * st->nsrc + si) * st->n_host_chunks + s / st->host_chunk_rows];
    return chunk + (uint64_t)(s % st->host_chunk_rows) * st->row_stride;
}

/* CLOCK eligibility of a slot: its `used` mark differs from `mark` (the
   round's epoch when resolving: not selected this round; epoch ^
   DRES_PROMO_BIT when promoting: not promoted in this pass). */
DHS_HD int dres_eligible(uint32_t used, uint32_t mark) { return used != mark; }

/* The descriptor layout the library publishes (dres.c): the arrays after the
   header, from N request slots and G groups. The CUDA plan kernel reads
   round position b's fields at these offsets in the same round trip as the
   header and re-reads them from the header's offsets when these differ (a
   descriptor of another layout must not be smaller than this one). */
DHS_HD int64_t dres_rd_layout(int64_t N, int64_t G, int64_t *o_slot, int64_t *o_K, int64_t *o_n, int64_t *o_tl)
{
    int64_t off = ((int64_t)sizeof(dres_round) + 63) & ~(int64_t)63;
    *o_slot = off;
    off += 4 * N;
    *o_K = off;
    off += 4 * N;
    off = (off + 7) & ~(int64_t)7;
    *o_n = off;
    off += 8 * N;
    *o_tl = off;
    return off + 8 * N * G;
}

/* the slot array's offset in the library's layout (dres_rd_layout) */
DHS_HD int64_t dres_rd_off_slot0(void) { return ((int64_t)sizeof(dres_round) + 63) & ~(int64_t)63; }

/* round descriptor fields of round position b */
DHS_HD int32_t dres_rd_slot(const dres_round *rd, int32_t b)
{
    return ((const int32_t *)((const char *)rd + rd->off_slot))[b];
}
DHS_HD int32_t dres_rd_K(const dres_round *rd, int32_t b)
{
    return ((const int32_t *)((const char *)rd + rd->off_K))[b];
}
DHS_HD int64_t dres_rd_n(const dres_round *rd, int32_t b)
{
    return ((const int64_t *)((const char *)rd + rd->off_n))[b];
}
DHS_HD int64_t dres_rd_tail_lo(const dres_round *rd, int32_t N, int32_t g, int32_t b)
{
    return ((const int64_t *)((const char *)rd + rd->off_tail_lo))[(int64_t)g * N + b];
}

/* The tail locations of source si of the group for round position b (dhs_round_tail_locations_device):
   the block's rows [first, ceil((n + K) / m)) at loc[src_id[si] * src_stride + b * req_stride + row -
   first], each the pool row dres_phys gives a tail code (the ring index row % T). One thread does one
   (source, request) pair on CUDA; the CPU backend loops over them. */
DHS_HD void dres_tail_loc_one(const dres_state *st, const dres_round *rd, int32_t si, int32_t b, int32_t req_stride,
                              int64_t src_stride, int32_t *loc)
{
    const int32_t r = dres_rd_slot(rd, b), T = st->T, p = st->p;
    const int64_t first = ((const int64_t *)((const char *)rd + rd->off_first))[(int64_t)st->group * st->N + b];
    const int64_t hi = (dres_rd_n(rd, b) + dres_rd_K(rd, b) + st->m - 1) / st->m;
    const int32_t *tp = st->tail_pages + ((int64_t)r * st->nsrc + si) * (T / p);
    int32_t *out = loc + (int64_t)st->src_id[si] * src_stride + (int64_t)b * req_stride;
    for (int64_t row = first; row < hi; row++) {
        const int32_t t = (int32_t)(row % T);
        out[row - first] = (int32_t)((int64_t)tp[t / p] * p + t % p);
    }
}

/* The page table of source si of the group for round position b (dhs_round_page_tables_device): entry P
   of the block's pages [0, ceil(ceil((n + K) / m) / p)) at tab[src_id[si] * src_stride + b * page_stride + P]
   is the pool page whose row s % p holds row s of logical page P = s / p, for every row s of P a selection
   of the round can name, wherever the round serves that row directly (dres_direct); -1 where it does not
   (a row of P below tail_lo whose optional page is not ready: the hot cache or host serves it). A page
   wholly at or above tail_lo is the tail ring's (the ring index row % T keeps a page's rows on one ring
   page, T a multiple of p); a page with a row below tail_lo is its ready optional page, whose p rows are
   all committed (optional pages are complete pages), so a row of it at or above tail_lo reads the same
   bytes there as in the ring. One thread block does one (source, request) pair on CUDA; the CPU backend
   loops over them. */
DHS_HD int32_t dres_page_entry(const dres_state *st, int32_t r, int32_t si, int64_t P, int64_t tail_lo)
{
    const int32_t p = st->p, tpp = st->T / p;
    if (P * p >= tail_lo) return st->tail_pages[((int64_t)r * st->nsrc + si) * tpp + P % tpp];
    if (P < st->max_opt_pages && st->opt_ready[(int64_t)r * st->max_opt_pages + P])
        return st->opt_pages[((int64_t)r * st->nsrc + si) * st->max_opt_pages + P];
    return -1;
}

/* the block's pages of round position b: ceil(ceil((n + K) / m) / p) */
DHS_HD int64_t dres_page_count(const dres_state *st, const dres_round *rd, int32_t b)
{
    const int64_t hi = (dres_rd_n(rd, b) + dres_rd_K(rd, b) + st->m - 1) / st->m;
    return (hi + st->p - 1) / st->p;
}

/* entries P = first, first + step, ... of the page table of (si, b): the CPU backend takes every entry
   (0, 1), a CUDA block one thread's share */
DHS_HD void dres_page_table_one(const dres_state *st, const dres_round *rd, int32_t si, int32_t b, int32_t page_stride,
                                int64_t src_stride, int32_t *tab, int64_t first, int64_t step)
{
    const int32_t r = dres_rd_slot(rd, b);
    /* never past the run (the host checked the stride against this round; a replayed launch stays inside) */
    const int64_t npb = dres_page_count(st, rd, b), np = npb < page_stride ? npb : page_stride;
    const int64_t tail_lo = dres_rd_tail_lo(rd, st->N, st->group, b);
    int32_t *out = tab + (int64_t)st->src_id[si] * src_stride + (int64_t)b * page_stride;
    for (int64_t P = first; P < np; P += step) out[P] = dres_page_entry(st, r, si, P, tail_lo);
}

/* One window of the CLOCK sweep, as a warp does it: `elig` has bit i set
   when slot hand+i is unprotected with its reference bit clear; `refd` when
   unprotected with the bit set; `width` slots (<= 32) are in the window.
   Returns the number of victims taken (the lowest set bits of elig, at most
   need) and sets *stop to the number of slots consumed: up to and including
   the last victim if `need` were found, else the whole window. Reference
   bits of the consumed slots in `refd` are cleared by the caller. */
DHS_HD int32_t dres_sweep_window(uint32_t elig, int32_t width, int32_t need, int32_t *stop)
{
    const uint32_t wmask = width >= 32 ? 0xffffffffu : ((1u << width) - 1u);
    elig &= wmask;
    int32_t got = 0, last = -1;
    for (int32_t i = 0; i < width && got < need; i++)
        if ((elig >> i) & 1u) { got++; last = i; }
    *stop = got >= need && need > 0 ? last + 1 : width;
    return got;
}

/* The CPU specification (dres_cpu.c); the CUDA kernels mirror it.
   mode DRES_MODE_SPLIT: the call copies source 0's recovered rows only, the
   others follow with dres_cpu_copy_source (the split resolve); without it
   every source's. The copy list is pair miss * nsrc + si either way.
   mode DRES_MODE_DIRECT: see there. */
void dres_cpu_resolve(const dres_state *st, const dres_round *rd, int32_t k, const int32_t *sel, int32_t *loc,
                      int payload, int mode);
/* copies source si's pairs of the last resolve of every request of the round */
void dres_cpu_copy_source(const dres_state *st, const dres_round *rd, int32_t si);
void dres_cpu_promote(const dres_state *st, const dres_round *rd, int payload);
void dres_cpu_reset(const dres_state *st, int32_t slot);

#endif
