/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice down [SPEC]: from any terminal, stop what `gpuslice up SPEC`
 * started (in the foreground elsewhere, or detached with -d): every API and
 * that up itself, and every slice freed.
 *
 * How it finds the up: each slice that up makes records it with the daemon
 * (create's up_spec: the spec's absolute path; the daemon pins the asking
 * process, docs/daemon.md). down lists the caller's slices, takes those of
 * the spec (all the caller's ups without SPEC), and asks the daemon to stop
 * each up (GS_MSG_STOP target=up: SIGTERM to it, checked against the slice's
 * owner); up then stops its APIs as on Ctrl-C. down returns once every one
 * of their slices is freed and each up has exited. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_listing.h"
#include "cli_opts.h"
#include "client.h"
#include "macro.h"
#include "number.h"
#include "proc_stat.h"

enum { OPT_TIMEOUT = 1, OPT_SIM };

static const struct cli_opt down_opts[] = {
        { OPT_TIMEOUT, 0, "timeout", "SECONDS",
          "how long to wait for everything to stop (default 60; up's own --grace\n"
          "decides when its APIs get SIGKILL)", NULL },
        { OPT_SIM, 0, "sim", NULL, "use your private simulated daemon", NULL },
};

const struct cli_cmd cli_cmd_down = {
        .name = "down",
        .usage = "[--timeout SECONDS] [SPEC]",
        .summary = "stop what gpuslice up SPEC started, from any terminal (every API, up itself)",
        .description = "Finds the gpuslice up running SPEC (in the foreground elsewhere or\n"
                       "detached with up -d) through its slices, and stops it as Ctrl-C would:\n"
                       "every API gets SIGTERM, then SIGKILL after up's grace period, and every\n"
                       "slice is freed. Without SPEC, every gpuslice up of yours. Only the\n"
                       "owner of the slices or root may.",
        .footer = "Exit status: 0 when everything stopped (or nothing ran); 1 otherwise.\n",
        .opts = down_opts,
        .n_opts = GS_ARRAY_SIZE(down_opts),
        .operand = "FILE",
};

struct target {
        int up_pid;
        uint64_t up_start;             /* its start time when found (pid reuse) */
        char id[GS_SLICE_ID_MAX + 1];  /* one of its slices: what the stop names */
        char spec[GS_PATH_MAX];
        bool gone;
};

/* Process pid's stat, or -errno (gone, or unreadable). */
static int read_stat(int pid, struct gs_proc_stat *ret)
{
        char path[64], text[1024];
        ssize_t n;
        int fd, r;

        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, text, sizeof(text));
        r = n < 0 ? -errno : gs_proc_stat_parse(text, (size_t)n, ret);
        close(fd);
        return r;
}

/* Whether process pid still runs and is the one seen first (its start
 * time `start`: a pid reused by another process is gone); a zombie is not. */
static bool alive(int pid, uint64_t start)
{
        struct gs_proc_stat st;

        return read_stat(pid, &st) == 0 && st.start_time == start && st.state != 'Z' &&
               st.state != 'X';
}

/* The spec's absolute path, as `up` records it (realpath; a spec removed
 * since: made absolute by hand). */
static int spec_key(const char *spec, char *buf, size_t size)
{
        char cwd[PATH_MAX];
        int n;

        if (realpath(spec, buf) && strlen(buf) < size)
                return 0;
        if (spec[0] == '/')
                n = snprintf(buf, size, "%s", spec);
        else if (getcwd(cwd, sizeof(cwd)))
                n = snprintf(buf, size, "%s/%s", cwd, spec);
        else
                return -errno;
        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static size_t n_listed(const struct cli_listing *l, int up_pid)
{
        size_t n = 0;

        for (size_t i = 0; i < l->n_slices; i++)
                n += l->slices[i].up_pid == up_pid;
        return n;
}

struct down_wait {
        struct target *t;
        size_t n;
};

/* cli_wait_listing's check: the targets whose up has not been seen gone (it
 * has exited and none of its slices is listed) yet. */
static size_t down_left(const struct cli_listing *l, void *ctx)
{
        struct down_wait *w = ctx;
        size_t left = 0;

        for (size_t i = 0; i < w->n; i++) {
                struct target *t = &w->t[i];

                if (!t->gone && !alive(t->up_pid, t->up_start) && n_listed(l, t->up_pid) == 0) {
                        t->gone = true;
                        printf("down: gpuslice up (pid %d, %s) stopped; its slices are freed\n",
                               t->up_pid, t->spec);
                        fflush(stdout);
                }
                left += !t->gone;
        }
        return left;
}

int cmd_down(int argc, char **argv)
{
        uint64_t timeout_ms = 60000;
        bool sim = false;
        struct cli_args a;
        int c;

        cli_args_init(&a, &cli_cmd_down, argc, argv);
        while ((c = cli_args_next(&a)) > 0) {
                switch (c) {
                case OPT_SIM: sim = true; break;
                case OPT_TIMEOUT:
                        if (gs_decimal_milli_parse_str(a.arg, 3600 * 1000, &timeout_ms) < 0)
                                return cli_usage_error(&cli_cmd_down, "--timeout %s: expected "
                                                       "seconds (0..3600)", a.arg);
                        break;
                }
        }
        if (c < 0)
                return cli_args_exit(c);
        if (argc - a.ind > 1)
                return cli_usage_error(&cli_cmd_down, "at most one API spec file");

        char key[GS_PATH_MAX] = "";
        const char *spec = a.ind < argc ? argv[a.ind] : NULL;
        if (spec && spec_key(spec, key, sizeof(key)) < 0) {
                fprintf(stderr, "gpuslice down: %s: path too long\n", spec);
                return CLI_EXIT_USAGE;
        }
        struct cli_conn_opts co = { .sim = sim, .start = false };
        struct cli_listing l = { 0 };
        struct gs_error *err = NULL;
        int fd = -1, rc = 0;
        if (cli_fetch_listing(&co, "down", &fd, &l) < 0)
                return 1;
        _cleanup_free_ struct target *t = calloc(l.n_slices + 1, sizeof(*t));
        size_t n = 0;
        unsigned me = (unsigned)geteuid();
        for (size_t i = 0; t && i < l.n_slices; i++) {
                const struct cli_slice *s = &l.slices[i];
                bool known = false;

                /* root may down another user's up by naming its spec */
                if (s->up_pid <= 0 || (s->uid != me && !(me == 0 && spec)) ||
                    (spec && strcmp(s->up_spec, key)))
                        continue;
                for (size_t k = 0; k < n; k++)
                        known = known || t[k].up_pid == s->up_pid;
                if (known)
                        continue;
                struct gs_proc_stat st;

                t[n].up_pid = s->up_pid;
                t[n].up_start = read_stat(s->up_pid, &st) == 0 ? st.start_time : 0;
                snprintf(t[n].id, sizeof(t[n].id), "%s", s->id);
                snprintf(t[n].spec, sizeof(t[n].spec), "%s", s->up_spec);
                n++;
        }
        cli_listing_done(&l);
        if (!t) {
                close(fd);
                fprintf(stderr, "gpuslice down: out of memory\n");
                return 1;
        }
        if (n == 0) {
                close(fd);
                if (spec)
                        fprintf(stderr, "down: no gpuslice up of yours runs %s (no slice of the "
                                "daemon's is recorded for it); nothing to stop\n", key);
                else
                        fprintf(stderr, "down: no gpuslice up of yours runs; nothing to stop\n");
                return 0;
        }
        for (size_t i = 0; i < n; i++) {
                int pid = 0;

                if (cli_stop_slice(fd, t[i].id, true, 0, &pid, &err) < 0) {
                        fprintf(stderr, "gpuslice down: gpuslice up (pid %d, %s): %s\n",
                                t[i].up_pid, t[i].spec, gs_error_msg(err));
                        gs_error_free(err);
                        err = NULL;
                        t[i].gone = true; /* not waited for */
                        rc = 1;
                        continue;
                }
                fprintf(stderr, "down: stopping gpuslice up (pid %d, %s)\n", t[i].up_pid,
                        t[i].spec);
        }
        close(fd);
        struct down_wait w = { t, n };
        if (!cli_wait_listing(&co, down_left, &w, cli_now_ms() + (int64_t)timeout_ms)) {
                for (size_t i = 0; i < n; i++)
                        if (!t[i].gone)
                                fprintf(stderr, "gpuslice down: gpuslice up (pid %d, %s) has not "
                                        "stopped within the timeout\n", t[i].up_pid, t[i].spec);
                rc = 1;
        }
        return rc;
}
