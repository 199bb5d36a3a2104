/* SPDX-License-Identifier: Apache-2.0 */
/* The compute arbiter: its contract (join, leave, want, idle, done, next)
 * and the shares it delivers on a simulated non-preemptive device
 * (src/core/arbiter_model.h). Simulated time only: deterministic, so the
 * tolerances are the product targets themselves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "arbiter.h"
#include "arbiter_model.h"
#include "arbiter_wire.h"

#define US 1000ull
#define MS (1000ull * US)
#define S (1000ull * MS)

/* The next hold is granted at `now` to `slot` and runs to its lease end;
 * as a first hold (tail unknown) it drains rather than being renewed or
 * handed on, and is settled with `busy` reported at `done_at`. */
static void settled_first_hold(struct gs_arbiter *a, int slot, uint64_t now, uint64_t busy,
                               uint64_t done_at)
{
        struct gs_arb_decision d;
        gs_arbiter_next(a, now, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_int_equal(d.slot, slot);
        gs_arbiter_next(a, d.wake_at, &d);
        assert_int_equal(d.state, GS_ARB_DRAINING);
        assert_int_equal(gs_arbiter_done(a, slot, d.gen, busy, true, done_at), 0);
}

/* ---- contract ---------------------------------------------------------- */

static void test_join_validation(void **state)
{
        (void)state;
        struct gs_arbiter a;
        assert_int_equal(gs_arbiter_init(&a, NULL), 0);
        assert_int_equal(gs_arbiter_slice_join(&a, 0, GS_POLICY_SHARE, 0), -EINVAL);
        assert_int_equal(gs_arbiter_slice_join(&a, 1001, GS_POLICY_SHARE, 0), -EINVAL);
        assert_int_equal(gs_arbiter_slice_join(&a, 10, (enum gs_compute_policy)7, 0), -EINVAL);
        for (int i = 0; i < GS_ARB_MAX_SLICES; i++)
                assert_int_equal(gs_arbiter_slice_join(&a, 10, GS_POLICY_SHARE, 0), i);
        assert_int_equal(gs_arbiter_slice_join(&a, 10, GS_POLICY_SHARE, 0), -ENOSPC);
        assert_int_equal(gs_arbiter_slice_leave(&a, 5, 0), 0);
        assert_int_equal(gs_arbiter_slice_leave(&a, 5, 0), -ENOENT);
        assert_int_equal(gs_arbiter_slice_leave(&a, 64, 0), -ENOENT);
        assert_int_equal(gs_arbiter_want(&a, -1, 0), -ENOENT);
        assert_int_equal(gs_arbiter_slice_join(&a, 10, GS_POLICY_SHARE, 0), 5);
        struct gs_arbiter_params bad = { .quantum_ns = 7200 * S };
        assert_int_equal(gs_arbiter_init(&a, &bad), -EINVAL);
}

static void test_idle_gpu_nobody(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        gs_arbiter_slice_join(&a, 500, GS_POLICY_SHARE, 0);
        gs_arbiter_next(&a, 0, &d);
        assert_int_equal(d.state, GS_ARB_IDLE);
        assert_int_equal(d.slot, -1);
        assert_true(d.wake_at == GS_ARB_NEVER);
}

static void test_grant_lease_and_renewal(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        int s = gs_arbiter_slice_join(&a, 300, GS_POLICY_SHARE, 0);
        gs_arbiter_want(&a, s, 0);
        gs_arbiter_next(&a, 0, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_int_equal(d.slot, s);
        assert_true(d.new_grant);
        assert_true(d.grant_until == GS_ARB_DEFAULT_QUANTUM_NS);
        assert_true(d.wake_at == GS_ARB_DEFAULT_QUANTUM_NS - GS_ARB_DEFAULT_LEAD_NS);
        /* First hold: tail unknown, so it is settled before any renewal. */
        gs_arbiter_next(&a, d.wake_at, &d);
        assert_int_equal(d.state, GS_ARB_DRAINING);
        uint64_t gen = d.gen;
        assert_int_equal(gs_arbiter_done(&a, s, gen, 4 * MS, true, 4 * MS + 20 * US), 0);
        /* A stale report is refused. */
        assert_int_equal(gs_arbiter_done(&a, s, gen, 4 * MS, true, 5 * MS), -ESTALE);
        gs_arbiter_next(&a, 4 * MS + 20 * US, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_true(d.gen != gen);
        /* Now the tail is known short: a lone slice is renewed in place,
         * and the lease it sees still starts where its hold began (a lease
         * in use must not appear to start in the future). */
        uint64_t until = d.grant_until, start = d.grant_start;
        gs_arbiter_next(&a, d.wake_at, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_false(d.new_grant);
        assert_true(d.grant_start == start);
        assert_true(d.grant_until == until + GS_ARB_DEFAULT_QUANTUM_NS);
}

/* A 50 ms kernel in a 4 ms lease: the measured 50 ms is charged (debt). */
static void test_overrun_becomes_debt(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        int x = gs_arbiter_slice_join(&a, 500, GS_POLICY_SHARE, 0);
        int y = gs_arbiter_slice_join(&a, 500, GS_POLICY_SHARE, 0);
        gs_arbiter_want(&a, x, 0);
        gs_arbiter_want(&a, y, 0);
        settled_first_hold(&a, x, 0, 50 * MS, 50 * MS);
        assert_true(a.s[x].charged_ns == 50 * MS);
        assert_true(a.s[x].debt_ns == 46 * MS);
        /* x's virtual time is ahead by the whole 50 ms (100 ms at 500m), so
         * y holds the GPU next, and keeps it (renewals) until it catches up. */
        assert_true(a.s[x].vtime - a.s[y].vtime >= 100 * MS);
        gs_arbiter_next(&a, 50 * MS, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_int_equal(d.slot, y);
}

/* A holder that never reports is detached after the drain timeout and the
 * GPU moves on; its late report is still applied. */
static void test_drain_timeout(void **state)
{
        (void)state;
        struct gs_arbiter_params p = { .drain_timeout_ns = 100 * MS };
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, &p);
        int x = gs_arbiter_slice_join(&a, 500, GS_POLICY_SHARE, 0);
        int y = gs_arbiter_slice_join(&a, 500, GS_POLICY_SHARE, 0);
        gs_arbiter_want(&a, x, 0);
        gs_arbiter_want(&a, y, 0);
        gs_arbiter_next(&a, 0, &d);
        gs_arbiter_next(&a, d.wake_at, &d);
        assert_int_equal(d.state, GS_ARB_DRAINING);
        uint64_t gen = d.gen, deadline = d.wake_at;
        gs_arbiter_next(&a, deadline - 1, &d);
        assert_int_equal(d.state, GS_ARB_DRAINING);
        gs_arbiter_next(&a, deadline, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_int_equal(d.slot, y);
        assert_true(a.s[x].late);
        /* The charge is the report, clamped to the wall time since the
         * grant was issued (at 0). */
        assert_int_equal(gs_arbiter_done(&a, x, gen, 150 * MS, true, deadline + MS), 0);
        assert_false(a.s[x].late);
        assert_true(a.s[x].charged_ns == deadline + MS);
}

/* Request/response: a slice whose hold ended (pipelined hand-off, so its
 * report comes late) reports DONE with work pending while a lender holds
 * the GPU: the lender's lease is cut as a WANT would cut it, instead of
 * the waker waiting a whole lease. */
static void test_done_pending_cuts_lender(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        int r = gs_arbiter_slice_join(&a, 300, GS_POLICY_SHARE, 0);
        int n = gs_arbiter_slice_join(&a, 700, GS_POLICY_SHARE, 0);
        gs_arbiter_want(&a, r, 0);
        gs_arbiter_want(&a, n, 0);
        /* First holds (tails unknown) are settled before anything else. */
        settled_first_hold(&a, r, 0, 1 * MS, 4 * MS);
        settled_first_hold(&a, n, 4 * MS, 4 * MS, 8 * MS);
        gs_arbiter_next(&a, 8 * MS, &d);
        assert_int_equal(d.slot, r);
        uint64_t rgen = d.gen;
        /* r's lease ends; its tail is known short, so n gets the GPU at
         * once (pipelined) and r is late until it reports. */
        gs_arbiter_next(&a, d.wake_at, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_int_equal(d.slot, n);
        assert_true(a.s[r].late);
        uint64_t n_start = d.grant_start;
        assert_true(d.grant_until == n_start + GS_ARB_DEFAULT_QUANTUM_NS);
        /* r used little of its lease (one short request) and a new request
         * is waiting: its report cuts n's lease to start + min_grant. */
        uint64_t t = n_start + 200 * US;
        assert_int_equal(gs_arbiter_done(&a, r, rgen, 200 * US, true, t), 0);
        gs_arbiter_next(&a, t, &d);
        assert_int_equal(d.slot, n);
        assert_true(d.grant_until == n_start + GS_ARB_DEFAULT_MIN_GRANT_NS);
}

/* A WANT from a slice that is already pending (its flag never cleared)
 * still takes the GPU back from a lender. */
static void test_want_when_pending_cuts(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        int r = gs_arbiter_slice_join(&a, 300, GS_POLICY_SHARE, 0);
        int n = gs_arbiter_slice_join(&a, 700, GS_POLICY_SHARE, 0);
        gs_arbiter_want(&a, n, 0);
        gs_arbiter_next(&a, 0, &d);
        assert_int_equal(d.slot, n);
        /* r is pending but was not eligible (late) when n's lease began. */
        a.s[r].pending = true;
        a.s[r].late = true;
        a.s[r].late_until = GS_ARB_NEVER;
        gs_arbiter_want(&a, r, 2 * MS);
        gs_arbiter_next(&a, 2 * MS, &d);
        assert_true(d.grant_until == GS_ARB_DEFAULT_QUANTUM_NS); /* late: no claim */
        a.s[r].late = false;
        gs_arbiter_want(&a, r, 2 * MS);
        gs_arbiter_next(&a, 2 * MS, &d);
        assert_int_equal(d.slot, n);
        assert_true(d.grant_until == 2 * MS);
}

/* An idle report from the holder ends its hold at once (the GPU goes to
 * the next pending slice without waiting for the lease to run out). */
static void test_idle_holder_ends_at_once(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        int x = gs_arbiter_slice_join(&a, 500, GS_POLICY_SHARE, 0);
        int y = gs_arbiter_slice_join(&a, 500, GS_POLICY_SHARE, 0);
        gs_arbiter_want(&a, x, 0);
        gs_arbiter_next(&a, 0, &d);
        assert_int_equal(d.slot, x);
        gs_arbiter_want(&a, y, 0);
        /* x drained and has nothing more: its report ends the hold now. */
        assert_int_equal(gs_arbiter_done(&a, x, d.gen, 300 * US, false, 500 * US), 0);
        gs_arbiter_next(&a, 500 * US, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_int_equal(d.slot, y);
        assert_true(d.grant_start == 500 * US);
        assert_true(a.s[x].charged_ns == 300 * US);
}

/* A request/response slice ends each hold as soon as its request drained
 * (the shim sees its streams empty): it is charged the busy time, not the
 * lease, the early end is no overrun (no debt, short tail), and so its
 * next request still has the better claim against a saturating neighbour
 * with a larger share: its WANT cuts the neighbour's lease. */
static void test_early_end_keeps_claim(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        int r = gs_arbiter_slice_join(&a, 300, GS_POLICY_SHARE, 0);
        int n = gs_arbiter_slice_join(&a, 700, GS_POLICY_SHARE, 0);
        gs_arbiter_want(&a, n, 0);
        uint64_t t = 0;
        for (int req = 0; req < 50; req++) {
                /* The neighbour holds from r's last DONE on (it saturates);
                 * a request arrives 3 ms into its lease. */
                gs_arbiter_next(&a, t, &d);
                if (d.slot != n || d.state != GS_ARB_GRANTED) {
                        /* The neighbour's previous hold drains: settle it exactly. */
                        assert_int_equal(d.state, GS_ARB_DRAINING);
                        assert_int_equal(d.slot, n);
                        gs_arbiter_done(&a, n, d.gen, d.grant_until - d.grant_start, true, t);
                        gs_arbiter_next(&a, t, &d);
                }
                assert_int_equal(d.slot, n);
                uint64_t ngen = d.gen, nstart = d.grant_start;
                t += 3 * MS;
                gs_arbiter_want(&a, r, t);
                assert_true(a.grant_until <= t + 1 * MS);
                /* The cut lease ends; the neighbour reports what it used. */
                t = a.grant_until;
                gs_arbiter_next(&a, t, &d);
                if (d.state == GS_ARB_DRAINING) {
                        gs_arbiter_done(&a, n, ngen, t - nstart, true, t);
                        gs_arbiter_next(&a, t, &d);
                }
                assert_int_equal(d.state, GS_ARB_GRANTED);
                assert_int_equal(d.slot, r);
                if (a.s[n].late) /* handed on pipelined: its report follows */
                        assert_int_equal(gs_arbiter_done(&a, n, ngen, t - nstart, true, t), 0);
                /* 1 ms of work, then the streams are empty: early DONE. */
                uint64_t rgen = d.gen;
                t += 1100 * US;
                assert_int_equal(gs_arbiter_done(&a, r, rgen, 1 * MS, false, t), 0);
                assert_false(a.s[r].pending);
                assert_true(a.s[r].tail_ns <= 100 * US);
        }
        assert_true(a.s[r].debt_ns <= 50 * 100 * US);
        assert_true(a.s[r].charged_ns == 50 * MS);
}

/* The holder's process dies: the GPU is free at once. */
static void test_dead_holder_released_now(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        int x = gs_arbiter_slice_join(&a, 700, GS_POLICY_SHARE, 0);
        int y = gs_arbiter_slice_join(&a, 300, GS_POLICY_SHARE, 0);
        gs_arbiter_want(&a, x, 0);
        gs_arbiter_want(&a, y, 0);
        gs_arbiter_next(&a, 0, &d);
        assert_int_equal(d.slot, x);
        assert_int_equal(gs_arbiter_slice_leave(&a, x, 1 * MS), 0);
        gs_arbiter_next(&a, 1 * MS, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_int_equal(d.slot, y);
        assert_true(d.grant_start == 1 * MS);
        /* A report from the dead slot is refused. */
        assert_int_equal(gs_arbiter_done(&a, x, 1, 0, false, 2 * MS), -ENOENT);
}

/* A cap slice with no credit is skipped even on an idle GPU, and the
 * arbiter says when to look again. */
static void test_cap_throttle_wake(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        int x = gs_arbiter_slice_join(&a, 100, GS_POLICY_CAP, 0);
        gs_arbiter_want(&a, x, 0);
        settled_first_hold(&a, x, 0, 4 * MS, 4 * MS);
        /* Credit: 4 ms burst - 4 ms used + 0.4 ms earned < 1 ms minimum; it
         * earns the missing 0.6 ms in 6 ms. */
        gs_arbiter_next(&a, 4 * MS, &d);
        assert_int_equal(d.state, GS_ARB_IDLE);
        assert_true(d.wake_at == 10 * MS);
        gs_arbiter_next(&a, d.wake_at - 1, &d);
        assert_int_equal(d.state, GS_ARB_IDLE);
        gs_arbiter_next(&a, d.wake_at, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
}

/* Time waited for a lease: from the WANT (or a report saying work waits)
 * to the start of the next lease, or to an IDLE; a cap slice's throttling
 * counts, a holder's own lease does not. */
static void test_wait_cap_throttled(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        int x = gs_arbiter_slice_join(&a, 100, GS_POLICY_CAP, 0);
        assert_true(gs_arbiter_wait_ns(&a, x, 5 * MS) == 0);
        gs_arbiter_want(&a, x, 0);
        settled_first_hold(&a, x, 0, 4 * MS, 4 * MS);
        assert_true(gs_arbiter_wait_ns(&a, x, 4 * MS) == 0); /* granted at once */
        /* Pending without credit from 4 ms until 10 ms (test_cap_throttle_wake). */
        gs_arbiter_next(&a, 4 * MS, &d);
        assert_int_equal(d.state, GS_ARB_IDLE);
        assert_true(gs_arbiter_wait_ns(&a, x, 7 * MS) == 3 * MS);
        gs_arbiter_next(&a, 10 * MS, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_true(gs_arbiter_wait_ns(&a, x, 10 * MS) == 6 * MS);
        assert_true(gs_arbiter_wait_ns(&a, x, 11 * MS) == 6 * MS); /* holding */
        assert_true(gs_arbiter_wait_ns(&a, 63, 11 * MS) == 0);     /* no such slot */
        /* Leaving forgets it. */
        gs_arbiter_slice_leave(&a, x, 11 * MS);
        int y = gs_arbiter_slice_join(&a, 100, GS_POLICY_CAP, 11 * MS);
        assert_int_equal(y, x);
        assert_true(gs_arbiter_wait_ns(&a, y, 12 * MS) == 0);
}

static void test_wait_behind_holder(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        int x = gs_arbiter_slice_join(&a, 500, GS_POLICY_SHARE, 0);
        int y = gs_arbiter_slice_join(&a, 500, GS_POLICY_SHARE, 0);
        int z = gs_arbiter_slice_join(&a, 500, GS_POLICY_SHARE, 0);
        gs_arbiter_want(&a, x, 0);
        gs_arbiter_next(&a, 0, &d);
        assert_int_equal(d.slot, x);
        /* y wakes at 1 ms: x's lease is cut at 1 ms, x drains and reports at
         * 1.2 ms with more work: y is granted then, x waits from then. */
        gs_arbiter_want(&a, y, 1 * MS);
        gs_arbiter_next(&a, 1 * MS, &d);
        assert_int_equal(d.state, GS_ARB_DRAINING);
        assert_true(gs_arbiter_wait_ns(&a, x, 1100 * US) == 0); /* its drain is no wait */
        gs_arbiter_want(&a, x, 1100 * US); /* nor a WANT during it, until the report */
        assert_true(gs_arbiter_wait_ns(&a, x, 1150 * US) == 0);
        assert_int_equal(gs_arbiter_done(&a, x, d.gen, 1 * MS, true, 1200 * US), 0);
        gs_arbiter_next(&a, 1200 * US, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_int_equal(d.slot, y);
        assert_true(gs_arbiter_wait_ns(&a, y, 1200 * US) == 200 * US);
        /* z asks at 2 ms and gives up at 3 ms: 1 ms. */
        gs_arbiter_want(&a, z, 2 * MS);
        assert_int_equal(gs_arbiter_idle(&a, z, 3 * MS), 0);
        assert_true(gs_arbiter_wait_ns(&a, z, 4 * MS) == 1 * MS);
        /* y's first hold drains; its report frees the GPU for x. */
        gs_arbiter_next(&a, d.wake_at, &d);
        assert_int_equal(d.state, GS_ARB_DRAINING);
        uint64_t end = d.grant_until;
        assert_int_equal(gs_arbiter_done(&a, y, d.gen, 4 * MS, false, end), 0);
        gs_arbiter_next(&a, end, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_int_equal(d.slot, x);
        /* (z's WANT cut y's lease; the clock is where the drain decision was.) */
        assert_true(d.grant_start >= end);
        assert_true(gs_arbiter_wait_ns(&a, x, d.grant_start + 1 * MS) == d.grant_start - 1200 * US);
        assert_true(gs_arbiter_wait_ns(&a, y, d.grant_start + 1 * MS) == 200 * US);
}

/* Time that goes backwards is treated as the last time seen; a waker gets
 * no credit for its idle time. */
static void test_clock_and_no_banked_credit(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        int x = gs_arbiter_slice_join(&a, 500, GS_POLICY_SHARE, 0);
        int y = gs_arbiter_slice_join(&a, 500, GS_POLICY_SHARE, 0);
        gs_arbiter_want(&a, x, 0);
        gs_arbiter_next(&a, 10 * MS, &d);
        gs_arbiter_next(&a, 5 * MS, &d);
        assert_true(a.last_now == 10 * MS);
        /* x runs alone for a long time, then y wakes at the system virtual
         * time, not at 0. */
        a.s[x].vtime = 1000 * MS;
        a.vclock = 1000 * MS;
        gs_arbiter_want(&a, y, 20 * MS);
        assert_true(a.s[y].vtime == 1000 * MS);
}

/* Virtual times are shifted down long before they could overflow. */
static void test_renormalise(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        int x = gs_arbiter_slice_join(&a, 1, GS_POLICY_SHARE, 0);
        int y = gs_arbiter_slice_join(&a, 1, GS_POLICY_SHARE, 0);
        a.s[x].vtime = (1ull << 62) + 5;
        a.s[y].vtime = (1ull << 62) + 9;
        a.vclock = (1ull << 62) + 5;
        gs_arbiter_want(&a, x, 0);
        gs_arbiter_want(&a, y, 0);
        gs_arbiter_next(&a, 0, &d);
        assert_true(a.vclock < (1ull << 62));
        assert_true(a.s[y].vtime - a.s[x].vtime == 4);
        assert_int_equal(d.slot, x);
}

/* ---- the shim<->daemon frames ----------------------------------------- */

static void test_wire_roundtrip_and_rejects(void **state)
{
        (void)state;
        uint8_t b[GS_ARB_MSG_SIZE];
        struct gs_arb_msg m = { .type = GS_ARB_MSG_DONE, .gen = 42, .value = 4 * MS,
                                .flags = GS_ARB_F_PENDING }, out;
        gs_arb_msg_encode(b, &m);
        assert_int_equal(gs_arb_msg_decode(b, sizeof(b), &out), 0);
        assert_int_equal(out.type, GS_ARB_MSG_DONE);
        assert_true(out.gen == 42 && out.value == 4 * MS && out.flags == GS_ARB_F_PENDING);
        assert_string_equal(gs_arb_msg_type_name(out.type), "done");
        assert_int_equal(gs_arb_msg_decode(b, sizeof(b) - 1, &out), -EAGAIN);
        b[24] = 2; /* unknown flag */
        assert_int_equal(gs_arb_msg_decode(b, sizeof(b), &out), -EBADMSG);
        m.value = GS_ARB_MAX_BUSY_NS + 1;
        gs_arb_msg_encode(b, &m);
        assert_int_equal(gs_arb_msg_decode(b, sizeof(b), &out), -EBADMSG);
        m = (struct gs_arb_msg){ .type = GS_ARB_MSG_WANT };
        gs_arb_msg_encode(b, &m);
        b[0] ^= 1;
        assert_int_equal(gs_arb_msg_decode(b, sizeof(b), &out), -EPROTO);
        b[0] ^= 1;
        b[4] = 9;
        assert_int_equal(gs_arb_msg_decode(b, sizeof(b), &out), -EPROTONOSUPPORT);
        b[4] = 1;
        b[6] = 77;
        assert_int_equal(gs_arb_msg_decode(b, sizeof(b), &out), -EBADMSG);
}

/* ---- shares on the simulated device ------------------------------------ */

static void run_model(const struct gs_arbm_config *c, struct gs_arbm_result *r)
{
        assert_int_equal(gs_arbm_run(c, r), 0);
}

static void mix(struct gs_arbm_config *c, const uint32_t *milli, unsigned n, uint64_t kernel,
                uint32_t batch, enum gs_compute_policy pol, uint64_t duration)
{
        memset(c, 0, sizeof(*c));
        c->n = n;
        c->duration_ns = duration;
        c->handoff_ns = 50 * US;
        for (unsigned i = 0; i < n; i++)
                c->slices[i] = (struct gs_arbm_slice){ .milli = milli[i], .policy = pol,
                                                       .kernel_ns = kernel, .batch = batch };
}

/* Every slice within 2 points over every 1 s window and 1 point over every
 * 10 s window, after a 1 s warm-up. */
static void assert_shares(const uint32_t *milli, unsigned n, uint64_t kernel, uint32_t batch,
                          enum gs_compute_policy pol)
{
        struct gs_arbm_config c;
        struct gs_arbm_result r;
        mix(&c, milli, n, kernel, batch, pol, 12 * S);
        run_model(&c, &r);
        for (unsigned i = 0; i < n; i++) {
                double want = milli[i] / 1000.0;
                double e1 = gs_arbm_window_error(&r, i, 1 * S, 1 * S, c.duration_ns, want);
                double e10 = gs_arbm_window_error(&r, i, 10 * S, 1 * S, c.duration_ns, want);
                if (e1 > 2.0 || e10 > 1.0)
                        fail_msg("slice %u (%um, kernel %llu ns x%u, %s): %.2f pts over 1 s, "
                                 "%.2f over 10 s",
                                 i, milli[i], (unsigned long long)kernel, batch,
                                 pol == GS_POLICY_CAP ? "cap" : "share", e1, e10);
        }
        gs_arbm_result_done(&r);
}

static const uint32_t mix3[] = { 100, 300, 600 };
static const uint32_t mix4[] = { 50, 150, 300, 500 };
static const uint32_t mix8[] = { 50, 50, 100, 100, 150, 150, 200, 200 };

static void test_shares_mix3(void **state)
{
        (void)state;
        assert_shares(mix3, 3, 10 * US, 1, GS_POLICY_SHARE);
        assert_shares(mix3, 3, 1 * MS, 1, GS_POLICY_SHARE);
        assert_shares(mix3, 3, 50 * MS, 1, GS_POLICY_SHARE);
        assert_shares(mix3, 3, 10 * US, 1, GS_POLICY_CAP);
        assert_shares(mix3, 3, 1 * MS, 1, GS_POLICY_CAP);
}

static void test_shares_mix4(void **state)
{
        (void)state;
        assert_shares(mix4, 4, 10 * US, 1, GS_POLICY_SHARE);
        assert_shares(mix4, 4, 1 * MS, 1, GS_POLICY_SHARE);
        assert_shares(mix4, 4, 50 * MS, 1, GS_POLICY_SHARE);
        assert_shares(mix4, 4, 1 * MS, 1, GS_POLICY_CAP);
}

static void test_shares_mix8(void **state)
{
        (void)state;
        assert_shares(mix8, 8, 10 * US, 1, GS_POLICY_SHARE);
        assert_shares(mix8, 8, 1 * MS, 1, GS_POLICY_SHARE);
        assert_shares(mix8, 8, 50 * MS, 1, GS_POLICY_SHARE);
        assert_shares(mix8, 8, 10 * US, 1, GS_POLICY_CAP);
}

/* CUDA graphs: one gate decision admits a batch of kernels. */
static void test_shares_graphs(void **state)
{
        (void)state;
        assert_shares(mix3, 3, 10 * US, 100, GS_POLICY_SHARE);
        assert_shares(mix4, 4, 1 * MS, 10, GS_POLICY_SHARE);
        assert_shares(mix8, 8, 1 * MS, 10, GS_POLICY_CAP);
}

/* Shares that do not add up to the GPU: capacity is lent in proportion. */
static void test_share_lends_in_proportion(void **state)
{
        (void)state;
        static const uint32_t m[] = { 100, 200 };
        struct gs_arbm_config c;
        struct gs_arbm_result r;
        mix(&c, m, 2, 1 * MS, 1, GS_POLICY_SHARE, 5 * S);
        run_model(&c, &r);
        assert_true(gs_arbm_window_error(&r, 0, 1 * S, 1 * S, c.duration_ns, 1.0 / 3) <= 2.0);
        assert_true(gs_arbm_window_error(&r, 1, 1 * S, 1 * S, c.duration_ns, 2.0 / 3) <= 2.0);
        gs_arbm_result_done(&r);
}

static void lone(enum gs_compute_policy pol, uint64_t kernel, double *lo, double *hi)
{
        struct gs_arbm_config c = { .n = 1, .duration_ns = 5 * S, .handoff_ns = 50 * US };
        c.slices[0] = (struct gs_arbm_slice){ .milli = 300, .policy = pol, .kernel_ns = kernel };
        struct gs_arbm_result r;
        run_model(&c, &r);
        *lo = 1;
        *hi = 0;
        for (uint64_t t = 0; t + S <= c.duration_ns; t += 10 * MS) {
                double s = gs_arbm_share(&r, 0, t, t + S);
                *lo = s < *lo ? s : *lo;
                *hi = s > *hi ? s : *hi;
        }
        gs_arbm_result_done(&r);
}

static void test_work_conservation(void **state)
{
        (void)state;
        double lo, hi;
        lone(GS_POLICY_SHARE, 10 * US, &lo, &hi);
        assert_true(lo >= 0.95);
        lone(GS_POLICY_SHARE, 50 * MS, &lo, &hi);
        assert_true(lo >= 0.95);
}

static void test_cap_alone(void **state)
{
        (void)state;
        double lo, hi;
        lone(GS_POLICY_CAP, 10 * US, &lo, &hi);
        assert_true(lo >= 0.29 && hi <= 0.31);
        lone(GS_POLICY_CAP, 1 * MS, &lo, &hi);
        assert_true(lo >= 0.29 && hi <= 0.31);
}

/* A slice that wakes while another borrows the whole GPU runs within one
 * quantum. */
static void test_idle_taken_back(void **state)
{
        (void)state;
        static const uint64_t kernels[] = { 10 * US, 1 * MS };
        for (size_t k = 0; k < 2; k++) {
                struct gs_arbm_config c = { .n = 2, .duration_ns = 2 * S, .handoff_ns = 50 * US };
                c.slices[0] = (struct gs_arbm_slice){ .milli = 700, .kernel_ns = kernels[k] };
                c.slices[1] = (struct gs_arbm_slice){ .milli = 300, .kernel_ns = kernels[k],
                                                      .on_ns = 1 * S + 333 * US };
                struct gs_arbm_result r;
                run_model(&c, &r);
                uint64_t waited = r.first_after_on[1] - c.slices[1].on_ns;
                if (waited > GS_ARB_DEFAULT_QUANTUM_NS)
                        fail_msg("kernel %llu ns: the waker waited %llu ns",
                                 (unsigned long long)kernels[k], (unsigned long long)waited);
                /* And it then gets its share back. */
                double s = gs_arbm_share(&r, 1, 1 * S + 10 * MS, 2 * S);
                assert_true(s > 0.28 && s < 0.32);
                gs_arbm_result_done(&r);
        }
}

/* The holder's process dies mid-lease: the other slice runs right away. */
static void test_dead_holder_model(void **state)
{
        (void)state;
        struct gs_arbm_config c = { .n = 2, .duration_ns = 1 * S, .handoff_ns = 50 * US };
        c.slices[0] = (struct gs_arbm_slice){ .milli = 500, .kernel_ns = 1 * MS };
        c.slices[1] = (struct gs_arbm_slice){ .milli = 500, .kernel_ns = 1 * MS };
        /* Slice 0 holds [0, 4 ms) first; it dies 1 ms into its lease. */
        c.slices[0].die_ns = 1 * MS;
        c.probe_ns = 1 * MS;
        struct gs_arbm_result r;
        run_model(&c, &r);
        assert_true(r.first_after_probe[1] <= 1 * MS + c.handoff_ns);
        assert_true(gs_arbm_share(&r, 1, 10 * MS, 1 * S) >= 0.99);
        gs_arbm_result_done(&r);
}

/* Once the holder's tail is known (1 ms here), its successor's lease starts
 * when that tail is predicted to drain, not at the lease end (the two would
 * share the device); an earlier drain report moves the start up. */
static void test_pipelined_start_after_tail(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        int x = gs_arbiter_slice_join(&a, 500, GS_POLICY_SHARE, 0);
        int y = gs_arbiter_slice_join(&a, 500, GS_POLICY_SHARE, 0);
        gs_arbiter_want(&a, x, 0);
        gs_arbiter_want(&a, y, 0);
        /* First holds: tails unknown, each drains; each overran by 1 ms. */
        settled_first_hold(&a, x, 0, 5 * MS, 5 * MS);
        settled_first_hold(&a, y, 5 * MS, 5 * MS, 10 * MS);
        gs_arbiter_next(&a, 10 * MS, &d);
        assert_int_equal(d.slot, x);
        assert_true(d.grant_until == 14 * MS);
        uint64_t xgen = d.gen;
        /* x's lease ends at 14 ms with ~1 ms queued: y starts at 15 ms. */
        gs_arbiter_next(&a, d.wake_at, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_int_equal(d.slot, y);
        assert_true(d.new_grant);
        assert_true(d.grant_start == 15 * MS);
        /* x drained sooner: y's lease starts at x's report. */
        assert_int_equal(gs_arbiter_done(&a, x, xgen, 4 * MS + 500 * US, true, 14 * MS + 600 * US), 0);
        gs_arbiter_next(&a, 14 * MS + 600 * US, &d);
        assert_int_equal(d.slot, y);
        assert_true(d.grant_start == 14 * MS + 600 * US);
        assert_true(d.grant_until == 18 * MS + 600 * US);
}

/* A slice that wakes while the holder's renewal is decided but not begun
 * ties with it, and that tie goes to the waker: the renewal is given up
 * (ended where it would begin, nothing charged for it), the holder drains
 * and the waker follows. */
static void test_waker_tie_cuts_renewal(void **state)
{
        (void)state;
        struct gs_arbiter a;
        struct gs_arb_decision d;
        gs_arbiter_init(&a, NULL);
        int x = gs_arbiter_slice_join(&a, 300, GS_POLICY_SHARE, 0);
        gs_arbiter_want(&a, x, 0);
        settled_first_hold(&a, x, 0, 4 * MS, 4 * MS);
        gs_arbiter_next(&a, 4 * MS, &d);
        assert_true(d.grant_until == 8 * MS);
        gs_arbiter_next(&a, d.wake_at, &d); /* 7.8 ms: renewed to 12 ms */
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_true(d.grant_until == 12 * MS);
        uint64_t charged = a.s[x].charged_ns;
        int y = gs_arbiter_slice_join(&a, 300, GS_POLICY_SHARE, 7 * MS + 900 * US);
        gs_arbiter_want(&a, y, 7 * MS + 900 * US);
        gs_arbiter_next(&a, 7 * MS + 900 * US, &d);
        assert_int_equal(d.slot, x);
        assert_true(d.grant_until == 8 * MS);
        assert_true(a.s[x].charged_ns == charged); /* the empty renewal costs nothing */
        /* x's work ran 0.2 ms past its lease: y now has the better claim. */
        assert_int_equal(gs_arbiter_done(&a, x, d.gen, 4 * MS + 200 * US, true, 8 * MS + 200 * US), 0);
        gs_arbiter_next(&a, 8 * MS + 200 * US, &d);
        assert_int_equal(d.state, GS_ARB_GRANTED);
        assert_int_equal(d.slot, y);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_join_validation),
                cmocka_unit_test(test_idle_gpu_nobody),
                cmocka_unit_test(test_grant_lease_and_renewal),
                cmocka_unit_test(test_overrun_becomes_debt),
                cmocka_unit_test(test_drain_timeout),
                cmocka_unit_test(test_dead_holder_released_now),
                cmocka_unit_test(test_done_pending_cuts_lender),
                cmocka_unit_test(test_want_when_pending_cuts),
                cmocka_unit_test(test_idle_holder_ends_at_once),
                cmocka_unit_test(test_early_end_keeps_claim),
                cmocka_unit_test(test_cap_throttle_wake),
                cmocka_unit_test(test_wait_cap_throttled),
                cmocka_unit_test(test_wait_behind_holder),
                cmocka_unit_test(test_clock_and_no_banked_credit),
                cmocka_unit_test(test_renormalise),
                cmocka_unit_test(test_wire_roundtrip_and_rejects),
                cmocka_unit_test(test_shares_mix3),
                cmocka_unit_test(test_shares_mix4),
                cmocka_unit_test(test_shares_mix8),
                cmocka_unit_test(test_shares_graphs),
                cmocka_unit_test(test_share_lends_in_proportion),
                cmocka_unit_test(test_work_conservation),
                cmocka_unit_test(test_cap_alone),
                cmocka_unit_test(test_idle_taken_back),
                cmocka_unit_test(test_dead_holder_model),
                cmocka_unit_test(test_pipelined_start_after_tail),
                cmocka_unit_test(test_waker_tie_cuts_renewal),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
