/* gpusliced --kubelet: the kubelet device plugin (src/kube) run in its own
 * thread inside the daemon, with the daemon's ledger as the one record of
 * every slice on the node, local and Kubernetes alike.
 *
 * Sharing: the plugin's gRPC handlers run on gRPC's threads and call the
 * hooks below with the plugin's lock held; the hooks take d->lock, which the
 * event loop holds while it serves a request. A mutex rather than handing
 * requests to the event loop through a pipe: each hook is a short in-memory
 * check-and-update plus one ledger save, the plugin would block holding its
 * own lock for the answer either way, and a lock keeps the check (is there
 * room?) and the update (add the slice) atomic against local requests
 * without a second protocol. The event loop never calls into the plugin, so
 * the order plugin lock -> d->lock cannot deadlock. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "kube_plugin.h"
#include "log.h"
#include "nvml.h"

static int save_locked(struct daemon *d, struct gs_error **err)
{
        return gs_ledger_save(&d->ledger, d->ledger_path, err);
}

static int gpu_position(const struct daemon *d, const char *uuid)
{
        for (unsigned i = 0; i < d->inv.n_gpus; i++)
                if (strcmp(d->inv.gpus[i].uuid, uuid) == 0)
                        return (int)i;
        return -1;
}

/* The GPUs, through the daemon's NVML; health changes reach the daemon's
 * own inventory too, so local placement avoids a lost GPU as well. */
static int hook_inventory(void *ctx, struct gs_inventory *inv, struct gs_error **err)
{
        struct daemon *d = ctx;
        pthread_mutex_lock(&d->lock);
        int r = nvml_read_inventory(d->nvml, inv, err);
        if (r >= 0)
                for (unsigned i = 0; i < inv->n_gpus; i++) {
                        /* A lost GPU answers no query (not even its UUID):
                         * it keeps its identity, only its health changes. */
                        if (!inv->gpus[i].healthy && i < d->inv.n_gpus) {
                                inv->gpus[i] = d->inv.gpus[i];
                                inv->gpus[i].healthy = false;
                        }
                        int k = gpu_position(d, inv->gpus[i].uuid);
                        if (k >= 0 && d->inv.gpus[k].healthy != inv->gpus[i].healthy) {
                                dlog_warn("GPU %u (%s) is %s", d->inv.gpus[k].index,
                                          inv->gpus[i].uuid,
                                          inv->gpus[i].healthy ? "healthy again" : "UNHEALTHY");
                                d->inv.gpus[k].healthy = inv->gpus[i].healthy;
                        }
                }
        pthread_mutex_unlock(&d->lock);
        return r;
}

/* Units (0..1000) that local slices hold on a GPU: their share, or their
 * memory caps as a fraction of the GPU's memory when that is more. */
static uint32_t hook_gpu_used(void *ctx, const char *uuid)
{
        struct daemon *d = ctx;
        pthread_mutex_lock(&d->lock);
        uint64_t milli = 0, memory = 0, total = 0;
        int k = gpu_position(d, uuid);
        if (k >= 0)
                total = d->inv.gpus[k].memory_total;
        for (size_t i = 0; i < d->ledger.n_slices; i++) {
                const struct gs_slice *s = &d->ledger.slices[i];
                if (s->kind != GS_SLICE_LOCAL)
                        continue;
                for (unsigned g = 0; g < s->n_gpus; g++) {
                        if (strcmp(s->gpus[g].uuid, uuid) != 0)
                                continue;
                        milli += gs_slice_is_whole(s) ? 1000 : s->milli;
                        memory += gs_slice_is_whole(s) ? total : s->memory_cap;
                }
        }
        pthread_mutex_unlock(&d->lock);
        uint64_t by_memory = total ? (memory * 1000 + total - 1) / total : 0;
        uint64_t used = GS_MAX(milli, by_memory);
        return (uint32_t)GS_MIN(used, 1000u);
}

/* Room for s on its GPUs by the ledger (local and Kubernetes slices). */
static int check_room(struct daemon *d, const struct gs_slice *s, const int *pos,
                      struct gs_error **err)
{
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        gs_placement_usage(&d->inv, &d->ledger, usage);
        char mem[32];
        for (unsigned g = 0; g < s->n_gpus; g++) {
                const struct gs_gpu_usage *u = &usage[pos[g]];
                const struct gs_gpu *gpu = &d->inv.gpus[pos[g]];
                if (gs_slice_is_whole(s) ? u->n_slices != 0
                                         : u->free_milli < s->milli ||
                                                   u->free_memory < s->memory_cap)
                        return gs_error_set(err, -ENOSPC,
                                            "GPU %u (%s) has only %" PRIu32 "m and %s free "
                                            "(%u slice%s, local gpuslice slices included) for "
                                            "%" PRIu32 " units",
                                            gpu->index, gpu->uuid, u->free_milli,
                                            gs_bytes_human(u->free_memory, mem, sizeof(mem)),
                                            u->n_slices, u->n_slices == 1 ? "" : "s", s->milli);
        }
        return 0;
}

/* An Allocate made a slice: check that it still fits beside every slice
 * in the ledger, and record it there (persisted) in one step. */
static int hook_slice_add(void *ctx, const struct dp_slice_info *info, struct gs_error **err)
{
        struct daemon *d = ctx;
        struct gs_slice s = { .kind = GS_SLICE_KUBE,
                              .milli = info->units,
                              .policy = GS_POLICY_SHARE,
                              .created = (int64_t)time(NULL) };
        if (snprintf(s.id, sizeof(s.id), "%s", info->slice) >= (int)sizeof(s.id))
                return gs_error_set(err, -EINVAL, "slice id %.40s is too long", info->slice);
        if (info->conf) {
                s.memory_cap = info->conf->memory_limit;
                s.policy = info->conf->policy;
        }
        if (info->n_uuids > GS_SLICE_MAX_GPUS)
                return gs_error_set(err, -EINVAL, "%zu GPUs, at most %d", info->n_uuids,
                                    GS_SLICE_MAX_GPUS);
        pthread_mutex_lock(&d->lock);
        int pos[GS_SLICE_MAX_GPUS];
        int r = 0;
        for (size_t g = 0; g < info->n_uuids && r >= 0; g++) {
                pos[g] = gpu_position(d, info->uuids[g]);
                if (pos[g] < 0) {
                        r = gs_error_set(err, -ENODEV, "GPU %s is not in the daemon's inventory",
                                         info->uuids[g]);
                        break;
                }
                s.gpus[g].index = d->inv.gpus[pos[g]].index;
                snprintf(s.gpus[g].uuid, sizeof(s.gpus[g].uuid), "%s", info->uuids[g]);
                s.n_gpus++;
        }
        if (r >= 0)
                r = check_room(d, &s, pos, err);
        if (r >= 0)
                r = gs_ledger_add(&d->ledger, &s, err);
        if (r >= 0 && (r = save_locked(d, err)) < 0)
                gs_ledger_remove(&d->ledger, s.id);
        pthread_mutex_unlock(&d->lock);
        if (r >= 0) {
                char mem[32];
                dlog_info("slice %s created for Kubernetes: %" PRIu32 "m, memory %s, on GPU %u (%s)",
                          s.id, s.milli,
                          s.memory_cap ? gs_bytes_human(s.memory_cap, mem, sizeof(mem)) : "whole",
                          s.gpus[0].index, s.gpus[0].uuid);
        }
        return r;
}

static void hook_slice_remove(void *ctx, const char *slice)
{
        struct daemon *d = ctx;
        struct gs_error *err = NULL;
        pthread_mutex_lock(&d->lock);
        struct gs_slice *s = gs_ledger_find(&d->ledger, slice);
        if (s && s->kind == GS_SLICE_KUBE) {
                gs_ledger_remove(&d->ledger, slice);
                if (save_locked(d, &err) < 0)
                        dlog_error("%s", gs_error_msg(err));
                dlog_info("slice %s freed: no pod holds it any more", slice);
        }
        pthread_mutex_unlock(&d->lock);
        gs_error_free(err);
}

/* n of "k8s-<n>", or 0. */
static uint64_t kube_seq(const char *id)
{
        if (strncmp(id, "k8s-", 4) != 0)
                return 0;
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(id + 4, &end, 10);
        return errno || end == id + 4 || *end ? 0 : (uint64_t)v;
}

static int64_t hook_sync(void *ctx, const char *const *slices, size_t n, bool *known)
{
        struct daemon *d = ctx;
        uint64_t top = 0;
        bool changed = false;
        pthread_mutex_lock(&d->lock);
        for (size_t i = 0; i < n; i++) {
                const struct gs_slice *s = gs_ledger_find(&d->ledger, slices[i]);
                known[i] = s && s->kind == GS_SLICE_KUBE;
                top = GS_MAX(top, kube_seq(slices[i]));
        }
        for (size_t i = 0; i < d->ledger.n_slices;) {
                const struct gs_slice *s = &d->ledger.slices[i];
                bool named = false;
                if (s->kind == GS_SLICE_KUBE) {
                        top = GS_MAX(top, kube_seq(s->id));
                        for (size_t k = 0; k < n && !named; k++)
                                named = strcmp(slices[k], s->id) == 0;
                }
                if (s->kind != GS_SLICE_KUBE || named) {
                        i++;
                        continue;
                }
                dlog_warn("slice %s: not on the device plugin's record (its Allocate was never "
                          "answered): freed", s->id);
                gs_ledger_remove(&d->ledger, s->id);
                changed = true;
        }
        int r = 0;
        struct gs_error *err = NULL;
        if (changed && (r = save_locked(d, &err)) < 0)
                dlog_error("%s", gs_error_msg(err));
        gs_error_free(err);
        pthread_mutex_unlock(&d->lock);
        return r < 0 ? r : (int64_t)GS_MIN(top, (uint64_t)INT64_MAX);
}

static void *plugin_thread(void *arg)
{
        struct daemon *d = arg;
        struct kube_options o;
        kube_options_init(&o);
        const struct kubelet_args *k = &d->kube;
        if (k->plugin_dir)
                o.plugin_dir = k->plugin_dir;
        if (k->pod_resources_socket)
                o.pod_resources_socket = k->pod_resources_socket;
        if (k->shim_path)
                o.shim_path = k->shim_path;
        if (k->release_grace_s >= 0)
                o.release_grace_s = k->release_grace_s;
        if (k->pod_poll_ms)
                o.pod_poll_ms = k->pod_poll_ms;
        if (k->health_poll_ms)
                o.health_poll_ms = k->health_poll_ms;
        o.cdi_kind = k->cdi_kind;
        o.state_dir = d->kube_state_dir;
        o.daemon_socket = d->socket_path;
        o.read_inventory = hook_inventory;
        o.inventory_ctx = d;
        o.hooks = (struct dp_hooks){ .ctx = d,
                                     .slice_add = hook_slice_add,
                                     .slice_remove = hook_slice_remove,
                                     .gpu_used = hook_gpu_used,
                                     .sync = hook_sync };
        dlog_info("kubelet device plugin: %s/%s, PodResources %s, state %s", o.plugin_dir,
                  o.endpoint, o.pod_resources_socket, o.state_dir);
        struct gs_error *err = NULL;
        int r = kube_plugin_run(&o, d->kube_stop_rd, &err);
        if (r < 0) {
                dlog_error("kubelet device plugin: %s", gs_error_msg(err));
                d->kube_failed = true;
        }
        gs_error_free(err);
        /* Tell the event loop (it stops the daemon if it did not ask). */
        (void)!write(d->kube_done_wr, "x", 1);
        return NULL;
}

int kubelet_start(struct daemon *d)
{
        if (!d->kube.enabled)
                return 0;
        int stop[2], done[2];
        if (pipe2(stop, O_CLOEXEC) < 0) {
                int e = errno;
                dlog_error("kubelet: pipe: %s", strerror(e));
                return -e;
        }
        if (pipe2(done, O_CLOEXEC | O_NONBLOCK) < 0) {
                int e = errno;
                close(stop[0]);
                close(stop[1]);
                dlog_error("kubelet: pipe: %s", strerror(e));
                return -e;
        }
        d->kube_stop_rd = stop[0];
        d->kube_stop_fd = stop[1];
        d->kube_done_wr = done[1];
        d->kube_done = (struct watch){ .kind = WATCH_KUBE, .fd = done[0] };
        int r = server_watch(d, &d->kube_done, EPOLLIN);
        if (r >= 0)
                r = -pthread_create(&d->kube_thread, NULL, plugin_thread, d);
        if (r < 0) {
                dlog_error("kubelet: cannot start the device plugin: %s", strerror(-r));
                close(stop[0]);
                close(stop[1]);
                close(done[0]);
                close(done[1]);
                d->kube_stop_fd = d->kube_stop_rd = d->kube_done_wr = d->kube_done.fd = -1;
                return r;
        }
        d->kube_running = true;
        return 0;
}

void kubelet_stop(struct daemon *d)
{
        if (!d->kube_running)
                return;
        close(d->kube_stop_fd); /* the plugin's poll sees the hang-up */
        pthread_join(d->kube_thread, NULL);
        d->kube_running = false;
        epoll_ctl(d->epfd, EPOLL_CTL_DEL, d->kube_done.fd, NULL);
        close(d->kube_done.fd);
        close(d->kube_done_wr);
        close(d->kube_stop_rd);
        d->kube_stop_fd = d->kube_stop_rd = d->kube_done_wr = d->kube_done.fd = -1;
}
