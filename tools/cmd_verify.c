/* dhs verify - randomised exactness and invariant check through the public API. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cmds.h"
#include "sim/verify.h"
#include "tool.h"

#define PROG "dhs verify"

static const char *const backends[] = {"cpu", "cuda", NULL};
static const char *const policies[] = {"lru", "clock", "fifo", "lfu", NULL};
static const char *const resolvers[] = {"host", "device", NULL};
static const char *const round_ends[] = {"wait", "early", "mixed", NULL};
static const char *const reclaims[] = {"most-pages", "oldest", "newest", NULL};
static const char *const pressures[] = {"low", "high", NULL};
static const char *const consumers[] = {"own", "glm", "v41", NULL};

/* verify_print_json's object with the provenance keys in front */
static int print_json(FILE *out, const verify_opts *o, const verify_result *r, const char *backend)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return -1;
    verify_print_json(m, o, r);
    fclose(m);
    cJSON *in = cJSON_Parse(buf);
    free(buf);
    if (!in) return -1;
    cJSON *j = cJSON_CreateObject();
    tool_prov_cjson(j, backend);
    cJSON *it = in->child;
    while (it) {
        cJSON *next = it->next;
        cJSON_AddItemToObject(j, it->string, cJSON_DetachItemViaPointer(in, it));
        it = next;
    }
    cJSON_Delete(in);
    /* the parse above made the seed a double: put back its exact digits */
    if (args_json_set_u64(j, "seed", o->seed)) {
        cJSON_Delete(j);
        return -1;
    }
    char *s = cJSON_PrintUnformatted(j);
    if (s) fprintf(out, "%s\n", s);
    cJSON_free(s);
    cJSON_Delete(j);
    return 0;
}

/* The device pool verify_run asks for holds, besides staging and history, the
   hot cache and tail of every payload source for each request slot (all of
   them at low pressure, half at high): sim/verify.c's sizes, counted here so
   a configuration the core or the machine cannot hold is refused before any
   work. 0 ok, else a message and EXIT_USAGE. */
static int pool_check(const verify_opts *o, int use_cuda)
{
    int64_t n_src = o->layout == VERIFY_LAYOUT_GLM ? 5 : o->layout == VERIFY_LAYOUT_V41 ? 2 : 1;
    if (o->compress > 1 && o->layout != VERIFY_LAYOUT_V41) n_src++;
    int64_t tail = (int64_t)o->page_rows * ((4 * o->spec + 2 * o->k / 4 + o->page_rows - 1) / o->page_rows + 1);
    int64_t slots = o->pressure ? (o->requests / 2 > 2 ? o->requests / 2 : 2) : o->requests;
    /* < 2^11 x 2^3 x (2^20 + 2^14): no overflow */
    int64_t rows = slots * n_src * ((int64_t)o->hot_rows + tail);
    if (rows > INT32_MAX)
        return args_fail(PROG, "%" PRId64 " request slots x %" PRId64 " payload source%s x (--hot %d + tail %" PRId64
                         ") = %" PRId64 " pool rows: the core addresses at most 2^31-1 (lower --requests or --hot)",
                         slots, n_src, n_src == 1 ? "" : "s", o->hot_rows, tail, rows);
    double bytes = (double)rows * o->row_bytes;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGE_SIZE);
    double mem = pages > 0 && psize > 0 ? (double)pages * (double)psize : 0;
    if (!use_cuda && mem > 0 && bytes > mem)
        return args_fail(PROG, "the device pool needs at least %.1f GiB (%" PRId64 " rows of %d bytes), more than this "
                         "machine's %.1f GiB of memory (lower --requests, --hot or --row-bytes)",
                         bytes / 1073741824.0, rows, o->row_bytes, mem / 1073741824.0);
    return 0;
}

int cmd_verify(int argc, char **argv)
{
    verify_opts o = verify_opts_default();
    int json = 0, backend = 0, policy = (int)o.policy, resolver = (int)o.resolver, reclaim = 0, pressure = 0, layout = 0, no_check = 0, quiet = 0;
    int seen_policy = 0;
    const char *output = NULL;
    arg_spec sp[] = {
        {.name = "--backend", .type = ARG_ENUM, .dest = &backend, .choices = backends,
         .help = "cuda needs a build with DHS_CUDA and a device: every located row is read back from device memory"},
        A_INT("--requests", &o.requests, 1, 1024, "concurrent request slots"),
        A_INT("--steps", &o.steps, 1, 100000000, "decode rounds"),
        A_U64("--seed", &o.seed, "random seed"),
        A_INT("--k", &o.k, 1, 4096, "selection length"),
        A_INT("--hot", &o.hot_rows, 1, 1 << 20, "hot-cache rows B per request and group (a multiple of --page-rows)"),
        A_INT("--row-bytes", &o.row_bytes, 16, 1 << 16, "row size, a multiple of 16"),
        A_INT("--page-rows", &o.page_rows, 1, 4096, "rows per page"),
        A_INT("--max-prefix", &o.max_prefix, 0, 1 << 22, "imported prefix up to N positions"),
        {.name = "--policy", .type = ARG_ENUM, .dest = &policy, .choices = policies, .help = "hot-cache replacement",
         .seen = &seen_policy},
        {.name = "--resolver", .type = ARG_ENUM, .dest = &resolver, .choices = resolvers,
         .help = "host: the host resolver; device: the device resolver (dres_spec.h, CLOCK with round epochs: --policy left out or clock)"},
        {.name = "--reclaim-order", .type = ARG_ENUM, .dest = &reclaim, .choices = reclaims, .help = "which request gives back history first"},
        {.name = "--pressure", .type = ARG_ENUM, .dest = &pressure, .choices = pressures,
         .help = "device capacity: history fits / forces waits and reclaim"},
        A_INT("--async-delay", &o.async_delay, 0, 1000, "side-stream copies and reader fences complete N rounds late"),
        A_BOOL("--random-order", &o.random_order, "late completions in random order"),
        A_DBL("--faults", &o.faults, 0, 1, "probability of an injected allocation/copy fault per call"),
        {.name = "--round-end", .type = ARG_ENUM, .dest = &o.round_end, .choices = round_ends,
         .help = "wait (default): dhs_round_end; early: dhs_round_end_early every round (its wait moves to the next "
                 "round begin); mixed: either, at random"},
        A_INT("--spec", &o.spec, 1, 8, "queries per request per round up to K (1 = no speculation)"),
        A_INT("--compress", &o.compress, 1, 64, "add a compressed source with M positions per row (1 = none)"),
        {.name = "--consumers", .type = ARG_ENUM, .dest = &layout, .choices = consumers,
         .help = "own | glm (FOLLOW layers) | v41 (REUSE/REINDEX on shared sources)"},
        A_BOOL("--no-check", &no_check, "skip the invariant check after every call (bytes still checked)"),
        A_BOOL("--json", &json, "one JSON object (with version, commit, date, host, device)"),
        A_OUT("--output", &output, "write the results to FILE instead of stdout"),
        {.name = "--quiet", .alias = 'q', .type = ARG_BOOL, .dest = &quiet, .help = "no progress on stderr"},
    };
    arg_cmd cmd = {
        .prog = PROG,
        .about = "Drives a randomised workload (arrivals and departures, imports, selections with\n"
                 "locality, duplicates and -1 padding, new rows every step) through the public API,\n"
                 "checks every returned location against the original row bytes (I2) and every\n"
                 "invariant after every call. Exit status: 0 clean, 1 a violation was found, 2 bad\n"
                 "usage (or --backend cuda without a GPU), 3 a runtime error.",
        .specs = sp,
        .n_specs = (int)(sizeof sp / sizeof sp[0]),
    };
    int r = args_parse(&cmd, argc, argv, NULL, NULL);
    if (r) return args_exit(r);
    if (o.row_bytes % 16) return args_fail(PROG, "--row-bytes must be a multiple of 16, got %d", o.row_bytes);
    if (o.hot_rows % o.page_rows)
        return args_fail(PROG, "--hot (%d) must be a multiple of --page-rows (%d)", o.hot_rows, o.page_rows);
    if (resolver == DHS_RESOLVER_DEVICE && seen_policy && policy != DHS_POLICY_CLOCK)
        return args_fail(PROG, "--resolver device implements CLOCK only: --policy %s does not go with it (leave --policy out "
                         "or give clock)", policies[policy]);
    o.use_cuda = backend == 1;
    o.policy = (dhs_policy)policy;
    o.resolver = (dhs_resolver)resolver;
    o.reclaim_order = reclaim == 0 ? DHS_RECLAIM_MOST_PAGES : reclaim == 1 ? DHS_RECLAIM_OLDEST : DHS_RECLAIM_NEWEST;
    o.pressure = pressure;
    o.layout = layout == 0 ? VERIFY_LAYOUT_OWN : layout == 1 ? VERIFY_LAYOUT_GLM : VERIFY_LAYOUT_V41;
    o.check_every = !no_check;
    if (pool_check(&o, o.use_cuda)) return EXIT_USAGE;
    if (tool_check_backend(PROG, backends[backend])) return EXIT_USAGE;
    if (o.use_cuda && (o.async_delay || o.random_order))
        fprintf(stderr, "dhs verify: --async-delay/--random-order apply to the CPU backend only (ignored)\n");
    if (tool_output(PROG, output)) return EXIT_USAGE;
    o.progress = quiet ? 0 : isatty(2) ? (json ? 0 : 1) : 2;
    verify_result res;
    int rc = verify_run(&o, &res);
    if (rc < 0) {
        /* verify_run passes no status up: name what its setup asks of the library */
        fprintf(stderr, "dhs verify: setup failed: the library rejected the configuration or could not allocate it "
                        "(dhs_config_sizes, the %s backend, or dhs_ctx_create with a device pool of %d request slots "
                        "x --hot %d rows x %d bytes plus tails and staging)\n",
                backends[backend], o.requests, o.hot_rows, o.row_bytes);
        return EXIT_RUNTIME;
    }
    if (json) {
        if (print_json(stdout, &o, &res, backends[backend])) {
            fprintf(stderr, "dhs verify: out of memory\n");
            return EXIT_RUNTIME;
        }
    } else {
        printf("seed %llu: %llu entries, census direct %llu / hot %llu / host %llu, %llu distinct misses, %llu host rows copied\n",
               (unsigned long long)o.seed, (unsigned long long)res.st.entries, (unsigned long long)res.st.census_direct,
               (unsigned long long)res.st.census_hot, (unsigned long long)res.st.census_host,
               (unsigned long long)res.st.distinct_misses, (unsigned long long)res.st.host_rows_copied);
        printf("admissions %llu, waits %llu, reclaims %llu, repopulated pages %llu, faults %llu, staging peak %llu\n",
               (unsigned long long)res.st.admissions, (unsigned long long)res.st.waits, (unsigned long long)res.st.reclaims,
               (unsigned long long)res.st.repopulated_pages, (unsigned long long)res.faults_injected,
               (unsigned long long)res.st.staging_rows_peak);
        printf("violations: %llu%s%s\n", (unsigned long long)res.violations, res.violations ? " - first: " : "",
               res.first_violation);
    }
    return rc;
}
