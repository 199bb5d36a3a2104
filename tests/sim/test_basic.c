/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu basics: init order, devices, contexts, 2 MiB granularity, memory
 * exhaustion at the configured size (1 GiB, 64 MiB per context), copies and
 * memsets that round-trip, gs_fill, error codes like the real driver. */
#include "simtest.h"

int main(void)
{
        st_fresh();
        CUdeviceptr p;
        CT_EXPECT(cuMemAlloc(&p, 1), CUDA_ERROR_NOT_INITIALIZED);
        CT_EXPECT(cuInit(1), CUDA_ERROR_INVALID_VALUE);
        CT_CHECK(cuInit(0));
        int v = 0, n = 0;
        CT_CHECK(cuDriverGetVersion(&v));
        CT_ASSERT(v == 13000, "driver version %d", v);
        CT_CHECK(cuDeviceGetCount(&n));
        CT_ASSERT(n == 1, "device count %d", n);
        CUdevice dev;
        CT_CHECK(cuDeviceGet(&dev, 0));
        CT_EXPECT(cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
        CT_CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
        CT_ASSERT(v == 132, "SMs %d", v);
        CT_CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
        CT_ASSERT(v == 9, "cc major %d", v);
        CT_EXPECT(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, dev), CUDA_ERROR_INVALID_VALUE);
        size_t total = 0, freeb = 0;
        CT_CHECK(cuDeviceTotalMem(&total, dev));
        CT_ASSERT(total == GiB, "total %zu", total);
        char uuidbuf[16];
        CUuuid u;
        CT_CHECK(cuDeviceGetUuid(&u, dev));
        memcpy(uuidbuf, u.bytes, 16);

        /* no context yet */
        CT_EXPECT(cuMemAlloc(&p, 1), CUDA_ERROR_INVALID_CONTEXT);
        CT_EXPECT(cuMemGetInfo(&freeb, &total), CUDA_ERROR_INVALID_CONTEXT);

        CUcontext ctx;
        CT_CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
        CT_CHECK(cuMemGetInfo(&freeb, &total));
        CT_ASSERT(freeb == GiB - 64 * MiB, "free after ctx %zu", freeb);

        /* granularity: 1 byte costs 2 MiB, 2 MiB + 1 costs 4 MiB */
        CUdeviceptr a, b;
        CT_CHECK(cuMemAlloc(&a, 1));
        CT_CHECK(cuMemGetInfo(&freeb, &total));
        CT_ASSERT(freeb == GiB - 66 * MiB, "free after 1 byte %zu", freeb);
        CT_CHECK(cuMemAlloc(&b, 2 * MiB + 1));
        CT_CHECK(cuMemGetInfo(&freeb, &total));
        CT_ASSERT(freeb == GiB - 70 * MiB, "free after 2MiB+1 %zu", freeb);
        CT_CHECK(cuMemFree(a));
        CT_CHECK(cuMemFree(b));
        CT_EXPECT(cuMemFree(b), CUDA_ERROR_INVALID_VALUE);

        /* exhaustion exactly at the configured size */
        CUdeviceptr blocks[16];
        int nb = 0;
        for (; nb < 16; nb++)
                if (cuMemAlloc(&blocks[nb], 192 * MiB) != CUDA_SUCCESS)
                        break;
        CT_ASSERT(nb == 5, "fit %d blocks of 192 MiB in 960 MiB", nb);
        CT_CHECK(cuMemGetInfo(&freeb, &total));
        CT_ASSERT(freeb == 0, "free at exhaustion %zu", freeb);
        CT_EXPECT(cuMemAlloc(&a, 1), CUDA_ERROR_OUT_OF_MEMORY);
        for (int i = 0; i < nb; i++)
                CT_CHECK(cuMemFree(blocks[i]));
        CT_CHECK(cuMemGetInfo(&freeb, &total));
        CT_ASSERT(freeb == GiB - 64 * MiB, "free after frees %zu", freeb);

        /* copies and memsets move bytes */
        enum { N = 1 << 20 };
        unsigned char *h = malloc(N), *back = malloc(N);
        for (int i = 0; i < N; i++)
                h[i] = (unsigned char)(i * 7 + 3);
        CT_CHECK(cuMemAlloc(&a, N));
        CT_CHECK(cuMemAlloc(&b, N));
        CT_CHECK(cuMemcpyHtoD(a, h, N));
        CT_CHECK(cuMemcpyDtoD(b, a, N));
        memset(back, 0, N);
        CT_CHECK(cuMemcpyDtoH(back, b, N));
        CT_ASSERT(memcmp(h, back, N) == 0, "HtoD/DtoD/DtoH round trip");
        CT_CHECK(cuMemsetD32(a + 16, 0xdeadbeefu, 4));
        CT_CHECK(cuMemsetD16(a + 32, 0x1234, 2));
        CT_CHECK(cuMemsetD8(a + 36, 0x5a, 3));
        CT_CHECK(cuMemcpy((CUdeviceptr)(uintptr_t)back, a, 64));
        CT_ASSERT(((uint32_t *)back)[4] == 0xdeadbeefu && ((uint32_t *)back)[7] == 0xdeadbeefu,
                  "memsetD32");
        CT_ASSERT(((uint16_t *)back)[16] == 0x1234 && back[36] == 0x5a && back[38] == 0x5a &&
                  back[39] == h[39], "memsetD16/D8");
        /* bad pointers */
        CT_EXPECT(cuMemcpyHtoD(a + 2 * MiB - 8, h, 16), CUDA_ERROR_INVALID_VALUE);
        CT_EXPECT(cuMemcpyDtoH(back, 0x1000, 16), CUDA_ERROR_INVALID_VALUE);
        CT_EXPECT(cuMemsetD8(0x1000, 0, 1), CUDA_ERROR_INVALID_VALUE);

        /* gs_fill writes memory, in order with a copy after synchronisation */
        struct ct_kernels k;
        ct_load_kernels(&k);
        CUfunction f;
        CT_EXPECT(cuModuleGetFunction(&f, k.mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
        CT_CHECK(ct_fill(&k, NULL, a, 0xabcd0123u, N / 4));
        CT_CHECK(cuCtxSynchronize());
        CT_CHECK(cuMemcpyDtoH(back, a, N));
        for (int i = 0; i < N / 4; i++)
                CT_ASSERT(((uint32_t *)back)[i] == 0xabcd0123u, "gs_fill at %d", i);
        CT_EXPECT(ct_fill(&k, NULL, 0x1000, 1, 4), CUDA_ERROR_ILLEGAL_ADDRESS);
        CUmodule m;
        CT_EXPECT(cuModuleLoadData(&m, "garbage"), CUDA_ERROR_INVALID_PTX);

        /* host memory is not device memory */
        void *hp;
        size_t f0, f1;
        CT_CHECK(cuMemGetInfo(&f0, &total));
        CT_CHECK(cuMemAllocHost(&hp, 8 * MiB));
        CT_CHECK(cuMemGetInfo(&f1, &total));
        CT_ASSERT(f0 == f1, "host alloc charged device memory");
        CT_CHECK(cuMemcpyHtoD(a, hp, 64));
        CT_CHECK(cuMemFreeHost(hp));

        /* managed and pitch allocations are charged at 2 MiB granularity */
        size_t pitch;
        CT_CHECK(cuMemAllocManaged(&p, 3 * MiB, CU_MEM_ATTACH_GLOBAL));
        CT_CHECK(cuMemGetInfo(&f1, &total));
        CT_ASSERT(f0 - f1 == 4 * MiB, "managed charge %zu", f0 - f1);
        CT_CHECK(cuMemFree(p));
        CT_CHECK(cuMemAllocPitch(&p, &pitch, 1000, 1000, 4));
        CT_ASSERT(pitch == 1024, "pitch %zu", pitch);
        CT_CHECK(cuMemFree(p));

        /* unsupported call: an error, not a crash */
        CT_EXPECT(cuModuleLoadFatBinary(&m, h), CUDA_ERROR_NOT_SUPPORTED);
        const void *tbl;
        CUuuid id = { { 0 } };
        CT_EXPECT(cuGetExportTable(&tbl, &id), CUDA_ERROR_NOT_SUPPORTED);
        const char *s;
        CT_CHECK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
        CT_ASSERT(strcmp(s, "CUDA_ERROR_OUT_OF_MEMORY") == 0, "%s", s);
        CT_CHECK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
        CT_ASSERT(strcmp(s, "invalid argument") == 0, "%s", s);
        CT_EXPECT(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);

        /* destroying the context returns its memory and overhead */
        CT_CHECK(cuCtxDestroy(ctx));
        CT_EXPECT(cuMemGetInfo(&freeb, &total), CUDA_ERROR_INVALID_CONTEXT);
        CUcontext pc;
        CT_CHECK(cuDevicePrimaryCtxRetain(&pc, dev));
        CT_CHECK(cuCtxSetCurrent(pc));
        CT_CHECK(cuMemGetInfo(&freeb, &total));
        CT_ASSERT(freeb == GiB - 64 * MiB, "free with only the primary context %zu", freeb);
        CT_CHECK(cuDevicePrimaryCtxRelease(dev));
        free(h);
        free(back);
        printf("basic: ok\n");
        return 0;
}
