/* SPDX-License-Identifier: Apache-2.0 */
/* glibc's own dl* functions, found without asking the dynamic linker.
 *
 * The shim defines dlsym, dlvsym, dlopen and dlmopen itself (shim_dlsym.c):
 * every reference to those names, the shim's own included, binds to the
 * shim's definitions (a versioned reference such as dlvsym@GLIBC_2.2.5 is
 * satisfied by an unversioned definition that comes first in the lookup
 * scope). glibc's functions are therefore read from the dynamic symbol
 * tables of libc.so.6 / libdl.so.2, reached through the dynamic linker's
 * list of loaded objects (_r_debug), calling nothing: this runs before any
 * sanitizer runtime is initialised (AddressSanitizer's set-up calls dlsym),
 * so it is uninstrumented and calls no intercepted function. */
#include <elf.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>

#include "shim.h"

#define NOSAN __attribute__((no_sanitize_address))

NOSAN static bool str_eq(const char *a, const char *b)
{
        while (*a && *a == *b) {
                a++;
                b++;
        }
        return *a == *b;
}

NOSAN static const char *base_name(const char *p)
{
        const char *b = p;
        for (; *p; p++)
                if (*p == '/')
                        b = p + 1;
        return b;
}

/* The dynamic linker relocates the pointers of a loaded object's dynamic
 * section in place on x86_64 and aarch64; an address below the load bias
 * is one it left as an offset. */
NOSAN static uintptr_t dyn_ptr(ElfW(Addr) base, ElfW(Addr) p)
{
        return p < base ? base + p : p;
}

struct dyn_tables {
        ElfW(Addr) base;
        const ElfW(Sym) *sym;
        const char *str;
        const ElfW(Half) *versym;
        const uint32_t *gnu_hash;
        const ElfW(Word) *hash;
};

/* The best definition so far: a default-version one wins over a hidden
 * (compat) one. */
struct dyn_best {
        void *addr;
        bool is_default;
};

NOSAN static void consider(const struct dyn_tables *t, uint32_t i, const char *name,
                           struct dyn_best *best)
{
        const ElfW(Sym) *s = &t->sym[i];
        if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC || !s->st_value)
                return;
        if (!str_eq(t->str + s->st_name, name))
                return;
        bool is_default = !t->versym || !(t->versym[i] & 0x8000);
        if (best->addr && (best->is_default || !is_default))
                return;
        best->addr = (void *)(t->base + s->st_value);
        best->is_default = is_default;
}

NOSAN static void lookup_gnu(const struct dyn_tables *t, const char *name, struct dyn_best *best)
{
        const uint32_t *gh = t->gnu_hash;
        uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
        if (!nbuckets)
                return;
        const ElfW(Addr) *bloom = (const ElfW(Addr) *)(const void *)(gh + 4);
        const uint32_t *buckets = (const uint32_t *)(const void *)(bloom + bloom_size);
        const uint32_t *chain = buckets + nbuckets;
        uint32_t h = 5381;
        for (const char *c = name; *c; c++)
                h = h * 33 + (unsigned char)*c;
        uint32_t i = buckets[h % nbuckets];
        if (i < symoffset)
                return;
        for (;; i++) {
                uint32_t ch = chain[i - symoffset];
                if ((ch | 1) == (h | 1))
                        consider(t, i, name, best);
                if (ch & 1)
                        break;
        }
}

NOSAN static void lookup_sysv(const struct dyn_tables *t, const char *name, struct dyn_best *best)
{
        uint32_t nchain = t->hash[1];
        for (uint32_t i = 1; i < nchain; i++)
                consider(t, i, name, best);
}

NOSAN void *shim_elf_libc_sym(const char *name)
{
        struct dyn_best best = { 0 };
        for (struct link_map *l = _r_debug.r_map; l && !best.addr; l = l->l_next) {
                const char *b = l->l_name ? base_name(l->l_name) : "";
                if (!str_eq(b, "libc.so.6") && !str_eq(b, "libdl.so.2"))
                        continue;
                struct dyn_tables t = { .base = l->l_addr };
                for (const ElfW(Dyn) *d = l->l_ld; d && d->d_tag != DT_NULL; d++) {
                        uintptr_t p = dyn_ptr(l->l_addr, d->d_un.d_ptr);
                        switch (d->d_tag) {
                        case DT_SYMTAB:
                                t.sym = (const ElfW(Sym) *)p;
                                break;
                        case DT_STRTAB:
                                t.str = (const char *)p;
                                break;
                        case DT_VERSYM:
                                t.versym = (const ElfW(Half) *)p;
                                break;
                        case DT_GNU_HASH:
                                t.gnu_hash = (const uint32_t *)p;
                                break;
                        case DT_HASH:
                                t.hash = (const ElfW(Word) *)p;
                                break;
                        default:
                                break;
                        }
                }
                if (!t.sym || !t.str)
                        continue;
                if (t.gnu_hash)
                        lookup_gnu(&t, name, &best);
                else if (t.hash)
                        lookup_sysv(&t, name, &best);
        }
        return best.addr;
}
