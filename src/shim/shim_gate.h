/* SPDX-License-Identifier: Apache-2.0 */
/* The launch gate: the shim's side of the compute share (issue 5; the
 * mechanism is docs/internals/compute-arbiter.md, the protocol
 * include/gpuslice/arbiter_proto.h).
 *
 * Every launch path passes the gate before the driver (shim_launch.c).
 * Outside a slice, or in a whole-GPU slice (compute_milli 1000), the gate
 * is off: one load of a flag. In a slice the launch goes through while the
 * slice holds a lease and this thread's estimate of its queued work
 * (launches x the probed device time of one launch) stays within
 * GS_ARB_AHEAD_NS (plus a 250 us slack) of now: when a lease ends a thread
 * has at most that much (or one longer unit) still queued, which is
 * measured and charged as the hold's overrun. Otherwise the thread waits
 * (bounded) for room or for the next lease. A launch under the lease the
 * thread last launched under costs one atomic add, a few loads (the lease
 * page's seqlock word among them: unchanged, the lease is too) and a clock
 * read (the TSC where it stands in for CLOCK_MONOTONIC, else the vDSO): no
 * call, no syscall, no lock, nothing shared written but the in-flight
 * count (shim_gate_fast).
 *
 * Two sources of leases, one lease-page layout (struct gs_arb_page):
 *   DAEMON  the config's lease_page, written by gpusliced's arbiter; the shim
 *           asks with WANT and reports DONE over the daemon socket;
 *   WINDOW  the daemon is gone (unreachable, stale heartbeat, restarted)
 *           after it gave the slice an outage window: launches only in
 *           that window of every period (shim_gate_window.c);
 *   LOCAL   a private one-slice arbiter (policy cap at the share) shared by
 *           the slice's processes through <slice_dir>/compute.local (or,
 *           that file unusable, kept in this process alone), used when
 *           there is no daemon_socket, or the daemon is gone before it
 *           gave a window.
 * A small background thread per process (started on the first gated
 * launch) closes holds, measures their device time with CUDA events,
 * reports DONE, renews local leases and reconnects to the daemon. */
#ifndef SHIM_GATE_H
#define SHIM_GATE_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <gpuslice/arbiter_proto.h>
#include <gpuslice/slice_conf.h>

#include "arbiter.h"

/* True once shim_gate_setup saw a slice with compute_milli < 1000. */
extern bool shim_gate_on;

/* Called once from the shim's start-up with the slice config (SLICE mode
 * only). Decides whether launches are gated; opens nothing yet. */
void shim_gate_setup(const struct gs_slice_conf *conf);

/* The gate's per-thread state (shim_gate.c). The fast path keeps a copy
 * of the lease it last admitted a launch under: while the lease page's
 * seqlock word still shows `seq` (nothing on the page changed: no cut, no
 * renewal, no restarted daemon), `until` is that lease's end, so a launch
 * needs one load of that word, not a read of the lease. */
struct shim_gate_tls {
        uint64_t key;    /* hold this thread joined (0: none) */
        CUstream stream; /* the stream it measured in that hold */
        uint64_t qend;   /* estimated end of this thread's queued work, ns */
        uint64_t count;  /* launches not yet flushed into shim_gs.launches */
        /* The fast path's lease: valid while seqp is not NULL, the source
         * is still `src` and *seqp == seq. */
        const _Atomic uint64_t *seqp;
        const struct shim_src *src;
        uint64_t seq, until;
        /* The launch path's clock (shim_gate_clock.c): while
         * tsc - tsc0 < dmax, now = ns0 + ((tsc - tsc0) * mult >> 32);
         * mult 0: clock_gettime. */
        uint64_t tsc0, ns0, mult, dmax;
        /* Set by the gate when the launch it admitted is the first of a
         * hold: the caller then calls shim_gate_after once the driver
         * accepted it. */
        bool probe;
};
extern __thread struct shim_gate_tls shim_gate_t __attribute__((tls_model("initial-exec")));

/* The gate proper (out of line): CUDA_SUCCESS to let a launch on `stream`
 * go (the per-thread stream named as CU_STREAM_PER_THREAD). Never fails a
 * launch on its own account: when nothing can be obtained it waits at most
 * GS_ARB_MAX_WAIT_NS and falls back to local enforcement. Called by
 * launches that shim_gate_fast did not admit, between
 * shim_gate_inflight_inc and the driver. */
CUresult shim_gate_enter(CUstream stream);

/* A launch's way through the gate is counted in shim_gs.inflight (below):
 * around the gate and the driver call, by the caller. */
static inline void shim_gate_inflight_inc(void);
static inline void shim_gate_inflight_dec(void);
/* The launch path's clock: CLOCK_MONOTONIC in ns (shim_gate_now), from the
 * TSC where the thread has a calibration. */
static inline uint64_t shim_gate_fast_now(struct shim_gate_tls *tp);
/* Admits a launch on `stream` (the per-thread stream named as
 * CU_STREAM_PER_THREAD) without a call, a lock or a write shared with
 * other threads, when this thread holds the hold and lease it last
 * launched under and its queue has room (see admit in shim_gate.c, whose
 * bound this is). False: ask shim_gate_enter (nothing was changed). */
static inline bool shim_gate_fast(CUstream stream);

void shim_gate_after(CUstream stream);

/* Hooks for the application's stream and context teardown (no-ops with
 * the gate off): the gate's events must not outlive what they are on. */
void shim_gate_stream_destroy(CUstream stream);
void shim_gate_ctx_destroy(CUcontext ctx, CUdevice dev);

/* Child side of fork (the pthread_atfork child handler; the child has one
 * thread): puts the gate's whole state (shim_gs) back as it was at load,
 * but for what stays valid in the child (see shim_gs), and this thread's
 * per-thread state: holds and events are forgotten, the daemon socket is
 * closed without a word to the daemon, no background thread runs; the
 * child starts over at its first gated launch. */
void shim_gate_atfork_child(void);

/* ---- internals shared by the shim_gate*.c files ---- */

uint64_t shim_gate_now(void);
void shim_gate_futex_wait(_Atomic uint32_t *f, uint32_t val, uint64_t ns);
void shim_gate_futex_wake(_Atomic uint32_t *f);

/* A source of leases: its lease page and the epoch the page must show. */
struct shim_src {
        struct gs_arb_page *page;
        int id; /* SRC_LOCAL, SRC_DAEMON or SRC_WINDOW (shim_gate.c) */
        uint64_t epoch;
};

/* A lease as read from a page with the seqlock. */
struct shim_lease {
        uint64_t gen, start, until;
};
/* Reads the lease of `p` (false if the seqlock never settled). */
bool shim_gate_lease_read(struct gs_arb_page *p, struct shim_lease *ret);

/* The driver functions the gate calls (resolved from libcuda.so.1). */
struct shim_gate_cu {
        __typeof__(&cuEventCreate) event_create;
        __typeof__(&cuEventRecord) event_record;
        __typeof__(&cuEventSynchronize) event_sync;
        __typeof__(&cuEventElapsedTime) elapsed;
        __typeof__(&cuEventDestroy) event_destroy;
        __typeof__(&cuCtxGetCurrent) ctx_get;
        __typeof__(&cuCtxPushCurrent) ctx_push;
        __typeof__(&cuCtxPopCurrent) ctx_pop;
        __typeof__(&cuStreamIsCapturing) is_capturing;
        __typeof__(&cuEventQuery) event_query;
        __typeof__(&cuStreamQuery) stream_query;
};
extern struct shim_gate_cu shim_gate_cu;
/* Fills shim_gate_cu from the libcuda.so.1 already loaded (fields stay
 * NULL when it is not, or lacks a symbol). Called once, under the hold
 * lock, at the gate's start (shim_gate_hold.c). */
void shim_gate_resolve_cu(void);

/* ---- holds: what this process launched under one lease (shim_gate_hold.c) ---- */

/* Starts measuring on (current context, stream) for the hold `key` if this
 * is the first launch there in the hold: records a start event. Called
 * from a launching thread with the hold lock held, right before the launch.
 * True when a start event was recorded. */
bool shim_hold_stream(uint64_t key, CUstream stream);
/* The unit probe: arms it (records its first event on `stream`, right
 * before a launch) when none is in flight and it is time; true when armed:
 * the caller then calls shim_probe_after once the launch went in. Take the
 * hold lock themselves. */
bool shim_probe_arm(CUstream stream, uint64_t now);
void shim_probe_after(CUstream stream);
/* The probed launch's device time in ns once it completed (0 otherwise);
 * never blocks. */
uint64_t shim_probe_poll(void);
/* Records a mark event on every stream of the open hold `key` (they were
 * just seen empty). Hold lock held. */
void shim_hold_mark(uint64_t key);
/* Ends the open hold (key) as seen by this process: records end events on
 * every stream it used (`at_mark`: nothing was launched since the marks,
 * which then serve as the end events) and queues it for draining. Hold
 * lock held. */
void shim_hold_close(uint64_t key, uint64_t gen, int src, uint64_t launches, bool at_mark);
/* Whether the open hold `key` has nothing queued: 1 when every stream it
 * measured is empty (cuStreamQuery), 0 when one is not, -1 when it cannot
 * tell (a per-thread stream, which another thread cannot query, or a
 * stream it could not measure). A hold with no stream yet is empty. Hold
 * lock held; never blocks. */
int shim_hold_idle(uint64_t key);
/* Waits for one closed hold's work to drain (outside the lock) and returns
 * true with its gen, source, busy ns and launches; false when none is
 * queued. Takes the hold lock itself. */
bool shim_hold_drain_one(uint64_t *gen, int *src, uint64_t *busy, uint64_t *launches);
/* The application destroys `stream`: its end event is recorded now. */
void shim_hold_stream_gone(CUstream stream);
/* The application destroys context `ctx` (or, ctx NULL, the primary
 * context of `dev`): its streams leave every hold and their events are
 * destroyed (after a drain in progress finished). */
void shim_hold_forget(CUcontext ctx, CUdevice dev);

/* ---- the local arbiter (shim_gate_local.c) ---- */

/* Maps (creating race-free) <slice_dir>/compute.local; when that file is
 * unusable (a directory, another size or layout, garbage, no room), logs
 * why and runs the same arbiter in this process's own memory instead
 * (this process alone paced at the share: compute fails closed, never
 * ungated). 0, or -errno only when even that cannot be set up. */
int shim_local_attach(const struct gs_slice_conf *conf);
/* True when the local arbiter is this process's private one. */
bool shim_local_is_private(void);
/* Fork child: a private arbiter is the parent's; forget it, so the child
 * attaches compute.local afresh (it may be usable now). */
void shim_local_forget_private(void);
/* The local lease page (valid after attach). */
struct gs_arb_page *shim_local_page(void);
/* One arbiter step under the slice's local lock: `want` marks the slice
 * pending first. Writes the lease page and wakes waiters on a change.
 * Fills *d. 0 or -errno. */
int shim_local_tick(bool want, struct gs_arb_decision *d);
/* This process launches in local hold `gen`: one more report is owed. */
void shim_local_join(uint64_t gen);
/* This process's report for local hold `gen`; the last one owed settles
 * the hold in the arbiter. */
void shim_local_report(uint64_t gen, uint64_t busy, bool pending);

/* ---- outage windows (shim_gate_window.c) ---- */

/* Remembers the outage window the daemon's page `p` shows (NULL: no-op;
 * a zero or malformed word: none). Logs a change. Any thread. */
void shim_window_learn(const struct gs_arb_page *p);
/* The private page the window leases are published on. */
struct gs_arb_page *shim_window_page(void);
/* Publishes the window current at `now`, or the next one, as a lease on
 * shim_window_page() and fills *d (GRANTED with its span; IDLE when debt
 * left nothing within reach). 0, or -ENODEV when no window is known. */
int shim_window_tick(uint64_t now, struct gs_arb_decision *d);
/* The measured device time of window hold `gen`: beyond the window it is
 * debt, taken off the next windows (bounded). */
void shim_window_report(uint64_t gen, uint64_t busy);
/* Fork child: a fresh lock, no debt, nothing published; the window stays. */
void shim_window_reset(void);

/* ---- the daemon link (shim_gate_daemon.c) ---- */

/* Maps the config's `lease_page` after checking that it and its directory
 * are the daemon's (owner and mode; a refusal is logged once), then
 * connects, HELLO/WELCOME, and checks the page's epoch. 0 when the daemon
 * can grant leases now, else -errno (nothing kept open but the page). */
int shim_daemon_connect(const struct gs_slice_conf *conf);
/* The daemon's page, or NULL when not connected. */
struct gs_arb_page *shim_daemon_page(void);
/* The epoch WELCOME announced. */
uint64_t shim_daemon_epoch(void);
/* True while the link is usable: socket open, epoch unchanged, heartbeat
 * younger than GS_ARB_STALE_NS. Reads frames already sent by the daemon
 * (an ERROR or hang-up closes the link). */
bool shim_daemon_healthy(uint64_t now);
/* Sends a frame; false (and the link closed) on failure. */
bool shim_daemon_send(enum gs_arb_msg_type type, uint64_t gen, uint64_t value, uint32_t flags);
/* Closes the link (keeps nothing). */
void shim_daemon_close(void);

/* ---- the gate's state ---- */

#define SHIM_HOLD_MAX_STREAMS 32
#define SHIM_HOLD_MAX_DRAINS 4

/* One (context, stream) measured in a hold. */
struct shim_hstream {
        CUcontext ctx;
        CUdevice dev;
        CUstream stream;
        CUevent start, end;
        CUevent mark; /* recorded when the stream was last seen empty */
        bool ended;   /* the stream was destroyed: `end` recorded then */
};

/* What this process launched under one lease. */
struct shim_hrec {
        uint64_t key, gen, launches;
        int src;
        unsigned n;
        bool unmeasured; /* a stream used in the hold is not in s[] */
        struct shim_hstream s[SHIM_HOLD_MAX_STREAMS];
};

/* The unit probe: a pair of events around one launch. */
struct shim_probe {
        int state; /* 0 idle, 1 armed (pre recorded), 2 in flight */
        CUcontext ctx;
        CUdevice dev;
        CUevent pre, post;
        uint64_t next_at;
};

struct shim_local_state; /* the mapped compute.local (shim_gate_local.c) */

/* Everything the launch gate keeps per process, in one place, so that a
 * fork child resets all of it at once (shim_gate_atfork_child assigns the
 * state the library was loaded with) and no field can be forgotten. What
 * survives fork is named here and kept by that one function:
 *   conf, unit_ns, unit_learned   the slice config (read-only after
 *        set-up) and the estimate of one launch's device time (the same
 *        kernels, the same device in the child);
 *   local, link.page              shared mappings of the slice's files,
 *        inherited as they are and still valid (a private local arbiter
 *        is the parent's: forgotten);
 *   window                        the outage window the daemon gave.
 * Outside it: shim_gate_on and shim_gate_cu (set once at start-up and
 * read-only after), and the per-thread state (shim_gate_t; the fork
 * child's one thread resets its own in the same function).
 *
 * The first cache lines hold what every gated launch reads or counts:
 * the fast path touches nothing else of it. */
struct shim_gate_state {
        /* ---- the launch path ---- */
        struct shim_src *_Atomic cur_src; /* where leases come from (NULL: not started) */
        _Atomic uint64_t joined;          /* key of the hold this process launches in */
        _Atomic uint64_t unit_ns;         /* device time of one launch (estimate) */
        /* Launches between their gate and the driver's return (low 32
         * bits), and launches that entered the gate (high 32 bits,
         * wrapping: "nothing launched since the last look"), in one word
         * so that a launch counts itself with one atomic add. The
         * background thread ends a daemon hold early only when no launch
         * is in flight and every stream of the hold is empty; a launch
         * counts itself in before the gate reads the hold (seq_cst), so it
         * either is seen there or sees the hold closed. */
        _Atomic uint64_t inflight;
        struct shim_src src_local, src_daemon, src_window;

        /* ---- waiting for a lease, talking to the daemon ---- */
        _Alignas(64) _Atomic uint64_t closed_key; /* daemon: hold this process reported DONE for */
        _Atomic uint64_t want_gen; /* daemon: WANT sent while the page showed this gen */
        _Atomic uint64_t launches; /* flushed per-thread launch counts */
        _Atomic int waiters;       /* threads waiting for a lease */
        _Atomic uint64_t window;   /* outage window (gs_arb_page.window; 0: none); survives fork */
        _Atomic bool told_pending; /* daemon: the last thing it heard was "pending" */
        const struct gs_slice_conf *conf; /* survives fork */

        /* ---- start-up and the background thread, under hold.mu ---- */
        bool started, bg_running;
        bool unit_learned; /* a probe replaced the initial unit_ns (survives fork) */
        pthread_cond_t bg_cv; /* re-made monotonic at start */
        uint64_t hold_key, hold_gen; /* the hold this process is in (0: none) */
        int hold_src;
        uint64_t unused_reported; /* daemon lease last reported unused */
        /* The hold, and the gate entries, when it was last seen empty. */
        uint64_t early_key, early_entries, early_at;

        /* ---- holds and the unit probe (shim_gate_hold.c) ---- */
        struct shim_hold_state {
                pthread_mutex_t mu; /* the hold lock: everything of the gate marked "under hold.mu" */
                struct shim_hrec open;
                struct shim_hrec drains[SHIM_HOLD_MAX_DRAINS];
                unsigned n_drains;
                bool draining; /* a hold's events are in use outside the lock */
                pthread_cond_t drain_cv;
                bool warned_streams;
                struct shim_probe probe;
        } hold;

        /* ---- the daemon link (shim_gate_daemon.c) ---- */
        struct shim_link_state {
                pthread_mutex_t mu; /* fd and sends */
                int fd;
                struct gs_arb_page *page; /* mapped once, kept (read-only); survives fork */
                _Atomic uint64_t epoch;
                _Atomic bool linked;
        } link;

        /* ---- local enforcement (shim_gate_local.c) ---- */
        struct shim_local_state *local; /* mapped once, kept; survives fork */
};
extern struct shim_gate_state shim_gs;

#define SHIM_INFLIGHT(w) ((int32_t)(uint32_t)(w))
#define SHIM_ENTRIES(w) ((uint32_t)((w) >> 32))
#define SHIM_INFLIGHT_ONE ((1ull << 32) | 1u)

static inline void shim_gate_inflight_inc(void)
{
        atomic_fetch_add_explicit(&shim_gs.inflight, SHIM_INFLIGHT_ONE, memory_order_seq_cst);
}

static inline void shim_gate_inflight_dec(void)
{
        atomic_fetch_sub_explicit(&shim_gs.inflight, 1, memory_order_release);
}

/* ---- the launch path's clock (shim_gate_clock.c) ---- */

/* Checks once whether the TSC can stand in for CLOCK_MONOTONIC (x86-64,
 * the kernel's clocksource is "tsc") and takes the first calibration
 * sample. Hold lock held (the gate's start). */
void shim_clock_start(void);
/* Reads CLOCK_MONOTONIC and, where the TSC is usable and calibrated,
 * re-anchors this thread's TSC clock on it (checking the old anchor
 * against it first: off by more than 200 us, the TSC is given up for the
 * process, logged). Returns the time read. Any thread. */
uint64_t shim_clock_anchor(struct shim_gate_tls *tp);
/* Fork child: nothing to reset but the thread's anchor (shim_gate_t). */

static inline uint64_t shim_gate_fast_now(struct shim_gate_tls *tp)
{
#if defined(__x86_64__)
        uint64_t d = __builtin_ia32_rdtsc() - tp->tsc0;
        if (__builtin_expect(d < tp->dmax, 1))
                return tp->ns0 + ((d * tp->mult) >> 32);
#else
        (void)tp;
#endif
        return shim_gate_now();
}

/* Keep in step with admit() in shim_gate.c (AHEAD_SLACK_NS there). */
#define SHIM_GATE_AHEAD_NS (GS_ARB_AHEAD_NS + 250 * 1000ull)

static inline bool shim_gate_fast(CUstream s)
{
        struct shim_gate_tls *tp = &shim_gate_t;
        const _Atomic uint64_t *sp = tp->seqp;
        if (!sp || s != tp->stream ||
            atomic_load_explicit(&shim_gs.cur_src, memory_order_relaxed) != tp->src ||
            atomic_load_explicit(&shim_gs.joined, memory_order_seq_cst) != tp->key ||
            atomic_load_explicit(sp, memory_order_acquire) != tp->seq)
                return false;
        uint64_t now = shim_gate_fast_now(tp);
        if (now >= tp->until)
                return false;
        uint64_t unit = atomic_load_explicit(&shim_gs.unit_ns, memory_order_relaxed);
        uint64_t q = tp->qend > now ? tp->qend : now;
        if (q > now && q + unit > now + SHIM_GATE_AHEAD_NS)
                return false;
        tp->qend = q + unit;
        tp->count++;
        return true;
}

#endif /* SHIM_GATE_H */
