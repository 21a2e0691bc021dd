/* args.c - flag parsing helpers. */
#include "args.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int arg_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int arg_f64(const char *s, double lo, double hi, double *out)
{
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

int arg_i64_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int max)
{
    if (!s || !*s) return -1;
    int n = 0;
    const char *p = s;
    while (*p) {
        char buf[32];
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == 0 || len >= sizeof buf || n >= max) return -1;
        memcpy(buf, p, len);
        buf[len] = 0;
        if (arg_i64(buf, lo, hi, &out[n])) return -1;
        n++;
        p += len;
        if (*p == ',') p++;
    }
    return n;
}
