/* dhs: the command-line tool of dhisparse. Every subcommand parses its flags
   with the one parser in args.c and returns 0 done, 1 a check failed, 2 bad
   usage or input, 3 a runtime error. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cmds.h"
#include "tool.h"

int main(int argc, char **argv)
{
    static const arg_sub cmds[] = {
        {"run", cmd_run, "run the reference DSA model through the hierarchy (the main job)"},
        {"verify", cmd_verify, "randomised exactness and invariant check of the library"},
        {"bench", cmd_bench, "benchmarks (resolve) with in-process baselines"},
        {"plan", cmd_plan, "memory planner: bytes per session, sessions per GPU"},
        {"trace", cmd_trace, "selection traces: gen, info"},
        {"sim", cmd_sim, "replay a trace through the core: policies x hot-cache sizes"},
        {"serve-sim", cmd_serve_sim, "discrete-event serving simulator: latency-throughput curves"},
    };
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version"))) {
        tool_version_line(stdout);
        return 0;
    }
    return args_dispatch("dhs",
                         "dhisparse: a KV hierarchy for natively sparse-attention LLMs. dhs --version prints\n"
                         "the version and commit. Start with `dhs run` (about half a minute; docs/MODEL.md).",
                         cmds, (int)(sizeof cmds / sizeof cmds[0]), argc, argv);
}
