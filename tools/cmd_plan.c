/* cmd_plan.c - `dhs plan`: the memory planner (DESIGN §8, docs/PLAN.md).
   Parses flags, runs dhs_plan_compute (src/plan) and prints a short table or
   JSON. Bad input: a message on stderr, nothing on stdout, exit status 2. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cmds.h"
#include "plan/plan.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dhs plan [--preset NAME | --arch FILE] [flags]\n"
            "\n"
            "Per-session GPU bytes for resident vs hierarchical KV serving, draft ring and\n"
            "staging per GPU, sessions per GPU and host memory (DESIGN.md §8, docs/PLAN.md).\n"
            "GiB = 2^30 bytes.\n"
            "\n"
            "model:\n"
            "  --preset NAME          deepseek-v3.2 | glm-5.2 | glm-5.3 | deepseek-v4.1-flash\n"
            "                         (default glm-5.3)\n"
            "  --arch FILE            custom architecture JSON (schema in docs/PLAN.md)\n"
            "  --show-arch            print the preset/arch as JSON and exit\n"
            "  --list-presets         print the preset names and exit\n"
            "sizes:\n"
            "  --context N            positions per session (default 100000)\n"
            "  --page-rows N          p, rows per page (default 64)\n"
            "  --hot N                B, hot-cache rows per request and group (default 2*k)\n"
            "  --tail-rows N          T, tail rows per request and source (default p)\n"
            "  --k N                  selection length (default: the model's)\n"
            "  --kmax N               K_max, queries per request per round (default 1)\n"
            "  --live-sources N       chi, payload sources live at once (default: the model's)\n"
            "  --slots N              N, request slots per GPU for ring/staging totals (default 35)\n"
            "drafter:\n"
            "  --drafter NAME         none | dflash2 (W=2048, K_max=8, 12288 B/row; flags override)\n"
            "  --drafter-window N     W, positions the drafter reads (default 0)\n"
            "  --draft-row-bytes N    drafter K/V bytes per ring row over all draft layers (default 0)\n"
            "budget:\n"
            "  --hbm-gib X            HBM per GPU (default 140)\n"
            "  --weights-gib X        weights and activations per GPU (default 50)\n"
            "  --extra-gib X          other fixed per-GPU allocations (default 0)\n"
            "  --host-gib X           host memory for KV backing (optional: sessions it holds)\n"
            "output:\n"
            "  --json                 one JSON object on stdout\n"
            "  --help                 this text\n");
}

/* ------------------------------------------------------------------ parsing */
static int parse_i64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s) {
        fprintf(stderr, "dhs plan: %s needs a value\n", flag);
        return -1;
    }
    if (s[0] == '-') {
        fprintf(stderr, "dhs plan: %s must be a non-negative integer, got '%s'\n", flag, s);
        return -1;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0' || s[0] == ' ' || s[0] == '\t' || s[0] == '+') {
        fprintf(stderr, "dhs plan: %s must be a non-negative integer, got '%s'\n", flag, s);
        return -1;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "dhs plan: %s = %lld is out of range [%lld, %lld]\n", flag, v, (long long)lo,
                (long long)hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_gib(const char *flag, const char *s, double *out)
{
    if (!s || !*s) {
        fprintf(stderr, "dhs plan: %s needs a value\n", flag);
        return -1;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v) || s[0] == ' ' || s[0] == '\t') {
        fprintf(stderr, "dhs plan: %s must be a number of GiB, got '%s'\n", flag, s);
        return -1;
    }
    if (v < 0.0 || s[0] == '-') {
        fprintf(stderr, "dhs plan: %s must not be negative, got '%s'\n", flag, s);
        return -1;
    }
    if (v > 1.0e9) {
        fprintf(stderr, "dhs plan: %s = %s is implausibly large\n", flag, s);
        return -1;
    }
    *out = v;
    return 0;
}

typedef struct opts {
    const char *preset, *arch, *drafter;
    int json, show_arch, list_presets, help;
    dhs_plan_params p;
    int set_window, set_kmax, set_draft_bytes;
} opts;

/* Returns 0 on success, 2 on a bad flag (message already printed). */
static int parse_args(int argc, char **argv, opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char name[64];
        const char *val = NULL;
        const char *eq = strchr(a, '=');
        if (strncmp(a, "--", 2) == 0 && eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = '\0';
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        /* boolean flags */
        if (!strcmp(name, "--help") || !strcmp(name, "-h")) { o->help = 1; continue; }
        if (!strcmp(name, "--json")) { o->json = 1; continue; }
        if (!strcmp(name, "--show-arch")) { o->show_arch = 1; continue; }
        if (!strcmp(name, "--list-presets")) { o->list_presets = 1; continue; }

        static const char *const valued[] = {
            "--preset", "--arch", "--drafter", "--context", "--page-rows", "--hot", "--tail-rows",
            "--k", "--kmax", "--live-sources", "--slots", "--drafter-window", "--draft-row-bytes",
            "--hbm-gib", "--weights-gib", "--extra-gib", "--host-gib"};
        int known = 0;
        for (size_t j = 0; j < sizeof valued / sizeof valued[0] && !known; j++)
            known = !strcmp(name, valued[j]);
        if (!known) {
            fprintf(stderr, "dhs plan: unknown flag '%s' (see dhs plan --help)\n", a);
            return 2;
        }
        if (!val) {
            if (i + 1 >= argc) {
                fprintf(stderr, "dhs plan: %s needs a value\n", name);
                return 2;
            }
            val = argv[++i];
        }
        int64_t v = 0;
        const int64_t I32 = 0x7fffffff;
        if (!strcmp(name, "--preset")) o->preset = val;
        else if (!strcmp(name, "--arch")) o->arch = val;
        else if (!strcmp(name, "--drafter")) o->drafter = val;
        else if (!strcmp(name, "--context")) {
            if (parse_i64(name, val, 1, DHS_PLAN_MAX_CONTEXT, &v)) return 2;
            o->p.context = v;
        } else if (!strcmp(name, "--page-rows")) {
            if (parse_i64(name, val, 1, 1 << 20, &v)) return 2;
            o->p.page_rows = (int32_t)v;
        } else if (!strcmp(name, "--hot")) {
            if (parse_i64(name, val, 0, 1 << 26, &v)) return 2;
            o->p.hot_rows = (int32_t)v;
        } else if (!strcmp(name, "--tail-rows")) {
            if (parse_i64(name, val, 0, 1 << 26, &v)) return 2;
            o->p.tail_rows = (int32_t)v;
        } else if (!strcmp(name, "--k")) {
            if (parse_i64(name, val, 1, 1 << 20, &v)) return 2;
            o->p.k = (int32_t)v;
        } else if (!strcmp(name, "--kmax")) {
            if (parse_i64(name, val, 1, 1024, &v)) return 2;
            o->p.k_max = (int32_t)v;
            o->set_kmax = 1;
        } else if (!strcmp(name, "--live-sources")) {
            if (parse_i64(name, val, 1, I32, &v)) return 2;
            o->p.live_sources = (int32_t)v;
        } else if (!strcmp(name, "--slots")) {
            if (parse_i64(name, val, 1, 1 << 20, &v)) return 2;
            o->p.slots = (int32_t)v;
        } else if (!strcmp(name, "--drafter-window")) {
            if (parse_i64(name, val, 0, (int64_t)1 << 32, &v)) return 2;
            o->p.drafter_window = v;
            o->set_window = 1;
        } else if (!strcmp(name, "--draft-row-bytes")) {
            if (parse_i64(name, val, 0, (int64_t)1 << 32, &v)) return 2;
            o->p.draft_row_bytes = (uint64_t)v;
            o->set_draft_bytes = 1;
        } else if (!strcmp(name, "--hbm-gib")) {
            if (parse_gib(name, val, &o->p.hbm_gib)) return 2;
        } else if (!strcmp(name, "--weights-gib")) {
            if (parse_gib(name, val, &o->p.weights_gib)) return 2;
        } else if (!strcmp(name, "--extra-gib")) {
            if (parse_gib(name, val, &o->p.extra_gib)) return 2;
        } else if (!strcmp(name, "--host-gib")) {
            if (parse_gib(name, val, &o->p.host_gib)) return 2;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ output */
static cJSON *num(cJSON *o, const char *k, double v)
{
    return cJSON_AddNumberToObject(o, k, v);
}

static int print_json(const dhs_plan_arch *a, const dhs_plan_params *p, const dhs_plan_result *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return -1;
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

static void print_table(const dhs_plan_arch *a, const dhs_plan_params *p, const dhs_plan_result *r)
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
    snprintf(note, sizeof note, "(%.1fx less; %.4f GiB without metadata)",
             (double)r->resident_total / (double)r->hier_total, dhs_plan_gib(r->hier_no_meta));
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
    if (rc) return rc;
    if (o.help) {
        usage(stdout);
        return 0;
    }
    if (o.list_presets) {
        for (int i = 0; i < dhs_plan_preset_count(); i++) printf("%s\n", dhs_plan_preset_name(i));
        return 0;
    }
    if (o.preset && o.arch) {
        fprintf(stderr, "dhs plan: give --preset or --arch, not both\n");
        return 2;
    }
    if (o.drafter) {
        if (!strcmp(o.drafter, "dflash2")) {
            /* seed 000: GLM-5.3/DFlash2, W = 2048, K_max = 8, six draft layers with
               twelve K/V allocations totalling 12,288 bytes per row */
            if (!o.set_window) o.p.drafter_window = 2048;
            if (!o.set_kmax) o.p.k_max = 8;
            if (!o.set_draft_bytes) o.p.draft_row_bytes = 12288;
        } else if (strcmp(o.drafter, "none") != 0) {
            fprintf(stderr, "dhs plan: unknown drafter '%s' (known: none, dflash2)\n", o.drafter);
            return 2;
        }
    }

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
    if (o.json) {
        if (print_json(&arch, &o.p, &r)) {
            fprintf(stderr, "dhs plan: out of memory building JSON\n");
            return 1;
        }
    } else {
        print_table(&arch, &o.p, &r);
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
