/* args.h - tiny flag parsing helpers shared by the dhs subcommands. */
#ifndef DHS_TOOLS_ARGS_H
#define DHS_TOOLS_ARGS_H

#include <stdint.h>

/* Parse a whole decimal integer in [lo, hi]; 0 on success. */
int arg_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* Parse a floating number in [lo, hi]; 0 on success. */
int arg_f64(const char *s, double lo, double hi, double *out);
/* Parse a comma-separated list of integers; returns the count or -1. */
int arg_i64_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int max);

#endif
