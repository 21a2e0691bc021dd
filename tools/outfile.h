/* outfile.h - every file a `dhs` command writes (--output, --csv, --plot,
 * trace gen --out, run --trace) goes through here, so that a failed or
 * interrupted run never empties or truncates a result that was already
 * there:
 *   - out_reserve() checks the path before any work (a folder, a missing
 *     parent folder, no write permission, a file another option of the same
 *     command already names: exit 2 with the reason) and creates a temporary
 *     file in the file's own folder (".dhs-out.XXXXXX", so the final rename is
 *     atomic and a long name still fits); a symbolic link is followed, so the
 *     file it points to is what gets replaced, not the link;
 *   - the command writes into out_path(FILE) (or the FILE* of out_fopen());
 *   - dhs.c renames every temporary into place when the command ends with
 *     0 or 1 (out_commit) and removes them on any other status, on exit()
 *     and on SIGINT / SIGTERM / SIGHUP (the handler unlinks, then re-raises).
 * A path that exists and is not a regular file (/dev/null, a pipe) is
 * written in place: there is nothing to rename over. An existing file with
 * other hard links, or in a folder where no temporary can be made, gets its
 * temporary in $TMPDIR (or /tmp) and the bytes copied into it at the end. */
#ifndef DHS_TOOLS_OUTFILE_H
#define DHS_TOOLS_OUTFILE_H

#include <stdio.h>

/* Check PATH and create its temporary. 0 ok (also for PATH NULL), else one
   line "PROG: FLAG PATH: <OS reason>" on stderr and EXIT_USAGE. */
int out_reserve(const char *prog, const char *flag, const char *path);
/* The file to write for the final PATH: its temporary when reserved, else
   PATH itself. */
const char *out_path(const char *path);
/* fopen(out_path(PATH), "w"). */
FILE *out_fopen(const char *path);
/* Send stdout to PATH's temporary (reserved here if it is not yet). */
int out_stdout(const char *prog, const char *flag, const char *path);
/* Rename every temporary into place (stdout flushed first). 0, or a
   message and EXIT_RUNTIME (the temporaries are then removed). */
int out_commit(const char *prog);
/* Remove every temporary; the final files stay as they were. */
void out_discard(void);
/* SIGINT, SIGTERM, SIGHUP: remove the temporaries, then die of the signal;
   exit(): remove what was not committed. */
void out_install(void);

#endif
