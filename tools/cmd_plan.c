/* cmd_plan.c - `dhs plan`: the memory planner (DESIGN §8, docs/PLAN.md).
   Parses flags, runs dhs_plan_compute (sim/) and prints a short table or
   JSON. Bad input: a message on stderr, nothing on stdout, exit status 2. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "args.h"
#include "cmds.h"
#include "tool.h"
#include "sim/plan.h"
#include "sim/tracestats.h"

#define PROG "dhs plan"

static const char *const drafters[] = {"none", "dflash2", NULL};

typedef struct opts {
    const char *preset, *arch, *output, *hot_trace;
    int drafter;
    int json, show_arch, list_presets;
    dhs_plan_params p;
    int64_t draft_row_bytes;
    int set_window, set_kmax, set_draft_bytes, set_hot;
} opts;

/* 0 ok, 1 help printed, 2 bad flag (message printed) */
static int parse_args(int argc, char **argv, opts *o)
{
    o->draft_row_bytes = (int64_t)o->p.draft_row_bytes;
    arg_spec sp[] = {
        {.name = "--preset", .type = ARG_STR, .dest = &o->preset, .meta = "NAME",
         .help = "deepseek-v3.2 | glm-5.2 | glm-5.3 | deepseek-v4.1-flash", .def = "glm-5.3"},
        A_IN("--arch", &o->arch, "custom architecture JSON (schema in docs/PLAN.md)"),
        A_BOOL("--show-arch", &o->show_arch, "print the preset/arch as JSON and exit"),
        A_BOOL("--list-presets", &o->list_presets, "print the preset names and exit"),
        A_I64("--context", &o->p.context, 1, DHS_PLAN_MAX_CONTEXT, "positions per session"),
        A_INT("--page-rows", &o->p.page_rows, 1, 1 << 20, "p, rows per page"),
        {.name = "--hot", .type = ARG_INT, .dest = &o->p.hot_rows, .ilo = 1, .ihi = 1 << 26, .seen = &o->set_hot,
         .help = "B, hot-cache rows per request and group (at least one page)", .def = "2*k"},
        {.name = "--tail-rows", .type = ARG_INT, .dest = &o->p.tail_rows, .ilo = 0, .ihi = 1 << 26,
         .help = "T, tail rows per request and source", .def = "p"},
        A_IN("--hot-per-layer", &o->hot_trace,
             "also size the hot cache per group (layer) from this selection trace's LRU curves: the same rows per "
             "request as B in every group, each group one page or p, B/2, B, 2B, 4B, greedy by hit gain per row; "
             "prints the sizes (dhs_config.group_hot_rows) and the curves' hit rate against the even split "
             "(docs/LOCALITY.md)"),
        {.name = "--k", .type = ARG_INT, .dest = &o->p.k, .ilo = 1, .ihi = 1 << 20, .help = "selection length",
         .def = "the model's"},
        {.name = "--kmax", .type = ARG_INT, .dest = &o->p.k_max, .ilo = 1, .ihi = 1024, .seen = &o->set_kmax,
         .help = "K_max, queries per request per round"},
        {.name = "--live-sources", .type = ARG_INT, .dest = &o->p.live_sources, .ilo = 1, .ihi = 0x7fffffff,
         .help = "chi, payload sources live at once", .def = "the model's"},
        A_INT("--slots", &o->p.slots, 1, 1 << 20, "N, request slots per GPU for ring/staging totals"),
        {.name = "--drafter", .type = ARG_ENUM, .dest = &o->drafter, .choices = drafters,
         .help = "dflash2: W=2048, K_max=8, 12288 B/row (flags override)"},
        {.name = "--drafter-window", .type = ARG_I64, .dest = &o->p.drafter_window, .ilo = 0, .ihi = (int64_t)1 << 32,
         .seen = &o->set_window, .help = "W, positions the drafter reads"},
        {.name = "--draft-row-bytes", .type = ARG_I64, .dest = &o->draft_row_bytes, .ilo = 0, .ihi = (int64_t)1 << 32,
         .seen = &o->set_draft_bytes, .help = "drafter K/V bytes per ring row over all draft layers"},
        A_DBL("--hbm-gib", &o->p.hbm_gib, 0, 1e9, "HBM per GPU"),
        A_DBL("--weights-gib", &o->p.weights_gib, 0, 1e9, "weights and activations per GPU"),
        A_DBL("--extra-gib", &o->p.extra_gib, 0, 1e9, "other fixed per-GPU allocations"),
        {.name = "--host-gib", .type = ARG_DOUBLE, .dest = &o->p.host_gib, .dlo = 0, .dhi = 1e9,
         .help = "host memory for KV backing (optional: sessions it holds)", .def = "not given"},
        A_BOOL("--json", &o->json, "one JSON object (with version, commit, date, host, device)"),
        A_OUT("--output", &o->output, "write the results to FILE instead of stdout"),
    };
    arg_cmd cmd = {
        .prog = PROG,
        .synopsis = "[--preset NAME | --arch FILE] [flags]",
        .about = "Per-session GPU bytes for resident vs hierarchical KV serving, draft ring and\n"
                 "staging per GPU, sessions per GPU and host memory (docs/DESIGN.md §8, docs/PLAN.md).\n"
                 "GiB = 2^30 bytes. Bad input: a message on stderr, nothing on stdout, exit status 2.",
        .specs = sp,
        .n_specs = (int)(sizeof sp / sizeof sp[0]),
    };
    int r = args_parse(&cmd, argc, argv, NULL, NULL);
    o->p.draft_row_bytes = (uint64_t)o->draft_row_bytes;
    return r;
}

/* A key twice in one JSON object (cJSON keeps both and reads the first):
   the name of the first repeated key, or NULL. */
static const char *dup_key(const cJSON *o)
{
    if (!o) return NULL;
    for (const cJSON *a = o->child; a; a = a->next) {
        if (cJSON_IsObject(o) && a->string)
            for (const cJSON *b = a->next; b; b = b->next)
                if (b->string && !strcmp(a->string, b->string)) return a->string;
        const char *d = dup_key(a);
        if (d) return d;
    }
    return NULL;
}

static int check_arch_keys(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0; /* the loader reports it */
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    char tmp[4096];
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        memcpy(buf + len, tmp, n);
        len += n;
    }
    fclose(f);
    if (!buf) return 0;
    buf[len] = 0;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    const char *d = dup_key(j);
    int rc = 0;
    if (d) {
        fprintf(stderr, "dhs plan: %s: duplicate key \"%s\" in one object\n", path, d);
        rc = -1;
    }
    cJSON_Delete(j);
    return rc;
}

/* ------------------------------------------------------------------ output */
static cJSON *num(cJSON *o, const char *k, double v)
{
    return cJSON_AddNumberToObject(o, k, v);
}

/* the per-layer hot-cache plan (--hot-per-layer), when asked for */
typedef struct hot_layers {
    const char *trace;
    dhs_trace_hot_split z;
    int32_t n_groups;      /* the trace's */
    uint64_t even_bytes;   /* hot-cache bytes per session: B in every group, and the per-layer sizes */
    uint64_t layer_bytes;  /* (0 when the trace's groups are not the architecture's) */
} hot_layers;

static int print_json(const dhs_plan_arch *a, const dhs_plan_params *p, const dhs_plan_result *r, const hot_layers *hl)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return -1;
    tool_prov_cjson(o, "none");
    const double G = (double)(1ull << 30);
    cJSON_AddStringToObject(o, "model", a->name);
    num(o, "sources", dhs_plan_arch_sources(a));
    num(o, "groups", a->n_groups);
    num(o, "index_producers", dhs_plan_arch_producers(a));
    num(o, "index_stores", dhs_plan_arch_index_stores(a));
    cJSON *c = cJSON_AddObjectToObject(o, "consumers");
    if (c) {
        num(c, "own", a->n_own);
        num(c, "follow", a->n_follow);
        num(c, "reuse", a->n_reuse);
        num(c, "reindex", a->n_reindex);
    }
    num(o, "context", (double)r->context);
    num(o, "page_rows", r->page_rows);
    num(o, "hot_rows", r->hot_rows);
    num(o, "tail_rows", r->tail_rows);
    num(o, "k", r->k);
    num(o, "kmax", r->k_max);
    num(o, "slots", r->slots);
    num(o, "live_sources", r->live_sources);
    num(o, "drafter_window", (double)r->drafter_window);
    num(o, "draft_row_bytes", (double)r->draft_row_bytes);

    num(o, "resident_gib_per_session", r->resident_total / G);
    num(o, "resident_bytes_per_session", (double)r->resident_total);
    cJSON *rs = cJSON_AddObjectToObject(o, "resident_bytes");
    if (rs) {
        num(rs, "payload", (double)r->res_payload);
        num(rs, "index_keys", (double)r->res_index);
        num(rs, "window", (double)r->res_window);
        num(rs, "ring", (double)r->res_ring);
    }
    num(o, "hier_gib_per_session", r->hier_total / G);
    num(o, "hier_bytes_per_session", (double)r->hier_total);
    num(o, "hier_gib_per_session_no_metadata", r->hier_no_meta / G);
    cJSON *h = cJSON_AddObjectToObject(o, "hier_bytes");
    if (h) {
        num(h, "index_keys", (double)r->index_keys);
        num(h, "hot", (double)r->hot);
        num(h, "tail", (double)r->tail);
        num(h, "window", (double)r->window);
        num(h, "metadata", (double)r->metadata);
        num(h, "reverse_index", (double)r->meta_reverse);
        num(h, "slot_tables", (double)r->meta_slots);
        num(h, "page_maps", (double)r->meta_pages);
        num(h, "ring", (double)r->ring);
        num(h, "staging", (double)r->staging);
    }
    num(o, "ratio_resident_to_hier", (double)r->resident_total / (double)r->hier_total);
    num(o, "ring_rows", (double)r->ring_rows);
    num(o, "ring_gib_per_session", r->ring / G);
    num(o, "ring_gib_total", r->ring_total / G);
    cJSON_AddBoolToObject(o, "staging_needed", r->staging_needed);
    num(o, "staging_gib_per_session", r->staging / G);
    num(o, "staging_gib_total", r->staging_total / G);
    num(o, "hbm_gib", p->hbm_gib);
    num(o, "weights_gib", p->weights_gib);
    num(o, "extra_gib", p->extra_gib);
    num(o, "free_gib", r->free_gib);
    num(o, "sessions_resident", (double)r->sessions_resident);
    num(o, "sessions_hier", (double)r->sessions_hier);
    num(o, "host_gib_per_session", r->host_per_session / G);
    num(o, "host_gib_for_sessions_hier", (double)r->sessions_hier * (r->host_per_session / G));
    if (r->sessions_host >= 0) {
        num(o, "host_gib", p->host_gib);
        num(o, "sessions_host", (double)r->sessions_host);
    }
    if (hl) {
        cJSON *h = cJSON_AddObjectToObject(o, "hot_per_layer");
        if (!h) { cJSON_Delete(o); return -1; }
        cJSON_AddStringToObject(h, "trace", hl->trace);
        num(h, "groups", hl->n_groups);
        num(h, "budget_rows", (double)hl->z.budget);
        num(h, "rows_used", (double)hl->z.used);
        num(h, "even_rows_per_group", (double)hl->z.even_rows);
        num(h, "even_hit_rate", hl->z.even_hit);
        num(h, "per_layer_hit_rate", hl->z.sized_hit);
        if (hl->layer_bytes) {
            num(h, "even_hot_bytes", (double)hl->even_bytes);
            num(h, "per_layer_hot_bytes", (double)hl->layer_bytes);
        }
        cJSON *ra = cJSON_AddArrayToObject(h, "rows_per_group");
        for (int32_t g = 0; ra && g < hl->n_groups; g++) cJSON_AddItemToArray(ra, cJSON_CreateNumber((double)hl->z.rows[g]));
    }
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    if (!s) return -1;
    fputs(s, stdout);
    fputc('\n', stdout);
    cJSON_free(s);
    return 0;
}

static void line(const char *label, uint64_t bytes, const char *note)
{
    printf("  %-24s %10.4f GiB%s%s\n", label, dhs_plan_gib(bytes), note && *note ? "   " : "",
           note ? note : "");
}

static void print_table(const dhs_plan_arch *a, const dhs_plan_params *p, const dhs_plan_result *r, const hot_layers *hl)
{
    char note[160];
    printf("dhs plan: %s: %d payload sources in %d groups, %d index producers (%d key stores), k=%d\n",
           a->name, dhs_plan_arch_sources(a), a->n_groups, dhs_plan_arch_producers(a),
           dhs_plan_arch_index_stores(a), r->k);
    printf("context %lld, page %d rows, hot B=%d, tail T=%d, K_max %d, live sources %d, slots %d\n",
           (long long)r->context, r->page_rows, r->hot_rows, r->tail_rows, r->k_max, r->live_sources,
           r->slots);
    if (r->has_drafter)
        printf("drafter: window W=%lld, %llu B per ring row, R_d=%lld rows\n", (long long)r->drafter_window,
               (unsigned long long)r->draft_row_bytes, (long long)r->ring_rows);
    printf("\nper session (GPU)\n");
    line("resident", r->resident_total, "");
    line("  payload", r->res_payload, "");
    line("  index keys", r->res_index, "");
    if (r->res_window) line("  window", r->res_window, "");
    if (r->res_ring) line("  draft ring", r->res_ring, "");
    {
        double ratio = (double)r->resident_total / (double)r->hier_total;
        snprintf(note, sizeof note, "(%.1fx %s; %.4f GiB without metadata)", ratio >= 1 ? ratio : 1 / ratio,
                 ratio >= 1 ? "less" : "more", dhs_plan_gib(r->hier_no_meta));
    }
    line("hierarchical", r->hier_total, note);
    line("  index keys", r->index_keys, "");
    line("  hot caches", r->hot, "");
    line("  tails", r->tail, "");
    if (r->window) line("  window", r->window, "");
    snprintf(note, sizeof note, "(reverse index %.4f, slot tables %.4f, page maps %.4f)",
             dhs_plan_gib(r->meta_reverse), dhs_plan_gib(r->meta_slots), dhs_plan_gib(r->meta_pages));
    line("  metadata", r->metadata, note);
    if (r->has_drafter) line("  draft ring", r->ring, "");
    if (r->staging_needed) line("  staging share", r->staging, "");
    printf("\nper GPU (%d slots)\n", r->slots);
    line("draft ring", r->ring_total, r->has_drafter ? "" : "(no drafter)");
    snprintf(note, sizeof note, "%s", r->staging_needed ? "" : "(none: K_max*k <= B)");
    line("staging", r->staging_total, note);
    printf("  budget: HBM %.2f - weights %.2f - extra %.2f = %.2f GiB free\n", p->hbm_gib, p->weights_gib,
           p->extra_gib, r->free_gib);
    printf("  sessions per GPU: resident %lld, hierarchical %lld\n", (long long)r->sessions_resident,
           (long long)r->sessions_hier);
    printf("\nhost: %.4f GiB per session, %.1f GiB for %lld hierarchical sessions\n",
           dhs_plan_gib(r->host_per_session), (double)r->sessions_hier * dhs_plan_gib(r->host_per_session),
           (long long)r->sessions_hier);
    if (r->sessions_host >= 0)
        printf("  %.1f GiB of host memory holds %lld sessions\n", p->host_gib, (long long)r->sessions_host);
    if (hl) {
        printf("\nhot cache per layer, from the LRU curves of %s (%d groups):\n", hl->trace, hl->n_groups);
        printf("  %lld rows per request (B=%d in every group), %lld used\n", (long long)hl->z.budget, r->hot_rows,
               (long long)hl->z.used);
        printf("  LRU hit rate on the trace: even %.4f, per layer %.4f (%+.2f points)\n", hl->z.even_hit, hl->z.sized_hit,
               100 * (hl->z.sized_hit - hl->z.even_hit));
        if (hl->layer_bytes)
            printf("  hot caches per session: even %.4f GiB, per layer %.4f GiB\n", dhs_plan_gib(hl->even_bytes),
                   dhs_plan_gib(hl->layer_bytes));
        else
            printf("  (the trace's %d groups are not the model's %d: no byte figures)\n", hl->n_groups, a->n_groups);
        printf("  group_hot_rows:");
        for (int32_t g = 0; g < hl->n_groups; g++) printf("%s%lld", g ? "," : " ", (long long)hl->z.rows[g]);
        printf("\n");
    }
}

static int print_arch(const char *name, const char *path)
{
    if (name) {
        const char *js = dhs_plan_preset_json(name);
        cJSON *o = js ? cJSON_Parse(js) : NULL;
        char *s = o ? cJSON_Print(o) : NULL;
        cJSON_Delete(o);
        if (!s) return -1;
        printf("%s\n", s);
        cJSON_free(s);
        return 0;
    }
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int ch;
    while ((ch = fgetc(f)) != EOF) putchar(ch);
    fclose(f);
    return 0;
}

/* ------------------------------------------------------------------ main */
int cmd_plan(int argc, char **argv)
{
    opts o;
    memset(&o, 0, sizeof o);
    o.p = dhs_plan_params_default();
    int rc = parse_args(argc, argv, &o);
    if (rc) return args_exit(rc);
    if (o.list_presets) { /* honours --json and --output like every other result */
        if (tool_output(PROG, o.output)) return EXIT_USAGE;
        if (o.json) {
            cJSON *j = cJSON_CreateObject();
            tool_prov_cjson(j, "none");
            cJSON *a = cJSON_AddArrayToObject(j, "presets");
            for (int i = 0; i < dhs_plan_preset_count(); i++) cJSON_AddItemToArray(a, cJSON_CreateString(dhs_plan_preset_name(i)));
            char *txt = cJSON_Print(j);
            if (txt) printf("%s\n", txt);
            free(txt);
            cJSON_Delete(j);
        } else {
            for (int i = 0; i < dhs_plan_preset_count(); i++) printf("%s\n", dhs_plan_preset_name(i));
        }
        return fflush(stdout) == 0 ? 0 : EXIT_RUNTIME;
    }
    if (o.preset && o.arch) return args_fail(PROG, "give --preset or --arch, not both");
    if (o.drafter == 1) {
        /* DFlash2 on GLM-5.3: W = 2048, K_max = 8, six draft layers with
           twelve K/V allocations totalling 12,288 bytes per row */
        if (!o.set_window) o.p.drafter_window = 2048;
        if (!o.set_kmax) o.p.k_max = 8;
        if (!o.set_draft_bytes) o.p.draft_row_bytes = 12288;
    }
    if (o.set_hot && o.p.hot_rows < o.p.page_rows)
        return args_fail(PROG, "--hot %d is smaller than a page (--page-rows %d): the library refuses a hot cache below one page",
                         o.p.hot_rows, o.p.page_rows);
    double free_gib = o.p.hbm_gib - o.p.weights_gib - o.p.extra_gib;
    if (free_gib < 0)
        return args_fail(PROG, "the budget leaves %.2f GiB of HBM: --hbm-gib %g is less than --weights-gib %g + --extra-gib %g",
                         free_gib, o.p.hbm_gib, o.p.weights_gib, o.p.extra_gib);
    if (o.arch && check_arch_keys(o.arch)) return EXIT_USAGE;
    if (tool_output(PROG, o.output)) return EXIT_USAGE;

    static dhs_plan_arch arch; /* ~40 KB: keep it off the stack */
    char err[512];
    const char *preset = o.arch ? NULL : (o.preset ? o.preset : "glm-5.3");
    dhs_status s = preset ? dhs_plan_preset(preset, &arch, err, sizeof err)
                          : dhs_plan_arch_load(o.arch, &arch, err, sizeof err);
    if (s != DHS_OK) {
        fprintf(stderr, "dhs plan: %s\n", err);
        return 2;
    }
    if (o.show_arch) {
        if (print_arch(preset, o.arch)) {
            fprintf(stderr, "dhs plan: cannot print the architecture\n");
            return 2;
        }
        return 0;
    }
    dhs_plan_result r;
    s = dhs_plan_compute(&arch, &o.p, &r, err, sizeof err);
    if (s != DHS_OK) {
        fprintf(stderr, "dhs plan: %s\n", err);
        return 2;
    }
    hot_layers hl, *hlp = NULL;
    if (o.hot_trace) {
        memset(&hl, 0, sizeof hl);
        hl.trace = o.hot_trace;
        dhs_trace_loc_stats *LS = malloc(sizeof *LS);
        if (!LS) {
            fprintf(stderr, "dhs plan: out of memory\n");
            return EXIT_RUNTIME;
        }
        dhs_trace_status ts = dhs_trace_hot_plan(o.hot_trace, r.hot_rows, r.page_rows, LS, &hl.z, err, sizeof err);
        hl.n_groups = LS->n_groups;
        free(LS);
        if (ts != DHS_TRACE_OK) {
            fprintf(stderr, "dhs plan: --hot-per-layer %s: %s\n", o.hot_trace, err);
            return ts == DHS_TRACE_ERR_NOMEM ? EXIT_RUNTIME : 2;
        }
        if (hl.n_groups == arch.n_groups)
            for (int32_t g = 0; g < arch.n_groups; g++) {
                hl.even_bytes += (uint64_t)r.hot_rows * arch.groups[g].sum_row_bytes;
                hl.layer_bytes += (uint64_t)hl.z.rows[g] * arch.groups[g].sum_row_bytes;
            }
        hlp = &hl;
    }
    if (o.json) {
        if (print_json(&arch, &o.p, &r, hlp)) {
            fprintf(stderr, "dhs plan: out of memory building JSON\n");
            return EXIT_RUNTIME;
        }
    } else {
        print_table(&arch, &o.p, &r, hlp);
    }
    return fflush(stdout) == 0 ? 0 : EXIT_RUNTIME;
}
