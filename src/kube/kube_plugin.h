/* SPDX-License-Identifier: Apache-2.0 */
/* The kubelet side of gpusliced (`gpusliced --kubelet`): serves the device
 * plugin API on a unix socket in the kubelet's plugin directory, registers
 * resource gpuslice.io/gpu-milli, re-registers when the kubelet restarts,
 * refreshes GPU health from the inventory, and frees allocations that
 * PodResources shows nobody holds any more. */
#ifndef GS_KUBE_PLUGIN_H
#define GS_KUBE_PLUGIN_H

#include <stdint.h>

#include "device_plugin.h"
#include "error.h"
#include "inventory.h"
#include "node.h"

#define KUBE_PLUGIN_DIR "/var/lib/kubelet/device-plugins"
#define KUBE_POD_RESOURCES_SOCKET "/var/lib/kubelet/pod-resources/kubelet.sock"
#define KUBE_ENDPOINT "gpuslice.sock"
#define KUBE_STATE_DIR "/run/gpuslice/kube" /* the standalone plugin's node */
#define KUBE_SHIM_PATH "/var/lib/gpuslice/lib/libgpuslice.so" /* works on a read-only /usr */
/* gpusliced --kubelet's state: on disk, as the kubelet's checkpoint is. */
#define KUBE_STATE_DIR_DURABLE "/var/lib/gpuslice"

struct kube_options {
        const char *plugin_dir;           /* holds kubelet.sock and our socket */
        const char *pod_resources_socket; /* the kubelet's PodResources socket */
        const char *endpoint;             /* our socket's base name */
        /* The node whose slices pods get (required): its state directory,
         * shim path, daemon socket and CDI kind decide the containers'
         * edits; its ledger holds every slice, local and Kubernetes. */
        struct node *node;
        /* The kubelet's device-manager checkpoint: NULL for
         * <plugin_dir>/kubelet_internal_checkpoint, "" for none. */
        const char *checkpoint;
        int64_t release_grace_s;          /* default 60 */
        unsigned pod_poll_ms;             /* PodResources List period, default 10000 */
        unsigned health_poll_ms;          /* inventory refresh period, default 2000 */
        /* The node's GPUs (required): fills inv; called with the node's
         * lock held, at start and every health_poll_ms. A failure keeps
         * the previous inventory. */
        int (*read_inventory)(void *ctx, struct gs_inventory *inv, struct gs_error **err);
        void *inventory_ctx;
};

/* Fill o with the defaults above (no inventory callback). */
void kube_options_init(struct kube_options *o);

/* Run the device plugin until stop_fd becomes readable (or hangs up).
 * Before it registers, every pod the kubelet's checkpoint lists gets its
 * slice back (dp_restore_from_checkpoint). It registers again when the
 * kubelet restarts (kubelet.sock recreated), when its own socket is
 * removed, and when the kubelet's ListAndWatch stream ends while
 * kubelet.sock stays (or the kubelet forgets the resource).
 * Returns 0 after a clean shutdown (our socket removed, allocations kept on
 * disk), or a negative errno with *err set when it cannot start (no
 * inventory, cannot listen). Failing registrations are retried every 2 s
 * and logged (gs_log), not fatal. Calls grpc_init / grpc_shutdown itself. */
int kube_plugin_run(const struct kube_options *opt, int stop_fd, struct gs_error **err);

#endif /* GS_KUBE_PLUGIN_H */
