/* dhs: the command-line tool of dhisparse. Every subcommand parses its flags
   with the one parser in args.c and returns 0 done, 1 a check failed, 2 bad
   usage or input (also --backend cuda where no CUDA device is usable), 3 a
   runtime error. Output files are renamed into place only on 0 or 1
   (outfile.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cmds.h"
#include "outfile.h"
#include "tool.h"

/* Whether what the command printed on standard output failed to reach it (a full disk, a closed pipe):
   a run whose result is lost does not exit 0. Says why on stderr. */
static int stdout_failed(void)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    fprintf(stderr, "dhs: standard output: %s\n", strerror(errno ? errno : EIO));
    return 1;
}

int main(int argc, char **argv)
{
    static const arg_sub cmds[] = {
        {"run", cmd_run, "run the reference DSA model through the hierarchy (the main job)"},
        {"verify", cmd_verify, "randomised exactness and invariant check of the library"},
        {"bench", cmd_bench, "benchmarks: resolve (in-process baselines), serve (the model at serving load)"},
        {"plan", cmd_plan, "memory planner: bytes per session, sessions per GPU"},
        {"trace", cmd_trace, "selection traces: gen, info, stats"},
        {"sim", cmd_sim, "replay a trace through the core: policies x hot-cache sizes"},
        {"serve-sim", cmd_serve_sim, "discrete-event serving simulator: latency-throughput curves"},
        {"pd-bench", cmd_pd, "prefill-to-decode import over UCX, two processes: GB/s vs memcpy"},
    };
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version"))) {
        tool_version_line(stdout);
        return stdout_failed() ? EXIT_RUNTIME : 0;
    }
    out_install();
    int rc = args_dispatch("dhs",
                           "dhisparse: a KV hierarchy for natively sparse-attention LLMs. dhs --version prints\n"
                           "the version and commit. Start with `dhs run` (about half a minute; docs/MODEL.md).\n"
                           "Exit status: 0 done, 1 a check failed, 2 bad usage or input (also --backend cuda\n"
                           "where no CUDA device is usable: not available here), 3 a runtime error.\n"
                           "Files named by --output, --csv, --plot, --out, --trace are written to a temporary\n"
                           "next to them and renamed into place on status 0 or 1; a failed or interrupted\n"
                           "run leaves an existing file as it was.",
                           cmds, (int)(sizeof cmds / sizeof cmds[0]), argc, argv);
    if (rc == 0 || rc == 1) {
        int c = out_commit("dhs");
        if (c) rc = c;
    } else {
        out_discard();
    }
    if (stdout_failed()) rc = EXIT_RUNTIME;
    return rc;
}
