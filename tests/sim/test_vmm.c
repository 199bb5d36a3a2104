/* SPDX-License-Identifier: Apache-2.0 */
/* VMM, memory pools and arrays charge device memory and give it back like
 * the real driver (1 GiB device, no context overhead here). */
#include "simtest.h"

static size_t used(void)
{
        size_t f, t;
        CT_CHECK(cuMemGetInfo(&f, &t));
        return t - f;
}

int main(void)
{
        st_fresh();
        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx);
        CT_ASSERT(used() == 0, "start %zu", used());

        /* VMM */
        CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
        size_t gran = 0;
        CT_CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        CT_ASSERT(gran == 2 * MiB, "granularity %zu", gran);
        CUmemGenericAllocationHandle h;
        CT_EXPECT(cuMemCreate(&h, MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
        CT_CHECK(cuMemCreate(&h, 4 * MiB, &prop, 0));
        CT_ASSERT(used() == 4 * MiB, "cuMemCreate charges at creation: %zu", used());
        CUdeviceptr va;
        CT_CHECK(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
        CT_ASSERT(used() == 4 * MiB, "a reservation is not memory");
        CT_CHECK(cuMemMap(va, 4 * MiB, 0, h, 0));
        CT_CHECK(cuMemMap(va + 4 * MiB, 4 * MiB, 0, h, 0)); /* same memory twice */
        CUmemAccessDesc acc = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        CT_CHECK(cuMemSetAccess(va, 8 * MiB, &acc, 1));
        CT_ASSERT(used() == 4 * MiB, "mapping is not charged again");
        unsigned in[4] = { 1, 2, 3, 4 }, out[4] = { 0 };
        CT_CHECK(cuMemcpyHtoD(va + 64, in, sizeof(in)));
        CT_CHECK(cuMemcpyDtoH(out, va + 4 * MiB + 64, sizeof(out)));
        CT_ASSERT(memcmp(in, out, sizeof(in)) == 0, "aliased mappings share bytes");
        CT_CHECK(cuMemRelease(h)); /* still mapped: freed at the last unmap */
        CT_ASSERT(used() == 4 * MiB, "released while mapped");
        CT_CHECK(cuMemUnmap(va, 4 * MiB));
        CT_CHECK(cuMemUnmap(va + 4 * MiB, 4 * MiB));
        CT_ASSERT(used() == 0, "after unmap+release %zu", used());
        CT_EXPECT(cuMemcpyHtoD(va, in, 4), CUDA_ERROR_INVALID_VALUE);
        CT_CHECK(cuMemAddressFree(va, 8 * MiB));

        /* pools: freed memory stays reserved until synchronisation (threshold 0) */
        CUstream s;
        CT_CHECK(cuStreamCreate(&s, 0));
        CUmemoryPool pool, pool2;
        CT_CHECK(cuDeviceGetDefaultMemPool(&pool, dev));
        CT_CHECK(cuDeviceGetMemPool(&pool2, dev));
        CT_ASSERT(pool == pool2, "current pool is the default pool");
        CUdeviceptr a;
        CT_CHECK(cuMemAllocAsync(&a, 3 * MiB, s));
        CT_ASSERT(used() == 4 * MiB, "async alloc %zu", used());
        CT_CHECK(cuMemsetD32Async(a, 7, 16, s));
        CT_CHECK(cuMemFreeAsync(a, s));
        CT_ASSERT(used() == 4 * MiB, "freed pool memory stays reserved before sync");
        cuuint64_t v = 0;
        CT_CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
        CT_ASSERT(v == 4 * MiB, "reserved %llu", (unsigned long long)v);
        CT_CHECK(cuStreamSynchronize(s));
        CT_ASSERT(used() == 0, "released at sync %zu", used());
        cuuint64_t thr = 64 * MiB;
        CT_CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
        CT_CHECK(cuMemAllocFromPoolAsync(&a, 10 * MiB, pool, s));
        CT_CHECK(cuMemFreeAsync(a, s));
        CT_CHECK(cuStreamSynchronize(s));
        CT_ASSERT(used() == 10 * MiB, "kept below the threshold %zu", used());
        CT_CHECK(cuMemAllocAsync(&a, 6 * MiB, s)); /* reuses the reserve */
        CT_ASSERT(used() == 10 * MiB, "reuse %zu", used());
        CT_CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v));
        CT_ASSERT(v == 6 * MiB, "pool used %llu", (unsigned long long)v);
        CT_CHECK(cuMemFree(a)); /* cuMemFree works on pool memory too */
        CT_CHECK(cuMemPoolTrimTo(pool, 0));
        CT_ASSERT(used() == 0, "trimmed %zu", used());
        CUmemPoolProps pp = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
        CT_CHECK(cuMemPoolCreate(&pool2, &pp));
        CT_CHECK(cuMemPoolSetAttribute(pool2, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
        CT_CHECK(cuMemAllocFromPoolAsync(&a, 20 * MiB, pool2, s));
        CT_CHECK(cuMemFreeAsync(a, s));
        CT_CHECK(cuStreamSynchronize(s));
        CT_ASSERT(used() == 20 * MiB, "custom pool reserve %zu", used());
        CT_CHECK(cuMemPoolDestroy(pool2));
        CT_ASSERT(used() == 0, "destroyed pool %zu", used());
        CT_EXPECT(cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE);
        CT_EXPECT(cuMemAllocAsync(&a, 2 * GiB, s), CUDA_ERROR_OUT_OF_MEMORY);

        /* arrays */
        CUDA_ARRAY_DESCRIPTOR ad = { .Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT,
                                     .NumChannels = 1 };
        CUarray arr, arr3;
        CT_CHECK(cuArrayCreate(&arr, &ad));
        CT_ASSERT(used() == 4 * MiB, "2D array %zu", used());
        CUDA_ARRAY3D_DESCRIPTOR d3 = { .Width = 256, .Height = 256, .Depth = 17,
                                       .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4 };
        CT_CHECK(cuArray3DCreate(&arr3, &d3)); /* 4.25 MiB -> 6 MiB */
        CT_ASSERT(used() == 10 * MiB, "3D array %zu", used());
        CUmipmappedArray mm;
        CUDA_ARRAY3D_DESCRIPTOR dm = { .Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT,
                                       .NumChannels = 1 };
        CT_CHECK(cuMipmappedArrayCreate(&mm, &dm, 11)); /* 4 MiB * 4/3 -> 6 MiB */
        CT_ASSERT(used() == 16 * MiB, "mipmapped array %zu", used());
        CT_CHECK(cuArrayDestroy(arr));
        CT_CHECK(cuArrayDestroy(arr3));
        CT_CHECK(cuMipmappedArrayDestroy(mm));
        CT_ASSERT(used() == 0, "arrays destroyed %zu", used());
        CT_CHECK(cuStreamDestroy(s));
        printf("vmm: ok\n");
        return 0;
}
