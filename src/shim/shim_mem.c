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
 * gives its memory back.
 *
 * Every pool an allocation comes from is tracked (the table grows; a pool
 * the shim cannot track or tell is refused, never left uncharged): the
 * default pool of the stream's context when the call names none. A
 * destroyed pool stays charged for its outstanding blocks until they are
 * freed. A VMM allocation (cuMemCreate) is charged until its last handle
 * reference (cuMemCreate, cuMemRetainAllocationHandle) is released AND its
 * last mapping unmapped, as the driver frees it; allocations of a context
 * are credited when the context is destroyed (the driver frees them). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim_reserve.h"

/* A pool this process allocated from. */
struct pool_rec {
        CUmemoryPool pool;
        uint64_t charged;  /* what the books hold for it */
        uint64_t live;     /* bytes of its blocks this process has not freed */
        bool destroyed;    /* cuMemPoolDestroy'd: charged = live, until they are freed */
};
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pool_rec *pools;
static unsigned n_pools, cap_pools;

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
        if (r == -ENOMEM)
                shim_books_refused(bytes); /* counted once per refused call */
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

/* Re-reads pool i's reserve (pool_mu held); returns the change. A destroyed
 * pool cannot be asked: its charge follows its outstanding blocks. */
static int64_t pool_update_locked(unsigned i)
{
        uint64_t now;
        if (pools[i].destroyed || !pool_reserved(pools[i].pool, &now))
                return 0;
        int64_t d = (int64_t)now - (int64_t)pools[i].charged;
        pools[i].charged = now;
        return d;
}

/* The live (not destroyed) record of pool, or -1. */
static int pool_find_locked(CUmemoryPool pool)
{
        for (unsigned i = 0; i < n_pools; i++)
                if (pools[i].pool == pool && !pools[i].destroyed)
                        return (int)i;
        return -1;
}

/* The record of pool, added when absent; -1 when the table cannot grow. */
static int pool_track_locked(CUmemoryPool pool)
{
        int i = pool_find_locked(pool);
        if (i >= 0)
                return i;
        if (n_pools == cap_pools) {
                unsigned cap = cap_pools ? cap_pools * 2 : 16;
                struct pool_rec *p = realloc(pools, cap * sizeof(*p));
                if (!p)
                        return -1;
                pools = p;
                cap_pools = cap;
        }
        pools[n_pools] = (struct pool_rec){ .pool = pool };
        return (int)n_pools++;
}

static void pool_remove_locked(unsigned i)
{
        pools[i] = pools[--n_pools];
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

/* A block of `bytes` from pool is gone (freed, or with its context): a live
 * pool's charge follows its reserve; a destroyed pool gives the block back
 * and is forgotten with its last block. */
static void pool_block_gone(CUmemoryPool pool, uint64_t bytes)
{
        int64_t d = 0;
        pthread_mutex_lock(&pool_mu);
        int i = pool_find_locked(pool);
        if (i < 0) {
                for (unsigned j = 0; j < n_pools && i < 0; j++)
                        if (pools[j].pool == pool && pools[j].live)
                                i = (int)j;
        }
        if (i >= 0) {
                struct pool_rec *p = &pools[i];
                p->live = p->live >= bytes ? p->live - bytes : 0;
                if (p->destroyed) {
                        uint64_t give = p->charged > p->live ? p->charged - p->live : 0;
                        p->charged -= give;
                        d = -(int64_t)give;
                        if (!p->live)
                                pool_remove_locked((unsigned)i);
                } else {
                        d = pool_update_locked((unsigned)i);
                }
        }
        pthread_mutex_unlock(&pool_mu);
        books_apply(d);
}

/* ---- linear allocations ---- */

/* Records a successful allocation; on failure to record, undoes it. */
static CUresult track(uint32_t kind, uint64_t key, uint64_t bytes, uint64_t aux)
{
        uint64_t ctx = kind == SHIM_K_PTR ? shim_current_ctx() : 0; /* freed with its context */
        if (shim_table_put_in(kind, key, bytes, aux, ctx) == 0)
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
        /* What the driver refuses gets its answer, before any charge: an
         * element size other than 4, 8 or 16 is CUDA_ERROR_INVALID_VALUE,
         * not out of memory. */
        if (!dptr || !pPitch || !WidthInBytes || !Height ||
            (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) ||
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
                shim_table_put_in(kind, e.key, e.bytes, e.aux, e.ctx);
                return r;
        }
        if (kind == SHIM_K_ASYNC)
                pool_block_gone((CUmemoryPool)(uintptr_t)e.aux, e.bytes);
        else
                shim_books_release(e.bytes);
        return r;
}

/* ---- stream-ordered allocation ---- */

/* The context of stream s (the current one for the NULL and per-thread
 * streams); 0 when the driver cannot tell. */
static CUcontext stream_ctx(CUstream s)
{
        CUcontext c = NULL;
        if (!shim_x.cuStreamGetCtx || shim_x.cuStreamGetCtx(s, &c) != CUDA_SUCCESS)
                return NULL;
        return c;
}

/* The pool cuMemAllocAsync on stream s takes from: the current pool of the
 * device of the stream's context (which need not be current on this
 * thread). NULL when it cannot be told. */
static CUmemoryPool stream_pool(CUstream s, CUcontext c)
{
        CUdevice dev = 0;
        CUmemoryPool pool = NULL;
        if (!shim_x.cuCtxGetDevice || !shim_x.cuDeviceGetMemPool)
                return NULL;
        bool pushed = false;
        if (shim_x.cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
            shim_current_ctx() != (uint64_t)(uintptr_t)c) {
                /* Ask with the stream's context current, then put it back. */
                if (!c || !shim_x.cuCtxPushCurrent || !shim_x.cuCtxPopCurrent ||
                    shim_x.cuCtxPushCurrent(c) != CUDA_SUCCESS)
                        return NULL;
                pushed = true;
        }
        CUresult r = shim_x.cuCtxGetDevice(&dev);
        if (pushed) {
                CUcontext popped;
                shim_x.cuCtxPopCurrent(&popped);
        }
        if (r != CUDA_SUCCESS || shim_x.cuDeviceGetMemPool(&pool, dev) != CUDA_SUCCESS)
                return NULL;
        (void)s;
        return pool;
}

static CUresult call_async(int hook, CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                           CUstream s)
{
        switch (hook) {
        case SHIM_H_cuMemAllocAsync: return REAL(cuMemAllocAsync)(dptr, bytesize, s);
        case SHIM_H_cuMemAllocAsync_ptsz: return REAL(cuMemAllocAsync_ptsz)(dptr, bytesize, s);
        case SHIM_H_cuMemAllocFromPoolAsync:
                return REAL(cuMemAllocFromPoolAsync)(dptr, bytesize, pool, s);
        default: return REAL(cuMemAllocFromPoolAsync_ptsz)(dptr, bytesize, pool, s);
        }
}

/* A stream-ordered allocation: its pool is tracked before the driver is
 * called (a pool that cannot be told or tracked refuses the allocation:
 * its reserve would go uncharged); the request is reserved provisionally,
 * then the pool's charge is set to its reserve. */
static CUresult async_alloc(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream s,
                            int hook)
{
        CUcontext c = stream_ctx(s);
        bool named = pool != NULL;
        if (!pool)
                pool = stream_pool(s, c);
        if (!pool) {
                if (!c) /* the stream has no context: nothing to allocate in */
                        return CUDA_ERROR_INVALID_CONTEXT;
                shim_log("stream-ordered allocation refused: its pool cannot be told");
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        pthread_mutex_lock(&pool_mu);
        int i = pool_track_locked(pool);
        pthread_mutex_unlock(&pool_mu);
        if (i < 0) {
                shim_log("stream-ordered allocation refused: out of memory to track its pool");
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        uint64_t b = shim_round(bytesize);
        if (shim_reserve(b) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = call_async(hook, dptr, bytesize, named ? pool : NULL, s);
        if (r != CUDA_SUCCESS) {
                shim_books_release(b);
                return r;
        }
        int64_t d = 0;
        pthread_mutex_lock(&pool_mu);
        i = pool_track_locked(pool);
        if (i >= 0) {
                pools[i].live += b;
                d = pool_update_locked((unsigned)i);
        }
        pthread_mutex_unlock(&pool_mu);
        books_apply(d - (int64_t)b);
        if (shim_table_put_in(SHIM_K_ASYNC, *dptr, b, (uint64_t)(uintptr_t)pool,
                              (uint64_t)(uintptr_t)c) != 0)
                shim_log("stream-ordered allocation not recorded; its pool stays charged");
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
        /* The driver frees the pool's free reserve now and each outstanding
         * block when it is freed: the charge stays for those. */
        uint64_t give = 0;
        pthread_mutex_lock(&pool_mu);
        int i = pool_find_locked(pool);
        if (i >= 0) {
                struct pool_rec *p = &pools[i];
                give = p->charged > p->live ? p->charged - p->live : 0;
                p->charged -= give;
                p->destroyed = true;
                if (!p->live)
                        pool_remove_locked((unsigned)i);
        }
        pthread_mutex_unlock(&pool_mu);
        shim_books_release(give);
        return r;
}

/* ---- virtual memory management ---- */

/* A cuMemCreate allocation's entry (SHIM_K_VMM, keyed by handle) counts its
 * references in aux: one per unreleased handle reference and one per
 * mapping (SHIM_K_MAP, keyed by address). Its bytes go back to the books
 * when the count drops to zero, as the driver frees it then. vmm_mu spans
 * each driver call and its table update, so that a handle value the driver
 * frees and hands out again cannot meet a stale entry. */
static pthread_mutex_t vmm_mu = PTHREAD_MUTEX_INITIALIZER;

/* Changes handle h's reference count by delta (vmm_mu held); untracked
 * handles (host memory, imports) are left alone. */
static void vmm_ref_locked(uint64_t h, int delta)
{
        struct shim_entry e;
        if (!shim_table_get(SHIM_K_VMM, h, &e))
                return;
        if ((int64_t)e.aux + delta > 0) {
                shim_table_put_in(SHIM_K_VMM, h, e.bytes, (uint64_t)((int64_t)e.aux + delta), e.ctx);
                return;
        }
        shim_table_take(SHIM_K_VMM, h, &e);
        shim_books_release(e.bytes);
}

CUresult shim_w_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
        SHIM_ENTER(cuMemCreate, REAL(cuMemCreate)(handle, size, prop, flags));
        if (prop && !shim_location_ok(&prop->location, "cuMemCreate"))
                return CUDA_ERROR_INVALID_DEVICE;
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
        pthread_mutex_lock(&vmm_mu);
        r = track(SHIM_K_VMM, *handle, b, 1);
        pthread_mutex_unlock(&vmm_mu);
        if (r != CUDA_SUCCESS) {
                REAL(cuMemRelease)(*handle);
                shim_books_release(b);
        }
        return r;
}

CUresult shim_w_cuMemRelease(CUmemGenericAllocationHandle handle)
{
        SHIM_ENTER(cuMemRelease, REAL(cuMemRelease)(handle));
        pthread_mutex_lock(&vmm_mu);
        CUresult r = REAL(cuMemRelease)(handle);
        if (r == CUDA_SUCCESS)
                vmm_ref_locked(handle, -1); /* freed only with its last mapping */
        pthread_mutex_unlock(&vmm_mu);
        return r;
}

CUresult shim_w_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
        SHIM_ENTER(cuMemRetainAllocationHandle, REAL(cuMemRetainAllocationHandle)(handle, addr));
        pthread_mutex_lock(&vmm_mu);
        CUresult r = REAL(cuMemRetainAllocationHandle)(handle, addr);
        if (r == CUDA_SUCCESS && handle)
                vmm_ref_locked(*handle, +1);
        pthread_mutex_unlock(&vmm_mu);
        return r;
}

CUresult shim_w_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags)
{
        SHIM_ENTER(cuMemMap, REAL(cuMemMap)(ptr, size, offset, handle, flags));
        pthread_mutex_lock(&vmm_mu);
        CUresult r = REAL(cuMemMap)(ptr, size, offset, handle, flags);
        struct shim_entry e;
        if (r == CUDA_SUCCESS && shim_table_get(SHIM_K_VMM, handle, &e)) {
                if (shim_table_put(SHIM_K_MAP, ptr, size, handle) == 0)
                        vmm_ref_locked(handle, +1);
                else /* unrecorded: charged until the process is gone */
                        shim_log("mapping not recorded: its allocation stays charged");
        }
        pthread_mutex_unlock(&vmm_mu);
        return r;
}

CUresult shim_w_cuMemUnmap(CUdeviceptr ptr, size_t size)
{
        SHIM_ENTER(cuMemUnmap, REAL(cuMemUnmap)(ptr, size));
        pthread_mutex_lock(&vmm_mu);
        CUresult r = REAL(cuMemUnmap)(ptr, size);
        /* The range may span several contiguous mappings: each one found
         * at the start of what is left drops its allocation's reference. */
        for (uint64_t a = ptr; r == CUDA_SUCCESS && a - ptr < size;) {
                struct shim_entry e;
                if (!shim_table_take(SHIM_K_MAP, a, &e) || !e.bytes)
                        break;
                vmm_ref_locked(e.aux, -1);
                a += e.bytes;
        }
        pthread_mutex_unlock(&vmm_mu);
        return r;
}

void shim_vmm_lock(void)
{
        pthread_mutex_lock(&vmm_mu);
}

void shim_vmm_unlock(void)
{
        pthread_mutex_unlock(&vmm_mu);
}

int shim_vmm_import_locked(uint64_t h, uint64_t bytes)
{
        struct shim_entry e;
        if (shim_table_get(SHIM_K_VMM, h, &e)) /* held here already: one more reference */
                return shim_table_put_in(SHIM_K_VMM, h, e.bytes, e.aux + 1, e.ctx) < 0 ? -ENOMEM : 0;
        return shim_table_put_in(SHIM_K_VMM, h, bytes, 1, 0) < 0 ? -ENOMEM : 1;
}

/* ---- a context's allocations go with it ---- */

void shim_mem_ctx_gone(uint64_t ctx)
{
        if (!ctx)
                return;
        struct shim_entry e[64];
        size_t n;
        do {
                n = shim_table_drop_ctx(ctx, (1u << SHIM_K_PTR) | (1u << SHIM_K_ASYNC), e, 64);
                for (size_t i = 0; i < n; i++) {
                        if (e[i].kind == SHIM_K_ASYNC)
                                pool_block_gone((CUmemoryPool)(uintptr_t)e[i].aux, e[i].bytes);
                        else
                                shim_books_release(e[i].bytes);
                }
        } while (n == 64);
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
        if (m == SHIM_MODE_PASS ||
            ((shim_depth > 0 || shim_initializing) &&
             shim_nested_ok(__builtin_return_address(0), "cuGraphAddMemAllocNode"))) {
                if (!REAL(cuGraphAddMemAllocNode))
                        return CUDA_ERROR_NOT_FOUND;
                return REAL(cuGraphAddMemAllocNode)(phGraphNode, hGraph, dependencies,
                                                    numDependencies, nodeParams);
        }
        if (m == SHIM_MODE_FAILED)
                return SHIM_FAIL_CLOSED_CU;
        return graph_alloc_refused("cuGraphAddMemAllocNode");
}

/* Slice mode (not called by the driver itself: `caller`, the wrapper's
 * return address): a memory-allocation node is refused whether or not the
 * driver has the entry point. */
static bool graph_refuses(CUgraphNodeParams *nodeParams, CUresult *ret, const void *caller)
{
        enum shim_mode m = shim_init();
        if (m == SHIM_MODE_PASS ||
            ((shim_depth > 0 || shim_initializing) && shim_nested_ok(caller, "cuGraphAddNode")))
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
        if (graph_refuses(nodeParams, &r, __builtin_return_address(0)))
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
        if (graph_refuses(nodeParams, &r, __builtin_return_address(0)))
                return r;
        if (!REAL(cuGraphAddNode_v2))
                return CUDA_ERROR_NOT_FOUND;
        return REAL(cuGraphAddNode_v2)(phGraphNode, hGraph, dependencies, dependencyData,
                                       numDependencies, nodeParams);
}

void shim_mem_atfork_child(void)
{
        /* One thread in the child: a parent thread may have held these. */
        pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
        pool_mu = fresh;
        vmm_mu = fresh;
        free(pools);
        pools = NULL;
        n_pools = cap_pools = 0;
}

pthread_mutex_t *shim_mem_test_mutex(bool vmm)
{
        return vmm ? &vmm_mu : &pool_mu;
}
