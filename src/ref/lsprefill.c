/* lsprefill.c - the reference model's prefill through streamed layer buffers
 * (lsprefill.h). */
#include "ref/lsprefill.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *rows_alloc(int64_t rows, int poison)
{
    size_t bytes = (size_t)(rows > 0 ? rows : 1) * DHS_REF_ROW_BYTES;
    void *p = aligned_alloc(16, bytes); /* 656 is a multiple of 16 */
    if (p) memset(p, poison ? 0xA5 : 0, bytes); /* a buffer's unloaded rows never look valid */
    return p;
}

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
        if (!(buf[b] = rows_alloc(n, 1))) goto done;
    }
    for (int32_t l = 0; l < L; l++)
        if (!(out->rows[l] = rows_alloc(n, 0))) goto done;
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
