/* test_policy.c - the hot-cache replacement policies (src/core/policy.h).
 *
 * Unit level: every policy is driven through dhs_policy_get() with random
 * insert/touch/remove/victim sequences and compared, call by call, with a
 * brute-force reference written independently here (LRU: smallest last
 * access; FIFO: smallest insertion time; LFU: smallest (frequency, last
 * access); CLOCK: a plain second-chance simulation). Crafted scenarios pin the
 * textbook behaviours (FIFO ignores hits, CLOCK's second chance, LFU age ties),
 * protected slots are never chosen and every policy answers -1 when every
 * occupied slot is protected.
 *
 * End to end: the same references predict the hit count of every resolve call
 * of a single-request context (hot-cache path only), for each policy.
 */
#include "dhs_plan.h"
#include "core/policy.h"
#include "test_help.h"

/* ------------------------------------------------------------ reference */
typedef struct {
    dhs_policy pol;
    int32_t B;
    uint8_t in[512];
    uint64_t t_access[512], t_insert[512], freq[512], last[512];
    uint8_t ref[512];
    int32_t hand;
} refpol;

static void ref_init(refpol *r, dhs_policy p, int32_t B)
{
    memset(r, 0, sizeof *r);
    r->pol = p;
    r->B = B;
}

static void ref_insert(refpol *r, int32_t q, uint64_t key)
{
    r->in[q] = 1;
    r->t_access[q] = r->t_insert[q] = key;
    r->freq[q] = 1;
    r->last[q] = key;
    r->ref[q] = 1;
}

static void ref_touch(refpol *r, int32_t q, uint64_t key)
{
    if (!r->in[q]) return;
    r->t_access[q] = key;
    r->freq[q]++;
    r->last[q] = key;
    r->ref[q] = 1;
}

static void ref_remove(refpol *r, int32_t q)
{
    r->in[q] = 0;
    r->ref[q] = 0;
}

static int32_t ref_victim(refpol *r, const uint32_t *prot, uint32_t epoch)
{
    int32_t best = -1;
    switch (r->pol) {
    case DHS_POLICY_LRU:
    case DHS_POLICY_FIFO:
        for (int32_t q = 0; q < r->B; q++) {
            if (!r->in[q] || prot[q] == epoch) continue;
            uint64_t t = r->pol == DHS_POLICY_LRU ? r->t_access[q] : r->t_insert[q];
            uint64_t bt = best < 0 ? 0 : (r->pol == DHS_POLICY_LRU ? r->t_access[best] : r->t_insert[best]);
            if (best < 0 || t < bt) best = q;
        }
        return best;
    case DHS_POLICY_LFU:
        for (int32_t q = 0; q < r->B; q++) {
            if (!r->in[q] || prot[q] == epoch) continue;
            if (best < 0 || r->freq[q] < r->freq[best] || (r->freq[q] == r->freq[best] && r->last[q] < r->last[best])) best = q;
        }
        return best;
    case DHS_POLICY_CLOCK: {
        int any = 0;
        for (int32_t q = 0; q < r->B; q++) any |= r->in[q] && prot[q] != epoch;
        if (!any) {
            /* the hand still sweeps (clearing reference bits of unprotected slots: none) */
            r->hand = (int32_t)((r->hand + 2 * (int64_t)r->B + 1) % r->B);
            return -1;
        }
        for (;;) {
            int32_t q = r->hand;
            r->hand = (r->hand + 1) % r->B;
            if (!r->in[q] || prot[q] == epoch) continue;
            if (r->ref[q]) { r->ref[q] = 0; continue; }
            return q;
        }
    }
    default: return -2;
    }
}

/* ------------------------------------------------------------ under test */
typedef struct {
    const dhs_policy_ops *ops;
    void *st;
} polinst;

static polinst pol_new(dhs_policy p, int32_t B)
{
    polinst pi;
    pi.ops = dhs_policy_get(p);
    pi.st = th_alloc(pi.ops->state_bytes(B));
    pi.ops->init(pi.st, B);
    return pi;
}

/* ------------------------------------------------------------ random differential test */
static void test_random_vs_reference(dhs_policy p, uint64_t seed, int rounds)
{
    uint64_t rng = seed ^ ((uint64_t)p * 0x9e37ull);
    long mismatches = 0, victims = 0, minus_one = 0;
    for (int rep = 0; rep < rounds; rep++) {
        int32_t B = 1 + (int32_t)dhs_rng_below(&rng, rep % 4 == 0 ? 8 : 200);
        polinst pi = pol_new(p, B);
        refpol ref;
        ref_init(&ref, p, B);
        uint32_t *prot = th_alloc(sizeof(uint32_t) * (size_t)B);
        uint32_t epoch = 1;
        uint64_t clock = 1;
        int ops = 50 + (int)dhs_rng_below(&rng, 600);
        for (int o = 0; o < ops; o++) {
            int32_t q = (int32_t)dhs_rng_below(&rng, B);
            int64_t x = dhs_rng_below(&rng, 100);
            if (x < 35) { /* access: hit touches, miss fills (a free slot or the victim) */
                if (ref.in[q]) {
                    pi.ops->touch(pi.st, q, clock);
                    ref_touch(&ref, q, clock);
                } else {
                    pi.ops->insert(pi.st, q, clock);
                    ref_insert(&ref, q, clock);
                }
                clock++;
                if (dhs_rng_below(&rng, 3) == 0) prot[q] = epoch; /* selected this round */
            } else if (x < 45) {
                if (ref.in[q]) { pi.ops->remove(pi.st, q); ref_remove(&ref, q); }
            } else if (x < 50) {
                epoch++; /* a new round: protection lapses */
            } else {
                int32_t v = pi.ops->victim(pi.st, prot, epoch);
                int32_t w = ref_victim(&ref, prot, epoch);
                victims++;
                if (v < 0) minus_one++;
                if (v != w) {
                    if (mismatches++ < 5)
                        printf("  %s B=%d op %d: victim %d, reference %d\n", dhs_policy_str(p), B, o, v, w);
                }
                if (v >= 0) {
                    CHECKF(ref.in[v] && prot[v] != epoch, "%s chose an empty or protected slot %d", dhs_policy_str(p), v);
                    if (dhs_rng_below(&rng, 2)) { /* the resolver's use: evict and refill */
                        pi.ops->remove(pi.st, v);
                        ref_remove(&ref, v);
                        pi.ops->insert(pi.st, v, clock);
                        ref_insert(&ref, v, clock);
                        clock++;
                        prot[v] = epoch;
                    }
                }
            }
        }
        free(prot);
        free(pi.st);
    }
    CHECKF(mismatches == 0, "%s: %ld of %ld victims differ from the brute-force reference", dhs_policy_str(p), mismatches, victims);
    CHECKF(victims > 1000 && minus_one > 0, "%s: workload too weak (%ld victims, %ld all-protected)", dhs_policy_str(p), victims, minus_one);
    printf("%s: %ld victim calls matched the reference (%ld all-protected)\n", dhs_policy_str(p), victims, minus_one);
}

/* ------------------------------------------------------------ crafted scenarios */
static void test_lru_exact(void)
{
    polinst pi = pol_new(DHS_POLICY_LRU, 4);
    uint32_t prot[4] = {0, 0, 0, 0};
    for (int32_t q = 0; q < 4; q++) pi.ops->insert(pi.st, q, (uint64_t)q + 1);
    CHECK(pi.ops->victim(pi.st, prot, 1) == 0);
    pi.ops->touch(pi.st, 0, 10); /* 0 becomes most recent: order 1,2,3,0 */
    CHECK(pi.ops->victim(pi.st, prot, 1) == 1);
    pi.ops->touch(pi.st, 1, 11);
    pi.ops->touch(pi.st, 2, 12);
    CHECK(pi.ops->victim(pi.st, prot, 1) == 3);
    prot[3] = 1; /* protected: the next least recent */
    CHECK(pi.ops->victim(pi.st, prot, 1) == 0);
    CHECK(pi.ops->victim(pi.st, prot, 2) == 3); /* protection is per epoch */
    pi.ops->remove(pi.st, 3);
    CHECK(pi.ops->victim(pi.st, prot, 2) == 0);
    prot[0] = prot[1] = prot[2] = 2;
    CHECK(pi.ops->victim(pi.st, prot, 2) == -1);
    free(pi.st);
}

static void test_fifo_order(void)
{
    polinst pi = pol_new(DHS_POLICY_FIFO, 4);
    uint32_t prot[4] = {0, 0, 0, 0};
    pi.ops->insert(pi.st, 2, 1);
    pi.ops->insert(pi.st, 0, 2);
    pi.ops->insert(pi.st, 3, 3);
    pi.ops->insert(pi.st, 1, 4);
    for (int i = 0; i < 5; i++) pi.ops->touch(pi.st, 2, 10 + (uint64_t)i); /* hits do not matter */
    CHECK(pi.ops->victim(pi.st, prot, 1) == 2);
    pi.ops->remove(pi.st, 2);
    CHECK(pi.ops->victim(pi.st, prot, 1) == 0);
    pi.ops->remove(pi.st, 0);
    pi.ops->insert(pi.st, 0, 20); /* refilled: now the newest */
    CHECK(pi.ops->victim(pi.st, prot, 1) == 3);
    prot[3] = 1;
    CHECK(pi.ops->victim(pi.st, prot, 1) == 1);
    prot[1] = 1;
    CHECK(pi.ops->victim(pi.st, prot, 1) == 0);
    prot[0] = 1;
    CHECK(pi.ops->victim(pi.st, prot, 1) == -1);
    free(pi.st);
}

static void test_clock_second_chance(void)
{
    polinst pi = pol_new(DHS_POLICY_CLOCK, 4);
    uint32_t prot[4] = {0, 0, 0, 0};
    for (int32_t q = 0; q < 4; q++) pi.ops->insert(pi.st, q, 0);
    /* every slot referenced: one sweep clears all bits, the hand returns to 0 */
    CHECK(pi.ops->victim(pi.st, prot, 1) == 0);
    pi.ops->remove(pi.st, 0);
    pi.ops->insert(pi.st, 0, 0); /* referenced again */
    pi.ops->touch(pi.st, 1, 0);  /* second chance for 1 */
    /* hand at 1: 1 is referenced (cleared, skipped), 2 is not: victim 2 */
    CHECK(pi.ops->victim(pi.st, prot, 1) == 2);
    /* hand at 3: not referenced */
    CHECK(pi.ops->victim(pi.st, prot, 1) == 3);
    /* protected 3 and 0 (referenced): from hand 0 -> 0 protected, 1 (cleared earlier) chosen */
    prot[0] = prot[3] = 1;
    CHECK(pi.ops->victim(pi.st, prot, 1) == 1);
    prot[1] = prot[2] = 1;
    CHECK(pi.ops->victim(pi.st, prot, 1) == -1);
    /* an empty cache has no victim */
    polinst e = pol_new(DHS_POLICY_CLOCK, 8);
    uint32_t p8[8] = {0};
    CHECK(e.ops->victim(e.st, p8, 1) == -1);
    free(e.st);
    free(pi.st);
}

static void test_lfu_ties(void)
{
    polinst pi = pol_new(DHS_POLICY_LFU, 5);
    uint32_t prot[5] = {0};
    pi.ops->insert(pi.st, 0, 1);
    pi.ops->insert(pi.st, 1, 2);
    pi.ops->insert(pi.st, 2, 3);
    pi.ops->insert(pi.st, 3, 4);
    pi.ops->touch(pi.st, 0, 5); /* 0: freq 2 */
    pi.ops->touch(pi.st, 1, 6);
    pi.ops->touch(pi.st, 1, 7); /* 1: freq 3 */
    /* 2 and 3 both have freq 1: the older access (2) goes first */
    CHECK(pi.ops->victim(pi.st, prot, 1) == 2);
    pi.ops->touch(pi.st, 2, 8); /* 2: freq 2, last 8; 3 is now the only freq-1 slot */
    CHECK(pi.ops->victim(pi.st, prot, 1) == 3);
    pi.ops->remove(pi.st, 3);
    /* 0 (freq 2, last 5) vs 2 (freq 2, last 8): 0 is older */
    CHECK(pi.ops->victim(pi.st, prot, 1) == 0);
    prot[0] = 1;
    CHECK(pi.ops->victim(pi.st, prot, 1) == 2);
    prot[2] = 1;
    CHECK(pi.ops->victim(pi.st, prot, 1) == 1);
    /* the next round (epoch 2): protection lapsed, entries walked past in
       round 1 compete again with their frequencies intact */
    CHECK(pi.ops->victim(pi.st, prot, 2) == 0);
    pi.ops->insert(pi.st, 4, 9); /* freq 1: the least frequent now */
    CHECK(pi.ops->victim(pi.st, prot, 2) == 4);
    prot[0] = prot[1] = prot[2] = prot[4] = 2;
    CHECK(pi.ops->victim(pi.st, prot, 2) == -1);
    CHECK(pi.ops->victim(pi.st, prot, 3) == 4);
    free(pi.st);
}

static void test_all_protected_and_names(void)
{
    for (int p = 0; p < DHS_POLICY_COUNT_; p++) {
        int32_t B = 16;
        polinst pi = pol_new((dhs_policy)p, B);
        uint32_t prot[16];
        CHECKF(pi.ops->victim(pi.st, (uint32_t[16]){0}, 1) == -1, "%s: empty cache", dhs_policy_str((dhs_policy)p));
        for (int32_t q = 0; q < B; q++) { pi.ops->insert(pi.st, q, (uint64_t)q + 1); prot[q] = 7; }
        CHECKF(pi.ops->victim(pi.st, prot, 7) == -1, "%s: all protected", dhs_policy_str((dhs_policy)p));
        CHECKF(pi.ops->victim(pi.st, prot, 7) == -1, "%s: all protected, twice", dhs_policy_str((dhs_policy)p));
        prot[11] = 6;
        CHECKF(pi.ops->victim(pi.st, prot, 7) == 11, "%s: the only unprotected slot", dhs_policy_str((dhs_policy)p));
        free(pi.st);
        dhs_policy back;
        CHECK(dhs_policy_parse(dhs_policy_str((dhs_policy)p), &back) == 0 && back == (dhs_policy)p);
        CHECK(strcmp(pi.ops->name, dhs_policy_str((dhs_policy)p)) == 0);
    }
    dhs_policy x = DHS_POLICY_LRU;
    CHECK(dhs_policy_parse("belady", &x) != 0 && x == DHS_POLICY_LRU);
    CHECK(dhs_policy_parse(NULL, &x) != 0);
    CHECK(dhs_policy_get(DHS_POLICY_COUNT_) == NULL);
    CHECK(dhs_policy_get((dhs_policy)-1) == NULL);
    CHECK(strcmp(dhs_policy_str((dhs_policy)99), "unknown") == 0);
}

/* ------------------------------------------------------------ end to end through the resolver */
/* One request, history on host only (resident_first 0: no optional pages), K = 1, selections of
   committed rows below the tail: every entry goes through the hot cache. The reference predicts
   each call's hot hits from the same policy model. */
static void test_end_to_end(dhs_policy p, uint64_t seed)
{
    const int32_t B = 32, k = 24, prefix = 400;
    const uint32_t rb = 32;
    uint64_t rng = seed ^ 0xabcdefull ^ (uint64_t)p;
    dhs_arch arch = dhs_arch_default();
    arch.sources[0].row_bytes = rb;
    dhs_config cfg = dhs_config_default();
    cfg.max_requests = 1;
    cfg.sel_k = k;
    cfg.spec_width = 1;
    cfg.hot_rows = B;
    cfg.tail_rows = 16;
    cfg.page_rows = 8;
    cfg.max_rows = 4096;
    cfg.device_bytes = 64ull * 8 * rb;
    cfg.resident_first = 0;
    cfg.policy = p;
    dhs_backend *be;
    dhs_ctx *ctx;
    CHECK_ST(dhs_backend_cpu_create(NULL, &be), DHS_OK);
    CHECK_ST(dhs_ctx_create(&arch, &cfg, be, &ctx), DHS_OK);
    dhs_req r;
    CHECK_ST(dhs_request_open(ctx, prefix, &r), DHS_OK);
    uint8_t *rows = th_alloc((size_t)(prefix + 1) * rb);
    for (int64_t i = 0; i < prefix; i++) th_fill_row(rows + i * rb, rb, 1, 0, i, 0);
    const void *rp[1] = {rows};
    CHECK_ST(dhs_request_import(ctx, r, prefix, rp, DHS_IMPORT_HOST), DHS_OK);
    CHECK_INV(ctx);
    refpol ref;
    ref_init(&ref, p, B);
    int64_t slot_row[64];
    for (int i = 0; i < 64; i++) slot_row[i] = -1;
    int32_t free_q[64], n_free = B;
    for (int32_t q = 0; q < B; q++) free_q[q] = B - 1 - q;
    uint32_t prot[64] = {0};
    uint32_t epoch = 0;
    uint64_t clock = 0;
    int32_t sel[24], loc[24];
    long bad = 0, total_hits = 0;
    int64_t n = prefix;
    for (int round = 0; round < 300; round++) {
        int32_t one = 1;
        CHECK_ST(dhs_round_begin(ctx, 1, &r, &one), DHS_OK);
        CHECK_INV(ctx);
        epoch++;
        uint8_t row_buf[64] __attribute__((aligned(16)));
        th_fill_row(row_buf, rb, 1, 0, n, 0);
        CHECK_ST(dhs_write_rows(ctx, r, 0, n, 1, row_buf), DHS_OK);
        /* a working set that drifts, with reuse and duplicates */
        int64_t centre = (round * 7) % (n - 60);
        for (int i = 0; i < k; i++) {
            int64_t x = dhs_rng_below(&rng, 10);
            sel[i] = (int32_t)(x < 7 ? centre + dhs_rng_below(&rng, 48) : dhs_rng_below(&rng, n - 20));
            if (x == 9 && i > 0) sel[i] = sel[dhs_rng_below(&rng, i)];
        }
        dhs_stats a, b;
        dhs_get_stats(ctx, &a);
        dhs_resolve_item it = {r, 1, sel, loc};
        CHECK_ST(dhs_resolve(ctx, 0, k, 1, &it), DHS_OK);
        CHECK_INV(ctx);
        dhs_get_stats(ctx, &b);
        /* reference: mirror the resolver's two passes over the request's union:
           pass 1 protects and touches every hit (each occurrence), pass 2 fills
           each distinct miss in selection order (a free slot, else the victim) */
        long hits = 0;
        uint8_t miss1[24] = {0};
        for (int i = 0; i < k; i++) {
            int32_t q = -1;
            for (int32_t s = 0; s < B; s++) if (slot_row[s] == sel[i]) q = s;
            if (q < 0) { miss1[i] = 1; continue; }
            prot[q] = epoch;
            ref_touch(&ref, q, clock++);
            hits++;
        }
        for (int i = 0; i < k; i++) {
            if (!miss1[i]) continue;
            int32_t q = -1;
            for (int32_t s = 0; s < B; s++) if (slot_row[s] == sel[i]) q = s;
            if (q >= 0) continue; /* a duplicate of a miss filled above */
            if (n_free > 0) q = free_q[--n_free];
            else {
                q = ref_victim(&ref, prot, epoch);
                if (q < 0) { bad++; break; }
                ref_remove(&ref, q);
            }
            slot_row[q] = sel[i];
            prot[q] = epoch;
            ref_insert(&ref, q, clock++);
        }
        total_hits += hits;
        if ((long)(b.census_hot - a.census_hot) != hits) {
            if (bad < 5)
                printf("  %s round %d: %ld hot hits, the reference predicts %ld\n", dhs_policy_str(p), round,
                       (long)(b.census_hot - a.census_hot), hits);
            bad++;
        }
        for (int i = 0; i < k; i++) if (!th_loc_holds(ctx, 0, rb, loc[i], 1, sel[i], 0)) bad++;
        int32_t acc = 0;
        CHECK_ST(dhs_round_end(ctx, &acc), DHS_OK);
        CHECK_INV(ctx);
        n++;
    }
    CHECKF(bad == 0, "%s end to end: %ld mismatches with the reference (hits or bytes)", dhs_policy_str(p), bad);
    CHECKF(total_hits > 1000, "%s end to end: only %ld hits", dhs_policy_str(p), total_hits);
    printf("%s end to end: %ld hot hits predicted exactly over 300 rounds\n", dhs_policy_str(p), total_hits);
    free(rows);
    CHECK_ST(dhs_request_close(ctx, r), DHS_OK);
    CHECK_INV(ctx);
    dhs_ctx_destroy(ctx);
    dhs_backend_destroy(be);
}

int main(void)
{
    uint64_t seed = th_seed("test_policy");
    int rounds = (int)(400 * th_scale());
    if (rounds < 60) rounds = 60;
    test_lru_exact();
    test_fifo_order();
    test_clock_second_chance();
    test_lfu_ties();
    test_all_protected_and_names();
    for (int p = 0; p < DHS_POLICY_COUNT_; p++) test_random_vs_reference((dhs_policy)p, seed, rounds);
    for (int p = 0; p < DHS_POLICY_COUNT_; p++) test_end_to_end((dhs_policy)p, seed);
    return th_summary();
}
