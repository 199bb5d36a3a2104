/* SPDX-License-Identifier: Apache-2.0 */
/* CUDA IPC imports (cuIpcOpenMemHandle): memory of another process that a
 * slice's process maps, and keeps alive for as long as it holds it, even
 * after the exporter freed it or exited; the driver then counts it as the
 * importer's (docs/simgpu.md). The shim charges an import to the
 * importer's slice from its open to its last close (or its context's end):
 * an open that does not fit in the cap is closed again and refused
 * (CUDA_ERROR_OUT_OF_MEMORY). The size is the driver's (cuMemGetAddressRange
 * of the imported pointer); one that cannot be read is refused. While the
 * exporter holds the memory it is charged twice (to both slices, or twice to
 * one slice whose processes share it among themselves): on the safe side,
 * since an importer cannot tell when the exporter lets go. */
#include <pthread.h>

#include "shim_reserve.h"

static pthread_mutex_t ipc_mu = PTHREAD_MUTEX_INITIALIZER;

void shim_ipc_atfork_child(void)
{
        pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
        ipc_mu = fresh; /* a parent thread may have held it */
}

pthread_mutex_t *shim_ipc_test_mutex(void)
{
        return &ipc_mu;
}

/* Bytes of the imported range at p; 0 if the driver cannot tell. */
static uint64_t import_size(CUdeviceptr p)
{
        static __typeof__(&cuMemGetAddressRange) range;
        __typeof__(&cuMemGetAddressRange) f = __atomic_load_n(&range, __ATOMIC_ACQUIRE);
        if (!f) {
                f = (__typeof__(&cuMemGetAddressRange))shim_drv_proc("cuMemGetAddressRange");
                __atomic_store_n(&range, f, __ATOMIC_RELEASE);
        }
        CUdeviceptr base = 0;
        size_t size = 0;
        if (!f || f(&base, &size, p) != CUDA_SUCCESS || base != p)
                return 0;
        return shim_round(size);
}

static CUresult ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags,
                         shim_t_cuIpcOpenMemHandle_v2 *real)
{
        CUresult r = real(pdptr, handle, flags);
        if (r != CUDA_SUCCESS || !pdptr)
                return r;
        pthread_mutex_lock(&ipc_mu);
        struct shim_entry e;
        if (shim_table_get(SHIM_K_IPC, *pdptr, &e)) { /* reopened: one more reference */
                shim_table_put_in(SHIM_K_IPC, e.key, e.bytes, e.aux + 1, e.ctx);
                pthread_mutex_unlock(&ipc_mu);
                return r;
        }
        uint64_t b = import_size(*pdptr);
        const char *why = !b ? "its size cannot be read"
                          : shim_reserve(b) < 0 ? "it does not fit in the slice's cap"
                                                : NULL;
        if (!why && shim_table_put_in(SHIM_K_IPC, *pdptr, b, 1, shim_current_ctx()) < 0) {
                shim_books_release(b);
                why = "it cannot be recorded";
        }
        pthread_mutex_unlock(&ipc_mu);
        if (why) {
                shim_log("cuIpcOpenMemHandle: an import of %llu bytes refused: %s",
                         (unsigned long long)b, why);
                if (REAL(cuIpcCloseMemHandle))
                        REAL(cuIpcCloseMemHandle)(*pdptr);
                *pdptr = 0;
                return b ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_NOT_SUPPORTED;
        }
        return r;
}

CUresult shim_w_cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
        SHIM_ENTER(cuIpcOpenMemHandle, REAL(cuIpcOpenMemHandle)(pdptr, handle, Flags));
        return ipc_open(pdptr, handle, Flags, REAL(cuIpcOpenMemHandle));
}

CUresult shim_w_cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                      unsigned int Flags)
{
        SHIM_ENTER(cuIpcOpenMemHandle_v2, REAL(cuIpcOpenMemHandle_v2)(pdptr, handle, Flags));
        return ipc_open(pdptr, handle, Flags, REAL(cuIpcOpenMemHandle_v2));
}

CUresult shim_w_cuIpcCloseMemHandle(CUdeviceptr dptr)
{
        SHIM_ENTER(cuIpcCloseMemHandle, REAL(cuIpcCloseMemHandle)(dptr));
        pthread_mutex_lock(&ipc_mu);
        struct shim_entry e;
        bool had = shim_table_take(SHIM_K_IPC, dptr, &e);
        CUresult r = REAL(cuIpcCloseMemHandle)(dptr);
        if (had && r == CUDA_SUCCESS && e.aux > 1)
                shim_table_put_in(SHIM_K_IPC, e.key, e.bytes, e.aux - 1, e.ctx); /* still open */
        else if (had && r != CUDA_SUCCESS)
                shim_table_put_in(SHIM_K_IPC, e.key, e.bytes, e.aux, e.ctx);
        else if (had)
                shim_books_release(e.bytes); /* the last close: unmapped */
        pthread_mutex_unlock(&ipc_mu);
        return r;
}
