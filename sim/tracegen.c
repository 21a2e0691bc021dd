/* tracegen.c - synthetic selection traces (model: tracegen.h, docs/TRACE.md).
 *
 * Determinism: every random draw comes from a per-request xoshiro256**
 * stream seeded from (seed, request id), and per-row choices (window and
 * cluster membership, producer keep/shift) from a 64-bit hash of a per-request
 * key and the row, so a row's membership is stable across rounds. Only
 * integer arithmetic and IEEE double compares are used (no libm).
 */
#include "sim/tracegen.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>
#include "util/rng.h"
#include "sim/util.h"

/* ---------------------------------------------------------------- random */
/* the streams: util/rng.h (xoshiro256** seeded by splitmix64) */
typedef dhs_xoshiro rng;
static void rng_seed(rng *r, uint64_t seed) { dhs_xoshiro_seed(r, seed); }
static uint64_t rng_next(rng *r) { return dhs_xoshiro_next(r); }

static double u01(uint64_t x) { return (double)(x >> 11) * 0x1.0p-53; }
static double rng_u01(rng *r) { return u01(rng_next(r)); }
/* uniform in [0, n), n > 0 */
static int64_t rng_below(rng *r, int64_t n) { return (int64_t)(rng_next(r) % (uint64_t)n); }
/* per-row fixed value in [0, 1) */
static double hash01(uint64_t key, int64_t row) { return u01(dhs_mix64(key ^ ((uint64_t)row * 0xD6E8FEB86659FD93ull))); }

/* ---------------------------------------------------------------- params */
dhs_locality dhs_locality_default(void)
{
    dhs_locality l;
    memset(&l, 0, sizeof l);
    l.sinks = 4;
    l.window = 512;
    l.window_full = 64;
    l.window_density = 0.5;
    l.clusters = 64;
    l.cluster_radius = 32;
    l.cluster_density = 0.5;
    l.topic_on = 0.3;
    l.topic_off = 0.1;
    l.drift = 2;
    l.topic_switch = 0.005;
    l.tail_min = 0.05;
    l.spec_jitter = 0.05;
    return l;
}

/* ---------------------------------------------------------------- measured-overlap model */
/* DeepSeek-V3.2 on one 68,665-token SWE-bench prompt, 2,025 decode steps
   (TensorRT-LLM tech blog 21, arXiv 2604.22312): alpha 35-50 %, mean 44 %, in
   layers 20-60; 1.5 % in layers 0-1 (below the random k/N = 2.9 %: those
   layers move away from their last selection). Layers 2-19 are not reported:
   linear in the layer from 1.5 % at layer 1 to 44 % at layer 20 (stated, not
   measured). Layers 0-1 scale as k/N with context; the others are held
   constant (measured at one length only). Cross-layer 0.85: the middle of
   IndexCache's 70-100 % (arXiv 2603.12201). Draft 0.9: engine notes,
   unverified. */
static void preset_dsv32(dhs_locality_model *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->preset, sizeof m->preset, "dsv32-swe");
    m->n_layers = 61;
    m->ref_context = 68665;
    m->ref_k = 2048;
    m->cross = 0.85;
    m->draft = 0.9;
    for (int32_t l = 0; l < 61; l++) {
        if (l <= 1) {
            m->alpha[l] = 0.015;
            m->alpha_exp[l] = 1;
        } else if (l < 20) {
            m->alpha[l] = 0.015 + (0.44 - 0.015) * (double)(l - 1) / 19.0;
        } else {
            m->alpha[l] = 0.44;
        }
    }
}

static int num_ok(const cJSON *x, double lo, double hi) { return cJSON_IsNumber(x) && x->valuedouble >= lo && x->valuedouble <= hi; }

int dhs_locality_model_load(const char *spec, dhs_locality_model *m, char *err, size_t err_len)
{
    memset(m, 0, sizeof *m);
    if (!spec || !strcmp(spec, "synthetic")) { /* the model of tracegen.h, unchanged */
        snprintf(m->preset, sizeof m->preset, "synthetic");
        return 0;
    }
    if (!strcmp(spec, "random")) { /* independent uniform selections: alpha = k/V, the published baseline */
        snprintf(m->preset, sizeof m->preset, "random");
        m->n_layers = 1;
        m->ref_context = 68665;
        m->ref_k = 2048;
        m->alpha[0] = 2048.0 / 68665.0;
        m->alpha_exp[0] = 1;
        return 0;
    }
    if (!strcmp(spec, "dsv32-swe")) {
        preset_dsv32(m);
        return 0;
    }
    FILE *f = fopen(spec, "rb");
    if (!f) {
        dhs_errf(err, err_len, "%s: not a preset (synthetic, random, dsv32-swe) and not a readable file", spec);
        return -1;
    }
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    int toolong = buf && n == (1 << 20) - 1 && fgetc(f) != EOF;
    fclose(f);
    if (!buf || toolong) {
        free(buf);
        dhs_errf(err, err_len, "%s: %s", spec, buf ? "larger than 1 MiB" : "out of memory");
        return -1;
    }
    buf[n] = 0;
    cJSON *o = cJSON_Parse(buf);
    free(buf);
    int rc = -1;
#define JBAD(...)                           \
    do {                                    \
        dhs_errf(err, err_len, __VA_ARGS__); \
        goto jout;                          \
    } while (0)
    if (!cJSON_IsObject(o)) JBAD("%s: not a JSON object", spec);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *al = cJSON_GetObjectItemCaseSensitive(o, "alpha");
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(o, "alpha_exp");
    const cJSON *rc_ = cJSON_GetObjectItemCaseSensitive(o, "ref_context");
    const cJSON *rk = cJSON_GetObjectItemCaseSensitive(o, "ref_k");
    const cJSON *cr = cJSON_GetObjectItemCaseSensitive(o, "cross");
    const cJSON *dr = cJSON_GetObjectItemCaseSensitive(o, "draft");
    if (!cJSON_IsString(name) || strlen(name->valuestring) < 1 || strlen(name->valuestring) > 20)
        JBAD("%s: \"name\" must be a string of 1..20 bytes", spec);
    int na = cJSON_GetArraySize(al);
    if (!cJSON_IsArray(al) || na < 1 || na > DHS_LOCALITY_MAX_LAYERS)
        JBAD("%s: \"alpha\" must be an array of 1..%d numbers (one per layer)", spec, DHS_LOCALITY_MAX_LAYERS);
    if (ex && (!cJSON_IsArray(ex) || cJSON_GetArraySize(ex) != na))
        JBAD("%s: \"alpha_exp\" must be an array as long as \"alpha\"", spec);
    if (!num_ok(rc_, 1, (double)((int64_t)1 << 36))) JBAD("%s: \"ref_context\" must be 1..2^36 positions", spec);
    if ((cr && !num_ok(cr, 0, 1)) || (dr && !num_ok(dr, 0, 1))) JBAD("%s: \"cross\" and \"draft\" must lie in [0, 1]", spec);
    if (rk && !num_ok(rk, 1, DHS_TRACE_MAX_K)) JBAD("%s: \"ref_k\" must be 1..%d", spec, DHS_TRACE_MAX_K);
    snprintf(m->preset, sizeof m->preset, "custom:%s", name->valuestring);
    m->ref_k = rk ? (int32_t)rk->valuedouble : 2048;
    m->n_layers = na;
    m->ref_context = (int64_t)rc_->valuedouble;
    m->cross = cr ? cr->valuedouble : 0.0;
    m->draft = dr ? dr->valuedouble : 0.0;
    for (int i = 0; i < na; i++) {
        const cJSON *a = cJSON_GetArrayItem(al, i);
        if (!num_ok(a, 0, 1)) JBAD("%s: alpha[%d] must lie in [0, 1]", spec, i);
        m->alpha[i] = a->valuedouble;
        if (ex) {
            const cJSON *e = cJSON_GetArrayItem(ex, i);
            if (!cJSON_IsNumber(e) || (e->valuedouble != 0 && e->valuedouble != 1))
                JBAD("%s: alpha_exp[%d] must be 0 or 1", spec, i);
            m->alpha_exp[i] = (int32_t)e->valuedouble;
        }
    }
    rc = 0;
jout:
#undef JBAD
    if (rc) memset(m, 0, sizeof *m);
    cJSON_Delete(o);
    return rc;
}

double dhs_locality_alpha(const dhs_locality_model *m, int32_t layer, int64_t V, int32_t k)
{
    if (m->n_layers < 1) return 0.0;
    int32_t l = layer < m->n_layers ? layer : m->n_layers - 1;
    double a = m->alpha[l];
    if (m->alpha_exp[l] == 1 && V > 0) a *= (double)m->ref_context / (double)V * (double)k / (double)m->ref_k;
    return a < 0 ? 0 : a > 1 ? 1 : a;
}

dhs_tracegen_params dhs_tracegen_default(void)
{
    dhs_tracegen_params p;
    memset(&p, 0, sizeof p);
    p.seed = 1;
    p.n_requests = 8;
    p.n_rounds = 200;
    p.batch = 0;
    p.out_len = 0;
    p.context = 32768;
    p.context_min = 0;
    p.spec = 1;
    p.accept = 0.7;
    p.k = 2048;
    p.n_producers = 1;
    p.sources_per_producer = 1;
    p.row_bytes = 576;
    p.m = 1;
    p.loc = dhs_locality_default();
    p.overlap_min = 0.7;
    p.overlap_max = 1.0;
    p.shift_radius = 8;
    p.sorted = 0;
    snprintf(p.name, sizeof p.name, "synthetic");
    return p;
}

static int prob_ok(double x) { return x >= 0.0 && x <= 1.0; }

dhs_trace_status dhs_tracegen_check(const dhs_tracegen_params *p, char *err, size_t len)
{
#define BAD(...)                            \
    do {                                    \
        dhs_errf(err, len, __VA_ARGS__);         \
        return DHS_TRACE_ERR_INVALID_ARG;   \
    } while (0)
    if (!p) BAD("params is NULL");
    if (p->n_requests < 1 || p->n_requests > DHS_TRACE_MAX_REQUESTS) BAD("requests must be 1..%d", DHS_TRACE_MAX_REQUESTS);
    if (p->n_rounds < 0) BAD("rounds must be >= 0");
    if (p->batch < 0) BAD("batch must be >= 0");
    if (p->out_len < 0) BAD("out-len must be >= 0");
    if (p->context < 1 || p->context > ((int64_t)1 << 36)) BAD("context must be 1..2^36 positions");
    if (p->context_min < 0 || p->context_min > p->context) BAD("context-min must be 0..context");
    if (p->spec < 1 || p->spec > DHS_TRACE_MAX_QUERIES) BAD("spec must be 1..%d", DHS_TRACE_MAX_QUERIES);
    if (p->k < 1 || p->k > DHS_TRACE_MAX_K) BAD("k must be 1..%d", DHS_TRACE_MAX_K);
    if (p->n_producers < 1 || p->sources_per_producer < 1 ||
        (int64_t)p->n_producers * p->sources_per_producer > DHS_TRACE_MAX_SOURCES)
        BAD("producers x sources-per-producer must be 1..%d", DHS_TRACE_MAX_SOURCES);
    if (p->row_bytes < 1) BAD("row-bytes must be > 0");
    if (p->m < 1 || p->m > DHS_TRACE_MAX_M) BAD("m must be 1..%d", DHS_TRACE_MAX_M);
    if (p->loc.sinks < 0 || p->loc.window < 0 || p->loc.window_full < 0 || p->loc.clusters < 0 || p->loc.cluster_radius < 0 ||
        p->loc.drift < 0 || p->shift_radius < 1)
        BAD("sinks, window, window-full, clusters, cluster-radius, drift must be >= 0, shift-radius >= 1");
    if (p->loc.clusters > 1 << 20 || p->loc.cluster_radius > 1 << 20 || p->loc.window > 1 << 24 || p->loc.sinks > 1 << 20)
        BAD("clusters, cluster-radius, sinks or window implausibly large");
    if (!prob_ok(p->accept) || !prob_ok(p->loc.window_density) || !prob_ok(p->loc.cluster_density) ||
        !prob_ok(p->loc.topic_on) || !prob_ok(p->loc.topic_off) || !prob_ok(p->loc.topic_switch) || !prob_ok(p->loc.tail_min) ||
        !prob_ok(p->loc.spec_jitter) || !prob_ok(p->overlap_min) || !prob_ok(p->overlap_max))
        BAD("probabilities and fractions must lie in [0, 1]");
    if (p->overlap_min > p->overlap_max) BAD("overlap min above max");
    if (memchr(p->name, 0, sizeof p->name) == NULL) BAD("name not terminated");
    if (p->lm.n_layers < 0 || p->lm.n_layers > DHS_LOCALITY_MAX_LAYERS) BAD("locality layers must be 0..%d", DHS_LOCALITY_MAX_LAYERS);
    if (p->lm.n_layers > 0) {
        if (p->lm.ref_context < 1 || p->lm.ref_k < 1 || !prob_ok(p->lm.cross) || !prob_ok(p->lm.draft)) BAD("locality: bad ref_context, cross or draft");
        for (int32_t l = 0; l < p->lm.n_layers; l++)
            if (!prob_ok(p->lm.alpha[l]) || (p->lm.alpha_exp[l] != 0 && p->lm.alpha_exp[l] != 1)) BAD("locality: bad alpha of layer %d", l);
    }
    return DHS_TRACE_OK;
#undef BAD
}

dhs_trace_status dhs_tracegen_header(const dhs_tracegen_params *p, dhs_trace_header *h)
{
    dhs_trace_status st = dhs_tracegen_check(p, NULL, 0);
    if (st) return st;
    memset(h, 0, sizeof *h);
    h->version = DHS_TRACE_VERSION;
    h->n_groups = p->n_producers;
    for (int32_t g = 0; g < p->n_producers; g++) h->k[g] = p->k;
    h->n_sources = p->n_producers * p->sources_per_producer;
    for (int32_t s = 0; s < h->n_sources; s++) {
        h->sources[s].row_bytes = p->row_bytes;
        h->sources[s].m = p->m;
        h->sources[s].group = s / p->sources_per_producer;
    }
    h->n_requests = p->n_requests;
    h->k_max = p->spec;
    h->flags = p->sorted ? DHS_TRACE_F_SORTED : 0;
    snprintf(h->name, sizeof h->name, "%s", p->name);
    snprintf(h->meta, sizeof h->meta,
             "{\"generator\":\"dhs trace gen\",\"seed\":%" PRIu64 ",\"requests\":%d,\"rounds\":%d,\"batch\":%d,"
             "\"out_len\":%" PRId64 ",\"context\":%" PRId64 ",\"context_min\":%" PRId64 ",\"spec\":%d,"
             "\"accept\":%.15g,\"k\":%d,\"producers\":%d,\"sources_per_producer\":%d,\"row_bytes\":%u,\"m\":%u,"
             "\"sinks\":%d,\"window\":%d,\"window_full\":%d,\"window_density\":%.15g,\"clusters\":%d,"
             "\"cluster_radius\":%d,\"cluster_density\":%.15g,\"topic_on\":%.15g,\"topic_off\":%.15g,"
             "\"drift\":%d,\"topic_switch\":%.15g,\"tail_min\":%.15g,\"spec_jitter\":%.15g,"
             "\"overlap_min\":%.15g,\"overlap_max\":%.15g,\"shift_radius\":%d,\"order\":\"%s\"}",
             p->seed, p->n_requests, p->n_rounds, p->batch, p->out_len, p->context, p->context_min, p->spec,
             p->accept, p->k, p->n_producers, p->sources_per_producer, p->row_bytes, p->m, p->loc.sinks, p->loc.window,
             p->loc.window_full, p->loc.window_density, p->loc.clusters, p->loc.cluster_radius, p->loc.cluster_density, p->loc.topic_on,
             p->loc.topic_off, p->loc.drift, p->loc.topic_switch, p->loc.tail_min, p->loc.spec_jitter, p->overlap_min, p->overlap_max,
             p->shift_radius, p->sorted ? "sorted" : "score");
    if (p->lm.n_layers > 0) { /* the model, per producer (dhs trace stats derives the targets) */
        size_t L = strlen(h->meta) - 1; /* over the closing brace */
        L += (size_t)snprintf(h->meta + L, sizeof h->meta - L,
                              ",\"locality\":{\"preset\":\"%s\",\"cross\":%.6g,\"draft\":%.6g,\"ref_context\":%" PRId64
                              ",\"ref_k\":%d,\"alpha\":[",
                              p->lm.preset, p->lm.cross, p->lm.draft, p->lm.ref_context, p->lm.ref_k);
        for (int32_t g = 0; g < p->n_producers && L < sizeof h->meta; g++) {
            int32_t l = g < p->lm.n_layers ? g : p->lm.n_layers - 1;
            L += (size_t)snprintf(h->meta + L, sizeof h->meta - L, "%s%.6g", g ? "," : "", p->lm.alpha[l]);
        }
        if (L < sizeof h->meta) L += (size_t)snprintf(h->meta + L, sizeof h->meta - L, "],\"alpha_exp\":[");
        for (int32_t g = 0; g < p->n_producers && L < sizeof h->meta; g++) {
            int32_t l = g < p->lm.n_layers ? g : p->lm.n_layers - 1;
            L += (size_t)snprintf(h->meta + L, sizeof h->meta - L, "%s%d", g ? "," : "", p->lm.alpha_exp[l]);
        }
        if (L < sizeof h->meta) L += (size_t)snprintf(h->meta + L, sizeof h->meta - L, "]}}");
        if (L >= sizeof h->meta) return DHS_TRACE_ERR_INVALID_ARG;
    }
    return DHS_TRACE_OK;
}

/* ---------------------------------------------------------------- state */
typedef struct cluster {
    int64_t center; /* row */
    uint64_t key;   /* membership hash key; new on a topic switch */
    int on;
} cluster;

/* one request's locality state (dhs_selreq) and the trace generator's
   bookkeeping of it */
struct dhs_selreq {
    rng r;
    uint64_t wkey;      /* window membership key */
    cluster *cl;        /* [clusters] */
    double *overlap;    /* [producers], [0] unused */
    uint64_t *pkey;     /* [producers] keep/shift keys */
    int32_t *last;      /* measured-overlap model: [producers][k] query 0 of the last round */
    int32_t *n_last;    /* [producers] rows in last (0: none yet) */
    /* dhs_tracegen_run only */
    uint32_t id;
    int64_t n;          /* committed positions n_r */
    int64_t produced;   /* accepted tokens so far (A + 1 per round) */
    int64_t out_target; /* 0 = unlimited */
};
typedef struct dhs_selreq greq;

struct dhs_selgen {
    dhs_tracegen_params pc; /* the parameters (a copy) */
    const dhs_tracegen_params *p; /* = &pc */
    /* chosen-row stamps over rows 0..cap-1 */
    uint32_t *stamp;
    int32_t *scratch;   /* [cap] free-row list for dense tail fills */
    int64_t cap;
    uint32_t epoch;
    int32_t *rest0;     /* [k] query 0's topical + tail rows, in order */
    int32_t n_rest0;
    int32_t *out;       /* current query being built */
    int32_t cnt;
    uint32_t *block;    /* [cap] rows of the producer's last round (measured-overlap model) */
    uint32_t bepoch;
};
typedef struct dhs_selgen gen;

static int ensure_rows(gen *G, int64_t V)
{
    if (V <= G->cap) return 1;
    int64_t cap = G->cap ? G->cap : 4096;
    while (cap < V) cap *= 2;
    uint32_t *s = realloc(G->stamp, (size_t)cap * sizeof *s);
    if (!s) return 0;
    G->stamp = s;
    memset(s + G->cap, 0, (size_t)(cap - G->cap) * sizeof *s);
    int32_t *sc = realloc(G->scratch, (size_t)cap * sizeof *sc);
    if (!sc) return 0;
    G->scratch = sc;
    uint32_t *b = realloc(G->block, (size_t)cap * sizeof *b);
    if (!b) return 0;
    G->block = b;
    memset(b + G->cap, 0, (size_t)(cap - G->cap) * sizeof *b);
    G->cap = cap;
    return 1;
}

static void begin_query(gen *G, int32_t *out)
{
    if (++G->epoch == 0) { /* wrapped: clear */
        memset(G->stamp, 0, (size_t)G->cap * sizeof *G->stamp);
        G->epoch = 1;
    }
    G->out = out;
    G->cnt = 0;
}

static int chosen(const gen *G, int64_t row) { return G->stamp[row] == G->epoch; }

static void add(gen *G, int64_t row)
{
    if (G->cnt < G->p->k && G->stamp[row] != G->epoch) {
        G->stamp[row] = G->epoch;
        G->out[G->cnt++] = (int32_t)row;
    }
}

/* Random tail: uniform unchosen rows of [0, V) until k are chosen. */
static void fill_tail(gen *G, rng *r, int64_t V)
{
    int32_t k = G->p->k;
    int64_t need = k - G->cnt, free_rows = V - G->cnt;
    if (need <= 0) return;
    if (free_rows < 4 * need) { /* dense: list the free rows, partial shuffle */
        int64_t nf = 0;
        for (int64_t s = 0; s < V; s++)
            if (!chosen(G, s)) G->scratch[nf++] = (int32_t)s;
        for (int64_t i = 0; i < need && i < nf; i++) {
            int64_t j = i + rng_below(r, nf - i);
            int32_t t = G->scratch[i];
            G->scratch[i] = G->scratch[j];
            G->scratch[j] = t;
            add(G, G->scratch[i]);
        }
    } else {
        while (G->cnt < k) add(G, rng_below(r, V));
    }
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The window: newest window_full rows, then older rows of the last `window`
   with their fixed probability; newest first (score order). */
static void window_rows(gen *G, const greq *q, int64_t V)
{
    const dhs_tracegen_params *p = G->p;
    int64_t ns = p->loc.sinks < V ? p->loc.sinks : V;
    for (int64_t d = 0; d < p->loc.window && G->cnt < p->k; d++) {
        int64_t row = V - 1 - d;
        if (row < ns) break;
        if (d < p->loc.window_full || hash01(q->wkey, row) < p->loc.window_density) add(G, row);
    }
}

static void sink_rows(gen *G, int64_t V)
{
    int64_t ns = G->p->loc.sinks < V ? G->p->loc.sinks : V;
    for (int64_t s = 0; s < ns; s++) add(G, s);
}

/* Producer 0, query j of request q: visible rows V (> k). */
static void select_base(gen *G, greq *q, int32_t j, int64_t V, int32_t *out)
{
    const dhs_tracegen_params *p = G->p;
    begin_query(G, out);
    sink_rows(G, V);
    window_rows(G, q, V);
    int32_t fixed = G->cnt;
    if (j == 0) {
        int32_t cap = p->k - (int32_t)((double)p->k * p->loc.tail_min);
        for (int32_t c = 0; c < p->loc.clusters && G->cnt < cap; c++) {
            const cluster *cl = &q->cl[c];
            if (!cl->on) continue;
            int64_t lo = cl->center - p->loc.cluster_radius, hi = cl->center + p->loc.cluster_radius;
            if (lo < p->loc.sinks) lo = p->loc.sinks;
            if (hi > V - 1) hi = V - 1;
            for (int64_t s = lo; s <= hi && G->cnt < cap; s++)
                if (hash01(cl->key, s) < p->loc.cluster_density) add(G, s);
        }
        fill_tail(G, &q->r, V);
        G->n_rest0 = G->cnt - fixed;
        memcpy(G->rest0, out + fixed, (size_t)G->n_rest0 * sizeof *out);
    } else {
        for (int32_t i = 0; i < G->n_rest0; i++)
            if (rng_u01(&q->r) >= p->loc.spec_jitter && G->rest0[i] < V) add(G, G->rest0[i]);
        fill_tail(G, &q->r, V);
    }
}

/* Producer g >= 1 from producer g-1's query (prev), visible rows V (> k). */
static void select_follow(gen *G, greq *q, int32_t g, int64_t V, const int32_t *prev, int32_t *out)
{
    const dhs_tracegen_params *p = G->p;
    begin_query(G, out);
    double o = q->overlap[g];
    uint64_t key = q->pkey[g];
    for (int32_t i = 0; i < p->k; i++) {
        int64_t e = prev[i];
        if (e < 0) continue;
        if (e < p->loc.sinks || hash01(key, e) < o) {
            add(G, e);
            continue;
        }
        /* stable replacement: the first free row of a fixed probe sequence
           e +- (1..shift_radius); else e itself; else (rare) the tail */
        int placed = 0;
        for (uint64_t t = 0; t < 8 && !placed; t++) {
            uint64_t h = dhs_mix64(key ^ (0xA5A5A5A5A5A5A5A5ull + t) ^ ((uint64_t)e * 0x9E3779B97F4A7C15ull));
            int64_t sh = 1 + (int64_t)(h % (uint64_t)p->shift_radius);
            int64_t e2 = (h >> 63) ? e + sh : e - sh;
            if (e2 >= p->loc.sinks && e2 < V && !chosen(G, e2)) {
                add(G, e2);
                placed = 1;
            }
        }
        if (!placed) add(G, e);
    }
    /* rows lost to collisions: take replaced rows of prev back (stable), then
       the tail (only if prev had fewer than k distinct rows) */
    for (int32_t i = 0; i < p->k && G->cnt < p->k; i++)
        if (prev[i] >= 0) add(G, prev[i]);
    fill_tail(G, &q->r, V);
}

/* ---------------------------------------------------------------- measured-overlap model */
/* uniform visible rows neither chosen nor blocked until k; if too few such
   rows remain, any free row (dense path) */
static void fill_fresh(gen *G, rng *r, int64_t V, int32_t nblock)
{
    int32_t k = G->p->k;
    int64_t need = k - G->cnt, free_rows = V - G->cnt - nblock;
    if (need <= 0) return;
    if (free_rows < 4 * need) {
        int64_t nf = 0;
        for (int64_t s = 0; s < V; s++)
            if (!chosen(G, s) && G->block[s] != G->bepoch) G->scratch[nf++] = (int32_t)s;
        for (int64_t i = 0; i < need && i < nf; i++) {
            int64_t j = i + rng_below(r, nf - i);
            int32_t t = G->scratch[i];
            G->scratch[i] = G->scratch[j];
            G->scratch[j] = t;
            add(G, G->scratch[i]);
        }
        fill_tail(G, r, V); /* only when fewer than need unblocked rows */
    } else {
        while (G->cnt < k) {
            int64_t s = rng_below(r, V);
            if (G->block[s] != G->bepoch) add(G, s);
        }
    }
}

static void block_begin(gen *G)
{
    if (++G->bepoch == 0) {
        memset(G->block, 0, (size_t)G->cap * sizeof *G->block);
        G->bepoch = 1;
    }
}

/* query 0 of producer g: keep from its last round, take from producer g-1
   (up, NULL for g = 0), fill fresh */
static void select_alpha(gen *G, greq *q, int32_t g, int64_t V, const int32_t *up, int32_t *out)
{
    const dhs_tracegen_params *p = G->p;
    const int32_t k = p->k;
    int32_t *last = q->last + (size_t)g * (size_t)k;
    int32_t nl = q->n_last[g];
    double a = dhs_locality_alpha(&p->lm, g, V, k);
    block_begin(G);
    for (int32_t i = 0; i < nl; i++) G->block[last[i]] = G->bepoch;
    begin_query(G, out);
    for (int32_t i = 0; i < nl; i++)
        if (rng_u01(&q->r) < a) add(G, last[i]);
    if (up)
        for (int32_t i = 0; i < k && G->cnt < k; i++)
            if (up[i] >= 0 && G->block[up[i]] != G->bepoch && rng_u01(&q->r) < p->lm.cross) add(G, up[i]);
    fill_fresh(G, &q->r, V, nl);
}

/* query j >= 1 of producer g from its query 0 (q0) */
static void select_draft(gen *G, greq *q, int64_t V, const int32_t *q0, int32_t *out)
{
    const dhs_tracegen_params *p = G->p;
    block_begin(G);
    begin_query(G, out);
    for (int32_t i = 0; i < p->k; i++)
        if (q0[i] >= 0 && rng_u01(&q->r) < p->lm.draft) add(G, q0[i]);
    fill_fresh(G, &q->r, V, 0);
}

static void update_clusters(const dhs_tracegen_params *p, greq *q, int64_t V0)
{
    int64_t hist_hi = V0 - p->loc.window;
    if (hist_hi < p->loc.sinks + 1) hist_hi = p->loc.sinks + 1;
    int64_t lo = p->loc.sinks, hi = V0 - 1 > lo ? V0 - 1 : lo;
    for (int32_t c = 0; c < p->loc.clusters; c++) {
        cluster *cl = &q->cl[c];
        if (rng_u01(&q->r) < p->loc.topic_switch) {
            cl->center = p->loc.sinks + rng_below(&q->r, hist_hi - p->loc.sinks);
            cl->key = rng_next(&q->r);
            cl->on = 1;
        } else {
            cl->center += rng_below(&q->r, 2 * (int64_t)p->loc.drift + 1) - p->loc.drift;
            if (cl->center < lo) cl->center = lo;
            if (cl->center > hi) cl->center = hi;
            double u = rng_u01(&q->r);
            cl->on = cl->on ? !(u < p->loc.topic_off) : (u < p->loc.topic_on);
        }
    }
}

/* ---------------------------------------------------------------- requests */
void dhs_selreq_free(dhs_selreq *q)
{
    if (!q) return;
    free(q->cl);
    free(q->overlap);
    free(q->pkey);
    free(q->last);
    free(q->n_last);
    free(q);
}

size_t dhs_selreq_bytes(const dhs_selgen *G)
{
    const dhs_tracegen_params *p = G->p;
    return sizeof(greq) + (size_t)(p->loc.clusters > 0 ? p->loc.clusters : 1) * sizeof(cluster) +
           (size_t)p->n_producers * (sizeof(double) + sizeof(uint64_t)) +
           (p->lm.n_layers > 0 ? (size_t)p->n_producers * ((size_t)p->k + 1) * sizeof(int32_t) : 0);
}

static greq *req_new(const dhs_tracegen_params *p, uint64_t seed)
{
    greq *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->cl = calloc((size_t)(p->loc.clusters > 0 ? p->loc.clusters : 1), sizeof *q->cl);
    q->overlap = calloc((size_t)p->n_producers, sizeof *q->overlap);
    q->pkey = calloc((size_t)p->n_producers, sizeof *q->pkey);
    if (p->lm.n_layers > 0) {
        q->last = malloc((size_t)p->n_producers * (size_t)p->k * sizeof *q->last);
        q->n_last = calloc((size_t)p->n_producers, sizeof *q->n_last);
    }
    if (!q->cl || !q->overlap || !q->pkey || (p->lm.n_layers > 0 && (!q->last || !q->n_last))) {
        dhs_selreq_free(q);
        return NULL;
    }
    rng_seed(&q->r, seed);
    return q;
}

/* the locality draws of a request with n committed positions, from its stream */
static void req_locality(const dhs_tracegen_params *p, greq *q, int64_t n)
{
    q->wkey = rng_next(&q->r);
    int64_t V0 = (n + 1) / p->m;
    int64_t hist_hi = V0 - p->loc.window;
    if (hist_hi < p->loc.sinks + 1) hist_hi = p->loc.sinks + 1;
    double on_share = p->loc.topic_on + p->loc.topic_off > 0 ? p->loc.topic_on / (p->loc.topic_on + p->loc.topic_off) : 1.0;
    for (int32_t c = 0; c < p->loc.clusters; c++) {
        q->cl[c].center = p->loc.sinks + rng_below(&q->r, hist_hi - p->loc.sinks);
        q->cl[c].key = rng_next(&q->r);
        q->cl[c].on = rng_u01(&q->r) < on_share;
    }
    for (int32_t g = 1; g < p->n_producers; g++) {
        q->overlap[g] = p->overlap_min + (p->overlap_max - p->overlap_min) * rng_u01(&q->r);
        q->pkey[g] = rng_next(&q->r);
    }
}

dhs_selreq *dhs_selreq_start(const dhs_selgen *G, uint64_t seed, int64_t n)
{
    greq *q = req_new(G->p, seed);
    if (q) req_locality(G->p, q, n < 0 ? 0 : n);
    return q;
}

/* the trace generator's request `id`: prefix and output length, then the
   locality draws, all from the request's own stream */
static greq *start_request(const dhs_tracegen_params *p, uint32_t id)
{
    greq *q = req_new(p, p->seed ^ dhs_mix64(0x5851F42D4C957F2Dull + id));
    if (!q) return NULL;
    q->id = id;
    int64_t cmin = p->context_min ? p->context_min : p->context / 2;
    if (cmin < 1) cmin = 1;
    int64_t cmax = p->context < cmin ? cmin : p->context;
    q->n = cmin + rng_below(&q->r, cmax - cmin + 1);
    q->produced = 0;
    q->out_target = 0;
    if (p->out_len > 0) {
        int64_t lo = p->out_len / 2 > 0 ? p->out_len / 2 : 1;
        q->out_target = lo + rng_below(&q->r, p->out_len - lo + 1);
    }
    req_locality(p, q, q->n);
    return q;
}

/* ---------------------------------------------------------------- generator */
dhs_selgen *dhs_selgen_create(const dhs_tracegen_params *p, char *err, size_t err_len)
{
    if (dhs_tracegen_check(p, err, err_len) != DHS_TRACE_OK) return NULL;
    gen *G = calloc(1, sizeof *G);
    if (G) {
        G->pc = *p;
        G->p = &G->pc;
        G->rest0 = malloc((size_t)p->k * sizeof *G->rest0);
    }
    if (!G || !G->rest0) {
        dhs_errf(err, err_len, "out of memory");
        free(G);
        return NULL;
    }
    return G;
}

void dhs_selgen_free(dhs_selgen *G)
{
    if (!G) return;
    free(G->stamp);
    free(G->scratch);
    free(G->rest0);
    free(G->block);
    free(G);
}

static int round_alpha(gen *G, greq *q, int64_t n, int32_t K, int32_t *sel)
{
    const dhs_tracegen_params *p = G->p;
    const int32_t k = p->k, NG = p->n_producers;
    for (int32_t j = 0; j < K; j++) {
        int64_t V = (n + j + 1) / p->m;
        for (int32_t g = 0; g < NG; g++) {
            int32_t *out = sel + ((size_t)g * (size_t)K + (size_t)j) * (size_t)k;
            int32_t *q0 = sel + (size_t)g * (size_t)K * (size_t)k;
            if (V <= k) {
                for (int32_t i = 0; i < k; i++) out[i] = i < V ? i : -1;
                if (j == 0) q->n_last[g] = 0;
                continue;
            }
            if (!ensure_rows(G, V)) return -1;
            if (j == 0) {
                select_alpha(G, q, g, V, g ? out - (size_t)K * (size_t)k : NULL, out);
                memcpy(q->last + (size_t)g * (size_t)k, out, (size_t)k * sizeof *out);
                q->n_last[g] = k;
            } else {
                select_draft(G, q, V, q0, out);
            }
        }
    }
    if (p->sorted)
        for (int32_t g = 0; g < NG; g++)
            for (int32_t j = 0; j < K; j++)
                if ((n + j + 1) / p->m > k)
                    qsort(sel + ((size_t)g * (size_t)K + (size_t)j) * (size_t)k, (size_t)k, sizeof *sel, cmp_i32);
    return 0;
}

int dhs_selgen_round(dhs_selgen *G, dhs_selreq *q, int64_t n, int32_t K, int32_t *sel)
{
    const dhs_tracegen_params *p = G->p;
    const int32_t k = p->k, NG = p->n_producers;
    int64_t V0 = (n + 1) / p->m;
    if (p->lm.n_layers > 0) return round_alpha(G, q, n, K, sel);
    if (V0 > k) update_clusters(p, q, V0);
    G->n_rest0 = 0; /* query 0 of this request sets it (when its history exceeds k) */
    for (int32_t j = 0; j < K; j++) {
        int64_t V = (n + j + 1) / p->m;
        for (int32_t g = 0; g < NG; g++) {
            int32_t *out = sel + ((size_t)g * (size_t)K + (size_t)j) * (size_t)k;
            if (V <= k) { /* short history: every row, ascending, then padding */
                for (int32_t i = 0; i < k; i++) out[i] = i < V ? i : -1;
                continue;
            }
            if (!ensure_rows(G, V)) return -1;
            if (g == 0) select_base(G, q, j, V, out);
            else select_follow(G, q, g, V, out - (size_t)K * (size_t)k, out);
        }
    }
    if (p->sorted)
        for (int32_t g = 0; g < NG; g++)
            for (int32_t j = 0; j < K; j++)
                if ((n + j + 1) / p->m > k)
                    qsort(sel + ((size_t)g * (size_t)K + (size_t)j) * (size_t)k, (size_t)k, sizeof *sel, cmp_i32);
    return 0;
}

/* Memory: the live requests' state (at most `batch` at once, freed at their
   END) and one round's selections; nothing per request of the whole trace. */
dhs_trace_status dhs_tracegen_run(const dhs_tracegen_params *p, dhs_trace_writer *w, dhs_tracegen_summary *s,
                                  char *err, size_t err_len)
{
    dhs_trace_status st = dhs_tracegen_check(p, err, err_len);
    if (st) return st;
    if (!w) {
        dhs_errf(err, err_len, "writer is NULL");
        return DHS_TRACE_ERR_INVALID_ARG;
    }
    dhs_tracegen_summary sum;
    memset(&sum, 0, sizeof sum);
    const int32_t N = p->n_requests, K = p->spec, k = p->k, NG = p->n_producers;
    const int32_t batch = p->batch > 0 && p->batch < N ? p->batch : N;
    const size_t per_item = (size_t)NG * (size_t)K * (size_t)k;
    gen *G = dhs_selgen_create(p, err, err_len);
    greq **live = calloc((size_t)batch, sizeof *live); /* live requests in id order */
    int32_t *sel = malloc((size_t)batch * per_item * sizeof *sel);
    const int32_t **ptrs = malloc((size_t)batch * (size_t)NG * sizeof *ptrs);
    dhs_trace_item *items = calloc((size_t)batch, sizeof *items);
    int32_t *acc = calloc((size_t)batch, sizeof *acc);
    int32_t n_live = 0;
    if (!G || !live || !sel || !ptrs || !items || !acc) {
        dhs_errf(err, err_len, "out of memory (%zu selection bytes per round)", (size_t)batch * per_item * 4);
        st = DHS_TRACE_ERR_NOMEM;
        goto done;
    }

    int32_t next_pending = 0;
    for (int32_t round = 0; round < p->n_rounds; round++) {
        /* arrivals: fill free slots in id order */
        while (n_live < batch && next_pending < N) {
            greq *q = start_request(p, (uint32_t)next_pending);
            if (!q) {
                dhs_errf(err, err_len, "out of memory");
                st = DHS_TRACE_ERR_NOMEM;
                goto done;
            }
            live[n_live++] = q;
            if ((st = dhs_trace_write_start(w, q->id, q->n))) goto werr;
            sum.requests_started++;
            next_pending++;
        }
        if (n_live == 0) break;
        for (int32_t i = 0; i < n_live; i++) {
            greq *q = live[i];
            int32_t A = 0;
            while (A < K - 1 && rng_u01(&q->r) < p->accept) A++;
            int32_t *base = sel + (size_t)i * per_item;
            const int32_t **pp = ptrs + (size_t)i * (size_t)NG;
            for (int32_t g = 0; g < NG; g++) pp[g] = base + (size_t)g * (size_t)K * (size_t)k;
            if (dhs_selgen_round(G, q, q->n, K, base)) {
                dhs_errf(err, err_len, "out of memory (%" PRId64 " rows)", (q->n + K) / p->m);
                st = DHS_TRACE_ERR_NOMEM;
                goto done;
            }
            for (int32_t j = 0; j < K; j++) {
                int64_t V = (q->n + j + 1) / p->m;
                if (V < k) sum.padding += (uint64_t)(k - V) * (uint64_t)NG;
            }
            items[i] = (dhs_trace_item){.req = q->id, .n_queries = K, .n_r = q->n, .accepted = A, .sel = pp};
            acc[i] = A;
        }
        if ((st = dhs_trace_write_round(w, n_live, items))) goto werr;
        sum.rounds++;
        sum.items += (uint64_t)n_live;
        sum.entries += (uint64_t)n_live * per_item;
        int32_t kept = 0;
        for (int32_t i = 0; i < n_live; i++) {
            greq *q = live[i];
            q->n += acc[i] + 1;
            q->produced += acc[i] + 1;
            if (q->out_target > 0 && q->produced >= q->out_target) {
                if ((st = dhs_trace_write_end(w, q->id))) goto werr;
                sum.requests_ended++;
                dhs_selreq_free(q);
                continue;
            }
            live[kept++] = q;
        }
        n_live = kept;
    }
    for (int32_t i = 0; i < n_live; i++) {
        if ((st = dhs_trace_write_end(w, live[i]->id))) goto werr;
        sum.requests_ended++;
    }
    sum.bytes = dhs_trace_writer_bytes(w);
    if (s) *s = sum;
    st = DHS_TRACE_OK;
    goto done;
werr:
    dhs_errf(err, err_len, "%s", dhs_trace_writer_error(w));
done:
    if (live)
        for (int32_t i = 0; i < n_live; i++) dhs_selreq_free(live[i]);
    free(live);
    dhs_selgen_free(G);
    free(sel);
    free(ptrs);
    free(items);
    free(acc);
    return st;
}

dhs_trace_status dhs_tracegen_write(const dhs_tracegen_params *p, const char *path, dhs_tracegen_summary *s,
                                    char *err, size_t err_len)
{
    dhs_trace_header h;
    dhs_trace_status st = dhs_tracegen_check(p, err, err_len);
    if (st) return st;
    if ((st = dhs_tracegen_header(p, &h))) return st;
    dhs_trace_writer *w;
    if ((st = dhs_trace_writer_open(path, &h, &w, err, err_len))) return st;
    dhs_tracegen_summary sum;
    st = dhs_tracegen_run(p, w, &sum, err, err_len);
    if (st) {
        dhs_trace_writer_close(w);
        remove(path);
        return st;
    }
    if ((st = dhs_trace_writer_close(w))) {
        dhs_errf(err, err_len, "%s: closing failed (%s)", path, dhs_trace_status_str(st));
        remove(path);
        return st;
    }
    struct stat sb;
    if (stat(path, &sb) == 0) sum.bytes = (uint64_t)sb.st_size;
    if (s) *s = sum;
    return DHS_TRACE_OK;
}
