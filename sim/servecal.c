/* servecal.c - calibration of the serving simulator's cost model from
 * measured decode steps (servecal.h; rules in docs/SIM.md, "Calibration"). */
#include "sim/servecal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/util.h"

static const char *const cal_names[DHS_CAL_N_] = {"base_us",     "token_us",    "attn_us",   "attn_layer_us",
                                                  "idx_us_per_ktok", "idx_layer_us", "resolver_us", "resolver_ns_per_entry", "pcie_gbps",
                                                  "gather_us",   "draft_us",    "prefill_us_per_token"};

const char *dhs_serve_cal_name(dhs_serve_cal_const i)
{
    return (int)i >= 0 && i < DHS_CAL_N_ ? cal_names[i] : "unknown";
}

double *dhs_serve_cal_field(dhs_serve_cost *c, dhs_serve_cal_const i)
{
    switch (i) {
    case DHS_CAL_BASE_US: return &c->base_us;
    case DHS_CAL_TOKEN_US: return &c->token_us;
    case DHS_CAL_ATTN_US: return &c->attn_us;
    case DHS_CAL_ATTN_LAYER_US: return &c->attn_layer_us;
    case DHS_CAL_IDX_US_PER_KTOK: return &c->idx_us_per_ktok;
    case DHS_CAL_IDX_LAYER_US: return &c->idx_layer_us;
    case DHS_CAL_RESOLVER_US: return &c->resolver_us;
    case DHS_CAL_RESOLVER_NS: return &c->resolver_ns_per_entry;
    case DHS_CAL_PCIE_GBPS: return &c->pcie_gbps;
    case DHS_CAL_GATHER_US: return &c->gather_us;
    case DHS_CAL_DRAFT_US: return &c->draft_us;
    case DHS_CAL_PREFILL_US: return &c->prefill_us_per_token;
    default: return NULL;
    }
}

int dhs_serve_fit_line(const double *x, const double *y, int n, double b_one, double *a, double *b)
{
    if (n < 1) return -1;
    double sx = 0, sy = 0;
    for (int i = 0; i < n; i++) sx += x[i], sy += y[i];
    double mx = sx / n, my = sy / n, sxx = 0, sxy = 0, xx0 = 0, xy0 = 0;
    for (int i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
        xx0 += x[i] * x[i];
        xy0 += x[i] * y[i];
    }
    /* through the origin (a = 0), the fallback when the intercept would be negative */
    double b0 = xx0 > 0 ? xy0 / xx0 : 0;
    if (b0 < 0) b0 = 0;
    /* distinct x: a spread above rounding of the values themselves */
    if (!(sxx > 1e-18 * (xx0 > 0 ? xx0 : 1))) {
        double bb = b_one > 0 ? b_one : 0;
        double aa = my - bb * mx;
        if (aa < 0) { *a = 0; *b = b0; }
        else { *a = aa; *b = bb; }
        return 1;
    }
    double bb = sxy / sxx, aa = my - bb * mx;
    if (bb < 0) {
        *a = my > 0 ? my : 0;
        *b = 0;
        return 2;
    }
    if (aa < 0) {
        *a = 0;
        *b = b0;
        return 3;
    }
    *a = aa;
    *b = bb;
    return 0;
}

static double queries(const dhs_serve_cal_geom *g, const dhs_serve_meas *m) { return m->mean_batch * g->spec; }
/* the simulator's context of a decode step is the request's committed positions: from the prompt
   to prompt + output; its mean over the decode */
static double mean_ctx(const dhs_serve_cal_geom *g, const dhs_serve_meas *m) { return (double)m->context + 0.5 * (double)g->tokens; }
/* host rows copied per step, all sources */
static double rows_per_step(const dhs_serve_meas *m) { return m->host_rows_per_token * m->mean_batch * m->tokens_per_round; }

double dhs_serve_cal_extra_us(const dhs_serve_cost *c, const dhs_serve_cal_geom *g, const dhs_serve_meas *m)
{
    double q = queries(g, m), L = mean_ctx(g, m);
    double e = c->layers * (c->attn_layer_us + c->idx_layer_us + q * (c->attn_us + c->idx_us_per_ktok * L / 1000.0));
    if (m->mode != DHS_SERVE_RESIDENT) {
        /* servesim: layers x (resolver_us + ns x E / 1000), E = one layer's entries = queries x k */
        e += c->layers * (c->resolver_us + c->resolver_ns_per_entry * q * g->topk / 1000.0);
        /* layers x (gather_us + H x row_bytes / (GB/s x 1000)), H = one layer's rows = all rows / layers */
        double rows = rows_per_step(m);
        if (rows > 0) e += c->layers * c->gather_us + rows * c->row_bytes / (c->pcie_gbps * 1000.0);
    }
    return e;
}

static const char *fit_kind(int k)
{
    switch (k) {
    case 1: return "one distinct value";
    case 2: return "slope negative, set to 0";
    case 3: return "intercept negative, set to 0";
    default: return "least squares";
    }
}

static int finite_nonneg(double v) { return isfinite(v) && v >= 0; }

int dhs_serve_calibrate(const dhs_serve_meas *m, int n, const dhs_serve_cal_geom *g, const dhs_serve_cost *start,
                        dhs_serve_calib *out, char *err, size_t err_len)
{
    if (n < 1) { dhs_errf(err, err_len, "no measured configuration"); return -1; }
    if (n > 256) { dhs_errf(err, err_len, "%d measured configurations: at most 256", n); return -1; }
    if (g->layers < 1 || g->producers < 0 || g->producers > g->layers || g->sources < 1 || g->spec < 1 || g->topk < 1 ||
        g->row_bytes < 1 || g->tokens < 1) {
        dhs_errf(err, err_len, "bad geometry (layers %d, producers %d, sources %d, spec %d, k %d, row bytes %u, tokens %lld)",
                 g->layers, g->producers, g->sources, g->spec, g->topk, g->row_bytes, (long long)g->tokens);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const dhs_serve_meas *r = &m[i];
        int ok = (int)r->mode >= 0 && r->mode < DHS_SERVE_MODES_ && r->context >= 1 && r->concurrency >= 1 &&
                 isfinite(r->mean_batch) && r->mean_batch > 0 && isfinite(r->tokens_per_round) && r->tokens_per_round > 0 &&
                 finite_nonneg(r->step_us) && finite_nonneg(r->host_rows_per_token);
        if (ok && r->has_phases)
            ok = finite_nonneg(r->other_us) && finite_nonneg(r->indexer_us) && finite_nonneg(r->topk_us) &&
                 finite_nonneg(r->resolve_us) && finite_nonneg(r->miss_copy_us) && finite_nonneg(r->attention_us);
        if (!ok) {
            dhs_errf(err, err_len, "measurement %d (%s, context %lld, C %d): a missing, negative or non-finite figure", i,
                     dhs_serve_mode_str(r->mode), (long long)r->context, r->concurrency);
            return -1;
        }
    }
    dhs_serve_calib C;
    memset(&C, 0, sizeof C);
    C.cost = *start;
    dhs_serve_cost *k = &C.cost;
    k->layers = g->layers;
    k->row_bytes = g->row_bytes;
    int n_ph = 0, n_hph = 0;
    for (int i = 0; i < n; i++) {
        n_ph += m[i].has_phases != 0;
        n_hph += m[i].has_phases && m[i].mode != DHS_SERVE_RESIDENT;
    }
    for (int i = 0; i < DHS_CAL_N_; i++) snprintf(C.from[i], sizeof C.from[i], "default");

    /* attention per layer: attention / layers = attn_layer_us + attn_us x queries, fitted over the
       profiled records (latency-bound kernels take about the same time at any batch: the intercept);
       the indexer (+ top-k) per query and layer, pooled */
    if (n_ph) {
        double xs[256], ys[256], sx = 0, sy = 0, it = 0, ix = 0;
        int nf = 0;
        for (int i = 0; i < n; i++) {
            if (!m[i].has_phases) continue;
            double q = queries(g, &m[i]);
            xs[nf] = q;
            ys[nf] = m[i].attention_us / g->layers;
            sx += xs[nf];
            sy += ys[nf];
            nf++;
            it += m[i].indexer_us + m[i].topk_us;
            ix += q * g->layers * mean_ctx(g, &m[i]) / 1000.0;
        }
        double a = 0, b = 0;
        int kind = dhs_serve_fit_line(xs, ys, nf, 0, &a, &b);
        if (kind == 1) {
            /* one batch size: no slope to fit; all of it per query (pooled), as if nothing were flat,
               the cautious reading for larger batches */
            k->attn_layer_us = 0;
            k->attn_us = sx > 0 ? sy / sx : 0;
            snprintf(C.from[DHS_CAL_ATTN_US], sizeof C.from[0],
                     "measured: attention / (mean batch x spec x %d layers), pooled over %d profiled records (one batch size "
                     "in the file: the batch-independent part cannot be told apart, all of it charged per query)",
                     g->layers, n_ph);
            snprintf(C.from[DHS_CAL_ATTN_LAYER_US], sizeof C.from[0],
                     "fit: 0, one batch size (queries per step) in the %d profiled records: no intercept to fit", n_ph);
        } else {
            k->attn_layer_us = a;
            k->attn_us = b;
            snprintf(C.from[DHS_CAL_ATTN_US], sizeof C.from[0],
                     "fit: attention / %d layers against queries per step (mean batch x spec) over %d profiled records (%s): "
                     "the slope", g->layers, nf, fit_kind(kind));
            snprintf(C.from[DHS_CAL_ATTN_LAYER_US], sizeof C.from[0],
                     "fit: attention / %d layers against queries per step over %d profiled records (%s): the intercept, the "
                     "batch-independent part", g->layers, nf, fit_kind(kind));
        }
        /* the indexer and top-k the same way: (indexer + topk) / layers = idx_layer_us + idx_us_per_ktok x
           queries x mean context / 1000 (top-k over the context is one latency-bound pass per layer) */
        nf = 0;
        for (int i = 0; i < n; i++) {
            if (!m[i].has_phases) continue;
            xs[nf] = queries(g, &m[i]) * mean_ctx(g, &m[i]) / 1000.0;
            ys[nf] = (m[i].indexer_us + m[i].topk_us) / g->layers;
            nf++;
        }
        int ikind = dhs_serve_fit_line(xs, ys, nf, 0, &a, &b);
        const char *per = g->producers > 0 && g->producers < g->layers ? "; the simulator charges every layer, so the values are per layer" : "";
        if (ikind == 1) {
            k->idx_layer_us = 0;
            k->idx_us_per_ktok = ix > 0 ? it / ix : 0;
        } else {
            k->idx_layer_us = a;
            k->idx_us_per_ktok = b;
        }
        char prod[160] = "";
        if (g->producers > 0 && g->producers < g->layers)
            snprintf(prod, sizeof prod, " (%d of the %d layers score: %.4g us per producer", g->producers, g->layers,
                     k->idx_us_per_ktok * g->layers / g->producers);
        if (ikind == 1) {
            snprintf(C.from[DHS_CAL_IDX_US_PER_KTOK], sizeof C.from[0],
                     "measured: (indexer + topk) / (mean batch x spec x %d layers x mean context/1000), pooled over %d profiled "
                     "records (one queries x context in the file: all of it per query)%s%s%s",
                     g->layers, n_ph, prod, prod[0] ? ")" : "", per);
            snprintf(C.from[DHS_CAL_IDX_LAYER_US], sizeof C.from[0],
                     "fit: 0, one queries x context in the %d profiled records: no intercept to fit", n_ph);
        } else {
            snprintf(C.from[DHS_CAL_IDX_US_PER_KTOK], sizeof C.from[0],
                     "fit: (indexer + topk) / %d layers against queries x mean context/1000 over %d profiled records (%s): the "
                     "slope%s%s%s", g->layers, nf, fit_kind(ikind), prod, prod[0] ? ")" : "", per);
            snprintf(C.from[DHS_CAL_IDX_LAYER_US], sizeof C.from[0],
                     "fit: (indexer + topk) / %d layers against queries x mean context/1000 over %d profiled records (%s): the "
                     "intercept, the batch-independent part%s", g->layers, nf, fit_kind(ikind), per);
        }
    } else {
        k->attn_us = 0;
        k->attn_layer_us = 0;
        k->idx_us_per_ktok = 0;
        k->idx_layer_us = 0;
        snprintf(C.from[DHS_CAL_IDX_LAYER_US], sizeof C.from[0],
                 "measured: 0, the file has no per-step breakdown (a CPU run): the indexer is folded into base_us and token_us");
        snprintf(C.from[DHS_CAL_ATTN_US], sizeof C.from[0],
                 "measured: 0, the file has no per-step breakdown (a CPU run): attention is folded into token_us");
        snprintf(C.from[DHS_CAL_ATTN_LAYER_US], sizeof C.from[0],
                 "measured: 0, the file has no per-step breakdown (a CPU run): attention is folded into base_us and token_us");
        snprintf(C.from[DHS_CAL_IDX_US_PER_KTOK], sizeof C.from[0],
                 "measured: 0, the file has no per-step breakdown (a CPU run): the indexer is folded into token_us");
    }

    /* resolver: resolve / layers = resolver_us + resolver_ns x (queries x k) / 1000, hierarchy records */
    if (n_hph) {
        double xs[256], ys[256];
        int nf = 0;
        for (int i = 0; i < n; i++) {
            if (!m[i].has_phases || m[i].mode == DHS_SERVE_RESIDENT) continue;
            xs[nf] = queries(g, &m[i]) * g->topk / 1000.0;
            ys[nf] = m[i].resolve_us / g->layers;
            nf++;
        }
        double a = 0, b = 0;
        int kind = dhs_serve_fit_line(xs, ys, nf, start->resolver_ns_per_entry, &a, &b);
        k->resolver_us = a;
        k->resolver_ns_per_entry = b;
        snprintf(C.from[DHS_CAL_RESOLVER_US], sizeof C.from[0],
                 "fit: resolve / %d layers against entries (mean batch x spec x k) over %d hierarchy records (%s): the intercept",
                 g->layers, nf, fit_kind(kind));
        if (kind == 1)
            snprintf(C.from[DHS_CAL_RESOLVER_NS], sizeof C.from[0], "%s", b == start->resolver_ns_per_entry
                     ? "default: one entry count in the file, no slope to fit" : "fit: one entry count in the file, through the origin");
        else
            snprintf(C.from[DHS_CAL_RESOLVER_NS], sizeof C.from[0],
                     "fit: resolve / %d layers against entries over %d hierarchy records (%s): the slope", g->layers, nf, fit_kind(kind));
    } else {
        snprintf(C.from[DHS_CAL_RESOLVER_US], sizeof C.from[0], "default: no hierarchy record with a per-step breakdown");
        snprintf(C.from[DHS_CAL_RESOLVER_NS], sizeof C.from[0], "default: no hierarchy record with a per-step breakdown");
    }

    /* misses: miss_copy / layers = gather_us + bytes per layer / (GB/s x 1000) */
    {
        double xs[256], ys[256];
        int nf = 0;
        for (int i = 0; i < n; i++) {
            if (!m[i].has_phases || m[i].mode == DHS_SERVE_RESIDENT || rows_per_step(&m[i]) <= 0 || m[i].miss_copy_us <= 0) continue;
            xs[nf] = rows_per_step(&m[i]) * g->row_bytes / g->layers;
            ys[nf] = m[i].miss_copy_us / g->layers;
            nf++;
        }
        if (!n_hph) {
            snprintf(C.from[DHS_CAL_PCIE_GBPS], sizeof C.from[0], "default: no hierarchy record with a per-step breakdown");
            snprintf(C.from[DHS_CAL_GATHER_US], sizeof C.from[0], "default: no hierarchy record with a per-step breakdown");
        } else if (!nf) {
            snprintf(C.from[DHS_CAL_PCIE_GBPS], sizeof C.from[0], "default: no host rows copied (or no copy time) in the file");
            snprintf(C.from[DHS_CAL_GATHER_US], sizeof C.from[0], "default: no host rows copied (or no copy time) in the file");
        } else {
            double a = 0, b = 0;
            int kind = dhs_serve_fit_line(xs, ys, nf, 1.0 / (start->pcie_gbps * 1000.0), &a, &b);
            k->gather_us = a;
            snprintf(C.from[DHS_CAL_GATHER_US], sizeof C.from[0],
                     "fit: miss_copy / %d layers against bytes copied per layer (host rows per token x tokens per step x %u B) "
                     "over %d hierarchy records (%s): the intercept",
                     g->layers, g->row_bytes, nf, fit_kind(kind));
            if (b > 0) {
                k->pcie_gbps = 1.0 / (b * 1000.0);
                if (kind == 1 && b == 1.0 / (start->pcie_gbps * 1000.0))
                    snprintf(C.from[DHS_CAL_PCIE_GBPS], sizeof C.from[0], "default: one copy size in the file, no slope to fit");
                else
                    snprintf(C.from[DHS_CAL_PCIE_GBPS], sizeof C.from[0],
                             "fit: bytes copied / miss_copy time beyond the gather latency over %d hierarchy records (%s): 1 / slope",
                             nf, fit_kind(kind));
            } else {
                snprintf(C.from[DHS_CAL_PCIE_GBPS], sizeof C.from[0],
                         "default: the copy time does not grow with the bytes copied (%s)", fit_kind(kind));
            }
        }
    }

    /* speculation: the drafter runs inside the measured step; prefill is outside the measured figures */
    k->draft_us = 0;
    snprintf(C.from[DHS_CAL_DRAFT_US], sizeof C.from[0],
             "measured: 0, the drafter runs inside the measured step: folded into base_us and token_us");
    k->prefill_us_per_token = 0;
    snprintf(C.from[DHS_CAL_PREFILL_US], sizeof C.from[0],
             "measured: 0, bench serve's tokens/s and TPOT count decode rounds only (prefill left out)");

    /* base_us + token_us x queries: the step less the modeled parts, resident records (else the hierarchy's) */
    {
        int n_res = 0;
        for (int i = 0; i < n; i++) n_res += m[i].mode == DHS_SERVE_RESIDENT;
        double xs[256], ys[256];
        int nf = 0;
        for (int i = 0; i < n; i++) {
            if (n_res && m[i].mode != DHS_SERVE_RESIDENT) continue;
            xs[nf] = queries(g, &m[i]);
            ys[nf] = m[i].step_us - dhs_serve_cal_extra_us(k, g, &m[i]);
            nf++;
        }
        double a = 0, b = 0;
        int kind = dhs_serve_fit_line(xs, ys, nf, 0, &a, &b);
        k->base_us = a;
        k->token_us = b;
        double ss = 0, mx = 0;
        for (int i = 0; i < nf; i++) {
            double r = a + b * xs[i] - ys[i];
            ss += r * r;
            if (fabs(r) > mx) mx = fabs(r);
        }
        C.fit_points = nf;
        C.fit_resident = n_res > 0;
        C.fit_rms_us = sqrt(ss / nf);
        C.fit_max_us = mx;
        const char *over = n_res ? "resident" : "hierarchy (no resident record; less the modeled resolver and copies)";
        snprintf(C.from[DHS_CAL_BASE_US], sizeof C.from[0],
                 "fit: step_mean%s against queries per step (mean batch x spec) over %d %s records (%s): the intercept",
                 n_ph ? " less the modeled attention and indexer" : "", nf, over, fit_kind(kind));
        if (kind == 1)
            snprintf(C.from[DHS_CAL_TOKEN_US], sizeof C.from[0], "fit: one batch size in the file: no slope, 0 (base_us carries the step)");
        else
            snprintf(C.from[DHS_CAL_TOKEN_US], sizeof C.from[0],
                     "fit: step_mean%s against queries per step over %d %s records (%s): the slope",
                     n_ph ? " less the modeled attention and indexer" : "", nf, over, fit_kind(kind));
    }

    /* acceptance: tokens per session and round = 1 + p + ... + p^(spec-1) */
    C.accept_p = 1;
    if (g->spec > 1) {
        double tok = 0, w = 0;
        for (int i = 0; i < n; i++) tok += m[i].tokens_per_round * m[i].mean_batch, w += m[i].mean_batch;
        double t = tok / w, lo = 0, hi = 1;
        for (int it = 0; it < 100; it++) {
            double p = 0.5 * (lo + hi), s = 0, pj = 1;
            for (int j = 0; j < g->spec; j++) s += pj, pj *= p;
            if (s < t) lo = p;
            else hi = p;
        }
        C.accept_p = 0.5 * (lo + hi);
        snprintf(C.accept_from, sizeof C.accept_from,
                 "fit: %.4g tokens per session and round (spec %d) = 1 + p + ... + p^%d", t, g->spec, g->spec - 1);
    } else {
        snprintf(C.accept_from, sizeof C.accept_from, "measured: spec 1, no speculation");
    }
    *out = C;
    return 0;
}

dhs_locality dhs_serve_locality_for_k(int32_t k)
{
    dhs_locality l = dhs_locality_default();
    if (k >= 2048) return l;
    double s = (double)k / 2048.0;
#define SCALE(f)                                    \
    do {                                            \
        l.f = (int32_t)lround(l.f * s);             \
        if (l.f < 1) l.f = 1;                       \
    } while (0)
    SCALE(window);
    SCALE(window_full);
    SCALE(clusters);
    SCALE(cluster_radius);
#undef SCALE
    return l;
}
