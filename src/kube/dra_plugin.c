/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA plugin's gRPC services and its loop (see dra_plugin.h). Two
 * dp_grpc servers, each on its own thread: dra.sock (the DRA service, both
 * versions) and the registration socket. The loop only watches the two
 * sockets and the stop fd. */
#include "dra_plugin.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "dp_grpc.h"
#include "log.h"
#include "macro.h"

#define DRIVER_NAME_MAX 63   /* resource.k8s.io: a driver name is a DNS subdomain <= 63 */
#define CLAIM_ERROR_MAX 4096 /* a claim's error string (the kubelet puts it in events) */

/* What the handlers share (read-only once the servers run). */
struct plugin {
        const struct dra_ops *ops;
        const char *driver;
        char *plugin_dir;
        char *reg_dir;
        char *dra_sock;
        char *reg_sock;
        uint8_t *info; /* the encoded PluginInfo */
        size_t info_len;
};

void dra_options_init(struct dra_options *o)
{
        memset(o, 0, sizeof(*o));
        o->driver_name = DRA_DRIVER_NAME;
        o->plugins_registry_dir = DRA_PLUGINS_REGISTRY_DIR;
        o->check_ms = 1000;
}

static const char *version_name(enum dra_version v)
{
        return v == DRA_V1 ? "v1" : "v1beta1";
}

static const char *decode_reason(int r)
{
        switch (r) {
        case -EBADMSG: return "not a valid message";
        case -E2BIG: return "too many claims in one call";
        case -EINVAL:
                return "a claim's namespace, uid or name is empty, too long or has characters "
                       "outside its DNS / uid character set";
        default: return strerror(-r);
        }
}

/* The driver's answer for one claim: 0 and its devices, or a negative
 * errno and *ret_msg (malloc'ed, never empty). */
static int prepare_one(const struct plugin *p, enum dra_version v, const struct dra_claim *c,
                       struct dra_device **ret, size_t *ret_n, char **ret_msg)
{
        struct dra_device *d = NULL;
        size_t n = 0;
        struct gs_error *e = NULL;
        int r = p->ops->prepare(p->ops->ctx, c, &d, &n, &e);
        if (r >= 0) {
                /* A driver's answer that the kubelet would refuse becomes
                 * this claim's error (and is freed here). */
                if (n && !d)
                        r = gs_error_set(&e, -EPROTO, "driver error: %zu devices but no array", n);
                for (size_t i = 0; r >= 0 && i < n; i++)
                        if (dra_device_check(&d[i]) < 0)
                                r = gs_error_set(&e, -EPROTO,
                                                 "driver error: device %zu has no pool or device "
                                                 "name",
                                                 i);
                if (r < 0)
                        dra_device_array_free(d, n);
        }
        if (r >= 0) {
                gs_log_info("DRA %s: claim %s/%s (%s) prepared: %zu device%s", version_name(v),
                            c->ns, c->name, c->uid, n, n == 1 ? "" : "s");
                gs_error_free(e); /* set by a driver that succeeded anyway */
                *ret = d;
                *ret_n = n;
                return 0;
        }
        const char *why = e ? gs_error_msg(e) : strerror(-r);
        if (!why || !*why)
                why = "prepare failed";
        gs_log_warn("DRA %s: claim %s/%s (%s) not prepared: %s", version_name(v), c->ns, c->name,
                    c->uid, why);
        *ret_msg = strndup(why, CLAIM_ERROR_MAX);
        gs_error_free(e);
        return *ret_msg ? r : -ENOMEM;
}

static int handle_prepare(const struct plugin *p, enum dra_version v, const uint8_t *req,
                          size_t len, uint8_t **ret, size_t *ret_len, struct gs_error **err)
{
        struct dra_claim *c = NULL;
        size_t n = 0;
        int r = dra_decode_prepare_request(v, req, len, &c, &n);
        if (r < 0) {
                gs_log_warn("DRA %s: NodePrepareResources refused: %s", version_name(v),
                            decode_reason(r));
                return gs_error_set(err, r, "NodePrepareResources: %s", decode_reason(r));
        }
        struct dra_prepare_result *res = calloc(n ? n : 1, sizeof(*res));
        struct dra_device **devs = calloc(n ? n : 1, sizeof(*devs));
        size_t *n_devs = calloc(n ? n : 1, sizeof(*n_devs));
        char **msgs = calloc(n ? n : 1, sizeof(*msgs));
        if (!res || !devs || !n_devs || !msgs) {
                r = gs_error_set(err, -ENOMEM, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                res[i].uid = c[i].uid;
                if (prepare_one(p, v, &c[i], &devs[i], &n_devs[i], &msgs[i]) == -ENOMEM &&
                    !msgs[i]) {
                        r = gs_error_set(err, -ENOMEM, "out of memory");
                        goto out;
                }
                res[i].devices = devs[i];
                res[i].n_devices = n_devs[i];
                res[i].error = msgs[i];
        }
        r = dra_encode_prepare_response(v, res, n, ret, ret_len);
        if (r < 0)
                gs_error_set(err, r, "NodePrepareResources: cannot encode the answer");
out:
        for (size_t i = 0; i < n && devs && n_devs && msgs; i++) {
                dra_device_array_free(devs[i], n_devs[i]);
                free(msgs[i]);
        }
        free(res);
        free(devs);
        free(n_devs);
        free(msgs);
        dra_claim_array_free(c, n);
        return r;
}

static int handle_unprepare(const struct plugin *p, enum dra_version v, const uint8_t *req,
                            size_t len, uint8_t **ret, size_t *ret_len, struct gs_error **err)
{
        struct dra_claim *c = NULL;
        size_t n = 0;
        int r = dra_decode_unprepare_request(v, req, len, &c, &n);
        if (r < 0) {
                gs_log_warn("DRA %s: NodeUnprepareResources refused: %s", version_name(v),
                            decode_reason(r));
                return gs_error_set(err, r, "NodeUnprepareResources: %s", decode_reason(r));
        }
        struct dra_unprepare_result *res = calloc(n ? n : 1, sizeof(*res));
        char **msgs = calloc(n ? n : 1, sizeof(*msgs));
        if (!res || !msgs) {
                r = gs_error_set(err, -ENOMEM, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                struct gs_error *e = NULL;
                res[i].uid = c[i].uid;
                int ur = p->ops->unprepare(p->ops->ctx, &c[i], &e);
                if (ur >= 0) {
                        gs_log_info("DRA %s: claim %s/%s (%s) unprepared", version_name(v), c[i].ns,
                                    c[i].name, c[i].uid);
                        gs_error_free(e);
                        continue;
                }
                const char *why = e ? gs_error_msg(e) : strerror(-ur);
                if (!why || !*why)
                        why = "unprepare failed";
                gs_log_warn("DRA %s: claim %s/%s (%s) not unprepared: %s", version_name(v), c[i].ns,
                            c[i].name, c[i].uid, why);
                msgs[i] = strndup(why, CLAIM_ERROR_MAX);
                gs_error_free(e);
                if (!msgs[i]) {
                        r = gs_error_set(err, -ENOMEM, "out of memory");
                        goto out;
                }
                res[i].error = msgs[i];
        }
        r = dra_encode_unprepare_response(v, res, n, ret, ret_len);
        if (r < 0)
                gs_error_set(err, r, "NodeUnprepareResources: cannot encode the answer");
out:
        for (size_t i = 0; i < n && msgs; i++)
                free(msgs[i]);
        free(msgs);
        free(res);
        dra_claim_array_free(c, n);
        return r;
}

#define HANDLER(name, fn, version)                                                                 \
        static int name(void *ctx, const uint8_t *req, size_t len, uint8_t **ret, size_t *ret_len, \
                        struct gs_error **err)                                                     \
        {                                                                                          \
                return fn(ctx, version, req, len, ret, ret_len, err);                              \
        }
HANDLER(h_prepare_v1, handle_prepare, DRA_V1)
HANDLER(h_unprepare_v1, handle_unprepare, DRA_V1)
HANDLER(h_prepare_v1beta1, handle_prepare, DRA_V1BETA1)
HANDLER(h_unprepare_v1beta1, handle_unprepare, DRA_V1BETA1)

static int h_get_info(void *ctx, const uint8_t *req, size_t len, uint8_t **ret, size_t *ret_len,
                      struct gs_error **err)
{
        const struct plugin *p = ctx;
        int r = dra_decode_info_request(req, len);
        if (r < 0)
                return gs_error_set(err, r, "GetInfo: not an InfoRequest");
        uint8_t *copy = malloc(p->info_len ? p->info_len : 1);
        if (!copy)
                return gs_error_set(err, -ENOMEM, "out of memory");
        memcpy(copy, p->info, p->info_len);
        *ret = copy;
        *ret_len = p->info_len;
        gs_log_debug("DRA: GetInfo answered for %s", p->driver);
        return 0;
}

static int h_notify(void *ctx, const uint8_t *req, size_t len, uint8_t **ret, size_t *ret_len,
                    struct gs_error **err)
{
        const struct plugin *p = ctx;
        bool registered = false;
        char *why = NULL;
        int r = dra_decode_registration_status(req, len, &registered, &why);
        if (r < 0)
                return gs_error_set(err, r, "NotifyRegistrationStatus: not a RegistrationStatus");
        if (registered)
                gs_log_info("DRA: the kubelet registered driver %s (endpoint %s)", p->driver,
                            p->dra_sock);
        else
                gs_log_error("DRA: the kubelet refused to register driver %s: %s", p->driver,
                             *why ? why : "no reason given");
        free(why);
        r = dra_encode_registration_status_response(ret, ret_len);
        return r < 0 ? gs_error_set(err, r, "out of memory") : 0;
}

static const struct dp_method dra_methods[] = {
        { "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources", h_prepare_v1 },
        { "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources", h_unprepare_v1 },
        { "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
          h_prepare_v1beta1 },
        { "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources",
          h_unprepare_v1beta1 },
};
static const struct dp_method reg_methods[] = {
        { "/pluginregistration.Registration/GetInfo", h_get_info },
        { "/pluginregistration.Registration/NotifyRegistrationStatus", h_notify },
};

static bool driver_name_ok(const char *s)
{
        size_t len = s ? strlen(s) : 0;
        if (len == 0 || len > DRIVER_NAME_MAX || s[0] == '.' || s[0] == '-')
                return false;
        for (size_t i = 0; i < len; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
                      s[i] == '.'))
                        return false;
        return true;
}

/* mkdir -p with mode for the directories it creates. */
static int mkdir_p(const char *path, mode_t mode)
{
        char buf[PATH_MAX];
        if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
                return -ENAMETOOLONG;
        for (char *s = buf + 1;; s++) {
                if (*s != '/' && *s != '\0')
                        continue;
                char c = *s;
                *s = '\0';
                if (mkdir(buf, mode) < 0 && errno != EEXIST)
                        return -errno;
                *s = c;
                if (!c)
                        break;
        }
        struct stat st;
        if (stat(path, &st) < 0)
                return -errno;
        return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static bool socket_exists(const char *path)
{
        struct stat st;
        return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

static void plugin_done(struct plugin *p)
{
        free(p->plugin_dir);
        free(p->reg_dir);
        free(p->dra_sock);
        free(p->reg_sock);
        free(p->info);
}

static int plugin_setup(struct plugin *p, const struct dra_options *o, const struct dra_ops *ops,
                        struct gs_error **err)
{
        if (!ops || !ops->prepare || !ops->unprepare)
                return gs_error_set(err, -EINVAL, "DRA plugin: no driver operations");
        if (!driver_name_ok(o->driver_name))
                return gs_error_set(err, -EINVAL,
                                    "DRA plugin: driver name \"%s\": expected a DNS subdomain of "
                                    "at most %d characters, such as %s",
                                    o->driver_name ? o->driver_name : "", DRIVER_NAME_MAX,
                                    DRA_DRIVER_NAME);
        if (!o->plugins_registry_dir || !*o->plugins_registry_dir)
                return gs_error_set(err, -EINVAL, "DRA plugin: no plugins registry directory");
        if (o->reg_socket_name && (!*o->reg_socket_name || o->reg_socket_name[0] == '.' ||
                                   strchr(o->reg_socket_name, '/')))
                return gs_error_set(err, -EINVAL,
                                    "DRA plugin: registration socket name \"%s\": expected a "
                                    "file name not starting with '.'",
                                    o->reg_socket_name);
        p->ops = ops;
        p->driver = o->driver_name;
        int r = o->plugin_dir ? asprintf(&p->plugin_dir, "%s", o->plugin_dir)
                              : asprintf(&p->plugin_dir, "%s/%s", DRA_PLUGINS_DIR, p->driver);
        if (r >= 0)
                r = asprintf(&p->reg_dir, "%s", o->plugins_registry_dir);
        if (r >= 0)
                r = asprintf(&p->dra_sock, "%s/%s", p->plugin_dir, DRA_SOCKET_NAME);
        if (r >= 0)
                r = o->reg_socket_name ? asprintf(&p->reg_sock, "%s/%s", o->plugins_registry_dir,
                                                  o->reg_socket_name)
                                       : asprintf(&p->reg_sock, "%s/%s-reg.sock",
                                                  o->plugins_registry_dir, p->driver);
        if (r < 0)
                return gs_error_set(err, -ENOMEM, "out of memory");
        const char *socks[] = { p->dra_sock, p->reg_sock };
        for (size_t i = 0; i < GS_ARRAY_SIZE(socks); i++)
                if (strlen(socks[i]) >= sizeof(((struct sockaddr_un *)0)->sun_path))
                        return gs_error_set(err, -ENAMETOOLONG,
                                            "DRA plugin: socket path %s is longer than %zu bytes",
                                            socks[i],
                                            sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
        if (p->dra_sock[0] != '/')
                return gs_error_set(err, -EINVAL,
                                    "DRA plugin: plugin directory %s: expected an absolute path "
                                    "(the kubelet dials the endpoint it is given)",
                                    p->plugin_dir);
        static const char *const versions[] = { DRA_SERVICE_V1, DRA_SERVICE_V1BETA1 };
        r = dra_encode_plugin_info(DRA_PLUGIN_TYPE, p->driver, p->dra_sock, versions,
                                   GS_ARRAY_SIZE(versions), &p->info, &p->info_len);
        if (r < 0)
                return gs_error_set(err, r, "out of memory");
        return 0;
}

/* Create the directories (if missing) and serve on one socket. */
static int serve(const struct plugin *p, bool dra, struct dp_server **ret, struct gs_error **err)
{
        const char *dir = dra ? p->plugin_dir : p->reg_dir;
        int r = mkdir_p(dir, dra ? 0750 : 0755);
        if (r < 0)
                return gs_error_set(err, r, "cannot create %s: %s", dir, strerror(-r));
        if (dra)
                return dp_server_start(p->dra_sock, dra_methods, GS_ARRAY_SIZE(dra_methods), NULL,
                                       (void *)p, ret, err);
        return dp_server_start(p->reg_sock, reg_methods, GS_ARRAY_SIZE(reg_methods), NULL,
                               (void *)p, ret, err);
}

/* Watch both directories for removals (added again each time: a removed
 * and recreated directory is a new inode). Best effort: the loop also
 * looks every check_ms. */
static void watch_dirs(int ino, const struct plugin *p)
{
        if (ino < 0)
                return;
        const uint32_t mask = IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF;
        inotify_add_watch(ino, p->plugin_dir, mask);
        inotify_add_watch(ino, p->reg_dir, mask);
}

static void drain(int ino)
{
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        while (read(ino, buf, sizeof(buf)) > 0)
                ;
}

/* Bring both servers back after a socket went away: dra.sock first, then
 * the registration socket, which tells the kubelet to register (again).
 * Returns false (logged) when a server cannot start; retried later. */
static bool recover(const struct plugin *p, struct dp_server **dra, struct dp_server **reg,
                    bool *reported)
{
        bool dra_gone = !*dra || !socket_exists(p->dra_sock);
        bool reg_gone = !*reg || !socket_exists(p->reg_sock);
        if (!dra_gone && !reg_gone)
                return true;
        if (!*reported) {
                if (*dra && dra_gone)
                        gs_log_warn("DRA: %s removed: serving it again, and the registration "
                                    "socket with it (the kubelet registers the driver again)",
                                    p->dra_sock);
                else if (*reg && reg_gone)
                        gs_log_warn("DRA: %s removed: serving it again (the kubelet registers "
                                    "the driver again)",
                                    p->reg_sock);
        }
        struct gs_error *e = NULL;
        if (dra_gone) {
                /* Not registered without an endpoint: the registration
                 * socket goes first and comes back after dra.sock. */
                *reg = dp_server_stop(*reg);
                *dra = dp_server_stop(*dra);
                if (serve(p, true, dra, &e) < 0)
                        goto fail;
        }
        if (!*reg || !socket_exists(p->reg_sock)) {
                *reg = dp_server_stop(*reg);
                if (serve(p, false, reg, &e) < 0)
                        goto fail;
        }
        if (*reported)
                gs_log_info("DRA: serving %s and %s again", p->dra_sock, p->reg_sock);
        *reported = false;
        return true;
fail:
        if (!*reported)
                gs_log_warn("DRA: cannot serve again (retrying): %s", gs_error_msg(e));
        *reported = true;
        gs_error_free(e);
        return false;
}

int dra_plugin_run(const struct dra_options *o, const struct dra_ops *ops, int stop_fd,
                   struct gs_error **err)
{
        struct plugin p = { 0 };
        int r = plugin_setup(&p, o, ops, err);
        if (r < 0) {
                plugin_done(&p);
                return r;
        }
        dp_grpc_init();
        struct dp_server *dra = NULL, *reg = NULL;
        r = serve(&p, true, &dra, err);
        if (r >= 0)
                r = serve(&p, false, &reg, err);
        if (r < 0) {
                gs_error_wrap(err, "DRA plugin");
                dp_server_stop(dra);
                dp_grpc_shutdown();
                plugin_done(&p);
                return r;
        }
        gs_log_info("DRA: driver %s serving %s (v1, v1beta1), registration at %s", p.driver,
                    p.dra_sock, p.reg_sock);
        _cleanup_close_ int ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        watch_dirs(ino, &p);
        unsigned check_ms = o->check_ms ? o->check_ms : 1000;
        bool reported = false;
        for (;;) {
                struct pollfd pfd[2] = { { .fd = stop_fd, .events = POLLIN },
                                         { .fd = ino, .events = POLLIN } };
                int pr = poll(pfd, ino >= 0 ? 2 : 1, (int)check_ms);
                if (pr < 0 && errno != EINTR) {
                        gs_log_error("DRA: poll: %s", strerror(errno));
                        break;
                }
                if (pr > 0 && pfd[0].revents)
                        break;
                if (pr > 0 && ino >= 0 && pfd[1].revents)
                        drain(ino);
                if (recover(&p, &dra, &reg, &reported))
                        watch_dirs(ino, &p);
        }
        /* Registration socket first: the kubelet deregisters the driver
         * before its endpoint goes. */
        dp_server_stop(reg);
        dp_server_stop(dra);
        dp_grpc_shutdown();
        gs_log_info("DRA: driver %s stopped", p.driver);
        plugin_done(&p);
        return 0;
}
