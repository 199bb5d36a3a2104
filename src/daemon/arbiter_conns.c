/* SPDX-License-Identifier: Apache-2.0 */
/* Limits on the compute arbiter's shim connections (see
 * arbiter_server_int.h): who may take one of the ARB_MAX_CONNS slots, and
 * the deadlines that cut off a connection that does not speak. Nothing is
 * freed here: a connection refused at the door is closed by the caller
 * (arbsrv_adopt), one cut off later is marked dead and shut down, and its
 * own hang-up event frees it (arbiter_server.c), as when its slice goes. */
#include "arbiter_server_int.h"

#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>

#include "arbiter_server.h"
#include "arbiter_wire.h"
#include "log.h"

struct counts {
        size_t total;           /* slots taken (dead ones too: freed by their event) */
        size_t unverified;      /* live connections that have not said HELLO */
        size_t uid_total, uid_unverified;
        struct arb_conn *oldest; /* the oldest live unverified connection */
};

static void count(const struct arbsrv *srv, uid_t uid, struct counts *n)
{
        *n = (struct counts){ 0 };
        for (size_t i = 0; i < ARB_MAX_CONNS; i++) {
                struct arb_conn *c = srv->conns[i];
                if (!c)
                        continue;
                n->total++;
                if (c->dead)
                        continue;
                if (c->uid == uid)
                        n->uid_total++;
                if (c->hello)
                        continue;
                n->unverified++;
                if (c->uid == uid)
                        n->uid_unverified++;
                if (!n->oldest || c->since_ms < n->oldest->since_ms)
                        n->oldest = c;
        }
}

/* At most one line a second for what a flood repeats (refusals, cut-offs),
 * with the number left out since the last line. */
static void log_limited(pid_t pid, uid_t uid, const char *what, const char *why)
{
        static int64_t last_ms;
        static unsigned quiet;
        int64_t now = node_now_ms();
        if (last_ms && now - last_ms < 1000) {
                quiet++;
                return;
        }
        if (quiet)
                gs_log_warn("compute: shim pid %d uid %u %s: %s (and %u more in the last %lld ms)",
                            (int)pid, (unsigned)uid, what, why, quiet, (long long)(now - last_ms));
        else
                gs_log_warn("compute: shim pid %d uid %u %s: %s", (int)pid, (unsigned)uid, what, why);
        last_ms = now;
        quiet = 0;
}

/* Answer ERROR err and shut the connection down both ways: the peer reads
 * the error, and the hang-up that follows frees the connection. */
static void cut_off(struct arb_conn *c, int err, const char *why)
{
        log_limited(c->pid, c->uid, "closed", why);
        uint8_t buf[GS_ARB_MSG_SIZE];
        struct gs_arb_msg m = { .type = GS_ARB_MSG_ERROR, .value = (uint64_t)err };
        gs_arb_msg_encode(buf, &m);
        (void)!send(c->aw.w.fd, buf, sizeof(buf), MSG_NOSIGNAL | MSG_DONTWAIT);
        shutdown(c->aw.w.fd, SHUT_RDWR);
        c->dead = true;
}

bool arbsrv_pid_in_slice(struct daemon *d, pid_t pid, uid_t uid)
{
        if (!d->arb)
                return false;
        char why[256];
        const struct arb_member *m = arb_member_of_pid(d, pid, why, sizeof(why));
        return m && (m->kind != GS_SLICE_LOCAL || uid == 0 || uid == m->uid);
}

static int refuse(pid_t pid, uid_t uid, const char *why)
{
        log_limited(pid, uid, "refused", why);
        return -EBUSY;
}

int arb_conn_admit(struct daemon *d, pid_t pid, uid_t uid, char *why, size_t why_size)
{
        struct counts n;
        count(d->arb, uid, &n);
        if (n.total >= ARB_MAX_CONNS) {
                snprintf(why, why_size, "too many shim connections (%d open)", ARB_MAX_CONNS);
                return refuse(pid, uid, why);
        }
        if (uid != 0 && n.uid_total >= ARB_MAX_CONNS_PER_UID) {
                snprintf(why, why_size, "uid %u has %zu shim connections open (at most %d per user)",
                         (unsigned)uid, n.uid_total, ARB_MAX_CONNS_PER_UID);
                return refuse(pid, uid, why);
        }
        if (uid != 0 && n.uid_unverified >= ARB_MAX_UNVERIFIED_PER_UID) {
                snprintf(why, why_size,
                         "uid %u has %zu shim connections that have not said HELLO (at most %d)",
                         (unsigned)uid, n.uid_unverified, ARB_MAX_UNVERIFIED_PER_UID);
                return refuse(pid, uid, why);
        }
        if (uid != 0 && n.total >= ARB_MAX_CONNS - ARB_RESERVED_CONNS &&
            !arbsrv_pid_in_slice(d, pid, uid)) {
                snprintf(why, why_size,
                         "the last %d shim connections are kept for root and slices' processes",
                         ARB_RESERVED_CONNS);
                return refuse(pid, uid, why);
        }
        /* A shim says HELLO with its first bytes: the oldest silent
         * connection gives its place to the newcomer. */
        if (n.unverified >= ARB_MAX_UNVERIFIED && n.oldest)
                cut_off(n.oldest, ETIMEDOUT, "no HELLO yet, and too many connections are waiting for one");
        return 0;
}

int arb_conns_tick(void *ctx, int64_t now)
{
        struct daemon *d = ctx;
        struct arbsrv *srv = d->arb;
        int64_t next = -1;
        if (!srv)
                return -1;
        for (size_t i = 0; i < ARB_MAX_CONNS; i++) {
                struct arb_conn *c = srv->conns[i];
                if (!c || c->dead)
                        continue;
                /* A connection after HELLO with no frame begun is a shim
                 * between launches: it may stay as long as its process. */
                int64_t due = !c->hello ? c->since_ms + ARB_HELLO_DEADLINE_MS
                            : c->frame_ms ? c->frame_ms + ARB_FRAME_DEADLINE_MS
                                          : -1;
                if (due < 0)
                        continue;
                if (due <= now) {
                        cut_off(c, ETIMEDOUT, !c->hello ? "no HELLO within 5 s"
                                                        : "an incomplete frame for 5 s");
                        continue;
                }
                if (next < 0 || due < next)
                        next = due;
        }
        return next < 0 ? -1 : (int)GS_MAX(next - now, 1);
}
