/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu device timeline: a lazy, exact discrete-event simulation.
 *
 * Each device runs one context at a time. Contexts with pending work are
 * served round-robin in time slices of st->timeslice_ns; a kernel longer than
 * a slice is preempted and resumed (time-slicing without MPS). Whenever any
 * process enters the simulator it advances the device from the last
 * simulated time to the present. Work items complete in FIFO order per
 * context; zero-length items (event markers, gs_busy(0)) complete as soon as
 * they reach the head of their queue while the context is scheduled, and
 * markers right behind a kernel complete when it does. */
#include "sim_state.h"

#include <string.h>

static struct sim_work *head_item(struct sim_state *st, int c)
{
        struct sim_ctx_rec *x = &st->ctx[c];
        return x->count ? &x->q[x->head] : NULL;
}

static void complete_head(struct sim_state *st, int c, uint64_t t)
{
        struct sim_ctx_rec *x = &st->ctx[c];
        struct sim_work *w = &x->q[x->head];
        x->done_seq = w->seq;
        if (w->event >= 0 && w->event < SIM_MAX_EVENTS && st->ev[w->event].in_use) {
                st->ev[w->event].seq = w->seq;
                st->ev[w->event].time_ns = t;
        }
        x->head = (x->head + 1) % SIM_QUEUE_MAX;
        x->count--;
}

/* Next context after `from` (cyclically, over the records ever used; -1:
 * from the first) on dev with pending work, or -1. */
static int next_ctx(const struct sim_state *st, int dev, int from)
{
        int n = sim_ctx_slots(st);
        if (from < 0 || from >= n)
                from = n - 1;
        for (int k = 1; k <= n; k++) {
                int c = (from + k) % n;
                const struct sim_ctx_rec *x = &st->ctx[c];
                if (x->in_use && x->dev == dev && x->count)
                        return c;
        }
        return -1;
}

static void snapshot(struct sim_state *st, int dev)
{
        struct sim_dev_rec *d = &st->dev[dev];
        if (d->now_ns < d->last_snap_ns + SIM_SNAP_PERIOD_NS)
                return;
        d->last_snap_ns = d->now_ns;
        d->snaps[d->snap_head % SIM_SNAPS] = (struct sim_snap){ d->now_ns, d->busy_ns };
        d->snap_head++;
        for (int p = 0; p < sim_proc_slots(st); p++) {
                struct sim_proc_rec *pr = &st->proc[p];
                if (pr->state != SIM_PROC_ALIVE || !pr->nctx[dev])
                        continue;
                pr->snaps[dev][pr->snap_head[dev] % SIM_SNAPS] =
                        (struct sim_snap){ d->now_ns, pr->busy[dev] };
                pr->snap_head[dev]++;
        }
}

void sim_advance(struct sim_state *st, int dev, uint64_t now)
{
        struct sim_dev_rec *d = &st->dev[dev];
        while (d->now_ns < now) {
                int c = d->cur_ctx;
                bool runnable = c >= 0 && st->ctx[c].in_use && st->ctx[c].dev == dev &&
                                st->ctx[c].count;
                if (!runnable || d->now_ns >= d->slice_end) {
                        int n = next_ctx(st, dev, c);
                        if (n < 0) {
                                d->cur_ctx = -1;
                                d->now_ns = now;
                                break;
                        }
                        d->cur_ctx = c = n;
                        d->slice_end = d->now_ns + st->timeslice_ns;
                }
                struct sim_work *w = head_item(st, c);
                if (w->remaining_ns == 0) {
                        complete_head(st, c, d->now_ns);
                        continue;
                }
                uint64_t run = w->remaining_ns;
                if (run > d->slice_end - d->now_ns)
                        run = d->slice_end - d->now_ns;
                if (run > now - d->now_ns)
                        run = now - d->now_ns;
                w->remaining_ns -= run;
                d->now_ns += run;
                d->busy_ns += run;
                st->ctx[c].busy_ns += run;
                int p = st->ctx[c].proc;
                if (p >= 0 && p < SIM_MAX_PROCS)
                        st->proc[p].busy[dev] += run;
                if (w->remaining_ns == 0) {
                        /* The context is still resident when its kernel
                         * ends: markers right behind it complete at that
                         * instant, even when the slice ends there too (a
                         * kernel ending exactly on a slice boundary is
                         * common here, rare on hardware, and must not hold
                         * an event back for a whole round). */
                        complete_head(st, c, d->now_ns);
                        while (st->ctx[c].count && head_item(st, c)->remaining_ns == 0)
                                complete_head(st, c, d->now_ns);
                }
                if (d->now_ns >= d->slice_end && next_ctx(st, dev, c) == c)
                        d->slice_end = d->now_ns + st->timeslice_ns; /* alone: keep going */
                snapshot(st, dev);
        }
        /* zero-length items at the head of the running context finish now */
        int c = d->cur_ctx;
        while (c >= 0 && st->ctx[c].count && head_item(st, c)->remaining_ns == 0)
                complete_head(st, c, d->now_ns);
        if (c < 0) {
                /* idle device: pick up markers waiting in any queue */
                for (int k = 0; k < sim_ctx_slots(st); k++) {
                        struct sim_ctx_rec *x = &st->ctx[k];
                        if (!x->in_use || x->dev != dev)
                                continue;
                        while (x->count && head_item(st, k)->remaining_ns == 0)
                                complete_head(st, k, d->now_ns);
                }
        }
        snapshot(st, dev);
}

void sim_advance_all(struct sim_state *st, uint64_t now)
{
        for (unsigned dev = 0; dev < st->ndev && dev < SIM_MAX_DEVICES; dev++)
                sim_advance(st, (int)dev, now);
}

uint64_t sim_enqueue(struct sim_state *st, int c, uint64_t ns, int32_t event)
{
        struct sim_ctx_rec *x = &st->ctx[c];
        uint32_t i = (x->head + x->count) % SIM_QUEUE_MAX;
        x->q[i] = (struct sim_work){ .seq = ++x->enq_seq, .remaining_ns = ns, .event = event };
        x->count++;
        struct sim_dev_rec *d = &st->dev[x->dev];
        if (d->cur_ctx < 0 && x->count == 1 && ns == 0)
                complete_head(st, c, d->now_ns); /* idle device: marker done at once */
        return x->enq_seq;
}

uint64_t sim_pending_ns(const struct sim_state *st, int c, uint64_t seq)
{
        const struct sim_ctx_rec *x = &st->ctx[c];
        uint64_t sum = 0;
        for (uint32_t k = 0; k < x->count; k++) {
                const struct sim_work *w = &x->q[(x->head + k) % SIM_QUEUE_MAX];
                if (w->seq > seq)
                        break;
                sum += w->remaining_ns;
        }
        return sum;
}

int sim_ctx_alloc(struct sim_state *st, int proc, int dev)
{
        int n = sim_ctx_slots(st), slot = -1;
        for (int i = 0; i < n && slot < 0; i++)
                if (!st->ctx[i].in_use)
                        slot = i;
        if (slot < 0 && n < SIM_MAX_CTXS)
                slot = n; /* records above the mark are all free */
        if (slot < 0)
                return -1;
        if (slot >= n)
                st->ctx_slots = (uint32_t)slot + 1;
        struct sim_ctx_rec *x = &st->ctx[slot];
        uint64_t seq = x->enq_seq; /* keep sequence numbers monotonic per slot */
        x->in_use = 1;
        x->proc = proc;
        x->dev = dev;
        x->head = 0;
        x->count = 0;
        x->enq_seq = x->done_seq = seq;
        x->busy_ns = 0;
        return slot;
}

void sim_ctx_release(struct sim_state *st, int c)
{
        struct sim_ctx_rec *x = &st->ctx[c];
        x->count = 0;
        x->head = 0;
        x->done_seq = x->enq_seq;
        x->in_use = 0;
        if (x->dev >= 0 && x->dev < SIM_MAX_DEVICES && st->dev[x->dev].cur_ctx == c)
                st->dev[x->dev].cur_ctx = -1;
}

static uint64_t busy_at(const struct sim_snap *snaps, uint32_t head, uint64_t t, uint64_t *t_at)
{
        uint32_t n = head < SIM_SNAPS ? head : SIM_SNAPS;
        const struct sim_snap *best = NULL, *oldest = NULL;
        for (uint32_t k = 0; k < n; k++) {
                const struct sim_snap *s = &snaps[(head - 1 - k) % SIM_SNAPS];
                oldest = s;
                if (s->t_ns <= t) {
                        best = s;
                        break;
                }
        }
        if (!best)
                best = oldest;
        if (!best) {
                *t_at = 0;
                return 0;
        }
        *t_at = best->t_ns;
        return best->busy_ns;
}

uint64_t sim_proc_busy_at(const struct sim_state *st, int p, int dev, uint64_t t,
                          uint64_t *t_at)
{
        const struct sim_proc_rec *pr = &st->proc[p];
        return busy_at(pr->snaps[dev], pr->snap_head[dev], t, t_at);
}

uint64_t sim_dev_busy_at(const struct sim_state *st, int dev, uint64_t t, uint64_t *t_at)
{
        const struct sim_dev_rec *d = &st->dev[dev];
        return busy_at(d->snaps, d->snap_head, t, t_at);
}
