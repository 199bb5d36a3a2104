/* Shim overhead against simgpu alone, in the same run: the program runs
 * itself twice, once plain and once with LD_PRELOAD=libgpuslice.so in a
 * slice, and prints the added cost of each operation with its target.
 *
 * usage: bench_shim /path/to/libgpuslice.so   (LD_LIBRARY_PATH must point at
 * simgpu, GS_KERNELS_PTX at the project kernels; see bench/run-shim.sh) */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define LIVE 10000

struct figures {
        double launch, pair0, pair10k, meminfo;
};

static struct {
        CUresult (*init)(unsigned);
        CUresult (*dev_get)(CUdevice *, int);
        CUresult (*retain)(CUcontext *, CUdevice);
        CUresult (*set_current)(CUcontext);
        CUresult (*alloc)(CUdeviceptr *, size_t);
        CUresult (*free)(CUdeviceptr);
        CUresult (*meminfo)(size_t *, size_t *);
        CUresult (*mod_load)(CUmodule *, const void *);
        CUresult (*get_fn)(CUfunction *, CUmodule, const char *);
        CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void **, void **);
        CUresult (*sync)(void);
        CUresult (*uuid)(CUuuid *, CUdevice);
} cu;

static void die(const char *what)
{
        fprintf(stderr, "bench_shim: %s\n", what);
        exit(1);
}

#define CHK(call)                                                             \
        do {                                                                  \
                if ((call) != CUDA_SUCCESS)                                   \
                        die(#call);                                           \
        } while (0)

static void load(void)
{
        void *h = dlopen("libcuda.so.1", RTLD_NOW);
        if (!h)
                die("cannot load libcuda.so.1 (set LD_LIBRARY_PATH to simgpu)");
#define SYM(f, n)                                                             \
        do {                                                                  \
                *(void **)&cu.f = dlsym(h, n);                                \
                if (!cu.f)                                                    \
                        die("missing " n);                                    \
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
}

static uint64_t now_ns(void)
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

/* Best of 5 runs of the per-operation average. */
static double pairs(unsigned n)
{
        double best = 1e18;
        for (int rep = 0; rep < 5; rep++) {
                uint64_t t = now_ns();
                for (unsigned i = 0; i < n; i++) {
                        CUdeviceptr p;
                        CHK(cu.alloc(&p, 4096));
                        CHK(cu.free(p));
                }
                double per = (double)(now_ns() - t) / n;
                best = per < best ? per : best;
        }
        return best;
}

static int child(void)
{
        load();
        CUdevice d;
        CUcontext c;
        CHK(cu.init(0));
        CHK(cu.dev_get(&d, 0));
        CHK(cu.retain(&c, d));
        CHK(cu.set_current(c));
        struct figures f;

        const char *ptx_path = getenv("GS_KERNELS_PTX");
        char *ptx = ptx_path ? read_file(ptx_path) : NULL;
        if (!ptx)
                die("GS_KERNELS_PTX unreadable");
        CUmodule m;
        CUfunction busy;
        CHK(cu.mod_load(&m, ptx));
        CHK(cu.get_fn(&busy, m, "gs_busy"));
        free(ptx);
        unsigned long long ns = 0;
        void *args[] = { &ns };
        f.launch = 1e18;
        for (int rep = 0; rep < 5; rep++) {
                uint64_t t = now_ns();
                for (int i = 0; i < 20000; i++) {
                        CHK(cu.launch(busy, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
                        if (i % 256 == 255)
                                CHK(cu.sync());
                }
                CHK(cu.sync());
                double per = (double)(now_ns() - t) / 20000;
                f.launch = per < f.launch ? per : f.launch;
        }

        f.pair0 = pairs(20000);
        CUdeviceptr *live = malloc(sizeof(*live) * LIVE);
        if (!live)
                die("out of memory");
        for (int i = 0; i < LIVE; i++)
                CHK(cu.alloc(&live[i], 4096));
        f.pair10k = pairs(20000);
        for (int i = 0; i < LIVE; i++)
                CHK(cu.free(live[i]));
        free(live);

        f.meminfo = 1e18;
        for (int rep = 0; rep < 5; rep++) {
                size_t fr, tot;
                uint64_t t = now_ns();
                for (int i = 0; i < 50000; i++)
                        CHK(cu.meminfo(&fr, &tot));
                double per = (double)(now_ns() - t) / 50000;
                f.meminfo = per < f.meminfo ? per : f.meminfo;
        }
        if (write(1, &f, sizeof(f)) != (ssize_t)sizeof(f))
                return 1;
        return 0;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
        (void)sb;
        (void)flag;
        (void)ftw;
        return remove(p);
}

static int run(const char *self, const char *preload, const char *conf, struct figures *out)
{
        int p[2];
        if (pipe(p) < 0)
                return -1;
        pid_t pid = fork();
        if (pid == 0) {
                dup2(p[1], 1);
                close(p[0]);
                setenv("BENCH_SHIM_CHILD", "1", 1);
                if (preload) {
                        setenv("LD_PRELOAD", preload, 1);
                        setenv("GPUSLICE_CONFIG", conf, 1);
                }
                execl(self, self, (char *)NULL);
                _exit(127);
        }
        close(p[1]);
        ssize_t n = read(p[0], out, sizeof(*out));
        close(p[0]);
        int st;
        waitpid(pid, &st, 0);
        return n == (ssize_t)sizeof(*out) && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void verdict(const char *name, double value, const char *unit, const char *target, int pass)
{
        printf("VERDICT %s: %.1f %s (target %s): %s\n", name, value, unit, target, pass ? "PASS" : "FAIL");
}

int main(int argc, char **argv)
{
        if (getenv("BENCH_SHIM_CHILD"))
                return child();
        if (argc < 2)
                die("usage: bench_shim /path/to/libgpuslice.so");
        char dir[] = "/tmp/gs-bench-shim-XXXXXX";
        if (!mkdtemp(dir))
                die("mkdtemp");
        char simdir[64], slicedir[64], conf[64];
        snprintf(simdir, sizeof(simdir), "%s/sim", dir);
        snprintf(slicedir, sizeof(slicedir), "%s/slice", dir);
        snprintf(conf, sizeof(conf), "%s/slice.conf", dir);
        mkdir(simdir, 0700);
        mkdir(slicedir, 0700);
        setenv("SIMGPU_DIR", simdir, 1);
        setenv("SIMGPU_MEMORY", "64Gi", 1);
        unsetenv("GPUSLICE_CONFIG");
        load();
        CUdevice d;
        CUuuid u;
        CHK(cu.init(0));
        CHK(cu.dev_get(&d, 0));
        CHK(cu.uuid(&u, d));
        const unsigned char *b = (const unsigned char *)u.bytes;
        FILE *f = fopen(conf, "we");
        if (!f)
                die("cannot write the config");
        fprintf(f,
                "version = 1\nslice = bench\ngpu_uuid = GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                "%02x%02x%02x%02x%02x%02x\nmemory_limit = %llu\ncompute_milli = 1000\n"
                "context_overhead = 268435456\nslice_dir = %s\n",
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15], 48 * GiB, slicedir);
        fclose(f);

        struct figures base, shim;
        if (run("/proc/self/exe", NULL, NULL, &base) < 0 || run("/proc/self/exe", argv[1], conf, &shim) < 0)
                die("a measurement run failed");
        nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);

        double dl = shim.launch - base.launch, d0 = shim.pair0 - base.pair0,
               d10 = shim.pair10k - base.pair10k, dm = shim.meminfo - base.meminfo;
        printf("shim overhead against simgpu alone (best of 5, ns per operation)\n");
        printf("  %-28s %10s %10s %10s %8s\n", "operation", "simgpu", "+shim", "added", "ratio");
        printf("  %-28s %10.1f %10.1f %10.1f %8.2f\n", "cuLaunchKernel", base.launch, shim.launch, dl,
               shim.launch / base.launch);
        printf("  %-28s %10.1f %10.1f %10.1f %8.2f\n", "alloc+free, 0 live", base.pair0, shim.pair0, d0,
               shim.pair0 / base.pair0);
        printf("  %-28s %10.1f %10.1f %10.1f %8.2f\n", "alloc+free, 10000 live", base.pair10k,
               shim.pair10k, d10, shim.pair10k / base.pair10k);
        printf("  %-28s %10.1f %10.1f %10.1f %8.2f\n", "cuMemGetInfo", base.meminfo, shim.meminfo, dm,
               shim.meminfo / base.meminfo);
        verdict("shim_launch_overhead", dl, "ns", "< 50 ns", dl < 50);
        verdict("shim_alloc_free_overhead", d0, "ns", "< 1000 ns", d0 < 1000);
        verdict("shim_alloc_free_overhead_10k_live", d10, "ns", "< 1000 ns", d10 < 1000);
        /* O(1): the added cost with 10,000 live allocations within 1.5x of
         * the empty case (a 100 ns floor keeps timer noise out). */
        double ref = d0 > 100 ? d0 : 100;
        verdict("shim_alloc_free_10k_vs_empty", d10 / ref, "x", "<= 1.5x", d10 <= 1.5 * ref);
        printf("VERDICT shim_meminfo_overhead: %.1f ns (reported, no target)\n", dm);
        return 0;
}
