/* SPDX-License-Identifier: Apache-2.0 */
/* Shareable handles across slices, judged by simgpu's ground truth
 * (simgpu-smi), not the shim's books: a process of slice A (the harness's
 * slice `test`, cap 1 GiB) exports a VMM allocation as a POSIX file
 * descriptor and sends it over a socketpair (SCM_RIGHTS) to a process of
 * slice B (cap 1 GiB, its own books), which imports and maps it. Once A
 * released it, the driver keeps it for B and counts it as B's: B's slice
 * must be charged for it (B cannot allocate past its cap counting the
 * import), and A's slice credited (A can allocate its whole cap again).
 *
 *   shim_share_test cross   the scenario above (fails on a shim that does
 *                           not charge imports: B ends 512 MiB above its cap)
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/fdpass.h"
#include "shim_harness.h"

#define CHUNK (64 * MiB)
#define ROOM ((ST_CAP - ST_CTX) / CHUNK) /* 15 */
#define GRANULE (2 * MiB)
#define SHARED (8 * CHUNK - GRANULE)     /* the exported allocation: 255 granules */
#define FD_TYPE CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR

static const char conf_text[] = "version = 1\nslice = test\ngpu_uuid = %UUID%\n"
                                "memory_limit = 1073741824\ncompute_milli = 500\n"
                                "context_overhead = 67108864\nslice_dir = %DIR%\n";

static const CUmemAllocationProp share_prop = {
        .type = CU_MEM_ALLOCATION_TYPE_PINNED,
        .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
        .requestedHandleTypes = FD_TYPE,
};

/* One byte or line of the conversation, and the descriptor (SCM_RIGHTS). */
static void say(int s, char c)
{
        EXPECT(write(s, &c, 1) == 1, "write: %s", strerror(errno));
}

static char hear(int s)
{
        char c = 0;
        EXPECT(read(s, &c, 1) == 1, "read: the other process is gone");
        return c;
}

static void send_fd(int s, int fd)
{
        int r = ct_send_fd(s, fd);
        EXPECT(r == 0, "sendmsg: %s", strerror(-r));
}

static int recv_fd(int s)
{
        int fd = ct_recv_fd(s);
        EXPECT(fd != -EBADMSG, "no descriptor received");
        EXPECT(fd >= 0, "recvmsg: %s", strerror(-fd));
        return fd;
}

/* Allocates CHUNKs until refused (at most 32); returns how many fitted,
 * left allocated in out. */
static unsigned alloc_until_refused(CUdeviceptr *out)
{
        unsigned n = 0;
        CUresult r = CUDA_SUCCESS;
        while (n < 32 && (r = cuMemAlloc(&out[n], CHUNK)) == CUDA_SUCCESS)
                n++;
        EXPECT(r == CUDA_ERROR_OUT_OF_MEMORY, "refusal is %d", (int)r);
        return n;
}

static void free_all(CUdeviceptr *p, unsigned n)
{
        while (n)
                CU_OK(cuMemFree(p[--n]));
}

static void check_cap(int pid, const char *who, const char *when)
{
        uint64_t sim = st_sim_used(pid);
        EXPECT(sim <= ST_CAP, "%s: simgpu charges %s's process %llu MiB, above the slice's %llu MiB cap",
               when, who, (unsigned long long)(sim / MiB), (unsigned long long)(ST_CAP / MiB));
}

/* Starts this program as the importer in slice B, talking over *ret_s. */
static pid_t spawn_b(int *ret_s)
{
        char conf[600]; /* slice B: the harness's GPU, its own books */
        st_write_other_conf("slice-b",
                            "memory_limit = 1073741824\ncompute_milli = 500\n"
                            "context_overhead = 67108864\n",
                            conf, sizeof(conf));
        int sv[2];
        EXPECT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
        pid_t pid = fork();
        EXPECT(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                if (dup2(sv[1], 3) < 0) /* its end as fd 3, open across exec */
                        _exit(2);
                setenv("GPUSLICE_CONFIG", conf, 1);
                unsetenv("GPUSLICE_SLICE");
                setenv("SHIMTEST_ROLE", "cross_b", 1);
                execl("/proc/self/exe", "shim_share_test", "cross_b", (char *)NULL);
                _exit(127);
        }
        close(sv[1]);
        *ret_s = sv[0];
        return pid;
}

/* Slice A: the exporter. */
static int run_cross(void)
{
        st_ctx_up(NULL, NULL);
        CUmemGenericAllocationHandle h;
        CU_OK(cuMemCreate(&h, SHARED, &share_prop, 0));
        int fd = -1;
        CU_OK(cuMemExportToShareableHandle(&fd, h, FD_TYPE, 0));
        int s;
        pid_t b = spawn_b(&s);
        EXPECT(hear(s) == 'r', "B is ready");
        send_fd(s, fd);
        EXPECT(hear(s) == 'm', "B imported and mapped the allocation");
        EXPECT(st_sim_used(getpid()) == ST_CTX + SHARED, "simgpu charges the exporter: %llu MiB",
               (unsigned long long)(st_sim_used(getpid()) / MiB));
        uint64_t b_before = st_sim_used(b);
        CU_OK(cuMemRelease(h)); /* A never mapped it: its last reference */
        close(fd);
        EXPECT(st_sim_used(getpid()) == ST_CTX, "simgpu credits the exporter: %llu MiB",
               (unsigned long long)(st_sim_used(getpid()) / MiB));
        EXPECT(st_sim_used(b) == b_before + SHARED, "simgpu counts it as B's: %llu MiB, was %llu",
               (unsigned long long)(st_sim_used(b) / MiB), (unsigned long long)(b_before / MiB));
        /* A let go of it: its whole cap is free again */
        CUdeviceptr p[32];
        unsigned n = alloc_until_refused(p);
        check_cap(getpid(), "A", "A after its release");
        EXPECT(n == ROOM, "A fitted %u chunks after releasing the export, expected %llu", n,
               (unsigned long long)ROOM);
        free_all(p, n);
        say(s, 'g');
        char line[64];
        int k = 0;
        while (k < (int)sizeof(line) - 1 && (line[k] = hear(s)) != '\n')
                k++;
        line[k] = '\0';
        int st = 0;
        EXPECT(waitpid(b, &st, 0) == b, "waitpid");
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the importer in slice B failed (%d)", st);
        EXPECT(!strcmp(line, "ok"), "B: %s", line);
        return 0;
}

/* Slice B: the importer (fd 3: its end of the socketpair). */
static int run_cross_b(void)
{
        int s = 3;
        st_ctx_up(NULL, NULL);
        /* with 13 chunks of its own the import does not fit */
        CUdeviceptr p[32], g;
        for (unsigned i = 0; i < 13; i++)
                CU_OK(cuMemAlloc(&p[i], CHUNK));
        say(s, 'r');
        int fd = recv_fd(s);
        CUmemGenericAllocationHandle h;
        CUresult r = cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, FD_TYPE);
        check_cap(getpid(), "B", "B importing over its cap");
        EXPECT(r == CUDA_ERROR_OUT_OF_MEMORY, "an import past the cap returned %d", (int)r);
        /* with 7 chunks and a granule, exactly the import's size is left
         * (charged one granule more, it would be refused) */
        free_all(p + 7, 6);
        CU_OK(cuMemAlloc(&g, GRANULE));
        CU_OK(cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, FD_TYPE));
        close(fd);
        CUdeviceptr va;
        CU_OK(cuMemAddressReserve(&va, SHARED, 0, 0, 0));
        CU_OK(cuMemMap(va, SHARED, 0, h, 0));
        CUmemAccessDesc acc = { .location = share_prop.location,
                                .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        CU_OK(cuMemSetAccess(va, SHARED, &acc, 1));
        CU_OK(cuMemsetD32(va, 9, 1));
        say(s, 'm');
        EXPECT(hear(s) == 'g', "A released it");
        /* The import is B's now: the slice is full (charged one granule
         * less, a granule more would fit and simgpu would show B over) */
        CUdeviceptr more;
        r = cuMemAlloc(&more, GRANULE);
        check_cap(getpid(), "B", "B holding the import");
        EXPECT(r == CUDA_ERROR_OUT_OF_MEMORY, "B allocated past its cap beside the import (%d)",
               (int)r);
        free_all(p, 7);
        CU_OK(cuMemFree(g));
        /* B let go of it too: its whole cap */
        CU_OK(cuMemRelease(h));
        CU_OK(cuMemUnmap(va, SHARED));
        CU_OK(cuMemAddressFree(va, SHARED));
        EXPECT(st_sim_used(getpid()) == ST_CTX, "simgpu freed the import: %llu MiB",
               (unsigned long long)(st_sim_used(getpid()) / MiB));
        unsigned n = alloc_until_refused(p);
        check_cap(getpid(), "B", "B after its release");
        EXPECT(n == ROOM, "B fitted %u chunks after releasing the import, expected %llu", n,
               (unsigned long long)ROOM);
        free_all(p, n);
        EXPECT(write(s, "ok\n", 3) == 3, "write");
        return 0;
}

int main(int argc, char **argv)
{
        const char *role = getenv("SHIMTEST_ROLE");
        if (role) {
                if (!strcmp(role, "cross"))
                        return run_cross();
                if (!strcmp(role, "cross_b"))
                        return run_cross_b();
                fprintf(stderr, "unknown scenario %s\n", role);
                return 2;
        }
        struct st_setup s = { .config = conf_text };
        return st_run(argc, argv, &s);
}
