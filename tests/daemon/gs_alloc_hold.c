/* SPDX-License-Identifier: Apache-2.0 */
/* Test helper: allocate N bytes of device memory on device 0 (whatever
 * CUDA_VISIBLE_DEVICES makes it), print "ready", hold until a signal. */
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
        if (argc != 2)
                return 2;
        char *end = NULL;
        unsigned long long bytes = strtoull(argv[1], &end, 10);
        if (!end || *end)
                return 2;
        CUdevice dev;
        CUcontext ctx;
        CUdeviceptr p;
        if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
            cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
            cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
                printf("no-cuda\n");
                return 3;
        }
        if (cuMemAlloc(&p, bytes) != CUDA_SUCCESS) {
                printf("oom\n");
                return 4;
        }
        printf("ready\n");
        fflush(stdout);
        pause();
        return 0;
}
