/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libcuda: how a memory pool's reserve grows for a stream-ordered
 * allocation.
 *
 * A block comes out of the pool's free reserve when there is room, else the
 * reserve grows by at least the pool chunk (SIMGPU_POOL_CHUNK, 32 MiB by
 * default; a larger request grows it by the request rounded to 2 MiB), and
 * the growth is charged to the device. So a small cuMemAllocAsync makes the
 * device (NVML, simgpu-smi) show the chunk, not the request, as a real
 * driver's pools do.
 *
 * Only when the growth does not fit are the pools' free reserves above their
 * release thresholds given back first (then the growth is tried again), so
 * several pools each keep their chunk. The check of the free reserve, the
 * charge of the growth and the update of `used` and `reserved` are one
 * critical section under sim_g.mu, so that
 * concurrent allocations can never both take the same free bytes (used
 * above reserved, and then every later allocation uncharged). Lock order:
 * sim_g.mu, then the state lock (taken by sim_charge); nothing takes them
 * the other way round. */
#include "sim_cuda.h"

/* What the reserve must grow by for r more bytes given avail free ones:
 * at least the chunk, at least the shortfall (rounded to the granularity). */
static uint64_t growth(uint64_t r, uint64_t avail)
{
        if (avail >= r)
                return 0;
        uint64_t need = sim_round(r - avail), chunk = sim_g.cfg.pool_chunk;
        return need > chunk ? need : chunk;
}

CUresult sim_pool_take(struct CUmemPoolHandle_st *pool, uint64_t r)
{
        CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
        for (int attempt = 0; attempt < 2; attempt++) {
                if (attempt)
                        sim_pools_release(pool->dev); /* short of memory: trim the pools, retry */
                pthread_mutex_lock(&sim_g.mu);
                uint64_t avail = pool->reserved > pool->used ? pool->reserved - pool->used : 0;
                uint64_t grow = growth(r, avail);
                rc = grow ? sim_charge(pool->dev, grow) : CUDA_SUCCESS;
                uint64_t exact = grow ? sim_round(r - avail) : 0;
                if (rc != CUDA_SUCCESS && exact < grow) {
                        /* the chunk does not fit, the request may */
                        grow = exact;
                        rc = sim_charge(pool->dev, grow);
                }
                if (rc == CUDA_SUCCESS) {
                        pool->reserved += grow;
                        pool->used += r;
                        if (pool->reserved > pool->reserved_high)
                                pool->reserved_high = pool->reserved;
                        if (pool->used > pool->used_high)
                                pool->used_high = pool->used;
                }
                pthread_mutex_unlock(&sim_g.mu);
                if (rc == CUDA_SUCCESS)
                        break;
        }
        return rc;
}

void sim_pool_untake(struct CUmemPoolHandle_st *pool, uint64_t r)
{
        pthread_mutex_lock(&sim_g.mu);
        pool->used = pool->used >= r ? pool->used - r : 0;
        pthread_mutex_unlock(&sim_g.mu);
}
