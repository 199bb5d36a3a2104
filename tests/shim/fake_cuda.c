/* SPDX-License-Identifier: Apache-2.0 */
/* A fake libcuda.so.1 whose cuGetProcAddress hands out INTERNAL ALIASES
 * (pointers that are not its exported symbols), as a real driver may. Used
 * by procaddr_alias_test to check that the shim still hands out the
 * wrapper of the variant the request selects. Only what that test calls. */
#include <cuda.h>
#include <stdbool.h>
#include <string.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

static CUdeviceptr next_ptr = 0x10000000;

FAKE_EXPORT CUresult cuInit(unsigned int flags);
CUresult cuInit(unsigned int flags)
{
        (void)flags;
        return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n);
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
        *p = __atomic_fetch_add(&next_ptr, (n + 0xfffff) & ~(size_t)0xfffff, __ATOMIC_RELAXED);
        return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr p);
CUresult cuMemFree_v2(CUdeviceptr p)
{
        (void)p;
        return CUDA_SUCCESS;
}

static CUresult ctx_any(void)
{
        return CUDA_ERROR_NOT_SUPPORTED;
}

/* exported variants (cuCtxCreate_v3 deliberately not exported) */
FAKE_EXPORT CUresult cuCtxCreate_v2(CUcontext *c, unsigned int f, CUdevice d);
CUresult cuCtxCreate_v2(CUcontext *c, unsigned int f, CUdevice d)
{
        (void)c, (void)f, (void)d;
        return ctx_any();
}

FAKE_EXPORT CUresult cuCtxCreate_v4(CUcontext *c, CUctxCreateParams *p, unsigned int f, CUdevice d);
CUresult cuCtxCreate_v4(CUcontext *c, CUctxCreateParams *p, unsigned int f, CUdevice d)
{
        (void)c, (void)p, (void)f, (void)d;
        return ctx_any();
}

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned sh,
                                    CUstream s, void **kp, void **ex);
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned sh, CUstream s, void **kp, void **ex)
{
        (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)s;
        (void)kp, (void)ex;
        return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                         unsigned bx, unsigned by, unsigned bz, unsigned sh,
                                         CUstream s, void **kp, void **ex);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned sh, CUstream s, void **kp, void **ex)
{
        return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, kp, ex);
}

/* internal aliases: same behaviour, other addresses */
static CUresult alias_alloc(CUdeviceptr *p, size_t n)
{
        return cuMemAlloc_v2(p, n);
}
static CUresult alias_ctx_v2(CUcontext *c, unsigned int f, CUdevice d)
{
        (void)c, (void)f, (void)d;
        return ctx_any();
}
static CUresult alias_ctx_v3(CUcontext *c, CUexecAffinityParam *a, int n, unsigned int f, CUdevice d)
{
        (void)c, (void)a, (void)n, (void)f, (void)d;
        return ctx_any();
}
static CUresult alias_ctx_v4(CUcontext *c, CUctxCreateParams *p, unsigned int f, CUdevice d)
{
        (void)c, (void)p, (void)f, (void)d;
        return ctx_any();
}
static CUresult alias_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned sh, CUstream s, void **kp, void **ex)
{
        return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, kp, ex);
}
static CUresult alias_launch_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                  unsigned by, unsigned bz, unsigned sh, CUstream s, void **kp,
                                  void **ex)
{
        return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, kp, ex);
}

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *st);
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *st)
{
        bool pt = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        void *p = NULL;
        if (!strcmp(sym, "cuMemAlloc") && ver >= 3020)
                p = (void *)alias_alloc;
        else if (!strcmp(sym, "cuCtxCreate") && ver >= 12050)
                p = (void *)alias_ctx_v4;
        else if (!strcmp(sym, "cuCtxCreate") && ver >= 11040)
                p = (void *)alias_ctx_v3;
        else if (!strcmp(sym, "cuCtxCreate") && ver >= 3020)
                p = (void *)alias_ctx_v2;
        else if (!strcmp(sym, "cuLaunchKernel") && ver >= 7000 && pt)
                p = (void *)alias_launch_ptsz;
        else if (!strcmp(sym, "cuLaunchKernel") && ver >= 4000)
                p = (void *)alias_launch;
        else if (!strcmp(sym, "cuGetProcAddress") && ver >= 12000)
                p = (void *)cuGetProcAddress_v2;
        if (st)
                *st = p ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        *pfn = p;
        return p ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
