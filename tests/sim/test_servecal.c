/* test_servecal.c - the serving simulator's calibration (sim/servecal.c).
 *
 * - dhs_serve_fit_line: an exact line is recovered; random points give the
 *   normal equations' solution (solved here by Cramer's rule, not the
 *   centred form the library uses); one distinct x takes the given slope;
 *   a negative slope or intercept is clamped to 0 as documented; no points
 *   is an error;
 * - dhs_serve_calibrate on measurements generated from a known cost model
 *   with the per-step breakdown (a GPU file): every constant recovered,
 *   including a geometry whose index producers are fewer than its layers (the
 *   per-layer indexer constant reproduces the measured indexer time), and the
 *   base/token fit reproduces every step with zero residual (attention per
 *   layer = attn_layer_us + attn_us x queries, indexer + top-k per layer =
 *   idx_layer_us + idx_us_per_ktok x queries x context/1000: all recovered);
 *   every record at one batch size and context: attention and indexer pooled
 *   per query, the per-layer parts 0, and the provenance says why; without the
 *   breakdown (a CPU file): attention and indexer 0, the hierarchy's
 *   constants left at the start values, base/token fitted on the resident
 *   records only; without resident records the fit runs on the hierarchy's;
 *   the acceptance probability recovered from tokens per round; no misses
 *   keeps the PCIe default;
 * - bad input (no measurement, a non-finite figure, a bad geometry) is
 *   refused and leaves the output untouched;
 * - the locality scaled to k.
 * Env: DHS_TEST_SEED.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/servecal.h"
#include "test_help.h"

static int close_rel(double a, double b, double tol) { return fabs(a - b) <= tol * (fabs(b) > 1e-12 ? fabs(b) : 1); }

static void test_fit_line(uint64_t seed)
{
    double x[64], y[64], a = -1, b = -1;
    /* exact line */
    for (int i = 0; i < 5; i++) x[i] = i + 1, y[i] = 3 + 2 * x[i];
    CHECK(dhs_serve_fit_line(x, y, 5, 0, &a, &b) == 0);
    CHECKF(close_rel(a, 3, 1e-12) && close_rel(b, 2, 1e-12), "a %g b %g", a, b);
    /* random points against the normal equations */
    uint64_t r = seed;
    for (int t = 0; t < 20; t++) {
        int n = 3 + (int)dhs_rng_below(&r, 40);
        double sx = 0, sy = 0, sxx = 0, sxy = 0;
        for (int i = 0; i < n; i++) {
            x[i] = 1 + (double)dhs_rng_below(&r, 1000) / 10.0;
            y[i] = 50 + 7 * x[i] + ((double)dhs_rng_below(&r, 2001) - 1000) / 100.0;
            sx += x[i], sy += y[i], sxx += x[i] * x[i], sxy += x[i] * y[i];
        }
        double det = n * sxx - sx * sx, bb = (n * sxy - sx * sy) / det, aa = (sxx * sy - sx * sxy) / det;
        int kind = dhs_serve_fit_line(x, y, n, 0, &a, &b);
        CHECKF(kind == 0, "kind %d", kind);
        CHECKF(close_rel(a, aa, 1e-9) && close_rel(b, bb, 1e-9), "n %d: a %.12g vs %.12g, b %.12g vs %.12g", n, a, aa, b, bb);
    }
    /* one distinct x: the given slope, the intercept the mean rest */
    x[0] = x[1] = x[2] = 4, y[0] = 10, y[1] = 12, y[2] = 14;
    CHECK(dhs_serve_fit_line(x, y, 3, 0.5, &a, &b) == 1);
    CHECKF(close_rel(b, 0.5, 1e-12) && close_rel(a, 10, 1e-12), "a %g b %g", a, b);
    CHECK(dhs_serve_fit_line(x, y, 3, 0, &a, &b) == 1 && a == 12 && b == 0);
    /* one point, given slope too steep: intercept would be negative -> through the origin */
    x[0] = 2, y[0] = 3;
    CHECK(dhs_serve_fit_line(x, y, 1, 10, &a, &b) == 1);
    CHECKF(a == 0 && close_rel(b, 1.5, 1e-12), "a %g b %g", a, b);
    /* negative slope: flat at the mean */
    x[0] = 1, x[1] = 2, x[2] = 3, y[0] = 9, y[1] = 6, y[2] = 3;
    CHECK(dhs_serve_fit_line(x, y, 3, 0, &a, &b) == 2);
    CHECKF(close_rel(a, 6, 1e-12) && b == 0, "a %g b %g", a, b);
    /* negative intercept: through the origin */
    x[0] = 1, x[1] = 2, x[2] = 3, y[0] = 1, y[1] = 4, y[2] = 7; /* OLS: -2 + 3x */
    CHECK(dhs_serve_fit_line(x, y, 3, 0, &a, &b) == 3);
    CHECKF(a == 0 && close_rel(b, (1 + 8 + 21) / 14.0, 1e-12), "a %g b %g", a, b);
    CHECK(dhs_serve_fit_line(x, y, 0, 0, &a, &b) == -1);
}

static dhs_serve_cost truth(void)
{
    dhs_serve_cost t = dhs_serve_cost_default();
    t.base_us = 900;
    t.token_us = 40;
    t.attn_us = 0.9;
    t.attn_layer_us = 14; /* latency-bound attention: per layer, at any batch */
    t.idx_layer_us = 70;  /* latency-bound top-k: per layer, at any batch */
    t.idx_us_per_ktok = 0.05;
    t.resolver_us = 6;
    t.resolver_ns_per_entry = 0.7;
    t.pcie_gbps = 30;
    t.gather_us = 3;
    return t;
}

/* measurements of a GPU run: every phase from the model `t` */
static int make_meas(const dhs_serve_cost *t, const dhs_serve_cal_geom *g, int phases, int with_resident, dhs_serve_meas *m)
{
    static const int batches[] = {1, 2, 4, 8, 16};
    int n = 0;
    for (int md = with_resident ? 0 : 1; md < 3; md++)
        for (int bi = 0; bi < 5; bi++) {
            dhs_serve_meas *r = &m[n++];
            memset(r, 0, sizeof *r);
            r->mode = (dhs_serve_mode)md;
            r->context = 32768 * (1 + bi % 2); /* two contexts */
            r->concurrency = batches[bi];
            r->mean_batch = batches[bi] * (bi == 4 ? 0.9 : 1.0);
            r->tokens_per_round = g->spec > 1 ? 1.5 : 1; /* spec: tokens per round enter the rows copied per step */
            r->host_rows_per_token = md == 0 ? 0 : md == 1 ? 300.0 + 50 * bi : 20.0 * bi;
            double q = r->mean_batch * g->spec, L = (double)r->context + 0.5 * (double)g->tokens;
            double at = g->layers * (t->attn_layer_us + q * t->attn_us), ix = g->layers * (t->idx_layer_us + q * t->idx_us_per_ktok * L / 1000.0), rs = 0, mc = 0;
            if (md) {
                rs = g->layers * (t->resolver_us + t->resolver_ns_per_entry * q * g->topk / 1000.0);
                double rows = r->host_rows_per_token * r->mean_batch * r->tokens_per_round;
                if (rows > 0) mc = g->layers * t->gather_us + rows * g->row_bytes / (t->pcie_gbps * 1000.0);
            }
            r->step_us = t->base_us + t->token_us * q + at + ix + rs + mc;
            if (phases) {
                r->has_phases = 1;
                r->attention_us = at;
                r->indexer_us = 0.75 * ix;
                r->topk_us = 0.25 * ix;
                r->resolve_us = rs;
                r->miss_copy_us = mc;
                r->other_us = r->step_us - at - ix - rs - mc;
            }
        }
    return n;
}

static void test_gpu_file(int32_t layers, int32_t producers, int32_t spec)
{
    dhs_serve_cost t = truth();
    dhs_serve_cal_geom g = {layers, producers, layers, spec, 2048, 656, 64};
    dhs_serve_meas m[32];
    int n = make_meas(&t, &g, 1, 1, m);
    dhs_serve_cost start = dhs_serve_cost_default();
    dhs_serve_calib c;
    char err[256];
    CHECKF(dhs_serve_calibrate(m, n, &g, &start, &c, err, sizeof err) == 0, "%s", err);
    for (int i = 0; i < DHS_CAL_DRAFT_US; i++) {
        double v = *dhs_serve_cal_field(&c.cost, (dhs_serve_cal_const)i), w = *dhs_serve_cal_field(&t, (dhs_serve_cal_const)i);
        CHECKF(close_rel(v, w, 1e-8), "layers %d producers %d spec %d: %s = %.10g, truth %.10g (%s)", layers, producers, spec,
               dhs_serve_cal_name((dhs_serve_cal_const)i), v, w, c.from[i]);
        CHECKF(!strncmp(c.from[i], "measured:", 9) || !strncmp(c.from[i], "fit:", 4), "%s: %s", dhs_serve_cal_name((dhs_serve_cal_const)i),
               c.from[i]);
    }
    CHECK(c.cost.draft_us == 0 && c.cost.prefill_us_per_token == 0);
    CHECK(c.cost.layers == layers && c.cost.row_bytes == 656);
    CHECK(c.fit_resident == 1 && c.fit_points == 5);
    CHECKF(c.fit_rms_us < 1e-6 && c.fit_max_us < 1e-6, "residual %g %g", c.fit_rms_us, c.fit_max_us);
    /* the calibrated model reproduces every measured step, hierarchy included */
    for (int i = 0; i < n; i++) {
        double s = c.cost.base_us + c.cost.token_us * m[i].mean_batch * spec + dhs_serve_cal_extra_us(&c.cost, &g, &m[i]);
        CHECKF(close_rel(s, m[i].step_us, 1e-9), "record %d: %.6f vs %.6f", i, s, m[i].step_us);
    }
    if (producers < layers) CHECK(strstr(c.from[DHS_CAL_IDX_US_PER_KTOK], "per producer") != NULL);
}

/* every profiled record at one batch size: attention cannot be split into its per-layer and per-query
   parts; all of it goes per query (pooled), attn_layer_us 0, and the provenance says so */
static void test_one_batch(void)
{
    dhs_serve_cost t = truth();
    dhs_serve_cal_geom g = {61, 61, 61, 1, 2048, 656, 64};
    dhs_serve_meas m[32];
    int n = make_meas(&t, &g, 1, 1, m), k = 0;
    for (int i = 0; i < n; i++)
        if (m[i].mean_batch == 4) m[k++] = m[i]; /* batch 4 of each mode */
    CHECK(k == 3);
    dhs_serve_cost start = dhs_serve_cost_default();
    dhs_serve_calib c;
    char err[256];
    CHECKF(dhs_serve_calibrate(m, k, &g, &start, &c, err, sizeof err) == 0, "%s", err);
    double at = 0, q = 0;
    for (int i = 0; i < k; i++) at += m[i].attention_us / g.layers, q += m[i].mean_batch * g.spec;
    CHECKF(c.cost.attn_layer_us == 0 && close_rel(c.cost.attn_us, at / q, 1e-12), "attn_layer_us %g attn_us %g vs %g", c.cost.attn_layer_us,
           c.cost.attn_us, at / q);
    CHECK(c.cost.attn_us > t.attn_us); /* the per-layer part lands per query */
    CHECKF(strstr(c.from[DHS_CAL_ATTN_LAYER_US], "one batch size") && strstr(c.from[DHS_CAL_ATTN_US], "one batch size"), "%s | %s",
           c.from[DHS_CAL_ATTN_LAYER_US], c.from[DHS_CAL_ATTN_US]);
    /* one context too: the indexer the same way */
    double it = 0, ix = 0;
    for (int i = 0; i < k; i++)
        it += m[i].indexer_us + m[i].topk_us, ix += m[i].mean_batch * g.spec * g.layers * ((double)m[i].context + 0.5 * (double)g.tokens) / 1000.0;
    CHECKF(c.cost.idx_layer_us == 0 && close_rel(c.cost.idx_us_per_ktok, it / ix, 1e-12), "idx_layer_us %g idx_us_per_ktok %g vs %g",
           c.cost.idx_layer_us, c.cost.idx_us_per_ktok, it / ix);
    CHECK(c.cost.idx_us_per_ktok > t.idx_us_per_ktok);
    CHECKF(strstr(c.from[DHS_CAL_IDX_LAYER_US], "one queries x context") != NULL, "%s", c.from[DHS_CAL_IDX_LAYER_US]);
}

static void test_cpu_file(void)
{
    dhs_serve_cost t = truth();
    dhs_serve_cal_geom g = {4, 4, 4, 1, 64, 656, 6};
    dhs_serve_meas m[32];
    int n = make_meas(&t, &g, 0, 1, m);
    /* the hierarchy's records are slower: they must not enter the fit */
    for (int i = 0; i < n; i++)
        if (m[i].mode != DHS_SERVE_RESIDENT) m[i].step_us *= 3;
    dhs_serve_cost start = dhs_serve_cost_default();
    start.resolver_us = 11; /* the start values stay where nothing measures them */
    dhs_serve_calib c;
    char err[256];
    CHECKF(dhs_serve_calibrate(m, n, &g, &start, &c, err, sizeof err) == 0, "%s", err);
    CHECK(c.cost.attn_us == 0 && c.cost.idx_us_per_ktok == 0);
    CHECK(c.cost.resolver_us == 11 && c.cost.resolver_ns_per_entry == start.resolver_ns_per_entry && c.cost.pcie_gbps == start.pcie_gbps &&
          c.cost.gather_us == start.gather_us);
    CHECK(!strncmp(c.from[DHS_CAL_PCIE_GBPS], "default", 7) && !strncmp(c.from[DHS_CAL_RESOLVER_US], "default", 7));
    /* the resident steps: base + token x q + (attention and indexer, which vary with the context: the residual) */
    double xs[8], ys[8], a, b;
    int nf = 0;
    for (int i = 0; i < n; i++)
        if (m[i].mode == DHS_SERVE_RESIDENT) xs[nf] = m[i].mean_batch, ys[nf] = m[i].step_us, nf++;
    CHECK(dhs_serve_fit_line(xs, ys, nf, 0, &a, &b) == 0);
    CHECKF(close_rel(c.cost.base_us, a, 1e-12) && close_rel(c.cost.token_us, b, 1e-12), "base %g token %g vs %g %g", c.cost.base_us,
           c.cost.token_us, a, b);
    double ss = 0, mx = 0;
    for (int i = 0; i < nf; i++) {
        double r = a + b * xs[i] - ys[i];
        ss += r * r;
        if (fabs(r) > mx) mx = fabs(r);
    }
    CHECK(c.fit_points == nf && c.fit_resident == 1);
    CHECKF(close_rel(c.fit_rms_us, sqrt(ss / nf), 1e-9) && close_rel(c.fit_max_us, mx, 1e-9) && mx > 0, "rms %g max %g", c.fit_rms_us,
           c.fit_max_us);
}

static void test_no_resident(void)
{
    dhs_serve_cost t = truth();
    dhs_serve_cal_geom g = {61, 61, 61, 1, 2048, 656, 64};
    dhs_serve_meas m[32];
    int n = make_meas(&t, &g, 1, 0, m);
    dhs_serve_cost start = dhs_serve_cost_default();
    dhs_serve_calib c;
    char err[256];
    CHECKF(dhs_serve_calibrate(m, n, &g, &start, &c, err, sizeof err) == 0, "%s", err);
    CHECK(c.fit_resident == 0 && c.fit_points == 10);
    CHECKF(close_rel(c.cost.base_us, t.base_us, 1e-8) && close_rel(c.cost.token_us, t.token_us, 1e-8), "base %g token %g", c.cost.base_us,
           c.cost.token_us);
}

static void test_accept_and_misses(void)
{
    dhs_serve_cost t = truth();
    dhs_serve_cal_geom g = {61, 61, 61, 3, 2048, 656, 64};
    dhs_serve_meas m[32];
    int n = make_meas(&t, &g, 1, 1, m);
    double p = 0.6;
    for (int i = 0; i < n; i++) {
        m[i].tokens_per_round = 1 + p + p * p;
        m[i].host_rows_per_token = 0; /* no misses */
        m[i].miss_copy_us = 0;
    }
    dhs_serve_cost start = dhs_serve_cost_default();
    dhs_serve_calib c;
    char err[256];
    CHECKF(dhs_serve_calibrate(m, n, &g, &start, &c, err, sizeof err) == 0, "%s", err);
    CHECKF(fabs(c.accept_p - p) < 1e-9, "accept_p %.12f", c.accept_p);
    CHECK(c.cost.pcie_gbps == start.pcie_gbps && c.cost.gather_us == start.gather_us);
    CHECKF(strstr(c.from[DHS_CAL_PCIE_GBPS], "no host rows") != NULL, "%s", c.from[DHS_CAL_PCIE_GBPS]);
    /* spec 1: no speculation, p not fitted */
    g.spec = 1;
    n = make_meas(&t, &g, 1, 1, m);
    CHECK(dhs_serve_calibrate(m, n, &g, &start, &c, err, sizeof err) == 0 && c.accept_p == 1);
}

static void test_bad_input(void)
{
    dhs_serve_cost t = truth();
    dhs_serve_cal_geom g = {61, 61, 61, 1, 2048, 656, 64};
    dhs_serve_meas m[32];
    int n = make_meas(&t, &g, 1, 1, m);
    dhs_serve_cost start = dhs_serve_cost_default();
    dhs_serve_calib c, before;
    memset(&c, 0x5a, sizeof c);
    before = c;
    char err[256] = "";
    CHECK(dhs_serve_calibrate(m, 0, &g, &start, &c, err, sizeof err) == -1 && err[0]);
    m[3].step_us = NAN;
    err[0] = 0;
    CHECK(dhs_serve_calibrate(m, n, &g, &start, &c, err, sizeof err) == -1 && strstr(err, "measurement 3"));
    m[3].step_us = 1000;
    m[2].attention_us = -1;
    CHECK(dhs_serve_calibrate(m, n, &g, &start, &c, err, sizeof err) == -1);
    m[2].attention_us = 1;
    g.producers = 62;
    CHECK(dhs_serve_calibrate(m, n, &g, &start, &c, err, sizeof err) == -1 && strstr(err, "geometry"));
    CHECK(memcmp(&c, &before, sizeof c) == 0);
    g.producers = 61;
    CHECK(dhs_serve_calibrate(m, n, &g, &start, &c, err, sizeof err) == 0);
}

static void test_locality(void)
{
    dhs_locality d = dhs_locality_default(), l = dhs_serve_locality_for_k(2048), s = dhs_serve_locality_for_k(64);
    CHECK(memcmp(&d, &l, sizeof d) == 0);
    CHECK(s.window == d.window / 32 && s.clusters == d.clusters / 32 && s.cluster_radius == d.cluster_radius / 32 &&
          s.window_full == d.window_full / 32);
    s = dhs_serve_locality_for_k(1);
    CHECK(s.window >= 1 && s.window_full >= 1 && s.clusters >= 1 && s.cluster_radius >= 1);
    CHECK(s.sinks == d.sinks && s.tail_min == d.tail_min);
}

int main(void)
{
    uint64_t seed = th_seed("test_servecal");
    test_fit_line(seed);
    test_gpu_file(61, 61, 1);
    test_gpu_file(78, 21, 1);
    test_gpu_file(61, 61, 2);
    test_one_batch();
    test_cpu_file();
    test_no_resident();
    test_accept_and_misses();
    test_bad_input();
    test_locality();
    return th_summary();
}
