/* test_fuzz_regress.c - replays the API fuzzer's inputs with the same decode
 * and checks as the libFuzzer target (tests/fuzz/fuzz_harness.c, compiled here
 * with the normal compiler and, in the sanitizer build, ASan+UBSan):
 *   tests/fuzz/corpus/   the committed seed corpus (tests/fuzz/make_seeds.py);
 *   tests/fuzz/regress/  inputs that once crashed the fuzzer, one per bug
 *                        (named after it), kept after the fix.
 * Every input must run to its end: any discrepancy aborts (the harness prints
 * the op and what differed). Extra files or directories may be given as
 * arguments (e.g. a crash file to reproduce under gcc). Deterministic: the
 * inputs are the seeds.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "test_help.h"
#include "fuzz/fuzz_harness.c"

static long files_run;

static void run_file(const char *path, fz_counts *c)
{
    FILE *f = fopen(path, "rb");
    CHECKF(f != NULL, "cannot open %s", path);
    if (!f) return;
    uint8_t *data = malloc(1 << 20);
    size_t n = fread(data, 1, 1 << 20, f);
    fclose(f);
    printf("replay %s (%zu bytes)\n", path, n);
    fflush(stdout);
    fz_run(data, n, c); /* aborts on a discrepancy */
    free(data);
    files_run++;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static long run_path(const char *path, fz_counts *c)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return -1;
    if (!S_ISDIR(sb.st_mode)) { run_file(path, c); return 1; }
    DIR *d = opendir(path);
    if (!d) return -1;
    char *names[4096];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 4096)
        if (e->d_name[0] != '.' && strcmp(e->d_name, "README.md")) names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, names[i]);
        run_file(full, c);
        free(names[i]);
    }
    return n;
}

int main(int argc, char **argv)
{
    fz_counts c;
    memset(&c, 0, sizeof c);
    double t0 = th_now();
    if (argc > 1) {
        for (int i = 1; i < argc; i++) CHECKF(run_path(argv[i], &c) > 0, "nothing to replay at %s", argv[i]);
    } else {
        /* tests/fuzz/, beside the folder of this source file (tests/core/) */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", __FILE__);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0; else snprintf(dir, sizeof dir, ".");
        char corpus[4200], regress[4200];
        snprintf(corpus, sizeof corpus, "%s/../fuzz/corpus", dir);
        snprintf(regress, sizeof regress, "%s/../fuzz/regress", dir);
        long nc = run_path(corpus, &c), nr = run_path(regress, &c);
        CHECKF(nc >= 30, "seed corpus %s: %ld inputs, want >= 30", corpus, nc);
        CHECKF(nr >= 1, "regression inputs %s: %ld, want >= 1", regress, nr);
        CHECKF(c.shared >= 10, "the corpus opened %llu requests on a shared prefix, want >= 10", (unsigned long long)c.shared);
        CHECKF(c.early_ends >= 10 && c.early_ends < c.rounds, "the corpus ended %llu of %llu rounds early, want >= 10 and not all",
               (unsigned long long)c.early_ends, (unsigned long long)c.rounds);
    }
    printf("fuzz replay: %ld inputs, %llu contexts, %llu API calls (%llu ok, %llu refused), %llu injected faults met, "
           "%llu locations read back, %llu rounds (%llu ended early), %llu shared opens, %.2f s\n",
           files_run, (unsigned long long)c.created, (unsigned long long)c.ops, (unsigned long long)c.ok,
           (unsigned long long)c.errors, (unsigned long long)c.faults, (unsigned long long)c.resolved,
           (unsigned long long)c.rounds, (unsigned long long)c.early_ends, (unsigned long long)c.shared, th_now() - t0);
    /* the replay must exercise the API, not stop at setup */
    CHECKF(c.created >= 20 && c.rounds >= 100 && c.resolved >= 1000, "replay too shallow: %llu contexts, %llu rounds, %llu read-backs",
           (unsigned long long)c.created, (unsigned long long)c.rounds, (unsigned long long)c.resolved);
    CHECKF(c.errors > 0 && c.faults > 0, "no refused call (%llu) or no injected fault met (%llu)", (unsigned long long)c.errors,
           (unsigned long long)c.faults);
    return th_summary();
}
