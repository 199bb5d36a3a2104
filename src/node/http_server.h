/* SPDX-License-Identifier: Apache-2.0 */
/* A small, bounded HTTP server for a daemon's endpoints (/metrics, the
 * scheduler extender's verbs): libmicrohttpd in a thread of its own, so
 * that no client, slow or malformed, can hold up the daemon's event loop.
 * A route serves GET and HEAD (`fn`), POST with a body (`post`), or both;
 * other methods get 405 with Allow, other paths 404. Bounds:
 * NODE_HTTP_MAX_CONNS connections in all, NODE_HTTP_MAX_PER_IP from one
 * address, NODE_HTTP_TIMEOUT_S of inactivity (a client that stalls
 * mid-request, body included, is dropped), NODE_HTTP_REQUEST_MAX bytes of
 * request line and headers (larger requests are refused by libmicrohttpd)
 * and the route's `body_max` bytes of POST body (413 beyond, before the
 * body is read when Content-Length says so). A route's function runs in
 * the server's thread, one request at a time; what it reads of the node it
 * reads under the node's lock, briefly. */
#ifndef GS_NODE_HTTP_SERVER_H
#define GS_NODE_HTTP_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "error.h"

#define NODE_HTTP_MAX_CONNS 32
#define NODE_HTTP_MAX_PER_IP 16
#define NODE_HTTP_TIMEOUT_S 5
#define NODE_HTTP_REQUEST_MAX 16384
#define NODE_HTTP_MAX_ROUTES 8

/* Produce the body of a GET: 0 with *body (malloc'd; the server frees it)
 * and *len, or a negative errno (answered 500, logged). */
typedef int (*node_http_fn)(void *ctx, char **body, size_t *len);

/* Answer a POST whose whole body is body[0..len) (NUL-terminated at
 * body[len] for convenience; it may hold NULs of its own): 0 with *status
 * (the HTTP status to send), *resp (malloc'd; the server frees it) and
 * *resp_len, or a negative errno (answered 500, logged). */
typedef int (*node_http_post_fn)(void *ctx, const char *body, size_t len, unsigned *status,
                                 char **resp, size_t *resp_len);

#define NODE_HTTP_BODY_MAX_LIMIT (64u << 20) /* the most body_max may be */

struct node_http_route {
        const char *path;         /* exact path, e.g. "/metrics" (copied) */
        const char *content_type; /* of the route's answers (copied) */
        node_http_fn fn;          /* GET and HEAD, or NULL */
        void *ctx;
        node_http_post_fn post;   /* POST, or NULL */
        size_t body_max;          /* POST: bodies above this are answered 413 (1..LIMIT) */
};

struct node_http;

/* Parse "ADDR:PORT": an IPv4 address ("127.0.0.1:9400", "0.0.0.0:9400") or
 * a bracketed IPv6 one ("[::1]:9400", "[::]:0"); port 0..65535, 0 for an
 * ephemeral port. 0 with *ss and *len, or -EINVAL with *err naming the
 * value and the accepted forms. */
int node_http_parse_listen(const char *text, struct sockaddr_storage *ss, socklen_t *len,
                           struct gs_error **err);

/* Bind `listen` ("ADDR:PORT", as node_http_parse_listen) and serve `routes`
 * (n at most NODE_HTTP_MAX_ROUTES) from a new thread. `what` names the
 * server in logs ("metrics"): "<what>: listening on ADDR:PORT" with the
 * bound port is logged. 0 and *ret, or a negative errno with *err. */
int node_http_start(const char *what, const char *listen, const struct node_http_route *routes,
                    size_t n, struct node_http **ret, struct gs_error **err);

/* The port it is bound to. */
uint16_t node_http_port(const struct node_http *h);

/* Stop: close the listening socket and every connection, join the thread,
 * free. Call it without the node's lock (a route may be waiting for it).
 * NULL-safe; returns NULL. */
struct node_http *node_http_stop(struct node_http *h);

#endif /* GS_NODE_HTTP_SERVER_H */
