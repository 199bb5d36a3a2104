/* SPDX-License-Identifier: Apache-2.0 */
/* The bounded HTTP server of http_server.h over libmicrohttpd: one
 * internal polling thread (epoll), our own listening socket (so that the
 * address forms and an ephemeral port are ours to handle), connection,
 * per-address, time and request-size limits. */
#include "http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "number.h"

#define HTTP_PATH_MAX 128
#define HTTP_TYPE_MAX 128

struct route {
        char path[HTTP_PATH_MAX];
        char content_type[HTTP_TYPE_MAX];
        node_http_fn fn;
        void *ctx;
        node_http_post_fn post;
        size_t body_max;
};

/* A POST being received: its route and its body so far. */
struct upload {
        const struct route *rt;
        char *buf;
        size_t len, cap;
        bool too_large;
};

struct node_http {
        char what[32];
        struct MHD_Daemon *mhd;
        uint16_t port;
        struct route routes[NODE_HTTP_MAX_ROUTES];
        size_t n_routes;
};

static const char accepted[] =
        "accepted: IPV4:PORT (127.0.0.1:9400, 0.0.0.0:9400) or [IPV6]:PORT ([::1]:9400, "
        "[::]:9400); port 0..65535, 0 for any free port";

int node_http_parse_listen(const char *text, struct sockaddr_storage *ss, socklen_t *len,
                           struct gs_error **err)
{
        char host[64];
        const char *port_text;
        bool v6 = text[0] == '[';
        if (v6) {
                const char *close = strchr(text, ']');
                if (!close || close[1] != ':' || (size_t)(close - text - 1) >= sizeof(host))
                        return gs_error_set(err, -EINVAL, "listen address '%.80s' is malformed (%s)",
                                            text, accepted);
                memcpy(host, text + 1, (size_t)(close - text - 1));
                host[close - text - 1] = '\0';
                port_text = close + 2;
        } else {
                const char *colon = strrchr(text, ':');
                if (!colon || (size_t)(colon - text) >= sizeof(host))
                        return gs_error_set(err, -EINVAL, "listen address '%.80s' is malformed (%s)",
                                            text, accepted);
                memcpy(host, text, (size_t)(colon - text));
                host[colon - text] = '\0';
                port_text = colon + 1;
        }
        uint64_t port;
        if (gs_u64_parse_str(port_text, 65535, &port) < 0)
                return gs_error_set(err, -EINVAL, "listen address '%.80s': port '%.20s' is not a "
                                    "number from 0 to 65535 (%s)", text, port_text, accepted);
        memset(ss, 0, sizeof(*ss));
        if (v6) {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
                a->sin6_family = AF_INET6;
                a->sin6_port = htons((uint16_t)port);
                if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
                        return gs_error_set(err, -EINVAL, "listen address '%.80s': '%s' is not an "
                                            "IPv6 address (%s)", text, host, accepted);
                *len = sizeof(*a);
        } else {
                struct sockaddr_in *a = (struct sockaddr_in *)ss;
                a->sin_family = AF_INET;
                a->sin_port = htons((uint16_t)port);
                if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
                        return gs_error_set(err, -EINVAL, "listen address '%.80s': '%s' is not an "
                                            "IPv4 address (IPv6 goes in brackets; %s)", text, host,
                                            accepted);
                *len = sizeof(*a);
        }
        return 0;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
        const struct node_http *h = cls;
        char msg[512];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        msg[strcspn(msg, "\n")] = '\0';
        gs_log_debug("%s: %s", h->what, msg);
}

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *text,
                              const char *allow)
{
        struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), (void *)text,
                                                                    MHD_RESPMEM_PERSISTENT);
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
        if (allow)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
        enum MHD_Result r = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return r;
}

static enum MHD_Result send_body(struct MHD_Connection *c, unsigned status, const char *type,
                                 char *body, size_t len)
{
        struct MHD_Response *resp =
                MHD_create_response_from_buffer(len, body ? body : (void *)"",
                                                body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!resp) {
                free(body);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        enum MHD_Result ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

static const char *allowed_methods(const struct route *rt)
{
        return rt->fn && rt->post ? "GET, HEAD, POST" : rt->post ? "POST" : "GET, HEAD";
}

static enum MHD_Result serve_get(struct node_http *h, struct MHD_Connection *c,
                                 const struct route *rt)
{
        char *body = NULL;
        size_t len = 0;
        int r = rt->fn(rt->ctx, &body, &len);
        if (r < 0) {
                free(body);
                gs_log_warn("%s: %s failed: %s", h->what, rt->path, strerror(-r));
                return answer(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal error\n", NULL);
        }
        return send_body(c, MHD_HTTP_OK, rt->content_type, body, len);
}

static enum MHD_Result too_large(struct MHD_Connection *c, const struct route *rt)
{
        char msg[96];
        snprintf(msg, sizeof(msg), "request body over %zu bytes\n", rt->body_max);
        char *copy = strdup(msg);
        if (!copy)
                return MHD_NO;
        return send_body(c, 413u /* Content Too Large */, "text/plain; charset=utf-8", copy,
                         strlen(copy));
}

/* The first call of a POST: refuse a declared length over the bound before
 * reading any of the body, else start collecting it. */
static enum MHD_Result post_begin(struct MHD_Connection *c, const struct route *rt,
                                  void **con_cls)
{
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        uint64_t declared = 0;
        if (cl && gs_u64_parse_str(cl, UINT64_MAX, &declared) == 0 && declared > rt->body_max)
                return too_large(c, rt);
        struct upload *u = calloc(1, sizeof(*u));
        if (!u)
                return MHD_NO;
        u->rt = rt;
        u->cap = cl && declared ? (size_t)declared + 1 : 4096;
        if (!(u->buf = malloc(u->cap))) {
                free(u);
                return MHD_NO;
        }
        *con_cls = u;
        return MHD_YES;
}

/* 0, 1 when the body went over its bound, or -ENOMEM. */
static int upload_append(struct upload *u, const char *data, size_t n)
{
        if (n > u->rt->body_max - u->len) {
                u->too_large = true;
                return 1;
        }
        if (u->len + n + 1 > u->cap) {
                size_t cap = u->cap;
                while (cap < u->len + n + 1)
                        cap *= 2;
                char *m = realloc(u->buf, cap);
                if (!m)
                        return -ENOMEM;
                u->buf = m;
                u->cap = cap;
        }
        memcpy(u->buf + u->len, data, n);
        u->len += n;
        return 0;
}

static enum MHD_Result post_finish(struct node_http *h, struct MHD_Connection *c,
                                   struct upload *u)
{
        const struct route *rt = u->rt;
        u->buf[u->len] = '\0';
        unsigned status = MHD_HTTP_OK;
        char *body = NULL;
        size_t len = 0;
        int r = rt->post(rt->ctx, u->buf, u->len, &status, &body, &len);
        if (r < 0) {
                free(body);
                gs_log_warn("%s: POST %s failed: %s", h->what, rt->path, strerror(-r));
                return answer(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal error\n", NULL);
        }
        return send_body(c, status, rt->content_type, body, len);
}

/* A GET or HEAD is answered on the first call, before any body is read; a
 * POST is collected over the calls that carry its body (bounded) and
 * answered on the last one. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
        struct node_http *h = cls;
        (void)version;
        struct upload *u = *con_cls;
        if (u && u->too_large) {
                /* Over the bound: what is left is read and dropped, and the
                 * request answered 413 once it is all in (libmicrohttpd
                 * cannot answer a chunked body midway). */
                if (*upload_size == 0)
                        return too_large(c, u->rt);
                *upload_size = 0;
                return MHD_YES;
        }
        if (u) {
                if (*upload_size == 0)
                        return post_finish(h, c, u);
                int r = upload_append(u, upload, *upload_size);
                *upload_size = 0;
                if (r > 0) {
                        free(u->buf);
                        u->buf = NULL;
                }
                return r < 0 ? MHD_NO : MHD_YES;
        }
        const struct route *rt = NULL;
        for (size_t i = 0; i < h->n_routes; i++)
                if (strcmp(url, h->routes[i].path) == 0)
                        rt = &h->routes[i];
        if (!rt)
                return answer(c, MHD_HTTP_NOT_FOUND, "not found\n", NULL);
        bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
                   strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
        if (get && rt->fn)
                return serve_get(h, c, rt);
        if (strcmp(method, MHD_HTTP_METHOD_POST) == 0 && rt->post)
                return post_begin(c, rt, con_cls);
        return answer(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n",
                      allowed_methods(rt));
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        (void)cls;
        (void)c;
        (void)toe;
        struct upload *u = *con_cls;
        if (u) {
                free(u->buf); /* NULL once over the bound */
                free(u);
                *con_cls = NULL;
        }
}

static void format_addr(const struct sockaddr_storage *ss, char *buf, size_t size)
{
        char host[INET6_ADDRSTRLEN] = "?";
        if (ss->ss_family == AF_INET6) {
                const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
                inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
                snprintf(buf, size, "[%s]:%u", host, (unsigned)ntohs(a->sin6_port));
        } else {
                const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
                inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
                snprintf(buf, size, "%s:%u", host, (unsigned)ntohs(a->sin_port));
        }
}

static int open_listener(const char *what, const char *listen_text, struct sockaddr_storage *ss,
                         struct gs_error **err)
{
        socklen_t len;
        int r = node_http_parse_listen(listen_text, ss, &len, err);
        if (r < 0)
                return r;
        int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return gs_error_set(err, -errno, "%s: socket: %s", what, strerror(errno));
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)ss, len) < 0 || listen(fd, 64) < 0) {
                r = -errno;
                close(fd);
                return gs_error_set(err, r, "%s: cannot listen on %s: %s", what, listen_text,
                                    strerror(-r));
        }
        len = sizeof(*ss);
        if (getsockname(fd, (struct sockaddr *)ss, &len) < 0) {
                r = -errno;
                close(fd);
                return gs_error_set(err, r, "%s: getsockname: %s", what, strerror(-r));
        }
        return fd;
}

int node_http_start(const char *what, const char *listen_text,
                    const struct node_http_route *routes, size_t n, struct node_http **ret,
                    struct gs_error **err)
{
        if (n > NODE_HTTP_MAX_ROUTES)
                return gs_error_set(err, -EINVAL, "%s: %zu routes (at most %d)", what, n,
                                    NODE_HTTP_MAX_ROUTES);
        struct node_http *h = calloc(1, sizeof(*h));
        if (!h)
                return gs_error_set(err, -ENOMEM, "out of memory");
        snprintf(h->what, sizeof(h->what), "%s", what);
        for (size_t i = 0; i < n; i++) {
                struct route *rt = &h->routes[i];
                if (snprintf(rt->path, sizeof(rt->path), "%s", routes[i].path) >=
                            (int)sizeof(rt->path) ||
                    snprintf(rt->content_type, sizeof(rt->content_type), "%s",
                             routes[i].content_type) >= (int)sizeof(rt->content_type)) {
                        free(h);
                        return gs_error_set(err, -EINVAL, "%s: route path or type too long",
                                            what);
                }
                rt->fn = routes[i].fn;
                rt->ctx = routes[i].ctx;
                rt->post = routes[i].post;
                rt->body_max = routes[i].body_max;
                if ((!rt->fn && !rt->post) ||
                    (rt->post && (rt->body_max == 0 || rt->body_max > NODE_HTTP_BODY_MAX_LIMIT))) {
                        free(h);
                        return gs_error_set(err, -EINVAL, "%s: route %s: no method, or a body "
                                            "bound outside 1..%u", what, rt->path,
                                            NODE_HTTP_BODY_MAX_LIMIT);
                }
        }
        h->n_routes = n;
        struct sockaddr_storage ss;
        int fd = open_listener(what, listen_text, &ss, err);
        if (fd < 0) {
                free(h);
                return fd;
        }
        unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
        if (ss.ss_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        h->mhd = MHD_start_daemon(
                flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
                MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                MHD_OPTION_CONNECTION_LIMIT, (unsigned)NODE_HTTP_MAX_CONNS,
                MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)NODE_HTTP_MAX_PER_IP,
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)NODE_HTTP_TIMEOUT_S,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)NODE_HTTP_REQUEST_MAX,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
        if (!h->mhd) {
                close(fd);
                free(h);
                return gs_error_set(err, -EIO, "%s: libmicrohttpd did not start on %s", what,
                                    listen_text);
        }
        char where[INET6_ADDRSTRLEN + 16];
        format_addr(&ss, where, sizeof(where));
        h->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        gs_log_info("%s: listening on %s", what, where);
        *ret = h;
        return 0;
}

uint16_t node_http_port(const struct node_http *h)
{
        return h->port;
}

struct node_http *node_http_stop(struct node_http *h)
{
        if (!h)
                return NULL;
        if (h->mhd)
                MHD_stop_daemon(h->mhd); /* joins its thread, closes the listener */
        free(h);
        return NULL;
}
