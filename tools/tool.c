/* tool.c - provenance, --output, backend check and progress lines (tool.h). */
#include "tool.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "outfile.h"
#include "dhs.h"
#include "sim/util.h"
#ifdef DHS_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#ifndef DHS_GIT_COMMIT
#define DHS_GIT_COMMIT "unknown"
#endif

const char *tool_commit(void) { return DHS_GIT_COMMIT; }

void tool_version_line(FILE *f)
{
    fprintf(f, "dhs %s (library %s, commit %s, %s backend%s)\n", DHS_VERSION_STRING, dhs_version(), tool_commit(),
#ifdef DHS_HAVE_CUDA
            "CPU and CUDA", "s"
#else
            "CPU", ""
#endif
    );
}

static void cpu_model(char *b, size_t n)
{
    snprintf(b, n, "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ') c++;
                c[strcspn(c, "\n")] = 0;
                snprintf(b, n, "cpu (%s)", c);
            }
            break;
        }
    }
    fclose(f);
}

const char *tool_device(const char *backend)
{
    static char buf[320];
    if (backend && !strcmp(backend, "cuda")) {
#ifdef DHS_HAVE_CUDA
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, 0) == cudaSuccess) {
            snprintf(buf, sizeof buf, "cuda:0 %s", p.name);
            return buf;
        }
#endif
        return "cuda (no device)";
    }
    if (backend && !strcmp(backend, "none")) {
        char cpu[256];
        cpu_model(cpu, sizeof cpu);
        snprintf(buf, sizeof buf, "none (simulation on %s)", cpu);
        return buf;
    }
    cpu_model(buf, sizeof buf);
    return buf;
}

static void now_utc(char *b, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(b, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void host_name(char *b, size_t n)
{
    if (gethostname(b, n)) snprintf(b, n, "unknown");
    b[n - 1] = 0;
}

void tool_prov_cjson(cJSON *o, const char *backend)
{
    char date[32], host[256];
    now_utc(date, sizeof date);
    host_name(host, sizeof host);
    cJSON_AddStringToObject(o, "version", dhs_version());
    cJSON_AddStringToObject(o, "commit", tool_commit());
    cJSON_AddStringToObject(o, "date", date);
    cJSON_AddStringToObject(o, "host", host);
    cJSON_AddStringToObject(o, "device", tool_device(backend));
}

void tool_prov_fields(FILE *f, const char *backend)
{
    cJSON *o = cJSON_CreateObject();
    tool_prov_cjson(o, backend);
    char *s = cJSON_PrintUnformatted(o);
    /* s is "{...}": print the members without the braces */
    if (s) {
        size_t n = strlen(s);
        fprintf(f, "%.*s, ", (int)(n - 2), s + 1);
    }
    cJSON_free(s);
    cJSON_Delete(o);
}

int tool_output(const char *prog, const char *path)
{
    return out_stdout(prog, "--output", path);
}

int tool_check_backend(const char *prog, const char *backend)
{
    if (!backend || strcmp(backend, "cuda")) return 0;
    dhs_backend *be = NULL;
    dhs_status s = dhs_backend_cuda_create(0, &be);
    if (s == DHS_OK) {
        dhs_backend_destroy(be);
        return 0;
    }
    fprintf(stderr, "%s: --backend cuda is not available here: %s (%s); use --backend cpu\n", prog, dhs_status_str(s),
#ifdef DHS_HAVE_CUDA
            "no usable CUDA device"
#else
            "this build has no CUDA backend"
#endif
    );
    return EXIT_USAGE;
}

void tool_progress_init(tool_progress *p, int quiet, double every_s)
{
    memset(p, 0, sizeof *p);
    p->on = !quiet;
    p->tty = isatty(2);
    p->every_s = every_s > 0 ? every_s : 5.0;
    p->last = dhs_wall_s();
}

void tool_progress_msg(tool_progress *p, int force, const char *fmt, ...)
{
    if (!p->on) return;
    double now = dhs_wall_s();
    if (!p->tty && !force && now - p->last < p->every_s) return;
    if (p->tty && !force && now - p->last < 0.2) return;
    p->last = now;
    char b[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    if (p->tty) {
        fprintf(stderr, "\r%-79s", b);
        p->dirty = 1;
    } else {
        fprintf(stderr, "%s\n", b);
    }
    fflush(stderr);
}

void tool_progress_end(tool_progress *p)
{
    if (p->on && p->tty && p->dirty) fprintf(stderr, "\r%79s\r", "");
    p->dirty = 0;
}

int tool_group_hot_rows(const char *prog, const char *list, int32_t page_rows, int32_t *out)
{
    const char *q = list;
    int32_t n = 0;
    while (*q) {
        char *end;
        /* digits only (no sign, no blank: strtol would skip them) and no empty element, trailing comma included */
        long v = *q >= '0' && *q <= '9' ? strtol(q, &end, 10) : (end = (char *)q, 0);
        if (end == q || v < 0 || v > (1L << 30) || (*end && *end != ',') || (*end == ',' && !end[1]) ||
            n == DHS_MAX_SOURCES) {
            args_fail(prog, "--group-hot-rows wants up to %d row counts 0..2^30, comma-separated: '%s'", DHS_MAX_SOURCES,
                      list);
            return -1;
        }
        out[n++] = (int32_t)v;
        q = *end ? end + 1 : end;
    }
    if (!n) {
        args_fail(prog, "--group-hot-rows is empty");
        return -1;
    }
    for (int32_t g = 0; g < n; g++)
        if (page_rows < 1 || out[g] % page_rows) {
            args_fail(prog, "--group-hot-rows: %d (group %d) is not a multiple of --page-rows %d", out[g], g, page_rows);
            return -1;
        }
    return n;
}
