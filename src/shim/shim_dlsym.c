/* SPDX-License-Identifier: Apache-2.0 */
/* The loader's routes to the driver: the shim exports dlsym, dlvsym, dlopen
 * and dlmopen, so that no libc entry point hands out a driver function
 * around the hooks.
 *
 * - dlsym / dlvsym: a lookup of a hooked name returns the wrapper: from
 *   RTLD_DEFAULT / RTLD_NEXT, and (inside a slice) from any handle whose
 *   answer is not the wrapper itself, whichever object answers (a second
 *   copy of libcuda.so.1 loaded by path); outside a slice only where the
 *   answer is the driver the shim wraps. A lookup of dlsym, dlvsym, dlopen
 *   or dlmopen that would answer glibc's function answers the shim's (so
 *   that `dlvsym(h, "dlsym", "GLIBC_2.34")` cannot yield the loader's own
 *   dlsym). Every other lookup goes to glibc's function unchanged.
 * - dlopen (and dlmopen into the main namespace): inside a slice
 *   RTLD_DEEPBIND is dropped (a deep-bound library would resolve the
 *   driver's symbols in its own dependencies, before the preloaded shim).
 * - dlmopen into another namespace (where no preloaded library is): inside
 *   a slice a load whose scope holds a CUDA driver is undone and refused.
 *
 * "Unchanged" includes RTLD_NEXT and dlopen's search paths, whose meaning
 * depends on the CALLER's object: on x86-64 each export is a tiny assembly
 * trampoline that asks a decision function and, when it declines,
 * TAIL-JUMPS to glibc's function with the caller's return address still on
 * the stack. (AddressSanitizer's own interceptor set-up calls
 * dlsym(RTLD_NEXT, ...) before it is initialised; the decision code is
 * therefore uninstrumented and calls nothing intercepted for names that are
 * not cu* / nvml*.) glibc's functions are found in libc's symbol table
 * (shim_elf.c): every reference to these names binds to the shim's. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

void *shim_real_dlsym;
void *shim_real_dlvsym;
void *shim_real_dlopen;
void *shim_real_dlmopen;

/* The decision functions' answer "NULL, do not ask glibc". */
#define DL_NULL ((void *)1)

typedef void *dlvsym_fn(void *, const char *, const char *);
typedef void *dlopen_fn(const char *, int);
typedef void *dlmopen_fn(Lmid_t, const char *, int);

/* The exported entry points under hidden names (the trampolines' labels). */
void *shim_dlsym_entry(void *handle, const char *name);
void *shim_dlvsym_entry(void *handle, const char *name, const char *version);
void *shim_dlopen_entry(const char *file, int mode);
void *shim_dlmopen_entry(Lmid_t lmid, const char *file, int mode);

__attribute__((no_sanitize_address)) void shim_dlsym_resolve(void)
{
        if (__atomic_load_n(&shim_real_dlsym, __ATOMIC_ACQUIRE))
                return;
        __atomic_store_n(&shim_real_dlvsym, shim_elf_libc_sym("dlvsym"), __ATOMIC_RELEASE);
        __atomic_store_n(&shim_real_dlopen, shim_elf_libc_sym("dlopen"), __ATOMIC_RELEASE);
        __atomic_store_n(&shim_real_dlmopen, shim_elf_libc_sym("dlmopen"), __ATOMIC_RELEASE);
        __atomic_store_n(&shim_real_dlsym, shim_elf_libc_sym("dlsym"), __ATOMIC_RELEASE);
}

/* ---- names ---- */

/* 1 dlsym, 2 dlvsym, 3 dlopen, 4 dlmopen, 0 another name. */
__attribute__((no_sanitize_address)) static int dl_name(const char *n)
{
        if (n[0] != 'd' || n[1] != 'l')
                return 0;
        n += 2;
        if (n[0] == 's' && n[1] == 'y' && n[2] == 'm' && !n[3])
                return 1;
        if (n[0] == 'v' && n[1] == 's' && n[2] == 'y' && n[3] == 'm' && !n[4])
                return 2;
        if (n[0] == 'm')
                n++;
        if (n[0] == 'o' && n[1] == 'p' && n[2] == 'e' && n[3] == 'n' && !n[4])
                return n[-1] == 'm' ? 4 : 3;
        return 0;
}

__attribute__((no_sanitize_address)) static bool maybe_hooked(const char *n)
{
        return (n[0] == 'c' && n[1] == 'u') ||
               (n[0] == 'n' && n[1] == 'v' && n[2] == 'm' && n[3] == 'l');
}

__attribute__((no_sanitize_address)) static void *dl_entry(int which)
{
        switch (which) {
        case 1:
                return (void *)shim_dlsym_entry;
        case 2:
                return (void *)shim_dlvsym_entry;
        case 3:
                return (void *)shim_dlopen_entry;
        default:
                return (void *)shim_dlmopen_entry;
        }
}

__attribute__((no_sanitize_address)) static bool is_glibc_dl(void *p)
{
        return p && (p == __atomic_load_n(&shim_real_dlsym, __ATOMIC_ACQUIRE) ||
                     p == __atomic_load_n(&shim_real_dlvsym, __ATOMIC_ACQUIRE) ||
                     p == __atomic_load_n(&shim_real_dlopen, __ATOMIC_ACQUIRE) ||
                     p == __atomic_load_n(&shim_real_dlmopen, __ATOMIC_ACQUIRE));
}

static int hook_index(const char *name)
{
        for (int i = 0; i < SHIM_H_COUNT; i++)
                if (!strcmp(shim_hook_name[i], name))
                        return i;
        return -1;
}

/* The answer for hooked name `name`, whose lookup in `handle` (not
 * RTLD_DEFAULT / RTLD_NEXT) answered p. */
static void *map_found(int i, void *p, enum shim_mode m)
{
        if (!p || p == shim_wrapper[i] || p == shim_real[i])
                return p ? shim_wrapper[i] : NULL;
        if (m != SHIM_MODE_SLICE)
                return p; /* another library's symbol of that name */
        /* Inside a slice, a hooked name never leaves unhooked, whoever
         * defines it (a second copy of the driver, loaded by path). */
        if (shim_real[i]) {
                shim_log("%s from a library that is not the driver the shim wraps: "
                         "answered with the shim's wrapper",
                         shim_hook_name[i]);
                return shim_wrapper[i];
        }
        shim_log("%s from a library that is not the driver the shim wraps, which lacks it: "
                 "refused (NULL)",
                 shim_hook_name[i]);
        return DL_NULL;
}

/* dlsym (version NULL) or dlvsym of a cu* / nvml* name. */
static void *lookup_hooked(void *handle, const char *name, const char *version)
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
        void *p = version ? ((dlvsym_fn *)shim_real_dlvsym)(handle, name, version)
                          : REAL_DLSYM(handle, name);
        p = map_found(i, p, m);
        return p ? p : DL_NULL;
}

/* The answer for a lookup of a dl* name (which = dl_name()). */
__attribute__((no_sanitize_address)) static void *lookup_dl(void *handle, const char *name,
                                                            const char *version, int which)
{
        if (handle == RTLD_DEFAULT || handle == RTLD_NEXT)
                return dl_entry(which);
        void *p = version ? ((dlvsym_fn *)shim_real_dlvsym)(handle, name, version)
                          : REAL_DLSYM(handle, name);
        if (is_glibc_dl(p))
                return dl_entry(which);
        return p ? p : DL_NULL;
}

/* The test hook (tests/shim/shim_routes_test.c), handed out by dlsym
 * under this name only when GPUSLICE_TEST_HOOKS=1: it is never exported. */
__attribute__((no_sanitize_address)) static void *test_hook(const char *n)
{
        static const char want[] = "gpuslice_test_hold";
        for (unsigned i = 0; i < sizeof(want); i++)
                if (n[i] != want[i])
                        return NULL;
        const char *on = secure_getenv("GPUSLICE_TEST_HOOKS");
        return on && on[0] == '1' && !on[1] ? (void *)shim_test_hold : NULL;
}

/* Returns the answer for (handle, name), DL_NULL for NULL, or NULL to let
 * glibc answer. */
__attribute__((no_sanitize_address)) void *shim_dlsym_lookup(void *handle, const char *name);
__attribute__((no_sanitize_address)) void *shim_dlsym_lookup(void *handle, const char *name)
{
        if (!__atomic_load_n(&shim_real_dlsym, __ATOMIC_ACQUIRE))
                shim_dlsym_resolve();
        if (!name)
                return NULL;
        int which = dl_name(name);
        if (which)
                return lookup_dl(handle, name, NULL, which);
        if (name[0] == 'g')
                return test_hook(name);
        if (!maybe_hooked(name))
                return NULL;
        return lookup_hooked(handle, name, NULL);
}

/* The same for dlvsym(handle, name, version). */
__attribute__((no_sanitize_address)) void *shim_dlvsym_lookup(void *handle, const char *name,
                                                             const char *version);
__attribute__((no_sanitize_address)) void *shim_dlvsym_lookup(void *handle, const char *name,
                                                             const char *version)
{
        if (!__atomic_load_n(&shim_real_dlsym, __ATOMIC_ACQUIRE))
                shim_dlsym_resolve();
        if (!name || !version || !__atomic_load_n(&shim_real_dlvsym, __ATOMIC_ACQUIRE))
                return NULL;
        int which = dl_name(name);
        if (which)
                return lookup_dl(handle, name, version, which);
        if (!maybe_hooked(name))
                return NULL;
        return lookup_hooked(handle, name, version);
}

/* ---- dlopen / dlmopen ---- */

/* The mode glibc's dlopen is called with: inside a slice without
 * RTLD_DEEPBIND. */
__attribute__((no_sanitize_address)) int shim_dlopen_mode(const char *file, int mode);
__attribute__((no_sanitize_address)) int shim_dlopen_mode(const char *file, int mode)
{
        if (!__atomic_load_n(&shim_real_dlsym, __ATOMIC_ACQUIRE))
                shim_dlsym_resolve();
        if (!(mode & RTLD_DEEPBIND) || !shim_maybe_slice() || shim_init() != SHIM_MODE_SLICE)
                return mode;
        shim_log("dlopen(%s, RTLD_DEEPBIND): RTLD_DEEPBIND dropped inside a slice (a deep-bound "
                 "library would reach the driver around the shim)",
                 file ? file : "NULL");
        return mode & ~RTLD_DEEPBIND;
}

/* The mode for dlmopen(lmid, file, mode), or -1: inside a slice, a load
 * into another namespace takes the checked route (shim_dlmopen_checked). */
__attribute__((no_sanitize_address)) int shim_dlmopen_mode(Lmid_t lmid, const char *file, int mode);
__attribute__((no_sanitize_address)) int shim_dlmopen_mode(Lmid_t lmid, const char *file, int mode)
{
        if (lmid == LM_ID_BASE)
                return shim_dlopen_mode(file, mode);
        if (!__atomic_load_n(&shim_real_dlsym, __ATOMIC_ACQUIRE))
                shim_dlsym_resolve();
        if (!shim_maybe_slice() || shim_init() != SHIM_MODE_SLICE)
                return mode;
        return -1;
}

/* Whether the scope of handle h holds a CUDA driver. */
static bool holds_driver(void *h)
{
        static const char *const names[] = { "cuInit", "cuGetProcAddress", "cuMemAlloc_v2",
                                             "cuGetProcAddress_v2" };
        bool yes = false;
        for (unsigned i = 0; !yes && i < sizeof(names) / sizeof(names[0]); i++)
                yes = REAL_DLSYM(h, names[i]) != NULL;
        dlerror(); /* the failed probes are not the caller's error */
        return yes;
}

/* dlmopen into another namespace, inside a slice: no preloaded library is
 * there, so a CUDA driver loaded into it would allocate around the shim.
 * The load is made (its search paths are this library's, not the caller's:
 * a limitation of this route only), and undone and refused when its scope
 * holds a driver; dlerror() then names the reason. */
void *shim_dlmopen_checked(Lmid_t lmid, const char *file, int mode);
void *shim_dlmopen_checked(Lmid_t lmid, const char *file, int mode)
{
        dlmopen_fn *real = (dlmopen_fn *)__atomic_load_n(&shim_real_dlmopen, __ATOMIC_ACQUIRE);
        dlopen_fn *open = (dlopen_fn *)__atomic_load_n(&shim_real_dlopen, __ATOMIC_ACQUIRE);
        if (!real)
                return NULL;
        void *h = real(lmid, file, mode);
        if (!h || !holds_driver(h))
                return h;
        shim_log("dlmopen(%ld, %s): a CUDA driver in another link-map namespace is refused "
                 "inside a slice (it would allocate around the shim)",
                 (long)lmid, file ? file : "NULL");
        dlclose(h);
        /* dlerror() must say why: a load that fails with this name does. */
        if (open)
                open("/gpuslice: dlmopen of a CUDA driver into another namespace is refused "
                     "inside a slice",
                     RTLD_LAZY);
        return NULL;
}

/* ---- the exported entry points ---- */

#if defined(__x86_64__)
/* Each: save the arguments, ask the decision function, restore them and
 * either return its answer or tail-jump to glibc's function (NULL when
 * glibc's could not be found). The pieces are string macros, so the four
 * entries are assembled from one text of each step. */

/* The exported name `sym` and its hidden alias shim_<sym>_entry. */
#define ENTRY_BEGIN(sym)                                                                           \
        ".globl " sym "\n"                                                                         \
        ".type " sym ", @function\n"                                                               \
        ".globl shim_" sym "_entry\n"                                                              \
        ".hidden shim_" sym "_entry\n"                                                             \
        ".p2align 4\n" sym ":\n"                                                                   \
        "shim_" sym "_entry:\n"                                                                    \
        "  .cfi_startproc\n"                                                                       \
        "  endbr64\n"
#define ENTRY_END(sym)                                                                             \
        "  .cfi_endproc\n"                                                                         \
        ".size " sym ", .-" sym "\n"
/* Call fn with the first two (three) argument registers saved around it
 * and the stack kept 16-byte aligned at the call. */
#define CALL_SAVING_2(fn)                                                                          \
        "  pushq %rdi\n"                                                                           \
        "  .cfi_adjust_cfa_offset 8\n"                                                             \
        "  pushq %rsi\n"                                                                           \
        "  .cfi_adjust_cfa_offset 8\n"                                                             \
        "  subq $8, %rsp\n"                                                                        \
        "  .cfi_adjust_cfa_offset 8\n"                                                             \
        "  call " fn "\n"                                                                          \
        "  addq $8, %rsp\n"                                                                        \
        "  .cfi_adjust_cfa_offset -8\n"                                                            \
        "  popq %rsi\n"                                                                            \
        "  .cfi_adjust_cfa_offset -8\n"                                                            \
        "  popq %rdi\n"                                                                            \
        "  .cfi_adjust_cfa_offset -8\n"
#define CALL_SAVING_3(fn)                                                                          \
        "  pushq %rdi\n"                                                                           \
        "  .cfi_adjust_cfa_offset 8\n"                                                             \
        "  pushq %rsi\n"                                                                           \
        "  .cfi_adjust_cfa_offset 8\n"                                                             \
        "  pushq %rdx\n"                                                                           \
        "  .cfi_adjust_cfa_offset 8\n"                                                             \
        "  call " fn "\n"                                                                          \
        "  popq %rdx\n"                                                                            \
        "  .cfi_adjust_cfa_offset -8\n"                                                            \
        "  popq %rsi\n"                                                                            \
        "  .cfi_adjust_cfa_offset -8\n"                                                            \
        "  popq %rdi\n"                                                                            \
        "  .cfi_adjust_cfa_offset -8\n"
/* A lookup's answer in %rax: NULL asks glibc's `real` (if found), DL_NULL
 * (1) is a NULL answer, anything else is the answer. */
#define LOOKUP_ANSWER(real)                                                                        \
        "  testq %rax, %rax\n"                                                                     \
        "  jz 1f\n"                                                                                \
        "  cmpq $1, %rax\n"                                                                        \
        "  jne 2f\n"                                                                               \
        "  xorl %eax, %eax\n"                                                                      \
        "2:\n"                                                                                     \
        "  ret\n"                                                                                  \
        "1:\n"                                                                                     \
        "  movq " real "(%rip), %rax\n"                                                            \
        "  testq %rax, %rax\n"                                                                     \
        "  jz 2b\n"                                                                                \
        "  jmp *%rax\n"

__asm__(".text\n"
        ENTRY_BEGIN("dlsym")
        CALL_SAVING_2("shim_dlsym_lookup")
        LOOKUP_ANSWER("shim_real_dlsym")
        ENTRY_END("dlsym")

        ENTRY_BEGIN("dlvsym")
        CALL_SAVING_3("shim_dlvsym_lookup")
        LOOKUP_ANSWER("shim_real_dlvsym")
        ENTRY_END("dlvsym")

        ENTRY_BEGIN("dlopen")
        CALL_SAVING_2("shim_dlopen_mode")
        "  movl %eax, %esi\n"
        "  movq shim_real_dlopen(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  jz 1f\n"
        "  jmp *%rax\n"
        "1:\n"
        "  ret\n"
        ENTRY_END("dlopen")

        ENTRY_BEGIN("dlmopen")
        CALL_SAVING_3("shim_dlmopen_mode")
        "  cmpl $-1, %eax\n"
        "  je 1f\n"
        "  movl %eax, %edx\n"
        "  movq shim_real_dlmopen(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  jz 2f\n"
        "  jmp *%rax\n"
        "2:\n"
        "  ret\n"
        "1:\n"
        "  jmp shim_dlmopen_checked\n"
        ENTRY_END("dlmopen"));
#else
/* Other architectures: C wrappers. RTLD_NEXT lookups and dlopen's search
 * paths are answered relative to this library rather than to the caller
 * (documented limitation). The shim_*_entry functions are what a lookup of
 * the names answers; the exported ones call them. */
static void *answer(void *p)
{
        return p == DL_NULL ? NULL : p;
}

void *shim_dlsym_entry(void *handle, const char *name)
{
        void *p = shim_dlsym_lookup(handle, name);
        if (p || !shim_real_dlsym)
                return answer(p);
        return REAL_DLSYM(handle, name);
}

void *shim_dlvsym_entry(void *handle, const char *name, const char *version)
{
        void *p = shim_dlvsym_lookup(handle, name, version);
        if (p || !shim_real_dlvsym)
                return answer(p);
        return ((dlvsym_fn *)shim_real_dlvsym)(handle, name, version);
}

void *shim_dlopen_entry(const char *file, int mode)
{
        int m = shim_dlopen_mode(file, mode);
        return shim_real_dlopen ? ((dlopen_fn *)shim_real_dlopen)(file, m) : NULL;
}

void *shim_dlmopen_entry(Lmid_t lmid, const char *file, int mode)
{
        int m = shim_dlmopen_mode(lmid, file, mode);
        if (m == -1)
                return shim_dlmopen_checked(lmid, file, mode);
        return shim_real_dlmopen ? ((dlmopen_fn *)shim_real_dlmopen)(lmid, file, m) : NULL;
}

SHIM_EXPORT void *dlsym(void *handle, const char *name);
void *dlsym(void *handle, const char *name)
{
        return shim_dlsym_entry(handle, name);
}

SHIM_EXPORT void *dlvsym(void *handle, const char *name, const char *version);
void *dlvsym(void *handle, const char *name, const char *version)
{
        return shim_dlvsym_entry(handle, name, version);
}

SHIM_EXPORT void *dlopen(const char *file, int mode);
void *dlopen(const char *file, int mode)
{
        return shim_dlopen_entry(file, mode);
}

SHIM_EXPORT void *dlmopen(Lmid_t lmid, const char *file, int mode);
void *dlmopen(Lmid_t lmid, const char *file, int mode)
{
        return shim_dlmopen_entry(lmid, file, mode);
}
#endif
