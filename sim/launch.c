/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libcuda: modules (PTX text), libraries, functions and launches.
 *
 * simgpu does not execute PTX. It recognises the project kernels by their
 * .entry name and simulates them:
 *   gs_busy(unsigned long long ns)            ns of device time
 *   gs_fill(unsigned int *p, unsigned v, size_t n)  p[0..n) = v (applied at
 *                                              enqueue; device time ~ n)
 * Other entries are not found (CUDA_ERROR_NOT_FOUND). */
#include "sim_cuda.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PTX_MAX (64u << 20)

struct CUlib_st {
        uint32_t magic;
        struct CUmod_st *mod;
};
#define SIM_MAGIC_LIB 0x4c494231u

static const char *const kernel_names[] = { [SIM_K_BUSY] = "gs_busy", [SIM_K_FILL] = "gs_fill" };

static CUresult parse_ptx(struct CUmod_st *m, const char *text)
{
        size_t len = strnlen(text, PTX_MAX);
        if (len == PTX_MAX)
                return CUDA_ERROR_INVALID_IMAGE;
        if (!memmem(text, len, ".version", 8) || !memmem(text, len, ".target", 7))
                return CUDA_ERROR_INVALID_PTX;
        const char *p = text, *end = text + len;
        while ((p = memmem(p, (size_t)(end - p), ".entry", 6)) != NULL) {
                p += 6;
                while (p < end && (*p == ' ' || *p == '\t'))
                        p++;
                const char *name = p;
                while (p < end && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                                   (*p >= '0' && *p <= '9') || *p == '_' || *p == '$'))
                        p++;
                size_t n = (size_t)(p - name);
                for (int k = SIM_K_BUSY; k <= SIM_K_FILL; k++) {
                        if (n != strlen(kernel_names[k]) || memcmp(name, kernel_names[k], n))
                                continue;
                        bool dup = false;
                        for (int i = 0; i < m->nfuncs; i++)
                                dup |= m->funcs[i].kind == (enum sim_kernel)k;
                        if (dup || m->nfuncs >= 2)
                                continue;
                        struct CUfunc_st *f = &m->funcs[m->nfuncs++];
                        f->magic = SIM_MAGIC_FUNC;
                        f->kind = (enum sim_kernel)k;
                        f->mod = m;
                        snprintf(f->name, sizeof(f->name), "%s", kernel_names[k]);
                }
        }
        return CUDA_SUCCESS;
}

static CUresult module_new(struct CUmod_st **out, const void *image, bool need_ctx)
{
        SIM_NEED_INIT();
        struct CUctx_st *c = sim_ctx_current();
        if (need_ctx && !c)
                return CUDA_ERROR_INVALID_CONTEXT;
        if (!out || !image)
                return CUDA_ERROR_INVALID_VALUE;
        struct CUmod_st *m = calloc(1, sizeof(*m));
        if (!m)
                return CUDA_ERROR_OUT_OF_MEMORY;
        m->magic = SIM_MAGIC_MOD;
        m->ctx = c;
        CUresult r = parse_ptx(m, image);
        if (r == CUDA_SUCCESS)
                r = sim_module_globals_load(m, image, strnlen(image, PTX_MAX));
        if (r != CUDA_SUCCESS) {
                free(m);
                return r;
        }
        sim_obj_add(&m->link);
        *out = m;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuModuleLoadData(CUmodule *out, const void *image)
{
        return module_new(out, image, true);
}

SIM_EXPORT CUresult cuModuleLoadDataEx(CUmodule *out, const void *image, unsigned int n,
                                       CUjit_option *opts, void **vals)
{
        if (n && (!opts || !vals))
                return CUDA_ERROR_INVALID_VALUE;
        return module_new(out, image, true);
}

SIM_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *out, const void *fatbin)
{
        SIM_NEED_INIT();
        return CUDA_ERROR_NOT_SUPPORTED;
}

static char *read_file(const char *path, CUresult *rc)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                *rc = CUDA_ERROR_FILE_NOT_FOUND;
                return NULL;
        }
        size_t cap = 1 << 16, n = 0;
        char *buf = malloc(cap + 1);
        while (buf) {
                ssize_t r = read(fd, buf + n, cap - n);
                if (r <= 0)
                        break;
                n += (size_t)r;
                if (n == cap) {
                        if (cap >= PTX_MAX) {
                                free(buf);
                                buf = NULL;
                                break;
                        }
                        cap *= 2;
                        char *nb = realloc(buf, cap + 1);
                        if (!nb)
                                free(buf);
                        buf = nb;
                }
        }
        close(fd);
        if (!buf) {
                *rc = CUDA_ERROR_INVALID_IMAGE;
                return NULL;
        }
        buf[n] = 0;
        return buf;
}

SIM_EXPORT CUresult cuModuleLoad(CUmodule *out, const char *fname)
{
        SIM_NEED_INIT();
        if (!fname || !out)
                return CUDA_ERROR_INVALID_VALUE;
        if (!sim_ctx_current())
                return CUDA_ERROR_INVALID_CONTEXT;
        CUresult rc = CUDA_SUCCESS;
        char *text = read_file(fname, &rc);
        if (!text)
                return rc;
        rc = module_new(out, text, true);
        free(text);
        return rc;
}

SIM_EXPORT CUresult cuModuleUnload(CUmodule m)
{
        SIM_NEED_INIT();
        if (!m || m->magic != SIM_MAGIC_MOD)
                return CUDA_ERROR_INVALID_HANDLE;
        sim_obj_del(&m->link);
        sim_module_globals_free(m);
        m->magic = 0;
        for (int i = 0; i < m->nfuncs; i++)
                m->funcs[i].magic = 0;
        free(m);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuModuleGetFunction(CUfunction *out, CUmodule m, const char *name)
{
        SIM_NEED_INIT();
        if (!out || !name)
                return CUDA_ERROR_INVALID_VALUE;
        if (!m || m->magic != SIM_MAGIC_MOD)
                return CUDA_ERROR_INVALID_HANDLE;
        for (int i = 0; i < m->nfuncs; i++)
                if (strcmp(m->funcs[i].name, name) == 0) {
                        *out = &m->funcs[i];
                        return CUDA_SUCCESS;
                }
        return CUDA_ERROR_NOT_FOUND;
}

SIM_EXPORT CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule m)
{
        SIM_NEED_INIT();
        if (!count || !m || m->magic != SIM_MAGIC_MOD)
                return CUDA_ERROR_INVALID_VALUE;
        *count = (unsigned)m->nfuncs;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
        SIM_NEED_INIT();
        if (!mode)
                return CUDA_ERROR_INVALID_VALUE;
        *mode = CU_MODULE_EAGER_LOADING;
        return CUDA_SUCCESS;
}

/* --- libraries (context-independent modules) --- */

SIM_EXPORT CUresult cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jo,
                                      void **jv, unsigned int nj, CUlibraryOption *lo,
                                      void **lv, unsigned int nl)
{
        SIM_NEED_INIT();
        if (!lib)
                return CUDA_ERROR_INVALID_VALUE;
        struct CUlib_st *l = calloc(1, sizeof(*l));
        if (!l)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = module_new(&l->mod, code, false);
        if (r != CUDA_SUCCESS) {
                free(l);
                return r;
        }
        l->magic = SIM_MAGIC_LIB;
        *lib = l;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuLibraryUnload(CUlibrary lib)
{
        SIM_NEED_INIT();
        if (!lib || lib->magic != SIM_MAGIC_LIB)
                return CUDA_ERROR_INVALID_HANDLE;
        cuModuleUnload(lib->mod);
        lib->magic = 0;
        free(lib);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuLibraryGetKernel(CUkernel *k, CUlibrary lib, const char *name)
{
        SIM_NEED_INIT();
        if (!lib || lib->magic != SIM_MAGIC_LIB)
                return CUDA_ERROR_INVALID_HANDLE;
        CUfunction f;
        CUresult r = cuModuleGetFunction(k ? &f : NULL, lib->mod, name);
        if (r == CUDA_SUCCESS)
                *k = (CUkernel)(void *)f;
        return r;
}

SIM_EXPORT CUresult cuLibraryGetModule(CUmodule *m, CUlibrary lib)
{
        SIM_NEED_INIT();
        if (!lib || lib->magic != SIM_MAGIC_LIB)
                return CUDA_ERROR_INVALID_HANDLE;
        if (!m)
                return CUDA_ERROR_INVALID_VALUE;
        *m = lib->mod;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuKernelGetFunction(CUfunction *f, CUkernel k)
{
        SIM_NEED_INIT();
        struct CUfunc_st *fn = (struct CUfunc_st *)(void *)k;
        if (!f)
                return CUDA_ERROR_INVALID_VALUE;
        if (!fn || fn->magic != SIM_MAGIC_FUNC)
                return CUDA_ERROR_INVALID_HANDLE;
        if (!sim_ctx_current())
                return CUDA_ERROR_INVALID_CONTEXT;
        *f = fn;
        return CUDA_SUCCESS;
}

/* --- functions --- */

static bool func_ok(const struct CUfunc_st *f)
{
        return f && f->magic == SIM_MAGIC_FUNC;
}

SIM_EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute a, CUfunction f)
{
        SIM_NEED_INIT();
        if (!func_ok(f))
                return CUDA_ERROR_INVALID_HANDLE;
        if (!pi)
                return CUDA_ERROR_INVALID_VALUE;
        switch (a) {
        case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
        case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 16; break;
        case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = 75; break;
        case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
        case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = 49152; break;
        default: *pi = 0;
        }
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v)
{
        SIM_NEED_INIT();
        return func_ok(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_EXPORT CUresult cuFuncSetCacheConfig(CUfunction f, CUfunc_cache c)
{
        SIM_NEED_INIT();
        return func_ok(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_EXPORT CUresult cuFuncGetName(const char **name, CUfunction f)
{
        SIM_NEED_INIT();
        if (!name)
                return CUDA_ERROR_INVALID_VALUE;
        if (!func_ok(f))
                return CUDA_ERROR_INVALID_HANDLE;
        *name = f->name;
        return CUDA_SUCCESS;
}

/* --- launches --- */

uint64_t sim_push(struct CUctx_st *c, uint64_t ns, int32_t event)
{
        struct sim_state *st = sim_g.st;
        for (;;) {
                sim_lock(st);
                sim_advance(st, c->dev, sim_now_ns());
                struct sim_ctx_rec *x = &st->ctx[c->slot];
                if (x->count < st->queue_depth) {
                        uint64_t seq = sim_enqueue(st, c->slot, ns, event);
                        sim_unlock(st);
                        return seq;
                }
                uint64_t want = x->done_seq + 1; /* the head must complete */
                sim_unlock(st);
                sim_wait_seq(c->slot, c->dev, want);
        }
}

static bool buffer_arg(void **extra, const void **buf, size_t *size)
{
        *buf = NULL;
        *size = 0;
        for (int i = 0; i < 16 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
                if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                        *buf = extra[i + 1];
                else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
                        *size = *(size_t *)extra[i + 1];
                else
                        return false;
        }
        return *buf != NULL;
}

CUresult sim_decode(const struct CUfunc_st *f, void **params, void **extra, struct sim_launch *l)
{
        memset(l, 0, sizeof(*l));
        l->kind = f->kind;
        if (params && extra)
                return CUDA_ERROR_INVALID_VALUE;
        if (params) {
                if (f->kind == SIM_K_BUSY) {
                        if (!params[0])
                                return CUDA_ERROR_INVALID_VALUE;
                        memcpy(&l->ns, params[0], 8);
                } else {
                        if (!params[0] || !params[1] || !params[2])
                                return CUDA_ERROR_INVALID_VALUE;
                        memcpy(&l->ptr, params[0], 8);
                        memcpy(&l->value, params[1], 4);
                        memcpy(&l->n, params[2], 8);
                }
                return CUDA_SUCCESS;
        }
        if (!extra)
                return CUDA_ERROR_INVALID_VALUE;
        const void *buf;
        size_t size;
        if (!buffer_arg(extra, &buf, &size))
                return CUDA_ERROR_INVALID_VALUE;
        const unsigned char *b = buf;
        if (f->kind == SIM_K_BUSY) {
                if (size < 8)
                        return CUDA_ERROR_INVALID_VALUE;
                memcpy(&l->ns, b, 8);
        } else {
                if (size < 24)
                        return CUDA_ERROR_INVALID_VALUE;
                memcpy(&l->ptr, b, 8);
                memcpy(&l->value, b + 8, 4);
                memcpy(&l->n, b + 16, 8);
        }
        return CUDA_SUCCESS;
}

CUresult sim_submit(CUstream s, const struct sim_launch *l)
{
        CUresult rc = CUDA_SUCCESS;
        struct CUctx_st *c = sim_stream_ctx(s, &rc);
        if (!c)
                return rc;
        bool dflt = s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
        if (!dflt && s->capture)
                return sim_graph_append(s->capture, l);
        uint64_t ns = l->ns;
        if (l->kind == SIM_K_FILL) {
                if (l->n > SIZE_MAX / 4 || (l->n && !sim_range_ok(l->ptr, l->n * 4)))
                        return CUDA_ERROR_ILLEGAL_ADDRESS;
                uint32_t *p = (uint32_t *)(uintptr_t)l->ptr;
                for (uint64_t i = 0; i < l->n; i++)
                        p[i] = l->value;
                ns = 2000 + l->n / 512; /* ~2 TB/s plus launch latency */
        }
        uint64_t seq = sim_push(c, ns, -1);
        if (!dflt)
                s->last_seq = seq;
        return CUDA_SUCCESS;
}

static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, CUstream s, void **params, void **extra)
{
        SIM_NEED_INIT();
        if (!func_ok(f))
                return CUDA_ERROR_INVALID_HANDLE;
        if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024 ||
            gy > 65535 || gz > 65535 || bz > 64 || gx > 2147483647u)
                return CUDA_ERROR_INVALID_VALUE;
        struct sim_launch l;
        CUresult r = sim_decode(f, params, extra, &l);
        if (r != CUDA_SUCCESS)
                return r;
        return sim_submit(s, &l);
}

SIM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                   unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                   CUstream s, void **params, void **extra)
{
        return launch(f, gx, gy, gz, bx, by, bz, s, params, extra);
}

SIM_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                        CUstream s, void **params, void **extra)
{
        return launch(f, gx, gy, gz, bx, by, bz, s, params, extra);
}

SIM_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy,
                                              unsigned gz, unsigned bx, unsigned by,
                                              unsigned bz, unsigned shmem, CUstream s,
                                              void **params)
{
        return launch(f, gx, gy, gz, bx, by, bz, s, params, NULL);
}

SIM_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy,
                                                   unsigned gz, unsigned bx, unsigned by,
                                                   unsigned bz, unsigned shmem, CUstream s,
                                                   void **params)
{
        return launch(f, gx, gy, gz, bx, by, bz, s, params, NULL);
}

SIM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **params,
                                     void **extra)
{
        SIM_NEED_INIT();
        if (!cfg || (cfg->numAttrs && !cfg->attrs))
                return CUDA_ERROR_INVALID_VALUE;
        return launch(f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX,
                      cfg->blockDimY, cfg->blockDimZ, cfg->hStream, params, extra);
}

SIM_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *cfg, CUfunction f,
                                          void **params, void **extra)
{
        return cuLaunchKernelEx(cfg, f, params, extra);
}
