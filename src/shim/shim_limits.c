/* SPDX-License-Identifier: Apache-2.0 */
/* cuCtxSetLimit: the malloc heap, the printf FIFO and the per-thread stack
 * are device memory the driver reserves for the context (the stack for
 * every thread the GPU can hold at once), with no allocation call. The shim
 * charges, per context, its estimate of what they need beyond their defaults
 * (which the context overhead covers), the same formula as simgpu's:
 *   stack   (value - 1 KiB) x multiprocessors x max threads per multiprocessor
 *   heap    value - 8 MiB
 *   printf  value - 1 MiB
 * each rounded up to 2 MiB. A raise beyond the cap is refused
 * (CUDA_ERROR_OUT_OF_MEMORY) before the driver sees it; lowering gives the
 * difference back; the context's end gives back the rest. On a real GPU the
 * driver's figure may differ: the shim's is an estimate. */
#include <pthread.h>

#include "shim_reserve.h"

static pthread_mutex_t limits_mu = PTHREAD_MUTEX_INITIALIZER;

void shim_limits_atfork_child(void)
{
        pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
        limits_mu = fresh; /* a parent thread may have held it */
}

pthread_mutex_t *shim_limits_test_mutex(void)
{
        return &limits_mu;
}

void *shim_drv_proc(const char *name)
{
        void *p = NULL;
        if (REAL(cuGetProcAddress_v2) &&
            REAL(cuGetProcAddress_v2)(name, &p, 13000, 0, NULL) == CUDA_SUCCESS)
                return p;
        return NULL;
}

uint64_t shim_current_ctx(void)
{
        CUcontext c = NULL;
        if (!shim_x.cuCtxGetCurrent || shim_x.cuCtxGetCurrent(&c) != CUDA_SUCCESS)
                return 0;
        return (uint64_t)(uintptr_t)c;
}

/* Threads the current context's device holds at once; 0 if unknown. */
static uint64_t resident_threads(void)
{
        __typeof__(&cuDeviceGetAttribute) attr =
                (__typeof__(&cuDeviceGetAttribute))shim_drv_proc("cuDeviceGetAttribute");
        CUdevice dev = 0;
        int sms = 0, per_sm = 0;
        if (!attr || !shim_x.cuCtxGetDevice || shim_x.cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
            attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS ||
            attr(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev) != CUDA_SUCCESS ||
            sms <= 0 || per_sm <= 0)
                return 0;
        return (uint64_t)sms * (uint64_t)per_sm;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
        return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* What (stack, heap, fifo) reserve beyond the defaults; UINT64_MAX when it
 * cannot be told (the raise is then refused). */
static uint64_t reserve_of(uint64_t stack, uint64_t heap, uint64_t fifo, uint64_t threads)
{
        uint64_t s = stack > 1024 ? stack - 1024 : 0, total = 0;
        if (s && !threads)
                return UINT64_MAX;
        if (s && __builtin_mul_overflow(s, threads, &s))
                return UINT64_MAX;
        total = add_sat(total, shim_round(s));
        total = add_sat(total, shim_round(heap > (8u << 20) ? heap - (8u << 20) : 0));
        return add_sat(total, shim_round(fifo > (1u << 20) ? fifo - (1u << 20) : 0));
}

CUresult shim_w_cuCtxSetLimit(CUlimit limit, size_t value)
{
        SHIM_ENTER(cuCtxSetLimit, REAL(cuCtxSetLimit)(limit, value));
        if (limit != CU_LIMIT_STACK_SIZE && limit != CU_LIMIT_MALLOC_HEAP_SIZE &&
            limit != CU_LIMIT_PRINTF_FIFO_SIZE)
                return REAL(cuCtxSetLimit)(limit, value);
        __typeof__(&cuCtxGetLimit) get = (__typeof__(&cuCtxGetLimit))shim_drv_proc("cuCtxGetLimit");
        uint64_t ctx = shim_current_ctx();
        size_t v[3] = { 0, 0, 0 };
        if (!ctx || !get || get(&v[0], CU_LIMIT_STACK_SIZE) != CUDA_SUCCESS ||
            get(&v[1], CU_LIMIT_MALLOC_HEAP_SIZE) != CUDA_SUCCESS ||
            get(&v[2], CU_LIMIT_PRINTF_FIFO_SIZE) != CUDA_SUCCESS) {
                if (!ctx)
                        return REAL(cuCtxSetLimit)(limit, value); /* the driver refuses it */
                shim_log("cuCtxSetLimit(%d): the current limits cannot be read: refused", (int)limit);
                return CUDA_ERROR_NOT_SUPPORTED;
        }
        v[limit == CU_LIMIT_STACK_SIZE ? 0 : limit == CU_LIMIT_MALLOC_HEAP_SIZE ? 1 : 2] = value;
        uint64_t want = reserve_of(v[0], v[1], v[2], resident_threads());
        pthread_mutex_lock(&limits_mu);
        struct shim_entry e;
        uint64_t had = shim_table_get(SHIM_K_LIMITS, ctx, &e) ? e.bytes : 0;
        CUresult r = CUDA_SUCCESS;
        bool reserved = false;
        if (want == UINT64_MAX)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        else if (want > had && shim_reserve(want - had) < 0)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        else
                reserved = want > had;
        if (r != CUDA_SUCCESS)
                shim_log("cuCtxSetLimit(%d, %zu): the limits would reserve %llu bytes: refused",
                         (int)limit, value, (unsigned long long)want);
        else
                r = REAL(cuCtxSetLimit)(limit, value);
        if (r != CUDA_SUCCESS) {
                if (reserved)
                        shim_books_release(want - had);
        } else {
                if (want < had)
                        shim_books_release(had - want);
                if (want == 0)
                        shim_table_take(SHIM_K_LIMITS, ctx, &e);
                else if (shim_table_put_in(SHIM_K_LIMITS, ctx, want, 0, ctx) < 0)
                        shim_log("cuCtxSetLimit: not recorded; its charge stays until exit");
        }
        pthread_mutex_unlock(&limits_mu);
        return r;
}

void shim_reserve_ctx_gone(uint64_t ctx)
{
        if (!ctx)
                return;
        struct shim_entry e[64];
        size_t n;
        do {
                n = shim_table_drop_ctx(ctx, (1u << SHIM_K_IPC) | (1u << SHIM_K_LIMITS) |
                                                     (1u << SHIM_K_MODULE),
                                        e, 64);
                for (size_t i = 0; i < n; i++)
                        shim_books_release(e[i].bytes);
        } while (n == 64);
}
