/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice: the command-line front-end. A table of subcommands, one file
 * each (cmd_<name>.c), each with its option table (cli_opts.h) from which
 * its --help, `gpuslice help NAME`, the completion and the man pages come.
 * `gpuslice __dump-options` (hidden) prints every table for
 * scripts/gen-cli-docs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "gs_version.h"
#include "macro.h"

/* A subcommand: its function and its table (cli_opts.h; the name is the
 * table's). Hidden ones (CLI_CMD_HIDDEN) are neither listed nor completed. */
struct command {
        int (*fn)(int argc, char **argv);
        const struct cli_cmd *opts;
};

static const struct command commands[] = {
        { cmd_run, &cli_cmd_run },
        { cmd_up, &cli_cmd_up },
        { cmd_ls, &cli_cmd_ls },
        { cmd_render, &cli_cmd_render },
        { cmd_events, &cli_cmd_events },
        { cmd_top, &cli_cmd_top },
        { cmd_ps, &cli_cmd_ps },
        { cmd_logs, &cli_cmd_logs },
        { cmd_stop, &cli_cmd_stop },
        { cmd_down, &cli_cmd_down },
};

static const struct cli_opt global_table[] = {
        { 1, 0, "state-dir", "DIR",
          "use, or start, a private daemon in DIR ($GPUSLICE_STATE_DIR);\n"
          "without it, the machine's daemon (/run/gpuslice) or --sim's own",
          NULL },
        { 2, 0, "version", NULL, "print the version and exit", NULL },
};

static const struct cli_cmd global = {
        .name = "gpuslice",
        .usage = "[--state-dir DIR] COMMAND [OPTIONS]",
        .summary = "share NVIDIA GPUs between model-serving APIs",
        .description = "Share NVIDIA GPUs between model-serving APIs, each in a slice such as 300m.\n",
        .footer = "Environment: GPUSLICE_SOCKET, GPUSLICE_STATE_DIR (where gpusliced is), "
                  "GPUSLICE_SHIM,\nGPUSLICE_DAEMON, GPUSLICE_SIM_LIBDIR.\n",
        .opts = global_table,
        .n_opts = GS_ARRAY_SIZE(global_table),
        .operand = "COMMAND",
};

static void usage(FILE *f)
{
        fprintf(f, "Usage: gpuslice %s\n%s\nCommands:\n", global.usage, global.description);
        for (size_t i = 0; i < GS_ARRAY_SIZE(commands); i++)
                if (!(commands[i].opts->flags & CLI_CMD_HIDDEN))
                        fprintf(f, "  %-7s %s\n", commands[i].opts->name, commands[i].opts->summary);
        fputs("  help    print a command's help (gpuslice help COMMAND)\n\nOptions:\n", f);
        for (size_t i = 0; i < global.n_opts; i++) {
                const struct cli_opt *o = &global.opts[i];
                char left[64];
                snprintf(left, sizeof(left), "--%s%s%s", o->name, o->arg ? " " : "",
                         o->arg ? o->arg : "");
                fprintf(f, "  %-16s ", left);
                for (const char *p = o->help; *p; p++) {
                        fputc(*p, f);
                        if (*p == '\n')
                                fprintf(f, "%19s", "");
                }
                fputc('\n', f);
        }
        fprintf(f, "  -h, --help       print this help and exit\n\n"
                   "Run `gpuslice help COMMAND` (or `gpuslice COMMAND --help`) for a command's "
                   "options;\n`man gpuslice-COMMAND` for its manual page.\n%s",
                global.footer);
}

static const struct command *find(const char *name)
{
        for (size_t i = 0; i < GS_ARRAY_SIZE(commands); i++)
                if (!strcmp(name, commands[i].opts->name))
                        return &commands[i];
        return NULL;
}

/* gpuslice help [COMMAND] */
static int help(int argc, char **argv)
{
        if (argc < 2) {
                usage(stdout);
                return 0;
        }
        const struct command *c = find(argv[1]);
        if (!c) {
                fprintf(stderr, "gpuslice help: unknown command '%s'\n\n", argv[1]);
                usage(stderr);
                return CLI_EXIT_USAGE;
        }
        cli_cmd_help(c->opts, stdout);
        return 0;
}

static int dump_options(void)
{
        const struct cli_cmd *tables[GS_ARRAY_SIZE(commands)];
        for (size_t i = 0; i < GS_ARRAY_SIZE(commands); i++)
                tables[i] = commands[i].opts;
        cli_dump_options(GS_VERSION, &global, tables, GS_ARRAY_SIZE(commands), stdout);
        return 0;
}

int main(int argc, char **argv)
{
        if (argc > 2 && !strcmp(argv[1], "--state-dir")) {
                setenv("GPUSLICE_STATE_DIR", argv[2], 1);
                argc -= 2;
                argv += 2;
        }
        if (argc < 2) {
                usage(stderr);
                return CLI_EXIT_USAGE;
        }
        if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
                usage(stdout);
                return 0;
        }
        if (!strcmp(argv[1], "help"))
                return help(argc - 1, argv + 1);
        if (!strcmp(argv[1], "--version")) {
                printf("gpuslice %s\n", GS_VERSION);
                return 0;
        }
        if (!strcmp(argv[1], "__dump-options"))
                return dump_options();
        const struct command *c = find(argv[1]);
        if (c)
                return c->fn(argc - 1, argv + 1);
        fprintf(stderr, "gpuslice: unknown %s '%s'\n\n", argv[1][0] == '-' ? "option" : "command",
                argv[1]);
        usage(stderr);
        return CLI_EXIT_USAGE;
}
