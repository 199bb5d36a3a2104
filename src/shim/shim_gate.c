/* SPDX-License-Identifier: Apache-2.0 */
/* The launch gate: fast path, waiting for a lease, switching between the
 * daemon's leases and local enforcement, and the background thread. See
 * shim_gate.h for the model and docs/internals/compute-arbiter.md for the
 * protocol. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "compute_policy.h"
#include "shim.h"
#include "shim_gate.h"

#define SRC_LOCAL 1
#define SRC_DAEMON 2
#define SRC_WINDOW 3
/* A hold is named by its lease generation and where the lease came from. */
#define KEY(gen, src) (((gen) << 2) | (uint64_t)(src))

#define MS (1000ull * 1000)
#define US 1000ull
#define WAIT_SLICE_NS (20 * MS)        /* longest single futex wait */
#define RENEW_LEAD_NS (300 * US)       /* local: decide a renewal this early */
#define CLOSE_GRACE_NS (200 * US)      /* daemon: a renewal may land this late */
#define UNIT_MIN_NS (1 * US)
/* A thread may queue a unit this much beyond GS_ARB_AHEAD_NS, so that the
 * next unit goes in before the running one ends (a thread wakes up late by
 * tens of microseconds; without it a queue of one ~1 ms unit runs dry). */
#define AHEAD_SLACK_NS (250 * US)
#define UNIT_MAX_NS (1000 * MS)
/* While it holds a daemon lease, the background thread looks this often
 * whether the hold's streams are empty (a request/response program
 * synchronised). Empty at two looks this far apart with no launch between
 * them, it ends the hold at once, so the hold is charged its real busy
 * span (plus at most two looks) and the GPU goes to the next slice, not a
 * lease's worth of idle time charged to a serving slice. One empty look is
 * not enough: a saturating thread whose queue holds one long unit (the
 * gate's bound) leaves its stream empty for the tens of microseconds it
 * takes to launch the next one. */
#define EARLY_POLL_NS (250 * US)
#define UNUSED_POLL_NS (500 * US)
/* Local enforcement, the daemon reconnected: how often a thread waiting
 * for its outage window looks for the daemon's lease. */
#define LINKED_POLL_NS (500 * US)

bool shim_gate_on;
struct shim_gate_cu shim_gate_cu;

/* The gate's state as the library is loaded, and as a fork child starts
 * (gate_state_reset). Only what is not zero is named. */
#define GATE_STATE_FRESH                                                       \
        {                                                                      \
                .unit_ns = GS_ARB_AHEAD_NS,                                    \
                .src_local = { .id = SRC_LOCAL },                              \
                .src_daemon = { .id = SRC_DAEMON },                            \
                .src_window = { .id = SRC_WINDOW },                            \
                .want_gen = UINT64_MAX,                                        \
                /* re-made monotonic at start */                               \
                .bg_cv = PTHREAD_COND_INITIALIZER,                             \
                .hold = { .mu = PTHREAD_MUTEX_INITIALIZER,                     \
                          .drain_cv = PTHREAD_COND_INITIALIZER },              \
                .link = { .mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1 },         \
        }

struct shim_gate_state shim_gs = GATE_STATE_FRESH;

/* Initial-exec TLS as shim_depth (a dlopen takes glibc's static TLS surplus). */
__thread struct shim_gate_tls shim_gate_t __attribute__((tls_model("initial-exec")));
_Static_assert(GS_ARB_AHEAD_NS + AHEAD_SLACK_NS == SHIM_GATE_AHEAD_NS, "shim_gate_fast's bound");

/* shim_gate_lease_read, and the seqlock word it read the lease under. */
static bool lease_read_seq(struct gs_arb_page *p, struct shim_lease *ret, uint64_t *ret_seq)
{
        for (int i = 0; i < 64; i++) {
                uint64_t s1 = atomic_load_explicit(&p->seq, memory_order_acquire);
                if (s1 & 1)
                        continue;
                ret->gen = atomic_load_explicit(&p->gen, memory_order_acquire);
                ret->start = atomic_load_explicit(&p->start_ns, memory_order_acquire);
                ret->until = atomic_load_explicit(&p->until_ns, memory_order_acquire);
                if (atomic_load_explicit(&p->seq, memory_order_acquire) == s1) {
                        *ret_seq = s1;
                        return true;
                }
        }
        return false;
}

bool shim_gate_lease_read(struct gs_arb_page *p, struct shim_lease *ret)
{
        uint64_t seq;
        return lease_read_seq(p, ret, &seq);
}

/* ---- set-up ---- */

void shim_gate_setup(const struct gs_slice_conf *c)
{
        shim_gs.conf = c;
        shim_gate_on = c->compute_milli < 1000;
        if (shim_gate_on)
                shim_log("slice %s: compute share %u milli (%s)", c->slice, c->compute_milli,
                         gs_compute_policy_name(c->policy));
}

/* Where leases come from without the daemon: the outage window it gave,
 * else the local arbiter. */
static struct shim_src *local_src(void)
{
        return atomic_load(&shim_gs.window) ? &shim_gs.src_window : &shim_gs.src_local;
}

static bool is_local(const struct shim_src *s)
{
        return s == &shim_gs.src_local || s == &shim_gs.src_window;
}

static void go_local(const char *why)
{
        struct shim_src *s = atomic_load_explicit(&shim_gs.cur_src, memory_order_acquire);
        if (is_local(s))
                return;
        struct shim_src *to = local_src();
        atomic_store_explicit(&shim_gs.cur_src, to, memory_order_release);
        shim_daemon_close();
        if (to == &shim_gs.src_window)
                shim_log("compute: %s: local enforcement in the outage window (%u milli of every "
                         "%llu ms); retrying the daemon every %llu ms",
                         why, GS_ARB_WINDOW_LEN(atomic_load(&shim_gs.window)),
                         (unsigned long long)(GS_ARB_WINDOW_PERIOD_NS / MS),
                         (unsigned long long)(GS_ARB_RECONNECT_NS / MS));
        else
                shim_log("compute: %s: local enforcement (cap at %u milli); retrying the daemon every %llu ms",
                         why, shim_gs.conf->compute_milli, (unsigned long long)(GS_ARB_RECONNECT_NS / MS));
}

/* Daemon linked and its page shows a live lease: leave local enforcement. */
static bool try_daemon_lease(uint64_t now)
{
        struct gs_arb_page *p = shim_daemon_page();
        struct shim_lease l;
        if (!p || !shim_gate_lease_read(p, &l) || now >= l.until || !shim_daemon_healthy(now))
                return false;
        shim_gs.src_daemon.page = p;
        shim_gs.src_daemon.epoch = shim_daemon_epoch();
        shim_window_learn(p);
        struct shim_src *s = atomic_load_explicit(&shim_gs.cur_src, memory_order_acquire);
        if (s != &shim_gs.src_daemon) {
                atomic_store_explicit(&shim_gs.cur_src, &shim_gs.src_daemon, memory_order_release);
                shim_log("compute: the daemon grants leases again: leaving local enforcement");
        }
        return true;
}

static void *bg_main(void *arg);

/* First gated launch of the process (or of a fork child). Hold lock held. */
static void start_locked(void)
{
        if (shim_gs.started)
                return;
        shim_gs.started = true;
        const struct gs_slice_conf *conf = shim_gs.conf;
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&shim_gs.bg_cv, &ca);
        pthread_condattr_destroy(&ca);
        if (!shim_gate_cu.event_record)
                shim_gate_resolve_cu();
        shim_clock_start();
        /* Never fails: compute.local unusable, the arbiter runs privately. */
        shim_local_attach(conf);
        shim_gs.src_local.page = shim_local_page();
        shim_gs.src_window.page = shim_window_page();
        atomic_store_explicit(&shim_gs.cur_src, local_src(), memory_order_release);
        if (!conf->daemon_socket[0]) {
                shim_log("compute: no daemon_socket: local enforcement (cap at %u milli)",
                         conf->compute_milli);
        } else {
                int r = shim_daemon_connect(conf);
                if (r == 0) {
                        shim_gs.src_daemon.page = shim_daemon_page();
                        shim_gs.src_daemon.epoch = shim_daemon_epoch();
                        shim_window_learn(shim_gs.src_daemon.page);
                        atomic_store_explicit(&shim_gs.cur_src, &shim_gs.src_daemon,
                                              memory_order_release);
                        shim_log("compute: leases from gpusliced (%s)", conf->daemon_socket);
                } else {
                        shim_log("compute: daemon %s unreachable (%s): local enforcement (cap at %u milli)",
                                 conf->daemon_socket, strerror(-r), conf->compute_milli);
                }
        }
        /* The thread must not take the host's signals. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_t th;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&a, 256 * 1024);
        if (pthread_create(&th, &a, bg_main, NULL) == 0)
                shim_gs.bg_running = true;
        else
                shim_log("compute: cannot start the gate thread: holds are reported by launching threads");
        pthread_attr_destroy(&a);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---- holds ---- */

static void close_hold_at(bool at_mark)
{
        if (!shim_gs.hold_key)
                return;
        uint64_t n = atomic_exchange_explicit(&shim_gs.launches, 0, memory_order_relaxed);
        shim_hold_close(shim_gs.hold_key, shim_gs.hold_gen, shim_gs.hold_src, n, at_mark);
        if (shim_gs.hold_src == SRC_DAEMON)
                atomic_store_explicit(&shim_gs.closed_key, shim_gs.hold_key, memory_order_relaxed);
        shim_gs.hold_key = 0;
        atomic_store_explicit(&shim_gs.joined, 0, memory_order_release);
        pthread_cond_signal(&shim_gs.bg_cv);
}

static void close_hold_locked(void)
{
        close_hold_at(false);
}

/* The hold's lease ran out: end it. A launch admitted just before the end
 * may still be on its way into the driver; its work would land after the
 * end events and be measured in no hold. So new launches are kept out
 * first (`joined` cleared), then the admitted ones are let through (inflight minus the
 * threads waiting in the gate; at most ~2 ms), then the hold is closed
 * unless a thread joined a new one meanwhile. Hold lock held. */
static void close_expired_locked(void)
{
        uint64_t key = shim_gs.hold_key;
        atomic_store_explicit(&shim_gs.joined, 0, memory_order_seq_cst);
        pthread_mutex_unlock(&shim_gs.hold.mu);
        for (int i = 0; i < 200; i++) {
                uint64_t w = atomic_load_explicit(&shim_gs.inflight, memory_order_seq_cst);
                int admitted = SHIM_INFLIGHT(w) - atomic_load_explicit(&shim_gs.waiters, memory_order_seq_cst);
                if (admitted <= 0)
                        break;
                struct timespec ts = { 0, 10 * 1000 };
                nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&shim_gs.hold.mu);
        if (shim_gs.hold_key == key)
                close_hold_locked();
}

/* The window of the open hold is over: end the hold now (its end events
 * then mark the drain of its work), not when the background thread gets
 * to it (it may be busy trying the daemon) or at the next window (which
 * would charge the gap as busy time). Called by a waiting thread. */
static void close_window_hold(uint64_t now)
{
        pthread_mutex_lock(&shim_gs.hold.mu);
        struct shim_lease l;
        if (shim_gs.hold_key && shim_gs.hold_src == SRC_WINDOW &&
            (!shim_gate_lease_read(shim_gs.src_window.page, &l) ||
             KEY(l.gen, SRC_WINDOW) != shim_gs.hold_key || now >= l.until))
                close_expired_locked();
        pthread_mutex_unlock(&shim_gs.hold.mu);
}

/* A probed launch took u ns: the first sample replaces the initial guess;
 * a smaller one replaces the estimate, a larger one moves it by an eighth.
 * A probe spans its launch's wait behind work queued before it (other
 * streams of the context, a neighbour's tail, a gap between leases), so it
 * errs long: one inflated sample must not make every thread wait as if
 * its queue were that long. */
static void learn_unit(uint64_t u)
{
        if (!u)
                return;
        u = u < UNIT_MIN_NS ? UNIT_MIN_NS : u > UNIT_MAX_NS ? UNIT_MAX_NS : u;
        uint64_t old = atomic_load_explicit(&shim_gs.unit_ns, memory_order_relaxed);
        uint64_t next = !shim_gs.unit_learned || u < old ? u : (old * 7 + u) / 8;
        shim_gs.unit_learned = true;
        atomic_store_explicit(&shim_gs.unit_ns, next, memory_order_relaxed);
}

/* DONE for daemon lease `gen`. Its pending flag is whether a thread waits
 * for a lease now; a thread that starts waiting after that was read sends
 * its own WANT after this DONE (want_gen is reset first), so the daemon
 * never ends up thinking an idle process waits, or a waiting one idles. */
/* WANT: this process has a thread waiting for a lease. */
static void send_want(void)
{
        atomic_store(&shim_gs.told_pending, true);
        if (!shim_daemon_send(GS_ARB_MSG_WANT, 0, 0, 0))
                go_local("lost the daemon socket");
}

static void report_daemon(uint64_t gen, uint64_t busy)
{
        if (busy > GS_ARB_MAX_BUSY_NS)
                busy = GS_ARB_MAX_BUSY_NS;
        atomic_store(&shim_gs.want_gen, UINT64_MAX);
        bool pending = atomic_load(&shim_gs.waiters) > 0;
        atomic_store(&shim_gs.told_pending, pending);
        if (!shim_daemon_send(GS_ARB_MSG_DONE, gen, busy, pending ? GS_ARB_F_PENDING : 0))
                go_local("lost the daemon socket");
        else if (!pending && atomic_load(&shim_gs.waiters) > 0)
                send_want();
}

static void report(uint64_t gen, int src, uint64_t busy)
{
        if (src == SRC_LOCAL)
                shim_local_report(gen, busy, atomic_load(&shim_gs.waiters) > 0);
        else if (src == SRC_WINDOW)
                shim_window_report(gen, busy);
        else if (atomic_load_explicit(&shim_gs.cur_src, memory_order_acquire) == &shim_gs.src_daemon)
                report_daemon(gen, busy);
}

/* Drains every closed hold and reports it (outside the hold lock). */
static void drain_all(void)
{
        uint64_t gen, busy, n;
        int src;
        learn_unit(shim_probe_poll());
        while (shim_hold_drain_one(&gen, &src, &busy, &n))
                report(gen, src, busy);
        learn_unit(shim_probe_poll());
}

/* This process launches in hold (key, gen). False when that daemon hold
 * was ended already (the background thread closed it early): the caller
 * then needs a new lease. */
static bool join(uint64_t key, uint64_t gen, int src)
{
        pthread_mutex_lock(&shim_gs.hold.mu);
        if (src == SRC_DAEMON && key == atomic_load(&shim_gs.closed_key)) {
                pthread_mutex_unlock(&shim_gs.hold.mu);
                return false;
        }
        if (shim_gs.hold_key != key) {
                close_hold_locked();
                shim_gs.hold_key = key;
                shim_gs.hold_gen = gen;
                shim_gs.hold_src = src;
                if (src == SRC_LOCAL)
                        shim_local_join(gen);
                atomic_store_explicit(&shim_gs.joined, key, memory_order_release);
                pthread_cond_signal(&shim_gs.bg_cv);
        }
        pthread_mutex_unlock(&shim_gs.hold.mu);
        return true;
}

/* This thread's first admitted launch on stream s in hold `key`: the start
 * event goes right before it (not before a wait, which would count the
 * wait as busy time). */
static void first_launch(uint64_t key, CUstream s)
{
        pthread_mutex_lock(&shim_gs.hold.mu);
        if (shim_gs.hold_key == key)
                shim_hold_stream(key, s);
        pthread_mutex_unlock(&shim_gs.hold.mu);
        shim_gate_t.key = key;
        shim_gate_t.stream = s;
}

void shim_gate_after(CUstream s)
{
        shim_gate_t.probe = false;
        shim_probe_after(s);
}

void shim_gate_stream_destroy(CUstream stream)
{
        if (shim_gate_on && shim_depth == 0 && atomic_load(&shim_gs.cur_src))
                shim_hold_stream_gone(stream);
}

void shim_gate_ctx_destroy(CUcontext ctx, CUdevice dev)
{
        if (shim_gate_on && atomic_load(&shim_gs.cur_src))
                shim_hold_forget(ctx, dev);
}

/* ---- the gate ---- */

/* Admits a launch (the caller checked now < until) while this thread's
 * queued work (estimated) stays within GS_ARB_AHEAD_NS (+ a small slack) of now; the first
 * launch into an empty queue always goes. So when a lease ends a thread
 * has at most ~GS_ARB_AHEAD_NS (or one longer unit) queued: that overrun
 * is measured and charged, and it keeps the device busy past the end
 * event recorded when the lease ends, so the event marks the real drain
 * even when the closing thread wakes late. In an outage window (`win`),
 * which no other slice shares, a thread may queue up to half of what is
 * left of the window, so that a thread short of CPU time (a loaded host)
 * still fills its window; towards the end that shrinks to the usual bound
 * (the window ends early by the margin that drains it, shim_gate_window.c). */
static inline bool admit(uint64_t now, uint64_t until, bool win)
{
        uint64_t unit = atomic_load_explicit(&shim_gs.unit_ns, memory_order_relaxed);
        uint64_t q = shim_gate_t.qend > now ? shim_gate_t.qend : now;
        uint64_t ahead = GS_ARB_AHEAD_NS;
        if (win && until > now && (until - now) / 2 > ahead)
                ahead = (until - now) / 2;
        if (q > now && q + unit > now + ahead + AHEAD_SLACK_NS)
                return false;
        shim_gate_t.qend = q + unit;
        shim_gate_t.count++;
        return true;
}

/* The page shows a lease that has not ended (it may not have begun);
 * *ret_seq: the seqlock word it was read under. */
static inline bool lease_current_seq(struct shim_src *src, struct shim_lease *l, uint64_t now,
                                     uint64_t *ret_seq)
{
        return lease_read_seq(src->page, l, ret_seq) && now < l->until &&
               atomic_load_explicit(&src->page->epoch, memory_order_acquire) == src->epoch;
}

/* True when every launch on `s` (this thread's stream) has completed. */
static bool stream_idle(CUstream s)
{
        return shim_gate_cu.stream_query && shim_gate_cu.stream_query(s) == CUDA_SUCCESS;
}

static uint64_t clamp_wait(uint64_t ns)
{
        return ns < 20 * US ? 20 * US : ns > WAIT_SLICE_NS ? WAIT_SLICE_NS : ns;
}

/* Out of line and cold: a launch that must start, join or wait for a hold. */
static __attribute__((noinline, cold)) CUresult slow(CUstream s)
{
        pthread_mutex_lock(&shim_gs.hold.mu);
        start_locked();
        pthread_mutex_unlock(&shim_gs.hold.mu);
        /* A launch into a stream being captured runs nothing now (the graph
         * is gated when launched), and no event may be recorded there. */
        CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
        if (shim_gate_cu.is_capturing && shim_gate_cu.is_capturing(s, &cs) == CUDA_SUCCESS &&
            cs != CU_STREAM_CAPTURE_STATUS_NONE)
                return CUDA_SUCCESS;
        atomic_fetch_add_explicit(&shim_gs.launches, shim_gate_t.count, memory_order_relaxed);
        shim_gate_t.count = 0;
        atomic_fetch_add(&shim_gs.waiters, 1);
        uint64_t t0 = shim_gate_now();
        for (unsigned spins = 0;; spins++) {
                struct shim_src *src = atomic_load_explicit(&shim_gs.cur_src, memory_order_acquire);
                uint64_t now = shim_gate_now();
                if (src == &shim_gs.src_daemon && !shim_daemon_healthy(now)) {
                        go_local("the daemon is gone, stale or restarted");
                        continue;
                }
                uint32_t fv = atomic_load_explicit(&src->page->futex, memory_order_acquire);
                struct shim_lease l = { 0 };
                uint64_t seq;
                bool current = lease_current_seq(src, &l, now, &seq);
                if (current && now + GS_ARB_PRESTART_NS < l.start) {
                        /* Granted, from when the previous holder's work is
                         * predicted to drain (the page changes if sooner),
                         * or the next outage window. While waiting for that
                         * one, a daemon that answers again (the background
                         * thread reconnected and sent WANT) grants a short
                         * lease on its own page: look for it often. */
                        bool linked = is_local(src) && shim_daemon_page();
                        if (linked && try_daemon_lease(now))
                                continue;
                        uint64_t w = clamp_wait(l.start - GS_ARB_PRESTART_NS - now);
                        shim_gate_futex_wait(&src->page->futex, fv,
                                             linked && w > LINKED_POLL_NS ? LINKED_POLL_NS : w);
                        continue;
                }
                bool valid = current;
                uint64_t key = KEY(l.gen, src->id);
                if (valid && src == &shim_gs.src_daemon && key == atomic_load(&shim_gs.closed_key))
                        valid = false;
                if (valid) {
                        if (atomic_load(&shim_gs.joined) != key && !join(key, l.gen, src->id))
                                continue;
                        bool win = src == &shim_gs.src_window;
                        bool ok = admit(now, l.until, win);
                        if (!ok && stream_idle(s)) {
                                /* The estimate said the queue is full, but
                                 * the stream is empty (the program waited
                                 * for it: a request/response loop). */
                                shim_gate_t.qend = 0;
                                ok = admit(now, l.until, win);
                        }
                        if (ok) {
                                if (shim_gate_t.key != key || shim_gate_t.stream != s)
                                        first_launch(key, s);
                                shim_gate_t.probe = shim_probe_arm(s, now);
                                break;
                        }
                        /* This thread's queue is full for now. */
                        uint64_t unit = atomic_load_explicit(&shim_gs.unit_ns, memory_order_relaxed);
                        uint64_t target = shim_gate_t.qend + unit - GS_ARB_AHEAD_NS - AHEAD_SLACK_NS;
                        if (target > l.until)
                                target = l.until;
                        /* Look at the stream again soon: the estimate may
                         * be long (a program that synchronises empties its
                         * queue sooner than launches x unit). */
                        if (target > now + GS_ARB_AHEAD_NS)
                                target = now + GS_ARB_AHEAD_NS;
                        shim_gate_futex_wait(&src->page->futex, fv, clamp_wait(target > now ? target - now : 0));
                        continue;
                }
                if (is_local(src)) {
                        if (try_daemon_lease(now))
                                continue;
                        struct gs_arb_decision d;
                        if (src == &shim_gs.src_window)
                                close_window_hold(now);
                        int tr = src == &shim_gs.src_window ? shim_window_tick(now, &d)
                                                            : shim_local_tick(true, &d);
                        if (tr < 0) {
                                /* Cannot happen (both exist once started);
                                 * a bounded wait, never an open gate. */
                                if (now - t0 >= GS_ARB_STALE_NS)
                                        break;
                                shim_gate_futex_wait(&src->page->futex, fv, WAIT_SLICE_NS);
                                continue;
                        }
                        if (d.state == GS_ARB_GRANTED && d.grant_until > now && spins % 64 != 63)
                                continue;
                        uint64_t w = d.wake_at == GS_ARB_NEVER || d.wake_at <= now ? WAIT_SLICE_NS
                                                                                    : d.wake_at - now;
                        shim_gate_futex_wait(&src->page->futex, fv, clamp_wait(w));
                        continue;
                }
                /* Daemon: ask once per lease waited for, then wait (bounded). */
                uint64_t seen = l.gen, prev = atomic_load(&shim_gs.want_gen);
                if (prev != seen && atomic_compare_exchange_strong(&shim_gs.want_gen, &prev, seen)) {
                        send_want();
                        if (atomic_load(&shim_gs.cur_src) != &shim_gs.src_daemon)
                                continue;
                }
                if (now - t0 >= GS_ARB_MAX_WAIT_NS) {
                        go_local("no lease from the daemon in 30 s");
                        continue;
                }
                shim_gate_futex_wait(&src->page->futex, fv, clamp_wait(GS_ARB_MAX_WAIT_NS - (now - t0)));
        }
        atomic_fetch_sub(&shim_gs.waiters, 1);
        if (!shim_gs.bg_running)
                drain_all();
        return CUDA_SUCCESS;
}

/* A launch shim_gate_fast did not admit: this thread's hold and lease read
 * afresh (renewed, cut, its queue full, no clock anchor), else the slow
 * path. Admitted under a daemon or local lease, it arms the fast path
 * (window leases always come here: their bound depends on the time left). */
CUresult shim_gate_enter(CUstream s)
{
        struct shim_gate_tls *tp = &shim_gate_t;
        tp->seqp = NULL;
        struct shim_src *src = atomic_load_explicit(&shim_gs.cur_src, memory_order_acquire);
        /* seq_cst: pairs with the early close (try_close_early), which
         * clears `joined` and then reads shim_gs.inflight. */
        if (__builtin_expect(src != NULL, 1) && tp->key && s == tp->stream &&
            tp->key == atomic_load_explicit(&shim_gs.joined, memory_order_seq_cst)) {
                struct shim_lease l;
                uint64_t seq, now = shim_clock_anchor(tp);
                bool win = src == &shim_gs.src_window;
                if (lease_current_seq(src, &l, now, &seq) && now + GS_ARB_PRESTART_NS >= l.start &&
                    KEY(l.gen, src->id) == tp->key && admit(now, l.until, win)) {
                        if (!win) {
                                tp->src = src;
                                tp->seq = seq;
                                tp->until = l.until;
                                tp->seqp = &src->page->seq;
                        }
                        return CUDA_SUCCESS;
                }
        }
        return slow(s);
}

/* ---- the background thread ---- */

static void timed_wait_locked(uint64_t until_mono)
{
        /* bg_cv waits on CLOCK_MONOTONIC (start_locked). */
        uint64_t now = shim_gate_now();
        if (until_mono > now + 500 * MS)
                until_mono = now + 500 * MS;
        struct timespec ts = { .tv_sec = (time_t)(until_mono / 1000000000ull),
                               .tv_nsec = (long)(until_mono % 1000000000ull) };
        pthread_cond_timedwait(&shim_gs.bg_cv, &shim_gs.hold.mu, &ts);
}

/* A daemon lease this process did not launch in (the slice's other
 * processes wanted it, or this process's WANT was answered after its
 * threads found room elsewhere) still owes a DONE, or the daemon would
 * wait its drain timeout: once the lease is over, report it empty (with
 * the process's pending state, which is how the daemon learns that an idle
 * process is idle). Returns when to look again. Hold lock held, no hold. */
static uint64_t unused_lease(uint64_t now)
{
        struct gs_arb_page *p = shim_gs.src_daemon.page;
        struct shim_lease l;
        if (!p || !shim_gate_lease_read(p, &l) || !l.gen || l.gen == shim_gs.unused_reported ||
            KEY(l.gen, SRC_DAEMON) == atomic_load(&shim_gs.closed_key))
                return GS_ARB_NEVER;
        if (now < l.until + CLOSE_GRACE_NS)
                return l.until + CLOSE_GRACE_NS;
        shim_gs.unused_reported = l.gen;
        atomic_store_explicit(&shim_gs.closed_key, KEY(l.gen, SRC_DAEMON), memory_order_relaxed);
        pthread_mutex_unlock(&shim_gs.hold.mu);
        report_daemon(l.gen, 0);
        pthread_mutex_lock(&shim_gs.hold.mu);
        return GS_ARB_NEVER;
}

/* The open daemon hold has nothing queued and no thread is launching or
 * waiting: end it now (end events on its empty streams, so it is charged
 * its real busy span; DONE follows from drain_all, and the daemon hands
 * the GPU on at once). New launches are kept out first (`joined` cleared,
 * and join refuses a closed key), then the launches in flight are counted,
 * then the streams queried; if anything is busy, `joined` is put back.
 * Hold lock held. True when the hold was closed. */
static bool try_close_early(void)
{
        uint64_t key = shim_gs.hold_key, now = shim_gate_now();
        uint64_t w = atomic_load(&shim_gs.inflight);
        uint32_t entries = SHIM_ENTRIES(w);
        if (atomic_load(&shim_gs.waiters) > 0 || SHIM_INFLIGHT(w) > 0 ||
            shim_hold_idle(key) != 1) {
                shim_gs.early_key = 0;
                return false;
        }
        if (shim_gs.early_key != key || shim_gs.early_entries != entries) {
                /* First look at empty streams: mark them; if nothing is
                 * launched until the next look, the marks are the hold's
                 * end (its charge does not include the looks' delay). */
                shim_gs.early_key = key;
                shim_gs.early_entries = entries;
                shim_gs.early_at = now;
                shim_hold_mark(key);
                return false;
        }
        if (now < shim_gs.early_at + EARLY_POLL_NS - EARLY_POLL_NS / 8)
                return false;
        shim_gs.early_key = 0;
        atomic_store_explicit(&shim_gs.joined, 0, memory_order_seq_cst);
        /* Nothing in flight or entered since the first look (read last). */
        if (SHIM_INFLIGHT(atomic_load_explicit(&shim_gs.inflight, memory_order_seq_cst)) == 0 &&
            atomic_load(&shim_gs.waiters) == 0 && shim_hold_idle(key) == 1 &&
            atomic_load_explicit(&shim_gs.inflight, memory_order_seq_cst) == w) {
                close_hold_at(true);
                return true;
        }
        atomic_store_explicit(&shim_gs.joined, key, memory_order_release);
        return false;
}

static void *bg_main(void *arg)
{
        (void)arg;
        const struct gs_slice_conf *conf = shim_gs.conf;
        uint64_t next_retry = 0, ticked_until = 0;
        /* This thread (the shim's own) waits for a hold's drain and reports
         * it; the next slice waits for that report. The default 50 us timer
         * slack would delay every hand-off by up to that much. */
        prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
        pthread_mutex_lock(&shim_gs.hold.mu);
        for (;;) {
                pthread_mutex_unlock(&shim_gs.hold.mu);
                drain_all();
                uint64_t now = shim_gate_now();
                struct shim_src *src = atomic_load_explicit(&shim_gs.cur_src, memory_order_acquire);
                if (src == &shim_gs.src_daemon && !shim_daemon_healthy(now))
                        go_local("the daemon is gone, stale or restarted");
                else if (src == &shim_gs.src_daemon)
                        shim_window_learn(shim_daemon_page());
                else if (is_local(src) && conf->daemon_socket[0] && now >= next_retry) {
                        next_retry = now + GS_ARB_RECONNECT_NS;
                        if (!shim_daemon_page() && shim_daemon_connect(conf) == 0) {
                                atomic_store(&shim_gs.want_gen, UINT64_MAX);
                                if (atomic_load(&shim_gs.waiters) > 0)
                                        send_want();
                        }
                        try_daemon_lease(now);
                }
                pthread_mutex_lock(&shim_gs.hold.mu);
                if (!shim_gs.hold_key) {
                        uint64_t wake = conf->daemon_socket[0] ? next_retry : now + 500 * MS;
                        if (src == &shim_gs.src_daemon) {
                                wake = now + GS_ARB_HEARTBEAT_NS;
                                uint64_t w = unused_lease(now);
                                if (w < wake)
                                        wake = w;
                                /* The daemon may grant this process a lease
                                 * that no thread comes to use (they were
                                 * busy elsewhere): look at the page often
                                 * enough to report it unused promptly, or the
                                 * GPU waits for that report (it waited up to
                                 * a heartbeat, 100 ms). Only while the daemon
                                 * thinks this process has work. */
                                if (atomic_load(&shim_gs.told_pending) && now + UNUSED_POLL_NS < wake)
                                        wake = now + UNUSED_POLL_NS;
                        }
                        timed_wait_locked(wake);
                        continue;
                }
                struct shim_src *hs = shim_gs.hold_src == SRC_LOCAL    ? &shim_gs.src_local
                                      : shim_gs.hold_src == SRC_WINDOW ? &shim_gs.src_window
                                                                       : &shim_gs.src_daemon;
                struct shim_lease l;
                now = shim_gate_now();
                bool same = hs == atomic_load(&shim_gs.cur_src) && shim_gate_lease_read(hs->page, &l) &&
                            KEY(l.gen, hs->id) == shim_gs.hold_key;
                if (same && hs == &shim_gs.src_local && now + RENEW_LEAD_NS >= l.until &&
                    ticked_until != l.until) {
                        /* Local: renew (or end) the lease before it runs out. */
                        ticked_until = l.until;
                        pthread_mutex_unlock(&shim_gs.hold.mu);
                        struct gs_arb_decision d;
                        shim_local_tick(false, &d);
                        pthread_mutex_lock(&shim_gs.hold.mu);
                        continue;
                }
                uint64_t grace = hs == &shim_gs.src_daemon ? CLOSE_GRACE_NS : 0;
                if (!same || now >= l.until + grace) {
                        close_expired_locked();
                        continue;
                }
                if (hs == &shim_gs.src_daemon && try_close_early())
                        continue;
                uint64_t wake = l.until + grace;
                if (hs == &shim_gs.src_daemon && now + EARLY_POLL_NS < wake)
                        wake = now + EARLY_POLL_NS;
                if (hs == &shim_gs.src_local && ticked_until != l.until)
                        wake = l.until > RENEW_LEAD_NS ? l.until - RENEW_LEAD_NS : 0;
                timed_wait_locked(wake);
        }
        return NULL;
}

/* The gate's state back to GATE_STATE_FRESH, but for what survives fork
 * (struct shim_gate_state says why), and this thread's own. Nothing is
 * released but the inherited copy of the daemon socket: the holds' events
 * belong to the parent's contexts, the parent's locks and condition
 * variables may have been held by its other threads (they are overwritten,
 * not destroyed). */
static void gate_state_reset(void)
{
        static const struct shim_gate_state fresh = GATE_STATE_FRESH;
        const struct gs_slice_conf *conf = shim_gs.conf;
        uint64_t unit = atomic_load_explicit(&shim_gs.unit_ns, memory_order_relaxed);
        bool learned = shim_gs.unit_learned;
        struct gs_arb_page *daemon_page = shim_gs.link.page;
        struct shim_local_state *local = shim_gs.local;
        uint64_t window = atomic_load(&shim_gs.window);
        if (shim_gs.link.fd >= 0)
                close(shim_gs.link.fd);
        shim_gs = fresh;
        shim_gs.conf = conf;
        atomic_store_explicit(&shim_gs.unit_ns, unit, memory_order_relaxed);
        shim_gs.unit_learned = learned;
        shim_gs.link.page = daemon_page;
        shim_gs.local = local;
        shim_local_forget_private();
        atomic_store(&shim_gs.window, window);
        shim_window_reset();
        shim_gate_t = (struct shim_gate_tls){ 0 };
}

void shim_gate_atfork_child(void)
{
        if (shim_gate_on)
                gate_state_reset();
}
