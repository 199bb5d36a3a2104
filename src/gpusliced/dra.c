/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced --dra: the DRA driver (src/kube/dra_*) over the daemon's node:
 * the kubelet's DRA plugin service on this thread, and a second thread
 * that keeps the node's ResourceSlice current (the scheduler's view of
 * every GPU's free share and memory, after local and device-plugin slices). */
#include "frontends.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apiserver.h"
#include "dra_driver.h"
#include "log.h"
#include "nvml.h"

#define PUBLISH_MS 500        /* how often the slice is checked for a change */
#define PUBLISH_BACKOFF_MAX_MS 10000
#define HEALTH_EVERY 4        /* GPU health read every 4th check (2 s), as the plugin does */
#define VERIFY_EVERY 20       /* the published slice read back every 10 s */

struct publisher {
        struct daemon *d;
        struct dra_driver *driver;
        int stop_fd;         /* the daemon's: readable when it stops us */
        int quit_fd;         /* ours: readable when the plugin service ended */
};

/* A fresh reading of the GPUs' health (the device plugin's thread does
 * the same when it runs): a lost GPU is no longer offered. */
static void refresh_health(struct daemon *d)
{
        static struct gs_inventory inv; /* large: not on the stack; one publisher */
        struct gs_error *err = NULL;
        node_lock(d->node);
        if (nvml_read_inventory(d->nvml, &inv, &err) == 0)
                node_set_inventory_locked(d->node, &inv);
        node_unlock(d->node);
        gs_error_free(err);
}

/* Keep the ResourceSlice current until stop_fd is readable; failures are
 * logged when their message changes and retried with a backoff. */
static void *publish_loop(void *arg)
{
        struct publisher *p = arg;
        unsigned wait_ms = 0, round = 0;
        char last[512] = "";
        for (;; round++) {
                struct pollfd pfd[2] = { { .fd = p->stop_fd, .events = POLLIN },
                                         { .fd = p->quit_fd, .events = POLLIN } };
                int n = poll(pfd, 2, (int)wait_ms);
                if (n > 0 || (n < 0 && errno != EINTR))
                        break;
                if (round % HEALTH_EVERY == 0)
                        refresh_health(p->d);
                struct gs_error *err = NULL;
                int r = round % VERIFY_EVERY == VERIFY_EVERY - 1
                                ? dra_driver_check_published(p->driver, &err) : 0;
                if (r >= 0) {
                        gs_error_free(err);
                        err = NULL;
                        r = dra_driver_publish(p->driver, &err);
                }
                if (r < 0) {
                        if (strcmp(last, gs_error_msg(err)) != 0)
                                gs_log_warn("%s (retrying)", gs_error_msg(err));
                        snprintf(last, sizeof(last), "%s", gs_error_msg(err));
                        wait_ms = wait_ms ? wait_ms * 2 : PUBLISH_MS;
                        if (wait_ms > PUBLISH_BACKOFF_MAX_MS)
                                wait_ms = PUBLISH_BACKOFF_MAX_MS;
                } else {
                        last[0] = '\0';
                        wait_ms = PUBLISH_MS;
                }
                gs_error_free(err);
        }
        return NULL;
}

int dra_run(struct daemon *d, int stop_fd, struct gs_error **err)
{
        char host[256];
        const char *name = daemon_node_name(d, host, sizeof(host));
        if (!name || !*name)
                return gs_error_set(err, -EINVAL, "--dra: no node name (--node-name or "
                                    "$NODE_NAME)");
        struct apiserver *api = NULL;
        int r = daemon_apiserver(d, &api, err);
        if (r < 0)
                return gs_error_wrap(err, "--dra");
        struct dra_driver_config dc = { .node = d->node,
                                        .api = api,
                                        .node_name = name,
                                        .cdi_dir = d->dra.cdi_dir };
        struct dra_driver *drv = NULL;
        if ((r = dra_driver_new(&dc, &drv, err)) < 0) {
                apiserver_free(api);
                return r;
        }
        int repaired = dra_driver_reconcile_cdi(drv);
        if (repaired > 0)
                gs_log_info("DRA: %d CDI spec%s written again or removed", repaired,
                            repaired == 1 ? "" : "s");
        int quit[2];
        if (pipe2(quit, O_CLOEXEC) < 0) {
                r = gs_error_set(err, -errno, "pipe: %s", strerror(errno));
                dra_driver_free(drv);
                apiserver_free(api);
                return r;
        }
        struct publisher pub = { .d = d, .driver = drv, .stop_fd = stop_fd, .quit_fd = quit[0] };
        pthread_t publisher;
        bool publishing = pthread_create(&publisher, NULL, publish_loop, &pub) == 0;
        if (!publishing)
                gs_log_error("DRA: cannot start publishing the ResourceSlice");
        struct dra_options o;
        dra_options_init(&o);
        if (d->dra.registry_dir)
                o.plugins_registry_dir = d->dra.registry_dir;
        if (d->dra.plugin_dir)
                o.plugin_dir = d->dra.plugin_dir;
        struct dra_ops ops = dra_driver_ops(drv);
        gs_log_info("DRA driver %s on node %s: API server %s", o.driver_name, name,
                    apiserver_server(api));
        r = dra_plugin_run(&o, &ops, stop_fd, err);
        close(quit[1]); /* the publisher stops with the service */
        if (publishing)
                pthread_join(publisher, NULL);
        close(quit[0]);
        dra_driver_free(drv);
        apiserver_free(api);
        return r;
}
