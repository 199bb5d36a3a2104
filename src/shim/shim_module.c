/* SPDX-License-Identifier: Apache-2.0 */
/* Modules' __device__ variables: the driver allocates a module's global
 * segment in its context at load, with no allocation call. For a PTX module
 * the shim reads the module-scope `.global` declarations (not `.extern`:
 * they have no storage), sums their sizes (each aligned to its .align or
 * element size), rounds up to 2 MiB (the same layout as simgpu's) and
 * charges that from cuModuleLoad* to cuModuleUnload or the context's end; a
 * load that does not fit is refused (CUDA_ERROR_OUT_OF_MEMORY) before the
 * driver sees it. Cubin and fatbin images, and libraries (cuLibraryLoad*),
 * are not read: their globals are not charged (docs/shim.md). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim_reserve.h"

#define PTX_MAX (64u << 20) /* larger images are not read */

static bool starts(const char *p, const char *end, const char *w)
{
        size_t n = strlen(w);
        return (size_t)(end - p) > n && memcmp(p, w, n) == 0 && (p[n] == ' ' || p[n] == '\t');
}

static const char *blanks(const char *p, const char *end)
{
        while (p < end && (*p == ' ' || *p == '\t'))
                p++;
        return p;
}

static uint64_t digits(const char **pp, const char *end)
{
        uint64_t v = 0;
        const char *p = *pp;
        while (p < end && *p >= '0' && *p <= '9' && v < (1ull << 44))
                v = v * 10 + (uint64_t)(*p++ - '0');
        *pp = p;
        return v;
}

/* Size of a `.global` declaration line [p, end) (*align set), else 0. */
static uint64_t global_bytes(const char *p, const char *end, uint64_t *align)
{
        p = blanks(p, end);
        for (int i = 0; i < 3; i++)
                if (starts(p, end, (const char *[]){ ".visible", ".weak", ".common" }[i]))
                        p = blanks(p + strcspn(p, " \t"), end);
        if (!starts(p, end, ".global"))
                return 0;
        p = blanks(p + 7, end);
        *align = 0;
        if (starts(p, end, ".align")) {
                p = blanks(p + 6, end);
                *align = digits(&p, end);
                p = blanks(p, end);
        }
        uint64_t elem = 0;
        if (p + 2 < end && p[0] == '.' && strchr("bfsu", p[1])) {
                const char *q = p + 2;
                uint64_t bits = digits(&q, end);
                elem = bits == 8 || bits == 16 || bits == 32 || bits == 64 ? bits / 8 : 0;
                p = q;
        }
        if (!elem)
                return 0;
        while (p < end && *p != '[' && *p != ';' && *p != '=')
                p++;
        uint64_t size = elem;
        while (p < end && *p == '[') {
                p++;
                uint64_t d = digits(&p, end);
                if (d == 0)
                        return 0; /* unsized: no storage here */
                if (size > (1ull << 44) / d)
                        return UINT64_MAX; /* absurd: refused */
                size *= d;
                p = blanks(p + (p < end && *p == ']'), end);
        }
        if (*align == 0 || *align > 4096 || (*align & (*align - 1)))
                *align = elem;
        return size;
}

/* The global segment a PTX image needs (0: none, or not PTX text;
 * UINT64_MAX: absurd). */
static uint64_t ptx_globals(const char *img)
{
        if (!img || strncmp(img, "\x7f" "ELF", 4) == 0 || strncmp(img, "\x50\xed\x55\xba", 4) == 0)
                return 0; /* ELF cubin, fatbin: not read */
        size_t len = strnlen(img, PTX_MAX);
        if (len == PTX_MAX || !memmem(img, len, ".version", 8))
                return 0;
        const char *p = img, *end = img + len;
        uint64_t off = 0;
        int depth = 0;
        while (p < end) {
                const char *eol = memchr(p, '\n', (size_t)(end - p));
                if (!eol)
                        eol = end;
                uint64_t align = 1, b = depth == 0 ? global_bytes(p, eol, &align) : 0;
                if (b == UINT64_MAX)
                        return UINT64_MAX;
                if (b) {
                        off = (off + align - 1) & ~(align - 1);
                        if (off > UINT64_MAX / 2 - b)
                                return UINT64_MAX;
                        off += b;
                }
                for (const char *c = p; c < eol; c++)
                        depth += *c == '{' ? 1 : *c == '}' ? -1 : 0;
                p = eol + 1;
        }
        return shim_round(off);
}

/* Reserves b for a load (0: nothing to reserve). */
static CUresult load_reserve(uint64_t b)
{
        if (b == UINT64_MAX || (b && shim_reserve(b) < 0)) {
                shim_log("cuModuleLoad: the module's __device__ variables need %llu bytes: refused",
                         (unsigned long long)b);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return CUDA_SUCCESS;
}

/* After the driver's answer r to a load charged b: records the module, or
 * gives b back (unloading the module when it cannot be recorded). */
static CUresult load_settle(CUresult r, CUmodule *m, uint64_t b)
{
        if (!b)
                return r;
        if (r != CUDA_SUCCESS) {
                shim_books_release(b);
                return r;
        }
        if (shim_table_put_in(SHIM_K_MODULE, (uint64_t)(uintptr_t)*m, b, 0, shim_current_ctx()) < 0) {
                REAL(cuModuleUnload)(*m);
                shim_books_release(b);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return r;
}

CUresult shim_w_cuModuleLoadData(CUmodule *module, const void *image)
{
        SHIM_ENTER(cuModuleLoadData, REAL(cuModuleLoadData)(module, image));
        uint64_t b = ptx_globals(image);
        CUresult r = load_reserve(b);
        if (r != CUDA_SUCCESS)
                return r;
        return load_settle(REAL(cuModuleLoadData)(module, image), module, b);
}

CUresult shim_w_cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                   CUjit_option *options, void **optionValues)
{
        SHIM_ENTER(cuModuleLoadDataEx,
                   REAL(cuModuleLoadDataEx)(module, image, numOptions, options, optionValues));
        uint64_t b = ptx_globals(image);
        CUresult r = load_reserve(b);
        if (r != CUDA_SUCCESS)
                return r;
        return load_settle(REAL(cuModuleLoadDataEx)(module, image, numOptions, options, optionValues),
                           module, b);
}

/* The PTX file at path (malloc'd, NUL-terminated) or NULL. */
static char *read_ptx(const char *path)
{
        int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : -1;
        if (fd < 0)
                return NULL;
        size_t cap = 1 << 16, n = 0;
        char *buf = malloc(cap + 1);
        while (buf) {
                ssize_t got = read(fd, buf + n, cap - n);
                if (got <= 0)
                        break;
                n += (size_t)got;
                if (n == cap) {
                        char *nb = cap >= PTX_MAX ? NULL : realloc(buf, cap * 2 + 1);
                        if (!nb) {
                                free(buf);
                                buf = NULL;
                                break;
                        }
                        buf = nb;
                        cap *= 2;
                }
        }
        close(fd);
        if (buf)
                buf[n] = 0;
        return buf;
}

CUresult shim_w_cuModuleLoad(CUmodule *module, const char *fname)
{
        SHIM_ENTER(cuModuleLoad, REAL(cuModuleLoad)(module, fname));
        char *text = read_ptx(fname);
        uint64_t b = ptx_globals(text);
        free(text);
        CUresult r = load_reserve(b);
        if (r != CUDA_SUCCESS)
                return r;
        return load_settle(REAL(cuModuleLoad)(module, fname), module, b);
}

CUresult shim_w_cuModuleUnload(CUmodule hmod)
{
        SHIM_ENTER(cuModuleUnload, REAL(cuModuleUnload)(hmod));
        struct shim_entry e;
        bool had = shim_table_take(SHIM_K_MODULE, (uint64_t)(uintptr_t)hmod, &e);
        CUresult r = REAL(cuModuleUnload)(hmod);
        shim_table_settle(had, &e, r);
        return r;
}
