/* lsprefill.c - the reference model's prefill through streamed layer buffers
 * (lsprefill.h). */
#include "model/lsprefill.h"

#include "model/gpu.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* a buffer's unloaded rows never look valid */
#define POISON 0xA5

/* the queue of an event's op: loads 1, computes 0 (the model's stream), write-backs 2 */
static int32_t queue_of(int32_t op) { return op == DHS_LS_LOAD ? 1 : op == DHS_LS_COMPUTE ? 0 : 2; }

dhs_status dhs_ref_prefill_ls_run(const dhs_ref_model *m, const int32_t *tokens, int64_t n, int64_t chunk,
                                  int32_t n_buffers, const dhs_ls_event *ev, int64_t n_ev, dhs_ref_prefill *out,
                                  dhs_ref_ls_stats *stats)
{
    if (!out) return DHS_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (!m || !tokens || n < 1 || chunk < 1 || n_buffers < 2 || !ev || n_ev < 1 || !stats) return DHS_ERR_INVALID_ARG;
    const dhs_ref_cfg *c = dhs_ref_model_cfg(m);
    const int32_t L = c->n_layers, d = c->d_model, k = c->topk, V = c->vocab;
    if (dhs_ref_n_sources(m) != L) return DHS_ERR_UNSUPPORTED;
    for (int32_t l = 0; l < L; l++)
        if (dhs_ref_layer(m, l)->source != l || dhs_ref_layer(m, l)->m != 1) return DHS_ERR_UNSUPPORTED;
    for (int32_t t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= V) return DHS_ERR_INVALID_ARG;
    const int64_t C64 = (n + chunk - 1) / chunk;
    if (C64 > INT32_MAX) return DHS_ERR_INVALID_ARG;
    const int32_t C = (int32_t)C64;
    for (int64_t i = 0; i < n_ev; i++)
        if (ev[i].op < DHS_LS_LOAD || ev[i].op > DHS_LS_WRITEBACK || ev[i].chunk < 0 || ev[i].chunk >= C ||
            ev[i].layer < 0 || ev[i].layer >= L || ev[i].buffer < 0 || ev[i].buffer >= n_buffers)
            return DHS_ERR_INVALID_ARG;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(stats, 0, sizeof *stats);
    stats->chunks = C;
    stats->buffers = n_buffers;
    stats->events = n_ev;
    stats->buffer_bytes = (uint64_t)n_buffers * (uint64_t)n * DHS_REF_ROW_BYTES;
    stats->resident_bytes = (uint64_t)L * (uint64_t)n * DHS_REF_ROW_BYTES;

    dhs_status st = DHS_ERR_NOMEM;
    uint8_t **buf = calloc((size_t)n_buffers, sizeof *buf);
    int32_t *holds = malloc(sizeof(int32_t) * (size_t)n_buffers); /* layer a buffer holds, -1 none */
    int64_t *valid = calloc((size_t)n_buffers, sizeof(int64_t));  /* its rows [0, valid) are the layer's */
    int64_t *done_rows = calloc((size_t)L, sizeof(int64_t));       /* per layer: rows computed so far */
    int32_t *next_layer = calloc((size_t)C, sizeof(int32_t));      /* per chunk: the next layer to compute */
    float *X = malloc(sizeof(float) * (size_t)(chunk * d));
    float *XN = malloc(sizeof(float) * (size_t)(chunk * d));
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)(chunk * k));
    float lat[DHS_REF_LAT], key[DHS_REF_MAX_IDX_DIM];
    dhs_ref_scratch *sc = dhs_ref_scratch_create(m);
    out->n = n;
    out->tokens = malloc(sizeof(int32_t) * (size_t)n);
    out->logits = malloc(sizeof(float) * (size_t)V);
    if (!buf || !holds || !valid || !done_rows || !next_layer || !X || !XN || !sel || !sc || !out->tokens || !out->logits)
        goto done;
    memcpy(out->tokens, tokens, sizeof(int32_t) * (size_t)n);
    for (int32_t b = 0; b < n_buffers; b++) {
        holds[b] = -1;
        if (!(buf[b] = dhs_ref_rows_alloc(n, POISON))) goto done;
    }
    for (int32_t l = 0; l < L; l++)
        if (!(out->rows[l] = dhs_ref_rows_alloc(n, 0))) goto done;
    for (int32_t g = 0; g < dhs_ref_n_groups(m); g++)
        if (dhs_ref_keys_init_model(m, &out->keys[g], n)) goto done;

    st = DHS_ERR_STATE; /* from here on: an order that breaks a dependency */
    for (int64_t i = 0; i < n_ev; i++) {
        const dhs_ls_event *e = &ev[i];
        const int32_t l = e->layer, b = e->buffer;
        const int64_t lo = (int64_t)e->chunk * chunk, hi = lo + chunk < n ? lo + chunk : n;
        uint8_t *host = out->rows[l], *dev = buf[b];
        if (e->op == DHS_LS_LOAD) {
            /* the host history must hold the layer's rows before this chunk */
            if (done_rows[l] < lo) goto done;
            memcpy(dev, host, (size_t)lo * DHS_REF_ROW_BYTES);
            holds[b] = l;
            valid[b] = lo;
            stats->loads++;
            stats->load_rows += lo;
        } else if (e->op == DHS_LS_COMPUTE) {
            if (holds[b] != l || valid[b] < lo || next_layer[e->chunk] != l || (l == 0 && e->chunk > 0 && next_layer[e->chunk - 1] != L))
                goto done;
            const int64_t nq = hi - lo;
            const dhs_ref_layer_info *li = dhs_ref_layer(m, l);
            dhs_ref_keys *keys = &out->keys[li->group];
            if (l == 0)
                for (int64_t t = lo; t < hi; t++) dhs_ref_embed(m, tokens[t], X + (t - lo) * d);
            for (int64_t q = 0; q < nq; q++) dhs_ref_rmsnorm(m, X + q * d, XN + q * d);
            /* the chunk's rows (and a producer's keys) first: a speculative block */
            for (int64_t t = lo; t < hi; t++) {
                const float *xn = XN + (t - lo) * d;
                dhs_ref_latent(m, l, t, xn, lat);
                dhs_ref_row_encode(lat, dev + t * DHS_REF_ROW_BYTES);
                if (li->producer) {
                    dhs_ref_index_key(m, l, xn, key);
                    dhs_ref_keys_set(keys, t, key);
                }
            }
            for (int64_t t = lo; t < hi; t++) {
                int64_t q = t - lo;
                if (li->producer && dhs_ref_select(m, l, t, XN + q * d, keys, sel + q * k, sc) < 0) {
                    st = DHS_ERR_NOMEM;
                    goto done;
                }
                dhs_ref_attend_mlp(m, l, t, XN + q * d, dev, DHS_REF_ROW_BYTES, sel + q * k, X + q * d, sc);
            }
            valid[b] = hi;
            next_layer[e->chunk] = l + 1;
            stats->computes++;
            if (e->chunk == C - 1 && l == L - 1) dhs_ref_logits(m, X + (nq - 1) * d, out->logits);
        } else {
            if (holds[b] != l || valid[b] < hi || next_layer[e->chunk] <= l || done_rows[l] != lo) goto done;
            memcpy(host + lo * DHS_REF_ROW_BYTES, dev + lo * DHS_REF_ROW_BYTES, (size_t)(hi - lo) * DHS_REF_ROW_BYTES);
            done_rows[l] = hi;
            stats->writebacks++;
            stats->writeback_rows += hi - lo;
        }
    }
    /* every chunk through every layer, every row written back */
    for (int32_t ch = 0; ch < C; ch++)
        if (next_layer[ch] != L) goto done;
    for (int32_t l = 0; l < L; l++)
        if (done_rows[l] != n) goto done;
    st = DHS_OK;
done:
    if (buf)
        for (int32_t b = 0; b < n_buffers; b++) free(buf[b]);
    free(buf);
    free(holds);
    free(valid);
    free(done_rows);
    free(next_layer);
    free(X);
    free(XN);
    free(sel);
    dhs_ref_scratch_destroy(sc);
    if (st != DHS_OK) dhs_ref_prefill_free(out);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    stats->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    out->seconds = st == DHS_OK ? stats->seconds : 0;
    return st;
}

dhs_status dhs_ref_prefill_streamed(const dhs_ref_model *m, const int32_t *tokens, int64_t n, int64_t chunk,
                                    int32_t n_buffers, const int32_t *onload_layer_map, dhs_ref_prefill *out,
                                    dhs_ref_ls_stats *stats)
{
    if (!out) return DHS_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (!m || n < 1 || chunk < 1 || (n + chunk - 1) / chunk > INT32_MAX) return DHS_ERR_INVALID_ARG;
    dhs_ls_params p = {dhs_ref_model_cfg(m)->n_layers, n_buffers, (int32_t)((n + chunk - 1) / chunk), onload_layer_map};
    int64_t cap = dhs_ls_max_events(&p), n_ev = 0;
    if (cap < 1) return DHS_ERR_INVALID_ARG;
    dhs_ls_event *ev = malloc(sizeof *ev * (size_t)cap);
    if (!ev) return DHS_ERR_NOMEM;
    dhs_status st = dhs_ls_schedule(&p, ev, cap, &n_ev);
    if (st == DHS_OK) st = dhs_ref_prefill_ls_run(m, tokens, n, chunk, n_buffers, ev, n_ev, out, stats);
    free(ev);
    return st;
}

/* ------------------------------------------------------------------ GPU */
dhs_status dhs_ref_prefill_streamed_gpu(const dhs_ref_model *m, const int32_t *tokens, int64_t n, int64_t chunk,
                                        int32_t n_buffers, const int32_t *onload_layer_map, int topk_fused,
                                        dhs_ref_prefill *out, dhs_ref_ls_stats *stats, uint64_t *device_bytes)
{
    if (!out) return DHS_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (!m || !tokens || n < 1 || chunk < 1 || n_buffers < 2 || !stats || !device_bytes ||
        (n + chunk - 1) / chunk > INT32_MAX || chunk > INT32_MAX)
        return DHS_ERR_INVALID_ARG;
    const dhs_ref_cfg *c = dhs_ref_model_cfg(m);
    const int32_t L = c->n_layers, V = c->vocab, G = dhs_ref_n_groups(m);
    if (dhs_ref_n_sources(m) != L || !c->key_fp8) return DHS_ERR_UNSUPPORTED;
    for (int32_t l = 0; l < L; l++)
        if (dhs_ref_layer(m, l)->source != l || dhs_ref_layer(m, l)->m != 1) return DHS_ERR_UNSUPPORTED;
    for (int64_t t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= V) return DHS_ERR_INVALID_ARG;
    if (!dhs_ref_gpu_available()) return DHS_ERR_UNSUPPORTED;
    const int32_t C = (int32_t)((n + chunk - 1) / chunk), Q = (int32_t)(chunk < n ? chunk : n);
    dhs_ls_params p = {L, n_buffers, C, onload_layer_map};
    int64_t cap = dhs_ls_max_events(&p), n_ev = 0;
    if (cap < 1) return DHS_ERR_INVALID_ARG;
    memset(stats, 0, sizeof *stats);
    *device_bytes = 0;
    struct timespec t0, t1;

    dhs_status st = DHS_ERR_NOMEM;
    dhs_ref_gpu *g = NULL;
    dhs_ref_gpu_desc *d = calloc(1, sizeof *d);
    dhs_ls_event *ev = malloc(sizeof *ev * (size_t)cap);
    void **buf = calloc((size_t)n_buffers, sizeof *buf), **host = calloc((size_t)L, sizeof *host);
    void *kc[DHS_MAX_SOURCES] = {0}, *ks[DHS_MAX_SOURCES] = {0};
    void **rowdst = malloc(sizeof(void *) * (size_t)Q), **base = malloc(sizeof(void *) * (size_t)Q);
    void **kcq = malloc(sizeof(void *) * (size_t)Q), **ksq = malloc(sizeof(void *) * (size_t)Q);
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)Q);
    float *lg = malloc(sizeof(float) * (size_t)Q * (size_t)V);
    out->n = n;
    out->tokens = malloc(sizeof(int32_t) * (size_t)n);
    out->logits = malloc(sizeof(float) * (size_t)V);
    if (!d || !ev || !buf || !host || !rowdst || !base || !kcq || !ksq || !pos || !lg || !out->tokens || !out->logits) goto done;
    memcpy(out->tokens, tokens, sizeof(int32_t) * (size_t)n);
    if ((st = dhs_ls_schedule(&p, ev, cap, &n_ev)) != DHS_OK) goto done;
    for (int32_t g2 = 0; g2 < G; g2++)
        if (dhs_ref_keys_init_model(m, &out->keys[g2], n)) {
            st = DHS_ERR_NOMEM;
            goto done;
        }
    const int64_t kcap = out->keys[0].cap, kdim = c->idx_dim;
    dhs_ref_model_gpu_desc(m, d);
    d->topk_fused = topk_fused != 0;
    d->max_queries = Q;
    d->max_positions = n + 8;
    if ((st = dhs_ref_gpu_create(d, NULL, &g)) != DHS_OK) goto done;
    st = DHS_ERR_BACKEND;
    if (dhs_ref_gpu_queues(g, n_ev) != DHS_OK) goto done;
    /* device: R buffers of n rows (poisoned: an unloaded row never looks valid), the key stores */
    for (int32_t b = 0; b < n_buffers; b++) {
        if ((st = dhs_ref_gpu_alloc(g, (uint64_t)n * DHS_REF_ROW_BYTES, &buf[b])) != DHS_OK) goto done;
        if ((st = dhs_ref_gpu_memset(g, buf[b], POISON, (uint64_t)n * DHS_REF_ROW_BYTES)) != DHS_OK) goto done;
        *device_bytes += (uint64_t)n * DHS_REF_ROW_BYTES;
    }
    for (int32_t g2 = 0; g2 < G; g2++) {
        if ((st = dhs_ref_gpu_alloc(g, (uint64_t)(kcap * kdim), &kc[g2])) != DHS_OK) goto done;
        if ((st = dhs_ref_gpu_alloc(g, (uint64_t)kcap * sizeof(float), &ks[g2])) != DHS_OK) goto done;
        if ((st = dhs_ref_gpu_memset(g, kc[g2], 0, (uint64_t)(kcap * kdim))) != DHS_OK) goto done;
        if ((st = dhs_ref_gpu_memset(g, ks[g2], 0, (uint64_t)kcap * sizeof(float))) != DHS_OK) goto done;
        *device_bytes += (uint64_t)(kcap * kdim) + (uint64_t)kcap * sizeof(float);
    }
    /* the host history, pinned (what the session imports) */
    for (int32_t l = 0; l < L; l++)
        if ((st = dhs_ref_gpu_host_alloc(g, (uint64_t)n * DHS_REF_ROW_BYTES, &host[l])) != DHS_OK) goto done;
    if ((st = dhs_ref_gpu_queues_sync(g)) != DHS_OK) goto done;
    stats->chunks = C;
    stats->buffers = n_buffers;
    stats->events = n_ev;
    stats->buffer_bytes = (uint64_t)n_buffers * (uint64_t)n * DHS_REF_ROW_BYTES;
    stats->resident_bytes = (uint64_t)L * (uint64_t)n * DHS_REF_ROW_BYTES;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int64_t i = 0; i < n_ev; i++) {
        const dhs_ls_event *e = &ev[i];
        const int32_t l = e->layer, b = e->buffer, qn = queue_of(e->op);
        const int64_t lo = (int64_t)e->chunk * chunk, hi = lo + chunk < n ? lo + chunk : n;
        uint8_t *dev = buf[b], *hh = host[l];
        for (int32_t k = 0; k < e->n_deps; k++) /* a dependency on another queue: its event */
            if (queue_of(ev[e->deps[k]].op) != qn &&
                (st = dhs_ref_gpu_queue_wait(g, qn, e->deps[k])) != DHS_OK)
                goto done;
        if (e->op == DHS_LS_LOAD) {
            if ((st = dhs_ref_gpu_queue_copy(g, 1, dev, hh, (uint64_t)lo * DHS_REF_ROW_BYTES)) != DHS_OK) goto done;
            stats->loads++;
            stats->load_rows += lo;
        } else if (e->op == DHS_LS_COMPUTE) {
            const int32_t nq = (int32_t)(hi - lo);
            const dhs_ref_layer_info *li = dhs_ref_layer(m, l);
            for (int32_t q = 0; q < nq; q++) {
                rowdst[q] = dev + (lo + q) * DHS_REF_ROW_BYTES;
                base[q] = dev;
                kcq[q] = kc[li->group];
                ksq[q] = ks[li->group];
                pos[q] = lo + q;
            }
            if (l == 0 && (st = dhs_ref_gpu_begin(g, nq, tokens + lo, pos)) != DHS_OK) goto done;
            if ((st = dhs_ref_gpu_rows(g, l, rowdst, kcq, ksq, NULL)) != DHS_OK) goto done;
            if (li->producer && (st = dhs_ref_gpu_select(g, l, kcq, ksq, NULL)) != DHS_OK) goto done;
            if ((st = dhs_ref_gpu_attend(g, l, (const void *const *)base, NULL)) != DHS_OK) goto done;
            stats->computes++;
            if (e->chunk == C - 1 && l == L - 1) {
                if ((st = dhs_ref_gpu_logits(g, lg)) != DHS_OK) goto done; /* synchronises */
                memcpy(out->logits, lg + (int64_t)(nq - 1) * V, sizeof(float) * (size_t)V);
            }
        } else {
            if ((st = dhs_ref_gpu_queue_copy(g, 2, hh + lo * DHS_REF_ROW_BYTES, dev + lo * DHS_REF_ROW_BYTES,
                                             (uint64_t)(hi - lo) * DHS_REF_ROW_BYTES)) != DHS_OK)
                goto done;
            stats->writebacks++;
            stats->writeback_rows += hi - lo;
        }
        if ((st = dhs_ref_gpu_queue_record(g, qn, i)) != DHS_OK) goto done;
    }
    if ((st = dhs_ref_gpu_queues_sync(g)) != DHS_OK) goto done;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    stats->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    /* the result in the prefill's own (pageable) arrays */
    for (int32_t l = 0; l < L; l++) {
        if (!(out->rows[l] = dhs_ref_rows_alloc(n, 0))) {
            st = DHS_ERR_NOMEM;
            goto done;
        }
        memcpy(out->rows[l], host[l], (size_t)n * DHS_REF_ROW_BYTES);
    }
    for (int32_t g2 = 0; g2 < G; g2++) {
        if ((st = dhs_ref_gpu_queue_copy(g, 0, out->keys[g2].codes, kc[g2], (uint64_t)(kcap * kdim))) != DHS_OK) goto done;
        if ((st = dhs_ref_gpu_queue_copy(g, 0, out->keys[g2].scales, ks[g2], (uint64_t)kcap * sizeof(float))) != DHS_OK)
            goto done;
    }
    st = dhs_ref_gpu_queues_sync(g);
    out->seconds = stats->seconds;
done:
    if (g) {
        dhs_ref_gpu_queues_sync(g);
        for (int32_t b = 0; b < n_buffers && buf; b++) dhs_ref_gpu_free(g, buf[b]);
        for (int32_t g2 = 0; g2 < G; g2++) {
            dhs_ref_gpu_free(g, kc[g2]);
            dhs_ref_gpu_free(g, ks[g2]);
        }
        for (int32_t l = 0; l < L && host; l++) dhs_ref_gpu_host_free(g, host[l]);
        dhs_ref_gpu_destroy(g);
    }
    free(d);
    free(ev);
    free(buf);
    free(host);
    free(rowdst);
    free(base);
    free(kcq);
    free(ksq);
    free(pos);
    free(lg);
    if (st != DHS_OK) dhs_ref_prefill_free(out);
    return st;
}
