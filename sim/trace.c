/* trace.c - writer and streaming reader of the selection-trace format
 * (layout: docs/TRACE.md; API: trace.h).
 *
 * Both sides share one "ledger" of per-request lifecycle state and one
 * round validator, so a file the writer accepts is exactly a file the reader
 * accepts. Fixed-size fields are encoded byte by byte (little-endian); the
 * int32 selection blocks are written and read as raw arrays, which is why
 * this file refuses to build on a big-endian host.
 *
 * Checksum ("sum32x2"): over a record's bytes taken as little-endian uint32
 * words w_1..w_n, a = sum w_i and b = sum of the running a, both mod 2^32.
 * A change of any single word changes a; swapped words change b.
 */
#include "sim/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "sim/util.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "trace.c reads and writes int32 blocks raw: little-endian hosts only"
#endif

/* record types */
enum { REC_START = 1, REC_ROUND = 2, REC_END = 3, REC_TRAILER = 4 };

#define HDR_FIXED 48u     /* bytes before the group table */
#define REC_HDR 16u       /* type, count, body_bytes */
#define REC_CHECK 8u      /* check a, check b */
#define ITEM_BYTES 24u    /* per request in a ROUND */
#define START_BODY 16u
#define END_BODY 8u
#define TRAILER_BODY 48u

/* ---------------------------------------------------------------- helpers */
static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static void put_u64(uint8_t *p, uint64_t v)
{
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}
static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

static uint32_t pad4(uint32_t n) { return (n + 3u) & ~3u; }

typedef struct ck { uint32_t a, b; } ck;

/* nbytes must be a multiple of 4 */
static void ck_update(ck *c, const void *p, size_t nbytes)
{
    const uint8_t *q = p;
    uint32_t a = c->a, b = c->b;
    size_t n = nbytes / 4;
    for (size_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, q + 4 * i, 4);
        a += w;
        b += a;
    }
    c->a = a;
    c->b = b;
}

const char *dhs_trace_status_str(dhs_trace_status s)
{
    switch (s) {
    case DHS_TRACE_OK: return "ok";
    case DHS_TRACE_EOF: return "end of trace";
    case DHS_TRACE_ERR_IO: return "I/O error";
    case DHS_TRACE_ERR_NOMEM: return "out of memory";
    case DHS_TRACE_ERR_BAD_MAGIC: return "not a dhisparse trace (bad magic)";
    case DHS_TRACE_ERR_BAD_VERSION: return "unsupported trace version";
    case DHS_TRACE_ERR_TRUNCATED: return "truncated trace";
    case DHS_TRACE_ERR_CORRUPT: return "corrupted trace";
    case DHS_TRACE_ERR_SEQUENCE: return "request lifecycle violated";
    case DHS_TRACE_ERR_ROW: return "selected row not visible to its query";
    case DHS_TRACE_ERR_INVALID_ARG: return "invalid argument";
    case DHS_TRACE_ERR_STATE: return "writer unusable after an earlier error";
    }
    return "unknown status";
}

/* ---------------------------------------------------------------- header */
uint32_t dhs_trace_group_m(const dhs_trace_header *h, int32_t g)
{
    if (!h || g < 0 || g >= h->n_groups) return 0;
    for (int32_t s = 0; s < h->n_sources && s < DHS_TRACE_MAX_SOURCES; s++)
        if (h->sources[s].group == g) return h->sources[s].m;
    return 0;
}

dhs_trace_status dhs_trace_header_validate(const dhs_trace_header *h, char *err, size_t err_len)
{
    if (!h) {
        dhs_errf(err, err_len, "header is NULL");
        return DHS_TRACE_ERR_INVALID_ARG;
    }
    if (h->n_groups < 1 || h->n_groups > DHS_TRACE_MAX_GROUPS) {
        dhs_errf(err, err_len, "n_groups %d outside 1..%d", h->n_groups, DHS_TRACE_MAX_GROUPS);
        return DHS_TRACE_ERR_INVALID_ARG;
    }
    if (h->n_sources < h->n_groups || h->n_sources > DHS_TRACE_MAX_SOURCES) {
        dhs_errf(err, err_len, "n_sources %d outside n_groups..%d", h->n_sources, DHS_TRACE_MAX_SOURCES);
        return DHS_TRACE_ERR_INVALID_ARG;
    }
    for (int32_t g = 0; g < h->n_groups; g++)
        if (h->k[g] < 1 || h->k[g] > DHS_TRACE_MAX_K) {
            dhs_errf(err, err_len, "k of group %d is %d, outside 1..%d", g, h->k[g], DHS_TRACE_MAX_K);
            return DHS_TRACE_ERR_INVALID_ARG;
        }
    uint32_t gm[DHS_TRACE_MAX_GROUPS] = {0};
    for (int32_t s = 0; s < h->n_sources; s++) {
        const dhs_trace_source *src = &h->sources[s];
        if (src->group < 0 || src->group >= h->n_groups) {
            dhs_errf(err, err_len, "source %d names group %d, outside 0..%d", s, src->group, h->n_groups - 1);
            return DHS_TRACE_ERR_INVALID_ARG;
        }
        if (src->row_bytes == 0 || src->m < 1 || src->m > DHS_TRACE_MAX_M) {
            dhs_errf(err, err_len, "source %d: row_bytes %u / m %u invalid (row_bytes > 0, 1 <= m <= %d)", s,
                src->row_bytes, src->m, DHS_TRACE_MAX_M);
            return DHS_TRACE_ERR_INVALID_ARG;
        }
        if (gm[src->group] && gm[src->group] != src->m) {
            dhs_errf(err, err_len, "sources of group %d have different m (%u, %u)", src->group, gm[src->group], src->m);
            return DHS_TRACE_ERR_INVALID_ARG;
        }
        gm[src->group] = src->m;
    }
    for (int32_t g = 0; g < h->n_groups; g++)
        if (!gm[g]) {
            dhs_errf(err, err_len, "group %d has no source", g);
            return DHS_TRACE_ERR_INVALID_ARG;
        }
    if (h->n_requests < 1 || h->n_requests > DHS_TRACE_MAX_REQUESTS) {
        dhs_errf(err, err_len, "n_requests %d outside 1..%d", h->n_requests, DHS_TRACE_MAX_REQUESTS);
        return DHS_TRACE_ERR_INVALID_ARG;
    }
    if (h->k_max < 1 || h->k_max > DHS_TRACE_MAX_QUERIES) {
        dhs_errf(err, err_len, "k_max %d outside 1..%d", h->k_max, DHS_TRACE_MAX_QUERIES);
        return DHS_TRACE_ERR_INVALID_ARG;
    }
    if (memchr(h->name, 0, sizeof h->name) == NULL || memchr(h->meta, 0, sizeof h->meta) == NULL) {
        dhs_errf(err, err_len, "name or meta not NUL-terminated within its limit");
        return DHS_TRACE_ERR_INVALID_ARG;
    }
    return DHS_TRACE_OK;
}

dhs_trace_status dhs_trace_header_from_arch(dhs_trace_header *h, const dhs_arch *a, int32_t k,
                                            int32_t k_max, int32_t n_requests, const char *name)
{
    if (!h || !a || a->n_groups < 1 || a->n_groups > DHS_TRACE_MAX_GROUPS || a->n_sources < 1 ||
        a->n_sources > DHS_TRACE_MAX_SOURCES || a->n_sources > DHS_MAX_SOURCES)
        return DHS_TRACE_ERR_INVALID_ARG;
    memset(h, 0, sizeof *h);
    h->version = DHS_TRACE_VERSION;
    h->n_groups = a->n_groups;
    for (int32_t g = 0; g < a->n_groups; g++) h->k[g] = k;
    h->n_sources = a->n_sources;
    for (int32_t s = 0; s < a->n_sources; s++) {
        h->sources[s].row_bytes = a->sources[s].row_bytes;
        h->sources[s].m = a->sources[s].m;
        h->sources[s].group = a->sources[s].group;
    }
    h->n_requests = n_requests;
    h->k_max = k_max;
    if (name) snprintf(h->name, sizeof h->name, "%s", name);
    return dhs_trace_header_validate(h, NULL, 0);
}

void dhs_trace_header_to_arch(const dhs_trace_header *h, dhs_arch *a)
{
    memset(a, 0, sizeof *a);
    int32_t ns = h->n_sources < DHS_MAX_SOURCES ? h->n_sources : DHS_MAX_SOURCES;
    a->n_groups = h->n_groups;
    a->n_sources = ns;
    int seen[DHS_TRACE_MAX_GROUPS] = {0};
    for (int32_t s = 0; s < ns; s++) {
        a->sources[s].row_bytes = h->sources[s].row_bytes;
        a->sources[s].m = h->sources[s].m;
        a->sources[s].group = h->sources[s].group;
        if (s < DHS_MAX_CONSUMERS) {
            int32_t g = h->sources[s].group;
            int first = g >= 0 && g < DHS_TRACE_MAX_GROUPS && !seen[g];
            if (g >= 0 && g < DHS_TRACE_MAX_GROUPS) seen[g] = 1;
            a->consumers[s].kind = first ? DHS_CONSUMER_OWN : DHS_CONSUMER_FOLLOW;
            a->consumers[s].source = s;
            a->consumers[s].group = g;
            a->n_consumers = s + 1;
        }
    }
    a->index_key_bytes = 0;
}

/* Header bytes: fixed part, groups, sources, name, meta, check. */
static uint32_t header_size(uint32_t n_groups, uint32_t n_sources, uint32_t name_len, uint32_t meta_len)
{
    return HDR_FIXED + 4u * n_groups + 12u * n_sources + pad4(name_len) + pad4(meta_len) + REC_CHECK;
}

/* ---------------------------------------------------------------- ledger */
/* Per-request lifecycle state shared by writer and reader. */
enum { RQ_NEW = 0, RQ_LIVE = 1, RQ_DONE = 2 };

typedef struct ledger {
    int32_t n;
    uint8_t *state;     /* [n] RQ_* */
    int64_t *next_n;    /* [n] n_r its next round must have */
    uint64_t *seen;     /* [n] validation epoch of the last round naming it */
    uint64_t epoch;
    dhs_trace_totals tot;
} ledger;

static int ledger_init(ledger *L, int32_t n)
{
    memset(L, 0, sizeof *L);
    L->n = n;
    L->state = calloc((size_t)n, 1);
    L->next_n = calloc((size_t)n, sizeof *L->next_n);
    L->seen = calloc((size_t)n, sizeof *L->seen);
    return L->state && L->next_n && L->seen;
}

static void ledger_reset(ledger *L)
{
    memset(L->state, 0, (size_t)L->n);
    memset(L->next_n, 0, (size_t)L->n * sizeof *L->next_n);
    memset(L->seen, 0, (size_t)L->n * sizeof *L->seen);
    L->epoch = 0;
    memset(&L->tot, 0, sizeof L->tot);
}

static void ledger_free(ledger *L)
{
    free(L->state);
    free(L->next_n);
    free(L->seen);
    memset(L, 0, sizeof *L);
}

static dhs_trace_status ledger_start(ledger *L, uint32_t req, int64_t prefix, char *err, size_t len)
{
    if (req >= (uint32_t)L->n) {
        dhs_errf(err, len, "START of request %u, outside 0..%d", req, L->n - 1);
        return DHS_TRACE_ERR_SEQUENCE;
    }
    if (prefix < 0 || prefix >= DHS_TRACE_MAX_POSITIONS) {
        dhs_errf(err, len, "START of request %u with prefix %" PRId64 " outside 0..2^40-1", req, prefix);
        return DHS_TRACE_ERR_SEQUENCE;
    }
    if (L->state[req] != RQ_NEW) {
        dhs_errf(err, len, "request %u started twice", req);
        return DHS_TRACE_ERR_SEQUENCE;
    }
    L->state[req] = RQ_LIVE;
    L->next_n[req] = prefix;
    L->tot.starts++;
    return DHS_TRACE_OK;
}

static dhs_trace_status ledger_end(ledger *L, uint32_t req, char *err, size_t len)
{
    if (req >= (uint32_t)L->n) {
        dhs_errf(err, len, "END of request %u, outside 0..%d", req, L->n - 1);
        return DHS_TRACE_ERR_SEQUENCE;
    }
    if (L->state[req] != RQ_LIVE) {
        dhs_errf(err, len, "END of request %u that is %s", req, L->state[req] == RQ_NEW ? "not started" : "already ended");
        return DHS_TRACE_ERR_SEQUENCE;
    }
    L->state[req] = RQ_DONE;
    L->tot.ends++;
    return DHS_TRACE_OK;
}

/* Rows of one group for one item: K queries of k rows each. Query j may
   select -1 or rows < vis_j = floor((n_r + j + 1) / m). Returns 1 when all
   are visible; else 0 with the first offender in *bj, *bi. */
static int rows_visible(const int32_t *sel, int32_t K, int32_t k, int64_t n_r, uint32_t m, int32_t *bj, int32_t *bi)
{
    for (int32_t j = 0; j < K; j++) {
        int64_t v = (n_r + j + 1) / (int64_t)m;
        uint32_t vis = v > INT32_MAX ? (uint32_t)INT32_MAX : (uint32_t)v;
        const int32_t *q = sel + (size_t)j * (size_t)k;
        uint32_t mx = 0;
        /* (uint32)(e + 1): -1 -> 0, row s -> s + 1, any other negative -> >= 2^31 */
        for (int32_t i = 0; i < k; i++) {
            uint32_t e1 = (uint32_t)q[i] + 1u;
            mx = e1 > mx ? e1 : mx;
        }
        if (mx > vis) {
            for (int32_t i = 0; i < k; i++)
                if ((uint32_t)q[i] + 1u > vis) {
                    *bj = j;
                    *bi = i;
                    return 0;
                }
        }
    }
    return 1;
}

/* Validates a round's items (rows too when check_rows) without changing the
   lifecycle state. K_r / A_r out of range give `range_err` (the writer's
   caller passed a bad value; in a file it is corruption). */
static dhs_trace_status ledger_check_round(ledger *L, const dhs_trace_header *h, uint64_t round, int32_t n,
                                           const dhs_trace_item *items, int check_rows, dhs_trace_status range_err,
                                           char *err, size_t len)
{
    if (n < 0 || n > L->n || (n > 0 && !items)) {
        dhs_errf(err, len, "round %" PRIu64 ": %d items (at most %d requests)", round, n, L->n);
        return n < 0 || (n > 0 && !items) ? DHS_TRACE_ERR_INVALID_ARG : DHS_TRACE_ERR_SEQUENCE;
    }
    uint64_t ep = ++L->epoch;
    for (int32_t i = 0; i < n; i++) {
        const dhs_trace_item *it = &items[i];
        uint32_t rq = it->req;
        if (rq >= (uint32_t)L->n) {
            dhs_errf(err, len, "round %" PRIu64 " item %d: request %u outside 0..%d", round, i, rq, L->n - 1);
            return DHS_TRACE_ERR_SEQUENCE;
        }
        if (L->state[rq] != RQ_LIVE) {
            dhs_errf(err, len, "round %" PRIu64 ": request %u is %s", round, rq,
                L->state[rq] == RQ_NEW ? "not started" : "already ended");
            return DHS_TRACE_ERR_SEQUENCE;
        }
        if (L->seen[rq] == ep) {
            dhs_errf(err, len, "round %" PRIu64 ": request %u appears twice", round, rq);
            return DHS_TRACE_ERR_SEQUENCE;
        }
        L->seen[rq] = ep;
        if (it->n_queries < 1 || it->n_queries > h->k_max) {
            dhs_errf(err, len, "round %" PRIu64 ": request %u has K_r = %d outside 1..k_max=%d", round, rq,
                it->n_queries, h->k_max);
            return range_err;
        }
        if (it->accepted < 0 || it->accepted >= it->n_queries) {
            dhs_errf(err, len, "round %" PRIu64 ": request %u accepted %d outside 0..K_r-1=%d", round, rq, it->accepted,
                it->n_queries - 1);
            return range_err;
        }
        if (it->n_r != L->next_n[rq]) {
            dhs_errf(err, len, "round %" PRIu64 ": request %u has n_r = %" PRId64 ", its lifecycle requires %" PRId64,
                round, rq, it->n_r, L->next_n[rq]);
            return DHS_TRACE_ERR_SEQUENCE;
        }
        if (it->n_r + it->n_queries >= DHS_TRACE_MAX_POSITIONS) {
            dhs_errf(err, len, "round %" PRIu64 ": request %u positions beyond 2^40", round, rq);
            return DHS_TRACE_ERR_SEQUENCE;
        }
        if (!it->sel) {
            dhs_errf(err, len, "round %" PRIu64 ": request %u has no selections (sel == NULL)", round, rq);
            return DHS_TRACE_ERR_INVALID_ARG;
        }
        for (int32_t g = 0; g < h->n_groups; g++) {
            if (!it->sel[g]) {
                dhs_errf(err, len, "round %" PRIu64 ": request %u group %d selection is NULL", round, rq, g);
                return DHS_TRACE_ERR_INVALID_ARG;
            }
            int32_t bj, bi;
            if (check_rows &&
                !rows_visible(it->sel[g], it->n_queries, h->k[g], it->n_r, dhs_trace_group_m(h, g), &bj, &bi)) {
                int64_t vis = (it->n_r + bj + 1) / (int64_t)dhs_trace_group_m(h, g);
                dhs_errf(err, len,
                    "round %" PRIu64 ": request %u group %d query %d entry %d selects row %d, "
                    "visible rows are 0..%" PRId64 " (n_r=%" PRId64 ", m=%u) or -1",
                    round, rq, g, bj, bi, it->sel[g][(size_t)bj * (size_t)h->k[g] + (size_t)bi], vis - 1, it->n_r,
                    dhs_trace_group_m(h, g));
                return DHS_TRACE_ERR_ROW;
            }
        }
    }
    return DHS_TRACE_OK;
}

static void ledger_commit_round(ledger *L, const dhs_trace_header *h, int32_t n, const dhs_trace_item *items)
{
    uint64_t sumk = 0;
    for (int32_t g = 0; g < h->n_groups; g++) sumk += (uint64_t)h->k[g];
    for (int32_t i = 0; i < n; i++) {
        L->next_n[items[i].req] = items[i].n_r + items[i].accepted + 1;
        L->tot.queries += (uint64_t)items[i].n_queries;
        L->tot.entries += (uint64_t)items[i].n_queries * sumk;
    }
    L->tot.items += (uint64_t)n;
    L->tot.rounds++;
}

/* ---------------------------------------------------------------- writer */
struct dhs_trace_writer {
    FILE *f;
    dhs_trace_header h;
    ledger L;
    uint64_t bytes;
    uint64_t sumk;
    dhs_trace_status sticky; /* I/O error: no more records, no trailer */
    char err[512];
};

static dhs_trace_status w_write(dhs_trace_writer *w, const void *p, size_t n, ck *c)
{
    if (n && fwrite(p, 1, n, w->f) != n) {
        dhs_errf(w->err, sizeof w->err, "write failed at byte %" PRIu64 ": %s", w->bytes, strerror(errno));
        w->sticky = DHS_TRACE_ERR_IO;
        return w->sticky;
    }
    if (c) ck_update(c, p, n);
    w->bytes += n;
    return DHS_TRACE_OK;
}

static dhs_trace_status w_check_end(dhs_trace_writer *w, ck *c)
{
    uint8_t b[REC_CHECK];
    put_u32(b, c->a);
    put_u32(b + 4, c->b);
    return w_write(w, b, sizeof b, NULL);
}

/* record header + small fixed body + check */
static dhs_trace_status w_small_record(dhs_trace_writer *w, uint32_t type, const uint8_t *body, uint32_t body_len)
{
    uint8_t hd[REC_HDR];
    put_u32(hd, type);
    put_u32(hd + 4, 0);
    put_u64(hd + 8, body_len);
    ck c = {0, 0};
    dhs_trace_status st;
    if ((st = w_write(w, hd, sizeof hd, &c)) || (st = w_write(w, body, body_len, &c))) return st;
    return w_check_end(w, &c);
}

dhs_trace_status dhs_trace_writer_open(const char *path, const dhs_trace_header *h, dhs_trace_writer **out,
                                       char *err, size_t err_len)
{
    if (out) *out = NULL;
    if (!path || !out) {
        dhs_errf(err, err_len, "path or out is NULL");
        return DHS_TRACE_ERR_INVALID_ARG;
    }
    dhs_trace_status st = dhs_trace_header_validate(h, err, err_len);
    if (st) return st;
    dhs_trace_writer *w = calloc(1, sizeof *w);
    if (!w) {
        dhs_errf(err, err_len, "out of memory");
        return DHS_TRACE_ERR_NOMEM;
    }
    w->h = *h;
    w->h.version = DHS_TRACE_VERSION;
    for (int32_t g = 0; g < h->n_groups; g++) w->sumk += (uint64_t)h->k[g];
    if (!ledger_init(&w->L, h->n_requests)) {
        ledger_free(&w->L);
        free(w);
        dhs_errf(err, err_len, "out of memory");
        return DHS_TRACE_ERR_NOMEM;
    }
    w->f = fopen(path, "wb");
    if (!w->f) {
        dhs_errf(err, err_len, "%s: cannot create: %s", path, strerror(errno));
        ledger_free(&w->L);
        free(w);
        return DHS_TRACE_ERR_IO;
    }
    setvbuf(w->f, NULL, _IOFBF, 1 << 20);

    uint32_t nl = (uint32_t)strlen(h->name), ml = (uint32_t)strlen(h->meta);
    uint32_t hb = header_size((uint32_t)h->n_groups, (uint32_t)h->n_sources, nl, ml);
    uint8_t *b = calloc(hb, 1);
    if (!b) {
        fclose(w->f);
        remove(path);
        ledger_free(&w->L);
        free(w);
        dhs_errf(err, err_len, "out of memory");
        return DHS_TRACE_ERR_NOMEM;
    }
    memcpy(b, DHS_TRACE_MAGIC, 8);
    put_u32(b + 8, DHS_TRACE_VERSION);
    put_u32(b + 12, hb);
    put_u32(b + 16, (uint32_t)h->n_groups);
    put_u32(b + 20, (uint32_t)h->n_sources);
    put_u32(b + 24, (uint32_t)h->n_requests);
    put_u32(b + 28, (uint32_t)h->k_max);
    put_u32(b + 32, h->flags);
    put_u32(b + 36, nl);
    put_u32(b + 40, ml);
    put_u32(b + 44, 0);
    uint32_t o = HDR_FIXED;
    for (int32_t g = 0; g < h->n_groups; g++, o += 4) put_u32(b + o, (uint32_t)h->k[g]);
    for (int32_t s = 0; s < h->n_sources; s++, o += 12) {
        put_u32(b + o, h->sources[s].row_bytes);
        put_u32(b + o + 4, h->sources[s].m);
        put_u32(b + o + 8, (uint32_t)h->sources[s].group);
    }
    memcpy(b + o, h->name, nl);
    o += pad4(nl);
    memcpy(b + o, h->meta, ml);
    o += pad4(ml);
    ck c = {0, 0};
    ck_update(&c, b, o);
    put_u32(b + o, c.a);
    put_u32(b + o + 4, c.b);
    st = w_write(w, b, hb, NULL);
    free(b);
    if (st) {
        dhs_errf(err, err_len, "%s: %s", path, w->err);
        fclose(w->f);
        remove(path);
        ledger_free(&w->L);
        free(w);
        return st;
    }
    *out = w;
    return DHS_TRACE_OK;
}

dhs_trace_status dhs_trace_write_start(dhs_trace_writer *w, uint32_t req, int64_t prefix)
{
    if (!w) return DHS_TRACE_ERR_INVALID_ARG;
    if (w->sticky) return DHS_TRACE_ERR_STATE;
    dhs_trace_status st = ledger_start(&w->L, req, prefix, w->err, sizeof w->err);
    if (st) return st;
    uint8_t body[START_BODY];
    put_u32(body, req);
    put_u32(body + 4, 0);
    put_u64(body + 8, (uint64_t)prefix);
    return w_small_record(w, REC_START, body, sizeof body);
}

dhs_trace_status dhs_trace_write_end(dhs_trace_writer *w, uint32_t req)
{
    if (!w) return DHS_TRACE_ERR_INVALID_ARG;
    if (w->sticky) return DHS_TRACE_ERR_STATE;
    dhs_trace_status st = ledger_end(&w->L, req, w->err, sizeof w->err);
    if (st) return st;
    uint8_t body[END_BODY];
    put_u32(body, req);
    put_u32(body + 4, 0);
    return w_small_record(w, REC_END, body, sizeof body);
}

dhs_trace_status dhs_trace_write_round(dhs_trace_writer *w, int32_t n_items, const dhs_trace_item *items)
{
    if (!w) return DHS_TRACE_ERR_INVALID_ARG;
    if (w->sticky) return DHS_TRACE_ERR_STATE;
    uint64_t round = w->L.tot.rounds;
    dhs_trace_status st = ledger_check_round(&w->L, &w->h, round, n_items, items, 1, DHS_TRACE_ERR_INVALID_ARG,
                                              w->err, sizeof w->err);
    if (st) return st;

    uint64_t data = 0;
    for (int32_t i = 0; i < n_items; i++) data += (uint64_t)items[i].n_queries * w->sumk * 4u;
    uint64_t body = 8u + (uint64_t)ITEM_BYTES * (uint64_t)n_items + data;

    uint8_t hd[REC_HDR + 8];
    put_u32(hd, REC_ROUND);
    put_u32(hd + 4, (uint32_t)n_items);
    put_u64(hd + 8, body);
    put_u64(hd + 16, round);
    ck c = {0, 0};
    if ((st = w_write(w, hd, sizeof hd, &c))) return st;
    for (int32_t i = 0; i < n_items; i++) {
        uint8_t ib[ITEM_BYTES];
        put_u32(ib, items[i].req);
        put_u32(ib + 4, (uint32_t)items[i].n_queries);
        put_u64(ib + 8, (uint64_t)items[i].n_r);
        put_u32(ib + 16, (uint32_t)items[i].accepted);
        put_u32(ib + 20, 0);
        if ((st = w_write(w, ib, sizeof ib, &c))) return st;
    }
    for (int32_t i = 0; i < n_items; i++)
        for (int32_t g = 0; g < w->h.n_groups; g++)
            if ((st = w_write(w, items[i].sel[g], (size_t)items[i].n_queries * (size_t)w->h.k[g] * 4u, &c)))
                return st;
    if ((st = w_check_end(w, &c))) return st;
    ledger_commit_round(&w->L, &w->h, n_items, items);
    return DHS_TRACE_OK;
}

dhs_trace_status dhs_trace_writer_close(dhs_trace_writer *w)
{
    if (!w) return DHS_TRACE_OK;
    dhs_trace_status st = w->sticky;
    if (!st) {
        uint8_t body[TRAILER_BODY];
        const dhs_trace_totals *t = &w->L.tot;
        put_u64(body, t->rounds);
        put_u64(body + 8, t->items);
        put_u64(body + 16, t->queries);
        put_u64(body + 24, t->entries);
        put_u64(body + 32, t->starts);
        put_u64(body + 40, t->ends);
        st = w_small_record(w, REC_TRAILER, body, sizeof body);
    }
    if (fclose(w->f) != 0 && !st) st = DHS_TRACE_ERR_IO;
    ledger_free(&w->L);
    free(w);
    return st;
}

const char *dhs_trace_writer_error(const dhs_trace_writer *w) { return w ? w->err : "writer is NULL"; }
const dhs_trace_totals *dhs_trace_writer_totals(const dhs_trace_writer *w) { return w ? &w->L.tot : NULL; }
uint64_t dhs_trace_writer_bytes(const dhs_trace_writer *w) { return w ? w->bytes : 0; }

/* ---------------------------------------------------------------- reader */
struct dhs_trace_reader {
    FILE *f;
    unsigned flags;
    dhs_trace_header h;
    uint64_t header_bytes;
    int64_t file_size;  /* -1 when not a regular file */
    uint64_t off;       /* bytes consumed */
    uint64_t sumk;
    ledger L;
    uint8_t *buf;       /* current record body + check */
    size_t buf_cap;
    dhs_trace_item *items;
    const int32_t **ptrs; /* [items_cap * n_groups] */
    size_t items_cap;
    dhs_trace_status sticky;
    int done;
    char path[200];
    char err[800];
};

static dhs_trace_status r_fail(dhs_trace_reader *r, dhs_trace_status st, const char *f, ...)
{
    char m[512];
    va_list ap;
    va_start(ap, f);
    vsnprintf(m, sizeof m, f, ap);
    va_end(ap);
    snprintf(r->err, sizeof r->err, "%s: %s: %s", r->path, dhs_trace_status_str(st), m);
    r->sticky = st;
    return st;
}

/* Reads exactly n bytes; 1 on success, 0 on a short read (r->off advanced by what was read). */
static int r_read(dhs_trace_reader *r, void *p, size_t n, size_t *got)
{
    size_t g = n ? fread(p, 1, n, r->f) : 0;
    r->off += g;
    if (got) *got = g;
    return g == n;
}

static int r_reserve(dhs_trace_reader *r, size_t n)
{
    if (n <= r->buf_cap) return 1;
    size_t cap = r->buf_cap ? r->buf_cap : 4096;
    while (cap < n) cap *= 2;
    uint8_t *b = realloc(r->buf, cap);
    if (!b) return 0;
    r->buf = b;
    r->buf_cap = cap;
    return 1;
}

void dhs_trace_reader_close(dhs_trace_reader *r)
{
    if (!r) return;
    if (r->f) fclose(r->f);
    ledger_free(&r->L);
    free(r->buf);
    free(r->items);
    free(r->ptrs);
    free(r);
}

static dhs_trace_status r_open_fail(dhs_trace_reader *r, dhs_trace_reader **out, char *err, size_t err_len)
{
    dhs_trace_status st = r->sticky;
    dhs_errf(err, err_len, "%s", r->err);
    dhs_trace_reader_close(r);
    *out = NULL;
    return st;
}

dhs_trace_status dhs_trace_reader_open(const char *path, unsigned flags, dhs_trace_reader **out, char *err,
                                       size_t err_len)
{
    if (out) *out = NULL;
    if (!path || !out) {
        dhs_errf(err, err_len, "path or out is NULL");
        return DHS_TRACE_ERR_INVALID_ARG;
    }
    dhs_trace_reader *r = calloc(1, sizeof *r);
    if (!r) {
        dhs_errf(err, err_len, "out of memory");
        return DHS_TRACE_ERR_NOMEM;
    }
    r->flags = flags;
    r->file_size = -1;
    snprintf(r->path, sizeof r->path, "%s", path);
    r->f = fopen(path, "rb");
    if (!r->f) {
        r_fail(r, DHS_TRACE_ERR_IO, "cannot open: %s", strerror(errno));
        return r_open_fail(r, out, err, err_len);
    }
    struct stat sb;
    if (fstat(fileno(r->f), &sb) == 0 && S_ISREG(sb.st_mode)) r->file_size = (int64_t)sb.st_size;
    setvbuf(r->f, NULL, _IOFBF, 1 << 20);

    uint8_t fx[HDR_FIXED];
    size_t got;
    if (!r_read(r, fx, HDR_FIXED, &got)) {
        if (ferror(r->f)) r_fail(r, DHS_TRACE_ERR_IO, "read failed: %s", strerror(errno));
        else if (got < 8 || memcmp(fx, DHS_TRACE_MAGIC, 8) != 0)
            r_fail(r, DHS_TRACE_ERR_BAD_MAGIC, "file has %zu bytes, too short for a trace header", got);
        else
            r_fail(r, DHS_TRACE_ERR_TRUNCATED, "header cut after %zu bytes", got);
        return r_open_fail(r, out, err, err_len);
    }
    if (memcmp(fx, DHS_TRACE_MAGIC, 8) != 0) {
        r_fail(r, DHS_TRACE_ERR_BAD_MAGIC, "first 8 bytes are not \"%s\" (is this a dhisparse selection trace?)",
               DHS_TRACE_MAGIC);
        return r_open_fail(r, out, err, err_len);
    }
    uint32_t ver = get_u32(fx + 8);
    if (ver != DHS_TRACE_VERSION) {
        r_fail(r, DHS_TRACE_ERR_BAD_VERSION, "file is version %u, this build reads version %u", ver,
               DHS_TRACE_VERSION);
        return r_open_fail(r, out, err, err_len);
    }
    uint32_t hb = get_u32(fx + 12), ng = get_u32(fx + 16), ns = get_u32(fx + 20), nreq = get_u32(fx + 24);
    uint32_t kmax = get_u32(fx + 28), fl = get_u32(fx + 32), nl = get_u32(fx + 36), ml = get_u32(fx + 40);
    if (ng < 1 || ng > DHS_TRACE_MAX_GROUPS || ns < 1 || ns > DHS_TRACE_MAX_SOURCES || nl > DHS_TRACE_NAME_MAX ||
        ml > DHS_TRACE_META_MAX || get_u32(fx + 44) != 0 || hb != header_size(ng, ns, nl, ml)) {
        r_fail(r, DHS_TRACE_ERR_CORRUPT,
               "impossible header: %u groups, %u sources, name %u / meta %u bytes, header %u bytes", ng, ns, nl, ml, hb);
        return r_open_fail(r, out, err, err_len);
    }
    if (!r_reserve(r, hb)) {
        r_fail(r, DHS_TRACE_ERR_NOMEM, "header of %u bytes", hb);
        return r_open_fail(r, out, err, err_len);
    }
    memcpy(r->buf, fx, HDR_FIXED);
    if (!r_read(r, r->buf + HDR_FIXED, hb - HDR_FIXED, &got)) {
        if (ferror(r->f)) r_fail(r, DHS_TRACE_ERR_IO, "read failed: %s", strerror(errno));
        else
            r_fail(r, DHS_TRACE_ERR_TRUNCATED, "header of %u bytes cut after %zu", hb, (size_t)HDR_FIXED + got);
        return r_open_fail(r, out, err, err_len);
    }
    ck c = {0, 0};
    ck_update(&c, r->buf, hb - REC_CHECK);
    if (c.a != get_u32(r->buf + hb - 8) || c.b != get_u32(r->buf + hb - 4)) {
        r_fail(r, DHS_TRACE_ERR_CORRUPT, "header checksum mismatch");
        return r_open_fail(r, out, err, err_len);
    }
    dhs_trace_header *h = &r->h;
    h->version = ver;
    h->n_groups = (int32_t)ng;
    h->n_sources = (int32_t)ns;
    h->n_requests = nreq > (uint32_t)INT32_MAX ? INT32_MAX : (int32_t)nreq;
    h->k_max = kmax > (uint32_t)INT32_MAX ? INT32_MAX : (int32_t)kmax;
    h->flags = fl;
    uint32_t o = HDR_FIXED;
    for (uint32_t g = 0; g < ng; g++, o += 4) {
        uint32_t k = get_u32(r->buf + o);
        h->k[g] = k > (uint32_t)INT32_MAX ? INT32_MAX : (int32_t)k;
    }
    for (uint32_t s = 0; s < ns; s++, o += 12) {
        h->sources[s].row_bytes = get_u32(r->buf + o);
        h->sources[s].m = get_u32(r->buf + o + 4);
        uint32_t g = get_u32(r->buf + o + 8);
        h->sources[s].group = g > (uint32_t)INT32_MAX ? INT32_MAX : (int32_t)g;
    }
    memcpy(h->name, r->buf + o, nl);
    h->name[nl] = 0;
    o += pad4(nl);
    memcpy(h->meta, r->buf + o, ml);
    h->meta[ml] = 0;
    char why[256];
    if (dhs_trace_header_validate(h, why, sizeof why)) {
        r_fail(r, DHS_TRACE_ERR_CORRUPT, "invalid header: %s", why);
        return r_open_fail(r, out, err, err_len);
    }
    r->header_bytes = hb;
    for (int32_t g = 0; g < h->n_groups; g++) r->sumk += (uint64_t)h->k[g];
    if (!ledger_init(&r->L, h->n_requests)) {
        r_fail(r, DHS_TRACE_ERR_NOMEM, "lifecycle state for %d requests", h->n_requests);
        return r_open_fail(r, out, err, err_len);
    }
    *out = r;
    return DHS_TRACE_OK;
}

const dhs_trace_header *dhs_trace_reader_header(const dhs_trace_reader *r) { return r ? &r->h : NULL; }
const dhs_trace_totals *dhs_trace_reader_totals(const dhs_trace_reader *r) { return r ? &r->L.tot : NULL; }
uint64_t dhs_trace_reader_offset(const dhs_trace_reader *r) { return r ? r->off : 0; }
const char *dhs_trace_reader_error(const dhs_trace_reader *r) { return r ? r->err : "reader is NULL"; }

dhs_trace_status dhs_trace_reader_rewind(dhs_trace_reader *r)
{
    if (!r) return DHS_TRACE_ERR_INVALID_ARG;
    if (fseek(r->f, (long)r->header_bytes, SEEK_SET) != 0)
        return r_fail(r, DHS_TRACE_ERR_IO, "cannot rewind: %s", strerror(errno));
    clearerr(r->f);
    r->off = r->header_bytes;
    r->sticky = DHS_TRACE_OK;
    r->done = 0;
    r->err[0] = 0;
    ledger_reset(&r->L);
    return DHS_TRACE_OK;
}

static dhs_trace_status r_round(dhs_trace_reader *r, uint32_t count, uint64_t body, uint64_t at, dhs_trace_event *ev)
{
    const dhs_trace_header *h = &r->h;
    const uint8_t *b = r->buf;
    uint64_t round = get_u64(b);
    if (round != r->L.tot.rounds)
        return r_fail(r, DHS_TRACE_ERR_SEQUENCE, "ROUND record at byte %" PRIu64 " has index %" PRIu64 ", expected %" PRIu64,
                      at, round, r->L.tot.rounds);
    if ((size_t)count > r->items_cap) {
        size_t cap = r->items_cap ? r->items_cap : 16;
        while (cap < count) cap *= 2;
        dhs_trace_item *it = realloc(r->items, cap * sizeof *it);
        if (!it) return r_fail(r, DHS_TRACE_ERR_NOMEM, "round of %u requests", count);
        r->items = it;
        const int32_t **pp = realloc(r->ptrs, cap * (size_t)h->n_groups * sizeof *pp);
        if (!pp) return r_fail(r, DHS_TRACE_ERR_NOMEM, "round of %u requests", count);
        r->ptrs = pp;
        r->items_cap = cap;
    }
    /* item table, then the selections in item order, group order */
    uint64_t need = 8u + (uint64_t)ITEM_BYTES * count;
    const uint8_t *ib = b + 8;
    for (uint32_t i = 0; i < count; i++, ib += ITEM_BYTES) {
        dhs_trace_item *it = &r->items[i];
        uint32_t K = get_u32(ib + 4);
        it->req = get_u32(ib);
        it->n_queries = K > (uint32_t)DHS_TRACE_MAX_QUERIES ? -1 : (int32_t)K;
        it->n_r = (int64_t)get_u64(ib + 8);
        uint32_t A = get_u32(ib + 16);
        it->accepted = A > (uint32_t)DHS_TRACE_MAX_QUERIES ? -1 : (int32_t)A;
        if (it->n_queries < 1 || it->n_queries > h->k_max || get_u32(ib + 20) != 0)
            return r_fail(r, DHS_TRACE_ERR_CORRUPT, "round %" PRIu64 " item %u: K_r %u outside 1..%d", round, i, K,
                          h->k_max);
        need += (uint64_t)it->n_queries * r->sumk * 4u;
    }
    if (need != body)
        return r_fail(r, DHS_TRACE_ERR_CORRUPT,
                      "round %" PRIu64 " at byte %" PRIu64 ": body is %" PRIu64 " bytes, its items need %" PRIu64, round,
                      at, body, need);
    const uint8_t *data = b + 8 + (size_t)ITEM_BYTES * count;
    for (uint32_t i = 0; i < count; i++) {
        dhs_trace_item *it = &r->items[i];
        const int32_t **pp = r->ptrs + (size_t)i * (size_t)h->n_groups;
        for (int32_t g = 0; g < h->n_groups; g++) {
            pp[g] = (const int32_t *)(const void *)data; /* 4-byte aligned: offsets are multiples of 4 */
            data += (size_t)it->n_queries * (size_t)h->k[g] * 4u;
        }
        it->sel = pp;
    }
    char m[512];
    dhs_trace_status st = ledger_check_round(&r->L, h, round, (int32_t)count, r->items,
                                             !(r->flags & DHS_TRACE_READ_NO_ROW_CHECK), DHS_TRACE_ERR_CORRUPT, m,
                                             sizeof m);
    if (st) return r_fail(r, st, "record at byte %" PRIu64 ": %s", at, m);
    ledger_commit_round(&r->L, h, (int32_t)count, r->items);
    ev->kind = DHS_TRACE_EV_ROUND;
    ev->round = round;
    ev->n_items = (int32_t)count;
    ev->items = r->items;
    return DHS_TRACE_OK;
}

dhs_trace_status dhs_trace_next(dhs_trace_reader *r, dhs_trace_event *ev)
{
    if (!r || !ev) return DHS_TRACE_ERR_INVALID_ARG;
    if (r->sticky) return r->sticky;
    if (r->done) return DHS_TRACE_EOF;
    memset(ev, 0, sizeof *ev);
    const dhs_trace_header *h = &r->h;
    uint64_t at = r->off;
    uint8_t hd[REC_HDR];
    size_t got;
    if (!r_read(r, hd, REC_HDR, &got)) {
        if (ferror(r->f)) return r_fail(r, DHS_TRACE_ERR_IO, "read failed at byte %" PRIu64 ": %s", at, strerror(errno));
        if (got == 0)
            return r_fail(r, DHS_TRACE_ERR_TRUNCATED,
                          "file ends at byte %" PRIu64 " without a trailer (after %" PRIu64 " rounds)", at,
                          r->L.tot.rounds);
        return r_fail(r, DHS_TRACE_ERR_TRUNCATED, "record header at byte %" PRIu64 " cut after %zu of 16 bytes", at, got);
    }
    uint32_t type = get_u32(hd), count = get_u32(hd + 4);
    uint64_t body = get_u64(hd + 8);
    int ok;
    switch (type) {
    case REC_START: ok = count == 0 && body == START_BODY; break;
    case REC_END: ok = count == 0 && body == END_BODY; break;
    case REC_TRAILER: ok = count == 0 && body == TRAILER_BODY; break;
    case REC_ROUND: {
        uint64_t maxb = 8u + (uint64_t)count * (ITEM_BYTES + (uint64_t)h->k_max * r->sumk * 4u);
        ok = count <= (uint32_t)h->n_requests && body >= 8u + (uint64_t)ITEM_BYTES * count && body <= maxb &&
             body % 4 == 0;
        break;
    }
    default:
        return r_fail(r, DHS_TRACE_ERR_CORRUPT, "unknown record type %u at byte %" PRIu64, type, at);
    }
    if (!ok)
        return r_fail(r, DHS_TRACE_ERR_CORRUPT,
                      "record type %u at byte %" PRIu64 " has impossible count %u / body %" PRIu64 " bytes", type, at,
                      count, body);
    uint64_t want = body + REC_CHECK;
    if (r->file_size >= 0 && want > (uint64_t)r->file_size - r->off)
        return r_fail(r, DHS_TRACE_ERR_TRUNCATED,
                      "record type %u at byte %" PRIu64 " needs %" PRIu64 " more bytes, file has %" PRIu64, type, at,
                      want, (uint64_t)r->file_size - r->off);
    if (want > SIZE_MAX || !r_reserve(r, (size_t)want))
        return r_fail(r, DHS_TRACE_ERR_NOMEM, "record of %" PRIu64 " bytes at byte %" PRIu64, want, at);
    if (!r_read(r, r->buf, (size_t)want, &got)) {
        if (ferror(r->f)) return r_fail(r, DHS_TRACE_ERR_IO, "read failed at byte %" PRIu64 ": %s", r->off, strerror(errno));
        return r_fail(r, DHS_TRACE_ERR_TRUNCATED, "record type %u at byte %" PRIu64 " cut after %zu of %" PRIu64 " bytes",
                      type, at, got, want);
    }
    ck c = {0, 0};
    ck_update(&c, hd, REC_HDR);
    ck_update(&c, r->buf, (size_t)body);
    if (c.a != get_u32(r->buf + body) || c.b != get_u32(r->buf + body + 4))
        return r_fail(r, DHS_TRACE_ERR_CORRUPT, "checksum mismatch in record type %u at byte %" PRIu64, type, at);

    const uint8_t *b = r->buf;
    char m[256];
    dhs_trace_status st;
    switch (type) {
    case REC_START:
        if (get_u32(b + 4) != 0) return r_fail(r, DHS_TRACE_ERR_CORRUPT, "START at byte %" PRIu64 ": reserved field set", at);
        ev->kind = DHS_TRACE_EV_START;
        ev->req = get_u32(b);
        ev->prefix = (int64_t)get_u64(b + 8);
        if ((st = ledger_start(&r->L, ev->req, ev->prefix, m, sizeof m)))
            return r_fail(r, st, "record at byte %" PRIu64 ": %s", at, m);
        return DHS_TRACE_OK;
    case REC_END:
        if (get_u32(b + 4) != 0) return r_fail(r, DHS_TRACE_ERR_CORRUPT, "END at byte %" PRIu64 ": reserved field set", at);
        ev->kind = DHS_TRACE_EV_END;
        ev->req = get_u32(b);
        if ((st = ledger_end(&r->L, ev->req, m, sizeof m)))
            return r_fail(r, st, "record at byte %" PRIu64 ": %s", at, m);
        return DHS_TRACE_OK;
    case REC_ROUND:
        return r_round(r, count, body, at, ev);
    default: { /* REC_TRAILER */
        const dhs_trace_totals *t = &r->L.tot;
        uint64_t f[6] = {t->rounds, t->items, t->queries, t->entries, t->starts, t->ends};
        static const char *names[6] = {"rounds", "items", "queries", "entries", "starts", "ends"};
        for (int i = 0; i < 6; i++)
            if (get_u64(b + 8 * i) != f[i])
                return r_fail(r, DHS_TRACE_ERR_CORRUPT, "trailer says %" PRIu64 " %s, the records hold %" PRIu64,
                              get_u64(b + 8 * i), names[i], f[i]);
        if (fgetc(r->f) != EOF)
            return r_fail(r, DHS_TRACE_ERR_CORRUPT, "bytes after the trailer (at byte %" PRIu64 ")", r->off);
        r->done = 1;
        return DHS_TRACE_EOF;
    }
    }
}
