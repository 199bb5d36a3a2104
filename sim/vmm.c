/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libcuda: stream-ordered allocation and memory pools, virtual memory
 * management (cuMemCreate/cuMemMap), arrays and mipmapped arrays. */
#include "sim_cuda.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* --- memory pools --- */

static struct CUmemPoolHandle_st *pool_new(int dev, bool is_default)
{
        struct CUmemPoolHandle_st *p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        p->magic = SIM_MAGIC_POOL;
        p->dev = dev;
        p->is_default = is_default;
        p->reuse_flags[0] = p->reuse_flags[1] = p->reuse_flags[2] = 1;
        pthread_mutex_lock(&sim_g.mu);
        p->next = sim_g.pools;
        sim_g.pools = p;
        pthread_mutex_unlock(&sim_g.mu);
        return p;
}

static struct CUmemPoolHandle_st *default_pool(int phys)
{
        pthread_mutex_lock(&sim_g.mu);
        struct CUmemPoolHandle_st *p = sim_g.default_pool[phys];
        pthread_mutex_unlock(&sim_g.mu);
        if (p)
                return p;
        p = pool_new(phys, true);
        if (!p)
                return NULL;
        pthread_mutex_lock(&sim_g.mu);
        if (sim_g.default_pool[phys]) {
                p->magic = 0; /* lost the race; leave it unused on the list */
                p = sim_g.default_pool[phys];
        } else {
                sim_g.default_pool[phys] = p;
                if (!sim_g.cur_pool[phys])
                        sim_g.cur_pool[phys] = p;
        }
        pthread_mutex_unlock(&sim_g.mu);
        return p;
}

static bool pool_ok(const struct CUmemPoolHandle_st *p)
{
        return p && p->magic == SIM_MAGIC_POOL;
}

/* Shrinks a pool's reserve to max(keep, used); returns what to uncharge. */
static uint64_t pool_shrink(struct CUmemPoolHandle_st *p, uint64_t keep)
{
        if (keep < p->used)
                keep = p->used;
        keep = sim_round(keep);
        if (p->reserved <= keep)
                return 0;
        uint64_t give = p->reserved - keep;
        p->reserved = keep;
        return give;
}

void sim_pools_release(int dev)
{
        uint64_t give = 0;
        pthread_mutex_lock(&sim_g.mu);
        for (struct CUmemPoolHandle_st *p = sim_g.pools; p; p = p->next)
                if (p->magic == SIM_MAGIC_POOL && p->dev == dev && p->reserved > p->threshold)
                        give += pool_shrink(p, p->threshold);
        pthread_mutex_unlock(&sim_g.mu);
        sim_uncharge(dev, give);
}

void sim_pool_free_block(const struct sim_alloc *a)
{
        munmap((void *)(uintptr_t)a->base, a->size);
        struct CUmemPoolHandle_st *p = a->pool;
        pthread_mutex_lock(&sim_g.mu);
        bool destroyed = p->magic != SIM_MAGIC_POOL;
        p->used = p->used >= a->size ? p->used - a->size : 0;
        uint64_t give = 0;
        if (destroyed) {
                give = a->size; /* the pool is gone: return the block at once */
                p->reserved = p->reserved >= a->size ? p->reserved - a->size : 0;
        }
        pthread_mutex_unlock(&sim_g.mu);
        sim_uncharge(a->dev, give);
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                            CUstream s)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        struct CUctx_st *c = sim_stream_ctx(s, &rc);
        if (!c)
                return rc;
        if (!dptr || bytes == 0 || !pool_ok(pool))
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t r = sim_round(bytes);
        if (r == UINT64_MAX)
                return CUDA_ERROR_OUT_OF_MEMORY;
        rc = sim_pool_take(pool, r); /* pool.c: atomic, grows by chunks */
        if (rc != CUDA_SUCCESS)
                return rc;
        uint64_t base = sim_host_map(r);
        struct sim_alloc a = { .base = base, .size = r, .dev = pool->dev, .kind = SIM_A_POOL,
                               .ctx = c, .pool = pool };
        if (!base || !sim_table_add(&a)) {
                if (base)
                        munmap((void *)(uintptr_t)base, r);
                sim_pool_untake(pool, r);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *dptr = base;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
                                                 CUmemoryPool pool, CUstream s)
{
        return cuMemAllocFromPoolAsync(dptr, bytes, pool, s);
}

SIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        struct CUctx_st *c = sim_stream_ctx(s, &rc);
        if (!c)
                return rc;
        if (!default_pool(c->dev))
                return CUDA_ERROR_OUT_OF_MEMORY;
        pthread_mutex_lock(&sim_g.mu);
        struct CUmemPoolHandle_st *p = sim_g.cur_pool[c->dev];
        pthread_mutex_unlock(&sim_g.mu);
        return cuMemAllocFromPoolAsync(dptr, bytes, p, s);
}

SIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
        return cuMemAllocAsync(dptr, bytes, s);
}

SIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        if (!sim_stream_ctx(s, &rc))
                return rc;
        struct sim_alloc a;
        if (!sim_table_take(dptr, SIM_A_POOL | SIM_A_DEV | SIM_A_MANAGED, &a))
                return CUDA_ERROR_INVALID_VALUE;
        if (a.kind == SIM_A_POOL) {
                sim_pool_free_block(&a);
        } else {
                munmap((void *)(uintptr_t)a.base, a.size);
                sim_uncharge(a.dev, a.charged);
        }
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
        return cuMemFreeAsync(dptr, s);
}

SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *out, CUdevice dev)
{
        SIM_NEED_INIT();
        int p = sim_dev_phys(dev);
        if (p < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        if (!out)
                return CUDA_ERROR_INVALID_VALUE;
        *out = default_pool(p);
        return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *out, CUdevice dev)
{
        SIM_NEED_INIT();
        int p = sim_dev_phys(dev);
        if (p < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        if (!out)
                return CUDA_ERROR_INVALID_VALUE;
        if (!default_pool(p))
                return CUDA_ERROR_OUT_OF_MEMORY;
        pthread_mutex_lock(&sim_g.mu);
        *out = sim_g.cur_pool[p];
        pthread_mutex_unlock(&sim_g.mu);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
        SIM_NEED_INIT();
        int p = sim_dev_phys(dev);
        if (p < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        if (!pool_ok(pool) || pool->dev != p)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&sim_g.mu);
        sim_g.cur_pool[p] = pool;
        pthread_mutex_unlock(&sim_g.mu);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *out, const CUmemPoolProps *props)
{
        SIM_NEED_INIT();
        if (!out || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
            props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
                return CUDA_ERROR_INVALID_VALUE;
        int p = sim_dev_phys(props->location.id);
        if (p < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        *out = pool_new(p, false);
        return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
        SIM_NEED_INIT();
        if (!pool_ok(pool) || pool->is_default)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&sim_g.mu);
        uint64_t give = pool_shrink(pool, 0);
        pool->magic = 0; /* outstanding blocks return themselves when freed */
        if (sim_g.cur_pool[pool->dev] == pool)
                sim_g.cur_pool[pool->dev] = sim_g.default_pool[pool->dev];
        pthread_mutex_unlock(&sim_g.mu);
        sim_uncharge(pool->dev, give);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
        SIM_NEED_INIT();
        if (!pool_ok(pool))
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&sim_g.mu);
        uint64_t give = pool_shrink(pool, keep);
        pthread_mutex_unlock(&sim_g.mu);
        sim_uncharge(pool->dev, give);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *v)
{
        SIM_NEED_INIT();
        if (!pool_ok(pool) || !v)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = CUDA_SUCCESS;
        pthread_mutex_lock(&sim_g.mu);
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
                pool->reuse_flags[attr - 1] = *(int *)v;
                break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: pool->threshold = *(cuuint64_t *)v; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
                if (*(cuuint64_t *)v != 0)
                        r = CUDA_ERROR_INVALID_VALUE;
                else
                        pool->reserved_high = pool->reserved;
                break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
                if (*(cuuint64_t *)v != 0)
                        r = CUDA_ERROR_INVALID_VALUE;
                else
                        pool->used_high = pool->used;
                break;
        default: r = CUDA_ERROR_INVALID_VALUE;
        }
        pthread_mutex_unlock(&sim_g.mu);
        return r;
}

SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *v)
{
        SIM_NEED_INIT();
        if (!pool_ok(pool) || !v)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = CUDA_SUCCESS;
        pthread_mutex_lock(&sim_g.mu);
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
                *(int *)v = pool->reuse_flags[attr - 1];
                break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)v = pool->threshold; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)v = pool->reserved; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)v = pool->reserved_high; break;
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)v = pool->used; break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)v = pool->used_high; break;
        default: r = CUDA_ERROR_INVALID_VALUE;
        }
        pthread_mutex_unlock(&sim_g.mu);
        return r;
}

/* --- virtual memory management --- */

static void handle_unref(struct sim_vmm_handle *h)
{
        pthread_mutex_lock(&sim_g.mu);
        bool last = --h->refs == 0;
        pthread_mutex_unlock(&sim_g.mu);
        if (!last)
                return;
        if (!sim_vmm_share_leave(h)) /* exported or imported: others may hold it */
                sim_uncharge(h->dev, h->size);
        close(h->fd);
        h->magic = 0;
        free(h);
}

static bool prop_ok(const CUmemAllocationProp *prop)
{
        return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
               prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
               sim_dev_phys(prop->location.id) >= 0;
}

SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                                  CUmemAllocationGranularity_flags opt)
{
        SIM_NEED_INIT();
        if (!g || !prop_ok(prop))
                return CUDA_ERROR_INVALID_VALUE;
        *g = SIM_GRANULE;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *out, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags)
{
        SIM_NEED_INIT();
        if (!out || !prop_ok(prop) || size == 0 || size % SIM_GRANULE || flags)
                return CUDA_ERROR_INVALID_VALUE;
        int dev = sim_dev_phys(prop->location.id);
        CUresult r = sim_charge(dev, size);
        if (r != CUDA_SUCCESS)
                return r;
        struct sim_vmm_handle *h = calloc(1, sizeof(*h));
        int fd = memfd_create("simgpu-vmm", MFD_CLOEXEC);
        if (!h || fd < 0 || ftruncate(fd, (off_t)size) < 0) {
                if (fd >= 0)
                        close(fd);
                free(h);
                sim_uncharge(dev, size);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *h = (struct sim_vmm_handle){ .magic = SIM_MAGIC_VMM, .fd = fd, .dev = dev, .refs = 1,
                                      .size = size, .prop = *prop, .share_slot = -1 };
        *out = (CUmemGenericAllocationHandle)(uintptr_t)h;
        return CUDA_SUCCESS;
}

struct sim_vmm_handle *sim_vmm_handle_of(CUmemGenericAllocationHandle hh)
{
        struct sim_vmm_handle *h = (struct sim_vmm_handle *)(uintptr_t)hh;
        return h && h->magic == SIM_MAGIC_VMM ? h : NULL;
}

SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle hh)
{
        SIM_NEED_INIT();
        struct sim_vmm_handle *h = sim_vmm_handle_of(hh);
        if (!h)
                return CUDA_ERROR_INVALID_VALUE;
        handle_unref(h);
        return CUDA_SUCCESS;
}

/* A second reference to the allocation mapped at addr: the same handle
 * value, released by its own cuMemRelease (the driver keeps the memory until
 * every reference and every mapping is gone). */
SIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *out, void *addr)
{
        SIM_NEED_INIT();
        struct sim_alloc a;
        if (!out || !sim_table_find((uint64_t)(uintptr_t)addr, 1, SIM_A_VMM, &a))
                return CUDA_ERROR_INVALID_VALUE;
        struct sim_vmm_handle *h = (struct sim_vmm_handle *)a.ctx;
        pthread_mutex_lock(&sim_g.mu);
        h->refs++;
        pthread_mutex_unlock(&sim_g.mu);
        *out = (CUmemGenericAllocationHandle)(uintptr_t)h;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                           CUmemGenericAllocationHandle hh)
{
        SIM_NEED_INIT();
        struct sim_vmm_handle *h = sim_vmm_handle_of(hh);
        if (!h || !prop)
                return CUDA_ERROR_INVALID_VALUE;
        *prop = h->prop;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align,
                                        CUdeviceptr addr, unsigned long long flags)
{
        SIM_NEED_INIT();
        if (!ptr || size == 0 || size % SIM_GRANULE || (align & (align - 1)))
                return CUDA_ERROR_INVALID_VALUE;
        void *m = mmap(NULL, size + SIM_GRANULE, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
                return CUDA_ERROR_OUT_OF_MEMORY;
        uint64_t a = (uint64_t)(uintptr_t)m, base = (a + SIM_GRANULE - 1) & ~(SIM_GRANULE - 1);
        if (base > a)
                munmap(m, base - a);
        if (a + SIM_GRANULE > base)
                munmap((void *)(uintptr_t)(base + size), a + SIM_GRANULE - base);
        struct sim_alloc rec = { .base = base, .size = size, .kind = SIM_A_RESERVE };
        if (!sim_table_add(&rec)) {
                munmap((void *)(uintptr_t)base, size);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *ptr = base;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
        SIM_NEED_INIT();
        struct sim_alloc a;
        if (!sim_table_find(ptr, size, SIM_A_RESERVE, &a) || a.base != ptr || a.size != size)
                return CUDA_ERROR_INVALID_VALUE;
        sim_table_take(ptr, SIM_A_RESERVE, &a);
        munmap((void *)(uintptr_t)ptr, size);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                             CUmemGenericAllocationHandle hh, unsigned long long flags)
{
        SIM_NEED_INIT();
        struct sim_vmm_handle *h = sim_vmm_handle_of(hh);
        struct sim_alloc r;
        if (!h || flags || size == 0 || size % SIM_GRANULE || offset % SIM_GRANULE ||
            offset > h->size || size > h->size - offset ||
            !sim_table_find(ptr, size, SIM_A_RESERVE, &r) ||
            sim_table_find(ptr, size, SIM_A_VMM, &r))
                return CUDA_ERROR_INVALID_VALUE;
        void *m = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                       h->fd, (off_t)offset);
        if (m == MAP_FAILED)
                return CUDA_ERROR_OUT_OF_MEMORY;
        struct sim_alloc a = { .base = ptr, .size = size, .dev = h->dev, .kind = SIM_A_VMM,
                               .ctx = (struct CUctx_st *)h };
        pthread_mutex_lock(&sim_g.mu);
        h->refs++;
        pthread_mutex_unlock(&sim_g.mu);
        if (!sim_table_add(&a)) {
                handle_unref(h);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
        SIM_NEED_INIT();
        struct sim_alloc a;
        if (!sim_table_find(ptr, size, SIM_A_VMM, &a) || a.base != ptr || a.size != size)
                return CUDA_ERROR_INVALID_VALUE;
        sim_table_take(ptr, SIM_A_VMM, &a);
        mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        handle_unref((struct sim_vmm_handle *)a.ctx);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                   size_t count)
{
        SIM_NEED_INIT();
        struct sim_alloc a;
        /* the range must lie in one reservation and start at a mapping */
        if (!desc || count == 0 || !sim_table_find(ptr, size, SIM_A_RESERVE, &a) ||
            !sim_table_find(ptr, 1, SIM_A_VMM, &a))
                return CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < count; i++)
                if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
                    sim_dev_phys(desc[i].location.id) < 0)
                        return CUDA_ERROR_INVALID_DEVICE;
        return CUDA_SUCCESS;
}

/* --- arrays --- */

struct CUarray_st {
        uint32_t magic;
        int dev;
        uint64_t charged;
        CUDA_ARRAY3D_DESCRIPTOR desc;
};

struct CUmipmappedArray_st {
        uint32_t magic;
        int dev;
        uint64_t charged;
};

static uint64_t format_bytes(CUarray_format f)
{
        switch (f) {
        case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF:
                return 2;
        case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT:
                return 4;
        default: return 1;
        }
}

static CUresult array_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels, uint64_t *out)
{
        if (d->Width == 0 || (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4) ||
            d->Width > (1u << 20) || d->Height > (1u << 20) || d->Depth > (1u << 16))
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t w = d->Width, h = d->Height ? d->Height : 1, z = d->Depth ? d->Depth : 1;
        uint64_t total = 0;
        for (unsigned l = 0; l < levels; l++) {
                total += w * h * z * format_bytes(d->Format) * d->NumChannels;
                w = w > 1 ? w / 2 : 1;
                h = h > 1 ? h / 2 : 1;
                z = z > 1 ? z / 2 : 1;
        }
        *out = sim_round(total);
        return CUDA_SUCCESS;
}

static CUresult array_new(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
        SIM_NEED_INIT();
        struct CUctx_st *c = sim_ctx_current();
        if (!c)
                return CUDA_ERROR_INVALID_CONTEXT;
        if (!out || !d)
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t b;
        CUresult r = array_bytes(d, 1, &b);
        if (r == CUDA_SUCCESS)
                r = sim_charge(c->dev, b);
        if (r != CUDA_SUCCESS)
                return r;
        struct CUarray_st *a = calloc(1, sizeof(*a));
        if (!a) {
                sim_uncharge(c->dev, b);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *a = (struct CUarray_st){ .magic = SIM_MAGIC_ARRAY, .dev = c->dev, .charged = b, .desc = *d };
        *out = a;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuArrayCreate_v2(CUarray *out, const CUDA_ARRAY_DESCRIPTOR *d)
{
        if (!d)
                return CUDA_ERROR_INVALID_VALUE;
        CUDA_ARRAY3D_DESCRIPTOR d3 = { .Width = d->Width, .Height = d->Height, .Depth = 0,
                                       .Format = d->Format, .NumChannels = d->NumChannels };
        return array_new(out, &d3);
}

SIM_EXPORT CUresult cuArray3DCreate_v2(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
        return array_new(out, d);
}

SIM_EXPORT CUresult cuArrayDestroy(CUarray a)
{
        SIM_NEED_INIT();
        if (!a || a->magic != SIM_MAGIC_ARRAY)
                return CUDA_ERROR_INVALID_HANDLE;
        sim_uncharge(a->dev, a->charged);
        a->magic = 0;
        free(a);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *d, CUarray a)
{
        SIM_NEED_INIT();
        if (!a || a->magic != SIM_MAGIC_ARRAY)
                return CUDA_ERROR_INVALID_HANDLE;
        if (!d)
                return CUDA_ERROR_INVALID_VALUE;
        *d = a->desc;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *out, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                           unsigned int levels)
{
        SIM_NEED_INIT();
        struct CUctx_st *c = sim_ctx_current();
        if (!c)
                return CUDA_ERROR_INVALID_CONTEXT;
        if (!out || !d || levels == 0 || levels > 32)
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t b;
        CUresult r = array_bytes(d, levels, &b);
        if (r == CUDA_SUCCESS)
                r = sim_charge(c->dev, b);
        if (r != CUDA_SUCCESS)
                return r;
        struct CUmipmappedArray_st *m = calloc(1, sizeof(*m));
        if (!m) {
                sim_uncharge(c->dev, b);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *m = (struct CUmipmappedArray_st){ .magic = SIM_MAGIC_ARRAY + 1, .dev = c->dev, .charged = b };
        *out = m;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray m)
{
        SIM_NEED_INIT();
        if (!m || m->magic != SIM_MAGIC_ARRAY + 1)
                return CUDA_ERROR_INVALID_HANDLE;
        sim_uncharge(m->dev, m->charged);
        m->magic = 0;
        free(m);
        return CUDA_SUCCESS;
}
