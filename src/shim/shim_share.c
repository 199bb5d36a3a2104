/* SPDX-License-Identifier: Apache-2.0 */
/* Shareable handles of VMM allocations (cuMemExportToShareableHandle,
 * cuMemImportFromShareableHandle): memory another process created that a
 * slice's process imports and keeps alive through its handle and mappings,
 * even after the exporter released it; the driver then counts it as the
 * importer's (docs/simgpu.md).
 *
 * The importer's slice is charged for an import from the import to its
 * last reference and mapping (cuMemRelease, cuMemUnmap: the handle is one
 * of shim_mem.c's SHIM_K_VMM entries, reference-counted like cuMemCreate's).
 * No driver call tells an allocation's size from its handle, nor does a
 * driver's descriptor (NVIDIA's is a character device): the shim finds it
 * by mapping one granule of the import at growing offsets into a
 * reservation of its own (the driver refuses a mapping past the end), about
 * 2 log2(size / granule) map-unmap pairs, nothing allocated. An import whose
 * size cannot be told, or that does not fit in the cap, is released again
 * and refused (CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_OUT_OF_MEMORY). While the
 * exporter holds the memory it is charged twice (to both slices, or twice
 * to one slice whose processes share it): on the safe side, since an
 * importer cannot tell when the exporter lets go. The exporter's charge
 * needs nothing here: it follows its own references and mappings
 * (shim_mem.c). */
#include "shim_reserve.h"

#define PROBE_MAX_GRANULES (1ull << 30) /* 2 PiB of 2 MiB granules: no GPU has more */

/* The driver's functions the probe uses (not hooked). */
struct probe_fns {
        __typeof__(&cuMemGetAllocationPropertiesFromHandle) props;
        __typeof__(&cuMemGetAllocationGranularity) granularity;
        __typeof__(&cuMemAddressReserve) reserve;
        __typeof__(&cuMemAddressFree) release;
};

static bool probe_fns_get(struct probe_fns *f)
{
        f->props = (__typeof__(f->props))shim_drv_proc("cuMemGetAllocationPropertiesFromHandle");
        f->granularity = (__typeof__(f->granularity))shim_drv_proc("cuMemGetAllocationGranularity");
        f->reserve = (__typeof__(f->reserve))shim_drv_proc("cuMemAddressReserve");
        f->release = (__typeof__(f->release))shim_drv_proc("cuMemAddressFree");
        return f->props && f->granularity && f->reserve && f->release && REAL(cuMemMap) &&
               REAL(cuMemUnmap);
}

/* 1 when granule k of h exists (it maps at va), 0 when the driver says it
 * lies past the end, -1 on any other answer. */
static int granule_exists(CUmemGenericAllocationHandle h, CUdeviceptr va, size_t g, uint64_t k)
{
        CUresult r = REAL(cuMemMap)(va, g, (size_t)(k * g), h, 0);
        if (r == CUDA_SUCCESS)
                return REAL(cuMemUnmap)(va, g) == CUDA_SUCCESS ? 1 : -1;
        return r == CUDA_ERROR_INVALID_VALUE ? 0 : -1;
}

/* The size of the allocation behind handle h (rounded to 2 MiB), found by
 * mapping probes; 0 when it cannot be told. */
static uint64_t probe_size(CUmemGenericAllocationHandle h)
{
        struct probe_fns f;
        CUmemAllocationProp prop;
        size_t g = 0;
        CUdeviceptr va = 0;
        if (!probe_fns_get(&f) || f.props(&prop, h) != CUDA_SUCCESS ||
            f.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || !g ||
            f.reserve(&va, g, 0, 0, 0) != CUDA_SUCCESS)
                return 0;
        /* granule lo exists, granule hi does not: the size is (lo + 1) * g */
        uint64_t lo = 0, hi = 1;
        int e = granule_exists(h, va, g, 0);
        while (e == 1 && (e = granule_exists(h, va, g, hi)) == 1) {
                lo = hi;
                if (hi >= PROBE_MAX_GRANULES) {
                        e = -1;
                        break;
                }
                hi *= 2;
        }
        while (e == 0 && hi - lo > 1) {
                uint64_t mid = lo + (hi - lo) / 2;
                int m = granule_exists(h, va, g, mid);
                if (m < 0)
                        e = -1;
                else if (m)
                        lo = mid;
                else
                        hi = mid;
        }
        f.release(va, g);
        return e == 0 ? shim_round((lo + 1) * (uint64_t)g) : 0;
}

CUresult shim_w_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                               CUmemAllocationHandleType shHandleType)
{
        SHIM_ENTER(cuMemImportFromShareableHandle,
                   REAL(cuMemImportFromShareableHandle)(handle, osHandle, shHandleType));
        if (!handle)
                return REAL(cuMemImportFromShareableHandle)(handle, osHandle, shHandleType);
        shim_vmm_lock();
        CUresult r = REAL(cuMemImportFromShareableHandle)(handle, osHandle, shHandleType);
        if (r != CUDA_SUCCESS) {
                shim_vmm_unlock();
                return r;
        }
        /* The import allocates nothing: the memory exists (charged to its
         * exporter) whatever is decided here. */
        struct shim_entry e;
        const char *why = NULL;
        uint64_t b = 0;
        if (shim_table_get(SHIM_K_VMM, *handle, &e)) {
                if (shim_vmm_import_locked(*handle, 0) < 0) /* held here already */
                        why = "it cannot be recorded";
        } else if (!(b = probe_size(*handle))) {
                why = "its size cannot be told";
                r = CUDA_ERROR_NOT_SUPPORTED;
        } else if (shim_reserve(b) < 0) {
                why = "it does not fit in the slice's cap";
        } else if (shim_vmm_import_locked(*handle, b) < 0) {
                shim_books_release(b);
                why = "it cannot be recorded";
        }
        if (why) {
                shim_log("cuMemImportFromShareableHandle: an import of %llu bytes refused: %s",
                         (unsigned long long)b, why);
                if (REAL(cuMemRelease))
                        REAL(cuMemRelease)(*handle);
                if (r == CUDA_SUCCESS)
                        r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        shim_vmm_unlock();
        return r;
}

/* The exporter's charge follows its own references and mappings
 * (shim_mem.c); exporting changes nothing the shim counts. Hooked so that
 * the call is a slice's like every other driver call. */
CUresult shim_w_cuMemExportToShareableHandle(void *shareableHandle,
                                             CUmemGenericAllocationHandle handle,
                                             CUmemAllocationHandleType handleType,
                                             unsigned long long flags)
{
        SHIM_ENTER(cuMemExportToShareableHandle,
                   REAL(cuMemExportToShareableHandle)(shareableHandle, handle, handleType, flags));
        return REAL(cuMemExportToShareableHandle)(shareableHandle, handle, handleType, flags);
}
