/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced's compute arbiter service (see arbiter_server.h): members (one
 * per slice below one GPU) in per-GPU arbiters, their lease pages, the
 * shims' GSAR connections and the timer that drives decisions and
 * heartbeats. Pure policy lives in src/core/arbiter.c; this file is I/O. */
#include "arbiter_server.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "arbiter.h"
#include "atomic_file.h"
#include "compute_policy.h"
#include "node_files.h"
#include "number.h"
#include "arbiter_server_int.h"
#include "arbiter_wire.h"
#include "daemon.h"
#include "lease_page.h"
#include "log.h"

#define ARB_BEAT_NS (50ull * 1000 * 1000)  /* heartbeat period (< GS_ARB_HEARTBEAT_NS) */
#define ARB_SYNC_EVERY 10                  /* beats between ledger syncs */

/* Diagnostic trace (GPUSLICE_ARB_TRACE=FILE): one line per arbiter event
 * with CLOCK_MONOTONIC ns, for tuning (bench/compute/compute_bench.py
 * --trace). Off (NULL) normally. */
static FILE *trace_f;

__attribute__((format(printf, 2, 3))) static void trace(uint64_t now, const char *fmt, ...)
{
        if (!trace_f)
                return;
        va_list ap;
        va_start(ap, fmt);
        fprintf(trace_f, "%" PRIu64 " ", now);
        vfprintf(trace_f, fmt, ap);
        fputc('\n', trace_f);
        va_end(ap);
}

static void on_event(struct node_watch *w, uint32_t events);

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool arbsrv_is_gsar(const uint8_t *buf, size_t len)
{
        return len >= 4 && memcmp(buf, "GSAR", 4) == 0;
}

/* ---- members ---- */

static struct arb_member *member_find(const struct arbsrv *srv, const char *id)
{
        for (size_t i = 0; i < srv->n_members; i++)
                if (strcmp(srv->members[i]->id, id) == 0)
                        return srv->members[i];
        return NULL;
}

static bool holds(const struct arb_gpu *g, const struct arb_member *m)
{
        return g->a.holder == m->slot && g->a.state != GS_ARB_IDLE;
}

static void page_show(struct arbsrv *srv, struct arb_member *m, uint64_t gen, uint64_t start,
                      uint64_t until)
{
        if (m->w_gen == gen && m->w_start == start && m->w_until == until)
                return;
        m->w_gen = gen;
        m->w_start = start;
        m->w_until = until;
        trace(now_ns(), "page %s gen %" PRIu64 " start %" PRIu64 " until %" PRIu64, m->id, gen,
              start, until);
        lease_page_write(&m->page, gen ? srv->gen_base + gen : 0, start, until);
}

/* Decide who holds GPU g at `now` and show it on the pages. */
static void decide(struct arbsrv *srv, struct arb_gpu *g, uint64_t now)
{
        struct gs_arb_decision dec;
        gs_arbiter_next(&g->a, now, &dec);
        g->wake_at = dec.wake_at;
        if (trace_f && (dec.new_grant || dec.state != GS_ARB_GRANTED))
                trace(now, "decide state %d slot %d gen %" PRIu64 " start %" PRIu64
                      " until %" PRIu64 " wake %" PRIu64, (int)dec.state, dec.slot, dec.gen,
                      dec.grant_start, dec.grant_until, dec.wake_at);
        struct arb_member *h = dec.slot >= 0 ? g->slot[dec.slot] : NULL;
        if (dec.state == GS_ARB_GRANTED && h) {
                if (!h->hold_open || h->hold_gen != dec.gen) {
                        /* A new hold: every process pending now owes a DONE. */
                        h->hold_open = true;
                        h->hold_lost = false;
                        h->hold_gen = dec.gen;
                        h->hold_busy = 0;
                        for (size_t i = 0; i < ARB_MAX_CONNS; i++) {
                                struct arb_conn *c = srv->conns[i];
                                if (c && c->m == h)
                                        c->owes = c->pending;
                        }
                        gs_log_debug("compute: slice %s granted gen %" PRIu64 " for %" PRIu64 " us",
                                   h->id, dec.gen, (dec.grant_until - dec.grant_start) / 1000);
                }
                page_show(srv, h, dec.gen, dec.grant_start, dec.grant_until);
        }
        /* A holder whose lease was cut and ended at once (state DRAINING:
         * a slice with the better claim woke) must see the cut now, or it
         * keeps launching to the end of the lease it was shown. */
        if (dec.state == GS_ARB_DRAINING && h && h->w_gen == dec.gen) {
                uint64_t end = GS_MAX(dec.grant_until, now);
                if (h->w_until > end)
                        page_show(srv, h, h->w_gen, GS_MIN(h->w_start, end), end);
        }
        /* Nobody else may show a lease beyond the holder's start. */
        uint64_t bound = dec.state == GS_ARB_GRANTED ? GS_MAX(dec.grant_start, now) : now;
        for (int i = 0; i < GS_ARB_MAX_SLICES; i++) {
                struct arb_member *m = g->slot[i];
                if (m && m != h && m->w_until > bound)
                        page_show(srv, m, m->w_gen, GS_MIN(m->w_start, bound), bound);
        }
}

/* The slice is pending when any of its processes is. */
static void sync_pending(struct arbsrv *srv, struct arb_member *m, uint64_t now)
{
        bool any = false;
        for (size_t i = 0; i < ARB_MAX_CONNS && !any; i++)
                any = srv->conns[i] && srv->conns[i]->m == m && srv->conns[i]->pending;
        struct arb_gpu *g = &srv->gpus[m->gpu];
        bool was = g->a.s[m->slot].pending;
        if (any && !was)
                gs_arbiter_want(&g->a, m->slot, now);
        else if (!any && was && !holds(g, m))
                gs_arbiter_idle(&g->a, m->slot, now);
}

/* Settle the open hold once no process owes a DONE any more. */
static void hold_try_settle(struct arbsrv *srv, struct arb_member *m, uint64_t now)
{
        if (!m->hold_open)
                return;
        bool any = false;
        for (size_t i = 0; i < ARB_MAX_CONNS; i++) {
                struct arb_conn *c = srv->conns[i];
                if (c && c->m == m && c->owes)
                        return;
                any = any || (c && c->m == m && c->pending);
        }
        /* A process that died owing its report is charged the wall time
         * of the hold (the arbiter clamps to it). */
        uint64_t busy = m->hold_lost ? GS_ARB_MAX_BUSY_NS : m->hold_busy;
        int r = gs_arbiter_done(&srv->gpus[m->gpu].a, m->slot, m->hold_gen, busy, any, now);
        trace(now, "settle %s gen %" PRIu64 " busy %" PRIu64 " pending %d r %d", m->id, m->hold_gen,
              busy, any, r);
        gs_log_debug("compute: slice %s hold %" PRIu64 " over: busy %" PRIu64 " us%s%s", m->id,
                   m->hold_gen, m->hold_busy / 1000, m->hold_lost ? " (a process hung up)" : "",
                   r == -ESTALE ? " (stale)" : "");
        m->hold_open = false;
}

/* Join s to its GPU's arbiter and open its page. `quiet`: a retry from the
 * ledger sync, logged at debug level only (no warning every half second). */
static void member_add(struct daemon *d, const struct gs_slice *s, uint64_t now, bool quiet)
{
        enum gs_log_level lvl = quiet ? GS_LOG_DEBUG : GS_LOG_WARN;
        struct arbsrv *srv = d->arb;
        if (gs_slice_is_whole(s) || s->n_gpus != 1 || member_find(srv, s->id))
                return;
        unsigned gpu;
        for (gpu = 0; gpu < d->node->inv.n_gpus; gpu++)
                if (strcmp(d->node->inv.gpus[gpu].uuid, s->gpus[0].uuid) == 0)
                        break;
        if (gpu == d->node->inv.n_gpus || gpu >= srv->n_gpus || srv->n_members >= GS_LEDGER_MAX_SLICES) {
                gs_log(lvl, "compute: slice %s: its GPU %s is not in the inventory; its shim "
                          "enforces its share alone", s->id, s->gpus[0].uuid);
                return;
        }
        struct arb_gpu *g = &srv->gpus[gpu];
        int slot = gs_arbiter_slice_join(&g->a, s->milli, s->policy, now);
        if (slot < 0) {
                gs_log(lvl, "compute: slice %s cannot join GPU %u's arbiter (%s, %d slices at "
                          "most); its shim enforces its share alone", s->id, d->node->inv.gpus[gpu].index,
                          strerror(-slot), GS_ARB_MAX_SLICES);
                return;
        }
        struct arb_member *m = calloc(1, sizeof(*m));
        char dir[DAEMON_PATH_MAX];
        /* The page lives in the daemon's page directory, never in the
         * tenant's slice directory (docs/internals/trust.md). */
        node_page_dir_path(d->node, s->id, dir, sizeof(dir));
        int r = m ? lease_page_open(&m->page, dir, s->id, s->milli, s->policy, g->a.p.quantum_ns,
                                    srv->epoch, now)
                  : -ENOMEM;
        if (r < 0) {
                gs_log(lvl, "compute: slice %s: cannot create its lease page in %s: %s; its shim "
                          "enforces its share alone", s->id, dir, strerror(-r));
                gs_arbiter_slice_leave(&g->a, slot, now);
                free(m);
                return;
        }
        snprintf(m->id, sizeof(m->id), "%s", s->id);
        m->kind = s->kind;
        m->gpu = gpu;
        m->slot = slot;
        m->pid = s->pid;
        m->uid = s->uid;
        if (gs_slice_in_container(s)) {
                node_slice_dir_path(d->node, s->id, dir, sizeof(dir));
                arb_member_learn_dir(m, dir);
        }
        m->milli = s->milli;
        m->policy = s->policy;
        m->seen = true;
        g->slot[slot] = m;
        srv->members[srv->n_members++] = m;
        arb_windows_assign(g);
        gs_log_debug("compute: slice %s joined GPU %u's arbiter (%" PRIu32 "m, %s)", m->id,
                   d->node->inv.gpus[gpu].index, m->milli, gs_compute_policy_name(m->policy));
}

static void member_remove(struct arbsrv *srv, struct arb_member *m, uint64_t now)
{
        struct arb_gpu *g = &srv->gpus[m->gpu];
        bool held = holds(g, m);
        gs_arbiter_slice_leave(&g->a, m->slot, now);
        g->slot[m->slot] = NULL;
        arb_windows_assign(g);
        for (size_t i = 0; i < ARB_MAX_CONNS; i++) {
                struct arb_conn *c = srv->conns[i];
                if (c && c->m == m) {
                        /* Freed by its own event (the hang-up that follows). */
                        c->m = NULL;
                        c->dead = true;
                        shutdown(c->aw.w.fd, SHUT_RDWR);
                }
        }
        lease_page_write(&m->page, m->w_gen ? srv->gen_base + m->w_gen : 0, 0, 0);
        lease_page_close(&m->page);
        for (size_t i = 0; i < srv->n_members; i++)
                if (srv->members[i] == m) {
                        srv->members[i] = srv->members[--srv->n_members];
                        break;
                }
        gs_log_debug("compute: slice %s left its arbiter%s", m->id, held ? " (it held the GPU)" : "");
        free(m);
        decide(srv, g, now);
}

/* Follow the ledger: slices the kubelet plugin made or freed, and changes
 * of share or policy. */
static void ledger_sync(struct daemon *d, uint64_t now)
{
        struct arbsrv *srv = d->arb;
        for (size_t i = 0; i < srv->n_members; i++)
                srv->members[i]->seen = false;
        for (size_t i = 0; i < d->node->ledger.n_slices; i++) {
                const struct gs_slice *s = &d->node->ledger.slices[i];
                struct arb_member *m = member_find(srv, s->id);
                if (!m) {
                        member_add(d, s, now, true);
                        continue;
                }
                m->seen = true;
                if (m->milli != s->milli || m->policy != s->policy) {
                        struct arb_gpu *g = &srv->gpus[m->gpu];
                        if (gs_arbiter_slice_update(&g->a, m->slot, s->milli, s->policy, now) == 0) {
                                m->milli = s->milli;
                                m->policy = s->policy;
                                lease_page_identity(&m->page, m->milli, m->policy);
                                arb_windows_assign(g);
                        }
                }
        }
        for (size_t i = 0; i < srv->n_members;) {
                if (!srv->members[i]->seen)
                        member_remove(srv, srv->members[i], now);
                else
                        i++;
        }
}

/* ---- the timer ---- */

static void reschedule(struct arbsrv *srv)
{
        uint64_t t = srv->next_beat;
        for (unsigned i = 0; i < srv->n_gpus; i++)
                t = GS_MIN(t, srv->gpus[i].wake_at);
        if (!t)
                t = 1; /* 0 would disarm */
        struct itimerspec its = { .it_value = { .tv_sec = (time_t)(t / 1000000000ull),
                                                .tv_nsec = (long)(t % 1000000000ull) } };
        if (timerfd_settime(srv->timer.w.fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
                gs_log_error("compute: timerfd_settime: %m");
}

static void beat(struct daemon *d, uint64_t now)
{
        struct arbsrv *srv = d->arb;
        if (++srv->beats % ARB_SYNC_EVERY == 0)
                ledger_sync(d, now);
        for (size_t i = 0; i < srv->n_members; i++) {
                struct arb_member *m = srv->members[i];
                lease_page_beat(&m->page, now);
                m->s_t[m->s_pos] = now;
                m->s_c[m->s_pos] = srv->gpus[m->gpu].a.s[m->slot].charged_ns;
                m->s_w[m->s_pos] = gs_arbiter_wait_ns(&srv->gpus[m->gpu].a, m->slot, now);
                m->s_pos = (m->s_pos + 1) % ARB_SAMPLES;
                if (m->s_n < ARB_SAMPLES)
                        m->s_n++;
        }
        srv->next_beat = now + ARB_BEAT_NS;
}

static void on_timer(struct daemon *d)
{
        struct arbsrv *srv = d->arb;
        uint64_t ticks;
        (void)!read(srv->timer.w.fd, &ticks, sizeof(ticks));
        uint64_t now = now_ns();
        for (unsigned i = 0; i < srv->n_gpus; i++)
                if (srv->gpus[i].wake_at <= now)
                        decide(srv, &srv->gpus[i], now);
        if (now >= srv->next_beat)
                beat(d, now);
}

/* ---- connections ---- */

static void conn_free(struct arbsrv *srv, struct arb_conn *c, struct node_loop *loop)
{
        for (size_t i = 0; i < ARB_MAX_CONNS; i++)
                if (srv->conns[i] == c)
                        srv->conns[i] = NULL;
        node_loop_unwatch(loop, &c->aw.w);
        close(c->aw.w.fd);
        free(c);
}

static void send_msg(int fd, enum gs_arb_msg_type type, uint64_t gen, uint64_t value)
{
        uint8_t buf[GS_ARB_MSG_SIZE];
        struct gs_arb_msg m = { .type = type, .gen = gen, .value = value };
        gs_arb_msg_encode(buf, &m);
        (void)!send(fd, buf, sizeof(buf), MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Answer ERROR and hang up (the caller frees the connection). */
static void conn_refuse(struct arb_conn *c, int err, const char *why)
{
        gs_log_warn("compute: shim pid %d: %s; closing", (int)c->pid, why);
        send_msg(c->aw.w.fd, GS_ARB_MSG_ERROR, 0, (uint64_t)err);
        /* Read what is queued, so the close does not reset the peer
         * before it reads the error. */
        uint8_t junk[256];
        for (int i = 0; i < 64 && recv(c->aw.w.fd, junk, sizeof(junk), MSG_DONTWAIT) > 0; i++)
                ;
        shutdown(c->aw.w.fd, SHUT_WR);
        c->dead = true;
}

static void on_hello(struct daemon *d, struct arb_conn *c, const struct gs_arb_msg *msg)
{
        struct arbsrv *srv = d->arb;
        if (c->hello)
                return conn_refuse(c, EPROTO, "a second HELLO");
        if (msg->value != GS_ARB_PROTO_VERSION)
                return conn_refuse(c, EPROTONOSUPPORT, "unsupported protocol version");
        char why[256];
        struct arb_member *m = arb_member_of_pid(d, c->pid, why, sizeof(why));
        if (!m)
                return conn_refuse(c, EPERM, why);
        /* A local slice's processes run as its owner (root may join any).
         * A Kubernetes container runs as whatever uid its image says, so a
         * uid proves nothing there and must not refuse it: the mount
         * identity member_of_pid matched is the proof. */
        if (m->kind == GS_SLICE_LOCAL && c->uid != 0 && c->uid != m->uid)
                return conn_refuse(c, EPERM, "the process's uid is not its slice's");
        c->m = m;
        c->hello = true;
        send_msg(c->aw.w.fd, GS_ARB_MSG_WELCOME, 0, srv->epoch);
        gs_log_debug("compute: shim pid %d of slice %s connected", (int)c->pid, m->id);
}

static void on_msg(struct daemon *d, struct arb_conn *c, const struct gs_arb_msg *msg, uint64_t now)
{
        struct arbsrv *srv = d->arb;
        if (msg->type == GS_ARB_MSG_HELLO)
                return on_hello(d, c, msg);
        if (!c->hello)
                return conn_refuse(c, EPROTO, "a frame before HELLO");
        struct arb_member *m = c->m;
        if (!m)
                return conn_refuse(c, ENOENT, "its slice was freed");
        trace(now, "msg %s pid %d type %u gen %" PRIu64 " value %" PRIu64 " flags %u", m->id,
              (int)c->pid, (unsigned)msg->type, msg->gen, msg->value, (unsigned)msg->flags);
        switch (msg->type) {
        case GS_ARB_MSG_WANT:
                /* Also when the slice counts as pending already: a process
                 * waiting for a lease claims the GPU back from a lender. */
                c->pending = true;
                gs_arbiter_want(&srv->gpus[m->gpu].a, m->slot, now);
                break;
        case GS_ARB_MSG_IDLE:
                c->pending = false;
                break;
        case GS_ARB_MSG_DONE: {
                uint64_t gen = msg->gen > srv->gen_base ? msg->gen - srv->gen_base : 0;
                c->pending = msg->flags & GS_ARB_F_PENDING;
                if (m->hold_open && gen == m->hold_gen) {
                        m->hold_busy = GS_MIN(m->hold_busy + msg->value, GS_ARB_MAX_BUSY_NS);
                        c->owes = false;
                        hold_try_settle(srv, m, now);
                }
                break;
        }
        default:
                return conn_refuse(c, EBADMSG, "a frame only the daemon sends");
        }
        sync_pending(srv, m, now);
        decide(srv, &srv->gpus[m->gpu], now);
}

/* The connection is going away: a process that owed a DONE is settled as
 * lost, so a dead holder frees the GPU now. */
static void conn_lost(struct arbsrv *srv, struct arb_conn *c, uint64_t now)
{
        struct arb_member *m = c->m;
        if (!m)
                return;
        if (c->owes)
                m->hold_lost = true;
        c->owes = c->pending = false;
        c->m = NULL;
        hold_try_settle(srv, m, now);
        sync_pending(srv, m, now);
        decide(srv, &srv->gpus[m->gpu], now);
}

static void conn_readable(struct daemon *d, struct arb_conn *c)
{
        struct arbsrv *srv = d->arb;
        uint64_t now = now_ns();
        for (int rounds = 0; rounds < 64 && !c->dead; rounds++) {
                ssize_t n = recv(c->aw.w.fd, c->in + c->in_len, sizeof(c->in) - c->in_len,
                                 MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return;
                if (n <= 0) {
                        c->dead = true;
                        break;
                }
                c->in_len += (size_t)n;
                if (c->in_len < sizeof(c->in)) {
                        if (!c->frame_ms)
                                c->frame_ms = node_now_ms(); /* arb_conns_tick's deadline */
                        continue;
                }
                struct gs_arb_msg msg;
                int r = gs_arb_msg_decode(c->in, c->in_len, &msg);
                c->in_len = 0;
                c->frame_ms = 0;
                if (r < 0) {
                        conn_refuse(c, -r, "malformed frame");
                        break;
                }
                on_msg(d, c, &msg, now);
        }
        if (c->dead) {
                conn_lost(srv, c, now);
                conn_free(srv, c, &d->loop);
        }
}

void arbsrv_adopt(struct daemon *d, int fd, pid_t pid, uid_t uid, const uint8_t *buf, size_t len)
{
        struct arbsrv *srv = d->arb;
        char why[160] = "no arbiter";
        size_t slot = ARB_MAX_CONNS;
        if (srv && arb_conn_admit(d, pid, uid, why, sizeof(why)) == 0)
                for (slot = 0; slot < ARB_MAX_CONNS && srv->conns[slot]; slot++)
                        ;
        struct arb_conn *c = slot < ARB_MAX_CONNS ? calloc(1, sizeof(*c)) : NULL;
        if (!c) {
                if (!srv || slot < ARB_MAX_CONNS) /* arb_conn_admit logs its own refusals */
                        gs_log_warn("compute: shim pid %d refused: %s", (int)pid,
                                    srv ? "out of memory" : why);
                send_msg(fd, GS_ARB_MSG_ERROR, 0, srv ? EBUSY : ENOTSUP);
                close(fd);
                return;
        }
        c->aw = (struct arb_watch){ .w = { .fd = fd, .fn = on_event, .ctx = d }, .sub = ARB_CONN };
        c->pid = pid;
        c->uid = uid;
        c->since_ms = node_now_ms();
        if (node_loop_watch(&d->loop, &c->aw.w, EPOLLIN | EPOLLRDHUP) < 0) {
                close(fd);
                free(c);
                return;
        }
        srv->conns[slot] = c;
        /* Frames already read, then whatever else is queued. */
        uint64_t now = now_ns();
        while (len && !c->dead) {
                size_t k = GS_MIN(len, sizeof(c->in) - c->in_len);
                memcpy(c->in + c->in_len, buf, k);
                c->in_len += k;
                buf += k;
                len -= k;
                if (c->in_len < sizeof(c->in))
                        break;
                struct gs_arb_msg msg;
                int r = gs_arb_msg_decode(c->in, c->in_len, &msg);
                c->in_len = 0;
                if (r < 0)
                        conn_refuse(c, -r, "malformed frame");
                else
                        on_msg(d, c, &msg, now);
        }
        if (c->in_len)
                c->frame_ms = c->since_ms;
        if (c->dead) {
                conn_lost(srv, c, now);
                conn_free(srv, c, &d->loop);
        } else {
                conn_readable(d, c);
        }
        reschedule(srv);
}

static void on_event(struct node_watch *w, uint32_t events)
{
        struct daemon *d = w->ctx;
        struct arb_watch *aw = (struct arb_watch *)w;
        (void)events;
        if (!d->arb)
                return;
        if (aw->sub == ARB_TIMER)
                on_timer(d);
        else
                conn_readable(d, (struct arb_conn *)aw);
        reschedule(d->arb);
}

/* ---- slices ---- */

void arbsrv_slice_added(struct daemon *d, const struct gs_slice *s)
{
        if (!d->arb)
                return;
        uint64_t now = now_ns();
        member_add(d, s, now, false);
        reschedule(d->arb);
}

void arbsrv_slice_removed(struct daemon *d, const char *id)
{
        if (!d->arb)
                return;
        struct arb_member *m = member_find(d->arb, id);
        if (m) {
                member_remove(d->arb, m, now_ns());
                reschedule(d->arb);
        }
}

/* How much counter c (samples of m, one per beat) grew over the last
 * second of samples, per wall time, in milli; -1 before two samples. */
static int per_second_milli(const struct arb_member *m, const uint64_t *c)
{
        if (m->s_n < 2)
                return -1;
        unsigned newest = (m->s_pos + ARB_SAMPLES - 1) % ARB_SAMPLES;
        unsigned oldest = m->s_n < ARB_SAMPLES ? 0 : m->s_pos;
        uint64_t dt = m->s_t[newest] - m->s_t[oldest];
        uint64_t dc = c[newest] > c[oldest] ? c[newest] - c[oldest] : 0;
        if (!dt)
                return -1;
        return (int)GS_MIN(dc * 1000u / dt, 1000u);
}

/* m's measured share of its GPU over the last second, in milli. */
static int measured_milli(const struct arb_member *m)
{
        return per_second_milli(m, m->s_c);
}

/* The part of the last second m waited for a lease, in milli. */
static int wait_milli(const struct arb_member *m)
{
        return per_second_milli(m, m->s_w);
}

static uint64_t wait_total(const struct arbsrv *srv, const struct arb_member *m)
{
        return gs_arbiter_wait_ns(&srv->gpus[m->gpu].a, m->slot, now_ns());
}

void arbsrv_add_record(const struct daemon *d, const char *id, struct gs_proto_builder *b)
{
        const struct arb_member *m = d->arb ? member_find(d->arb, id) : NULL;
        if (!m)
                return;
        int milli = measured_milli(m), wait = wait_milli(m);
        if (milli >= 0)
                gs_proto_builder_add(b, "slice_gpu_time", "%d", milli);
        if (wait >= 0)
                gs_proto_builder_add(b, "slice_gate_wait", "%d", wait);
        gs_proto_builder_add(b, "slice_gate_wait_ns", "%" PRIu64, wait_total(d->arb, m));
}

bool arbsrv_slice_stats(const struct daemon *d, const char *id, struct arbsrv_stats *ret)
{
        const struct arb_member *m = d->arb ? member_find(d->arb, id) : NULL;
        if (!m)
                return false;
        const struct gs_arb_slice *as = &d->arb->gpus[m->gpu].a.s[m->slot];
        *ret = (struct arbsrv_stats){ .charged_ns = as->charged_ns,
                                      .leases = as->grants,
                                      .wait_ns = wait_total(d->arb, m),
                                      .measured_milli = measured_milli(m),
                                      .wait_milli = wait_milli(m) };
        return true;
}

/* ---- start and stop ---- */

/* The previous epoch + 1, persisted in <state_dir>/arbiter.epoch. */
static uint64_t next_epoch(const struct daemon *d)
{
        char path[DAEMON_PATH_MAX], buf[32];
        snprintf(path, sizeof(path), "%s/arbiter.epoch", d->state_dir);
        uint64_t epoch = 0;
        char *text = NULL;
        size_t len = 0;
        if (gs_file_read(path, 64, &text, &len, NULL) == 0) {
                if (len && text[len - 1] == '\n')
                        text[--len] = '\0';
                if (gs_u64_parse(text, len, (1ull << 23) - 1, &epoch) < 0)
                        epoch = 0;
                free(text);
        }
        epoch = epoch + 1; /* a missing file: 1 (no slice survives a lost state dir) */
        int n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", epoch);
        struct gs_error *err = NULL;
        if (gs_file_replace(path, buf, (size_t)n, 0644, &err) < 0)
                gs_log_warn("compute: %s", gs_error_msg(err));
        gs_error_free(err);
        return epoch;
}

int arbsrv_init(struct daemon *d)
{
        struct arbsrv *srv = calloc(1, sizeof(*srv));
        if (!srv || !(srv->gpus = calloc(GS_MAX(d->node->inv.n_gpus, 1u), sizeof(*srv->gpus)))) {
                free(srv);
                gs_log_error("compute: out of memory");
                return -ENOMEM;
        }
        srv->n_gpus = d->node->inv.n_gpus;
        for (unsigned i = 0; i < srv->n_gpus; i++) {
                gs_arbiter_init(&srv->gpus[i].a, NULL);
                srv->gpus[i].wake_at = GS_ARB_NEVER;
        }
        srv->epoch = next_epoch(d);
        /* Lease generations grow across restarts: the epoch is their top. */
        srv->gen_base = srv->epoch << 40;
        int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        srv->timer = (struct arb_watch){ .w = { .fd = fd, .fn = on_event, .ctx = d },
                                         .sub = ARB_TIMER };
        int r = fd < 0 ? -errno : node_loop_watch(&d->loop, &srv->timer.w, EPOLLIN);
        if (r < 0) {
                gs_log_error("compute: cannot set up the arbiter's timer: %s", strerror(-r));
                if (fd >= 0)
                        close(fd);
                free(srv->gpus);
                free(srv);
                return r;
        }
        r = node_loop_add_tick(&d->loop, arb_conns_tick, d);
        if (r < 0) {
                gs_log_error("compute: cannot add the connections' deadlines: %s", strerror(-r));
                node_loop_unwatch(&d->loop, &srv->timer.w);
                close(fd);
                free(srv->gpus);
                free(srv);
                return r;
        }
        d->arb = srv;
        const char *tp = getenv("GPUSLICE_ARB_TRACE");
        if (tp && *tp && !trace_f)
                trace_f = fopen(tp, "we");
        uint64_t now = now_ns();
        for (size_t i = 0; i < d->node->ledger.n_slices; i++)
                member_add(d, &d->node->ledger.slices[i], now, false);
        srv->next_beat = now + ARB_BEAT_NS;
        reschedule(srv);
        gs_log_info("compute arbiter: epoch %" PRIu64 ", %zu slice%s on %u GPU%s, default policy %s",
                  srv->epoch, srv->n_members, srv->n_members == 1 ? "" : "s", srv->n_gpus,
                  srv->n_gpus == 1 ? "" : "s", gs_compute_policy_name(d->compute_policy));
        return 0;
}

void arbsrv_done(struct daemon *d)
{
        struct arbsrv *srv = d->arb;
        if (!srv)
                return;
        for (size_t i = 0; i < ARB_MAX_CONNS; i++)
                if (srv->conns[i])
                        conn_free(srv, srv->conns[i], &d->loop);
        for (size_t i = 0; i < srv->n_members; i++) {
                struct arb_member *m = srv->members[i];
                lease_page_write(&m->page, m->w_gen ? srv->gen_base + m->w_gen : 0, 0, 0);
                lease_page_close(&m->page);
                free(m);
        }
        node_loop_unwatch(&d->loop, &srv->timer.w);
        close(srv->timer.w.fd);
        if (trace_f)
                fclose(trace_f);
        trace_f = NULL;
        free(srv->gpus);
        free(srv);
        d->arb = NULL;
}
