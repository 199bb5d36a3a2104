/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced --kubelet: the kubelet device plugin (src/kube) run in its own
 * thread inside the daemon, over the daemon's node: its ledger is the one
 * record of every slice on the node, local and Kubernetes alike, and its
 * lock serialises the plugin's calls with the event loop's, so the check
 * (is there room?) and the update (record the slice) are one step against
 * local requests. */
#include "frontends.h"

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

int kubelet_run(struct daemon *d, int stop_fd, struct gs_error **err)
{
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
        return kube_plugin_run(&o, stop_fd, err);
}
