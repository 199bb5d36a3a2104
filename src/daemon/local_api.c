/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced's local API: the listening socket and client connections with
 * framed requests (local_proto.h), watched on the daemon's event loop
 * (src/node/event_loop.c) and served under the node's lock. A connection
 * whose first frame is a shim's (GSAR) is handed to the compute arbiter's
 * service. */
#include "daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "arbiter_server.h"
#include "log.h"

#define now_ms node_now_ms

static void on_accept(struct node_watch *w, uint32_t events);
static void on_conn(struct node_watch *w, uint32_t events);
static int check_deadlines(void *ctx, int64_t now);

#define DAEMON_STATE_RETRY_MS 2000 /* a change the disk refused is tried again */

static int make_addr(const char *path, struct sockaddr_un *sa, struct gs_error **err)
{
        *sa = (struct sockaddr_un){ .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa->sun_path))
                return gs_error_set(err, -ENAMETOOLONG, "socket path %s is longer than %zu bytes",
                                    path, sizeof(sa->sun_path) - 1);
        memcpy(sa->sun_path, path, strlen(path) + 1);
        return 0;
}

int local_api_listen(struct daemon *d, struct gs_error **err)
{
        struct sockaddr_un sa;
        int r = make_addr(d->socket_path, &sa, err);
        if (r < 0)
                return r;
        /* Another daemon answering here keeps its socket. */
        _cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0)
                return gs_error_set(err, -EADDRINUSE,
                                    "another gpusliced already answers on %s", d->socket_path);
        unlink(d->socket_path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return gs_error_set(err, -errno, "socket: %s", strerror(errno));
        mode_t old = umask(geteuid() == 0 ? 0117 : 0177);
        r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
        int e = errno;
        umask(old);
        if (r < 0 || listen(fd, 128) < 0) {
                e = r < 0 ? e : errno;
                close(fd);
                return gs_error_set(err, -e, "cannot listen on %s: %s", d->socket_path, strerror(e));
        }
        d->listen = (struct node_watch){ .fd = fd, .fn = on_accept, .ctx = d };
        r = node_loop_watch(&d->loop, &d->listen, EPOLLIN);
        if (r < 0)
                return gs_error_set(err, r, "cannot watch %s: %s", d->socket_path, strerror(-r));
        return node_loop_add_tick(&d->loop, check_deadlines, d);
}

static void conn_close(struct daemon *d, struct conn *c)
{
        for (size_t i = 0; i < DAEMON_MAX_CONNS; i++)
                if (d->conns[i] == c)
                        d->conns[i] = NULL;
        node_loop_unwatch(&d->loop, &c->w);
        close(c->w.fd);
        free(c->in);
        gs_free(c->out);
        free(c);
}

static void conn_update_events(struct daemon *d, struct conn *c)
{
        uint32_t ev = c->out_len > c->out_off ? EPOLLOUT : EPOLLIN;
        node_loop_rewatch(&d->loop, &c->w, ev | EPOLLRDHUP);
}

/* Queue a frame (taking ownership) and try to send it right away. */
static void conn_send(struct daemon *d, struct conn *c, uint8_t *frame, size_t len)
{
        if (c->out_len - c->out_off + len > DAEMON_MAX_OUT) {
                gs_free(frame);
                c->closing = true;
                return;
        }
        if (c->out_off == c->out_len) {
                gs_free(c->out);
                c->out = frame;
                c->out_len = len;
                c->out_off = 0;
        } else {
                uint8_t *n = gs_realloc(c->out, c->out_len + len);
                if (!n) {
                        gs_free(frame);
                        c->closing = true;
                        return;
                }
                memcpy(n + c->out_len, frame, len);
                c->out = n;
                c->out_len += len;
                gs_free(frame);
        }
        (void)d;
}

static void send_error(struct daemon *d, struct conn *c, int code, const char *msg)
{
        uint8_t *frame = NULL;
        size_t len = 0;
        if (gs_proto_error_frame(code, msg, &frame, &len) == 0)
                conn_send(d, c, frame, len);
        else
                c->closing = true;
}

static void handle_frame(struct daemon *d, struct conn *c, uint16_t type, const uint8_t *payload,
                         uint32_t length)
{
        struct gs_error *err = NULL;
        struct gs_proto_msg m = { 0 };
        if (!gs_proto_request_known(type)) {
                gs_log_warn("client pid %d uid %u: unknown request type %u", (int)c->pid,
                          (unsigned)c->uid, type);
                send_error(d, c, -EBADMSG, "unknown request type");
                return;
        }
        int r = gs_proto_msg_parse(type, (const char *)payload, length, &m, &err);
        struct gs_proto_builder b;
        gs_proto_builder_init(&b, (uint16_t)(GS_MSG_REPLY | type), GS_PROTO_MAX_REPLY);
        if (r == 0)
                r = slices_handle(d, c, &m, &b, &err);
        uint8_t *frame = NULL;
        size_t len = 0;
        if (r == 0 && (r = gs_proto_builder_finish(&b, &frame, &len)) < 0)
                gs_error_set(&err, r, "reply too large or out of memory");
        gs_proto_builder_done(&b);
        if (r < 0) {
                if (r != -ENOSPC)
                        gs_log_warn("request %u from pid %d uid %u refused: %s", type, (int)c->pid,
                                  (unsigned)c->uid, gs_error_msg(err));
                else
                        gs_log_info("request from pid %d refused: %s", (int)c->pid, gs_error_msg(err));
                send_error(d, c, r, gs_error_msg(err));
        } else {
                conn_send(d, c, frame, len);
        }
        gs_error_free(err);
        gs_proto_msg_done(&m);
}

/* Handle at most one complete frame from c->in. Returns true if one was
 * consumed (and more may follow). */
static bool conn_process(struct daemon *d, struct conn *c)
{
        struct gs_proto_header h;
        struct gs_error *err = NULL;
        int r = gs_proto_header_decode(c->in, c->in_len, GS_PROTO_MAX_REQUEST, &h, &err);
        if (r == -EAGAIN)
                return false;
        if (r < 0) {
                /* The stream cannot be resynchronised: answer and hang up. */
                gs_log_warn("client pid %d uid %u: %s; closing", (int)c->pid, (unsigned)c->uid,
                          gs_error_msg(err));
                send_error(d, c, r, gs_error_msg(err));
                gs_error_free(err);
                c->closing = true;
                c->in_len = 0;
                return false;
        }
        size_t total = GS_PROTO_HEADER_SIZE + h.length;
        if (c->in_len < total)
                return false;
        handle_frame(d, c, h.type, c->in + GS_PROTO_HEADER_SIZE, h.length);
        memmove(c->in, c->in + total, c->in_len - total);
        c->in_len -= total;
        c->frame_started_ms = c->in_len ? now_ms() : 0;
        return true;
}

static void conn_flush(struct daemon *d, struct conn *c)
{
        while (c->out_off < c->out_len) {
                ssize_t n = send(c->w.fd, c->out + c->out_off, c->out_len - c->out_off,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        break;
                if (n <= 0) {
                        conn_close(d, c);
                        return;
                }
                c->out_off += (size_t)n;
        }
        if (c->out_off == c->out_len && c->closing) {
                conn_close(d, c);
                return;
        }
        conn_update_events(d, c);
}

/* A shim's connection (first frame GSAR, not GSLP): hand it, with what
 * was read, to the compute arbiter's service (arbiter_server.c). */
static void conn_handoff(struct daemon *d, struct conn *c)
{
        for (size_t i = 0; i < DAEMON_MAX_CONNS; i++)
                if (d->conns[i] == c)
                        d->conns[i] = NULL;
        node_loop_unwatch(&d->loop, &c->w);
        arbsrv_adopt(d, c->w.fd, c->pid, c->uid, c->in, c->in_len);
        free(c->in);
        gs_free(c->out);
        free(c);
}

static void conn_readable(struct daemon *d, struct conn *c)
{
        const size_t cap = GS_PROTO_HEADER_SIZE + GS_PROTO_MAX_REQUEST;
        c->last_active_ms = now_ms();
        for (;;) {
                if (c->in_len == cap)
                        break;
                ssize_t n = recv(c->w.fd, c->in + c->in_len, cap - c->in_len, MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        break;
                if (n <= 0) {
                        if (c->in_len)
                                gs_log_warn("client pid %d hung up inside a frame (%zu bytes)",
                                          (int)c->pid, c->in_len);
                        conn_close(d, c);
                        return;
                }
                if (c->in_len == 0)
                        c->frame_started_ms = c->last_active_ms;
                c->in_len += (size_t)n;
                if (c->out_len == 0 && arbsrv_is_gsar(c->in, c->in_len)) {
                        conn_handoff(d, c); /* no frame served yet: a shim */
                        return;
                }
                /* Answer one request before reading on: a client that does
                 * not read its replies stops being read. */
                if (c->out_off == c->out_len && !c->closing)
                        while (conn_process(d, c) && c->out_off == c->out_len && !c->closing)
                                ;
                if (c->out_off < c->out_len || c->closing)
                        break;
        }
        conn_flush(d, c);
}

/* May a new connection from uid (process pid) take a slot? At most
 * DAEMON_MAX_CONNS_PER_UID from one non-root uid, and the last
 * DAEMON_RESERVED_CONNS are kept for root and slices' processes (a shim
 * comes in here before its first frame says GSAR), so that no flood of
 * other users' connections locks them out. True, or false with the reason
 * in why. */
static bool admit(struct daemon *d, uid_t uid, pid_t pid, char *why, size_t why_size)
{
        size_t total = 0, mine = 0;
        for (size_t i = 0; i < DAEMON_MAX_CONNS; i++)
                if (d->conns[i]) {
                        total++;
                        mine += d->conns[i]->uid == uid;
                }
        if (total >= DAEMON_MAX_CONNS) {
                snprintf(why, why_size, "too many connections (%d open)", DAEMON_MAX_CONNS);
                return false;
        }
        if (uid == 0)
                return true;
        if (mine >= DAEMON_MAX_CONNS_PER_UID) {
                snprintf(why, why_size, "too many connections from uid %u (%zu open, at most %d per user)",
                         (unsigned)uid, mine, DAEMON_MAX_CONNS_PER_UID);
                return false;
        }
        if (total >= DAEMON_MAX_CONNS - DAEMON_RESERVED_CONNS &&
            !arbsrv_pid_in_slice(d, pid, uid)) {
                snprintf(why, why_size, "too many connections (the last %d are kept for root and "
                         "slices' processes)", DAEMON_RESERVED_CONNS);
                return false;
        }
        return true;
}

/* A refusal is logged at most once a second (a flood would fill the log),
 * with the number of refusals since the last line. */
static void log_refusal(pid_t pid, uid_t uid, const char *why)
{
        static int64_t last_ms;
        static unsigned quiet;
        int64_t now = now_ms();
        if (last_ms && now - last_ms < 1000) {
                quiet++;
                return;
        }
        if (quiet)
                gs_log_warn("connection from pid %d uid %u refused: %s (and %u more in the last %lld ms)",
                            (int)pid, (unsigned)uid, why, quiet, (long long)(now - last_ms));
        else
                gs_log_warn("connection from pid %d uid %u refused: %s", (int)pid, (unsigned)uid, why);
        last_ms = now;
        quiet = 0;
}

static void on_accept(struct node_watch *w, uint32_t events)
{
        struct daemon *d = w->ctx;
        (void)events;
        int fd = accept4(d->listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
                return;
        size_t slot;
        for (slot = 0; slot < DAEMON_MAX_CONNS && d->conns[slot]; slot++)
                ;
        struct ucred cred;
        socklen_t cl = sizeof(cred);
        struct conn *c = NULL;
        char why[160] = "out of memory";
        bool known = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0;
        if (!known)
                snprintf(why, sizeof(why), "no peer credentials");
        if (!known || !admit(d, cred.uid, cred.pid, why, sizeof(why)) ||
            !(c = calloc(1, sizeof(*c))) ||
            !(c->in = malloc(GS_PROTO_HEADER_SIZE + GS_PROTO_MAX_REQUEST))) {
                log_refusal(known ? cred.pid : 0, known ? cred.uid : (uid_t)-1, why);
                uint8_t *frame = NULL;
                size_t len = 0;
                if (gs_proto_error_frame(-EBUSY, why, &frame, &len) == 0)
                        (void)!send(fd, frame, len, MSG_NOSIGNAL | MSG_DONTWAIT);
                gs_free(frame);
                if (c)
                        free(c);
                close(fd);
                return;
        }
        c->w = (struct node_watch){ .fd = fd, .fn = on_conn, .ctx = d };
        c->uid = cred.uid;
        c->pid = cred.pid;
        c->last_active_ms = now_ms();
        if (node_loop_watch(&d->loop, &c->w, EPOLLIN | EPOLLRDHUP) < 0) {
                free(c->in);
                free(c);
                close(fd);
                return;
        }
        d->conns[slot] = c;
}

static void on_conn(struct node_watch *w, uint32_t events)
{
        struct conn *c = (struct conn *)w;
        if (events & EPOLLOUT)
                conn_flush(w->ctx, c);
        else if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                conn_readable(w->ctx, c);
}

/* The loop's tick: enforce frame deadlines and idle limits; returns when
 * the next one is due. */
static int check_deadlines(void *ctx, int64_t now)
{
        struct daemon *d = ctx;
        int64_t next = -1;
        for (size_t i = 0; i < DAEMON_MAX_CONNS; i++) {
                struct conn *c = d->conns[i];
                if (!c)
                        continue;
                int64_t due = c->frame_started_ms ? c->frame_started_ms + DAEMON_FRAME_DEADLINE_MS
                                                  : c->last_active_ms + DAEMON_IDLE_MS;
                if (due <= now) {
                        if (c->frame_started_ms && !c->closing) {
                                gs_log_warn("client pid %d: incomplete frame after %d ms; closing",
                                          (int)c->pid, DAEMON_FRAME_DEADLINE_MS);
                                send_error(d, c, -ETIMEDOUT,
                                           "incomplete frame: timed out waiting for the rest");
                                c->closing = true;
                                c->frame_started_ms = 0;
                                c->last_active_ms = now - DAEMON_IDLE_MS + 1000;
                                conn_flush(d, c);
                        } else {
                                conn_close(d, c);
                        }
                        continue;
                }
                if (next < 0 || due < next)
                        next = due;
        }
        /* What a read-only or full state directory kept from the disk
         * (a freed slice's record and files) is tried again. */
        static int64_t retry_at;
        if ((d->node->save_pending || d->node->repair_pending) && now >= retry_at) {
                retry_at = node_retry_locked(d->node) ? now + DAEMON_STATE_RETRY_MS : 0;
        }
        if (retry_at && (next < 0 || retry_at < next))
                next = retry_at;
        int64_t stop_due = slices_stop_tick(d, now); /* a stopped slice's SIGKILL */
        if (stop_due >= 0 && (next < 0 || stop_due < next))
                next = stop_due;
        return next < 0 ? -1 : (int)GS_MAX(next - now, 1);
}

void local_api_shutdown(struct daemon *d)
{
        for (size_t i = 0; i < DAEMON_MAX_CONNS; i++)
                if (d->conns[i])
                        conn_close(d, d->conns[i]);
        if (d->listen.fd >= 0) {
                close(d->listen.fd);
                d->listen.fd = -1;
                unlink(d->socket_path);
        }
}
