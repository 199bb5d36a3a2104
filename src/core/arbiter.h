/* SPDX-License-Identifier: Apache-2.0 */
/* The per-GPU compute arbiter: who may launch work on one GPU, and until
 * when (pure policy: no I/O, no clock reads, no allocation; time is passed
 * in as CLOCK_MONOTONIC nanoseconds by the caller). One arbiter per GPU, in
 * gpusliced; the shim only ever sees its decisions (include/gpuslice/
 * arbiter_proto.h). The mechanism and its figures are described in
 * docs/internals/compute-arbiter.md.
 *
 * Model. Slices join with a share (milli of the GPU) and a policy. A slice
 * is either pending (it has work it wants to launch) or idle. The arbiter
 * lends the GPU to one slice at a time, as a lease ("grant") that ends at
 * `grant_until`. Among the pending slices it picks the one with the least
 * virtual time (stride scheduling: a slice's virtual time advances by
 * charged_ns * 1000 / milli), so over time each gets GPU time in proportion
 * to its share. A slice that wakes from idle starts at the current virtual
 * time (no credit banked while idle: idle capacity is lent, not repaid).
 *
 * Grants end at expiry or when the holder reports it went idle. The next
 * holder is decided `lead_ns` before a lease ends (the caller wakes at
 * decision.wake_at). At that point the holder is charged the lease's length
 * provisionally; if it is still the best choice its lease is extended in
 * place (no hand-off). Otherwise, if its recent holds overran by at most
 * pipeline_tail_ns (short kernels) and its lease was not cut for a waker,
 * the successor's lease starts when the old holder's queued work is
 * predicted to drain (lease end + its recent overrun; moved up when its
 * report comes sooner) and the old holder drains in the background; if not
 * (long kernels, nothing known yet, or a cut), the arbiter waits (state
 * DRAINING) for the holder's report. Either way the holder reports how much device time
 * its whole hold actually took once its work drained (gs_arbiter_done); the
 * difference from the provisional charge is applied to its virtual time, so
 * overruns (a 50 ms kernel in a 4 ms lease) become debt and the long-run
 * share holds. A holder that does not report within drain_timeout is
 * detached (the GPU moves on; its late report is still applied). At most
 * one slice's work is on the device at a time, except for a short tail,
 * which is what makes the holder's measured busy time exact.
 *
 * Policy `cap` additionally throttles a slice by credit = share x wall time
 * - charged time (capped at cap_burst_ns, so idleness banks at most one
 * burst): a cap slice with no credit is skipped, even on an idle GPU.
 *
 * Complexity: every call is O(n) in the slots (n <= GS_ARB_MAX_SLICES = 64).
 * Not thread-safe: the daemon calls it from one thread (or under one lock). */
#ifndef GS_ARBITER_H
#define GS_ARBITER_H

#include <stdbool.h>
#include <stdint.h>

#include "gpuslice/slice_conf.h" /* enum gs_compute_policy */

#define GS_ARB_MAX_SLICES 64
#define GS_ARB_NS_PER_MS 1000000ull
#define GS_ARB_NEVER UINT64_MAX

/* Defaults, justified in docs/internals/compute-arbiter.md. */
#define GS_ARB_DEFAULT_QUANTUM_NS (4 * GS_ARB_NS_PER_MS)
#define GS_ARB_DEFAULT_MIN_GRANT_NS (1 * GS_ARB_NS_PER_MS)
#define GS_ARB_DEFAULT_DRAIN_TIMEOUT_NS (250 * GS_ARB_NS_PER_MS)
#define GS_ARB_DEFAULT_LEAD_NS (200 * 1000ull)
#define GS_ARB_DEFAULT_PIPELINE_TAIL_NS (4 * GS_ARB_NS_PER_MS)

struct gs_arbiter_params {
        uint64_t quantum_ns;       /* grant length; 0 = default */
        uint64_t min_grant_ns;     /* a lender keeps at least this much of a grant
                                    * when a slice with a better claim wakes; 0 =
                                    * default; >= quantum disables cutting */
        uint64_t drain_timeout_ns; /* wait for a holder's drain report; 0 = default */
        uint64_t cap_burst_ns;     /* cap credit ceiling; 0 = quantum */
        uint64_t lead_ns;          /* decide a lease's successor (or renewal) this
                                    * long before it ends; 0 = default */
        uint64_t pipeline_tail_ns; /* hand off without waiting for the drain
                                    * report when the holder's recent tails
                                    * (busy beyond its leases; a decaying
                                    * high-water mark) were at most this; 0 =
                                    * default; GS_ARB_NEVER = always wait */
};

enum gs_arb_state {
        GS_ARB_IDLE = 0,     /* nobody holds the GPU and nobody may have it now */
        GS_ARB_GRANTED = 1,  /* `slot` holds the GPU until `grant_until` */
        GS_ARB_DRAINING = 2, /* `slot`'s grant ended; waiting for its drain report */
};

/* What gs_arbiter_next decided. */
struct gs_arb_decision {
        enum gs_arb_state state;
        int slot;             /* holder (GRANTED, DRAINING), else -1 */
        uint64_t gen;         /* grant generation: changes with every new hold */
        uint64_t grant_start; /* GRANTED: the hold's start; may lie ahead of
                               * now (a pipelined hand-off: the previous
                               * holder's work is predicted to drain then) */
        uint64_t grant_until; /* GRANTED: lease end (CLOCK_MONOTONIC ns) */
        uint64_t wake_at;     /* call gs_arbiter_next again at this time at the
                               * latest (GS_ARB_NEVER: only when an event comes) */
        bool new_grant;       /* GRANTED to a slice that did not hold it before
                               * (a hand-off: write the page, wake the shim) */
};

struct gs_arb_slice {
        bool used;
        bool pending;            /* has work it wants to launch */
        bool late;               /* detached holder whose drain report is due */
        uint64_t late_until;     /* late: stop waiting for the report then */
        uint64_t hold_gen;       /* generation of its last hold */
        uint64_t hold_issued;    /* when its last hold was decided (the charge
                                  * is clamped to the wall time since then) */
        enum gs_compute_policy policy;
        uint32_t milli;          /* 1..1000 */
        uint64_t vtime;          /* virtual time (ns at 1000 milli) */
        uint64_t provisional_ns; /* charged since the hold began, before the report */
        int64_t cap_credit_ns;   /* cap: share x wall - usage, <= cap_burst */
        uint64_t cap_stamp_ns;   /* cap: when credit was last refilled */
        uint64_t charged_ns;     /* total device time charged (metrics) */
        uint64_t grants;         /* holds begun (metrics) */
        uint64_t debt_ns;        /* total overrun beyond the provisional charge */
        uint64_t wait_ns;        /* total time waited for a lease (metrics; see
                                  * gs_arbiter_wait_ns) */
        uint64_t wait_since;     /* waiting since then; GS_ARB_NEVER: not waiting */
        uint64_t tail_ns;        /* last hold's overrun; GS_ARB_NEVER: none seen */
        uint64_t tail_hi_ns;     /* decaying high-water mark of tail_ns (same NEVER) */
};

/* One GPU's arbiter. Caller-owned; initialise with gs_arbiter_init. */
struct gs_arbiter {
        struct gs_arbiter_params p;
        struct gs_arb_slice s[GS_ARB_MAX_SLICES];
        unsigned n_slices;
        enum gs_arb_state state;
        int holder;            /* -1 when nobody */
        uint64_t gen;          /* generation of the current (or last) hold */
        uint64_t hold_start;   /* the current hold began (first grant) */
        uint64_t grant_start;  /* the current segment began (grant or renewal) */
        uint64_t grant_until;
        uint64_t drain_deadline;
        bool cut;              /* the current lease was cut for a waker */
        uint64_t vclock;       /* system virtual time: start tag of the last grant */
        uint64_t last_now;     /* time never goes backwards */
};

/* Reset `a` with `params` (NULL: defaults). Returns 0, or -EINVAL when
 * min_grant or cap_burst is set above an hour (nonsense). */
int gs_arbiter_init(struct gs_arbiter *a, const struct gs_arbiter_params *params);

/* A slice joins, idle, with `milli` (1..1000) and `policy`. Returns its slot
 * (0..63), -EINVAL for a bad share or policy, -ENOSPC when 64 slices are in. */
int gs_arbiter_slice_join(struct gs_arbiter *a, uint32_t milli, enum gs_compute_policy policy,
                          uint64_t now);

/* A slice leaves (its process exited or died; its last connection closed).
 * If it held the GPU, the hold ends at once and nothing more is charged.
 * Returns 0, or -ENOENT for a slot not in use. */
int gs_arbiter_slice_leave(struct gs_arbiter *a, int slot, uint64_t now);

/* Change a slice's share or policy (e.g. after a resize). Returns 0,
 * -ENOENT or -EINVAL. Its virtual time is kept. */
int gs_arbiter_slice_update(struct gs_arbiter *a, int slot, uint32_t milli,
                            enum gs_compute_policy policy, uint64_t now);

/* The slice has work to launch ("I want the GPU"). If a lender holds the GPU
 * and the waker has the better claim (or an equal one while the holder's
 * renewal has not begun), the holder's grant is cut to max(now, hold start
 * + min_grant) (a renewal not yet begun is given up): call gs_arbiter_next
 * afterwards. The
 * cut is considered also when the slice was marked pending already (a
 * report said so, or the flag outlived a hand-off). Returns 0 or -ENOENT.
 * Idempotent. */
int gs_arbiter_want(struct gs_arbiter *a, int slot, uint64_t now);

/* The slice has no more work ("idle"), reported by a slice that does not
 * hold the GPU. (The holder reports through gs_arbiter_done.) Returns 0 or
 * -ENOENT. */
int gs_arbiter_idle(struct gs_arbiter *a, int slot, uint64_t now);

/* The holder (or a detached late holder) reports that its hold is over and
 * its in-flight work drained: `busy_ns` is the device time the whole hold
 * took (measured by the shim), `still_pending` whether it has more work.
 * The charge is busy_ns, clamped to the wall time of the hold; the
 * difference from the provisional charge adjusts its virtual time. A
 * report from the current holder ends its hold at once (an idle holder
 * gives the GPU back before its lease runs out). A late reporter with
 * `still_pending` claims the GPU back from the holder as gs_arbiter_want
 * does. A report for a generation that is no longer current and not late
 * is ignored (-ESTALE; only the pending flag is taken). Returns 0, -ENOENT
 * or -ESTALE. */
int gs_arbiter_done(struct gs_arbiter *a, int slot, uint64_t gen, uint64_t busy_ns,
                    bool still_pending, uint64_t now);

/* The time slice `slot` has waited for the GPU since it joined, up to
 * `now` (ns): the time it had work waiting (a WANT: a thread is held at
 * the gate; or a report saying so) while it had no hold at all. Counted
 * from that WANT, or from the report that ends its hold saying work waits,
 * to the start of the lease it is granted next (a pipelined lease that
 * starts ahead counts up to its start), or to an IDLE. Throttling of a
 * `cap` slice without credit counts. Not counted: the drain of its own
 * ended hold (its queued work still runs on the device; a WANT then
 * counts from the report), and whatever the shim holds back within a
 * lease (its queued-work bound). So wait + device time stays within wall
 * time. 0 for a slot not in use. Pure: `now` is the caller's clock. */
uint64_t gs_arbiter_wait_ns(const struct gs_arbiter *a, int slot, uint64_t now);

/* Decide who holds the GPU at `now` (which must not go backwards; a smaller
 * value is treated as the last one seen). Expires, renews and hands off
 * grants, times out drains. Always succeeds; *ret describes the state. */
void gs_arbiter_next(struct gs_arbiter *a, uint64_t now, struct gs_arb_decision *ret);

#endif /* GS_ARBITER_H */
