/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice ps: the slices, one line each (as `docker compose ps` lists
 * containers): name, id, share, memory cap and use, GPU, pid, status.
 * Read-only: it never starts a daemon. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
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
#include "slice_log.h"

enum { OPT_JSON = 1, OPT_OUTPUT, OPT_SIM };

static const struct cli_opt ps_opts[] = {
        CLI_OPT_JSON(OPT_JSON),
        { OPT_OUTPUT, 'o', "output", "FORMAT",
          "wide: also policy, over-use policy, uid, its `up` and its log; json: as --json",
          "wide json" },
        { OPT_SIM, 0, "sim", NULL, "list your private simulated daemon", NULL },
};

const struct cli_cmd cli_cmd_ps = {
        .name = "ps",
        .usage = "[--json] [-o wide] [--sim]",
        .summary = "list the slices, one line each (name, share, memory, GPU, pid, status)",
        .description = "One line per slice: its name (never cut), id, share, memory cap and use,\n"
                       "GPU, pid and how long it has run. Another user's slice shows without\n"
                       "its name and pid. ps never starts a daemon: with none it says so and\n"
                       "exits 1.",
        .opts = ps_opts,
        .n_opts = GS_ARRAY_SIZE(ps_opts),
        .flags = CLI_CMD_JSON,
};

enum { COL_NAME, COL_ID, COL_SHARE, COL_MEMORY, COL_USED, COL_GPU, COL_PID, COL_STATUS,
       COL_POLICY, COL_OVERUSE, COL_UID, COL_UP, COL_LOG, N_COLS };

static const char *const col_title[N_COLS] = { "NAME",   "ID",      "SHARE", "MEMORY", "USED",
                                               "GPU",    "PID",     "STATUS", "POLICY",
                                               "OVERUSE", "UID",    "UP",    "LOG" };

/* Right-aligned columns (numbers). */
static const bool col_right[N_COLS] = { [COL_SHARE] = true, [COL_MEMORY] = true,
                                        [COL_USED] = true,  [COL_PID] = true,
                                        [COL_UID] = true };

struct row {
        char cell[N_COLS][1100]; /* a path past that is cut; names are at most 63 */
};

static void age_text(int64_t seconds, char *buf, size_t size)
{
        if (seconds < 0)
                seconds = 0;
        if (seconds < 120)
                snprintf(buf, size, "%llds", (long long)seconds);
        else if (seconds < 7200)
                snprintf(buf, size, "%lldm", (long long)(seconds / 60));
        else if (seconds < 2 * 86400)
                snprintf(buf, size, "%lldh", (long long)(seconds / 3600));
        else
                snprintf(buf, size, "%lldd", (long long)(seconds / 86400));
}

/* The slice's log, when it has one where `gpuslice logs` looks. */
static bool log_of(const struct cli_slice *s, char *buf, size_t size)
{
        char dir[GS_PATH_MAX];
        struct stat sb;
        const char *name = s->name[0] ? s->name : s->id;

        if (s->kube || slice_log_dir(NULL, dir, sizeof(dir), NULL) < 0 ||
            slice_log_path(dir, name, buf, size, NULL) < 0)
                return false;
        return stat(buf, &sb) == 0 && S_ISREG(sb.st_mode);
}

static void fill_row(const struct cli_slice *s, int64_t now, struct row *r)
{
        char a[32], age[32];
        size_t off = 0;

        memset(r, 0, sizeof(*r));
        snprintf(r->cell[COL_NAME], sizeof(r->cell[0]), "%s", s->name[0] ? s->name : "-");
        snprintf(r->cell[COL_ID], sizeof(r->cell[0]), "%s", s->id);
        gs_gpu_quantity_format(s->milli, r->cell[COL_SHARE], sizeof(r->cell[0]));
        snprintf(r->cell[COL_MEMORY], sizeof(r->cell[0]), "%s",
                 s->memory ? gs_bytes_human(s->memory, a, sizeof(a)) : "whole");
        snprintf(r->cell[COL_USED], sizeof(r->cell[0]), "%s",
                 s->has_used ? gs_bytes_human(s->used, a, sizeof(a)) : "-");
        for (unsigned g = 0; g < s->n_gpus; g++) {
                int n = snprintf(r->cell[COL_GPU] + off, sizeof(r->cell[0]) - off, "%s%u",
                                 g ? "," : "", s->gpu_index[g]);
                if (n > 0 && off + (size_t)n < sizeof(r->cell[0]))
                        off += (size_t)n;
        }
        if (s->kube)
                snprintf(r->cell[COL_PID], sizeof(r->cell[0]), "k8s");
        else if (s->pid > 0)
                snprintf(r->cell[COL_PID], sizeof(r->cell[0]), "%d", s->pid);
        else
                snprintf(r->cell[COL_PID], sizeof(r->cell[0]), "-");
        age_text(now - s->created, age, sizeof(age));
        if (s->draining || s->stopping)
                snprintf(r->cell[COL_STATUS], sizeof(r->cell[0]), "%s",
                         s->draining ? "draining" : "stopping");
        else
                snprintf(r->cell[COL_STATUS], sizeof(r->cell[0]), "up %s", age);
        snprintf(r->cell[COL_POLICY], sizeof(r->cell[0]), "%s", s->policy);
        snprintf(r->cell[COL_OVERUSE], sizeof(r->cell[0]), "%s", s->overuse[0] ? s->overuse : "-");
        snprintf(r->cell[COL_UID], sizeof(r->cell[0]), "%u", s->uid);
        if (s->up_pid > 0)
                snprintf(r->cell[COL_UP], sizeof(r->cell[0]), "%d:%.1024s", s->up_pid, s->up_spec);
        else
                snprintf(r->cell[COL_UP], sizeof(r->cell[0]), "-");
        if (!log_of(s, r->cell[COL_LOG], sizeof(r->cell[0])))
                snprintf(r->cell[COL_LOG], sizeof(r->cell[0]), "-");
}

static int print_table(const struct cli_listing *l, bool wide, int64_t now)
{
        struct cli_table t;
        struct row row;
        int r = cli_table_init(&t, wide ? N_COLS : COL_POLICY, col_title, col_right);

        for (size_t i = 0; r == 0 && i < l->n_slices; i++) {
                const char *cells[N_COLS];

                fill_row(&l->slices[i], now, &row);
                for (int c = 0; c < N_COLS; c++)
                        cells[c] = row.cell[c];
                r = cli_table_add(&t, cells);
        }
        if (r == 0) {
                cli_table_print_header(&t, stdout, "");
                for (size_t i = 0; i < t.n_rows; i++)
                        cli_table_print_row(&t, i, stdout, "");
                if (l->n_slices == 0)
                        fputs("(no slices)\n", stderr);
        }
        cli_table_done(&t);
        return r;
}

static void print_json(const struct cli_listing *l, int64_t now)
{
        printf("{\"slices\": [");
        for (size_t i = 0; i < l->n_slices; i++) {
                const struct cli_slice *s = &l->slices[i];
                char log[GS_PATH_MAX];

                printf("%s\n  {\"name\": ", i ? "," : "");
                cli_json_string_or_null(stdout, s->name);
                printf(", \"id\": ");
                cli_json_string(stdout, s->id);
                printf(", \"kind\": \"%s\", \"gpu_milli\": %" PRIu32 ", \"whole_gpus\": %s",
                       s->kube ? "kubernetes" : "local", s->milli,
                       s->milli >= 1000 ? "true" : "false");
                printf(", \"memory_limit_bytes\": ");
                if (s->memory)
                        printf("%" PRIu64, s->memory);
                else
                        printf("null");
                printf(", \"memory_used_bytes\": ");
                if (s->has_used)
                        printf("%" PRIu64, s->used);
                else
                        printf("null");
                printf(", \"gpus\": [");
                for (unsigned g = 0; g < s->n_gpus; g++) {
                        printf("%s{\"index\": %u, \"uuid\": ", g ? ", " : "", s->gpu_index[g]);
                        cli_json_string(stdout, s->gpu_uuid[g]);
                        putchar('}');
                }
                printf("], \"pid\": ");
                if (s->pid > 0 && !s->kube)
                        printf("%d", s->pid);
                else
                        printf("null");
                printf(", \"uid\": %u, \"policy\": ", s->uid);
                cli_json_string_or_null(stdout, s->policy);
                printf(", \"overuse\": ");
                cli_json_string_or_null(stdout, s->overuse);
                printf(", \"status\": \"%s\", \"created_unix_seconds\": %" PRId64
                       ", \"age_seconds\": %" PRId64,
                       s->draining ? "draining" : s->stopping ? "stopping" : "running", s->created,
                       GS_MAX(now - s->created, (int64_t)0));
                printf(", \"up_pid\": ");
                if (s->up_pid > 0)
                        printf("%d", s->up_pid);
                else
                        printf("null");
                printf(", \"up_spec\": ");
                cli_json_string_or_null(stdout, s->up_spec);
                printf(", \"log_path\": ");
                cli_json_string_or_null(stdout, log_of(s, log, sizeof(log)) ? log : NULL);
                putchar('}');
        }
        printf("%s]}\n", l->n_slices ? "\n" : "");
}

int cmd_ps(int argc, char **argv)
{
        bool json = false, wide = false, sim = false;
        struct cli_args a;
        int c;

        cli_args_init(&a, &cli_cmd_ps, argc, argv);
        while ((c = cli_args_next(&a)) > 0) {
                switch (c) {
                case OPT_JSON: json = true; break;
                case OPT_SIM: sim = true; break;
                case OPT_OUTPUT:
                        if (!strcmp(a.arg, "wide"))
                                wide = true;
                        else if (!strcmp(a.arg, "json"))
                                json = true;
                        else
                                return cli_usage_error(&cli_cmd_ps, "-o %s: expected wide or json",
                                                       a.arg);
                        break;
                }
        }
        if (c < 0)
                return cli_args_exit(c);
        if (a.ind < argc)
                return cli_usage_error(&cli_cmd_ps, "unexpected argument '%s'", argv[a.ind]);

        int fd = -1;
        /* Read-only: it never starts a daemon (nothing would stop it). */
        struct cli_conn_opts co = { .sim = sim, .start = false };
        struct cli_listing l = { 0 };
        if (cli_fetch_listing(&co, "ps", &fd, &l) < 0)
                return 1;
        close(fd);
        int64_t now = (int64_t)time(NULL);
        int r = 0;
        if (json)
                print_json(&l, now);
        else
                r = print_table(&l, wide, now);
        cli_listing_done(&l);
        if (r < 0) {
                fprintf(stderr, "gpuslice ps: %s\n", strerror(-r));
                return 1;
        }
        return 0;
}
