/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libcuda: contexts (created and primary), the per-thread context
 * stack, and waiting for work to complete. */
#include "sim_cuda.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CTX_STACK_MAX 32

static __thread struct CUctx_st *tls_stack[CTX_STACK_MAX];
static __thread int tls_depth;

void sim_ctx_tls_forget(void)
{
        tls_depth = 0;
}

struct CUctx_st *sim_ctx_current(void)
{
        return tls_depth > 0 ? tls_stack[tls_depth - 1] : NULL;
}

bool sim_ctx_valid(const struct CUctx_st *c)
{
        if (!c)
                return false;
        bool ok = false;
        pthread_mutex_lock(&sim_g.mu);
        for (struct CUctx_st *x = sim_g.ctxs; x; x = x->next)
                if (x == c) {
                        ok = true;
                        break;
                }
        pthread_mutex_unlock(&sim_g.mu);
        return ok && c->magic == SIM_MAGIC_CTX;
}

static void sleep_until(uint64_t t)
{
        struct timespec ts = { .tv_sec = (time_t)(t / 1000000000ull),
                               .tv_nsec = (long)(t % 1000000000ull) };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
}

void sim_wait_seq(int slot, int dev, uint64_t seq)
{
        struct sim_state *st = sim_g.st;
        for (;;) {
                sim_lock(st);
                uint64_t now = sim_now_ns();
                sim_advance(st, dev, now);
                sim_reap(st, false);
                const struct sim_ctx_rec *x = &st->ctx[slot];
                if (!x->in_use || x->done_seq >= seq) {
                        sim_unlock(st);
                        return;
                }
                /* lower bound: our own work ahead of seq, as if we ran alone */
                uint64_t lb = sim_pending_ns(st, slot, seq);
                sim_unlock(st);
                if (lb < 20000)
                        lb = 20000;
                sleep_until(now + lb);
        }
}

void sim_ctx_drain(struct CUctx_st *c)
{
        struct sim_state *st = sim_g.st;
        sim_lock(st);
        uint64_t seq = st->ctx[c->slot].enq_seq;
        sim_unlock(st);
        sim_wait_seq(c->slot, c->dev, seq);
        sim_pools_release(c->dev);
}

static CUresult ctx_new(CUdevice ordinal, unsigned flags, bool primary, struct CUctx_st **out)
{
        int phys = sim_dev_phys(ordinal);
        if (phys < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        struct sim_state *st = sim_g.st;
        struct CUctx_st *c = calloc(1, sizeof(*c));
        if (!c)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = sim_charge(phys, st->ctx_overhead);
        if (r != CUDA_SUCCESS) {
                free(c);
                return r;
        }
        sim_lock(st);
        int slot = sim_ctx_alloc(st, sim_g.proc, phys);
        if (slot < 0 && sim_reap(st, true) > 0) /* a dead process may hold one */
                slot = sim_ctx_alloc(st, sim_g.proc, phys);
        if (slot >= 0)
                st->proc[sim_g.proc].nctx[phys]++;
        sim_unlock(st);
        if (slot < 0) {
                sim_uncharge(phys, st->ctx_overhead);
                free(c);
                sim_log("no free context slot (%d contexts machine-wide)", SIM_MAX_CTXS);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        c->magic = SIM_MAGIC_CTX;
        c->slot = slot;
        c->dev = phys;
        c->ordinal = ordinal;
        c->flags = flags;
        c->primary = primary;
        pthread_mutex_lock(&sim_g.mu);
        c->next = sim_g.ctxs;
        sim_g.ctxs = c;
        pthread_mutex_unlock(&sim_g.mu);
        *out = c;
        return CUDA_SUCCESS;
}

static void ctx_free(struct CUctx_st *c)
{
        sim_ctx_drain(c);
        pthread_mutex_lock(&sim_g.mu);
        for (struct CUctx_st **pp = &sim_g.ctxs; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        pthread_mutex_unlock(&sim_g.mu);
        sim_mem_of_ctx_free(c);
        sim_ctx_limits_free(c);
        struct sim_state *st = sim_g.st;
        sim_lock(st);
        sim_ctx_release(st, c->slot);
        if (st->proc[sim_g.proc].nctx[c->dev])
                st->proc[sim_g.proc].nctx[c->dev]--;
        sim_unlock(st);
        sim_uncharge(c->dev, st->ctx_overhead);
        /* no thread of ours may keep it current */
        for (int i = 0; i < tls_depth; i++)
                if (tls_stack[i] == c)
                        tls_stack[i] = NULL;
        while (tls_depth > 0 && !tls_stack[tls_depth - 1])
                tls_depth--;
        c->magic = 0;
        free(c);
}

static void push(struct CUctx_st *c)
{
        if (tls_depth < CTX_STACK_MAX)
                tls_stack[tls_depth++] = c;
        else
                tls_stack[CTX_STACK_MAX - 1] = c;
}

SIM_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
        SIM_NEED_INIT();
        if (!pctx)
                return CUDA_ERROR_INVALID_VALUE;
        if (flags & ~0xffu)
                return CUDA_ERROR_INVALID_VALUE;
        struct CUctx_st *c;
        CUresult r = ctx_new(dev, flags, false, &c);
        if (r != CUDA_SUCCESS)
                return r;
        push(c);
        *pctx = c;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
        return cuCtxCreate_v2(pctx, flags, dev);
}

SIM_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n,
                                   unsigned int flags, CUdevice dev)
{
        if (n < 0 || (n > 0 && !params))
                return CUDA_ERROR_INVALID_VALUE;
        return cuCtxCreate_v2(pctx, flags, dev);
}

SIM_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params,
                                   unsigned int flags, CUdevice dev)
{
        if (params && params->numExecAffinityParams < 0)
                return CUDA_ERROR_INVALID_VALUE;
        return cuCtxCreate_v2(pctx, flags, dev);
}

SIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
        SIM_NEED_INIT();
        if (!sim_ctx_valid(ctx) || ctx->primary)
                return CUDA_ERROR_INVALID_CONTEXT;
        ctx_free(ctx);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
        return cuCtxDestroy_v2(ctx);
}

SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
        SIM_NEED_INIT();
        if (!pctx)
                return CUDA_ERROR_INVALID_VALUE;
        *pctx = sim_ctx_current();
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
        SIM_NEED_INIT();
        if (ctx && !sim_ctx_valid(ctx))
                return CUDA_ERROR_INVALID_CONTEXT;
        if (!ctx) {
                if (tls_depth > 0)
                        tls_depth--;
                return CUDA_SUCCESS;
        }
        if (tls_depth == 0)
                push(ctx);
        else
                tls_stack[tls_depth - 1] = ctx;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
        SIM_NEED_INIT();
        if (!sim_ctx_valid(ctx))
                return CUDA_ERROR_INVALID_CONTEXT;
        push(ctx);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx)
{
        return cuCtxPushCurrent_v2(ctx);
}

SIM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
        SIM_NEED_INIT();
        if (tls_depth == 0)
                return CUDA_ERROR_INVALID_CONTEXT;
        struct CUctx_st *c = tls_stack[--tls_depth];
        if (pctx)
                *pctx = c;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx)
{
        return cuCtxPopCurrent_v2(pctx);
}

SIM_EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
        SIM_NEED_INIT();
        if (!dev)
                return CUDA_ERROR_INVALID_VALUE;
        struct CUctx_st *c = sim_ctx_current();
        if (!c)
                return CUDA_ERROR_INVALID_CONTEXT;
        *dev = c->ordinal;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetDevice_v2(CUdevice *dev, CUcontext ctx)
{
        SIM_NEED_INIT();
        if (!dev)
                return CUDA_ERROR_INVALID_VALUE;
        struct CUctx_st *c = ctx ? ctx : sim_ctx_current();
        if (!c || !sim_ctx_valid(c))
                return CUDA_ERROR_INVALID_CONTEXT;
        *dev = c->ordinal;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetFlags(unsigned int *flags)
{
        SIM_NEED_INIT();
        struct CUctx_st *c = sim_ctx_current();
        if (!c)
                return CUDA_ERROR_INVALID_CONTEXT;
        if (!flags)
                return CUDA_ERROR_INVALID_VALUE;
        *flags = c->flags;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
        SIM_NEED_INIT();
        if (!version)
                return CUDA_ERROR_INVALID_VALUE;
        struct CUctx_st *c = ctx ? ctx : sim_ctx_current();
        if (!c || !sim_ctx_valid(c))
                return CUDA_ERROR_INVALID_CONTEXT;
        *version = 3020;
        return CUDA_SUCCESS;
}

CUresult sim_ctx_sync_current(void)
{
        SIM_NEED_INIT();
        struct CUctx_st *c = sim_ctx_current();
        if (!c)
                return CUDA_ERROR_INVALID_CONTEXT;
        sim_ctx_drain(c);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSynchronize(void)
{
        return sim_ctx_sync_current();
}

SIM_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
        SIM_NEED_INIT();
        struct CUctx_st *c = ctx ? ctx : sim_ctx_current();
        if (!c || !sim_ctx_valid(c))
                return CUDA_ERROR_INVALID_CONTEXT;
        sim_ctx_drain(c);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
        SIM_NEED_INIT();
        if (least)
                *least = 0;
        if (greatest)
                *greatest = -5;
        return CUDA_SUCCESS;
}

/* --- primary contexts --- */

SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
        SIM_NEED_INIT();
        if (!pctx)
                return CUDA_ERROR_INVALID_VALUE;
        int p = sim_dev_phys(dev);
        if (p < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        CUresult r = CUDA_SUCCESS;
        pthread_mutex_lock(&sim_g.mu);
        struct CUctx_st *c = sim_g.primary[p];
        pthread_mutex_unlock(&sim_g.mu);
        if (!c) {
                r = ctx_new(dev, sim_g.primary_flags[p], true, &c);
                if (r != CUDA_SUCCESS)
                        return r;
                pthread_mutex_lock(&sim_g.mu);
                if (sim_g.primary[p]) { /* another thread won */
                        pthread_mutex_unlock(&sim_g.mu);
                        c->primary = false;
                        ctx_free(c);
                        pthread_mutex_lock(&sim_g.mu);
                        c = sim_g.primary[p];
                } else {
                        sim_g.primary[p] = c;
                }
                pthread_mutex_unlock(&sim_g.mu);
        }
        pthread_mutex_lock(&sim_g.mu);
        sim_g.primary_refs[p]++;
        pthread_mutex_unlock(&sim_g.mu);
        *pctx = c;
        return CUDA_SUCCESS;
}

static CUresult primary_drop(CUdevice dev, bool reset)
{
        SIM_NEED_INIT();
        int p = sim_dev_phys(dev);
        if (p < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        struct CUctx_st *victim = NULL;
        pthread_mutex_lock(&sim_g.mu);
        if (!sim_g.primary[p]) {
                pthread_mutex_unlock(&sim_g.mu);
                return reset ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
        }
        if (reset || --sim_g.primary_refs[p] <= 0) {
                victim = sim_g.primary[p];
                sim_g.primary[p] = NULL;
                sim_g.primary_refs[p] = 0;
        }
        pthread_mutex_unlock(&sim_g.mu);
        if (victim)
                ctx_free(victim);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
        return primary_drop(dev, false);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
        return primary_drop(dev, false);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
        return primary_drop(dev, true);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
        return primary_drop(dev, true);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
        SIM_NEED_INIT();
        int p = sim_dev_phys(dev);
        if (p < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        if (!flags || !active)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&sim_g.mu);
        *flags = sim_g.primary_flags[p];
        *active = sim_g.primary[p] != NULL;
        pthread_mutex_unlock(&sim_g.mu);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
        SIM_NEED_INIT();
        int p = sim_dev_phys(dev);
        if (p < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        if (flags & ~0xffu)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&sim_g.mu);
        sim_g.primary_flags[p] = flags;
        if (sim_g.primary[p])
                sim_g.primary[p]->flags = flags;
        pthread_mutex_unlock(&sim_g.mu);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
        return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}
