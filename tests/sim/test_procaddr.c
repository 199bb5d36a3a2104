/* SPDX-License-Identifier: Apache-2.0 */
/* cuGetProcAddress(_v2): version selection, per-thread flag, status codes,
 * and that what it returns is an internal entry point of the variant dlsym
 * finds, never the exported (interposable) address itself. */
#include "simtest.h"

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

/* Where the internal entry point fn leads: simgpu's entries are
 * trampolines (endbr64; jmp rel32 on x86-64, bti c; b imm26 on aarch64).
 * NULL when fn is not one. */
static void *entry_target(void *fn)
{
        const unsigned char *p = fn;
#if defined(__x86_64__)
        static const unsigned char endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
        if (memcmp(p, endbr64, 4) != 0 || p[4] != 0xe9)
                return NULL;
        int32_t rel;
        memcpy(&rel, p + 5, 4);
        return (void *)(p + 9 + rel);
#elif defined(__aarch64__)
        uint32_t bti, b;
        memcpy(&bti, p, 4);
        memcpy(&b, p + 4, 4);
        if (bti != 0xd503245fu || (b & 0xfc000000u) != 0x14000000u)
                return NULL;
        int32_t imm = (int32_t)(b << 6) >> 6;
        return (void *)(p + 4 + (intptr_t)imm * 4);
#else
        (void)p;
        return fn;
#endif
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
        CT_ASSERT(entry_target(fn) == want, "%s@%d flags %llu does not lead to %s", name, ver,
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
