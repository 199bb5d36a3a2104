/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libcuda: streams and events.
 *
 * All streams of a context feed the context's single FIFO on the device
 * timeline, so each stream keeps its order (and streams of one context are
 * ordered with each other, which a real GPU does not promise). Events are
 * zero-length markers whose completion time is stamped by the timeline. */
#include "sim_cuda.h"

#include <stdlib.h>
#include <string.h>

struct CUctx_st *sim_stream_ctx(CUstream s, CUresult *rc)
{
        if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
                struct CUctx_st *c = sim_ctx_current();
                if (!c)
                        *rc = CUDA_ERROR_INVALID_CONTEXT;
                return c;
        }
        if (s->magic != SIM_MAGIC_STREAM) {
                *rc = CUDA_ERROR_INVALID_HANDLE;
                return NULL;
        }
        return s->ctx;
}

static bool is_default(CUstream s)
{
        return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

SIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream *out, unsigned int flags, int priority)
{
        SIM_NEED_INIT();
        struct CUctx_st *c = sim_ctx_current();
        if (!c)
                return CUDA_ERROR_INVALID_CONTEXT;
        if (!out || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
                return CUDA_ERROR_INVALID_VALUE;
        struct CUstream_st *s = calloc(1, sizeof(*s));
        if (!s)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (priority > 0)
                priority = 0;
        if (priority < -5)
                priority = -5;
        s->magic = SIM_MAGIC_STREAM;
        s->ctx = c;
        s->flags = flags;
        s->priority = priority;
        s->id = __atomic_add_fetch(&sim_g.next_stream_id, 1, __ATOMIC_RELAXED) + 16;
        sim_obj_add(&s->link);
        *out = s;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamCreate(CUstream *out, unsigned int flags)
{
        return cuStreamCreateWithPriority(out, flags, 0);
}

SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream s)
{
        SIM_NEED_INIT();
        if (is_default(s) || s->magic != SIM_MAGIC_STREAM)
                return CUDA_ERROR_INVALID_HANDLE;
        /* like the real driver, pending work still completes; nothing to wait for */
        sim_obj_del(&s->link);
        s->magic = 0;
        free(s);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamDestroy(CUstream s)
{
        return cuStreamDestroy_v2(s);
}

/* The sequence number a synchronisation on s must reach. */
static uint64_t target_seq(CUstream s, struct CUctx_st *c)
{
        if (!is_default(s))
                return s->last_seq;
        struct sim_state *st = sim_g.st;
        sim_lock(st);
        uint64_t seq = st->ctx[c->slot].enq_seq;
        sim_unlock(st);
        return seq;
}

static CUresult stream_sync(CUstream s)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        struct CUctx_st *c = sim_stream_ctx(s, &rc);
        if (!c)
                return rc;
        if (!is_default(s) && s->capture)
                return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        sim_wait_seq(c->slot, c->dev, target_seq(s, c));
        sim_pools_release(c->dev);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamSynchronize(CUstream s) { return stream_sync(s); }
SIM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s) { return stream_sync(s); }

static CUresult stream_query(CUstream s)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        struct CUctx_st *c = sim_stream_ctx(s, &rc);
        if (!c)
                return rc;
        uint64_t seq = target_seq(s, c);
        struct sim_state *st = sim_g.st;
        sim_lock(st);
        sim_advance(st, c->dev, sim_now_ns());
        bool done = st->ctx[c->slot].done_seq >= seq;
        sim_unlock(st);
        return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SIM_EXPORT CUresult cuStreamQuery(CUstream s) { return stream_query(s); }
SIM_EXPORT CUresult cuStreamQuery_ptsz(CUstream s) { return stream_query(s); }

static CUresult stream_get_priority(CUstream s, int *prio)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        if (!sim_stream_ctx(s, &rc))
                return rc;
        if (!prio)
                return CUDA_ERROR_INVALID_VALUE;
        *prio = is_default(s) ? 0 : s->priority;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamGetPriority(CUstream s, int *p) { return stream_get_priority(s, p); }
SIM_EXPORT CUresult cuStreamGetPriority_ptsz(CUstream s, int *p) { return stream_get_priority(s, p); }

static CUresult stream_get_flags(CUstream s, unsigned *flags)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        if (!sim_stream_ctx(s, &rc))
                return rc;
        if (!flags)
                return CUDA_ERROR_INVALID_VALUE;
        *flags = is_default(s) ? 0 : s->flags;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamGetFlags(CUstream s, unsigned *f) { return stream_get_flags(s, f); }
SIM_EXPORT CUresult cuStreamGetFlags_ptsz(CUstream s, unsigned *f) { return stream_get_flags(s, f); }

static CUresult stream_get_ctx(CUstream s, CUcontext *pctx)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        struct CUctx_st *c = sim_stream_ctx(s, &rc);
        if (!c)
                return rc;
        if (!pctx)
                return CUDA_ERROR_INVALID_VALUE;
        *pctx = c;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamGetCtx(CUstream s, CUcontext *c) { return stream_get_ctx(s, c); }
SIM_EXPORT CUresult cuStreamGetCtx_ptsz(CUstream s, CUcontext *c) { return stream_get_ctx(s, c); }

static CUresult stream_get_id(CUstream s, unsigned long long *id)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        if (!sim_stream_ctx(s, &rc))
                return rc;
        if (!id)
                return CUDA_ERROR_INVALID_VALUE;
        *id = s == CU_STREAM_PER_THREAD ? 2 : is_default(s) ? 1 : s->id;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamGetId(CUstream s, unsigned long long *id) { return stream_get_id(s, id); }
SIM_EXPORT CUresult cuStreamGetId_ptsz(CUstream s, unsigned long long *id) { return stream_get_id(s, id); }

static CUresult stream_get_device(CUstream s, CUdevice *d)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        struct CUctx_st *c = sim_stream_ctx(s, &rc);
        if (!c)
                return rc;
        if (!d)
                return CUDA_ERROR_INVALID_VALUE;
        *d = c->ordinal;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamGetDevice(CUstream s, CUdevice *d) { return stream_get_device(s, d); }
SIM_EXPORT CUresult cuStreamGetDevice_ptsz(CUstream s, CUdevice *d) { return stream_get_device(s, d); }

/* --- events --- */

SIM_EXPORT CUresult cuEventCreate(CUevent *out, unsigned int flags)
{
        SIM_NEED_INIT();
        if (!sim_ctx_current())
                return CUDA_ERROR_INVALID_CONTEXT;
        if (!out || (flags & ~0xfu))
                return CUDA_ERROR_INVALID_VALUE;
        struct CUevent_st *e = calloc(1, sizeof(*e));
        if (!e)
                return CUDA_ERROR_OUT_OF_MEMORY;
        struct sim_state *st = sim_g.st;
        sim_lock(st);
        int slot = -1;
        for (int i = 0; i < SIM_MAX_EVENTS; i++)
                if (!st->ev[i].in_use) {
                        slot = i;
                        st->ev[i] = (struct sim_event_rec){ .in_use = 1, .proc = sim_g.proc };
                        break;
                }
        sim_unlock(st);
        if (slot < 0) {
                free(e);
                sim_log("no free event slot (%d events machine-wide)", SIM_MAX_EVENTS);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        e->magic = SIM_MAGIC_EVENT;
        e->flags = flags;
        e->slot = slot;
        sim_obj_add(&e->link);
        *out = e;
        return CUDA_SUCCESS;
}

static bool event_ok(const struct CUevent_st *e)
{
        return e && e->magic == SIM_MAGIC_EVENT;
}

SIM_EXPORT CUresult cuEventDestroy_v2(CUevent e)
{
        SIM_NEED_INIT();
        if (!event_ok(e))
                return CUDA_ERROR_INVALID_HANDLE;
        struct sim_state *st = sim_g.st;
        sim_lock(st);
        st->ev[e->slot].in_use = 0;
        sim_unlock(st);
        sim_obj_del(&e->link);
        e->magic = 0;
        free(e);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventDestroy(CUevent e)
{
        return cuEventDestroy_v2(e);
}

static CUresult event_record(CUevent e, CUstream s, unsigned flags)
{
        SIM_NEED_INIT();
        if (!event_ok(e))
                return CUDA_ERROR_INVALID_HANDLE;
        CUresult rc = CUDA_SUCCESS;
        struct CUctx_st *c = sim_stream_ctx(s, &rc);
        if (!c)
                return rc;
        if (!is_default(s) && s->capture)
                return CUDA_SUCCESS; /* fork/join inside a capture: order is already kept */
        uint64_t seq = sim_push(c, 0, e->slot);
        e->ctx = c;
        e->rec_seq = seq;
        if (!is_default(s))
                s->last_seq = seq;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) { return event_record(e, s, 0); }
SIM_EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return event_record(e, s, 0); }
SIM_EXPORT CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned f)
{ return event_record(e, s, f); }
SIM_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned f)
{ return event_record(e, s, f); }

SIM_EXPORT CUresult cuEventQuery(CUevent e)
{
        SIM_NEED_INIT();
        if (!event_ok(e))
                return CUDA_ERROR_INVALID_HANDLE;
        if (!e->ctx)
                return CUDA_SUCCESS;
        struct sim_state *st = sim_g.st;
        sim_lock(st);
        sim_advance(st, e->ctx->dev, sim_now_ns());
        bool done = st->ctx[e->ctx->slot].done_seq >= e->rec_seq;
        sim_unlock(st);
        return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SIM_EXPORT CUresult cuEventSynchronize(CUevent e)
{
        SIM_NEED_INIT();
        if (!event_ok(e))
                return CUDA_ERROR_INVALID_HANDLE;
        if (!e->ctx)
                return CUDA_SUCCESS;
        sim_wait_seq(e->ctx->slot, e->ctx->dev, e->rec_seq);
        sim_pools_release(e->ctx->dev);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b)
{
        SIM_NEED_INIT();
        if (!ms)
                return CUDA_ERROR_INVALID_VALUE;
        if (!event_ok(a) || !event_ok(b) || !a->ctx || !b->ctx ||
            (a->flags & CU_EVENT_DISABLE_TIMING) || (b->flags & CU_EVENT_DISABLE_TIMING))
                return CUDA_ERROR_INVALID_HANDLE;
        struct sim_state *st = sim_g.st;
        sim_lock(st);
        sim_advance(st, a->ctx->dev, sim_now_ns());
        if (b->ctx->dev != a->ctx->dev)
                sim_advance(st, b->ctx->dev, sim_now_ns());
        const struct sim_event_rec *ea = &st->ev[a->slot], *eb = &st->ev[b->slot];
        bool done = ea->seq == a->rec_seq && eb->seq == b->rec_seq &&
                    st->ctx[a->ctx->slot].done_seq >= a->rec_seq &&
                    st->ctx[b->ctx->slot].done_seq >= b->rec_seq;
        double d = (double)eb->time_ns - (double)ea->time_ns;
        sim_unlock(st);
        if (!done)
                return CUDA_ERROR_NOT_READY;
        *ms = (float)(d / 1e6);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
        return cuEventElapsedTime_v2(ms, a, b);
}

static CUresult stream_wait_event(CUstream s, CUevent e, unsigned flags)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        struct CUctx_st *c = sim_stream_ctx(s, &rc);
        if (!c)
                return rc;
        if (!event_ok(e))
                return CUDA_ERROR_INVALID_HANDLE;
        /* same context: the FIFO already orders it; another context: wait here */
        if (e->ctx && e->ctx != c)
                sim_wait_seq(e->ctx->slot, e->ctx->dev, e->rec_seq);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned f)
{ return stream_wait_event(s, e, f); }
SIM_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned f)
{ return stream_wait_event(s, e, f); }
