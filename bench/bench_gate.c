/* The launch gate's cost on simgpu, in the same run: the program runs
 * itself three times, (1) plain, (2) with LD_PRELOAD=libgpuslice.so in a
 * whole-GPU slice (compute_milli 1000: gate off, the shim's memory-only
 * path) and (3) in a 900m slice (gate on, local enforcement), and prints:
 *
 *   - added ns per launch through the gate while the slice holds a lease:
 *     best batch of 256 launches of a 0 ns kernel in (3) minus (2)
 *     (batches that waited for a lease are not the fast path and lose the
 *     "best of"); target < 50 ns;
 *   - throughput with limits off: 10 us kernels completed per second in
 *     (2) over (1); target >= 0.99;
 *   - and, reported: the shim's memory-only launch cost over simgpu alone,
 *     the host-bound launch-rate ratio (2)/(1).
 *
 * usage: bench_gate /path/to/libgpuslice.so   (LD_LIBRARY_PATH must point at
 * simgpu, GS_KERNELS_PTX at the project kernels; see bench/run-gate.sh) */
#include <cuda.h>
#include <dlfcn.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCH 128
#define BATCHES 1500
#define TPUT_NS (1500ull * 1000 * 1000)
#define TPUT_KERNEL_NS 10000ull

struct figures {
        double launch_ns;      /* best batch average, ns per launch */
        double kernels_per_s;  /* 10 us kernels completed per second */
};

static struct {
        CUresult (*init)(unsigned);
        CUresult (*dev_get)(CUdevice *, int);
        CUresult (*retain)(CUcontext *, CUdevice);
        CUresult (*set_current)(CUcontext);
        CUresult (*mod_load)(CUmodule *, const void *);
        CUresult (*get_fn)(CUfunction *, CUmodule, const char *);
        CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void **, void **);
        CUresult (*sync)(void);
        CUresult (*uuid)(CUuuid *, CUdevice);
} cu;

static void die(const char *what)
{
        fprintf(stderr, "bench_gate: %s\n", what);
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
        SYM(mod_load, "cuModuleLoadData");
        SYM(get_fn, "cuModuleGetFunction");
        SYM(launch, "cuLaunchKernel");
        SYM(sync, "cuCtxSynchronize");
        SYM(uuid, "cuDeviceGetUuid");
#undef SYM
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

static int child(void)
{
        load();
        CUdevice d;
        CUcontext c;
        CHK(cu.init(0));
        CHK(cu.dev_get(&d, 0));
        CHK(cu.retain(&c, d));
        CHK(cu.set_current(c));
        const char *ptx_path = getenv("GS_KERNELS_PTX");
        char *ptx = ptx_path ? read_file(ptx_path) : NULL;
        if (!ptx)
                die("GS_KERNELS_PTX unreadable");
        CUmodule m;
        CUfunction busy;
        CHK(cu.mod_load(&m, ptx));
        CHK(cu.get_fn(&busy, m, "gs_busy"));
        free(ptx);
        struct figures f = { .launch_ns = 1e18 };

        unsigned long long ns = 0;
        void *args[] = { &ns };
        for (int b = 0; b < BATCHES; b++) {
                uint64_t t = now_ns();
                for (int i = 0; i < BATCH; i++)
                        CHK(cu.launch(busy, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
                double per = (double)(now_ns() - t) / BATCH;
                f.launch_ns = per < f.launch_ns ? per : f.launch_ns;
                CHK(cu.sync());
        }

        ns = TPUT_KERNEL_NS;
        uint64_t t0 = now_ns(), n = 0;
        while (now_ns() - t0 < TPUT_NS) {
                CHK(cu.launch(busy, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
                n++;
        }
        CHK(cu.sync());
        f.kernels_per_s = (double)n * 1e9 / (double)(now_ns() - t0);
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

static int run(const char *preload, const char *conf, struct figures *out)
{
        int p[2];
        if (pipe(p) < 0)
                return -1;
        pid_t pid = fork();
        if (pid == 0) {
                dup2(p[1], 1);
                close(p[0]);
                setenv("BENCH_GATE_CHILD", "1", 1);
                if (preload) {
                        setenv("LD_PRELOAD", preload, 1);
                        setenv("GPUSLICE_CONFIG", conf, 1);
                }
                execl("/proc/self/exe", "bench_gate", (char *)NULL);
                _exit(127);
        }
        close(p[1]);
        ssize_t n = read(p[0], out, sizeof(*out));
        close(p[0]);
        int st;
        waitpid(pid, &st, 0);
        return n == (ssize_t)sizeof(*out) && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void write_conf(const char *path, const char *uuid, unsigned milli, const char *slicedir)
{
        mkdir(slicedir, 0700);
        FILE *f = fopen(path, "we");
        if (!f)
                die("cannot write a config");
        fprintf(f,
                "version = 1\nslice = bench\ngpu_uuid = %s\nmemory_limit = %llu\ncompute_milli = %u\n"
                "policy = cap\nslice_dir = %s\n",
                uuid, 32ull << 30, milli, slicedir);
        fclose(f);
}

static void verdict(const char *name, double value, const char *unit, const char *target, int pass)
{
        printf("VERDICT %s: %.3g %s (target %s): %s\n", name, value, unit, target, pass ? "PASS" : "FAIL");
}

int main(int argc, char **argv)
{
        if (getenv("BENCH_GATE_CHILD"))
                return child();
        if (argc < 2)
                die("usage: bench_gate /path/to/libgpuslice.so");
        char dir[] = "/tmp/gs-bench-gate-XXXXXX";
        if (!mkdtemp(dir))
                die("mkdtemp");
        char simdir[64], off_dir[64], on_dir[64], off_conf[64], on_conf[64];
        snprintf(simdir, sizeof(simdir), "%s/sim", dir);
        snprintf(off_dir, sizeof(off_dir), "%s/off", dir);
        snprintf(on_dir, sizeof(on_dir), "%s/on", dir);
        snprintf(off_conf, sizeof(off_conf), "%s/off.conf", dir);
        snprintf(on_conf, sizeof(on_conf), "%s/on.conf", dir);
        mkdir(simdir, 0700);
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
        char uuid[64];
        snprintf(uuid, sizeof(uuid),
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        write_conf(off_conf, uuid, 1000, off_dir);
        write_conf(on_conf, uuid, 900, on_dir);

        struct figures plain, off, on;
        if (run(NULL, NULL, &plain) < 0 || run(argv[1], off_conf, &off) < 0 ||
            run(argv[1], on_conf, &on) < 0)
                die("a measurement run failed");
        nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);

        double gate = on.launch_ns - off.launch_ns, mem = off.launch_ns - plain.launch_ns;
        double tput = off.kernels_per_s / plain.kernels_per_s;
        double rate = plain.launch_ns / off.launch_ns;
        printf("launch gate on simgpu (best batch of %d launches of a 0 ns kernel, ns per launch)\n", BATCH);
        printf("  %-40s %10.1f\n", "simgpu alone", plain.launch_ns);
        printf("  %-40s %10.1f\n", "+shim, compute_milli 1000 (gate off)", off.launch_ns);
        printf("  %-40s %10.1f\n", "+shim, 900m cap, holding a lease", on.launch_ns);
        printf("throughput, %llu us kernels for %.1f s (kernels per second)\n", TPUT_KERNEL_NS / 1000,
               (double)TPUT_NS / 1e9);
        printf("  %-40s %10.0f\n", "simgpu alone", plain.kernels_per_s);
        printf("  %-40s %10.0f\n", "+shim, gate off", off.kernels_per_s);
        printf("  %-40s %10.0f\n", "+shim, 900m cap (for reference)", on.kernels_per_s);
        verdict("gate_launch_overhead", gate, "ns", "< 50 ns", gate < 50);
        verdict("gate_off_throughput_ratio", tput, "x", ">= 0.99", tput >= 0.99);
        printf("VERDICT gate_off_launch_added: %.1f ns (reported, no target)\n", mem);
        printf("VERDICT gate_off_launch_rate_ratio: %.3f x (reported, no target)\n", rate);
        return 0;
}
