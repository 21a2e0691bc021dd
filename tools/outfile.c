/* outfile.c - outputs written to a temporary and renamed into place (outfile.h). */
#define _POSIX_C_SOURCE 200809L
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"

#define OUT_MAX 16
#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

typedef struct {
    char final[PATH_MAX];
    char tmp[PATH_MAX];
    int in_place;   /* an existing non-regular file: written directly */
    int used;       /* handed out for writing: renamed into place on success */
} out_entry;

static out_entry outs[OUT_MAX];
/* read by the signal handler: only whole entries below n_outs are live */
static volatile sig_atomic_t n_outs;
static int stdout_idx = -1;

static out_entry *find(const char *path)
{
    for (int i = 0; i < n_outs; i++)
        if (!strcmp(outs[i].final, path)) return &outs[i];
    return NULL;
}

int out_reserve(const char *prog, const char *flag, const char *path)
{
    if (!path || find(path)) return 0;
    if (!*path) {
        fprintf(stderr, "%s: %s wants a file name\n", prog, flag);
        return EXIT_USAGE;
    }
    if (n_outs >= OUT_MAX || strlen(path) + 12 >= PATH_MAX) {
        fprintf(stderr, "%s: %s %s: %s\n", prog, flag, path, strerror(ENAMETOOLONG));
        return EXIT_USAGE;
    }
    out_entry *e = &outs[n_outs];
    memset(e, 0, sizeof *e);
    snprintf(e->final, sizeof e->final, "%s", path);
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            fprintf(stderr, "%s: %s %s: %s\n", prog, flag, path, strerror(EISDIR));
            return EXIT_USAGE;
        }
        if (access(path, W_OK)) {
            fprintf(stderr, "%s: %s %s: %s\n", prog, flag, path, strerror(errno));
            return EXIT_USAGE;
        }
        if (!S_ISREG(st.st_mode)) {
            e->in_place = 1;
            snprintf(e->tmp, sizeof e->tmp, "%s", path);
            n_outs++;
            return 0;
        }
    } else if (errno != ENOENT) {
        fprintf(stderr, "%s: %s %s: %s\n", prog, flag, path, strerror(errno));
        return EXIT_USAGE;
    }
    snprintf(e->tmp, sizeof e->tmp, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(e->tmp);
    if (fd < 0) {
        fprintf(stderr, "%s: %s %s: %s\n", prog, flag, path, strerror(errno));
        return EXIT_USAGE;
    }
    /* mkstemp makes 0600; a result file gets the usual mode (umask applies) */
    mode_t um = umask(0);
    umask(um);
    if (fchmod(fd, (stat(path, &st) == 0 ? st.st_mode : 0666 & ~um) & 07777)) { /* keep 0600 if this fails */ }
    close(fd);
    n_outs++;
    return 0;
}

const char *out_path(const char *path)
{
    out_entry *e = path ? find(path) : NULL;
    if (e) e->used = 1;
    return e ? e->tmp : path;
}

FILE *out_fopen(const char *path)
{
    return fopen(out_path(path), "w");
}

int out_stdout(const char *prog, const char *flag, const char *path)
{
    if (!path) return 0;
    int rc = out_reserve(prog, flag, path);
    if (rc) return rc;
    fflush(stdout);
    out_entry *e = find(path);
    if (!freopen(e->tmp, "w", stdout)) {
        fprintf(stderr, "%s: %s %s: %s\n", prog, flag, path, strerror(errno));
        return EXIT_USAGE;
    }
    e->used = 1;
    stdout_idx = (int)(e - outs);
    return 0;
}

int out_commit(const char *prog)
{
    int rc = 0;
    if (stdout_idx >= 0 && (fflush(stdout) || ferror(stdout) || fsync(fileno(stdout)))) {
        fprintf(stderr, "%s: --output %s: %s\n", prog, outs[stdout_idx].final, strerror(errno ? errno : EIO));
        rc = EXIT_RUNTIME;
    }
    for (int i = 0; i < n_outs && !rc; i++) {
        if (outs[i].in_place) continue;
        if (!outs[i].used) { /* never written (--help, a path not needed): the old file stays */
            unlink(outs[i].tmp);
            outs[i].in_place = 1;
            continue;
        }
        if (rename(outs[i].tmp, outs[i].final)) {
            fprintf(stderr, "%s: %s: %s\n", prog, outs[i].final, strerror(errno));
            rc = EXIT_RUNTIME;
        } else {
            outs[i].in_place = 1; /* nothing left to remove */
        }
    }
    if (rc) out_discard();
    n_outs = 0;
    return rc;
}

void out_discard(void)
{
    for (int i = 0; i < n_outs; i++)
        if (!outs[i].in_place) unlink(outs[i].tmp);
    n_outs = 0;
}

static void on_signal(int sig)
{
    for (int i = 0; i < n_outs; i++)
        if (!outs[i].in_place) unlink(outs[i].tmp); /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

void out_install(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
    atexit(out_discard);
}
