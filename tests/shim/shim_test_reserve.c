/* SPDX-License-Identifier: Apache-2.0 */
/* Shim scenarios on memory the driver keeps for a slice's process without
 * an allocation call (src/shim/shim_reserve.h), judged by simgpu's ground
 * truth: an IPC import that outlives its exporter's free, cuCtxSetLimit's
 * heap and stack, a module's __device__ variables. Each fills the slice
 * with cuMemAlloc after the reservation and fails when simgpu then charges
 * the process more than the cap (the reservation went uncharged). Dispatched
 * by shim_test.c. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shim_test.h"

#define BIG (512 * MiB)

static void truth_within_cap(const char *when)
{
        uint64_t sim = st_sim_used(getpid());
        EXPECT(sim <= ST_CAP, "%s: simgpu charges this process %llu MiB, above the %llu MiB cap", when,
               (unsigned long long)(sim / MiB), (unsigned long long)(ST_CAP / MiB));
}

/* Allocates CHUNKs until refused; returns how many fitted (kept in p). */
static unsigned fill(CUdeviceptr *p, unsigned max)
{
        unsigned n = 0;
        CUresult r = CUDA_SUCCESS;
        while (n < max && (r = cuMemAlloc(&p[n], CHUNK)) == CUDA_SUCCESS)
                n++;
        EXPECT(n < max && r == CUDA_ERROR_OUT_OF_MEMORY, "%u allocations, then %d", n, (int)r);
        return n;
}

static void unfill(CUdeviceptr *p, unsigned n)
{
        while (n)
                CU_OK(cuMemFree(p[--n]));
}

/* ---- IPC: an import kept alive after the exporter freed it ---- */

/* The exporter, outside any slice (no preload): allocates BIG, prints its
 * handle in hex, frees it when told ("free" on stdin) and says "freed". */
int run_ipc_exporter(void)
{
        setup_ctx();
        CUdeviceptr p;
        CU_OK(cuMemAlloc(&p, BIG));
        CUipcMemHandle h;
        CU_OK(cuIpcGetMemHandle(&h, p));
        for (size_t i = 0; i < sizeof(h.reserved); i++)
                printf("%02x", (unsigned char)h.reserved[i]);
        printf("\n");
        fflush(stdout);
        char line[64];
        EXPECT(read_line(0, line, sizeof(line)) > 0, "no order from the importer");
        CU_OK(cuMemFree(p));
        printf("freed\n");
        fflush(stdout);
        while (read_line(0, line, sizeof(line)) > 0)
                ;
        return 0;
}

/* Starts the exporter without the shim; *ret_out reads its lines,
 * *ret_in writes to it. */
static pid_t start_exporter(int *ret_out, int *ret_in)
{
        int out[2], in[2];
        EXPECT(pipe(out) == 0 && pipe(in) == 0, "pipe: %s", strerror(errno));
        pid_t pid = fork();
        EXPECT(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                dup2(out[1], 1);
                dup2(in[0], 0);
                close(out[0]);
                close(in[1]);
                unsetenv("LD_PRELOAD");
                unsetenv("GPUSLICE_CONFIG");
                setenv("SHIMTEST_ROLE", "ipc_exporter", 1);
                execl("/proc/self/exe", "shim_test", "ipc_exporter", (char *)NULL);
                _exit(127);
        }
        close(out[1]);
        close(in[0]);
        *ret_out = out[0];
        *ret_in = in[1];
        return pid;
}

static unsigned hexval(char c)
{
        return c >= 'a' ? (unsigned)(c - 'a' + 10) : (unsigned)(c - '0');
}

int run_ipc(void)
{
        setup_ctx();
        int from, to;
        pid_t exp = start_exporter(&from, &to);
        char line[2 * CU_IPC_HANDLE_SIZE + 8];
        EXPECT(read_line(from, line, sizeof(line)) == 2 * CU_IPC_HANDLE_SIZE, "handle: %s", line);
        CUipcMemHandle h;
        for (size_t i = 0; i < sizeof(h.reserved); i++)
                h.reserved[i] = (char)(hexval(line[2 * i]) << 4 | hexval(line[2 * i + 1]));
        CUdeviceptr q, q2;
        CU_OK(cuIpcOpenMemHandle(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        CU_OK(cuIpcOpenMemHandle(&q2, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        EXPECT(q2 == q, "reopened: the same pointer");
        CU_OK(cuIpcCloseMemHandle(q2)); /* one reference left */
        CUdeviceptr p[32];
        unsigned n = fill(p, 32);
        /* the exporter lets go: the import keeps the memory alive, ours now */
        EXPECT(write(to, "free\n", 5) == 5, "write");
        EXPECT(read_line(from, line, sizeof(line)) > 0 && !strcmp(line, "freed"), "exporter: %s", line);
        EXPECT(st_sim_used(getpid()) >= ST_CTX + BIG, "simgpu charges the import to its holder");
        truth_within_cap("import kept alive after the exporter's free");
        EXPECT(st_slice_used() == ST_CTX + BIG + n * CHUNK, "the import is charged (once): books %llu MiB",
               (unsigned long long)(st_slice_used() / MiB));
        EXPECT(n == (ST_CAP - ST_CTX - BIG) / CHUNK, "%u allocations fitted beside the import", n);
        unfill(p, n);
        CU_OK(cuIpcCloseMemHandle(q));
        EXPECT(st_slice_used() == ST_CTX, "closed: books %llu MiB",
               (unsigned long long)(st_slice_used() / MiB));
        EXPECT(st_sim_used(getpid()) == ST_CTX, "closed: the memory is gone");
        n = fill(p, 32);
        EXPECT(n == ROOM, "the whole cap again after the close: %u", n);
        unfill(p, n);
        close(to);
        close(from);
        int st = 0;
        waitpid(exp, &st, 0);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exporter failed");
        return 0;
}

/* ---- cuCtxSetLimit: the malloc heap and the stack ---- */

int run_limits(void)
{
        setup_ctx();
        CU_OK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * MiB + BIG));
        CUdeviceptr p[32];
        unsigned n = fill(p, 32);
        truth_within_cap("a 520 MiB heap and allocations");
        EXPECT(st_slice_used() == ST_CTX + BIG + n * CHUNK, "the heap is charged: books %llu MiB",
               (unsigned long long)(st_slice_used() / MiB));
        EXPECT(n == (ST_CAP - ST_CTX - BIG) / CHUNK, "%u allocations fitted beside the heap", n);
        /* a stack that needs more than the cap's rest is refused */
        EXPECT(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 64 * 1024) == CUDA_ERROR_OUT_OF_MEMORY,
               "a stack beyond the cap");
        size_t v = 0;
        CU_OK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
        EXPECT(v == 1024, "the refused stack is not set: %zu", v);
        truth_within_cap("a refused stack");
        unfill(p, n);
        CU_OK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * MiB));
        EXPECT(st_slice_used() == ST_CTX, "the heap lowered: books %llu MiB",
               (unsigned long long)(st_slice_used() / MiB));
        n = fill(p, 32);
        EXPECT(n == ROOM, "the whole cap again: %u", n);
        unfill(p, n);
        /* the context's end gives the limits' charge back */
        CU_OK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * MiB + 128 * MiB));
        CU_OK(cuDevicePrimaryCtxRelease(dev));
        EXPECT(st_slice_used() == 0, "after the context: books %llu MiB",
               (unsigned long long)(st_slice_used() / MiB));
        return 0;
}

/* ---- a module's __device__ variables ---- */

static const char globals_ptx[] = ".version 6.3\n"
                                  ".target sm_75\n"
                                  ".address_size 64\n"
                                  ".visible .global .align 8 .b8 gs_table[536870912];\n"
                                  ".global .u32 gs_count;\n";

int run_globals(void)
{
        setup_ctx();
        CUmodule m;
        CU_OK(cuModuleLoadData(&m, globals_ptx));
        CUdeviceptr p[32];
        unsigned n = fill(p, 32);
        truth_within_cap("a module with 512 MiB of globals and allocations");
        /* 512 MiB + 4 bytes, rounded up to 2 MiB */
        EXPECT(st_slice_used() == ST_CTX + BIG + 2 * MiB + n * CHUNK,
               "the module's globals are charged: %llu MiB", (unsigned long long)(st_slice_used() / MiB));
        CUmodule m2;
        EXPECT(cuModuleLoadData(&m2, globals_ptx) == CUDA_ERROR_OUT_OF_MEMORY,
               "a second copy does not fit");
        truth_within_cap("a refused module");
        unfill(p, n);
        CU_OK(cuModuleUnload(m));
        EXPECT(st_slice_used() == ST_CTX, "unloaded: books %llu MiB",
               (unsigned long long)(st_slice_used() / MiB));
        n = fill(p, 32);
        EXPECT(n == ROOM, "the whole cap again: %u", n);
        unfill(p, n);
        return 0;
}

/* ---- pools reserve by chunks, more than the request ---- */

/* Three pools with one 2 MiB block each: each reserves a 32 MiB chunk (as
 * the real driver's pools do; SIMGPU_POOL_CHUNK's default), and what the
 * device holds is the reserve, not the request. */
int run_chunks(void)
{
        setup_ctx();
        CUstream s;
        CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev } };
        CUmemoryPool pools[3];
        CUdeviceptr blocks[3];
        for (int i = 0; i < 3; i++) {
                CU_OK(cuMemPoolCreate(&pools[i], &props));
                CU_OK(cuMemAllocFromPoolAsync(&blocks[i], 2 * MiB, pools[i], s));
        }
        EXPECT(st_sim_used(getpid()) == ST_CTX + 3 * 32 * MiB, "simgpu shows the reserves: %llu MiB",
               (unsigned long long)(st_sim_used(getpid()) / MiB));
        CUdeviceptr p[32];
        unsigned n = fill(p, 32);
        truth_within_cap("three pools' chunks and allocations");
        EXPECT(n == (ST_CAP - ST_CTX - 3 * 32 * MiB) / CHUNK, "%u allocations beside the reserves", n);
        unfill(p, n);
        for (int i = 0; i < 3; i++) {
                CU_OK(cuMemFreeAsync(blocks[i], s));
                CU_OK(cuStreamSynchronize(s));
                CU_OK(cuMemPoolDestroy(pools[i]));
        }
        n = fill(p, 32);
        EXPECT(n == ROOM, "the whole cap again: %u", n);
        unfill(p, n);
        return 0;
}
