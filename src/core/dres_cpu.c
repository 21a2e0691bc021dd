/* dres_cpu.c - the device resolver's specification (dres_spec.h) as plain
 * loops. The CPU backend runs it on its emulated device tier; the CUDA
 * kernels (src/cuda/dres.cu) must make exactly the same decisions, which
 * tests/test_dres*.c check entry by entry and pair by pair. */
#include <string.h>

#include "core/dres_spec.h"

static void set_err(const dres_state *st, int32_t code)
{
    if (*st->err == 0) *st->err = code;
}

/* CLOCK sweep (dres_spec.h): takes up to `need` victims with used != mark,
   32 slots a window like a warp; victims are marked `mark_taken` at once so
   a wrapped sweep never takes one twice. Returns the victims found. */
static int32_t sweep(const dres_state *st, int32_t r, int32_t need, uint32_t mark, uint32_t mark_taken,
                     uint32_t epoch, int32_t *victims, int32_t *taken_prot)
{
    const int32_t B = st->B;
    uint32_t *used = st->used + (int64_t)r * B;
    uint8_t *ref = st->ref + (int64_t)r * B;
    int32_t *meta = st->meta + (int64_t)r * DRES_META;
    int32_t h = meta[DRES_M_HAND], got = 0;
    /* two full passes find every eligible slot: the first clears every bit */
    for (int64_t scanned = 0; got < need && scanned < 2 * (int64_t)B + 32;) {
        int32_t width = B - h < 32 ? B - h : 32;
        uint32_t elig = 0, refd = 0;
        for (int32_t i = 0; i < width; i++) {
            int32_t q = h + i;
            if (!dres_eligible(used[q], mark)) continue;
            if (ref[q]) refd |= 1u << i;
            else elig |= 1u << i;
        }
        int32_t stop;
        int32_t n = dres_sweep_window(elig, width, need - got, &stop);
        for (int32_t i = 0, t = 0; i < width && t < n; i++)
            if ((elig >> i) & 1u) {
                victims[got + t++] = h + i;
                if (used[h + i] == epoch) (*taken_prot)++;
                used[h + i] = mark_taken;
            }
        for (int32_t i = 0; i < stop; i++)
            if ((refd >> i) & 1u) ref[h + i] = 0;
        got += n;
        scanned += stop;
        h = (h + stop) % B;
    }
    meta[DRES_M_HAND] = h;
    return got;
}

/* pairs of slot r: all (si < 0), or those of source si (pair miss * nsrc + si) */
static void copy_pairs(const dres_state *st, int32_t r, int32_t si)
{
    const uint64_t *pr = st->pairs + (int64_t)r * st->spec_width * st->sel_k * st->nsrc * 2;
    const int32_t step = si < 0 ? 1 : st->nsrc;
    for (int32_t i = si < 0 ? 0 : si; i < st->npairs[r]; i += step)
        memcpy((void *)(uintptr_t)pr[2 * i + 1], (const void *)(uintptr_t)pr[2 * i], st->row_stride);
}

void dres_cpu_copy_source(const dres_state *st, const dres_round *rd, int32_t si)
{
    for (int32_t b = 0; b < rd->n_round; b++) copy_pairs(st, dres_rd_slot(rd, b), si);
}

void dres_cpu_resolve(const dres_state *st, const dres_round *rd, int32_t k, const int32_t *sel, int32_t *loc,
                      int payload, int mode)
{
    const int split = (mode & DRES_MODE_SPLIT) != 0, direct = (mode & DRES_MODE_DIRECT) != 0;
    const int32_t N = st->N, B = st->B, nsrc = st->nsrc, KK = st->spec_width;
    const int64_t per_slot = (int64_t)st->spec_width * st->sel_k;
    const uint32_t epoch = rd->epoch;
    st->stats[DRES_S_CALLS]++;
    /* padding rows of the batch: every location -1 */
    for (int32_t b = rd->n_round; b < N; b++)
        for (int32_t si = 0; si < nsrc; si++)
            for (int64_t e = 0; e < (int64_t)KK * k; e++) loc[(((int64_t)si * N + b) * KK) * k + e] = -1;
    for (int32_t b = 0; b < N; b++) st->npairs[b] = 0;
    for (int32_t b = 0; b < rd->n_round; b++) {
        const int32_t r = dres_rd_slot(rd, b), K = dres_rd_K(rd, b);
        const int64_t n = dres_rd_n(rd, b), tail_lo = dres_rd_tail_lo(rd, N, st->group, b);
        const int32_t *selb = sel + (int64_t)b * KK * k;
        int32_t *slot_of = st->slot_of + (int64_t)r * st->max_rows;
        int32_t *row_of = st->row_of + (int64_t)r * B;
        uint32_t *used = st->used + (int64_t)r * B;
        uint8_t *ref = st->ref + (int64_t)r * B;
        int32_t *meta = st->meta + (int64_t)r * DRES_META;
        const uint8_t *opt_ready = st->opt_ready + (int64_t)r * st->max_opt_pages;
        int64_t *code = st->code + (int64_t)r * per_slot;
        int32_t *dmiss = st->dmiss + (int64_t)r * per_slot;
        const int64_t nent = (int64_t)K * k;
        if (meta[DRES_M_PROT_EPOCH] != (int32_t)epoch) {
            meta[DRES_M_PROT_EPOCH] = (int32_t)epoch;
            meta[DRES_M_NPROT] = 0;
        }
        /* 1-3: validate, direct, hot; protect every hit of the union */
        for (int64_t e = 0; e < nent; e++) {
            const int64_t s = selb[e];
            const int32_t v = dres_validate(s, st->m, n, (int32_t)(e / k), st->max_rows);
            if (v == 1) { code[e] = DRES_PAD; continue; }
            if (v != 0) { code[e] = DRES_CODE(DRES_K_BAD, 0); set_err(st, v); continue; }
            int64_t c = dres_direct(s, tail_lo, st->T, st->p, opt_ready, st->max_opt_pages);
            if (c) { code[e] = c; st->stats[DRES_S_DIRECT]++; continue; }
            if (direct) { code[e] = DRES_CODE(DRES_K_BAD, 0); set_err(st, 12); continue; } /* DHS_ERR_STATE */
            c = dres_hot(s, slot_of[s], B);
            code[e] = c;
            if (DRES_KIND(c) == DRES_K_HOT) {
                const int32_t q = (int32_t)DRES_VAL(c);
                if (used[q] != epoch) {
                    used[q] = epoch;
                    meta[DRES_M_NPROT]++;
                }
                ref[q] = 1;
            }
            if (DRES_KIND(c) != DRES_K_MISS) st->stats[DRES_S_HOT]++;
        }
        /* 4a: distinct misses in first-occurrence order (claim mark -2) */
        int32_t nd = 0;
        for (int64_t e = 0; e < nent; e++) {
            if (code[e] < 0 || DRES_KIND(code[e]) != DRES_K_MISS) continue;
            const int64_t s = DRES_VAL(code[e]);
            if (slot_of[s] == -1) {
                slot_of[s] = -2;
                dmiss[nd++] = (int32_t)s;
            }
        }
        st->ndmiss[r] = nd;
        /* 4b: free slots, then CLOCK victims, then staging */
        const int32_t filled = meta[DRES_M_FILLED];
        const int32_t nfree = nd < B - filled ? nd : B - filled;
        for (int32_t i = 0; i < nfree; i++) used[filled + i] = epoch;
        meta[DRES_M_FILLED] = filled + nfree;
        meta[DRES_M_NPROT] += nfree;
        int32_t want = nd - nfree, avail = B - meta[DRES_M_NPROT];
        if (want > avail) want = avail;
        if (want < 0) want = 0;
        int32_t *victims = st->victim + (int64_t)r * per_slot, tp = 0;
        const int32_t nv = want > 0 ? sweep(st, r, want, epoch, epoch, epoch, victims, &tp) : 0;
        meta[DRES_M_NPROT] += nv;
        uint64_t *pairs = st->pairs + (int64_t)r * per_slot * nsrc * 2;
        int32_t np = 0;
        for (int32_t i = 0; i < nd; i++) {
            const int32_t s = dmiss[i];
            int64_t c;
            if (i < nfree + nv) {
                const int32_t q = i < nfree ? filled + i : victims[i - nfree];
                if (i >= nfree && row_of[q] >= 0) slot_of[row_of[q]] = -1;
                row_of[q] = s;
                slot_of[s] = q;
                ref[q] = 1;
                c = DRES_CODE(DRES_K_HOT, q);
            } else {
                const int32_t sidx = meta[DRES_M_NSTAGED];
                if (sidx >= st->stage_rows || st->arena_page[0] < 0 ||
                    (*st->stage_owner != -1 && *st->stage_owner != st->group)) {
                    slot_of[s] = -1;
                    set_err(st, 16); /* DHS_ERR_STAGING */
                    continue;
                }
                *st->stage_owner = st->group;
                meta[DRES_M_NSTAGED] = sidx + 1;
                st->staged_row[(int64_t)r * st->stage_rows + sidx] = s;
                slot_of[s] = B + sidx;
                c = DRES_CODE(DRES_K_STAGE, sidx);
                st->stats[DRES_S_STAGED]++;
            }
            st->stats[DRES_S_MISSES]++;
            for (int32_t si = 0; si < nsrc; si++) {
                pairs[2 * np] = dres_host_row(st, r, si, s);
                pairs[2 * np + 1] = (uint64_t)(uintptr_t)(st->pool + (uint64_t)dres_phys(st, r, si, c) * st->row_stride);
                np++;
            }
        }
        st->npairs[r] = np;
        /* 5: locations per source; misses read their slot from slot_of */
        for (int64_t e = 0; e < (int64_t)KK * k; e++) {
            int64_t c = e < nent ? code[e] : DRES_PAD;
            if (c >= 0 && DRES_KIND(c) == DRES_K_MISS) {
                const int32_t q = slot_of[DRES_VAL(c)];
                c = q < 0 ? DRES_CODE(DRES_K_BAD, 0) : dres_hot(DRES_VAL(c), q, B);
                if (q >= 0) st->stats[DRES_S_HOST]++;
            }
            for (int32_t si = 0; si < nsrc; si++) {
                int32_t *l = loc + (((int64_t)si * N + b) * KK) * k;
                l[e] = c < 0 ? -1 : (int32_t)dres_phys(st, r, si, c);
            }
            if (c >= 0 && DRES_KIND(c) != DRES_K_BAD) st->stats[DRES_S_ENTRIES]++;
        }
    }
    if (payload)
        for (int32_t b = 0; b < rd->n_round; b++) copy_pairs(st, dres_rd_slot(rd, b), split ? 0 : -1);
}

void dres_cpu_promote(const dres_state *st, const dres_round *rd, int payload)
{
    const int32_t B = st->B, nsrc = st->nsrc;
    const int64_t per_slot = (int64_t)st->spec_width * st->sel_k;
    const uint32_t promo = rd->epoch ^ DRES_PROMO_BIT;
    for (int32_t b = 0; b < st->N; b++) st->npairs[b] = 0;
    if (*st->stage_owner == st->group) *st->stage_owner = -1; /* the arenas are free after this pass */
    for (int32_t b = 0; b < rd->n_round; b++) {
        const int32_t r = dres_rd_slot(rd, b);
        int32_t *meta = st->meta + (int64_t)r * DRES_META;
        const int32_t ns = meta[DRES_M_NSTAGED];
        if (ns == 0) continue;
        int32_t *slot_of = st->slot_of + (int64_t)r * st->max_rows;
        int32_t *row_of = st->row_of + (int64_t)r * B;
        uint32_t *used = st->used + (int64_t)r * B;
        uint8_t *ref = st->ref + (int64_t)r * B;
        const int32_t *staged = st->staged_row + (int64_t)r * st->stage_rows;
        for (int32_t i = 0; i < ns; i++) slot_of[staged[i]] = -1;
        const int32_t first = ns > B ? ns - B : 0, npro = ns - first;
        const int32_t filled = meta[DRES_M_FILLED];
        const int32_t nfree = npro < B - filled ? npro : B - filled;
        for (int32_t i = 0; i < nfree; i++) used[filled + i] = promo;
        meta[DRES_M_FILLED] = filled + nfree;
        int32_t *victims = st->victim + (int64_t)r * per_slot, tp = 0;
        const int32_t nv = npro > nfree ? sweep(st, r, npro - nfree, promo, promo, rd->epoch, victims, &tp) : 0;
        /* promoted slots are no longer protected in this round */
        if (meta[DRES_M_PROT_EPOCH] == (int32_t)rd->epoch) meta[DRES_M_NPROT] -= tp;
        uint64_t *pairs = st->pairs + (int64_t)r * per_slot * nsrc * 2;
        int32_t np = 0;
        for (int32_t i = 0; i < nfree + nv; i++) {
            const int32_t sidx = first + i, s = staged[sidx];
            const int32_t q = i < nfree ? filled + i : victims[i - nfree];
            if (i >= nfree && row_of[q] >= 0) slot_of[row_of[q]] = -1;
            row_of[q] = s;
            slot_of[s] = q;
            ref[q] = 1;
            for (int32_t si = 0; si < nsrc; si++) {
                pairs[2 * np] = (uint64_t)(uintptr_t)(st->pool + (uint64_t)dres_phys(st, r, si, DRES_CODE(DRES_K_STAGE, sidx)) * st->row_stride);
                pairs[2 * np + 1] = (uint64_t)(uintptr_t)(st->pool + (uint64_t)dres_phys(st, r, si, DRES_CODE(DRES_K_HOT, q)) * st->row_stride);
                np++;
            }
            st->stats[DRES_S_PROMOTED]++;
        }
        st->npairs[r] = np;
        meta[DRES_M_NSTAGED] = 0;
        if (payload) copy_pairs(st, r, -1);
    }
}

void dres_cpu_reset(const dres_state *st, int32_t r)
{
    for (int64_t i = 0; i < st->max_rows; i++) st->slot_of[(int64_t)r * st->max_rows + i] = -1;
    for (int32_t q = 0; q < st->B; q++) {
        st->row_of[(int64_t)r * st->B + q] = -1;
        st->used[(int64_t)r * st->B + q] = 0;
        st->ref[(int64_t)r * st->B + q] = 0;
    }
    for (int32_t i = 0; i < DRES_META; i++) st->meta[(int64_t)r * DRES_META + i] = 0;
}
