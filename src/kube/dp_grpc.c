/* SPDX-License-Identifier: Apache-2.0 */
/* The gRPC C core boundary (see dp_grpc.h). One thread per server runs a
 * completion queue: it accepts calls, dispatches unary methods by path, and
 * keeps ListAndWatch streams fed whenever the list's generation moves. */
#include "dp_grpc.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

enum { OP_NEW, OP_RECV, OP_FINISH, OP_SEND, OP_CLOSE, OP_SHUTDOWN };

struct call;
struct tag {
        struct call *call;
        int op;
};

struct call {
        struct dp_server *srv;
        grpc_call *call;
        grpc_call_details details;
        grpc_metadata_array md;
        grpc_byte_buffer *recv;
        grpc_byte_buffer *send;
        grpc_slice status_details;
        bool has_status;
        int cancelled;
        int pending;     /* batches in flight */
        bool is_stream;  /* a ListAndWatch call past its request */
        bool sending;
        bool closed;
        uint64_t sent_gen;
        struct tag t_new, t_recv, t_finish, t_send, t_close;
        struct call *next; /* in srv->streams */
};

struct dp_server {
        grpc_server *server;
        grpc_completion_queue *cq;
        pthread_t thread;
        atomic_bool stop;
        bool shutting;
        char *path;
        const struct dp_method *methods;
        size_t n_methods;
        const struct dp_stream_method *stream;
        void *ctx;
        struct call *streams;
        atomic_uint n_streams;
        atomic_uint n_streams_opened;
        struct tag t_shutdown;
};

void dp_grpc_init(void)
{
        grpc_init();
}

void dp_grpc_shutdown(void)
{
        grpc_shutdown_blocking();
}

static grpc_status_code errno_to_status(int r)
{
        switch (r) {
        case -EINVAL:
        case -E2BIG:
        case -EBADMSG:
                return GRPC_STATUS_INVALID_ARGUMENT;
        case -ENOSPC:
        case -ENOMEM:
                return GRPC_STATUS_RESOURCE_EXHAUSTED;
        case -ENODEV:
                return GRPC_STATUS_FAILED_PRECONDITION;
        case -ENOSYS:
                return GRPC_STATUS_UNIMPLEMENTED;
        default:
                return GRPC_STATUS_INTERNAL;
        }
}

static int status_to_errno(grpc_status_code s)
{
        switch (s) {
        case GRPC_STATUS_OK:
                return 0;
        case GRPC_STATUS_UNAVAILABLE:
                return -ECONNREFUSED;
        case GRPC_STATUS_DEADLINE_EXCEEDED:
                return -ETIMEDOUT;
        case GRPC_STATUS_INVALID_ARGUMENT:
                return -EINVAL;
        default:
                return -EPROTO;
        }
}

static grpc_byte_buffer *buffer_new(const uint8_t *buf, size_t len)
{
        grpc_slice s = grpc_slice_from_copied_buffer((const char *)buf, len);
        grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        return bb;
}

/* Copy a received buffer into malloc'ed memory (never NULL on success). */
static int buffer_read(grpc_byte_buffer *bb, uint8_t **ret, size_t *ret_len)
{
        grpc_byte_buffer_reader rd;
        if (!grpc_byte_buffer_reader_init(&rd, bb))
                return -EBADMSG;
        grpc_slice s = grpc_byte_buffer_reader_readall(&rd);
        grpc_byte_buffer_reader_destroy(&rd);
        size_t len = GRPC_SLICE_LENGTH(s);
        uint8_t *out = malloc(len ? len : 1);
        if (!out) {
                grpc_slice_unref(s);
                return -ENOMEM;
        }
        if (len)
                memcpy(out, GRPC_SLICE_START_PTR(s), len);
        grpc_slice_unref(s);
        *ret = out;
        *ret_len = len;
        return 0;
}

static struct call *call_new(struct dp_server *srv)
{
        struct call *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->srv = srv;
        grpc_call_details_init(&c->details);
        grpc_metadata_array_init(&c->md);
        c->t_new = (struct tag){c, OP_NEW};
        c->t_recv = (struct tag){c, OP_RECV};
        c->t_finish = (struct tag){c, OP_FINISH};
        c->t_send = (struct tag){c, OP_SEND};
        c->t_close = (struct tag){c, OP_CLOSE};
        return c;
}

static void call_free(struct call *c)
{
        struct dp_server *srv = c->srv;
        if (c->is_stream) {
                for (struct call **p = &srv->streams; *p; p = &(*p)->next)
                        if (*p == c) {
                                *p = c->next;
                                atomic_fetch_sub(&srv->n_streams, 1);
                                break;
                        }
        }
        if (c->recv)
                grpc_byte_buffer_destroy(c->recv);
        if (c->send)
                grpc_byte_buffer_destroy(c->send);
        if (c->has_status)
                grpc_slice_unref(c->status_details);
        grpc_call_details_destroy(&c->details);
        grpc_metadata_array_destroy(&c->md);
        if (c->call)
                grpc_call_unref(c->call);
        free(c);
}

static void request_new(struct dp_server *srv)
{
        if (srv->shutting)
                return;
        struct call *c = call_new(srv);
        if (!c)
                return; /* retried after the next event */
        if (grpc_server_request_call(srv->server, &c->call, &c->details, &c->md, srv->cq, srv->cq,
                                     &c->t_new) != GRPC_CALL_OK)
                call_free(c);
}

static bool start(struct call *c, const grpc_op *ops, size_t n, struct tag *t)
{
        if (grpc_call_start_batch(c->call, ops, n, t, NULL) != GRPC_CALL_OK)
                return false;
        c->pending++;
        return true;
}

/* Answer a unary call: message (may be NULL) and status. */
static void finish(struct call *c, grpc_status_code status, const char *msg, const uint8_t *resp,
                   size_t resp_len)
{
        grpc_op ops[4];
        size_t n = 0;
        memset(ops, 0, sizeof(ops));
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
        if (resp && status == GRPC_STATUS_OK) {
                c->send = buffer_new(resp, resp_len);
                ops[n].op = GRPC_OP_SEND_MESSAGE;
                ops[n++].data.send_message.send_message = c->send;
        }
        c->status_details = grpc_slice_from_copied_string(msg ? msg : "");
        c->has_status = true;
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.status = status;
        ops[n++].data.send_status_from_server.status_details = &c->status_details;
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
        start(c, ops, n, &c->t_finish);
}

static void handle_request(struct call *c)
{
        struct dp_server *srv = c->srv;
        const grpc_slice m = c->details.method;
        if (!c->recv) {
                finish(c, GRPC_STATUS_INVALID_ARGUMENT, "request message missing", NULL, 0);
                return;
        }
        uint8_t *req = NULL;
        size_t req_len = 0;
        int r = buffer_read(c->recv, &req, &req_len);
        if (r < 0) {
                finish(c, errno_to_status(r), "cannot read request", NULL, 0);
                return;
        }
        if (srv->stream && grpc_slice_str_cmp(m, srv->stream->path) == 0) {
                free(req);
                c->is_stream = true;
                c->next = srv->streams;
                srv->streams = c;
                atomic_fetch_add(&srv->n_streams, 1);
                atomic_fetch_add(&srv->n_streams_opened, 1);
                grpc_op op;
                memset(&op, 0, sizeof(op));
                op.op = GRPC_OP_SEND_INITIAL_METADATA;
                c->sending = start(c, &op, 1, &c->t_send);
                memset(&op, 0, sizeof(op));
                op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
                op.data.recv_close_on_server.cancelled = &c->cancelled;
                start(c, &op, 1, &c->t_close);
                return;
        }
        for (size_t i = 0; i < srv->n_methods; i++) {
                if (grpc_slice_str_cmp(m, srv->methods[i].path) != 0)
                        continue;
                uint8_t *resp = NULL;
                size_t resp_len = 0;
                struct gs_error *err = NULL;
                r = srv->methods[i].fn(srv->ctx, req, req_len, &resp, &resp_len, &err);
                free(req);
                if (r < 0)
                        finish(c, errno_to_status(r), err ? gs_error_msg(err) : strerror(-r),
                               NULL, 0);
                else
                        finish(c, GRPC_STATUS_OK, NULL, resp, resp_len);
                free(resp);
                gs_error_free(err);
                return;
        }
        free(req);
        finish(c, GRPC_STATUS_UNIMPLEMENTED, "unknown method", NULL, 0);
}

static void push_streams(struct dp_server *srv)
{
        if (srv->shutting || !srv->stream)
                return;
        for (struct call *c = srv->streams; c; c = c->next) {
                if (c->closed || c->sending)
                        continue;
                if (srv->stream->generation(srv->ctx) == c->sent_gen)
                        continue;
                uint8_t *buf = NULL;
                size_t len = 0;
                uint64_t gen = 0;
                if (srv->stream->encode(srv->ctx, &gen, &buf, &len) < 0)
                        continue;
                if (c->send)
                        grpc_byte_buffer_destroy(c->send);
                c->send = buffer_new(buf, len);
                free(buf);
                grpc_op op;
                memset(&op, 0, sizeof(op));
                op.op = GRPC_OP_SEND_MESSAGE;
                op.data.send_message.send_message = c->send;
                c->sent_gen = gen;
                c->sending = start(c, &op, 1, &c->t_send);
                if (!c->sending)
                        c->closed = true;
        }
}

static void handle_event(struct dp_server *srv, struct tag *t, bool ok)
{
        struct call *c = t->call;
        if (t->op == OP_NEW) {
                request_new(srv);
                if (!ok) {
                        call_free(c);
                        return;
                }
                if (srv->shutting) {
                        call_free(c);
                        return;
                }
                grpc_op op;
                memset(&op, 0, sizeof(op));
                op.op = GRPC_OP_RECV_MESSAGE;
                op.data.recv_message.recv_message = &c->recv;
                start(c, &op, 1, &c->t_recv);
                if (c->pending == 0)
                        call_free(c);
                return;
        }
        c->pending--;
        switch (t->op) {
        case OP_RECV:
                if (ok && !srv->shutting)
                        handle_request(c);
                break;
        case OP_SEND:
                c->sending = false;
                if (!ok)
                        c->closed = true;
                break;
        case OP_CLOSE:
                c->closed = true;
                break;
        default:
                break;
        }
        if (c->pending == 0)
                call_free(c);
}

static void *server_thread(void *arg)
{
        struct dp_server *srv = arg;
        request_new(srv);
        for (;;) {
                gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                                     gpr_time_from_millis(50, GPR_TIMESPAN));
                grpc_event ev = grpc_completion_queue_next(srv->cq, deadline, NULL);
                if (ev.type == GRPC_QUEUE_SHUTDOWN)
                        break;
                if (ev.type == GRPC_OP_COMPLETE) {
                        struct tag *t = ev.tag;
                        if (t->op == OP_SHUTDOWN)
                                grpc_completion_queue_shutdown(srv->cq);
                        else
                                handle_event(srv, t, ev.success != 0);
                }
                if (atomic_load(&srv->stop) && !srv->shutting) {
                        srv->shutting = true;
                        grpc_server_shutdown_and_notify(srv->server, srv->cq, &srv->t_shutdown);
                        grpc_server_cancel_all_calls(srv->server);
                }
                push_streams(srv);
        }
        return NULL;
}

int dp_server_start(const char *socket_path, const struct dp_method *methods, size_t n_methods,
                    const struct dp_stream_method *stream, void *ctx, struct dp_server **ret,
                    struct gs_error **err)
{
        struct dp_server *srv = calloc(1, sizeof(*srv));
        if (!srv)
                return gs_error_set(err, -ENOMEM, "out of memory");
        srv->methods = methods;
        srv->n_methods = n_methods;
        srv->stream = stream;
        srv->ctx = ctx;
        srv->t_shutdown = (struct tag){NULL, OP_SHUTDOWN};
        srv->path = strdup(socket_path);
        size_t alen = strlen(socket_path) + 6;
        char *addr = malloc(alen);
        if (!srv->path || !addr) {
                free(addr);
                free(srv->path);
                free(srv);
                return gs_error_set(err, -ENOMEM, "out of memory");
        }
        snprintf(addr, alen, "unix:%s", socket_path);
        if (unlink(socket_path) < 0 && errno != ENOENT) {
                int e = errno;
                free(addr);
                free(srv->path);
                free(srv);
                return gs_error_set(err, -e, "cannot remove stale socket %s: %s", socket_path,
                                    strerror(e));
        }
        srv->cq = grpc_completion_queue_create_for_next(NULL);
        srv->server = grpc_server_create(NULL, NULL);
        grpc_server_register_completion_queue(srv->server, srv->cq, NULL);
        grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
        int port = grpc_server_add_http2_port(srv->server, addr, creds);
        grpc_server_credentials_release(creds);
        free(addr);
        if (port == 0) {
                grpc_server_destroy(srv->server);
                grpc_completion_queue_shutdown(srv->cq);
                while (grpc_completion_queue_next(srv->cq, gpr_inf_future(GPR_CLOCK_REALTIME),
                                                  NULL)
                               .type != GRPC_QUEUE_SHUTDOWN)
                        ;
                grpc_completion_queue_destroy(srv->cq);
                int r = gs_error_set(err, -EADDRINUSE, "cannot listen on %s", socket_path);
                free(srv->path);
                free(srv);
                return r;
        }
        grpc_server_start(srv->server);
        int r = pthread_create(&srv->thread, NULL, server_thread, srv);
        if (r != 0) {
                srv->shutting = true;
                grpc_server_shutdown_and_notify(srv->server, srv->cq, &srv->t_shutdown);
                grpc_server_cancel_all_calls(srv->server);
                for (;;) {
                        grpc_event ev = grpc_completion_queue_next(
                                srv->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                        if (ev.type == GRPC_QUEUE_SHUTDOWN)
                                break;
                        if (ev.type == GRPC_OP_COMPLETE &&
                            ((struct tag *)ev.tag)->op == OP_SHUTDOWN)
                                grpc_completion_queue_shutdown(srv->cq);
                }
                grpc_server_destroy(srv->server);
                grpc_completion_queue_destroy(srv->cq);
                unlink(srv->path);
                free(srv->path);
                free(srv);
                return gs_error_set(err, -r, "cannot start the server thread");
        }
        *ret = srv;
        return 0;
}

unsigned dp_server_streams(struct dp_server *s)
{
        return s ? atomic_load(&s->n_streams) : 0;
}

unsigned dp_server_streams_opened(struct dp_server *s)
{
        return s ? atomic_load(&s->n_streams_opened) : 0;
}

struct dp_server *dp_server_stop(struct dp_server *s)
{
        if (!s)
                return NULL;
        atomic_store(&s->stop, true);
        pthread_join(s->thread, NULL);
        grpc_server_destroy(s->server);
        grpc_completion_queue_destroy(s->cq);
        /* Remove the socket only if it is still ours (a restarted peer may
         * have replaced the directory's content). */
        struct stat st;
        if (lstat(s->path, &st) == 0 && S_ISSOCK(st.st_mode))
                unlink(s->path);
        free(s->path);
        free(s);
        return NULL;
}

int dp_unary_call(const char *target, const char *method, const uint8_t *req, size_t req_len,
                  int timeout_ms, size_t max_recv, uint8_t **ret_resp, size_t *ret_len,
                  struct gs_error **err)
{
        grpc_arg arg = {.type = GRPC_ARG_INTEGER,
                        .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                        .value.integer = max_recv > INT32_MAX ? INT32_MAX : (int)max_recv};
        grpc_channel_args args = {.num_args = 1, .args = &arg};
        grpc_channel_credentials *creds = grpc_insecure_credentials_create();
        grpc_channel *ch = grpc_channel_create(target, creds, &args);
        grpc_channel_credentials_release(creds);
        grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
        gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                                             gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
        grpc_slice mslice = grpc_slice_from_copied_string(method);
        grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, mslice,
                                                   NULL, deadline, NULL);
        grpc_slice_unref(mslice);

        grpc_byte_buffer *send = buffer_new(req, req_len);
        grpc_byte_buffer *recv = NULL;
        grpc_metadata_array md_initial, md_trailing;
        grpc_metadata_array_init(&md_initial);
        grpc_metadata_array_init(&md_trailing);
        grpc_status_code status = GRPC_STATUS_UNKNOWN;
        grpc_slice details = grpc_empty_slice();
        grpc_op ops[6];
        memset(ops, 0, sizeof(ops));
        ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
        ops[1].op = GRPC_OP_SEND_MESSAGE;
        ops[1].data.send_message.send_message = send;
        ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[3].data.recv_initial_metadata.recv_initial_metadata = &md_initial;
        ops[4].op = GRPC_OP_RECV_MESSAGE;
        ops[4].data.recv_message.recv_message = &recv;
        ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
        ops[5].data.recv_status_on_client.trailing_metadata = &md_trailing;
        ops[5].data.recv_status_on_client.status = &status;
        ops[5].data.recv_status_on_client.status_details = &details;

        int r = 0;
        static int tag_dummy;
        if (grpc_call_start_batch(call, ops, 6, &tag_dummy, NULL) != GRPC_CALL_OK) {
                r = gs_error_set(err, -EIO, "%s: cannot start the call", method);
        } else {
                for (;;) {
                        grpc_event ev = grpc_completion_queue_next(
                                cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                        if (ev.type == GRPC_OP_COMPLETE && ev.tag == &tag_dummy)
                                break;
                }
                if (status != GRPC_STATUS_OK) {
                        char *msg = grpc_slice_to_c_string(details);
                        r = gs_error_set(err, status_to_errno(status), "%s on %s: status %d: %s",
                                         method, target, (int)status, msg ? msg : "");
                        gpr_free(msg);
                } else if (!recv) {
                        r = gs_error_set(err, -EPROTO, "%s on %s: no answer message", method,
                                         target);
                } else {
                        r = buffer_read(recv, ret_resp, ret_len);
                        if (r < 0)
                                gs_error_set(err, r, "%s: cannot read the answer", method);
                }
        }
        if (recv)
                grpc_byte_buffer_destroy(recv);
        grpc_byte_buffer_destroy(send);
        grpc_slice_unref(details);
        grpc_metadata_array_destroy(&md_initial);
        grpc_metadata_array_destroy(&md_trailing);
        grpc_call_unref(call);
        grpc_completion_queue_shutdown(cq);
        while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
                ;
        grpc_completion_queue_destroy(cq);
        grpc_channel_destroy(ch);
        return r;
}
