/* args.c - the one flag parser of the `dhs` tool (see args.h). */
#include "args.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

/* a number starts at its first character: strtoll/strtod would skip leading
   white space (" 5", "\t-1", "\n-5"); none is accepted */
static int num_start_ok(const char *s) { return s && *s && !isspace((unsigned char)*s); }

int arg_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!num_start_ok(s)) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int arg_f64(const char *s, double lo, double hi, double *out)
{
    if (!num_start_ok(s)) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

int args_list_ok(const char *s)
{
    if (!s || !*s || *s == ',') return 0;
    for (const char *p = s; *p; p++)
        if (isspace((unsigned char)*p) || (*p == ',' && (p[1] == ',' || !p[1]))) return 0;
    return 1;
}

int arg_i64_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int max)
{
    if (!args_list_ok(s)) return -1;
    int n = 0;
    for (const char *p = s;;) {
        char buf[32];
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == 0 || len >= sizeof buf || n >= max) return -1;
        memcpy(buf, p, len);
        buf[len] = 0;
        if (arg_i64(buf, lo, hi, &out[n])) return -1;
        n++;
        if (!c) break;
        p = c + 1; /* an element follows every comma: "2,3," is refused above */
    }
    return n;
}

static int arg_f64_list(const char *s, double lo, double hi, double *out, int max)
{
    if (!args_list_ok(s)) return -1;
    int n = 0;
    for (const char *p = s;;) {
        char buf[64];
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == 0 || len >= sizeof buf || n >= max) return -1;
        memcpy(buf, p, len);
        buf[len] = 0;
        if (arg_f64(buf, lo, hi, &out[n])) return -1;
        n++;
        if (!c) break;
        p = c + 1;
    }
    return n;
}

/* an ARG_STR whose placeholder names a comma list ("LIST", "B0,B1,..") is one:
   the command splits it, the parser refuses empty elements first */
static int str_is_list(const arg_spec *s) { return s->meta && (!strcmp(s->meta, "LIST") || strchr(s->meta, ',')); }

cJSON *args_json_u64(uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, v);
    return cJSON_CreateRaw(b);
}

int args_json_set_u64(cJSON *o, const char *key, uint64_t v)
{
    cJSON *x = args_json_u64(v);
    if (!x) return -1;
    if (cJSON_GetObjectItemCaseSensitive(o, key) ? !cJSON_ReplaceItemInObjectCaseSensitive(o, key, x)
                                                 : !cJSON_AddItemToObject(o, key, x)) {
        cJSON_Delete(x);
        return -1;
    }
    return 0;
}

int args_fail(const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see %s --help)\n", prog);
    va_end(ap);
    return EXIT_USAGE;
}

int args_check_in(const char *prog, const char *flag, const char *path)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    int err = !f ? errno : (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) ? EISDIR : 0;
    if (f) fclose(f);
    if (err) {
        fprintf(stderr, "%s: %s%s%s: cannot read: %s\n", prog, flag ? flag : "", flag ? " " : "", path, strerror(err));
        return -1;
    }
    return 0;
}

/* checked and given its temporary at once: outfile.h */
int args_check_out(const char *prog, const char *flag, const char *path)
{
    return out_reserve(prog, flag, path) ? -1 : 0;
}

/* ------------------------------------------------------------------ help */
static void range_text(const arg_spec *s, char *b, size_t n)
{
    b[0] = 0;
    switch (s->type) {
    case ARG_INT:
    case ARG_I64:
    case ARG_I64_LIST:
        snprintf(b, n, "%" PRId64 "..%" PRId64, s->ilo, s->ihi);
        break;
    case ARG_DOUBLE:
    case ARG_F64_LIST: snprintf(b, n, "%g..%g", s->dlo, s->dhi); break;
    case ARG_U64: snprintf(b, n, "0..2^64-1"); break;
    case ARG_ENUM: {
        size_t o = 0;
        for (int i = 0; s->choices[i] && o + 1 < n; i++)
            o += (size_t)snprintf(b + o, n - o, "%s%s", i ? "|" : "", s->choices[i]);
        break;
    }
    default: break;
    }
}

static void default_text(const arg_spec *s, char *b, size_t n)
{
    b[0] = 0;
    if (s->def) {
        snprintf(b, n, "%s", s->def);
        return;
    }
    switch (s->type) {
    case ARG_INT: snprintf(b, n, "%" PRId32, *(int32_t *)s->dest); break;
    case ARG_I64: snprintf(b, n, "%" PRId64, *(int64_t *)s->dest); break;
    case ARG_U64: snprintf(b, n, "%" PRIu64, *(uint64_t *)s->dest); break;
    case ARG_DOUBLE: snprintf(b, n, "%g", *(double *)s->dest); break;
    case ARG_STR:
    case ARG_IN:
    case ARG_OUT:
        if (*(const char **)s->dest) snprintf(b, n, "%s", *(const char **)s->dest);
        break;
    case ARG_ENUM: if (*(int *)s->dest >= 0) snprintf(b, n, "%s", s->choices[*(int *)s->dest]); break;
    case ARG_I64_LIST:
    case ARG_F64_LIST: {
        size_t o = 0;
        for (int i = 0; i < *s->count && o + 1 < n; i++) {
            if (s->type == ARG_I64_LIST) o += (size_t)snprintf(b + o, n - o, "%s%" PRId64, i ? "," : "", ((int64_t *)s->dest)[i]);
            else o += (size_t)snprintf(b + o, n - o, "%s%g", i ? "," : "", ((double *)s->dest)[i]);
        }
        break;
    }
    default: break;
    }
}

static const char *meta_of(const arg_spec *s)
{
    if (s->meta) return s->meta;
    switch (s->type) {
    case ARG_INT:
    case ARG_I64:
    case ARG_U64: return "N";
    case ARG_DOUBLE: return "X";
    case ARG_ENUM: return "NAME";
    case ARG_I64_LIST:
    case ARG_F64_LIST: return "LIST";
    case ARG_BOOL: return NULL;
    default: return "VALUE";
    }
}

void args_help(const arg_cmd *cmd, FILE *f)
{
    fprintf(f, "usage: %s %s\n\n", cmd->prog, cmd->synopsis ? cmd->synopsis : "[flags]");
    if (cmd->about) fprintf(f, "%s\n\n", cmd->about);
    fprintf(f, "flags (--flag value or --flag=value):\n");
    for (int i = 0; i < cmd->n_specs; i++) {
        const arg_spec *s = &cmd->specs[i];
        char left[96], rng[256], def[256];
        const char *m = meta_of(s);
        if (s->alias) snprintf(left, sizeof left, "-%c, %s%s%s", s->alias, s->name, m ? " " : "", m ? m : "");
        else snprintf(left, sizeof left, "%s%s%s", s->name, m ? " " : "", m ? m : "");
        range_text(s, rng, sizeof rng);
        default_text(s, def, sizeof def);
        char text[1024];
        size_t o = (size_t)snprintf(text, sizeof text, "%s", s->help ? s->help : "");
        if (rng[0] && o < sizeof text)
            o += (size_t)snprintf(text + o, sizeof text - o, "%s%s %s", s->help && *s->help ? "; " : "",
                                  s->type == ARG_ENUM ? "one of" : "in", rng);
        if (def[0] && o < sizeof text) snprintf(text + o, sizeof text - o, " [%s]", def);
        /* word-wrap the description at 100 columns, continuation lines indented */
        fprintf(f, "  %-26s ", left);
        int col = 29;
        if ((int)strlen(left) > 26) {
            fprintf(f, "\n%29s", "");
        }
        for (char *w = text; *w;) {
            size_t wl = strcspn(w, " ");
            if (col > 29 && col + 1 + (int)wl > 100) {
                fprintf(f, "\n%29s", "");
                col = 29;
            }
            fprintf(f, "%s%.*s", col > 29 ? " " : "", (int)wl, w);
            col += (col > 29 ? 1 : 0) + (int)wl;
            w += wl;
            while (*w == ' ') w++;
        }
        fprintf(f, "\n");
    }
    fprintf(f, "  %-26s this help\n", "-h, --help");
    if (cmd->footer) fprintf(f, "\n%s\n", cmd->footer);
}

/* ------------------------------------------------------------------ parse */
static const arg_spec *find_spec(const arg_cmd *cmd, const char *name, size_t len)
{
    for (int i = 0; i < cmd->n_specs; i++)
        if (strlen(cmd->specs[i].name) == len && !strncmp(cmd->specs[i].name, name, len)) return &cmd->specs[i];
    return NULL;
}

/* v for a one-line message: control characters as \t, \n or \xNN */
static const char *shown(const char *v, char *b, size_t n)
{
    size_t o = 0;
    for (; v && *v && o + 5 < n; v++) {
        unsigned char ch = (unsigned char)*v;
        if (ch == '\t' || ch == '\n') o += (size_t)snprintf(b + o, n - o, "\\%c", ch == '\t' ? 't' : 'n');
        else if (iscntrl(ch)) o += (size_t)snprintf(b + o, n - o, "\\x%02x", ch);
        else b[o++] = (char)ch;
    }
    b[o] = 0;
    return b;
}

static int bad_value(const arg_cmd *cmd, const arg_spec *s, const char *v)
{
    char rng[256], vb[256];
    range_text(s, rng, sizeof rng);
    const char *what = "a value";
    switch (s->type) {
    case ARG_INT:
    case ARG_I64: what = "an integer in"; break;
    case ARG_U64: what = "an unsigned integer in"; break;
    case ARG_DOUBLE: what = "a number in"; break;
    case ARG_ENUM: what = "one of"; break;
    case ARG_I64_LIST: what = s->max > 1 ? "a comma list of integers, each in" : "an integer in"; break;
    case ARG_F64_LIST: what = "a comma list of numbers, each in"; break;
    default: break;
    }
    if (s->type == ARG_I64_LIST || s->type == ARG_F64_LIST)
        return args_fail(cmd->prog, "%s wants %s %s (at most %d), got '%s'", s->name, what, rng, s->max, shown(v, vb, sizeof vb));
    return args_fail(cmd->prog, "%s wants %s %s, got '%s'", s->name, what, rng, shown(v, vb, sizeof vb));
}

static int set_value(const arg_cmd *cmd, const arg_spec *s, const char *v)
{
    int64_t x;
    double d;
    switch (s->type) {
    case ARG_INT:
        if (arg_i64(v, s->ilo, s->ihi, &x)) return bad_value(cmd, s, v);
        *(int32_t *)s->dest = (int32_t)x;
        break;
    case ARG_I64:
        if (arg_i64(v, s->ilo, s->ihi, &x)) return bad_value(cmd, s, v);
        *(int64_t *)s->dest = x;
        break;
    case ARG_U64: {
        char *end;
        errno = 0;
        /* strtoull takes a sign ("-1" is 2^64-1) and leading white space: neither is a seed */
        if (!num_start_ok(v) || *v == '-' || *v == '+') return bad_value(cmd, s, v);
        unsigned long long u = strtoull(v, &end, 10);
        if (errno || *end) return bad_value(cmd, s, v);
        *(uint64_t *)s->dest = u;
        break;
    }
    case ARG_DOUBLE:
        if (arg_f64(v, s->dlo, s->dhi, &d)) return bad_value(cmd, s, v);
        *(double *)s->dest = d;
        break;
    case ARG_STR:
    case ARG_IN:
    case ARG_OUT:
        if (!*v) return args_fail(cmd->prog, "%s wants a non-empty value", s->name);
        if (s->type == ARG_STR && str_is_list(s) && !args_list_ok(v)) {
            char vb[256];
            return args_fail(cmd->prog, "%s wants a comma list without empty elements or spaces, got '%s'", s->name,
                             shown(v, vb, sizeof vb));
        }
        *(const char **)s->dest = v;
        break;
    case ARG_ENUM: {
        int i;
        for (i = 0; s->choices[i]; i++)
            if (!strcmp(s->choices[i], v)) break;
        if (!s->choices[i]) return bad_value(cmd, s, v);
        *(int *)s->dest = i;
        break;
    }
    case ARG_I64_LIST: {
        int n = arg_i64_list(v, s->ilo, s->ihi, s->dest, s->max);
        if (n < 1) return bad_value(cmd, s, v);
        *s->count = n;
        break;
    }
    case ARG_F64_LIST: {
        int n = arg_f64_list(v, s->dlo, s->dhi, s->dest, s->max);
        if (n < 1) return bad_value(cmd, s, v);
        *s->count = n;
        break;
    }
    default: break;
    }
    return 0;
}

int args_parse(const arg_cmd *cmd, int argc, char **argv, char **pos, int *n_pos)
{
    int np = 0, flags_done = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!flags_done && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
            args_help(cmd, stdout);
            return ARGS_HELP;
        }
        if (!flags_done && !strcmp(a, "--")) {
            flags_done = 1;
            continue;
        }
        if (flags_done || a[0] != '-' || !a[1]) {
            if (np >= cmd->max_pos) {
                args_fail(cmd->prog, "unexpected argument '%s'", a);
                return ARGS_BAD;
            }
            if (pos) pos[np] = argv[i];
            np++;
            continue;
        }
        const arg_spec *s = NULL;
        const char *val = NULL;
        if (a[1] != '-') {
            /* a short alias: -q */
            for (int j = 0; j < cmd->n_specs && !s; j++)
                if (cmd->specs[j].alias && cmd->specs[j].alias == a[1] && !a[2]) s = &cmd->specs[j];
        } else {
            const char *eq = strchr(a, '=');
            size_t len = eq ? (size_t)(eq - a) : strlen(a);
            s = find_spec(cmd, a, len);
            if (eq) val = eq + 1;
        }
        if (!s) {
            args_fail(cmd->prog, "unknown flag '%s'", a);
            return ARGS_BAD;
        }
        if (s->seen) *s->seen = 1;
        if (s->type == ARG_BOOL) {
            if (val) {
                args_fail(cmd->prog, "%s takes no value", s->name);
                return ARGS_BAD;
            }
            *(int *)s->dest = 1;
            continue;
        }
        if (!val) {
            if (i + 1 >= argc) {
                char rng[256];
                range_text(s, rng, sizeof rng);
                if (rng[0]) args_fail(cmd->prog, "%s needs a value (%s %s)", s->name, s->type == ARG_ENUM ? "one of" : "in", rng);
                else args_fail(cmd->prog, "%s needs a value", s->name);
                return ARGS_BAD;
            }
            val = argv[++i];
        }
        if (set_value(cmd, s, val)) return ARGS_BAD;
    }
    if (np < cmd->min_pos) {
        args_fail(cmd->prog, "expected %d argument%s, got %d", cmd->min_pos, cmd->min_pos == 1 ? "" : "s", np);
        return ARGS_BAD;
    }
    if (n_pos) *n_pos = np;
    /* files: inputs readable and outputs writable before any work */
    for (int j = 0; j < cmd->n_specs; j++) {
        const arg_spec *s = &cmd->specs[j];
        const char *p = (s->type == ARG_IN || s->type == ARG_OUT) ? *(const char **)s->dest : NULL;
        if (!p) continue;
        if (s->type == ARG_IN && args_check_in(cmd->prog, s->name, p)) return ARGS_BAD;
        if (s->type == ARG_OUT && args_check_out(cmd->prog, s->name, p)) return ARGS_BAD;
    }
    return ARGS_OK;
}

/* ------------------------------------------------------------------ subcommands */
static void sub_usage(FILE *f, const char *prog, const char *about, const arg_sub *subs, int n)
{
    fprintf(f, "usage: %s <command> [flags]   (%s <command> --help for its flags)\n", prog, prog);
    if (about) fprintf(f, "\n%s\n", about);
    fprintf(f, "\ncommands:\n");
    for (int i = 0; i < n; i++)
        if (subs[i].fn) fprintf(f, "  %-10s %s\n", subs[i].name, subs[i].help);
}

int args_dispatch(const char *prog, const char *about, const arg_sub *subs, int n, int argc, char **argv)
{
    if (argc < 2) {
        sub_usage(stderr, prog, about, subs, n);
        return EXIT_USAGE;
    }
    const char *a = argv[1];
    if (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "help")) {
        sub_usage(stdout, prog, about, subs, n);
        return EXIT_OK;
    }
    for (int i = 0; i < n; i++)
        if (subs[i].fn && !strcmp(a, subs[i].name)) return subs[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "%s: unknown command '%s'\n", prog, a);
    sub_usage(stderr, prog, about, subs, n);
    return EXIT_USAGE;
}
