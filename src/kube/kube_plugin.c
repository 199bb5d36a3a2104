/* SPDX-License-Identifier: Apache-2.0 */
/* The device plugin's event loop (see kube_plugin.h). */
#include "kube_plugin.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dp_grpc.h"
#include "kubelet_checkpoint.h"
#include "log.h"
#include "macro.h"

#define REGISTER_TIMEOUT_MS 15000 /* the kubelet dials back within 10 s */
#define POD_RESOURCES_TIMEOUT_MS 5000
#define POD_RESOURCES_MAX_BYTES (64u << 20)
#define REGISTER_RETRY_MS 2000
#define STREAM_LOST_MS 1000 /* a stream reopened within this is a reconnect */

void kube_options_init(struct kube_options *o)
{
        memset(o, 0, sizeof(*o));
        o->plugin_dir = KUBE_PLUGIN_DIR;
        o->pod_resources_socket = KUBE_POD_RESOURCES_SOCKET;
        o->endpoint = KUBE_ENDPOINT;
        o->release_grace_s = 60;
        o->pod_poll_ms = 10000;
        o->health_poll_ms = 2000;
}

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define ADAPT(name, fn)                                                                        \
        static int name(void *ctx, const uint8_t *req, size_t len, uint8_t **ret,             \
                        size_t *ret_len, struct gs_error **err)                                \
        {                                                                                      \
                return fn(ctx, req, len, ret, ret_len, err);                                   \
        }
ADAPT(h_options, dp_handle_options)
ADAPT(h_preferred, dp_handle_preferred)
ADAPT(h_allocate, dp_handle_allocate)
ADAPT(h_prestart, dp_handle_prestart)

static uint64_t s_generation(void *ctx)
{
        return dp_generation(ctx);
}

static int s_encode(void *ctx, uint64_t *ret_gen, uint8_t **ret_buf, size_t *ret_len)
{
        return dp_encode_devices(ctx, ret_gen, ret_buf, ret_len);
}

static const struct dp_method methods[] = {
        {"/v1beta1.DevicePlugin/GetDevicePluginOptions", h_options},
        {"/v1beta1.DevicePlugin/GetPreferredAllocation", h_preferred},
        {"/v1beta1.DevicePlugin/Allocate", h_allocate},
        {"/v1beta1.DevicePlugin/PreStartContainer", h_prestart},
};
static const struct dp_stream_method stream = {
        "/v1beta1.DevicePlugin/ListAndWatch", s_generation, s_encode};

/* A fresh inventory reading into the node (under its lock); 1 when the
 * advertised list changed. */
static int refresh_inventory(const struct kube_options *o, struct dp *d, struct gs_error **err)
{
        struct gs_inventory *inv = calloc(1, sizeof(*inv));
        if (!inv)
                return gs_error_set(err, -ENOMEM, "out of memory");
        node_lock(o->node);
        int r = o->read_inventory(o->inventory_ctx, inv, err);
        node_unlock(o->node);
        if (r >= 0)
                r = d ? dp_set_inventory(d, inv) : 0;
        if (r >= 0 && !d) {
                node_lock(o->node);
                node_set_inventory_locked(o->node, inv);
                node_unlock(o->node);
        }
        free(inv);
        return r;
}

static int do_register(const struct kube_options *o, const char *kubelet_target)
{
        uint8_t *req = NULL, *resp = NULL;
        size_t len = 0, resp_len = 0;
        int r = dp_encode_register("v1beta1", o->endpoint, DP_RESOURCE, true, &req, &len);
        if (r < 0)
                return r;
        struct gs_error *e = NULL;
        r = dp_unary_call(kubelet_target, "/v1beta1.Registration/Register", req, len,
                          REGISTER_TIMEOUT_MS, 1 << 20, &resp, &resp_len, &e);
        if (r < 0)
                gs_log_warn("kubelet: registration failed (retrying): %s", gs_error_msg(e));
        else
                gs_log_info("kubelet: registered %s at %s/%s", DP_RESOURCE, o->plugin_dir,
                            o->endpoint);
        gs_error_free(e);
        free(req);
        free(resp);
        return r;
}

static void poll_pods(const struct kube_options *o, struct dp *d, const char *target)
{
        uint8_t *req = NULL, *resp = NULL;
        size_t len = 0, resp_len = 0;
        if (dp_encode_empty(&req, &len) < 0)
                return;
        struct gs_error *e = NULL;
        int r = dp_unary_call(target, "/v1.PodResourcesLister/List", req, len,
                              POD_RESOURCES_TIMEOUT_MS, POD_RESOURCES_MAX_BYTES, &resp, &resp_len,
                              &e);
        free(req);
        if (r < 0) {
                /* Without an answer nothing is known to be free: keep all. */
                gs_log_warn("kubelet: PodResources: %s", gs_error_msg(e));
                gs_error_free(e);
                return;
        }
        struct dp_pod_devices *pods = NULL;
        size_t n = 0;
        r = dp_decode_pod_resources(resp, resp_len, DP_RESOURCE, &pods, &n);
        free(resp);
        if (r < 0) {
                gs_log_warn("kubelet: PodResources: undecodable answer (%s)", strerror(-r));
                return;
        }
        dp_reconcile(d, pods, n, (int64_t)time(NULL));
        dp_pod_devices_array_free(pods, n);
}

static bool socket_exists(const char *path)
{
        struct stat st;
        return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

int kube_plugin_run(const struct kube_options *o, int stop_fd, struct gs_error **err)
{
        if (!o->read_inventory || !o->node)
                return gs_error_set(err, -EINVAL, "kube plugin: no node or inventory source");
        if (!o->endpoint || !*o->endpoint || strchr(o->endpoint, '/'))
                return gs_error_set(err, -EINVAL, "kube plugin: endpoint must be a file name");
        _cleanup_free_ char *sock = NULL, *kubelet = NULL, *pr_target = NULL;
        if (asprintf(&sock, "%s/%s", o->plugin_dir, o->endpoint) < 0 ||
            asprintf(&kubelet, "unix:%s/kubelet.sock", o->plugin_dir) < 0 ||
            asprintf(&pr_target, "unix:%s", o->pod_resources_socket) < 0)
                return gs_error_set(err, -ENOMEM, "out of memory");

        int r = refresh_inventory(o, NULL, err);
        if (r < 0)
                return gs_error_wrap(err, "kube plugin: GPU inventory");
        node_lock(o->node);
        r = node_check_ledger_locked(o->node, err); /* the ledger fits these GPUs */
        if (r == 0)
                node_reconcile_files_locked(o->node); /* a standalone plugin's first look */
        node_unlock(o->node);
        if (r < 0)
                return gs_error_wrap(err, "kube plugin: refusing to start: the ledger %s does "
                                     "not fit this node", o->node->ledger_path);
        _cleanup_free_ char *checkpoint = NULL;
        if (!o->checkpoint && asprintf(&checkpoint, "%s/%s", o->plugin_dir, KUBE_CHECKPOINT_NAME) < 0)
                return gs_error_set(err, -ENOMEM, "out of memory");
        struct dp_config cfg = { .node = o->node,
                                 .release_grace_s = o->release_grace_s,
                                 .checkpoint_path = o->checkpoint ? o->checkpoint : checkpoint };
        struct dp *d = NULL;
        r = dp_new(&cfg, &d, err);
        if (r < 0)
                return r;
        if (dp_restore_from_checkpoint(d) < 0)
                gs_log_warn("kubelet: pods' slices not checked against the kubelet's checkpoint");
        gs_log_info("kubelet: %u GPUs, %zu Kubernetes slices on record", o->node->inv.n_gpus,
                    dp_n_allocations(d));

        _cleanup_close_ int ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (ino < 0 || inotify_add_watch(ino, o->plugin_dir,
                                         IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM) < 0) {
                r = gs_error_set(err, -errno, "cannot watch %s: %s", o->plugin_dir,
                                 strerror(errno));
                dp_free(d);
                return r;
        }
        dp_grpc_init();
        struct dp_server *srv = NULL;
        r = dp_server_start(sock, methods, GS_ARRAY_SIZE(methods), &stream, d, &srv, err);
        if (r < 0) {
                dp_free(d);
                dp_grpc_shutdown();
                return r;
        }
        bool registered = false;
        unsigned opened_at_register = 0; /* streams opened before the last Register */
        int64_t no_stream_since = 0;
        int64_t next_register = 0, next_health = now_ms() + o->health_poll_ms,
                next_pods = now_ms() + o->pod_poll_ms;
        for (;;) {
                if (!registered && now_ms() >= next_register) {
                        opened_at_register = dp_server_streams_opened(srv);
                        registered = do_register(o, kubelet) >= 0;
                        next_register = now_ms() + REGISTER_RETRY_MS;
                }
                /* The kubelet's stream ended while kubelet.sock stays: it no
                 * longer hears from us (and drops the resource after its
                 * grace period) until we register again. */
                bool streamed = dp_server_streams_opened(srv) != opened_at_register;
                if (registered && streamed && !dp_server_streams(srv)) {
                        if (!no_stream_since)
                                no_stream_since = now_ms();
                        if (now_ms() - no_stream_since >= STREAM_LOST_MS) {
                                gs_log_warn("kubelet: its ListAndWatch stream ended: registering "
                                            "again");
                                registered = false;
                                next_register = 0;
                                no_stream_since = 0;
                        }
                } else {
                        no_stream_since = 0;
                }
                struct pollfd pfd[2] = {{.fd = stop_fd, .events = POLLIN}, {.fd = ino, .events = POLLIN}};
                int pr = poll(pfd, 2, 200);
                if (pr < 0 && errno != EINTR)
                        break;
                if (pr > 0 && pfd[0].revents)
                        break;
                bool restart = false;
                if (pr > 0 && pfd[1].revents) {
                        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
                        ssize_t len;
                        while ((len = read(ino, buf, sizeof(buf))) > 0) {
                                for (char *p = buf; p < buf + len;) {
                                        const struct inotify_event *ev = (const void *)p;
                                        if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && ev->len &&
                                            strcmp(ev->name, "kubelet.sock") == 0) {
                                                gs_log_info("kubelet: kubelet.sock recreated: "
                                                            "the kubelet restarted");
                                                registered = false;
                                                next_register = 0;
                                        }
                                        p += sizeof(*ev) + ev->len;
                                }
                        }
                }
                if (!socket_exists(sock)) {
                        gs_log_warn("kubelet: %s removed: serving again", sock);
                        restart = true;
                }
                if (restart) {
                        srv = dp_server_stop(srv);
                        struct gs_error *e = NULL;
                        if (dp_server_start(sock, methods, GS_ARRAY_SIZE(methods), &stream, d,
                                            &srv, &e) < 0) {
                                r = gs_error_set(err, e ? e->code : -EIO, "%s", gs_error_msg(e));
                                gs_error_free(e);
                                break;
                        }
                        registered = false;
                        next_register = 0;
                }
                if (now_ms() >= next_health) {
                        struct gs_error *e = NULL;
                        int hr = refresh_inventory(o, d, &e);
                        if (hr > 0)
                                gs_log_info("kubelet: GPU health changed: advertising again");
                        else if (hr < 0)
                                gs_log_warn("kubelet: inventory: %s", gs_error_msg(e));
                        gs_error_free(e);
                        next_health = now_ms() + o->health_poll_ms;
                }
                if (now_ms() >= next_pods) {
                        poll_pods(o, d, pr_target);
                        next_pods = now_ms() + o->pod_poll_ms;
                }
        }
        dp_server_stop(srv);
        dp_free(d);
        dp_grpc_shutdown();
        gs_log_info("kubelet: device plugin stopped");
        return r < 0 ? r : 0;
}
