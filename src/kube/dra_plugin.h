/* SPDX-License-Identifier: Apache-2.0 */
/* The kubelet-facing side of a DRA driver, independent of what a device or
 * a slice is: it serves the DRA plugin service (v1 and v1beta1) on
 * <plugin_dir>/dra.sock, registers with the kubelet's plugin watcher
 * through a Registration service on <plugins_registry_dir>/<driver>-reg.sock,
 * recreates both sockets when they are removed, and hands each claim of a
 * NodePrepareResources / NodeUnprepareResources call to the driver's
 * struct dra_ops. The messages themselves are in dra_codec.h.
 *
 * Served gRPC methods (exact paths):
 *   dra.sock:
 *     /k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources
 *     /k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources
 *     /k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources
 *     /k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources
 *   <driver>-reg.sock:
 *     /pluginregistration.Registration/GetInfo
 *       -> {type "DRAPlugin", name <driver>, endpoint <plugin_dir>/dra.sock,
 *           supported_versions ["v1.DRAPlugin", "v1beta1.DRAPlugin"]}
 *     /pluginregistration.Registration/NotifyRegistrationStatus (logged) */
#ifndef GS_DRA_PLUGIN_H
#define GS_DRA_PLUGIN_H

#include <stddef.h>

#include "dra_codec.h" /* struct dra_claim, struct dra_device */
#include "error.h"

#define DRA_DRIVER_NAME "gpu.gpuslice.io"
#define DRA_PLUGINS_REGISTRY_DIR "/var/lib/kubelet/plugins_registry"
#define DRA_PLUGINS_DIR "/var/lib/kubelet/plugins" /* plugin_dir: <this>/<driver> */
#define DRA_SOCKET_NAME "dra.sock"
#define DRA_PLUGIN_TYPE "DRAPlugin"
#define DRA_SERVICE_V1 "v1.DRAPlugin"
#define DRA_SERVICE_V1BETA1 "v1beta1.DRAPlugin"

/* What the driver implements. Both callbacks run on the DRA server's
 * thread, one call at a time (never concurrently with each other), while
 * the kubelet waits for the answer (it gives up after 45 s): keep them
 * bounded. Each claim of a call is passed on its own; one claim's failure
 * is reported for that claim only. */
struct dra_ops {
        void *ctx;
        /* Prepare claim c: return 0 with *ret (a malloc'ed array of
         * *ret_n devices, each filled as struct dra_device says; *ret may
         * be NULL when *ret_n is 0), which the plugin frees with
         * dra_device_array_free(); or return a negative errno and set *err
         * (its message becomes the claim's error string; the kubelet logs
         * it and retries); *ret and *ret_n are then left untouched (the
         * driver frees what it made). A device without pool or device
         * name fails the claim (the kubelet requires both). Must be idempotent: the kubelet calls again for a claim
         * that is already prepared (retries, its own restarts), and the
         * answer must then be the same. */
        int (*prepare)(void *ctx, const struct dra_claim *c, struct dra_device **ret, size_t *ret_n,
                       struct gs_error **err);
        /* Undo prepare for claim c, from its uid (namespace and name for
         * logs: the claim object may already be gone). Return 0, also for
         * a claim never prepared or already unprepared; or a negative
         * errno with *err (the kubelet retries). */
        int (*unprepare)(void *ctx, const struct dra_claim *c, struct gs_error **err);
};

struct dra_options {
        const char *driver_name;          /* DRA_DRIVER_NAME by default */
        const char *plugins_registry_dir; /* the kubelet's plugin watcher directory */
        /* Holds dra.sock; created (0750) if missing. NULL (the default):
         * DRA_PLUGINS_DIR/<driver_name>. */
        const char *plugin_dir;
        /* The registration socket's file name; NULL (the default):
         * "<driver_name>-reg.sock". A rolling update runs two instances
         * with different names (the kubelet accepts one per driver). */
        const char *reg_socket_name;
        unsigned check_ms; /* how often sockets are checked, default 1000 */
};

/* Fill o with the defaults above. */
void dra_options_init(struct dra_options *o);

/* Serve until stop_fd becomes readable (or hangs up). Starts dra.sock
 * first, then the registration socket (the kubelet may dial dra.sock as
 * soon as it registers us). When a socket disappears (the kubelet's
 * directories were cleaned, a kubelet restart with a fresh root), it is
 * recreated, and the registration socket with it, so the kubelet's plugin
 * watcher sees a new socket and registers the driver again; a kubelet
 * restart that leaves the sockets needs nothing (its watcher rescans the
 * directory). A failed recreation is logged and retried every check_ms.
 * Claims stay prepared across all of this: the plugin keeps no state of
 * its own. Returns 0 after a clean stop (both sockets removed, the
 * registration socket first, which deregisters the driver), or a negative
 * errno with *err set when it cannot start (invalid options, cannot
 * create plugin_dir, cannot listen). Calls grpc_init / grpc_shutdown
 * itself; logs through gs_log. */
int dra_plugin_run(const struct dra_options *o, const struct dra_ops *ops, int stop_fd,
                   struct gs_error **err);

#endif /* GS_DRA_PLUGIN_H */
