/* The hook machinery: tables generated from hooks.def, resolution of the
 * real driver (once, under pthread_once), the slice's start-up, fork
 * handling, and the cuGetProcAddress route. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "shim_gate.h"
#include "slice_conf_io.h"

void *shim_real[SHIM_H_COUNT];
struct shim_extra shim_x;
struct gs_slice_conf shim_conf;
__thread int shim_depth __attribute__((tls_model("initial-exec")));

void *const shim_wrapper[SHIM_H_COUNT] = {
#define CU(s, p) [SHIM_H_##s] = (void *)&shim_w_##s,
#define NVML(s, p) [SHIM_H_##s] = (void *)&shim_w_##s,
#include "hooks.def"
#undef CU
#undef NVML
};

const char *const shim_hook_name[SHIM_H_COUNT] = {
#define CU(s, p) [SHIM_H_##s] = #s,
#define NVML(s, p) [SHIM_H_##s] = #s,
#include "hooks.def"
#undef CU
#undef NVML
};

static const bool hook_is_nvml[SHIM_H_COUNT] = {
#define CU(s, p) [SHIM_H_##s] = false,
#define NVML(s, p) [SHIM_H_##s] = true,
#include "hooks.def"
#undef CU
#undef NVML
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static enum shim_mode mode = SHIM_MODE_PASS;
static bool nvml_ok;

static void atfork_child(void)
{
        shim_table_atfork_child();
        shim_books_atfork_child();
        shim_gate_atfork_child();
}

static void *lib_open(const char *name)
{
        void *h = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
        if (!h)
                h = dlopen(name, RTLD_NOW);
        return h;
}

static void init_slice(void)
{
        const char *env = secure_getenv("GPUSLICE_CONFIG");
        const char *path = env && env[0] ? env : GS_SLICE_CONF_DEFAULT_PATH;
        struct gs_error *err = NULL;
        int r = gs_slice_conf_load(path, &shim_conf, &err);
        if (r == -ENOENT && !(env && env[0])) {
                mode = SHIM_MODE_PASS;
                return;
        }
        if (r == -ENOENT) {
                shim_log("slice config %s (GPUSLICE_CONFIG) does not exist: failing closed", path);
                mode = SHIM_MODE_FAILED;
                return;
        }
        if (r < 0) {
                shim_log("%s: failing closed (every CUDA call returns CUDA_ERROR_NOT_INITIALIZED)",
                         gs_error_msg(err));
                gs_error_free(err);
                mode = SHIM_MODE_FAILED;
                return;
        }
        r = shim_books_attach(&shim_conf);
        if (r < 0) {
                shim_log("slice %s: shared accounting in %s unusable (%s): failing closed",
                         shim_conf.slice, shim_conf.slice_dir, strerror(-r));
                mode = SHIM_MODE_FAILED;
                return;
        }
        shim_log("slice %s: gpu %s, memory_limit %llu, context_overhead %llu", shim_conf.slice,
                 shim_conf.gpu_uuid, (unsigned long long)shim_conf.memory_limit,
                 (unsigned long long)shim_conf.context_overhead);
        shim_gate_setup(&shim_conf);
        mode = SHIM_MODE_SLICE;
}

/* Set on the thread running init_once_fn: a hooked call made from inside
 * the initialisation (a driver constructor resolving its own symbols)
 * passes through instead of waiting on the once it is part of. */
static __thread bool initializing __attribute__((tls_model("initial-exec")));

static void init_once_fn(void)
{
        initializing = true;
        shim_log_open();
        shim_dlsym_resolve();
        void *h = lib_open("libcuda.so.1");
        if (!h) {
                shim_log("cannot load libcuda.so.1: %s", dlerror());
        } else {
                for (int i = 0; i < SHIM_H_COUNT; i++)
                        if (!hook_is_nvml[i])
                                shim_real[i] = REAL_DLSYM(h, shim_hook_name[i]);
                shim_x.cuDeviceGetUuid = REAL_DLSYM(h, "cuDeviceGetUuid");
                shim_x.cuMemPoolGetAttribute = REAL_DLSYM(h, "cuMemPoolGetAttribute");
                shim_x.cuDeviceGetMemPool = REAL_DLSYM(h, "cuDeviceGetMemPool");
                shim_x.cuCtxGetDevice = REAL_DLSYM(h, "cuCtxGetDevice");
        }
        init_slice();
        pthread_atfork(NULL, NULL, atfork_child);
        initializing = false;
}

enum shim_mode shim_init(void)
{
        if (initializing)
                return SHIM_MODE_PASS;
        int saved = errno;
        pthread_once(&init_once, init_once_fn);
        errno = saved;
        return mode;
}

static void nvml_once_fn(void)
{
        void *h = lib_open("libnvidia-ml.so.1");
        if (!h) {
                shim_log("cannot load libnvidia-ml.so.1: %s", dlerror());
                return;
        }
        for (int i = 0; i < SHIM_H_COUNT; i++)
                if (hook_is_nvml[i])
                        shim_real[i] = REAL_DLSYM(h, shim_hook_name[i]);
        shim_x.nvmlDeviceGetUUID = REAL_DLSYM(h, "nvmlDeviceGetUUID");
        nvml_ok = shim_x.nvmlDeviceGetUUID != NULL;
}

bool shim_nvml_init(void)
{
        shim_init();
        int saved = errno;
        pthread_once(&nvml_once, nvml_once_fn);
        errno = saved;
        return nvml_ok;
}

/* ---- cuGetProcAddress ---- */

/* Does hook name `h` belong to base name `base` (base, base_vN, base_ptsz,
 * base_ptds)? */
static bool same_base(const char *h, const char *base)
{
        size_t n = strlen(base);
        if (strncmp(h, base, n) != 0)
                return false;
        const char *rest = h + n;
        if (!*rest || !strcmp(rest, "_ptsz") || !strcmp(rest, "_ptds"))
                return true;
        if (rest[0] == '_' && rest[1] == 'v' && rest[2] >= '0' && rest[2] <= '9') {
                rest += 2;
                while (*rest >= '0' && *rest <= '9')
                        rest++;
                return !*rest || !strcmp(rest, "_ptsz") || !strcmp(rest, "_ptds");
        }
        return false;
}

void *shim_map_real(void *p, const char *symbol)
{
        if (!p)
                return p;
        for (int i = 0; i < SHIM_H_COUNT; i++)
                if (!hook_is_nvml[i] && shim_real[i] == p)
                        return shim_wrapper[i];
        if (!symbol)
                return p;
        /* Not a pointer we resolved: if the name is hooked in exactly one
         * variant, that is the one; otherwise we cannot tell the ABI. */
        int match = -1, count = 0;
        for (int i = 0; i < SHIM_H_COUNT; i++) {
                if (!hook_is_nvml[i] && same_base(shim_hook_name[i], symbol)) {
                        match = i;
                        count++;
                }
        }
        if (count == 1 && shim_real[match]) {
                shim_log("cuGetProcAddress(%s): unknown driver pointer, mapped by name to %s", symbol,
                         shim_hook_name[match]);
                return shim_wrapper[match];
        }
        if (count > 1)
                shim_log("cuGetProcAddress(%s): driver returned a pointer the shim did not resolve; "
                         "passed through UNHOOKED", symbol);
        return p;
}

CUresult shim_w_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
        enum shim_mode m = shim_init();
        if (!REAL(cuGetProcAddress_v2))
                return CUDA_ERROR_NOT_FOUND;
        if (m == SHIM_MODE_FAILED)
                return SHIM_FAIL_CLOSED_CU;
        CUresult r = REAL(cuGetProcAddress_v2)(symbol, pfn, cudaVersion, flags, symbolStatus);
        if (m == SHIM_MODE_PASS)
                return r;
        if (r == CUDA_SUCCESS && pfn)
                *pfn = shim_map_real(*pfn, symbol);
        return r;
}

CUresult shim_w_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
        enum shim_mode m = shim_init();
        if (!REAL(cuGetProcAddress))
                return CUDA_ERROR_NOT_FOUND;
        if (m == SHIM_MODE_FAILED)
                return SHIM_FAIL_CLOSED_CU;
        CUresult r = REAL(cuGetProcAddress)(symbol, pfn, cudaVersion, flags);
        if (m == SHIM_MODE_PASS)
                return r;
        if (r == CUDA_SUCCESS && pfn)
                *pfn = shim_map_real(*pfn, symbol);
        return r;
}

CUresult shim_w_cuInit(unsigned int flags)
{
        SHIM_ENTER(cuInit, REAL(cuInit)(flags));
        return REAL(cuInit)(flags);
}
