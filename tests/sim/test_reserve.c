/* SPDX-License-Identifier: Apache-2.0 */
/* Device memory that no allocation call asks for, judged by simgpu's
 * ground truth (simgpu-smi), with no context overhead and 8 SMs (ENV):
 *  - cuCtxSetLimit: the malloc heap and the per-thread stack (x 8 SMs x 2048
 *    threads) reserve memory beyond their defaults; lowering gives it back;
 *    a raise that does not fit is refused and changes nothing;
 *  - a module's __device__ variables (PTX .global) are allocated at
 *    cuModuleLoadData, found with cuModuleGetGlobal, freed at unload. */
#include "simtest.h"

static uint64_t truth(void)
{
        struct ct_smi_proc p;
        return ct_smi_proc(getpid(), 0, &p) == 0 ? p.used_bytes : 0;
}

static size_t limit(CUlimit l)
{
        size_t v = 0;
        CT_CHECK(cuCtxGetLimit(&v, l));
        return v;
}

static const char ptx[] = ".version 6.3\n"
                          ".target sm_75\n"
                          ".address_size 64\n"
                          "\n"
                          ".visible .global .align 8 .b8 gs_big[100663296];\n"
                          ".global .u32 gs_count;\n"
                          ".extern .global .u32 gs_elsewhere;\n"
                          "\n"
                          ".visible .entry gs_touch()\n"
                          "{\n"
                          "\t.reg .b64 %rd<2>;\n"
                          "\tst.global.u32 [%rd1], 0;\n"
                          "\tret;\n"
                          "}\n";

static void limits(void)
{
        CT_ASSERT(limit(CU_LIMIT_MALLOC_HEAP_SIZE) == 8 * MiB, "default heap %zu",
                  limit(CU_LIMIT_MALLOC_HEAP_SIZE));
        CT_ASSERT(limit(CU_LIMIT_STACK_SIZE) == 1024, "default stack %zu", limit(CU_LIMIT_STACK_SIZE));
        CT_CHECK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 264 * MiB));
        CT_ASSERT(limit(CU_LIMIT_MALLOC_HEAP_SIZE) == 264 * MiB, "heap set");
        CT_ASSERT(truth() == 256 * MiB, "a 264 MiB heap reserves 256 MiB more: %llu",
                  (unsigned long long)truth());
        CT_CHECK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 8192));
        /* (8192 - 1024) x 8 SMs x 2048 threads = 112 MiB */
        CT_ASSERT(truth() == 368 * MiB, "stack: %llu", (unsigned long long)truth());
        CT_CHECK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * MiB));
        CT_ASSERT(truth() == 112 * MiB, "heap lowered: %llu", (unsigned long long)truth());
        CT_EXPECT(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 512 * 1024), CUDA_ERROR_OUT_OF_MEMORY);
        CT_ASSERT(limit(CU_LIMIT_STACK_SIZE) == 8192, "a refused raise keeps the limit");
        CT_ASSERT(truth() == 112 * MiB, "a refused raise charges nothing: %llu",
                  (unsigned long long)truth());
        CT_EXPECT(cuCtxSetLimit(CU_LIMIT_MAX, 1), CUDA_ERROR_UNSUPPORTED_LIMIT);
        CT_CHECK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024));
        CT_ASSERT(truth() == 0, "back to the defaults: %llu", (unsigned long long)truth());
        CT_CHECK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 72 * MiB)); /* kept to the end */
        printf("limits: ok\n");
}

static void globals(void)
{
        uint64_t before = truth();
        CUmodule m;
        CT_CHECK(cuModuleLoadData(&m, ptx));
        /* 96 MiB + 4 bytes, rounded up to 2 MiB */
        CT_ASSERT(truth() == before + 98 * MiB, "module globals: %llu", (unsigned long long)truth());
        CUdeviceptr big = 0, count = 0;
        size_t nbig = 0, ncount = 0;
        CT_CHECK(cuModuleGetGlobal(&big, &nbig, m, "gs_big"));
        CT_CHECK(cuModuleGetGlobal(&count, &ncount, m, "gs_count"));
        CT_ASSERT(nbig == 96 * MiB && ncount == 4, "sizes %zu %zu", nbig, ncount);
        CT_ASSERT(count == big + 96 * MiB, "layout");
        CT_EXPECT(cuModuleGetGlobal(&big, &nbig, m, "gs_elsewhere"), CUDA_ERROR_NOT_FOUND);
        CT_EXPECT(cuModuleGetGlobal(&big, &nbig, m, "gs_touch"), CUDA_ERROR_NOT_FOUND);
        CT_CHECK(cuMemsetD32(count, 41, 1));
        unsigned v = 0;
        CT_CHECK(cuMemcpyDtoH(&v, count, sizeof(v)));
        CT_ASSERT(v == 41, "a global is device memory: %u", v);
        CT_EXPECT(cuMemFree(count), CUDA_ERROR_INVALID_VALUE);
        CT_CHECK(cuModuleUnload(m));
        CT_ASSERT(truth() == before, "unloaded: %llu", (unsigned long long)truth());
        CT_CHECK(cuModuleLoadData(&m, ptx)); /* kept to the end */
        printf("globals: ok\n");
}

int main(void)
{
        st_fresh();
        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx);
        CT_ASSERT(truth() == 0, "start %llu", (unsigned long long)truth());
        limits();
        globals();
        CT_ASSERT(truth() == 72 * MiB - 8 * MiB + 98 * MiB, "both kept: %llu",
                  (unsigned long long)truth());
        /* the context's end returns what its limits and modules held */
        CT_CHECK(cuDevicePrimaryCtxRelease(dev));
        CT_ASSERT(truth() == 0, "after the context: %llu", (unsigned long long)truth());
        printf("reserve: ok\n");
        return 0;
}
