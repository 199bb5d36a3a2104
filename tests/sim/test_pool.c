/* SPDX-License-Identifier: Apache-2.0 */
/* Memory pools under concurrency and their chunked reserve, judged by
 * simgpu's ground truth (simgpu-smi), with no context overhead (ENV):
 *  - threads allocating from and freeing to one pool at once never leave a
 *    live block uncharged: the pool's used stays within its reserve and the
 *    process's used memory is at least what is live;
 *  - a pool's reserve grows by chunks (SIMGPU_POOL_CHUNK, 32 MiB here): the
 *    device shows the reserve, not the request. */
#include "simtest.h"

#include <pthread.h>
#include <stdint.h>

#define THREADS 8
#define ROUNDS 300
#define BLOCK (32 * MiB) /* one pool chunk */

static CUcontext ctx;
static CUmemoryPool pool;
static pthread_barrier_t go, done;
static CUdeviceptr blocks[THREADS];

static cuuint64_t pool_attr(CUmemPool_attribute a)
{
        cuuint64_t v = 0;
        CT_CHECK(cuMemPoolGetAttribute(pool, a, &v));
        return v;
}

static uint64_t truth_used(void)
{
        struct ct_smi_proc p;
        CT_ASSERT(ct_smi_proc(getpid(), 0, &p) == 0, "simgpu-smi lists this process");
        return p.used_bytes;
}

static void *work(void *arg)
{
        unsigned i = (unsigned)(uintptr_t)arg;
        CT_CHECK(cuCtxSetCurrent(ctx));
        for (unsigned r = 0; r < ROUNDS; r++) {
                pthread_barrier_wait(&go);
                CT_CHECK(cuMemAllocFromPoolAsync(&blocks[i], BLOCK, pool, NULL));
                pthread_barrier_wait(&done);
        }
        return NULL;
}

/* Each round the pool has exactly one free block of reserve, and THREADS
 * threads each take a block at once: only one of them may have it, the
 * others must grow the reserve (and be charged). */
static void concurrent(void)
{
        cuuint64_t keep = 2 * GiB; /* no release at synchronisation */
        CT_CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
        CT_ASSERT(pthread_barrier_init(&go, NULL, THREADS + 1) == 0, "barrier");
        CT_ASSERT(pthread_barrier_init(&done, NULL, THREADS + 1) == 0, "barrier");
        pthread_t t[THREADS];
        for (unsigned i = 0; i < THREADS; i++)
                CT_ASSERT(pthread_create(&t[i], NULL, work, (void *)(uintptr_t)i) == 0, "thread");
        uint64_t live = (uint64_t)THREADS * BLOCK, worst = UINT64_MAX;
        for (unsigned r = 0; r < ROUNDS; r++) {
                CUdeviceptr one;
                CT_CHECK(cuMemPoolTrimTo(pool, 0));
                CT_CHECK(cuMemAllocFromPoolAsync(&one, BLOCK, pool, NULL));
                CT_CHECK(cuMemFreeAsync(one, NULL)); /* one free block of reserve */
                pthread_barrier_wait(&go);
                pthread_barrier_wait(&done);
                cuuint64_t used = pool_attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
                cuuint64_t reserved = pool_attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
                CT_ASSERT(used == live, "round %u: pool used %llu, live %llu", r,
                          (unsigned long long)used, (unsigned long long)live);
                CT_ASSERT(used <= reserved,
                          "round %u: pool used %llu above its reserve %llu: blocks uncharged", r,
                          (unsigned long long)used, (unsigned long long)reserved);
                if (r % 30 == 0) { /* simgpu-smi is a process: every 30th round */
                        uint64_t truth = truth_used();
                        CT_ASSERT(truth >= live, "round %u: ground truth %llu below the live %llu",
                                  r, (unsigned long long)truth, (unsigned long long)live);
                        worst = truth < worst ? truth : worst;
                }
                for (unsigned i = 0; i < THREADS; i++)
                        CT_CHECK(cuMemFreeAsync(blocks[i], NULL));
        }
        for (unsigned i = 0; i < THREADS; i++)
                pthread_join(t[i], NULL);
        CT_CHECK(cuMemPoolTrimTo(pool, 0));
        CT_ASSERT(truth_used() == 0, "all returned: %llu", (unsigned long long)truth_used());
        printf("concurrent: %u rounds of %u threads, ground truth >= %llu MiB with %llu MiB live\n",
               ROUNDS, THREADS, (unsigned long long)(worst / MiB), (unsigned long long)(live / MiB));
}

static void chunks(void)
{
        cuuint64_t zero = 0;
        CT_CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
        CT_CHECK(cuMemPoolTrimTo(pool, 0));
        CUstream s;
        CT_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CUdeviceptr a, b, c;
        CT_CHECK(cuMemAllocFromPoolAsync(&a, 1 * MiB, pool, s));
        CT_ASSERT(pool_attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 32 * MiB, "a 1 MiB block reserves a chunk: %llu",
                  (unsigned long long)pool_attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));
        CT_ASSERT(pool_attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 2 * MiB, "used %llu",
                  (unsigned long long)pool_attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT));
        CT_ASSERT(truth_used() == 32 * MiB, "the device shows the reserve: %llu",
                  (unsigned long long)truth_used());
        CT_CHECK(cuMemAllocFromPoolAsync(&b, 20 * MiB, pool, s)); /* fits in the chunk */
        CT_ASSERT(truth_used() == 32 * MiB, "from the reserve: %llu", (unsigned long long)truth_used());
        CT_CHECK(cuMemAllocFromPoolAsync(&c, 100 * MiB, pool, s)); /* larger than a chunk */
        CT_ASSERT(truth_used() == 32 * MiB + 90 * MiB, "grown by the shortfall: %llu",
                  (unsigned long long)truth_used());
        CT_CHECK(cuMemFreeAsync(a, s));
        CT_CHECK(cuMemFreeAsync(b, s));
        CT_CHECK(cuMemFreeAsync(c, s));
        CT_CHECK(cuStreamSynchronize(s)); /* threshold 0: all released */
        CT_ASSERT(truth_used() == 0, "released at synchronisation: %llu", (unsigned long long)truth_used());
        /* the default pool (cuMemAllocAsync) grows the same way */
        CT_CHECK(cuMemAllocAsync(&a, 4096, s));
        CT_ASSERT(truth_used() == 32 * MiB, "cuMemAllocAsync: %llu", (unsigned long long)truth_used());
        CT_CHECK(cuMemFreeAsync(a, s));
        CT_CHECK(cuStreamSynchronize(s));
        CT_ASSERT(truth_used() == 0, "default pool released: %llu", (unsigned long long)truth_used());
        CT_CHECK(cuStreamDestroy(s));
        printf("chunks: ok\n");
}

int main(void)
{
        st_fresh();
        CUdevice dev;
        ct_setup(&dev, &ctx);
        CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
        CT_CHECK(cuMemPoolCreate(&pool, &props));
        concurrent();
        chunks();
        CT_CHECK(cuMemPoolDestroy(pool));
        printf("pool: ok\n");
        return 0;
}
