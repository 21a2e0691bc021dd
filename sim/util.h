/* util.h - small helpers shared by the simulators and tools. */
#ifndef DHS_SIM_UTIL_H
#define DHS_SIM_UTIL_H

#include <stddef.h>

/* Monotonic wall time in seconds. */
double dhs_wall_s(void);
/* snprintf into an error buffer; no-op when buf is NULL or len is 0. */
void dhs_errf(char *buf, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));

#endif
