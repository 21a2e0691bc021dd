/* dhs: the command-line tool of dhisparse. */
#include <stdio.h>
#include <string.h>

#include "cmds.h"

/* Subcommands are linked in when their file exists (weak references). */
#pragma weak cmd_verify
#pragma weak cmd_bench
#pragma weak cmd_plan
#pragma weak cmd_trace
#pragma weak cmd_sim
#pragma weak cmd_serve_sim
#pragma weak cmd_run

struct cmd {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
};

static void usage(FILE *f, const struct cmd *cmds, int n)
{
    fprintf(f, "usage: dhs <command> [flags]   (dhs <command> --help for its flags)\n\ncommands:\n");
    for (int i = 0; i < n; i++)
        if (cmds[i].fn) fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].help);
}

int main(int argc, char **argv)
{
    const struct cmd cmds[] = {
        {"run", cmd_run, "run the reference DSA model through the hierarchy (the main job)"},
        {"verify", cmd_verify, "randomised exactness and invariant check of the library"},
        {"bench", cmd_bench, "benchmarks (resolve, ...) with in-process baselines"},
        {"plan", cmd_plan, "memory planner: bytes per session, sessions per GPU"},
        {"trace", cmd_trace, "selection traces: gen, info"},
        {"sim", cmd_sim, "replay a trace through the core: policies x hot-cache sizes"},
        {"serve-sim", cmd_serve_sim, "discrete-event serving simulator: latency-throughput curves"},
    };
    int n = (int)(sizeof cmds / sizeof cmds[0]);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout, cmds, n);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 0; i < n; i++)
        if (!strcmp(argv[1], cmds[i].name) && cmds[i].fn) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "dhs: unknown command '%s'\n", argv[1]);
    usage(stderr, cmds, n);
    return 2;
}
