/* SPDX-License-Identifier: Apache-2.0 */
/* Shared set-up of the shim benchmarks. See benchlib.h. */
#include "benchlib.h"

#include <dlfcn.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct bench_cu bench_cu;

static const char *bench_name = "bench";

void bench_init(const char *name)
{
        bench_name = name;
}

void bench_die(const char *what)
{
        fprintf(stderr, "%s: %s\n", bench_name, what);
        exit(1);
}

void bench_load(void)
{
        void *h = dlopen("libcuda.so.1", RTLD_NOW);
        if (!h)
                bench_die("cannot load libcuda.so.1 (set LD_LIBRARY_PATH to simgpu)");
#define SYM(f, n)                                                             \
        do {                                                                  \
                *(void **)&bench_cu.f = dlsym(h, n);                          \
                if (!bench_cu.f)                                              \
                        bench_die("missing " n);                              \
        } while (0)
        SYM(init, "cuInit");
        SYM(dev_get, "cuDeviceGet");
        SYM(retain, "cuDevicePrimaryCtxRetain");
        SYM(set_current, "cuCtxSetCurrent");
        SYM(alloc, "cuMemAlloc_v2");
        SYM(free, "cuMemFree_v2");
        SYM(meminfo, "cuMemGetInfo_v2");
        SYM(mod_load, "cuModuleLoadData");
        SYM(get_fn, "cuModuleGetFunction");
        SYM(launch, "cuLaunchKernel");
        SYM(sync, "cuCtxSynchronize");
        SYM(uuid, "cuDeviceGetUuid");
#undef SYM
}

uint64_t bench_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static char *read_file(const char *path)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        char *buf = malloc(1 << 20);
        size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
        fclose(f);
        if (buf)
                buf[n] = 0;
        return buf;
}

void bench_ctx_setup(void)
{
        CUdevice d;
        CUcontext c;
        BENCH_CHK(bench_cu.init(0));
        BENCH_CHK(bench_cu.dev_get(&d, 0));
        BENCH_CHK(bench_cu.retain(&c, d));
        BENCH_CHK(bench_cu.set_current(c));
}

CUfunction bench_busy_kernel(void)
{
        const char *ptx_path = getenv("GS_KERNELS_PTX");
        char *ptx = ptx_path ? read_file(ptx_path) : NULL;
        if (!ptx)
                bench_die("GS_KERNELS_PTX unreadable");
        CUmodule m;
        CUfunction busy;
        BENCH_CHK(bench_cu.mod_load(&m, ptx));
        BENCH_CHK(bench_cu.get_fn(&busy, m, "gs_busy"));
        free(ptx);
        return busy;
}

void bench_sim_setup(char *tmpl, char *uuid, size_t size)
{
        if (!mkdtemp(tmpl))
                bench_die("mkdtemp");
        char simdir[64];
        snprintf(simdir, sizeof(simdir), "%s/sim", tmpl);
        mkdir(simdir, 0700);
        setenv("SIMGPU_DIR", simdir, 1);
        setenv("SIMGPU_MEMORY", "64Gi", 1);
        unsetenv("GPUSLICE_CONFIG");
        bench_load();
        CUdevice d;
        CUuuid u;
        BENCH_CHK(bench_cu.init(0));
        BENCH_CHK(bench_cu.dev_get(&d, 0));
        BENCH_CHK(bench_cu.uuid(&u, d));
        const unsigned char *b = (const unsigned char *)u.bytes;
        snprintf(uuid, size,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

int bench_run_child(const char *child_env, const char *preload, const char *conf, void *out,
                    size_t size)
{
        int p[2];
        if (pipe(p) < 0)
                return -1;
        pid_t pid = fork();
        if (pid == 0) {
                dup2(p[1], 1);
                close(p[0]);
                setenv(child_env, "1", 1);
                if (preload) {
                        setenv("LD_PRELOAD", preload, 1);
                        setenv("GPUSLICE_CONFIG", conf, 1);
                }
                execl("/proc/self/exe", bench_name, (char *)NULL);
                _exit(127);
        }
        close(p[1]);
        ssize_t n = read(p[0], out, size);
        close(p[0]);
        int st;
        waitpid(pid, &st, 0);
        return n == (ssize_t)size && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
        (void)sb;
        (void)flag;
        (void)ftw;
        return remove(p);
}

void bench_rm_tree(const char *dir)
{
        nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}
