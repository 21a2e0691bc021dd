/* args.h - the one flag parser of the `dhs` tool.
 *
 * Every subcommand describes its flags in a table of arg_spec; args_parse
 * accepts `--flag value` and `--flag=value`, `-h`/`--help` (help generated
 * from the table, naming each numeric flag's range and default), checks every
 * value against its range, and checks input files readable and output files
 * writable before the command does any work. Subcommands with their own
 * subcommands (`dhs bench`, `dhs trace`) dispatch through args_dispatch.
 *
 * Exit-status convention of every subcommand: 0 done, 1 a check failed
 * (mismatch, violation), 2 bad usage or bad input, 3 a runtime error. */
#ifndef DHS_TOOLS_ARGS_H
#define DHS_TOOLS_ARGS_H

#include <stdint.h>
#include <stdio.h>

enum { EXIT_OK = 0, EXIT_CHECK = 1, EXIT_USAGE = 2, EXIT_RUNTIME = 3 };

typedef enum arg_type {
    ARG_BOOL,     /* int *: set to 1 */
    ARG_INT,      /* int32_t *, range ilo..ihi */
    ARG_I64,      /* int64_t *, range ilo..ihi */
    ARG_U64,      /* uint64_t * (seeds), any unsigned 64-bit value */
    ARG_DOUBLE,   /* double *, range dlo..dhi */
    ARG_STR,      /* const char ** */
    ARG_IN,       /* const char **: a file that must be readable */
    ARG_OUT,      /* const char **: a file that must be writable */
    ARG_ENUM,     /* int *: index into choices (NULL-terminated) */
    ARG_I64_LIST, /* int64_t[max], count in *count, each in ilo..ihi */
    ARG_F64_LIST, /* double[max], count in *count, each in dlo..dhi */
} arg_type;

typedef struct arg_spec {
    const char *name;       /* "--hot" */
    char alias;             /* short form ('q' for -q) or 0 */
    arg_type type;
    void *dest;
    int64_t ilo, ihi;       /* integer range */
    double dlo, dhi;        /* number range */
    const char *const *choices;
    const char *meta;       /* value placeholder in help ("N"); NULL: derived from the type */
    const char *help;
    const char *def;        /* default shown in help; NULL: printed from *dest */
    int *count;             /* lists: values parsed */
    int max;                /* lists: capacity */
    int *seen;              /* optional: set to 1 when the flag was given */
} arg_spec;

/* Table entry helpers (designated initialisers keep the tables readable). */
#define A_BOOL(n, d, h) {.name = n, .type = ARG_BOOL, .dest = d, .help = h}
#define A_INT(n, d, lo, hi, h) {.name = n, .type = ARG_INT, .dest = d, .ilo = lo, .ihi = hi, .help = h}
#define A_I64(n, d, lo, hi, h) {.name = n, .type = ARG_I64, .dest = d, .ilo = lo, .ihi = hi, .help = h}
#define A_U64(n, d, h) {.name = n, .type = ARG_U64, .dest = d, .help = h}
#define A_DBL(n, d, lo, hi, h) {.name = n, .type = ARG_DOUBLE, .dest = d, .dlo = lo, .dhi = hi, .help = h}
#define A_STR(n, d, m, h) {.name = n, .type = ARG_STR, .dest = d, .meta = m, .help = h}
#define A_IN(n, d, h) {.name = n, .type = ARG_IN, .dest = d, .meta = "FILE", .help = h}
#define A_OUT(n, d, h) {.name = n, .type = ARG_OUT, .dest = d, .meta = "FILE", .help = h}
#define A_ENUM(n, d, ch, h) {.name = n, .type = ARG_ENUM, .dest = d, .choices = ch, .help = h}

typedef struct arg_cmd {
    const char *prog;        /* "dhs run" */
    const char *synopsis;    /* "[flags]" */
    const char *about;       /* paragraph(s) before the flag list */
    arg_spec *specs;
    int n_specs;
    const char *footer;      /* text after the flag list, or NULL */
    int min_pos, max_pos;    /* positional arguments allowed */
} arg_cmd;

/* What args_parse returns. */
enum { ARGS_OK = 0, ARGS_HELP = 1, ARGS_BAD = 2 };

/* Parses argv[1..argc-1] (argv[0] is the command name). Positional arguments
   are gathered into pos[] (up to cmd->max_pos, *n_pos of them). ARGS_HELP:
   help printed on stdout. ARGS_BAD: a message on stderr. */
int args_parse(const arg_cmd *cmd, int argc, char **argv, char **pos, int *n_pos);
/* Maps args_parse's result to the exit status: ARGS_HELP -> 0, ARGS_BAD -> 2. */
static inline int args_exit(int r) { return r == ARGS_HELP ? EXIT_OK : EXIT_USAGE; }
void args_help(const arg_cmd *cmd, FILE *f);
/* Reports a usage error "prog: message" on stderr; returns EXIT_USAGE. */
int args_fail(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Readable / writable checks (0 ok, else a message on stderr, -1). */
int args_check_in(const char *prog, const char *flag, const char *path);
int args_check_out(const char *prog, const char *flag, const char *path);

/* Subcommand tables: `dhs`, `dhs bench`, `dhs trace`. */
typedef struct arg_sub {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} arg_sub;
/* argv[0] is the command; argv[1] the subcommand. No subcommand: usage on
   stderr, 2; -h/--help/help: usage on stdout, 0; unknown: error, 2. */
int args_dispatch(const char *prog, const char *about, const arg_sub *subs, int n, int argc, char **argv);

/* Parsing helpers kept for list-valued internals. A number starts at its
   first character (no leading white space); lists refuse empty elements
   ("2,,3", ",2", "2,") and white space. */
int arg_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
int arg_f64(const char *s, double lo, double hi, double *out);
int arg_i64_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int max);
/* 1 when s is a well-formed comma list: non-empty, no empty element, no
   white space. args_parse applies it to every ARG_STR whose meta names a list
   ("LIST", or a placeholder with a comma such as "B0,B1,.."). */
int args_list_ok(const char *s);

/* JSON: a 64-bit integer as a number with its exact decimal digits (a cJSON
   number is a double, exact only up to 2^53: seeds are not). args_json_set_u64
   replaces the member `key` of object o or adds it; 0 ok, -1 out of memory. */
struct cJSON;
struct cJSON *args_json_u64(uint64_t v);
int args_json_set_u64(struct cJSON *o, const char *key, uint64_t v);

#endif
