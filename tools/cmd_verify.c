/* dhs verify - randomised exactness and invariant check through the public API. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cmds.h"
#include "sim/verify.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dhs verify [flags]\n"
            "Drives a randomised workload (arrivals and departures, imports, selections with\n"
            "locality, duplicates and -1 padding, new rows every step) through the public API,\n"
            "checks every returned location against the original row bytes (I2) and every\n"
            "invariant after every call. Exit status 1 iff a violation was found.\n\n"
            "  --backend cpu|cuda     backend (cpu); cuda needs a build with DHS_CUDA and a device:\n"
            "                         every located row is read back from device memory\n"
            "  --requests N           concurrent request slots (32)\n"
            "  --steps N              decode rounds (300)\n"
            "  --seed S               random seed (1)\n"
            "  --k N                  selection length (64)\n"
            "  --hot N                hot-cache rows B per request and group (128)\n"
            "  --row-bytes N          row size, multiple of 16 (64)\n"
            "  --page-rows N          rows per page (16)\n"
            "  --max-prefix N         imported prefix up to N positions (1500)\n"
            "  --policy P             lru | clock | fifo | lfu (lru)\n"
            "  --resolver R           host | device: device runs the device resolver (CLOCK epochs) (host)\n"
            "  --reclaim-order O      most-pages | oldest | newest (most-pages)\n"
            "  --pressure low|high    device capacity: history fits / forces waits and reclaim (low)\n"
            "  --async-delay N        side-stream copies and reader fences complete N rounds late (0)\n"
            "  --random-order         late completions in random order\n"
            "  --faults P             probability of an injected allocation/copy fault per call (0)\n"
            "  --spec K               queries per request per round up to K (1 = no speculation)\n"
            "  --compress M           add a compressed source with M positions per row\n"
            "  --consumers L          own | glm (FOLLOW layers) | v41 (REUSE/REINDEX on shared sources)\n"
            "  --no-check             skip the invariant check after every call (bytes still checked)\n"
            "  --json                 print one JSON object\n"
            "  --help                 this text\n");
}

int cmd_verify(int argc, char **argv)
{
    verify_opts o = verify_opts_default();
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x;
        double d;
#define NEXT_INT(lo, hi, dst) do { if (arg_i64(val, lo, hi, &x)) goto bad; dst = x; i++; } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--random-order")) o.random_order = 1;
        else if (!strcmp(a, "--no-check")) o.check_every = 0;
        else if (!strcmp(a, "--backend")) {
            if (!val || (strcmp(val, "cpu") && strcmp(val, "cuda"))) goto bad;
            o.use_cuda = !strcmp(val, "cuda");
            i++;
        }
        else if (!strcmp(a, "--requests")) NEXT_INT(1, 1024, o.requests);
        else if (!strcmp(a, "--steps")) NEXT_INT(0, 100000000, o.steps);
        else if (!strcmp(a, "--seed")) { if (arg_i64(val, 0, INT64_MAX, &x)) goto bad; o.seed = (uint64_t)x; i++; }
        else if (!strcmp(a, "--k")) NEXT_INT(1, 4096, o.k);
        else if (!strcmp(a, "--hot")) NEXT_INT(1, 1 << 20, o.hot_rows);
        else if (!strcmp(a, "--row-bytes")) NEXT_INT(16, 1 << 16, o.row_bytes);
        else if (!strcmp(a, "--page-rows")) NEXT_INT(1, 4096, o.page_rows);
        else if (!strcmp(a, "--max-prefix")) NEXT_INT(0, 1 << 22, o.max_prefix);
        else if (!strcmp(a, "--spec")) NEXT_INT(1, 8, o.spec);
        else if (!strcmp(a, "--compress")) NEXT_INT(1, 64, o.compress);
        else if (!strcmp(a, "--async-delay")) NEXT_INT(0, 1000, o.async_delay);
        else if (!strcmp(a, "--faults")) { if (arg_f64(val, 0, 1, &d)) goto bad; o.faults = d; i++; }
        else if (!strcmp(a, "--policy")) { if (!val || dhs_policy_parse(val, &o.policy)) goto bad; i++; }
        else if (!strcmp(a, "--resolver")) { if (!val || dhs_resolver_parse(val, &o.resolver)) goto bad; i++; }
        else if (!strcmp(a, "--reclaim-order")) {
            if (!val) goto bad;
            if (!strcmp(val, "most-pages")) o.reclaim_order = DHS_RECLAIM_MOST_PAGES;
            else if (!strcmp(val, "oldest")) o.reclaim_order = DHS_RECLAIM_OLDEST;
            else if (!strcmp(val, "newest")) o.reclaim_order = DHS_RECLAIM_NEWEST;
            else goto bad;
            i++;
        } else if (!strcmp(a, "--pressure")) {
            if (!val || (strcmp(val, "low") && strcmp(val, "high"))) goto bad;
            o.pressure = !strcmp(val, "high");
            i++;
        } else if (!strcmp(a, "--consumers")) {
            if (!val) goto bad;
            if (!strcmp(val, "own")) o.layout = VERIFY_LAYOUT_OWN;
            else if (!strcmp(val, "glm")) o.layout = VERIFY_LAYOUT_GLM;
            else if (!strcmp(val, "v41")) o.layout = VERIFY_LAYOUT_V41;
            else goto bad;
            i++;
        } else {
            fprintf(stderr, "dhs verify: unknown flag '%s' (see --help)\n", a);
            return 2;
        }
        continue;
    bad:
        fprintf(stderr, "dhs verify: bad or missing value for %s (see --help)\n", a);
        return 2;
#undef NEXT_INT
    }
    if (o.row_bytes % 16) { fprintf(stderr, "dhs verify: --row-bytes must be a multiple of 16\n"); return 2; }
    if (o.hot_rows % o.page_rows) { fprintf(stderr, "dhs verify: --hot must be a multiple of --page-rows\n"); return 2; }
    o.progress = !json && isatty(2);
    verify_result r;
    int rc = verify_run(&o, &r);
    if (rc < 0) {
        fprintf(stderr, "dhs verify: setup failed (%s)\n",
                o.use_cuda ? "no CUDA backend: built without CUDA or no device" : "configuration rejected by the library");
        return 2;
    }
    if (o.use_cuda && (o.async_delay || o.random_order))
        fprintf(stderr, "dhs verify: --async-delay/--random-order apply to the CPU backend only (ignored)\n");
    if (json) verify_print_json(stdout, &o, &r);
    else {
        printf("seed %llu: %llu entries, census direct %llu / hot %llu / host %llu, %llu distinct misses, %llu host rows copied\n",
               (unsigned long long)o.seed, (unsigned long long)r.st.entries, (unsigned long long)r.st.census_direct,
               (unsigned long long)r.st.census_hot, (unsigned long long)r.st.census_host,
               (unsigned long long)r.st.distinct_misses, (unsigned long long)r.st.host_rows_copied);
        printf("admissions %llu, waits %llu, reclaims %llu, repopulated pages %llu, faults %llu, staging peak %llu\n",
               (unsigned long long)r.st.admissions, (unsigned long long)r.st.waits, (unsigned long long)r.st.reclaims,
               (unsigned long long)r.st.repopulated_pages, (unsigned long long)r.faults_injected,
               (unsigned long long)r.st.staging_rows_peak);
        printf("violations: %llu%s%s\n", (unsigned long long)r.violations, r.violations ? " - first: " : "",
               r.first_violation);
    }
    return rc;
}
