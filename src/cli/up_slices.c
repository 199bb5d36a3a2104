/* SPDX-License-Identifier: Apache-2.0 */
/* The slices of `gpuslice up` (see up_slices.h). */
#include "up_slices.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "compute_policy.h"
#include "inventory.h"
#include "macro.h"
#include "overuse_policy.h"
#include "placement.h"
#include "slice_env.h"
#include "slice_log.h"
#include "up_plan.h"
#include "up_supervise.h"

struct held {
        char id[GS_SLICE_ID_MAX + 1]; /* "" when the API holds no slice */
        pid_t pid;
        bool stopped;                 /* its last slice was stopped (gpuslice stop) */
        bool log_failed;              /* its log could not be started: said once */
};

struct up_slices {
        struct cli_conn_opts copts;
        const char *up_spec;
        char *const *log_paths;
        struct cli_daemon_info daemon; /* what it serves (simgpu or not) */
        const struct gs_spec *spec;
        struct held *held;            /* one per API: the slice of its running process */
        char **ids;                   /* every slice id handed out, to check at the end */
        size_t n_ids, cap_ids;
};

static int connect_daemon(struct up_slices *s, int *ret_fd, struct gs_error **err)
{
        return cli_connect(&s->copts, ret_fd, err);
}

int up_slices_open(const struct up_slices_options *opt, const struct gs_spec *spec,
                   struct up_slices **ret, struct gs_error **err)
{
        struct up_slices *s = calloc(1, sizeof(*s));
        int fd = -1, r;

        if (!s)
                return -ENOMEM;
        s->copts = (struct cli_conn_opts){ .sim = opt->sim, .start = true };
        s->up_spec = opt->up_spec;
        s->log_paths = opt->log_paths;
        s->spec = spec;
        s->held = calloc(spec->n_apis, sizeof(*s->held));
        if (!s->held) {
                up_slices_free(s);
                return -ENOMEM;
        }
        r = connect_daemon(s, &fd, err); /* starts the embedded daemon now, not mid-start */
        if (r == 0 && (r = cli_status(fd, &s->daemon, err)) < 0)
                close(fd);
        if (r == 0 && opt->sim && !s->daemon.sim) {
                close(fd);
                r = gs_error_set(err, -EINVAL, "--sim: this gpusliced serves NVIDIA GPUs, not "
                                 "simgpu");
        }
        if (r < 0) {
                up_slices_free(s);
                return r;
        }
        close(fd);
        *ret = s;
        return 0;
}

/* Rebuild the daemon's view (inventory and free capacity) for up_plan_check. */
static void listing_to_plan(const struct cli_listing *l, struct gs_inventory *inv,
                            struct gs_gpu_usage *usage)
{
        memset(inv, 0, sizeof(*inv));
        for (size_t i = 0; i < l->n_gpus && i < GS_MAX_GPUS; i++) {
                const struct cli_gpu *g = &l->gpus[i];
                struct gs_gpu *o = &inv->gpus[inv->n_gpus];

                *o = (struct gs_gpu){ .index = g->index, .memory_total = g->memory,
                                      .healthy = g->healthy,
                                      .context_overhead = g->context_overhead };
                snprintf(o->uuid, sizeof(o->uuid), "%s", g->uuid);
                snprintf(o->name, sizeof(o->name), "%s", g->name);
                usage[inv->n_gpus] = (struct gs_gpu_usage){ .free_milli = g->free_milli,
                                                            .free_memory = g->free_memory,
                                                            .n_slices = g->n_slices };
                inv->n_gpus++;
        }
}

int up_slices_check_fit(struct up_slices *s, struct gs_error **err)
{
        size_t n = s->spec->n_apis;
        _cleanup_free_ uint32_t *milli = calloc(n, sizeof(*milli));
        _cleanup_free_ uint64_t *memory = calloc(n, sizeof(*memory));
        _cleanup_close_ int fd = -1;
        struct gs_error *derr = NULL, *perr = NULL;
        struct cli_listing l = { 0 };
        struct gs_inventory inv;
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        int r;

        if (!milli || !memory)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                milli[i] = s->spec->apis[i].compute.gpu_milli;
                memory[i] = s->spec->apis[i].compute.gpu_memory;
        }
        r = connect_daemon(s, &fd, err);
        if (r < 0)
                return r;
        /* The daemon's verdict decides (its policy, its ledger). */
        r = cli_plan(fd, milli, memory, n, &derr);
        if (r != -ENOSPC && r != -EINVAL) {
                if (r < 0)
                        *err = derr;
                else
                        gs_error_free(derr);
                return r;
        }
        /* Refused: explain per GPU from the daemon's listing; fall back on
         * the daemon's own message if the two views disagree. */
        if (cli_list(fd, &l, NULL) == 0) {
                listing_to_plan(&l, &inv, usage);
                cli_listing_done(&l);
                if (up_plan_check(&inv, usage, GS_PLACE_BINPACK, s->spec, &perr) < 0) {
                        gs_error_free(derr);
                        *err = perr;
                        return r;
                }
                gs_error_free(perr);
        }
        *err = derr;
        return r;
}

static int remember_id(struct up_slices *s, const char *id)
{
        if (s->n_ids == s->cap_ids) {
                size_t cap = s->cap_ids ? 2 * s->cap_ids : 16;
                char **ids = realloc(s->ids, cap * sizeof(*ids));

                if (!ids)
                        return -ENOMEM;
                s->ids = ids;
                s->cap_ids = cap;
        }
        s->ids[s->n_ids] = strdup(id);
        if (!s->ids[s->n_ids])
                return -ENOMEM;
        s->n_ids++;
        return 0;
}

static void release(struct up_slices *s, size_t api)
{
        struct gs_error *err = NULL;
        bool stopped = false;
        int fd = -1, r;

        if (!s->held[api].id[0])
                return;
        r = connect_daemon(s, &fd, &err);
        if (r == 0) {
                r = cli_release_slice(fd, s->held[api].id, &stopped, &err);
                close(fd);
        }
        s->held[api].stopped = r == 0 && stopped;
        /* -ENOENT: the daemon already freed it when the process ended. */
        if (r < 0 && r != -ENOENT)
                fprintf(stderr, "up: [%s] cannot release slice %s: %s\n",
                        s->spec->apis[api].name, s->held[api].id, gs_error_msg(err));
        gs_error_free(err);
        s->held[api].id[0] = '\0';
}

/* Failures worth another try: the daemon unreachable, busy or cut off. */
static bool transient(int r)
{
        return r == -EAGAIN || r == -EBUSY || r == -ETIMEDOUT || r == -EINTR || r == -EIO ||
               r == -ECONNRESET || r == -ECONNREFUSED || r == -EPIPE || r == -ENOMEM ||
               r == -EBADMSG;
}

/* Whether API api's shim log was chosen by the user: GPUSLICE_LOG in our
 * environment or in the API's env of the spec. */
static bool log_chosen(const struct up_slices *s, size_t api)
{
        const struct gs_api_spec *a = &s->spec->apis[api];

        for (size_t k = 0; k < a->n_env; k++)
                if (!strcmp(a->env[k].name, "GPUSLICE_LOG"))
                        return true;
        return slice_log_user_set();
}

/* The API's log for this slice: a first line, and GPUSLICE_LOG for the shim
 * (unless the user chose one). A log that cannot be made is said once; the
 * API runs without. */
static void start_log(struct up_slices *s, size_t api, const struct cli_slice *sl,
                      struct slice_env *e)
{
        const char *path = s->log_paths ? s->log_paths[api] : NULL;
        struct gs_error *err = NULL;
        char line[512];

        if (!path)
                return;
        snprintf(line, sizeof(line), "up: %s: slice %s for pid %d (%s)",
                 s->spec->apis[api].name, sl->id, sl->pid, s->up_spec ? s->up_spec : "");
        if (slice_log_start(path, line, &err) < 0) {
                if (!s->held[api].log_failed)
                        fprintf(stderr, "up: [%s] no log: %s\n", s->spec->apis[api].name,
                                gs_error_msg(err));
                s->held[api].log_failed = true;
                gs_error_free(err);
                return;
        }
        if (!log_chosen(s, api))
                slice_log_env_add(e, path);
}

int up_slices_prepare(void *ud, size_t api, pid_t pid, char *blob, size_t size,
                      struct up_failure *fail)
{
        struct up_slices *s = ud;
        const struct gs_api_spec *a = &s->spec->apis[api];
        const char *policy = gs_compute_policy_name(a->compute.policy);
        /* Unset: none asked, so the slice follows gpusliced's policy. */
        const char *overuse = a->compute.overuse == GS_OVERUSE_DEFAULT
                                      ? NULL
                                      : gs_overuse_policy_name(a->compute.overuse);
        struct slice_env e = { .buf = blob, .size = size };
        struct gs_error *err = NULL;
        struct cli_slice sl;
        bool connected = false;
        int fd = -1, r;

        r = connect_daemon(s, &fd, &err);
        if (r == 0) {
                connected = true;
                r = cli_create_slice(fd, a->compute.gpu_milli, a->compute.gpu_memory, policy,
                                     overuse, a->name, pid, s->up_spec, &sl, &err);
                close(fd);
        }
        if (r == 0) {
                snprintf(s->held[api].id, sizeof(s->held[api].id), "%s", sl.id);
                s->held[api].pid = pid;
                r = remember_id(s, sl.id);
                if (r == 0)
                        r = slice_env_build(&sl, &s->daemon, &e, &err);
                if (r == 0)
                        start_log(s, api, &sl, &e);
                if (r < 0)
                        release(s, api);
        }
        if (r < 0) {
                /* Refused by the daemon (no room, a bad request, not allowed)
                 * or a slice the shim cannot use: the same again next time. */
                fail->permanent = connected && !transient(r);
                snprintf(fail->reason, sizeof(fail->reason), "%s: %s",
                         fail->permanent ? "its slice could not be made" : "no slice yet",
                         err ? gs_error_msg(err) : strerror(-r));
                gs_error_free(err);
                return r;
        }
        return (int)e.len;
}

void up_slices_exited(void *ud, size_t api, pid_t pid)
{
        struct up_slices *s = ud;

        if (s->held[api].pid == pid)
                release(s, api);
}

bool up_slices_stopped(void *ud, size_t api)
{
        struct up_slices *s = ud;
        bool stopped = s->held[api].stopped;

        s->held[api].stopped = false;
        return stopped;
}

int up_slices_release_all(struct up_slices *s)
{
        struct cli_listing l = { 0 };
        struct gs_error *err = NULL;
        int fd = -1, left = 0;

        for (size_t i = 0; i < s->spec->n_apis; i++)
                release(s, i);
        if (connect_daemon(s, &fd, &err) < 0 || cli_list(fd, &l, &err) < 0) {
                fprintf(stderr, "up: cannot check that the slices are freed: %s\n",
                        gs_error_msg(err));
                gs_error_free(err);
                if (fd >= 0)
                        close(fd);
                return 1;
        }
        close(fd);
        for (size_t i = 0; i < l.n_slices; i++)
                for (size_t k = 0; k < s->n_ids; k++)
                        if (strcmp(l.slices[i].id, s->ids[k]) == 0) {
                                fprintf(stderr, "up: slice %s (%s) is still held\n",
                                        l.slices[i].id, l.slices[i].name);
                                left++;
                        }
        cli_listing_done(&l);
        return left;
}

struct up_slices *up_slices_free(struct up_slices *s)
{
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_ids; i++)
                free(s->ids[i]);
        free(s->ids);
        free(s->held);
        free(s);
        return NULL;
}
