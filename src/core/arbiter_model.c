/* SPDX-License-Identifier: Apache-2.0 */
/* Discrete-event model of one GPU under the compute arbiter (see
 * arbiter_model.h for what is modelled). Used by the unit tests and the
 * model benchmark; never by the daemon. */
#include "arbiter_model.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

#define MAX_MSGS 256
#define MAX_SAME_TIME 64

enum msg_kind { M_WANT, M_IDLE, M_DONE, M_LEAVE };

struct msg {
        bool used;
        enum msg_kind kind;
        unsigned i;
        uint64_t at;
        uint64_t gen;
        uint64_t busy;
        bool pending;
};

struct sim {
        const struct gs_arbm_config *cfg;
        struct gs_arbm_result *r;
        struct gs_arbiter arb;
        int slot[GS_ARBM_MAX_SLICES];
        bool alive[GS_ARBM_MAX_SLICES];
        bool active[GS_ARBM_MAX_SLICES];
        uint64_t q_end[GS_ARBM_MAX_SLICES]; /* end of the slice's last queued unit */
        uint64_t dev_end;                   /* end of everything queued */
        struct msg msgs[MAX_MSGS];
        uint64_t half;  /* one message's latency */
        uint64_t ahead; /* launch-ahead bound */
        /* The hold as the holder's shim sees it. */
        int holder;
        uint64_t hold_gen;
        uint64_t visible_at;
        uint64_t grant_start;
        uint64_t grant_until;
        uint64_t hold_busy;
        bool done_sent;
};

static uint64_t unit_ns(const struct gs_arbm_slice *s)
{
        return s->kernel_ns * (s->batch ? s->batch : 1u);
}

/* Add (sign > 0) or remove device time [start, end) of slice i in the bins. */
static void record(struct sim *m, unsigned i, uint64_t start, uint64_t end, int sign)
{
        struct gs_arbm_result *r = m->r;
        uint64_t limit = r->n_bins * r->bin_ns;
        uint64_t *bins = r->busy + (size_t)i * r->n_bins;
        if (end > limit)
                end = limit;
        while (start < end) {
                uint64_t b = start / r->bin_ns;
                uint64_t stop = GS_MIN(end, (b + 1) * r->bin_ns);
                if (sign > 0)
                        bins[b] += stop - start;
                else
                        bins[b] -= GS_MIN(bins[b], stop - start);
                start = stop;
        }
}

static void post(struct sim *m, enum msg_kind kind, unsigned i, uint64_t at, uint64_t gen,
                 uint64_t busy, bool pending)
{
        for (unsigned k = 0; k < MAX_MSGS; k++) {
                if (m->msgs[k].used)
                        continue;
                m->msgs[k] = (struct msg){ .used = true, .kind = kind, .i = i, .at = at,
                                           .gen = gen, .busy = busy, .pending = pending };
                return;
        }
        /* Cannot happen: at most a handful of messages per slice are in
         * flight. Dropping one would only make the model pessimistic. */
}

/* The oldest undelivered message due at or before t, or -1. */
static int due(const struct sim *m, uint64_t t)
{
        int best = -1;
        for (int k = 0; k < MAX_MSGS; k++) {
                const struct msg *g = &m->msgs[k];
                if (g->used && g->at <= t && (best < 0 || g->at < m->msgs[best].at))
                        best = k;
        }
        return best;
}

static void deliver(struct sim *m, uint64_t t)
{
        int k;
        while ((k = due(m, t)) >= 0) {
                struct msg g = m->msgs[k];
                m->msgs[k].used = false;
                int slot = m->slot[g.i];
                if (slot < 0)
                        continue;
                switch (g.kind) {
                case M_WANT:
                        gs_arbiter_want(&m->arb, slot, g.at);
                        break;
                case M_IDLE:
                        gs_arbiter_idle(&m->arb, slot, g.at);
                        break;
                case M_DONE:
                        gs_arbiter_done(&m->arb, slot, g.gen, g.busy, g.pending, g.at);
                        break;
                case M_LEAVE:
                        gs_arbiter_slice_leave(&m->arb, slot, g.at);
                        m->slot[g.i] = -1;
                        break;
                }
        }
}

static void kill_slice(struct sim *m, unsigned i, uint64_t t)
{
        m->alive[i] = false;
        m->active[i] = false;
        if (m->q_end[i] > t) {
                record(m, i, t, m->q_end[i], -1);
                if (m->dev_end == m->q_end[i])
                        m->dev_end = t;
                m->q_end[i] = t;
        }
        if (m->holder == (int)i)
                m->holder = -1;
        post(m, M_LEAVE, i, t + m->half, 0, 0, false);
}

static void update_activity(struct sim *m, uint64_t t)
{
        for (unsigned i = 0; i < m->cfg->n; i++) {
                const struct gs_arbm_slice *s = &m->cfg->slices[i];
                if (m->alive[i] && s->die_ns && s->die_ns <= t)
                        kill_slice(m, i, t);
                if (!m->alive[i])
                        continue;
                bool on = s->on_ns <= t && (!s->off_ns || t < s->off_ns);
                if (on == m->active[i])
                        continue;
                m->active[i] = on;
                if (on)
                        post(m, M_WANT, i, t ? t + m->half : 0, 0, 0, true);
                else if (m->holder == (int)i && !m->done_sent) {
                        /* The holder runs out of work: it reports once drained. */
                        post(m, M_DONE, i, GS_MAX(m->q_end[i], t) + m->half, m->hold_gen,
                             m->hold_busy, false);
                        m->done_sent = true;
                } else
                        post(m, M_IDLE, i, t + m->half, 0, 0, false);
        }
}

/* The holder's gate: admit units while its queued work would start before
 * the end of the lease, counting from the lease's start (the shim's own
 * estimate: it does not see the previous holder's tail). */
static void submit(struct sim *m, unsigned i, uint64_t t)
{
        const struct gs_arbm_slice *s = &m->cfg->slices[i];
        uint64_t len = unit_ns(s);
        uint64_t est = GS_MAX(t, m->grant_start);
        while (GS_MAX(est, m->q_end[i]) < m->grant_until && m->q_end[i] < t + m->ahead) {
                uint64_t start = GS_MAX(GS_MAX(t, m->dev_end), m->q_end[i]);
                uint64_t end = start + len;
                record(m, i, start, end, +1);
                m->r->total_ns[i] += len;
                if (start >= m->cfg->probe_ns && m->r->first_after_probe[i] == GS_ARB_NEVER)
                        m->r->first_after_probe[i] = start;
                if (start >= s->on_ns && m->r->first_after_on[i] == GS_ARB_NEVER)
                        m->r->first_after_on[i] = start;
                m->dev_end = m->q_end[i] = end;
                m->hold_busy += len;
                est = GS_MAX(est, m->q_end[i]);
        }
        m->r->max_slice_busy_run_ns = GS_MAX(m->r->max_slice_busy_run_ns, m->hold_busy);
}

/* The holder's lease ended without renewal: it reports its hold once its
 * queue drained. */
static void report(struct sim *m)
{
        unsigned h = (unsigned)m->holder;
        post(m, M_DONE, h, GS_MAX(m->q_end[h], m->grant_until) + m->half, m->hold_gen,
             m->hold_busy, m->active[h]);
        m->done_sent = true;
}

static int index_of(const struct sim *m, int slot)
{
        for (unsigned i = 0; i < m->cfg->n; i++)
                if (m->slot[i] == slot)
                        return (int)i;
        return -1;
}

static void act(struct sim *m, const struct gs_arb_decision *d, uint64_t t)
{
        int i = d->slot >= 0 ? index_of(m, d->slot) : -1;
        if (i < 0 || !m->alive[i])
                return;
        if (d->state == GS_ARB_GRANTED) {
                if (i != m->holder || d->gen != m->hold_gen) {
                        if (m->holder >= 0 && !m->done_sent) {
                                /* The old lease runs to its end: top it up
                                 * (lead < ahead, so this fills it). */
                                if (m->active[m->holder])
                                        submit(m, (unsigned)m->holder, t);
                                report(m);
                        }
                        m->holder = i;
                        m->hold_gen = d->gen;
                        m->visible_at = t + m->half;
                        m->hold_busy = 0;
                        m->done_sent = false;
                        m->r->handoffs++;
                }
                m->grant_start = d->grant_start;
                m->grant_until = d->grant_until;
                if (t >= m->visible_at && m->active[i] && !m->done_sent)
                        submit(m, (unsigned)i, t);
        } else if (d->state == GS_ARB_DRAINING && i == m->holder && !m->done_sent) {
                report(m);
        }
}

static uint64_t next_time(const struct sim *m, const struct gs_arb_decision *d, uint64_t t)
{
        uint64_t n = m->cfg->duration_ns;
        for (int k = 0; k < MAX_MSGS; k++)
                if (m->msgs[k].used)
                        n = GS_MIN(n, GS_MAX(m->msgs[k].at, t));
        if (d->wake_at != GS_ARB_NEVER && d->wake_at > t)
                n = GS_MIN(n, d->wake_at);
        if (d->state == GS_ARB_GRANTED && m->visible_at > t)
                n = GS_MIN(n, m->visible_at);
        if (d->state == GS_ARB_GRANTED && m->holder >= 0 && m->active[m->holder] && !m->done_sent) {
                /* The gate tops its queue up when it falls below ahead_ns. */
                uint64_t q = m->q_end[m->holder];
                if (q < m->grant_until && q > t + m->ahead)
                        n = GS_MIN(n, q - m->ahead);
                else if (q < m->grant_until && q > t)
                        n = GS_MIN(n, q);
        }
        for (unsigned i = 0; i < m->cfg->n; i++) {
                const struct gs_arbm_slice *s = &m->cfg->slices[i];
                if (!m->alive[i])
                        continue;
                if (s->on_ns > t)
                        n = GS_MIN(n, s->on_ns);
                if (s->off_ns > t)
                        n = GS_MIN(n, s->off_ns);
                if (s->die_ns > t)
                        n = GS_MIN(n, s->die_ns);
        }
        return n;
}

static int check(const struct gs_arbm_config *cfg)
{
        if (cfg->n == 0 || cfg->n > GS_ARBM_MAX_SLICES || cfg->duration_ns == 0)
                return -EINVAL;
        for (unsigned i = 0; i < cfg->n; i++) {
                const struct gs_arbm_slice *s = &cfg->slices[i];
                if (s->milli < 1 || s->milli > 1000 || s->kernel_ns == 0)
                        return -EINVAL;
        }
        return 0;
}

static void run(struct sim *m)
{
        uint64_t t = 0;
        unsigned same = 0;
        struct gs_arb_decision d;
        while (t < m->cfg->duration_ns) {
                update_activity(m, t);
                deliver(m, t);
                gs_arbiter_next(&m->arb, t, &d);
                act(m, &d, t);
                m->r->events++;
                uint64_t n = next_time(m, &d, t);
                if (n == t && ++same > MAX_SAME_TIME)
                        n = t + 1; /* no progress at one instant: move on */
                else if (n != t)
                        same = 0;
                t = n;
        }
}

int gs_arbm_run(const struct gs_arbm_config *cfg, struct gs_arbm_result *ret)
{
        int r = check(cfg);
        if (r < 0)
                return r;
        struct gs_arbm_result res = { .n = cfg->n, .bin_ns = cfg->bin_ns ? cfg->bin_ns : GS_ARB_NS_PER_MS };
        res.n_bins = (cfg->duration_ns + res.bin_ns - 1) / res.bin_ns;
        res.busy = calloc((size_t)(res.n_bins * cfg->n), sizeof(uint64_t));
        if (!res.busy)
                return -ENOMEM;
        struct sim *m = calloc(1, sizeof(*m));
        if (!m) {
                free(res.busy);
                return -ENOMEM;
        }
        m->cfg = cfg;
        m->r = &res;
        m->half = cfg->handoff_ns / 2;
        m->ahead = cfg->ahead_ns ? cfg->ahead_ns : GS_ARB_NS_PER_MS;
        m->holder = -1;
        r = gs_arbiter_init(&m->arb, &cfg->params);
        for (unsigned i = 0; r >= 0 && i < cfg->n; i++) {
                r = gs_arbiter_slice_join(&m->arb, cfg->slices[i].milli, cfg->slices[i].policy, 0);
                m->slot[i] = r;
                m->alive[i] = true;
                res.first_after_probe[i] = res.first_after_on[i] = GS_ARB_NEVER;
        }
        if (r >= 0)
                run(m);
        free(m);
        if (r < 0) {
                free(res.busy);
                return r;
        }
        uint64_t used = 0;
        for (size_t k = 0; k < (size_t)(res.n_bins * cfg->n); k++)
                used += res.busy[k];
        uint64_t span = res.n_bins * res.bin_ns;
        res.idle_ns = span > used ? span - used : 0;
        *ret = res;
        return 0;
}

void gs_arbm_result_done(struct gs_arbm_result *res)
{
        if (!res)
                return;
        free(res->busy);
        res->busy = NULL;
}

double gs_arbm_share(const struct gs_arbm_result *res, unsigned i, uint64_t from_ns, uint64_t to_ns)
{
        uint64_t b0 = from_ns / res->bin_ns, b1 = GS_MIN(to_ns / res->bin_ns, res->n_bins);
        if (i >= res->n || b1 <= b0)
                return 0.0;
        const uint64_t *bins = res->busy + (size_t)i * res->n_bins;
        uint64_t sum = 0;
        for (uint64_t b = b0; b < b1; b++)
                sum += bins[b];
        return (double)sum / (double)((b1 - b0) * res->bin_ns);
}

double gs_arbm_window_error(const struct gs_arbm_result *res, unsigned i, uint64_t window_ns,
                            uint64_t from_ns, uint64_t to_ns, double expected)
{
        uint64_t w = window_ns / res->bin_ns;
        uint64_t b0 = from_ns / res->bin_ns, b1 = GS_MIN(to_ns / res->bin_ns, res->n_bins);
        if (i >= res->n || w == 0 || b1 < b0 + w)
                return 0.0;
        const uint64_t *bins = res->busy + (size_t)i * res->n_bins;
        uint64_t sum = 0;
        for (uint64_t b = b0; b < b0 + w; b++)
                sum += bins[b];
        double span = (double)(w * res->bin_ns), worst = 0.0;
        for (uint64_t b = b0;; b++) {
                double err = (double)sum / span - expected;
                if (err < 0)
                        err = -err;
                if (err > worst)
                        worst = err;
                if (b + w >= b1)
                        break;
                sum += bins[b + w];
                sum -= bins[b];
        }
        return worst * 100.0;
}
