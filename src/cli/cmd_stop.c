/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice stop NAME...: stop the command of each slice, as `docker stop`
 * does: gpusliced sends it SIGTERM, then SIGKILL after the grace period
 * (GS_MSG_STOP, docs/daemon.md), and its slice is freed once it is gone; an
 * API of `gpuslice up` is not restarted. Only the slice's owner or root may:
 * the daemon checks. Returns once every slice is freed. */
#include <errno.h>
#include <inttypes.h>
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

#define STOP_WAIT_EXTRA_MS 10000 /* past the grace period, for the daemon to see the exit */

enum { OPT_GRACE = 1, OPT_SIM };

static const struct cli_opt stop_opts[] = {
        { OPT_GRACE, 't', "grace", "SECONDS",
          "how long the command gets to stop before SIGKILL (default 10)", NULL },
        { OPT_SIM, 0, "sim", NULL, "stop slices of your private simulated daemon", NULL },
};

const struct cli_cmd cli_cmd_stop = {
        .name = "stop",
        .usage = "[--grace SECONDS] NAME...",
        .summary = "stop a slice's command (SIGTERM, SIGKILL after the grace) and free the slice",
        .description = "NAME is a slice's name or id (gpuslice ps). Its command gets SIGTERM,\n"
                       "and SIGKILL once the grace period is over; whatever it started dies with\n"
                       "it, and the slice is freed. An API of gpuslice up is not restarted (the\n"
                       "other APIs keep running; gpuslice down stops them all). Only the slice's\n"
                       "owner or root may stop it.",
        .footer = "Exit status: 0 when every slice is stopped and freed; 1 otherwise.\n",
        .opts = stop_opts,
        .n_opts = GS_ARRAY_SIZE(stop_opts),
        .operand = "NAME",
};

/* The slices named `name` (or with that id) in l: their indices in out. */
static size_t find(const struct cli_listing *l, const char *name, size_t *out)
{
        size_t n = 0;

        for (size_t i = 0; i < l->n_slices; i++)
                if (!strcmp(l->slices[i].id, name) ||
                    (l->slices[i].name[0] && !strcmp(l->slices[i].name, name)))
                        out[n++] = i;
        return n;
}

static bool listed(const struct cli_listing *l, const char *id)
{
        for (size_t i = 0; i < l->n_slices; i++)
                if (!strcmp(l->slices[i].id, id))
                        return true;
        return false;
}

struct stopping {
        char id[GS_SLICE_ID_MAX + 1];
        char name[GS_SLICE_NAME_MAX + 1];
        bool up;
        bool gone;
};

struct stop_wait {
        struct stopping *st;
        size_t n;
};

/* cli_wait_listing's check: the slices not seen freed (unlisted) yet. */
static size_t stop_left(const struct cli_listing *l, void *ctx)
{
        struct stop_wait *w = ctx;
        size_t left = 0;

        for (size_t i = 0; i < w->n; i++) {
                struct stopping *st = &w->st[i];

                if (!st->gone && !listed(l, st->id)) {
                        st->gone = true;
                        printf("%s: stopped; slice %s freed%s\n", st->name[0] ? st->name : st->id,
                               st->id, st->up ? " (its gpuslice up does not restart it)" : "");
                        fflush(stdout);
                }
                left += !st->gone;
        }
        return left;
}

int cmd_stop(int argc, char **argv)
{
        uint64_t grace_ms = 10000;
        bool sim = false;
        struct cli_args a;
        int c;

        cli_args_init(&a, &cli_cmd_stop, argc, argv);
        while ((c = cli_args_next(&a)) > 0) {
                switch (c) {
                case OPT_SIM: sim = true; break;
                case OPT_GRACE:
                        if (gs_decimal_milli_parse_str(a.arg, 3600 * 1000, &grace_ms) < 0)
                                return cli_usage_error(&cli_cmd_stop, "--grace %s: expected "
                                                       "seconds (0..3600)", a.arg);
                        break;
                }
        }
        if (c < 0)
                return cli_args_exit(c);
        if (a.ind >= argc)
                return cli_usage_error(&cli_cmd_stop, "no slice name given");

        struct cli_conn_opts co = { .sim = sim, .start = false };
        struct cli_listing l = { 0 };
        struct gs_error *err = NULL;
        int fd = -1, rc = 0;
        if (cli_fetch_listing(&co, "stop", &fd, &l) < 0)
                return 1;
        _cleanup_free_ size_t *idx = calloc(l.n_slices + 1, sizeof(*idx));
        _cleanup_free_ struct stopping *st = calloc(l.n_slices + 1, sizeof(*st));
        size_t n_st = 0;
        if (!idx || !st) {
                fprintf(stderr, "gpuslice stop: out of memory\n");
                cli_listing_done(&l);
                close(fd);
                return 1;
        }
        for (int i = a.ind; i < argc; i++) {
                size_t n = find(&l, argv[i], idx);

                if (n == 0) {
                        fprintf(stderr, "gpuslice stop: no slice named '%s' (nor with that id); "
                                "gpuslice ps lists them (another user's slices by id only)\n",
                                argv[i]);
                        rc = 1;
                }
                for (size_t k = 0; k < n; k++) {
                        const struct cli_slice *s = &l.slices[idx[k]];
                        bool dup = false;
                        int pid = 0;

                        for (size_t j = 0; j < n_st; j++)
                                dup = dup || !strcmp(st[j].id, s->id);
                        if (dup)
                                continue;
                        if (cli_stop_slice(fd, s->id, false, grace_ms, &pid, &err) < 0) {
                                fprintf(stderr, "gpuslice stop: %s: %s\n", argv[i],
                                        gs_error_msg(err));
                                gs_error_free(err);
                                err = NULL;
                                rc = 1;
                                continue;
                        }
                        snprintf(st[n_st].id, sizeof(st[n_st].id), "%s", s->id);
                        snprintf(st[n_st].name, sizeof(st[n_st].name), "%s", s->name);
                        st[n_st].up = s->up_pid > 0;
                        n_st++;
                }
        }
        cli_listing_done(&l);
        close(fd);
        struct stop_wait w = { st, n_st };
        if (n_st && !cli_wait_listing(&co, stop_left, &w,
                                      cli_now_ms() + (int64_t)grace_ms + STOP_WAIT_EXTRA_MS)) {
                for (size_t i = 0; i < n_st; i++)
                        if (!st[i].gone)
                                fprintf(stderr, "gpuslice stop: slice %s is still held\n",
                                        st[i].id);
                rc = 1;
        }
        return rc;
}
