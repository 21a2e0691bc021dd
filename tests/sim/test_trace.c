/* test_trace.c - selection-trace format and generator.
 *
 * - round trip: random headers and random lifecycles/selections written and
 *   read back event by event (and again after rewind);
 * - rejection: bad magic, bad version, every truncation length, every single
 *   byte flipped, trailing bytes, semantic errors behind valid checksums, and
 *   the writer refusing bad rounds without writing;
 * - generator: same seed -> identical bytes, other seed -> different bytes;
 *   no duplicate rows within a query, every row visible, sinks present,
 *   padding only for short histories, producer and speculative overlap;
 * - reader throughput (asserted >= 20 M entries/s in optimised, unsanitised builds).
 * Env: DHS_TEST_SEED (else time-based, printed), DHS_TEST_SCALE (iterations).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim/trace.h"
#include "sim/tracegen.h"

#include "test_help.h"
#include "sim/util.h"

/* ---------------------------------------------------------------- rng */
static uint64_t g_rs;
static uint64_t rnd(void) { return dhs_rng_next(&g_rs); }
static int64_t rndi(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static void spit(const char *path, const unsigned char *b, size_t n)
{
    remove(path); /* a new file, not a truncated one: ext4 flushes truncated files on close */
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (n) fwrite(b, 1, n, f);
    fclose(f);
}

/* Reads a whole trace; returns the final status (EOF when clean). */
static dhs_trace_status read_all(const char *path, unsigned flags, char *err, size_t errn)
{
    dhs_trace_reader *r;
    dhs_trace_status st = dhs_trace_reader_open(path, flags, &r, err, errn);
    if (st) return st;
    dhs_trace_event ev;
    while ((st = dhs_trace_next(r, &ev)) == DHS_TRACE_OK) {}
    snprintf(err, errn, "%s", dhs_trace_reader_error(r));
    dhs_trace_reader_close(r);
    return st;
}

/* ---------------------------------------------------------------- script */
typedef struct item_rec {
    uint32_t req;
    int32_t K, A;
    int64_t n_r;
    int32_t *rows; /* groups concatenated: [g][K][k_g] */
} item_rec;

typedef struct ev_rec {
    int kind;
    uint32_t req;
    int64_t prefix;
    int32_t n;
    item_rec *items;
} ev_rec;

typedef struct script {
    dhs_trace_header h;
    ev_rec *ev;
    int32_t n, cap;
} script;

static ev_rec *push(script *s)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->ev = realloc(s->ev, (size_t)s->cap * sizeof *s->ev);
    }
    memset(&s->ev[s->n], 0, sizeof s->ev[0]);
    return &s->ev[s->n++];
}

static void script_free(script *s)
{
    for (int32_t i = 0; i < s->n; i++) {
        for (int32_t j = 0; j < s->ev[i].n; j++) free(s->ev[i].items[j].rows);
        free(s->ev[i].items);
    }
    free(s->ev);
}

static void rand_string(char *b, int maxlen)
{
    int n = (int)rndi(0, maxlen);
    for (int i = 0; i < n; i++) b[i] = (char)rndi(32, 126);
    b[n] = 0;
}

static void random_script(script *s, int rounds)
{
    memset(s, 0, sizeof *s);
    dhs_trace_header *h = &s->h;
    h->n_groups = (int32_t)rndi(1, 3);
    for (int32_t g = 0; g < h->n_groups; g++) h->k[g] = (int32_t)rndi(1, 40);
    h->n_sources = h->n_groups + (int32_t)rndi(0, 3);
    uint32_t gm[8];
    for (int32_t g = 0; g < h->n_groups; g++) gm[g] = (uint32_t)rndi(1, 4);
    for (int32_t x = 0; x < h->n_sources; x++) {
        int32_t g = x < h->n_groups ? x : (int32_t)rndi(0, h->n_groups - 1);
        h->sources[x] = (dhs_trace_source){(uint32_t)rndi(1, 2000), gm[g], g};
    }
    h->n_requests = (int32_t)rndi(1, 6);
    h->k_max = (int32_t)rndi(1, 4);
    h->flags = (uint32_t)rndi(0, 1);
    rand_string(h->name, 20);
    rand_string(h->meta, 100);

    int32_t NR = h->n_requests;
    int state[8] = {0};
    int64_t next_n[8] = {0};
    for (int r = 0; r < rounds; r++) {
        for (int32_t q = 0; q < NR; q++) {
            int32_t id = (int32_t)rndi(0, NR - 1);
            if (state[id] == 0 && rnd() % 3 == 0) {
                ev_rec *e = push(s);
                e->kind = DHS_TRACE_EV_START;
                e->req = (uint32_t)id;
                e->prefix = rnd() % 4 == 0 ? rndi(0, 3) : rndi(0, 5000);
                state[id] = 1;
                next_n[id] = e->prefix;
            }
        }
        /* live requests in random order, random subset */
        int32_t order[8], nl = 0;
        for (int32_t q = 0; q < NR; q++)
            if (state[q] == 1 && rnd() % 4 != 0) order[nl++] = q;
        for (int32_t i = nl - 1; i > 0; i--) {
            int32_t j = (int32_t)rndi(0, i), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        ev_rec *e = push(s);
        e->kind = DHS_TRACE_EV_ROUND;
        e->n = nl;
        e->items = calloc((size_t)(nl ? nl : 1), sizeof *e->items);
        for (int32_t i = 0; i < nl; i++) {
            item_rec *it = &e->items[i];
            it->req = (uint32_t)order[i];
            it->K = (int32_t)rndi(1, h->k_max);
            it->A = (int32_t)rndi(0, it->K - 1);
            it->n_r = next_n[order[i]];
            size_t tot = 0;
            for (int32_t g = 0; g < h->n_groups; g++) tot += (size_t)it->K * (size_t)h->k[g];
            it->rows = malloc(tot * sizeof *it->rows);
            size_t o = 0;
            for (int32_t g = 0; g < h->n_groups; g++) {
                uint32_t m = dhs_trace_group_m(h, g);
                for (int32_t j = 0; j < it->K; j++) {
                    int64_t vis = (it->n_r + j + 1) / m;
                    for (int32_t x = 0; x < h->k[g]; x++)
                        it->rows[o++] = (vis == 0 || rnd() % 5 == 0) ? -1 : (int32_t)rndi(0, vis - 1);
                }
            }
            next_n[order[i]] = it->n_r + it->A + 1;
        }
        for (int32_t q = 0; q < NR; q++)
            if (state[q] == 1 && rnd() % 10 == 0) {
                ev_rec *x = push(s);
                x->kind = DHS_TRACE_EV_END;
                x->req = (uint32_t)q;
                state[q] = 2;
            }
    }
}

static dhs_trace_status write_script(const script *s, const char *path, char *err, size_t errn)
{
    dhs_trace_writer *w;
    dhs_trace_status st = dhs_trace_writer_open(path, &s->h, &w, err, errn);
    if (st) return st;
    for (int32_t i = 0; i < s->n && !st; i++) {
        const ev_rec *e = &s->ev[i];
        if (e->kind == DHS_TRACE_EV_START) st = dhs_trace_write_start(w, e->req, e->prefix);
        else if (e->kind == DHS_TRACE_EV_END) st = dhs_trace_write_end(w, e->req);
        else {
            dhs_trace_item items[8];
            const int32_t *ptrs[8][3];
            for (int32_t j = 0; j < e->n; j++) {
                const item_rec *it = &e->items[j];
                size_t o = 0;
                for (int32_t g = 0; g < s->h.n_groups; g++) {
                    ptrs[j][g] = it->rows + o;
                    o += (size_t)it->K * (size_t)s->h.k[g];
                }
                items[j] = (dhs_trace_item){it->req, it->K, it->n_r, it->A, ptrs[j]};
            }
            st = dhs_trace_write_round(w, e->n, items);
        }
        if (st) snprintf(err, errn, "%s", dhs_trace_writer_error(w));
    }
    dhs_trace_status cs = dhs_trace_writer_close(w);
    return st ? st : cs;
}

/* Compares the reader's events with the script; returns mismatches. */
static int compare_script(const script *s, dhs_trace_reader *r)
{
    int bad = 0;
    const dhs_trace_header *h = dhs_trace_reader_header(r);
    if (h->n_groups != s->h.n_groups || h->n_sources != s->h.n_sources || h->n_requests != s->h.n_requests ||
        h->k_max != s->h.k_max || h->flags != s->h.flags || strcmp(h->name, s->h.name) || strcmp(h->meta, s->h.meta) ||
        h->version != DHS_TRACE_VERSION)
        bad++;
    for (int32_t g = 0; g < h->n_groups; g++) bad += h->k[g] != s->h.k[g];
    for (int32_t x = 0; x < h->n_sources; x++)
        bad += memcmp(&h->sources[x], &s->h.sources[x], sizeof h->sources[x]) != 0;
    dhs_trace_event ev;
    dhs_trace_status st;
    uint64_t round = 0;
    for (int32_t i = 0; i < s->n; i++) {
        const ev_rec *e = &s->ev[i];
        st = dhs_trace_next(r, &ev);
        if (st != DHS_TRACE_OK) {
            fprintf(stderr, "event %d: status %d (%s)\n", i, st, dhs_trace_reader_error(r));
            return bad + 1;
        }
        if ((int)ev.kind != e->kind) return bad + 1;
        if (e->kind == DHS_TRACE_EV_START) bad += ev.req != e->req || ev.prefix != e->prefix;
        else if (e->kind == DHS_TRACE_EV_END) bad += ev.req != e->req;
        else {
            bad += ev.round != round++ || ev.n_items != e->n;
            for (int32_t j = 0; j < e->n && j < ev.n_items; j++) {
                const item_rec *it = &e->items[j];
                const dhs_trace_item *ri = &ev.items[j];
                bad += ri->req != it->req || ri->n_queries != it->K || ri->n_r != it->n_r || ri->accepted != it->A;
                size_t o = 0;
                for (int32_t g = 0; g < h->n_groups; g++) {
                    size_t n = (size_t)it->K * (size_t)h->k[g];
                    bad += memcmp(ri->sel[g], it->rows + o, n * sizeof(int32_t)) != 0;
                    o += n;
                }
            }
        }
    }
    st = dhs_trace_next(r, &ev);
    bad += st != DHS_TRACE_EOF;
    return bad;
}

static void test_roundtrip(int iters)
{
    char path[64];
    th_tmp_path(path, sizeof path, "trace_rt");
    uint64_t entries = 0;
    for (int it = 0; it < iters; it++) {
        script s;
        random_script(&s, (int)rndi(0, 40));
        char err[512];
        dhs_trace_status st = write_script(&s, path, err, sizeof err);
        CHECKF(st == DHS_TRACE_OK, "iteration %d: write failed: %s", it, err);
        dhs_trace_reader *r;
        st = dhs_trace_reader_open(path, 0, &r, err, sizeof err);
        CHECKF(st == DHS_TRACE_OK, "iteration %d: open failed: %s", it, err);
        if (!st) {
            int bad = compare_script(&s, r);
            CHECKF(bad == 0, "iteration %d: %d mismatches after round trip", it, bad);
            entries += dhs_trace_reader_totals(r)->entries;
            CHECKF(dhs_trace_reader_rewind(r) == DHS_TRACE_OK, "rewind");
            bad = compare_script(&s, r);
            CHECKF(bad == 0, "iteration %d: %d mismatches after rewind", it, bad);
            dhs_trace_reader_close(r);
        }
        script_free(&s);
    }
    remove(path);
    printf("round trip: %d random traces, %" PRIu64 " entries, equal\n", iters, entries);
}

/* ---------------------------------------------------------------- rejection */
static void ck_words(const unsigned char *p, size_t n, uint32_t *a, uint32_t *b)
{
    for (size_t i = 0; i + 4 <= n; i += 4) {
        uint32_t w = (uint32_t)p[i] | (uint32_t)p[i + 1] << 8 | (uint32_t)p[i + 2] << 16 | (uint32_t)p[i + 3] << 24;
        *a += w;
        *b += *a;
    }
}
static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Offset of the first ROUND record with at least one item (0 if none). */
static size_t first_round(const unsigned char *b, size_t n)
{
    size_t o = rd32(b + 12);
    while (o + 16 <= n) {
        uint32_t type = rd32(b + o), count = rd32(b + o + 4);
        uint64_t body = rd64(b + o + 8);
        if (type == 2 && count > 0) return o;
        o += 16 + (size_t)body + 8;
    }
    return 0;
}

static void fix_record_check(unsigned char *b, size_t rec)
{
    uint64_t body = rd64(b + rec + 8);
    uint32_t a = 0, c = 0;
    ck_words(b + rec, 16 + (size_t)body, &a, &c);
    wr32(b + rec + 16 + body, a);
    wr32(b + rec + 16 + body + 4, c);
}

static void test_reject(void)
{
    char path[64], bad[64];
    th_tmp_path(path, sizeof path, "trace_ok");
    th_tmp_path(bad, sizeof bad, "trace_bad");
    char err[1024];
    dhs_trace_status st;

    /* a small valid trace from the generator (rounds with items guaranteed) */
    dhs_tracegen_params p = dhs_tracegen_default();
    p.k = 8;
    p.n_requests = 3;
    p.n_rounds = 6;
    p.context = 40;
    p.context_min = 2;
    p.spec = 2;
    p.n_producers = 2;
    p.loc.sinks = 2;
    p.loc.window = 4;
    p.loc.window_full = 2;
    p.loc.clusters = 2;
    p.loc.cluster_radius = 2;
    p.out_len = 5;
    p.batch = 2;
    st = dhs_tracegen_write(&p, path, NULL, err, sizeof err);
    CHECKF(st == DHS_TRACE_OK, "gen small: %s", err);
    size_t n;
    unsigned char *b = slurp(path, &n);
    CHECKF(b && n > 100, "read back");
    if (!b) return;
    CHECKF(read_all(path, 0, err, sizeof err) == DHS_TRACE_EOF, "valid file reads to EOF: %s", err);

    /* bad magic: other file, empty file, short file */
    spit(bad, (const unsigned char *)"NOTATRACE-----------------------------------------------------", 60);
    CHECKF(read_all(bad, 0, err, sizeof err) == DHS_TRACE_ERR_BAD_MAGIC, "other file: %s", err);
    spit(bad, b, 0);
    CHECKF(read_all(bad, 0, err, sizeof err) == DHS_TRACE_ERR_BAD_MAGIC, "empty file: %s", err);
    CHECKF(read_all("/nonexistent/dir/x.dtr", 0, err, sizeof err) == DHS_TRACE_ERR_IO, "missing file: %s", err);

    /* bad version (checked before the header checksum) */
    unsigned char *c = malloc(n);
    memcpy(c, b, n);
    wr32(c + 8, 2);
    spit(bad, c, n);
    st = read_all(bad, 0, err, sizeof err);
    CHECKF(st == DHS_TRACE_ERR_BAD_VERSION, "version 2: %d %s", st, err);
    CHECKF(strstr(err, "version 2") != NULL, "message names the version: %s", err);

    /* every truncation */
    int trunc_bad = 0;
    for (size_t L = 0; L < n; L++) {
        spit(bad, b, L);
        st = read_all(bad, 0, err, sizeof err);
        dhs_trace_status want = L < 8 ? DHS_TRACE_ERR_BAD_MAGIC : DHS_TRACE_ERR_TRUNCATED;
        if (st != want) {
            if (trunc_bad++ < 5) fprintf(stderr, "truncated to %zu of %zu: status %d (%s)\n", L, n, st, err);
        }
    }
    CHECKF(trunc_bad == 0, "%d truncation lengths not reported as truncated", trunc_bad);

    /* every byte flipped */
    int flip_bad = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(c, b, n);
        c[i] ^= (unsigned char)(1u << (i % 8));
        spit(bad, c, n);
        st = read_all(bad, 0, err, sizeof err);
        if (st >= 0) {
            if (flip_bad++ < 5) fprintf(stderr, "flip at byte %zu of %zu not detected (status %d)\n", i, n, st);
        }
    }
    CHECKF(flip_bad == 0, "%d flipped bytes not detected", flip_bad);

    /* trailing bytes */
    unsigned char *t = malloc(n + 4);
    memcpy(t, b, n);
    memset(t + n, 0, 4);
    spit(bad, t, n + 4);
    CHECKF(read_all(bad, 0, err, sizeof err) == DHS_TRACE_ERR_CORRUPT, "trailing bytes: %s", err);
    free(t);

    /* semantic errors behind valid checksums */
    size_t rec = first_round(b, n);
    CHECKF(rec > 0, "found a round");
    if (rec) {
        uint32_t count = rd32(b + rec + 4);
        /* n_r of the first item + 1 */
        memcpy(c, b, n);
        wr32(c + rec + 16 + 8 + 8, rd32(c + rec + 16 + 8 + 8) + 1);
        fix_record_check(c, rec);
        spit(bad, c, n);
        st = read_all(bad, 0, err, sizeof err);
        CHECKF(st == DHS_TRACE_ERR_SEQUENCE, "n_r changed: %d %s", st, err);
        /* first row of the first item made invisible */
        memcpy(c, b, n);
        size_t row0 = rec + 16 + 8 + 24 * (size_t)count;
        wr32(c + row0, 1000000);
        fix_record_check(c, rec);
        spit(bad, c, n);
        st = read_all(bad, 0, err, sizeof err);
        CHECKF(st == DHS_TRACE_ERR_ROW, "invisible row: %d %s", st, err);
        st = read_all(bad, DHS_TRACE_READ_NO_ROW_CHECK, err, sizeof err);
        CHECKF(st == DHS_TRACE_EOF, "invisible row accepted with NO_ROW_CHECK: %d %s", st, err);
        /* two different entries swapped: sum unchanged, sum of sums not */
        memcpy(c, b, n);
        size_t x = row0;
        while (x + 8 <= rec + 16 + (size_t)rd64(b + rec + 8) && rd32(c + x) == rd32(c + x + 4)) x += 4;
        uint32_t w0 = rd32(c + x), w1 = rd32(c + x + 4);
        CHECKF(w0 != w1, "found two different adjacent entries");
        wr32(c + x, w1);
        wr32(c + x + 4, w0);
        spit(bad, c, n);
        st = read_all(bad, DHS_TRACE_READ_NO_ROW_CHECK, err, sizeof err);
        CHECKF(st == DHS_TRACE_ERR_CORRUPT, "swapped entries: %d %s", st, err);
        /* K_r above k_max */
        memcpy(c, b, n);
        wr32(c + rec + 16 + 8 + 4, 99);
        fix_record_check(c, rec);
        spit(bad, c, n);
        st = read_all(bad, 0, err, sizeof err);
        CHECKF(st == DHS_TRACE_ERR_CORRUPT, "K_r 99: %d %s", st, err);
    }
    free(c);
    free(b);

    /* writer refuses bad input and writes nothing */
    dhs_trace_header h = {0};
    h.n_groups = 1;
    h.k[0] = 4;
    h.n_sources = 1;
    h.sources[0] = (dhs_trace_source){576, 1, 0};
    h.n_requests = 2;
    h.k_max = 2;
    dhs_trace_writer *w;
    dhs_trace_header hb = h;
    hb.k[0] = 0;
    CHECKF(dhs_trace_writer_open(path, &hb, &w, err, sizeof err) == DHS_TRACE_ERR_INVALID_ARG && w == NULL, "k = 0");
    hb = h;
    hb.n_sources = 2;
    hb.sources[1] = (dhs_trace_source){576, 4, 0};
    CHECKF(dhs_trace_writer_open(path, &hb, &w, err, sizeof err) == DHS_TRACE_ERR_INVALID_ARG, "mixed m in a group");
    st = dhs_trace_writer_open(path, &h, &w, err, sizeof err);
    CHECKF(st == DHS_TRACE_OK, "open: %s", err);
    if (st) return;
    int32_t rows[8] = {0, 1, 2, -1, 0, 1, 2, 3};
    const int32_t *pp[1] = {rows};
    dhs_trace_item it = {0, 1, 3, 0, pp};
    CHECKF(dhs_trace_write_round(w, 1, &it) == DHS_TRACE_ERR_SEQUENCE, "round before start");
    CHECKF(dhs_trace_write_end(w, 0) == DHS_TRACE_ERR_SEQUENCE, "end before start");
    CHECKF(dhs_trace_write_start(w, 0, 3) == DHS_TRACE_OK, "start");
    CHECKF(dhs_trace_write_start(w, 0, 3) == DHS_TRACE_ERR_SEQUENCE, "start twice");
    CHECKF(dhs_trace_write_start(w, 7, 3) == DHS_TRACE_ERR_SEQUENCE, "id out of range");
    uint64_t bytes = dhs_trace_writer_bytes(w);
    rows[0] = 4; /* n_r = 3: query 0 sees rows 0..3 */
    CHECKF(dhs_trace_write_round(w, 1, &it) == DHS_TRACE_ERR_ROW, "row 4 not visible");
    rows[0] = -2;
    CHECKF(dhs_trace_write_round(w, 1, &it) == DHS_TRACE_ERR_ROW, "row -2");
    rows[0] = 3;
    it.n_r = 4;
    CHECKF(dhs_trace_write_round(w, 1, &it) == DHS_TRACE_ERR_SEQUENCE, "n_r 4 instead of prefix 3");
    it.n_r = 3;
    it.n_queries = 3;
    CHECKF(dhs_trace_write_round(w, 1, &it) == DHS_TRACE_ERR_INVALID_ARG, "K above k_max");
    it.n_queries = 1;
    it.accepted = 1;
    CHECKF(dhs_trace_write_round(w, 1, &it) == DHS_TRACE_ERR_INVALID_ARG, "accepted >= K");
    it.accepted = 0;
    dhs_trace_item two[2] = {it, it};
    CHECKF(dhs_trace_write_round(w, 2, two) == DHS_TRACE_ERR_SEQUENCE, "request twice in a round");
    CHECKF(dhs_trace_writer_bytes(w) == bytes, "nothing written by refused rounds");
    CHECKF(dhs_trace_write_round(w, 1, &it) == DHS_TRACE_OK, "valid round: %s", dhs_trace_writer_error(w));
    it.n_r = 4; /* n_r + A + 1 */
    it.n_queries = 2;
    it.accepted = 1;
    rows[7] = 5; /* query 1 at position 5 sees rows 0..5 */
    CHECKF(dhs_trace_write_round(w, 1, &it) == DHS_TRACE_OK, "spec round: %s", dhs_trace_writer_error(w));
    rows[7] = 8;
    it.n_r = 6; /* query 1 at position 7 sees rows 0..7 */
    CHECKF(dhs_trace_write_round(w, 1, &it) == DHS_TRACE_ERR_ROW, "query 1 selecting row 8 at position 7");
    CHECKF(dhs_trace_write_end(w, 0) == DHS_TRACE_OK, "end");
    CHECKF(dhs_trace_write_end(w, 0) == DHS_TRACE_ERR_SEQUENCE, "end twice");
    CHECKF(dhs_trace_writer_close(w) == DHS_TRACE_OK, "close");
    st = read_all(path, 0, err, sizeof err);
    CHECKF(st == DHS_TRACE_EOF, "hand-written trace reads back: %s", err);
    remove(path);
    remove(bad);
    printf("rejection: magic, version, %zu truncations, %zu flips, trailing bytes, semantics, writer checks\n", n, n);
}

/* ---------------------------------------------------------------- generator */
static int files_equal(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    int eq = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return eq;
}

static dhs_tracegen_params small_params(uint64_t seed)
{
    dhs_tracegen_params p = dhs_tracegen_default();
    p.seed = seed;
    p.k = 256;
    p.n_requests = 6;
    p.batch = 4;
    p.out_len = 40;
    p.n_rounds = 60;
    p.context = 4096;
    p.context_min = 100; /* some requests start with history shorter than k */
    p.spec = 3;
    p.n_producers = 3;
    p.loc.window = 64;
    p.loc.window_full = 8;
    p.loc.clusters = 8;
    p.loc.cluster_radius = 16;
    return p;
}

static void test_gen_determinism(uint64_t seed)
{
    char a[64], b[64], c[64];
    th_tmp_path(a, sizeof a, "trace_ga");
    th_tmp_path(b, sizeof b, "trace_gb");
    th_tmp_path(c, sizeof c, "trace_gc");
    char err[512];
    dhs_tracegen_params p = small_params(seed);
    CHECKF(dhs_tracegen_write(&p, a, NULL, err, sizeof err) == DHS_TRACE_OK, "gen a: %s", err);
    CHECKF(dhs_tracegen_write(&p, b, NULL, err, sizeof err) == DHS_TRACE_OK, "gen b: %s", err);
    p.seed = seed + 1;
    CHECKF(dhs_tracegen_write(&p, c, NULL, err, sizeof err) == DHS_TRACE_OK, "gen c: %s", err);
    CHECKF(files_equal(a, b), "same seed %" PRIu64 " gives different bytes", seed);
    CHECKF(!files_equal(a, c), "seeds %" PRIu64 " and %" PRIu64 " give identical bytes", seed, seed + 1);
    remove(a);
    remove(b);
    remove(c);
    printf("generator determinism: seed %" PRIu64 " twice identical, seed %" PRIu64 " different\n", seed, seed + 1);
}

typedef struct gstats {
    uint64_t queries, dup_queries, invisible, missing_sinks, bad_short, bad_order;
    uint64_t prod_hits, prod_total, spec_hits, spec_total, rows_total;
    double prod_min;
} gstats;

/* Independent checks of a generated trace (read without the reader's row check). */
static void check_generated(const char *path, const dhs_tracegen_params *p, gstats *S)
{
    memset(S, 0, sizeof *S);
    S->prod_min = 1.0;
    char err[512];
    dhs_trace_reader *r;
    dhs_trace_status st = dhs_trace_reader_open(path, DHS_TRACE_READ_NO_ROW_CHECK, &r, err, sizeof err);
    CHECKF(st == DHS_TRACE_OK, "open: %s", err);
    if (st) return;
    const dhs_trace_header *h = dhs_trace_reader_header(r);
    CHECKF(h->k_max == p->spec && h->n_groups == p->n_producers, "header matches params");
    int64_t maxrows = (p->context + (int64_t)p->n_rounds * p->spec + 2) / p->m + 1;
    uint32_t *mark = calloc((size_t)maxrows, sizeof *mark), *m0 = calloc((size_t)maxrows, sizeof *m0);
    uint32_t *pm = calloc((size_t)maxrows, sizeof *pm);
    uint32_t ep = 0, e0 = 0, ep2 = 0;
    dhs_trace_event ev;
    int started = 0, ended = 0;
    while ((st = dhs_trace_next(r, &ev)) == DHS_TRACE_OK) {
        if (ev.kind == DHS_TRACE_EV_START) started++;
        if (ev.kind == DHS_TRACE_EV_END) ended++;
        if (ev.kind != DHS_TRACE_EV_ROUND) continue;
        for (int32_t i = 0; i < ev.n_items; i++) {
            const dhs_trace_item *it = &ev.items[i];
            for (int32_t g = 0; g < h->n_groups; g++)
                for (int32_t j = 0; j < it->n_queries; j++) {
                    const int32_t *q = it->sel[g] + (size_t)j * (size_t)p->k;
                    int64_t V = (it->n_r + j + 1) / p->m;
                    S->queries++;
                    ep++;
                    int dup = 0;
                    int32_t prev = -1;
                    for (int32_t x = 0; x < p->k; x++) {
                        int32_t e = q[x];
                        if (e < 0) continue;
                        S->rows_total++;
                        if (e >= V || e >= maxrows) {
                            S->invisible++;
                            continue;
                        }
                        if (mark[e] == ep) dup = 1;
                        mark[e] = ep;
                        if (p->sorted && e <= prev) S->bad_order++;
                        prev = e;
                    }
                    S->dup_queries += dup;
                    if (V > p->k) {
                        for (int32_t s = 0; s < p->loc.sinks; s++)
                            if (mark[s] != ep) {
                                S->missing_sinks++;
                                break;
                            }
                        for (int32_t x = 0; x < p->k; x++)
                            if (q[x] < 0) {
                                S->bad_short++; /* padding with enough history */
                                break;
                            }
                    } else {
                        for (int32_t x = 0; x < p->k; x++)
                            if (q[x] != (x < V ? x : -1)) {
                                S->bad_short++;
                                break;
                            }
                    }
                    /* overlap with query 0 (speculation) and with the previous producer */
                    if (V > p->k) {
                        if (j == 0) {
                            e0++;
                            for (int32_t x = 0; x < p->k; x++)
                                if (q[x] >= 0 && q[x] < maxrows) m0[q[x]] = e0;
                        } else if ((it->n_r + 1) / p->m > p->k) {
                            for (int32_t x = 0; x < p->k; x++)
                                if (q[x] >= 0 && q[x] < maxrows) {
                                    S->spec_total++;
                                    S->spec_hits += m0[q[x]] == e0;
                                }
                        }
                        if (g > 0) {
                            const int32_t *pq = it->sel[g - 1] + (size_t)j * (size_t)p->k;
                            ep2++;
                            for (int32_t x = 0; x < p->k; x++)
                                if (pq[x] >= 0 && pq[x] < maxrows) pm[pq[x]] = ep2;
                            uint64_t hits = 0;
                            for (int32_t x = 0; x < p->k; x++) hits += q[x] >= 0 && q[x] < maxrows && pm[q[x]] == ep2;
                            S->prod_hits += hits;
                            S->prod_total += (uint64_t)p->k;
                            double o = (double)hits / p->k;
                            if (o < S->prod_min) S->prod_min = o;
                        }
                    }
                }
        }
    }
    CHECKF(st == DHS_TRACE_EOF, "generated trace reads to EOF: %s", dhs_trace_reader_error(r));
    CHECKF(started == ended && started > 0, "every started request ended (%d started, %d ended)", started, ended);
    dhs_trace_reader_close(r);
    free(mark);
    free(m0);
    free(pm);
}

static void test_gen_properties(uint64_t seed)
{
    char path[64];
    th_tmp_path(path, sizeof path, "trace_gp");
    char err[512];
    for (int variant = 0; variant < 4; variant++) {
        dhs_tracegen_params p = small_params(seed + (uint64_t)variant);
        if (variant == 1) p.sorted = 1;
        if (variant == 2) {
            p.m = 4;
            p.context = 8192;
            p.context_min = 500;
        }
        if (variant == 3) { /* history close to k: dense tail path */
            p.context = 300;
            p.context_min = 250;
            p.n_producers = 2;
        }
        CHECKF(dhs_tracegen_write(&p, path, NULL, err, sizeof err) == DHS_TRACE_OK, "gen variant %d: %s", variant, err);
        gstats S;
        check_generated(path, &p, &S);
        double prod = S.prod_total ? (double)S.prod_hits / (double)S.prod_total : 1.0;
        double spec = S.spec_total ? (double)S.spec_hits / (double)S.spec_total : 1.0;
        printf("generator variant %d (m=%u, %s): %" PRIu64 " queries, %" PRIu64
               " rows; producer overlap %.3f (min %.3f), spec overlap %.3f\n",
               variant, p.m, p.sorted ? "sorted" : "score order", S.queries, S.rows_total, prod, S.prod_min, spec);
        CHECKF(S.queries > 0, "variant %d produced queries", variant);
        CHECKF(S.dup_queries == 0, "variant %d: %" PRIu64 " queries with duplicate rows", variant, S.dup_queries);
        CHECKF(S.invisible == 0, "variant %d: %" PRIu64 " rows not visible to their query", variant, S.invisible);
        CHECKF(S.missing_sinks == 0, "variant %d: %" PRIu64 " queries without all sinks", variant, S.missing_sinks);
        CHECKF(S.bad_short == 0, "variant %d: %" PRIu64 " queries with wrong padding", variant, S.bad_short);
        CHECKF(S.bad_order == 0, "variant %d: %" PRIu64 " rows out of order in a sorted trace", variant, S.bad_order);
        if (S.prod_total) {
            CHECKF(prod >= 0.7 && prod <= 1.0, "variant %d: producer overlap %.3f outside [0.7, 1]", variant, prod);
            CHECKF(S.prod_min >= 0.5, "variant %d: a query's producer overlap %.3f", variant, S.prod_min);
        }
        if (S.spec_total) CHECKF(spec >= 0.8, "variant %d: speculative overlap %.3f below 0.8", variant, spec);
    }
    remove(path);
}

/* ---------------------------------------------------------------- speed */
static void test_read_speed(void)
{
    char path[64];
    th_tmp_path(path, sizeof path, "trace_sp");
    char err[512];
    dhs_tracegen_params p = dhs_tracegen_default(); /* 8 x 200 x 2048 = 3.3 M entries */
    dhs_trace_status st = dhs_tracegen_write(&p, path, NULL, err, sizeof err);
    CHECKF(st == DHS_TRACE_OK, "gen: %s", err);
    double best = 0;
    for (int rep = 0; rep < 3 && !st; rep++) {
        dhs_trace_reader *r;
        double t0 = dhs_wall_s();
        if (dhs_trace_reader_open(path, 0, &r, err, sizeof err)) break;
        dhs_trace_event ev;
        uint64_t sum = 0;
        while (dhs_trace_next(r, &ev) == DHS_TRACE_OK)
            if (ev.kind == DHS_TRACE_EV_ROUND)
                for (int32_t i = 0; i < ev.n_items; i++) sum += (uint32_t)ev.items[i].sel[0][0];
        double dt = dhs_wall_s() - t0;
        double rate = (double)dhs_trace_reader_totals(r)->entries / dt / 1e6;
        if (rate > best) best = rate;
        dhs_trace_reader_close(r);
        (void)sum;
    }
    printf("reader: %.1f M entries/s (best of 3; %s)\n", best,
#if defined(__SANITIZE_ADDRESS__) || !defined(__OPTIMIZE__)
           "sanitised or unoptimised build: not asserted"
#else
           "optimised build: asserted >= 20"
#endif
    );
#if !defined(__SANITIZE_ADDRESS__) && defined(__OPTIMIZE__)
    CHECKF(best >= 20.0, "reader streams %.1f M entries/s, below 20", best);
#endif
    remove(path);
}

int main(void)
{
    uint64_t seed = th_seed("test_trace");
    const char *sc = getenv("DHS_TEST_SCALE");
    int scale = sc ? atoi(sc) : 1;
    if (scale < 1) scale = 1;
    g_rs = seed;
    test_roundtrip(200 * scale);
    test_reject();
    test_gen_determinism(seed);
    test_gen_properties(seed);
    test_read_speed();
    if ((int)th_failed) {
        printf("test_trace: %d checks FAILED (seed %" PRIu64 ")\n", (int)th_failed, seed);
        return 1;
    }
    printf("test_trace: all checks passed\n");
    return 0;
}
