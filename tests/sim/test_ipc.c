/* SPDX-License-Identifier: Apache-2.0 */
/* CUDA IPC memory handles, judged by simgpu's ground truth (simgpu-smi),
 * 64 MiB context overhead (ENV). The model (sim/ipc.c, docs/simgpu.md):
 * the memory is charged once, to the exporter while it holds it; it lives
 * while any importer holds it, and then it is charged to that importer;
 * the last close frees it. The bytes are shared for real. */
#include "simtest.h"

#include "gpuslice/nvml.h"

#define OVERHEAD (64 * MiB)

static int up[2], down[2]; /* child -> parent, parent -> child */

static void say(int fd, const void *p, size_t n)
{
        CT_ASSERT(write(fd, p, n) == (ssize_t)n, "write");
}

static void hear(int fd, void *p, size_t n)
{
        CT_ASSERT(read(fd, p, n) == (ssize_t)n, "read");
}

/* What NVML's per-process list shows for pid on GPU 0 (0 if not listed). */
static uint64_t nvml_used_of(pid_t pid)
{
        nvmlDevice_t d;
        CT_ASSERT(nvmlDeviceGetHandleByIndex(0, &d) == NVML_SUCCESS, "NVML handle");
        nvmlProcessInfo_t info[16];
        unsigned n = 16;
        CT_ASSERT(nvmlDeviceGetComputeRunningProcesses(d, &n, info) == NVML_SUCCESS, "NVML processes");
        for (unsigned i = 0; i < n; i++)
                if (info[i].pid == (unsigned)pid)
                        return info[i].usedGpuMemory;
        return 0;
}

/* The importer: opens the handle it is sent, checks and writes the bytes,
 * then follows the parent's steps. */
static int importer(void)
{
        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx);
        CUipcMemHandle h;
        hear(down[0], &h, sizeof(h));
        CUdeviceptr q, q2;
        CT_CHECK(cuIpcOpenMemHandle(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        CT_ASSERT(st_peek(q) == 7, "the exporter's bytes: %u", st_peek(q));
        CT_CHECK(cuMemsetD32(q, 9, 1));
        CT_CHECK(cuIpcOpenMemHandle(&q2, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        CT_ASSERT(q2 == q, "reopened: the same pointer");
        CT_CHECK(cuIpcCloseMemHandle(q2)); /* one reference left */
        CT_ASSERT(st_peek(q) == 9, "still mapped");
        char c = 'o';
        say(up[1], &c, 1); /* opened */
        hear(down[0], &c, 1); /* the exporter freed it */
        CT_ASSERT(st_peek(q) == 9, "alive after the exporter's free: %u", st_peek(q));
        CT_CHECK(cuIpcCloseMemHandle(q));
        CT_EXPECT(cuIpcCloseMemHandle(q), CUDA_ERROR_INVALID_VALUE);
        CT_EXPECT(cuIpcOpenMemHandle(&q, h, 0), CUDA_ERROR_INVALID_HANDLE);
        say(up[1], &c, 1); /* closed */
        hear(down[0], &c, 1);
        return 0;
}

/* An exporter that exits while the parent still imports its memory. */
static int exiting_exporter(void)
{
        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx);
        CUdeviceptr p;
        CT_CHECK(cuMemAlloc(&p, 128 * MiB));
        CT_CHECK(cuMemsetD32(p, 5, 1));
        CUipcMemHandle h;
        CT_CHECK(cuIpcGetMemHandle(&h, p));
        say(up[1], &h, sizeof(h));
        char c;
        hear(down[0], &c, 1); /* opened: exit holding it */
        return 0;
}

static pid_t spawn(int (*fn)(void))
{
        CT_ASSERT(pipe(up) == 0 && pipe(down) == 0, "pipe");
        pid_t pid = fork();
        CT_ASSERT(pid >= 0, "fork");
        if (pid == 0) {
                close(up[0]);
                close(down[1]);
                _exit(fn());
        }
        close(up[1]);
        close(down[0]);
        return pid;
}

int main(void)
{
        st_fresh();
        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx);
        pid_t me = getpid();
        CT_ASSERT(nvmlInit() == NVML_SUCCESS, "nvmlInit");

        /* 1. export, import, the exporter frees, the importer closes */
        CUdeviceptr p;
        CT_CHECK(cuMemAlloc(&p, 256 * MiB));
        CT_CHECK(cuMemsetD32(p, 7, 1));
        CUipcMemHandle h, h2;
        CT_CHECK(cuIpcGetMemHandle(&h, p));
        CT_CHECK(cuIpcGetMemHandle(&h2, p));
        CT_ASSERT(memcmp(&h, &h2, sizeof(h)) == 0, "one allocation, one handle");
        CUdeviceptr self;
        CT_EXPECT(cuIpcOpenMemHandle(&self, h, 0), CUDA_ERROR_INVALID_CONTEXT);
        CT_EXPECT(cuIpcGetMemHandle(&h2, p + 4096), CUDA_ERROR_INVALID_VALUE);
        pid_t imp = spawn(importer);
        say(down[1], &h, sizeof(h));
        char c;
        hear(up[0], &c, 1);
        CT_ASSERT(st_peek(p) == 9, "the importer's write is seen: %u", st_peek(p));
        CT_ASSERT(st_used_of(me) == OVERHEAD + 256 * MiB, "exporter %llu",
                  (unsigned long long)st_used_of(me));
        CT_ASSERT(st_used_of(imp) == OVERHEAD,
                  "an import is not charged while the exporter holds it: %llu",
                  (unsigned long long)st_used_of(imp));
        CT_ASSERT(nvml_used_of(imp) == OVERHEAD, "NVML: the importer %llu",
                  (unsigned long long)nvml_used_of(imp));
        CT_ASSERT(st_dev_used() == 2 * OVERHEAD + 256 * MiB, "device %llu",
                  (unsigned long long)st_dev_used());
        CT_CHECK(cuMemFree(p));
        CT_ASSERT(st_dev_used() == 2 * OVERHEAD + 256 * MiB,
                  "the memory lives while imported: device %llu",
                  (unsigned long long)st_dev_used());
        CT_ASSERT(st_used_of(me) == OVERHEAD, "the exporter freed it: %llu",
                  (unsigned long long)st_used_of(me));
        CT_ASSERT(st_used_of(imp) == OVERHEAD + 256 * MiB, "the importer keeps it alive: %llu",
                  (unsigned long long)st_used_of(imp));
        CT_ASSERT(nvml_used_of(imp) == OVERHEAD + 256 * MiB && nvml_used_of(me) == OVERHEAD,
                  "NVML's per-process figures agree: importer %llu, exporter %llu",
                  (unsigned long long)nvml_used_of(imp), (unsigned long long)nvml_used_of(me));
        say(down[1], &c, 1);
        hear(up[0], &c, 1);
        CT_ASSERT(st_used_of(imp) == OVERHEAD, "closed: %llu", (unsigned long long)st_used_of(imp));
        CT_ASSERT(st_dev_used() == 2 * OVERHEAD, "the last close frees it: %llu",
                  (unsigned long long)st_dev_used());
        say(down[1], &c, 1);
        CT_ASSERT(st_wait(imp) == 0, "importer failed");
        close(up[0]);
        close(down[1]);

        /* 2. the exporter exits while we import its memory */
        pid_t exp = spawn(exiting_exporter);
        hear(up[0], &h, sizeof(h));
        CUdeviceptr q;
        CT_CHECK(cuIpcOpenMemHandle(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        CT_ASSERT(st_peek(q) == 5, "bytes %u", st_peek(q));
        CT_ASSERT(st_used_of(me) == OVERHEAD, "importer %llu", (unsigned long long)st_used_of(me));
        say(down[1], &c, 1);
        CT_ASSERT(st_wait(exp) == 0, "exporter failed");
        CT_ASSERT(st_used_of(me) == OVERHEAD + 128 * MiB,
                  "after the exporter's exit it is ours: %llu", (unsigned long long)st_used_of(me));
        CT_ASSERT(st_dev_used() == OVERHEAD + 128 * MiB, "device %llu",
                  (unsigned long long)st_dev_used());
        CT_ASSERT(st_peek(q) == 5, "alive after the exporter's exit");
        CT_CHECK(cuIpcCloseMemHandle(q));
        CT_ASSERT(st_used_of(me) == OVERHEAD && st_dev_used() == OVERHEAD,
                  "freed at the last close: %llu", (unsigned long long)st_dev_used());
        printf("ipc: ok\n");
        return 0;
}
