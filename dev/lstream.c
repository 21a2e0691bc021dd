/* lstream.c - layer-streamed prefill scheduler and its CPU executor
 * (lstream.h has the rules). Pure logic: no allocation in the scheduler. */
#include <stdlib.h>
#include <string.h>

#include "dev/lstream.h"

static int params_ok(const dhs_ls_params *p)
{
    if (!p || p->n_layers < 1 || p->n_buffers < 2 || p->n_chunks < 1) return 0;
    if ((int64_t)p->n_layers * p->n_chunks > INT32_MAX / 4) return 0;
    if (p->onload_layer_map)
        for (int32_t l = 0; l < p->n_layers; l++)
            if (p->onload_layer_map[l] < 0) return 0;
    return 1;
}

int64_t dhs_ls_max_events(const dhs_ls_params *p)
{
    if (!params_ok(p)) return -1;
    return 3 * (int64_t)p->n_layers * p->n_chunks;
}

int32_t dhs_ls_buffer_of(const dhs_ls_params *p, int32_t chunk, int32_t layer)
{
    if (!params_ok(p) || chunk < 0 || chunk >= p->n_chunks || layer < 0 || layer >= p->n_layers) return -1;
    if (layer == 0) return 0;
    int32_t L = p->n_layers, R = p->n_buffers;
    if (L - 1 <= R - 1) return layer; /* every layer has its own buffer */
    int64_t idx = (int64_t)chunk * (L - 1) + (layer - 1);
    return 1 + (int32_t)(idx % (R - 1));
}

/* Instances u = chunk * L + layer in compute order. The previous occupant of
   u's buffer is the last instance before u on the same buffer (-1: none). With
   round robin over R-1 buffers it is R-1 rotating instances back; layer 0's
   is the previous chunk's layer 0; a resident layer's is its previous chunk. */
static int32_t prev_occupant(const dhs_ls_params *p, int32_t u)
{
    int32_t L = p->n_layers, R = p->n_buffers, ch = u / L, l = u % L;
    if (l == 0 || L - 1 <= R - 1) return ch > 0 ? u - L : -1;
    int32_t idx = ch * (L - 1) + (l - 1) - (R - 1); /* rotating index of the previous occupant */
    if (idx < 0) return -1;
    return (idx / (L - 1)) * L + 1 + idx % (L - 1);
}

static void put(dhs_ls_event *ev, int64_t *n, int32_t op, int32_t ch, int32_t l, int32_t b, const int32_t *deps, int32_t nd)
{
    dhs_ls_event *e = &ev[(*n)++];
    memset(e, 0, sizeof *e);
    e->op = op;
    e->chunk = ch;
    e->layer = l;
    e->buffer = b;
    for (int32_t i = 0; i < nd; i++)
        if (deps[i] >= 0) e->deps[e->n_deps++] = deps[i];
}

dhs_status dhs_ls_schedule(const dhs_ls_params *p, dhs_ls_event *ev, int64_t cap, int64_t *n_events)
{
    if (!params_ok(p) || !ev || !n_events || cap < dhs_ls_max_events(p)) return DHS_ERR_INVALID_ARG;
    const int32_t L = p->n_layers, N = L * p->n_chunks;
    /* event index of each instance's load / compute / write-back (-1: none yet) */
    int32_t *idx = malloc(sizeof(int32_t) * 3 * (size_t)N);
    if (!idx) return DHS_ERR_NOMEM;
    for (int64_t i = 0; i < 3 * (int64_t)N; i++) idx[i] = -1;
#define IDX(u, op) idx[3 * (int64_t)(u) + (op)]
    int64_t n = 0;
    int32_t next_load = 0;
    for (int32_t u = 0; u < N; u++) {
        int32_t l = u % L, ch = u / L;
        int64_t target = (int64_t)u + (p->onload_layer_map ? p->onload_layer_map[l] : 1);
        if (target > N - 1) target = N - 1;
        while (next_load <= target) {
            int32_t v = next_load, pv = prev_occupant(p, v), vch = v / L, vl = v % L;
            if (vch == 0 || pv != v - L) { /* the buffer does not hold this layer already: load */
                if (pv >= u) break;        /* its previous occupant is not computed yet: wait */
                if (vch > 0 && v - L >= u) break; /* the layer's previous chunk is not written back yet */
                int32_t deps[3] = {pv >= 0 ? IDX(pv, DHS_LS_COMPUTE) : -1, pv >= 0 ? IDX(pv, DHS_LS_WRITEBACK) : -1,
                                   vch > 0 ? IDX(v - L, DHS_LS_WRITEBACK) : -1};
                if (deps[2] == deps[1]) deps[2] = -1;
                IDX(v, DHS_LS_LOAD) = (int32_t)n;
                put(ev, &n, DHS_LS_LOAD, vch, vl, dhs_ls_buffer_of(p, vch, vl), deps, 3);
            }
            next_load++;
        }
        int32_t deps[2] = {IDX(u, DHS_LS_LOAD), u > 0 ? IDX(u - 1, DHS_LS_COMPUTE) : -1};
        int32_t b = dhs_ls_buffer_of(p, ch, l);
        IDX(u, DHS_LS_COMPUTE) = (int32_t)n;
        put(ev, &n, DHS_LS_COMPUTE, ch, l, b, deps, 2);
        int32_t c = IDX(u, DHS_LS_COMPUTE);
        IDX(u, DHS_LS_WRITEBACK) = (int32_t)n;
        put(ev, &n, DHS_LS_WRITEBACK, ch, l, b, &c, 1);
    }
#undef IDX
    free(idx);
    *n_events = n;
    return DHS_OK;
}

/* ------------------------------------------------------------ chunk size from a memory budget */
int64_t dhs_ls_prefill_bytes(int64_t layer_bytes, int32_t n_layers, int32_t n_buffers, int64_t act_row_bytes, int64_t chunk_rows)
{
    if (n_layers < 1 || n_buffers < 2 || layer_bytes < 0 || act_row_bytes < 0 || chunk_rows < 0) return -1;
    const int64_t nb = n_buffers < n_layers ? n_buffers : n_layers;
    if (layer_bytes > INT64_MAX / nb) return -1;
    const int64_t fixed = nb * layer_bytes;
    if (chunk_rows > 0 && act_row_bytes > (INT64_MAX - fixed) / chunk_rows) return -1;
    return fixed + act_row_bytes * chunk_rows;
}

dhs_status dhs_ls_max_chunk(int64_t budget_bytes, int64_t layer_bytes, int32_t n_layers, int32_t n_buffers, int64_t act_row_bytes,
                            int64_t multiple, int64_t max_rows, int64_t *chunk_rows)
{
    if (!chunk_rows || n_layers < 1 || n_buffers < 2 || budget_bytes < 0 || layer_bytes < 0 || act_row_bytes < 1 || multiple < 0 ||
        max_rows < 0)
        return DHS_ERR_INVALID_ARG;
    const int64_t fixed = dhs_ls_prefill_bytes(layer_bytes, n_layers, n_buffers, 0, 0);
    if (fixed < 0 || fixed > budget_bytes) return DHS_ERR_TOO_LARGE; /* the layer buffers alone overflow or exceed it */
    int64_t c = (budget_bytes - fixed) / act_row_bytes;
    if (max_rows > 0 && c >= max_rows) {
        *chunk_rows = max_rows;
        return DHS_OK;
    }
    if (multiple > 1) c -= c % multiple;
    if (c < 1) return DHS_ERR_TOO_LARGE;
    *chunk_rows = c;
    return DHS_OK;
}

/* ------------------------------------------------------------ synthetic model */
void dhs_ls_synth_init_host(const dhs_ls_synth *m, uint32_t *hist)
{
    const int64_t T = dhs_ls_total_rows(m), W = m->row_words, lw = dhs_ls_layer_words(m);
    for (int32_t l = 0; l < m->n_layers; l++) {
        uint32_t *h = hist + (int64_t)l * lw;
        for (int64_t t = 0; t < T; t++)
            for (int32_t w = 0; w < W; w++) h[t * W + w] = t < m->prefix_rows ? dhs_ls_prefix_word(l, t, w) : 0u;
    }
}

void dhs_ls_cpu_compute(const dhs_ls_synth *m, int32_t layer, int32_t chunk, uint32_t *buf, uint32_t *x)
{
    const int64_t W = m->row_words, t0 = dhs_ls_chunk_start(m, chunk), t1 = t0 + dhs_ls_chunk_len(m, chunk);
    const int64_t xo = m->x_window ? t0 : 0; /* row t of x is at (t - xo) * W */
    if (layer == 0)
        for (int64_t t = t0; t < t1; t++)
            for (int32_t w = 0; w < W; w++) x[(t - xo) * W + w] = dhs_ls_embed_word(t, w);
    for (int64_t t = t0; t < t1; t++) /* phase 1: this chunk's rows of the layer */
        for (int32_t w = 0; w < W; w++) buf[t * W + w] = dhs_ls_kv_word(layer, x[(t - xo) * W + w]);
    for (int64_t t = t0; t < t1; t++) { /* phase 2: activations from this row, the previous and a far one */
        int64_t f = dhs_ls_far_row(layer, t);
        for (int32_t w = 0; w < W; w++)
            x[(t - xo) * W + w] =
                dhs_ls_act_word(x[(t - xo) * W + w], buf[t * W + w], t > 0 ? buf[(t - 1) * W + w] : 0u, buf[f * W + w], m->work);
    }
}

static void op_load(const dhs_ls_synth *m, int32_t layer, int32_t chunk, const uint32_t *hist, uint32_t *buf)
{
    const int64_t lw = dhs_ls_layer_words(m), rows = dhs_ls_chunk_start(m, chunk);
    memcpy(buf, hist + (int64_t)layer * lw, sizeof(uint32_t) * (size_t)(rows * m->row_words));
}

static void op_writeback(const dhs_ls_synth *m, int32_t layer, int32_t chunk, uint32_t *hist, const uint32_t *buf)
{
    const int64_t lw = dhs_ls_layer_words(m), off = dhs_ls_chunk_start(m, chunk) * m->row_words;
    memcpy(hist + (int64_t)layer * lw + off, buf + off, sizeof(uint32_t) * (size_t)(dhs_ls_chunk_len(m, chunk) * m->row_words));
}

dhs_status dhs_ls_run_cpu(const dhs_ls_synth *m, int32_t n_buffers, const dhs_ls_event *ev, int64_t n, const int64_t *order,
                          uint32_t *hist, uint32_t *bufs, uint32_t *x)
{
    if (!dhs_ls_synth_ok(m) || !ev || n < 0 || !hist || !bufs || !x || n_buffers < 1) return DHS_ERR_INVALID_ARG;
    uint8_t *done = calloc((size_t)n + 1, 1);
    if (!done) return DHS_ERR_NOMEM;
    const int64_t lw = dhs_ls_layer_words(m);
    dhs_status st = DHS_OK;
    for (int64_t i = 0; i < n && st == DHS_OK; i++) {
        int64_t j = order ? order[i] : i;
        if (j < 0 || j >= n || done[j]) {
            st = DHS_ERR_INVALID_ARG;
            break;
        }
        const dhs_ls_event *e = &ev[j];
        if (e->buffer < 0 || e->buffer >= n_buffers || e->layer < 0 || e->layer >= m->n_layers || e->chunk < 0 ||
            e->chunk >= m->n_chunks || e->n_deps < 0 || e->n_deps > DHS_LS_MAX_DEPS) {
            st = DHS_ERR_INVALID_ARG;
            break;
        }
        for (int32_t d = 0; d < e->n_deps; d++)
            if (e->deps[d] < 0 || e->deps[d] >= n || !done[e->deps[d]]) st = DHS_ERR_STATE;
        if (st != DHS_OK) break;
        uint32_t *buf = bufs + (int64_t)e->buffer * lw;
        switch (e->op) {
        case DHS_LS_LOAD: op_load(m, e->layer, e->chunk, hist, buf); break;
        case DHS_LS_COMPUTE: dhs_ls_cpu_compute(m, e->layer, e->chunk, buf, x); break;
        case DHS_LS_WRITEBACK: op_writeback(m, e->layer, e->chunk, hist, buf); break;
        default: st = DHS_ERR_INVALID_ARG; break;
        }
        done[j] = 1;
    }
    free(done);
    return st;
}

void dhs_ls_run_full_cpu(const dhs_ls_synth *m, uint32_t *hist, uint32_t *bufs, uint32_t *x)
{
    const int64_t lw = dhs_ls_layer_words(m);
    for (int32_t l = 0; l < m->n_layers; l++) op_load(m, l, 0, hist, bufs + (int64_t)l * lw);
    for (int32_t ch = 0; ch < m->n_chunks; ch++)
        for (int32_t l = 0; l < m->n_layers; l++) {
            dhs_ls_cpu_compute(m, l, ch, bufs + (int64_t)l * lw, x);
            op_writeback(m, l, ch, hist, bufs + (int64_t)l * lw);
        }
}
