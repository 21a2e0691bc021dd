/*
 * model.h - the reference DSA model: a small, readable sparse-attention
 * transformer in plain C whose KV rows can live either in plain arrays
 * ("resident") or in the dhisparse hierarchy ("hier"), with the same forward
 * code. It exists to prove DESIGN.md §10: logits and tokens through the
 * hierarchy are bit-identical to keeping every row resident. docs/MODEL.md
 * describes the model, the row byte format and the tie rule.
 *
 * Pieces (one position t of layer l, input x[d_model]):
 *   xn   = rmsnorm(x)
 *   row  = encode([W_dkv·xn (512) | rope_t(W_kr·xn) (64)])     656-byte row (FP8 V3.2 layout)
 *   key  = W_ik·xn                    (producer layers; idx_dim floats per position or row)
 *   I[t,s] = sum_h w[t,h]·ReLU(q[t,h]·key[s])                  indexer score, fixed order
 *   S_t  = top-k of I[t,·] over visible complete rows            ties: lower row first
 *   x   += alpha·W_o·concat_h W_uv[h]·softmax_s(q_h·c_s)·c_s     attention over S_t only
 *   x   += alpha·W_2·ReLU(W_1·rmsnorm(x))                       MLP
 *   logits = W_out·rmsnorm(x)                                   after the last layer
 *
 * Layouts (dhs_ref_layout):
 *   OWN        every layer is a producer with its own source (DeepSeek-V3.2)
 *   FOLLOW     layer i is a producer iff i % follow_every == 0; the others reuse
 *              the nearest preceding producer's selection and keep their own
 *              payload source (GLM IndexShare): one dhs group, several sources
 *   COMPRESSED odd layers read a source whose rows cover comp_m positions (the
 *              mean of their latents); a query at t may select row s only when
 *              (s+1)·m <= t+1 (complete rows)
 *
 * Every floating-point sum has a fixed order (docs/MODEL.md), so the same
 * inputs give the same bits whatever the batch, the round width or where the
 * row bytes were stored.
 */
#ifndef DHS_REF_MODEL_H
#define DHS_REF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "dhs_plan.h"
#include "dhs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- constants */
#define DHS_REF_NOPE 512                 /* latent (NoPE) values per row */
#define DHS_REF_ROPE 64                  /* RoPE values per row */
#define DHS_REF_LAT (DHS_REF_NOPE + DHS_REF_ROPE) /* 576 values per row */
#define DHS_REF_TILE 128                 /* FP8 scale tile */
#define DHS_REF_ROW_BYTES 656            /* 512 e4m3 + 4 fp32 scales + 64 bf16 */
#define DHS_REF_ATT_CHUNK 32             /* attention split-K: valid entries per softmax chunk */
#define DHS_REF_MAX_LAYERS 96             /* GLM-5.3 has 78, DeepSeek-V3.2 61 */
#define DHS_REF_MAX_IDX_HEADS 16
#define DHS_REF_MAX_IDX_DIM 256
#define DHS_REF_MAX_D 1024
#define DHS_REF_MAX_M 64
#define DHS_REF_MAX_DRAFT_DIM 256
#define DHS_REF_KEY_BLOCK 8              /* index keys are stored in blocks of 8 positions */

/* ------------------------------------------------------------- numerics */
/* FP8 E4M3 (fn: bias 7, max 448, no infinities; 0x7f/0xff are NaN). */
uint8_t dhs_ref_fp8_encode(float x); /* round to nearest even, saturating */
float dhs_ref_fp8_decode(uint8_t b);
uint16_t dhs_ref_bf16_encode(float x); /* round to nearest even */
float dhs_ref_bf16_decode(uint16_t b);
/* 656-byte row <-> 576 floats (docs/MODEL.md "Row format"). */
void dhs_ref_row_encode(const float lat[DHS_REF_LAT], uint8_t row[DHS_REF_ROW_BYTES]);
void dhs_ref_row_decode(const uint8_t row[DHS_REF_ROW_BYTES], float lat[DHS_REF_LAT]);
/* sum_i a[i]*b[i] in the fixed order: 8 lanes (i mod 8) summed in ascending i,
   lanes combined ((0+1)+(2+3))+((4+5)+(6+7)), then the tail i >= 8*(n/8). */
float dhs_ref_dot(const float *a, const float *b, int32_t n);
/* The attention's dot (scores only; the matvecs and norms keep dhs_ref_dot): the same 8 lanes and lane tree, each lane's step one fused
   multiply-add, acc[l] = fmaf(a[i], b[i], acc[l]); the tail s = fmaf(a[i],
   b[i], s). */
float dhs_ref_dot_fma(const float *a, const float *b, int32_t n);
/* y[i] = fmaf(a, x[i], y[i]) for i < n (the attention's value sums) */
void dhs_ref_axpy_fma(float a, const float *x, float *y, int32_t n);
/* The indexer's dot of one key block: acc[h * DHS_REF_KEY_BLOCK + l] =
   fmaf(qt[i * qld + h], kb[i * DHS_REF_KEY_BLOCK + l], acc[...]) for i = 0..D-1
   ascending (one fused multiply-add a step, as the GPU's __fmaf_rn) */
void dhs_ref_index_block_fma(const float *qt, int32_t qld, int32_t H, int32_t D, const float *kb, float *acc);
/* FP8 quantisation scale of n values: the smallest power of two >= max(amax,
   1e-4) / 448 (DeepSeek-V3.2 act_quant with UE8M0 scales, docs/FACTS.md §2) */
float dhs_ref_fp8_scale(const float *v, int32_t n);
/* dhs_ref_fp8_decode of every code (NaN codes included) */
const float *dhs_ref_fp8_table(void);

/* e^x from basic IEEE float operations only (Cody-Waite reduction by ln 2, a
   degree-6 polynomial, scaling by 2^k built from bits): the same bits in C
   (no contraction) and in CUDA (explicit _rn intrinsics). 0 below -87,
   +inf above 88. Relative error about 2e-7. */
float dhs_ref_expf(float x);

/* Top-k with the documented tie rule: candidates 0..n-1 with scores[s];
   order by score descending (IEEE comparison, -0 == +0), then by lower s.
   Writes min(k, n) candidates in that order to sel[0..] and -1 to the rest of
   sel[0..k-1]. Returns the number of valid entries. scratch: k uint64. Scores
   must not be NaN. */
int32_t dhs_ref_topk(const float *scores, int64_t n, int32_t k, int32_t *sel, uint64_t *scratch);
/* The packed key the top-k orders by (larger = better): orderable(score) << 32
   | (0xffffffff - s). Exposed for tests. */
uint64_t dhs_ref_topk_key(float score, int64_t s);

/* argmax with ties to the lower index (-0 == +0); NaNs never win, except a NaN at 0, which
   nothing beats (0): the result of the sequential "if (x[i] > x[b]) b = i" */
int32_t dhs_ref_argmax(const float *x, int32_t n);
/* p = softmax(x / temperature), sums in ascending order */
void dhs_ref_softmax(const float *x, int32_t n, float temperature, float *p);
/* sample from p (sum ~1) with one uniform draw u in [0,1): the first i with
   u*total < cumulative(i); ties impossible */
int32_t dhs_ref_sample(const float *p, int32_t n, float u);

/* ------------------------------------------------------------- model */
typedef enum dhs_ref_layout {
    DHS_REF_LAYOUT_OWN = 0,
    DHS_REF_LAYOUT_FOLLOW = 1,
    DHS_REF_LAYOUT_COMPRESSED = 2
} dhs_ref_layout;
const char *dhs_ref_layout_str(dhs_ref_layout l);
int dhs_ref_layout_parse(const char *s, dhs_ref_layout *out); /* 0 on success */

typedef struct dhs_ref_cfg {
    int32_t vocab;        /* V */
    int32_t d_model;      /* d */
    int32_t n_layers;     /* L */
    int32_t n_heads;      /* attention heads (MQA over the one latent) */
    int32_t d_v;          /* value dims per head after W_uv */
    int32_t mlp_hidden;
    int32_t idx_heads;    /* indexer heads H_I (<= DHS_REF_MAX_IDX_HEADS) */
    int32_t idx_dim;      /* indexer head dim d_I */
    int32_t topk;         /* k */
    dhs_ref_layout layout;
    int32_t follow_every; /* FOLLOW: producer every this many layers ... */
    int32_t follow_lead;  /* ... after the first follow_lead: layer i is a producer iff
                             max(i - follow_lead, 0) % follow_every == 0 (0: i % every;
                             GLM IndexShare: every 4, lead 2 -> FFFSSS(FSSS)*) */
    int32_t exp_portable; /* 1: attention's softmax uses dhs_ref_expf (bit-identical on the GPU)
                             instead of the platform's expf */
    int32_t key_fp8;      /* 1: index keys stored as idx_dim FP8 E4M3 + one fp32 power-of-two
                             scale (idx_dim + 4 bytes: 132 for 128 dims); 0: idx_dim floats */
    int32_t comp_m;       /* COMPRESSED: positions per row of odd layers */
    int32_t draft_window; /* drafter reads positions t-W .. t */
    int32_t draft_dim;    /* drafter key/value dims */
    float alpha;          /* residual scale of target blocks */
    float beta;           /* residual scale of the drafter's attention */
    float logit_scale;    /* scale of the output head */
    uint64_t seed;        /* weights */
} dhs_ref_cfg;

/* "tiny": V 256, d 64, 4 layers, 1 head, d_v 32, MLP 128, indexer 4 x 16,
   k 64, OWN, follow_every 2, comp_m 4, drafter W 64 x 16. */
dhs_ref_cfg dhs_ref_cfg_tiny(void);
/* 0 when valid, else a message */
const char *dhs_ref_cfg_check(const dhs_ref_cfg *c);

/* KV geometries (docs/MODEL.md "Real KV geometry"): the number of payload
   sources, producers, the row and index-key formats and k of a real model;
   the hidden size (d_model, heads, MLP, vocab) stays small.
     tiny           dhs_ref_cfg_tiny()
     glm-5.3        78 layers, FOLLOW every 4 after 2 (21 producers), 656-B rows,
                    132-B FP8 index keys (4 heads x 128), k 2048
     deepseek-v3.2  61 layers, OWN (61 producers), 656-B rows, 132-B keys, k 2048 */
typedef enum dhs_ref_geometry {
    DHS_REF_GEOM_TINY = 0,
    DHS_REF_GEOM_GLM53 = 1,
    DHS_REF_GEOM_DSV32 = 2
} dhs_ref_geometry;
const char *dhs_ref_geometry_str(dhs_ref_geometry g);
int dhs_ref_geometry_parse(const char *s, dhs_ref_geometry *out); /* 0 on success */
dhs_ref_cfg dhs_ref_cfg_geometry(dhs_ref_geometry g);
/* "d_model 64, 1 attention head, MLP 128, vocab 256, indexer 4 heads x 128" */
void dhs_ref_cfg_hidden_str(const dhs_ref_cfg *c, char *buf, size_t len);

typedef struct dhs_ref_layer_info {
    int32_t group;    /* producer group (dhs group) */
    int32_t source;   /* payload source (dhs source) */
    int32_t producer; /* 1: runs the indexer (first layer of its group) */
    int32_t m;        /* positions per row of its source */
} dhs_ref_layer_info;

typedef struct dhs_ref_model dhs_ref_model;

dhs_status dhs_ref_model_create(const dhs_ref_cfg *cfg, dhs_ref_model **out);
void dhs_ref_model_destroy(dhs_ref_model *m);
const dhs_ref_cfg *dhs_ref_model_cfg(const dhs_ref_model *m);
int32_t dhs_ref_n_groups(const dhs_ref_model *m);
int32_t dhs_ref_n_sources(const dhs_ref_model *m);
const dhs_ref_layer_info *dhs_ref_layer(const dhs_ref_model *m, int32_t l);
/* m (positions per row) of a group / source */
int32_t dhs_ref_group_m(const dhs_ref_model *m, int32_t g);
int32_t dhs_ref_source_m(const dhs_ref_model *m, int32_t src);
int32_t dhs_ref_source_layer(const dhs_ref_model *m, int32_t src);
/* sources of group g in layer order: *n sources, returns the first index into
   an array of source ids */
const int32_t *dhs_ref_group_sources(const dhs_ref_model *m, int32_t g, int32_t *n);
/* The library architecture of the model (groups, sources, consumers). */
void dhs_ref_arch(const dhs_ref_model *m, dhs_arch *out);
/* bytes of one index key (idx_dim floats) */
uint32_t dhs_ref_key_bytes(const dhs_ref_model *m);

/* ------------------------------------------------------------- forward pieces
 * Re-entrant; scratch is caller-owned. `x` is always d_model floats. */
typedef struct dhs_ref_scratch dhs_ref_scratch;
dhs_ref_scratch *dhs_ref_scratch_create(const dhs_ref_model *m);
void dhs_ref_scratch_destroy(dhs_ref_scratch *s);

void dhs_ref_embed(const dhs_ref_model *m, int32_t token, float *x);
void dhs_ref_rmsnorm(const dhs_ref_model *m, const float *x, float *xn);
/* latent floats of layer l at position pos (RoPE applied to the last 64) */
void dhs_ref_latent(const dhs_ref_model *m, int32_t l, int64_t pos, const float *xn, float lat[DHS_REF_LAT]);
/* the RoPE rotation at position pos: c[i] = cos(th_i), s[i] = sin(th_i),
   th_i = pos * 10000^(-i/32), i < 32 (computed in double, rounded to float) */
void dhs_ref_rope_cs(int64_t pos, float c[DHS_REF_ROPE / 2], float s[DHS_REF_ROPE / 2]);
/* the weights of layer l (row-major [out][in], NULL where absent: index
   weights of non-producers); emb / w_out [V][d] */
typedef struct dhs_ref_layer_weights {
    const float *wdkv, *wkr, *wq, *wqr, *wuv, *wo, *w1, *w2, *wik, *wiq, *wiw;
} dhs_ref_layer_weights;
void dhs_ref_weights(const dhs_ref_model *m, int32_t l, dhs_ref_layer_weights *w);
const float *dhs_ref_embedding(const dhs_ref_model *m);
const float *dhs_ref_output_head(const dhs_ref_model *m);
/* index key of a producer layer: idx_dim floats */
void dhs_ref_index_key(const dhs_ref_model *m, int32_t l, const float *xn, float *key);
/* mean of n vectors of `dim` floats: per element, sum over the vectors in
   order, then divided by n (the content of a compressed row) */
void dhs_ref_mean(const float *const *v, int32_t n, int32_t dim, float *out);

/* Index keys of one producer for a whole history: blocks of 8 positions
   (or compressed rows), idx_dim x 8 floats each, position-minor. */
typedef struct dhs_ref_keys {
    float *data;     /* float keys: [cap/8][idx_dim][8] */
    uint8_t *codes;  /* FP8 keys: [cap/8][idx_dim][8] E4M3 codes ... */
    float *scales;   /* ... and [cap] power-of-two scales: key = fp8(code) * scale */
    int64_t cap;     /* positions (rows) of capacity, multiple of 8 */
    int32_t dim;
    int32_t fp8;
} dhs_ref_keys;
int dhs_ref_keys_init(dhs_ref_keys *k, int32_t dim, int64_t cap); /* float keys */
int dhs_ref_keys_init_fp8(dhs_ref_keys *k, int32_t dim, int64_t cap);
/* the model's key format (cfg.key_fp8) */
int dhs_ref_keys_init_model(const dhs_ref_model *m, dhs_ref_keys *k, int64_t cap);
/* copies rows [0, rows) (same format and dim; dst->cap >= rows) */
void dhs_ref_keys_copy(dhs_ref_keys *dst, const dhs_ref_keys *src, int64_t rows);
void dhs_ref_keys_free(dhs_ref_keys *k);
/* FP8 keys: quantised with dhs_ref_fp8_scale over the dim values */
void dhs_ref_keys_set(dhs_ref_keys *k, int64_t s, const float *key);
void dhs_ref_keys_get(const dhs_ref_keys *k, int64_t s, float *key);
void dhs_ref_keys_clear(dhs_ref_keys *k, int64_t from, int64_t to); /* discard rows [from, to) */

/* Indexer query of producer layer l: scores[s] for s in 0..n_cand-1 (the
   model's own query W_iq·xn, whatever dhs_ref_model_set_iq_synth set). */
void dhs_ref_index_scores(const dhs_ref_model *m, int32_t l, const float *xn, const dhs_ref_keys *keys,
                          int64_t n_cand, float *scores);
/* The same for the query at position pos: the synthetic query when the model
   has one (dhs_ref_model_set_iq_synth), else dhs_ref_index_scores. What
   dhs_ref_select uses. */
void dhs_ref_index_scores_at(const dhs_ref_model *m, int32_t l, int64_t pos, const float *xn, const dhs_ref_keys *keys,
                             int64_t n_cand, float *scores);

/* ------------------------------------------------------------- locality device
 * A benchmark device, off by default (docs/LOCALITY.md "The reference model
 * under a locality"): the indexer query of every producer is replaced by the
 * synthetic query of model/iqsynth.h, whose coefficients are calibrated so
 * that the model's own top-k shows a target consecutive-step overlap per
 * layer. The CPU and the GPU model apply it identically, so the GPU's tokens
 * still equal the CPU's and resident equals hierarchical. */
typedef struct dhs_ref_iq_synth {
    int32_t on;
    uint64_t seed;
    float w;                            /* every head's weight */
    float a[DHS_REF_MAX_LAYERS];        /* the layer's fixed direction u */
    float b[DHS_REF_MAX_LAYERS];        /* the position's fresh part z(t) */
    float d[DHS_REF_MAX_LAYERS];        /* the previous position's z(t-1) (anti-correlated steps) */
} dhs_ref_iq_synth;
/* s NULL or s->on == 0: off (the model's own queries). Set before any
   engine or GPU model of m is created; not thread-safe against running passes. */
void dhs_ref_model_set_iq_synth(dhs_ref_model *m, const dhs_ref_iq_synth *s);
/* NULL when off */
const dhs_ref_iq_synth *dhs_ref_model_iq_synth(const dhs_ref_model *m);
/* the coefficients of correlation c in [-0.5, 1] between consecutive positions
   (model/iqsynth.h; c is clamped to that range) */
void dhs_ref_iq_synth_set_corr(dhs_ref_iq_synth *s, int32_t l, double c);
/* Calibrates s (seed and w given; on set to 1) so that every producer layer l
   with target[l] >= 0 reaches a consecutive-step overlap of its top-k of
   target[l]: per layer a bisection on c over `pairs` consecutive positions
   t0, t0+1, .., t0+pairs against the first n index keys of its group, where
   keys[g] (when keys != NULL) or the synthetic history of `synth_stream`
   (dhs_ref_prefill_synthetic's keys). Layers run in up to `threads` threads.
   predicted[l] (optional): the overlap reached at the chosen c. Layers with
   target < 0 keep c = 0. DHS_ERR_INVALID_ARG (n < 2k, pairs < 1),
   DHS_ERR_NOMEM. */
dhs_status dhs_ref_iq_calibrate(const dhs_ref_model *m, const dhs_ref_keys *keys, uint64_t synth_stream, int64_t n,
                                int64_t t0, int32_t pairs, const double *target, int32_t threads, dhs_ref_iq_synth *s,
                                double *predicted);
/* the synthetic history's index keys of group g, positions [0, n) (as
   dhs_ref_prefill_synthetic writes them for that stream) into k (cap >= n) */
void dhs_ref_synthetic_keys(const dhs_ref_model *m, uint64_t stream, int32_t g, int64_t n, dhs_ref_keys *k);
/* Selection of producer layer l for the query at position pos: candidates are
   the complete rows (s+1)*m <= pos+1. sel: k entries. */
int32_t dhs_ref_select(const dhs_ref_model *m, int32_t l, int64_t pos, const float *xn, const dhs_ref_keys *keys,
                       int32_t *sel, dhs_ref_scratch *sc);
/* The same selection through the library's fused top-k reference
   (dhs_topk_fused_ref, dev/topk.c: a radix select, selection only, no
   slot lookup) instead of dhs_ref_topk's heap: identical output (same tie
   rule, -1 padding). Returns the valid entries, or a negative dhs_status:
   DHS_ERR_NOMEM (scratch), DHS_ERR_INVALID_ARG (a NaN score: rejected, where
   the heap only asserts). */
int32_t dhs_ref_select_fused(const dhs_ref_model *m, int32_t l, int64_t pos, const float *xn, const dhs_ref_keys *keys,
                             int32_t *sel, dhs_ref_scratch *sc);
/* Sparse attention of layer l for the query at position pos: reads the rows
   base + idx[e]*stride (idx[e] < 0 skipped), adds alpha * output to x, then
   the MLP. This is the ONLY way the model reads KV payload. */
/* The sparse attention of one head over nv >= 1 decoded rows (rows
   [nv][576]): o[512] = softmax(scale q.row) V in the split-K order both
   models follow (docs/MODEL.md "Attention order"): chunks of
   DHS_REF_ATT_CHUNK entries, each with its own max, exp sum and unnormalised
   values in entry order, merged in chunk order. Scores dhs_ref_dot_fma(q,
   row) * scale; the value sums oc[i] = fmaf(p, v[i], oc[i]), the merge
   sum = fmaf(w, csum, sum), o[i] = fmaf(w, oc[i], o[i]) (one rounding per
   step; the exps' sum csum is a plain add). att: nv floats, oc: 512
   floats of scratch. */
void dhs_ref_attention(const float *q, const float *rows, int32_t nv, float scale, int32_t exp_portable, float *o,
                       float *att, float *oc);
void dhs_ref_attend_mlp(const dhs_ref_model *m, int32_t l, int64_t pos, const float *xn, const uint8_t *base,
                        size_t stride, const int32_t *idx, float *x, dhs_ref_scratch *sc);
void dhs_ref_logits(const dhs_ref_model *m, const float *x, float *logits);

/* ------------------------------------------------------------- drafter
 * One layer: x = emb(token); k,v,q = W·rmsnorm(x) (draft_dim each); dense
 * softmax attention over the ring rows of positions max(0,t-W)..t; x +=
 * beta·W_o·attn; logits = W_out·rmsnorm(x) (the target's output head).
 * Ring rows are 2*draft_dim floats (k then v), row of position t of slot i at
 * dhs_ring_row(ring_rows, i, t). */
size_t dhs_ref_draft_row_bytes(const dhs_ref_model *m);
/* writes the ring row of (token, pos) */
void dhs_ref_draft_kv(const dhs_ref_model *m, int32_t token, int64_t pos, float *ring, int64_t ring_rows,
                      int32_t slot);
/* writes the ring row of (token, pos) and computes the drafter's logits */
void dhs_ref_draft_step(const dhs_ref_model *m, int32_t token, int64_t pos, float *ring, int64_t ring_rows,
                        int32_t slot, float *logits, dhs_ref_scratch *sc);

/* the GPU model's description of m (model/gpu.h dhs_ref_gpu_desc): everything
   but topk_fused, max_queries and max_positions, which the caller sets */
struct dhs_ref_gpu_desc;
void dhs_ref_model_gpu_desc(const dhs_ref_model *m, struct dhs_ref_gpu_desc *d);

/* ------------------------------------------------------------- prefill */
typedef struct dhs_ref_prefill {
    int64_t n;                               /* prompt positions */
    int32_t *tokens;                         /* [n] */
    uint8_t *rows[DHS_MAX_SOURCES];          /* [ceil(n/m)][656] per source, 16-byte aligned */
    dhs_ref_keys keys[DHS_MAX_SOURCES];      /* per group: index keys of complete (and the last partial) rows */
    /* compressed sources (m > 1) whose last row is incomplete: the per-position
       latents of that row (n mod m of them), needed to rewrite it as positions
       arrive; and per group the per-position index keys of that row */
    float *tail_lat[DHS_MAX_SOURCES];        /* [n mod m][576] or NULL */
    float *tail_key[DHS_MAX_SOURCES];        /* per group [n mod m][idx_dim] or NULL */
    float *logits;                           /* [V] at position n-1 */
    int64_t synthetic;                       /* positions [0, synthetic) hold a synthetic history */
    int in_import;                           /* rows[] NULL: the rows were written into a request's open
                                                import (dhs_ref_prefill_synthetic_into), which
                                                dhs_ref_engine_start commits */
    double seconds;
} dhs_ref_prefill;

/* Runs the model over the prompt: the same selection and sparse attention as
   decoding, over rows in plain arrays. */
dhs_status dhs_ref_prefill_run(const dhs_ref_model *m, const int32_t *tokens, int64_t n, dhs_ref_prefill *out);
/* rows x 656 bytes, 16-byte aligned, every byte `fill` (a prefill's rows: 0); free() */
uint8_t *dhs_ref_rows_alloc(int64_t rows, int fill);
void dhs_ref_prefill_free(dhs_ref_prefill *p);
/* A prefill over a deterministic synthetic history (DESIGN §12): rows and
   index keys of positions [0, n-1) are pseudo-random bytes in the row and key
   formats (valid FP8 codes, power-of-two scales, BF16 RoPE), a pure function
   of (stream, source or group, position); the model then computes position
   n-1 (its rows, keys, selection over the whole history, attention) and the
   logits there. Costs O(n) instead of the O(n^2) indexer work of a full
   prefill. Every source must have m = 1. */
dhs_status dhs_ref_prefill_synthetic(const dhs_ref_model *m, const int32_t *tokens, int64_t n, uint64_t stream,
                                     dhs_ref_prefill *out);
/* The same with positions [0, shared_n) of the history from shared_stream
   (sessions that share a prompt prefix hold the same rows there) */
dhs_status dhs_ref_prefill_synthetic_shared(const dhs_ref_model *m, const int32_t *tokens, int64_t n, uint64_t stream,
                                            int64_t shared_n, uint64_t shared_stream, dhs_ref_prefill *out);
/* The same with the rows written to rows[src] + row * stride (stride >= 656,
   a multiple of 16; 16-byte aligned; the first 656 bytes of every row written,
   the rest untouched) instead of out->rows (left
   NULL; out->in_import set): e.g. the host rows of a request's open
   dhs_request_import_begin(DHS_IMPORT_DEVICE), so that the history's bytes
   exist once; dhs_ref_engine_start then commits that import. */
dhs_status dhs_ref_prefill_synthetic_into(const dhs_ref_model *m, const int32_t *tokens, int64_t n, uint64_t stream,
                                          int64_t shared_n, uint64_t shared_stream, void *const *rows, size_t stride,
                                          dhs_ref_prefill *out);
/* prompt tokens of a session: a deterministic function of (seed, session) */
void dhs_ref_prompt(uint64_t seed, int32_t session, int32_t vocab, int64_t n, int32_t *tokens);

/* ------------------------------------------------------------- engine
 * Serves sessions round by round: drafter proposals, one target pass over
 * K_r queries per session (layer by layer over the batch), verification.
 * Storage: resident (ctx == NULL: rows in plain arrays) or hierarchical
 * (rows written to and resolved through the dhs_ctx). */
typedef enum dhs_ref_verify { DHS_REF_VERIFY_GREEDY = 0, DHS_REF_VERIFY_SAMPLE = 1 } dhs_ref_verify;

typedef struct dhs_ref_engine_cfg {
    int32_t max_sessions;   /* session ids 0 .. max_sessions-1 */
    int32_t max_slots;      /* sessions live at once (drafter ring slots) */
    int32_t k_max;          /* largest K_r */
    int64_t max_positions;  /* largest positions of a session (prompt + generated + k_max) */
    dhs_ref_verify verify;
    float temperature;      /* sampling */
    uint64_t seed;          /* per-session sampling streams */
    dhs_ctx *ctx;           /* NULL: resident storage */
    int shadow;             /* hierarchical: 1 also keeps every row the model wrote in plain
                               arrays and checks every located row against it, byte for byte
                               (I2 seen from the model; costs the resident memory) */
    int fetch_rows;         /* hierarchical: 1 reads every located row with dhs_read_location
                               (works on any backend, e.g. CUDA, where the pool is device
                               memory); 0 reads dhs_source_pool(ctx, src) + loc * 656 */
    int32_t page_rows;      /* drafter ring page size */
    void *trace;            /* optional dhs_trace_writer* (selections of every round) */
    int gpu;                /* 1: the target pass runs on the GPU (model/gpu.h): index keys (and,
                               resident, the rows) live in device memory; needs CUDA, m = 1
                               sources, k <= 2048; shadow and fetch_rows are not used */
    void *gpu_stream;       /* cudaStream_t for the GPU pass (hierarchical on the CUDA backend:
                               dhs_cuda_stream, so attention follows the resolver's gathers);
                               NULL: a stream of its own */
    int step;               /* GPU target pass (docs/MODEL.md "Device step"): DHS_REF_STEP_HOST
                               (per layer: rows back for dhs_write_rows, selections back for
                               dhs_resolve, locations up), DHS_REF_STEP_DEVICE (no host round
                               trip inside the step: dhs_tail_locations + dhs_resolve_device;
                               hierarchical: the context's resolver must be DHS_RESOLVER_DEVICE),
                               DHS_REF_STEP_GRAPH (the device step captured once as a CUDA graph,
                               replayed every round; re-captured when the batch size changes).
                               Needs gpu; no trace (selections stay on the device) */
    int full_tables;        /* device step: 0 (default): compact tables (model/gpu.h
                               dhs_ref_gpu_step_compact): each round uploads the rows' tail
                               locations (n x sources x k_max int32) and, only for batch items
                               whose session changed, their base / key-store pointers of every
                               layer; the row destinations are computed on the device. 1: the
                               earlier control plane, every table of every layer rebuilt and
                               uploaded each round (kept to measure against: test_gpu_engine
                               --bench-control) */
    int tail_calls;         /* hierarchical device step with compact tables: 1 = one dhs_tail_locations
                               per batch item and source (78 x C calls a round for GLM-5.3); 0 (default):
                               one dhs_round_tail_locations for the whole round (kept to measure
                               against: test_gpu_engine --bench-control) */
    int tail_host;          /* hierarchical device step with compact tables and one call per round: 1 = the
                               host writes the locations (dhs_round_tail_locations) and the upload copies
                               them; 0 (default): the device writes them where the step reads them
                               (dhs_round_tail_locations_device), the host only marks the rows written */
    int end_early;          /* hierarchical: 1 = a round whose queries are all of width 1 ends with
                               dhs_round_end_early while the step runs (device step: right after its
                               launch; host step: after the target's compute), so the round end is
                               off the host's path between two steps; 2 = as 1, and the round after
                               it, declared by dhs_ref_engine_next, is opened there too (its round
                               begin and tail locations under the step); 0 (default): dhs_round_end
                               after verification. The same tokens either way */
    int32_t ctx_requests;   /* device step, hierarchical: the context's max_requests (the N of
                               dhs_resolve_device's location layout) */
    int32_t profile_every;  /* device step: every this many rounds one round runs eagerly with
                               events between its phases (dhs_ref_engine_profile; the
                               hierarchical engine's backend marks the resolver's phases when
                               dhs_cuda_set_marker(be, dhs_ref_engine_mark, engine)); 0: never */
    int copy_overlap;       /* device step, hierarchical: 1 resolves with dhs_resolve_device with DHS_RESOLVE_SPLIT and
                               waits for each later source of a group with dhs_source_wait right
                               before its attention, so the recovery of sources 1.. overlaps the
                               group's earlier layers (docs/MODEL.md "Device step"); 0:
                               dhs_resolve_device. The same bytes either way */
    int direct_resolve;     /* device step, hierarchical: 1 = a round that cannot miss (dhs_round_may_miss 0)
                               resolves with DHS_RESOLVE_DIRECT (one kernel a group, no promotion), its
                               graph captured apart; 0: never. The same bytes either way */
    int page_tables;        /* device step, hierarchical, with direct_resolve and the device's tail locations: a
                               round that cannot miss takes its locations from dhs_round_page_tables_device
                               (built each round on the step's stream) in the split top-k's output instead of
                               resolving: no library call per group. The same rows, the same bytes. Used
                               only with the split top-k and at most DHS_TOPK_PAGES_MAX_SRC sources a group
                               (the direct kernels otherwise) */
    int topk_impl;          /* the decode rounds' top-k (docs/MODEL.md "Top-k"): DHS_REF_TOPK_MODEL
                               (dhs_ref_topk's heap on the CPU, k_topk on the GPU) or
                               DHS_REF_TOPK_FUSED (the library's fused top-k: dhs_topk_fused_ref
                               on the CPU, dhs_cuda_topk_fused_n on the GPU, both steps; selection
                               only, the resolver does the lookup) or DHS_REF_TOPK_SPLIT (the same,
                               dhs_cuda_topk_split_n on the GPU). Same selections; a NaN index
                               score fails the round (DHS_ERR_INVALID_ARG). The prefill always
                               selects with the model's top-k */
    const struct dhs_deploy *deploy; /* device step: NULL, or a real deployment (model/deploy.h) whose
                               weights the step reads: after each layer's attention,
                               dhs_deploy_step_bytes(deploy, the round's queries) / n_layers bytes
                               from a device buffer of the engine's (HBM traffic, no arithmetic),
                               so the step costs what that deployment's would; the same in both
                               storages, so the tokens do not change */
    /* the acceptance model (docs/SERVE.md "Acceptance"): NULL, or per session id the token stream an
       earlier run of the same session emitted, by position (oracle[id] == NULL or oracle_n[id] == 0:
       none for that session), with oracle_accept[id] in [0, 1]: each draft position proposes the
       stream's token with that probability (a seeded per-session stream decides) and another token
       otherwise, so acceptance is in order with that rate. Greedy verification only. The target still
       verifies every draft, so the emitted tokens are the target's whatever the stream says (a wrong
       stream only lowers acceptance); the drafter still runs, so its time stays in the round */
    const int32_t *const *oracle;
    const int64_t *oracle_n;
    const double *oracle_accept;
    int import_mode;        /* hierarchical: how a session's prefill rows enter the library
                               (docs/SERVE.md "Imports"): DHS_REF_IMPORT_DEVICE (0, the default):
                               dhs_request_import(DHS_IMPORT_DEVICE), the rows treated as the
                               device tier's, complete pages copied straight into optional device
                               pages while the budget allows, their host backups deferred;
                               DHS_REF_IMPORT_HOST: DHS_IMPORT_HOST, the rows copied into the host
                               tier only (on threads) and the optional device pages filled later by
                               the library's repopulation, a bounded number per round */
    struct dhs_ref_locmeter *locmeter; /* optional (model/locmeter.h, owned by the caller): the
                               consecutive-step overlap and LRU hit rate of query 0's selections, per
                               group; the CPU model and the host step feed every session, the device
                               and graph steps the round's first batch item (one k-entry copy back per
                               producer and round, in the step, fed to the meter after the next round's
                               launch: dhs_ref_engine_meter_flush) */
} dhs_ref_engine_cfg;

enum { DHS_REF_STEP_HOST = 0, DHS_REF_STEP_DEVICE = 1, DHS_REF_STEP_GRAPH = 2 };
const char *dhs_ref_step_str(int step);
enum { DHS_REF_IMPORT_DEVICE = 0, DHS_REF_IMPORT_HOST = 1 };
const char *dhs_ref_import_str(int mode);      /* "device" | "host" */
enum { DHS_REF_TOPK_MODEL = 0, DHS_REF_TOPK_FUSED = 1, DHS_REF_TOPK_SPLIT = 2 };
const char *dhs_ref_topk_str(int topk);      /* "model" | "fused" | "split" */
int dhs_ref_topk_parse(const char *s, int *out); /* 0 on success */

/* host time of the device step's rounds (seconds, summed): control = the
   host control plane before the launch (inputs, tail locations, pointer
   tables, the upload), launch = issuing the step (eager launches, or the
   graph launch), wait = until the logits are on the host; capture = rounds
   that captured a graph (not in the other three) */
typedef struct dhs_ref_step_times {
    uint64_t rounds, captures;
    uint64_t split_rounds; /* rounds whose step used the split resolve (copy_overlap, the round may miss) */
    uint64_t direct_rounds; /* rounds whose step resolved with DHS_RESOLVE_DIRECT (direct_resolve, cannot miss) */
    uint64_t page_table_rounds; /* of those, rounds located through page tables (page_tables) instead */
    double control_s, launch_s, wait_s, capture_s;
    /* every round (any step, profiled ones too): the host drafter, dhs_round_begin,
       dhs_round_end (hierarchical only) */
    uint64_t all_rounds;
    double draft_s, begin_s, end_s;
    /* exposed host time: from the moment the previous round's step was seen complete (its wait
       returned: the GPU has nothing queued) to this round's launch, summed over exposed_rounds (plain
       rounds that follow a plain round, no session started in between; capture and profiled rounds
       excluded). Everything the host does for a round on the critical path: verification,
       dhs_round_end, the drafter, dhs_round_begin and the control plane before the launch */
    uint64_t exposed_rounds;
    double exposed_s;
    /* the same window by part, over host_rounds: rounds that follow a round of the same engine with
       no session started in between (device step: exactly the exposed rounds, and the five parts
       sum to exposed_s; host step: every such round, control and prelaunch 0, the target's compute
       in between instead of the GPU's step):
       tail      after the target's logits are on the host, to the round's return: the logits
                 copied out, the locality meter (device step), verification, dhs_round_end, the
                 commit of the accepted tokens (of the round before);
       between   from that return to the next round's call: the caller's loop (dhs_ref_run: round
                 times, counters, memory peaks, the spec-auto controller, completions, admissions;
                 with both engines in one run, the other engine's round);
       head      from the call to the target: the drafter, dhs_round_begin;
       control   the device step's control plane (control_s of the round);
       prelaunch the upload's end to the launch: dhs_round_may_miss, the deployment's bytes */
    uint64_t host_rounds;
    double tail_s, between_s, head_s, xcontrol_s, prelaunch_s;
    /* of tail_s (device step): the logits copied out (only for a caller that asks for them), the
       locality meter's hand-over of batch item 0's selections (the benchmark's instrument, not the
       engine's work; the step wrote them into one of two buffers), the verification, dhs_round_end
       (0 when the round ended early, beside the step); the rest is the commit */
    double tail_logits_s, tail_meter_s, tail_verify_s, tail_end_s;
    /* of xcontrol_s (device step): tokens, positions and RoPE values of the queries; the row locations
       and pointer tables (dhs_round_tail_locations*, when not issued ahead; changed items' tables);
       the inputs' upload, and of it the host time of its copy calls and of its event record */
    double ctl_inputs_s, ctl_tables_s, ctl_upload_s, ctl_upload_copy_s, ctl_upload_event_s;
    /* device step: 1 when the step reads its inputs block (tokens, positions, RoPE values) from the
       pinned mirror itself, 0 when the upload copies it; the rounds whose inputs had to wait for the
       step before (never on the engine's own path: model/gpu.h) */
    int inputs_in_step;
    uint64_t inputs_waits;
    /* device step: queries whose RoPE values were computed during the step before (a plain item's
       next position) and those computed in the control plane */
    uint64_t rope_ahead, rope_now;
    /* device step, compact tables: batch items whose pointer tables were rewritten and uploaded
       (their session changed since their columns were last uploaded), of all items of the rounds */
    uint64_t table_items, all_items;
    /* device step, hierarchical: the part of control_s spent in dhs_tail_locations (one call per
       item and source: 4,992 a round at 64 GLM-5.3 sessions) */
    double tailloc_s;
    /* every round: the locality meter's host work (dhs_ref_engine_cfg.locmeter; in tail on the
       device step, in the compute on the host step) and the verification of the round's blocks */
    double meter_s, verify_s;
    /* hierarchical: dhs_background (the tail backups that fell due), called while the step runs (device
       step: after the launch, before the wait; host steps: after the target's compute): host CPU time
       overlapped with the device, in none of the exposed parts above */
    uint64_t background_calls;
    double background_s;
    /* hierarchical, cfg.end_early: rounds ended with dhs_round_end_early (their host time is in end_s) */
    uint64_t early_ends;
    /* cfg.end_early 2: rounds opened ahead, under the step before them (dhs_ref_engine_next), and the
       host time of their opening (round begin and tail locations, also in begin_s / tailloc_s) */
    uint64_t ahead_rounds;
    double ahead_s;
} dhs_ref_step_times;

typedef struct dhs_ref_engine dhs_ref_engine;

dhs_status dhs_ref_engine_create(const dhs_ref_model *m, const dhs_ref_engine_cfg *cfg, dhs_ref_engine **out);
void dhs_ref_engine_destroy(dhs_ref_engine *e);

/* Starts session `id` from its prefill (copies what it needs; p may be freed
   afterwards). Hierarchical: `req` is an admitted request; the prefill rows are
   imported with DHS_IMPORT_DEVICE, or DHS_IMPORT_HOST with cfg.import_mode
   DHS_REF_IMPORT_HOST. The first generated token (the first
   anchor) is chosen from the prefill logits by the verification rule. */
dhs_status dhs_ref_engine_start(dhs_ref_engine *e, int32_t id, const dhs_ref_prefill *p, dhs_req req);
/* As dhs_ref_engine_start for a request opened on a shared prefix of `shared` positions
   (dhs_request_open_shared): only the prompt's rows from row floor(shared / m) on are imported
   (dhs_request_import of the rest); the prefill's rows below must equal the prefix's */
dhs_status dhs_ref_engine_start_shared(dhs_ref_engine *e, int32_t id, const dhs_ref_prefill *p, dhs_req req, int64_t shared);
/* Ends session `id` (hierarchical: closes its request). */
dhs_status dhs_ref_engine_finish(dhs_ref_engine *e, int32_t id);

typedef struct dhs_ref_round_out {
    float *logits;      /* [n][k_max][V]: target logits of every query (rows j >= K_i untouched); NULL: not
                           copied out (the device step verifies them where they arrived) */
    int32_t *accepted;  /* [n] A_i */
    int32_t *emitted;   /* [n][k_max]: tokens emitted (A_i + 1 of them) */
    int32_t *block;     /* optional [n][k_max]: the queries' input tokens (anchor, proposals) */
} dhs_ref_round_out;

/* One round over sessions ids[0..n-1] with K[i] queries each. */
dhs_status dhs_ref_engine_round(dhs_ref_engine *e, int32_t n, const int32_t *ids, const int32_t *K,
                                dhs_ref_round_out *out);
/* cfg.end_early 2 (ahead): declares the round after the next dhs_ref_engine_round call (ids[0..n-1],
   every K[i] 1; the same sessions, no admission in between). That call then opens it right after its
   own early end, while its step runs, and the following call must ask for exactly that round
   (DHS_ERR_STATE otherwise: an opened round cannot be taken back). n = 0, a width other than 1, or
   another cfg.end_early: nothing is opened ahead. DHS_ERR_INVALID_ARG for a bad id. */
dhs_status dhs_ref_engine_next(dhs_ref_engine *e, int32_t n, const int32_t *ids, const int32_t *K);

/* session state readers */
int64_t dhs_ref_engine_positions(const dhs_ref_engine *e, int32_t id); /* committed n_r */
int64_t dhs_ref_engine_generated(const dhs_ref_engine *e, int32_t id); /* tokens after the prompt, anchor included */
const int32_t *dhs_ref_engine_tokens(const dhs_ref_engine *e, int32_t id, int64_t *n); /* prompt + generated */
/* the drafter ring's row (2 x draft_dim floats) that position pos of session id maps to (tests) */
const float *dhs_ref_engine_draft_row(const dhs_ref_engine *e, int32_t id, int64_t pos);
/* bytes the engine holds per session on its own (index keys, ring row share,
   resident rows when resident) at a context of `positions` */
uint64_t dhs_ref_engine_model_bytes(const dhs_ref_model *m, int64_t positions, int resident, int64_t ring_rows);
int64_t dhs_ref_engine_ring_rows(const dhs_ref_engine *e);
/* A dhs_config for serving the model with `slots` request slots, sessions of
   up to `positions` positions and K_max = k_max: hot cache B = 2k rows
   (rounded up to a page), a tail of at least 2 pages, one staging arena per
   source of the widest group, and a device budget M = the staging arenas +
   the required allocations (hot caches, tails) of every slot + the imported
   history of `history_sessions` sessions of `history_positions` positions.
   So with more sessions live than that, admissions reclaim optional history
   (whole requests), finished sessions free pages that are refilled, and
   admissions beyond `slots` wait. The page arithmetic mirrors the core's
   accounting (src/core/ctx.c): a page is page_rows * 656 bytes. */
dhs_config dhs_ref_hier_config(const dhs_ref_model *m, int32_t slots, int64_t positions, int32_t k_max,
                               double history_sessions, int64_t history_positions, int32_t page_rows);
/* bytes of the library's required device allocations per request (hot
   caches + tails) and of all staging arenas, for a config from above */
uint64_t dhs_ref_hier_required_bytes(const dhs_ref_model *m, const dhs_config *c);
uint64_t dhs_ref_hier_staging_bytes(const dhs_ref_model *m, const dhs_config *c);
/* Per-group hot-cache sizes for a config from dhs_ref_hier_config: n entries (one per group of the
   model) into c->group_hot_rows, and the budget's required allocations and staging swapped for the
   ones these sizes take (the history part stays). DHS_ERR_INVALID_ARG (with *c unchanged) when n is
   not the model's group count or the library refuses a size (dhs_config_sizes). */
dhs_status dhs_ref_hier_set_group_hot(const dhs_ref_model *m, dhs_config *c, const int32_t *rows, int32_t n);

/* shadow mode: located rows whose bytes differed from the row the model wrote,
   and a description of the first one ("" if none) */
uint64_t dhs_ref_engine_shadow_mismatches(const dhs_ref_engine *e, const char **first);
/* what starting sessions cost (dhs_ref_engine_start*), summed over the engine's life:
   imports      hierarchical: dhs_request_import calls that succeeded
   import_bytes the history bytes they imported (every source's rows x 656; on a shared prefix the
                rows after it)
   import_s     wall seconds inside those dhs_request_import calls only (the library's figure)
   keys_s       GPU model: wall seconds of the session's device setup (index keys uploaded; resident:
                its rows too), kept apart from import_s */
typedef struct dhs_ref_import_times {
    uint64_t imports, import_bytes;
    double import_s, keys_s;
    uint64_t placed_bytes; /* optional device pages the imports placed themselves (dhs_mem.optional_bytes
                              added by the import calls; 0 with host imports: repopulation fills them) */
} dhs_ref_import_times;
void dhs_ref_engine_import_times(const dhs_ref_engine *e, dhs_ref_import_times *t);
/* the device step's host times (all zero for the host step) */
void dhs_ref_engine_step_times(const dhs_ref_engine *e, dhs_ref_step_times *t);
/* device step with a locmeter: the last step's probe is fed to the meter after the next launch (off
   the critical path); this feeds it now. dhs_ref_engine_finish does so itself; call it before reading
   the meter */
void dhs_ref_engine_meter_flush(dhs_ref_engine *e);

/* the phases of a profiled device-step round (the marks: model/gpu.h) */
enum {
    DHS_REF_PH_OTHER = 0,  /* embed, rows (latent + key writes), logits, the host gaps in between */
    DHS_REF_PH_INDEXER,    /* indexer queries and scores over the visible keys */
    DHS_REF_PH_TOPK,       /* top-k of the scores */
    DHS_REF_PH_RESOLVE,    /* the device resolver's plan kernel (lookup, victims, copy list) */
    DHS_REF_PH_COPY,       /* the resolver's miss copy (host -> device rows) */
    DHS_REF_PH_ATTEND,     /* sparse attention over the located rows + MLP */
    DHS_REF_PH_WEIGHTS,    /* a deployment's weight reads (dhs_ref_engine_cfg.deploy) */
    DHS_REF_PH_N
};
/* profiled rounds (profile_every): us[DHS_REF_PH_*] summed device time of each
   phase over *rounds profiled rounds, wall_s their summed round time. */
void dhs_ref_engine_profile(const dhs_ref_engine *e, double us[DHS_REF_PH_N], uint64_t *rounds, double *wall_s);
/* a dhs_cuda_mark_fn (user: the engine): the resolver's phases in the profile */
void dhs_ref_engine_mark(void *engine, int mark);

/* the dhs_status of the last library call that failed, with its name */
const char *dhs_ref_engine_error(const dhs_ref_engine *e);

#ifdef __cplusplus
}
#endif
#endif
