/* SPDX-License-Identifier: Apache-2.0 */
/* Where the API server is: a pod's service account (in-cluster) or a
 * kubeconfig file. See apiserver.h. The kubeconfig is YAML, read through
 * core's bounded libyaml tree (spec_yaml.h: no anchors, aliases or tags,
 * which kubectl never writes); the fields read are those of client-go's
 * clientcmd v1 Config (clusters, contexts, users, current-context). */
#include "apiserver.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apiserver_internal.h"
#include "base64.h"
#include "macro.h"
#include "number.h"
#include "spec_yaml.h"

void apiserver_config_done(struct apiserver_config *cfg)
{
        if (!cfg)
                return;
        for (size_t i = 0; i < cfg->n_owned; i++) {
                explicit_bzero(cfg->owned[i], strlen(cfg->owned[i]));
                free(cfg->owned[i]);
        }
        free(cfg->owned);
        *cfg = (struct apiserver_config){ 0 };
}

/* Make cfg own s (malloc'ed, may be NULL after a failed allocation): s, or
 * NULL when out of memory (s is freed then). */
static char *own(struct apiserver_config *cfg, char *s)
{
        if (!s)
                return NULL;
        char **more = realloc(cfg->owned, (cfg->n_owned + 1) * sizeof(*more));
        if (!more) {
                free(s);
                return NULL;
        }
        cfg->owned = more;
        cfg->owned[cfg->n_owned++] = s;
        return s;
}

static char *own_join(struct apiserver_config *cfg, const char *dir, const char *name)
{
        char *s = NULL;
        if (asprintf(&s, "%s/%s", dir, name) < 0)
                return NULL;
        return own(cfg, s);
}

/* --- in-cluster ------------------------------------------------------------ */

static bool host_ok(const char *h)
{
        for (const char *p = h; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || *p == ':'))
                        return false;
        return h[0] != '\0';
}

int apiserver_config_in_cluster(const char *sa_dir, struct apiserver_config *ret,
                                struct gs_error **err)
{
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        const char *port = getenv("KUBERNETES_SERVICE_PORT");
        uint64_t p = 0;
        if (!sa_dir)
                sa_dir = APISERVER_SA_DIR;
        if (!host || !host[0] || !port || !port[0])
                return gs_error_set(err, -ENOENT,
                                    "in-cluster config: KUBERNETES_SERVICE_HOST and "
                                    "KUBERNETES_SERVICE_PORT are not set: not in a pod? "
                                    "(outside a cluster, give --kubeconfig)");
        if (!host_ok(host))
                return gs_error_set(err, -EINVAL,
                                    "in-cluster config: KUBERNETES_SERVICE_HOST \"%s\" is not "
                                    "a host name or IP address",
                                    host);
        if (gs_u64_parse_str(port, 65535, &p) < 0 || p == 0)
                return gs_error_set(err, -EINVAL,
                                    "in-cluster config: KUBERNETES_SERVICE_PORT \"%s\" is not "
                                    "a port (1-65535)",
                                    port);
        struct apiserver_config c = { 0 };
        char *server = NULL;
        /* An IPv6 address goes in brackets. */
        bool v6 = strchr(host, ':') != NULL;
        if (asprintf(&server, v6 ? "https://[%s]:%s" : "https://%s:%s", host, port) < 0)
                server = NULL;
        c.server = own(&c, server);
        c.ca_file = own_join(&c, sa_dir, "ca.crt");
        c.token_file = own_join(&c, sa_dir, "token");
        if (!c.server || !c.ca_file || !c.token_file) {
                apiserver_config_done(&c);
                return gs_error_set(err, -ENOMEM, "in-cluster config: out of memory");
        }
        const char *files[] = { c.ca_file, c.token_file };
        for (size_t i = 0; i < GS_ARRAY_SIZE(files); i++) {
                if (access(files[i], R_OK) < 0) {
                        int e = errno;
                        int r = gs_error_set(err, -e,
                                             "in-cluster config: %s: %s (is the service account "
                                             "token mounted? automountServiceAccountToken)",
                                             files[i], strerror(e));
                        apiserver_config_done(&c);
                        return r;
                }
        }
        *ret = c;
        return 0;
}

/* --- kubeconfig -------------------------------------------------------------- */

struct kc {
        const char *name; /* for messages */
        const char *base_dir;
        struct apiserver_config cfg;
        struct gs_error **err;
};

static int kc_fail(struct kc *k, int code, const struct spec_node *at, const char *fmt, ...)
        GS_PRINTF(4, 5);
static int kc_fail(struct kc *k, int code, const struct spec_node *at, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (at)
                return gs_error_set(k->err, code, "kubeconfig %s:%u: %s", k->name, at->line, msg);
        return gs_error_set(k->err, code, "kubeconfig %s: %s", k->name, msg);
}

static const struct spec_node *map_get(const struct spec_node *m, const char *key)
{
        if (!m || m->type != SPEC_NODE_MAPPING)
                return NULL;
        for (size_t i = 0; i + 1 < m->n_items; i += 2)
                if (m->items[i]->type == SPEC_NODE_SCALAR && strcmp(m->items[i]->value, key) == 0)
                        return m->items[i + 1];
        return NULL;
}

/* The string at m[key]: NULL when absent or null; -EINVAL when it is not a
 * string (or holds a NUL byte). */
static int get_str(struct kc *k, const struct spec_node *m, const char *key, const char **ret)
{
        const struct spec_node *n = map_get(m, key);
        *ret = NULL;
        if (!n || spec_node_is_null(n))
                return 0;
        if (n->type != SPEC_NODE_SCALAR)
                return kc_fail(k, -EINVAL, n, "%s must be a string, not %s", key,
                               spec_node_kind(n));
        if (n->len != strlen(n->value))
                return kc_fail(k, -EINVAL, n, "%s holds a NUL byte", key);
        *ret = n->value;
        return 0;
}

static bool get_true(const struct spec_node *m, const char *key)
{
        const struct spec_node *n = map_get(m, key);
        return n && n->type == SPEC_NODE_SCALAR && n->plain &&
               (strcmp(n->value, "true") == 0 || strcmp(n->value, "True") == 0 ||
                strcmp(n->value, "TRUE") == 0);
}

/* The `inner` mapping of the entry of list root[list] whose name is
 * `name` (e.g. contexts[name=x].context). */
static int named(struct kc *k, const struct spec_node *root, const char *list, const char *inner,
                 const char *name, const struct spec_node **ret)
{
        const struct spec_node *l = map_get(root, list);
        if (l && l->type != SPEC_NODE_SEQUENCE && !spec_node_is_null(l))
                return kc_fail(k, -EINVAL, l, "%s must be a list, not %s", list, spec_node_kind(l));
        for (size_t i = 0; l && l->type == SPEC_NODE_SEQUENCE && i < l->n_items; i++) {
                const char *n = NULL;
                if (get_str(k, l->items[i], "name", &n) < 0)
                        return -EINVAL;
                if (!n || strcmp(n, name) != 0)
                        continue;
                const struct spec_node *in = map_get(l->items[i], inner);
                if (!in || in->type != SPEC_NODE_MAPPING)
                        return kc_fail(k, -EINVAL, l->items[i], "%s \"%s\" has no %s mapping", list,
                                       name, inner);
                *ret = in;
                return 0;
        }
        return kc_fail(k, -ENOENT, NULL, "no entry named \"%s\" in %s", name, list);
}

/* A path of the file, relative ones against the file's directory (as
 * client-go resolves them). */
static const char *kc_path(struct kc *k, const char *p)
{
        if (p[0] == '/' || !k->base_dir)
                return own(&k->cfg, strdup(p));
        return own_join(&k->cfg, k->base_dir, p);
}

static int kc_cluster(struct kc *k, const struct spec_node *c, const char *name)
{
        const char *server, *ca, *ca_data, *tls_name, *proxy;
        if (get_str(k, c, "server", &server) < 0 ||
            get_str(k, c, "certificate-authority", &ca) < 0 ||
            get_str(k, c, "certificate-authority-data", &ca_data) < 0 ||
            get_str(k, c, "tls-server-name", &tls_name) < 0 ||
            get_str(k, c, "proxy-url", &proxy) < 0)
                return -EINVAL;
        if (!server || !server[0])
                return kc_fail(k, -EINVAL, c, "cluster \"%s\" has no server", name);
        if (get_true(c, "insecure-skip-tls-verify"))
                return kc_fail(k, -EOPNOTSUPP, c,
                               "cluster \"%s\": insecure-skip-tls-verify is not supported: "
                               "gpuslice "
                               "always verifies the server (give certificate-authority-data)",
                               name);
        if (tls_name || proxy)
                return kc_fail(k, -EOPNOTSUPP, c, "cluster \"%s\": %s is not supported", name,
                               tls_name ? "tls-server-name" : "proxy-url");
        if (ca && ca_data)
                return kc_fail(k, -EINVAL, c,
                               "cluster \"%s\": certificate-authority and "
                               "certificate-authority-data "
                               "are both given; give one",
                               name);
        if (!(k->cfg.server = own(&k->cfg, strdup(server))))
                return -ENOMEM;
        if (ca && !(k->cfg.ca_file = kc_path(k, ca)))
                return -ENOMEM;
        if (ca_data) {
                char *pem = NULL;
                size_t len = 0;
                int r = gs_base64_decode(ca_data, &pem, &len);
                if (r == -ENOMEM || (r == 0 && !own(&k->cfg, pem)))
                        return -ENOMEM;
                if (r < 0)
                        return kc_fail(k, -EINVAL, map_get(c, "certificate-authority-data"),
                                       "cluster \"%s\": certificate-authority-data is not base64",
                                       name);
                k->cfg.ca_pem = pem;
                k->cfg.ca_pem_len = len;
        }
        return 0;
}

static int kc_user(struct kc *k, const struct spec_node *u, const char *name)
{
        const char *token, *token_file;
        if (get_str(k, u, "token", &token) < 0 || get_str(k, u, "tokenFile", &token_file) < 0)
                return -EINVAL;
        /* client-go: with both, the file is read (and re-read); the token is
         * what is sent until then. */
        if (token_file && !(k->cfg.token_file = kc_path(k, token_file)))
                return -ENOMEM;
        if (token && !(k->cfg.token = own(&k->cfg, strdup(token))))
                return -ENOMEM;
        if (map_get(u, "as") || map_get(u, "as-groups"))
                return kc_fail(k, -EOPNOTSUPP, u,
                               "user \"%s\": impersonation (as) is not supported", name);
        if (token || token_file)
                return 0;
        static const struct {
                const char *key, *what;
        } unsupported[] = {
                { "client-certificate", "client certificates" },
                { "client-certificate-data", "client certificates" },
                { "client-key", "client certificates" },
                { "client-key-data", "client certificates" },
                { "exec", "exec credential plugins" },
                { "auth-provider", "auth-provider plugins" },
                { "username", "basic authentication" },
                { "password", "basic authentication" },
        };
        for (size_t i = 0; i < GS_ARRAY_SIZE(unsupported); i++)
                if (map_get(u, unsupported[i].key))
                        return kc_fail(k, -EOPNOTSUPP, u,
                                       "user \"%s\" authenticates with %s, which gpuslice does not "
                                       "support: give the user a bearer token (token or tokenFile, "
                                       "e.g. a service account token)",
                                       name, unsupported[i].what);
        return kc_fail(k, -EINVAL, u, "user \"%s\" has no token or tokenFile", name);
}

static int kc_parse(struct kc *k, const struct spec_node *root, const char *context)
{
        if (!root || root->type != SPEC_NODE_MAPPING)
                return kc_fail(k, -EINVAL, root,
                               "not a kubeconfig (a mapping with clusters, "
                               "contexts, users)");
        const char *cur = context, *cluster_name, *user_name;
        if (!cur && get_str(k, root, "current-context", &cur) < 0)
                return -EINVAL;
        if (!cur || !cur[0])
                return kc_fail(k, -ENOENT, NULL,
                               "no current-context (choose one: kubectl config use-context NAME)");
        const struct spec_node *ctx = NULL, *cluster = NULL, *user = NULL;
        int r = named(k, root, "contexts", "context", cur, &ctx);
        if (r < 0)
                return r;
        if (get_str(k, ctx, "cluster", &cluster_name) < 0 ||
            get_str(k, ctx, "user", &user_name) < 0)
                return -EINVAL;
        if (!cluster_name || !user_name)
                return kc_fail(k, -EINVAL, ctx, "context \"%s\" needs a cluster and a user", cur);
        if ((r = named(k, root, "clusters", "cluster", cluster_name, &cluster)) < 0 ||
            (r = named(k, root, "users", "user", user_name, &user)) < 0)
                return r;
        if ((r = kc_cluster(k, cluster, cluster_name)) < 0 || (r = kc_user(k, user, user_name)) < 0)
                return r;
        return 0;
}

int apiserver_kubeconfig_parse(const char *name, const char *text, size_t len, const char *base_dir,
                               const char *context, struct apiserver_config *ret,
                               struct gs_error **err)
{
        struct spec_node *root = NULL;
        int r = spec_yaml_load(name, text, len, &root, err);
        if (r < 0)
                return gs_error_wrap(err, "kubeconfig");
        struct kc k = { .name = name, .base_dir = base_dir, .err = err };
        r = kc_parse(&k, root, context);
        spec_node_free(root);
        if (r == -ENOMEM)
                gs_error_set(err, r, "kubeconfig %s: out of memory", name);
        if (r < 0) {
                apiserver_config_done(&k.cfg);
                return r;
        }
        *ret = k.cfg;
        return 0;
}

int apiserver_file_read(const char *what, const char *path, size_t max, char **ret_buf,
                        size_t *ret_len, struct stat *ret_st, struct gs_error **err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
                int e = errno;
                return gs_error_set(err, -e, "%s %s: %s", what, path, strerror(e));
        }
        if (!S_ISREG(st.st_mode))
                return gs_error_set(err, -EINVAL, "%s %s: not a regular file", what, path);
        _cleanup_free_ char *buf = malloc(max + 1);
        if (!buf)
                return gs_error_set(err, -ENOMEM, "%s %s: out of memory", what, path);
        size_t n = 0;
        for (;;) {
                ssize_t got = read(fd, buf + n, max + 1 - n);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got < 0) {
                        int e = errno;
                        return gs_error_set(err, -e, "%s %s: %s", what, path, strerror(e));
                }
                if (got == 0)
                        break;
                n += (size_t)got;
                if (n > max)
                        return gs_error_set(err, -EFBIG, "%s %s: larger than %zu bytes", what, path,
                                            max);
        }
        buf[n] = '\0';
        *ret_buf = TAKE_PTR(buf);
        *ret_len = n;
        if (ret_st)
                *ret_st = st;
        return 0;
}

int apiserver_config_from_kubeconfig(const char *path, const char *context,
                                     struct apiserver_config *ret, struct gs_error **err)
{
        _cleanup_free_ char *text = NULL, *dir = NULL;
        size_t len = 0;
        int r = apiserver_file_read("kubeconfig", path, APISERVER_MAX_KUBECONFIG, &text, &len, NULL,
                                    err);
        if (r < 0)
                return r;
        const char *slash = strrchr(path, '/');
        dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
        if (!dir)
                return gs_error_set(err, -ENOMEM, "kubeconfig %s: out of memory", path);
        return apiserver_kubeconfig_parse(path, text, len, dir, context, ret, err);
}
