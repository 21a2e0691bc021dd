/* Subcommands of the `dhs` tool. Each lives in tools/cmd_<name>.c, parses its
   own flags (including --help) and returns the process exit status. */
#ifndef DHS_TOOLS_CMDS_H
#define DHS_TOOLS_CMDS_H
int cmd_verify(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_bench_serve(int argc, char **argv); /* dhs bench serve (cmd_bench_serve.c) */
int cmd_plan(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_serve_sim(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_pd(int argc, char **argv); /* dhs pd-bench (cmd_pd.c) */
#endif
