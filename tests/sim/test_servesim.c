/* test_servesim.c - the discrete-event serving simulator (`dhs serve-sim`).
 *
 * - higher Poisson rate -> higher or equal mean and p99 TTFT (within one decode
 *   step: admission happens at step boundaries), every mode, and far higher
 *   once capacity binds;
 * - at long context resident serving admits fewer sessions than adaptive;
 * - every metric finite, every request completed, tokens add up;
 * - deterministic for a seed (identical results twice), different for another;
 * - speculation: acceptance 0 -> one token per step, acceptance 1 -> K;
 *   the block-width schedule parser;
 * - request traces: Mooncake JSONL and BurstGPT CSV loaded and replayed; out
 *   of order refused with the line;
 * - a long trace is streamed: requests alive at once and their state bytes
 *   bounded by the batch, not the trace (and a burst shows the counter moves);
 * - data-parallel ranks: one rank gives the same result under every placement;
 *   two ranks with one request give the one-rank result; per-rank figures add
 *   up to the totals; on a constructed skewed arrival (long, high-miss prompts
 *   at every other arrival) miss-aware placement spreads the long ones and its
 *   group step time and most-missing rank are below round robin's and
 *   least-sessions' (which put every long prompt on rank 0); bad rank counts
 *   and placements are refused.
 * Env: DHS_TEST_SEED, DHS_TEST_SCALE (see test_help.h).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/servesim.h"
#include "test_help.h"

static dhs_serve_config small_config(dhs_serve_mode m)
{
    dhs_serve_config c = dhs_serve_config_default();
    c.mode = m;
    c.k = 256;
    c.hot_rows = 512;
    c.max_batch = 32;
    c.kv_gib = 2;
    c.max_context = 16384;
    c.max_output = 256;
    c.loc.window = 128;
    c.loc.window_full = 16;
    c.loc.clusters = 16;
    c.loc.cluster_radius = 8;
    return c;
}

static dhs_serve_workload small_workload(uint64_t seed)
{
    dhs_serve_workload w;
    memset(&w, 0, sizeof w);
    w.arrival = DHS_ARRIVAL_POISSON;
    w.rate = 1;
    w.n_requests = 24;
    w.context = 4096;
    w.output_len = 24;
    w.seed = seed;
    return w;
}

static int finite_result(const dhs_serve_result *r)
{
    const double v[] = {r->duration, r->request_throughput, r->output_throughput, r->total_token_throughput, r->mean_ttft_ms,
                        r->median_ttft_ms, r->p99_ttft_ms, r->mean_tpot_ms, r->median_tpot_ms, r->p99_tpot_ms, r->mean_itl_ms,
                        r->median_itl_ms, r->p99_itl_ms, r->mean_e2el_ms, r->median_e2el_ms, r->p99_e2el_ms, r->mean_batch,
                        r->mean_step_ms, r->accept_length, r->host_rows_per_token};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!isfinite(v[i]) || v[i] < 0) return 0;
    return 1;
}

/* Admission happens at decode-step boundaries, so an arrival's phase against
   the steps moves its TTFT by up to one step: TTFT may not fall by more than
   one step time as the rate grows, and the saturated rate queues far longer. */
static void test_rate_monotone(uint64_t seed)
{
    const double rates[] = {0.5, 2, 8, 32, 128};
    for (int m = 0; m < DHS_SERVE_MODES_; m++) {
        for (int spec = 0; spec < 2; spec++) {
            double prev_mean = -1, prev_p99 = -1, first = 0;
            for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) {
                dhs_serve_config c = small_config((dhs_serve_mode)m);
                c.spec = spec;
                c.kv_gib = 0.25; /* capacity binds at the high rates */
                dhs_serve_workload w = small_workload(seed);
                w.rate = rates[i];
                dhs_serve_result r;
                char err[256];
                int rc = dhs_serve_run(&c, &w, &r, err, sizeof err);
                CHECKF(rc == 0, "%s: %s", dhs_serve_mode_str(c.mode), err);
                if (rc) continue;
                CHECKF(r.completed == w.n_requests, "completed %" PRId64, r.completed);
                CHECK(finite_result(&r));
                double slack = c.cost.base_us * 1e-3 + r.mean_step_ms;
                CHECKF(r.mean_ttft_ms >= prev_mean - slack && r.p99_ttft_ms >= prev_p99 - slack,
                       "%s spec %d: rate %g mean/p99 TTFT %.3f/%.3f ms below the lower rate's %.3f/%.3f by more than a step",
                       dhs_serve_mode_str(c.mode), spec, rates[i], r.mean_ttft_ms, r.p99_ttft_ms, prev_mean, prev_p99);
                if (i == 0) first = r.mean_ttft_ms;
                prev_mean = r.mean_ttft_ms;
                prev_p99 = r.p99_ttft_ms;
            }
            CHECKF(prev_mean > 2 * first, "%s spec %d: saturated mean TTFT %.1f ms vs %.1f ms at the lowest rate",
                   dhs_serve_mode_str((dhs_serve_mode)m), spec, prev_mean, first);
        }
    }
}

static void test_long_context_capacity(uint64_t seed)
{
    int32_t maxrun[DHS_SERVE_MODES_] = {0};
    double tput[DHS_SERVE_MODES_] = {0};
    for (int m = 0; m < DHS_SERVE_MODES_; m++) {
        dhs_serve_config c = dhs_serve_config_default();
        c.mode = (dhs_serve_mode)m;
        c.k = 512;
        c.hot_rows = 1024;
        c.max_batch = 32;
        c.kv_gib = 24;
        c.max_context = 131072;
        c.max_output = 64;
        dhs_serve_workload w;
        memset(&w, 0, sizeof w);
        w.arrival = DHS_ARRIVAL_CLOSED;
        w.concurrency = 24;
        w.n_requests = 24;
        w.context_min = 90000;
        w.context = 110000;
        w.output_len = 8;
        w.seed = seed;
        dhs_serve_result r;
        char err[256];
        int rc = dhs_serve_run(&c, &w, &r, err, sizeof err);
        CHECKF(rc == 0, "%s: %s", dhs_serve_mode_str(c.mode), err);
        if (rc) continue;
        CHECK(r.completed == 24 && finite_result(&r));
        maxrun[m] = r.max_running;
        tput[m] = r.output_throughput;
    }
    printf("long context (~100K): sessions at once resident %d, fixed %d, adaptive %d; tokens/s %.1f %.1f %.1f\n",
           maxrun[0], maxrun[1], maxrun[2], tput[0], tput[1], tput[2]);
    CHECKF(maxrun[DHS_SERVE_RESIDENT] < maxrun[DHS_SERVE_ADAPTIVE], "resident %d sessions, adaptive %d", maxrun[0], maxrun[2]);
    CHECKF(maxrun[DHS_SERVE_RESIDENT] >= 1 && maxrun[DHS_SERVE_RESIDENT] <= 6, "resident sessions %d (24 GiB / ~8 GiB each)", maxrun[0]);
}

static void test_determinism(uint64_t seed)
{
    for (int m = 0; m < DHS_SERVE_MODES_; m++) {
        dhs_serve_config c = small_config((dhs_serve_mode)m);
        c.spec = 1;
        dhs_serve_workload w = small_workload(seed);
        w.rate = 4;
        dhs_serve_result a, b, d;
        char err[256];
        int ok = dhs_serve_run(&c, &w, &a, err, sizeof err) == 0 && dhs_serve_run(&c, &w, &b, err, sizeof err) == 0;
        CHECKF(ok, "%s", err);
        if (!ok) continue;
        a.wall_s = b.wall_s = 0;
        CHECKF(!memcmp(&a, &b, sizeof a), "%s: two runs with seed %" PRIu64 " differ", dhs_serve_mode_str(c.mode), seed);
        w.seed = seed + 1;
        ok = dhs_serve_run(&c, &w, &d, err, sizeof err) == 0;
        CHECKF(ok, "%s", err);
        CHECKF(ok && (d.mean_ttft_ms != a.mean_ttft_ms || d.total_input_tokens != a.total_input_tokens), "another seed, same run");
        /* tokens add up */
        CHECKF(a.total_output_tokens >= a.completed && a.accept_length >= 1, "tokens %" PRId64, a.total_output_tokens);
    }
}

static void test_spec(uint64_t seed)
{
    dhs_serve_config c = small_config(DHS_SERVE_ADAPTIVE);
    CHECK(dhs_serve_parse_schedule("8@32,6@64,5@127,4", &c) == 0);
    const int32_t b[] = {1, 32, 33, 64, 65, 127, 128, 1000}, want[] = {8, 8, 6, 6, 5, 5, 4, 4};
    for (int i = 0; i < 8; i++) CHECKF(dhs_serve_block_width(&c, b[i]) == want[i], "batch %d -> %d", b[i], dhs_serve_block_width(&c, b[i]));
    dhs_serve_config bad = c;
    CHECK(dhs_serve_parse_schedule("8@32,6", &bad) == 0 && dhs_serve_block_width(&bad, 40) == 6);
    CHECK(dhs_serve_parse_schedule("", &bad) == -1);
    CHECK(dhs_serve_parse_schedule("8@32", &bad) == -1);      /* no open-ended entry */
    CHECK(dhs_serve_parse_schedule("8@32,6@16,4", &bad) == -1); /* batches must grow */
    CHECK(dhs_serve_parse_schedule("4,8", &bad) == -1);
    CHECK(dhs_serve_parse_schedule("x", &bad) == -1);
    for (int pi = 0; pi < 2; pi++) {
        dhs_serve_config s = small_config((dhs_serve_mode)(pi ? DHS_SERVE_ADAPTIVE : DHS_SERVE_RESIDENT));
        s.spec = 1;
        s.accept_p = pi ? 1.0 : 0.0;
        dhs_serve_parse_schedule("4", &s);
        dhs_serve_workload w = small_workload(seed);
        w.output_len = w.output_min = 41; /* 1 prefill token + 10 steps of 4 */
        dhs_serve_result r;
        char err[256];
        CHECKF(dhs_serve_run(&s, &w, &r, err, sizeof err) == 0, "%s", err);
        if (pi) CHECKF(fabs(r.accept_length - 4) < 1e-9, "acceptance 1: %.3f tokens per step", r.accept_length);
        else CHECKF(fabs(r.accept_length - 1) < 1e-9, "acceptance 0: %.3f tokens per step", r.accept_length);
    }
}

static void test_traces(uint64_t seed)
{
    char mc[64], bg[64];
    FILE *f = th_tmp_fopen(mc, sizeof mc, "serve_mc");
    if (!f) { CHECK(0); return; }
    uint64_t s = seed;
    for (int i = 0; i < 20; i++)
        fprintf(f, "{\"timestamp\": %d, \"input_length\": %d, \"output_length\": %d, \"hash_ids\": [%d, %d, 7]}\n", 1000 + i * 250,
                1000 + (int)dhs_rng_below(&s, 3000), 4 + (int)dhs_rng_below(&s, 20), i, i + 1);
    fclose(f);
    f = th_tmp_fopen(bg, sizeof bg, "serve_bg");
    if (!f) { CHECK(0); return; }
    fprintf(f, "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n");
    for (int i = 0; i < 20; i++)
        fprintf(f, "%.1f,ChatGPT,%d,%d,%d,Conversation log\n", 5.0 + i * 0.5, 500 + i * 100, i % 5 == 4 ? 0 : 10 + i, 510 + i * 101);
    fclose(f);
    dhs_serve_req *v = NULL;
    int32_t n = 0;
    char err[256];
    CHECKF(dhs_serve_load_trace(mc, &v, &n, err, sizeof err) == 0, "%s", err);
    CHECKF(n == 20 && v && fabs(v[0].t_s) < 1e-12 && fabs(v[19].t_s - 4.75) < 1e-9, "mooncake: %d requests", n);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            free(v);
            v = NULL;
            CHECKF(dhs_serve_load_trace(bg, &v, &n, err, sizeof err) == 0, "%s", err);
            CHECKF(n == 16 && v && v[0].input_len == 500 && v[0].output_len == 10 && fabs(v[15].t_s - 9.0) < 1e-9,
                   "burstgpt: %d requests (4 failures skipped)", n);
        }
        if (!v) continue;
        int32_t nc = 0;
        CHECKF(dhs_serve_trace_count(pass ? bg : mc, &nc, err, sizeof err) == 0 && nc == n, "count %d, loaded %d", nc, n);
        dhs_serve_config c = small_config(DHS_SERVE_ADAPTIVE);
        dhs_serve_workload w = small_workload(seed);
        w.arrival = DHS_ARRIVAL_TRACE;
        w.trace_path = pass ? bg : mc;
        w.n_requests = 0;
        w.time_scale = 2;
        dhs_serve_result r;
        CHECKF(dhs_serve_run(&c, &w, &r, err, sizeof err) == 0, "%s", err);
        CHECKF(r.completed == n && finite_result(&r), "trace replay completed %" PRId64 " of %d", r.completed, n);
        int64_t in = 0;
        for (int i = 0; i < n; i++) in += v[i].input_len;
        CHECK(r.total_input_tokens == in);
    }
    free(v);
    f = fopen(mc, "w");
    if (f) {
        fprintf(f, "{\"timestamp\": \"x\"}\n");
        fclose(f);
    }
    CHECK(dhs_serve_load_trace(mc, &v, &n, err, sizeof err) == -1 && err[0]);
    f = fopen(bg, "w");
    if (f) {
        fprintf(f, "a,b,c\n1,2,3\n");
        fclose(f);
    }
    CHECK(dhs_serve_load_trace(bg, &v, &n, err, sizeof err) == -1);
    CHECK(dhs_serve_load_trace("/nonexistent/x.jsonl", &v, &n, err, sizeof err) == -1);
    /* a streamed trace is read in arrival order: a timestamp going back is an error naming its line */
    f = fopen(mc, "w");
    if (f) {
        fprintf(f, "{\"timestamp\": 10, \"input_length\": 100, \"output_length\": 4}\n");
        fprintf(f, "{\"timestamp\": 5, \"input_length\": 100, \"output_length\": 4}\n");
        fclose(f);
    }
    err[0] = 0;
    CHECKF(dhs_serve_trace_count(mc, &n, err, sizeof err) == -1 && strstr(err, ":2:"), "out-of-order trace: '%s'", err);
    unlink(mc);
    unlink(bg);
}

/* A long request trace is streamed: the simulation holds the requests in the
   system (queued or running), not the trace. 20,000 short requests (2,000
   under sanitizers) arriving
   slower than they are served: every one completes, yet the requests alive
   at once, and the per-request state they hold, stay at what the batch holds
   (max_batch and a small queue), three orders of magnitude below the trace. */
static void test_streamed_trace(uint64_t seed)
{
    char path[64];
    FILE *f = th_tmp_fopen(path, sizeof path, "serve_long");
    if (!f) { CHECK(0); return; }
    const int32_t n = (int32_t)(20000 * th_scale()) > 1000 ? (int32_t)(20000 * th_scale()) : 1000, max_batch = 32;
    uint64_t s = seed, t_ms = 0, in_sum = 0;
    for (int32_t i = 0; i < n; i++) {
        t_ms += 20 + (uint64_t)dhs_rng_below(&s, 40); /* ~33 requests/s */
        int64_t in = 64 + dhs_rng_below(&s, 448), out = 2 + dhs_rng_below(&s, 6);
        in_sum += (uint64_t)in;
        fprintf(f, "{\"timestamp\": %" PRIu64 ", \"input_length\": %" PRId64 ", \"output_length\": %" PRId64 "}\n", t_ms, in, out);
    }
    fclose(f);
    char err[256];
    for (int m = 0; m < DHS_SERVE_MODES_; m++) {
        dhs_serve_config c = small_config((dhs_serve_mode)m);
        c.max_batch = max_batch;
        dhs_serve_workload w = small_workload(seed);
        w.arrival = DHS_ARRIVAL_TRACE;
        w.trace_path = path;
        w.n_requests = 0;
        dhs_serve_result r;
        CHECKF(dhs_serve_run(&c, &w, &r, err, sizeof err) == 0, "%s", err);
        CHECKF(r.completed == n && (uint64_t)r.total_input_tokens == in_sum && finite_result(&r),
               "%s: completed %" PRId64 " of %d", dhs_serve_mode_str((dhs_serve_mode)m), r.completed, n);
        CHECKF(r.peak_live_requests >= r.max_running && r.peak_live_requests <= 2 * max_batch,
               "%s: %" PRId64 " requests alive at once (max_running %d) for a trace of %d", dhs_serve_mode_str((dhs_serve_mode)m),
               r.peak_live_requests, r.max_running, n);
        /* the bytes follow the live requests: at most 2 x max_batch requests' state, not n */
        dhs_tracegen_params gp = dhs_tracegen_default();
        gp.k = c.k;
        gp.loc = c.loc;
        dhs_selgen *G = dhs_selgen_create(&gp, err, sizeof err);
        CHECK(G != NULL);
        uint64_t per_req = 256 + (G ? dhs_selreq_bytes(G) : 0);
        dhs_selgen_free(G);
        printf("streamed trace, %s: %d requests, %" PRId64 " completed, %" PRId64 " alive at most (max_running %d), %" PRIu64
               " bytes of request state at most, %" PRIu64 " steps\n",
               dhs_serve_mode_str((dhs_serve_mode)m), n, r.completed, r.peak_live_requests, r.max_running, r.peak_request_bytes, r.steps);
        CHECKF(r.peak_request_bytes > 0 && r.peak_request_bytes <= 2 * (uint64_t)max_batch * per_req,
               "%s: %" PRIu64 " bytes of request state at peak (bound %" PRIu64 ")", dhs_serve_mode_str((dhs_serve_mode)m),
               r.peak_request_bytes, 2 * (uint64_t)max_batch * per_req);
    }
    /* and the counter can fail: a burst (every request at t = 0) keeps the whole trace alive */
    f = fopen(path, "w");
    if (f) {
        for (int32_t i = 0; i < 500; i++) fprintf(f, "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 3}\n");
        fclose(f);
    }
    dhs_serve_config c = small_config(DHS_SERVE_ADAPTIVE);
    c.max_batch = max_batch;
    dhs_serve_workload w = small_workload(seed);
    w.arrival = DHS_ARRIVAL_TRACE;
    w.trace_path = path;
    w.n_requests = 0;
    dhs_serve_result r;
    CHECKF(dhs_serve_run(&c, &w, &r, err, sizeof err) == 0, "%s", err);
    CHECKF(r.completed == 500 && r.peak_live_requests == 500, "burst: %" PRId64 " alive at once of 500", r.peak_live_requests);
    unlink(path);
}

static void test_errors(void)
{
    dhs_serve_config c = small_config(DHS_SERVE_FIXED);
    dhs_serve_workload w = small_workload(1);
    dhs_serve_result r;
    char err[256];
    w.rate = 0;
    CHECK(dhs_serve_run(&c, &w, &r, err, sizeof err) == -1);
    w = small_workload(1);
    c.kv_gib = 0.001; /* a request never fits */
    CHECK(dhs_serve_run(&c, &w, &r, err, sizeof err) == -1 && err[0]);
    c = small_config(DHS_SERVE_RESIDENT);
    c.kv_gib = 0.001;
    CHECK(dhs_serve_run(&c, &w, &r, err, sizeof err) == -1 && strstr(err, "never fits"));
    c = small_config(DHS_SERVE_ADAPTIVE);
    c.prefill_remote = 0; /* local prefill stalls decoding: ITL tail grows */
    dhs_serve_result loc, rem;
    w.rate = 8;
    CHECK(dhs_serve_run(&c, &w, &loc, err, sizeof err) == 0);
    c.prefill_remote = 1;
    CHECK(dhs_serve_run(&c, &w, &rem, err, sizeof err) == 0);
    CHECKF(loc.p99_itl_ms >= rem.p99_itl_ms, "local prefill p99 ITL %.2f < remote %.2f", loc.p99_itl_ms, rem.p99_itl_ms);
}

/* the result fields a DP run shares with the single-rank simulator */
static int same_single(const dhs_serve_result *a, const dhs_serve_result *b)
{
    return a->duration == b->duration && a->completed == b->completed && a->steps == b->steps && a->waits == b->waits &&
           a->total_output_tokens == b->total_output_tokens && a->mean_ttft_ms == b->mean_ttft_ms && a->p99_itl_ms == b->p99_itl_ms &&
           a->mean_step_ms == b->mean_step_ms && a->p99_step_ms == b->p99_step_ms && a->entries == b->entries &&
           a->host_rows == b->host_rows && a->census_host == b->census_host && a->max_running == b->max_running &&
           !memcmp(a->step_n, b->step_n, sizeof a->step_n);
}

static void test_dp_single(uint64_t seed)
{
    for (int m = 0; m < DHS_SERVE_MODES_; m++) {
        dhs_serve_config c = small_config((dhs_serve_mode)m);
        c.spec = m == DHS_SERVE_ADAPTIVE;
        dhs_serve_workload w = small_workload(seed);
        w.rate = 4;
        dhs_serve_result base, r;
        char err[256];
        int ok = dhs_serve_run(&c, &w, &base, err, sizeof err) == 0;
        CHECKF(ok, "%s", err);
        if (!ok) continue;
        CHECK(base.dp_ranks == 1 && base.rank_sessions[0] == w.n_requests && base.rank_max_running[0] == base.max_running);
        CHECKF(fabs(base.rank_misses_per_step[0] * (double)base.steps - (double)base.host_rows) < 1e-6 * (double)(base.host_rows + 1),
               "%s: rank misses %.3f x %" PRIu64 " steps vs %" PRIu64 " host rows", dhs_serve_mode_str(c.mode),
               base.rank_misses_per_step[0], base.steps, base.host_rows);
        CHECKF(fabs(base.wait_share) < 1e-12, "one rank waits for nobody: %g", base.wait_share);
        CHECK(base.p50_step_ms > 0 && base.p99_step_ms >= base.p50_step_ms);
        /* one rank: the placement does not matter */
        for (int p = 0; p < DHS_PLACE_N_; p++) {
            dhs_serve_config d = c;
            d.placement = (dhs_serve_placement)p;
            ok = dhs_serve_run(&d, &w, &r, err, sizeof err) == 0;
            CHECKF(ok, "%s", err);
            r.wall_s = base.wall_s;
            CHECKF(ok && !memcmp(&r, &base, sizeof r), "%s: one rank, placement %s changes the result", dhs_serve_mode_str(c.mode),
                   dhs_serve_placement_str(d.placement));
        }
        /* one request on two ranks: rank 1 idles, the group steps as rank 0 alone */
        dhs_serve_workload w1 = w;
        w1.n_requests = 1;
        dhs_serve_result one, two;
        dhs_serve_config d = c;
        ok = dhs_serve_run(&c, &w1, &one, err, sizeof err) == 0;
        d.dp_ranks = 2;
        ok = ok && dhs_serve_run(&d, &w1, &two, err, sizeof err) == 0;
        CHECKF(ok, "%s", err);
        CHECKF(ok && same_single(&one, &two) && two.rank_sessions[0] == 1 && two.rank_sessions[1] == 0,
               "%s: one request on two ranks differs from one rank", dhs_serve_mode_str(c.mode));
    }
}

/* Eight requests arrive at once, long (16K-position, high-miss) and short
   (200 positions < k: no misses) alternating. Round robin and least-sessions
   put the four long ones on rank 0; miss-aware places two on each rank.
   FIXED, budget for all: the group waits for its slowest rank, so miss-aware's
   step time (mean and p99) and most-missing rank are lower. ADAPTIVE, a
   budget that holds two long ones: on rank 0 they queue under round robin,
   so miss-aware admits without waiting and finishes sooner. */
static void test_dp_skew(uint64_t seed)
{
    char path[64];
    FILE *f = th_tmp_fopen(path, sizeof path, "serve_skew");
    if (!f) { CHECK(0); return; }
    for (int i = 0; i < 8; i++) fprintf(f, "{\"timestamp\": 0, \"input_length\": %d, \"output_length\": 40}\n", i % 2 ? 200 : 16000);
    fclose(f);
    double mean[DHS_PLACE_N_], p99[DHS_PLACE_N_], mmax[DHS_PLACE_N_], tput[DHS_PLACE_N_];
    uint64_t waits[DHS_PLACE_N_];
    for (int m = DHS_SERVE_FIXED; m <= DHS_SERVE_ADAPTIVE; m++) {
        for (int p = 0; p < DHS_PLACE_N_; p++) {
            dhs_serve_config c = small_config((dhs_serve_mode)m);
            c.dp_ranks = 2;
            c.placement = (dhs_serve_placement)p;
            c.kv_gib = m == DHS_SERVE_ADAPTIVE ? 0.5 : 2; /* fixed: all eight fit on one rank; adaptive: the 16K histories do not all stay on device */
            dhs_serve_workload w = small_workload(seed);
            w.arrival = DHS_ARRIVAL_TRACE;
            w.trace_path = path;
            w.n_requests = 0;
            dhs_serve_result r;
            char err[256];
            int ok = dhs_serve_run(&c, &w, &r, err, sizeof err) == 0;
            CHECKF(ok, "%s %s: %s", dhs_serve_mode_str(c.mode), dhs_serve_placement_str(c.placement), err);
            if (!ok) { unlink(path); return; }
            CHECK(r.completed == 8 && finite_result(&r) && r.dp_ranks == 2 && r.rank_sessions[0] + r.rank_sessions[1] == 8);
            double rows = (r.rank_misses_per_step[0] + r.rank_misses_per_step[1]) * (double)r.steps;
            CHECKF(fabs(rows - (double)r.host_rows) < 1e-6 * (double)(r.host_rows + 1), "per-rank misses %.1f vs %" PRIu64, rows, r.host_rows);
            CHECK(r.miss_max_per_step >= r.miss_mean_per_step && r.wait_share >= 0 && r.wait_share < 1);
            mean[p] = r.mean_step_ms;
            p99[p] = r.p99_step_ms;
            mmax[p] = r.miss_max_per_step;
            tput[p] = r.output_throughput;
            waits[p] = r.waits;
            printf("dp skew %s %-14s: step mean %.3f p99 %.3f ms, misses/step max %.1f mean %.1f, %.1f tok/s, sessions %d+%d, admission waits %" PRIu64 "\n",
                   dhs_serve_mode_str(c.mode), dhs_serve_placement_str(c.placement), r.mean_step_ms, r.p99_step_ms, r.miss_max_per_step,
                   r.miss_mean_per_step, r.output_throughput, r.rank_sessions[0], r.rank_sessions[1], r.waits);
        }
        for (int p = DHS_PLACE_ROUND_ROBIN; p <= DHS_PLACE_LEAST_SESSIONS; p++) {
            const char *ms = dhs_serve_mode_str((dhs_serve_mode)m), *ps = dhs_serve_placement_str((dhs_serve_placement)p);
            if (m == DHS_SERVE_FIXED) {
                /* all fit on one rank: the slowest rank's step decides */
                CHECKF(mean[DHS_PLACE_MISS_AWARE] < mean[p] && p99[DHS_PLACE_MISS_AWARE] < p99[p],
                       "%s: miss-aware step mean/p99 %.3f/%.3f ms not below %s's %.3f/%.3f", ms, mean[DHS_PLACE_MISS_AWARE],
                       p99[DHS_PLACE_MISS_AWARE], ps, mean[p], p99[p]);
                CHECKF(mmax[DHS_PLACE_MISS_AWARE] < mmax[p], "%s: miss-aware most-missing rank %.1f rows/step not below %s's %.1f", ms,
                       mmax[DHS_PLACE_MISS_AWARE], ps, mmax[p]);
                CHECKF(waits[p] == 0 && waits[DHS_PLACE_MISS_AWARE] == 0, "%s: admission waited", ms);
            } else {
                /* rank 0's budget takes two of the long ones at a time: they queue there */
                CHECKF(waits[DHS_PLACE_MISS_AWARE] < waits[p], "%s: miss-aware admission waits %" PRIu64 " not below %s's %" PRIu64, ms,
                       waits[DHS_PLACE_MISS_AWARE], ps, waits[p]);
            }
            CHECKF(tput[DHS_PLACE_MISS_AWARE] > tput[p], "%s: miss-aware %.1f tok/s not above %s's %.1f", ms, tput[DHS_PLACE_MISS_AWARE], ps,
                   tput[p]);
        }
    }
    unlink(path);
    /* the prediction behind it: long prompts miss, prompts within k do not, resident never */
    dhs_serve_config c = small_config(DHS_SERVE_FIXED);
    dhs_serve_pred lp = dhs_serve_predict(&c, 16000, 40), sp = dhs_serve_predict(&c, 200, 40);
    CHECK(lp.misses > 0 && sp.misses == 0 && lp.step_us > sp.step_us && lp.bytes > sp.bytes);
    c.mode = DHS_SERVE_RESIDENT;
    CHECK(dhs_serve_predict(&c, 16000, 40).misses == 0);
}

static void test_dp_errors(void)
{
    dhs_serve_config c = small_config(DHS_SERVE_FIXED);
    dhs_serve_workload w = small_workload(1);
    dhs_serve_result r;
    char err[256];
    const int32_t bad_ranks[] = {0, -1, DHS_SERVE_MAX_RANKS + 1};
    for (int i = 0; i < 3; i++) {
        c.dp_ranks = bad_ranks[i];
        err[0] = 0;
        CHECKF(dhs_serve_run(&c, &w, &r, err, sizeof err) == -1 && strstr(err, "ranks 1..64"), "dp_ranks %d: '%s'", bad_ranks[i], err);
    }
    c.dp_ranks = 2;
    c.placement = DHS_PLACE_N_;
    CHECK(dhs_serve_run(&c, &w, &r, err, sizeof err) == -1);
    CHECK(!strcmp(dhs_serve_placement_str(DHS_PLACE_MISS_AWARE), "miss-aware"));
}

int main(void)
{
    uint64_t seed = th_seed("test_servesim");
    test_rate_monotone(seed);
    test_long_context_capacity(seed);
    test_determinism(seed);
    test_spec(seed);
    test_traces(seed);
    test_streamed_trace(seed);
    test_errors();
    test_dp_single(seed);
    test_dp_skew(seed);
    test_dp_errors();
    return th_summary();
}
