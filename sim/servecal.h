/*
 * servecal.h - calibration of the serving simulator's cost model
 * (dhs_serve_cost, servesim.h) from measured decode steps: what
 * `dhs serve-sim --calibrate FILE` does with a `dhs bench serve --json` file
 * (rules: docs/SIM.md, "Calibration").
 *
 * The caller turns each record that ran into a dhs_serve_meas (mode, context,
 * sessions per round, the mean step, host rows per token and, from a GPU run,
 * the per-step phase times) and passes the file's geometry; the calibration
 * fills every constant with its value and where it came from ("measured: ...",
 * "fit: ..." or "default: ..."). Nothing here prints or reads files.
 */
#ifndef DHS_SIM_SERVECAL_H
#define DHS_SIM_SERVECAL_H

#include <stddef.h>
#include <stdint.h>

#include "sim/servesim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* one measured configuration (a record of `dhs bench serve` that ran) */
typedef struct dhs_serve_meas {
    dhs_serve_mode mode;
    int64_t context;             /* prompt positions */
    int32_t concurrency;         /* request slots C */
    double mean_batch;           /* sessions per decode round (mean) */
    double tokens_per_round;     /* tokens one session emits per round (mean; 1 without speculation) */
    double step_us;              /* mean decode round, us */
    double host_rows_per_token;  /* rows copied from host per decode token, all payload sources */
    int has_phases;              /* the per-step breakdown below was measured (GPU run) */
    double other_us, indexer_us, topk_us, resolve_us, miss_copy_us, attention_us; /* per profiled step */
} dhs_serve_meas;

/* what the measurements ran on */
typedef struct dhs_serve_cal_geom {
    int32_t layers;              /* attention layers */
    int32_t producers;           /* layers computing their own index scores (<= layers) */
    int32_t sources;             /* payload sources (layers with their own KV rows) */
    int32_t spec;                /* queries per session and round */
    int32_t topk;                /* k */
    uint32_t row_bytes;          /* payload row */
    int64_t tokens;              /* tokens generated per session */
} dhs_serve_cal_geom;

/* the constants a calibration sets, in this order */
typedef enum {
    DHS_CAL_BASE_US = 0,
    DHS_CAL_TOKEN_US,
    DHS_CAL_ATTN_US,
    DHS_CAL_ATTN_LAYER_US,
    DHS_CAL_IDX_US_PER_KTOK,
    DHS_CAL_IDX_LAYER_US,
    DHS_CAL_RESOLVER_US,
    DHS_CAL_RESOLVER_NS,
    DHS_CAL_PCIE_GBPS,
    DHS_CAL_GATHER_US,
    DHS_CAL_DRAFT_US,
    DHS_CAL_PREFILL_US,
    DHS_CAL_N_
} dhs_serve_cal_const;

const char *dhs_serve_cal_name(dhs_serve_cal_const i);   /* "base_us", ...: the cost_model keys of serve-sim --json */
double *dhs_serve_cal_field(dhs_serve_cost *c, dhs_serve_cal_const i);

typedef struct dhs_serve_calib {
    dhs_serve_cost cost;         /* the calibrated model (layers and row_bytes from the geometry; idx_bytes as passed in) */
    char from[DHS_CAL_N_][512];  /* per constant: "measured: ...", "fit: ..." or "default: ..." */
    double accept_p;             /* speculation: each proposal's acceptance, from tokens per round (spec > 1) */
    char accept_from[240];
    /* the base_us/token_us fit: step time less the modeled per-query parts against queries per step */
    int32_t fit_points;
    int fit_resident;            /* 1: over the resident records; 0: over the hierarchy's (no resident record) */
    double fit_rms_us, fit_max_us; /* residual: root mean square and largest absolute */
} dhs_serve_calib;

/* Least squares y = a + b x with a, b >= 0.
   Returns 0: ordinary least squares; 1: fewer than two distinct x (b = b_one
   (>= 0), a = mean(y - b x), or a = 0 and b through the origin when that is
   negative); 2: the slope came out negative (b = 0, a = mean(y)); 3: the
   intercept came out negative (a = 0, b through the origin); -1: n < 1. */
int dhs_serve_fit_line(const double *x, const double *y, int n, double b_one, double *a, double *b);

/* The modeled per-query and hierarchy time of one measured step under cost c
   (everything but base_us + token_us x queries): what the base/token fit
   subtracts. */
double dhs_serve_cal_extra_us(const dhs_serve_cost *c, const dhs_serve_cal_geom *g, const dhs_serve_meas *m);

/* Calibrates from n measurements. `start` gives the constants left at their
   defaults (and idx_bytes); layers and row_bytes come from g. 0, or -1 with
   err (no measurement, a bad geometry, or a measurement with a non-finite or
   negative figure); *out is written only on success. */
int dhs_serve_calibrate(const dhs_serve_meas *m, int n, const dhs_serve_cal_geom *g, const dhs_serve_cost *start,
                        dhs_serve_calib *out, char *err, size_t err_len);

/* The selection locality for a selection length k: dhs_locality_default()'s
   window, clusters and radius (sized for k = 2048) scaled by k / 2048 (at
   least 1 each; unchanged for k >= 2048). */
dhs_locality dhs_serve_locality_for_k(int32_t k);

#ifdef __cplusplus
}
#endif
#endif
