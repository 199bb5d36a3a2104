/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC transport of the device plugin: a server on a unix socket that
 * dispatches unary methods and the ListAndWatch stream to plain callbacks,
 * and a bounded unary client call. dp_grpc.c is the only file that touches
 * the gRPC C core; it maps grpc_status_code to negative errno and back.
 * Messages travel as encoded protobuf bytes (see dp_codec.h). */
#ifndef GS_DP_GRPC_H
#define GS_DP_GRPC_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* A unary handler: decode req, answer with a malloc'ed *ret_resp (freed by
 * the server), return 0; or return a negative errno and optionally set
 * *err, whose message becomes the gRPC status message (the pod's event).
 * -EINVAL, -E2BIG and -EBADMSG become INVALID_ARGUMENT, -ENOSPC
 * RESOURCE_EXHAUSTED, -ENODEV FAILED_PRECONDITION, others INTERNAL. */
typedef int (*dp_unary_fn)(void *ctx, const uint8_t *req, size_t req_len, uint8_t **ret_resp,
                           size_t *ret_len, struct gs_error **err);

struct dp_method {
        const char *path; /* e.g. "/v1beta1.DevicePlugin/Allocate" */
        dp_unary_fn fn;
};

/* The server-streaming method: each open stream gets the encoded list
 * whenever generation() moves past what it last sent. */
struct dp_stream_method {
        const char *path;
        uint64_t (*generation)(void *ctx);
        /* Encode the current list; *ret_gen is the generation it reflects. */
        int (*encode)(void *ctx, uint64_t *ret_gen, uint8_t **ret_buf, size_t *ret_len);
};

struct dp_server;

/* Initialise / release the gRPC library (reference counted by gRPC). */
void dp_grpc_init(void);
void dp_grpc_shutdown(void);

/* Remove a stale file at socket_path, listen there and serve the methods on
 * a new thread until dp_server_stop(). methods/stream/ctx must outlive the
 * server. Returns 0 and *ret, or a negative errno with *err set. */
int dp_server_start(const char *socket_path, const struct dp_method *methods, size_t n_methods,
                    const struct dp_stream_method *stream, void *ctx, struct dp_server **ret,
                    struct gs_error **err);

/* Number of ListAndWatch streams open right now, and opened ever. */
unsigned dp_server_streams(struct dp_server *s);
unsigned dp_server_streams_opened(struct dp_server *s);

/* Cancel every call, stop the thread, close and unlink the socket, free.
 * NULL-safe; returns NULL. */
struct dp_server *dp_server_stop(struct dp_server *s);

/* Call a unary method at `target` ("unix:/path") with a deadline of
 * timeout_ms, accepting answers up to max_recv bytes. Returns 0 and the
 * malloc'ed answer, or a negative errno (-ECONNREFUSED unavailable,
 * -ETIMEDOUT deadline, -EINVAL invalid argument, -EPROTO other statuses)
 * with *err naming the method and the status message. */
int dp_unary_call(const char *target, const char *method, const uint8_t *req, size_t req_len,
                  int timeout_ms, size_t max_recv, uint8_t **ret_resp, size_t *ret_len,
                  struct gs_error **err);

#endif /* GS_DP_GRPC_H */
