/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu's own CPU cost per call, so that shim measurements can subtract it:
 * cuLaunchKernel (gs_busy with 0 ns), cuMemAlloc+cuMemFree (2 MiB), and
 * cuMemGetInfo. libcuda.so.1 is dlopen'ed (LD_LIBRARY_PATH selects simgpu,
 * or a preloaded shim in front of it). Usage: bench_sim [iterations] */
#include <cuda.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef CUresult (*proc_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static proc_fn get_proc;

static void *sym(const char *name)
{
        void *fn = NULL;
        if (get_proc(name, &fn, 13000, 0, NULL) != CUDA_SUCCESS || !fn) {
                fprintf(stderr, "bench_sim: cannot resolve %s\n", name);
                exit(2);
        }
        return fn;
}

static double now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static char *slurp(const char *path)
{
        FILE *f = fopen(path, "rb");
        if (!f)
                return NULL;
        char *buf = calloc(1, 1 << 20);
        size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
        (void)n;
        fclose(f);
        return buf;
}

#define CK(x)                                                                   \
        do {                                                                    \
                CUresult r_ = (x);                                              \
                if (r_ != CUDA_SUCCESS) {                                       \
                        fprintf(stderr, "bench_sim: %s -> %d\n", #x, (int)r_);  \
                        exit(2);                                                \
                }                                                               \
        } while (0)

int main(int argc, char **argv)
{
        long iters = 200000;
        if (argc > 1) {
                char *end = NULL;
                errno = 0;
                iters = strtol(argv[1], &end, 10);
                if (errno || !end || *end || iters < 100 || iters > 100000000) {
                        fprintf(stderr, "usage: bench_sim [iterations 100..1e8]\n");
                        return 2;
                }
        }
        void *lib = dlopen("libcuda.so.1", RTLD_NOW);
        if (!lib) {
                fprintf(stderr, "bench_sim: %s\n", dlerror());
                return 2;
        }
        get_proc = (proc_fn)dlsym(lib, "cuGetProcAddress_v2");
        if (!get_proc) {
                fprintf(stderr, "bench_sim: no cuGetProcAddress_v2\n");
                return 2;
        }
        CUresult (*init)(unsigned) = sym("cuInit");
        CUresult (*dev_get)(CUdevice *, int) = sym("cuDeviceGet");
        CUresult (*retain)(CUcontext *, CUdevice) = sym("cuDevicePrimaryCtxRetain");
        CUresult (*set_cur)(CUcontext) = sym("cuCtxSetCurrent");
        CUresult (*load)(CUmodule *, const void *) = sym("cuModuleLoadData");
        CUresult (*get_fn)(CUfunction *, CUmodule, const char *) = sym("cuModuleGetFunction");
        CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void **, void **) = sym("cuLaunchKernel");
        CUresult (*sync)(void) = sym("cuCtxSynchronize");
        CUresult (*alloc)(CUdeviceptr *, size_t) = sym("cuMemAlloc");
        CUresult (*mfree)(CUdeviceptr) = sym("cuMemFree");
        CUresult (*info)(size_t *, size_t *) = sym("cuMemGetInfo");

        CUdevice dev;
        CUcontext ctx;
        CK(init(0));
        CK(dev_get(&dev, 0));
        CK(retain(&ctx, dev));
        CK(set_cur(ctx));
        const char *ptx_path = getenv("GS_KERNELS_PTX");
        char *ptx = ptx_path ? slurp(ptx_path) : NULL;
        if (!ptx) {
                fprintf(stderr, "bench_sim: set GS_KERNELS_PTX to the kernels' PTX\n");
                return 2;
        }
        CUmodule mod;
        CUfunction busy;
        CK(load(&mod, ptx));
        CK(get_fn(&busy, mod, "gs_busy"));
        free(ptx);

        unsigned long long ns = 0;
        void *args[] = { &ns };
        for (int i = 0; i < 1000; i++) /* warm-up */
                CK(launch(busy, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        CK(sync());
        double t0 = now_ns();
        for (long i = 0; i < iters; i++)
                CK(launch(busy, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        double t1 = now_ns();
        CK(sync());
        double launch_ns = (t1 - t0) / (double)iters;

        long aiters = iters / 10;
        CUdeviceptr p;
        t0 = now_ns();
        for (long i = 0; i < aiters; i++) {
                CK(alloc(&p, 2 << 20));
                CK(mfree(p));
        }
        t1 = now_ns();
        double alloc_ns = (t1 - t0) / (double)aiters;

        size_t f, t;
        t0 = now_ns();
        for (long i = 0; i < iters; i++)
                CK(info(&f, &t));
        t1 = now_ns();
        double info_ns = (t1 - t0) / (double)iters;

        printf("simgpu cuLaunchKernel (gs_busy 0 ns): %8.0f ns/call  (%ld calls)\n", launch_ns, iters);
        printf("simgpu cuMemAlloc+cuMemFree (2 MiB):  %8.0f ns/pair  (%ld pairs)\n", alloc_ns, aiters);
        printf("simgpu cuMemGetInfo:                  %8.0f ns/call  (%ld calls)\n", info_ns, iters);
        printf("VERDICT simgpu_launch_cost: %.0f ns (baseline to subtract; no target): INFO\n", launch_ns);
        printf("VERDICT simgpu_alloc_free_cost: %.0f ns (baseline to subtract; no target): INFO\n", alloc_ns);
        printf("VERDICT simgpu_meminfo_cost: %.0f ns (baseline to subtract; no target): INFO\n", info_ns);
        return 0;
}
