/* util.c - small helpers shared by the simulators and tools. */
#include "sim/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

double dhs_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void dhs_errf(char *buf, size_t len, const char *f, ...)
{
    if (!buf || !len) return;
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, len, f, ap);
    va_end(ap);
}
