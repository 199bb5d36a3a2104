/* SPDX-License-Identifier: Apache-2.0 */
/* The launch gate on simgpu, judged by simgpu's ground truth (busy_ns per
 * process from `simgpu-smi --json`, read by the unpreloaded parent), never
 * by the shim's own accounting. One ctest per scenario:
 * `shim_gate_test SCENARIO`.
 *
 * The parent (no preload) makes a private simgpu and slice directories,
 * writes slice configs without daemon_socket (local enforcement: no daemon
 * at all), starts WORKERS (this program again, with LD_PRELOAD and a
 * config) that saturate the GPU, waits until they are warm, measures each
 * worker's device time over a window of simulated time, then tells them to
 * stop (a line on their stdin) and requires a clean exit.
 *
 * Tolerances are coarse (a loaded 2-core machine): share +- 5 points. */
#include <dlfcn.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <gpuslice/arbiter_proto.h>

#include "cudatest.h"
#include "gate_faked.h"

#define WINDOW_NS (2000ull * 1000 * 1000)
#define MAX_WORKERS 4

/* ---------------- worker side (preloaded) ---------------- */

static atomic_bool stop_flag;
static struct ct_kernels kern;
static unsigned long long kernel_ns = 500000;

static void *stdin_watch(void *arg)
{
        (void)arg;
        char c;
        while (read(0, &c, 1) < 0 && errno == EINTR)
                ;
        atomic_store(&stop_flag, true);
        return NULL;
}

typedef CUresult launch_fn(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void **, void **);

static CUresult launch_with(launch_fn *fn, CUstream s)
{
        unsigned long long ns = kernel_ns;
        void *args[] = { &ns };
        return fn(kern.busy, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

static void ready(void)
{
        printf("ready\n");
        fflush(stdout);
}

/* Saturates with `fn` until told to stop; says "ready" after warming up. */
static void saturate(launch_fn *fn, CUstream s, bool say_ready)
{
        uint64_t t0 = ct_now_ns();
        bool said = !say_ready;
        while (!atomic_load(&stop_flag)) {
                CT_CHECK(launch_with(fn, s));
                if (!said && ct_now_ns() - t0 > 300000000ull) {
                        ready();
                        said = true;
                }
        }
}

static void *thread_main(void *arg)
{
        CT_CHECK(cuCtxSetCurrent((CUcontext)arg));
        CUstream s;
        CT_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        saturate(cuLaunchKernel, s, false);
        CT_CHECK(cuStreamSynchronize(s));
        CT_CHECK(cuStreamDestroy(s));
        return NULL;
}

static void run_graphs(CUstream s)
{
        CUgraph g;
        CUgraphExec ge;
        CT_CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        for (int i = 0; i < 4; i++)
                CT_CHECK(ct_busy(&kern, s, kernel_ns / 4));
        CT_CHECK(cuStreamEndCapture(s, &g));
        CT_CHECK(cuGraphInstantiate(&ge, g, 0));
        uint64_t t0 = ct_now_ns();
        bool said = false;
        while (!atomic_load(&stop_flag)) {
                CT_CHECK(cuGraphLaunch(ge, s));
                if (!said && ct_now_ns() - t0 > 300000000ull) {
                        ready();
                        said = true;
                }
        }
        CT_CHECK(cuStreamSynchronize(s));
        CT_CHECK(cuGraphExecDestroy(ge));
        CT_CHECK(cuGraphDestroy(g));
}

/* Forks a child that sets up CUDA again and saturates until told to stop
 * (saying "ready" after warming up when `say_ready`); tells the parent
 * test the child's pid first. Returns the child's pid. */
static pid_t fork_saturating(bool say_ready)
{
        fflush(stdout);
        pid_t pid = fork();
        CT_ASSERT(pid >= 0, "fork");
        if (pid == 0) {
                pthread_t w2;
                CT_ASSERT(pthread_create(&w2, NULL, stdin_watch, NULL) == 0, "thread");
                pthread_detach(w2);
                CUdevice d2;
                CUcontext c2;
                ct_setup(&d2, &c2);
                ct_load_kernels(&kern);
                CUstream s2;
                CT_CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
                saturate(cuLaunchKernel, s2, say_ready);
                CT_CHECK(cuStreamSynchronize(s2));
                _exit(0);
        }
        printf("child %d\n", (int)pid);
        fflush(stdout);
        return pid;
}

static void wait_forked(pid_t pid)
{
        int st;
        CT_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "the forked child failed");
}

static int worker(const char *role)
{
        const char *k = getenv("GATETEST_KERNEL_NS");
        if (k)
                kernel_ns = strtoull(k, NULL, 10);
        pthread_t w;
        CT_ASSERT(pthread_create(&w, NULL, stdin_watch, NULL) == 0, "thread");
        pthread_detach(w);
        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx);
        ct_load_kernels(&kern);
        CUstream s;
        CT_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        if (!strcmp(role, "kernel")) {
                saturate(cuLaunchKernel, s, true);
        } else if (!strcmp(role, "ptsz")) {
                /* The per-thread default stream variant, as a runtime built
                 * with --default-stream per-thread resolves it. */
                void *p = NULL;
                CUdriverProcAddressQueryResult q;
                CT_CHECK(cuGetProcAddress("cuLaunchKernel", &p, 12000,
                                          CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &q));
                CT_ASSERT(p, "no pointer");
                saturate((launch_fn *)p, NULL, true);
        } else if (!strcmp(role, "graph")) {
                run_graphs(s);
        } else if (!strcmp(role, "procaddr")) {
                void *p = NULL;
                CUdriverProcAddressQueryResult q;
                CT_CHECK(cuGetProcAddress("cuLaunchKernel", &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
                CT_ASSERT(p, "no pointer");
                saturate((launch_fn *)p, s, true);
        } else if (!strcmp(role, "dlsym")) {
                void *h = dlopen("libcuda.so.1", RTLD_NOW);
                CT_ASSERT(h, "dlopen libcuda.so.1");
                void *p = dlsym(h, "cuLaunchKernel");
                CT_ASSERT(p, "no cuLaunchKernel");
                saturate((launch_fn *)p, s, true);
        } else if (!strcmp(role, "threads")) {
                enum { N = 16 };
                pthread_t th[N];
                for (int i = 0; i < N; i++)
                        CT_ASSERT(pthread_create(&th[i], NULL, thread_main, ctx) == 0, "thread");
                struct timespec ts = { 0, 400000000 };
                nanosleep(&ts, NULL);
                ready();
                for (int i = 0; i < N; i++)
                        pthread_join(th[i], NULL);
        } else if (!strcmp(role, "fork")) {
                /* Warm the gate (its thread runs, a hold is open), then fork:
                 * the child starts over and shares the slice's share. */
                for (int i = 0; i < 20; i++)
                        CT_CHECK(launch_with(cuLaunchKernel, s));
                pid_t pid = fork_saturating(false);
                saturate(cuLaunchKernel, s, true);
                wait_forked(pid);
        } else if (!strcmp(role, "forkclean")) {
                /* Local enforcement fails here (the parent test made
                 * compute.local unusable), so launches go ungated. Then the
                 * file is removed and the process forks: the child must
                 * start with a clean gate, attach the local arbiter and be
                 * held to the share, while this process idles. */
                for (int i = 0; i < 20; i++)
                        CT_CHECK(launch_with(cuLaunchKernel, s));
                CT_CHECK(cuStreamSynchronize(s));
                const char *bad = getenv("GATETEST_BAD_FILE");
                CT_ASSERT(bad && unlink(bad) == 0, "cannot remove the unusable compute.local");
                pid_t pid = fork_saturating(true);
                while (!atomic_load(&stop_flag)) {
                        struct timespec ts = { 0, 10000000 };
                        nanosleep(&ts, NULL);
                }
                wait_forked(pid);
        } else {
                fprintf(stderr, "unknown role %s\n", role);
                return 2;
        }
        CT_CHECK(cuCtxSynchronize());
        return 0;
}

/* ---------------- parent side ---------------- */

static char dir[256];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
        (void)sb;
        (void)flag;
        (void)ftw;
        return remove(p);
}

struct slice {
        unsigned milli; /* 0: no config at all */
        char conf[320];
};

struct proc {
        pid_t pid;
        int in_fd, out_fd;
        pid_t extra; /* a second pid reported by the worker (fork role) */
        unsigned long long b0, b0x;
};

static void make_slice_ex(struct slice *sl, const char *name, unsigned milli, const char *uuid,
                          const char *policy, const char *sock)
{
        sl->milli = milli;
        if (!milli)
                return;
        char sdir[300];
        snprintf(sdir, sizeof(sdir), "%s/%s", dir, name);
        mkdir(sdir, 0700);
        snprintf(sl->conf, sizeof(sl->conf), "%s/%s.conf", dir, name);
        FILE *f = fopen(sl->conf, "we");
        CT_ASSERT(f, "cannot write %s", sl->conf);
        fprintf(f,
                "version = 1\nslice = %s\ngpu_uuid = %s\nmemory_limit = 2147483648\n"
                "compute_milli = %u\npolicy = %s\nslice_dir = %s\n",
                name, uuid, milli, policy, sdir);
        if (sock) {
                /* The lease page lives in a directory only the daemon may
                 * write (here: <dir>/<name>.page, 0755). */
                char pdir[320];
                snprintf(pdir, sizeof(pdir), "%s/%s.page", dir, name);
                mkdir(pdir, 0755);
                fprintf(f, "daemon_socket = %s\nlease_page = %s/compute\n", sock, pdir);
        }
        fclose(f);
}

static void make_slice(struct slice *sl, const char *name, unsigned milli, const char *uuid)
{
        make_slice_ex(sl, name, milli, uuid, "cap", NULL);
}

static void start(struct proc *p, const struct slice *sl, const char *role, const char *kns)
{
        int in[2], out[2];
        CT_ASSERT(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0, "pipe");
        pid_t pid = fork();
        CT_ASSERT(pid >= 0, "fork");
        if (pid == 0) {
                dup2(in[0], 0);
                dup2(out[1], 1);
                setenv("LD_PRELOAD", GS_SHIM_PATH, 1);
                if (sl->milli)
                        setenv("GPUSLICE_CONFIG", sl->conf, 1);
                else
                        unsetenv("GPUSLICE_CONFIG");
                char logp[400];
                snprintf(logp, sizeof(logp), "%s/shim.log", dir);
                setenv("GPUSLICE_LOG", logp, 1);
                setenv("GATETEST_ROLE", role, 1);
                if (kns)
                        setenv("GATETEST_KERNEL_NS", kns, 1);
#ifdef GS_SANITIZE
                setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 1);
#endif
                execl("/proc/self/exe", "shim_gate_test", role, (char *)NULL);
                _exit(127);
        }
        close(in[0]);
        close(out[1]);
        *p = (struct proc){ .pid = pid, .in_fd = in[1], .out_fd = out[0] };
}

/* Reads one line from a worker (15 s at most). */
static void read_line(struct proc *p, char *buf, size_t size)
{
        size_t n = 0;
        while (n + 1 < size) {
                struct pollfd pf = { .fd = p->out_fd, .events = POLLIN };
                CT_ASSERT(poll(&pf, 1, 15000) == 1, "worker %d said nothing for 15 s", (int)p->pid);
                char c;
                ssize_t r = read(p->out_fd, &c, 1);
                CT_ASSERT(r == 1, "worker %d exited early", (int)p->pid);
                if (c == '\n')
                        break;
                buf[n++] = c;
        }
        buf[n] = 0;
}

static void wait_ready(struct proc *p)
{
        char line[64];
        for (;;) {
                read_line(p, line, sizeof(line));
                if (!strncmp(line, "child ", 6)) {
                        p->extra = (pid_t)strtol(line + 6, NULL, 10);
                        continue;
                }
                CT_ASSERT(!strcmp(line, "ready"), "worker said '%s'", line);
                return;
        }
}

static unsigned long long busy_of(pid_t pid)
{
        struct ct_smi_proc sp;
        if (ct_smi_proc(pid, 0, &sp) < 0)
                return 0;
        return sp.busy_ns;
}

static unsigned long long sim_time(void)
{
        struct ct_smi_dev d;
        CT_ASSERT(ct_smi_dev(0, &d) == 0, "no device in simgpu-smi");
        return d.sim_time_ns;
}

/* Starts the workers, measures their share (percent of device time) over
 * the window, stops them and requires a clean exit. */
static void (*between)(void); /* runs after the workers are ready, before the window */

static void measure(struct proc *ps, unsigned n, double *pct, double *pct_extra)
{
        for (unsigned i = 0; i < n; i++)
                wait_ready(&ps[i]);
        if (between)
                between();
        for (unsigned i = 0; i < n; i++) {
                ps[i].b0 = busy_of(ps[i].pid);
                ps[i].b0x = ps[i].extra ? busy_of(ps[i].extra) : 0;
        }
        unsigned long long t0 = sim_time();
        uint64_t w0 = ct_now_ns();
        struct timespec ts = { (time_t)(WINDOW_NS / 1000000000ull), (long)(WINDOW_NS % 1000000000ull) };
        nanosleep(&ts, NULL);
        unsigned long long t1 = sim_time();
        double span = (double)(t1 - t0);
        if (span <= 0)
                span = (double)(ct_now_ns() - w0);
        for (unsigned i = 0; i < n; i++) {
                pct[i] = 100.0 * (double)(busy_of(ps[i].pid) - ps[i].b0) / span;
                if (pct_extra)
                        pct_extra[i] = ps[i].extra
                                               ? 100.0 * (double)(busy_of(ps[i].extra) - ps[i].b0x) / span
                                               : 0;
        }
        for (unsigned i = 0; i < n; i++) {
                CT_ASSERT(write(ps[i].in_fd, "x\n", 2) == 2, "stop");
                close(ps[i].in_fd);
        }
        for (unsigned i = 0; i < n; i++) {
                int st = 0;
                /* Bounded: a deadlocked worker is killed by the ctest timeout. */
                CT_ASSERT(waitpid(ps[i].pid, &st, 0) == ps[i].pid, "waitpid");
                CT_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d ended with status 0x%x",
                          (int)ps[i].pid, st);
                close(ps[i].out_fd);
        }
}

static void dump_log(void)
{
        char logp[400];
        snprintf(logp, sizeof(logp), "%s/shim.log", dir);
        char *s = ct_read_file(logp);
        if (s) {
                fprintf(stderr, "---- shim log ----\n%s", s);
                free(s);
        }
}

/* A 300m cap slice's lowest acceptable share of the device, in percent. The
 * bound that matters is the upper one (a cap is never exceeded: 35); below
 * the share is a slice that lost CPU time to launch in, which a loaded
 * machine (the suite with the other core busy, the sanitizer build) takes
 * from it: 22% was seen there. A gate that blocks gives ~0, an open one ~100. */
#define CAP_LO 18

static void expect_range(const char *what, double v, double lo, double hi)
{
        fprintf(stderr, "%s: %.1f%% of the device (expected %.0f..%.0f)\n", what, v, lo, hi);
        if (v < lo || v > hi) {
                dump_log();
                CT_ASSERT(false, "%s: %.1f%% outside %.0f..%.0f", what, v, lo, hi);
        }
}

/* daemon_gone: stop the daemon once the worker runs on its leases, then
 * give the shim time to notice (heartbeat stale after 1 s at most). */
static void settle_after_stop(void)
{
        faked_stop();
        struct timespec ts = { 1, 500000000 };
        nanosleep(&ts, NULL);
}

/* outage: the three stand-in daemons go away as `outage_how` says. */
static int outage_n;
static bool outage_freeze;

static void outage_begin(void)
{
        for (int i = 0; i < outage_n; i++) {
                if (outage_freeze)
                        faked_freeze_at(i);
                else
                        faked_stop_at(i);
        }
        /* The heartbeat is stale after 1 s; then a window or two. */
        struct timespec ts = { 1, 500000000 };
        nanosleep(&ts, NULL);
}

/* Makes <dir>/a/compute.local unusable in the way `how` names: a
 * directory, a file of the wrong size, or garbage of the right size (the
 * size a first process made it: that file is overwritten). */
static void break_local(const char *how)
{
        char bad[400];
        snprintf(bad, sizeof(bad), "%s/a/compute.local", dir);
        if (!strcmp(how, "dir")) {
                CT_ASSERT(mkdir(bad, 0700) == 0, "mkdir %s", bad);
                return;
        }
        struct stat sb;
        long size = !strcmp(how, "size") ? 5 : stat(bad, &sb) == 0 ? (long)sb.st_size : -1;
        CT_ASSERT(size > 0, "no compute.local to overwrite");
        FILE *f = fopen(bad, "we");
        CT_ASSERT(f, "cannot write %s", bad);
        for (long i = 0; i < size; i++)
                fputc(0x5a, f);
        CT_ASSERT(fclose(f) == 0, "close");
}

/* Runs one worker of slice sl until it is warm, then stops it. */
static void run_briefly(const struct slice *sl)
{
        struct proc p;
        start(&p, sl, "kernel", NULL);
        wait_ready(&p);
        CT_ASSERT(write(p.in_fd, "x\n", 2) == 2, "stop");
        close(p.in_fd);
        int st = 0;
        CT_ASSERT(waitpid(p.pid, &st, 0) == p.pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker");
        close(p.out_fd);
}

static void expect_log(const char *what)
{
        char logp[400];
        snprintf(logp, sizeof(logp), "%s/shim.log", dir);
        char *log = ct_read_file(logp);
        bool ok = log && strstr(log, what);
        if (!ok)
                dump_log();
        CT_ASSERT(ok, "the shim's log does not say '%s'", what);
        free(log);
}

static pid_t parent_pid;

/* Also on a failed assertion (exit): no directory left behind. */
static void cleanup(void)
{
        if (getpid() == parent_pid && dir[0])
                nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int parent(const char *scenario)
{
        snprintf(dir, sizeof(dir), "/tmp/gs-gatetest-XXXXXX");
        CT_ASSERT(mkdtemp(dir), "mkdtemp");
        parent_pid = getpid();
        atexit(cleanup);
        char simdir[300];
        snprintf(simdir, sizeof(simdir), "%s/sim", dir);
        mkdir(simdir, 0700);
        setenv("SIMGPU_DIR", simdir, 1);
        setenv("SIMGPU_MEMORY", "16Gi", 1);
        setenv("SIMGPU_CTX_OVERHEAD", "64Mi", 1);
        unsetenv("GPUSLICE_CONFIG");
        CT_CHECK(cuInit(0));
        CUdevice d;
        CT_CHECK(cuDeviceGet(&d, 0));
        CUuuid u;
        CT_CHECK(cuDeviceGetUuid(&u, d));
        const unsigned char *b = (const unsigned char *)u.bytes;
        char uuid[64];
        snprintf(uuid, sizeof(uuid),
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);

        struct slice a, c;
        struct proc ps[MAX_WORKERS];
        double pct[MAX_WORKERS], extra[MAX_WORKERS];
        int rc = 0;
        if (!strcmp(scenario, "lone")) {
                make_slice(&a, "a", 300, uuid);
                start(&ps[0], &a, "kernel", NULL);
                measure(ps, 1, pct, NULL);
                expect_range("300m alone (local, cap)", pct[0], CAP_LO, 35);
        } else if (!strcmp(scenario, "short")) {
                make_slice(&a, "a", 300, uuid);
                start(&ps[0], &a, "ptsz", getenv("GT_KNS") ? getenv("GT_KNS") : "50000");
                measure(ps, 1, pct, NULL);
                expect_range("300m alone, short kernels (GT_KNS, default 50 us), _ptsz", pct[0], CAP_LO, 35);
        } else if (!strcmp(scenario, "pair")) {
                make_slice(&a, "a", 300, uuid);
                make_slice(&c, "b", 600, uuid);
                start(&ps[0], &a, "kernel", NULL);
                start(&ps[1], &c, "kernel", NULL);
                measure(ps, 2, pct, NULL);
                expect_range("300m next to 600m", pct[0], 10, 35);
                expect_range("600m next to 300m", pct[1], 30, 65);
        } else if (!strcmp(scenario, "graph")) {
                make_slice(&a, "a", 300, uuid);
                start(&ps[0], &a, "graph", NULL);
                measure(ps, 1, pct, NULL);
                expect_range("300m with CUDA graphs", pct[0], CAP_LO, 35);
        } else if (!strcmp(scenario, "procaddr") || !strcmp(scenario, "dlsym")) {
                make_slice(&a, "a", 300, uuid);
                start(&ps[0], &a, scenario, NULL);
                measure(ps, 1, pct, NULL);
                expect_range(scenario, pct[0], CAP_LO, 35);
        } else if (!strcmp(scenario, "threads")) {
                make_slice(&a, "a", 300, uuid);
                start(&ps[0], &a, "threads", "200000");
                measure(ps, 1, pct, NULL);
                expect_range("300m, 16 threads launching at once", pct[0], CAP_LO, 35);
        } else if (!strcmp(scenario, "fork")) {
                make_slice(&a, "a", 300, uuid);
                start(&ps[0], &a, "fork", NULL);
                measure(ps, 1, pct, extra);
                fprintf(stderr, "parent %.1f%% + forked child %.1f%%\n", pct[0], extra[0]);
                CT_ASSERT(extra[0] > 1, "the forked child launched nothing");
                expect_range("300m shared by a process and its forked child", pct[0] + extra[0], CAP_LO, 35);
        } else if (!strcmp(scenario, "fork_local_failed")) {
                /* A process whose local enforcement failed (compute.local of
                 * another layout) forks after the file is gone: the child
                 * must not inherit "failed" (ungated, ~100%) but start a
                 * clean gate and be capped at its share. */
                make_slice(&a, "a", 300, uuid);
                char bad[400];
                snprintf(bad, sizeof(bad), "%s/a/compute.local", dir);
                FILE *f = fopen(bad, "we");
                CT_ASSERT(f && fputs("x", f) >= 0 && fclose(f) == 0, "cannot write %s", bad);
                setenv("GATETEST_BAD_FILE", bad, 1);
                start(&ps[0], &a, "forkclean", NULL);
                measure(ps, 1, pct, extra);
                char logp[400], failed[64];
                snprintf(logp, sizeof(logp), "%s/shim.log", dir);
                snprintf(failed, sizeof(failed), "gpuslice[%d]: compute: local enforcement unavailable",
                         (int)ps[0].pid);
                char *log = ct_read_file(logp);
                CT_ASSERT(log && strstr(log, failed), "the parent's local enforcement did not fail");
                free(log);
                fprintf(stderr, "parent %.1f%% + forked child %.1f%%\n", pct[0], extra[0]);
                expect_range("300m forked child of a process whose local enforcement failed", extra[0],
                             CAP_LO, 35);
        } else if (!strcmp(scenario, "daemon") || !strcmp(scenario, "daemon_gone")) {
                /* Leases from a daemon (the real arbiter behind a stand-in
                 * service): a lone `share` slice borrows the idle GPU; when
                 * the daemon goes away the shim falls back to its share as
                 * a cap, without a hang. */
                char sock[300], sdir[300];
                snprintf(sock, sizeof(sock), "%s/d.sock", dir);
                snprintf(sdir, sizeof(sdir), "%s/a.page", dir);
                make_slice_ex(&a, "a", 300, uuid, "share", sock);
                CT_ASSERT(faked_start(sdir, sock, "a", 300, GS_POLICY_SHARE) == 0, "fake daemon");
                bool gone = !strcmp(scenario, "daemon_gone");
                if (gone)
                        between = settle_after_stop;
                start(&ps[0], &a, "kernel", NULL);
                measure(ps, 1, pct, NULL);
                unsigned long dones = faked_dones(), wants = faked_wants();
                if (!gone)
                        faked_stop();
                fprintf(stderr, "daemon saw %lu WANT and %lu DONE frames\n", wants, dones);
                CT_ASSERT(wants > 0 && dones > 0, "the shim did not talk to the daemon");
                if (gone) {
                        expect_range("300m after its daemon went away (local cap)", pct[0], CAP_LO, 35);
                        char logp[400];
                        snprintf(logp, sizeof(logp), "%s/shim.log", dir);
                        char *log = ct_read_file(logp);
                        CT_ASSERT(log && strstr(log, "local enforcement"), "no fallback logged");
                        free(log);
                } else {
                        expect_range("300m share, alone, leases from the daemon", pct[0], 80, 110);
                }
        } else if (!strncmp(scenario, "badlocal_", 9)) {
                /* compute.local unusable and no daemon: compute fails
                 * closed. badlocal_{dir,size,garbage}: the daemon gave an
                 * outage window, then goes (killed; `dir`: stopped); and
                 * badlocal_nodaemon: no daemon ever (garbage file). */
                const char *how = scenario + 9;
                bool nod = !strcmp(how, "nodaemon");
                char sock[300], sdir[300];
                snprintf(sock, sizeof(sock), "%s/d.sock", dir);
                snprintf(sdir, sizeof(sdir), "%s/a.page", dir);
                make_slice_ex(&a, "a", 300, uuid, "cap", nod ? NULL : sock);
                if (nod || !strcmp(how, "garbage"))
                        run_briefly(&a); /* makes a good compute.local */
                break_local(nod ? "garbage" : how);
                if (!nod) {
                        CT_ASSERT(faked_start_at(0, sdir, sock, "a", 300, GS_POLICY_CAP,
                                                 GS_ARB_WINDOW_PACK(0, 300)) == 0,
                                  "fake daemon");
                        outage_n = 1;
                        outage_freeze = !strcmp(how, "dir");
                        between = outage_begin;
                }
                start(&ps[0], &a, "kernel", NULL);
                measure(ps, 1, pct, NULL);
                /* Fails open measured ~95%; the floor is only "not
                 * starved" (a loaded 2-core host loses windows). */
                expect_range("300m cap, compute.local unusable, no daemon", pct[0], 12, 35);
                expect_log("compute: local enforcement unavailable");
                expect_log(nod ? "paces its launches alone" : "outage window");
        } else if (!strcmp(scenario, "outage") || !strcmp(scenario, "outage_kill")) {
                /* Three busy slices lose their daemon (SIGSTOP-like: no
                 * answer, no heartbeat, connections open; or killed):
                 * each keeps at least 80% of its share (the benchmark's
                 * target, measured ~95%; asserted with room for a loaded
                 * 2-core host, which loses windows: 50%), and none gets
                 * more than its share (+ 5 points). */
                static const unsigned milli[3] = { 300, 300, 100 };
                static const char *const pol[3] = { "share", "cap", "share" };
                static const enum gs_compute_policy gp[3] = { GS_POLICY_SHARE, GS_POLICY_CAP,
                                                              GS_POLICY_SHARE };
                struct slice sl[3];
                unsigned off = 0;
                for (int i = 0; i < 3; i++) {
                        char name[8], sock[300], sdir[300];
                        snprintf(name, sizeof(name), "s%d", i);
                        snprintf(sock, sizeof(sock), "%s/d%d.sock", dir, i);
                        snprintf(sdir, sizeof(sdir), "%s/%s.page", dir, name);
                        make_slice_ex(&sl[i], name, milli[i], uuid, pol[i], sock);
                        CT_ASSERT(faked_start_at(i, sdir, sock, name, milli[i], gp[i],
                                                 GS_ARB_WINDOW_PACK(off, milli[i])) == 0,
                                  "fake daemon %d", i);
                        off += milli[i];
                }
                outage_n = 3;
                outage_freeze = !strcmp(scenario, "outage");
                between = outage_begin;
                for (int i = 0; i < 3; i++)
                        start(&ps[i], &sl[i], "kernel", NULL);
                measure(ps, 3, pct, NULL);
                fprintf(stderr, "outage: %.1f%% / %.1f%% / %.1f%% (300m share, 300m cap, 100m share)\n",
                        pct[0], pct[1], pct[2]);
                for (int i = 0; i < 3; i++) {
                        char what[96];
                        snprintf(what, sizeof(what), "%um %s during the outage", milli[i], pol[i]);
                        expect_range(what, pct[i], 0.5 * milli[i] / 10.0, milli[i] / 10.0 + 5);
                }
                expect_log("local enforcement in the outage window");
        } else if (!strcmp(scenario, "noconfig") || !strcmp(scenario, "whole")) {
                make_slice(&a, "a", !strcmp(scenario, "whole") ? 1000 : 0, uuid);
                start(&ps[0], &a, "kernel", NULL);
                measure(ps, 1, pct, NULL);
                expect_range(scenario, pct[0], 90, 110);
        } else {
                fprintf(stderr, "unknown scenario %s\n", scenario);
                rc = 2;
        }
        return rc;
}

int main(int argc, char **argv)
{
        const char *role = getenv("GATETEST_ROLE");
        if (role)
                return worker(role);
        if (argc < 2) {
                fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
                return 2;
        }
        return parent(argv[1]);
}
