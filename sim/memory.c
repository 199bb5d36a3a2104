/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libcuda: device memory accounting, linear allocations, host memory,
 * copies and memsets. Device pointers are addresses of real (lazily backed)
 * host memory, so copies and memsets really move bytes. */
#include "sim_cuda.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* The allocation table: a sorted array, binary search by base address. */
static struct sim_alloc *tab;
static size_t tab_n, tab_cap;

void sim_mem_forget(void)
{
        free(tab);
        tab = NULL;
        tab_n = tab_cap = 0;
}

uint64_t sim_round(uint64_t b)
{
        if (b > UINT64_MAX - (SIM_GRANULE - 1))
                return UINT64_MAX;
        return (b + SIM_GRANULE - 1) & ~(SIM_GRANULE - 1);
}

/* Under the lock: our process record is still ours. It is not once the
 * image's descriptor of the state file was closed and a reaper returned
 * everything the process held (as the real driver does when its device
 * files are closed): the process's driver calls that charge or give back
 * memory then fail or do nothing, so nothing is counted twice or lost. */
static bool record_ours(const struct sim_state *st)
{
        const struct sim_proc_rec *p = &st->proc[sim_g.proc];
        return p->state == SIM_PROC_ALIVE && p->pid == sim_g.pid;
}

CUresult sim_charge(int dev, uint64_t bytes)
{
        struct sim_state *st = sim_g.st;
        if (bytes == 0)
                return CUDA_SUCCESS;
        sim_lock(st);
        sim_reap(st, false);
        if (!record_ours(st)) {
                sim_unlock(st);
                sim_log("process %d: its driver descriptor is gone; allocation refused",
                        (int)sim_g.pid);
                return CUDA_ERROR_OPERATING_SYSTEM;
        }
        struct sim_dev_rec *d = &st->dev[dev];
        if (bytes > d->total || d->used > d->total - bytes) {
                sim_reap(st, true); /* a dead process may hold what we need */
                if (bytes > d->total || d->used > d->total - bytes) {
                        sim_unlock(st);
                        return CUDA_ERROR_OUT_OF_MEMORY;
                }
        }
        d->used += bytes;
        st->proc[sim_g.proc].used[dev] += bytes;
        sim_unlock(st);
        return CUDA_SUCCESS;
}

void sim_uncharge(int dev, uint64_t bytes)
{
        struct sim_state *st = sim_g.st;
        if (bytes == 0)
                return;
        sim_lock(st);
        if (record_ours(st)) { /* else the reaper gave it all back already */
                struct sim_dev_rec *d = &st->dev[dev];
                d->used = d->used >= bytes ? d->used - bytes : 0;
                uint64_t *u = &st->proc[sim_g.proc].used[dev];
                *u = *u >= bytes ? *u - bytes : 0;
        }
        sim_unlock(st);
}

uint64_t sim_host_map(uint64_t bytes)
{
        uint64_t len = bytes + SIM_GRANULE;
        if (len < bytes)
                return 0;
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
                return 0;
        uint64_t a = (uint64_t)(uintptr_t)m;
        uint64_t base = (a + SIM_GRANULE - 1) & ~(SIM_GRANULE - 1);
        if (base > a)
                munmap(m, base - a);
        uint64_t tail = a + len - (base + bytes);
        if (tail)
                munmap((void *)(uintptr_t)(base + bytes), tail);
        return base;
}

/* index of the first entry with base > p */
static size_t upper(uint64_t p)
{
        size_t lo = 0, hi = tab_n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (tab[mid].base <= p)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

bool sim_table_add(const struct sim_alloc *a)
{
        pthread_mutex_lock(&sim_g.mu);
        if (tab_n == tab_cap) {
                size_t nc = tab_cap ? tab_cap * 2 : 64;
                struct sim_alloc *n = realloc(tab, nc * sizeof(*n));
                if (!n) {
                        pthread_mutex_unlock(&sim_g.mu);
                        return false;
                }
                tab = n;
                tab_cap = nc;
        }
        size_t i = upper(a->base);
        memmove(&tab[i + 1], &tab[i], (tab_n - i) * sizeof(*tab));
        tab[i] = *a;
        tab_n++;
        pthread_mutex_unlock(&sim_g.mu);
        return true;
}

bool sim_table_take(uint64_t base, unsigned kinds, struct sim_alloc *out)
{
        bool ok = false;
        pthread_mutex_lock(&sim_g.mu);
        size_t i = upper(base);
        /* several entries may share a base (a VMM map inside its reservation) */
        while (i > 0 && tab[i - 1].base == base) {
                i--;
                if (tab[i].kind & kinds) {
                        *out = tab[i];
                        memmove(&tab[i], &tab[i + 1], (tab_n - i - 1) * sizeof(*tab));
                        tab_n--;
                        ok = true;
                        break;
                }
        }
        pthread_mutex_unlock(&sim_g.mu);
        return ok;
}

bool sim_table_find(uint64_t p, uint64_t n, unsigned kinds, struct sim_alloc *out)
{
        bool ok = false;
        pthread_mutex_lock(&sim_g.mu);
        size_t i = upper(p);
        /* scan back over candidates starting at or below p (few in practice) */
        for (size_t k = i; k > 0; k--) {
                const struct sim_alloc *a = &tab[k - 1];
                if ((a->kind & kinds) && p >= a->base && n <= a->size &&
                    p - a->base <= a->size - n) {
                        *out = *a;
                        ok = true;
                        break;
                }
                if (a->kind != SIM_A_VMM && a->kind != SIM_A_RESERVE && p >= a->base + a->size)
                        break; /* linear allocations do not overlap */
        }
        pthread_mutex_unlock(&sim_g.mu);
        return ok;
}

#define SIM_A_DEVICE_ACCESSIBLE                                                           \
        (SIM_A_DEV | SIM_A_MANAGED | SIM_A_HOST | SIM_A_POOL | SIM_A_VMM | SIM_A_MODULE |   \
         SIM_A_IPC)

bool sim_range_ok(uint64_t p, size_t n)
{
        struct sim_alloc a;
        return sim_table_find(p, n ? n : 1, SIM_A_DEVICE_ACCESSIBLE, &a);
}

static CUresult alloc_linear(CUdeviceptr *dptr, uint64_t bytes, enum sim_alloc_kind kind)
{
        SIM_NEED_INIT();
        if (!dptr)
                return CUDA_ERROR_INVALID_VALUE;
        struct CUctx_st *c = sim_ctx_current();
        if (!c)
                return CUDA_ERROR_INVALID_CONTEXT;
        if (bytes == 0)
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t r = sim_round(bytes);
        if (r == UINT64_MAX)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult rc = sim_charge(c->dev, r);
        if (rc != CUDA_SUCCESS)
                return rc;
        uint64_t base = sim_host_map(r);
        struct sim_alloc a = { .base = base, .size = r, .charged = r, .dev = c->dev,
                               .kind = kind, .ctx = c };
        if (!base || !sim_table_add(&a)) {
                if (base)
                        munmap((void *)(uintptr_t)base, r);
                sim_uncharge(c->dev, r);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *dptr = base;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
        return alloc_linear(dptr, bytesize, SIM_A_DEV);
}

SIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
        if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
                return CUDA_ERROR_INVALID_VALUE;
        return alloc_linear(dptr, bytesize, SIM_A_MANAGED);
}

SIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                       size_t height, unsigned int elem)
{
        if (!pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
                return CUDA_ERROR_INVALID_VALUE;
        size_t p = (width + 511) & ~(size_t)511;
        if (p < width || height > SIZE_MAX / p)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = alloc_linear(dptr, p * height, SIM_A_DEV);
        if (r == CUDA_SUCCESS)
                *pitch = p;
        return r;
}

static void release(const struct sim_alloc *a)
{
        munmap((void *)(uintptr_t)a->base, a->size);
        if (a->charged)
                sim_uncharge(a->dev, a->charged);
}

SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
        SIM_NEED_INIT();
        if (dptr == 0)
                return CUDA_SUCCESS;
        struct sim_alloc a;
        if (!sim_table_take(dptr, SIM_A_DEV | SIM_A_MANAGED | SIM_A_POOL, &a))
                return CUDA_ERROR_INVALID_VALUE;
        if (a.kind == SIM_A_POOL) {
                sim_pool_free_block(&a);
                return CUDA_SUCCESS;
        }
        if (!sim_ipc_free_exported(&a))
                release(&a);
        return CUDA_SUCCESS;
}

void sim_mem_of_ctx_free(struct CUctx_st *c)
{
        for (;;) {
                struct sim_alloc a;
                bool found = false;
                pthread_mutex_lock(&sim_g.mu);
                for (size_t i = 0; i < tab_n; i++)
                        if (tab[i].ctx == c && (tab[i].kind & (SIM_A_DEV | SIM_A_MANAGED |
                                                               SIM_A_HOST | SIM_A_POOL |
                                                               SIM_A_MODULE | SIM_A_IPC))) {
                                a = tab[i];
                                memmove(&tab[i], &tab[i + 1], (tab_n - i - 1) * sizeof(*tab));
                                tab_n--;
                                found = true;
                                break;
                        }
                pthread_mutex_unlock(&sim_g.mu);
                if (!found)
                        return;
                if (a.kind == SIM_A_POOL)
                        sim_pool_free_block(&a);
                else if (a.kind == SIM_A_IPC)
                        sim_ipc_import_drop(&a);
                else if (!sim_ipc_free_exported(&a))
                        release(&a);
        }
}

SIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
        SIM_NEED_INIT();
        struct CUctx_st *c = sim_ctx_current();
        if (!c)
                return CUDA_ERROR_INVALID_CONTEXT;
        struct sim_state *st = sim_g.st;
        sim_lock(st);
        sim_reap(st, false);
        const struct sim_dev_rec *d = &st->dev[c->dev];
        uint64_t t = d->total, u = d->used;
        sim_unlock(st);
        if (free_b)
                *free_b = u < t ? t - u : 0;
        if (total)
                *total = t;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetInfo(unsigned int *free_b, unsigned int *total)
{
        size_t f = 0, t = 0;
        CUresult r = cuMemGetInfo_v2(&f, &t);
        if (r == CUDA_SUCCESS) {
                if (free_b)
                        *free_b = f > 0xffffffffu ? 0xffffffffu : (unsigned)f;
                if (total)
                        *total = t > 0xffffffffu ? 0xffffffffu : (unsigned)t;
        }
        return r;
}

SIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr p)
{
        SIM_NEED_INIT();
        struct sim_alloc a;
        if (!sim_table_find(p, 1, SIM_A_DEV | SIM_A_MANAGED | SIM_A_POOL | SIM_A_VMM | SIM_A_IPC, &a))
                return CUDA_ERROR_NOT_FOUND;
        if (pbase)
                *pbase = a.base;
        if (psize)
                *psize = a.size;
        return CUDA_SUCCESS;
}

/* --- host memory --- */

SIM_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
        SIM_NEED_INIT();
        if (!pp || bytesize == 0 || (flags & ~0xfu))
                return CUDA_ERROR_INVALID_VALUE;
        struct CUctx_st *c = sim_ctx_current();
        if (!c)
                return CUDA_ERROR_INVALID_CONTEXT;
        uint64_t r = (bytesize + 4095) & ~4095ull;
        void *m = mmap(NULL, r, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
                return CUDA_ERROR_OUT_OF_MEMORY;
        struct sim_alloc a = { .base = (uint64_t)(uintptr_t)m, .size = r, .dev = c->dev,
                               .kind = SIM_A_HOST, .ctx = c };
        if (!sim_table_add(&a)) {
                munmap(m, r);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *pp = m;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
        return cuMemHostAlloc(pp, bytesize, 0);
}

SIM_EXPORT CUresult cuMemFreeHost(void *p)
{
        SIM_NEED_INIT();
        struct sim_alloc a;
        if (!p || !sim_table_take((uint64_t)(uintptr_t)p, SIM_A_HOST, &a))
                return CUDA_ERROR_INVALID_VALUE;
        release(&a);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags)
{
        SIM_NEED_INIT();
        if (!pdptr || flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        struct sim_alloc a;
        if (!sim_table_find((uint64_t)(uintptr_t)p, 1, SIM_A_HOST, &a))
                return CUDA_ERROR_INVALID_VALUE;
        *pdptr = (CUdeviceptr)(uintptr_t)p;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr p)
{
        SIM_NEED_INIT();
        if (!data)
                return CUDA_ERROR_INVALID_VALUE;
        struct sim_alloc a;
        if (!sim_table_find(p, 1, SIM_A_DEVICE_ACCESSIBLE, &a))
                return CUDA_ERROR_INVALID_VALUE;
        switch (attr) {
        case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = a.ctx; break;
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
                *(unsigned *)data = a.kind == SIM_A_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
                break;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = p; break;
        case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void **)data = (void *)(uintptr_t)p; break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data = a.kind == SIM_A_MANAGED; break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = a.ctx ? a.ctx->ordinal : 0; break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = a.base; break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = a.size; break;
        case CU_POINTER_ATTRIBUTE_MAPPED: *(int *)data = 1; break;
        default: return CUDA_ERROR_INVALID_VALUE;
        }
        return CUDA_SUCCESS;
}

/* --- copies and memsets --- */

static CUresult async_prologue(CUstream s)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        if (!sim_stream_ctx(s, &rc))
                return rc;
        return CUDA_SUCCESS;
}

static CUresult copy(uint64_t dst, bool dst_dev, uint64_t src, bool src_dev, size_t n)
{
        if (n == 0)
                return CUDA_SUCCESS;
        if (!dst || !src)
                return CUDA_ERROR_INVALID_VALUE;
        if ((dst_dev && !sim_range_ok(dst, n)) || (src_dev && !sim_range_ok(src, n)))
                return CUDA_ERROR_INVALID_VALUE;
        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
        return CUDA_SUCCESS;
}

/* Generic copies (unified addressing): a pointer inside a device allocation
 * must lie wholly inside it; anything else is host memory. */
static CUresult copy_generic(uint64_t dst, uint64_t src, size_t n)
{
        struct sim_alloc a;
        bool dd = sim_table_find(dst, 1, SIM_A_DEVICE_ACCESSIBLE, &a);
        bool sd = sim_table_find(src, 1, SIM_A_DEVICE_ACCESSIBLE, &a);
        return copy(dst, dd, src, sd, n);
}

/* Synchronous copies are ordered after the context's pending work, as by
 * cuCtxSynchronize. */
#define SYNC(expr)                                       \
        do {                                             \
                CUresult _r = sim_ctx_sync_current();    \
                if (_r != CUDA_SUCCESS)                  \
                        return _r;                       \
                return (expr);                           \
        } while (0)
#define ASYNC(s, expr)                                   \
        do {                                             \
                CUresult _r = async_prologue(s);         \
                if (_r != CUDA_SUCCESS)                  \
                        return _r;                       \
                return (expr);                           \
        } while (0)
#define HOST(p) ((uint64_t)(uintptr_t)(p))

SIM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n)
{ SYNC(copy(d, true, HOST(h), false, n)); }
SIM_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *h, size_t n)
{ SYNC(copy(d, true, HOST(h), false, n)); }
SIM_EXPORT CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n)
{ SYNC(copy(HOST(h), false, d, true, n)); }
SIM_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *h, CUdeviceptr d, size_t n)
{ SYNC(copy(HOST(h), false, d, true, n)); }
SIM_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n)
{ SYNC(copy(d, true, s, true, n)); }
SIM_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n)
{ SYNC(copy(d, true, s, true, n)); }
SIM_EXPORT CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n)
{ SYNC(copy_generic(d, s, n)); }
SIM_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n)
{ SYNC(copy_generic(d, s, n)); }
SIM_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, CUstream s)
{ ASYNC(s, copy(d, true, HOST(h), false, n)); }
SIM_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *h, size_t n, CUstream s)
{ ASYNC(s, copy(d, true, HOST(h), false, n)); }
SIM_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, CUstream s)
{ ASYNC(s, copy(HOST(h), false, d, true, n)); }
SIM_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *h, CUdeviceptr d, size_t n, CUstream s)
{ ASYNC(s, copy(HOST(h), false, d, true, n)); }
SIM_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s)
{ ASYNC(s, copy(d, true, src, true, n)); }
SIM_EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s)
{ ASYNC(s, copy(d, true, src, true, n)); }
SIM_EXPORT CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s)
{ ASYNC(s, copy_generic(d, src, n)); }
SIM_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s)
{ ASYNC(s, copy_generic(d, src, n)); }

static CUresult fill(uint64_t d, uint64_t v, size_t elem, size_t n)
{
        if (n == 0)
                return CUDA_SUCCESS;
        if (n > SIZE_MAX / elem || !sim_range_ok(d, n * elem) || d % elem)
                return CUDA_ERROR_INVALID_VALUE;
        if (elem == 1) {
                memset((void *)(uintptr_t)d, (int)v, n);
        } else if (elem == 2) {
                uint16_t *p = (uint16_t *)(uintptr_t)d;
                for (size_t i = 0; i < n; i++)
                        p[i] = (uint16_t)v;
        } else {
                uint32_t *p = (uint32_t *)(uintptr_t)d;
                for (size_t i = 0; i < n; i++)
                        p[i] = (uint32_t)v;
        }
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n)
{ SYNC(fill(d, v, 1, n)); }
SIM_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n)
{ SYNC(fill(d, v, 1, n)); }
SIM_EXPORT CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n)
{ SYNC(fill(d, v, 2, n)); }
SIM_EXPORT CUresult cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n)
{ SYNC(fill(d, v, 2, n)); }
SIM_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n)
{ SYNC(fill(d, v, 4, n)); }
SIM_EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n)
{ SYNC(fill(d, v, 4, n)); }
SIM_EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{ ASYNC(s, fill(d, v, 1, n)); }
SIM_EXPORT CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{ ASYNC(s, fill(d, v, 1, n)); }
SIM_EXPORT CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s)
{ ASYNC(s, fill(d, v, 2, n)); }
SIM_EXPORT CUresult cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream s)
{ ASYNC(s, fill(d, v, 2, n)); }
SIM_EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s)
{ ASYNC(s, fill(d, v, 4, n)); }
SIM_EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream s)
{ ASYNC(s, fill(d, v, 4, n)); }
