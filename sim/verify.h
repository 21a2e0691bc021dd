/* verify.h - randomised exactness harness: drives a workload through the
 * public API only and checks every returned location against the original
 * row bytes (I2) and every invariant after every call. Used by `dhs verify`
 * and by the tests. */
#ifndef DHS_SIM_VERIFY_H
#define DHS_SIM_VERIFY_H

#include <stdint.h>
#include <stdio.h>

#include "dhs.h"

typedef enum { VERIFY_LAYOUT_OWN = 0, VERIFY_LAYOUT_GLM = 1, VERIFY_LAYOUT_V41 = 2 } verify_layout;

typedef struct verify_opts {
    int32_t requests;      /* concurrent request slots */
    int32_t steps;         /* rounds */
    uint64_t seed;
    int32_t k;             /* selection length */
    int32_t hot_rows;      /* B */
    int32_t page_rows;
    int32_t row_bytes;
    int32_t max_prefix;    /* imported prefix up to this many positions */
    int32_t spec;          /* K_max (1 = no speculation) */
    int32_t compress;      /* m of the compressed source (1 = none) */
    verify_layout layout;
    dhs_policy policy;
    dhs_reclaim_order reclaim_order;
    int pressure;          /* 0 low (history fits), 1 high (forces waits and reclaim) */
    int32_t async_delay;
    int random_order;
    double faults;         /* probability of an injected fault before each fallible call */
    int check_every;       /* run dhs_check_invariants after every call (1) */
    int progress;          /* progress on stderr: 0 none, 1 one line rewritten (terminal), 2 a line every 5 s */
    int use_cuda;          /* 1: the CUDA backend (device 0); async_delay/random_order are CPU-only */
    int corrupt_at_step;   /* >0: flip one byte of a returned location at this step (proves the checks bite) */
    dhs_resolver resolver; /* host | device (the device resolver: CLOCK-epoch policy, `policy` ignored) */
    int round_end;         /* 0: dhs_round_end; 1: dhs_round_end_early every round; 2: either, at random */
} verify_opts;

typedef struct verify_result {
    uint64_t violations, lost_rows, checks, faults_injected, wrong_bytes, wrong_status, early_ends;
    dhs_stats st;
    char first_violation[256];
} verify_result;

verify_opts verify_opts_default(void);
/* Returns 0 on a clean run, 1 when a violation was found, -1 on a setup error. */
int verify_run(const verify_opts *o, verify_result *res);
void verify_print_json(FILE *f, const verify_opts *o, const verify_result *r);

#endif
