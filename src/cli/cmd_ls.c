/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice ls: the node's GPUs and their slices, as a table (columns sized
 * to their longest cell: names are never cut; -o wide adds the slice's
 * kind, uid, creation time, config and directory) or as JSON (stable keys
 * with their units in the names, docs/daemon.md). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_json.h"
#include "cli_listing.h"
#include "cli_opts.h"
#include "cli_table.h"
#include "client.h"
#include "macro.h"
#include "placement.h"
#include "quantity.h"

enum { OPT_JSON = 1, OPT_OUTPUT, OPT_SIM };

static const struct cli_opt ls_table[] = {
        CLI_OPT_JSON(OPT_JSON),
        { OPT_OUTPUT, 'o', "output", "FORMAT",
          "wide: also each slice's kind, uid, creation time, config and directory;\n"
          "json: as --json",
          "wide json" },
        { OPT_SIM, 0, "sim", NULL, "list your private simulated daemon (gpuslice run --sim starts one)",
          NULL },
};

const struct cli_cmd cli_cmd_ls = {
        .name = "ls",
        .usage = "[--json | -o wide] [--sim]",
        .summary = "list GPUs and their slices (--json for scripts)",
        .description = "List the GPUs, their slices (share, memory cap, memory used) and what is "
                       "free.\n",
        .footer = "gpuslice ls never starts a daemon: with none it says so and exits 1.\n",
        .opts = ls_table,
        .n_opts = GS_ARRAY_SIZE(ls_table),
        .flags = CLI_CMD_JSON,
};

static bool slice_on_gpu(const struct cli_slice *s, const char *uuid)
{
        for (unsigned i = 0; i < s->n_gpus; i++)
                if (!strcmp(s->gpu_uuid[i], uuid))
                        return true;
        return false;
}

static void print_json_slice(const struct cli_slice *s)
{
        printf("{\"id\": ");
        cli_json_string(stdout, s->id);
        printf(", \"name\": ");
        cli_json_string(stdout, s->name);
        printf(", \"gpu_milli\": %" PRIu32 ", \"whole_gpus\": %s, \"memory_limit_bytes\": %" PRIu64
               ", \"memory_used_bytes\": ",
               s->milli, s->milli >= 1000 ? "true" : "false", s->memory);
        if (s->has_used)
                printf("%" PRIu64, s->used);
        else
                printf("null");
        printf(", \"policy\": ");
        cli_json_string(stdout, s->policy);
        printf(", \"overuse\": "); /* null: a daemon without per-slice policies */
        cli_json_string_or_null(stdout, s->overuse);
        if (s->has_gpu_time)
                printf(", \"gpu_time_ratio\": %" PRIu32 ".%03" PRIu32, s->gpu_time / 1000,
                       s->gpu_time % 1000);
        else
                printf(", \"gpu_time_ratio\": null");
        printf(", \"kind\": \"%s\", \"pid\": ", s->kube ? "kubernetes" : "local");
        if (s->kube)
                printf("null");
        else
                printf("%d", s->pid);
        printf(", \"state\": \"%s\", \"memory_refusals\": ",
               s->draining ? "draining" : s->stopping ? "stopping" : "running");
        if (s->has_refusals)
                printf("%" PRIu64, s->refusals);
        else
                printf("null");
        printf(", \"uid\": %u, \"created_unix_seconds\": %" PRId64 ", \"config_path\": ", s->uid,
               s->created);
        cli_json_string_or_null(stdout, s->config);
        printf(", \"slice_dir_path\": ");
        cli_json_string_or_null(stdout, s->slice_dir);
        printf("}");
}

static void print_json(const struct cli_listing *l)
{
        printf("{\"gpus\": [");
        for (size_t g = 0; g < l->n_gpus; g++) {
                const struct cli_gpu *gpu = &l->gpus[g];
                printf("%s\n  {\"index\": %u, \"uuid\": ", g ? "," : "", gpu->index);
                cli_json_string(stdout, gpu->uuid);
                printf(", \"name\": ");
                cli_json_string(stdout, gpu->name);
                printf(", \"healthy\": %s, \"memory_total_bytes\": %" PRIu64
                       ", \"memory_free_bytes\": %" PRIu64 ", \"context_overhead_bytes\": %" PRIu64
                       ", \"share_free_milli\": %" PRIu32 ", \"slices\": [",
                       gpu->healthy ? "true" : "false", gpu->memory, gpu->free_memory,
                       gpu->context_overhead, gpu->free_milli);
                bool first = true;
                for (size_t i = 0; i < l->n_slices; i++) {
                        const struct cli_slice *s = &l->slices[i];
                        if (!slice_on_gpu(s, gpu->uuid))
                                continue;
                        printf("%s\n    ", first ? "" : ",");
                        first = false;
                        print_json_slice(s);
                }
                printf("%s]}", first ? "" : "\n  ");
        }
        printf("%s]}\n", l->n_gpus ? "\n" : "");
}

/* ---- the table ---- */

enum { G_INDEX, G_UUID, G_NAME, G_MEMORY, G_FREE_SHARE, G_FREE_MEMORY, G_SLICES, G_HEALTH, N_G };
static const char *const gpu_titles[N_G] = { "GPU",         "UUID",   "NAME", "MEMORY",
                                             "FREE SHARE",  "FREE MEMORY", "SLICES", "" };
static const bool gpu_right[N_G] = { [G_MEMORY] = true, [G_FREE_SHARE] = true,
                                     [G_FREE_MEMORY] = true, [G_SLICES] = true };

enum { S_ID, S_NAME, S_SHARE, S_CAP, S_USED, S_POLICY, S_OVERUSE, S_PID, S_GPU_TIME, S_STATE,
       S_REFUSED, S_KIND, S_UID, S_CREATED, S_CONFIG, S_DIR, N_S };
#define N_S_NARROW S_KIND /* the columns without -o wide */
static const char *const slice_titles[N_S] = {
        "SLICE", "NAME",  "SHARE", "MEM CAP", "MEM USED", "POLICY",  "OVERUSE", "PID",
        "GPU TIME", "STATE", "REFUSED", "KIND", "UID",   "CREATED", "CONFIG",  "SLICE DIR",
};
static const bool slice_right[N_S] = { [S_SHARE] = true, [S_CAP] = true,   [S_USED] = true,
                                       [S_PID] = true,   [S_GPU_TIME] = true,
                                       [S_REFUSED] = true, [S_UID] = true };

/* The cells of a slice's row: texts of their own, or the slice's. */
struct slice_cells {
        char share[16], cap[32], used[32], pid[16], gpu_time[16], refused[24], uid[16],
                created[32];
        const char *cell[N_S];
};

static void slice_cells(const struct cli_slice *s, struct slice_cells *c)
{
        gs_gpu_quantity_format(s->milli, c->share, sizeof(c->share));
        if (s->memory)
                gs_bytes_human(s->memory, c->cap, sizeof(c->cap));
        else
                snprintf(c->cap, sizeof(c->cap), "whole");
        if (s->has_used)
                gs_bytes_human(s->used, c->used, sizeof(c->used));
        else
                snprintf(c->used, sizeof(c->used), "-");
        if (s->kube)
                snprintf(c->pid, sizeof(c->pid), "k8s");
        else
                snprintf(c->pid, sizeof(c->pid), "%d", s->pid);
        snprintf(c->gpu_time, sizeof(c->gpu_time), "-");
        if (s->has_gpu_time)
                snprintf(c->gpu_time, sizeof(c->gpu_time), "%" PRIu32 ".%" PRIu32 "%%",
                         s->gpu_time / 10, s->gpu_time % 10);
        snprintf(c->refused, sizeof(c->refused), "-");
        if (s->has_refusals)
                snprintf(c->refused, sizeof(c->refused), "%" PRIu64, s->refusals);
        snprintf(c->uid, sizeof(c->uid), "%u", s->uid);
        time_t t = (time_t)s->created;
        struct tm tm;
        if (s->created > 0 && gmtime_r(&t, &tm))
                strftime(c->created, sizeof(c->created), "%Y-%m-%dT%H:%M:%SZ", &tm);
        else
                snprintf(c->created, sizeof(c->created), "-");
        const char *cells[N_S] = {
                [S_ID] = s->id,
                [S_NAME] = s->name[0] ? s->name : "-",
                [S_SHARE] = c->share,
                [S_CAP] = c->cap,
                [S_USED] = c->used,
                [S_POLICY] = s->policy,
                [S_OVERUSE] = s->overuse[0] ? s->overuse : "-",
                [S_PID] = c->pid,
                [S_GPU_TIME] = c->gpu_time,
                [S_STATE] = s->draining ? "draining" : s->stopping ? "stopping" : "running",
                [S_REFUSED] = c->refused,
                [S_KIND] = s->kube ? "kubernetes" : "local",
                [S_UID] = c->uid,
                [S_CREATED] = c->created,
                [S_CONFIG] = s->config[0] ? s->config : "-",
                [S_DIR] = s->slice_dir[0] ? s->slice_dir : "-",
        };
        memcpy(c->cell, cells, sizeof(cells));
}

/* The GPUs' table and the slices' table, rows in the order they print (a
 * slice on several GPUs has a row under each). */
static int build_tables(const struct cli_listing *l, bool wide, struct cli_table *gt,
                        struct cli_table *st)
{
        int r = cli_table_init(gt, N_G, gpu_titles, gpu_right);
        if (r == 0)
                r = cli_table_init(st, wide ? N_S : N_S_NARROW, slice_titles, slice_right);
        for (size_t g = 0; r == 0 && g < l->n_gpus; g++) {
                const struct cli_gpu *gpu = &l->gpus[g];
                char index[16], mem[32], share[16], free_mem[32], n[16];
                snprintf(index, sizeof(index), "%u", gpu->index);
                snprintf(share, sizeof(share), "%" PRIu32 "m", gpu->free_milli);
                snprintf(n, sizeof(n), "%u", gpu->n_slices);
                const char *cells[N_G] = { index, gpu->uuid, gpu->name,
                                           gs_bytes_human(gpu->memory, mem, sizeof(mem)), share,
                                           gs_bytes_human(gpu->free_memory, free_mem,
                                                          sizeof(free_mem)),
                                           n, gpu->healthy ? "" : "UNHEALTHY" };
                r = cli_table_add(gt, cells);
                for (size_t i = 0; r == 0 && i < l->n_slices; i++) {
                        struct slice_cells c;
                        if (!slice_on_gpu(&l->slices[i], gpu->uuid))
                                continue;
                        slice_cells(&l->slices[i], &c);
                        r = cli_table_add(st, c.cell);
                }
        }
        return r;
}

static int print_table(const struct cli_listing *l, bool wide)
{
        struct cli_table gt, st;
        if (l->n_gpus == 0) {
                puts("No GPUs.");
                return 0;
        }
        int r = build_tables(l, wide, &gt, &st);
        if (r == 0) {
                size_t row = 0;
                cli_table_print_header(&gt, stdout, "");
                for (size_t g = 0; g < l->n_gpus; g++) {
                        cli_table_print_row(&gt, g, stdout, "");
                        bool header = false;
                        for (size_t i = 0; i < l->n_slices; i++) {
                                if (!slice_on_gpu(&l->slices[i], l->gpus[g].uuid))
                                        continue;
                                if (!header)
                                        cli_table_print_header(&st, stdout, "     ");
                                header = true;
                                cli_table_print_row(&st, row++, stdout, "     ");
                        }
                }
        }
        cli_table_done(&gt);
        cli_table_done(&st);
        return r;
}

int cmd_ls(int argc, char **argv)
{
        bool json = false, sim = false, wide = false;
        struct cli_args a;
        int c;
        cli_args_init(&a, &cli_cmd_ls, argc, argv);
        while ((c = cli_args_next(&a)) > 0) {
                switch (c) {
                case OPT_JSON: json = true; break;
                case OPT_OUTPUT:
                        if (!strcmp(a.arg, "wide"))
                                wide = true;
                        else if (!strcmp(a.arg, "json"))
                                json = true;
                        else
                                return cli_usage_error(&cli_cmd_ls,
                                                       "%s: '%s' is not wide or json", a.opt,
                                                       a.arg);
                        break;
                case OPT_SIM: sim = true; break;
                }
        }
        if (c < 0)
                return cli_args_exit(c);
        if (a.ind < argc)
                return cli_usage_error(&cli_cmd_ls, "unexpected argument '%s'", argv[a.ind]);
        if (json && wide)
                return cli_usage_error(&cli_cmd_ls, "-o wide is for the table, not --json "
                                                    "(which has every field)");
        int fd = -1;
        /* Read-only: it never starts a daemon (nothing would stop it). */
        struct cli_conn_opts co = { .sim = sim, .start = false };
        struct cli_listing l = { 0 };
        if (cli_fetch_listing(&co, "ls", &fd, &l) < 0)
                return 1;
        close(fd);
        int r = 0;
        if (json)
                print_json(&l);
        else
                r = print_table(&l, wide);
        cli_listing_done(&l);
        if (r < 0) {
                fprintf(stderr, "gpuslice ls: %s\n", strerror(-r));
                return 1;
        }
        return 0;
}
