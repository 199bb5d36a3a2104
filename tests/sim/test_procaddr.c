/* SPDX-License-Identifier: Apache-2.0 */
/* cuGetProcAddress(_v2): version selection, per-thread flag, status codes,
 * and that what it returns is an internal entry point of the variant dlsym
 * finds, never the exported (interposable) address itself. */
#include "simtest.h"
#include "trampoline.h"

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

static void *get(const char *name, int ver, cuuint64_t flags, CUresult want_rc,
                 CUdriverProcAddressQueryResult want_status)
{
        void *fn = (void *)1;
        CUdriverProcAddressQueryResult status = (CUdriverProcAddressQueryResult)99;
        CUresult r = cuGetProcAddress(name, &fn, ver, flags, &status);
        CT_ASSERT(r == want_rc, "%s@%d flags %llu: rc %d", name, ver, (unsigned long long)flags, r);
        CT_ASSERT(status == want_status, "%s@%d: status %d", name, ver, status);
        CT_ASSERT((r == CUDA_SUCCESS) == (fn != NULL), "%s@%d: pointer vs rc", name, ver);
        return fn;
}

/* cuGetProcAddress(name, ver, flags) must hand out the driver's internal
 * entry point of exported symbol sym: never the exported address itself (a
 * preloaded interposer of sym would get its own function back), but a
 * function that runs sym's implementation. */
static void same(const char *name, int ver, cuuint64_t flags, const char *sym)
{
        void *fn = get(name, ver, flags, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
        void *want = dlsym(RTLD_DEFAULT, sym);
        CT_ASSERT(want, "dlsym %s", sym);
#if defined(__x86_64__) || defined(__aarch64__)
        CT_ASSERT(fn != want, "%s@%d flags %llu: the exported address of %s, not an internal entry",
                  name, ver, (unsigned long long)flags, sym);
#endif
        CT_ASSERT(ct_trampoline_target(fn) == want, "%s@%d flags %llu does not lead to %s", name, ver,
                  (unsigned long long)flags, sym);
}

int main(void)
{
        st_fresh();
        /* works before cuInit, like the real driver (cudart relies on it) */
        same("cuInit", 13000, 0, "cuInit");
        same("cuMemAlloc", 13000, 0, "cuMemAlloc_v2");
        same("cuMemAlloc", 3020, 0, "cuMemAlloc_v2");
        get("cuMemAlloc", 3000, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
        same("cuCtxCreate", 13000, 0, "cuCtxCreate_v4");
        same("cuCtxCreate", 12000, 0, "cuCtxCreate_v3");
        same("cuCtxCreate", 11000, 0, "cuCtxCreate_v2");
        same("cuCtxCreate", 3000, 0, "cuCtxCreate");
        same("cuMemGetInfo", 12000, 0, "cuMemGetInfo_v2");
        same("cuGraphInstantiate", 12000, 0, "cuGraphInstantiateWithFlags");
        same("cuGraphInstantiate", 11000, 0, "cuGraphInstantiate_v2");
        same("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
        same("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
        same("cuLaunchKernelEx", 12000, 0, "cuLaunchKernelEx");
        /* per-thread default stream variants */
        same("cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuLaunchKernel_ptsz");
        same("cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuLaunchKernel");
        same("cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_DEFAULT, "cuLaunchKernel");
        same("cuMemcpyHtoD", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemcpyHtoD_v2_ptds");
        same("cuStreamGetCaptureInfo", 12030, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
             "cuStreamGetCaptureInfo_v3_ptsz");
        same("cuGraphLaunch", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuGraphLaunch_ptsz");
        /* functions without a per-thread flavour ignore the flag */
        same("cuMemAlloc", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemAlloc_v2");
        /* unknown symbols, bad arguments */
        get("cuNoSuchFunction", 13000, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
        get("cuMemAlloc_v2", 13000, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
        void *fn;
        CT_EXPECT(cuGetProcAddress(NULL, &fn, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
        CT_EXPECT(cuGetProcAddress("cuInit", &fn, 13000, 1ull << 7, NULL), CUDA_ERROR_INVALID_VALUE);
        /* a resolved pointer works */
        CUresult (*init)(unsigned) = NULL;
        get("cuInit", 13000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
        CT_CHECK(cuGetProcAddress("cuInit", (void **)&init, 13000, 0, NULL));
        CT_CHECK(init(0));
        /* unversioned and versioned exports both exist */
        CT_ASSERT(dlsym(RTLD_DEFAULT, "cuCtxDestroy") && dlsym(RTLD_DEFAULT, "cuCtxDestroy_v2"),
                  "cuCtxDestroy exports");
        CT_ASSERT(!dlsym(RTLD_DEFAULT, "sim_charge"), "internal symbols must not be exported");
        printf("procaddr: ok\n");
        return 0;
}
