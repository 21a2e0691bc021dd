/* test_verify.c - the randomised exactness harness (`dhs verify`) across
 * seeds and modes: no violation, every census share above zero,
 * host rows copied == distinct misses, and the mode-specific counters
 * (waits, reclaims, repopulation, faults, staging) above zero. A run with a
 * deliberately corrupted location must report a violation. */
#include <stdio.h>
#include <stdlib.h>

#include "sim/verify.h"
#include "test_help.h"


static int scale(void)
{
    const char *s = getenv("DHS_TEST_SCALE");
    int v = s ? atoi(s) : 4;
    return v < 1 ? 1 : v;
}

static void run(const char *name, verify_opts o, int pressure_mode, int spec_mode)
{
    verify_result r;
    int rc = verify_run(&o, &r);
    printf("%-34s seed %llu: rc %d, %llu entries, census %llu/%llu/%llu, misses %llu, waits %llu, reclaims %llu, "
           "repop %llu, faults %llu, staging peak %llu, violations %llu %s\n",
           name, (unsigned long long)o.seed, rc, (unsigned long long)r.st.entries, (unsigned long long)r.st.census_direct,
           (unsigned long long)r.st.census_hot, (unsigned long long)r.st.census_host,
           (unsigned long long)r.st.distinct_misses, (unsigned long long)r.st.waits, (unsigned long long)r.st.reclaims,
           (unsigned long long)r.st.repopulated_pages, (unsigned long long)r.faults_injected,
           (unsigned long long)r.st.staging_rows_peak, (unsigned long long)r.violations, r.first_violation);
    CHECKF(rc == 0 && r.violations == 0, "%s: %s", name, r.first_violation);
    CHECKF(r.lost_rows == 0, "%s lost rows", name);
    CHECKF(r.st.census_direct > 0 && r.st.census_hot > 0 && r.st.census_host > 0, "%s census share zero", name);
    CHECKF(r.st.host_rows_copied == r.st.distinct_misses, "%s copied %llu != misses %llu", name,
          (unsigned long long)r.st.host_rows_copied, (unsigned long long)r.st.distinct_misses);
    CHECKF(r.checks > 0, "%s ran no invariant check", name);
    if (pressure_mode) {
        CHECKF(r.st.waits > 0, "%s no admission wait", name);
        CHECKF(r.st.reclaims > 0, "%s no reclaim", name);
        CHECKF(r.st.repopulated_pages > 0, "%s no repopulation", name);
    }
    if (o.faults > 0) CHECKF(r.faults_injected > 0, "%s no fault injected", name);
    if (spec_mode) {
        CHECKF(r.st.staging_rows_peak > 0, "%s staging unused", name);
        CHECKF(r.st.rejected_rows > 0 && r.st.accepted > 0, "%s no acceptance mix", name);
    }
}

int main(void)
{
    uint64_t seed = getenv("DHS_TEST_SEED") ? strtoull(getenv("DHS_TEST_SEED"), NULL, 10) : 20261129;
    int sc = scale();
    printf("seed %llu scale %d\n", (unsigned long long)seed, sc);
    for (int rep = 0; rep < 2; rep++) {
        verify_opts o = verify_opts_default();
        o.seed = seed + (uint64_t)rep;
        o.requests = 16;
        o.steps = 40 * sc;
        run("core (own, lru)", o, 0, 0);
        for (int p = 1; p < DHS_POLICY_COUNT_; p++) {
            verify_opts q = o;
            q.policy = (dhs_policy)p;
            q.steps = 20 * sc;
            run(dhs_policy_str(q.policy), q, 0, 0);
        }
        verify_opts h = o;
        h.pressure = 1;
        h.async_delay = 3;
        h.faults = 0.01;
        h.random_order = rep;
        run("pressure+async+faults", h, 1, 0);
        for (int ro = 0; ro < DHS_RECLAIM_COUNT_; ro++) {
            verify_opts q = h;
            q.reclaim_order = (dhs_reclaim_order)ro;
            q.faults = 0;
            q.steps = 20 * sc;
            run(dhs_reclaim_order_str(q.reclaim_order), q, 1, 0);
        }
        verify_opts s = o;
        s.spec = 8;
        s.compress = 4;
        s.layout = VERIFY_LAYOUT_GLM;
        s.steps = 20 * sc;
        run("spec8 compress4 glm", s, 0, 1);
        s.layout = VERIFY_LAYOUT_V41;
        run("spec8 compress4 v41", s, 0, 1);
        s.pressure = 1;
        s.async_delay = 2;
        s.faults = 0.01;
        run("spec8 v41 pressure+async+faults", s, 1, 1);
    }
    /* the checks must bite: a flipped byte at a returned location is reported */
    verify_opts c = verify_opts_default();
    c.seed = seed;
    c.requests = 4;
    c.steps = 30;
    c.corrupt_at_step = 20;
    verify_result r;
    int rc = verify_run(&c, &r);
    printf("corruption run: rc %d, violations %llu, wrong bytes %llu: %s\n", rc, (unsigned long long)r.violations,
           (unsigned long long)r.wrong_bytes, r.first_violation);
    CHECKF(rc == 1 && r.wrong_bytes > 0, "deliberate corruption went unnoticed");
    return th_summary();
}
