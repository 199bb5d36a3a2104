/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libcuda: a module's __device__ variables (PTX `.global`
 * declarations) and cuModuleGetGlobal.
 *
 * The real driver allocates a module's global segment in its context's
 * device memory when the module is loaded, so a module with a large
 * `__device__` array uses that much memory from cuModuleLoadData on, without
 * any allocation call. simgpu reads the declarations at module scope:
 *   [.visible|.weak|.common] .global [.align N] .TYPE NAME[DIM]...[ = ...];
 * (`.extern` ones have no storage here), lays them out in one segment
 * (each aligned, default to its element size), rounds it up to 2 MiB and
 * charges it to the device at load; cuModuleUnload and the context's
 * destruction give it back. Initialisers are not applied (the segment is
 * zero-filled). Code and constant banks are not charged. */
#include "sim_cuda.h"

#include <string.h>
#include <sys/mman.h>

/* Bytes of a PTX fundamental type (.b8 .u16 .f32 .s64 ...), 0 if none. */
static uint64_t type_bytes(const char *t, size_t n)
{
        if (n < 3 || t[0] != '.' || !strchr("bfsu", t[1]))
                return 0;
        uint64_t bits = 0;
        for (size_t i = 2; i < n; i++) {
                if (t[i] < '0' || t[i] > '9')
                        return 0;
                bits = bits * 10 + (uint64_t)(t[i] - '0');
                if (bits > 64)
                        return 0;
        }
        return bits == 8 || bits == 16 || bits == 32 || bits == 64 ? bits / 8 : 0;
}

static const char *skip_ws(const char *p, const char *end)
{
        while (p < end && (*p == ' ' || *p == '\t'))
                p++;
        return p;
}

/* The token at p (up to blank, '[', ';', '=' or end of line). */
static size_t token_len(const char *p, const char *end)
{
        size_t n = 0;
        while (p + n < end && !strchr(" \t[;=\r\n", p[n]))
                n++;
        return n;
}

static bool starts(const char *p, const char *end, const char *word)
{
        size_t n = strlen(word);
        return (size_t)(end - p) >= n && memcmp(p, word, n) == 0 &&
               ((size_t)(end - p) == n || p[n] == ' ' || p[n] == '\t');
}

/* Parses one declaration line [p, end) if it is a `.global` variable.
 * 1 with *g filled (offset not yet set) and *align, 0 if the line is
 * something else, -1 if malformed. */
static int parse_line(const char *p, const char *end, struct sim_mod_global *g, uint64_t *align)
{
        p = skip_ws(p, end);
        for (const char *const *q = (const char *const[]){ ".visible", ".weak", ".common", NULL }; *q;
             q++)
                if (starts(p, end, *q))
                        p = skip_ws(p + strlen(*q), end);
        if (!starts(p, end, ".global"))
                return 0;
        p = skip_ws(p + 7, end);
        *align = 0;
        if (starts(p, end, ".align")) {
                p = skip_ws(p + 6, end);
                uint64_t a = 0;
                while (p < end && *p >= '0' && *p <= '9' && a <= 4096)
                        a = a * 10 + (uint64_t)(*p++ - '0');
                if (a == 0 || a > 4096 || (a & (a - 1)))
                        return -1;
                *align = a;
                p = skip_ws(p, end);
        }
        size_t n = token_len(p, end);
        uint64_t elem = type_bytes(p, n);
        if (!elem)
                return -1;
        p = skip_ws(p + n, end);
        n = token_len(p, end);
        if (n == 0 || n >= sizeof(g->name))
                return -1;
        memcpy(g->name, p, n);
        g->name[n] = 0;
        p += n;
        uint64_t size = elem;
        while ((p = skip_ws(p, end)) < end && *p == '[') {
                uint64_t dim = 0;
                for (p++; p < end && *p >= '0' && *p <= '9'; p++) {
                        dim = dim * 10 + (uint64_t)(*p - '0');
                        if (dim > (1ull << 40))
                                return -1;
                }
                if (p >= end || *p != ']' || dim == 0 || size > (1ull << 42) / dim)
                        return -1;
                size *= dim;
                p++;
        }
        if (*align == 0)
                *align = elem;
        g->size = size;
        return 1;
}

CUresult sim_module_globals_load(struct CUmod_st *m, const char *text, size_t len)
{
        const char *p = text, *end = text + len;
        uint64_t off = 0;
        int depth = 0; /* braces: declarations inside functions are not module scope */
        while (p < end) {
                const char *eol = memchr(p, '\n', (size_t)(end - p));
                if (!eol)
                        eol = end;
                struct sim_mod_global g = { 0 };
                uint64_t align = 0;
                int r = depth == 0 ? parse_line(p, eol, &g, &align) : 0;
                if (r < 0 || (r > 0 && m->nglobals == SIM_MOD_GLOBALS))
                        return CUDA_ERROR_INVALID_PTX;
                if (r > 0) {
                        off = (off + align - 1) & ~(align - 1);
                        g.offset = off;
                        off += g.size;
                        m->globals[m->nglobals++] = g;
                }
                for (const char *c = p; c < eol; c++)
                        depth += *c == '{' ? 1 : *c == '}' ? -1 : 0;
                p = eol + 1;
        }
        if (off == 0 || !m->ctx)
                return CUDA_SUCCESS; /* a library (no context): not placed anywhere yet */
        uint64_t bytes = sim_round(off);
        CUresult rc = sim_charge(m->ctx->dev, bytes);
        if (rc != CUDA_SUCCESS)
                return rc;
        uint64_t base = sim_host_map(bytes);
        struct sim_alloc a = { .base = base, .size = bytes, .charged = bytes, .dev = m->ctx->dev,
                               .kind = SIM_A_MODULE, .ctx = m->ctx };
        if (!base || !sim_table_add(&a)) {
                if (base)
                        munmap((void *)(uintptr_t)base, bytes);
                sim_uncharge(m->ctx->dev, bytes);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        m->gbase = base;
        m->gbytes = bytes;
        return CUDA_SUCCESS;
}

void sim_module_globals_free(struct CUmod_st *m)
{
        struct sim_alloc a;
        /* absent when the module's context was destroyed first (freed then) */
        if (m->gbase && sim_table_find(m->gbase, 1, SIM_A_MODULE, &a) && a.base == m->gbase &&
            a.ctx == m->ctx && a.size == m->gbytes && sim_table_take(m->gbase, SIM_A_MODULE, &a)) {
                munmap((void *)(uintptr_t)a.base, a.size);
                sim_uncharge(a.dev, a.charged);
        }
        m->gbase = m->gbytes = 0;
}

SIM_EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule m,
                                         const char *name)
{
        SIM_NEED_INIT();
        if (!name)
                return CUDA_ERROR_INVALID_VALUE;
        if (!m || m->magic != SIM_MAGIC_MOD)
                return CUDA_ERROR_INVALID_HANDLE;
        for (int i = 0; i < m->nglobals; i++) {
                if (strcmp(m->globals[i].name, name) != 0)
                        continue;
                if (!m->gbase)
                        return CUDA_ERROR_NOT_FOUND;
                if (dptr)
                        *dptr = m->gbase + m->globals[i].offset;
                if (bytes)
                        *bytes = m->globals[i].size;
                return CUDA_SUCCESS;
        }
        return CUDA_ERROR_NOT_FOUND;
}
