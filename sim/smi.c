/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu-smi: simgpu's ground-truth tool. Reads the state file directly
 * (never through libcuda/libnvidia-ml, so no preloaded shim can colour it).
 *
 *   simgpu-smi               human-readable table
 *   simgpu-smi --json        every device and process as JSON; one device or
 *                            process object per line
 *   simgpu-smi --reset       remove the state when no live process uses it
 *   simgpu-smi --set-lost N  mark device N lost (NVML: NVML_ERROR_GPU_IS_LOST)
 *   simgpu-smi --clear-lost N
 *   simgpu-smi -L            one line per GPU, as nvidia-smi -L prints it
 *   simgpu-smi --query-gpu=index,uuid,name --format=csv,noheader [-i N]
 *                            nvidia-smi's query form (those fields only), so
 *                            scripts written for nvidia-smi run on simgpu
 * Exit status: 0 ok, 1 refused (state in use, no such device), 2 usage or
 * configuration error. */
#include "gs_version.h"
#include "sim_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
        fputs("usage: simgpu-smi [--json | --reset | --set-lost N | --clear-lost N | -L |\n"
              "                   --query-gpu=index,uuid,name --format=csv[,noheader] [-i N] |\n"
              "                   --version]\n"
              "Reads simgpu's state in $SIMGPU_DIR (default $XDG_RUNTIME_DIR/simgpu or\n"
              "/tmp/simgpu-<uid>).\n",
              f);
}

static void print_json(struct sim_state *st)
{
        printf("{\n  \"devices\": [\n");
        for (unsigned i = 0; i < st->ndev; i++) {
                const struct sim_dev_rec *d = &st->dev[i];
                printf("    {\"index\": %u, \"uuid\": \"%s\", \"name\": \"%s\", "
                       "\"memory_total\": %llu, \"memory_used\": %llu, \"busy_ns\": %llu, "
                       "\"sim_time_ns\": %llu, \"lost\": %s}%s\n",
                       i, d->uuid, d->name, (unsigned long long)d->total,
                       (unsigned long long)d->used, (unsigned long long)d->busy_ns,
                       (unsigned long long)d->now_ns, d->lost ? "true" : "false",
                       i + 1 < st->ndev ? "," : "");
        }
        printf("  ],\n  \"processes\": [\n");
        bool first = true;
        for (int p = 0; p < sim_proc_slots(st); p++) {
                const struct sim_proc_rec *pr = &st->proc[p];
                if (pr->state == SIM_PROC_FREE)
                        continue;
                for (unsigned d = 0; d < st->ndev; d++) {
                        if (!pr->used[d] && !pr->nctx[d] && !pr->busy[d])
                                continue;
                        printf("%s    {\"pid\": %d, \"alive\": %s, \"device\": %u, "
                               "\"used_bytes\": %llu, \"busy_ns\": %llu, \"contexts\": %u}",
                               first ? "" : ",\n", pr->pid,
                               pr->state == SIM_PROC_ALIVE ? "true" : "false", d,
                               (unsigned long long)pr->used[d], (unsigned long long)pr->busy[d],
                               pr->nctx[d]);
                        first = false;
                }
        }
        printf("%s  ]\n}\n", first ? "" : "\n");
}

static void print_table(struct sim_state *st)
{
        printf("%-4s %-42s %-28s %12s %12s %14s\n", "GPU", "UUID", "NAME", "MEM USED MiB",
               "MEM TOT MiB", "BUSY ms");
        for (unsigned i = 0; i < st->ndev; i++) {
                const struct sim_dev_rec *d = &st->dev[i];
                printf("%-4u %-42s %-28.28s %12llu %12llu %14.1f%s\n", i, d->uuid, d->name,
                       (unsigned long long)(d->used >> 20), (unsigned long long)(d->total >> 20),
                       (double)d->busy_ns / 1e6, d->lost ? "  LOST" : "");
        }
        printf("\n%-8s %-4s %-6s %12s %14s %5s\n", "PID", "GPU", "ALIVE", "MEM MiB", "BUSY ms",
               "CTXS");
        for (int p = 0; p < sim_proc_slots(st); p++) {
                const struct sim_proc_rec *pr = &st->proc[p];
                if (pr->state == SIM_PROC_FREE)
                        continue;
                for (unsigned d = 0; d < st->ndev; d++)
                        if (pr->used[d] || pr->nctx[d] || pr->busy[d])
                                printf("%-8d %-4u %-6s %12llu %14.1f %5u\n", pr->pid, d,
                                       pr->state == SIM_PROC_ALIVE ? "yes" : "no",
                                       (unsigned long long)(pr->used[d] >> 20),
                                       (double)pr->busy[d] / 1e6, pr->nctx[d]);
        }
}

/* Prints the devices as nvidia-smi -L does. */
static void print_list(const struct sim_state *st)
{
        for (unsigned i = 0; i < st->ndev; i++)
                printf("GPU %u: %s (UUID: %s)\n", i, st->dev[i].name, st->dev[i].uuid);
}

static int parse_index(const char *s, const struct sim_state *st, unsigned *out);

static bool field_is(const char *f, size_t n, const char *name)
{
        return n == strlen(name) && strncmp(f, name, n) == 0;
}

/* nvidia-smi --query-gpu=FIELDS --format=csv[,noheader] [-i N] for the
 * fields index, uuid and name. Returns the exit status. */
static int print_query(const struct sim_state *st, int argc, char **argv)
{
        const char *fields = argv[1] + strlen("--query-gpu="), *format = NULL, *only = NULL;
        for (int i = 2; i < argc; i++) {
                if (strncmp(argv[i], "--format=", 9) == 0)
                        format = argv[i] + 9;
                else if (strcmp(argv[i], "-i") == 0 && i + 1 < argc)
                        only = argv[++i];
                else
                        return fprintf(stderr, "simgpu-smi: unknown argument %s\n", argv[i]), 2;
        }
        if (!format || (strcmp(format, "csv") && strcmp(format, "csv,noheader")))
                return fputs("simgpu-smi: --query-gpu needs --format=csv or csv,noheader\n",
                             stderr), 2;
        char list[256];
        snprintf(list, sizeof(list), "%s", fields);
        for (char *f = list; *f; f += strcspn(f, ",") + (f[strcspn(f, ",")] != '\0'))
                if (!field_is(f, strcspn(f, ","), "index") && !field_is(f, strcspn(f, ","), "uuid") &&
                    !field_is(f, strcspn(f, ","), "name"))
                        return fprintf(stderr, "simgpu-smi: unknown field in %s (fields: index, "
                                       "uuid, name)\n", fields), 2;
        unsigned lo = 0, hi = st->ndev;
        if (only) {
                if (parse_index(only, st, &lo) < 0)
                        return 1;
                hi = lo + 1;
        }
        if (strcmp(format, "csv") == 0)
                printf("%s\n", fields);
        for (unsigned i = lo; i < hi; i++) {
                const char *f = fields;
                while (*f) {
                        size_t n = strcspn(f, ",");
                        if (field_is(f, n, "index"))
                                printf("%u", i);
                        else if (field_is(f, n, "uuid"))
                                printf("%s", st->dev[i].uuid);
                        else
                                printf("%s", st->dev[i].name);
                        f += n;
                        if (*f)
                                printf(", "), f++;
                }
                printf("\n");
        }
        return 0;
}

static int parse_index(const char *s, const struct sim_state *st, unsigned *out)
{
        const char *end = NULL;
        uint64_t v = 0;
        if (sim_parse_u64_prefix(s, &v, &end) < 0 || *end || v >= st->ndev) {
                fprintf(stderr, "simgpu-smi: no device %s (devices: 0..%u)\n", s ? s : "(none)",
                        st->ndev - 1);
                return -1;
        }
        *out = (unsigned)v;
        return 0;
}

int main(int argc, char **argv)
{
        const char *cmd = argc > 1 ? argv[1] : "";
        if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
                usage(stdout);
                return 0;
        }
        if (strcmp(cmd, "--version") == 0) {
                printf("simgpu-smi %s\n", GS_VERSION);
                return 0;
        }
        bool query = strncmp(cmd, "--query-gpu=", 12) == 0;
        bool list = strcmp(cmd, "-L") == 0 || strcmp(cmd, "--list-gpus") == 0;
        if (*cmd && strcmp(cmd, "--json") && strcmp(cmd, "--reset") &&
            strcmp(cmd, "--set-lost") && strcmp(cmd, "--clear-lost") && !query && !list) {
                usage(stderr);
                return 2;
        }
        struct sim_config cfg;
        if (sim_config_load(&cfg)) {
                fprintf(stderr, "simgpu-smi: bad SIMGPU_* environment (see SIMGPU_LOG)\n");
                return 2;
        }
        struct sim_attach a = { .fd = -1 };
        /* The GPUs exist before any program used them: -L and the query
         * make the state, as a first CUDA program would. */
        int r = sim_state_attach(&a, &cfg, query || list);
        if (r == SIM_E_ABSENT) {
                if (strcmp(cmd, "--json") == 0)
                        printf("{\n  \"devices\": [\n  ],\n  \"processes\": [\n  ]\n}\n");
                else if (strcmp(cmd, "--reset") && strcmp(cmd, "--json"))
                        fprintf(stderr, "simgpu-smi: no simgpu state in %s\n", cfg.dir);
                return *cmd && strcmp(cmd, "--reset") && strcmp(cmd, "--json") ? 1 : 0;
        }
        if (r) {
                fprintf(stderr, "simgpu-smi: cannot use the state in %s (%s)\n", cfg.dir,
                        r == SIM_E_MISMATCH ? "another simgpu version" : "system error");
                return 2;
        }
        struct sim_state *st = a.st;
        int rc = 0;
        sim_lock(st);
        sim_reap(st, true);
        sim_advance_all(st, sim_now_ns());
        if (strcmp(cmd, "--json") == 0) {
                print_json(st);
        } else if (list) {
                print_list(st);
        } else if (query) {
                rc = print_query(st, argc, argv);
        } else if (strcmp(cmd, "--reset") == 0) {
                int live = 0;
                for (int p = 0; p < sim_proc_slots(st); p++)
                        live += st->proc[p].state == SIM_PROC_ALIVE;
                if (live) {
                        fprintf(stderr, "simgpu-smi: %d live process(es) use the state; not reset\n",
                                live);
                        rc = 1;
                } else {
                        char path[4200];
                        snprintf(path, sizeof(path), "%s/state", cfg.dir);
                        if (unlink(path) < 0) {
                                fprintf(stderr, "simgpu-smi: unlink %s: %s\n", path, strerror(errno));
                                rc = 1;
                        }
                }
        } else if (*cmd) {
                unsigned i;
                if (parse_index(argc > 2 ? argv[2] : NULL, st, &i) < 0)
                        rc = 1;
                else
                        __atomic_store_n(&st->dev[i].lost, strcmp(cmd, "--set-lost") == 0,
                                         __ATOMIC_RELAXED);
        } else {
                print_table(st);
        }
        sim_unlock(st);
        sim_state_detach(&a);
        return rc;
}
