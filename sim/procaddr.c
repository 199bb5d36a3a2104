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
 * CUDA_ERROR_NOT_FOUND with *pfn = NULL, like the real driver. The pointer
 * handed out is an internal entry point, not the exported symbol (below). */
#include "sim_cuda.h"

#include <string.h>

struct proc_entry {
        const char *base;
        const char *sym;
        void *fn;
        int version;
        bool per_thread;
};

/* What cuGetProcAddress hands out is never an exported symbol's address.
 * The real driver answers with internal entry points, so a preloaded
 * interposer that defines the exported names never gets its own functions
 * back (nor the driver's exported ones) and must map the driver's pointers
 * itself. simgpu does the same: each entry of sim_exports.h gets a private
 * trampoline, a file-local function that jumps to the implementation. The
 * library is linked -Bsymbolic-functions (CMakeLists.txt), so the jump, like
 * every call simgpu makes to its own entry points, binds inside libcuda and
 * never reaches an interposer. On other architectures the table holds the
 * implementations' addresses (still bound inside the library). */
#if defined(__x86_64__)
#define SIM_TRAMP_BODY(s) "\tendbr64\n\tjmp " #s "\n"
#elif defined(__aarch64__)
#define SIM_TRAMP_BODY(s) "\thint #34\n\tb " #s "\n"
#endif

#ifdef SIM_TRAMP_BODY
#define SIM_TRAMP(b, s) sim_pa_##b##__##s
#define SIM_FN(b, s, v, f)                                                              \
        __asm__(".text\n\t.p2align 4\n\t.type sim_pa_" #b "__" #s ", @function\n"         \
                "sim_pa_" #b "__" #s ":\n" SIM_TRAMP_BODY(s)                              \
                "\t.size sim_pa_" #b "__" #s ", .-sim_pa_" #b "__" #s "\n");             \
        extern char SIM_TRAMP(b, s)[] __attribute__((visibility("hidden")));
#include "sim_exports.h"
#undef SIM_FN
#define SIM_ENTRY(b, s) ((void *)SIM_TRAMP(b, s))
#else
#define SIM_ENTRY(b, s) ((void *)s)
#endif

#define D false
#define P true
#define SIM_FN(b, s, v, f) { #b, #s, SIM_ENTRY(b, s), v, f },
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
