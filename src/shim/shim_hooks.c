/* SPDX-License-Identifier: Apache-2.0 */
/* The hook machinery: tables generated from hooks.def, resolution of the
 * real driver (once, under pthread_once), the slice's start-up, fork
 * handling, and the cuGetProcAddress route. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "shim.h"
#include "shim_gate.h"
#include "slice_conf_io.h"

void *shim_real[SHIM_H_COUNT];
struct shim_extra shim_x;
struct gs_slice_conf shim_conf;
uid_t shim_conf_uid;
__thread int shim_depth __attribute__((tls_model("initial-exec")));

void *const shim_wrapper[SHIM_H_COUNT] = {
#define CU(s, p, v) [SHIM_H_##s] = (void *)&shim_w_##s,
#define NVML(s, p) [SHIM_H_##s] = (void *)&shim_w_##s,
#include "hooks.def"
#undef CU
#undef NVML
};

const char *const shim_hook_name[SHIM_H_COUNT] = {
#define CU(s, p, v) [SHIM_H_##s] = #s,
#define NVML(s, p) [SHIM_H_##s] = #s,
#include "hooks.def"
#undef CU
#undef NVML
};

/* hooks.def's `since`: the CUDA version that introduced each variant. */
static const int hook_since[SHIM_H_COUNT] = {
#define CU(s, p, v) [SHIM_H_##s] = v,
#define NVML(s, p) [SHIM_H_##s] = 0,
#include "hooks.def"
#undef CU
#undef NVML
};

static const bool hook_is_nvml[SHIM_H_COUNT] = {
#define CU(s, p, v) [SHIM_H_##s] = false,
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
        shim_mem_atfork_child();
        shim_ctx_atfork_child();
        shim_ipc_atfork_child();
        shim_limits_atfork_child();
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

/* The slice config's default path. In containers the device plugin mounts
 * the slice's config there read-only; when it exists it is authoritative and
 * GPUSLICE_CONFIG is ignored. Changed only when building the shim
 * (-DSHIM_CONF_DEFAULT_PATH=\"...\"). */
#ifndef SHIM_CONF_DEFAULT_PATH
#define SHIM_CONF_DEFAULT_PATH GS_SLICE_CONF_DEFAULT_PATH
#endif

/* Root's files seen from inside a user namespace that does not map root
 * (the kernel's default overflowuid). */
#define SHIM_OVERFLOW_UID 65534

static bool on_read_only_mount(int fd)
{
        struct statvfs vfs;
        return fstatvfs(fd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY);
}

/* Whether uid (of fd's file) is root, `owner`, or root seen from a user
 * namespace (the overflow uid) on a read-only mount. */
static bool uid_root_or(int fd, uid_t uid, uid_t owner)
{
        return uid == 0 || uid == owner || (uid == SHIM_OVERFLOW_UID && on_read_only_mount(fd));
}

/* Whether `uid` may own a config the slice obeys: root (a root daemon's),
 * this process's euid (hand-written configs, a user-mode daemon's: a
 * tenant can only limit itself with those, as by not preloading at all),
 * or root seen from a user namespace (the overflow uid), only on a
 * read-only mount. */
static bool conf_uid_ok(int fd, uid_t uid)
{
        return uid_root_or(fd, uid, geteuid());
}

bool shim_uid_trusted(int fd, uid_t uid)
{
        return uid_root_or(fd, uid, shim_conf_uid);
}

/* The directory holding the config must not let another user swap it: not
 * writable by group or others unless sticky, and owned by root or by the
 * config's owner. 0 or -EPERM with *err set. */
static int conf_dir_check(const char *path, uid_t owner, struct gs_error **err)
{
        char dir[GS_PATH_MAX];
        const char *slash = strrchr(path, '/');
        size_t n = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
        if (n >= sizeof(dir))
                return gs_error_set(err, -ENAMETOOLONG, "slice config %s: path too long", path);
        memcpy(dir, slash ? path : ".", n);
        dir[n] = '\0';
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat ds;
        int r = 0;
        if (dfd < 0 || fstat(dfd, &ds) < 0)
                r = gs_error_set(err, -errno, "slice config %s: cannot open its directory %s: %s",
                                 path, dir, strerror(errno));
        else if ((ds.st_mode & (S_IWGRP | S_IWOTH)) && !(ds.st_mode & S_ISVTX))
                r = gs_error_set(err, -EPERM,
                                 "slice config %s: its directory %s has mode %04o: others could "
                                 "replace the config",
                                 path, dir, (unsigned)(ds.st_mode & 07777));
        else if (!uid_root_or(dfd, ds.st_uid, owner))
                r = gs_error_set(err, -EPERM,
                                 "slice config %s: its directory %s is owned by uid %u, neither "
                                 "root nor the config's owner (uid %u): it could replace the config",
                                 path, dir, (unsigned)ds.st_uid, (unsigned)owner);
        if (dfd >= 0)
                close(dfd);
        return r;
}

/* Opens a slice config: a regular file that neither its group nor others may
 * write (anyone who can write it could raise the slice's limits), owned by
 * root or this process's user (conf_uid_ok), in a directory no other user
 * can swap it in. Sets shim_conf_uid to its owner. Returns the fd, -ENOENT
 * (or -ENOTDIR) when absent, or another -errno with *err set. */
static int conf_open(const char *path, struct gs_error **err)
{
        /* O_NONBLOCK: a FIFO named here must not hang the host in open(). */
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                int r = -errno;
                if (r == -ENOENT || r == -ENOTDIR)
                        return r;
                return gs_error_set(err, r, "slice config %s: cannot open: %s", path, strerror(-r));
        }
        struct stat sb;
        int r = 0;
        if (fstat(fd, &sb) < 0)
                r = gs_error_set(err, -errno, "slice config %s: cannot stat: %s", path,
                                 strerror(errno));
        else if (!S_ISREG(sb.st_mode))
                r = gs_error_set(err, -EINVAL, "slice config %s: not a regular file", path);
        else if (sb.st_mode & (S_IWGRP | S_IWOTH))
                r = gs_error_set(err, -EPERM,
                                 "slice config %s: mode %04o is group- or world-writable "
                                 "(anyone who can write it could raise the slice's limits; "
                                 "make it 0644 or stricter)",
                                 path, (unsigned)(sb.st_mode & 07777));
        else if (!conf_uid_ok(fd, sb.st_uid))
                r = gs_error_set(err, -EPERM,
                                 "slice config %s: owned by uid %u, expected root (a root "
                                 "daemon's config) or uid %u (yours): another user could have "
                                 "written it",
                                 path, (unsigned)sb.st_uid, (unsigned)geteuid());
        else
                r = conf_dir_check(path, sb.st_uid, err);
        if (r < 0) {
                close(fd);
                return r;
        }
        shim_conf_uid = sb.st_uid;
        return fd;
}

/* Reads and parses the config open on fd (closed here). 0 or -errno. */
static int conf_read(int fd, const char *path, struct gs_slice_conf *ret, struct gs_error **err)
{
        enum { CAP = GS_SLICE_CONF_MAX_BYTES + 1 };
        char *buf = malloc(CAP);
        int r = 0;
        size_t n = 0;
        if (!buf) {
                r = gs_error_set(err, -ENOMEM, "slice config %s: out of memory", path);
                goto out;
        }
        for (;;) {
                ssize_t got = read(fd, buf + n, CAP - n);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got < 0) {
                        r = gs_error_set(err, -errno, "slice config %s: read failed: %s", path,
                                         strerror(errno));
                        goto out;
                }
                if (got == 0)
                        break;
                n += (size_t)got;
                if (n == CAP) {
                        r = gs_error_set(err, -E2BIG, "slice config %s: more than %d bytes", path,
                                         GS_SLICE_CONF_MAX_BYTES);
                        goto out;
                }
        }
        r = gs_slice_conf_parse(buf, n, ret, err);
        if (r < 0)
                gs_error_wrap(err, "%s", path);
out:
        free(buf);
        close(fd);
        return r;
}

/* Picks and opens the slice's config: the default path when it exists (it
 * wins over GPUSLICE_CONFIG; one this process may not read counts as absent
 * only when neither GPUSLICE_CONFIG nor GPUSLICE_SLICE names a slice), else
 * GPUSLICE_CONFIG. Only when the default
 * path does not exist, GPUSLICE_TEST_DEFAULT_CONFIG stands in for it (tests
 * cannot create root-owned files; a process without the default file is not
 * held by any file it cannot write, so this raises nothing). Returns the fd,
 * -ENOENT when there is no config at all, or another -errno with *err set;
 * *ret_path is the path chosen. */
static int conf_choose(const char **ret_path, struct gs_error **err)
{
        const char *env = secure_getenv("GPUSLICE_CONFIG");
        if (env && !env[0])
                env = NULL;
        const char *def = SHIM_CONF_DEFAULT_PATH;
        *ret_path = def;
        int fd = conf_open(def, err);
        if (fd == -ENOENT || fd == -ENOTDIR) {
                const char *t = secure_getenv("GPUSLICE_TEST_DEFAULT_CONFIG");
                if (t && t[0]) {
                        def = t;
                        *ret_path = def;
                        fd = conf_open(def, err);
                }
        }
        if (fd == -EACCES && !env && !secure_getenv("GPUSLICE_SLICE")) {
                /* A default this process may not even look at (a node's
                 * 0700 state directory) is another user's business when
                 * nothing names a slice for this process: no config. */
                *err = gs_error_free(*err);
                return -ENOENT;
        }
        if (fd != -ENOENT && fd != -ENOTDIR) {
                /* The default exists (usable or not): it is authoritative. */
                if (env && strcmp(env, def) != 0)
                        shim_log("GPUSLICE_CONFIG=%s ignored: %s exists and is authoritative", env,
                                 def);
                return fd;
        }
        if (!env)
                return -ENOENT;
        *ret_path = env;
        fd = conf_open(env, err);
        if (fd == -ENOENT || fd == -ENOTDIR)
                return gs_error_set(err, -ENOENT, "slice config %s (GPUSLICE_CONFIG) does not exist",
                                    env);
        return fd;
}

/* A process that `gpuslice run` (or a pod) put in slice GPUSLICE_SLICE
 * obeys only that slice's config: a GPUSLICE_CONFIG naming another slice's
 * (other limits, other books) fails closed. 0 or -EPERM with *err set. */
static int conf_slice_check(const char *path, struct gs_error **err)
{
        const char *want = secure_getenv("GPUSLICE_SLICE");
        if (!want || !want[0] || !strcmp(want, shim_conf.slice))
                return 0;
        return gs_error_set(err, -EPERM,
                            "slice config %s is slice %s's, but this process is in slice %s "
                            "(GPUSLICE_SLICE)",
                            path, shim_conf.slice, want);
}

bool shim_maybe_slice(void)
{
        int saved = errno;
        const char *e = secure_getenv("GPUSLICE_CONFIG");
        const char *t = secure_getenv("GPUSLICE_TEST_DEFAULT_CONFIG");
        bool maybe = (e && e[0]) || (t && t[0]) || access(SHIM_CONF_DEFAULT_PATH, F_OK) == 0 ||
                     errno == EACCES;
        errno = saved;
        return maybe;
}

static void init_slice(void)
{
        const char *path = NULL;
        struct gs_error *err = NULL;
        int r = conf_choose(&path, &err);
        if (r == -ENOENT && !err) {
                mode = SHIM_MODE_PASS;
                return;
        }
        if (r >= 0)
                r = conf_read(r, path, &shim_conf, &err);
        if (r >= 0)
                r = conf_slice_check(path, &err);
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
        /* The slice's recorded limit bounds this process's config (reports
         * and admission alike). */
        shim_conf.memory_limit = shim_books_limit(shim_conf.memory_limit);
        shim_log("slice %s (%s): gpu %s, memory_limit %llu, context_overhead %llu", shim_conf.slice,
                 path, shim_conf.gpu_uuid, (unsigned long long)shim_conf.memory_limit,
                 (unsigned long long)shim_conf.context_overhead);
        shim_gate_setup(&shim_conf);
        mode = SHIM_MODE_SLICE;
}

/* Set on the thread running init_once_fn: a hooked call the driver makes
 * from inside the initialisation (a driver constructor resolving its own
 * symbols) passes through instead of waiting on the once it is part of;
 * any other (a signal handler) is refused (shim_nested_ok). */
__thread bool shim_initializing __attribute__((tls_model("initial-exec")));

/* The driver's mapping [drv_lo, drv_hi), known once libcuda is loaded. */
static uintptr_t drv_lo, drv_hi;

struct obj_find {
        uintptr_t addr, lo, hi;
        const char *name;
};

static int obj_find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
        (void)size;
        struct obj_find *f = data;
        uintptr_t lo = UINTPTR_MAX, hi = 0;
        for (unsigned i = 0; i < info->dlpi_phnum; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                if (ph->p_type != PT_LOAD)
                        continue;
                uintptr_t s = info->dlpi_addr + ph->p_vaddr;
                if (s < lo)
                        lo = s;
                if (s + ph->p_memsz > hi)
                        hi = s + ph->p_memsz;
        }
        if (f->addr < lo || f->addr >= hi)
                return 0;
        f->lo = lo;
        f->hi = hi;
        f->name = info->dlpi_name ? info->dlpi_name : "";
        return 1;
}

/* The mapping of the loaded object holding addr; false when none does. */
static bool obj_of(const void *addr, struct obj_find *ret)
{
        *ret = (struct obj_find){ .addr = (uintptr_t)addr };
        return dl_iterate_phdr(obj_find_cb, ret) == 1;
}

bool shim_nested_ok(const void *caller, const char *hook)
{
        uintptr_t a = (uintptr_t)caller;
        uintptr_t hi = __atomic_load_n(&drv_hi, __ATOMIC_ACQUIRE);
        if (hi) {
                if (a >= __atomic_load_n(&drv_lo, __ATOMIC_RELAXED) && a < hi)
                        return true;
        } else {
                /* Inside the initialisation, while the driver loads: by name. */
                struct obj_find f;
                if (obj_of(caller, &f)) {
                        const char *b = strrchr(f.name, '/');
                        if (!strcmp(b ? b + 1 : f.name, "libcuda.so.1"))
                                return true;
                }
        }
        shim_log("%s called on a thread already inside a hooked call (or the shim's start-up), "
                 "not by the driver (a signal handler): refused (CUDA_ERROR_NOT_PERMITTED)",
                 hook);
        return false;
}

/* Records the driver's mapping (the object holding a function resolved
 * from it). */
static void driver_range(void)
{
        struct obj_find f;
        for (int i = 0; i < SHIM_H_COUNT; i++) {
                if (!shim_real[i] || hook_is_nvml[i])
                        continue;
                if (obj_of(shim_real[i], &f)) {
                        __atomic_store_n(&drv_lo, f.lo, __ATOMIC_RELAXED);
                        __atomic_store_n(&drv_hi, f.hi, __ATOMIC_RELEASE);
                }
                return;
        }
}

static void init_once_fn(void)
{
        shim_initializing = true;
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
                shim_x.cuCtxGetCurrent = REAL_DLSYM(h, "cuCtxGetCurrent");
                shim_x.cuStreamGetCtx = REAL_DLSYM(h, "cuStreamGetCtx");
                shim_x.cuCtxPushCurrent = REAL_DLSYM(h, "cuCtxPushCurrent_v2");
                shim_x.cuCtxPopCurrent = REAL_DLSYM(h, "cuCtxPopCurrent_v2");
        }
        driver_range();
        init_slice();
        pthread_atfork(NULL, NULL, atfork_child);
        shim_initializing = false;
}

enum shim_mode shim_init(void)
{
        if (shim_initializing)
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

static bool is_per_thread(const char *h)
{
        size_t n = strlen(h);
        return n > 5 && (!strcmp(h + n - 5, "_ptsz") || !strcmp(h + n - 5, "_ptds"));
}

/* The hooked variant of base name `symbol` that cuGetProcAddress selects
 * for (cuda_version, per_thread): the highest `since` <= cuda_version among
 * the per-thread variants when asked for them and there is one, else among
 * the legacy-stream ones. -1 when no hooked variant qualifies; *ret_any
 * tells whether the base name is hooked at all. */
static int select_variant(const char *symbol, int cuda_version, bool per_thread, bool *ret_any)
{
        *ret_any = false;
        for (int pass = per_thread ? 0 : 1; pass < 2; pass++) {
                int best = -1;
                for (int i = 0; i < SHIM_H_COUNT; i++) {
                        if (hook_is_nvml[i] || !same_base(shim_hook_name[i], symbol))
                                continue;
                        *ret_any = true;
                        if (is_per_thread(shim_hook_name[i]) != (pass == 0))
                                continue;
                        if (hook_since[i] > cuda_version)
                                continue;
                        if (best < 0 || hook_since[i] > hook_since[best])
                                best = i;
                }
                if (best >= 0)
                        return best;
        }
        return -1;
}

void *shim_map_real(void *p, const char *symbol, int cuda_version, cuuint64_t flags,
                    bool *ret_refuse)
{
        *ret_refuse = false;
        if (!p)
                return p;
        for (int i = 0; i < SHIM_H_COUNT; i++)
                if (!hook_is_nvml[i] && shim_real[i] == p)
                        return shim_wrapper[i];
        if (!symbol)
                return p;
        /* Not a pointer we resolved (a driver whose cuGetProcAddress hands
         * out internal aliases). A hooked base name must not escape the
         * hooks: take the variant the headers select for this request and
         * hand out its wrapper. The wrapper calls the variant's exported
         * symbol as resolved by the shim (the same function by the API's
         * contract); when the driver exports no such symbol, the driver's
         * pointer is adopted as that variant's real function. */
        bool any = false;
        bool pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
        int i = select_variant(symbol, cuda_version, pt, &any);
        if (!any)
                return p;
        if (i < 0) {
                shim_log("cuGetProcAddress(%s, %d, %#llx): the driver answered with a variant the "
                         "shim does not hook: refused (CUDA_ERROR_NOT_FOUND)",
                         symbol, cuda_version, (unsigned long long)flags);
                *ret_refuse = true;
                return NULL;
        }
        void *expect = NULL;
        if (__atomic_compare_exchange_n(&shim_real[i], &expect, p, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
                shim_log("cuGetProcAddress(%s, %d): %s is not exported by the driver; its wrapper "
                         "calls the driver's pointer",
                         symbol, cuda_version, shim_hook_name[i]);
        else
                shim_log("cuGetProcAddress(%s, %d, %#llx): driver pointer the shim did not resolve; "
                         "handing out the wrapper of %s",
                         symbol, cuda_version, (unsigned long long)flags, shim_hook_name[i]);
        return shim_wrapper[i];
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
        bool refuse = false;
        if (r == CUDA_SUCCESS && pfn)
                *pfn = shim_map_real(*pfn, symbol, cudaVersion, flags, &refuse);
        if (refuse) {
                if (symbolStatus)
                        *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
                return CUDA_ERROR_NOT_FOUND;
        }
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
        bool refuse = false;
        if (r == CUDA_SUCCESS && pfn)
                *pfn = shim_map_real(*pfn, symbol, cudaVersion, flags, &refuse);
        return refuse ? CUDA_ERROR_NOT_FOUND : r;
}

CUresult shim_w_cuInit(unsigned int flags)
{
        SHIM_ENTER(cuInit, REAL(cuInit)(flags));
        return REAL(cuInit)(flags);
}

/* ---- the test hook ---- */

int shim_test_hold(const char *lock, int hold)
{
        pthread_mutex_t *m = NULL;
        if (!strcmp(lock, "table"))
                m = shim_table_test_mutex();
        else if (!strcmp(lock, "slot") || !strcmp(lock, "books"))
                m = shim_books_test_mutex(lock[0] == 'b');
        else if (!strcmp(lock, "pool") || !strcmp(lock, "vmm"))
                m = shim_mem_test_mutex(lock[0] == 'v');
        else if (!strcmp(lock, "prim"))
                m = shim_ctx_test_mutex();
        else if (!strcmp(lock, "ipc"))
                m = shim_ipc_test_mutex();
        else if (!strcmp(lock, "limits"))
                m = shim_limits_test_mutex();
        if (!m)
                return -ENOENT;
        if (!hold)
                return -pthread_mutex_unlock(m);
        int r = pthread_mutex_lock(m);
        if (r == EOWNERDEAD) {
                pthread_mutex_consistent(m);
                r = 0;
        }
        return -r;
}
