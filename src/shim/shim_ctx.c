/* SPDX-License-Identifier: Apache-2.0 */
/* Contexts (each charged context_overhead, only on the slice's GPU) and the
 * virtualised memory reports of the CUDA driver. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "shim.h"
#include "shim_gate.h"
#include "shim_reserve.h"

#define MAX_DEVS 64

static signed char dev_match[MAX_DEVS]; /* 0 unknown, 1 slice's GPU, -1 another */
static pthread_mutex_t prim_mu = PTHREAD_MUTEX_INITIALIZER;

/* Compares UUIDs with or without the "GPU-" prefix, ignoring case. */
bool shim_uuid_is_slice(const char *uuid);
bool shim_uuid_is_slice(const char *uuid)
{
        const char *a = uuid, *b = shim_conf.gpu_uuid;
        if (!strncasecmp(a, "GPU-", 4))
                a += 4;
        if (!strncasecmp(b, "GPU-", 4))
                b += 4;
        return strcasecmp(a, b) == 0;
}

bool shim_dev_is_slice(CUdevice dev)
{
        if (dev >= 0 && dev < MAX_DEVS) {
                signed char m = __atomic_load_n(&dev_match[dev], __ATOMIC_RELAXED);
                if (m)
                        return m > 0;
        }
        CUuuid u;
        if (!shim_x.cuDeviceGetUuid || shim_x.cuDeviceGetUuid(&u, dev) != CUDA_SUCCESS)
                return false;
        const unsigned char *b = (const unsigned char *)u.bytes;
        char s[64];
        snprintf(s, sizeof(s),
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        bool yes = shim_uuid_is_slice(s);
        if (dev >= 0 && dev < MAX_DEVS)
                __atomic_store_n(&dev_match[dev], (signed char)(yes ? 1 : -1), __ATOMIC_RELAXED);
        return yes;
}

static CUresult refuse_device(CUdevice dev, const char *what)
{
        shim_log("%s on device %d refused: not the slice's GPU %s", what, (int)dev, shim_conf.gpu_uuid);
        return CUDA_ERROR_INVALID_DEVICE;
}

/* ---- contexts ---- */

#define CTX_CREATE(hook, pctx, dev, call)                                             \
        do {                                                                          \
                if (!shim_dev_is_slice(dev))                                          \
                        return refuse_device(dev, #hook);                             \
                uint64_t b_ = shim_round(shim_conf.context_overhead);                 \
                if (b_ && shim_reserve(b_) < 0)                                       \
                        return CUDA_ERROR_OUT_OF_MEMORY;                              \
                CUresult r_ = call;                                                   \
                if (r_ != CUDA_SUCCESS || !(pctx)) {                                  \
                        shim_books_release(b_);                                       \
                        return r_;                                                    \
                }                                                                     \
                if (shim_table_put(SHIM_K_CTX, (uint64_t)(uintptr_t)*(pctx), b_, 0)) \
                        shim_log("context not recorded: its overhead stays charged"); \
                return r_;                                                            \
        } while (0)

CUresult shim_w_cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
        SHIM_ENTER(cuCtxCreate, REAL(cuCtxCreate)(pctx, flags, dev));
        CTX_CREATE(cuCtxCreate, pctx, dev, REAL(cuCtxCreate)(pctx, flags, dev));
}

CUresult shim_w_cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
        SHIM_ENTER(cuCtxCreate_v2, REAL(cuCtxCreate_v2)(pctx, flags, dev));
        CTX_CREATE(cuCtxCreate_v2, pctx, dev, REAL(cuCtxCreate_v2)(pctx, flags, dev));
}

CUresult shim_w_cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n, unsigned int flags,
                               CUdevice dev)
{
        SHIM_ENTER(cuCtxCreate_v3, REAL(cuCtxCreate_v3)(pctx, params, n, flags, dev));
        CTX_CREATE(cuCtxCreate_v3, pctx, dev, REAL(cuCtxCreate_v3)(pctx, params, n, flags, dev));
}

CUresult shim_w_cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *p, unsigned int flags, CUdevice dev)
{
        SHIM_ENTER(cuCtxCreate_v4, REAL(cuCtxCreate_v4)(pctx, p, flags, dev));
        CTX_CREATE(cuCtxCreate_v4, pctx, dev, REAL(cuCtxCreate_v4)(pctx, p, flags, dev));
}

static CUresult ctx_destroy(CUcontext ctx, shim_t_cuCtxDestroy_v2 *real)
{
        struct shim_entry e;
        shim_gate_ctx_destroy(ctx, -1);
        bool had = shim_table_take(SHIM_K_CTX, (uint64_t)(uintptr_t)ctx, &e);
        CUresult r = real(ctx);
        shim_table_settle(had, &e, r);
        if (r == CUDA_SUCCESS)
                shim_mem_ctx_gone((uint64_t)(uintptr_t)ctx); /* the driver freed its memory */
        if (r == CUDA_SUCCESS)
                shim_reserve_ctx_gone((uint64_t)(uintptr_t)ctx); /* limits, modules, imports */
        return r;
}

CUresult shim_w_cuCtxDestroy(CUcontext ctx)
{
        SHIM_ENTER(cuCtxDestroy, REAL(cuCtxDestroy)(ctx));
        return ctx_destroy(ctx, REAL(cuCtxDestroy));
}

CUresult shim_w_cuCtxDestroy_v2(CUcontext ctx)
{
        SHIM_ENTER(cuCtxDestroy_v2, REAL(cuCtxDestroy_v2)(ctx));
        return ctx_destroy(ctx, REAL(cuCtxDestroy_v2));
}

/* The primary context is charged on its first retain and given back on its
 * last release. prim_mu (process-local) serialises retain/release so that
 * two first retains cannot both charge. */
CUresult shim_w_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
        SHIM_ENTER(cuDevicePrimaryCtxRetain, REAL(cuDevicePrimaryCtxRetain)(pctx, dev));
        if (!shim_dev_is_slice(dev))
                return refuse_device(dev, "cuDevicePrimaryCtxRetain");
        pthread_mutex_lock(&prim_mu);
        struct shim_entry e = { 0 };
        bool have = shim_table_get(SHIM_K_PRIMARY, (uint64_t)dev, &e);
        uint64_t b = have ? 0 : shim_round(shim_conf.context_overhead);
        CUresult r;
        if (b && shim_reserve(b) < 0) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out;
        }
        r = REAL(cuDevicePrimaryCtxRetain)(pctx, dev);
        if (r != CUDA_SUCCESS) {
                shim_books_release(b);
                goto out;
        }
        if (shim_table_put_in(SHIM_K_PRIMARY, (uint64_t)dev, have ? e.bytes : b, (have ? e.aux : 0) + 1,
                              pctx ? (uint64_t)(uintptr_t)*pctx : 0))
                shim_log("primary context not recorded: its overhead stays charged");
out:
        pthread_mutex_unlock(&prim_mu);
        return r;
}

static CUresult primary_release(CUdevice dev, shim_t_cuDevicePrimaryCtxRelease_v2 *real)
{
        pthread_mutex_lock(&prim_mu);
        struct shim_entry e;
        if (shim_table_get(SHIM_K_PRIMARY, (uint64_t)dev, &e) && e.aux <= 1)
                shim_gate_ctx_destroy(NULL, dev); /* the last release destroys it */
        CUresult r = real(dev);
        if (r == CUDA_SUCCESS && shim_table_get(SHIM_K_PRIMARY, (uint64_t)dev, &e)) {
                if (e.aux <= 1) {
                        /* The last release destroys it and frees its memory. */
                        shim_table_take(SHIM_K_PRIMARY, (uint64_t)dev, &e);
                        shim_books_release(e.bytes);
                        shim_mem_ctx_gone(e.ctx);
                        shim_reserve_ctx_gone(e.ctx);
                } else {
                        shim_table_put_in(SHIM_K_PRIMARY, (uint64_t)dev, e.bytes, e.aux - 1, e.ctx);
                }
        }
        pthread_mutex_unlock(&prim_mu);
        return r;
}

/* cuDevicePrimaryCtxReset destroys the primary context whatever its retain
 * count, with every allocation made in it: its overhead and that memory go
 * back to the books (a later retain charges a new context). */
static CUresult primary_reset(CUdevice dev, shim_t_cuDevicePrimaryCtxReset_v2 *real)
{
        pthread_mutex_lock(&prim_mu);
        shim_gate_ctx_destroy(NULL, dev);
        CUresult r = real(dev);
        struct shim_entry e;
        if (r == CUDA_SUCCESS && shim_table_take(SHIM_K_PRIMARY, (uint64_t)dev, &e)) {
                shim_books_release(e.bytes);
                shim_mem_ctx_gone(e.ctx);
                shim_reserve_ctx_gone(e.ctx);
        }
        pthread_mutex_unlock(&prim_mu);
        return r;
}

CUresult shim_w_cuDevicePrimaryCtxReset(CUdevice dev)
{
        SHIM_ENTER(cuDevicePrimaryCtxReset, REAL(cuDevicePrimaryCtxReset)(dev));
        return primary_reset(dev, REAL(cuDevicePrimaryCtxReset));
}

CUresult shim_w_cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
        SHIM_ENTER(cuDevicePrimaryCtxReset_v2, REAL(cuDevicePrimaryCtxReset_v2)(dev));
        return primary_reset(dev, REAL(cuDevicePrimaryCtxReset_v2));
}

CUresult shim_w_cuDevicePrimaryCtxRelease(CUdevice dev)
{
        SHIM_ENTER(cuDevicePrimaryCtxRelease, REAL(cuDevicePrimaryCtxRelease)(dev));
        return primary_release(dev, REAL(cuDevicePrimaryCtxRelease));
}

CUresult shim_w_cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
        SHIM_ENTER(cuDevicePrimaryCtxRelease_v2, REAL(cuDevicePrimaryCtxRelease_v2)(dev));
        return primary_release(dev, REAL(cuDevicePrimaryCtxRelease_v2));
}

/* ---- reports ---- */

/* The slice's view: total = min(cap, physical total), free = min(total -
 * used, physical free), never negative. */
static void slice_view(uint64_t real_free, uint64_t real_total, uint64_t *ret_free,
                       uint64_t *ret_total)
{
        shim_pools_refresh();
        shim_books_reclaim(); /* processes that are gone hold nothing */
        uint64_t total = shim_conf.memory_limit < real_total ? shim_conf.memory_limit : real_total;
        uint64_t used = shim_books_used();
        uint64_t free = total > used ? total - used : 0;
        if (free > real_free)
                free = real_free;
        *ret_free = free;
        *ret_total = total;
}

CUresult shim_w_cuMemGetInfo_v2(size_t *free, size_t *total)
{
        SHIM_ENTER(cuMemGetInfo_v2, REAL(cuMemGetInfo_v2)(free, total));
        size_t rf = 0, rt = 0;
        CUresult r;
        if (!free || !total) {
                /* The driver decides what NULL means; then we fill what it filled. */
                r = REAL(cuMemGetInfo_v2)(free, total);
                if (r != CUDA_SUCCESS)
                        return r;
        }
        r = REAL(cuMemGetInfo_v2)(&rf, &rt);
        if (r != CUDA_SUCCESS)
                return r;
        uint64_t f, t;
        slice_view(rf, rt, &f, &t);
        if (free)
                *free = (size_t)f;
        if (total)
                *total = (size_t)t;
        return r;
}

CUresult shim_w_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
        SHIM_ENTER(cuDeviceTotalMem_v2, REAL(cuDeviceTotalMem_v2)(bytes, dev));
        CUresult r = REAL(cuDeviceTotalMem_v2)(bytes, dev);
        if (r == CUDA_SUCCESS && bytes && shim_dev_is_slice(dev) && *bytes > shim_conf.memory_limit)
                *bytes = (size_t)shim_conf.memory_limit;
        return r;
}

CUresult shim_w_cuMemGetInfo(unsigned int *free, unsigned int *total)
{
        SHIM_ENTER(cuMemGetInfo, REAL(cuMemGetInfo)(free, total));
        shim_log("cuMemGetInfo (32-bit legacy ABI) is not supported inside a slice");
        return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult shim_w_cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
        SHIM_ENTER(cuDeviceTotalMem, REAL(cuDeviceTotalMem)(bytes, dev));
        shim_log("cuDeviceTotalMem (32-bit legacy ABI) is not supported inside a slice");
        return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- NVML ---- */

static bool nvml_is_slice(nvmlDevice_t dev)
{
        char uuid[96];
        if (!shim_x.nvmlDeviceGetUUID || shim_x.nvmlDeviceGetUUID(dev, uuid, sizeof(uuid)) != NVML_SUCCESS)
                return false;
        uuid[sizeof(uuid) - 1] = '\0';
        return shim_uuid_is_slice(uuid);
}

#define NVML_ENTER(hook, call)                                                \
        do {                                                                  \
                bool ok_ = shim_nvml_init();                                  \
                enum shim_mode m_ = shim_init();                              \
                if (!REAL(hook))                                              \
                        return NVML_ERROR_FUNCTION_NOT_FOUND;                 \
                if (m_ == SHIM_MODE_PASS)                                     \
                        return call;                                          \
                if (m_ == SHIM_MODE_FAILED || !ok_)                           \
                        return SHIM_FAIL_CLOSED_NVML;                         \
        } while (0)

nvmlReturn_t shim_w_nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem)
{
        NVML_ENTER(nvmlDeviceGetMemoryInfo, REAL(nvmlDeviceGetMemoryInfo)(dev, mem));
        nvmlReturn_t r = REAL(nvmlDeviceGetMemoryInfo)(dev, mem);
        if (r != NVML_SUCCESS || !mem || !nvml_is_slice(dev))
                return r;
        uint64_t f, t;
        slice_view(mem->free, mem->total, &f, &t);
        mem->total = t;
        mem->free = f;
        mem->used = t - f;
        return r;
}

nvmlReturn_t shim_w_nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *mem)
{
        NVML_ENTER(nvmlDeviceGetMemoryInfo_v2, REAL(nvmlDeviceGetMemoryInfo_v2)(dev, mem));
        nvmlReturn_t r = REAL(nvmlDeviceGetMemoryInfo_v2)(dev, mem);
        if (r != NVML_SUCCESS || !mem || !nvml_is_slice(dev))
                return r;
        uint64_t f, t;
        slice_view(mem->free, mem->total, &f, &t);
        mem->total = t;
        mem->free = f;
        mem->reserved = 0;
        mem->used = t - f;
        return r;
}

void shim_ctx_atfork_child(void)
{
        pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
        prim_mu = fresh; /* a parent thread may have held it */
}

pthread_mutex_t *shim_ctx_test_mutex(void)
{
        return &prim_mu;
}
