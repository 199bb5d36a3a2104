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
 * The check of the free reserve, the charge of the growth and the update of
 * `used` and `reserved` are one critical section under sim_g.mu, so that
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
        pthread_mutex_lock(&sim_g.mu);
        uint64_t avail = pool->reserved > pool->used ? pool->reserved - pool->used : 0;
        pthread_mutex_unlock(&sim_g.mu);
        if (avail < r)
                sim_pools_release(pool->dev); /* give back the pools' slack first */
        CUresult rc = CUDA_SUCCESS;
        pthread_mutex_lock(&sim_g.mu);
        avail = pool->reserved > pool->used ? pool->reserved - pool->used : 0;
        uint64_t grow = growth(r, avail);
        if (grow) {
                rc = sim_charge(pool->dev, grow);
                uint64_t exact = sim_round(r - avail);
                if (rc != CUDA_SUCCESS && exact < grow) {
                        /* the chunk does not fit, the request may */
                        grow = exact;
                        rc = sim_charge(pool->dev, grow);
                }
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
        return rc;
}

void sim_pool_untake(struct CUmemPoolHandle_st *pool, uint64_t r)
{
        pthread_mutex_lock(&sim_g.mu);
        pool->used = pool->used >= r ? pool->used - r : 0;
        pthread_mutex_unlock(&sim_g.mu);
}
