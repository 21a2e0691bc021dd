/* test_gpu_model.c - the reference model's target pass on the GPU
 * (model/refmodel.cu) against the CPU model.
 *
 * - engine level: a CPU resident engine and a GPU resident engine serve the
 *   same sessions (same prefill, same schedule); every round's logits are
 *   compared: bit for bit for the real geometries (exp_portable), within a
 *   relative 1e-4 of the largest logit for tiny (CUDA's expf; compared until
 *   the first round whose tokens differ, which then ends that comparison);
 *   the emitted tokens must be equal for the real geometries;
 * - run level: `dhs run --backend cuda` (GPU model, hierarchy on the GPU)
 *   against the GPU model with resident storage: identical under reclaim and
 *   speculation; its tokens equal the CPU run's on the same seed.
 * - device step (docs/MODEL.md "Device step"): the same run with the step
 *   issued without host round trips (dhs_tail_locations, dhs_resolve_device)
 *   and captured as a CUDA graph: identical to resident under reclaim, and
 *   every session's tokens equal the host step's.
 * - top-k implementation (docs/MODEL.md "Top-k"): the library's fused top-k
 *   (dhs_cuda_topk_fused_n) instead of the model's k_topk gives byte-identical
 *   logits and tokens, per step (host, device, graph), engine level and
 *   through dhs_ref_run (same tokens digest).
 * - projection shapes (model/prep_kern.cuh: 8 threads per dot, outputs in
 *   tiles of 64 or 128): d_model, d_v, MLP, vocabulary and indexer sizes that
 *   are not multiples of 8 (the dots' serial tails) nor of a tile (partly
 *   filled tiles, an indexer tile holding queries and head weights), 2 heads
 *   (a RoPE tile per head), exp_portable: logits bit for bit, tokens equal.
 * - attention edges through the per-call API (layer 0): a query with no valid
 *   location (nv = 0), an empty slot (pos -1) in the batch, -1 gaps and
 *   a lone last entry: rows and logits bit for bit against the CPU's
 *   dhs_ref_latent / dhs_ref_attend_mlp / dhs_ref_logits, for glm-5.3 and
 *   the odd shapes.
 * Without a CUDA device (or built without CUDA) it prints SKIP and exits 77
 * (CTest SKIP_RETURN_CODE). Env: DHS_TEST_SEED.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpu.h"
#include "model/model.h"
#include "model/run.h"
#include "sim/tracegen.h"

#include "test_help.h"

/* CPU and GPU resident engines, rounds of K queries, logits compared */
static void test_engines(const char *name, dhs_ref_cfg mc, int64_t context, int32_t rounds, int bitwise)
{
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&mc, &m), DHS_OK);
    if (!m) return;
    const int32_t S = 3, KM = 3, V = mc.vocab;
    dhs_ref_engine_cfg ec;
    memset(&ec, 0, sizeof ec);
    ec.max_sessions = S;
    ec.max_slots = S;
    ec.k_max = KM;
    ec.max_positions = context + (int64_t)rounds * KM + 8;
    ec.seed = mc.seed;
    ec.page_rows = 64;
    dhs_ref_engine *ec_cpu = NULL, *ec_gpu = NULL;
    CHECK_ST(dhs_ref_engine_create(m, &ec, &ec_cpu), DHS_OK);
    ec.gpu = 1;
    dhs_status st = dhs_ref_engine_create(m, &ec, &ec_gpu);
    CHECKF(st == DHS_OK, "%s: GPU engine: %s", name, dhs_status_str(st));
    float *L1 = calloc((size_t)S * KM * (size_t)V, sizeof(float)), *L2 = calloc((size_t)S * KM * (size_t)V, sizeof(float));
    int32_t A1[3], A2[3], E1[9], E2[9], ids[3] = {0, 1, 2}, K[3];
    if (!ec_cpu || !ec_gpu || !L1 || !L2) goto done;
    for (int32_t i = 0; i < S; i++) {
        int64_t n = context - 7 * i;
        int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
        dhs_ref_prefill p;
        dhs_ref_prompt(mc.seed, i, V, n, tok);
        st = mc.key_fp8 ? dhs_ref_prefill_synthetic(m, tok, n, 99 + (uint64_t)i, &p) : dhs_ref_prefill_run(m, tok, n, &p);
        free(tok);
        CHECK_ST(st, DHS_OK);
        if (st != DHS_OK) goto done;
        CHECK_ST(dhs_ref_engine_start(ec_cpu, i, &p, (dhs_req){0, 0}), DHS_OK);
        st = dhs_ref_engine_start(ec_gpu, i, &p, (dhs_req){0, 0});
        CHECKF(st == DHS_OK, "%s: GPU start: %s", name, dhs_ref_engine_error(ec_gpu));
        dhs_ref_prefill_free(&p);
        if (st != DHS_OK) goto done;
    }
    uint64_t rows = 0, differ = 0;
    double worst = 0.0;
    int diverged = 0;
    for (int32_t r = 0; r < rounds && !diverged; r++) {
        for (int32_t i = 0; i < S; i++) K[i] = 1 + (r + i) % KM;
        dhs_ref_round_out o1 = {L1, A1, E1, NULL}, o2 = {L2, A2, E2, NULL};
        CHECK_ST(dhs_ref_engine_round(ec_cpu, S, ids, K, &o1), DHS_OK);
        st = dhs_ref_engine_round(ec_gpu, S, ids, K, &o2);
        CHECKF(st == DHS_OK, "%s round %d: %s", name, r, dhs_ref_engine_error(ec_gpu));
        if (st != DHS_OK) goto done;
        for (int32_t i = 0; i < S; i++) {
            for (int32_t j = 0; j < K[i]; j++) {
                const float *a = L1 + ((size_t)i * KM + (size_t)j) * (size_t)V, *b = L2 + ((size_t)i * KM + (size_t)j) * (size_t)V;
                float amax = 0.0f, dmax = 0.0f;
                for (int32_t v = 0; v < V; v++) {
                    if (fabsf(a[v]) > amax) amax = fabsf(a[v]);
                    if (fabsf(a[v] - b[v]) > dmax) dmax = fabsf(a[v] - b[v]);
                }
                double rel = amax > 0 ? (double)dmax / (double)amax : (double)dmax;
                if (rel > worst) worst = rel;
                rows++;
                differ += memcmp(a, b, sizeof(float) * (size_t)V) != 0;
            }
            int same = A1[i] == A2[i] && !memcmp(E1 + i * KM, E2 + i * KM, sizeof(int32_t) * (size_t)(A1[i] + 1));
            if (bitwise) CHECKF(same, "%s round %d session %d: GPU tokens differ from the CPU's", name, r, i);
            else if (!same && !diverged) {
                diverged = 1;
                printf("  %s: tokens differ from round %d on (logits within tolerance, expf differs)\n", name, r);
            }
        }
    }
    if (bitwise) CHECKF(differ == 0, "%s: %" PRIu64 " of %" PRIu64 " logit rows differ from the CPU's (worst rel %.3g)", name, differ, rows, worst);
    CHECKF(worst <= 1e-4, "%s: GPU logits off by %.3g of the largest", name, worst);
    printf("  %-26s %" PRIu64 " logit rows: %" PRIu64 " differ from the CPU bit-wise, worst |diff|/max|logit| %.2e%s\n",
           name, rows, differ, worst, diverged ? "" : "; tokens equal");
done:
    free(L1);
    free(L2);
    dhs_ref_engine_destroy(ec_cpu);
    dhs_ref_engine_destroy(ec_gpu);
    dhs_ref_model_destroy(m);
}

/* spec 1: the GPU model scores each query alone (k_scores_fp8r); spec > 1 groups a session's queries */
static void test_runs(dhs_ref_geometry g, int32_t layers, uint64_t seed, int32_t spec)
{
    dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
    c.model = dhs_ref_cfg_geometry(g);
    c.model.n_layers = layers;
    c.model.seed = seed;
    c.geometry = dhs_ref_geometry_str(g);
    c.synthetic = 1;
    c.sessions = 4;
    c.context = 3000;
    c.tokens = 8;
    c.spec = spec;
    c.seed = seed;
    c.slots = 2;
    c.history = 0.5;
    c.arrival = 1;
    dhs_ref_run_result cpu, gpu;
    int r1 = dhs_ref_run(&c, &cpu);
    c.cuda = 1;
    c.gpu_model = 1;
    c.check = 1;
    int r2 = dhs_ref_run(&c, &gpu);
    CHECKF(r1 == 0 && r2 == 0, "%s: %s / %s", c.geometry, cpu.errmsg, gpu.errmsg);
    if (r1 == 0 && r2 == 0) {
        CHECKF(gpu.gpu_model == 1, "%s: the model did not run on the GPU", c.geometry);
        CHECKF(gpu.identical && cpu.identical, "%s: GPU hier vs resident identical %d (%" PRIu64 " logit rows differ), CPU %d",
               c.geometry, gpu.identical, gpu.logit_mismatches, cpu.identical);
        CHECKF(gpu.st.reclaims > 0, "%s: no reclaim on the GPU", c.geometry);
        CHECKF(gpu.invariant_violations == 0, "%s: invariants", c.geometry);
        for (int32_t i = 0; i < c.sessions; i++)
            CHECKF(cpu.tokens_of[i] == gpu.tokens_of[i], "%s: session %d: GPU tokens differ from the CPU's", c.geometry, i);
        printf("  %-14s (%d layers, spec %d) GPU run identical to resident, %" PRIu64 " reclaims, tokens equal to the CPU "
               "run; decode %.2f s GPU hier vs %.2f s CPU hier\n",
               c.geometry, layers, spec, gpu.st.reclaims, gpu.t_hier, cpu.t_hier);
    }
    dhs_ref_run_result_free(&cpu);
    dhs_ref_run_result_free(&gpu);
}

/* the locality device (docs/LOCALITY.md): the synthetic indexer queries give the same tokens on the
   CPU model and on the GPU graph step (whose locality probe copies selections back inside the graph),
   the GPU run is identical to resident, and its measured overlap of adjacent positions is the target */
static void test_locality_runs(uint64_t seed)
{
    static dhs_locality_model lm;
    char err[200];
    CHECK(dhs_locality_model_load("dsv32-swe", &lm, err, sizeof err) == 0);
    dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
    c.model = dhs_ref_cfg_geometry(DHS_REF_GEOM_DSV32);
    c.model.n_layers = 24;
    c.model.topk = 256; /* k/V = 0.06: the deep layers' 0.44 is well above random */
    c.model.seed = seed;
    c.geometry = "deepseek-v3.2 (24 layers, k 256)";
    c.synthetic = 1;
    c.sessions = 3;
    c.context = 4096;
    c.tokens = 24;
    c.spec = 2;
    c.seed = seed;
    c.slots = 2;
    c.history = 0.5;
    c.arrival = 1;
    c.locality = &lm;
    dhs_ref_run_result cpu, gpu;
    int r1 = dhs_ref_run(&c, &cpu);
    c.cuda = 1;
    c.gpu_model = 1;
    c.step = DHS_REF_STEP_GRAPH;
    int r2 = dhs_ref_run(&c, &gpu);
    CHECKF(r1 == 0 && r2 == 0, "locality: %s / %s", cpu.errmsg, gpu.errmsg);
    if (r1 == 0 && r2 == 0) {
        CHECKF(gpu.identical && cpu.identical, "locality: GPU identical %d (%" PRIu64 " logit rows differ), CPU %d", gpu.identical,
               gpu.logit_mismatches, cpu.identical);
        for (int32_t i = 0; i < c.sessions; i++)
            CHECKF(cpu.tokens_of[i] == gpu.tokens_of[i], "locality: session %d: GPU tokens differ from the CPU's", i);
        int checked = 0;
        for (int32_t l = 0; l < c.model.n_layers; l++) {
            CHECKF(gpu.loc_calib[l] == cpu.loc_calib[l], "locality layer %d: calibration differs", l);
            if (fabs(gpu.loc_calib[l] - gpu.loc_target[l]) > 0.01) continue; /* below the floor */
            CHECKF(gpu.loc_draft_pairs[l] >= 10 && fabs(gpu.loc_draft[l] - gpu.loc_target[l]) <= 0.05,
                   "locality layer %d: GPU adjacent overlap %.4f (%" PRIu64 " pairs), target %.4f", l, gpu.loc_draft[l],
                   gpu.loc_draft_pairs[l], gpu.loc_target[l]);
            checked++;
        }
        CHECKF(checked >= 10, "locality: only %d layers reached their target", checked);
        printf("  locality dsv32-swe: GPU graph step identical to resident, tokens equal to the CPU's; layer 20 target %.4f, "
               "GPU draft %.4f, alpha %.4f, LRU hit %.4f (%d layers checked)\n",
               gpu.loc_target[20], gpu.loc_draft[20], gpu.loc_alpha[20], gpu.loc_hit[20], checked);
    }
    dhs_ref_run_result_free(&cpu);
    dhs_ref_run_result_free(&gpu);
}

/* the runs of test_steps and test_fused_runs: 4 sessions of ~3000 positions at
   a real geometry (synthetic history), spec 3, 2 slots, half a session's history
   on the device (reclaims), the model and the hierarchy on the GPU */
static dhs_ref_run_cfg steps_cfg(dhs_ref_geometry g, int32_t layers, uint64_t seed, int32_t tokens)
{
    dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
    c.model = dhs_ref_cfg_geometry(g);
    c.model.n_layers = layers;
    c.model.seed = seed;
    c.geometry = dhs_ref_geometry_str(g);
    c.synthetic = 1;
    c.sessions = 4;
    c.context = 3000;
    c.tokens = tokens;
    c.spec = 3;
    c.seed = seed;
    c.slots = 2;
    c.history = 0.5;
    c.arrival = 1;
    c.cuda = 1;
    c.gpu_model = 1;
    return c;
}

/* the host step, the device step and its CUDA graph: each identical to
   resident, and the same tokens in all three */
static void test_steps(dhs_ref_geometry g, int32_t layers, uint64_t seed)
{
    dhs_ref_run_cfg c = steps_cfg(g, layers, seed, 16);
    c.check = 1;
    dhs_ref_run_result R[3];
    int rc[3];
    for (int k = 0; k < 3; k++) {
        c.step = k; /* DHS_REF_STEP_HOST, _DEVICE, _GRAPH */
        rc[k] = dhs_ref_run(&c, &R[k]);
        CHECKF(rc[k] == 0, "%s step %s: %s", c.geometry, dhs_ref_step_str(k), R[k].errmsg);
        if (rc[k]) continue;
        CHECKF(R[k].identical, "%s step %s: not identical to resident (%" PRIu64 " logit rows differ)", c.geometry,
               dhs_ref_step_str(k), R[k].logit_mismatches);
        CHECKF(R[k].st.reclaims > 0, "%s step %s: no reclaim", c.geometry, dhs_ref_step_str(k));
        CHECKF(R[k].st.census_host > 0, "%s step %s: no row recovered from host", c.geometry, dhs_ref_step_str(k));
        CHECKF(R[k].invariant_violations == 0, "%s step %s: invariants", c.geometry, dhs_ref_step_str(k));
    }
    if (rc[0] == 0 && rc[1] == 0 && rc[2] == 0) {
        for (int k = 1; k < 3; k++) {
            for (int32_t i = 0; i < c.sessions; i++)
                CHECKF(R[0].tokens_of[i] == R[k].tokens_of[i], "%s: session %d: step %s tokens differ from the host step's",
                       c.geometry, i, dhs_ref_step_str(k));
            CHECKF(R[k].step_hier.rounds == R[k].rounds && R[k].step_res.rounds == R[k].rounds,
                   "%s step %s: %" PRIu64 " / %" PRIu64 " device-step rounds of %" PRIu64, c.geometry, dhs_ref_step_str(k),
                   R[k].step_hier.rounds, R[k].step_res.rounds, R[k].rounds);
        }
        CHECKF(R[1].step_hier.captures == 0, "%s: the eager device step captured", c.geometry);
        CHECKF(R[2].step_hier.captures >= 1 && R[2].step_hier.captures < R[2].step_hier.rounds,
               "%s graph: %" PRIu64 " captures in %" PRIu64 " rounds (no replay)", c.geometry, R[2].step_hier.captures,
               R[2].step_hier.rounds);
        const dhs_ref_step_times *d = &R[1].step_hier, *gr = &R[2].step_hier;
        double nd = (double)(d->rounds - d->captures), ng = (double)(gr->rounds - gr->captures);
        printf("  %-14s (%d layers) host / device / graph steps identical to resident, same tokens; decode %.3f / %.3f / "
               "%.3f s; host us per round (control, launch, wait): device %.0f %.0f %.0f, graph %.0f %.0f %.0f "
               "(%" PRIu64 " captures)\n",
               c.geometry, layers, R[0].t_hier, R[1].t_hier, R[2].t_hier, 1e6 * d->control_s / nd, 1e6 * d->launch_s / nd,
               1e6 * d->wait_s / nd, ng > 0 ? 1e6 * gr->control_s / ng : 0.0, ng > 0 ? 1e6 * gr->launch_s / ng : 0.0,
               ng > 0 ? 1e6 * gr->wait_s / ng : 0.0, gr->captures);
    }
    for (int k = 0; k < 3; k++) dhs_ref_run_result_free(&R[k]);
}

/* topk_impl fused vs model (docs/MODEL.md "Top-k"): two GPU resident engines,
   one selecting with k_topk, one with the library's dhs_cuda_topk_fused_n,
   serve the same sessions, per step (host, device, graph); every round's
   logits and tokens must be byte-identical. Rounds use K_i < k_max for some
   sessions (invalid query slots, pos < 0); a context below k exercises the
   n < k padding, one above it the radix path. */
static void test_fused_engines(const char *name, dhs_ref_cfg mc, int64_t context, int32_t rounds)
{
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&mc, &m), DHS_OK);
    if (!m) return;
    const int32_t S = 3, KM = 3, V = mc.vocab;
    for (int step = DHS_REF_STEP_HOST; step <= DHS_REF_STEP_GRAPH; step++) {
        dhs_ref_engine_cfg ec;
        memset(&ec, 0, sizeof ec);
        ec.max_sessions = S;
        ec.max_slots = S;
        ec.k_max = KM;
        ec.max_positions = context + (int64_t)rounds * KM + 8;
        ec.seed = mc.seed;
        ec.page_rows = 64;
        ec.gpu = 1;
        ec.step = step;
        dhs_ref_engine *e[2] = {NULL, NULL};
        for (int f = 0; f < 2; f++) {
            ec.topk_impl = f ? DHS_REF_TOPK_FUSED : DHS_REF_TOPK_MODEL;
            dhs_status st = dhs_ref_engine_create(m, &ec, &e[f]);
            CHECKF(st == DHS_OK, "%s step %s topk %s: engine: %s", name, dhs_ref_step_str(step), dhs_ref_topk_str(f),
                   dhs_status_str(st));
        }
        float *L[2] = {calloc((size_t)S * KM * (size_t)V, sizeof(float)), calloc((size_t)S * KM * (size_t)V, sizeof(float))};
        int32_t A[2][3], E[2][9], ids[3] = {0, 1, 2}, K[3];
        uint64_t rows = 0, differ = 0, tok_differ = 0;
        if (!e[0] || !e[1] || !L[0] || !L[1]) goto next;
        for (int32_t i = 0; i < S; i++) {
            int64_t n = context - 7 * i;
            int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
            dhs_ref_prefill p;
            dhs_ref_prompt(mc.seed, i, V, n, tok);
            dhs_status st = mc.key_fp8 ? dhs_ref_prefill_synthetic(m, tok, n, 99 + (uint64_t)i, &p) : dhs_ref_prefill_run(m, tok, n, &p);
            free(tok);
            CHECK_ST(st, DHS_OK);
            if (st != DHS_OK) goto next;
            for (int f = 0; f < 2; f++) {
                dhs_status s2 = dhs_ref_engine_start(e[f], i, &p, (dhs_req){0, 0});
                CHECKF(s2 == DHS_OK, "%s: start: %s", name, dhs_ref_engine_error(e[f]));
            }
            dhs_ref_prefill_free(&p);
        }
        for (int32_t r = 0; r < rounds; r++) {
            for (int32_t i = 0; i < S; i++) K[i] = 1 + (r + i) % KM;
            for (int f = 0; f < 2; f++) {
                dhs_ref_round_out o = {L[f], A[f], E[f], NULL};
                dhs_status st = dhs_ref_engine_round(e[f], S, ids, K, &o);
                CHECKF(st == DHS_OK, "%s step %s topk %s round %d: %s", name, dhs_ref_step_str(step), dhs_ref_topk_str(f), r,
                       dhs_ref_engine_error(e[f]));
                if (st != DHS_OK) goto next;
            }
            for (int32_t i = 0; i < S; i++) {
                for (int32_t j = 0; j < K[i]; j++) {
                    size_t off = ((size_t)i * KM + (size_t)j) * (size_t)V;
                    rows++;
                    differ += memcmp(L[0] + off, L[1] + off, sizeof(float) * (size_t)V) != 0;
                }
                tok_differ += A[0][i] != A[1][i] || memcmp(E[0] + i * KM, E[1] + i * KM, sizeof(int32_t) * (size_t)(A[0][i] + 1));
            }
        }
        CHECKF(differ == 0 && tok_differ == 0, "%s step %s: fused vs model top-k: %" PRIu64 " of %" PRIu64
               " logit rows and %" PRIu64 " token blocks differ", name, dhs_ref_step_str(step), differ, rows, tok_differ);
        CHECKF(rows > 0, "%s: nothing compared", name);
        printf("  %-26s step %-6s fused vs model top-k: %" PRIu64 " logit rows, %" PRIu64 " differ\n", name,
               dhs_ref_step_str(step), rows, differ);
    next:
        free(L[0]);
        free(L[1]);
        dhs_ref_engine_destroy(e[0]);
        dhs_ref_engine_destroy(e[1]);
    }
    dhs_ref_model_destroy(m);
}

/* the same through dhs_ref_run (what `dhs run --backend cuda --topk-impl fused`
   does): hierarchical vs resident identical, and every session's tokens equal
   to the model top-k's host-step run, for the host, device and graph steps */
static void test_fused_runs(dhs_ref_geometry g, int32_t layers, uint64_t seed)
{
    dhs_ref_run_cfg c = steps_cfg(g, layers, seed, 12);
    dhs_ref_run_result base, R;
    int rb = dhs_ref_run(&c, &base);
    CHECKF(rb == 0 && base.identical, "%s model top-k: %s", c.geometry, base.errmsg);
    c.topk_impl = DHS_REF_TOPK_FUSED;
    for (int k = 0; k < 3 && rb == 0; k++) {
        c.step = k;
        int r = dhs_ref_run(&c, &R);
        CHECKF(r == 0, "%s fused step %s: %s", c.geometry, dhs_ref_step_str(k), R.errmsg);
        if (r == 0) {
            CHECKF(R.identical, "%s fused step %s: not identical to resident", c.geometry, dhs_ref_step_str(k));
            CHECKF(R.topk_impl == DHS_REF_TOPK_FUSED, "%s: run did not record the fused top-k", c.geometry);
            CHECKF(R.tokens_digest == base.tokens_digest, "%s fused step %s: tokens digest %016" PRIx64 ", model top-k %016" PRIx64,
                   c.geometry, dhs_ref_step_str(k), R.tokens_digest, base.tokens_digest);
            printf("  %-14s (%d layers) fused top-k, step %-6s: identical to resident, tokens digest equal to the model "
                   "top-k's (%016" PRIx64 ")\n", c.geometry, layers, dhs_ref_step_str(k), R.tokens_digest);
        }
        dhs_ref_run_result_free(&R);
    }
    dhs_ref_run_result_free(&base);
}

/* The attention prep / output kernels' edge cases through the per-call API (dhs_ref_gpu_begin, _rows,
   _attend, _logits) on layer 0, against the CPU's dhs_ref_latent + dhs_ref_row_encode (the rows) and
   dhs_ref_attend_mlp + dhs_ref_logits, bit for bit: a query whose locations are all -1 (nv = 0: the
   residual and the MLP only), an empty slot (pos -1) beside them, a query with -1 between valid
   locations (some repeated), and one whose only valid location is the last entry. */
static void test_attend_edges(const char *name, dhs_ref_cfg mc, uint64_t seed)
{
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&mc, &m), DHS_OK);
    if (!m) return;
    enum { NQ = 4, NR = 40, ROW = DHS_REF_ROW_BYTES };
    const int32_t K = mc.topk, V = mc.vocab, D = mc.idx_dim;
    const int64_t cap = 64; /* key store positions */
    const int32_t tokens[NQ] = {3, 5, 7, 11};
    const int64_t pos[NQ] = {10, -1, 20, 5};
    dhs_ref_gpu_desc *desc = calloc(1, sizeof *desc);
    uint8_t *rows = malloc((size_t)NR * ROW), *rows_gpu = malloc((size_t)NQ * ROW), row[DHS_REF_ROW_BYTES];
    int32_t *loc = malloc(sizeof(int32_t) * (size_t)NQ * (size_t)K);
    float *lg = malloc(sizeof(float) * (size_t)NQ * (size_t)V), *lc = malloc(sizeof(float) * (size_t)V);
    dhs_ref_scratch *sc = dhs_ref_scratch_create(m);
    dhs_ref_gpu *g = NULL;
    void *pool = NULL, *kc[NQ] = {0}, *ks[NQ] = {0};
    const void *base[NQ];
    if (!desc || !rows || !rows_gpu || !loc || !lg || !lc || !sc) {
        CHECKF(0, "%s: out of memory", name);
        goto done;
    }
    dhs_ref_model_gpu_desc(m, desc);
    desc->max_queries = NQ;
    desc->max_positions = cap;
    dhs_status st = dhs_ref_gpu_create(desc, NULL, &g);
    CHECKF(st == DHS_OK, "%s: dhs_ref_gpu_create: %s", name, dhs_status_str(st));
    if (st != DHS_OK) goto done;
    uint64_t h = seed;
    for (int32_t r = 0; r < NR; r++) { /* rows of random latents, magnitudes up to 4 */
        float lat[DHS_REF_LAT];
        for (int i = 0; i < DHS_REF_LAT; i++) {
            h = h * 6364136223846793005ull + 1442695040888963407ull;
            lat[i] = (float)((int)((h >> 33) % 2001) - 1000) / 250.0f;
        }
        dhs_ref_row_encode(lat, rows + (size_t)r * ROW);
    }
    CHECK_ST(dhs_ref_gpu_alloc(g, (uint64_t)NR * ROW, &pool), DHS_OK);
    CHECK_ST(dhs_ref_gpu_upload(g, pool, rows, (uint64_t)NR * ROW), DHS_OK);
    const uint64_t kbytes = (uint64_t)cap * (uint64_t)D * (mc.key_fp8 ? 1u : 4u);
    for (int q = 0; q < NQ; q++) {
        CHECK_ST(dhs_ref_gpu_alloc(g, kbytes, &kc[q]), DHS_OK);
        CHECK_ST(dhs_ref_gpu_alloc(g, (uint64_t)cap * 4, &ks[q]), DHS_OK);
        if (!kc[q] || !ks[q]) goto done;
        CHECK_ST(dhs_ref_gpu_memset(g, kc[q], 0, kbytes), DHS_OK);
        CHECK_ST(dhs_ref_gpu_memset(g, ks[q], 0, (uint64_t)cap * 4), DHS_OK);
        base[q] = pool;
    }
    memset(loc, 0xff, sizeof(int32_t) * (size_t)NQ * (size_t)K); /* query 0: every entry -1 */
    for (int32_t e = 0; e < 30 && e < K; e++) loc[2 * K + e] = e % 3 == 1 ? -1 : (e * 7) % NR;
    loc[3 * K + K - 1] = 17;
    CHECK_ST(dhs_ref_gpu_begin(g, NQ, tokens, pos), DHS_OK);
    st = dhs_ref_gpu_rows(g, 0, NULL, kc, ks, rows_gpu);
    CHECKF(st == DHS_OK, "%s: rows: %s", name, dhs_ref_gpu_error(g));
    st = dhs_ref_gpu_attend(g, 0, base, loc);
    CHECKF(st == DHS_OK, "%s: attend: %s", name, dhs_ref_gpu_error(g));
    st = dhs_ref_gpu_logits(g, lg);
    CHECKF(st == DHS_OK, "%s: logits: %s", name, dhs_ref_gpu_error(g));
    if (st != DHS_OK) goto done;
    int rows_differ = 0, logits_differ = 0;
    for (int q = 0; q < NQ; q++) {
        const float *gq = lg + (size_t)q * (size_t)V;
        if (pos[q] < 0) continue; /* the empty slot: the copy back brings whatever the device slot holds */
        float x[DHS_REF_MAX_D], xn[DHS_REF_MAX_D], lat[DHS_REF_LAT];
        dhs_ref_embed(m, tokens[q], x);
        dhs_ref_rmsnorm(m, x, xn);
        dhs_ref_latent(m, 0, pos[q], xn, lat);
        dhs_ref_row_encode(lat, row);
        if (memcmp(row, rows_gpu + (size_t)q * ROW, ROW)) rows_differ++;
        dhs_ref_attend_mlp(m, 0, pos[q], xn, rows, ROW, loc + (size_t)q * (size_t)K, x, sc);
        dhs_ref_logits(m, x, lc);
        if (memcmp(lc, gq, sizeof(float) * (size_t)V)) {
            logits_differ++;
            printf("  %s: query %d (position %lld) logits differ from the CPU's\n", name, q, (long long)pos[q]);
        }
    }
    CHECKF(rows_differ == 0, "%s: %d rows differ from the CPU's", name, rows_differ);
    CHECKF(logits_differ == 0, "%s: %d queries' logits differ from the CPU's (nv = 0, -1 gaps, last entry only)", name,
           logits_differ);
    printf("  %-26s attention edges (nv = 0, empty slot, -1 gaps, last entry only): rows and logits %s the CPU's\n",
           name, rows_differ + logits_differ ? "DIFFER from" : "equal to");
done:
    for (int q = 0; q < NQ; q++) {
        if (kc[q]) dhs_ref_gpu_free(g, kc[q]);
        if (ks[q]) dhs_ref_gpu_free(g, ks[q]);
    }
    if (pool) dhs_ref_gpu_free(g, pool);
    dhs_ref_gpu_destroy(g);
    dhs_ref_scratch_destroy(sc);
    dhs_ref_model_destroy(m);
    free(desc), free(rows), free(rows_gpu), free(loc), free(lg), free(lc);
}

int main(void)
{
    if (!dhs_ref_gpu_available()) {
        printf("SKIP: no CUDA device (or built without CUDA)\n");
        return 77;
    }
    uint64_t seed = th_seed("test_gpu_model");
    dhs_ref_cfg glm = dhs_ref_cfg_geometry(DHS_REF_GEOM_GLM53), ds = dhs_ref_cfg_geometry(DHS_REF_GEOM_DSV32),
                tiny = dhs_ref_cfg_tiny();
    glm.seed = ds.seed = tiny.seed = seed;
    glm.n_layers = 10; /* producers 0, 1, 2, 6: FOLLOW groups of 1 and 4 */
    ds.n_layers = 6;
    dhs_ref_cfg odd = tiny; /* projection shapes off every multiple of 8 and of a tile (see the top) */
    odd.d_model = 60;
    odd.n_heads = 2;
    odd.d_v = 20;
    odd.mlp_hidden = 100;
    odd.vocab = 250;
    odd.idx_heads = 3;
    odd.idx_dim = 20;
    odd.exp_portable = 1; /* the CPU's expf twin: every other step is exact, so bit for bit */
    if (th_scale() < 0.05) { /* the size compute-sanitizer can run (bench/gpu_volume.sh): every kernel, small */
        glm.n_layers = 3;
        printf("reduced run (DHS_TEST_SCALE %.3g): glm-5.3 3 layers at 600 positions, tiny; no full runs\n", th_scale());
        test_engines("glm-5.3 (3 layers)", glm, 600, 2, 1);
        test_engines("tiny", tiny, 300, 2, 0);
        test_engines("odd shapes (exp_portable)", odd, 300, 2, 1);
        test_attend_edges("glm-5.3 (3 layers)", glm, seed);
        test_attend_edges("odd shapes (exp_portable)", odd, seed);
        test_fused_engines("glm-5.3 (3 layers)", glm, 600, 2);
        return th_summary();
    }
    test_engines("glm-5.3 (10 layers)", glm, 3000, 4, 1);
    test_engines("deepseek-v3.2 (6 layers)", ds, 2500, 4, 1);
    test_engines("tiny", tiny, 300, 4, 0);
    test_engines("odd shapes (exp_portable)", odd, 300, 4, 1);
    test_attend_edges("glm-5.3 (10 layers)", glm, seed);
    test_attend_edges("odd shapes (exp_portable)", odd, seed);
    test_runs(DHS_REF_GEOM_GLM53, 78, seed, 3);
    test_runs(DHS_REF_GEOM_DSV32, 61, seed + 1, 3);
    test_runs(DHS_REF_GEOM_DSV32, 16, seed + 2, 1);
    test_steps(DHS_REF_GEOM_GLM53, 78, seed + 2);
    test_steps(DHS_REF_GEOM_DSV32, 61, seed + 3);
    test_fused_engines("glm-5.3 (10 layers, n<k)", glm, 1500, 4);
    test_fused_engines("glm-5.3 (10 layers, n>k)", glm, 3000, 4);
    test_fused_engines("tiny", tiny, 300, 4);
    test_fused_runs(DHS_REF_GEOM_DSV32, 61, seed + 4);
    test_locality_runs(seed + 5);
    return th_summary();
}
