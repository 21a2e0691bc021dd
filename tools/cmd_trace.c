/* cmd_trace.c - `dhs trace gen|info`: synthetic selection traces and their
 * statistics (format: docs/TRACE.md). Exit status: 0 success, 2 bad usage or
 * a bad file (unreadable, truncated, corrupted, unwritable), 1 out of memory. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmds.h"
#include "sim/trace.h"
#include "sim/tracegen.h"
#include "sim/util.h"

static void trace_usage(FILE *f)
{
    fprintf(f,
            "usage: dhs trace <subcommand> [flags]\n\n"
            "subcommands:\n"
            "  gen    write a synthetic selection trace (locality model: docs/TRACE.md)\n"
            "  info   print a trace's header and totals (reuse, overlap, padding)\n\n"
            "dhs trace <subcommand> --help for its flags.\n");
}

/* ---------------------------------------------------------------- parsing */
static int parse_i64(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "dhs trace %s: --%s wants an integer in %" PRId64 "..%" PRId64 ", got '%s'\n", cmd, flag, lo,
                hi, s);
        return 0;
    }
    *out = v;
    return 1;
}

static int parse_u64(const char *cmd, const char *flag, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (*s == '-') goto bad;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end) goto bad;
    *out = v;
    return 1;
bad:
    fprintf(stderr, "dhs trace %s: --%s wants an unsigned integer, got '%s'\n", cmd, flag, s);
    return 0;
}

static int parse_prob(const char *cmd, const char *flag, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0.0 && v <= 1.0)) {
        fprintf(stderr, "dhs trace %s: --%s wants a number in [0, 1], got '%s'\n", cmd, flag, s);
        return 0;
    }
    *out = v;
    return 1;
}

/* ---------------------------------------------------------------- gen */
static void gen_usage(FILE *f)
{
    dhs_tracegen_params d = dhs_tracegen_default();
    fprintf(f,
            "usage: dhs trace gen --out FILE [flags]\n\n"
            "Writes a synthetic selection trace. Deterministic: the same flags and seed give\n"
            "the same bytes. Locality model and every parameter: docs/TRACE.md.\n\n"
            "workload:\n"
            "  --out FILE            output trace (required)\n"
            "  --seed S              random seed (%" PRIu64 ")\n"
            "  --requests N          requests (%d)\n"
            "  --rounds R            rounds at most (%d)\n"
            "  --batch B             live requests at most; later ones arrive when one ends (all)\n"
            "  --out-len T           tokens per request, drawn in [T/2, T]; 0 = until the last round (%" PRId64 ")\n"
            "  --context L           largest imported prefix, positions (%" PRId64 ")\n"
            "  --context-min L       smallest prefix (context/2)\n"
            "  --spec K              queries per request per round (%d = no speculation)\n"
            "  --accept P            acceptance probability per proposal (%g)\n"
            "architecture:\n"
            "  --k K                 rows per selection (%d)\n"
            "  --producers G         index producers / groups (%d)\n"
            "  --sources-per-producer F  payload sources per producer (%d)\n"
            "  --row-bytes B         bytes per row (%u)\n"
            "  --m M                 positions per row (%u)\n"
            "locality model (rows):\n"
            "  --sinks S             attention sinks (%d)\n"
            "  --window W            local window (%d)\n"
            "  --window-full W       newest rows always selected (%d)\n"
            "  --window-density P    share of the older window selected (%g)\n"
            "  --clusters C          topical sets per request (%d)\n"
            "  --cluster-radius R    half-width of a topical band (%d)\n"
            "  --cluster-density P   share of a band belonging to the topic (%g)\n"
            "  --topic-on P          off -> on per round (%g)\n"
            "  --topic-off P         on -> off per round (%g)\n"
            "  --drift D             center step per round, uniform in [-D, D] (%d)\n"
            "  --topic-switch P      per-round chance a set jumps elsewhere (%g)\n"
            "  --tail-min F          share of k kept for the random tail (%g)\n"
            "  --spec-jitter P       share of query 0's rows replaced in queries j > 0 (%g)\n"
            "  --overlap-min P       adjacent-producer overlap, lower bound (%g)\n"
            "  --overlap-max P       adjacent-producer overlap, upper bound (%g)\n"
            "  --shift-radius R      replaced rows move by 1..R (%d)\n"
            "  --order score|sorted  order of rows within a query (score)\n"
            "  --name NAME           trace name (%s)\n"
            "  -h, --help            this help\n",
            d.seed, d.n_requests, d.n_rounds, d.out_len, d.context, d.spec, d.accept, d.k, d.n_producers,
            d.sources_per_producer, d.row_bytes, d.m, d.sinks, d.window, d.window_full, d.window_density, d.clusters,
            d.cluster_radius, d.cluster_density, d.topic_on, d.topic_off, d.drift, d.topic_switch, d.tail_min,
            d.spec_jitter, d.overlap_min, d.overlap_max, d.shift_radius, d.name);
}

enum {
    O_OUT = 256, O_SEED, O_REQUESTS, O_ROUNDS, O_BATCH, O_OUTLEN, O_CONTEXT, O_CONTEXT_MIN, O_SPEC, O_ACCEPT, O_K,
    O_PRODUCERS, O_SPP, O_ROW_BYTES, O_M, O_SINKS, O_WINDOW, O_WINDOW_FULL, O_WINDOW_DENSITY, O_CLUSTERS,
    O_CLUSTER_RADIUS, O_CLUSTER_DENSITY, O_TOPIC_ON, O_TOPIC_OFF, O_DRIFT, O_TOPIC_SWITCH, O_TAIL_MIN,
    O_SPEC_JITTER, O_OVERLAP_MIN, O_OVERLAP_MAX, O_SHIFT_RADIUS, O_ORDER, O_NAME, O_JSON
};

static int bad_option(const char *cmd, int argc, char **argv)
{
    const char *a = optind - 1 < argc && optind >= 1 ? argv[optind - 1] : "?";
    fprintf(stderr, "dhs trace %s: unknown option or missing value: '%s' (see dhs trace %s --help)\n", cmd, a, cmd);
    return 2;
}

static int trace_gen(int argc, char **argv)
{
    static const struct option opts[] = {
        {"out", required_argument, 0, O_OUT},
        {"seed", required_argument, 0, O_SEED},
        {"requests", required_argument, 0, O_REQUESTS},
        {"rounds", required_argument, 0, O_ROUNDS},
        {"batch", required_argument, 0, O_BATCH},
        {"out-len", required_argument, 0, O_OUTLEN},
        {"context", required_argument, 0, O_CONTEXT},
        {"context-min", required_argument, 0, O_CONTEXT_MIN},
        {"spec", required_argument, 0, O_SPEC},
        {"accept", required_argument, 0, O_ACCEPT},
        {"k", required_argument, 0, O_K},
        {"producers", required_argument, 0, O_PRODUCERS},
        {"sources-per-producer", required_argument, 0, O_SPP},
        {"row-bytes", required_argument, 0, O_ROW_BYTES},
        {"m", required_argument, 0, O_M},
        {"sinks", required_argument, 0, O_SINKS},
        {"window", required_argument, 0, O_WINDOW},
        {"window-full", required_argument, 0, O_WINDOW_FULL},
        {"window-density", required_argument, 0, O_WINDOW_DENSITY},
        {"clusters", required_argument, 0, O_CLUSTERS},
        {"cluster-radius", required_argument, 0, O_CLUSTER_RADIUS},
        {"cluster-density", required_argument, 0, O_CLUSTER_DENSITY},
        {"topic-on", required_argument, 0, O_TOPIC_ON},
        {"topic-off", required_argument, 0, O_TOPIC_OFF},
        {"drift", required_argument, 0, O_DRIFT},
        {"topic-switch", required_argument, 0, O_TOPIC_SWITCH},
        {"tail-min", required_argument, 0, O_TAIL_MIN},
        {"spec-jitter", required_argument, 0, O_SPEC_JITTER},
        {"overlap-min", required_argument, 0, O_OVERLAP_MIN},
        {"overlap-max", required_argument, 0, O_OVERLAP_MAX},
        {"shift-radius", required_argument, 0, O_SHIFT_RADIUS},
        {"order", required_argument, 0, O_ORDER},
        {"name", required_argument, 0, O_NAME},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    dhs_tracegen_params p = dhs_tracegen_default();
    const char *out = NULL;
    int64_t v;
    int c;
    optind = 1;
    opterr = 0;
#define I64(field, lo, hi)                                                   \
    do {                                                                     \
        if (!parse_i64("gen", opts[li].name, optarg, lo, hi, &v)) return 2; \
        field = v;                                                           \
    } while (0)
#define PROB(field)                                                     \
    do {                                                                \
        if (!parse_prob("gen", opts[li].name, optarg, &field)) return 2; \
    } while (0)
    int li = 0;
    while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
        if (c != 'h' && c != '?' && c != ':') {
            /* getopt_long sets li only for long options; find it by value */
            for (li = 0; opts[li].name && opts[li].val != c; li++) {}
        }
        switch (c) {
        case 'h': gen_usage(stdout); return 0;
        case O_OUT: out = optarg; break;
        case O_SEED:
            if (!parse_u64("gen", "seed", optarg, &p.seed)) return 2;
            break;
        case O_REQUESTS: I64(p.n_requests, 1, DHS_TRACE_MAX_REQUESTS); break;
        case O_ROUNDS: I64(p.n_rounds, 0, INT32_MAX); break;
        case O_BATCH: I64(p.batch, 1, INT32_MAX); break;
        case O_OUTLEN: I64(p.out_len, 0, INT64_C(1) << 36); break;
        case O_CONTEXT: I64(p.context, 1, INT64_C(1) << 36); break;
        case O_CONTEXT_MIN: I64(p.context_min, 1, INT64_C(1) << 36); break;
        case O_SPEC: I64(p.spec, 1, DHS_TRACE_MAX_QUERIES); break;
        case O_ACCEPT: PROB(p.accept); break;
        case O_K: I64(p.k, 1, DHS_TRACE_MAX_K); break;
        case O_PRODUCERS: I64(p.n_producers, 1, DHS_TRACE_MAX_GROUPS); break;
        case O_SPP: I64(p.sources_per_producer, 1, DHS_TRACE_MAX_SOURCES); break;
        case O_ROW_BYTES: I64(p.row_bytes, 1, UINT32_MAX); break;
        case O_M: I64(p.m, 1, DHS_TRACE_MAX_M); break;
        case O_SINKS: I64(p.sinks, 0, 1 << 20); break;
        case O_WINDOW: I64(p.window, 0, 1 << 24); break;
        case O_WINDOW_FULL: I64(p.window_full, 0, 1 << 24); break;
        case O_WINDOW_DENSITY: PROB(p.window_density); break;
        case O_CLUSTERS: I64(p.clusters, 0, 1 << 20); break;
        case O_CLUSTER_RADIUS: I64(p.cluster_radius, 0, 1 << 20); break;
        case O_CLUSTER_DENSITY: PROB(p.cluster_density); break;
        case O_TOPIC_ON: PROB(p.topic_on); break;
        case O_TOPIC_OFF: PROB(p.topic_off); break;
        case O_DRIFT: I64(p.drift, 0, 1 << 20); break;
        case O_TOPIC_SWITCH: PROB(p.topic_switch); break;
        case O_TAIL_MIN: PROB(p.tail_min); break;
        case O_SPEC_JITTER: PROB(p.spec_jitter); break;
        case O_OVERLAP_MIN: PROB(p.overlap_min); break;
        case O_OVERLAP_MAX: PROB(p.overlap_max); break;
        case O_SHIFT_RADIUS: I64(p.shift_radius, 1, 1 << 20); break;
        case O_ORDER:
            if (!strcmp(optarg, "score")) p.sorted = 0;
            else if (!strcmp(optarg, "sorted")) p.sorted = 1;
            else {
                fprintf(stderr, "dhs trace gen: --order wants score or sorted, got '%s'\n", optarg);
                return 2;
            }
            break;
        case O_NAME:
            if (strlen(optarg) > DHS_TRACE_NAME_MAX) {
                fprintf(stderr, "dhs trace gen: --name longer than %d bytes\n", DHS_TRACE_NAME_MAX);
                return 2;
            }
            snprintf(p.name, sizeof p.name, "%s", optarg);
            break;
        default: return bad_option("gen", argc, argv);
        }
    }
#undef I64
#undef PROB
    if (optind < argc) {
        fprintf(stderr, "dhs trace gen: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!out) {
        fprintf(stderr, "dhs trace gen: --out FILE is required (see dhs trace gen --help)\n");
        return 2;
    }
    char err[512];
    if (dhs_tracegen_check(&p, err, sizeof err)) {
        fprintf(stderr, "dhs trace gen: %s\n", err);
        return 2;
    }
    printf("seed %" PRIu64 "\n", p.seed);
    fflush(stdout);
    double t0 = dhs_wall_s();
    dhs_tracegen_summary s;
    dhs_trace_status st = dhs_tracegen_write(&p, out, &s, err, sizeof err);
    if (st) {
        fprintf(stderr, "dhs trace gen: %s (%s)\n", err, dhs_trace_status_str(st));
        return st == DHS_TRACE_ERR_NOMEM ? 1 : 2;
    }
    double dt = dhs_wall_s() - t0;
    printf("wrote %s: %d requests, %" PRIu64 " rounds, %" PRIu64 " request-rounds, %" PRIu64
           " entries (%.2f%% padding), %" PRIu64 " bytes, %.2f s\n",
           out, s.requests_started, s.rounds, s.items, s.entries,
           s.entries ? 100.0 * (double)s.padding / (double)s.entries : 0.0, s.bytes, dt);
    return 0;
}

/* ---------------------------------------------------------------- info */
static void info_usage(FILE *f)
{
    fprintf(f,
            "usage: dhs trace info FILE [--json]\n\n"
            "Reads the whole trace (validating it) and prints its header and totals:\n"
            "requests, rounds, entries, padding share, duplicate rows within a query,\n"
            "distinct rows, overlap with the request's previous round, mean reuse\n"
            "distance, overlap between speculative queries and between adjacent producers,\n"
            "and the reader's throughput. Keys: docs/TRACE.md.\n\n"
            "  --json       one JSON object on stdout\n"
            "  -h, --help   this help\n");
}

/* a number, or n/a when undefined (NaN) */
static const char *num(char *b, double x, int prec)
{
    if (isnan(x)) snprintf(b, 32, "n/a");
    else snprintf(b, 32, "%.*f", prec, x);
    return b;
}

/* growable uint32 array, zero-filled */
typedef struct u32v { uint32_t *v; int64_t n; } u32v;

static int u32v_need(u32v *a, int64_t n)
{
    if (n <= a->n) return 1;
    int64_t cap = a->n ? a->n : 1024;
    while (cap < n) cap *= 2;
    uint32_t *v = realloc(a->v, (size_t)cap * sizeof *v);
    if (!v) return 0;
    memset(v + a->n, 0, (size_t)(cap - a->n) * sizeof *v);
    a->v = v;
    a->n = cap;
    return 1;
}

typedef struct info_acc {
    uint64_t requests, ended;
    uint64_t sel;                /* non-padding entries */
    uint64_t pad, dup;
    uint64_t unions;             /* sum over item x group of |U| */
    uint64_t unions_later;       /* the same, over items that are not the request's first */
    uint64_t first_touch, reuse_n, prev_hits;
    double reuse_sum;
    uint64_t spec_hits, spec_total, prod_hits, prod_total;
    uint64_t unsorted_queries;
    uint64_t accepted_sum;
    double prefix_sum;
    int64_t max_positions;
} info_acc;

static int trace_info(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, 0, O_JSON},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int json = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h': info_usage(stdout); return 0;
        case O_JSON: json = 1; break;
        default: return bad_option("info", argc, argv);
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "dhs trace info: expected exactly one FILE (see dhs trace info --help)\n");
        return 2;
    }
    const char *path = argv[optind];
    char err[1024];
    dhs_trace_reader *r;
    dhs_trace_status st = dhs_trace_reader_open(path, 0, &r, err, sizeof err);
    if (st) {
        fprintf(stderr, "dhs trace info: %s\n", err);
        return st == DHS_TRACE_ERR_NOMEM ? 1 : 2;
    }
    const dhs_trace_header *h = dhs_trace_reader_header(r);
    const int32_t NG = h->n_groups, NR = h->n_requests;
    u32v *last = calloc((size_t)NR * (size_t)NG, sizeof *last); /* [req][group] round stamp + 1 per row */
    uint32_t *rr = calloc((size_t)NR, sizeof *rr);               /* request-rounds seen per request */
    u32v qmark = {0}, m0 = {0}, pm = {0};
    uint32_t qep = 0, ep0 = 0, pep = 0;
    info_acc A;
    memset(&A, 0, sizeof A);
    int rc = 0;
    if (!last || !rr) {
        fprintf(stderr, "dhs trace info: out of memory\n");
        rc = 1;
        goto out;
    }
    double t_read = 0.0, t0 = dhs_wall_s();
    dhs_trace_event ev;
    for (;;) {
        double a = dhs_wall_s();
        st = dhs_trace_next(r, &ev);
        t_read += dhs_wall_s() - a;
        if (st != DHS_TRACE_OK) break;
        if (ev.kind == DHS_TRACE_EV_START) {
            A.requests++;
            A.prefix_sum += (double)ev.prefix;
            if (ev.prefix > A.max_positions) A.max_positions = ev.prefix;
            continue;
        }
        if (ev.kind == DHS_TRACE_EV_END) {
            A.ended++;
            for (int32_t g = 0; g < NG; g++) {
                u32v *l = &last[(size_t)ev.req * (size_t)NG + (size_t)g];
                free(l->v);
                l->v = NULL;
                l->n = 0;
            }
            continue;
        }
        for (int32_t i = 0; i < ev.n_items; i++) {
            const dhs_trace_item *it = &ev.items[i];
            uint32_t cur = ++rr[it->req];
            int64_t npos = it->n_r + it->accepted + 1;
            if (npos > A.max_positions) A.max_positions = npos;
            A.accepted_sum += (uint64_t)it->accepted;
            int32_t K = it->n_queries;
            for (int32_t g = 0; g < NG; g++) {
                const int32_t k = h->k[g];
                u32v *l = &last[(size_t)it->req * (size_t)NG + (size_t)g];
                int64_t vis = (it->n_r + K) / (int64_t)dhs_trace_group_m(h, g) + 1;
                if (!u32v_need(l, vis) || !u32v_need(&qmark, vis) || !u32v_need(&m0, vis) || !u32v_need(&pm, vis)) {
                    fprintf(stderr, "dhs trace info: out of memory\n");
                    rc = 1;
                    goto out;
                }
                uint64_t un = 0;
                for (int32_t j = 0; j < K; j++) {
                    const int32_t *q = it->sel[g] + (size_t)j * (size_t)k;
                    qep++;
                    int unsorted = 0;
                    int32_t prevrow = -1;
                    int seen_pad = 0;
                    for (int32_t x = 0; x < k; x++) {
                        int32_t e = q[x];
                        if (e < 0) {
                            A.pad++;
                            seen_pad = 1;
                            continue;
                        }
                        if (seen_pad || e <= prevrow) unsorted = 1;
                        prevrow = e;
                        A.sel++;
                        if (qmark.v[e] == qep) A.dup++;
                        qmark.v[e] = qep;
                        if (l->v[e] != cur) {
                            if (l->v[e] == 0) A.first_touch++;
                            else {
                                uint32_t d = cur - l->v[e];
                                A.reuse_sum += d;
                                A.reuse_n++;
                                if (d == 1) A.prev_hits++;
                            }
                            l->v[e] = cur;
                            un++;
                        }
                    }
                    A.unsorted_queries += (uint64_t)unsorted;
                    /* speculative queries against query 0 */
                    if (j == 0) {
                        ep0++;
                        for (int32_t x = 0; x < k; x++)
                            if (q[x] >= 0) m0.v[q[x]] = ep0;
                    } else {
                        for (int32_t x = 0; x < k; x++)
                            if (q[x] >= 0) {
                                A.spec_total++;
                                A.spec_hits += m0.v[q[x]] == ep0;
                            }
                    }
                    /* adjacent producers, same query */
                    if (g > 0) {
                        const int32_t kp = h->k[g - 1];
                        const int32_t *pq = it->sel[g - 1] + (size_t)j * (size_t)kp;
                        pep++;
                        for (int32_t x = 0; x < kp; x++)
                            if (pq[x] >= 0 && pq[x] < vis) pm.v[pq[x]] = pep;
                        for (int32_t x = 0; x < k; x++)
                            if (q[x] >= 0) {
                                A.prod_total++;
                                A.prod_hits += pm.v[q[x]] == pep;
                            }
                    }
                }
                A.unions += un;
                if (cur > 1) A.unions_later += un;
            }
        }
    }
    double t_total = dhs_wall_s() - t0;
    if (st != DHS_TRACE_EOF) {
        fprintf(stderr, "dhs trace info: %s\n", dhs_trace_reader_error(r));
        rc = st == DHS_TRACE_ERR_NOMEM ? 1 : 2;
        goto out;
    }
    {
        const dhs_trace_totals *T = dhs_trace_reader_totals(r);
        uint64_t bytes = dhs_trace_reader_offset(r);
        double pad_share = T->entries ? (double)A.pad / (double)T->entries : 0.0;
        double ig = (double)T->items * (double)NG;
        double prev_ov = A.unions_later ? (double)A.prev_hits / (double)A.unions_later : NAN;
        double reuse = A.reuse_n ? A.reuse_sum / (double)A.reuse_n : NAN;
        double first_share = A.unions ? (double)A.first_touch / (double)A.unions : NAN;
        double spec_ov = A.spec_total ? (double)A.spec_hits / (double)A.spec_total : NAN;
        double prod_ov = A.prod_total ? (double)A.prod_hits / (double)A.prod_total : NAN;
        double mrate = t_read > 0 ? (double)T->entries / t_read / 1e6 : 0.0;
        double mean_union = ig > 0 ? (double)A.unions / ig : 0.0;
        double mean_new = ig > 0 ? (double)A.first_touch / ig : 0.0;
        double mean_acc = T->items ? (double)A.accepted_sum / (double)T->items : 0.0;
        double mean_prefix = A.requests ? A.prefix_sum / (double)A.requests : 0.0;
        if (json) {
            cJSON *o = cJSON_CreateObject(), *arr;
            cJSON_AddStringToObject(o, "file", path);
            cJSON_AddNumberToObject(o, "version", h->version);
            cJSON_AddStringToObject(o, "name", h->name);
            cJSON_AddStringToObject(o, "meta", h->meta);
            cJSON_AddNumberToObject(o, "groups", NG);
            arr = cJSON_AddArrayToObject(o, "k");
            for (int32_t g = 0; g < NG; g++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(h->k[g]));
            arr = cJSON_AddArrayToObject(o, "sources");
            for (int32_t s = 0; s < h->n_sources; s++) {
                cJSON *so = cJSON_CreateObject();
                cJSON_AddNumberToObject(so, "row_bytes", h->sources[s].row_bytes);
                cJSON_AddNumberToObject(so, "m", h->sources[s].m);
                cJSON_AddNumberToObject(so, "group", h->sources[s].group);
                cJSON_AddItemToArray(arr, so);
            }
            cJSON_AddNumberToObject(o, "requests_declared", NR);
            cJSON_AddNumberToObject(o, "k_max", h->k_max);
            cJSON_AddBoolToObject(o, "sorted_flag", (h->flags & DHS_TRACE_F_SORTED) != 0);
            cJSON_AddNumberToObject(o, "requests", (double)A.requests);
            cJSON_AddNumberToObject(o, "requests_ended", (double)A.ended);
            cJSON_AddNumberToObject(o, "rounds", (double)T->rounds);
            cJSON_AddNumberToObject(o, "request_rounds", (double)T->items);
            cJSON_AddNumberToObject(o, "queries", (double)T->queries);
            cJSON_AddNumberToObject(o, "entries", (double)T->entries);
            cJSON_AddNumberToObject(o, "selected_entries", (double)A.sel);
            cJSON_AddNumberToObject(o, "padding_entries", (double)A.pad);
            cJSON_AddNumberToObject(o, "padding_share", pad_share);
            cJSON_AddNumberToObject(o, "duplicate_entries", (double)A.dup);
            cJSON_AddNumberToObject(o, "unsorted_queries", (double)A.unsorted_queries);
            cJSON_AddNumberToObject(o, "distinct_rows", (double)A.first_touch);
            cJSON_AddNumberToObject(o, "mean_union_rows", mean_union);
            cJSON_AddNumberToObject(o, "mean_new_rows", mean_new);
            /* cJSON prints NaN as null */
            cJSON_AddNumberToObject(o, "prev_round_overlap", prev_ov);
            cJSON_AddNumberToObject(o, "mean_reuse_distance", reuse);
            cJSON_AddNumberToObject(o, "first_touch_share", first_share);
            cJSON_AddNumberToObject(o, "spec_overlap", spec_ov);
            cJSON_AddNumberToObject(o, "producer_overlap", prod_ov);
            cJSON_AddNumberToObject(o, "mean_accepted", mean_acc);
            cJSON_AddNumberToObject(o, "mean_prefix", mean_prefix);
            cJSON_AddNumberToObject(o, "max_positions", (double)A.max_positions);
            cJSON_AddNumberToObject(o, "bytes", (double)bytes);
            cJSON_AddNumberToObject(o, "read_s", t_read);
            cJSON_AddNumberToObject(o, "read_mentries_per_s", mrate);
            cJSON_AddNumberToObject(o, "total_s", t_total);
            char *s = cJSON_Print(o);
            if (s) puts(s);
            free(s);
            cJSON_Delete(o);
        } else {
            printf("file                 %s\n", path);
            printf("version              %u\n", h->version);
            printf("name                 %s\n", h->name);
            printf("meta                 %s\n", h->meta);
            printf("groups               %d   k =", NG);
            for (int32_t g = 0; g < NG; g++) printf(" %d", h->k[g]);
            printf("\nsources              %d  ", h->n_sources);
            for (int32_t s = 0; s < h->n_sources && s < 8; s++)
                printf(" [%d] row_bytes=%u m=%u group=%d", s, h->sources[s].row_bytes, h->sources[s].m,
                       h->sources[s].group);
            printf("%s\n", h->n_sources > 8 ? " ..." : "");
            printf("requests_declared    %d\n", NR);
            printf("k_max                %d\n", h->k_max);
            printf("sorted_flag          %s\n", h->flags & DHS_TRACE_F_SORTED ? "yes" : "no");
            printf("requests             %" PRIu64 " (%" PRIu64 " ended)\n", A.requests, A.ended);
            printf("rounds               %" PRIu64 "\n", T->rounds);
            printf("request_rounds       %" PRIu64 "\n", T->items);
            printf("queries              %" PRIu64 "\n", T->queries);
            printf("entries              %" PRIu64 "\n", T->entries);
            printf("selected_entries     %" PRIu64 "\n", A.sel);
            printf("padding_share        %.4f\n", pad_share);
            printf("duplicate_entries    %" PRIu64 "\n", A.dup);
            printf("unsorted_queries     %" PRIu64 "\n", A.unsorted_queries);
            printf("distinct_rows        %" PRIu64 "   (per request and group)\n", A.first_touch);
            printf("mean_union_rows      %.1f   (distinct rows per request-round and group)\n", mean_union);
            printf("mean_new_rows        %.1f   (never selected before by the request)\n", mean_new);
            char b1[32], b2[32], b3[32], b4[32], b5[32];
            printf("prev_round_overlap   %s   (share of a round's union selected in the request's previous round)\n",
                   num(b1, prev_ov, 4));
            printf("mean_reuse_distance  %s   (request-rounds since a re-selected row's last selection)\n",
                   num(b2, reuse, 3));
            printf("first_touch_share    %s\n", num(b3, first_share, 4));
            printf("spec_overlap         %s   (rows of query j>0 also in query 0)\n", num(b4, spec_ov, 4));
            printf("producer_overlap     %s   (rows of producer g>0 also in producer g-1)\n", num(b5, prod_ov, 4));
            printf("mean_accepted        %.3f\n", mean_acc);
            printf("mean_prefix          %.1f\n", mean_prefix);
            printf("max_positions        %" PRId64 "\n", A.max_positions);
            printf("bytes                %" PRIu64 "\n", bytes);
            printf("read_s               %.3f   (%.1f M entries/s through the reader; %.3f s with statistics)\n",
                   t_read, mrate, t_total);
        }
    }
out:
    if (last)
        for (size_t i = 0; i < (size_t)NR * (size_t)NG; i++) free(last[i].v);
    free(last);
    free(rr);
    free(qmark.v);
    free(m0.v);
    free(pm.v);
    dhs_trace_reader_close(r);
    return rc;
}

/* ---------------------------------------------------------------- entry */
int cmd_trace(int argc, char **argv)
{
    if (argc < 2) {
        trace_usage(stderr);
        return 2;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        trace_usage(stdout);
        return 0;
    }
    if (!strcmp(sub, "gen")) return trace_gen(argc - 1, argv + 1);
    if (!strcmp(sub, "info")) return trace_info(argc - 1, argv + 1);
    fprintf(stderr, "dhs trace: unknown subcommand '%s'\n", sub);
    trace_usage(stderr);
    return 2;
}
