/* SPDX-License-Identifier: Apache-2.0 */
/* Declarations shared by the gpuslice CLI's files: one cmd_<name>() per
 * subcommand (src/cli/cmd_<name>.c), each taking the arguments after the
 * subcommand's name (argv[0] is the subcommand) and returning the process
 * exit status, and its option table cli_cmd_<name> (cli_opts.h), which
 * main.c's command table lists with it. */
#ifndef GS_CLI_H
#define GS_CLI_H

/* Exit status when gpuslice itself fails (as env(1) and docker run do). */
#define CLI_EXIT_FAILURE 125
/* Exit status for a usage error. */
#define CLI_EXIT_USAGE 2

struct cli_cmd;

int cmd_run(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_up(int argc, char **argv);
int cmd_render(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_down(int argc, char **argv);

extern const struct cli_cmd cli_cmd_run;
extern const struct cli_cmd cli_cmd_up;
extern const struct cli_cmd cli_cmd_ls;
extern const struct cli_cmd cli_cmd_render;
extern const struct cli_cmd cli_cmd_events;
extern const struct cli_cmd cli_cmd_top;
extern const struct cli_cmd cli_cmd_ps;
extern const struct cli_cmd cli_cmd_logs;
extern const struct cli_cmd cli_cmd_stop;
extern const struct cli_cmd cli_cmd_down;

#endif /* GS_CLI_H */
