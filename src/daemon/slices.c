/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced's requests: create, list, release, status, plan, stop (through
 * the node layer, which owns the ledger and the slices' files), and
 * following each local slice's process. */
#include "daemon.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arbiter_server.h"
#include "compute_policy.h"
#include "overuse_policy.h"
#include "events.h"
#include "gs_version.h"
#include "log.h"
#include "node_files.h"
#include "number.h"
#include "nvml.h"
#include "proc.h"
#include "quantity.h"
#include "watchdog_daemon.h"

static int pidfd_open_compat(pid_t pid)
{
        return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Signal the process a pidfd pins (never another that reused its pid).
 * 0 or -errno. */
static int pidfd_signal(int pidfd, int sig)
{
        return syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0 ? -errno : 0;
}

static void on_process_exit(struct node_watch *w, uint32_t events);

/* ---- following processes ---- */

static struct follow *follow_find(const struct daemon *d, const char *id, size_t *ret_pos)
{
        for (size_t i = 0; i < d->n_follows; i++)
                if (strcmp(d->follows[i]->id, id) == 0) {
                        if (ret_pos)
                                *ret_pos = i;
                        return d->follows[i];
                }
        return NULL;
}

static int follow_add(struct daemon *d, const char *id, int pidfd)
{
        if (d->n_follows >= GS_LEDGER_MAX_SLICES)
                return -ENOSPC;
        struct follow *f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->w = (struct node_watch){ .fd = pidfd, .fn = on_process_exit, .ctx = d };
        f->up_pidfd = -1;
        snprintf(f->id, sizeof(f->id), "%s", id);
        int r = node_loop_watch(&d->loop, &f->w, EPOLLIN);
        if (r < 0) {
                free(f);
                return r;
        }
        d->follows[d->n_follows++] = f;
        return 0;
}

static void follow_drop(struct daemon *d, const char *id)
{
        size_t pos;
        struct follow *f = follow_find(d, id, &pos);
        if (!f)
                return;
        node_loop_unwatch(&d->loop, &f->w);
        close(f->w.fd);
        if (f->kill_at_ms) /* its release by `up` learns it was stopped (handle_release) */
                snprintf(d->stopped[d->n_stopped++ % DAEMON_STOPPED_KEPT], sizeof(d->stopped[0]),
                         "%s", f->id);
        if (f->up_pidfd >= 0)
                close(f->up_pidfd);
        free(f->up_spec);
        free(f);
        d->follows[pos] = d->follows[--d->n_follows];
}

/* Whether slice `id` was freed after a stop (among the last
 * DAEMON_STOPPED_KEPT). */
static bool was_stopped(const struct daemon *d, const char *id)
{
        size_t n = GS_MIN(d->n_stopped, (size_t)DAEMON_STOPPED_KEPT);
        for (size_t i = 0; i < n; i++)
                if (strcmp(d->stopped[i], id) == 0)
                        return true;
        return false;
}

void slices_unfollow_all(struct daemon *d)
{
        while (d->n_follows)
                follow_drop(d, d->follows[0]->id);
        slices_drain_forget_all(d);
}

/* Open a pidfd for the slice's process if it is still the same process.
 * Returns the fd, or -ESRCH when it is gone or replaced. */
static int open_owner(const struct gs_slice *s)
{
        int fd = pidfd_open_compat(s->pid);
        if (fd < 0)
                return -ESRCH;
        uint64_t start;
        /* Checked after opening: the pidfd now pins this very process. */
        if (proc_start_time(s->pid, &start) < 0 || start != s->start_time) {
                close(fd);
                return -ESRCH;
        }
        return fd;
}

void slices_removed(void *ctx, const struct gs_slice *s, const char *why)
{
        struct daemon *d = ctx;
        (void)why;
        arbsrv_slice_removed(d, s->id); /* a lease it held ends now */
        follow_drop(d, s->id);
        slices_drain_forget(d, s->id);
}

static void on_process_exit(struct node_watch *w, uint32_t events)
{
        struct follow *f = (struct follow *)w;
        (void)events;
        struct daemon *d = w->ctx;
        char id[GS_SLICE_ID_MAX + 1];
        const char *why = f->kill_at_ms ? "stopped (gpuslice stop)" : "its process exited";
        snprintf(id, sizeof(id), "%s", f->id);
        follow_drop(d, id); /* frees f */
        slices_drain(d, id, why); /* freed once nothing of it holds GPU memory */
}

int slices_reconcile(struct daemon *d)
{
        struct gs_ledger *l = &d->node->ledger;
        size_t kept = 0, freed = 0;
        for (size_t i = 0; i < l->n_slices;) {
                const struct gs_slice *s = &l->slices[i];
                if (gs_slice_in_container(s)) {
                        /* No local process: the kubelet plugin frees it once
                         * PodResources shows no pod holds it. */
                        bool dra = s->kind == GS_SLICE_DRA;
                        if (dra ? !d->dra.enabled : !d->kube.enabled)
                                gs_log_warn("slice %s belongs to Kubernetes; it stays until "
                                            "gpusliced %s frees it", s->id,
                                            dra ? "--dra" : "--kubelet");
                        kept++;
                        i++;
                        continue;
                }
                int fd = open_owner(s);
                if (fd >= 0 && follow_add(d, s->id, fd) == 0) {
                        gs_log_info("slice %s: process %d still runs; following it", s->id,
                                    (int)s->pid);
                        kept++;
                        i++;
                        continue;
                }
                if (fd >= 0)
                        close(fd);
                freed++;
                /* A descendant may still hold GPU memory: the watchdog's
                 * first sample decides (slices_drain_start). */
                if (slices_drain_add(d, s->id) == 0) {
                        i++;
                        continue;
                }
                node_slice_release_locked(d->node, s->id, "its process is gone");
        }
        gs_log_info("ledger reconciled: %zu slice%s kept, %zu freed", kept, kept == 1 ? "" : "s",
                    freed);
        return 0;
}

/* ---- requests ---- */

static int get_u64(const struct gs_proto_msg *m, const char *key, uint64_t max, bool required,
                   uint64_t *ret, struct gs_error **err)
{
        const char *v = gs_proto_msg_get(m, key);
        if (!v) {
                if (required)
                        return gs_error_set(err, -EINVAL, "request lacks '%s'", key);
                return 0;
        }
        if (gs_u64_parse_str(v, max, ret) < 0)
                return gs_error_set(err, -EINVAL, "'%s' = '%.40s' is not a number up to %" PRIu64,
                                    key, v, max);
        return 0;
}

/* A memory request: 0 (the default cap), or at least GS_MEMORY_MIN and at
 * most the largest GPU's memory (and so far from UINT64_MAX that rounding
 * up cannot wrap), rounded up to the granularity. */
static int check_memory(const struct daemon *d, uint64_t *memory, struct gs_error **err)
{
        uint64_t largest = 0;
        if (*memory && gs_memory_minimum_check("memory", NULL, *memory, err) < 0)
                return -EINVAL;
        const struct gs_inventory *inv = &d->node->inv;
        for (unsigned i = 0; i < inv->n_gpus; i++)
                if (inv->gpus[i].memory_total > largest)
                        largest = inv->gpus[i].memory_total;
        if (*memory > UINT64_MAX - (GS_MEM_GRANULARITY - 1) || *memory > largest) {
                char mem[32];
                return gs_error_set(err, -EINVAL,
                                    "memory %" PRIu64 " bytes is more than the largest GPU "
                                    "of this node has (%s)",
                                    *memory, gs_bytes_human(largest, mem, sizeof(mem)));
        }
        if (*memory % GS_MEM_GRANULARITY)
                *memory = GS_ALIGN_UP(*memory, GS_MEM_GRANULARITY);
        return 0;
}

static void add_gpu_records(const struct daemon *d, struct gs_proto_builder *b)
{
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        node_usage_locked(d->node, usage);
        for (unsigned i = 0; i < d->node->inv.n_gpus; i++) {
                const struct gs_gpu *g = &d->node->inv.gpus[i];
                gs_proto_builder_add(b, "gpu", "%u", g->index);
                gs_proto_builder_add(b, "gpu_uuid", "%s", g->uuid);
                gs_proto_builder_add(b, "gpu_name", "%s", g->name);
                gs_proto_builder_add(b, "gpu_memory", "%" PRIu64, g->memory_total);
                gs_proto_builder_add(b, "gpu_healthy", "%d", g->healthy ? 1 : 0);
                gs_proto_builder_add(b, "gpu_context_overhead", "%" PRIu64, g->context_overhead);
                gs_proto_builder_add(b, "gpu_free_milli", "%" PRIu32, usage[i].free_milli);
                gs_proto_builder_add(b, "gpu_free_memory", "%" PRIu64, usage[i].free_memory);
                gs_proto_builder_add(b, "gpu_slices", "%u", usage[i].n_slices);
        }
}

/* One slice's record. `mine`: the asker is root or the slice's owner;
 * another user sees the slice (its share, memory, GPUs, use) but not its
 * process, its name or where its files are (pid 0, no name, config, dir). */
static void add_slice_record(const struct daemon *d, const struct gs_slice *s, bool mine,
                             struct gs_proto_builder *b)
{
        char path[DAEMON_PATH_MAX];
        gs_proto_builder_add(b, "slice", "%s", s->id);
        gs_proto_builder_add(b, "slice_name", "%s", mine ? s->name : "");
        gs_proto_builder_add(b, "slice_milli", "%" PRIu32, s->milli);
        gs_proto_builder_add(b, "slice_memory", "%" PRIu64, s->memory_cap);
        gs_proto_builder_add(b, "slice_policy", "%s", gs_compute_policy_name(s->policy));
        gs_proto_builder_add(b, "slice_overuse", "%s", gs_overuse_policy_name(s->overuse));
        gs_proto_builder_add(b, "slice_pid", "%d", mine ? (int)s->pid : 0);
        gs_proto_builder_add(b, "slice_uid", "%u", (unsigned)s->uid);
        gs_proto_builder_add(b, "slice_created", "%" PRId64, s->created);
        gs_proto_builder_add(b, "slice_kind", "%s", gs_slice_in_container(s) ? "kubernetes" : "local");
        if (s->kind == GS_SLICE_DRA)
                gs_proto_builder_add(b, "slice_claim", "%s", s->claim.uid);
        /* Its memory by NVML: over every process of it the watchdog's last
         * sample mapped (the authoritative figure, never the books), and at
         * least what its own process holds now. */
        struct wd_figures fig;
        bool sampled = watchdog_slice_figures(d, s->id, &fig) && fig.sampled;
        for (unsigned g = 0; g < s->n_gpus; g++) {
                gs_proto_builder_add(b, "slice_gpu", "%u,%s", s->gpus[g].index, s->gpus[g].uuid);
                uint64_t used = 0;
                bool known = d->nvml && s->kind == GS_SLICE_LOCAL &&
                             nvml_process_memory(d->nvml, s->gpus[g].index, s->pid, &used) == 0;
                if (sampled && g < GS_SLICE_MAX_GPUS && fig.used[g] > used)
                        used = fig.used[g];
                if (known || (sampled && fig.holders))
                        gs_proto_builder_add(b, "slice_used", "%" PRIu64, used);
        }
        if (!gs_slice_is_whole(s) && mine) {
                node_conf_path(d->node, s->id, path, sizeof(path));
                gs_proto_builder_add(b, "slice_config", "%s", path);
                node_slice_dir_path(d->node, s->id, path, sizeof(path));
                gs_proto_builder_add(b, "slice_dir", "%s", path);
        }
        const struct follow *f = follow_find(d, s->id, NULL);
        if (f && f->kill_at_ms)
                gs_proto_builder_add(b, "slice_state", "%s", "stopping");
        else if (slices_draining(d, s->id))
                gs_proto_builder_add(b, "slice_state", "%s", "draining");
        if (sampled && !gs_slice_is_whole(s))
                gs_proto_builder_add(b, "slice_memory_refusals", "%" PRIu64, fig.refusals);
        if (f && f->up_spec && mine) {
                gs_proto_builder_add(b, "slice_up_pid", "%d", (int)f->up_pid);
                gs_proto_builder_add(b, "slice_up_spec", "%s", f->up_spec);
        }
        arbsrv_add_record(d, s->id, b);
}

/* Check that the peer may make a slice for pid, and pin the process. */
static int owner_check(const struct conn *c, pid_t pid, struct node_request *s, int *ret_pidfd,
                       struct gs_error **err)
{
        uid_t uid;
        int r = proc_uid(pid, &uid);
        if (r < 0)
                return gs_error_set(err, -ESRCH, "process %d does not exist", (int)pid);
        if (c->uid != 0 && c->uid != uid)
                return gs_error_set(err, -EPERM,
                                    "process %d belongs to uid %u; uid %u may only make slices for "
                                    "its own processes",
                                    (int)pid, (unsigned)uid, (unsigned)c->uid);
        s->pid = pid;
        s->uid = uid;
        if (proc_start_time(pid, &s->start_time) < 0)
                return gs_error_set(err, -ESRCH, "process %d does not exist", (int)pid);
        int fd = open_owner(&(struct gs_slice){ .pid = pid, .start_time = s->start_time });
        if (fd < 0)
                return gs_error_set(err, -ESRCH, "process %d exited", (int)pid);
        *ret_pidfd = fd;
        return 0;
}

static int parse_request(const struct daemon *d, const struct gs_proto_msg *m,
                         struct node_request *req, struct gs_error **err)
{
        uint64_t milli = 0, memory = 0, pid = 0;
        int r;
        if ((r = get_u64(m, "gpu_milli", 1000ull * GS_SLICE_MAX_GPUS, true, &milli, err)) < 0 ||
            (r = get_u64(m, "memory", UINT64_MAX, false, &memory, err)) < 0 ||
            (r = get_u64(m, "pid", INT32_MAX, true, &pid, err)) < 0)
                return r;
        const char *policy = gs_proto_msg_get(m, "policy");
        req->has_policy = policy != NULL; /* none: gpusliced --compute-policy */
        if (policy && gs_compute_policy_parse_str(policy, &req->policy) < 0)
                return gs_error_set(err, -EINVAL, "policy '%.40s' is unknown (accepted: %s)",
                                    policy, GS_COMPUTE_POLICY_NAMES);
        const char *overuse = gs_proto_msg_get(m, "overuse");
        req->overuse = GS_OVERUSE_DEFAULT; /* none: gpusliced --overuse-policy */
        if (overuse && gs_overuse_policy_parse_str(overuse, &req->overuse) < 0)
                return gs_error_set(err, -EINVAL,
                                    "overuse policy '%.40s' is unknown (accepted: %s)", overuse,
                                    GS_OVERUSE_POLICY_NAMES);
        req->name = gs_proto_msg_get(m, "name");
        if (req->name && strlen(req->name) > GS_SLICE_NAME_MAX)
                return gs_error_set(err, -EINVAL, "name '%.70s' is longer than %d", req->name,
                                    GS_SLICE_NAME_MAX);
        if (pid == 0)
                return gs_error_set(err, -EINVAL, "pid 0 is not a process");
        if (memory && milli >= 1000)
                return gs_error_set(err, -EINVAL, "whole-GPU requests take no memory cap");
        if ((r = check_memory(d, &memory, err)) < 0)
                return r;
        req->kind = GS_SLICE_LOCAL;
        req->milli = (uint32_t)milli;
        req->memory = memory;
        req->pid = (pid_t)pid;
        return 0;
}

/* create's up_spec: the asker is a `gpuslice up` running that spec; it
 * is pinned (a pidfd) so that a stop of target=up signals that very
 * process. Best effort: without it the slice is an ordinary one. */
static void follow_set_up(struct daemon *d, const char *id, const struct conn *c,
                          const char *spec)
{
        struct follow *f = follow_find(d, id, NULL);
        int fd = c->pid > 0 ? pidfd_open_compat(c->pid) : -1;
        uid_t uid;
        /* SO_PEERCRED's pid is the connecting process's, which may have
         * exited (its socket kept by a child) and its pid be another
         * process's now: the process pinned must be the peer's user's. */
        if (fd >= 0 && (proc_uid(c->pid, &uid) < 0 || uid != c->uid)) {
                close(fd);
                fd = -1;
        }
        if (!f || fd < 0 || !(f->up_spec = strdup(spec))) {
                if (fd >= 0)
                        close(fd);
                gs_log_warn("slice %s: cannot record its `gpuslice up` (pid %d)", id, (int)c->pid);
                return;
        }
        f->up_pid = c->pid;
        f->up_uid = c->uid;
        f->up_pidfd = fd;
}

static int handle_create(struct daemon *d, const struct conn *c, const struct gs_proto_msg *m,
                         struct gs_proto_builder *reply, struct gs_error **err)
{
        struct node_request req = { 0 };
        int r = parse_request(d, m, &req, err);
        if (r < 0)
                return r;
        const struct gs_ledger *l = &d->node->ledger;
        for (size_t i = 0; i < l->n_slices; i++)
                if (l->slices[i].pid == req.pid && !slices_drain_stale(d, l->slices[i].id))
                        return gs_error_set(err, -EEXIST, "process %d already has slice %s",
                                            (int)req.pid, l->slices[i].id);
        _cleanup_close_ int pidfd = -1;
        if ((r = owner_check(c, req.pid, &req, &pidfd, err)) < 0)
                return r;
        struct gs_slice s;
        if ((r = node_slice_prepare_locked(d->node, &req, &s, err)) < 0)
                return r;
        if ((r = follow_add(d, s.id, pidfd)) < 0) {
                gs_error_set(err, r, "cannot follow process %d: %s", (int)req.pid, strerror(-r));
                node_slice_release_locked(d->node, s.id, "its process cannot be followed");
                return r;
        }
        TAKE_FD(pidfd);
        const char *up_spec = gs_proto_msg_get(m, "up_spec");
        if (up_spec)
                follow_set_up(d, s.id, c, up_spec);
        arbsrv_slice_added(d, &s);
        gs_log_info("slice %s is for pid %d uid %u", s.id, (int)s.pid, (unsigned)s.uid);
        gs_proto_builder_add(reply, "id", "%s", s.id);
        add_slice_record(d, &s, true, reply);
        return 0;
}

/* Release a slice. A slice that was stopped (GS_MSG_STOP) answers
 * stopped=1, also once its process's exit freed it, so that `up` does not
 * start it again. */
static int handle_release(struct daemon *d, const struct conn *c, const struct gs_proto_msg *m,
                          struct gs_proto_builder *reply, struct gs_error **err)
{
        const char *id = gs_proto_msg_get(m, "id");
        if (!id)
                return gs_error_set(err, -EINVAL, "request lacks 'id'");
        struct gs_slice *s = gs_ledger_find(&d->node->ledger, id);
        if (!s && was_stopped(d, id)) {
                gs_proto_builder_add(reply, "stopped", "%d", 1);
                return 0;
        }
        if (!s)
                return gs_error_set(err, -ENOENT, "no slice '%.64s'", id);
        if (gs_slice_in_container(s))
                return gs_error_set(err, -EPERM,
                                    "slice %s belongs to a Kubernetes pod; it is freed when the "
                                    "kubelet no longer lists a pod holding it", s->id);
        if (c->uid != 0 && c->uid != s->uid)
                return gs_error_set(err, -EPERM, "slice %s belongs to uid %u", s->id,
                                    (unsigned)s->uid);
        const struct follow *f = follow_find(d, id, NULL);
        if ((f && f->kill_at_ms) || was_stopped(d, id)) /* still draining after a stop */
                gs_proto_builder_add(reply, "stopped", "%d", 1);
        /* Its owner's release drains (freed once nothing of it holds GPU
         * memory); root may free a draining slice at once. */
        int r;
        if (slices_draining(d, id) && c->uid == 0) {
                r = node_slice_release_locked(d->node, id, "released by root while draining");
        } else {
                follow_drop(d, id);
                r = slices_drain(d, id, "released by its owner");
        }
        return r < 0 ? gs_error_set(err, r, "slice %s freed, but the ledger could not be "
                                    "saved: %s", id, strerror(-r)) : 0;
}

static int handle_plan(struct daemon *d, const struct gs_proto_msg *m,
                       struct gs_proto_builder *reply, struct gs_error **err)
{
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        node_usage_locked(d->node, usage);
        const struct gs_inventory *inv = &d->node->inv;
        unsigned n = 0;
        for (size_t i = 0; i < m->n_items; i++) {
                if (strcmp(m->items[i].key, "want"))
                        continue;
                n++;
                const char *v = m->items[i].value;
                const char *comma = strchr(v, ',');
                uint64_t milli = 0, memory = 0;
                if (!comma ||
                    gs_u64_parse(v, (size_t)(comma - v), 1000ull * GS_SLICE_MAX_GPUS, &milli) < 0 ||
                    gs_u64_parse_str(comma + 1, UINT64_MAX, &memory) < 0 || milli == 0)
                        return gs_error_set(err, -EINVAL,
                                            "want #%u '%.40s' is not <milli>,<memory> (milli "
                                            "1..%u, both plain decimal numbers)",
                                            n, v, 1000u * GS_SLICE_MAX_GPUS);
                if (memory && milli >= 1000)
                        return gs_error_set(err, -EINVAL,
                                            "want #%u: whole-GPU requests take no memory cap", n);
                int r = check_memory(d, &memory, err);
                if (r < 0) {
                        gs_error_wrap(err, "want #%u", n);
                        return r;
                }
                struct gs_placement_request req = { .milli = (uint32_t)milli, .memory = memory };
                struct gs_placement p;
                r = gs_place(inv, usage, d->node->placement, &req, &p, err);
                if (r < 0) {
                        gs_error_wrap(err, "slice #%u (%" PRIu64 "m)", n, milli);
                        return r;
                }
                gs_placement_commit(usage, &req, &p);
                gs_proto_builder_add(reply, "place", "%u", inv->gpus[p.gpus[0]].index);
        }
        return 0;
}

/* The watchdog's kept events, oldest first; with since=<seq> only later ones.
 * Bounded by the reply's size: the newest that fit. */
static int handle_events(struct daemon *d, const struct gs_proto_msg *m,
                         struct gs_proto_builder *reply)
{
        uint64_t since = 0;
        const char *v = gs_proto_msg_get(m, "since");
        if (v && gs_u64_parse_str(v, UINT64_MAX, &since) < 0)
                since = 0;
        size_t n = events_count(d->events), first = 0, bytes = 0;
        /* the newest that fit in a reply */
        while (first < n) {
                size_t i = n - 1 - first;
                size_t len = strlen(events_line(d->events, i)) + 16;
                if (bytes + len > GS_PROTO_MAX_REPLY / 2)
                        break;
                bytes += len;
                first++;
        }
        for (size_t i = n - first; i < n; i++) {
                const char *line = events_line(d->events, i);
                if (events_line_seq(line) <= since)
                        continue;
                gs_proto_builder_add(reply, "event", "%s", line);
        }
        return 0;
}

/* ---- stop ---- */

/* Stop a slice's process (target=slice, the default): SIGTERM now, SIGKILL
 * once grace_ms is over (slices_stop_tick); its exit frees the slice. Or
 * (target=up) SIGTERM to the `gpuslice up` that supervises it, which stops
 * every API it runs. Only the slice's owner or root may; for target=up,
 * only the uid of that up or root (root may have made a user's slice). */
static int handle_stop(struct daemon *d, const struct conn *c, const struct gs_proto_msg *m,
                       struct gs_proto_builder *reply, struct gs_error **err)
{
        const char *id = gs_proto_msg_get(m, "id");
        const char *target = gs_proto_msg_get(m, "target");
        uint64_t grace = DAEMON_STOP_GRACE_MS;
        int r;
        if (!id)
                return gs_error_set(err, -EINVAL, "request lacks 'id'");
        if ((r = get_u64(m, "grace_ms", DAEMON_STOP_GRACE_MAX_MS, false, &grace, err)) < 0)
                return r;
        if (target && strcmp(target, "slice") && strcmp(target, "up"))
                return gs_error_set(err, -EINVAL, "target '%.40s' is not slice or up", target);
        const struct gs_slice *s = gs_ledger_find(&d->node->ledger, id);
        if (!s)
                return gs_error_set(err, -ENOENT, "no slice '%.64s'", id);
        if (gs_slice_in_container(s))
                return gs_error_set(err, -EPERM,
                                    "slice %s belongs to a Kubernetes pod; delete the pod to "
                                    "stop it", s->id);
        if (c->uid != 0 && c->uid != s->uid)
                return gs_error_set(err, -EPERM,
                                    "slice %s belongs to uid %u; only its owner or root may stop "
                                    "it (you are uid %u)", s->id, (unsigned)s->uid,
                                    (unsigned)c->uid);
        struct follow *f = follow_find(d, id, NULL);
        if (!f)
                return gs_error_set(err, -ESRCH, "slice %s: its process has exited already; the "
                                    "slice is freed once nothing of it holds GPU memory", id);
        if (target && !strcmp(target, "up")) {
                if (f->up_pidfd < 0)
                        return gs_error_set(err, -ESRCH, "slice %s is not run by `gpuslice up`",
                                            id);
                /* root may make a slice for a user's process: its up is root's */
                if (c->uid != 0 && c->uid != f->up_uid)
                        return gs_error_set(err, -EPERM,
                                            "the `gpuslice up` of slice %s runs as uid %u; only "
                                            "that user or root may stop it (you are uid %u)",
                                            id, (unsigned)f->up_uid, (unsigned)c->uid);
                if ((r = pidfd_signal(f->up_pidfd, SIGTERM)) < 0)
                        return gs_error_set(err, r, "cannot signal `gpuslice up` (pid %d): %s",
                                            (int)f->up_pid, strerror(-r));
                gs_log_info("slice %s: uid %u stops its `gpuslice up` (pid %d)", id,
                            (unsigned)c->uid, (int)f->up_pid);
                gs_proto_builder_add(reply, "up_pid", "%d", (int)f->up_pid);
                return 0;
        }
        int64_t now = node_now_ms();
        int64_t due = now + (int64_t)grace;
        if (!f->kill_at_ms) {
                r = pidfd_signal(f->w.fd, grace ? SIGTERM : SIGKILL);
                if (r < 0 && r != -ESRCH)
                        return gs_error_set(err, r, "cannot signal process %d: %s", (int)s->pid,
                                            strerror(-r));
                gs_log_info("slice %s: uid %u stops pid %d (SIGTERM, SIGKILL after %" PRIu64
                            " ms)", id, (unsigned)c->uid, (int)s->pid, grace);
        }
        if (!f->kill_at_ms || due < f->kill_at_ms)
                f->kill_at_ms = GS_MAX(due, 1);
        gs_proto_builder_add(reply, "stopping", "%s", id);
        gs_proto_builder_add(reply, "pid", "%d", (int)s->pid);
        gs_proto_builder_add(reply, "grace_ms", "%" PRIu64, grace);
        return 0;
}

int64_t slices_stop_tick(struct daemon *d, int64_t now)
{
        int64_t next = -1;
        for (size_t i = 0; i < d->n_follows; i++) {
                struct follow *f = d->follows[i];
                if (!f->kill_at_ms || f->kill_at_ms == INT64_MAX)
                        continue;
                if (f->kill_at_ms <= now) {
                        gs_log_info("slice %s: grace period over: SIGKILL", f->id);
                        pidfd_signal(f->w.fd, SIGKILL);
                        f->kill_at_ms = INT64_MAX; /* still stopping; killed once */
                        continue;
                }
                if (next < 0 || f->kill_at_ms < next)
                        next = f->kill_at_ms;
        }
        return next;
}

/* What a client needs to run a program on our simgpu: its libraries and
 * the settings of the simulated machine we see (the same GPUs, the same
 * state directory). */
static void add_sim_records(const struct daemon *d, struct gs_proto_builder *b)
{
        static const char *const vars[] = { "SIMGPU_DIR",       "SIMGPU_DEVICES",
                                            "SIMGPU_SMS",       "SIMGPU_MEMORY",
                                            "SIMGPU_CTX_OVERHEAD", "SIMGPU_QUEUE_DEPTH",
                                            "SIMGPU_TIMESLICE_US", "SIMGPU_NAME" };
        gs_proto_builder_add(b, "sim_libdir", "%s", d->sim_dir);
        for (size_t i = 0; i < GS_ARRAY_SIZE(vars); i++) {
                const char *v = getenv(vars[i]);
                if (v && strlen(v) < 400)
                        gs_proto_builder_add(b, "sim_env", "%s=%s", vars[i], v);
        }
}

int slices_handle(struct daemon *d, const struct conn *c, const struct gs_proto_msg *m,
                  struct gs_proto_builder *reply, struct gs_error **err)
{
        switch (m->type) {
        case GS_MSG_CREATE:
                return handle_create(d, c, m, reply, err);
        case GS_MSG_RELEASE:
                return handle_release(d, c, m, reply, err);
        case GS_MSG_STOP:
                return handle_stop(d, c, m, reply, err);
        case GS_MSG_PLAN:
                return handle_plan(d, m, reply, err);
        case GS_MSG_EVENTS:
                return handle_events(d, m, reply);
        case GS_MSG_LIST:
        case GS_MSG_STATUS:
                if (m->type == GS_MSG_STATUS) {
                        gs_proto_builder_add(reply, "version", "%s", GS_VERSION);
                        gs_proto_builder_add(reply, "pid", "%d", (int)getpid());
                        gs_proto_builder_add(reply, "policy", "%s",
                                             gs_placement_policy_name(d->node->placement));
                        gs_proto_builder_add(reply, "sim", "%d", d->sim ? 1 : 0);
                        if (d->sim)
                                add_sim_records(d, reply);
                        gs_proto_builder_add(reply, "state_dir", "%s", d->state_dir);
                        gs_proto_builder_add(reply, "socket", "%s", d->socket_path);
                        gs_proto_builder_add(reply, "slices", "%zu", d->node->ledger.n_slices);
                }
                add_gpu_records(d, reply);
                if (m->type == GS_MSG_LIST)
                        for (size_t i = 0; i < d->node->ledger.n_slices; i++)
                                add_slice_record(d, &d->node->ledger.slices[i],
                                                 c->uid == 0 ||
                                                         c->uid == d->node->ledger.slices[i].uid,
                                                 reply);
                return 0;
        default:
                return gs_error_set(err, -EBADMSG, "unknown request type %u", m->type);
        }
}
