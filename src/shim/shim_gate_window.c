/* SPDX-License-Identifier: Apache-2.0 */
/* Outage windows: local enforcement for a slice whose daemon went away.
 *
 * While it answers, the daemon gives every slice of a GPU a window of
 * every GS_ARB_WINDOW_PERIOD_NS (struct gs_arb_page.window, on the lease
 * page the tenant can only read): disjoint windows, each as long as the
 * slice's share of the period. The gate remembers it. When the daemon is
 * gone (stopped, killed, stale, restarting), each process of the slice
 * launches only inside that window of CLOCK_MONOTONIC, which every process
 * on the node reads alike: no two slices' windows overlap, so each slice
 * gets its share of the device whatever its neighbours do, without any
 * shared writable state (nothing a tenant could forge) and without
 * talking to anyone. The price: a window its slice leaves idle is not lent.
 *
 * Each process publishes the window as a lease on a private page (same
 * layout as the daemon's, read by the gate the same way), gen = the
 * period's number + 1. A hold is measured as any other (shim_gate_hold.c);
 * device time beyond the window (a kernel longer than what was left of it)
 * is debt, taken off the next windows' ends, at most WINDOW_DEBT_MAX
 * periods' worth so that no launch waits longer than about a second. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "arbiter_page.h"
#include "shim.h"
#include "shim_gate.h"

#define US 1000ull
/* Launches stop this long before the window ends: a thread keeps about
 * GS_ARB_AHEAD_NS queued, which then drains inside the window. */
#define WINDOW_MARGIN_NS GS_ARB_AHEAD_NS
/* Device time a hold may take beyond its window before it is debt (the
 * queued-work bound's slack, a late wake-up). */
#define WINDOW_TOLERANCE_NS (500 * US)
/* Debt never makes a launch wait more than this many periods. */
#define WINDOW_DEBT_MAX 8u

static struct {
        pthread_mutex_t mu;
        struct gs_arb_page page; /* private; the gate's src_window reads it */
        uint64_t k;              /* the period whose window is published (+1; 0: none) */
        uint64_t start, until;   /* that window, as published (debt taken off) */
        uint64_t debt_ns;
} win = { .mu = PTHREAD_MUTEX_INITIALIZER };

struct gs_arb_page *shim_window_page(void)
{
        return &win.page;
}

void shim_window_learn(const struct gs_arb_page *p)
{
        if (!p)
                return;
        uint64_t w = atomic_load_explicit(&((struct gs_arb_page *)p)->window, memory_order_acquire);
        uint32_t off = GS_ARB_WINDOW_OFF(w), len = GS_ARB_WINDOW_LEN(w);
        if (!(w & GS_ARB_WINDOW_VALID) || len < 1 || len > 1000 || off + len > 1000)
                w = 0; /* none, or nonsense: keep to the slice's own share */
        uint64_t old = atomic_exchange_explicit(&shim_gs.window, w, memory_order_acq_rel);
        if (old != w && w)
                shim_log("compute: outage window %u..%u milli of every %llu ms (used while the "
                         "daemon is gone)",
                         off, off + len, (unsigned long long)(GS_ARB_WINDOW_PERIOD_NS / 1000000));
}

/* Window of period k: [start, end) with the margin and the debt taken off
 * the end. False when nothing of it is left. Lock held; consumes debt. */
static bool window_of(uint64_t w, uint64_t k, uint64_t *start, uint64_t *until)
{
        const uint64_t P = GS_ARB_WINDOW_PERIOD_NS;
        uint64_t len = P * GS_ARB_WINDOW_LEN(w) / 1000u;
        uint64_t margin = len / 4 < WINDOW_MARGIN_NS ? len / 4 : WINDOW_MARGIN_NS;
        uint64_t use = len - margin;
        uint64_t cut = win.debt_ns < use ? win.debt_ns : use;
        win.debt_ns -= cut;
        *start = k * P + P * GS_ARB_WINDOW_OFF(w) / 1000u;
        *until = *start + use - cut;
        return *until > *start;
}

int shim_window_tick(uint64_t now, struct gs_arb_decision *d)
{
        uint64_t w = atomic_load_explicit(&shim_gs.window, memory_order_acquire);
        if (!w)
                return -ENODEV;
        pthread_mutex_lock(&win.mu);
        if (!win.k || win.until <= now) {
                /* The next window not over yet, from this period on (or
                 * after the last one published); debt may use some up. */
                uint64_t k = now / GS_ARB_WINDOW_PERIOD_NS;
                if (win.k > k)
                        k = win.k;
                for (unsigned i = 0; i < WINDOW_DEBT_MAX + 3; i++, k++) {
                        uint64_t s, u;
                        if (window_of(w, k, &s, &u) && u > now) {
                                win.k = k + 1;
                                win.start = s;
                                win.until = u;
                                gs_arb_page_write(&win.page, win.k, s, u);
                                break;
                        }
                }
        }
        bool ok = win.k && win.until > now;
        *d = (struct gs_arb_decision){ .state = ok ? GS_ARB_GRANTED : GS_ARB_IDLE, .slot = ok ? 0 : -1,
                                       .gen = win.k, .grant_start = ok ? win.start : 0,
                                       .grant_until = ok ? win.until : 0,
                                       .wake_at = ok && win.start > now ? win.start
                                                                        : now + GS_ARB_WINDOW_PERIOD_NS };
        pthread_mutex_unlock(&win.mu);
        return 0;
}

void shim_window_report(uint64_t gen, uint64_t busy)
{
        uint64_t w = atomic_load_explicit(&shim_gs.window, memory_order_acquire);
        if (!w)
                return;
        pthread_mutex_lock(&win.mu);
        /* The hold of window `gen` was allowed its span plus the margin
         * (what drains after the last launch). */
        uint64_t allowed = GS_ARB_WINDOW_PERIOD_NS * GS_ARB_WINDOW_LEN(w) / 1000u;
        if (gen == win.k && win.until > win.start)
                allowed = win.until - win.start + WINDOW_MARGIN_NS;
        if (busy > allowed + WINDOW_TOLERANCE_NS) {
                uint64_t max = WINDOW_DEBT_MAX * (GS_ARB_WINDOW_PERIOD_NS * GS_ARB_WINDOW_LEN(w) / 1000u);
                win.debt_ns += busy - allowed - WINDOW_TOLERANCE_NS;
                if (win.debt_ns > max)
                        win.debt_ns = max;
        }
        pthread_mutex_unlock(&win.mu);
}

void shim_window_reset(void)
{
        /* A fork child (one thread): the lock may have been held by a
         * parent thread; the window itself stays known. */
        pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
        memcpy(&win.mu, &fresh, sizeof(fresh));
        win.debt_ns = 0;
        win.k = 0;
        win.start = win.until = 0;
        memset(&win.page, 0, sizeof(win.page));
}
