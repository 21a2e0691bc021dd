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
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dhs_plan.h"
#include "args.h"
#include "cmds.h"
#include "outfile.h"
#include "tool.h"
#include "model/deploy.h"
#include "model/run.h"
#include "sim/tracegen.h"

typedef struct run_opts {
    int model;              /* index into models[] */
    int geometry;           /* index into geometries[] */
    int layout, sessions_i, verify, backend, compare, storage, policy, resolver, step, topk_impl, copy_overlap, direct_resolve;
    int page_tables;
    int tail_host;
    int end_early;
    int decoded_optional;   /* dhs_config.decoded_optional (--decoded-optional) */
    int import_mode;        /* DHS_REF_IMPORT_* (the imports' flag) */
    int32_t repop_pages;    /* dhs_config.repop_pages (0: the library's default) */
    int32_t sessions;
    int64_t context;
    int32_t tokens;
    int32_t spec;
    uint64_t seed;
    int json, quiet;
    const char *trace, *output;
    const char *deployment; /* NULL or "none" */
    const char *locality;   /* NULL: the model's own indexer queries */
    const char *group_hot;  /* NULL: one hot-cache size; else a comma list, one per group */
    int32_t topk;
    int32_t layers;         /* 0: the geometry's; else its first N layers */
    int32_t threads;
    int32_t prefill_buffers, prefill_chunk; /* 0: full-residency prefill; R: streamed (docs/FLASHOFFLOAD.md) */
    int64_t shared_prefix;  /* positions every prompt begins with (0: none) */
    int prefix;             /* with shared_prefix: 0 shared (held once), 1 private copies */
    int seen_prefix;        /* --prefix given */
    int32_t arrival;        /* rounds between arrivals */
    int32_t slots;          /* request slots of the hierarchy */
    double history;         /* sessions' imported history the device budget holds on top */
    double device_mb;       /* 0: derived from slots and history */
    int32_t page_rows;
    int32_t async_delay;
    int check;              /* invariant check after every round */
    int fetch_rows;         /* read located rows with dhs_read_location */
    double temperature;
} run_opts;

static const char *const models[] = {"tiny", NULL};
static const char *const layouts[] = {"own", "follow", "compressed", NULL};
static const char *const geometries[] = {"tiny", "glm-5.3", "deepseek-v3.2", NULL};
static const char *const verifies[] = {"greedy", "sample", NULL};
static const char *const backends[] = {"cpu", "cuda", NULL};
static const char *const compares[] = {"resident", "none", "private", NULL};
static const char *const prefixes[] = {"shared", "private", NULL};
static const char *const storages[] = {"hier", "resident", NULL};
static const char *const policies[] = {"lru", "clock", "fifo", "lfu", NULL};
static const char *const resolvers[] = {"host", "device", NULL};
static const char *const steps[] = {"host", "device", "graph", NULL}; /* DHS_REF_STEP_* order */
static const char *const on_off[] = {"off", "on", NULL};
static const char *const tail_where[] = {"device", "host", NULL};
static const char *const round_ends[] = {"wait", "early", "ahead", NULL};
static const char *const topk_impls[] = {"model", "fused", "split", NULL};      /* DHS_REF_TOPK_* order */
static const char *const imports[] = {"device", "host", NULL};                   /* DHS_REF_IMPORT_* order */

#define PROG "dhs run"

/* 0 ok, else the exit status (0 after --help is signalled by *help) */
static int parse_args(int argc, char **argv, run_opts *o, int *help)
{
    memset(o, 0, sizeof *o);
    o->sessions = 16;
    o->context = 4096;
    o->tokens = 64;
    o->storage = -1; /* not given: hier; given with --compare resident: refused */
    o->spec = 4;
    o->seed = 1;
    o->topk = 64;
    o->arrival = 2;
    o->history = 2.0;
    o->page_rows = 64;
    o->async_delay = 1;
    o->temperature = 1.0;
    o->prefill_chunk = 2048;
    o->copy_overlap = 1;
    o->direct_resolve = 1;
    o->page_tables = 1;
    o->decoded_optional = 1;
    o->topk_impl = DHS_REF_TOPK_SPLIT;
    arg_spec sp[] = {
        {.name = "--model", .type = ARG_ENUM, .dest = &o->model, .choices = models,
         .help = "model dims (tiny: d 64, 4 layers, indexer 4x16, V 256)"},
        {.name = "--geometry", .type = ARG_ENUM, .dest = &o->geometry, .choices = geometries,
         .help = "KV geometry (docs/MODEL.md; the real ones: k 2048, 132-B keys, small hidden size, synthetic "
                 "history; --layout and --topk apply to tiny only)"},
        {.name = "--layers", .type = ARG_INT, .dest = &o->layers, .ilo = 1, .ihi = DHS_REF_MAX_LAYERS,
         .def = "the geometry's",
         .help = "the geometry's stack cut to its first N layers: the same row and key formats, producer schedule "
                 "and k with fewer payload sources (long contexts on a small machine)"},
        {.name = "--layout", .type = ARG_ENUM, .dest = &o->layout, .choices = layouts,
         .help = "OWN per layer (V3.2), FOLLOW (GLM IndexShare), COMPRESSED (odd layers read m=4 rows)"},
        A_INT("--sessions", &o->sessions, 1, 4096, "sessions over the run"),
        A_I64("--context", &o->context, 1, (int64_t)1 << 24, "prompt positions (session i: N - (13 i mod 32))"),
        A_INT("--tokens", &o->tokens, 1, 1 << 20, "tokens generated per session"),
        A_INT("--spec", &o->spec, 1, 64, "queries per round (anchor + K-1 drafts); 1 = plain decoding"),
        {.name = "--verify", .type = ARG_ENUM, .dest = &o->verify, .choices = verifies,
         .help = "acceptance rule (sample: Leviathan et al.)"},
        A_DBL("--temperature", &o->temperature, 1e-3, 100.0, "sampling temperature"),
        {.name = "--backend", .type = ARG_ENUM, .dest = &o->backend, .choices = backends,
         .help = "the library backend; with cuda the model computes on the GPU (compressed layout: on the CPU, "
                 "reading the located rows back)"},
        {.name = "--compare", .type = ARG_ENUM, .dest = &o->compare, .choices = compares,
         .help = "resident: run resident storage side by side and compare every round's logits; private (with "
                 "--shared-prefix): run the hierarchy twice, the prefix shared and private copies, and compare every "
                 "session's tokens and the host memory"},
        A_I64("--shared-prefix", &o->shared_prefix, 0, (int64_t)1 << 24,
              "every prompt begins with the same L positions (same tokens; synthetic history: the same rows), held "
              "once by the hierarchy (dhs_request_open_shared; --prefix private: every session its own copy)"),
        {.name = "--prefix", .type = ARG_ENUM, .dest = &o->prefix, .choices = prefixes, .seen = &o->seen_prefix,
         .help = "with --shared-prefix: shared (held once) or private (each session imports its whole prompt)"},
        {.name = "--storage", .type = ARG_ENUM, .dest = &o->storage, .choices = storages,
         .help = "with --compare none: which storage runs (default hier; refused with --compare resident, which runs both)"},
        {.name = "--policy", .type = ARG_ENUM, .dest = &o->policy, .choices = policies, .help = "hot-cache replacement"},
        {.name = "--resolver", .type = ARG_ENUM, .dest = &o->resolver, .choices = resolvers,
         .help = "host: the host resolver; device: the device resolver (dres_spec.h, CLOCK with round epochs)"},
        {.name = "--step", .type = ARG_ENUM, .dest = &o->step, .choices = steps,
         .help = "GPU model's decode step (--backend cuda): host: per layer rows, selections and locations travel "
                 "through the host; device: no host round trip inside the step (dhs_tail_locations + "
                 "dhs_resolve_device; implies --resolver device); graph: the device step captured once as a CUDA "
                 "graph and replayed every round (docs/MODEL.md \"Device step\")"},
        {.name = "--tail-locations", .type = ARG_ENUM, .dest = &o->tail_host, .choices = tail_where,
         .help = "device/graph step, hierarchical: device (default): the library writes the round's tail locations on "
                 "the device (dhs_round_tail_locations_device); host: the host writes them, the step uploads them"},
        {.name = "--round-end", .type = ARG_ENUM, .dest = &o->end_early, .choices = round_ends,
         .help = "hierarchical: wait (default): dhs_round_end after verification; early: a round whose queries are all "
                 "of width 1 ends with dhs_round_end_early while the step runs (the same tokens); ahead: as early, and when "
                 "the next round is known (every session continues with width 1, nobody to admit) it is opened there "
                 "too: its dhs_round_begin and tail locations run under this step (docs/MODEL.md)"},
        {.name = "--copy-overlap", .type = ARG_ENUM, .dest = &o->copy_overlap, .choices = on_off,
         .help = "device/graph step, hierarchical: on (default): dhs_resolve_device with DHS_RESOLVE_SPLIT, the recovery of a "
                 "group's later sources overlaps its earlier layers; off: dhs_resolve_device"},
        {.name = "--direct-resolve", .type = ARG_ENUM, .dest = &o->direct_resolve, .choices = on_off,
         .help = "device/graph step, hierarchical: on (default): a round that cannot miss (dhs_round_may_miss 0) resolves "
                 "with DHS_RESOLVE_DIRECT, one kernel a group and no promotion; off: never (the same tokens)"},
        {.name = "--page-tables", .type = ARG_ENUM, .dest = &o->page_tables, .choices = on_off,
         .help = "device/graph step, hierarchical, with --direct-resolve on: on (default): a round that cannot miss "
                 "takes its locations from dhs_round_page_tables_device inside the split top-k (no resolve call per "
                 "group; with another --topk-impl, or a group of more than 16 sources, as off); off: "
                 "DHS_RESOLVE_DIRECT (the same tokens)"},
        {.name = "--decoded-optional", .type = ARG_ENUM, .dest = &o->decoded_optional, .choices = on_off,
         .help = "hierarchical: on (default): the complete pages decoding adds join the optional history once they "
                 "leave the tail ring (dhs_config.decoded_optional: repopulated while the budget has room, so later "
                 "rounds can be direct); off: they stay on host and in the hot cache (the same tokens)"},
        {.name = "--deployment", .type = ARG_STR, .dest = &o->deployment, .meta = "NAME",
         .help = "device/graph step: both engines' steps also read the weights one GPU of this deployment reads "
                 "(glm-5.3-8xh200, deepseek-v3.2-8xh200; docs/SERVE.md); the tokens do not change",
         .def = "none"},
        A_INT("--topk", &o->topk, 1, 65536, "selection length k"),
        {.name = "--topk-impl", .type = ARG_ENUM, .dest = &o->topk_impl, .choices = topk_impls,
         .help = "the decode rounds' top-k, all three with the same selections and tokens (docs/MODEL.md "
                 "\"Top-k\"): split (default): the library's fused top-k, selection only, in its "
                 "many-blocks-per-query form on the GPU (dhs_cuda_topk_split_n; dhs_topk_fused_ref on the CPU; "
                 "every --step; a NaN index score is an error); fused: the same, one block per query on the GPU "
                 "(dhs_cuda_topk_fused_n); model: the model's own (dhs_ref_topk on the CPU, k_topk on the GPU)"},
        {.name = "--slots", .type = ARG_INT, .dest = &o->slots, .ilo = 1, .ihi = 4096,
         .help = "request slots: sessions served at once", .def = "sessions/2"},
        A_DBL("--history", &o->history, 0.0, 1e6,
              "device budget = staging + required state of every slot + the imported history of H sessions"),
        {.name = "--device-mb", .type = ARG_DOUBLE, .dest = &o->device_mb, .dlo = 0.001, .dhi = 1e7,
         .help = "device budget in MiB (overrides --history)", .def = "from --history"},
        A_INT("--page-rows", &o->page_rows, 1, 65536, "rows per page"),
        {.name = "--import", .type = ARG_ENUM, .dest = &o->import_mode, .choices = imports,
         .help = "how each prompt's rows (the prefill's or the synthetic history's, in host memory either way) enter "
                 "the hierarchy: device (default): dhs_request_import(DHS_IMPORT_DEVICE), the rows taken as the device "
                 "tier's, complete pages copied straight into device pages while the budget has room; host: "
                 "DHS_IMPORT_HOST, copied into the host tier only, device pages filled later by repopulation "
                 "(--repop-pages per round). The tokens are the same (docs/SERVE.md \"Imports\")"},
        A_INT("--repop-pages", &o->repop_pages, 0, 1 << 24,
              "optional pages the hierarchy repopulates from host per round (dhs_config.repop_pages; 0: the "
              "library's default, 64)"),
        A_INT("--arrival", &o->arrival, 0, 1 << 20, "rounds between session arrivals"),
        A_INT("--async-delay", &o->async_delay, 0, 1000, "CPU backend: side copies complete D rounds late"),
        {.name = "--threads", .type = ARG_INT, .dest = &o->threads, .ilo = 1, .ihi = 256, .help = "prefill threads",
         .def = "online CPUs"},
        {.name = "--prefill-buffers", .type = ARG_INT, .dest = &o->prefill_buffers, .ilo = 0, .ihi = 4096,
         .help = "0: the model's full-residency prefill; R >= 2: layer-streamed prefill through R layer buffers "
                 "(on the GPU model with --backend cuda, one prompt at a time; the CPU reference otherwise), "
                 "byte-identical; the model then computes every prompt, also for a real geometry (no synthetic "
                 "history; docs/FLASHOFFLOAD.md section 2)"},
        A_INT("--prefill-chunk", &o->prefill_chunk, 1, 1 << 22, "positions per compute of a streamed prefill"),
        A_BOOL("--check", &o->check,
               "after every round: dhs_check_invariants, and every located row compared with the model's own copy"),
        A_BOOL("--fetch-rows", &o->fetch_rows, "read located rows with dhs_read_location (the CUDA path) on the CPU too"),
        A_OUT("--trace", &o->trace, "write every round's selections (docs/TRACE.md)"),
        {.name = "--group-hot-rows", .type = ARG_STR, .dest = &o->group_hot, .meta = "B0,B1,..",
         .help = "hot-cache rows per group (layer) of the hierarchy, one per group, multiples of --page-rows (0 = the "
                 "default 2 topk): dhs_config.group_hot_rows; dhs plan --hot-per-layer prints such a list"},
        {.name = "--locality", .type = ARG_STR, .dest = &o->locality, .meta = "PRESET|FILE.json",
         .help = "benchmark device, default off: the indexer's queries become synthetic, calibrated so the model's "
                 "own top-k has the consecutive-step overlap of random, dsv32-swe or a JSON model per layer; prints "
                 "target, calibrated and measured overlap and LRU hit per layer (docs/LOCALITY.md)"},
        A_U64("--seed", &o->seed, "weights, prompts and sampling"),
        A_BOOL("--json", &o->json, "one JSON object (with version, commit, date, host, device)"),
        A_OUT("--output", &o->output, "write the results to FILE instead of stdout"),
        {.name = "--quiet", .alias = 'q', .type = ARG_BOOL, .dest = &o->quiet, .help = "no progress on stderr"},
    };
    arg_cmd cmd = {
        .prog = PROG,
        .about = "Runs the reference DSA model (docs/MODEL.md) on sessions that arrive, prefill, decode with\n"
                 "speculative rounds and finish, with their KV rows served by the hierarchy; by default also\n"
                 "with every row resident, comparing every round's logits byte for byte. Without flags: a demo\n"
                 "of about half a minute on 2 cores. Exit status: 0 done (and identical when comparing),\n"
                 "1 a mismatch, 2 bad usage (or --backend cuda without a GPU), 3 a runtime error.",
        .specs = sp,
        .n_specs = (int)(sizeof sp / sizeof sp[0]),
    };
    int r = args_parse(&cmd, argc, argv, NULL, NULL);
    if (r) {
        *help = r == ARGS_HELP;
        return args_exit(r);
    }
    if (o->storage >= 0 && o->compare == 0) {
        fprintf(stderr, "dhs run: --storage %s is ignored with --compare resident (both storages run); "
                        "use --compare none --storage %s\n", storages[o->storage], storages[o->storage]);
        return EXIT_USAGE;
    }
    if (o->storage < 0) o->storage = 0;
    if (o->shared_prefix > 0 && o->shared_prefix >= o->context - (o->context > 64 ? 31 : 0)) {
        fprintf(stderr, "dhs run: --shared-prefix %" PRId64 " must be below the shortest prompt (%" PRId64
                        " positions: --context less 31)\n", o->shared_prefix, o->context - (o->context > 64 ? 31 : 0));
        return EXIT_USAGE;
    }
    if (o->seen_prefix && o->shared_prefix == 0) {
        fprintf(stderr, "dhs run: --prefix %s needs --shared-prefix L (without it every prompt is its own)\n",
                prefixes[o->prefix]);
        return EXIT_USAGE;
    }
    if (o->compare == 2 && (o->shared_prefix == 0 || o->storage != 0)) {
        fprintf(stderr, "dhs run: --compare private needs --shared-prefix L and the hierarchy (--storage hier)\n");
        return EXIT_USAGE;
    }
    if (o->prefill_buffers == 1) {
        fprintf(stderr, "dhs run: --prefill-buffers: 0 (full residency) or at least 2 buffers\n");
        return EXIT_USAGE;
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
    tool_progress_msg(user, 0, "dhs run: round %" PRId64 ", active %d, waiting %d, done %d/%d, tokens %" PRIu64
                      ", logit mismatches %" PRIu64,
                      p->round, p->active, p->waiting, p->done, p->sessions, p->tokens, p->logit_mismatches);
}

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0.0; }
static double mib(uint64_t b) { return (double)b / 1048576.0; }

int cmd_run(int argc, char **argv)
{
    run_opts o;
    int help = 0;
    int pr = parse_args(argc, argv, &o, &help);
    if (pr || help) return pr;
    /* before any work: the backend must exist */
    const char *backend = backends[o.backend];
    if (o.step != 0 && (o.backend != 1 || o.trace || (o.geometry == 0 && o.layout == 2))) {
        fprintf(stderr, PROG ": --step %s needs %s; use --step host\n", steps[o.step],
                o.backend != 1 ? "--backend cuda (the GPU model; the CPU backend has only the host step)"
                : o.trace      ? "the selections on the host for --trace, which it keeps on the device"
                               : "m = 1 sources (the compressed layout's model runs on the CPU)");
        return EXIT_USAGE;
    }
    const dhs_deploy *deploy = NULL;
    if (o.deployment && strcmp(o.deployment, "none")) {
        if (!(deploy = dhs_deploy_find(o.deployment))) {
            fprintf(stderr, "%s: --deployment: unknown '%s' (glm-5.3-8xh200, deepseek-v3.2-8xh200, none)\n", PROG,
                    o.deployment);
            return EXIT_USAGE;
        }
        if (o.backend != 1 || o.step == 0) {
            fprintf(stderr, "%s: --deployment needs --backend cuda with --step device or graph\n", PROG);
            return EXIT_USAGE;
        }
    }
    static dhs_locality_model lm; /* static: large */
    if (o.locality) {
        char lerr[256];
        if (dhs_locality_model_load(o.locality, &lm, lerr, sizeof lerr)) {
            fprintf(stderr, "%s: --locality %s\n", PROG, lerr);
            return EXIT_USAGE;
        }
        if (lm.n_layers == 0) {
            fprintf(stderr, "%s: --locality %s: the model's own queries are the default (random, dsv32-swe or a JSON file)\n",
                    PROG, o.locality);
            return EXIT_USAGE;
        }
        if (o.prefill_buffers) {
            fprintf(stderr, "%s: --locality is not for --prefill-buffers\n", PROG);
            return EXIT_USAGE;
        }
    }
    if (tool_check_backend(PROG, backend)) return EXIT_USAGE;
    if (tool_output(PROG, o.output)) return EXIT_USAGE;
    tool_progress prog;
    tool_progress_init(&prog, o.quiet, 5.0);

    dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
    dhs_ref_layout_parse(layouts[o.layout], &c.model.layout);
    dhs_policy policy;
    dhs_policy_parse(policies[o.policy], &policy);
    c.model.topk = o.topk;
    dhs_ref_geometry geometry;
    dhs_ref_geometry_parse(geometries[o.geometry], &geometry);
    dhs_ref_run_set_geometry(&c, geometry); /* real geometries replace --layout and --topk */
    if (o.layers > c.model.n_layers) {
        fprintf(stderr, PROG ": --layers %d: the %s geometry has %d layers\n", o.layers, geometries[o.geometry], c.model.n_layers);
        return EXIT_USAGE;
    }
    if (o.layers) c.model.n_layers = o.layers;
    if (o.layers && dhs_ref_cfg_check(&c.model)) { /* a stack too short for the geometry's producer schedule */
        const int32_t lo = c.model.layout == DHS_REF_LAYOUT_FOLLOW ? c.model.follow_lead + 1 : 1;
        fprintf(stderr, PROG ": --layers %d: the %s geometry needs at least %d layers (%s)\n", o.layers,
                geometries[o.geometry], lo, dhs_ref_cfg_check(&c.model));
        return EXIT_USAGE;
    }
    c.model.seed = o.seed;
    c.sessions = o.sessions;
    c.context = o.context;
    c.tokens = o.tokens;
    c.spec = o.spec;
    c.compare = o.compare == 0;
    c.hier = o.storage == 0;
    c.policy = policy;
    c.resolver = o.resolver == 1 ? DHS_RESOLVER_DEVICE : DHS_RESOLVER_HOST;
    c.verify = o.verify == 0 ? DHS_REF_VERIFY_GREEDY : DHS_REF_VERIFY_SAMPLE;
    c.temperature = (float)o.temperature;
    c.seed = o.seed;
    c.slots = o.slots;
    c.history = o.history;
    c.device_bytes = o.device_mb > 0 ? (uint64_t)(o.device_mb * 1048576.0) : 0;
    c.page_rows = o.page_rows;
    c.arrival = o.arrival;
    c.async_delay = o.async_delay;
    c.cuda = o.backend == 1;
    c.gpu_model = c.cuda; /* the model computes on the GPU (model/gpu.h) */
    c.fetch_rows = o.fetch_rows;
    c.step = o.step;
    c.topk_impl = o.topk_impl;
    c.copy_overlap = o.copy_overlap;
    c.direct_resolve = o.direct_resolve;
    c.page_tables = o.page_tables;
    c.decoded_optional = o.decoded_optional;
    c.tail_host = o.tail_host;
    c.end_early = o.end_early;
    c.import_mode = o.import_mode;
    c.repop_pages = o.repop_pages;
    c.deploy = deploy;
    c.threads = o.threads;
    c.prefill_buffers = o.prefill_buffers;
    c.prefill_chunk = o.prefill_chunk;
    if (o.prefill_buffers) c.synthetic = 0; /* the streamed prefill is the model's own */
    c.check = o.check;
    c.shared_prefix = o.shared_prefix;
    c.share_private = o.prefix == 1;
    c.trace = out_path(o.trace); /* a temporary renamed into place on success */
    c.locality = o.locality ? &lm : NULL;
    static int32_t ghot[DHS_MAX_SOURCES];
    if (o.group_hot) {
        int32_t n = tool_group_hot_rows(PROG, o.group_hot, o.page_rows, ghot);
        if (n < 0) return EXIT_USAGE;
        c.group_hot_rows = ghot;
        c.n_group_hot = n;
        dhs_ref_model *gm = NULL; /* one size per layer group of the model: checked before any work */
        if (dhs_ref_model_create(&c.model, &gm) != DHS_OK) {
            fprintf(stderr, PROG ": cannot create the model\n");
            return EXIT_RUNTIME;
        }
        const int32_t ng = dhs_ref_n_groups(gm);
        dhs_ref_model_destroy(gm);
        if (n != ng) {
            fprintf(stderr, PROG ": --group-hot-rows: %d sizes for a model of %d groups\n", n, ng);
            return EXIT_USAGE;
        }
    }
    c.progress = progress;
    c.user = &prog;
    tool_progress_msg(&prog, 1, "dhs run: prefill of %d prompts of ~%" PRId64 " positions on %d threads ...", o.sessions,
                      o.context, o.threads < o.sessions ? o.threads : o.sessions);
    if (prog.tty && prog.on) fprintf(stderr, "\n");

    dhs_ref_run_result R, RP;
    memset(&RP, 0, sizeof RP);
    dhs_ref_run(&c, &R);
    /* --compare private: the same prompts again, every session importing its whole prompt */
    const int priv = o.compare == 2;
    uint64_t priv_tok_mismatch = 0;
    if (priv && !R.error) {
        dhs_ref_run_cfg cp = c;
        cp.share_private = 1;
        cp.trace = NULL;
        dhs_ref_run(&cp, &RP);
        if (RP.error) {
            snprintf(R.errmsg, sizeof R.errmsg, "the private-copies run: %.400s", RP.errmsg);
            R.error = 1;
        } else {
            for (int32_t i = 0; i < o.sessions; i++) priv_tok_mismatch += R.tokens_of[i] != RP.tokens_of[i];
        }
    }
    const int priv_identical = priv && !R.error && priv_tok_mismatch == 0 && R.tokens_digest == RP.tokens_digest &&
                               R.sessions_done == (uint64_t)o.sessions && RP.sessions_done == (uint64_t)o.sessions;
    tool_progress_end(&prog);
    /* a --device-mb that can never hold one session is bad input, not a result: exit 2, no record (the
       library finds it: the pools cannot take one request, or admission waits with no session active) */
    if (R.error && R.budget_too_small) {
        fprintf(stderr, PROG ": --device-mb %g can never fit one session: %s\n", o.device_mb, R.errmsg);
        dhs_ref_run_result_free(&R);
        return EXIT_USAGE;
    }
    const dhs_ref_cfg *mc = &c.model;
    int both = c.compare;
    int hier = c.compare || c.hier;
    uint64_t cen = R.st.census_direct + R.st.census_hot + R.st.census_host;
    uint64_t hier_sess = R.bytes_hier_hot_tail + R.bytes_hier_staging_share + R.bytes_keys_ring;
    double tps_res = R.t_resident > 0 ? (double)R.decode_tokens / R.t_resident : 0;
    double tps_hier = R.t_hier > 0 ? (double)R.decode_tokens / R.t_hier : 0;
    const char *verify = verifies[o.verify];
    if (o.json) {
        cJSON *j = cJSON_CreateObject();
        tool_prov_cjson(j, backend);
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
        cJSON_AddStringToObject(t, "backend", backend);
        cJSON_AddNumberToObject(t, "resident_tokens_per_s", tps_res);
        cJSON_AddNumberToObject(t, "hier_tokens_per_s", tps_hier);
        cJSON_AddNumberToObject(t, "prefill_s", R.t_prefill);
        if (o.prefill_buffers) { /* the streamed prefill: loads, buffers against full residency (largest prompt) */
            cJSON *pj = cJSON_AddObjectToObject(j, "prefill");
            if (pj) {
                cJSON_AddNumberToObject(pj, "buffers", o.prefill_buffers);
                cJSON_AddNumberToObject(pj, "chunk", o.prefill_chunk);
                cJSON_AddNumberToObject(pj, "layer_loads", (double)R.prefill_loads);
                cJSON_AddNumberToObject(pj, "buffer_bytes", (double)R.prefill_buffer_bytes);
                cJSON_AddNumberToObject(pj, "resident_bytes", (double)R.prefill_resident_bytes);
                cJSON_AddStringToObject(pj, "on", R.gpu_model ? "gpu" : "cpu");
            }
        }
        if (hier) { /* the hierarchical engine's imports: only the dhs_request_import calls are timed */
            cJSON *ij = cJSON_AddObjectToObject(j, "imports");
            cJSON_AddStringToObject(ij, "mode", imports[o.import_mode]);
            cJSON_AddNumberToObject(ij, "imports", (double)R.imp.imports);
            cJSON_AddNumberToObject(ij, "bytes", (double)R.imp.import_bytes);
            cJSON_AddNumberToObject(ij, "import_s", R.imp.import_s);
            cJSON_AddNumberToObject(ij, "import_s_per_session", R.imp.imports ? R.imp.import_s / (double)R.imp.imports : 0.0);
            cJSON_AddNumberToObject(ij, "import_gbps", R.imp.import_s > 0 ? (double)R.imp.import_bytes / R.imp.import_s / 1e9 : 0.0);
            cJSON_AddNumberToObject(ij, "keys_s", R.imp.keys_s);
            cJSON_AddNumberToObject(ij, "repop_pages_per_round", R.lib_cfg.repop_pages);
            cJSON_AddNumberToObject(ij, "optional_bytes_peak", (double)R.opt_bytes_peak);
            cJSON_AddNumberToObject(ij, "optional_fill_rounds", (double)R.opt_fill_rounds);
            cJSON_AddBoolToObject(ij, "optional_filling_at_end", R.opt_filling_at_end);
        }
        cJSON_AddNumberToObject(t, "resident_decode_s", R.t_resident);
        cJSON_AddNumberToObject(t, "hier_decode_s", R.t_hier);
        cJSON_AddNumberToObject(t, "total_s", R.t_total);
        cJSON_AddStringToObject(t, "step", steps[o.step]);
        if (o.step != 0) { /* host µs per round of the device step, per engine */
            cJSON *su = cJSON_AddObjectToObject(t, "step_host_us_per_round");
            for (int w = 0; w < 2; w++) {
                const dhs_ref_step_times *st = w ? &R.step_hier : &R.step_res;
                uint64_t nr = st->rounds - st->captures;
                if (!st->rounds) continue;
                cJSON *e = cJSON_AddObjectToObject(su, w ? "hier" : "resident");
                cJSON_AddNumberToObject(e, "control", nr ? 1e6 * st->control_s / (double)nr : 0.0);
                cJSON_AddNumberToObject(e, "launch", nr ? 1e6 * st->launch_s / (double)nr : 0.0);
                cJSON_AddNumberToObject(e, "wait", nr ? 1e6 * st->wait_s / (double)nr : 0.0);
                cJSON_AddNumberToObject(e, "rounds", (double)nr);
                cJSON_AddNumberToObject(e, "captures", (double)st->captures);
                cJSON_AddNumberToObject(e, "capture_rounds_s", st->capture_s);
                cJSON_AddNumberToObject(e, "split_rounds", (double)st->split_rounds);
                cJSON_AddNumberToObject(e, "direct_rounds", (double)st->direct_rounds);
                cJSON_AddNumberToObject(e, "page_table_rounds", (double)st->page_table_rounds);
            }
        }
        { /* every round, any step: the host drafter and the library's round calls, per engine */
            cJSON *ru = cJSON_AddObjectToObject(t, "round_host_us");
            for (int w = 0; w < 2; w++) {
                const dhs_ref_step_times *st = w ? &R.step_hier : &R.step_res;
                double nr = (double)st->all_rounds;
                if (!st->all_rounds) continue;
                cJSON *e = cJSON_AddObjectToObject(ru, w ? "hier" : "resident");
                cJSON_AddNumberToObject(e, "rounds", nr);
                cJSON_AddNumberToObject(e, "draft", 1e6 * st->draft_s / nr);
                cJSON_AddNumberToObject(e, "round_begin", 1e6 * st->begin_s / nr);
                cJSON_AddNumberToObject(e, "round_end", 1e6 * st->end_s / nr);
                cJSON_AddNumberToObject(e, "early_ends", (double)st->early_ends); /* --round-end early */
                cJSON_AddNumberToObject(e, "ahead_rounds", (double)st->ahead_rounds); /* --round-end ahead */
                cJSON_AddNumberToObject(e, "verify", 1e6 * st->verify_s / nr);
                cJSON_AddNumberToObject(e, "meter", 1e6 * st->meter_s / nr);
                /* the host's time around the target by part (model.h dhs_ref_step_times host_rounds); with
                   both engines in one run, "between" holds the other engine's round */
                const double hr = (double)st->host_rounds;
                cJSON *hp = cJSON_AddObjectToObject(e, "parts");
                cJSON_AddNumberToObject(hp, "rounds", hr);
                cJSON_AddNumberToObject(hp, "tail", hr > 0 ? 1e6 * st->tail_s / hr : 0.0);
                cJSON_AddNumberToObject(hp, "between", hr > 0 ? 1e6 * st->between_s / hr : 0.0);
                cJSON_AddNumberToObject(hp, "head", hr > 0 ? 1e6 * st->head_s / hr : 0.0);
                cJSON_AddNumberToObject(hp, "control", hr > 0 ? 1e6 * st->xcontrol_s / hr : 0.0);
                cJSON_AddNumberToObject(hp, "prelaunch", hr > 0 ? 1e6 * st->prelaunch_s / hr : 0.0);
            }
        }
        if (o.check) {
            cJSON_AddNumberToObject(j, "invariant_violations", (double)R.invariant_violations);
            cJSON_AddNumberToObject(j, "shadow_mismatches", (double)R.shadow_mismatches);
        }
        cJSON *cf = cJSON_AddObjectToObject(j, "config");
        cJSON_AddStringToObject(cf, "model", models[o.model]);
        cJSON_AddStringToObject(cf, "layout", dhs_ref_layout_str(mc->layout));
        dhs_ref_run_json_geometry(j, &c, &R); /* geometry, hidden, synthetic history, model_on */
        dhs_ref_run_json_locality(j, &R, mc->n_layers);
        cJSON_AddStringToObject(cf, "policy", dhs_policy_str(policy));
        cJSON_AddStringToObject(cf, "verify", verify);
        cJSON_AddNumberToObject(cf, "sessions", o.sessions);
        cJSON_AddNumberToObject(cf, "context", (double)o.context);
        cJSON_AddNumberToObject(cf, "tokens", o.tokens);
        cJSON_AddNumberToObject(cf, "spec", o.spec);
        cJSON_AddNumberToObject(cf, "topk", mc->topk);
        char seed_txt[24]; /* exact: a double would round seeds above 2^53 */
        snprintf(seed_txt, sizeof seed_txt, "%" PRIu64, (uint64_t)o.seed);
        cJSON_AddRawToObject(cf, "seed", seed_txt);
        cJSON_AddNumberToObject(cf, "slots", R.lib_cfg.max_requests);
        cJSON_AddNumberToObject(cf, "hot_rows", R.lib_cfg.hot_rows);
        if (o.group_hot) {
            cJSON *gh = cJSON_AddArrayToObject(cf, "group_hot_rows");
            for (int32_t g = 0; gh && g < c.n_group_hot; g++)
                cJSON_AddItemToArray(gh, cJSON_CreateNumber(R.lib_cfg.group_hot_rows[g] ? R.lib_cfg.group_hot_rows[g]
                                                                                         : R.lib_cfg.hot_rows));
        }
        cJSON_AddNumberToObject(cf, "tail_rows", R.lib_cfg.tail_rows);
        cJSON_AddNumberToObject(cf, "page_rows", R.lib_cfg.page_rows);
        cJSON_AddNumberToObject(cf, "async_delay", o.async_delay);
        cJSON_AddStringToObject(cf, "step", steps[o.step]);
        cJSON_AddStringToObject(cf, "topk_impl", topk_impls[o.topk_impl]);
        cJSON_AddStringToObject(cf, "import", imports[o.import_mode]);
        cJSON_AddNumberToObject(cf, "repop_pages", R.lib_cfg.repop_pages);
        cJSON_AddBoolToObject(cf, "copy_overlap", o.copy_overlap && o.step != 0);
        cJSON_AddBoolToObject(cf, "direct_resolve", o.direct_resolve && o.step != 0);
        cJSON_AddBoolToObject(cf, "page_tables", o.page_tables && o.direct_resolve && o.step != 0 && o.topk_impl == DHS_REF_TOPK_SPLIT);
        cJSON_AddBoolToObject(cf, "decoded_optional", o.decoded_optional != 0);
        cJSON_AddStringToObject(cf, "tail_locations", tail_where[o.tail_host]);
        cJSON_AddStringToObject(cf, "round_end", round_ends[o.end_early]);
        cJSON_AddNumberToObject(cf, "prefill_buffers", o.prefill_buffers);
        if (o.prefill_buffers) cJSON_AddNumberToObject(cf, "prefill_chunk", o.prefill_chunk);
        char dg[24];
        snprintf(dg, sizeof dg, "%016" PRIx64, R.tokens_digest);
        cJSON_AddStringToObject(j, "tokens_digest", dg);
        if (o.shared_prefix > 0) {
            cJSON *sp = cJSON_AddObjectToObject(j, "shared_prefix");
            cJSON_AddNumberToObject(sp, "positions", (double)o.shared_prefix);
            cJSON_AddStringToObject(sp, "mode", prefixes[o.prefix]);
            cJSON_AddNumberToObject(sp, "shared_opens", (double)R.shared_opens);
            cJSON_AddNumberToObject(sp, "host_bytes_peak", (double)R.host_bytes_peak);
            cJSON_AddNumberToObject(sp, "host_bytes_shared_peak", (double)R.host_shared_peak);
            cJSON_AddNumberToObject(sp, "sessions_peak", (double)R.sessions_peak);
            if (priv) {
                cJSON_AddBoolToObject(sp, "identical_to_private", priv_identical);
                cJSON_AddNumberToObject(sp, "private_host_bytes_peak", (double)RP.host_bytes_peak);
                cJSON_AddNumberToObject(sp, "private_sessions_peak", (double)RP.sessions_peak);
                cJSON_AddNumberToObject(sp, "session_token_mismatches", (double)priv_tok_mismatch);
                snprintf(dg, sizeof dg, "%016" PRIx64, RP.tokens_digest);
                cJSON_AddStringToObject(sp, "private_tokens_digest", dg);
            }
        }
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
        printf("dhs run: reference DSA model '%s' (%s layout, %d layers, k=%d, 656-byte FP8 rows), %d sessions x ~%" PRId64
               "-token prompts, %d tokens each, %s, %s backend\n",
               c.geometry, dhs_ref_layout_str(mc->layout), mc->n_layers, mc->topk, o.sessions, o.context, o.tokens, mode,
               c.cuda ? "CUDA" : "CPU");
        printf("  what         a small model (d 64, vocabulary 256) whose KV rows have the real DSA shape; %s\n",
               both ? "the same schedule runs twice, once with every row resident on the device (the baseline)\n"
                      "               and once through the hierarchy, and every round's logits are compared byte for byte"
                    : (c.hier ? "served through the hierarchy only (--compare none)" : "every row resident only (--compare none)"));
        dhs_ref_print_geometry(stdout, &c, &R); /* geometry, hidden size, synthetic history, where the model ran */
        dhs_ref_print_locality(stdout, &R, mc->n_layers);
        printf("  prefill      %d prompts in %.1f s (imported into the hierarchy)\n", o.sessions, R.t_prefill);
        printf("  served       %" PRIu64 " sessions, %" PRIu64 " tokens in %" PRIu64 " rounds (up to %" PRIu64
               " sessions per round); %.0f%% of %" PRIu64 " draft proposals accepted\n",
               R.sessions_done, R.tokens, R.rounds, R.max_active, pct(R.accepted, R.proposals), R.proposals);
        if (hier) {
            double ratio = hier_sess ? (double)R.bytes_resident_session / (double)hier_sess : 0.0;
            printf("  memory/sess  at %" PRId64 " positions: resident %.2f MiB, hierarchical %.2f MiB on device "
                   "(hot+tail %.2f, staging share %.2f, index keys + draft ring %.2f): %.1fx %s\n",
                   R.positions, mib(R.bytes_resident_session), mib(hier_sess), mib(R.bytes_hier_hot_tail),
                   mib(R.bytes_hier_staging_share), mib(R.bytes_keys_ring), ratio >= 1.0 ? ratio : (ratio > 0 ? 1.0 / ratio : 0.0),
                   ratio >= 1.0 ? "less" : "more (the context is too short for the hierarchy to save memory)");
            printf("  census       direct %.1f%%, hot %.1f%%, host %.1f%% of %" PRIu64 " selected rows\n"
                   "               (where each selected row was found: direct = resident on the device, hot = in the hot\n"
                   "               cache, host = copied from host memory this round)\n",
                   pct(R.st.census_direct, cen), pct(R.st.census_hot, cen), pct(R.st.census_host, cen), cen);
            printf("  hierarchy    device budget %.1f MiB, %d slots: %" PRIu64 " admissions, %" PRIu64 " waits, %" PRIu64
                   " reclaims (%" PRIu64 " pages), %" PRIu64 " pages refilled, %" PRIu64 " rows staged (peak %" PRIu64 ")\n"
                   "               (a wait: a session could not be admitted until memory freed up; a reclaim: device\n"
                   "               pages of a session's history given back, its rows then served from host)\n",
                   mib(R.lib_cfg.device_bytes), R.lib_cfg.max_requests, R.st.admissions, R.st.waits, R.st.reclaims,
                   R.st.reclaimed_pages, R.st.repopulated_pages, R.st.staging_rows, R.st.staging_rows_peak);
            printf("  imports      %s: %" PRIu64 " histories, %.1f MiB in %.3f s of dhs_request_import (%.4f s per session, "
                   "%.2f GB/s); optional device pages peaked at %.1f MiB after %" PRIu64 " decode rounds%s (%d "
                   "repopulated per round)\n",
                   imports[o.import_mode], R.imp.imports, mib(R.imp.import_bytes), R.imp.import_s,
                   R.imp.imports ? R.imp.import_s / (double)R.imp.imports : 0.0,
                   R.imp.import_s > 0 ? (double)R.imp.import_bytes / R.imp.import_s / 1e9 : 0.0, mib(R.opt_bytes_peak),
                   R.opt_fill_rounds, R.opt_filling_at_end ? ", still filling at the end" : "", R.lib_cfg.repop_pages);
            printf("  bytes moved  recover %.1f MiB (%.1f KiB per token), backup %.1f MiB, refill %.1f MiB\n",
                   mib(R.st.host_bytes_copied), R.decode_tokens ? (double)R.st.host_bytes_copied / 1024.0 / (double)R.decode_tokens : 0.0,
                   mib(R.st.backup_bytes), mib(R.st.populate_bytes));
        }
        printf("  throughput   model on the %s, decode rounds only:", R.gpu_model ? "GPU" : "CPU");
        if (c.compare || !c.hier) printf(" resident %.0f tok/s", tps_res);
        if (hier) printf("%s hierarchical %.0f tok/s", c.compare ? "," : "", tps_hier);
        printf(" (whole run %.1f s)\n"
               "               (%s)\n",
               R.t_total, R.gpu_model ? "the small model's GPU pass, not a tuned serving rate: bench/RESULTS.md has GPU figures"
                                      : "a CPU figure for the small model, not a GPU serving rate: bench/RESULTS.md has GPU figures");
        if (o.step != 0)
            for (int w = 0; w < 2; w++) {
                const dhs_ref_step_times *st = w ? &R.step_hier : &R.step_res;
                uint64_t nr = st->rounds - st->captures;
                if (!st->rounds || !nr) continue;
                printf("  step         %s (%s): host us per round: control plane %.1f, launch %.1f, waiting for the GPU "
                       "%.1f over %" PRIu64 " rounds (%" PRIu64 " captures)\n",
                       steps[o.step], w ? "hierarchical" : "resident", 1e6 * st->control_s / (double)nr,
                       1e6 * st->launch_s / (double)nr, 1e6 * st->wait_s / (double)nr, nr, st->captures);
            }
        if (o.topk_impl != DHS_REF_TOPK_MODEL)
            printf("  top-k        %s: the decode rounds select with the library's fused top-k (%s), selection only\n",
                   topk_impls[o.topk_impl],
                   !R.gpu_model ? "dhs_topk_fused_ref"
                   : o.topk_impl == DHS_REF_TOPK_SPLIT ? "dhs_cuda_topk_split_n"
                                                       : "dhs_cuda_topk_fused_n");
        else
            printf("  top-k        model: the decode rounds select with the model's own top-k (%s)\n",
                   R.gpu_model ? "k_topk" : "dhs_ref_topk");
        if (o.check)
            printf("  checks       after every round: %" PRIu64 " invariant violations; every located row against the "
                   "model's copy: %" PRIu64 " differ\n",
                   R.invariant_violations, R.shadow_mismatches);
        if (o.shared_prefix > 0 && hier) {
            printf("  prefix       every prompt begins with the same %" PRId64 " positions, %s: host rows peak %.1f MiB "
                   "(%.1f MiB of it held by several sessions), up to %" PRIu64 " sessions at once, %" PRIu64
                   " opened on the prefix; tokens digest %016" PRIx64 "\n",
                   o.shared_prefix, o.prefix ? "each session its own copy" : "held once (dhs_request_open_shared)",
                   mib(R.host_bytes_peak), mib(R.host_shared_peak), R.sessions_peak, R.shared_opens, R.tokens_digest);
            if (priv)
                printf("  private      the same prompts, each session its own copy: host rows peak %.1f MiB, up to %" PRIu64
                       " sessions at once; tokens digest %016" PRIx64 "\n",
                       mib(RP.host_bytes_peak), RP.sessions_peak, RP.tokens_digest);
        }
        if (priv)
            printf("identical: %s (every session's tokens, shared prefix vs private copies: %" PRIu64
                   " sessions differ; host rows %.1f MiB vs %.1f MiB)\n",
                   priv_identical ? "yes" : "NO", priv_tok_mismatch, mib(R.host_bytes_peak), mib(RP.host_bytes_peak));
        if (both)
            printf("identical: %s (%" PRIu64 " logit rows of every round compared byte for byte, %" PRIu64
                   " differ; %" PRIu64 " token mismatches)\n",
                   R.identical ? "yes" : "NO", R.logit_rows_compared, R.logit_mismatches, R.token_mismatches);
        printf("docs/MODEL.md explains the model, every line above and the flags (dhs run --help).\n");
    }
    if (R.error) fprintf(stderr, "dhs run: %s\n", R.errmsg);
    int rc = R.error ? 3 : ((both && !R.identical) || (priv && !priv_identical)) ? 1 : 0;
    dhs_ref_run_result_free(&R);
    dhs_ref_run_result_free(&RP);
    return rc;
}
