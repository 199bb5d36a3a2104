/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice ls: the node's GPUs and their slices, as a table or as JSON
 * (stable keys, docs/daemon.md). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opts.h"
#include "client.h"
#include "macro.h"
#include "placement.h"
#include "quantity.h"

enum { OPT_JSON = 1, OPT_SIM };

static const struct cli_opt ls_table[] = {
        CLI_OPT_JSON(OPT_JSON),
        { OPT_SIM, 0, "sim", NULL, "list your private simulated daemon (gpuslice run --sim starts one)",
          NULL },
};

const struct cli_cmd cli_cmd_ls = {
        .name = "ls",
        .usage = "[--json] [--sim]",
        .summary = "list GPUs and their slices (--json for scripts)",
        .description = "List the GPUs, their slices (share, memory cap, memory used) and what is "
                       "free.\n",
        .footer = "gpuslice ls never starts a daemon: with none it says so and exits 1.\n",
        .opts = ls_table,
        .n_opts = GS_ARRAY_SIZE(ls_table),
        .flags = CLI_CMD_JSON,
};

static void json_string(const char *s)
{
        putchar('"');
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                if (c == '"' || c == '\\')
                        printf("\\%c", c);
                else if (c < 0x20)
                        printf("\\u%04x", c);
                else
                        putchar(c);
        }
        putchar('"');
}

static bool slice_on_gpu(const struct cli_slice *s, const char *uuid)
{
        for (unsigned i = 0; i < s->n_gpus; i++)
                if (!strcmp(s->gpu_uuid[i], uuid))
                        return true;
        return false;
}

static void print_json(const struct cli_listing *l)
{
        printf("{\"gpus\": [");
        for (size_t g = 0; g < l->n_gpus; g++) {
                const struct cli_gpu *gpu = &l->gpus[g];
                printf("%s\n  {\"index\": %u, \"uuid\": ", g ? "," : "", gpu->index);
                json_string(gpu->uuid);
                printf(", \"name\": ");
                json_string(gpu->name);
                printf(", \"healthy\": %s, \"memory\": %" PRIu64 ", \"context_overhead\": %" PRIu64
                       ", \"free_milli\": %" PRIu32 ", \"free_memory\": %" PRIu64 ", \"slices\": [",
                       gpu->healthy ? "true" : "false", gpu->memory, gpu->context_overhead,
                       gpu->free_milli, gpu->free_memory);
                bool first = true;
                for (size_t i = 0; i < l->n_slices; i++) {
                        const struct cli_slice *s = &l->slices[i];
                        if (!slice_on_gpu(s, gpu->uuid))
                                continue;
                        printf("%s\n    {\"id\": ", first ? "" : ",");
                        first = false;
                        json_string(s->id);
                        printf(", \"name\": ");
                        json_string(s->name);
                        printf(", \"milli\": %" PRIu32 ", \"whole\": %s, \"memory_cap\": %" PRIu64
                               ", \"memory_used\": ",
                               s->milli, s->milli >= 1000 ? "true" : "false", s->memory);
                        if (s->has_used)
                                printf("%" PRIu64, s->used);
                        else
                                printf("null");
                        printf(", \"policy\": ");
                        json_string(s->policy);
                        printf(", \"overuse\": "); /* null: a daemon without per-slice policies */
                        if (s->overuse[0])
                                json_string(s->overuse);
                        else
                                printf("null");
                        if (s->has_gpu_time)
                                printf(", \"gpu_time\": %" PRIu32, s->gpu_time);
                        else
                                printf(", \"gpu_time\": null");
                        printf(", \"kind\": \"%s\", \"pid\": ", s->kube ? "kubernetes" : "local");
                        if (s->kube)
                                printf("null");
                        else
                                printf("%d", s->pid);
                        printf(", \"uid\": %u, \"created\": %" PRId64 ", \"config\": ", s->uid,
                               s->created);
                        if (s->config[0])
                                json_string(s->config);
                        else
                                printf("null");
                        printf("}");
                }
                printf("%s]}", first ? "" : "\n  ");
        }
        printf("%s]}\n", l->n_gpus ? "\n" : "");
}

static void print_table(const struct cli_listing *l)
{
        char a[32], b[32], c[32];
        if (l->n_gpus == 0) {
                puts("No GPUs.");
                return;
        }
        printf("%-4s %-42s %-22s %9s %10s %11s %6s\n", "GPU", "UUID", "NAME", "MEMORY",
               "FREE SHARE", "FREE MEMORY", "SLICES");
        for (size_t g = 0; g < l->n_gpus; g++) {
                const struct cli_gpu *gpu = &l->gpus[g];
                char share[16];
                snprintf(share, sizeof(share), "%" PRIu32 "m", gpu->free_milli);
                printf("%-4u %-42s %-22.22s %9s %10s %11s %6u%s\n", gpu->index, gpu->uuid, gpu->name,
                       gs_bytes_human(gpu->memory, a, sizeof(a)), share,
                       gs_bytes_human(gpu->free_memory, b, sizeof(b)), gpu->n_slices,
                       gpu->healthy ? "" : "  UNHEALTHY");
                bool header = false;
                for (size_t i = 0; i < l->n_slices; i++) {
                        const struct cli_slice *s = &l->slices[i];
                        if (!slice_on_gpu(s, gpu->uuid))
                                continue;
                        if (!header) {
                                printf("     %-8s %-20s %6s %10s %10s %-6s %-7s %8s %8s\n",
                                       "SLICE", "NAME", "SHARE", "MEM CAP", "MEM USED", "POLICY",
                                       "OVERUSE", "PID", "GPU TIME");
                                header = true;
                        }
                        char sh[16], pid[16], gt[16] = "-";
                        if (s->has_gpu_time)
                                snprintf(gt, sizeof(gt), "%" PRIu32 ".%" PRIu32 "%%",
                                         s->gpu_time / 10, s->gpu_time % 10);
                        gs_gpu_quantity_format(s->milli, sh, sizeof(sh));
                        if (s->kube)
                                snprintf(pid, sizeof(pid), "k8s");
                        else
                                snprintf(pid, sizeof(pid), "%d", s->pid);
                        printf("     %-8s %-20.20s %6s %10s %10s %-6s %-7s %8s %8s\n", s->id,
                               s->name[0] ? s->name : "-", sh,
                               s->memory ? gs_bytes_human(s->memory, a, sizeof(a)) : "whole",
                               s->has_used ? gs_bytes_human(s->used, c, sizeof(c)) : "-",
                               s->policy, s->overuse[0] ? s->overuse : "-", pid, gt);
                }
        }
}

int cmd_ls(int argc, char **argv)
{
        bool json = false, sim = false;
        struct cli_args a;
        int c;
        cli_args_init(&a, &cli_cmd_ls, argc, argv);
        while ((c = cli_args_next(&a)) > 0) {
                switch (c) {
                case OPT_JSON: json = true; break;
                case OPT_SIM: sim = true; break;
                }
        }
        if (c < 0)
                return cli_args_exit(c);
        if (a.ind < argc)
                return cli_usage_error(&cli_cmd_ls, "unexpected argument '%s'", argv[a.ind]);
        struct gs_error *err = NULL;
        int fd = -1;
        /* Read-only: it never starts a daemon (nothing would stop it). */
        struct cli_conn_opts co = { .sim = sim, .start = false };
        struct cli_listing l = { 0 };
        if (cli_connect(&co, &fd, &err) < 0 || cli_list(fd, &l, &err) < 0) {
                fprintf(stderr, "gpuslice ls: %s\n", gs_error_msg(err));
                gs_error_free(err);
                if (fd >= 0)
                        close(fd);
                return 1;
        }
        close(fd);
        if (json)
                print_json(&l);
        else
                print_table(&l);
        cli_listing_done(&l);
        return 0;
}
