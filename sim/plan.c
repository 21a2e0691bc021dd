/* plan.c - the memory planner (DESIGN §6, §8): presets, the custom-arch JSON
   schema and the per-session / per-GPU arithmetic. See plan.h and
   docs/PLAN.md. Never prints. */
#include "dhs_plan.h"
#include "sim/plan.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* ------------------------------------------------------------------ errors */
static dhs_status fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return DHS_ERR_INVALID_ARG;
}

/* ------------------------------------------------------------------ presets */
/* Each preset is a custom-arch JSON text, parsed by the same loader as
   --arch files, so the schema is exercised by every run. Sources of the
   figures: docs/FACTS.md §1-§2 and docs/PLAN.md. */
static const struct {
    const char *name;
    const char *json;
} presets[] = {
    {"deepseek-v3.2",
     /* 61 layers, each OWN: its own indexer and index keys (132 B: 128 fp8 +
        fp32 scale), its own 656-B FP8 MLA row. k = 2048. One source live. */
     "{\"name\":\"deepseek-v3.2\",\"k\":2048,\"live_sources\":1,"
     "\"consumers\":{\"own\":61,\"follow\":0,\"reuse\":0,\"reindex\":0},"
     "\"groups\":[{\"repeat\":61,\"sources\":1,\"row_bytes\":656,\"m\":1,"
     "\"index_key_bytes\":132,\"producers\":1}]}"},
    {"glm-5.2",
     /* IndexShare FFFSSS(FSSS)x18: 21 producers; producers 0 and 1 serve only
        themselves, the other 19 serve 4 payload layers each (2 + 19*4 = 78).
        656-B FP8 MLA rows, 132-B index keys on the 21 producers. At most the
        4 layers of one group are live: chi = 4. */
     "{\"name\":\"glm-5.2\",\"k\":2048,\"live_sources\":4,"
     "\"consumers\":{\"own\":21,\"follow\":57,\"reuse\":0,\"reindex\":0},"
     "\"groups\":[{\"repeat\":2,\"sources\":1,\"row_bytes\":656,\"m\":1,"
     "\"index_key_bytes\":132,\"producers\":1},"
     "{\"repeat\":19,\"sources\":4,\"row_bytes\":656,\"m\":1,"
     "\"index_key_bytes\":132,\"producers\":1}]}"},
    {"glm-5.3",
     /* Seed 000's GLM-5.3: the GLM-5.2 schedule with 576-byte payload rows. */
     "{\"name\":\"glm-5.3\",\"k\":2048,\"live_sources\":4,"
     "\"consumers\":{\"own\":21,\"follow\":57,\"reuse\":0,\"reindex\":0},"
     "\"groups\":[{\"repeat\":2,\"sources\":1,\"row_bytes\":576,\"m\":1,"
     "\"index_key_bytes\":132,\"producers\":1},"
     "{\"repeat\":19,\"sources\":4,\"row_bytes\":576,\"m\":1,"
     "\"index_key_bytes\":132,\"producers\":1}]}"},
    {"deepseek-v4.1-flash",
     /* 40 layers. kv_source_layer_ids = [2,8,14,20] compute the (compressed)
        KV and own the index keys: 4 sources, one group each. Compress ratios:
        layers 2-19 -> 2 (sources 2, 8, 14: m = 2), 20-39 -> 1 (source 20:
        m = 1). index_source_layer_ids = [2,8,14,20,24,28,32,36]: 8 producers,
        4 OWN + 4 REINDEX over source 20; the other 30 layers of 2..39 REUSE.
        Rows 528 B (V4.1 layout: 512 e4m3 incl. RoPE + 16 UE8M0 scales), index
        keys 132 B at the source's m, k = 512. Assumed: every one of the 40
        layers keeps a 128-token sliding window of 528-B rows on the GPU. */
     "{\"name\":\"deepseek-v4.1-flash\",\"k\":512,\"live_sources\":1,"
     "\"window\":{\"rows\":128,\"layers\":40,\"row_bytes\":528},"
     "\"consumers\":{\"own\":4,\"follow\":0,\"reuse\":30,\"reindex\":4},"
     "\"groups\":[{\"repeat\":3,\"sources\":1,\"row_bytes\":528,\"m\":2,"
     "\"index_key_bytes\":132,\"producers\":1},"
     "{\"repeat\":1,\"sources\":1,\"row_bytes\":528,\"m\":1,"
     "\"index_key_bytes\":132,\"producers\":5}]}"},
};
#define N_PRESETS ((int)(sizeof presets / sizeof presets[0]))

int dhs_plan_preset_count(void) { return N_PRESETS; }

const char *dhs_plan_preset_name(int i)
{
    return (i >= 0 && i < N_PRESETS) ? presets[i].name : NULL;
}

const char *dhs_plan_preset_json(const char *name)
{
    if (!name) return NULL;
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcmp(name, presets[i].name)) return presets[i].json;
    return NULL;
}

dhs_status dhs_plan_preset(const char *name, dhs_plan_arch *out, char *err, size_t errlen)
{
    const char *js = dhs_plan_preset_json(name);
    if (!js) {
        char list[256] = "";
        for (int i = 0; i < N_PRESETS; i++) {
            if (i) strncat(list, ", ", sizeof list - strlen(list) - 1);
            strncat(list, presets[i].name, sizeof list - strlen(list) - 1);
        }
        return fail(err, errlen, "unknown preset '%s' (known: %s)", name ? name : "(null)", list);
    }
    return dhs_plan_arch_from_json(js, out, err, errlen);
}

/* ------------------------------------------------------------------ JSON */
/* Integer field: absent -> *out = def (or an error when required); present
   -> a JSON number, integral, within [lo, hi]. */
static dhs_status json_int(const cJSON *obj, const char *where, const char *key, int required,
                           int64_t def, int64_t lo, int64_t hi, int64_t *out, char *err, size_t errlen)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it) {
        if (required) return fail(err, errlen, "%s: missing required key \"%s\"", where, key);
        *out = def;
        return DHS_OK;
    }
    if (!cJSON_IsNumber(it))
        return fail(err, errlen, "%s: \"%s\" must be a number", where, key);
    double v = it->valuedouble;
    if (!isfinite(v) || v != floor(v))
        return fail(err, errlen, "%s: \"%s\" must be an integer (got %g)", where, key, v);
    if (v < (double)lo || v > (double)hi)
        return fail(err, errlen, "%s: \"%s\" = %g is out of range [%lld, %lld]", where, key, v,
                    (long long)lo, (long long)hi);
    *out = (int64_t)v;
    return DHS_OK;
}

/* Every key of obj must be in allowed[] (catches typos). */
static dhs_status json_keys(const cJSON *obj, const char *where, const char *const *allowed, int n,
                            char *err, size_t errlen)
{
    for (const cJSON *c = obj->child; c; c = c->next) {
        int ok = 0;
        for (int i = 0; i < n && !ok; i++) ok = c->string && !strcmp(c->string, allowed[i]);
        if (!ok) {
            char list[256] = "";
            for (int i = 0; i < n; i++) {
                if (i) strncat(list, ", ", sizeof list - strlen(list) - 1);
                strncat(list, allowed[i], sizeof list - strlen(list) - 1);
            }
            return fail(err, errlen, "%s: unknown key \"%s\" (allowed: %s)", where,
                        c->string ? c->string : "?", list);
        }
    }
    return DHS_OK;
}

#define TRY(x)                          \
    do {                                \
        dhs_status s_ = (x);            \
        if (s_ != DHS_OK) return s_;    \
    } while (0)

static dhs_status parse_group(const cJSON *g, int idx, dhs_plan_arch *a, char *err, size_t errlen)
{
    char where[64];
    snprintf(where, sizeof where, "groups[%d]", idx);
    if (!cJSON_IsObject(g)) return fail(err, errlen, "%s: must be an object", where);
    static const char *const keys[] = {"repeat", "sources", "row_bytes", "m", "index_key_bytes",
                                       "producers"};
    TRY(json_keys(g, where, keys, (int)(sizeof keys / sizeof keys[0]), err, errlen));

    int64_t repeat, m, idx_bytes, producers, n_src;
    TRY(json_int(g, where, "repeat", 0, 1, 1, DHS_PLAN_MAX_GROUPS, &repeat, err, errlen));
    TRY(json_int(g, where, "m", 0, 1, 1, 1 << 20, &m, err, errlen));
    TRY(json_int(g, where, "index_key_bytes", 0, 0, 0, DHS_PLAN_MAX_ROW_BYTES, &idx_bytes, err, errlen));
    TRY(json_int(g, where, "producers", 0, idx_bytes > 0 ? 1 : 0, 0, 1 << 20, &producers, err, errlen));

    dhs_plan_group grp = {0};
    const cJSON *rb = cJSON_GetObjectItemCaseSensitive(g, "row_bytes");
    if (!rb) return fail(err, errlen, "%s: missing required key \"row_bytes\"", where);
    if (cJSON_IsArray(rb)) {
        int n = cJSON_GetArraySize(rb);
        if (n < 1 || n > DHS_PLAN_MAX_SOURCES_PER_GROUP)
            return fail(err, errlen, "%s: \"row_bytes\" array must have 1..%d entries", where,
                        DHS_PLAN_MAX_SOURCES_PER_GROUP);
        TRY(json_int(g, where, "sources", 0, n, 1, DHS_PLAN_MAX_SOURCES_PER_GROUP, &n_src, err, errlen));
        if (n_src != n)
            return fail(err, errlen, "%s: \"sources\" = %lld but \"row_bytes\" lists %d rows", where,
                        (long long)n_src, n);
        int i = 0;
        for (const cJSON *e = rb->child; e; e = e->next, i++) {
            double v = cJSON_IsNumber(e) ? e->valuedouble : -1.0;
            if (!cJSON_IsNumber(e) || !isfinite(v) || v != floor(v) || v < 16 ||
                v > DHS_PLAN_MAX_ROW_BYTES || ((int64_t)v % 16) != 0)
                return fail(err, errlen,
                            "%s: row_bytes[%d] must be an integer multiple of 16 in [16, %u]", where, i,
                            DHS_PLAN_MAX_ROW_BYTES);
            uint32_t b = (uint32_t)v;
            grp.sum_row_bytes += b;
            if (b > grp.max_row_bytes) grp.max_row_bytes = b;
        }
    } else {
        if (!cJSON_IsNumber(rb))
            return fail(err, errlen, "%s: \"row_bytes\" must be a number or an array of numbers", where);
        int64_t b;
        TRY(json_int(g, where, "row_bytes", 1, 0, 16, DHS_PLAN_MAX_ROW_BYTES, &b, err, errlen));
        if (b % 16 != 0)
            return fail(err, errlen, "%s: \"row_bytes\" = %lld is not a multiple of 16 (DHS_ALIGN)", where,
                        (long long)b);
        TRY(json_int(g, where, "sources", 0, 1, 1, DHS_PLAN_MAX_SOURCES_PER_GROUP, &n_src, err, errlen));
        grp.sum_row_bytes = (uint64_t)b * (uint64_t)n_src;
        grp.max_row_bytes = (uint32_t)b;
    }
    grp.n_sources = (int32_t)n_src;
    grp.m = (int32_t)m;
    grp.index_key_bytes = (uint32_t)idx_bytes;
    grp.producers = (int32_t)producers;

    if (a->n_groups + repeat > DHS_PLAN_MAX_GROUPS)
        return fail(err, errlen, "%s: more than %d groups in total", where, DHS_PLAN_MAX_GROUPS);
    for (int64_t r = 0; r < repeat; r++) a->groups[a->n_groups++] = grp;
    return DHS_OK;
}

static dhs_status parse_root(const cJSON *root, dhs_plan_arch *a, char *err, size_t errlen)
{
    if (!cJSON_IsObject(root)) return fail(err, errlen, "arch: top level must be a JSON object");
    static const char *const keys[] = {"name", "k", "live_sources", "window", "consumers", "groups",
                                       "comment"};
    TRY(json_keys(root, "arch", keys, (int)(sizeof keys / sizeof keys[0]), err, errlen));

    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (name) {
        if (!cJSON_IsString(name) || !name->valuestring[0])
            return fail(err, errlen, "arch: \"name\" must be a non-empty string");
        snprintf(a->name, sizeof a->name, "%s", name->valuestring);
    } else {
        snprintf(a->name, sizeof a->name, "custom");
    }
    const cJSON *comment = cJSON_GetObjectItemCaseSensitive(root, "comment");
    if (comment && !cJSON_IsString(comment)) return fail(err, errlen, "arch: \"comment\" must be a string");

    int64_t v;
    TRY(json_int(root, "arch", "k", 1, 0, 1, 1 << 20, &v, err, errlen));
    a->k = (int32_t)v;
    TRY(json_int(root, "arch", "live_sources", 0, 0, 0, 1 << 20, &v, err, errlen));
    a->live_sources = (int32_t)v;

    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(root, "groups");
    if (!groups) return fail(err, errlen, "arch: missing required key \"groups\"");
    if (!cJSON_IsArray(groups) || cJSON_GetArraySize(groups) < 1)
        return fail(err, errlen, "arch: \"groups\" must be a non-empty array");
    int i = 0;
    for (const cJSON *g = groups->child; g; g = g->next, i++) TRY(parse_group(g, i, a, err, errlen));

    const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "window");
    if (w) {
        if (!cJSON_IsObject(w)) return fail(err, errlen, "window: must be an object");
        static const char *const wk[] = {"rows", "layers", "row_bytes"};
        TRY(json_keys(w, "window", wk, 3, err, errlen));
        TRY(json_int(w, "window", "rows", 1, 0, 0, 1 << 24, &v, err, errlen));
        a->window_rows = (int32_t)v;
        TRY(json_int(w, "window", "layers", 1, 0, 0, 1 << 20, &v, err, errlen));
        a->window_layers = (int32_t)v;
        TRY(json_int(w, "window", "row_bytes", 1, 0, 0, DHS_PLAN_MAX_ROW_BYTES, &v, err, errlen));
        a->window_row_bytes = (uint32_t)v;
    }

    /* consumer kinds: defaults derived from the groups */
    int64_t def_own = a->n_groups, def_follow = 0, def_reindex = 0;
    for (int j = 0; j < a->n_groups; j++) {
        def_follow += a->groups[j].n_sources - 1;
        if (a->groups[j].producers > 1) def_reindex += a->groups[j].producers - 1;
    }
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "consumers"); /* NULL: defaults */
    if (c) {
        if (!cJSON_IsObject(c)) return fail(err, errlen, "consumers: must be an object");
        static const char *const ck[] = {"own", "follow", "reuse", "reindex"};
        TRY(json_keys(c, "consumers", ck, 4, err, errlen));
    }
    const int64_t cmax = 1 << 24;
    TRY(json_int(c, "consumers", "own", 0, def_own, 0, cmax, &v, err, errlen));
    a->n_own = (int32_t)v;
    TRY(json_int(c, "consumers", "follow", 0, def_follow, 0, cmax, &v, err, errlen));
    a->n_follow = (int32_t)v;
    TRY(json_int(c, "consumers", "reuse", 0, 0, 0, cmax, &v, err, errlen));
    a->n_reuse = (int32_t)v;
    TRY(json_int(c, "consumers", "reindex", 0, def_reindex, 0, cmax, &v, err, errlen));
    a->n_reindex = (int32_t)v;

    int32_t n_src = dhs_plan_arch_sources(a);
    if (a->live_sources > n_src)
        return fail(err, errlen, "arch: \"live_sources\" = %d exceeds the %d payload sources",
                    a->live_sources, n_src);
    return DHS_OK;
}

dhs_status dhs_plan_arch_from_json(const char *text, dhs_plan_arch *out, char *err, size_t errlen)
{
    if (!text || !out) return fail(err, errlen, "arch: null argument");
    memset(out, 0, sizeof *out);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        size_t off = end ? (size_t)(end - text) : 0;
        int line = 1;
        for (size_t i = 0; i < off && text[i]; i++) line += text[i] == '\n';
        return fail(err, errlen, "arch: malformed JSON near byte %zu (line %d)", off, line);
    }
    dhs_status s = parse_root(root, out, err, errlen);
    cJSON_Delete(root);
    if (s != DHS_OK) memset(out, 0, sizeof *out);
    return s;
}

dhs_status dhs_plan_arch_load(const char *path, dhs_plan_arch *out, char *err, size_t errlen)
{
    if (!path || !out) return fail(err, errlen, "arch: null argument");
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errlen, "cannot open arch file '%s': %s", path, strerror(errno));
    const size_t cap = (size_t)16 << 20;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return fail(err, errlen, "out of memory reading '%s'", path);
    }
    size_t n = fread(buf, 1, cap + 1, f);
    int rerr = ferror(f);
    fclose(f);
    if (rerr) {
        free(buf);
        return fail(err, errlen, "cannot read arch file '%s'", path);
    }
    if (n > cap) {
        free(buf);
        return fail(err, errlen, "arch file '%s' is larger than 16 MiB", path);
    }
    buf[n] = '\0';
    if (strlen(buf) != n) {
        free(buf);
        return fail(err, errlen, "arch file '%s' contains a NUL byte", path);
    }
    char inner[200];
    dhs_status s = dhs_plan_arch_from_json(buf, out, inner, sizeof inner);
    free(buf);
    if (s != DHS_OK) return fail(err, errlen, "%s: %s", path, inner);
    return DHS_OK;
}

/* ------------------------------------------------------------------ totals */
int32_t dhs_plan_arch_sources(const dhs_plan_arch *a)
{
    int32_t n = 0;
    for (int i = 0; i < a->n_groups; i++) n += a->groups[i].n_sources;
    return n;
}

int32_t dhs_plan_arch_producers(const dhs_plan_arch *a)
{
    int32_t n = 0;
    for (int i = 0; i < a->n_groups; i++) n += a->groups[i].producers;
    return n;
}

int32_t dhs_plan_arch_index_stores(const dhs_plan_arch *a)
{
    int32_t n = 0;
    for (int i = 0; i < a->n_groups; i++) n += a->groups[i].index_key_bytes > 0;
    return n;
}

int32_t dhs_plan_arch_max_group_sources(const dhs_plan_arch *a)
{
    int32_t n = 0;
    for (int i = 0; i < a->n_groups; i++)
        if (a->groups[i].n_sources > n) n = a->groups[i].n_sources;
    return n;
}

/* ------------------------------------------------------------------ compute */
double dhs_plan_gib(uint64_t bytes) { return (double)bytes / (double)(1ull << 30); }

dhs_plan_params dhs_plan_params_default(void)
{
    dhs_plan_params p;
    memset(&p, 0, sizeof p);
    p.context = 100000;
    p.page_rows = 64;
    p.hot_rows = -1;
    p.tail_rows = -1;
    p.k = -1;
    p.k_max = 1;
    p.slots = 35;
    p.live_sources = -1;
    p.drafter_window = 0;
    p.draft_row_bytes = 0;
    p.hbm_gib = 140.0;
    p.weights_gib = 50.0;
    p.extra_gib = 0.0;
    p.host_gib = 0.0;
    return p;
}

/* checked arithmetic: any overflow poisons *ok */
static uint64_t mul(uint64_t a, uint64_t b, int *ok)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        *ok = 0;
        return 0;
    }
    return r;
}

static uint64_t add(uint64_t a, uint64_t b, int *ok)
{
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) {
        *ok = 0;
        return 0;
    }
    return r;
}

static int64_t round_up(int64_t x, int64_t p) { return (x + p - 1) / p * p; }

/* floor(free_gib GiB / per bytes), 0 when nothing is free */
static int64_t sessions_for(double gib, uint64_t per)
{
    if (!(gib > 0.0) || per == 0) return 0;
    double s = floor(gib * (double)(1ull << 30) / (double)per);
    return s > 9.0e15 ? (int64_t)9.0e15 : (int64_t)s;
}

static int bad_gib(double v) { return !isfinite(v) || v < 0.0 || v > 1.0e9; }

dhs_status dhs_plan_compute(const dhs_plan_arch *a, const dhs_plan_params *p, dhs_plan_result *out,
                            char *err, size_t errlen)
{
    if (!a || !p || !out) return fail(err, errlen, "null argument");
    memset(out, 0, sizeof *out);
    if (a->n_groups < 1 || a->n_groups > DHS_PLAN_MAX_GROUPS)
        return fail(err, errlen, "the architecture has no groups");
    for (int g = 0; g < a->n_groups; g++)
        if (a->groups[g].n_sources < 1 || a->groups[g].m < 1 || a->groups[g].sum_row_bytes == 0)
            return fail(err, errlen, "group %d has no sources or a zero m/row size", g);

    /* ---- parameters */
    if (p->context < 1 || p->context > DHS_PLAN_MAX_CONTEXT)
        return fail(err, errlen, "context must be in [1, 2^40] positions");
    if (p->page_rows < 1 || p->page_rows > (1 << 20))
        return fail(err, errlen, "page rows must be in [1, 2^20]");
    const int64_t P = p->page_rows;
    int32_t k = p->k < 0 ? a->k : p->k;
    if (k < 1 || k > (1 << 20)) return fail(err, errlen, "k must be in [1, 2^20]");
    if (p->k_max < 1 || p->k_max > 1024) return fail(err, errlen, "k_max must be in [1, 1024]");
    if (p->slots < 1 || p->slots > (1 << 20)) return fail(err, errlen, "slots must be in [1, 2^20]");
    int64_t hot = p->hot_rows < 0 ? 2 * (int64_t)k : p->hot_rows;
    if (hot > (1 << 26)) return fail(err, errlen, "hot rows above 2^26");
    hot = round_up(hot, P);
    int64_t tail = p->tail_rows < 0 ? P : p->tail_rows;
    if (tail > (1 << 26)) return fail(err, errlen, "tail rows above 2^26");
    tail = round_up(tail, P);
    if (tail < p->k_max)
        return fail(err, errlen, "tail rows (%lld) must hold a verification block of k_max = %d",
                    (long long)tail, p->k_max);
    int32_t n_src = dhs_plan_arch_sources(a);
    int32_t chi = p->live_sources < 0 ? a->live_sources : p->live_sources;
    if (chi == 0) chi = dhs_plan_arch_max_group_sources(a);
    if (chi < 1 || chi > n_src)
        return fail(err, errlen, "live sources must be in [1, %d] (the model's payload sources)", n_src);
    if (p->drafter_window < 0 || p->drafter_window > ((int64_t)1 << 32))
        return fail(err, errlen, "drafter window must be in [0, 2^32]");
    if (p->draft_row_bytes > ((uint64_t)1 << 32))
        return fail(err, errlen, "draft row bytes above 2^32");
    if (bad_gib(p->hbm_gib) || bad_gib(p->weights_gib) || bad_gib(p->extra_gib) || bad_gib(p->host_gib))
        return fail(err, errlen, "GiB budgets must be finite and non-negative");

    out->context = p->context;
    out->page_rows = p->page_rows;
    out->hot_rows = (int32_t)hot;
    out->tail_rows = (int32_t)tail;
    out->k = k;
    out->k_max = p->k_max;
    out->slots = p->slots;
    out->live_sources = chi;
    out->drafter_window = p->drafter_window;
    out->draft_row_bytes = p->draft_row_bytes;
    out->has_drafter = p->drafter_window > 0 || p->draft_row_bytes > 0;
    out->staging_needed = (int64_t)p->k_max * k > hot;

    /* ---- per-group sums */
    int ok = 1;
    uint64_t payload = 0, index = 0, sum_row = 0, meta_rev = 0, meta_slots = 0, meta_pages = 0;
    uint32_t max_row = 0;
    for (int g = 0; g < a->n_groups; g++) {
        const dhs_plan_group *G = &a->groups[g];
        int64_t rows = round_up((p->context + G->m - 1) / G->m, P); /* history rows, whole pages */
        int64_t pages = rows / P;
        payload = add(payload, mul((uint64_t)rows, G->sum_row_bytes, &ok), &ok);
        index = add(index, mul((uint64_t)rows, G->index_key_bytes, &ok), &ok);
        sum_row = add(sum_row, G->sum_row_bytes, &ok);
        if (G->max_row_bytes > max_row) max_row = G->max_row_bytes;
        /* reverse index slot_of: int32 per history row; host-valid bitmap: 1 bit per row */
        meta_rev = add(meta_rev, (uint64_t)rows * 4u + (uint64_t)(rows + 63) / 64 * 8u, &ok);
        /* per hot slot: row_of int64, prot uint32, fill uint32, policy links 2 x int32 */
        meta_slots = add(meta_slots, (uint64_t)hot * 24u, &ok);
        /* optional pages: 1 state byte per page per group, an int32 page id per page per
           source; hot and tail page lists: an int32 per page per source */
        meta_pages = add(meta_pages,
                         (uint64_t)pages * (1u + 4u * (uint64_t)G->n_sources) +
                             (uint64_t)((hot + tail) / P) * 4u * (uint64_t)G->n_sources,
                         &ok);
    }
    uint64_t window = mul(mul((uint64_t)a->window_rows, (uint64_t)a->window_layers, &ok),
                          a->window_row_bytes, &ok);

    /* ---- drafter ring and staging (sizing.c) */
    if (out->has_drafter) {
        out->ring_rows = dhs_ring_rows(p->drafter_window, p->k_max, p->page_rows);
        out->ring = mul((uint64_t)out->ring_rows, p->draft_row_bytes, &ok);
        out->ring_total = dhs_ring_bytes(p->drafter_window, p->k_max, p->page_rows, p->slots,
                                         p->draft_row_bytes);
        if (ok && out->ring_total / (uint64_t)p->slots != out->ring) ok = 0;
    }
    if (out->staging_needed) {
        out->staging = dhs_staging_bytes(chi, 1, p->k_max, k, max_row);
        out->staging_total = dhs_staging_bytes(chi, p->slots, p->k_max, k, max_row);
        if (out->staging_total / (uint64_t)p->slots != out->staging) ok = 0;
    }

    /* ---- resident */
    out->res_payload = payload;
    out->res_index = index;
    out->res_window = window;
    out->res_ring = out->ring;
    out->resident_total = add(add(add(payload, index, &ok), window, &ok), out->ring, &ok);

    /* ---- hierarchical */
    out->index_keys = index;
    out->hot = mul((uint64_t)hot, sum_row, &ok);
    out->tail = mul((uint64_t)tail, sum_row, &ok);
    out->window = window;
    out->meta_reverse = meta_rev;
    out->meta_slots = meta_slots;
    out->meta_pages = meta_pages;
    out->metadata = add(add(meta_rev, meta_slots, &ok), meta_pages, &ok);
    uint64_t h = add(index, out->hot, &ok);
    h = add(h, out->tail, &ok);
    h = add(h, window, &ok);
    h = add(h, out->ring, &ok);
    h = add(h, out->staging, &ok);
    out->hier_no_meta = h;
    out->hier_total = add(h, out->metadata, &ok);

    /* ---- host */
    out->host_per_session = payload;
    if (!ok) return fail(err, errlen, "sizes overflow 64-bit byte counts; use smaller inputs");

    /* ---- sessions per GPU */
    out->free_gib = p->hbm_gib - p->weights_gib - p->extra_gib;
    out->sessions_resident = sessions_for(out->free_gib, out->resident_total);
    out->sessions_hier = sessions_for(out->free_gib, out->hier_total);
    out->sessions_host = p->host_gib > 0.0 ? sessions_for(p->host_gib, out->host_per_session) : -1;
    return DHS_OK;
}
