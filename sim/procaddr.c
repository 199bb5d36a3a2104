/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libcuda: cuGetProcAddress / cuGetProcAddress_v2, built from the one
 * list in sim_exports.h.
 *
 * Lookup of (base name, cudaVersion, flags): among the entries for the base
 * name of the requested flavour (per-thread when
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM is set and the function has
 * such a variant, legacy otherwise), the one with the highest version <=
 * cudaVersion. No entry: CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND; entries but
 * all newer: CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT; both return
 * CUDA_ERROR_NOT_FOUND with *pfn = NULL, like the real driver. */
#include "sim_cuda.h"

#include <string.h>

struct proc_entry {
        const char *base;
        const char *sym;
        void *fn;
        int version;
        bool per_thread;
};

#define D false
#define P true
#define SIM_FN(b, s, v, f) { #b, #s, (void *)s, v, f },
static const struct proc_entry table[] = {
#include "sim_exports.h"
};
#undef SIM_FN
#undef D
#undef P

#define NENTRIES (sizeof(table) / sizeof(table[0]))

void *sim_symbol(const char *name)
{
        for (size_t i = 0; i < NENTRIES; i++)
                if (strcmp(table[i].sym, name) == 0)
                        return table[i].fn;
        return NULL;
}

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
        if (pfn)
                *pfn = NULL;
        if (!symbol || !pfn)
                return CUDA_ERROR_INVALID_VALUE;
        if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                                  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
                return CUDA_ERROR_INVALID_VALUE;
        bool want_pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
        bool any = false, has_pt = false;
        for (size_t i = 0; i < NENTRIES; i++)
                if (strcmp(table[i].base, symbol) == 0) {
                        any = true;
                        has_pt |= table[i].per_thread;
                }
        bool pt = want_pt && has_pt;
        const struct proc_entry *best = NULL;
        for (size_t i = 0; any && i < NENTRIES; i++) {
                const struct proc_entry *e = &table[i];
                if (e->per_thread != pt || e->version > version || strcmp(e->base, symbol))
                        continue;
                if (!best || e->version > best->version)
                        best = e;
        }
        if (!best) {
                if (status)
                        *status = any ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                      : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
                return CUDA_ERROR_NOT_FOUND;
        }
        *pfn = best->fn;
        if (status)
                *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                        cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
        return lookup(symbol, pfn, version, flags, status);
}

SIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
        return lookup(symbol, pfn, version, flags, NULL);
}
