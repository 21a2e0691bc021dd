/* tool.h - what every `dhs` subcommand shares besides the flag parser:
 * provenance (version, commit, date, host, device) for every JSON output,
 * --output redirection, the backend availability check, and progress lines
 * that work on a terminal (one updating line) and off it (a line every few
 * seconds). */
#ifndef DHS_TOOLS_TOOL_H
#define DHS_TOOLS_TOOL_H

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

/* The git commit the tool was built from ("unknown" outside git). */
const char *tool_commit(void);
/* "dhs 0.2.0 (commit abc123)" */
void tool_version_line(FILE *f);

/* Device description for provenance: "cpu (<cpu model>)" or
   "cuda:<n> <GPU name>"; `backend` "cpu", "cuda" or "none". */
const char *tool_device(const char *backend);

/* Provenance keys: version, commit, date (UTC, ISO 8601), host, device. */
void tool_prov_cjson(cJSON *o, const char *backend);
/* The same as JSON members followed by ", " for hand-written JSON (after "{"). */
void tool_prov_fields(FILE *f, const char *backend);

/* --output FILE: results go to FILE instead of stdout (stdout is reopened
   on a temporary next to FILE, renamed into place when the command ends
   with 0 or 1: outfile.h); NULL keeps stdout. 0 ok, else one line with the
   OS reason and EXIT_USAGE (a folder, a missing parent, no permission). */
int tool_output(const char *prog, const char *path);

/* --backend cuda: 0 when dhs_backend_cuda_create succeeds (device 0), else a
   message on stderr and EXIT_USAGE (nothing was started). Every command
   returns this EXIT_USAGE for "not available here" (dhs --help says so). */
int tool_check_backend(const char *prog, const char *backend);
/* --group-hot-rows B0,B1,..: up to DHS_MAX_SOURCES row counts 0..2^30, each a multiple of page_rows, into
   out; the count, or -1 after printing the reason (args_fail) */
int tool_group_hot_rows(const char *prog, const char *list, int32_t page_rows, int32_t *out);

/* Progress on stderr: on a terminal one line rewritten in place; off a
   terminal a full line at most every `every_s` seconds. quiet: nothing. */
typedef struct tool_progress {
    int on, tty;
    double every_s, last;
    int dirty;
    char tag[128];   /* free for the caller: what is running */
} tool_progress;
void tool_progress_init(tool_progress *p, int quiet, double every_s);
void tool_progress_msg(tool_progress *p, int force, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void tool_progress_end(tool_progress *p);

#endif
