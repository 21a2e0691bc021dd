/* test_lstream.c - the layer-streamed prefill scheduler (dev/lstream.c).
 *
 * For every L in 1..80, R in 2..8, several onload_layer_map shapes (all 1, all
 * 0, all 2, all R, random per layer) and 1..3 chunks:
 *   1. an independent checker verifies the rules on the event list: layer 0
 *      always in buffer 0 and nobody else there; one compute and one write-back
 *      per (chunk, layer), a load for every chunk-0 instance and for every
 *      instance whose buffer does not still hold its layer; dependencies name
 *      earlier events; by the happens-before closure of the dependencies:
 *      load -> compute -> write-back, compute(u-1) -> compute(u), a new
 *      occupant's load after the previous occupant's compute AND write-back,
 *      a reload after the same layer's previous write-back; at most R buffers;
 *   2. the CPU executor runs the list in order and in a random order that only
 *      respects the dependencies; host history and activations must equal the
 *      full-residency prefill byte for byte;
 *   3. prefetch really happens: with R >= 3 and depth >= 1 every load of a
 *      later instance is issued before the previous instance's compute; depth 0
 *      issues none early;
 *   4. determinism, argument errors, the executor refusing an order that
 *      breaks a dependency, and the checker catching a dropped dependency.
 * Prints peak device bytes R x layer vs L x layer for a 78-layer example. */
#include "dev/lstream.h"
#include "test_help.h"

typedef struct inst_ev {
    int64_t load, comp, wb;
} inst_ev;

/* returns violations; msg gets the first */
static int check_schedule(const dhs_ls_params *p, const dhs_ls_event *ev, int64_t n, char *msg, size_t cap)
{
    const int32_t L = p->n_layers, R = p->n_buffers, C = p->n_chunks, N = L * C;
    int bad = 0;
    msg[0] = 0;
#define VIOL(...)                                            \
    do {                                                     \
        if (!bad++) snprintf(msg, cap, __VA_ARGS__);         \
    } while (0)
    inst_ev *ie = malloc(sizeof(inst_ev) * (size_t)N);
    int32_t *buf_of = malloc(sizeof(int32_t) * (size_t)N);
    for (int32_t u = 0; u < N; u++) ie[u].load = ie[u].comp = ie[u].wb = -1, buf_of[u] = -1;
    int64_t words = (n + 63) / 64;
    uint64_t *hb = calloc((size_t)(n * words + 1), sizeof(uint64_t)); /* hb[j] bit i: i happens before j */
    for (int64_t j = 0; j < n; j++) {
        const dhs_ls_event *e = &ev[j];
        if (e->chunk < 0 || e->chunk >= C || e->layer < 0 || e->layer >= L || e->buffer < 0 || e->buffer >= R ||
            e->op < 0 || e->op > 2 || e->n_deps < 0 || e->n_deps > DHS_LS_MAX_DEPS) {
            VIOL("event %lld out of range", (long long)j);
            continue;
        }
        int32_t u = e->chunk * L + e->layer;
        if ((e->layer == 0) != (e->buffer == 0)) VIOL("event %lld: layer %d in buffer %d", (long long)j, e->layer, e->buffer);
        if (buf_of[u] >= 0 && buf_of[u] != e->buffer) VIOL("instance %d uses two buffers", u);
        buf_of[u] = e->buffer;
        int64_t *slot = e->op == DHS_LS_LOAD ? &ie[u].load : e->op == DHS_LS_COMPUTE ? &ie[u].comp : &ie[u].wb;
        if (*slot >= 0) VIOL("instance %d: op %d twice", u, e->op);
        *slot = j;
        for (int32_t d = 0; d < e->n_deps; d++) {
            int32_t i = e->deps[d];
            if (i < 0 || i >= j) {
                VIOL("event %lld: dependency %d not earlier", (long long)j, i);
                continue;
            }
            for (int64_t w = 0; w < words; w++) hb[j * words + w] |= hb[(int64_t)i * words + w];
            hb[j * words + i / 64] |= 1ull << (i % 64);
        }
    }
#define HB(a, b) ((a) >= 0 && (b) >= 0 && ((hb[(int64_t)(b)*words + (a) / 64] >> ((a) % 64)) & 1))
    int32_t *last = malloc(sizeof(int32_t) * (size_t)R);
    for (int32_t b = 0; b < R; b++) last[b] = -1;
    for (int32_t u = 0; u < N && bad < 1000; u++) {
        int32_t ch = u / L, l = u % L, b = buf_of[u];
        if (ie[u].comp < 0 || ie[u].wb < 0) {
            VIOL("instance (%d,%d) lacks compute or write-back", ch, l);
            continue;
        }
        if (!HB(ie[u].comp, ie[u].wb)) VIOL("write-back (%d,%d) not after its compute", ch, l);
        if (u > 0 && !HB(ie[u - 1].comp, ie[u].comp)) VIOL("compute (%d,%d) not after the previous compute", ch, l);
        int32_t p = last[b];
        if (ie[u].load >= 0) {
            if (!HB(ie[u].load, ie[u].comp)) VIOL("compute (%d,%d) not after its load", ch, l);
            if (p >= 0 && !(HB(ie[p].comp, ie[u].load) && HB(ie[p].wb, ie[u].load)))
                VIOL("load (%d,%d) into buffer %d before the previous occupant (%d,%d) finished compute+write-back", ch, l, b,
                     p / L, p % L);
            if (ch > 0 && !HB(ie[u - L].wb, ie[u].load)) VIOL("load (%d,%d) before the layer's previous write-back", ch, l);
        } else {
            if (ch == 0) VIOL("instance (0,%d) computes without a load", l);
            else if (p != u - L) VIOL("instance (%d,%d) skips its load but buffer %d holds another layer", ch, l, b);
        }
        last[b] = u;
    }
    free(last);
    free(hb);
    free(ie);
    free(buf_of);
    return bad;
#undef HB
#undef VIOL
}

/* random order respecting the dependencies: repeatedly pick a random ready event */
static void random_topo(const dhs_ls_event *ev, int64_t n, int64_t *order, uint64_t *rng)
{
    uint8_t *done = calloc((size_t)n + 1, 1);
    int64_t *ready = malloc(sizeof(int64_t) * (size_t)(n + 1));
    for (int64_t k = 0; k < n; k++) {
        int64_t nr = 0;
        for (int64_t j = 0; j < n; j++) {
            if (done[j]) continue;
            int ok = 1;
            for (int32_t d = 0; d < ev[j].n_deps; d++) ok &= done[ev[j].deps[d]];
            if (ok) ready[nr++] = j;
            if (nr >= 16) break; /* a window of the first ready events keeps it O(n) per step */
        }
        int64_t j = ready[dhs_rng_below(rng, nr)];
        order[k] = j;
        done[j] = 1;
    }
    free(done);
    free(ready);
}

static int same_bytes(const uint32_t *a, const uint32_t *b, int64_t words) { return memcmp(a, b, sizeof(uint32_t) * (size_t)words) == 0; }

/* The synthetic model is causal: a row's history and final activation do not
   depend on how the prompt is cut into chunks. The TTFT bench relies on it to
   compare a streamed prefill at a larger chunk with full residency at a smaller
   one; here full residency at two chunk sizes (ragged last chunks included) is
   compared on the CPU. */
static void test_chunk_invariance(uint64_t *rng)
{
    long cases = 0;
    for (int it = 0; it < 60; it++) {
        const int32_t L = 1 + (int32_t)dhs_rng_below(rng, 6), W = 1 + (int32_t)dhs_rng_below(rng, 3);
        const int64_t P = 1 + dhs_rng_below(rng, 40), prefix = dhs_rng_below(rng, 4);
        const int64_t c1 = 1 + dhs_rng_below(rng, (uint64_t)P), c2 = 1 + dhs_rng_below(rng, (uint64_t)P);
        dhs_ls_synth a = {L, (int32_t)((P + c1 - 1) / c1), W, (int32_t)dhs_rng_below(rng, 3), prefix, c1, P, 0};
        dhs_ls_synth b = a;
        b.chunk_rows = c2;
        b.n_chunks = (int32_t)((P + c2 - 1) / c2);
        CHECK(dhs_ls_synth_ok(&a) && dhs_ls_synth_ok(&b) && dhs_ls_total_rows(&a) == dhs_ls_total_rows(&b));
        const int64_t lw = dhs_ls_layer_words(&a), T = dhs_ls_total_rows(&a);
        uint32_t *ha = th_alloc(4 * (size_t)(L * lw)), *hb = th_alloc(4 * (size_t)(L * lw)), *bf = th_alloc(4 * (size_t)(L * lw)),
                 *xa = th_alloc(4 * (size_t)(T * W)), *xb = th_alloc(4 * (size_t)(T * W));
        dhs_ls_synth_init_host(&a, ha);
        dhs_ls_synth_init_host(&b, hb);
        memset(xa, 0, 4 * (size_t)(T * W));
        memset(xb, 0xff, 4 * (size_t)(T * W));
        dhs_ls_run_full_cpu(&a, ha, bf, xa);
        dhs_ls_run_full_cpu(&b, hb, bf, xb);
        CHECKF(same_bytes(ha, hb, L * lw), "L %d P %lld chunks %lld vs %lld: history differs", L, (long long)P, (long long)c1,
               (long long)c2);
        CHECKF(same_bytes(xa + prefix * W, xb + prefix * W, P * W), "L %d P %lld chunks %lld vs %lld: activations differ", L,
               (long long)P, (long long)c1, (long long)c2);
        /* every appended row was written (a skipped write-back would leave zeros; a zero word is ~2^-32 per word) */
        int64_t zeros = 0;
        for (int64_t i = 0; i < L * lw; i++) zeros += ha[i] == 0;
        CHECKF(zeros <= L, "L %d P %lld: %lld zero history words", L, (long long)P, (long long)zeros);
        free(ha), free(hb), free(bf), free(xa), free(xb);
        cases++;
    }
    printf("test_lstream: %ld chunk-size pairs: history and activations independent of the chunk size\n", cases);
}

/* the largest chunk allowed by a budget, by brute force from the definition */
static int64_t brute_max_chunk(int64_t budget, int64_t layer, int32_t L, int32_t R, int64_t A, int64_t mult, int64_t max_rows)
{
    int64_t best = -1, hi = budget / (A > 0 ? A : 1) + 2;
    if (max_rows > 0 && hi > max_rows) hi = max_rows;
    for (int64_t c = 1; c <= hi; c++) {
        if (mult > 1 && c % mult != 0 && c != max_rows) continue;
        int64_t nb = R < L ? R : L;
        if (nb * layer + A * c <= budget) best = c;
    }
    return best;
}

static void test_max_chunk(uint64_t *rng)
{
    int64_t c = -7;
    const int64_t MiB = 1 << 20;
    /* the bench's example: 32 layers of 16 MiB, 64 KiB of activations per row,
       budget = full residency at 2048 rows = 32*16 + 2048*64/1024 MiB = 640 MiB */
    const int64_t budget = dhs_ls_prefill_bytes(16 * MiB, 32, 32, 65536, 2048);
    CHECK(budget == 640 * MiB);
    CHECK_ST(dhs_ls_max_chunk(budget, 16 * MiB, 32, 32, 65536, 1024, 65536, &c), DHS_OK); /* exact fit: full residency */
    CHECK(c == 2048);
    CHECK_ST(dhs_ls_max_chunk(budget, 16 * MiB, 32, 4, 65536, 1024, 65536, &c), DHS_OK); /* R = 4: (640 - 64) MiB / 64 KiB */
    CHECK(c == 9216);
    CHECK(dhs_ls_prefill_bytes(16 * MiB, 32, 4, 65536, 9216) == budget);                /* exactly the budget */
    CHECK_ST(dhs_ls_max_chunk(budget - 1, 16 * MiB, 32, 4, 65536, 1024, 65536, &c), DHS_OK); /* one byte short: a multiple less */
    CHECK(c == 8192);
    CHECK_ST(dhs_ls_max_chunk(budget - 1, 16 * MiB, 32, 4, 65536, 1, 65536, &c), DHS_OK);
    CHECK(c == 9215);
    CHECK_ST(dhs_ls_max_chunk(budget, 16 * MiB, 32, 4, 65536, 1024, 5000, &c), DHS_OK); /* the prompt fits in one chunk */
    CHECK(c == 5000);
    CHECK_ST(dhs_ls_max_chunk(budget, 16 * MiB, 32, 4, 65536, 1024, 9216, &c), DHS_OK);
    CHECK(c == 9216);
    /* R > L counts as L: the same answer as full residency */
    int64_t c_full = -1;
    CHECK_ST(dhs_ls_max_chunk(100 * MiB, 10 * MiB, 3, 3, 4096, 0, 0, &c_full), DHS_OK);
    CHECK_ST(dhs_ls_max_chunk(100 * MiB, 10 * MiB, 3, 8, 4096, 0, 0, &c), DHS_OK);
    CHECK(c == c_full && c == 70 * MiB / 4096);
    CHECK(dhs_ls_prefill_bytes(10 * MiB, 3, 8, 4096, 7) == dhs_ls_prefill_bytes(10 * MiB, 3, 3, 4096, 7));
    /* below the minimum: DHS_ERR_TOO_LARGE, nothing written */
    c = -7;
    CHECK_ST(dhs_ls_max_chunk(4 * MiB - 1, MiB, 8, 4, 1, 0, 0, &c), DHS_ERR_TOO_LARGE);  /* below the layer buffers */
    CHECK_ST(dhs_ls_max_chunk(4 * MiB + 99, MiB, 8, 4, 100, 0, 0, &c), DHS_ERR_TOO_LARGE); /* not one row */
    CHECK_ST(dhs_ls_max_chunk(4 * MiB + 100 * 1023, MiB, 8, 4, 100, 1024, 0, &c), DHS_ERR_TOO_LARGE); /* not one multiple */
    CHECK_ST(dhs_ls_max_chunk(4 * MiB + 100 * 499, MiB, 8, 4, 100, 1024, 500, &c), DHS_ERR_TOO_LARGE); /* not the short prompt */
    CHECK(c == -7);
    CHECK_ST(dhs_ls_max_chunk(4 * MiB + 100, MiB, 8, 4, 100, 0, 0, &c), DHS_OK); /* exactly one row */
    CHECK(c == 1);
    CHECK_ST(dhs_ls_max_chunk(4 * MiB + 100 * 500, MiB, 8, 4, 100, 1024, 500, &c), DHS_OK); /* the short prompt, exactly */
    CHECK(c == 500);
    CHECK_ST(dhs_ls_max_chunk(0, 0, 1, 2, 1, 0, 0, &c), DHS_ERR_TOO_LARGE); /* zero budget */
    /* overflow: the layer buffers alone pass 2^63 */
    c = -7;
    CHECK_ST(dhs_ls_max_chunk(INT64_MAX, INT64_MAX / 3, 8, 4, 1, 0, 0, &c), DHS_ERR_TOO_LARGE);
    CHECK(c == -7 && dhs_ls_prefill_bytes(INT64_MAX / 3, 8, 4, 1, 0) == -1 && dhs_ls_prefill_bytes(1, 8, 4, INT64_MAX / 2, 3) == -1);
    CHECK_ST(dhs_ls_max_chunk(INT64_MAX, 0, 8, 4, 1, 0, 0, &c), DHS_OK);
    CHECK(c == INT64_MAX);
    /* argument errors, nothing written */
    c = -7;
    CHECK_ST(dhs_ls_max_chunk(MiB, 1, 4, 4, 1, 0, 0, NULL), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ls_max_chunk(MiB, 1, 0, 4, 1, 0, 0, &c), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ls_max_chunk(MiB, 1, 4, 1, 1, 0, 0, &c), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ls_max_chunk(-1, 1, 4, 4, 1, 0, 0, &c), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ls_max_chunk(MiB, -1, 4, 4, 1, 0, 0, &c), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ls_max_chunk(MiB, 1, 4, 4, 0, 0, 0, &c), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ls_max_chunk(MiB, 1, 4, 4, 1, -1, 0, &c), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ls_max_chunk(MiB, 1, 4, 4, 1, 0, -1, &c), DHS_ERR_INVALID_ARG);
    CHECK(c == -7);
    CHECK(dhs_ls_prefill_bytes(1, 0, 4, 1, 1) == -1 && dhs_ls_prefill_bytes(1, 4, 1, 1, 1) == -1 && dhs_ls_prefill_bytes(1, 4, 4, 1, -1) == -1);
    /* random shapes against the brute-force definition; streaming never gives a smaller chunk */
    long n_ok = 0, n_err = 0;
    for (int it = 0; it < 3000; it++) {
        const int32_t L = 1 + (int32_t)dhs_rng_below(rng, 12), R = 2 + (int32_t)dhs_rng_below(rng, 14);
        const int64_t layer = (int64_t)dhs_rng_below(rng, 300), A = 1 + (int64_t)dhs_rng_below(rng, 40);
        const int64_t mult = (int64_t)dhs_rng_below(rng, 4) == 0 ? 0 : (int64_t)dhs_rng_below(rng, 20);
        const int64_t max_rows = dhs_rng_below(rng, 3) == 0 ? 0 : 1 + (int64_t)dhs_rng_below(rng, 200);
        const int64_t bud = (int64_t)dhs_rng_below(rng, 5000);
        int64_t got = -7;
        dhs_status st = dhs_ls_max_chunk(bud, layer, L, R, A, mult, max_rows, &got);
        const int64_t want = brute_max_chunk(bud, layer, L, R, A, mult, max_rows);
        if (want < 0) {
            CHECKF(st == DHS_ERR_TOO_LARGE && got == -7, "budget %lld layer %lld L %d R %d A %lld mult %lld max %lld: status %d, want TOO_LARGE",
                   (long long)bud, (long long)layer, L, R, (long long)A, (long long)mult, (long long)max_rows, (int)st);
            n_err++;
        } else {
            CHECKF(st == DHS_OK && got == want, "budget %lld layer %lld L %d R %d A %lld mult %lld max %lld: got %lld (status %d), want %lld",
                   (long long)bud, (long long)layer, L, R, (long long)A, (long long)mult, (long long)max_rows, (long long)got, (int)st,
                   (long long)want);
            CHECK(dhs_ls_prefill_bytes(layer, L, R, A, got) <= bud);
            n_ok++;
            int64_t full = -7;
            if (dhs_ls_max_chunk(bud, layer, L, L < 2 ? 2 : L, A, mult, max_rows, &full) == DHS_OK) CHECK(got >= full);
        }
    }
    printf("test_lstream: max chunk: %ld random budgets fit, %ld below the minimum, all equal to the brute-force answer\n", n_ok, n_err);
}

int main(void)
{
    uint64_t rng = th_seed("test_lstream");
    const int32_t LMAX = 80, RMAX = 8, CMAX = 3;
    dhs_ls_event *ev = th_alloc(sizeof(dhs_ls_event) * 3 * LMAX * CMAX), *ev2 = th_alloc(sizeof(dhs_ls_event) * 3 * LMAX * CMAX);
    int64_t *order = th_alloc(sizeof(int64_t) * 3 * LMAX * CMAX);
    int32_t map[80];
    long schedules = 0, runs = 0;
    double scale = th_scale();
    for (int32_t L = 1; L <= LMAX; L++)
        for (int32_t R = 2; R <= RMAX; R++)
            for (int mk = 0; mk < 5; mk++) {
                for (int32_t l = 0; l < L; l++)
                    map[l] = mk == 0 ? 1 : mk == 1 ? 0 : mk == 2 ? 2 : mk == 3 ? R : (int32_t)dhs_rng_below(&rng, R + 2);
                int32_t C = 1 + (int32_t)dhs_rng_below(&rng, CMAX);
                dhs_ls_params p = {L, R, C, mk == 0 && (L & 1) ? NULL : map};
                int64_t n = 0, n2 = 0;
                CHECK_ST(dhs_ls_schedule(&p, ev, 3 * LMAX * CMAX, &n), DHS_OK);
                CHECK(n >= 2 * (int64_t)L * C && n <= dhs_ls_max_events(&p));
                CHECK_ST(dhs_ls_schedule(&p, ev2, 3 * LMAX * CMAX, &n2), DHS_OK);
                CHECK(n == n2 && memcmp(ev, ev2, sizeof(dhs_ls_event) * (size_t)n) == 0);
                char msg[256];
                int v = check_schedule(&p, ev, n, msg, sizeof msg);
                CHECKF(v == 0, "L %d R %d map %d C %d: %d violations: %s", L, R, mk, C, v, msg);
                for (int64_t i = 0; i < n; i++)
                    if (ev[i].buffer != dhs_ls_buffer_of(&p, ev[i].chunk, ev[i].layer)) {
                        CHECKF(0, "event %lld buffer differs from dhs_ls_buffer_of", (long long)i);
                        break;
                    }
                /* prefetch: load(v) before compute(v-1) iff depth >= 1 and R >= 3 (rotating loads) */
                if (mk <= 2 && L >= 2) {
                    int64_t comp_at[3 * 80] = {0}, early = 0, late = 0;
                    for (int64_t i = 0; i < n; i++)
                        if (ev[i].op == DHS_LS_COMPUTE) comp_at[ev[i].chunk * L + ev[i].layer] = i;
                    for (int64_t i = 0; i < n; i++) {
                        int32_t vv = ev[i].chunk * L + ev[i].layer;
                        if (ev[i].op != DHS_LS_LOAD || vv == 0) continue;
                        if (i < comp_at[vv - 1]) early++;
                        else late++;
                    }
                    if (mk == 1) CHECKF(early == 0, "L %d R %d depth 0: %lld loads issued early", L, R, (long long)early);
                    else if (R >= 3) CHECKF(late == 0, "L %d R %d depth %d: %lld loads not prefetched", L, R, mk ? 2 : 1, (long long)late);
                }
                schedules++;
                /* bytes: streamed (list order and a random dependency order) vs full residency */
                if (dhs_rng_below(&rng, 1000) >= (int64_t)(1000 * (scale < 1 ? scale * 3 : 1))) continue;
                dhs_ls_synth m = {L, C, 1 + (int32_t)dhs_rng_below(&rng, 4), (int32_t)dhs_rng_below(&rng, 3), dhs_rng_below(&rng, 5),
                                  1 + dhs_rng_below(&rng, 3), 0, 0};
                if (dhs_rng_below(&rng, 2)) /* a ragged last chunk */
                    m.prompt_rows = (int64_t)(C - 1) * m.chunk_rows + 1 + dhs_rng_below(&rng, (uint64_t)m.chunk_rows);
                CHECK(dhs_ls_synth_ok(&m));
                int64_t lw = dhs_ls_layer_words(&m), T = dhs_ls_total_rows(&m);
                uint32_t *hf = th_alloc(4 * (size_t)(L * lw)), *hs = th_alloc(4 * (size_t)(L * lw)),
                         *bf = th_alloc(4 * (size_t)(L * lw)), *bs = th_alloc(4 * (size_t)(R * lw)),
                         *xf = th_alloc(4 * (size_t)(T * m.row_words)), *xs = th_alloc(4 * (size_t)(T * m.row_words));
                dhs_ls_synth_init_host(&m, hf);
                dhs_ls_run_full_cpu(&m, hf, bf, xf);
                for (int pass = 0; pass < 2; pass++) {
                    dhs_ls_synth_init_host(&m, hs);
                    memset(bs, 0xa5, 4 * (size_t)(R * lw));
                    memset(xs, 0x5a, 4 * (size_t)(T * m.row_words));
                    if (pass) random_topo(ev, n, order, &rng);
                    CHECK_ST(dhs_ls_run_cpu(&m, R, ev, n, pass ? order : NULL, hs, bs, xs), DHS_OK);
                    CHECKF(same_bytes(hf, hs, L * lw), "L %d R %d map %d C %d pass %d: host history differs", L, R, mk, C, pass);
                    int64_t t0 = m.prefix_rows;
                    CHECKF(same_bytes(xf + t0 * m.row_words, xs + t0 * m.row_words, (T - t0) * m.row_words),
                           "L %d R %d map %d C %d pass %d: activations differ", L, R, mk, C, pass);
                    runs++;
                }
                /* x_window: activations hold only the current chunk (what the TTFT bench
                   allocates); history equal, the last chunk's activations equal */
                {
                    dhs_ls_synth mw = m;
                    mw.x_window = 1;
                    const int64_t xw = dhs_ls_x_words(&mw), lc = C - 1, ls = dhs_ls_chunk_start(&m, (int32_t)lc),
                                  ll = dhs_ls_chunk_len(&m, (int32_t)lc);
                    CHECK(xw == m.chunk_rows * m.row_words && ll >= 1 && ls + ll == T);
                    uint32_t *xw_buf = th_alloc(4 * (size_t)xw);
                    dhs_ls_synth_init_host(&mw, hs);
                    memset(bs, 0xa5, 4 * (size_t)(R * lw));
                    memset(xw_buf, 0x5a, 4 * (size_t)xw);
                    random_topo(ev, n, order, &rng);
                    CHECK_ST(dhs_ls_run_cpu(&mw, R, ev, n, order, hs, bs, xw_buf), DHS_OK);
                    CHECKF(same_bytes(hf, hs, L * lw), "L %d R %d map %d C %d window: host history differs", L, R, mk, C);
                    CHECKF(same_bytes(xf + ls * m.row_words, xw_buf, ll * m.row_words),
                           "L %d R %d map %d C %d window: last chunk's activations differ", L, R, mk, C);
                    free(xw_buf);
                    runs++;
                }
                /* the history must depend on what was loaded: a full-residency run
                   with a corrupted prefix row must differ (the test can fail) */
                if (m.prefix_rows > 0 && L >= 2) {
                    dhs_ls_synth_init_host(&m, hs);
                    hs[lw + (m.prefix_rows - 1) * m.row_words] ^= 1u; /* layer 1, last prefix row */
                    memset(xs, 0, 4 * (size_t)(T * m.row_words));
                    dhs_ls_run_full_cpu(&m, hs, bf, xs);
                    int64_t t0 = m.prefix_rows;
                    CHECK(!same_bytes(xf + t0 * m.row_words, xs + t0 * m.row_words, (T - t0) * m.row_words));
                }
                free(hf), free(hs), free(bf), free(bs), free(xf), free(xs);
            }
    printf("test_lstream: %ld schedules checked, %ld streamed executions compared with full residency\n", schedules, runs);

    /* the checker catches a dropped dependency; the executor refuses an order that breaks one */
    {
        dhs_ls_params p = {6, 3, 2, NULL};
        int64_t n = 0;
        CHECK_ST(dhs_ls_schedule(&p, ev, 3 * LMAX * CMAX, &n), DHS_OK);
        char msg[256];
        int64_t victim = -1;
        for (int64_t i = 0; i < n && victim < 0; i++)
            if (ev[i].op == DHS_LS_LOAD && ev[i].n_deps >= 2) victim = i;
        CHECK(victim >= 0);
        if (victim >= 0) {
            dhs_ls_event keep = ev[victim];
            ev[victim].n_deps = 0;
            CHECK(check_schedule(&p, ev, n, msg, sizeof msg) > 0);
            ev[victim] = keep;
        }
        CHECK(check_schedule(&p, ev, n, msg, sizeof msg) == 0);
        dhs_ls_synth m = {6, 2, 2, 0, 3, 2, 0, 0};
        int64_t lw = dhs_ls_layer_words(&m);
        uint32_t *h = th_alloc(4 * (size_t)(6 * lw)), *b = th_alloc(4 * (size_t)(3 * lw)), *x = th_alloc(4 * (size_t)(dhs_ls_total_rows(&m) * 2));
        for (int64_t i = 0; i < n; i++) order[i] = i;
        int64_t c0 = -1, l0 = -1;
        for (int64_t i = 0; i < n; i++) {
            if (ev[i].op == DHS_LS_COMPUTE && ev[i].layer == 1 && c0 < 0) c0 = i;
            if (ev[i].op == DHS_LS_LOAD && ev[i].layer == 1 && l0 < 0) l0 = i;
        }
        order[c0] = l0, order[l0] = c0; /* compute(0,1) before its load */
        dhs_ls_synth_init_host(&m, h);
        CHECK_ST(dhs_ls_run_cpu(&m, 3, ev, n, order, h, b, x), DHS_ERR_STATE);
        for (int64_t i = 0; i < n; i++) order[i] = i;
        order[n - 1] = 0; /* an event twice */
        CHECK_ST(dhs_ls_run_cpu(&m, 3, ev, n, order, h, b, x), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_ls_run_cpu(&m, 2, ev, n, NULL, h, b, x), DHS_ERR_INVALID_ARG); /* buffer 2 out of range */
        /* a prompt that does not need exactly C chunks is refused before anything runs */
        dhs_ls_synth bad_m[3] = {m, m, m};
        bad_m[0].prompt_rows = 2;  /* fits in 1 chunk of 2, but C = 2 */
        bad_m[1].prompt_rows = 5;  /* needs 3 chunks of 2 */
        bad_m[2].prompt_rows = -1;
        for (int i = 0; i < 3; i++) {
            CHECK(!dhs_ls_synth_ok(&bad_m[i]));
            CHECK_ST(dhs_ls_run_cpu(&bad_m[i], 3, ev, n, NULL, h, b, x), DHS_ERR_INVALID_ARG);
        }
        dhs_ls_synth good = m;
        good.prompt_rows = 3; /* chunks of 2 and 1 */
        CHECK(dhs_ls_synth_ok(&good) && dhs_ls_chunk_len(&good, 0) == 2 && dhs_ls_chunk_len(&good, 1) == 1 &&
              dhs_ls_total_rows(&good) == 6 && dhs_ls_chunk_start(&good, 1) == 5);
        free(h), free(b), free(x);
    }
    /* argument errors */
    {
        int64_t n = 0;
        int32_t neg[3] = {1, -1, 1};
        dhs_ls_params bad[] = {{0, 4, 1, NULL}, {4, 1, 1, NULL}, {4, 4, 0, NULL}, {3, 4, 1, neg}};
        for (int i = 0; i < 4; i++) {
            CHECK_ST(dhs_ls_schedule(&bad[i], ev, 3 * LMAX * CMAX, &n), DHS_ERR_INVALID_ARG);
            CHECK(dhs_ls_max_events(&bad[i]) == -1);
        }
        dhs_ls_params ok = {10, 4, 2, NULL};
        CHECK_ST(dhs_ls_schedule(&ok, ev, dhs_ls_max_events(&ok) - 1, &n), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_ls_schedule(&ok, NULL, 100, &n), DHS_ERR_INVALID_ARG);
        CHECK(dhs_ls_buffer_of(&ok, 0, 0) == 0 && dhs_ls_buffer_of(&ok, 0, 1) == 1 && dhs_ls_buffer_of(&ok, 0, 4) == 1);
        CHECK(dhs_ls_buffer_of(&ok, 2, 0) == -1 && dhs_ls_buffer_of(&ok, 0, 10) == -1);
    }
    test_chunk_invariance(&rng);
    test_max_chunk(&rng);
    /* peak device bytes: the seed's 78-layer example (64K tokens x 656-byte rows per layer) */
    {
        int64_t layer_bytes = 65536ll * 656;
        printf("peak device bytes, 78 layers: R=4 %.1f MiB vs full residency %.1f MiB (%.1f%%)\n",
               4.0 * layer_bytes / 1048576.0, 78.0 * layer_bytes / 1048576.0, 100.0 * 4 / 78);
    }
    free(ev);
    free(ev2);
    free(order);
    return th_summary();
}
