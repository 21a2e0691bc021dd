/* cmd_run.c - `dhs run`: the reference DSA model served through the KV
 * hierarchy, checked byte for byte against keeping every row resident.
 *
 * Sessions arrive over the run (one every --arrival rounds), are admitted
 * through dhs_request_open (which may say DHS_WAIT), prefill their prompt
 * (computed once by the model, in parallel threads, then imported), decode
 * --tokens tokens with speculative rounds of width --spec, and finish. In the
 * compare mode a resident engine runs the very same schedule next to the
 * hierarchical one and every round's logits are compared with memcmp.
 * Exit status: 0 done (and identical when comparing), 1 a mismatch,
 * 2 bad usage, 3 a runtime error. docs/MODEL.md explains the model. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmds.h"
#include "ref/run.h"

typedef struct run_opts {
    const char *model;
    dhs_ref_layout layout;
    int32_t sessions;
    int64_t context;
    int32_t tokens;
    int32_t spec;
    const char *backend;
    int compare;            /* 1: resident vs hierarchical */
    int storage_hier;       /* without --compare: 1 hierarchical, 0 resident */
    dhs_policy policy;
    dhs_resolver resolver;
    dhs_ref_verify verify;
    uint64_t seed;
    int json;
    const char *trace;
    int32_t topk;
    int32_t threads;
    int32_t arrival;        /* rounds between arrivals */
    int32_t slots;          /* request slots of the hierarchy */
    double history;         /* sessions' imported history the device budget holds on top */
    double device_mb;       /* 0: derived from slots and history */
    int32_t page_rows;
    int32_t async_delay;
    int check;              /* invariant check after every round */
    int fetch_rows;         /* read located rows with dhs_read_location */
    float temperature;
} run_opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dhs run [flags]\n\n"
            "Runs the reference DSA model (docs/MODEL.md) on sessions that arrive, prefill,\n"
            "decode with speculative rounds and finish, with their KV rows served by the\n"
            "hierarchy; by default also with every row resident, comparing every round's\n"
            "logits byte for byte. Without flags: a demo of about half a minute on 2 cores.\n\n"
            "flags:\n"
            "  --model tiny                 model dims (tiny: d 64, 4 layers, indexer 4x16, V 256)\n"
            "  --layout own|follow|compressed   OWN per layer (V3.2), FOLLOW (GLM IndexShare),\n"
            "                               COMPRESSED (odd layers read m=4 rows)   [own]\n"
            "  --sessions N                 sessions over the run                   [16]\n"
            "  --context N                  prompt positions (session i: N - (13 i mod 32)) [4096]\n"
            "  --tokens N                   tokens generated per session            [64]\n"
            "  --spec K                     queries per round (anchor + K-1 drafts); 1 = plain [4]\n"
            "  --verify greedy|sample       acceptance rule (sample: Leviathan et al.) [greedy]\n"
            "  --temperature T              sampling temperature                    [1]\n"
            "  --backend cpu|cuda           the library backend [cpu]; the model computes on the CPU:\n"
            "                               with cuda it reads every located row from the device pool\n"
            "                               through dhs_read_location\n"
            "  --compare resident|none      run resident storage side by side and compare [resident]\n"
            "  --storage hier|resident      without --compare: which storage        [hier]\n"
            "  --policy lru|clock|fifo|lfu  hot-cache replacement                    [lru]\n"
            "  --resolver host|device       device: the device resolver (CLOCK epochs) [host]\n"
            "  --topk K                     selection length k                      [64]\n"
            "  --slots N                    request slots: sessions served at once   [sessions/2]\n"
            "  --history H                  device budget = staging + required state of every\n"
            "                               slot + the imported history of H sessions [2]\n"
            "  --device-mb X                device budget in MiB (overrides --history)\n"
            "  --page-rows P                rows per page                           [64]\n"
            "  --arrival R                  rounds between session arrivals         [2]\n"
            "  --async-delay D              CPU backend: side copies complete D rounds late [1]\n"
            "  --threads N                  prefill threads                         [online CPUs]\n"
            "  --check                      after every round: dhs_check_invariants, and every located\n"
            "                               row compared with the model's own copy of it\n"
            "  --fetch-rows                 read located rows with dhs_read_location (the CUDA path) on the CPU too\n"
            "  --trace FILE                 write every round's selections (docs/TRACE.md)\n"
            "  --seed S                     weights, prompts and sampling            [1]\n"
            "  --json                       one JSON object on stdout\n"
            "  --help\n");
}

static int parse_i64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "dhs run: %s wants an integer in %" PRId64 "..%" PRId64 ", got '%s'\n", flag, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_f64(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "dhs run: %s wants a number in %g..%g, got '%s'\n", flag, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* 0 ok, 1 --help, 2 bad usage */
static int parse_args(int argc, char **argv, run_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model = "tiny";
    o->layout = DHS_REF_LAYOUT_OWN;
    o->sessions = 16;
    o->context = 4096;
    o->tokens = 64;
    o->spec = 4;
    o->backend = "cpu";
    o->compare = 1;
    o->storage_hier = 1;
    o->policy = DHS_POLICY_LRU;
    o->verify = DHS_REF_VERIFY_GREEDY;
    o->seed = 1;
    o->topk = 64;
    o->threads = 0;
    o->arrival = 2;
    o->slots = 0;
    o->history = 2.0;
    o->page_rows = 64;
    o->async_delay = 1;
    o->temperature = 1.0f;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x;
        double f;
#define NEED()                                                 \
    do {                                                       \
        if (!v) {                                              \
            fprintf(stderr, "dhs run: %s needs a value\n", a); \
            return 2;                                          \
        }                                                      \
        i++;                                                   \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        else if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--check")) o->check = 1;
        else if (!strcmp(a, "--fetch-rows")) o->fetch_rows = 1;
        else if (!strcmp(a, "--model")) {
            NEED();
            if (strcmp(v, "tiny")) {
                fprintf(stderr, "dhs run: unknown model '%s' (available: tiny)\n", v);
                return 2;
            }
            o->model = v;
        } else if (!strcmp(a, "--layout")) {
            NEED();
            if (dhs_ref_layout_parse(v, &o->layout)) {
                fprintf(stderr, "dhs run: --layout wants own, follow or compressed, got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--sessions")) {
            NEED();
            if (parse_i64(a, v, 1, 4096, &x)) return 2;
            o->sessions = (int32_t)x;
        } else if (!strcmp(a, "--context")) {
            NEED();
            if (parse_i64(a, v, 1, (int64_t)1 << 24, &x)) return 2;
            o->context = x;
        } else if (!strcmp(a, "--tokens")) {
            NEED();
            if (parse_i64(a, v, 1, 1 << 20, &x)) return 2;
            o->tokens = (int32_t)x;
        } else if (!strcmp(a, "--spec")) {
            NEED();
            if (parse_i64(a, v, 1, 64, &x)) return 2;
            o->spec = (int32_t)x;
        } else if (!strcmp(a, "--verify")) {
            NEED();
            if (!strcmp(v, "greedy")) o->verify = DHS_REF_VERIFY_GREEDY;
            else if (!strcmp(v, "sample")) o->verify = DHS_REF_VERIFY_SAMPLE;
            else {
                fprintf(stderr, "dhs run: --verify wants greedy or sample, got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--temperature")) {
            NEED();
            if (parse_f64(a, v, 1e-3, 100.0, &f)) return 2;
            o->temperature = (float)f;
        } else if (!strcmp(a, "--backend")) {
            NEED();
            if (strcmp(v, "cpu") && strcmp(v, "cuda")) {
                fprintf(stderr, "dhs run: --backend wants cpu or cuda, got '%s'\n", v);
                return 2;
            }
            o->backend = v;
        } else if (!strcmp(a, "--compare")) {
            NEED();
            if (!strcmp(v, "resident")) o->compare = 1;
            else if (!strcmp(v, "none")) o->compare = 0;
            else {
                fprintf(stderr, "dhs run: --compare wants resident or none, got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--storage")) {
            NEED();
            if (!strcmp(v, "hier")) o->storage_hier = 1;
            else if (!strcmp(v, "resident")) o->storage_hier = 0;
            else {
                fprintf(stderr, "dhs run: --storage wants hier or resident, got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--resolver")) {
            NEED();
            if (dhs_resolver_parse(v, &o->resolver)) {
                fprintf(stderr, "dhs run: --resolver wants host or device, got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--policy")) {
            NEED();
            if (dhs_policy_parse(v, &o->policy)) {
                fprintf(stderr, "dhs run: --policy wants lru, clock, fifo or lfu, got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--topk")) {
            NEED();
            if (parse_i64(a, v, 1, 65536, &x)) return 2;
            o->topk = (int32_t)x;
        } else if (!strcmp(a, "--slots")) {
            NEED();
            if (parse_i64(a, v, 1, 4096, &x)) return 2;
            o->slots = (int32_t)x;
        } else if (!strcmp(a, "--history")) {
            NEED();
            if (parse_f64(a, v, 0.0, 1e6, &f)) return 2;
            o->history = f;
        } else if (!strcmp(a, "--device-mb")) {
            NEED();
            if (parse_f64(a, v, 0.001, 1e7, &f)) return 2;
            o->device_mb = f;
        } else if (!strcmp(a, "--page-rows")) {
            NEED();
            if (parse_i64(a, v, 1, 65536, &x)) return 2;
            o->page_rows = (int32_t)x;
        } else if (!strcmp(a, "--arrival")) {
            NEED();
            if (parse_i64(a, v, 0, 1 << 20, &x)) return 2;
            o->arrival = (int32_t)x;
        } else if (!strcmp(a, "--async-delay")) {
            NEED();
            if (parse_i64(a, v, 0, 1000, &x)) return 2;
            o->async_delay = (int32_t)x;
        } else if (!strcmp(a, "--threads")) {
            NEED();
            if (parse_i64(a, v, 1, 256, &x)) return 2;
            o->threads = (int32_t)x;
        } else if (!strcmp(a, "--trace")) {
            NEED();
            o->trace = v;
        } else if (!strcmp(a, "--seed")) {
            NEED();
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 0);
            if (errno || end == v || *end || *v == '-') {
                fprintf(stderr, "dhs run: --seed wants an unsigned integer, got '%s'\n", v);
                return 2;
            }
            o->seed = s;
        } else {
            fprintf(stderr, "dhs run: unknown flag '%s' (dhs run --help)\n", a);
            return 2;
        }
#undef NEED
    }
    if (o->slots == 0) o->slots = o->sessions / 2 > 1 ? o->sessions / 2 : 1;
    if (o->threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->threads = n > 0 ? (int32_t)(n < 64 ? n : 64) : 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- progress */
static void progress(void *user, const dhs_ref_progress *p)
{
    (void)user;
    fprintf(stderr, "\rround %-5" PRId64 " active %-3d waiting %-3d done %d/%d  tokens %-7" PRIu64 " logit mismatches %" PRIu64 "  ",
            p->round, p->active, p->waiting, p->done, p->sessions, p->tokens, p->logit_mismatches);
}

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0.0; }
static double mib(uint64_t b) { return (double)b / 1048576.0; }

int cmd_run(int argc, char **argv)
{
    run_opts o;
    int pr = parse_args(argc, argv, &o);
    if (pr == 1) {
        usage(stdout);
        return 0;
    }
    if (pr) return 2;
    int tty = isatty(2) && !o.json;

    dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
    c.model.layout = o.layout;
    c.model.topk = o.topk;
    c.model.seed = o.seed;
    c.sessions = o.sessions;
    c.context = o.context;
    c.tokens = o.tokens;
    c.spec = o.spec;
    c.compare = o.compare;
    c.hier = o.storage_hier;
    c.policy = o.policy;
    c.resolver = o.resolver;
    c.verify = o.verify;
    c.temperature = o.temperature;
    c.seed = o.seed;
    c.slots = o.slots;
    c.history = o.history;
    c.device_bytes = o.device_mb > 0 ? (uint64_t)(o.device_mb * 1048576.0) : 0;
    c.page_rows = o.page_rows;
    c.arrival = o.arrival;
    c.async_delay = o.async_delay;
    c.cuda = !strcmp(o.backend, "cuda");
    c.fetch_rows = o.fetch_rows;
    c.threads = o.threads;
    c.check = o.check;
    c.trace = o.trace;
    c.progress = tty ? progress : NULL;
    if (tty)
        fprintf(stderr, "dhs run: prefill of %d prompts of ~%" PRId64 " positions on %d threads ...\n", o.sessions,
                o.context, o.threads < o.sessions ? o.threads : o.sessions);

    dhs_ref_run_result R;
    dhs_ref_run(&c, &R);
    if (tty) fprintf(stderr, "\n");
    const dhs_ref_cfg *mc = &c.model;
    int both = o.compare;
    int hier = o.compare || o.storage_hier;
    uint64_t cen = R.st.census_direct + R.st.census_hot + R.st.census_host;
    uint64_t hier_sess = R.bytes_hier_hot_tail + R.bytes_hier_staging_share + R.bytes_keys_ring;
    double tps_res = R.t_resident > 0 ? (double)R.decode_tokens / R.t_resident : 0;
    double tps_hier = R.t_hier > 0 ? (double)R.decode_tokens / R.t_hier : 0;
    const char *verify = o.verify == DHS_REF_VERIFY_GREEDY ? "greedy" : "sample";
    if (o.json) {
        cJSON *j = cJSON_CreateObject();
        if (both) cJSON_AddBoolToObject(j, "identical", R.identical);
        else cJSON_AddNullToObject(j, "identical");
        cJSON_AddNumberToObject(j, "logit_mismatches", (double)R.logit_mismatches);
        cJSON_AddNumberToObject(j, "token_mismatches", (double)R.token_mismatches);
        cJSON_AddNumberToObject(j, "logit_rows_compared", (double)R.logit_rows_compared);
        cJSON_AddNumberToObject(j, "tokens", (double)R.tokens);
        cJSON_AddNumberToObject(j, "decode_tokens", (double)R.decode_tokens);
        cJSON_AddNumberToObject(j, "sessions", (double)R.sessions_done);
        cJSON_AddNumberToObject(j, "rounds", (double)R.rounds);
        cJSON_AddNumberToObject(j, "max_active", (double)R.max_active);
        cJSON_AddNumberToObject(j, "accepted", (double)R.accepted);
        cJSON_AddNumberToObject(j, "proposals", (double)R.proposals);
        cJSON_AddNumberToObject(j, "acceptance", R.proposals ? (double)R.accepted / (double)R.proposals : 0.0);
        cJSON *ce = cJSON_AddObjectToObject(j, "census");
        cJSON_AddNumberToObject(ce, "direct", (double)R.st.census_direct);
        cJSON_AddNumberToObject(ce, "hot", (double)R.st.census_hot);
        cJSON_AddNumberToObject(ce, "host", (double)R.st.census_host);
        cJSON_AddNumberToObject(j, "reclaims", (double)R.st.reclaims);
        cJSON_AddNumberToObject(j, "reclaimed_pages", (double)R.st.reclaimed_pages);
        cJSON_AddNumberToObject(j, "repopulated_pages", (double)R.st.repopulated_pages);
        cJSON_AddNumberToObject(j, "admissions", (double)R.st.admissions);
        cJSON_AddNumberToObject(j, "waits", (double)R.st.waits);
        cJSON_AddNumberToObject(j, "distinct_misses", (double)R.st.distinct_misses);
        cJSON_AddNumberToObject(j, "staging_rows", (double)R.st.staging_rows);
        cJSON_AddNumberToObject(j, "staging_rows_peak", (double)R.st.staging_rows_peak);
        cJSON *b = cJSON_AddObjectToObject(j, "bytes");
        cJSON_AddNumberToObject(b, "recover_host_to_device", (double)R.st.host_bytes_copied);
        cJSON_AddNumberToObject(b, "backup_device_to_host", (double)R.st.backup_bytes);
        cJSON_AddNumberToObject(b, "refill_host_to_device", (double)R.st.populate_bytes);
        cJSON_AddNumberToObject(b, "recover_per_token", R.decode_tokens ? (double)R.st.host_bytes_copied / (double)R.decode_tokens : 0.0);
        cJSON *mm = cJSON_AddObjectToObject(j, "memory_per_session");
        cJSON_AddNumberToObject(mm, "positions", (double)R.positions);
        cJSON_AddNumberToObject(mm, "resident_bytes", (double)R.bytes_resident_session);
        cJSON_AddNumberToObject(mm, "hier_device_bytes", hier ? (double)hier_sess : 0.0);
        cJSON_AddNumberToObject(mm, "hier_hot_tail_bytes", (double)R.bytes_hier_hot_tail);
        cJSON_AddNumberToObject(mm, "hier_staging_share_bytes", (double)R.bytes_hier_staging_share);
        cJSON_AddNumberToObject(mm, "index_keys_and_draft_ring_bytes", (double)R.bytes_keys_ring);
        cJSON_AddNumberToObject(j, "device_budget_bytes", (double)R.lib_cfg.device_bytes);
        cJSON *t = cJSON_AddObjectToObject(j, "throughput");
        cJSON_AddStringToObject(t, "backend", o.backend);
        cJSON_AddNumberToObject(t, "resident_tokens_per_s", tps_res);
        cJSON_AddNumberToObject(t, "hier_tokens_per_s", tps_hier);
        cJSON_AddNumberToObject(t, "prefill_s", R.t_prefill);
        cJSON_AddNumberToObject(t, "resident_decode_s", R.t_resident);
        cJSON_AddNumberToObject(t, "hier_decode_s", R.t_hier);
        cJSON_AddNumberToObject(t, "total_s", R.t_total);
        if (o.check) {
            cJSON_AddNumberToObject(j, "invariant_violations", (double)R.invariant_violations);
            cJSON_AddNumberToObject(j, "shadow_mismatches", (double)R.shadow_mismatches);
        }
        cJSON *cf = cJSON_AddObjectToObject(j, "config");
        cJSON_AddStringToObject(cf, "model", o.model);
        cJSON_AddStringToObject(cf, "layout", dhs_ref_layout_str(o.layout));
        cJSON_AddStringToObject(cf, "policy", dhs_policy_str(o.policy));
        cJSON_AddStringToObject(cf, "verify", verify);
        cJSON_AddNumberToObject(cf, "sessions", o.sessions);
        cJSON_AddNumberToObject(cf, "context", (double)o.context);
        cJSON_AddNumberToObject(cf, "tokens", o.tokens);
        cJSON_AddNumberToObject(cf, "spec", o.spec);
        cJSON_AddNumberToObject(cf, "topk", mc->topk);
        cJSON_AddNumberToObject(cf, "seed", (double)o.seed);
        cJSON_AddNumberToObject(cf, "slots", R.lib_cfg.max_requests);
        cJSON_AddNumberToObject(cf, "hot_rows", R.lib_cfg.hot_rows);
        cJSON_AddNumberToObject(cf, "tail_rows", R.lib_cfg.tail_rows);
        cJSON_AddNumberToObject(cf, "page_rows", R.lib_cfg.page_rows);
        cJSON_AddNumberToObject(cf, "async_delay", o.async_delay);
        if (R.error) cJSON_AddStringToObject(j, "error", R.errmsg);
        char *txt = cJSON_PrintUnformatted(j);
        if (txt) printf("%s\n", txt);
        free(txt);
        cJSON_Delete(j);
    } else if (R.error && R.rounds == 0) {
        /* nothing ran: the error below is the whole story */
    } else {
        char mode[64];
        if (o.spec > 1) snprintf(mode, sizeof mode, "speculative rounds of K=%d (%s)", o.spec, verify);
        else snprintf(mode, sizeof mode, "plain decoding (%s)", verify);
        printf("dhs run: reference DSA model 'tiny' (%s layout, %d layers, k=%d, 656-byte FP8 rows), %d sessions x ~%" PRId64
               "-token prompts, %d tokens each, %s, %s backend\n",
               dhs_ref_layout_str(o.layout), mc->n_layers, mc->topk, o.sessions, o.context, o.tokens, mode,
               c.cuda ? "CUDA" : "CPU");
        printf("  prefill      %d prompts in %.1f s (computed once by the model, imported into the hierarchy)\n",
               o.sessions, R.t_prefill);
        printf("  served       %" PRIu64 " sessions, %" PRIu64 " tokens in %" PRIu64 " rounds (up to %" PRIu64
               " sessions per round); %.0f%% of %" PRIu64 " draft proposals accepted\n",
               R.sessions_done, R.tokens, R.rounds, R.max_active, pct(R.accepted, R.proposals), R.proposals);
        if (hier) {
            printf("  memory/sess  at %" PRId64 " positions: resident %.2f MiB, hierarchical %.2f MiB on device "
                   "(hot+tail %.2f, staging share %.2f, index keys + draft ring %.2f): %.1fx less\n",
                   R.positions, mib(R.bytes_resident_session), mib(hier_sess), mib(R.bytes_hier_hot_tail),
                   mib(R.bytes_hier_staging_share), mib(R.bytes_keys_ring),
                   hier_sess ? (double)R.bytes_resident_session / (double)hier_sess : 0.0);
            printf("  census       direct %.1f%%, hot %.1f%%, host %.1f%% of %" PRIu64 " selected rows\n",
                   pct(R.st.census_direct, cen), pct(R.st.census_hot, cen), pct(R.st.census_host, cen), cen);
            printf("  hierarchy    device budget %.1f MiB, %d slots: %" PRIu64 " admissions, %" PRIu64 " waits, %" PRIu64
                   " reclaims (%" PRIu64 " pages), %" PRIu64 " pages refilled, %" PRIu64 " rows staged (peak %" PRIu64 ")\n",
                   mib(R.lib_cfg.device_bytes), R.lib_cfg.max_requests, R.st.admissions, R.st.waits, R.st.reclaims,
                   R.st.reclaimed_pages, R.st.repopulated_pages, R.st.staging_rows, R.st.staging_rows_peak);
            printf("  bytes moved  recover %.1f MiB (%.1f KiB per token), backup %.1f MiB, refill %.1f MiB\n",
                   mib(R.st.host_bytes_copied), R.decode_tokens ? (double)R.st.host_bytes_copied / 1024.0 / (double)R.decode_tokens : 0.0,
                   mib(R.st.backup_bytes), mib(R.st.populate_bytes));
        }
        printf("  throughput   model on the CPU, decode rounds only:");
        if (o.compare || !o.storage_hier) printf(" resident %.0f tok/s", tps_res);
        if (hier) printf("%s hierarchical %.0f tok/s", o.compare ? "," : "", tps_hier);
        printf(" (whole run %.1f s)\n", R.t_total);
        if (o.check)
            printf("  checks       after every round: %" PRIu64 " invariant violations; every located row against the "
                   "model's copy: %" PRIu64 " differ\n",
                   R.invariant_violations, R.shadow_mismatches);
        if (both)
            printf("identical: %s (%" PRIu64 " logit rows of every round compared byte for byte, %" PRIu64
                   " differ; %" PRIu64 " token mismatches)\n",
                   R.identical ? "yes" : "NO", R.logit_rows_compared, R.logit_mismatches, R.token_mismatches);
    }
    if (R.error) fprintf(stderr, "dhs run: %s\n", R.errmsg);
    int rc = R.error ? 3 : (both && !R.identical) ? 1 : 0;
    dhs_ref_run_result_free(&R);
    return rc;
}
