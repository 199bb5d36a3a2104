/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice: the command-line front-end. A table of subcommands, one file
 * each (cmd_<name>.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct command {
        const char *name;
        int (*fn)(int argc, char **argv);
        const char *summary;
};

static const struct command commands[] = {
        { "run", cmd_run, "run a command in a GPU slice (gpuslice run --gpu 300m -- CMD...)" },
        { "up", cmd_up, "start every API of a spec file in its slice (gpuslice up apis.yaml)" },
        { "ls", cmd_ls, "list GPUs and their slices (--json for scripts)" },
        { "render", cmd_render, "turn an API spec into Kubernetes manifests" },
        { "events", cmd_events, "what the watchdog detected and did (--json, --follow)" },
        { "top", cmd_top, "a live view of GPUs and slices (--once, --json)" },
};

static void usage(FILE *f)
{
        fputs("Usage: gpuslice [--state-dir DIR] COMMAND [OPTIONS]\n"
              "Share NVIDIA GPUs between model-serving APIs, each in a slice such as 300m.\n\n"
              "Commands:\n",
              f);
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                fprintf(f, "  %-6s %s\n", commands[i].name, commands[i].summary);
        fputs("\nRun `gpuslice COMMAND --help` for a command's options.\n"
              "--state-dir DIR (or $GPUSLICE_STATE_DIR) uses, or starts, a private daemon in DIR;\n"
              "without it, the machine's daemon (/run/gpuslice), or --sim's private one.\n"
              "Environment: GPUSLICE_SOCKET, GPUSLICE_STATE_DIR (where gpusliced is), "
              "GPUSLICE_SHIM,\nGPUSLICE_DAEMON, GPUSLICE_SIM_LIBDIR.\n",
              f);
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
        if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
                usage(stdout);
                return 0;
        }
        if (!strcmp(argv[1], "--version")) {
                puts("gpuslice 0.1.0");
                return 0;
        }
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (!strcmp(argv[1], commands[i].name))
                        return commands[i].fn(argc - 1, argv + 1);
        fprintf(stderr, "gpuslice: unknown command '%s'\n\n", argv[1]);
        usage(stderr);
        return CLI_EXIT_USAGE;
}
