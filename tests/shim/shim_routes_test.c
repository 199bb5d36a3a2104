/* SPDX-License-Identifier: Apache-2.0 */
/* Routes around the shim (issue 13), one ctest per class:
 * `shim_routes_test SCENARIO`, preloaded over simgpu by shim_harness.c.
 * Each scenario goes around the hooks as a tenant would and is judged by
 * simgpu's ground truth (simgpu-smi), never by the shim's books:
 *
 *   dlvsym     dlvsym of a driver symbol, and of "dlsym" (the loader's own)
 *   deepbind   a library linked to libcuda loaded with RTLD_DEEPBIND
 *   dlmopen    libcuda.so.1 loaded into a new link-map namespace
 *   bypath     a second copy of libcuda.so.1 loaded by its path
 *   signal     a SIGALRM handler allocating while its thread is inside a
 *              hooked call (cuCtxDestroy waiting for a kernel)
 *   signal_launch  a SIGALRM handler launching a kernel while its thread
 *              is inside a hooked call, in a slice holding no lease (a
 *              10m cap): judged by simgpu's device time for the process
 *   fork       fork() while another thread holds each lock of the shim:
 *              the child's driver calls must finish
 *   crossgpu   cuMemCreate, default pools and created pools on a GPU the
 *              slice was not placed on (CUDA_VISIBLE_DEVICES unset)
 *   localconf  a process of slice `test` whose GPUSLICE_CONFIG names the
 *              config of another slice, with a bigger limit */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shim_harness.h"

#define CHUNK (64 * MiB)
#define ROOM ((ST_CAP - ST_CTX) / CHUNK) /* 15 */
#define TRIES 24                         /* 1.5 GiB: well past the cap */

/* 1% of the GPU, local enforcement. */
static const char conf_launch[] = "version = 1\nslice = test\ngpu_uuid = %UUID%\n"
                                  "memory_limit = 1073741824\ncompute_milli = 10\npolicy = cap\n"
                                  "context_overhead = 67108864\nslice_dir = %DIR%\n";

static const char conf_text[] = "version = 1\nslice = test\ngpu_uuid = %UUID%\n"
                                "memory_limit = 1073741824\ncompute_milli = 500\n"
                                "context_overhead = 67108864\nslice_dir = %DIR%\n";

typedef CUresult alloc_fn(CUdeviceptr *, size_t);

static CUdevice dev;
static CUcontext ctx;

/* The figure `key` ("used_bytes", "busy_ns") simgpu records for process
 * pid on device d (simgpu-smi --json, run without the preload). */
static uint64_t sim_proc_num(int pid, int d, const char *key)
{
        char *out = st_sim_json();
        char want[64], wdev[32], wkey[40];
        snprintf(want, sizeof(want), "\"pid\": %d,", pid);
        snprintf(wdev, sizeof(wdev), "\"device\": %d,", d);
        snprintf(wkey, sizeof(wkey), "\"%s\": ", key);
        uint64_t used = 0;
        for (char *line = out; line && *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                const char *u = strstr(line, wkey);
                if (strstr(line, want) && strstr(line, wdev) && u)
                        used += strtoull(u + strlen(wkey), NULL, 10);
                line = nl ? nl + 1 : NULL;
        }
        return used;
}

/* Bytes simgpu charges process pid on device d. */
static uint64_t sim_used_on(int pid, int d)
{
        return sim_proc_num(pid, d, "used_bytes");
}

static void check_cap(const char *how)
{
        uint64_t sim = st_sim_used(getpid());
        EXPECT(sim <= ST_CAP, "%s: simgpu charges this process %llu MiB > the 1024 MiB cap", how,
               (unsigned long long)(sim / MiB));
}

/* Allocates TRIES chunks through f; simgpu must never hold more than the
 * cap. Frees what it got through the ordinary route. */
static void fill_over(alloc_fn *f, const char *how)
{
        EXPECT(f, "%s: no function", how);
        CUdeviceptr p[TRIES];
        unsigned n = 0;
        while (n < TRIES && f(&p[n], CHUNK) == CUDA_SUCCESS)
                n++;
        check_cap(how);
        EXPECT(n <= ROOM, "%s: %u chunks of 64 MiB fitted, room for %u", how, n, (unsigned)ROOM);
        while (n)
                cuMemFree(p[--n]);
}

/* ---- loader routes ---- */

typedef void *dlsym_t(void *, const char *);

static int run_dlvsym(void)
{
        st_ctx_up(&dev, &ctx);
        void *h = dlopen("libcuda.so.1", RTLD_NOW);
        EXPECT(h, "dlopen libcuda.so.1: %s", dlerror());
        /* A driver without symbol versions answers any version (simgpu's,
         * built with a version script, answers none). */
        void *f = dlvsym(h, "cuMemAlloc_v2", "GLIBC_2.2.5");
        if (f)
                fill_over((alloc_fn *)f, "dlvsym(libcuda)");
        f = dlvsym(RTLD_DEFAULT, "cuMemAlloc_v2", "GLIBC_2.2.5");
        if (f)
                fill_over((alloc_fn *)f, "dlvsym(RTLD_DEFAULT)");
        dlsym_t *ld = (dlsym_t *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!ld)
                ld = (dlsym_t *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        EXPECT(ld, "dlvsym(RTLD_NEXT, dlsym)");
        fill_over((alloc_fn *)ld(h, "cuMemAlloc_v2"), "the dlsym that dlvsym gave");
        void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
        EXPECT(libc, "libc.so.6");
        ld = (dlsym_t *)dlsym(libc, "dlsym");
        EXPECT(ld, "dlsym(libc, dlsym)");
        fill_over((alloc_fn *)ld(h, "cuMemAlloc_v2"), "dlsym(libc, \"dlsym\")");
        /* unhooked names and versions still resolve */
        EXPECT(dlvsym(libc, "memcpy", "GLIBC_2.14") || dlvsym(libc, "memcpy", "GLIBC_2.2.5"),
               "dlvsym(libc, memcpy)");
        return 0;
}

static int run_deepbind(void)
{
        st_ctx_up(&dev, &ctx);
        void *h = dlopen(GS_DEEP_LIB, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
        EXPECT(h, "dlopen %s: %s", GS_DEEP_LIB, dlerror());
        unsigned (*fill)(unsigned, size_t) = (unsigned (*)(unsigned, size_t))dlsym(h, "deep_fill");
        EXPECT(fill, "deep_fill");
        unsigned n = fill(TRIES, CHUNK);
        check_cap("a deep-bound library");
        EXPECT(n <= ROOM, "a deep-bound library got %u chunks, room for %u", n, (unsigned)ROOM);
        return 0;
}

struct copy_api {
        __typeof__(&cuInit) init;
        __typeof__(&cuDeviceGet) device_get;
        __typeof__(&cuDevicePrimaryCtxRetain) retain;
        __typeof__(&cuCtxSetCurrent) set_current;
};

/* Uses the driver behind handle h as a tenant would: its own context on
 * device 0 (whatever it answers), then TRIES chunks with its cuMemAlloc_v2. */
static void use_copy(void *h, const char *how)
{
        struct copy_api a = {
                .init = (__typeof__(a.init))dlsym(h, "cuInit"),
                .device_get = (__typeof__(a.device_get))dlsym(h, "cuDeviceGet"),
                .retain = (__typeof__(a.retain))dlsym(h, "cuDevicePrimaryCtxRetain"),
                .set_current = (__typeof__(a.set_current))dlsym(h, "cuCtxSetCurrent"),
        };
        CUdevice d = 0;
        CUcontext c = NULL;
        if (a.init && a.init(0) == CUDA_SUCCESS && a.device_get && a.device_get(&d, 0) == CUDA_SUCCESS &&
            a.retain && a.retain(&c, d) == CUDA_SUCCESS && a.set_current)
                a.set_current(c);
        fill_over((alloc_fn *)dlsym(h, "cuMemAlloc_v2"), how);
}

static int run_dlmopen(void)
{
#ifdef GS_SANITIZE
        /* simgpu's libcuda needs the ASan runtime, which a new link map
         * would load a second time: ASan aborts the process. */
        return 77;
#endif
        st_ctx_up(&dev, &ctx);
        void *h = dlmopen(LM_ID_NEWLM, "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                const char *e = dlerror();
                EXPECT(e && strstr(e, "refused"), "dlmopen failed, not refused: %s", e ? e : "-");
                check_cap("dlmopen refused");
                return 0;
        }
        use_copy(h, "libcuda.so.1 in a new namespace");
        return 0;
}

/* Copies the loaded libcuda.so.1 to a private directory; its path in dst. */
static void copy_driver(char *dst, size_t size)
{
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        struct link_map *lm = NULL;
        EXPECT(h && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name[0], "libcuda path");
        char dir[256];
        snprintf(dir, sizeof(dir), "%s/copy", getenv("SHIMTEST_SLICE_DIR"));
        EXPECT(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
        snprintf(dst, size, "%s/libcuda.so.1", dir);
        int in = open(lm->l_name, O_RDONLY | O_CLOEXEC);
        int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
        struct stat sb;
        EXPECT(in >= 0 && out >= 0 && fstat(in, &sb) == 0, "copy %s: %s", lm->l_name, strerror(errno));
        for (off_t off = 0; off < sb.st_size;)
                EXPECT(sendfile(out, in, &off, (size_t)(sb.st_size - off)) > 0, "sendfile");
        close(in);
        close(out);
}

static int run_bypath(void)
{
        st_ctx_up(&dev, &ctx);
        char copy[512];
        copy_driver(copy, sizeof(copy));
        void *h = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
        EXPECT(h, "dlopen %s: %s", copy, dlerror());
        use_copy(h, "a copy of libcuda.so.1 loaded by path");
        return 0;
}

/* ---- signal handlers ---- */

static volatile sig_atomic_t sig_ran, sig_got;

static void on_alarm(int sig)
{
        (void)sig;
        int saved = errno;
        CUdeviceptr p;
        cuCtxSetCurrent(ctx);
        for (int i = 0; i < TRIES; i++)
                if (cuMemAlloc(&p, CHUNK) == CUDA_SUCCESS)
                        sig_got++;
        sig_ran = 1;
        errno = saved;
}

static int run_signal(void)
{
        st_ctx_up(&dev, &ctx);
        const char *ptx = getenv("GS_KERNELS_PTX");
        if (!ptx || access(ptx, R_OK) != 0)
                return 77;
        CUcontext c2;
        CU_OK(cuCtxCreate(&c2, NULL, 0, dev));
        CUmodule m;
        CUfunction busy;
        CU_OK(cuModuleLoad(&m, ptx));
        CU_OK(cuModuleGetFunction(&busy, m, "gs_busy"));
        unsigned long long ns = 2000000000ull;
        void *params[] = { &ns };
        CU_OK(cuLaunchKernel(busy, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
        struct sigaction sa = { .sa_handler = on_alarm };
        sigemptyset(&sa.sa_mask);
        EXPECT(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
        struct itimerval it = { .it_value = { .tv_usec = 200000 } };
        EXPECT(setitimer(ITIMER_REAL, &it, NULL) == 0, "setitimer");
        /* waits inside the driver for the kernel: the alarm comes then */
        CU_OK(cuCtxDestroy(c2));
        EXPECT(sig_ran, "the handler did not run while cuCtxDestroy waited");
        check_cap("a signal handler inside a hooked call");
        EXPECT((unsigned)sig_got <= ROOM, "the handler got %d chunks", (int)sig_got);
        return 0;
}

/* A launch from a signal handler: the handler interrupts cuCtxDestroy
 * (waiting inside the driver for a 2 s kernel in c2, so the thread is
 * inside a hooked call) and launches a 1 s kernel in the primary context.
 * Before, a 100 ms kernel in the primary context took the slice's next
 * lease; 500 ms later, when the alarm comes, the slice (10m, cap) holds no
 * lease: a plain thread's launch then waits in the gate (measured: about
 * 500 ms, until the local arbiter's next tick grants one). The shim
 * refuses the handler's launch, so simgpu has run 2.1 s of this process's
 * work when cuCtxDestroy returns. Passed through ungated, the 1 s kernel
 * runs beside the 2 s one (simgpu time-slices the two contexts) and delays
 * it: about 3.1 s by then. */
static CUfunction sig_busy;
static volatile sig_atomic_t sig_launch_rc = -1;

static void on_alarm_launch(int sig)
{
        (void)sig;
        int saved = errno;
        CUcontext cur = NULL;
        cuCtxGetCurrent(&cur);
        cuCtxSetCurrent(ctx);
        unsigned long long ns = 1000000000ull;
        void *params[] = { &ns };
        sig_launch_rc = cuLaunchKernel(sig_busy, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
        cuCtxSetCurrent(cur);
        sig_ran = 1;
        errno = saved;
}

static int run_signal_launch(void)
{
        st_ctx_up(&dev, &ctx);
        const char *ptx = getenv("GS_KERNELS_PTX");
        if (!ptx || access(ptx, R_OK) != 0)
                return 77;
        CUmodule m0, m;
        CU_OK(cuModuleLoad(&m0, ptx));
        CU_OK(cuModuleGetFunction(&sig_busy, m0, "gs_busy"));
        CUcontext c2;
        CU_OK(cuCtxCreate(&c2, NULL, 0, dev));
        CUfunction busy;
        CU_OK(cuModuleLoad(&m, ptx));
        CU_OK(cuModuleGetFunction(&busy, m, "gs_busy"));
        uint64_t b0 = sim_proc_num(getpid(), 0, "busy_ns");
        unsigned long long ns = 2000000000ull, ns_short = 100000000ull;
        void *params[] = { &ns }, *params_short[] = { &ns_short };
        CU_OK(cuLaunchKernel(busy, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
        usleep(300000);
        CU_OK(cuCtxSetCurrent(ctx));
        CU_OK(cuLaunchKernel(sig_busy, 1, 1, 1, 1, 1, 1, 0, NULL, params_short, NULL));
        CU_OK(cuCtxSetCurrent(c2));
        struct sigaction sa = { .sa_handler = on_alarm_launch };
        sigemptyset(&sa.sa_mask);
        EXPECT(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
        struct itimerval it = { .it_value = { .tv_usec = 500000 } };
        EXPECT(setitimer(ITIMER_REAL, &it, NULL) == 0, "setitimer");
        /* waits inside the driver for the kernel: the alarm comes then */
        CU_OK(cuCtxDestroy(c2));
        EXPECT(sig_ran, "the handler did not run while cuCtxDestroy waited");
        uint64_t b1 = sim_proc_num(getpid(), 0, "busy_ns");
        EXPECT(b1 - b0 < 2500000000ull,
               "a signal handler's launch ran ungated (answer %d): simgpu ran %llu ms of this "
               "process's work (2100 ms of kernels outside the handler), in a slice holding no "
               "lease",
               (int)sig_launch_rc, (unsigned long long)((b1 - b0) / 1000000));
        CU_OK(cuCtxSynchronize());
        return 0;
}

/* ---- fork while another thread holds each lock ---- */

typedef int hold_fn(const char *lock, int hold);

struct holder {
        hold_fn *hold;
        const char *lock;
        int fd; /* writes one byte once the lock is held */
};

static void *holder_main(void *arg)
{
        struct holder *h = arg;
        EXPECT(h->hold(h->lock, 1) == 0, "cannot hold lock %s", h->lock);
        char c = 1;
        EXPECT(write(h->fd, &c, 1) == 1, "write");
        struct timespec ts = { 0, 300000000 };
        nanosleep(&ts, NULL);
        h->hold(h->lock, 0);
        return NULL;
}

/* The child of fork: a driver user from scratch. Exit status 0 or the
 * step that failed. */
static int fork_child(void)
{
        CUdevice d;
        CUcontext c;
        CUdeviceptr p, q;
        if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&d, 0) != CUDA_SUCCESS)
                return 10;
        if (cuDevicePrimaryCtxRetain(&c, d) != CUDA_SUCCESS || cuCtxSetCurrent(c) != CUDA_SUCCESS)
                return 11;
        if (cuMemAlloc(&p, CHUNK) != CUDA_SUCCESS)
                return 12;
        if (cuMemAllocAsync(&q, CHUNK, NULL) != CUDA_SUCCESS || cuStreamSynchronize(NULL) != CUDA_SUCCESS)
                return 13;
        if (cuMemFreeAsync(q, NULL) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS)
                return 14;
        CUmemGenericAllocationHandle h;
        CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d } };
        if (cuMemCreate(&h, CHUNK, &prop, 0) != CUDA_SUCCESS || cuMemRelease(h) != CUDA_SUCCESS)
                return 16;
        /* ipc_mu and limits_mu: an unknown pointer's close fails, a limit
         * set to its default charges nothing */
        (void)cuIpcCloseMemHandle((CUdeviceptr)0x1000);
        if (cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 1u << 20) != CUDA_SUCCESS)
                return 17;
        if (cuDevicePrimaryCtxRelease(d) != CUDA_SUCCESS)
                return 15;
        return 0;
}

static int run_fork(void)
{
        setenv("GPUSLICE_TEST_HOOKS", "1", 1);
        st_ctx_up(&dev, &ctx);
        hold_fn *hold = (hold_fn *)dlsym(RTLD_DEFAULT, "gpuslice_test_hold");
        EXPECT(hold, "the shim's test hook gpuslice_test_hold");
        /* every lock on the paths below has had its first use */
        CUdeviceptr q;
        CU_OK(cuMemAllocAsync(&q, CHUNK, NULL));
        CU_OK(cuStreamSynchronize(NULL));
        CU_OK(cuMemFreeAsync(q, NULL));
        static const char *const locks[] = { "table", "slot", "books", "pool", "vmm", "prim",
                                             "ipc", "limits" };
        for (unsigned i = 0; i < sizeof(locks) / sizeof(locks[0]); i++) {
                int p[2];
                EXPECT(pipe(p) == 0, "pipe");
                struct holder h = { hold, locks[i], p[1] };
                pthread_t t;
                EXPECT(pthread_create(&t, NULL, holder_main, &h) == 0, "pthread_create");
                char c;
                EXPECT(read(p[0], &c, 1) == 1, "holder");
                pid_t pid = fork();
                EXPECT(pid >= 0, "fork");
                if (pid == 0)
                        _exit(fork_child());
                /* A generous bound, only to tell a hang from a slow machine. */
                int st = 0;
                pid_t w = 0;
                for (int k = 0; k < 1000 && (w = waitpid(pid, &st, WNOHANG)) == 0; k++) {
                        struct timespec ts = { 0, 20000000 };
                        nanosleep(&ts, NULL);
                }
                if (w == 0) {
                        kill(pid, SIGKILL);
                        waitpid(pid, &st, 0);
                }
                pthread_join(t, NULL);
                close(p[0]);
                close(p[1]);
                EXPECT(w == pid, "fork with lock %s held by another thread: the child hung", locks[i]);
                EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                       "fork with lock %s held: the child failed (status %#x)", locks[i], st);
        }
        return 0;
}

/* ---- another GPU ---- */

static int run_crossgpu(void)
{
        unsetenv("CUDA_VISIBLE_DEVICES");
        st_ctx_up(&dev, &ctx);
        int n = 0;
        CU_OK(cuDeviceGetCount(&n));
        EXPECT(n == 2, "simgpu shows %d GPUs", n);
        CUmemGenericAllocationHandle vh;
        CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1 } };
        CUresult r = cuMemCreate(&vh, CHUNK, &prop, 0);
        uint64_t on1 = sim_used_on(getpid(), 1);
        EXPECT(on1 == 0, "cuMemCreate on GPU 1 (%d): %llu MiB landed there", (int)r,
               (unsigned long long)(on1 / MiB));
        CUmemoryPool p1;
        CUdeviceptr d;
        if (cuDeviceGetDefaultMemPool(&p1, 1) == CUDA_SUCCESS &&
            cuMemAllocFromPoolAsync(&d, CHUNK, p1, NULL) == CUDA_SUCCESS)
                cuStreamSynchronize(NULL);
        on1 = sim_used_on(getpid(), 1);
        EXPECT(on1 == 0, "GPU 1's default pool: %llu MiB landed there", (unsigned long long)(on1 / MiB));
        CUmemPoolProps pp = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1 } };
        if (cuMemPoolCreate(&p1, &pp) == CUDA_SUCCESS &&
            cuMemAllocFromPoolAsync(&d, CHUNK, p1, NULL) == CUDA_SUCCESS)
                cuStreamSynchronize(NULL);
        on1 = sim_used_on(getpid(), 1);
        EXPECT(on1 == 0, "a pool made on GPU 1: %llu MiB landed there", (unsigned long long)(on1 / MiB));
        CUmemoryPool cur;
        if (cuDeviceGetMemPool(&cur, 1) == CUDA_SUCCESS &&
            cuMemAllocFromPoolAsync(&d, CHUNK, cur, NULL) == CUDA_SUCCESS)
                cuStreamSynchronize(NULL);
        on1 = sim_used_on(getpid(), 1);
        EXPECT(on1 == 0, "GPU 1's current pool: %llu MiB landed there", (unsigned long long)(on1 / MiB));
        /* the slice's own GPU still works */
        prop.location.id = 0;
        CU_OK(cuMemCreate(&vh, CHUNK, &prop, 0));
        CU_OK(cuMemRelease(vh));
        return 0;
}

/* ---- local mode: a config named by the environment ---- */

static int run_localconf(void)
{
        /* the same GPU as the config the harness wrote */
        char other[600];
        st_write_other_conf("other", "memory_limit = 8589934592\ncompute_milli = 1000\n", other,
                            sizeof(other));
        /* what `gpuslice run` gives a process of slice `test`, with
         * GPUSLICE_CONFIG pointed elsewhere */
        setenv("GPUSLICE_SLICE", "test", 1);
        setenv("GPUSLICE_CONFIG", other, 1);
        if (cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
            cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS && cuCtxSetCurrent(ctx) == CUDA_SUCCESS) {
                CUdeviceptr p;
                cuMemAlloc(&p, 2 * GiB);
        }
        check_cap("GPUSLICE_CONFIG of another slice");
        return 0;
}

int main(int argc, char **argv)
{
        static const struct {
                const char *name;
                int (*fn)(void);
        } scenarios[] = { { "dlvsym", run_dlvsym },   { "deepbind", run_deepbind },
                          { "dlmopen", run_dlmopen }, { "bypath", run_bypath },
                          { "signal", run_signal },   { "fork", run_fork },
                          { "signal_launch", run_signal_launch },
                          { "crossgpu", run_crossgpu }, { "localconf", run_localconf } };
        const char *role = getenv("SHIMTEST_ROLE");
        if (role) {
                for (unsigned i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
                        if (!strcmp(role, scenarios[i].name))
                                return scenarios[i].fn();
                fprintf(stderr, "unknown scenario %s\n", role);
                return 2;
        }
        if (argc < 2)
                return 2;
        struct st_setup s = { .config = conf_text };
        if (!strcmp(argv[1], "crossgpu"))
                s.sim_devices = 2;
        if (!strcmp(argv[1], "signal_launch"))
                s.config = conf_launch;
        if (!strcmp(argv[1], "localconf") && access("/run/gpuslice/slice.conf", F_OK) == 0)
                return 77; /* the default config would win */
        return st_run(argc, argv, &s);
}
