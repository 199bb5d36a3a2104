/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu's machine-wide tables: 1024 processes and 1024 contexts (8 GPUs x
 * 64 processes fit, as the watchdog's bench needs). 600 processes (more
 * than the old 256) each hold a context on one of 8 GPUs and NVML lists 75
 * on each; this process then gets contexts up to the 1024th exactly, the
 * next is refused (CUDA_ERROR_OUT_OF_MEMORY, as the real driver answers),
 * and the contexts of the 600, once they are killed, come back. */
#include "simtest.h"

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include "gpuslice/nvml.h"

#define GPUS 8
#define KIDS 600
#define CONTEXTS 1024

static void holder(int gpu, int fd)
{
        CUdevice dev;
        CUcontext ctx;
        if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, gpu) != CUDA_SUCCESS ||
            cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
                _exit(3);
        char c = 1;
        if (write(fd, &c, 1) != 1)
                _exit(3);
        for (;;)
                pause();
}

static unsigned listed(nvmlDevice_t nd)
{
        static nvmlProcessInfo_v1_t pi[CONTEXTS];
        unsigned n = CONTEXTS;
        CT_ASSERT(nvmlDeviceGetComputeRunningProcesses(nd, &n, pi) == NVML_SUCCESS, "processes");
        return n;
}

int main(void)
{
        st_fresh();
        static pid_t kids[KIDS];
        int fds[2];
        CT_ASSERT(pipe(fds) == 0, "pipe");
        /* Before this process touches the driver: each child is a process
         * of its own to simgpu. */
        for (int i = 0; i < KIDS; i++) {
                kids[i] = fork();
                CT_ASSERT(kids[i] >= 0, "fork %d: %s", i, strerror(errno));
                if (kids[i] == 0)
                        holder(i % GPUS, fds[1]);
        }
        for (int i = 0; i < KIDS; i++) {
                char c;
                CT_ASSERT(read(fds[0], &c, 1) == 1, "holder %d did not start", i);
        }
        CT_ASSERT(nvmlInit() == NVML_SUCCESS, "nvmlInit");
        for (unsigned g = 0; g < GPUS; g++) {
                nvmlDevice_t nd;
                CT_ASSERT(nvmlDeviceGetHandleByIndex(g, &nd) == NVML_SUCCESS, "handle %u", g);
                unsigned n = listed(nd);
                CT_ASSERT(n == KIDS / GPUS, "GPU %u: NVML lists %u processes", g, n);
        }

        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx); /* context number KIDS + 1 */
        static CUcontext mine[CONTEXTS];
        int n_mine = 0;
        while (n_mine < CONTEXTS && cuCtxCreate(&mine[n_mine], NULL, 0, dev) == CUDA_SUCCESS)
                n_mine++;
        CT_ASSERT(KIDS + 1 + n_mine == CONTEXTS, "%d contexts in all, expected %d",
                  KIDS + 1 + n_mine, CONTEXTS);
        CUcontext extra;
        CT_EXPECT(cuCtxCreate(&extra, NULL, 0, dev), CUDA_ERROR_OUT_OF_MEMORY);

        for (int i = 0; i < KIDS; i++)
                kill(kids[i], SIGKILL);
        for (int i = 0; i < KIDS; i++)
                st_wait(kids[i]);
        for (int i = 0; i < KIDS; i++)
                CT_CHECK(cuCtxCreate(&extra, NULL, 0, dev)); /* the dead ones' slots */
        nvmlDevice_t nd;
        CT_ASSERT(nvmlDeviceGetHandleByIndex(1, &nd) == NVML_SUCCESS, "handle");
        CT_ASSERT(listed(nd) == 0, "GPU 1 still lists %u processes", listed(nd));
        nvmlShutdown();
        printf("limits: ok\n");
        return 0;
}
