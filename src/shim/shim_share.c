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
 * Its size is read from the file descriptor where the driver's is a file
 * with a size (simgpu's); where it is not (st_size 0), the import is charged
 * from its first mapping up to the end of what is mapped. An import that
 * does not fit in the cap is released again and refused
 * (CUDA_ERROR_OUT_OF_MEMORY). While the exporter holds the memory it is
 * charged twice (to both slices, or twice to one slice whose processes
 * share it): on the safe side, since an importer cannot tell when the
 * exporter lets go. The exporter's charge needs nothing here: it follows
 * its own references and mappings (shim_mem.c). */
#include <errno.h>
#include <sys/stat.h>

#include "shim.h"

/* Bytes of the allocation behind a shareable handle, when the handle says
 * (a POSIX file descriptor of a file with a size); else 0. */
static uint64_t share_size(void *os, CUmemAllocationHandleType type)
{
        if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
                return 0;
        int fd = (int)(intptr_t)os, saved = errno;
        struct stat sb;
        uint64_t b = 0;
        if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0)
                b = shim_round((uint64_t)sb.st_size);
        errno = saved;
        return b;
}

CUresult shim_w_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                               CUmemAllocationHandleType shHandleType)
{
        SHIM_ENTER(cuMemImportFromShareableHandle,
                   REAL(cuMemImportFromShareableHandle)(handle, osHandle, shHandleType));
        if (!handle)
                return REAL(cuMemImportFromShareableHandle)(handle, osHandle, shHandleType);
        uint64_t b = share_size(osHandle, shHandleType);
        if (b && shim_reserve(b) < 0) {
                shim_log("cuMemImportFromShareableHandle: an import of %llu bytes refused: it does "
                         "not fit in the slice's cap",
                         (unsigned long long)b);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        shim_vmm_lock();
        CUresult r = REAL(cuMemImportFromShareableHandle)(handle, osHandle, shHandleType);
        int kept = 0;
        if (r == CUDA_SUCCESS) {
                kept = shim_vmm_import_locked(*handle, b);
                if (kept < 0) {
                        shim_log("cuMemImportFromShareableHandle: an import refused: it cannot be "
                                 "recorded");
                        if (REAL(cuMemRelease))
                                REAL(cuMemRelease)(*handle);
                        r = CUDA_ERROR_OUT_OF_MEMORY;
                }
        }
        shim_vmm_unlock();
        if (kept != 1)
                shim_books_release(b); /* refused, or held here already */
        return r;
}

CUresult shim_vmm_import_mapped_locked(uint64_t h, CUdeviceptr ptr, size_t size, size_t offset)
{
        struct shim_entry e;
        if (!shim_table_get(SHIM_K_VMM, h, &e) || e.ctx != SHIM_VMM_IMPORTED)
                return CUDA_SUCCESS;
        uint64_t end = offset > UINT64_MAX - size ? UINT64_MAX : shim_round((uint64_t)offset + size);
        if (end <= e.bytes)
                return CUDA_SUCCESS;
        if (shim_reserve(end - e.bytes) < 0 ||
            shim_table_put_in(SHIM_K_VMM, h, end, e.aux, e.ctx) < 0) {
                shim_log("cuMemMap of an imported allocation refused: %llu bytes do not fit in "
                         "the slice's cap",
                         (unsigned long long)(end - e.bytes));
                if (REAL(cuMemUnmap))
                        REAL(cuMemUnmap)(ptr, size);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return CUDA_SUCCESS;
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
