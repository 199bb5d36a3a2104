/* SPDX-License-Identifier: Apache-2.0 */
/* Measuring a hold: the device time this process's work took under one
 * lease, with CUDA events at the hold's boundaries (never one per launch).
 *
 * The first launch on each (context, stream) in a hold records a start
 * event on that stream just before it. When
 * the hold ends, an end event is recorded on every stream used and the
 * hold is queued; the background thread waits for the end events, and the
 * hold's busy time is, per context, the span from the earliest start to
 * the latest end (the union of the streams' spans). On simgpu events carry
 * simulated device timestamps, so this is exact for a saturating slice.
 *
 * The unit probe: at most every PROBE_EVERY_NS, one admitted launch is
 * wrapped in a pair of events; its elapsed time (read without blocking by
 * the background thread) is one launch's device time, from which the gate
 * estimates how much work a thread has queued. */
#include <dlfcn.h>
#include <string.h>

#include "shim.h"
#include "shim_gate.h"

/* The state is shim_gs.hold (struct shim_gate_state), under its lock
 * (hold->mu below). */
#define MAX_STREAMS SHIM_HOLD_MAX_STREAMS
#define MAX_DRAINS SHIM_HOLD_MAX_DRAINS
#define PROBE_EVERY_NS (10ull * 1000 * 1000)

static CUevent new_event(void)
{
        CUevent e = NULL;
        if (!shim_gate_cu.event_create || shim_gate_cu.event_create(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
                return NULL;
        return e;
}

static void drop_event(CUevent *e)
{
        if (*e && shim_gate_cu.event_destroy)
                shim_gate_cu.event_destroy(*e);
        *e = NULL;
}

static void drop_rec(struct shim_hrec *r)
{
        for (unsigned i = 0; i < r->n; i++) {
                drop_event(&r->s[i].start);
                drop_event(&r->s[i].end);
                drop_event(&r->s[i].mark);
        }
        memset(r, 0, sizeof(*r));
}

bool shim_hold_stream(uint64_t key, CUstream stream)
{
        struct shim_hold_state *hold = &shim_gs.hold;
        if (hold->open.key != key) {
                drop_rec(&hold->open);
                hold->open.key = key;
        }
        CUcontext ctx = NULL;
        if (!shim_gate_cu.ctx_get || shim_gate_cu.ctx_get(&ctx) != CUDA_SUCCESS || !ctx) {
                hold->open.unmeasured = true;
                return false;
        }
        for (unsigned i = 0; i < hold->open.n; i++)
                if (hold->open.s[i].ctx == ctx && hold->open.s[i].stream == stream)
                        return false;
        if (hold->open.n == MAX_STREAMS) {
                if (!hold->warned_streams)
                        shim_log("compute: more than %d streams in one hold; the rest are not measured",
                                 MAX_STREAMS);
                hold->warned_streams = true;
                hold->open.unmeasured = true;
                return false;
        }
        CUevent e = new_event();
        if (!e || shim_gate_cu.event_record(e, stream) != CUDA_SUCCESS) {
                drop_event(&e);
                hold->open.unmeasured = true;
                return false;
        }
        CUdevice dev = -1;
        if (shim_x.cuCtxGetDevice)
                shim_x.cuCtxGetDevice(&dev);
        struct shim_hstream *h = &hold->open.s[hold->open.n++];
        *h = (struct shim_hstream){ .ctx = ctx, .dev = dev, .stream = stream, .start = e };
        return true;
}

static void probe_drop(void)
{
        struct shim_probe *pr = &shim_gs.hold.probe;
        drop_event(&pr->pre);
        drop_event(&pr->post);
        pr->state = 0;
}

bool shim_probe_arm(CUstream stream, uint64_t now)
{
        struct shim_hold_state *hold = &shim_gs.hold;
        struct shim_probe *pr = &hold->probe;
        bool armed = false;
        pthread_mutex_lock(&hold->mu);
        if (pr->state != 0 || now < pr->next_at || !shim_gate_cu.ctx_get)
                goto out;
        pr->next_at = now + PROBE_EVERY_NS;
        CUcontext ctx = NULL;
        if (shim_gate_cu.ctx_get(&ctx) != CUDA_SUCCESS || !ctx)
                goto out;
        pr->ctx = ctx;
        pr->dev = -1;
        if (shim_x.cuCtxGetDevice)
                shim_x.cuCtxGetDevice(&pr->dev);
        pr->pre = new_event();
        pr->post = new_event();
        if (!pr->pre || !pr->post || shim_gate_cu.event_record(pr->pre, stream) != CUDA_SUCCESS) {
                probe_drop();
                goto out;
        }
        pr->state = 1;
        armed = true;
out:
        pthread_mutex_unlock(&hold->mu);
        return armed;
}

void shim_probe_after(CUstream stream)
{
        struct shim_hold_state *hold = &shim_gs.hold;
        struct shim_probe *pr = &hold->probe;
        pthread_mutex_lock(&hold->mu);
        if (pr->state == 1) {
                if (shim_gate_cu.event_record(pr->post, stream) == CUDA_SUCCESS)
                        pr->state = 2;
                else
                        probe_drop();
        }
        pthread_mutex_unlock(&hold->mu);
}

uint64_t shim_probe_poll(void)
{
        struct shim_hold_state *hold = &shim_gs.hold;
        struct shim_probe *pr = &hold->probe;
        uint64_t ns = 0;
        pthread_mutex_lock(&hold->mu);
        if (pr->state == 2 && shim_gate_cu.event_query &&
            shim_gate_cu.event_query(pr->post) != CUDA_ERROR_NOT_READY) {
                float ms = 0;
                if (shim_gate_cu.elapsed(&ms, pr->pre, pr->post) == CUDA_SUCCESS && ms > 0)
                        ns = (uint64_t)((double)ms * 1e6 + 0.5);
                probe_drop();
        }
        pthread_mutex_unlock(&hold->mu);
        return ns;
}

void shim_hold_mark(uint64_t key)
{
        struct shim_hold_state *hold = &shim_gs.hold;
        if (hold->open.key != key)
                return;
        for (unsigned i = 0; i < hold->open.n; i++) {
                struct shim_hstream *h = &hold->open.s[i];
                CUcontext popped;
                if (h->ended || h->stream == CU_STREAM_PER_THREAD || shim_gate_cu.ctx_push(h->ctx) != CUDA_SUCCESS)
                        continue;
                if (!h->mark)
                        h->mark = new_event();
                if (h->mark && shim_gate_cu.event_record(h->mark, h->stream) != CUDA_SUCCESS)
                        drop_event(&h->mark);
                shim_gate_cu.ctx_pop(&popped);
        }
}

void shim_hold_close(uint64_t key, uint64_t gen, int src, uint64_t launches, bool at_mark)
{
        struct shim_hold_state *hold = &shim_gs.hold;
        if (!key)
                return;
        if (hold->open.key != key) {
                /* Joined but launched nothing: still owes its (empty) report. */
                drop_rec(&hold->open);
                hold->open.key = key;
        }
        hold->open.gen = gen;
        hold->open.src = src;
        hold->open.launches = launches;
        for (unsigned i = 0; i < hold->open.n; i++) {
                struct shim_hstream *h = &hold->open.s[i];
                if (h->ended)
                        continue;
                if (at_mark && h->mark) {
                        h->end = h->mark;
                        h->mark = NULL;
                        continue;
                }
                /* The per-thread stream of the thread closing the hold is not
                 * the launching thread's: the legacy stream waits for it. */
                CUstream s = h->stream == CU_STREAM_PER_THREAD ? CU_STREAM_LEGACY : h->stream;
                CUcontext popped;
                if (shim_gate_cu.ctx_push(h->ctx) != CUDA_SUCCESS)
                        continue;
                h->end = new_event();
                if (h->end && shim_gate_cu.event_record(h->end, s) != CUDA_SUCCESS)
                        drop_event(&h->end);
                shim_gate_cu.ctx_pop(&popped);
        }
        if (hold->n_drains == MAX_DRAINS) {
                /* Nobody drains (should not happen): forget the oldest. */
                drop_rec(&hold->drains[0]);
                memmove(&hold->drains[0], &hold->drains[1],
                        sizeof(hold->drains[0]) * (MAX_DRAINS - 1));
                hold->n_drains--;
        }
        hold->drains[hold->n_drains++] = hold->open;
        memset(&hold->open, 0, sizeof(hold->open));
}

int shim_hold_idle(uint64_t key)
{
        struct shim_hold_state *hold = &shim_gs.hold;
        if (hold->open.key != key)
                return 1; /* joined, nothing launched yet */
        if (hold->open.unmeasured || !shim_gate_cu.stream_query)
                return -1;
        int idle = 1;
        for (unsigned i = 0; i < hold->open.n && idle == 1; i++) {
                struct shim_hstream *h = &hold->open.s[i];
                if (h->ended)
                        continue;
                if (h->stream == CU_STREAM_PER_THREAD)
                        return -1;
                CUcontext popped;
                if (shim_gate_cu.ctx_push(h->ctx) != CUDA_SUCCESS)
                        return -1;
                CUresult r = shim_gate_cu.stream_query(h->stream);
                shim_gate_cu.ctx_pop(&popped);
                idle = r == CUDA_SUCCESS ? 1 : r == CUDA_ERROR_NOT_READY ? 0 : -1;
        }
        return idle;
}

static double elapsed_ms(CUevent a, CUevent b, bool *ok)
{
        float ms = 0;
        if (!a || !b || shim_gate_cu.elapsed(&ms, a, b) != CUDA_SUCCESS) {
                *ok = false;
                return 0;
        }
        return (double)ms;
}

static uint64_t ms_to_ns(double ms)
{
        return ms <= 0 ? 0 : (uint64_t)(ms * 1e6 + 0.5);
}

/* Busy ns of a drained hold: per context, latest end minus earliest start. */
static uint64_t rec_busy(struct shim_hrec *r)
{
        uint64_t total = 0;
        bool done[MAX_STREAMS] = { false };
        for (unsigned i = 0; i < r->n; i++) {
                if (done[i])
                        continue;
                CUevent ref = r->s[i].start;
                double lo = 0, hi = 0;
                for (unsigned j = i; j < r->n; j++) {
                        if (r->s[j].ctx != r->s[i].ctx)
                                continue;
                        done[j] = true;
                        bool ok = true;
                        double s = elapsed_ms(ref, r->s[j].start, &ok);
                        double e = elapsed_ms(ref, r->s[j].end, &ok);
                        if (!ok)
                                continue;
                        lo = s < lo ? s : lo;
                        hi = e > hi ? e : hi;
                }
                total += ms_to_ns(hi - lo);
        }
        return total;
}

bool shim_hold_drain_one(uint64_t *gen, int *src, uint64_t *busy, uint64_t *launches)
{
        struct shim_hold_state *hold = &shim_gs.hold;
        pthread_mutex_lock(&hold->mu);
        if (hold->n_drains == 0) {
                pthread_mutex_unlock(&hold->mu);
                return false;
        }
        struct shim_hrec r = hold->drains[0];
        memmove(&hold->drains[0], &hold->drains[1], sizeof(hold->drains[0]) * (MAX_DRAINS - 1));
        hold->n_drains--;
        memset(&hold->drains[hold->n_drains], 0, sizeof(hold->drains[0]));
        hold->draining = true;
        pthread_mutex_unlock(&hold->mu);

        for (unsigned i = 0; i < r.n; i++)
                if (r.s[i].end)
                        shim_gate_cu.event_sync(r.s[i].end);
        *busy = rec_busy(&r);
        *gen = r.gen;
        *src = r.src;
        *launches = r.launches;
        drop_rec(&r);
        pthread_mutex_lock(&hold->mu);
        hold->draining = false;
        pthread_cond_broadcast(&hold->drain_cv);
        pthread_mutex_unlock(&hold->mu);
        return true;
}

static void end_stream(struct shim_hstream *h)
{
        CUcontext popped;
        if (h->ended || shim_gate_cu.ctx_push(h->ctx) != CUDA_SUCCESS)
                return;
        h->end = new_event();
        if (h->end && shim_gate_cu.event_record(h->end, h->stream == CU_STREAM_PER_THREAD ? CU_STREAM_LEGACY
                                                                                   : h->stream) != CUDA_SUCCESS)
                drop_event(&h->end);
        shim_gate_cu.ctx_pop(&popped);
        h->ended = true;
}

void shim_hold_stream_gone(CUstream stream)
{
        struct shim_hold_state *hold = &shim_gs.hold;
        pthread_mutex_lock(&hold->mu);
        for (unsigned i = 0; i < hold->open.n; i++)
                if (hold->open.s[i].stream == stream && stream != NULL && stream != CU_STREAM_LEGACY &&
                    stream != CU_STREAM_PER_THREAD)
                        end_stream(&hold->open.s[i]);
        pthread_mutex_unlock(&hold->mu);
}

/* Removes the streams of a context (or of every context on a device) from
 * a hold, destroying their events. Lock held. */
static void forget_in(struct shim_hrec *r, CUcontext ctx, CUdevice dev)
{
        unsigned k = 0;
        for (unsigned i = 0; i < r->n; i++) {
                struct shim_hstream *h = &r->s[i];
                if (ctx ? h->ctx == ctx : h->dev == dev) {
                        drop_event(&h->start);
                        drop_event(&h->end);
                        drop_event(&h->mark);
                        continue;
                }
                r->s[k++] = *h;
        }
        r->n = k;
}

void shim_hold_forget(CUcontext ctx, CUdevice dev)
{
        struct shim_hold_state *hold = &shim_gs.hold;
        struct shim_probe *pr = &hold->probe;
        pthread_mutex_lock(&hold->mu);
        while (hold->draining)
                pthread_cond_wait(&hold->drain_cv, &hold->mu);
        forget_in(&hold->open, ctx, dev);
        if (pr->state && (ctx ? pr->ctx == ctx : pr->dev == dev))
                probe_drop();
        for (unsigned i = 0; i < hold->n_drains; i++)
                forget_in(&hold->drains[i], ctx, dev);
        pthread_mutex_unlock(&hold->mu);
}

void shim_gate_resolve_cu(void)
{
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (!h)
                return;
#define SYM(field, name, alt)                                                         \
        do {                                                                          \
                void *p_ = REAL_DLSYM(h, name);                                       \
                if (!p_)                                                              \
                        p_ = REAL_DLSYM(h, alt);                                      \
                shim_gate_cu.field = (__typeof__(shim_gate_cu.field))p_;              \
        } while (0)
        SYM(event_create, "cuEventCreate", "cuEventCreate");
        SYM(event_record, "cuEventRecord", "cuEventRecord");
        SYM(event_sync, "cuEventSynchronize", "cuEventSynchronize");
        SYM(elapsed, "cuEventElapsedTime_v2", "cuEventElapsedTime");
        SYM(event_destroy, "cuEventDestroy_v2", "cuEventDestroy");
        SYM(ctx_get, "cuCtxGetCurrent", "cuCtxGetCurrent");
        SYM(ctx_push, "cuCtxPushCurrent_v2", "cuCtxPushCurrent");
        SYM(ctx_pop, "cuCtxPopCurrent_v2", "cuCtxPopCurrent");
        SYM(is_capturing, "cuStreamIsCapturing", "cuStreamIsCapturing");
        SYM(event_query, "cuEventQuery", "cuEventQuery");
        SYM(stream_query, "cuStreamQuery", "cuStreamQuery");
#undef SYM
        /* dlopen took a reference; libcuda stays loaded anyway. */
        dlclose(h);
}
