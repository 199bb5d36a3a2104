/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced --kubelet: the kubelet device plugin (src/kube) run in its own
 * thread inside the daemon, over the daemon's node: its ledger is the one
 * record of every slice on the node, local and Kubernetes alike, and its
 * lock serialises the plugin's calls with the event loop's, so the check
 * (is there room?) and the update (record the slice) are one step against
 * local requests. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "kube_plugin.h"
#include "log.h"
#include "nvml.h"

/* The GPUs through the daemon's NVML (called with the node's lock held,
 * which also guards NVML). */
static int read_inventory(void *ctx, struct gs_inventory *inv, struct gs_error **err)
{
        struct daemon *d = ctx;
        return nvml_read_inventory(d->nvml, inv, err);
}

static void on_plugin_done(struct node_watch *w, uint32_t events)
{
        struct daemon *d = w->ctx;
        (void)events;
        gs_log_error("the kubelet device plugin stopped: shutting down");
        node_loop_stop(&d->loop);
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
        if (k->release_grace_s >= 0)
                o.release_grace_s = k->release_grace_s;
        if (k->pod_poll_ms)
                o.pod_poll_ms = k->pod_poll_ms;
        if (k->health_poll_ms)
                o.health_poll_ms = k->health_poll_ms;
        o.node = d->node;
        o.read_inventory = read_inventory;
        o.inventory_ctx = d;
        gs_log_info("kubelet device plugin: %s/%s, PodResources %s, state %s", o.plugin_dir,
                    o.endpoint, o.pod_resources_socket, d->node->state_dir);
        struct gs_error *err = NULL;
        int r = kube_plugin_run(&o, d->kube_stop_rd, &err);
        if (r < 0) {
                gs_log_error("kubelet device plugin: %s", gs_error_msg(err));
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
                gs_log_error("kubelet: pipe: %s", strerror(e));
                return -e;
        }
        if (pipe2(done, O_CLOEXEC | O_NONBLOCK) < 0) {
                int e = errno;
                close(stop[0]);
                close(stop[1]);
                gs_log_error("kubelet: pipe: %s", strerror(e));
                return -e;
        }
        d->kube_stop_rd = stop[0];
        d->kube_stop_fd = stop[1];
        d->kube_done_wr = done[1];
        d->kube_done = (struct node_watch){ .fd = done[0], .fn = on_plugin_done, .ctx = d };
        int r = node_loop_watch(&d->loop, &d->kube_done, EPOLLIN);
        if (r >= 0)
                r = -pthread_create(&d->kube_thread, NULL, plugin_thread, d);
        if (r < 0) {
                gs_log_error("kubelet: cannot start the device plugin: %s", strerror(-r));
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
        node_loop_unwatch(&d->loop, &d->kube_done);
        close(d->kube_done.fd);
        close(d->kube_done_wr);
        close(d->kube_stop_rd);
        d->kube_stop_fd = d->kube_stop_rd = d->kube_done_wr = d->kube_done.fd = -1;
}
