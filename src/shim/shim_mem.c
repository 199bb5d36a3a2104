/* SPDX-License-Identifier: Apache-2.0 */
/* Memory hooks: every device-memory allocation path is charged (rounded up
 * to 2 MiB) BEFORE the driver call and given back if the driver fails; past
 * the cap the call returns CUDA_ERROR_OUT_OF_MEMORY and the driver is not
 * called. Frees of pointers the shim did not charge go to the driver with
 * the books untouched.
 *
 * Stream-ordered allocations are charged by what their pool RESERVES (the
 * driver's CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT): a pool keeps freed blocks
 * until synchronisation or trimming, and that memory is still the slice's.
 * The request is reserved provisionally before the call; afterwards the
 * pool's charge is set to its reserve. Pool charges are re-read on every
 * stream-ordered alloc/free, on cuMemPoolTrimTo, before refusing any
 * reservation and in reports, so a pool that shrank at synchronisation
 * gives its memory back. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "shim.h"

#define MAX_POOLS 64

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
        CUmemoryPool pool;
        uint64_t charged;
} pools[MAX_POOLS];
static unsigned n_pools;

int shim_reserve(uint64_t bytes)
{
        if (bytes == UINT64_MAX)
                return -ENOMEM;
        int saved = errno; /* liveness checks read /proc */
        int r = shim_books_reserve(bytes);
        if (r == -ENOMEM && n_pools) {
                shim_pools_refresh();
                r = shim_books_reserve(bytes);
        }
        if (r < 0)
                shim_log("refused %llu bytes: the slice uses %llu of %llu",
                         (unsigned long long)bytes, (unsigned long long)shim_books_used(),
                         (unsigned long long)shim_conf.memory_limit);
        errno = saved;
        return r;
}

/* Applies a change of `delta` (signed) to the books. */
static void books_apply(int64_t delta)
{
        if (delta > 0)
                shim_books_force((uint64_t)delta);
        else if (delta < 0)
                shim_books_release((uint64_t)-delta);
}

static bool pool_reserved(CUmemoryPool pool, uint64_t *ret)
{
        cuuint64_t v = 0;
        if (!shim_x.cuMemPoolGetAttribute ||
            shim_x.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS)
                return false;
        *ret = shim_round(v);
        return true;
}

/* Re-reads pool i's reserve (pool_mu held); returns the change. */
static int64_t pool_update_locked(unsigned i)
{
        uint64_t now;
        if (!pool_reserved(pools[i].pool, &now))
                return 0;
        int64_t d = (int64_t)now - (int64_t)pools[i].charged;
        pools[i].charged = now;
        return d;
}

static int pool_find_locked(CUmemoryPool pool)
{
        for (unsigned i = 0; i < n_pools; i++)
                if (pools[i].pool == pool)
                        return (int)i;
        return -1;
}

void shim_pools_refresh(void)
{
        int64_t d = 0;
        pthread_mutex_lock(&pool_mu);
        for (unsigned i = 0; i < n_pools; i++)
                d += pool_update_locked(i);
        pthread_mutex_unlock(&pool_mu);
        books_apply(d);
}

/* After a successful stream-ordered allocation from `pool` with
 * `provisional` bytes reserved: settle the pool's charge. Returns false if
 * the pool cannot be tracked (then the allocation keeps its provisional
 * charge). */
static bool pool_settle(CUmemoryPool pool, uint64_t provisional)
{
        uint64_t probe_v;
        if (!pool || !pool_reserved(pool, &probe_v))
                return false;
        pthread_mutex_lock(&pool_mu);
        int i = pool_find_locked(pool);
        if (i < 0 && n_pools < MAX_POOLS) {
                i = (int)n_pools++;
                pools[i].pool = pool;
                pools[i].charged = 0;
        }
        if (i < 0) {
                pthread_mutex_unlock(&pool_mu);
                shim_log("more than %d memory pools: charging per allocation", MAX_POOLS);
                return false;
        }
        int64_t d = pool_update_locked((unsigned)i);
        pthread_mutex_unlock(&pool_mu);
        books_apply(d - (int64_t)provisional);
        return true;
}

static void pool_refresh_one(CUmemoryPool pool)
{
        int64_t d = 0;
        pthread_mutex_lock(&pool_mu);
        int i = pool_find_locked(pool);
        if (i >= 0)
                d = pool_update_locked((unsigned)i);
        pthread_mutex_unlock(&pool_mu);
        books_apply(d);
}

/* ---- linear allocations ---- */

/* Records a successful allocation; on failure to record, undoes it. */
static CUresult track(uint32_t kind, uint64_t key, uint64_t bytes, uint64_t aux)
{
        if (shim_table_put(kind, key, bytes, aux) == 0)
                return CUDA_SUCCESS;
        shim_log("out of process memory for the allocation table: refusing an allocation");
        return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult shim_w_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
        SHIM_ENTER(cuMemAlloc_v2, REAL(cuMemAlloc_v2)(dptr, bytesize));
        if (!dptr || !bytesize)
                return REAL(cuMemAlloc_v2)(dptr, bytesize);
        uint64_t b = shim_round(bytesize);
        if (shim_reserve(b) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = REAL(cuMemAlloc_v2)(dptr, bytesize);
        if (r != CUDA_SUCCESS) {
                shim_books_release(b);
                return r;
        }
        if (track(SHIM_K_PTR, *dptr, b, 0) != CUDA_SUCCESS) {
                REAL(cuMemFree_v2)(*dptr);
                shim_books_release(b);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return r;
}

CUresult shim_w_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
        SHIM_ENTER(cuMemAllocManaged, REAL(cuMemAllocManaged)(dptr, bytesize, flags));
        if (!dptr || !bytesize)
                return REAL(cuMemAllocManaged)(dptr, bytesize, flags);
        /* Managed memory may live on the host, but it may all migrate to
         * the device: charged in full. */
        uint64_t b = shim_round(bytesize);
        if (shim_reserve(b) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = REAL(cuMemAllocManaged)(dptr, bytesize, flags);
        if (r != CUDA_SUCCESS) {
                shim_books_release(b);
                return r;
        }
        if (track(SHIM_K_PTR, *dptr, b, 0) != CUDA_SUCCESS) {
                REAL(cuMemFree_v2)(*dptr);
                shim_books_release(b);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return r;
}

CUresult shim_w_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                   size_t Height, unsigned int ElementSizeBytes)
{
        SHIM_ENTER(cuMemAllocPitch_v2,
                   REAL(cuMemAllocPitch_v2)(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
        if (!dptr || !pPitch || !WidthInBytes || !Height ||
            WidthInBytes > UINT64_MAX / 2 / Height)
                return REAL(cuMemAllocPitch_v2)(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
        /* Reserve for the widest pitch the driver may choose (512-byte
         * alignment), then settle on pitch * height as returned. */
        uint64_t est = shim_round((uint64_t)((WidthInBytes + 511) & ~(size_t)511) * Height);
        if (shim_reserve(est) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = REAL(cuMemAllocPitch_v2)(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
        if (r != CUDA_SUCCESS) {
                shim_books_release(est);
                return r;
        }
        uint64_t b = shim_round((uint64_t)*pPitch * Height);
        if (b > est && shim_reserve(b - est) < 0) {
                REAL(cuMemFree_v2)(*dptr);
                shim_books_release(est);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (b < est)
                shim_books_release(est - b);
        if (track(SHIM_K_PTR, *dptr, b, 0) != CUDA_SUCCESS) {
                REAL(cuMemFree_v2)(*dptr);
                shim_books_release(b);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return r;
}

static CUresult free_tracked(CUdeviceptr dptr, CUresult (*do_free)(CUdeviceptr, CUstream),
                             CUstream s);

CUresult shim_w_cuMemFree_v2(CUdeviceptr dptr)
{
        SHIM_ENTER(cuMemFree_v2, REAL(cuMemFree_v2)(dptr));
        return free_tracked(dptr, NULL, NULL);
}

/* Frees dptr with cuMemFree_v2 (do_free NULL) or a stream-ordered free,
 * then gives back what it was charged. The entry leaves the table before
 * the driver call (so the address cannot be handed out and recorded again
 * meanwhile) and returns to it if the driver refuses. */
static CUresult free_tracked(CUdeviceptr dptr, CUresult (*do_free)(CUdeviceptr, CUstream), CUstream s)
{
        struct shim_entry e;
        uint32_t kind = SHIM_K_PTR;
        bool had = shim_table_take(SHIM_K_PTR, dptr, &e);
        if (!had && shim_table_take(SHIM_K_ASYNC, dptr, &e)) {
                had = true;
                kind = SHIM_K_ASYNC;
        }
        CUresult r = do_free ? do_free(dptr, s) : REAL(cuMemFree_v2)(dptr);
        if (!had)
                return r;
        if (r != CUDA_SUCCESS) {
                shim_table_put(kind, e.key, e.bytes, e.aux);
                return r;
        }
        shim_books_release(e.bytes);
        if (kind == SHIM_K_ASYNC && e.aux)
                pool_refresh_one((CUmemoryPool)(uintptr_t)e.aux);
        return r;
}

/* ---- stream-ordered allocation ---- */

static CUmemoryPool current_pool(CUstream s)
{
        CUdevice dev = 0;
        CUmemoryPool pool = NULL;
        (void)s; /* every context of a slice is on its one GPU: the current device's pool */
        if (!shim_x.cuCtxGetDevice || shim_x.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
                return NULL;
        if (!shim_x.cuDeviceGetMemPool || shim_x.cuDeviceGetMemPool(&pool, dev) != CUDA_SUCCESS)
                return NULL;
        return pool;
}

static CUresult async_alloc(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream s,
                            int hook)
{
        uint64_t b = shim_round(bytesize);
        if (shim_reserve(b) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r;
        switch (hook) {
        case SHIM_H_cuMemAllocAsync:
                r = REAL(cuMemAllocAsync)(dptr, bytesize, s);
                break;
        case SHIM_H_cuMemAllocAsync_ptsz:
                r = REAL(cuMemAllocAsync_ptsz)(dptr, bytesize, s);
                break;
        case SHIM_H_cuMemAllocFromPoolAsync:
                r = REAL(cuMemAllocFromPoolAsync)(dptr, bytesize, pool, s);
                break;
        default:
                r = REAL(cuMemAllocFromPoolAsync_ptsz)(dptr, bytesize, pool, s);
                break;
        }
        if (r != CUDA_SUCCESS) {
                shim_books_release(b);
                return r;
        }
        if (!pool)
                pool = current_pool(s);
        bool settled = pool_settle(pool, b);
        if (track(SHIM_K_ASYNC, *dptr, settled ? 0 : b, settled ? (uint64_t)(uintptr_t)pool : 0) !=
            CUDA_SUCCESS) {
                /* Cannot record it: the pool keeps the memory anyway. */
                shim_log("stream-ordered allocation not recorded; its free will not be credited");
        }
        return r;
}

CUresult shim_w_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
        SHIM_ENTER(cuMemAllocAsync, REAL(cuMemAllocAsync)(dptr, bytesize, hStream));
        if (!dptr || !bytesize)
                return REAL(cuMemAllocAsync)(dptr, bytesize, hStream);
        return async_alloc(dptr, bytesize, NULL, hStream, SHIM_H_cuMemAllocAsync);
}

CUresult shim_w_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
        SHIM_ENTER(cuMemAllocAsync_ptsz, REAL(cuMemAllocAsync_ptsz)(dptr, bytesize, hStream));
        if (!dptr || !bytesize)
                return REAL(cuMemAllocAsync_ptsz)(dptr, bytesize, hStream);
        return async_alloc(dptr, bytesize, NULL, hStream, SHIM_H_cuMemAllocAsync_ptsz);
}

CUresult shim_w_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream hStream)
{
        SHIM_ENTER(cuMemAllocFromPoolAsync,
                   REAL(cuMemAllocFromPoolAsync)(dptr, bytesize, pool, hStream));
        if (!dptr || !bytesize || !pool)
                return REAL(cuMemAllocFromPoolAsync)(dptr, bytesize, pool, hStream);
        return async_alloc(dptr, bytesize, pool, hStream, SHIM_H_cuMemAllocFromPoolAsync);
}

CUresult shim_w_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream hStream)
{
        SHIM_ENTER(cuMemAllocFromPoolAsync_ptsz,
                   REAL(cuMemAllocFromPoolAsync_ptsz)(dptr, bytesize, pool, hStream));
        if (!dptr || !bytesize || !pool)
                return REAL(cuMemAllocFromPoolAsync_ptsz)(dptr, bytesize, pool, hStream);
        return async_alloc(dptr, bytesize, pool, hStream, SHIM_H_cuMemAllocFromPoolAsync_ptsz);
}

static CUresult real_free_async(CUdeviceptr p, CUstream s)
{
        return REAL(cuMemFreeAsync)(p, s);
}

static CUresult real_free_async_ptsz(CUdeviceptr p, CUstream s)
{
        return REAL(cuMemFreeAsync_ptsz)(p, s);
}

CUresult shim_w_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
        SHIM_ENTER(cuMemFreeAsync, REAL(cuMemFreeAsync)(dptr, hStream));
        return free_tracked(dptr, real_free_async, hStream);
}

CUresult shim_w_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
        SHIM_ENTER(cuMemFreeAsync_ptsz, REAL(cuMemFreeAsync_ptsz)(dptr, hStream));
        return free_tracked(dptr, real_free_async_ptsz, hStream);
}

CUresult shim_w_cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
        SHIM_ENTER(cuMemPoolTrimTo, REAL(cuMemPoolTrimTo)(pool, minBytesToKeep));
        CUresult r = REAL(cuMemPoolTrimTo)(pool, minBytesToKeep);
        if (r == CUDA_SUCCESS)
                pool_refresh_one(pool);
        return r;
}

CUresult shim_w_cuMemPoolDestroy(CUmemoryPool pool)
{
        SHIM_ENTER(cuMemPoolDestroy, REAL(cuMemPoolDestroy)(pool));
        CUresult r = REAL(cuMemPoolDestroy)(pool);
        if (r != CUDA_SUCCESS)
                return r;
        uint64_t give = 0;
        pthread_mutex_lock(&pool_mu);
        int i = pool_find_locked(pool);
        if (i >= 0) {
                give = pools[i].charged;
                pools[i] = pools[--n_pools];
        }
        pthread_mutex_unlock(&pool_mu);
        shim_books_release(give);
        return r;
}

/* ---- virtual memory management ---- */

CUresult shim_w_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
        SHIM_ENTER(cuMemCreate, REAL(cuMemCreate)(handle, size, prop, flags));
        if (!handle || !prop || !size || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
                return REAL(cuMemCreate)(handle, size, prop, flags); /* host memory: not charged */
        uint64_t b = shim_round(size);
        if (shim_reserve(b) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = REAL(cuMemCreate)(handle, size, prop, flags);
        if (r != CUDA_SUCCESS) {
                shim_books_release(b);
                return r;
        }
        if (track(SHIM_K_VMM, *handle, b, 0) != CUDA_SUCCESS) {
                REAL(cuMemRelease)(*handle);
                shim_books_release(b);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return r;
}

CUresult shim_w_cuMemRelease(CUmemGenericAllocationHandle handle)
{
        SHIM_ENTER(cuMemRelease, REAL(cuMemRelease)(handle));
        struct shim_entry e;
        bool had = shim_table_take(SHIM_K_VMM, handle, &e);
        CUresult r = REAL(cuMemRelease)(handle);
        shim_table_settle(had, &e, r);
        return r;
}

/* ---- legacy 32-bit entry points: refused inside a slice ---- */

static CUresult legacy_refused(const char *name)
{
        shim_log("%s (32-bit legacy ABI) is not supported inside a slice", name);
        return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult shim_w_cuMemAlloc(shim_deviceptr_v1 *dptr, unsigned int bytesize)
{
        SHIM_ENTER(cuMemAlloc, REAL(cuMemAlloc)(dptr, bytesize));
        return legacy_refused("cuMemAlloc");
}

CUresult shim_w_cuMemAllocPitch(shim_deviceptr_v1 *dptr, unsigned int *pPitch, unsigned int w,
                                unsigned int h, unsigned int e)
{
        SHIM_ENTER(cuMemAllocPitch, REAL(cuMemAllocPitch)(dptr, pPitch, w, h, e));
        return legacy_refused("cuMemAllocPitch");
}

CUresult shim_w_cuArrayCreate(CUarray *pHandle, const void *desc)
{
        SHIM_ENTER(cuArrayCreate, REAL(cuArrayCreate)(pHandle, desc));
        return legacy_refused("cuArrayCreate");
}

CUresult shim_w_cuArray3DCreate(CUarray *pHandle, const void *desc)
{
        SHIM_ENTER(cuArray3DCreate, REAL(cuArray3DCreate)(pHandle, desc));
        return legacy_refused("cuArray3DCreate");
}

/* ---- graph memory nodes: refused inside a slice ---- */

/* A memory-allocation node allocates when its graph is launched, outside
 * every hooked allocation path, and the graph keeps it (and may reuse it
 * across launches) as the driver sees fit: the shim cannot charge it, so
 * inside a slice such nodes are refused rather than let past the cap. */
static CUresult graph_alloc_refused(const char *name)
{
        shim_log("%s: graph memory-allocation nodes are not supported inside a slice "
                 "(CUDA_ERROR_NOT_SUPPORTED): their memory could not be charged",
                 name);
        return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult shim_w_cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                       const CUgraphNode *dependencies, size_t numDependencies,
                                       CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
        enum shim_mode m = shim_init();
        if (m == SHIM_MODE_PASS || shim_depth > 0) {
                if (!REAL(cuGraphAddMemAllocNode))
                        return CUDA_ERROR_NOT_FOUND;
                return REAL(cuGraphAddMemAllocNode)(phGraphNode, hGraph, dependencies,
                                                    numDependencies, nodeParams);
        }
        if (m == SHIM_MODE_FAILED)
                return SHIM_FAIL_CLOSED_CU;
        return graph_alloc_refused("cuGraphAddMemAllocNode");
}

/* Slice mode (not called by the driver itself): a memory-allocation node
 * is refused whether or not the driver has the entry point. */
static bool graph_refuses(CUgraphNodeParams *nodeParams, CUresult *ret)
{
        enum shim_mode m = shim_init();
        if (m == SHIM_MODE_PASS || shim_depth > 0)
                return false;
        if (m == SHIM_MODE_FAILED) {
                *ret = SHIM_FAIL_CLOSED_CU;
                return true;
        }
        if (nodeParams && nodeParams->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
                *ret = graph_alloc_refused("cuGraphAddNode");
                return true;
        }
        return false;
}

CUresult shim_w_cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                               const CUgraphNode *dependencies, size_t numDependencies,
                               CUgraphNodeParams *nodeParams)
{
        CUresult r;
        if (graph_refuses(nodeParams, &r))
                return r;
        if (!REAL(cuGraphAddNode))
                return CUDA_ERROR_NOT_FOUND;
        return REAL(cuGraphAddNode)(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

CUresult shim_w_cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                  const CUgraphNode *dependencies,
                                  const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                  CUgraphNodeParams *nodeParams)
{
        CUresult r;
        if (graph_refuses(nodeParams, &r))
                return r;
        if (!REAL(cuGraphAddNode_v2))
                return CUDA_ERROR_NOT_FOUND;
        return REAL(cuGraphAddNode_v2)(phGraphNode, hGraph, dependencies, dependencyData,
                                       numDependencies, nodeParams);
}
