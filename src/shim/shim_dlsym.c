/* SPDX-License-Identifier: Apache-2.0 */
/* The dlsym route: runtimes reach libcuda through dlopen + dlsym, so the
 * shim exports dlsym. A lookup of a hooked name that would resolve to the
 * real driver's function (in a libcuda / libnvidia-ml handle, or a handle
 * whose dependencies include them, or RTLD_DEFAULT / RTLD_NEXT) returns the
 * wrapper; every other lookup goes to glibc's dlsym unchanged.
 *
 * "Unchanged" includes RTLD_NEXT, whose meaning depends on the CALLER's
 * object: on x86-64 the exported dlsym is a tiny assembly trampoline that
 * asks shim_dlsym_lookup and, when it declines, TAIL-JUMPS to glibc's dlsym
 * with the caller's return address still on the stack. (AddressSanitizer's
 * own interceptor set-up calls dlsym(RTLD_NEXT, ...) before it is
 * initialised; the decision code is therefore uninstrumented and calls
 * nothing intercepted for names that are not cu* / nvml*.) */
#include <dlfcn.h>
#include <string.h>

#include "shim.h"

void *shim_real_dlsym;

__attribute__((no_sanitize_address)) void shim_dlsym_resolve(void)
{
        if (__atomic_load_n(&shim_real_dlsym, __ATOMIC_ACQUIRE))
                return;
        /* glibc's dlsym: GLIBC_2.34 in libc since 2.34, before that the first
         * version of the architecture (2.2.5 x86_64, 2.17 aarch64) in libdl
         * (the shim needs libdl.so.2, so it is loaded: shim_glibc.h). */
        static const char *const versions[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17" };
        static const char *const libs[] = { "libc.so.6", "libdl.so.2" };
        const unsigned nv = sizeof(versions) / sizeof(versions[0]);
        void *p = NULL;
        for (unsigned i = 0; !p && i < nv; i++)
                p = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
        for (unsigned l = 0; !p && l < sizeof(libs) / sizeof(libs[0]); l++) {
                void *h = dlopen(libs[l], RTLD_NOW | RTLD_NOLOAD);
                for (unsigned i = 0; h && !p && i < nv; i++)
                        p = dlvsym(h, "dlsym", versions[i]);
        }
        __atomic_store_n(&shim_real_dlsym, p, __ATOMIC_RELEASE);
}

static int hook_index(const char *name)
{
        for (int i = 0; i < SHIM_H_COUNT; i++)
                if (!strcmp(shim_hook_name[i], name))
                        return i;
        return -1;
}

static void *lookup_hooked(void *handle, const char *name)
{
        int i = hook_index(name);
        if (i < 0)
                return NULL;
        enum shim_mode m = shim_init();
        if (i >= SHIM_H_nvmlDeviceGetMemoryInfo)
                shim_nvml_init();
        if (m == SHIM_MODE_PASS)
                return NULL;
        if (handle == RTLD_DEFAULT || handle == RTLD_NEXT)
                return shim_real[i] ? shim_wrapper[i] : NULL;
        /* Any other handle: the wrapper stands in for exactly the real
         * driver function, not for another library's symbol of that name. */
        void *p = REAL_DLSYM(handle, name);
        if (p && p == shim_real[i])
                return shim_wrapper[i];
        return p;
}

/* Returns the answer for (handle, name), or NULL to let glibc answer. */
__attribute__((no_sanitize_address)) void *shim_dlsym_lookup(void *handle, const char *name);
__attribute__((no_sanitize_address)) void *shim_dlsym_lookup(void *handle, const char *name)
{
        if (!__atomic_load_n(&shim_real_dlsym, __ATOMIC_ACQUIRE))
                shim_dlsym_resolve();
        if (!name || !((name[0] == 'c' && name[1] == 'u') ||
                       (name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l')))
                return NULL;
        return lookup_hooked(handle, name);
}

#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        ".p2align 4\n"
        "dlsym:\n"
        "  .cfi_startproc\n"
        "  endbr64\n"
        "  pushq %rdi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  pushq %rsi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  subq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  call shim_dlsym_lookup\n"
        "  addq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rsi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rdi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  testq %rax, %rax\n"
        "  jz 1f\n"
        "  ret\n"
        "1:\n"
        "  jmp *shim_real_dlsym(%rip)\n"
        "  .cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#else
/* Other architectures: a C wrapper. RTLD_NEXT lookups are answered relative
 * to this library rather than to the caller (documented limitation). */
SHIM_EXPORT void *dlsym(void *handle, const char *name);
void *dlsym(void *handle, const char *name)
{
        void *p = shim_dlsym_lookup(handle, name);
        return p ? p : REAL_DLSYM(handle, name);
}
#endif
