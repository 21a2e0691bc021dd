/* deploy.c - weight bytes one GPU reads per decode step of a real deployment (deploy.h). */
#include "model/deploy.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* GLM-5 backbone (transformers GlmMoeDsaConfig defaults, zai-org/GLM-5 config) with the GLM-5.2
 * IndexShare schedule the "glm-5.3" geometry uses: indexer weights on the 21 producer layers.
 * Published: 744B parameters, 40B active. */
static const dhs_deploy glm53 = {
    .name = "glm-5.3-8xh200",
    .about = "GLM-5 backbone (GlmMoeDsaConfig), IndexShare 21 producers, FP8, one node of 8 H200: tp 8, ep 8",
    .gpus = 8, .tp = 8, .ep = 8,
    .hidden = 6144, .layers = 78, .dense_layers = 3, .heads = 64,
    .q_lora = 2048, .kv_lora = 512, .qk_nope = 192, .qk_rope = 64, .v_head = 256,
    .dense_inter = 12288, .moe_inter = 2048, .experts = 256, .top_k = 8, .shared_experts = 1,
    .vocab = 154880, .idx_heads = 32, .idx_dim = 128, .idx_layers = 21,
    .published_total = 744e9, .published_active = 40e9,
};

/* DeepSeek-V3.2 (DeepseekV32Config; deepseek-ai/DeepSeek-V3.2-Exp inference/config_671B_v3.2.json).
 * Published: 671B parameters in the main model (685B with the MTP layer), 37B active. */
static const dhs_deploy dsv32 = {
    .name = "deepseek-v3.2-8xh200",
    .about = "DeepSeek-V3.2 (DeepseekV32Config), an indexer on every layer, FP8, one node of 8 H200: tp 8, ep 8",
    .gpus = 8, .tp = 8, .ep = 8,
    .hidden = 7168, .layers = 61, .dense_layers = 3, .heads = 128,
    .q_lora = 1536, .kv_lora = 512, .qk_nope = 128, .qk_rope = 64, .v_head = 128,
    .dense_inter = 18432, .moe_inter = 2048, .experts = 256, .top_k = 8, .shared_experts = 1,
    .vocab = 129280, .idx_heads = 64, .idx_dim = 128, .idx_layers = 61,
    .published_total = 671e9, .published_active = 37e9,
};

static const dhs_deploy *const presets[] = {&glm53, &dsv32};
static const char *const preset_names[] = {"glm-5.3-8xh200", "deepseek-v3.2-8xh200", NULL};

const dhs_deploy *dhs_deploy_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(presets[i]->name, name)) return presets[i];
    return NULL;
}

const char *const *dhs_deploy_names(void) { return preset_names; }

/* an FP8 linear layer [out x in]: one byte a weight and one fp32 scale per 128 x 128 block */
static double fp8(int64_t out, int64_t in)
{
    int64_t blocks = ((out + 127) / 128) * ((in + 127) / 128);
    return (double)out * (double)in + 4.0 * (double)blocks;
}

/* the per-layer shapes, as parameter counts (p) and bytes (b) */
typedef struct {
    double attn_rep_p, attn_split_p;    /* replicated (q_a, kv_a, norms) / split over tp (q_b, kv_b, o) */
    double attn_rep_b, attn_split_b;
    double idx_p, idx_b;                /* one producer layer's indexer */
    double expert_p, expert_b;          /* one routed (or shared) expert: gate, up, down */
    double dense_p, dense_b;            /* one dense MLP */
    double router_p, router_b;          /* gate weights (bf16) and the fp32 score-correction bias */
    double head_p, head_b;              /* LM head (bf16) and the final norm */
    double embed_p;                     /* embedding table (parameters; a step reads one row a token) */
} shapes;

static shapes shapes_of(const dhs_deploy *d)
{
    shapes s;
    const int64_t h = d->hidden, qk = d->qk_nope + d->qk_rope;
    s.attn_rep_p = (double)h * d->q_lora + (double)h * (d->kv_lora + d->qk_rope) + d->q_lora + d->kv_lora + 2.0 * h;
    s.attn_rep_b = fp8(d->q_lora, h) + fp8(d->kv_lora + d->qk_rope, h) + 2.0 * (d->q_lora + d->kv_lora + 2.0 * h);
    s.attn_split_p = (double)d->q_lora * d->heads * qk + (double)d->kv_lora * d->heads * (d->qk_nope + d->v_head) +
                     (double)d->heads * d->v_head * h;
    s.attn_split_b = fp8(d->heads * qk, d->q_lora) + fp8(d->heads * (d->qk_nope + d->v_head), d->kv_lora) +
                     fp8(h, d->heads * d->v_head);
    /* wq_b, wk (FP8), the key LayerNorm (weight and bias, bf16), weights_proj (bf16) */
    s.idx_p = (double)d->q_lora * d->idx_heads * d->idx_dim + (double)h * d->idx_dim + 2.0 * d->idx_dim +
              (double)h * d->idx_heads;
    s.idx_b = fp8(d->idx_heads * d->idx_dim, d->q_lora) + fp8(d->idx_dim, h) + 4.0 * d->idx_dim +
              2.0 * (double)h * d->idx_heads;
    s.expert_p = 3.0 * (double)h * d->moe_inter;
    s.expert_b = 2.0 * fp8(d->moe_inter, h) + fp8(h, d->moe_inter);
    s.dense_p = 3.0 * (double)h * d->dense_inter;
    s.dense_b = 2.0 * fp8(d->dense_inter, h) + fp8(h, d->dense_inter);
    s.router_p = (double)d->experts * h + d->experts;
    s.router_b = 2.0 * (double)d->experts * h + 4.0 * d->experts;
    s.head_p = (double)d->vocab * h + h;
    s.head_b = 2.0 * (double)d->vocab * h + 2.0 * h;
    s.embed_p = (double)d->vocab * h;
    return s;
}

double dhs_deploy_experts_touched(const dhs_deploy *d, double tokens)
{
    if (!d || tokens <= 0) return 0;
    double per_gpu = (double)d->experts / d->ep;
    double miss = 1.0 - (double)d->top_k / (double)d->experts; /* one token misses a given expert */
    return per_gpu * (1.0 - pow(miss, tokens));
}

double dhs_deploy_step_bytes(const dhs_deploy *d, double tokens, dhs_deploy_bytes *parts)
{
    dhs_deploy_bytes b;
    memset(&b, 0, sizeof b);
    if (d && tokens > 0) {
        shapes s = shapes_of(d);
        const double L = (double)d->layers, moe = (double)(d->layers - d->dense_layers);
        b.attention = L * (s.attn_rep_b + s.attn_split_b / d->tp);
        b.indexer = (double)d->idx_layers * s.idx_b;
        b.dense_mlp = (double)d->dense_layers * s.dense_b / d->tp;
        b.shared = moe * (double)d->shared_experts * s.expert_b / d->tp;
        b.experts_touched = dhs_deploy_experts_touched(d, tokens);
        b.routed = moe * b.experts_touched * s.expert_b;
        b.router = moe * s.router_b;
        b.head = s.head_b / d->tp + tokens * 2.0 * (double)d->hidden;
        b.total = b.attention + b.indexer + b.dense_mlp + b.shared + b.routed + b.router + b.head;
    }
    if (parts) *parts = b;
    return b.total;
}

double dhs_deploy_params(const dhs_deploy *d, int active)
{
    if (!d) return 0;
    shapes s = shapes_of(d);
    const double L = (double)d->layers, moe = (double)(d->layers - d->dense_layers);
    double experts = active ? (double)d->top_k : (double)d->experts;
    /* the embedding is a lookup: one token reads one row, so it is not counted as active */
    return L * (s.attn_rep_p + s.attn_split_p) + (double)d->idx_layers * s.idx_p +
           (double)d->dense_layers * s.dense_p + moe * ((experts + d->shared_experts) * s.expert_p + s.router_p) +
           s.head_p + (active ? 0.0 : s.embed_p);
}
