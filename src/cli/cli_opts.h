/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI's option layer: every subcommand declares ONE table of its
 * options, and its parsing (getopt_long built from the table), its --help
 * text, `gpuslice help CMD`, the bash completion and the man page
 * (scripts/gen-cli-docs, from `gpuslice __dump-options`) all come from it.
 *
 * How a command uses it (see cmd_ls.c for a whole example):
 *
 *     enum { OPT_JSON = 1, OPT_SIM };
 *     static const struct cli_opt ls_opts[] = {
 *             CLI_OPT_JSON(OPT_JSON),
 *             { OPT_SIM, 0, "sim", NULL, "list your private simulated daemon" },
 *     };
 *     const struct cli_cmd cli_cmd_ls = {
 *             .name = "ls", .usage = "[--json] [--sim]",
 *             .summary = "list GPUs and their slices",
 *             .opts = ls_opts, .n_opts = GS_ARRAY_SIZE(ls_opts),
 *             .flags = CLI_CMD_JSON,
 *     };
 *
 *     int cmd_ls(int argc, char **argv)
 *     {
 *             struct cli_args a;
 *             int c;
 *             cli_args_init(&a, &cli_cmd_ls, argc, argv);
 *             while ((c = cli_args_next(&a)) > 0)
 *                     switch (c) {
 *                     case OPT_JSON: json = true; break;
 *                     case OPT_SIM: sim = true; break;
 *                     }
 *             if (c < 0)
 *                     return cli_args_exit(c);   (0 after --help, CLI_EXIT_USAGE after an error)
 *             ... the operands are argv[a.ind] .. argv[argc - 1] ...
 *     }
 *
 * Then add &cli_cmd_NAME and cmd_NAME to main.c's table (cli.h declares
 * both). -h/--help is added to every table by this layer: never list it.
 * After adding or changing a table, run `scripts/gen-cli-docs
 * BUILD/src/cli/gpuslice` and commit what it rewrites (the bash completion
 * packaging/completion/gpuslice.bash and the man pages docs/man/gpuslice*.1): the
 * ctest cli_docs_drift fails while they disagree with the tables. An
 * operand of "NAME" completes the slices' names.
 * A read command that can print JSON lists CLI_OPT_JSON(ID) and sets
 * CLI_CMD_JSON (docs and tests find the JSON commands by it); its JSON keys
 * carry their units (memory_used_bytes, gpu_time_ratio, ...). */
#ifndef GS_CLI_OPTS_H
#define GS_CLI_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* One option of a command. */
struct cli_opt {
        int id;             /* what cli_args_next() returns for it: > 0, unique in the table */
        char letter;        /* its short form (-o), or 0 for long only */
        const char *name;   /* its long form without the dashes ("gpu-memory") */
        const char *arg;    /* the name of its argument in the help ("SIZE"), or NULL: none */
        const char *help;   /* what it does; '\n' starts a continuation line */
        const char *values; /* the argument's choices for completion ("share cap"), or NULL;
                               an arg named FILE, SPEC or DIR completes paths */
};

/* The --json option of a read command (one wording everywhere). */
#define CLI_OPT_JSON(ID) \
        { (ID), 0, "json", NULL, "machine-readable output (keys and units in docs/daemon.md)", NULL }

/* flags of a cli_cmd */
#define CLI_CMD_OPERANDS_FIRST 0x1 /* stop at the first operand (run: what follows is CMD's) */
#define CLI_CMD_JSON 0x2           /* it prints JSON with --json (a read command) */
#define CLI_CMD_HIDDEN 0x4         /* not listed by `gpuslice help` nor completed */

/* A subcommand: its name, its table and the texts of its help. */
struct cli_cmd {
        const char *name;        /* "run" */
        const char *usage;       /* what follows "gpuslice NAME " on the usage line */
        const char *summary;     /* one line for `gpuslice help` and the man page's NAME */
        const char *description; /* paragraphs between the usage line and the options, or NULL */
        const char *footer;      /* text after the options (exit status, notes), or NULL */
        const struct cli_opt *opts;
        size_t n_opts;
        unsigned flags;          /* CLI_CMD_* */
        const char *operand;     /* what completes after the options: "FILE", "DIR", "COMMAND"
                                    (a command line), or NULL: nothing */
};

/* The state of one parse of argv by a command's table. */
struct cli_args {
        const struct cli_cmd *cmd;
        int argc;
        char **argv;
        int ind;          /* after the loop: the index of the first operand */
        const char *arg;  /* the argument of the option just returned (NULL if it takes none) */
        char opt[64];     /* the option just returned as "--gpu" or "-o", for messages */
        bool started;     /* getopt was (re)started on argv */
};

/* cli_args_next()'s results below zero */
#define CLI_ARGS_HELP (-1) /* --help was given: the help is printed on stdout */
#define CLI_ARGS_BAD (-2)  /* a bad option: the error is printed on stderr */

/* Start parsing argv (argv[0] is the subcommand's name) by cmd's table. */
void cli_args_init(struct cli_args *a, const struct cli_cmd *cmd, int argc, char **argv);

/* The next option: its id (> 0; a->arg is its argument), 0 when the
 * options end (the operands start at a->ind; "--" is skipped), or
 * CLI_ARGS_HELP / CLI_ARGS_BAD, each already printed (an error names the
 * option and says what was wrong: unknown, ambiguous, missing or unwanted
 * argument). Options and operands may mix unless CLI_CMD_OPERANDS_FIRST. */
int cli_args_next(struct cli_args *a);

/* The exit status for a result below zero of cli_args_next(): 0 for
 * CLI_ARGS_HELP, CLI_EXIT_USAGE for CLI_ARGS_BAD. */
int cli_args_exit(int r);

/* Print "gpuslice NAME: " and the formatted message on stderr, then a hint
 * to --help; returns CLI_EXIT_USAGE (for `return cli_usage_error(...)`). */
int cli_usage_error(const struct cli_cmd *cmd, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* Print cmd's whole help (usage line, description, options, footer) on f. */
void cli_cmd_help(const struct cli_cmd *cmd, FILE *f);

/* Print the global table (gpuslice's own options; its name is the
 * program's) and the n commands' tables on f as one JSON object, which
 * scripts/gen-cli-docs turns into the bash completion and the man pages:
 * {"version", "program": {cmd}, "commands": [{cmd}...]} with cmd = {"name", "usage",
 * "summary", "description", "footer", "json", "hidden", "operand",
 * "options": [{"name", "letter", "arg", "help", "values"}...]} (absent
 * texts are null; --help is listed as any option). */
void cli_dump_options(const char *version, const struct cli_cmd *global,
                      const struct cli_cmd *const *cmds, size_t n, FILE *f);

#endif /* GS_CLI_OPTS_H */
