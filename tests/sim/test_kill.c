/* SPDX-License-Identifier: Apache-2.0 */
/* Memory of a process killed with SIGKILL is returned; killing processes in
 * the middle of simgpu calls (lock held or not) never wedges the others. */
#include "simtest.h"

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include "gpuslice/nvml.h"

static void hog(int fd)
{
        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx);
        CUdeviceptr p;
        CT_CHECK(cuMemAlloc(&p, GiB));
        char c = 1;
        if (write(fd, &c, 1) != 1)
                exit(3);
        for (;;)
                pause();
}

static void churn(void)
{
        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx);
        for (;;) {
                CUdeviceptr p;
                size_t f, t;
                if (cuMemAlloc(&p, 2 * MiB) == CUDA_SUCCESS)
                        cuMemFree(p);
                cuMemGetInfo(&f, &t);
        }
}

int main(void)
{
        st_fresh();
        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx);
        size_t f, t;
        int fds[2];
        CT_ASSERT(pipe(fds) == 0, "pipe");
        pid_t kid = fork();
        if (kid == 0)
                hog(fds[1]);
        char c;
        CT_ASSERT(read(fds[0], &c, 1) == 1, "hog did not start");
        CT_CHECK(cuMemGetInfo(&f, &t));
        CT_ASSERT(f == 2 * GiB - 256 * MiB - GiB, "free with the hog %zu", f);
        kill(kid, SIGKILL);
        st_wait(kid);
        /* 1.5 GiB only fits if the dead hog's memory and context come back */
        CUdeviceptr p;
        CT_CHECK(cuMemAlloc(&p, 1536 * MiB));
        CT_ASSERT(nvmlInit() == NVML_SUCCESS, "nvmlInit");
        nvmlDevice_t nd;
        nvmlMemory_t m;
        CT_ASSERT(nvmlDeviceGetHandleByIndex(0, &nd) == NVML_SUCCESS, "handle");
        CT_ASSERT(nvmlDeviceGetMemoryInfo(nd, &m) == NVML_SUCCESS, "memory info");
        CT_ASSERT(m.used == 128 * MiB + 1536 * MiB, "NVML used %llu", m.used);
        unsigned n = 8;
        nvmlProcessInfo_v1_t pi[8];
        CT_ASSERT(nvmlDeviceGetComputeRunningProcesses(nd, &n, pi) == NVML_SUCCESS && n == 1 &&
                  pi[0].pid == (unsigned)getpid(), "only we remain (n=%u)", n);
        CT_CHECK(cuMemFree(p));

        /* SIGKILL at random points of busy processes, lock holders included */
        for (int round = 0; round < 6; round++) {
                pid_t k2 = fork();
                if (k2 == 0)
                        churn();
                usleep(30000 + 7000 * (unsigned)round);
                kill(k2, SIGKILL);
                st_wait(k2);
        }
        uint64_t t0 = ct_now_ns();
        CT_CHECK(cuMemAlloc(&p, 1536 * MiB)); /* forces a reap; must not hang */
        CT_ASSERT(ct_now_ns() - t0 < 2000000000ull, "allocation after kills was slow");
        CT_CHECK(cuMemFree(p));
        CT_ASSERT(nvmlDeviceGetMemoryInfo(nd, &m) == NVML_SUCCESS && m.used == 128 * MiB,
                  "NVML used after kills %llu", m.used);
        nvmlShutdown();
        printf("kill: ok\n");
        return 0;
}
