/* model.c - the reference DSA model: weights from a seeded generator, the
 * layer layouts (OWN / FOLLOW / COMPRESSED), the forward pieces, the drafter
 * and the prefill. Shapes are written on every array; matrices are row-major
 * [out][in]. See model.h for the equations and docs/MODEL.md for the rest. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dhs_plan.h"
#include "dev/topk_spec.h" /* dhs_topk_fused_ref: the engine's topk = fused on the CPU */
#include "model/model.h"
#include "model/gpu.h"
#include "model/iqsynth.h"
#include "util/rng.h"

typedef struct layer_w {
    float *wdkv;  /* [512][d] latent (NoPE) */
    float *wkr;   /* [64][d] latent RoPE part */
    float *wq;    /* [nh*512][d] absorbed query, NoPE */
    float *wqr;   /* [nh*64][d] query RoPE part */
    float *wuv;   /* [nh][d_v][512] value up-projection */
    float *wo;    /* [d][nh*d_v] */
    float *w1;    /* [hid][d] */
    float *w2;    /* [d][hid] */
    float *wik;   /* [d_I][d] index key (producers only) */
    float *wiq;   /* [H_I*d_I][d] index queries (producers only) */
    float *wiw;   /* [H_I][d] index head weights (producers only) */
} layer_w;

struct dhs_ref_model {
    dhs_ref_cfg cfg;
    int32_t n_groups, n_sources;
    dhs_ref_layer_info layer[DHS_REF_MAX_LAYERS];
    int32_t src_layer[DHS_REF_MAX_LAYERS];        /* [n_sources] layer of a source */
    int32_t grp_first[DHS_REF_MAX_LAYERS + 1];    /* sources of group g: grp_src[grp_first[g] .. grp_first[g+1]) */
    int32_t grp_src[DHS_REF_MAX_LAYERS];
    float *emb;    /* [V][d] */
    float *w_out;  /* [V][d] */
    layer_w lw[DHS_REF_MAX_LAYERS];
    float *wdq, *wdk, *wdv; /* drafter [dd][d] */
    float *wdo;             /* drafter [d][dd] */
    dhs_ref_iq_synth iqs;   /* the locality device (off: iqs.on == 0) */
};

struct dhs_ref_scratch {
    float *q;       /* [nh][576] */
    float *rows;    /* [k][576] decoded selected rows */
    float *att;     /* [k] */
    float *o;       /* [512] */
    float *oc;      /* [512] one attention chunk's unnormalised values */
    float *v;       /* [nh*d_v] */
    float *tmp;     /* [max(d, hid, V)] */
    float *hid;     /* [hid] */
    float *scores;  /* [cap_scores] */
    int64_t cap_scores;
    uint64_t *heap; /* [k] */
    float *dq;      /* drafter [dd] */
    float *datt;    /* drafter [W+1] */
};

/* ------------------------------------------------------------- config */
dhs_ref_cfg dhs_ref_cfg_tiny(void)
{
    dhs_ref_cfg c;
    memset(&c, 0, sizeof c);
    c.vocab = 256;
    c.d_model = 64;
    c.n_layers = 4;
    c.n_heads = 1;
    c.d_v = 32;
    c.mlp_hidden = 128;
    c.idx_heads = 4;
    c.idx_dim = 16;
    c.topk = 64;
    c.layout = DHS_REF_LAYOUT_OWN;
    c.follow_every = 2;
    c.comp_m = 4;
    c.draft_window = 64;
    c.draft_dim = 16;
    c.alpha = 0.025f;
    c.beta = 0.03f;
    c.logit_scale = 4.0f;
    c.seed = 1;
    return c;
}

const char *dhs_ref_cfg_check(const dhs_ref_cfg *c)
{
    if (c->vocab < 2 || c->d_model < 1 || c->n_heads < 1 || c->d_v < 1 || c->mlp_hidden < 1) return "bad dims";
    if (c->n_layers < 1 || c->n_layers > DHS_REF_MAX_LAYERS) return "n_layers out of range";
    if (c->d_model > DHS_REF_MAX_D) return "d_model above DHS_REF_MAX_D";
    if (c->idx_heads < 1 || c->idx_heads > DHS_REF_MAX_IDX_HEADS || c->idx_dim < 1 || c->idx_dim > DHS_REF_MAX_IDX_DIM)
        return "bad indexer dims";
    if (c->topk < 1) return "topk < 1";
    if ((int)c->layout < 0 || c->layout > DHS_REF_LAYOUT_COMPRESSED) return "bad layout";
    if (c->follow_every < 1) return "follow_every < 1";
    if (c->follow_lead < 0 || c->follow_lead >= c->n_layers) return "follow_lead out of range";
    if (c->key_fp8 != 0 && c->key_fp8 != 1) return "key_fp8 is 0 or 1";
    if (c->exp_portable != 0 && c->exp_portable != 1) return "exp_portable is 0 or 1";
    if (c->comp_m < 1 || c->comp_m > DHS_REF_MAX_M) return "comp_m out of range";
    if (c->draft_window < 0 || c->draft_dim < 1 || c->draft_dim > DHS_REF_MAX_DRAFT_DIM) return "bad drafter dims";
    return 0;
}

/* ------------------------------------------------------------- geometries */
const char *dhs_ref_geometry_str(dhs_ref_geometry g)
{
    switch (g) {
    case DHS_REF_GEOM_TINY: return "tiny";
    case DHS_REF_GEOM_GLM53: return "glm-5.3";
    case DHS_REF_GEOM_DSV32: return "deepseek-v3.2";
    }
    return "?";
}

int dhs_ref_geometry_parse(const char *s, dhs_ref_geometry *out)
{
    for (int i = 0; i <= DHS_REF_GEOM_DSV32; i++)
        if (!strcmp(s, dhs_ref_geometry_str((dhs_ref_geometry)i))) {
            *out = (dhs_ref_geometry)i;
            return 0;
        }
    return -1;
}

dhs_ref_cfg dhs_ref_cfg_geometry(dhs_ref_geometry g)
{
    dhs_ref_cfg c = dhs_ref_cfg_tiny();
    if (g == DHS_REF_GEOM_TINY) return c;
    /* the KV geometry is the real model's; the hidden size stays tiny's */
    c.idx_heads = 4;
    c.idx_dim = 128; /* 128 FP8 + 4-byte scale = 132-byte keys */
    c.key_fp8 = 1;
    c.exp_portable = 1; /* the GPU model reproduces the CPU's logits bit for bit */
    c.topk = 2048;
    c.alpha = 0.012f; /* deeper stacks: smaller residual steps keep the drafter useful */
    if (g == DHS_REF_GEOM_GLM53) {
        c.n_layers = 78;
        c.layout = DHS_REF_LAYOUT_FOLLOW; /* IndexShare: FFFSSS(FSSS)x18, 21 producers */
        c.follow_every = 4;
        c.follow_lead = 2;
    } else {
        c.n_layers = 61;
        c.layout = DHS_REF_LAYOUT_OWN;
    }
    return c;
}

void dhs_ref_cfg_hidden_str(const dhs_ref_cfg *c, char *buf, size_t len)
{
    snprintf(buf, len, "d_model %d, %d attention head%s (d_v %d), MLP %d, vocab %d, indexer %d heads x %d",
             c->d_model, c->n_heads, c->n_heads == 1 ? "" : "s", c->d_v, c->mlp_hidden, c->vocab, c->idx_heads,
             c->idx_dim);
}

const char *dhs_ref_layout_str(dhs_ref_layout l)
{
    switch (l) {
    case DHS_REF_LAYOUT_OWN: return "own";
    case DHS_REF_LAYOUT_FOLLOW: return "follow";
    case DHS_REF_LAYOUT_COMPRESSED: return "compressed";
    }
    return "?";
}

int dhs_ref_layout_parse(const char *s, dhs_ref_layout *out)
{
    for (int i = 0; i <= DHS_REF_LAYOUT_COMPRESSED; i++)
        if (!strcmp(s, dhs_ref_layout_str((dhs_ref_layout)i))) {
            *out = (dhs_ref_layout)i;
            return 0;
        }
    return -1;
}

/* ------------------------------------------------------------- weights */
static float *mat(uint64_t seed, uint64_t id, int64_t rows, int64_t cols, float gain, int *fail)
{
    float *w = malloc((size_t)(rows * cols) * sizeof *w);
    if (!w) {
        *fail = 1;
        return NULL;
    }
    uint64_t st = seed * 0x9E3779B97F4A7C15ull ^ (id + 1) * 0xD1B54A32D192ED03ull;
    float scale = gain * sqrtf(3.0f / (float)cols); /* unit-variance outputs for unit inputs */
    for (int64_t i = 0; i < rows * cols; i++) w[i] = (dhs_rng_f24(&st) * 2.0f - 1.0f) * scale;
    return w;
}

dhs_status dhs_ref_model_create(const dhs_ref_cfg *cfg, dhs_ref_model **out)
{
    if (!cfg || !out || dhs_ref_cfg_check(cfg)) return DHS_ERR_INVALID_ARG;
    *out = NULL;
    dhs_ref_model *m = calloc(1, sizeof *m);
    if (!m) return DHS_ERR_NOMEM;
    m->cfg = *cfg;
    const dhs_ref_cfg *c = &m->cfg;
    /* layer map */
    int32_t g = -1;
    for (int32_t l = 0; l < c->n_layers; l++) {
        dhs_ref_layer_info *li = &m->layer[l];
        int32_t lf = l - c->follow_lead > 0 ? l - c->follow_lead : 0;
        li->producer = c->layout != DHS_REF_LAYOUT_FOLLOW || lf % c->follow_every == 0;
        if (li->producer) g++;
        li->group = g;
        li->source = l;
        li->m = (c->layout == DHS_REF_LAYOUT_COMPRESSED && (l & 1)) ? c->comp_m : 1;
        m->src_layer[l] = l;
    }
    m->n_groups = g + 1;
    m->n_sources = c->n_layers;
    for (int32_t gg = 0, n = 0; gg < m->n_groups; gg++) {
        m->grp_first[gg] = n;
        for (int32_t l = 0; l < c->n_layers; l++)
            if (m->layer[l].group == gg) m->grp_src[n++] = m->layer[l].source;
        m->grp_first[gg + 1] = n;
    }
    /* weights: each matrix its own stream, id = layer * 16 + kind */
    int fail = 0, d = c->d_model, nh = c->n_heads, hid = c->mlp_hidden;
    uint64_t s = c->seed;
    m->emb = mat(s, 1000001, c->vocab, d, 1.0f, &fail);
    m->w_out = mat(s, 1000002, c->vocab, d, 1.0f, &fail);
    for (int32_t l = 0; l < c->n_layers; l++) {
        layer_w *w = &m->lw[l];
        uint64_t id = (uint64_t)l * 16;
        w->wdkv = mat(s, id + 0, DHS_REF_NOPE, d, 1.0f, &fail);
        w->wkr = mat(s, id + 1, DHS_REF_ROPE, d, 1.0f, &fail);
        w->wq = mat(s, id + 2, (int64_t)nh * DHS_REF_NOPE, d, 1.0f, &fail);
        w->wqr = mat(s, id + 3, (int64_t)nh * DHS_REF_ROPE, d, 1.0f, &fail);
        w->wuv = mat(s, id + 4, (int64_t)nh * c->d_v, DHS_REF_NOPE, 1.0f, &fail);
        w->wo = mat(s, id + 5, d, (int64_t)nh * c->d_v, 1.0f, &fail);
        w->w1 = mat(s, id + 6, hid, d, 1.0f, &fail);
        w->w2 = mat(s, id + 7, d, hid, 1.0f, &fail);
        if (m->layer[l].producer) {
            w->wik = mat(s, id + 8, c->idx_dim, d, 1.0f, &fail);
            w->wiq = mat(s, id + 9, (int64_t)c->idx_heads * c->idx_dim, d, 1.0f, &fail);
            w->wiw = mat(s, id + 10, c->idx_heads, d, 1.0f, &fail);
        }
    }
    m->wdq = mat(s, 2000001, c->draft_dim, d, 1.0f, &fail);
    m->wdk = mat(s, 2000002, c->draft_dim, d, 1.0f, &fail);
    m->wdv = mat(s, 2000003, c->draft_dim, d, 1.0f, &fail);
    m->wdo = mat(s, 2000004, d, c->draft_dim, 1.0f, &fail);
    if (fail) {
        dhs_ref_model_destroy(m);
        return DHS_ERR_NOMEM;
    }
    *out = m;
    return DHS_OK;
}

void dhs_ref_model_destroy(dhs_ref_model *m)
{
    if (!m) return;
    free(m->emb);
    free(m->w_out);
    for (int32_t l = 0; l < DHS_REF_MAX_LAYERS; l++) {
        layer_w *w = &m->lw[l];
        free(w->wdkv);
        free(w->wkr);
        free(w->wq);
        free(w->wqr);
        free(w->wuv);
        free(w->wo);
        free(w->w1);
        free(w->w2);
        free(w->wik);
        free(w->wiq);
        free(w->wiw);
    }
    free(m->wdq);
    free(m->wdk);
    free(m->wdv);
    free(m->wdo);
    free(m);
}

const dhs_ref_cfg *dhs_ref_model_cfg(const dhs_ref_model *m) { return &m->cfg; }
int32_t dhs_ref_n_groups(const dhs_ref_model *m) { return m->n_groups; }
int32_t dhs_ref_n_sources(const dhs_ref_model *m) { return m->n_sources; }
const dhs_ref_layer_info *dhs_ref_layer(const dhs_ref_model *m, int32_t l) { return &m->layer[l]; }
int32_t dhs_ref_source_m(const dhs_ref_model *m, int32_t src) { return m->layer[m->src_layer[src]].m; }
int32_t dhs_ref_source_layer(const dhs_ref_model *m, int32_t src) { return m->src_layer[src]; }
int32_t dhs_ref_group_m(const dhs_ref_model *m, int32_t g) { return dhs_ref_source_m(m, m->grp_src[m->grp_first[g]]); }
uint32_t dhs_ref_key_bytes(const dhs_ref_model *m)
{
    return m->cfg.key_fp8 ? (uint32_t)m->cfg.idx_dim + 4u : (uint32_t)m->cfg.idx_dim * (uint32_t)sizeof(float);
}

const int32_t *dhs_ref_group_sources(const dhs_ref_model *m, int32_t g, int32_t *n)
{
    *n = m->grp_first[g + 1] - m->grp_first[g];
    return m->grp_src + m->grp_first[g];
}

void dhs_ref_arch(const dhs_ref_model *m, dhs_arch *a)
{
    memset(a, 0, sizeof *a);
    a->n_groups = m->n_groups;
    a->n_sources = m->n_sources;
    a->n_consumers = m->cfg.n_layers;
    for (int32_t l = 0; l < m->cfg.n_layers; l++) {
        const dhs_ref_layer_info *li = &m->layer[l];
        a->sources[li->source] = (dhs_source_desc){DHS_REF_ROW_BYTES, (uint32_t)li->m, li->group};
        a->consumers[l] = (dhs_consumer_desc){li->producer ? DHS_CONSUMER_OWN : DHS_CONSUMER_FOLLOW, li->source,
                                              li->group};
    }
    a->index_key_bytes = dhs_ref_key_bytes(m);
}

/* ------------------------------------------------------------- scratch */
dhs_ref_scratch *dhs_ref_scratch_create(const dhs_ref_model *m)
{
    const dhs_ref_cfg *c = &m->cfg;
    dhs_ref_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    int32_t big = c->d_model;
    if (c->mlp_hidden > big) big = c->mlp_hidden;
    if (c->vocab > big) big = c->vocab;
    s->q = malloc(sizeof(float) * (size_t)c->n_heads * DHS_REF_LAT);
    s->rows = malloc(sizeof(float) * (size_t)c->topk * DHS_REF_LAT);
    s->att = malloc(sizeof(float) * (size_t)c->topk);
    s->o = malloc(sizeof(float) * DHS_REF_NOPE);
    s->oc = malloc(sizeof(float) * DHS_REF_NOPE);
    s->v = malloc(sizeof(float) * (size_t)c->n_heads * (size_t)c->d_v);
    s->tmp = malloc(sizeof(float) * (size_t)big);
    s->hid = malloc(sizeof(float) * (size_t)c->mlp_hidden);
    s->heap = malloc(sizeof(uint64_t) * (size_t)c->topk);
    s->dq = malloc(sizeof(float) * (size_t)c->draft_dim);
    s->datt = malloc(sizeof(float) * (size_t)(c->draft_window + 1));
    if (!s->q || !s->rows || !s->att || !s->o || !s->oc || !s->v || !s->tmp || !s->hid || !s->heap || !s->dq || !s->datt) {
        dhs_ref_scratch_destroy(s);
        return NULL;
    }
    return s;
}

void dhs_ref_scratch_destroy(dhs_ref_scratch *s)
{
    if (!s) return;
    free(s->q);
    free(s->rows);
    free(s->att);
    free(s->o);
    free(s->oc);
    free(s->v);
    free(s->tmp);
    free(s->hid);
    free(s->scores);
    free(s->heap);
    free(s->dq);
    free(s->datt);
    free(s);
}

static float *scores_buf(dhs_ref_scratch *s, int64_t n)
{
    if (n > s->cap_scores) {
        int64_t cap = n < 1024 ? 1024 : n + n / 2;
        float *p = realloc(s->scores, sizeof(float) * (size_t)cap);
        if (!p) return NULL;
        s->scores = p;
        s->cap_scores = cap;
    }
    return s->scores;
}

/* ------------------------------------------------------------- pieces */
static void matvec(const float *w, const float *x, int32_t rows, int32_t cols, float *y)
{
    for (int32_t r = 0; r < rows; r++) y[r] = dhs_ref_dot(w + (int64_t)r * cols, x, cols);
}

/* the angles' frequencies 10000^(-i/32), the same pow() calls as before they were kept: the angles are
   bit-identical, and a decode round no longer pays 32 pow() per query on the host (at 64 queries a
   round these and the trigonometry were most of the device step's host control plane) */
static double rope_freq[DHS_REF_ROPE / 2];
static pthread_once_t rope_once = PTHREAD_ONCE_INIT;
static void rope_freq_init(void)
{
    for (int i = 0; i < DHS_REF_ROPE / 2; i++) rope_freq[i] = pow(10000.0, -(double)i / (DHS_REF_ROPE / 2));
}

void dhs_ref_rope_cs(int64_t pos, float c[DHS_REF_ROPE / 2], float s[DHS_REF_ROPE / 2])
{
    pthread_once(&rope_once, rope_freq_init);
    for (int i = 0; i < DHS_REF_ROPE / 2; i++) {
        double th = (double)pos * rope_freq[i];
        c[i] = (float)cos(th);
        s[i] = (float)sin(th);
    }
}

void dhs_ref_weights(const dhs_ref_model *m, int32_t l, dhs_ref_layer_weights *w)
{
    const layer_w *x = &m->lw[l];
    *w = (dhs_ref_layer_weights){x->wdkv, x->wkr, x->wq, x->wqr, x->wuv, x->wo, x->w1, x->w2, x->wik, x->wiq, x->wiw};
}

const float *dhs_ref_embedding(const dhs_ref_model *m) { return m->emb; }
const float *dhs_ref_output_head(const dhs_ref_model *m) { return m->w_out; }

/* NeoX-style RoPE on 64 values: pairs (i, i+32), angle pos * 10000^(-i/32) */
static void rope(float *v, int64_t pos)
{
    float cs[DHS_REF_ROPE / 2], sn[DHS_REF_ROPE / 2];
    dhs_ref_rope_cs(pos, cs, sn);
    for (int i = 0; i < DHS_REF_ROPE / 2; i++) {
        float c = cs[i], s = sn[i];
        float a = v[i], b = v[i + DHS_REF_ROPE / 2];
        v[i] = a * c - b * s;
        v[i + DHS_REF_ROPE / 2] = a * s + b * c;
    }
}

void dhs_ref_embed(const dhs_ref_model *m, int32_t token, float *x)
{
    memcpy(x, m->emb + (int64_t)token * m->cfg.d_model, sizeof(float) * (size_t)m->cfg.d_model);
}

void dhs_ref_rmsnorm(const dhs_ref_model *m, const float *x, float *xn)
{
    int32_t d = m->cfg.d_model;
    float ss = dhs_ref_dot(x, x, d);
    float r = 1.0f / sqrtf(ss / (float)d + 1e-6f);
    for (int32_t i = 0; i < d; i++) xn[i] = x[i] * r;
}

void dhs_ref_latent(const dhs_ref_model *m, int32_t l, int64_t pos, const float *xn, float lat[DHS_REF_LAT])
{
    const layer_w *w = &m->lw[l];
    matvec(w->wdkv, xn, DHS_REF_NOPE, m->cfg.d_model, lat);
    matvec(w->wkr, xn, DHS_REF_ROPE, m->cfg.d_model, lat + DHS_REF_NOPE);
    rope(lat + DHS_REF_NOPE, pos);
}

void dhs_ref_index_key(const dhs_ref_model *m, int32_t l, const float *xn, float *key)
{
    matvec(m->lw[l].wik, xn, m->cfg.idx_dim, m->cfg.d_model, key);
}

void dhs_ref_mean(const float *const *v, int32_t n, int32_t dim, float *out)
{
    for (int32_t i = 0; i < dim; i++) {
        float s = 0.0f;
        for (int32_t j = 0; j < n; j++) s += v[j][i];
        out[i] = s / (float)n;
    }
}

/* ------------------------------------------------------------- index keys */
static int64_t keys_cap(int64_t cap)
{
    cap = (cap + DHS_REF_KEY_BLOCK - 1) / DHS_REF_KEY_BLOCK * DHS_REF_KEY_BLOCK;
    return cap < DHS_REF_KEY_BLOCK ? DHS_REF_KEY_BLOCK : cap;
}

int dhs_ref_keys_init(dhs_ref_keys *k, int32_t dim, int64_t cap)
{
    memset(k, 0, sizeof *k);
    cap = keys_cap(cap);
    k->data = calloc((size_t)(cap * dim), sizeof(float));
    k->cap = k->data ? cap : 0;
    k->dim = dim;
    return k->data ? 0 : -1;
}

int dhs_ref_keys_init_fp8(dhs_ref_keys *k, int32_t dim, int64_t cap)
{
    memset(k, 0, sizeof *k);
    cap = keys_cap(cap);
    k->codes = calloc((size_t)(cap * dim), 1);
    k->scales = calloc((size_t)cap, sizeof(float));
    k->dim = dim;
    k->fp8 = 1;
    if (!k->codes || !k->scales) {
        dhs_ref_keys_free(k);
        return -1;
    }
    k->cap = cap;
    return 0;
}

int dhs_ref_keys_init_model(const dhs_ref_model *m, dhs_ref_keys *k, int64_t cap)
{
    return m->cfg.key_fp8 ? dhs_ref_keys_init_fp8(k, m->cfg.idx_dim, cap) : dhs_ref_keys_init(k, m->cfg.idx_dim, cap);
}

void dhs_ref_keys_free(dhs_ref_keys *k)
{
    free(k->data);
    free(k->codes);
    free(k->scales);
    k->data = NULL;
    k->codes = NULL;
    k->scales = NULL;
    k->cap = 0;
}

void dhs_ref_keys_copy(dhs_ref_keys *dst, const dhs_ref_keys *src, int64_t rows)
{
    int64_t nb = (rows + DHS_REF_KEY_BLOCK - 1) / DHS_REF_KEY_BLOCK; /* whole blocks: same layout */
    size_t per = (size_t)src->dim * DHS_REF_KEY_BLOCK;
    if (src->fp8) {
        memcpy(dst->codes, src->codes, (size_t)nb * per);
        memcpy(dst->scales, src->scales, sizeof(float) * (size_t)rows);
    } else {
        memcpy(dst->data, src->data, sizeof(float) * (size_t)nb * per);
    }
}

static size_t key_off(const dhs_ref_keys *k, int64_t s)
{
    return (size_t)((s / DHS_REF_KEY_BLOCK) * k->dim * DHS_REF_KEY_BLOCK + s % DHS_REF_KEY_BLOCK);
}

void dhs_ref_keys_set(dhs_ref_keys *k, int64_t s, const float *key)
{
    size_t o = key_off(k, s);
    if (k->fp8) {
        float sc = dhs_ref_fp8_scale(key, k->dim);
        k->scales[s] = sc;
        for (int32_t i = 0; i < k->dim; i++) k->codes[o + (size_t)i * DHS_REF_KEY_BLOCK] = dhs_ref_fp8_encode(key[i] / sc);
        return;
    }
    for (int32_t i = 0; i < k->dim; i++) k->data[o + (size_t)i * DHS_REF_KEY_BLOCK] = key[i];
}

void dhs_ref_keys_get(const dhs_ref_keys *k, int64_t s, float *key)
{
    size_t o = key_off(k, s);
    if (k->fp8) {
        const float *lut = dhs_ref_fp8_table();
        for (int32_t i = 0; i < k->dim; i++) key[i] = lut[k->codes[o + (size_t)i * DHS_REF_KEY_BLOCK]] * k->scales[s];
        return;
    }
    for (int32_t i = 0; i < k->dim; i++) key[i] = k->data[o + (size_t)i * DHS_REF_KEY_BLOCK];
}

void dhs_ref_keys_clear(dhs_ref_keys *k, int64_t from, int64_t to)
{
    if (to > k->cap) to = k->cap;
    for (int64_t s = from < 0 ? 0 : from; s < to; s++) {
        size_t o = key_off(k, s);
        if (k->fp8) {
            k->scales[s] = 0.0f;
            for (int32_t i = 0; i < k->dim; i++) k->codes[o + (size_t)i * DHS_REF_KEY_BLOCK] = 0;
        } else {
            for (int32_t i = 0; i < k->dim; i++) k->data[o + (size_t)i * DHS_REF_KEY_BLOCK] = 0.0f;
        }
    }
}

/* ------------------------------------------------------------- indexer
 * I[t,s] = sum_h w[t,h] * ReLU(q[t,h] . key[s]) with w = (W_iw xn) / sqrt(H_I d_I).
 * Order: each q.key sums i = 0..d_I-1 ascending, one fused multiply-add a step
 * (dhs_ref_index_block_fma); heads summed h = 0..H_I-1 (multiply, then add). */
/* the scores of query qt ([i][h]) with head weights w over n_cand keys */
static void index_scores_q(const dhs_ref_model *m, float qt[DHS_REF_MAX_IDX_DIM][DHS_REF_MAX_IDX_HEADS], const float *w,
                           const dhs_ref_keys *keys, int64_t n_cand, float *scores);

void dhs_ref_index_scores(const dhs_ref_model *m, int32_t l, const float *xn, const dhs_ref_keys *keys,
                          int64_t n_cand, float *scores)
{
    const dhs_ref_cfg *c = &m->cfg;
    const layer_w *lw = &m->lw[l];
    int32_t H = c->idx_heads, D = c->idx_dim;
    float w[DHS_REF_MAX_IDX_HEADS];
    float qt[DHS_REF_MAX_IDX_DIM][DHS_REF_MAX_IDX_HEADS]; /* [i][h] */
    float wscale = 1.0f / sqrtf((float)(H * D));
    for (int32_t h = 0; h < H; h++) {
        for (int32_t i = 0; i < D; i++) qt[i][h] = dhs_ref_dot(lw->wiq + ((int64_t)h * D + i) * c->d_model, xn, c->d_model);
        w[h] = dhs_ref_dot(lw->wiw + (int64_t)h * c->d_model, xn, c->d_model) * wscale;
    }
    index_scores_q(m, qt, w, keys, n_cand, scores);
}

/* the synthetic query (model/iqsynth.h): q[o] = a_t u[o] + b z[o], o = h * D + i */
static void iq_synth_query(const dhs_ref_model *m, int32_t l, int64_t pos,
                           float qt[DHS_REF_MAX_IDX_DIM][DHS_REF_MAX_IDX_HEADS], float *w)
{
    const dhs_ref_iq_synth *s = &m->iqs;
    int32_t H = m->cfg.idx_heads, D = m->cfg.idx_dim;
    float a = s->a[l], b = s->b[l], dd = s->d[l];
    for (int32_t h = 0; h < H; h++) {
        for (int32_t i = 0; i < D; i++) {
            int32_t o = h * D + i;
            float p = a * dhs_iq_unit(s->seed, l, -1, o);
            float r = b * dhs_iq_unit(s->seed, l, pos, o);
            float x = p + r;
            float y = dd * dhs_iq_unit(s->seed, l, pos - 1, o);
            qt[i][h] = x + y;
        }
        w[h] = s->w;
    }
}

void dhs_ref_index_scores_at(const dhs_ref_model *m, int32_t l, int64_t pos, const float *xn, const dhs_ref_keys *keys,
                             int64_t n_cand, float *scores)
{
    if (!m->iqs.on) {
        dhs_ref_index_scores(m, l, xn, keys, n_cand, scores);
        return;
    }
    float w[DHS_REF_MAX_IDX_HEADS];
    float qt[DHS_REF_MAX_IDX_DIM][DHS_REF_MAX_IDX_HEADS];
    iq_synth_query(m, l, pos, qt, w);
    index_scores_q(m, qt, w, keys, n_cand, scores);
}

static void index_scores_q(const dhs_ref_model *m, float qt[DHS_REF_MAX_IDX_DIM][DHS_REF_MAX_IDX_HEADS], const float *w,
                           const dhs_ref_keys *keys, int64_t n_cand, float *scores)
{
    const dhs_ref_cfg *c = &m->cfg;
    int32_t H = c->idx_heads, D = c->idx_dim;
    int64_t nb = (n_cand + DHS_REF_KEY_BLOCK - 1) / DHS_REF_KEY_BLOCK;
    const float *lut = keys->fp8 ? dhs_ref_fp8_table() : NULL;
    float dec[DHS_REF_MAX_IDX_DIM * DHS_REF_KEY_BLOCK];
    for (int64_t b = 0; b < nb; b++) {
        const float *kb;
        if (keys->fp8) { /* the block's codes, decoded (the scale is applied to the score) */
            const uint8_t *cb = keys->codes + b * D * DHS_REF_KEY_BLOCK;
            for (int32_t i = 0; i < D * DHS_REF_KEY_BLOCK; i++) dec[i] = lut[cb[i]];
            kb = dec;
        } else {
            kb = keys->data + b * D * DHS_REF_KEY_BLOCK;
        }
        float acc[DHS_REF_MAX_IDX_HEADS][DHS_REF_KEY_BLOCK];
        for (int32_t h = 0; h < H; h++)
            for (int l8 = 0; l8 < DHS_REF_KEY_BLOCK; l8++) acc[h][l8] = 0.0f;
        dhs_ref_index_block_fma(&qt[0][0], DHS_REF_MAX_IDX_HEADS, H, D, kb, &acc[0][0]);
        float sc[DHS_REF_KEY_BLOCK];
        for (int l8 = 0; l8 < DHS_REF_KEY_BLOCK; l8++) sc[l8] = 0.0f;
        for (int32_t h = 0; h < H; h++)
            for (int l8 = 0; l8 < DHS_REF_KEY_BLOCK; l8++) {
                float a = acc[h][l8];
                sc[l8] += w[h] * (a > 0.0f ? a : 0.0f);
            }
        int64_t lim = n_cand - b * DHS_REF_KEY_BLOCK;
        if (lim > DHS_REF_KEY_BLOCK) lim = DHS_REF_KEY_BLOCK;
        if (keys->fp8) /* k_scale[s] * sum_h w[h] ReLU(q.k_fp8[s]): a power of two, exact */
            for (int64_t l8 = 0; l8 < lim; l8++) sc[l8] *= keys->scales[b * DHS_REF_KEY_BLOCK + l8];
        memcpy(scores + b * DHS_REF_KEY_BLOCK, sc, sizeof(float) * (size_t)lim);
    }
}

int32_t dhs_ref_select(const dhs_ref_model *m, int32_t l, int64_t pos, const float *xn, const dhs_ref_keys *keys,
                       int32_t *sel, dhs_ref_scratch *sc)
{
    int64_t n_cand = (pos + 1) / m->layer[l].m; /* complete rows: (s+1)*m <= pos+1 */
    float *scores = scores_buf(sc, n_cand > 0 ? n_cand : 1);
    if (!scores) return -1;
    dhs_ref_index_scores_at(m, l, pos, xn, keys, n_cand, scores);
    return dhs_ref_topk(scores, n_cand, m->cfg.topk, sel, sc->heap);
}

int32_t dhs_ref_select_fused(const dhs_ref_model *m, int32_t l, int64_t pos, const float *xn, const dhs_ref_keys *keys,
                             int32_t *sel, dhs_ref_scratch *sc)
{
    int64_t n_cand = (pos + 1) / m->layer[l].m;
    if (n_cand < 0) n_cand = 0;
    float *scores = scores_buf(sc, n_cand > 0 ? n_cand : 1);
    if (!scores) return DHS_ERR_NOMEM;
    dhs_ref_index_scores_at(m, l, pos, xn, keys, n_cand, scores);
    dhs_status st = dhs_topk_fused_ref(scores, n_cand, m->cfg.topk, NULL, sel, NULL);
    if (st != DHS_OK) return st;
    return n_cand < m->cfg.topk ? (int32_t)n_cand : m->cfg.topk;
}

/* ------------------------------------------------------------- attention + MLP */
void dhs_ref_attention(const float *q, const float *rows, int32_t nv, float scale, int32_t exp_portable, float *o,
                       float *att, float *oc)
{
    float mx = -INFINITY, sum = 0.0f;
    for (int32_t e = 0; e < nv; e++) {
        att[e] = dhs_ref_dot_fma(q, rows + (int64_t)e * DHS_REF_LAT, DHS_REF_LAT) * scale;
        if (att[e] > mx) mx = att[e];
    }
    /* split-K: chunks of DHS_REF_ATT_CHUNK entries, each with its own max
       mc, exp sum csum and unnormalised values oc (entry order inside the
       chunk, oc[i] = fmaf(p, v[i], oc[i])); then, in chunk order,
       sum = fmaf(w, csum, sum) and o[i] = fmaf(w, oc[i], o[i]) with
       w = exp(mc - mx). The GPU runs the chunks in parallel. */
    for (int32_t i = 0; i < DHS_REF_NOPE; i++) o[i] = 0.0f;
    for (int32_t e0 = 0; e0 < nv; e0 += DHS_REF_ATT_CHUNK) {
        int32_t e1 = nv - e0 < DHS_REF_ATT_CHUNK ? nv : e0 + DHS_REF_ATT_CHUNK;
        float mc = -INFINITY, csum = 0.0f;
        for (int32_t e = e0; e < e1; e++)
            if (att[e] > mc) mc = att[e];
        for (int32_t i = 0; i < DHS_REF_NOPE; i++) oc[i] = 0.0f;
        for (int32_t e = e0; e < e1; e++) {
            const float *r = rows + (int64_t)e * DHS_REF_LAT;
            float p = exp_portable ? dhs_ref_expf(att[e] - mc) : expf(att[e] - mc);
            csum += p;
            dhs_ref_axpy_fma(p, r, oc, DHS_REF_NOPE);
        }
        float w = exp_portable ? dhs_ref_expf(mc - mx) : expf(mc - mx);
        sum = fmaf(w, csum, sum);
        dhs_ref_axpy_fma(w, oc, o, DHS_REF_NOPE);
    }
    float inv = 1.0f / sum;
    for (int32_t i = 0; i < DHS_REF_NOPE; i++) o[i] *= inv;
}

void dhs_ref_attend_mlp(const dhs_ref_model *m, int32_t l, int64_t pos, const float *xn, const uint8_t *base,
                        size_t stride, const int32_t *idx, float *x, dhs_ref_scratch *sc)
{
    const dhs_ref_cfg *c = &m->cfg;
    const layer_w *w = &m->lw[l];
    int32_t d = c->d_model, nh = c->n_heads, k = c->topk;
    /* queries: [nh][576] */
    for (int32_t h = 0; h < nh; h++) {
        float *q = sc->q + (int64_t)h * DHS_REF_LAT;
        matvec(w->wq + (int64_t)h * DHS_REF_NOPE * d, xn, DHS_REF_NOPE, d, q);
        matvec(w->wqr + (int64_t)h * DHS_REF_ROPE * d, xn, DHS_REF_ROPE, d, q + DHS_REF_NOPE);
        rope(q + DHS_REF_NOPE, pos);
    }
    /* the selected rows, in selection order, -1 skipped */
    int32_t nv = 0;
    for (int32_t e = 0; e < k; e++) {
        if (idx[e] < 0) continue;
        dhs_ref_row_decode(base + (size_t)idx[e] * stride, sc->rows + (int64_t)nv * DHS_REF_LAT);
        nv++;
    }
    if (nv > 0) {
        const float scale = 1.0f / sqrtf((float)DHS_REF_LAT);
        for (int32_t h = 0; h < nh; h++) {
            dhs_ref_attention(sc->q + (int64_t)h * DHS_REF_LAT, sc->rows, nv, scale, c->exp_portable, sc->o, sc->att,
                              sc->oc);
            matvec(w->wuv + (int64_t)h * c->d_v * DHS_REF_NOPE, sc->o, c->d_v, DHS_REF_NOPE, sc->v + (int64_t)h * c->d_v);
        }
        matvec(w->wo, sc->v, d, nh * c->d_v, sc->tmp);
        for (int32_t i = 0; i < d; i++) x[i] += c->alpha * sc->tmp[i];
    }
    /* MLP */
    float xm[DHS_REF_MAX_D];
    dhs_ref_rmsnorm(m, x, xm);
    matvec(w->w1, xm, c->mlp_hidden, d, sc->hid);
    for (int32_t i = 0; i < c->mlp_hidden; i++) sc->hid[i] = sc->hid[i] > 0.0f ? sc->hid[i] : 0.0f;
    matvec(w->w2, sc->hid, d, c->mlp_hidden, sc->tmp);
    for (int32_t i = 0; i < d; i++) x[i] += c->alpha * sc->tmp[i];
}

void dhs_ref_logits(const dhs_ref_model *m, const float *x, float *logits)
{
    float xn[DHS_REF_MAX_D];
    dhs_ref_rmsnorm(m, x, xn);
    matvec(m->w_out, xn, m->cfg.vocab, m->cfg.d_model, logits);
    for (int32_t i = 0; i < m->cfg.vocab; i++) logits[i] *= m->cfg.logit_scale;
}

/* ------------------------------------------------------------- drafter */
size_t dhs_ref_draft_row_bytes(const dhs_ref_model *m) { return sizeof(float) * 2 * (size_t)m->cfg.draft_dim; }

static float *ring_at(const dhs_ref_model *m, float *ring, int64_t ring_rows, int32_t slot, int64_t pos)
{
    return ring + dhs_ring_row(ring_rows, slot, pos) * 2 * m->cfg.draft_dim;
}

void dhs_ref_draft_kv(const dhs_ref_model *m, int32_t token, int64_t pos, float *ring, int64_t ring_rows,
                      int32_t slot)
{
    float x[DHS_REF_MAX_D], xn[DHS_REF_MAX_D];
    int32_t dd = m->cfg.draft_dim;
    dhs_ref_embed(m, token, x);
    dhs_ref_rmsnorm(m, x, xn);
    float *row = ring_at(m, ring, ring_rows, slot, pos);
    matvec(m->wdk, xn, dd, m->cfg.d_model, row);
    matvec(m->wdv, xn, dd, m->cfg.d_model, row + dd);
}

void dhs_ref_draft_step(const dhs_ref_model *m, int32_t token, int64_t pos, float *ring, int64_t ring_rows,
                        int32_t slot, float *logits, dhs_ref_scratch *sc)
{
    float x[DHS_REF_MAX_D], xn[DHS_REF_MAX_D], o[DHS_REF_MAX_DRAFT_DIM];
    const dhs_ref_cfg *c = &m->cfg;
    int32_t dd = c->draft_dim, d = c->d_model;
    dhs_ref_draft_kv(m, token, pos, ring, ring_rows, slot);
    dhs_ref_embed(m, token, x);
    dhs_ref_rmsnorm(m, x, xn);
    matvec(m->wdq, xn, dd, d, sc->dq);
    int64_t lo = pos - c->draft_window < 0 ? 0 : pos - c->draft_window;
    float mx = -INFINITY, sum = 0.0f, scale = 1.0f / sqrtf((float)dd);
    for (int64_t s = lo; s <= pos; s++) {
        float a = dhs_ref_dot(sc->dq, ring_at(m, ring, ring_rows, slot, s), dd) * scale;
        sc->datt[s - lo] = a;
        if (a > mx) mx = a;
    }
    for (int64_t s = lo; s <= pos; s++) {
        sc->datt[s - lo] = expf(sc->datt[s - lo] - mx);
        sum += sc->datt[s - lo];
    }
    for (int32_t i = 0; i < dd; i++) o[i] = 0.0f;
    for (int64_t s = lo; s <= pos; s++) {
        const float *v = ring_at(m, ring, ring_rows, slot, s) + dd;
        for (int32_t i = 0; i < dd; i++) o[i] += sc->datt[s - lo] * v[i];
    }
    for (int32_t i = 0; i < dd; i++) o[i] /= sum;
    matvec(m->wdo, o, d, dd, sc->tmp);
    for (int32_t i = 0; i < d; i++) x[i] += c->beta * sc->tmp[i];
    dhs_ref_logits(m, x, logits);
}

/* ------------------------------------------------------------- prompt */
void dhs_ref_prompt(uint64_t seed, int32_t session, int32_t vocab, int64_t n, int32_t *tokens)
{
    uint64_t st = seed ^ (0xA24BAED4963EE407ull * (uint64_t)(session + 1));
    for (int64_t i = 0; i < n; i++) tokens[i] = (int32_t)(dhs_rng_next(&st) % (uint64_t)vocab);
}

/* ------------------------------------------------------------- prefill */
uint8_t *dhs_ref_rows_alloc(int64_t rows, int fill)
{
    size_t bytes = (size_t)(rows > 0 ? rows : 1) * DHS_REF_ROW_BYTES;
    uint8_t *p = aligned_alloc(16, bytes); /* 656 is a multiple of 16 */
    if (p) memset(p, fill, bytes);
    return p;
}

void dhs_ref_prefill_free(dhs_ref_prefill *p)
{
    if (!p) return;
    free(p->tokens);
    for (int32_t i = 0; i < DHS_MAX_SOURCES; i++) {
        free(p->rows[i]);
        free(p->tail_lat[i]);
        free(p->tail_key[i]);
        dhs_ref_keys_free(&p->keys[i]);
    }
    free(p->logits);
    memset(p, 0, sizeof *p);
}

/* synthetic history (DESIGN §12): bytes in the row and key formats, a pure
   function of (stream, source or group, position) */
static uint64_t synth_state(uint64_t stream, int64_t what, int64_t t)
{
    return stream ^ (uint64_t)(what + 1) * 0xD1B54A32D192ED03ull ^ (uint64_t)(t + 1) * 0x8CB92BA72F3D8DD7ull;
}

static uint8_t synth_code(uint64_t w)
{
    uint8_t c = (uint8_t)w;
    return (c & 0x7f) == 0x7f ? (uint8_t)(c ^ 1) : c; /* never the NaN codes */
}

static void synth_row(uint64_t st, uint8_t *row)
{
    for (int i = 0; i < DHS_REF_NOPE; i += 8) {
        uint64_t w = dhs_rng_next(&st);
        for (int b = 0; b < 8; b++) row[i + b] = synth_code(w >> (8 * b));
    }
    uint64_t w = dhs_rng_next(&st);
    float scales[DHS_REF_NOPE / DHS_REF_TILE];
    for (int t = 0; t < DHS_REF_NOPE / DHS_REF_TILE; t++) scales[t] = ldexpf(1.0f, -7 - (int)((w >> t) & 1));
    memcpy(row + DHS_REF_NOPE, scales, sizeof scales);
    for (int i = 0; i < DHS_REF_ROPE; i += 4) {
        w = dhs_rng_next(&st);
        for (int b = 0; b < 4; b++) {
            uint16_t r = (uint16_t)(w >> (16 * b));
            uint16_t h = (uint16_t)((r & 0x807f) | (uint16_t)(0x7c + ((r >> 7) & 3)) << 7); /* +-[2^-3, 2) */
            memcpy(row + DHS_REF_NOPE + 16 + 2 * (i + b), &h, 2);
        }
    }
}

static void synth_key(uint64_t st, dhs_ref_keys *k, int64_t s)
{
    size_t o = (size_t)((s / DHS_REF_KEY_BLOCK) * k->dim * DHS_REF_KEY_BLOCK + s % DHS_REF_KEY_BLOCK);
    uint64_t w = 0;
    for (int32_t i = 0; i < k->dim; i++) {
        if (!(i & 7)) w = dhs_rng_next(&st);
        uint8_t c = synth_code(w >> (8 * (i & 7)));
        if (k->fp8) k->codes[o + (size_t)i * DHS_REF_KEY_BLOCK] = c;
        else k->data[o + (size_t)i * DHS_REF_KEY_BLOCK] = dhs_ref_fp8_decode(c) * 0.0078125f;
    }
    if (k->fp8) k->scales[s] = ldexpf(1.0f, -7 - (int)(dhs_rng_next(&st) & 1));
}

/* the synthetic history of every source and index group, in threads (one
   work item per source or group; a pure function of its arguments, so the
   bytes do not depend on the thread count) */
typedef struct synth_job {
    const dhs_ref_model *m;
    dhs_ref_prefill *out;
    uint8_t *const *rows;  /* per source: where row t goes, at rows[s] + t * stride */
    size_t stride;
    int64_t from;
    uint64_t stream;
    int64_t shared_n;      /* positions [0, shared_n) from shared_stream (a shared prompt prefix) */
    uint64_t shared_stream;
    int32_t next, items;
    pthread_mutex_t mu;
} synth_job;

static void *synth_worker(void *arg)
{
    synth_job *J = arg;
    for (;;) {
        pthread_mutex_lock(&J->mu);
        int32_t it = J->next < J->items ? J->next++ : -1;
        pthread_mutex_unlock(&J->mu);
        if (it < 0) return NULL;
        if (it < J->m->n_sources) {
            for (int64_t t = 0; t < J->from; t++)
                synth_row(synth_state(t < J->shared_n ? J->shared_stream : J->stream, it, t), J->rows[it] + (size_t)t * J->stride);
        } else {
            int32_t g = it - J->m->n_sources;
            for (int64_t t = 0; t < J->from; t++)
                synth_key(synth_state(t < J->shared_n ? J->shared_stream : J->stream, DHS_MAX_SOURCES + g, t), &J->out->keys[g], t);
        }
    }
}

static void synth_all(const dhs_ref_model *m, dhs_ref_prefill *out, uint8_t *const *rows, size_t stride, int64_t from,
                      uint64_t stream, int64_t shared_n, uint64_t shared_stream)
{
    synth_job J = {m, out, rows, stride, from, stream, shared_n, shared_stream, 0, m->n_sources + m->n_groups,
                   PTHREAD_MUTEX_INITIALIZER};
    long np = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = np < 1 ? 1 : np > 16 ? 16 : (int)np;
    if ((int64_t)from * J.items < 65536) nt = 1; /* small: not worth a thread */
    pthread_t th[16];
    int started = 0;
    for (; started < nt - 1; started++)
        if (pthread_create(&th[started], NULL, synth_worker, &J)) break;
    synth_worker(&J); /* this thread works too (and alone if no thread started) */
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&J.mu);
}

/* positions [0, from) synthetic (from > 0 needs m = 1 everywhere), the rest
   computed by the model; ext: the rows go to ext[s] + row * ext_stride (NULL:
   to out->rows, allocated here) */
static dhs_status prefill_impl(const dhs_ref_model *m, const int32_t *tokens, int64_t n, int64_t from, uint64_t stream,
                               int64_t shared_n, uint64_t shared_stream, void *const *ext, size_t ext_stride,
                               dhs_ref_prefill *out)
{
    const dhs_ref_cfg *c = &m->cfg;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(out, 0, sizeof *out);
    if (n < 1 || from < 0 || from >= n || (ext && (ext_stride < DHS_REF_ROW_BYTES || ext_stride % 16))) return DHS_ERR_INVALID_ARG;
    for (int32_t s = 0; ext && s < m->n_sources; s++)
        if (!ext[s] || (uintptr_t)ext[s] % 16) return DHS_ERR_INVALID_ARG;
    if (from > 0)
        for (int32_t s = 0; s < m->n_sources; s++)
            if (dhs_ref_source_m(m, s) != 1) return DHS_ERR_INVALID_ARG;
    int32_t d = c->d_model, k = c->topk, mmax = c->comp_m > 1 ? c->comp_m : 1;
    int64_t nq = n - from; /* positions the model computes */
    dhs_status st = DHS_ERR_NOMEM;
    out->n = n;
    out->synthetic = from;
    out->tokens = malloc(sizeof(int32_t) * (size_t)n);
    out->logits = malloc(sizeof(float) * (size_t)c->vocab);
    float *X = malloc(sizeof(float) * (size_t)(nq * d));
    float *XN = malloc(sizeof(float) * (size_t)(nq * d));
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)(nq * k));
    float *lat = malloc(sizeof(float) * (size_t)mmax * DHS_REF_LAT);
    float *key = malloc(sizeof(float) * (size_t)mmax * (size_t)c->idx_dim);
    float mean_lat[DHS_REF_LAT], mean_key[DHS_REF_MAX_IDX_DIM];
    dhs_ref_scratch *sc = dhs_ref_scratch_create(m);
    if (!out->tokens || !out->logits || !X || !XN || !sel || !lat || !key || !sc) goto done;
    memcpy(out->tokens, tokens, sizeof(int32_t) * (size_t)n);
    uint8_t *R[DHS_MAX_SOURCES]; /* where each source's rows go, RS bytes apart */
    const size_t RS = ext ? ext_stride : DHS_REF_ROW_BYTES;
    for (int32_t s = 0; s < m->n_sources; s++) {
        int32_t mm = dhs_ref_source_m(m, s);
        if (ext) {
            R[s] = ext[s]; /* every row [0, ceil(n / m)) is written below: no zeroing (53.7 GB at 1M GLM-5.3) */
        } else if (!(R[s] = out->rows[s] = dhs_ref_rows_alloc((n + mm - 1) / mm, 0))) {
            goto done;
        }
    }
    out->in_import = ext != NULL;
    for (int32_t g = 0; g < m->n_groups; g++) {
        int32_t mm = dhs_ref_group_m(m, g);
        if (dhs_ref_keys_init_model(m, &out->keys[g], (n + mm - 1) / mm)) goto done;
    }
    if (from > 0) synth_all(m, out, R, RS, from, stream, shared_n, shared_stream);
    for (int64_t t = from; t < n; t++) dhs_ref_embed(m, tokens[t], X + (t - from) * d);
    for (int32_t l = 0; l < c->n_layers; l++) {
        const dhs_ref_layer_info *li = &m->layer[l];
        int32_t mm = li->m;
        uint8_t *rows = R[li->source];
        dhs_ref_keys *keys = &out->keys[li->group];
        for (int64_t t = from; t < n; t++) dhs_ref_rmsnorm(m, X + (t - from) * d, XN + (t - from) * d);
        /* this layer's rows (and index keys) for every computed position */
        for (int64_t s = from / mm; s * mm < n; s++) {
            int32_t cnt = 0;
            const float *lp[DHS_REF_MAX_M], *kp[DHS_REF_MAX_M];
            for (int64_t t = s * mm; t < n && t < (s + 1) * mm; t++, cnt++) {
                const float *xn = XN + (t - from) * d;
                dhs_ref_latent(m, l, t, xn, lat + (int64_t)cnt * DHS_REF_LAT);
                if (li->producer) dhs_ref_index_key(m, l, xn, key + (int64_t)cnt * c->idx_dim);
                lp[cnt] = lat + (int64_t)cnt * DHS_REF_LAT;
                kp[cnt] = key + (int64_t)cnt * c->idx_dim;
            }
            if (mm > 1 && cnt < mm) { /* the incomplete last row: keep its per-position state */
                out->tail_lat[li->source] = malloc(sizeof(float) * (size_t)cnt * DHS_REF_LAT);
                if (!out->tail_lat[li->source]) goto done;
                memcpy(out->tail_lat[li->source], lat, sizeof(float) * (size_t)cnt * DHS_REF_LAT);
                if (li->producer) {
                    out->tail_key[li->group] = malloc(sizeof(float) * (size_t)cnt * (size_t)c->idx_dim);
                    if (!out->tail_key[li->group]) goto done;
                    memcpy(out->tail_key[li->group], key, sizeof(float) * (size_t)cnt * (size_t)c->idx_dim);
                }
            }
            if (mm == 1) {
                dhs_ref_row_encode(lat, rows + (size_t)s * RS);
                if (li->producer) dhs_ref_keys_set(keys, s, key);
            } else {
                dhs_ref_mean(lp, cnt, DHS_REF_LAT, mean_lat);
                dhs_ref_row_encode(mean_lat, rows + (size_t)s * RS);
                if (li->producer) {
                    dhs_ref_mean(kp, cnt, c->idx_dim, mean_key);
                    dhs_ref_keys_set(keys, s, mean_key);
                }
            }
        }
        /* every computed query: selection (producers), attention over the selected rows */
        for (int64_t t = from; t < n; t++) {
            int64_t q = t - from;
            if (li->producer && dhs_ref_select(m, l, t, XN + q * d, keys, sel + q * k, sc) < 0) goto done;
            dhs_ref_attend_mlp(m, l, t, XN + q * d, rows, RS, sel + q * k, X + q * d, sc);
        }
    }
    dhs_ref_logits(m, X + (nq - 1) * d, out->logits);
    st = DHS_OK;
done:
    free(X);
    free(XN);
    free(sel);
    free(lat);
    free(key);
    dhs_ref_scratch_destroy(sc);
    if (st != DHS_OK) dhs_ref_prefill_free(out);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    out->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return st;
}

void dhs_ref_model_gpu_desc(const dhs_ref_model *m, dhs_ref_gpu_desc *d)
{
    const dhs_ref_cfg *c = &m->cfg;
    d->vocab = c->vocab;
    d->d_model = c->d_model;
    d->n_layers = c->n_layers;
    d->n_heads = c->n_heads;
    d->d_v = c->d_v;
    d->mlp_hidden = c->mlp_hidden;
    d->idx_heads = c->idx_heads;
    d->idx_dim = c->idx_dim;
    d->topk = c->topk;
    d->alpha = c->alpha;
    d->logit_scale = c->logit_scale;
    d->idx_wscale = 1.0f / sqrtf((float)(c->idx_heads * c->idx_dim)); /* as dhs_ref_index_scores */
    d->att_scale = 1.0f / sqrtf((float)DHS_REF_LAT);                   /* as dhs_ref_attend_mlp */
    d->exp_portable = c->exp_portable;
    d->key_fp8 = c->key_fp8;
    d->emb = dhs_ref_embedding(m);
    d->w_out = dhs_ref_output_head(m);
    d->fp8_lut = dhs_ref_fp8_table();
    d->rope_cs = dhs_ref_rope_cs;
    for (int32_t l = 0; l < c->n_layers; l++) {
        dhs_ref_weights(m, l, &d->layer[l]);
        d->producer[l] = m->layer[l].producer;
    }
    d->iq_synth = m->iqs.on ? &m->iqs : NULL;
}

dhs_status dhs_ref_prefill_run(const dhs_ref_model *m, const int32_t *tokens, int64_t n, dhs_ref_prefill *out)
{
    return prefill_impl(m, tokens, n, 0, 0, 0, 0, NULL, 0, out);
}

dhs_status dhs_ref_prefill_synthetic(const dhs_ref_model *m, const int32_t *tokens, int64_t n, uint64_t stream,
                                     dhs_ref_prefill *out)
{
    return prefill_impl(m, tokens, n, n - 1, stream, 0, 0, NULL, 0, out);
}

dhs_status dhs_ref_prefill_synthetic_shared(const dhs_ref_model *m, const int32_t *tokens, int64_t n, uint64_t stream,
                                            int64_t shared_n, uint64_t shared_stream, dhs_ref_prefill *out)
{
    return prefill_impl(m, tokens, n, n - 1, stream, shared_n, shared_stream, NULL, 0, out);
}

dhs_status dhs_ref_prefill_synthetic_into(const dhs_ref_model *m, const int32_t *tokens, int64_t n, uint64_t stream,
                                          int64_t shared_n, uint64_t shared_stream, void *const *rows, size_t stride,
                                          dhs_ref_prefill *out)
{
    if (!rows) return DHS_ERR_INVALID_ARG;
    return prefill_impl(m, tokens, n, n - 1, stream, shared_n, shared_stream, rows, stride, out);
}

/* ------------------------------------------------------------- locality device */
void dhs_ref_model_set_iq_synth(dhs_ref_model *m, const dhs_ref_iq_synth *s)
{
    if (s && s->on) m->iqs = *s;
    else memset(&m->iqs, 0, sizeof m->iqs);
}

const dhs_ref_iq_synth *dhs_ref_model_iq_synth(const dhs_ref_model *m) { return m->iqs.on ? &m->iqs : NULL; }

/* the coefficients (a, b, d) of consecutive-step correlation c */
static void iq_coef(double c, double *a, double *b, double *d)
{
    if (c > 1) c = 1;
    if (c < -0.5) c = -0.5;
    if (c >= 0) {
        *a = sqrt(c);
        *b = sqrt(1.0 - c);
        *d = 0;
        return;
    }
    /* c = -theta / (1 + theta^2), theta in (0, 1] */
    double th = (1.0 - sqrt(1.0 - 4.0 * c * c)) / (-2.0 * c);
    *a = 0;
    *b = 1.0 / sqrt(1.0 + th * th);
    *d = -th * *b;
}

void dhs_ref_iq_synth_set_corr(dhs_ref_iq_synth *s, int32_t l, double c)
{
    double a, b, d;
    iq_coef(c, &a, &b, &d);
    s->a[l] = (float)a;
    s->b[l] = (float)b;
    s->d[l] = (float)d;
}

void dhs_ref_synthetic_keys(const dhs_ref_model *m, uint64_t stream, int32_t g, int64_t n, dhs_ref_keys *k)
{
    (void)m;
    for (int64_t t = 0; t < n && t < k->cap; t++) synth_key(synth_state(stream, DHS_MAX_SOURCES + g, t), k, t);
}

/* Calibration of one layer. The score of key s under the query of position
   t0+p is sum_h w ReLU(a_p U[s][h] + b Z_p[s][h]) with U = u_h . key_s and
   Z_p = z_h(t0+p) . key_s precomputed once (the dot products are linear in
   the query, so only the rounding differs from the model's scores); a
   bisection on c finds the c whose mean top-k overlap of consecutive
   positions is the target. */
typedef struct iqcal_job {
    const dhs_ref_model *m;
    const dhs_ref_keys *keys;
    uint64_t stream;
    int64_t n, t0;
    int32_t pairs;
    const double *target;
    dhs_ref_iq_synth *s;
    double *predicted;
    int32_t next;
    int failed;
    pthread_mutex_t mu;
} iqcal_job;

/* Z holds z(t0 - 1 + r) . key for r = 0 .. P+1 */
static double iqcal_overlap(const float *U, const float *Z, int64_t n, int32_t H, int32_t P, int32_t k, double c,
                            float *sc, int32_t *sel, uint64_t *heap, uint32_t *mark)
{
    double a, b, d, sum = 0;
    iq_coef(c, &a, &b, &d);
    for (int32_t p = 0; p <= P; p++) {
        const float *Zp = Z + (int64_t)(p + 1) * n * H, *Zm = Z + (int64_t)p * n * H;
        for (int64_t s = 0; s < n; s++) {
            float acc = 0;
            for (int32_t h = 0; h < H; h++) {
                float v = (float)(a * U[s * H + h] + b * Zp[s * H + h] + d * Zm[s * H + h]);
                acc += v > 0 ? v : 0;
            }
            sc[s] = acc;
        }
        int32_t cnt = dhs_ref_topk(sc, n, k, sel, heap);
        if (p > 0) {
            int32_t same = 0;
            for (int32_t e = 0; e < cnt; e++) same += mark[sel[e]] == (uint32_t)p; /* in the previous selection */
            sum += (double)same / (double)k;
        }
        for (int32_t e = 0; e < cnt; e++) mark[sel[e]] = (uint32_t)p + 1;
    }
    return sum / (double)P;
}

static void *iqcal_worker(void *arg)
{
    iqcal_job *J = arg;
    const dhs_ref_model *m = J->m;
    const dhs_ref_cfg *c = &m->cfg;
    int32_t H = c->idx_heads, D = c->idx_dim, k = c->topk, P = J->pairs;
    int64_t n = J->n;
    float *U = malloc(sizeof(float) * (size_t)(n * H));
    float *Z = malloc(sizeof(float) * (size_t)(n * H) * (size_t)(P + 2));
    float *sc = malloc(sizeof(float) * (size_t)n);
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)k);
    uint64_t *heap = malloc(sizeof(uint64_t) * (size_t)k);
    uint32_t *mark = malloc(sizeof(uint32_t) * (size_t)n);
    float *qv = malloc(sizeof(float) * (size_t)H * (size_t)D * (size_t)(P + 3));
    float key[DHS_REF_MAX_IDX_DIM];
    dhs_ref_keys own = {0};
    int bad = !U || !Z || !sc || !sel || !heap || !mark || !qv;
    for (;;) {
        pthread_mutex_lock(&J->mu);
        int32_t l = -1;
        while (!bad && !J->failed && J->next < c->n_layers) {
            int32_t x = J->next++;
            if (m->layer[x].producer && J->target[x] >= 0) {
                l = x;
                break;
            }
        }
        if (bad) J->failed = 1;
        pthread_mutex_unlock(&J->mu);
        if (l < 0) break;
        int32_t g = m->layer[l].group;
        const dhs_ref_keys *K = J->keys ? &J->keys[g] : NULL;
        if (!K) {
            if (!own.cap && dhs_ref_keys_init_model(m, &own, n)) {
                pthread_mutex_lock(&J->mu);
                J->failed = 1;
                pthread_mutex_unlock(&J->mu);
                break;
            }
            dhs_ref_synthetic_keys(m, J->stream, g, n, &own);
            K = &own;
        }
        /* the query vectors: u (row 0), z of positions t0-1 .. t0+P (rows 1..) */
        for (int32_t r = 0; r < P + 3; r++)
            for (int32_t o = 0; o < H * D; o++)
                qv[(int64_t)r * H * D + o] = dhs_iq_unit(J->s->seed, l, r == 0 ? -1 : J->t0 + r - 2, o);
        for (int64_t s = 0; s < n; s++) {
            dhs_ref_keys_get(K, s, key);
            for (int32_t r = 0; r < P + 3; r++)
                for (int32_t h = 0; h < H; h++) {
                    float v = dhs_ref_dot(qv + ((int64_t)r * H + h) * D, key, D) * J->s->w;
                    if (r == 0) U[s * H + h] = v;
                    else Z[((int64_t)(r - 1) * n + s) * H + h] = v;
                }
        }
        double lo = -0.5, hi = 1, tgt = J->target[l];
        memset(mark, 0, sizeof(uint32_t) * (size_t)n);
        double flo = iqcal_overlap(U, Z, n, H, P, k, lo, sc, sel, heap, mark);
        double cbest = lo, fbest = flo;
        if (tgt <= flo) {
            cbest = lo;
        } else {
            cbest = hi;
            fbest = 1.0;
            for (int it = 0; it < 18; it++) {
                double mid = 0.5 * (lo + hi);
                memset(mark, 0, sizeof(uint32_t) * (size_t)n);
                double f = iqcal_overlap(U, Z, n, H, P, k, mid, sc, sel, heap, mark);
                if (fabs(f - tgt) < fabs(fbest - tgt)) {
                    cbest = mid;
                    fbest = f;
                }
                if (f < tgt) lo = mid;
                else hi = mid;
            }
        }
        dhs_ref_iq_synth_set_corr(J->s, l, cbest);
        if (J->predicted) J->predicted[l] = fbest;
    }
    dhs_ref_keys_free(&own);
    free(U);
    free(Z);
    free(sc);
    free(sel);
    free(heap);
    free(mark);
    free(qv);
    return NULL;
}

dhs_status dhs_ref_iq_calibrate(const dhs_ref_model *m, const dhs_ref_keys *keys, uint64_t synth_stream, int64_t n,
                                int64_t t0, int32_t pairs, const double *target, int32_t threads, dhs_ref_iq_synth *s,
                                double *predicted)
{
    if (!m || !target || !s || n < 2 * (int64_t)m->cfg.topk || pairs < 1 || t0 < 0) return DHS_ERR_INVALID_ARG;
    for (int32_t l = 0; l < m->cfg.n_layers; l++) {
        dhs_ref_iq_synth_set_corr(s, l, 0.0);
        if (predicted) predicted[l] = -1;
    }
    s->on = 1;
    iqcal_job J = {m, keys, synth_stream, n, t0, pairs, target, s, predicted, 0, 0, PTHREAD_MUTEX_INITIALIZER};
    int nt = threads < 1 ? 1 : threads > 64 ? 64 : threads;
    pthread_t th[64];
    int started = 0;
    for (; started < nt - 1; started++)
        if (pthread_create(&th[started], NULL, iqcal_worker, &J)) break;
    iqcal_worker(&J);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&J.mu);
    return J.failed ? DHS_ERR_NOMEM : DHS_OK;
}
