/* SPDX-License-Identifier: Apache-2.0 */
/* Shim scenarios on lifetimes: memory is charged for as long as the driver
 * holds it, judged by simgpu's ground truth (simgpu-smi), not the books.
 * Each fails when a charge is credited while the driver still holds the
 * memory (the slice then ends up above its cap) or kept after the driver
 * freed it (the slice can no longer allocate its cap). Dispatched by
 * shim_test.c. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shim_test.h"

/* Allocates CHUNKs with cuMemAlloc until refused (at most max); returns how
 * many fitted. The ones that fitted stay allocated in out. */
static unsigned alloc_until_refused(CUdeviceptr *out, unsigned max)
{
        unsigned n = 0;
        CUresult r = CUDA_SUCCESS;
        while (n < max && (r = cuMemAlloc(&out[n], CHUNK)) == CUDA_SUCCESS)
                n++;
        EXPECT(n == max || r == CUDA_ERROR_OUT_OF_MEMORY, "refusal is %d", (int)r);
        return n;
}

static void free_all(CUdeviceptr *p, unsigned n)
{
        while (n)
                CU_OK(cuMemFree(p[--n]));
}

/* The slice's ground truth: what simgpu charges this process and pid
 * (another process of the slice, or 0) together stays within the cap. */
static void check_truth_with(int pid, const char *when)
{
        uint64_t sim = st_sim_used(getpid()) + (pid ? st_sim_used(pid) : 0);
        EXPECT(sim <= ST_CAP, "%s: simgpu charges the slice %llu MiB, above its %llu MiB cap", when,
               (unsigned long long)(sim / MiB), (unsigned long long)(ST_CAP / MiB));
}

/* ---- VMM: mapped memory outlives its handle ---- */

static const CUmemAllocationProp vmm_prop = {
        .type = CU_MEM_ALLOCATION_TYPE_PINNED,
        .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
};

/* cuMemCreate + reserve + map + cuMemRelease: the documented idiom. */
static CUresult map_released(CUdeviceptr *ret_va)
{
        CUmemGenericAllocationHandle h;
        CUresult r = cuMemCreate(&h, CHUNK, &vmm_prop, 0);
        if (r != CUDA_SUCCESS)
                return r;
        CU_OK(cuMemAddressReserve(ret_va, CHUNK, 0, 0, 0));
        CU_OK(cuMemMap(*ret_va, CHUNK, 0, h, 0));
        CUmemAccessDesc acc = { .location = vmm_prop.location,
                                .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        CU_OK(cuMemSetAccess(*ret_va, CHUNK, &acc, 1));
        CU_OK(cuMemRelease(h)); /* still mapped: the driver keeps the memory */
        return CUDA_SUCCESS;
}

int run_vmm_lifetime(void)
{
        setup_ctx();
        CUdeviceptr va[32];
        unsigned n = 0;
        CUresult r;
        while (n < 32 && (r = map_released(&va[n])) == CUDA_SUCCESS) {
                n++;
                check_truth_with(0, "mapped, handle released");
        }
        EXPECT(n == ROOM && r == CUDA_ERROR_OUT_OF_MEMORY, "%u mapped-and-released fitted, then %d", n,
               (int)r);
        /* A second handle to mapped memory (cuMemRetainAllocationHandle)
         * keeps it past its last unmap, until that handle is released. */
        CUmemGenericAllocationHandle again;
        CU_OK(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)va[0]));
        for (unsigned i = 0; i < n; i++) {
                CU_OK(cuMemUnmap(va[i], CHUNK));
                CU_OK(cuMemAddressFree(va[i], CHUNK));
        }
        EXPECT(st_sim_used(getpid()) == ST_CTX + CHUNK, "simgpu keeps the retained chunk: %llu",
               (unsigned long long)st_sim_used(getpid()));
        CUdeviceptr p[32];
        n = alloc_until_refused(p, 32);
        check_truth_with(0, "retained handle, unmapped");
        EXPECT(n == ROOM - 1, "%u chunks fitted beside the retained one, expected %llu", n,
               (unsigned long long)ROOM - 1);
        free_all(p, n);
        CU_OK(cuMemRelease(again));
        EXPECT(st_sim_used(getpid()) == ST_CTX, "simgpu freed it: %llu",
               (unsigned long long)st_sim_used(getpid()));
        /* Everything unmapped and released: the whole cap is free again. */
        n = alloc_until_refused(p, 32);
        check_truth_with(0, "all unmapped");
        EXPECT(n == ROOM, "%u chunks fitted after the last unmap, expected %llu", n,
               (unsigned long long)ROOM);
        free_all(p, n);
        return 0;
}

/* ---- pools: a destroyed pool's outstanding blocks ---- */

static CUmemoryPool make_pool(cuuint64_t threshold)
{
        CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
        CUmemoryPool pool;
        CU_OK(cuMemPoolCreate(&pool, &props));
        CU_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
        return pool;
}

int run_pool_destroy(void)
{
        setup_ctx();
        CUstream s;
        CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CUmemoryPool pool = make_pool(0);
        CUdeviceptr blk[8];
        for (unsigned i = 0; i < 8; i++)
                CU_OK(cuMemAllocFromPoolAsync(&blk[i], CHUNK, pool, s));
        CU_OK(cuStreamSynchronize(s));
        /* The blocks outlive their pool: the driver frees them when freed. */
        CU_OK(cuMemPoolDestroy(pool));
        EXPECT(st_sim_used(getpid()) == ST_CTX + 8 * CHUNK, "simgpu keeps the blocks: %llu",
               (unsigned long long)st_sim_used(getpid()));
        CUdeviceptr p[32];
        unsigned n = alloc_until_refused(p, 32);
        check_truth_with(0, "pool destroyed, blocks outstanding");
        EXPECT(n == ROOM - 8, "%u chunks fitted beside 8 outstanding blocks", n);
        free_all(p, n);
        for (unsigned i = 0; i < 8; i++)
                CU_OK(cuMemFreeAsync(blk[i], s));
        CU_OK(cuStreamSynchronize(s));
        n = alloc_until_refused(p, 32);
        check_truth_with(0, "blocks freed");
        EXPECT(n == ROOM, "%u chunks fitted once the blocks were freed", n);
        free_all(p, n);
        CU_OK(cuStreamDestroy(s));
        return 0;
}

/* ---- pools: every pool's reserve is charged, however many ---- */

#define MANY_POOLS 70
#define POOL_KEEP (4 * MiB)

int run_pool_many(void)
{
        setup_ctx();
        CUstream s;
        CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        /* Each pool keeps what it reserved (release threshold: never). */
        static CUmemoryPool pools[MANY_POOLS];
        for (unsigned i = 0; i < MANY_POOLS; i++) {
                pools[i] = make_pool(UINT64_MAX);
                CUdeviceptr d;
                CUresult r = cuMemAllocFromPoolAsync(&d, POOL_KEEP, pools[i], s);
                EXPECT(r == CUDA_SUCCESS, "pool %u: %d", i, (int)r);
                CU_OK(cuMemFreeAsync(d, s));
                CU_OK(cuStreamSynchronize(s));
        }
        EXPECT(st_sim_used(getpid()) == ST_CTX + MANY_POOLS * POOL_KEEP, "simgpu: pools keep %llu",
               (unsigned long long)st_sim_used(getpid()));
        CUdeviceptr p[32];
        unsigned n = alloc_until_refused(p, 32);
        check_truth_with(0, "70 pools keeping their reserve");
        EXPECT(n == (ST_CAP - ST_CTX - MANY_POOLS * POOL_KEEP) / CHUNK, "%u chunks fitted", n);
        free_all(p, n);
        for (unsigned i = 0; i < MANY_POOLS; i++)
                CU_OK(cuMemPoolDestroy(pools[i]));
        n = alloc_until_refused(p, 32);
        EXPECT(n == ROOM, "%u chunks fitted once the pools were destroyed", n);
        free_all(p, n);
        return 0;
}

/* ---- pools: an allocation on a thread with no current context ---- */

static CUstream noctx_stream;

static void *noctx_thread(void *arg)
{
        (void)arg;
        CUcontext cur = NULL;
        CU_OK(cuCtxGetCurrent(&cur));
        EXPECT(cur == NULL, "the thread has no current context");
        CUdeviceptr d;
        CU_OK(cuMemAllocAsync(&d, 4 * CHUNK, noctx_stream));
        CU_OK(cuMemFreeAsync(d, noctx_stream));
        CU_OK(cuStreamSynchronize(noctx_stream));
        return NULL;
}

int run_pool_noctx(void)
{
        setup_ctx();
        CU_OK(cuStreamCreate(&noctx_stream, CU_STREAM_NON_BLOCKING));
        CUmemoryPool pool;
        CU_OK(cuDeviceGetDefaultMemPool(&pool, dev));
        cuuint64_t never = UINT64_MAX;
        CU_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &never));
        pthread_t t;
        pthread_create(&t, NULL, noctx_thread, NULL);
        pthread_join(t, NULL);
        EXPECT(st_sim_used(getpid()) == ST_CTX + 4 * CHUNK, "simgpu: the pool keeps %llu",
               (unsigned long long)st_sim_used(getpid()));
        CUdeviceptr p[32];
        unsigned n = alloc_until_refused(p, 32);
        check_truth_with(0, "default pool filled from a thread without a context");
        EXPECT(n == ROOM - 4, "%u chunks fitted beside the pool's 4", n);
        free_all(p, n);
        return 0;
}

/* ---- contexts destroyed with live allocations ---- */

int run_ctx_lost(void)
{
        CU_OK(cuInit(0));
        CU_OK(cuDeviceGet(&dev, 0));
        CUcontext c;
        CU_OK(cuCtxCreate(&c, NULL, 0, dev));
        CUdeviceptr p[32];
        EXPECT(alloc_until_refused(p, 8) == 8, "8 chunks in a created context");
        CU_OK(cuCtxDestroy(c)); /* frees them */
        EXPECT(st_sim_used(getpid()) == 0, "simgpu freed the context's memory: %llu",
               (unsigned long long)st_sim_used(getpid()));
        setup_ctx();
        unsigned n = alloc_until_refused(p, 32);
        EXPECT(n == ROOM, "after cuCtxDestroy: %u chunks fitted, expected %llu", n,
               (unsigned long long)ROOM);
        /* cuDevicePrimaryCtxReset frees the primary context and its memory. */
        CU_OK(cuDevicePrimaryCtxReset(dev));
        EXPECT(st_sim_used(getpid()) == 0, "simgpu freed the primary context's memory: %llu",
               (unsigned long long)st_sim_used(getpid()));
        setup_ctx();
        n = alloc_until_refused(p, 32);
        check_truth_with(0, "after the reset");
        EXPECT(n == ROOM, "after cuDevicePrimaryCtxReset: %u chunks fitted, expected %llu", n,
               (unsigned long long)ROOM);
        free_all(p, n);
        return 0;
}

/* ---- a process is credited when it is gone, not when it starts exiting ---- */

/* Role: holds 8 chunks, says so on stdout, then exits with 256 KiB left in
 * its stdio buffer, so that the final flush (after every destructor, the
 * shim's included) blocks on the pipe until the parent reads it. */
int run_exit_blocker(void)
{
        static char buf[1 << 20];
        setvbuf(stdout, buf, _IOFBF, sizeof(buf));
        setup_ctx();
        CUdeviceptr p[8];
        EXPECT(alloc_until_refused(p, 8) == 8, "blocker: 8 chunks");
        EXPECT(write(1, "8\n", 2) == 2, "blocker: write");
        static char line[4096];
        memset(line, 'x', sizeof(line) - 1);
        line[sizeof(line) - 1] = '\n';
        for (unsigned i = 0; i < 64; i++) /* 256 KiB: four times a pipe's capacity */
                fwrite(line, 1, sizeof(line), stdout);
        exit(0);
}

/* Drains fd to EOF. */
static void drain(int fd)
{
        char b[4096];
        while (read(fd, b, sizeof(b)) > 0)
                ;
}

int run_exit_flush(void)
{
        setenv("ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0", 1);
        setup_ctx();
        int fd, pid = st_spawn("exit_blocker", &fd);
        char line[64];
        read_line(fd, line, sizeof(line));
        EXPECT(!strcmp(line, "8"), "blocker got %s chunks", line);
        /* Its buffered output reaches the pipe only in exit's final stdio
         * flush, which comes after every destructor: once any of it is
         * there, the blocker is past the shim's exit handling, still alive
         * and holding its memory. */
        int avail = 0;
        for (int i = 0; i < 1000 && avail == 0; i++) {
                struct pollfd pf = { .fd = fd, .events = POLLIN };
                poll(&pf, 1, 10);
                EXPECT(ioctl(fd, FIONREAD, &avail) == 0, "FIONREAD: %s", strerror(errno));
        }
        EXPECT(avail > 0, "the blocker never reached its final flush");
        EXPECT(st_sim_used(pid) == ST_CTX + 8 * CHUNK, "simgpu: the exiting blocker holds %llu",
               (unsigned long long)st_sim_used(pid));
        CUdeviceptr p[32];
        unsigned n = alloc_until_refused(p, 32);
        check_truth_with(pid, "beside a process blocked in exit");
        EXPECT(n == ROOM - 9, "%u chunks fitted beside the exiting process's 9", n);
        drain(fd);
        close(fd);
        int st;
        waitpid(pid, &st, 0);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "blocker failed");
        /* Gone: its memory comes back. */
        n += alloc_until_refused(p + n, 32 - n);
        EXPECT(n == ROOM, "%u chunks fitted once the process was gone", n);
        free_all(p, n);
        return 0;
}

/* ---- a process whose identity cannot be read is not dead ---- */

int run_lt_hold(void)
{
        setup_ctx();
        CUdeviceptr p[8];
        EXPECT(alloc_until_refused(p, 8) == 8, "holder: 8 chunks");
        printf("8\n");
        fflush(stdout);
        /* Until the reader goes (killed, or failed and gone): POLLERR. */
        struct pollfd pf = { .fd = 1, .events = 0 };
        while (poll(&pf, 1, -1) == 0 || !(pf.revents & (POLLERR | POLLHUP)))
                ;
        return 0;
}

int run_fd_full(void)
{
        setup_ctx();
        int fd, pid = st_spawn("lt_hold", &fd);
        char line[64];
        read_line(fd, line, sizeof(line));
        EXPECT(!strcmp(line, "8"), "holder got %s chunks", line);
        /* Fill this process's fd table: /proc cannot be opened any more. */
        struct rlimit rl;
        EXPECT(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
        rlim_t old = rl.rlim_cur;
        rl.rlim_cur = 256 < rl.rlim_max ? 256 : rl.rlim_max;
        EXPECT(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
        int fds[512], nfd = 0;
        while (nfd < 512 && (fds[nfd] = dup(0)) >= 0)
                nfd++;
        EXPECT(errno == EMFILE, "fd table not full: %s", strerror(errno));
        CUdeviceptr p[32];
        unsigned n = alloc_until_refused(p, 32);
        while (nfd)
                close(fds[--nfd]);
        rl.rlim_cur = old;
        setrlimit(RLIMIT_NOFILE, &rl);
        check_truth_with(pid, "with the fd table full");
        EXPECT(n == ROOM - 9, "%u chunks fitted beside the live holder's 9", n);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(fd);
        n += alloc_until_refused(p + n, 32 - n);
        EXPECT(n == ROOM, "%u chunks fitted once the holder was killed", n);
        free_all(p, n);
        return 0;
}
