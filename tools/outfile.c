/* outfile.c - outputs written to a temporary and renamed into place (outfile.h). */
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE 700 /* realpath */
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
    char final[PATH_MAX]; /* the path as given (messages, find) */
    char dest[PATH_MAX];  /* what the rename replaces: final with its symbolic links resolved */
    char tmp[PATH_MAX];
    char flag[32];        /* the option that named it */
    dev_t dev;            /* the destination's folder and name, to find two options naming one file */
    ino_t ino;            /* the existing file's inode (0: none yet) */
    int in_place;         /* an existing non-regular file: written directly */
    int copy_back;        /* an existing file that a rename must not replace (more than one hard link,
                             or a folder where no temporary can be made): its bytes are copied into it */
    int used;             /* handed out for writing: renamed into place on success */
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

static int fail(const char *prog, const char *flag, const char *path, int err)
{
    fprintf(stderr, "%s: %s %s: %s\n", prog, flag, path, strerror(err));
    return EXIT_USAGE;
}

/* path with its symbolic links resolved into out (the last component may not exist yet: a new file, or a
   link to one); 0 or an errno */
static int resolve(const char *path, char *out)
{
    char cur[PATH_MAX];
    snprintf(cur, sizeof cur, "%s", path);
    for (int hops = 0; hops < 40; hops++) {
        struct stat ls;
        if (lstat(cur, &ls) != 0 || !S_ISLNK(ls.st_mode)) break;
        char tgt[PATH_MAX];
        const ssize_t n = readlink(cur, tgt, sizeof tgt - 1);
        if (n < 0) return errno;
        tgt[n] = 0;
        if (tgt[0] == '/') {
            snprintf(cur, sizeof cur, "%s", tgt);
        } else { /* relative to the link's folder */
            char *sl = strrchr(cur, '/');
            char dir[PATH_MAX];
            if (sl) {
                snprintf(dir, sizeof dir, "%.*s", (int)(sl - cur), cur);
                if (!dir[0]) snprintf(dir, sizeof dir, "/");
            } else {
                snprintf(dir, sizeof dir, ".");
            }
            if (snprintf(cur, sizeof cur, "%s/%s", dir, tgt) >= (int)sizeof cur) return ENAMETOOLONG;
        }
        if (hops == 39) return ELOOP;
    }
    snprintf(out, PATH_MAX, "%s", cur);
    return 0;
}

/* the folder of path (".": none) */
static void dir_of(const char *path, char *dir)
{
    const char *sl = strrchr(path, '/');
    if (!sl) snprintf(dir, PATH_MAX, ".");
    else if (sl == path) snprintf(dir, PATH_MAX, "/");
    else snprintf(dir, PATH_MAX, "%.*s", (int)(sl - path), path);
}

/* a temporary in folder dir, its mode that of the file it replaces (st) or the usual one; 0 or an errno */
static int make_tmp(const char *dir, const struct stat *st, char *tmp)
{
    if (snprintf(tmp, PATH_MAX, "%s/.dhs-out.XXXXXX", dir) >= PATH_MAX) return ENAMETOOLONG;
    const int fd = mkstemp(tmp);
    if (fd < 0) return errno;
    /* mkstemp makes 0600; a result file gets the usual mode (umask applies) */
    mode_t um = umask(0);
    umask(um);
    if (fchmod(fd, (st ? st->st_mode : 0666 & ~um) & 07777)) { /* keep 0600 if this fails */ }
    close(fd);
    return 0;
}

int out_reserve(const char *prog, const char *flag, const char *path)
{
    if (!path) return 0;
    out_entry *had = find(path);
    if (had) { /* the same option again (out_stdout after out_reserve); another one: two outputs, one file */
        if (!strcmp(had->flag, flag) || had->in_place) return 0; /* two outputs to /dev/null are fine */
        fprintf(stderr, "%s: %s %s: also the file of %s\n", prog, flag, path, had->flag);
        return EXIT_USAGE;
    }
    if (!*path) {
        fprintf(stderr, "%s: %s wants a file name\n", prog, flag);
        return EXIT_USAGE;
    }
    if (n_outs >= OUT_MAX || strlen(path) + 1 >= PATH_MAX) return fail(prog, flag, path, ENAMETOOLONG);
    out_entry *e = &outs[n_outs];
    memset(e, 0, sizeof *e);
    snprintf(e->final, sizeof e->final, "%s", path);
    snprintf(e->flag, sizeof e->flag, "%s", flag);
    /* where the file is: an existing one through the kernel's resolution (links, /proc/self/fd/N); a new
       one (or a dangling link's target) by following the links by hand, in its real folder */
    struct stat st, ds;
    const int exists = stat(path, &st) == 0;
    if (!exists && errno != ENOENT) return fail(prog, flag, path, errno);
    if (exists && S_ISDIR(st.st_mode)) return fail(prog, flag, path, EISDIR);
    if (exists && access(path, W_OK)) return fail(prog, flag, path, errno);
    int err = 0;
    char dir[PATH_MAX];
    if (exists && !S_ISREG(st.st_mode)) {
        snprintf(e->dest, sizeof e->dest, "%s", path);
    } else if (exists) {
        if (!realpath(path, e->dest)) return fail(prog, flag, path, errno);
    } else {
        char r[PATH_MAX], rd[PATH_MAX];
        if ((err = resolve(path, r)) != 0) return fail(prog, flag, path, err);
        dir_of(r, dir);
        if (!realpath(dir, rd)) return fail(prog, flag, path, errno);
        if (stat(rd, &ds) != 0) return fail(prog, flag, path, errno);
        if (!S_ISDIR(ds.st_mode)) return fail(prog, flag, path, ENOTDIR);
        const char *base = strrchr(r, '/') ? strrchr(r, '/') + 1 : r;
        if (snprintf(e->dest, sizeof e->dest, "%s/%s", strcmp(rd, "/") ? rd : "", base) >= (int)sizeof e->dest)
            return fail(prog, flag, path, ENAMETOOLONG);
    }
    if (exists) {
        e->dev = st.st_dev;
        e->ino = st.st_ino;
    }
    if (exists && !S_ISREG(st.st_mode)) { /* /dev/null, a terminal, a pipe: nothing to rename over */
        e->in_place = 1;
        snprintf(e->tmp, sizeof e->tmp, "%s", path);
        n_outs++;
        return 0;
    }
    /* two options naming one file under different names (./a and a, a link and its target); not a device
       or a pipe (two outputs to /dev/null are fine) */
    for (int i = 0; i < n_outs; i++) {
        if (outs[i].in_place) continue;
        const int same = exists ? outs[i].ino == e->ino && outs[i].dev == e->dev : !strcmp(outs[i].dest, e->dest);
        if (same) {
            fprintf(stderr, "%s: %s %s: also the file of %s (%s)\n", prog, flag, path, outs[i].flag, outs[i].final);
            return EXIT_USAGE;
        }
    }
    dir_of(e->dest, dir);
    if (exists && st.st_nlink > 1) e->copy_back = 1; /* a rename would leave its other names the old bytes */
    if (!e->copy_back) {
        err = make_tmp(dir, exists ? &st : NULL, e->tmp);
        if (err && exists && (err == EACCES || err == EROFS || err == EPERM)) e->copy_back = 1;
        else if (err) return fail(prog, flag, path, err);
    }
    if (e->copy_back) { /* the temporary elsewhere, copied into the file at the end */
        const char *td = getenv("TMPDIR");
        if ((err = make_tmp(td && *td ? td : "/tmp", NULL, e->tmp)) != 0) return fail(prog, flag, path, err);
    }
    n_outs++;
    return 0;
}

/* the temporary's bytes into the existing file e->dest (copy_back); 0 or an errno */
static int copy_into(const out_entry *e)
{
    const int in = open(e->tmp, O_RDONLY);
    if (in < 0) return errno;
    const int out = open(e->dest, O_WRONLY | O_TRUNC);
    if (out < 0) {
        const int err = errno;
        close(in);
        return err;
    }
    char buf[1 << 16];
    int err = 0;
    for (;;) {
        const ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { err = errno; break; }
        if (n == 0) break;
        for (ssize_t o = 0; o < n;) {
            const ssize_t w = write(out, buf + o, (size_t)(n - o));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) { err = errno; break; }
            o += w;
        }
        if (err) break;
    }
    if (!err && fsync(out) && errno != EINVAL) err = errno;
    if (close(out) && !err) err = errno;
    close(in);
    return err;
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
    if (stdout_idx >= 0) {
        /* fsync only where there is a file to make durable: a terminal or a pipe answers EINVAL */
        struct stat st;
        errno = 0;
        if (fflush(stdout) || ferror(stdout) ||
            (fstat(fileno(stdout), &st) == 0 && S_ISREG(st.st_mode) && fsync(fileno(stdout)))) {
            fprintf(stderr, "%s: %s %s: %s\n", prog, outs[stdout_idx].flag, outs[stdout_idx].final,
                    strerror(errno ? errno : EIO));
            rc = EXIT_RUNTIME;
        }
    }
    for (int i = 0; i < n_outs && !rc; i++) {
        if (outs[i].in_place) continue;
        if (!outs[i].used) { /* never written (--help, a path not needed): the old file stays */
            unlink(outs[i].tmp);
            outs[i].in_place = 1;
            continue;
        }
        const int err = outs[i].copy_back ? copy_into(&outs[i]) : rename(outs[i].tmp, outs[i].dest) ? errno : 0;
        if (err) {
            fprintf(stderr, "%s: %s: %s\n", prog, outs[i].final, strerror(err));
            rc = EXIT_RUNTIME;
        } else {
            if (outs[i].copy_back) unlink(outs[i].tmp);
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
