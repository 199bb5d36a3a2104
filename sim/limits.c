/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libcuda: cuCtxSetLimit / cuCtxGetLimit, and the device memory the
 * limits reserve.
 *
 * The real driver backs the per-thread stack (local memory for every thread
 * the GPU can hold at once), the device malloc heap and the printf FIFO
 * with device memory of the context: raising a limit reserves more, lowering
 * it gives back. simgpu charges, per context, what the limits reserve
 * beyond their defaults (whose memory is part of SIMGPU_CTX_OVERHEAD):
 *   stack   (value - 1 KiB) x SMs x 2048 resident threads
 *   heap    value - 8 MiB
 *   printf  value - 1 MiB
 * each rounded up to 2 MiB. A raise that does not fit is
 * CUDA_ERROR_OUT_OF_MEMORY and leaves the limit as it was. The other limits
 * are kept and reported but reserve nothing. */
#include "sim_cuda.h"

#define SIM_THREADS_PER_SM 2048ull

static const size_t defaults[CU_LIMIT_MAX] = {
        [CU_LIMIT_STACK_SIZE] = 1024,
        [CU_LIMIT_PRINTF_FIFO_SIZE] = 1u << 20,
        [CU_LIMIT_MALLOC_HEAP_SIZE] = 8u << 20,
        [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
        [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
        [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64,
        [CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
        [CU_LIMIT_SHMEM_SIZE] = 0,
        [CU_LIMIT_CIG_ENABLED] = 0,
        [CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED] = 1,
};

/* Under sim_g.mu: the value of limit l in c. */
static size_t value_of(const struct CUctx_st *c, CUlimit l)
{
        return (c->limits_set & (1u << l)) ? c->limits[l] : defaults[l];
}

/* What the limits reserve beyond the defaults (stack, heap, printf). */
static uint64_t reserve_of(uint64_t stack, uint64_t heap, uint64_t fifo)
{
        uint64_t threads = (uint64_t)sim_g.st->sms * SIM_THREADS_PER_SM, total = 0;
        uint64_t extra[3] = { stack > 1024 ? stack - 1024 : 0, heap > (8u << 20) ? heap - (8u << 20) : 0,
                              fifo > (1u << 20) ? fifo - (1u << 20) : 0 };
        if (extra[0] > UINT64_MAX / threads)
                return UINT64_MAX;
        extra[0] *= threads;
        for (int i = 0; i < 3; i++) {
                uint64_t r = sim_round(extra[i]);
                if (r == UINT64_MAX || total > UINT64_MAX - r)
                        return UINT64_MAX;
                total += r;
        }
        return total;
}

SIM_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
        SIM_NEED_INIT();
        struct CUctx_st *c = sim_ctx_current();
        if (!c)
                return CUDA_ERROR_INVALID_CONTEXT;
        if ((unsigned)limit >= CU_LIMIT_MAX || limit == CU_LIMIT_SHMEM_SIZE ||
            limit == CU_LIMIT_CIG_ENABLED)
                return CUDA_ERROR_UNSUPPORTED_LIMIT;
        if (limit == CU_LIMIT_MAX_L2_FETCH_GRANULARITY && value > 128)
                return CUDA_ERROR_INVALID_VALUE;
        /* One critical section (sim_g.mu, then the state lock in sim_charge):
         * two threads raising limits at once are both charged. */
        pthread_mutex_lock(&sim_g.mu);
        uint64_t v[3] = { value_of(c, CU_LIMIT_STACK_SIZE), value_of(c, CU_LIMIT_MALLOC_HEAP_SIZE),
                          value_of(c, CU_LIMIT_PRINTF_FIFO_SIZE) };
        if (limit == CU_LIMIT_STACK_SIZE)
                v[0] = value;
        else if (limit == CU_LIMIT_MALLOC_HEAP_SIZE)
                v[1] = value;
        else if (limit == CU_LIMIT_PRINTF_FIFO_SIZE)
                v[2] = value;
        uint64_t want = reserve_of(v[0], v[1], v[2]);
        CUresult rc = CUDA_SUCCESS;
        if (want == UINT64_MAX)
                rc = CUDA_ERROR_OUT_OF_MEMORY;
        else if (want > c->limits_charged)
                rc = sim_charge(c->dev, want - c->limits_charged);
        else if (want < c->limits_charged)
                sim_uncharge(c->dev, c->limits_charged - want);
        if (rc == CUDA_SUCCESS) {
                c->limits_charged = want;
                c->limits[limit] = value;
                c->limits_set |= 1u << limit;
        }
        pthread_mutex_unlock(&sim_g.mu);
        return rc;
}

SIM_EXPORT CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
        SIM_NEED_INIT();
        struct CUctx_st *c = sim_ctx_current();
        if (!c)
                return CUDA_ERROR_INVALID_CONTEXT;
        if (!pvalue)
                return CUDA_ERROR_INVALID_VALUE;
        if ((unsigned)limit >= CU_LIMIT_MAX)
                return CUDA_ERROR_UNSUPPORTED_LIMIT;
        pthread_mutex_lock(&sim_g.mu);
        *pvalue = value_of(c, limit);
        pthread_mutex_unlock(&sim_g.mu);
        return CUDA_SUCCESS;
}

void sim_ctx_limits_free(struct CUctx_st *c)
{
        pthread_mutex_lock(&sim_g.mu);
        uint64_t give = c->limits_charged;
        c->limits_charged = 0;
        c->limits_set = 0;
        pthread_mutex_unlock(&sim_g.mu);
        sim_uncharge(c->dev, give);
}
