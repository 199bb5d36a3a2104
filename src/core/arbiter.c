/* SPDX-License-Identifier: Apache-2.0 */
/* The per-GPU compute arbiter: stride scheduling over leases of the GPU,
 * with provisional charging, debt from measured drain time, and a credit
 * throttle for `cap` slices. See arbiter.h for the contract and
 * docs/internals/compute-arbiter.md for why it is built this way. */
#include "arbiter.h"

#include <errno.h>
#include <string.h>

#include "macro.h"

/* Virtual time is kept in "ns at 1000 milli": a slice of share m that is
 * charged t ns advances by t * 1000 / m. When the system virtual time gets
 * near the top of 64 bits (a 1m slice alone for about half a year) every
 * virtual time is shifted down; only differences matter. */
#define VSCALE 1000u
#define VRENORM_AT (1ull << 62)
#define VRENORM_KEEP (1ull << 40)

/* No single charge is larger than this (a daemon stalled for an hour must
 * not overflow anything). */
#define CHARGE_MAX_NS (3600ull * 1000000000ull)

static uint64_t clamp_charge(uint64_t ns)
{
        return ns > CHARGE_MAX_NS ? CHARGE_MAX_NS : ns;
}

static uint64_t to_virtual(uint64_t ns, uint32_t milli)
{
        return clamp_charge(ns) * VSCALE / milli;
}

static bool slot_ok(const struct gs_arbiter *a, int slot)
{
        return slot >= 0 && slot < GS_ARB_MAX_SLICES && a->s[slot].used;
}

/* The cap credit ceiling: the configured burst plus the slice's last tail,
 * because a non-preemptible unit longer than the burst would otherwise lose
 * the credit it accrues while others hold the GPU. */
static uint64_t cap_burst(const struct gs_arbiter *a, const struct gs_arb_slice *s)
{
        uint64_t tail = s && s->tail_ns != GS_ARB_NEVER ? s->tail_ns : 0;
        return a->p.cap_burst_ns + GS_MIN(tail, a->p.drain_timeout_ns);
}

/* The credit a waiting cap slice may hold: the burst plus what it accrues
 * in CAP_WAIT_NS. Credit earned while it waits its turn behind other
 * holders is the arbiter's debt to it, not banked idleness: clipped at the
 * burst, a 200m slice among eight waits ~28 ms per round and would lose
 * 1.6 ms of its 5.6 ms each round (the device idled 22% in that case). */
#define CAP_WAIT_NS (1000ull * GS_ARB_NS_PER_MS)

/* Cap credit accrues at milli/1000 of wall time, up to the ceiling: the
 * burst (idleness banks at most one burst), more for a pending slice while
 * another one holds the GPU (see CAP_WAIT_NS). */
static void cap_refill(struct gs_arbiter *a, struct gs_arb_slice *s, uint64_t now)
{
        if (s->policy != GS_POLICY_CAP || now <= s->cap_stamp_ns)
                return;
        uint64_t gain = clamp_charge(now - s->cap_stamp_ns) * s->milli / 1000u;
        int64_t burst = (int64_t)cap_burst(a, s);
        /* Waiting behind another holder, not slow by itself: a slice alone
         * (local enforcement) that is pending but not launching banks no
         * more than the burst. */
        if (s->pending && a->holder >= 0 && &a->s[a->holder] != s)
                burst += (int64_t)(CAP_WAIT_NS * s->milli / 1000u);
        s->cap_stamp_ns = now;
        s->cap_credit_ns = s->cap_credit_ns + (int64_t)gain;
        if (s->cap_credit_ns > burst)
                s->cap_credit_ns = burst;
}

/* Mark a slice pending or idle; its cap credit is refilled first under
 * the ceiling of the state it was in. */
static void set_pending(struct gs_arbiter *a, struct gs_arb_slice *s, bool pending, uint64_t now)
{
        cap_refill(a, s, GS_MAX(now, a->last_now));
        s->pending = pending;
}

/* The slice holds a lease (one that may start ahead, when pipelined). */
static bool holding(const struct gs_arbiter *a, int slot)
{
        return a->holder == slot && a->state == GS_ARB_GRANTED;
}

/* Waiting for a lease: from t, unless it waits already. */
static void wait_start(struct gs_arb_slice *s, uint64_t t)
{
        if (s->wait_since == GS_ARB_NEVER)
                s->wait_since = t;
}

/* No longer waiting at t (a lease starts then, or it went idle). */
static void wait_stop(struct gs_arb_slice *s, uint64_t t)
{
        if (s->wait_since == GS_ARB_NEVER)
                return;
        if (t > s->wait_since)
                s->wait_ns += t - s->wait_since;
        s->wait_since = GS_ARB_NEVER;
}

/* The slice holds a lease or its ended hold still drains (its queued work
 * runs on the device until its report settles the hold). */
static bool has_hold(const struct gs_arbiter *a, int slot)
{
        return a->holder == slot || a->s[slot].late;
}

/* After a report or a request changed whether slot has work: it waits
 * while it has work and no lease. */
static void wait_track(struct gs_arbiter *a, int slot, uint64_t t)
{
        struct gs_arb_slice *s = &a->s[slot];
        if (!s->pending)
                wait_stop(s, t);
        else if (!holding(a, slot))
                wait_start(s, t);
}

/* Charge (delta > 0) or refund (delta < 0) device time to a slice. */
static void charge(struct gs_arb_slice *s, int64_t delta)
{
        if (delta >= 0) {
                uint64_t d = (uint64_t)delta;
                s->vtime += to_virtual(d, s->milli);
                s->charged_ns += d;
        } else {
                uint64_t d = (uint64_t)(-(delta + 1)) + 1u;
                uint64_t v = to_virtual(d, s->milli);
                s->vtime = s->vtime > v ? s->vtime - v : 0;
                s->charged_ns = s->charged_ns > d ? s->charged_ns - d : 0;
        }
        if (s->policy == GS_POLICY_CAP)
                s->cap_credit_ns -= delta;
}

/* Smallest credit with which a cap slice may be granted: below it the
 * grant would be shorter than the hand-off it costs. (Any positive credit
 * was tried: a cap slice then ran on leases of min_grant in debt, and one
 * of two cap slices sharing a GPU under local enforcement sometimes took
 * 70% at 600m; not understood yet, so not shipped.) */
static int64_t cap_min(const struct gs_arbiter *a)
{
        return (int64_t)GS_MIN(a->p.min_grant_ns, a->p.cap_burst_ns);
}

static bool eligible(struct gs_arbiter *a, struct gs_arb_slice *s, uint64_t now)
{
        if (!s->used || !s->pending)
                return false;
        if (s->late) {
                if (now < s->late_until)
                        return false;
                s->late = false; /* the report never came: stop waiting */
        }
        if (s->policy == GS_POLICY_CAP) {
                cap_refill(a, s, now);
                return s->cap_credit_ns >= cap_min(a);
        }
        return true;
}

/* When a throttled cap slice will have enough credit again. */
static uint64_t cap_ready_at(const struct gs_arbiter *a, const struct gs_arb_slice *s)
{
        int64_t need = cap_min(a) - s->cap_credit_ns;
        if (need <= 0)
                return s->cap_stamp_ns;
        uint64_t wall = ((uint64_t)need * 1000u + s->milli - 1u) / s->milli;
        return s->cap_stamp_ns + wall;
}

/* The eligible slice with the least virtual time; `prefer` wins ties (so a
 * holder is renewed rather than swapped for an equal). Slices that were not
 * eligible while the system moved on (throttled, late) start no earlier
 * than the system virtual time: no banked credit. -1 when none. */
static int pick(struct gs_arbiter *a, uint64_t now, int prefer)
{
        int best = -1;
        for (int i = 0; i < GS_ARB_MAX_SLICES; i++) {
                struct gs_arb_slice *s = &a->s[i];
                if (!eligible(a, s, now))
                        continue;
                if (s->vtime < a->vclock && i != prefer)
                        s->vtime = a->vclock;
                if (best < 0 || s->vtime < a->s[best].vtime ||
                    (s->vtime == a->s[best].vtime && i == prefer))
                        best = i;
        }
        return best;
}

static void renormalise(struct gs_arbiter *a)
{
        if (a->vclock < VRENORM_AT)
                return;
        uint64_t shift = a->vclock - VRENORM_KEEP;
        for (int i = 0; i < GS_ARB_MAX_SLICES; i++) {
                struct gs_arb_slice *s = &a->s[i];
                s->vtime = s->vtime > shift ? s->vtime - shift : 0;
        }
        a->vclock -= shift;
}

static uint64_t grant_length(const struct gs_arbiter *a, const struct gs_arb_slice *s)
{
        uint64_t q = a->p.quantum_ns;
        if (s->policy == GS_POLICY_CAP && s->cap_credit_ns > 0 && (uint64_t)s->cap_credit_ns < q)
                q = (uint64_t)s->cap_credit_ns;
        return q;
}

int gs_arbiter_init(struct gs_arbiter *a, const struct gs_arbiter_params *params)
{
        const uint64_t hour = CHARGE_MAX_NS;
        struct gs_arbiter_params p = { 0 };
        if (params)
                p = *params;
        if (p.quantum_ns > hour || p.min_grant_ns > hour || p.drain_timeout_ns > hour ||
            p.cap_burst_ns > hour || p.lead_ns > hour)
                return -EINVAL;
        if (!p.quantum_ns)
                p.quantum_ns = GS_ARB_DEFAULT_QUANTUM_NS;
        if (!p.min_grant_ns)
                p.min_grant_ns = GS_ARB_DEFAULT_MIN_GRANT_NS;
        if (!p.drain_timeout_ns)
                p.drain_timeout_ns = GS_ARB_DEFAULT_DRAIN_TIMEOUT_NS;
        if (!p.cap_burst_ns)
                p.cap_burst_ns = p.quantum_ns;
        if (!p.lead_ns)
                p.lead_ns = GS_ARB_DEFAULT_LEAD_NS;
        if (p.lead_ns > p.quantum_ns / 2)
                p.lead_ns = p.quantum_ns / 2;
        if (!p.pipeline_tail_ns)
                p.pipeline_tail_ns = GS_ARB_DEFAULT_PIPELINE_TAIL_NS;
        memset(a, 0, sizeof(*a));
        a->p = p;
        a->holder = -1;
        a->state = GS_ARB_IDLE;
        return 0;
}

int gs_arbiter_slice_join(struct gs_arbiter *a, uint32_t milli, enum gs_compute_policy policy,
                          uint64_t now)
{
        if (milli < 1 || milli > 1000 || (policy != GS_POLICY_SHARE && policy != GS_POLICY_CAP))
                return -EINVAL;
        for (int i = 0; i < GS_ARB_MAX_SLICES; i++) {
                struct gs_arb_slice *s = &a->s[i];
                if (s->used)
                        continue;
                memset(s, 0, sizeof(*s));
                s->used = true;
                s->milli = milli;
                s->policy = policy;
                s->vtime = a->vclock;
                s->tail_ns = s->tail_hi_ns = GS_ARB_NEVER;
                s->wait_since = GS_ARB_NEVER;
                s->cap_credit_ns = (int64_t)cap_burst(a, s);
                s->cap_stamp_ns = GS_MAX(now, a->last_now);
                a->n_slices++;
                return i;
        }
        return -ENOSPC;
}

int gs_arbiter_slice_leave(struct gs_arbiter *a, int slot, uint64_t now)
{
        if (!slot_ok(a, slot))
                return -ENOENT;
        if (a->holder == slot) {
                a->holder = -1;
                a->state = GS_ARB_IDLE;
        }
        memset(&a->s[slot], 0, sizeof(a->s[slot]));
        a->n_slices--;
        return 0;
}

int gs_arbiter_slice_update(struct gs_arbiter *a, int slot, uint32_t milli,
                            enum gs_compute_policy policy, uint64_t now)
{
        if (!slot_ok(a, slot))
                return -ENOENT;
        if (milli < 1 || milli > 1000 || (policy != GS_POLICY_SHARE && policy != GS_POLICY_CAP))
                return -EINVAL;
        struct gs_arb_slice *s = &a->s[slot];
        if (policy == GS_POLICY_CAP && s->policy != GS_POLICY_CAP) {
                s->cap_credit_ns = (int64_t)cap_burst(a, s);
                s->cap_stamp_ns = GS_MAX(now, a->last_now);
        }
        cap_refill(a, s, now);
        s->milli = milli;
        s->policy = policy;
        return 0;
}

/* A pending, eligible slice that does not hold the GPU claims it back from
 * a lender: when its virtual time is below the holder's (counting what the
 * holder has used of its running grant; or equal, for a `waker` while the
 * holder's renewal has not begun), the holder's grant is cut to
 * max(now, hold start + min_grant). */
static void reclaim(struct gs_arbiter *a, int slot, uint64_t now, bool waker)
{
        struct gs_arb_slice *s = &a->s[slot];
        if (a->state != GS_ARB_GRANTED || a->holder == slot || a->holder < 0 ||
            !eligible(a, s, now))
                return;
        if (s->vtime < a->vclock)
                s->vtime = a->vclock; /* idle time is lent, not banked */
        struct gs_arb_slice *h = &a->s[a->holder];
        uint64_t used = now > a->grant_start ? now - a->grant_start : 0;
        /* A tie goes to a waker while the holder's renewal is decided but
         * not begun (lead_ns early): a waker starts at the system virtual
         * time, which then equals the holder's, and without this it waited
         * the whole renewed lease (noisy neighbour p99 +5 ms, +1.1 with).
         * Other ties stay with the holder. */
        uint64_t hv = h->vtime + to_virtual(used, h->milli);
        if (s->vtime > hv || (s->vtime == hv && !(waker && now < a->grant_start)))
                return;
        /* min_grant protects a new hold, not each renewal of a long one. */
        uint64_t cut = GS_MAX(now, a->hold_start + a->p.min_grant_ns);
        cut = GS_MAX(cut, a->grant_start); /* a renewal not begun: ends unused */
        if (cut < a->grant_until) {
                a->grant_until = cut;
                a->cut = true;
        }
}

int gs_arbiter_want(struct gs_arbiter *a, int slot, uint64_t now)
{
        if (!slot_ok(a, slot))
                return -ENOENT;
        struct gs_arb_slice *s = &a->s[slot];
        if (!s->pending) {
                set_pending(a, s, true, now);
                if (s->vtime < a->vclock)
                        s->vtime = a->vclock; /* idle time is lent, not banked */
        }
        /* Even when it was pending already (a report said so, or a WANT
         * crossed a hand-off), a waiting slice takes the GPU back. */
        reclaim(a, slot, now, true);
        /* A WANT during its own drain waits from the report that ends it. */
        if (!has_hold(a, slot))
                wait_track(a, slot, GS_MAX(now, a->last_now));
        return 0;
}

int gs_arbiter_idle(struct gs_arbiter *a, int slot, uint64_t now)
{
        if (!slot_ok(a, slot))
                return -ENOENT;
        set_pending(a, &a->s[slot], false, now);
        wait_stop(&a->s[slot], GS_MAX(now, a->last_now));
        if (a->holder == slot && a->state == GS_ARB_GRANTED && a->grant_until > now)
                a->grant_until = GS_MAX(now, a->grant_start); /* ends at the next call */
        return 0;
}

/* Settle a finished hold: replace the provisional charge with the measured
 * one (clamped to the wall time of the hold). `running_ns`: the part of the
 * running grant used before an early end (not charged provisionally, and
 * no overrun): only what the hold took beyond provisional + running is
 * debt and tail. */
static void settle(struct gs_arb_slice *s, uint64_t busy_ns, uint64_t running_ns, uint64_t now)
{
        uint64_t span = now > s->hold_issued ? now - s->hold_issued : 0;
        uint64_t real = clamp_charge(GS_MIN(busy_ns, span));
        int64_t delta = (int64_t)real - (int64_t)clamp_charge(s->provisional_ns);
        charge(s, delta);
        int64_t over = delta - (int64_t)clamp_charge(running_ns);
        if (over > 0)
                s->debt_ns += (uint64_t)over;
        s->tail_ns = over > 0 ? (uint64_t)over : 0;
        /* The high-water mark of recent tails (decays by an eighth per
         * hold): what a pipelined successor waits for. Predicting low
         * overlaps the two holders on the device, which time-slices them
         * and inflates both charges by a hardware slice; predicting high
         * costs at most the report's round trip (the start is moved up). */
        uint64_t hi = s->tail_hi_ns == GS_ARB_NEVER ? 0 : s->tail_hi_ns - s->tail_hi_ns / 8;
        s->tail_hi_ns = GS_MAX(hi, s->tail_ns);
        s->provisional_ns = 0;
}

int gs_arbiter_done(struct gs_arbiter *a, int slot, uint64_t gen, uint64_t busy_ns,
                    bool still_pending, uint64_t now)
{
        if (!slot_ok(a, slot))
                return -ENOENT;
        struct gs_arb_slice *s = &a->s[slot];
        bool current = a->holder == slot && a->gen == gen && a->state != GS_ARB_IDLE;
        bool late = s->late && s->hold_gen == gen;
        if (!current && !late) {
                set_pending(a, s, still_pending, now);
                wait_track(a, slot, GS_MAX(now, a->last_now));
                return -ESTALE;
        }
        uint64_t t = GS_MAX(now, a->last_now);
        uint64_t running = 0;
        if (current) {
                /* Ended at expiry (DRAINING) or early (GRANTED: idle, or the
                 * grant given up); an early end's running segment was never
                 * charged provisionally, and settle covers it either way. */
                if (a->state == GS_ARB_GRANTED && t > a->grant_start)
                        running = GS_MIN(t, a->grant_until) - a->grant_start;
                a->state = GS_ARB_IDLE;
                a->holder = -1;
        }
        s->late = false;
        settle(s, busy_ns, running, t);
        /* A pipelined successor waits for this slice's predicted drain:
         * the drain came sooner, so its lease starts now. */
        if (late && a->state == GS_ARB_GRANTED && a->hold_start == a->grant_start &&
            a->grant_start > t) {
                uint64_t len = a->grant_until - a->grant_start;
                a->hold_start = a->grant_start = t;
                a->grant_until = t + len;
        }
        bool woke = still_pending && !s->pending;
        set_pending(a, s, still_pending, t);
        if (woke && s->vtime < a->vclock)
                s->vtime = a->vclock;
        /* A late reporter with work waiting claims the GPU back from
         * whoever holds it now, as a WANT would. */
        if (still_pending)
                reclaim(a, slot, GS_MAX(now, a->last_now), false);
        wait_track(a, slot, t);
        return 0;
}

uint64_t gs_arbiter_wait_ns(const struct gs_arbiter *a, int slot, uint64_t now)
{
        if (!slot_ok(a, slot))
                return 0;
        const struct gs_arb_slice *s = &a->s[slot];
        uint64_t w = s->wait_ns;
        if (s->wait_since != GS_ARB_NEVER && now > s->wait_since)
                w += now - s->wait_since;
        return w;
}

static void decide_granted(struct gs_arbiter *a, struct gs_arb_decision *ret, bool fresh)
{
        ret->state = GS_ARB_GRANTED;
        ret->slot = a->holder;
        ret->gen = a->gen;
        /* The hold's start, not its running segment's: a renewal extends a
         * lease in use, and its segment may begin up to lead_ns ahead. */
        ret->grant_start = a->hold_start;
        ret->grant_until = a->grant_until;
        ret->wake_at = a->grant_until - GS_MIN(a->p.lead_ns, a->grant_until - a->grant_start);
        ret->new_grant = fresh;
}

static void decide_draining(struct gs_arbiter *a, struct gs_arb_decision *ret)
{
        ret->state = GS_ARB_DRAINING;
        ret->slot = a->holder;
        ret->gen = a->gen;
        ret->grant_start = a->grant_start;
        ret->grant_until = a->grant_until;
        ret->wake_at = a->drain_deadline;
        ret->new_grant = false;
}

static void begin_hold(struct gs_arbiter *a, int slot, uint64_t start, uint64_t now)
{
        struct gs_arb_slice *s = &a->s[slot];
        a->holder = slot;
        a->state = GS_ARB_GRANTED;
        a->gen++;
        a->hold_start = a->grant_start = start;
        a->grant_until = start + grant_length(a, s);
        a->cut = false;
        a->vclock = GS_MAX(a->vclock, s->vtime);
        s->hold_gen = a->gen;
        s->hold_issued = now;
        s->provisional_ns = 0;
        s->grants++;
        wait_stop(s, start);
}

/* The holder's lease ends at grant_until (at most lead_ns from now): charge
 * it provisionally, then extend it if the holder is still the best choice,
 * else hand the GPU on (pipelined when the holder's tail is known short) or
 * wait for the holder's drain report. A holder whose tail is long (units
 * longer than the lease) or unknown is never extended: its hold is settled
 * with the measured time first, so that decisions about long units are made
 * on exact charges (which keeps the stride order periodic). Returns true
 * when a new hold began. */
static bool boundary(struct gs_arbiter *a, uint64_t now)
{
        int h = a->holder;
        struct gs_arb_slice *s = &a->s[h];
        uint64_t end = a->grant_until;
        uint64_t seg = end - a->grant_start;
        charge(s, (int64_t)clamp_charge(seg));
        s->provisional_ns += seg;
        /* A lease cut for a waker (a serving slice's request) is not
         * pipelined: the waker starts when the lender's report says its
         * tail drained. Pipelined on a predicted tail, a request that met
         * a longer tail shared the device with it for a whole hardware
         * time slice (noisy neighbour p99 +5 ms, or +10 ms starting it at
         * once, against +2 ms waiting for the report). */
        bool short_tail = s->tail_hi_ns <= a->p.pipeline_tail_ns && !a->cut;
        int next = short_tail ? pick(a, now, h) : -1;
        if (next == h) {
                a->vclock = GS_MAX(a->vclock, s->vtime);
                a->grant_start = end;
                a->grant_until = end + grant_length(a, s);
                a->cut = false;
                return false;
        }
        if (next >= 0) {
                /* The old holder drains in the background; it is not eligible
                 * again until its report settles the hold. Its queued work
                 * (about its last tail) runs past `end`: the successor's
                 * lease starts when that is predicted to drain, so the two
                 * barely overlap on the device (an overlap time-slices them
                 * and blurs both measured charges) and the device does not
                 * idle for a report's round trip. An early report moves the
                 * start up (gs_arbiter_done). */
                s->late = true;
                s->late_until = end + a->p.drain_timeout_ns;
                begin_hold(a, next, GS_MAX(now, end + s->tail_hi_ns), now);
                return true;
        }
        a->state = GS_ARB_DRAINING;
        a->drain_deadline = GS_MAX(now, end) + a->p.drain_timeout_ns;
        return false;
}

/* The holder did not report its drain in time: move on without it. Its
 * provisional charge stands; its late report is still applied. */
static void detach(struct gs_arbiter *a, uint64_t now)
{
        struct gs_arb_slice *s = &a->s[a->holder];
        s->late = true;
        s->late_until = now + a->p.drain_timeout_ns;
        a->holder = -1;
        a->state = GS_ARB_IDLE;
}

static uint64_t idle_wake(struct gs_arbiter *a)
{
        uint64_t w = GS_ARB_NEVER;
        for (int i = 0; i < GS_ARB_MAX_SLICES; i++) {
                const struct gs_arb_slice *s = &a->s[i];
                if (!s->used || !s->pending)
                        continue;
                if (s->late)
                        w = GS_MIN(w, s->late_until);
                else if (s->policy == GS_POLICY_CAP)
                        w = GS_MIN(w, cap_ready_at(a, s));
        }
        return w;
}

void gs_arbiter_next(struct gs_arbiter *a, uint64_t now, struct gs_arb_decision *ret)
{
        if (now < a->last_now)
                now = a->last_now;
        a->last_now = now;
        renormalise(a);
        if (a->state == GS_ARB_GRANTED) {
                uint64_t lead = GS_MIN(a->p.lead_ns, a->grant_until - a->grant_start);
                if (now + lead < a->grant_until) {
                        decide_granted(a, ret, false);
                        return;
                }
                bool fresh = boundary(a, now);
                if (a->state == GS_ARB_GRANTED) {
                        decide_granted(a, ret, fresh);
                        return;
                }
        }
        if (a->state == GS_ARB_DRAINING) {
                if (now < a->drain_deadline) {
                        decide_draining(a, ret);
                        return;
                }
                detach(a, now);
        }
        int next = pick(a, now, -1);
        if (next >= 0) {
                begin_hold(a, next, now, now);
                decide_granted(a, ret, true);
                return;
        }
        ret->state = GS_ARB_IDLE;
        ret->slot = -1;
        ret->gen = a->gen;
        ret->grant_start = ret->grant_until = 0;
        ret->wake_at = idle_wake(a);
        ret->new_grant = false;
}
