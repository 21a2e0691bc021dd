/* deploy.h - the HBM bytes of weights one GPU of a real deployment reads per decode step.
 *
 * The reference model's hidden size is small, so its weights cost almost nothing and its step is
 * set by the KV kernels. A real GLM-5.x or DeepSeek-V3.2 step on one GPU of an 8-GPU node is mostly
 * weight traffic. This module derives, from the public model configurations, how many bytes of
 * weights one GPU reads per decode step at a given number of tokens, so a benchmark can read that
 * many bytes inside its step and report the hierarchy's overhead against a step an engine would run.
 *
 * The layout is the one SGLang and vLLM use for these models on one 8-GPU node ("tp 8, ep 8"):
 *   - attention: q_b, kv_b and o projections split over the tp ranks (column/row parallel); the
 *     down projections q_a and kv_a (with the MQA rope key), the norms and the indexer replicated;
 *     the MLA latent is shared by all heads, so every rank keeps every session's KV (the sessions
 *     one GPU holds are the sessions of the node);
 *   - dense MLP layers and the shared expert split over the tp ranks;
 *   - routed experts split over the ep ranks (n_experts / ep per GPU); a step reads each expert of
 *     this GPU that at least one of the step's tokens is routed to;
 *   - the router (bf16) replicated; the LM head (bf16) split over the tp ranks; the embedding reads
 *     one row per token.
 * Linear weights are FP8 E4M3 with one fp32 scale per 128 x 128 block (the published FP8
 * checkpoints). The MTP layer is left out (drafting is the engine's, not the verified step's).
 *
 * Expected experts touched: with uniform routing each token picks top_k distinct experts of E, so an
 * expert is missed by one token with probability 1 - top_k/E and by all T tokens with
 * (1 - top_k/E)^T; one GPU's n_experts/ep experts are touched in expectation
 *     (E / ep) * (1 - (1 - top_k / E)^T).
 * Real routers are not uniform (load imbalance concentrates tokens), so this is an upper estimate of
 * the distinct experts, i.e. of the weight bytes: the step is if anything shorter, the hierarchy's
 * overhead relatively larger than stated. docs/SERVE.md gives the numbers.
 *
 * Pure arithmetic: no allocation, no I/O. */
#ifndef DHS_REF_DEPLOY_H
#define DHS_REF_DEPLOY_H

#include <stdint.h>

typedef struct dhs_deploy {
    const char *name;   /* e.g. "glm-5.3-8xh200" */
    const char *about;  /* one line: the model, its public configuration, the layout */
    int32_t gpus;       /* GPUs of the node */
    int32_t tp;         /* tensor-parallel ranks of the attention projections, dense MLP, shared expert, head */
    int32_t ep;         /* expert-parallel ranks of the routed experts */
    /* the model's public configuration (transformers' config class defaults / the checkpoint config) */
    int64_t hidden, layers, dense_layers, heads;
    int64_t q_lora, kv_lora, qk_nope, qk_rope, v_head;
    int64_t dense_inter, moe_inter, experts, top_k, shared_experts;
    int64_t vocab, idx_heads, idx_dim;
    int64_t idx_layers; /* layers that carry indexer weights (IndexShare: the producers only) */
    /* published totals the shape table must reproduce (parameters, main model without MTP) */
    double published_total, published_active;
} dhs_deploy;

/* bytes of one step on one GPU, by part (each already divided over its ranks) */
typedef struct dhs_deploy_bytes {
    double attention; /* q/kv/o projections and norms, every layer */
    double indexer;   /* indexer projections of the producer layers */
    double dense_mlp; /* the dense layers' MLPs */
    double shared;    /* shared experts */
    double routed;    /* the routed experts this GPU's tokens touch (expected) */
    double router;    /* the router's gate weights */
    double head;      /* LM head and the embedding rows */
    double total;
    double experts_touched; /* expected routed experts read per MoE layer on this GPU */
} dhs_deploy_bytes;

/* the presets: "glm-5.3-8xh200", "deepseek-v3.2-8xh200"; NULL when unknown ("none" is the caller's) */
const dhs_deploy *dhs_deploy_find(const char *name);
/* the preset names, NULL-terminated */
const char *const *dhs_deploy_names(void);

/* expected distinct routed experts of this GPU read per MoE layer when `tokens` tokens are routed */
double dhs_deploy_experts_touched(const dhs_deploy *d, double tokens);
/* the weight bytes one GPU reads per decode step of `tokens` tokens (batch x queries per request);
 * fills *parts when non-NULL; returns parts->total */
double dhs_deploy_step_bytes(const dhs_deploy *d, double tokens, dhs_deploy_bytes *parts);
/* parameters of the whole model (active = 0) or the ones one token reads (active = 1): the shape
 * table's count, for the check against the published totals */
double dhs_deploy_params(const dhs_deploy *d, int active);

#endif
