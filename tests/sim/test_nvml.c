/* SPDX-License-Identifier: Apache-2.0 */
/* NVML's per-process figures agree with what each process did: a process
 * is listed only once it has a context, its usedGpuMemory includes the
 * context overhead (256 MiB here), the v1/v2/v3 layouts and the
 * INSUFFICIENT_SIZE protocol are the real ones, utilisation samples reflect
 * simulated busy time, and simgpu-smi --set-lost makes a GPU lost. */
#include "simtest.h"

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include "gpuslice/nvml.h"

#include <sys/time.h>

#define NV(call) CT_ASSERT((call) == NVML_SUCCESS, "%s", #call)

static void child(int ready, int go)
{
        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx);
        CUdeviceptr p;
        CT_CHECK(cuMemAlloc(&p, 50 * MiB)); /* 50 MiB: already 2 MiB granular */
        char c = 1;
        if (write(ready, &c, 1) != 1 || read(go, &c, 1) < 0)
                exit(3);
        exit(0);
}

static unsigned long long used_of(nvmlProcessInfo_v1_t *pi, unsigned n, pid_t pid)
{
        for (unsigned i = 0; i < n; i++)
                if (pi[i].pid == (unsigned)pid)
                        return pi[i].usedGpuMemory;
        return 0;
}

int main(void)
{
        st_fresh();
        CT_ASSERT(sizeof(nvmlProcessInfo_v1_t) == 16 && sizeof(nvmlProcessInfo_t) == 24 &&
                  sizeof(nvmlProcessUtilizationSample_t) == 32 && sizeof(nvmlMemory_v2_t) == 40,
                  "ABI sizes");
        nvmlDevice_t d0, d1;
        CT_ASSERT(nvmlDeviceGetHandleByIndex_v2(0, &d0) == NVML_ERROR_UNINITIALIZED, "before init");
        NV(nvmlInit_v2());
        unsigned n = 0;
        NV(nvmlDeviceGetCount_v2(&n));
        CT_ASSERT(n == 2, "count %u", n);
        NV(nvmlDeviceGetHandleByIndex(0, &d0));
        NV(nvmlDeviceGetHandleByIndex_v2(1, &d1));
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        NV(nvmlDeviceGetUUID(d1, uuid, sizeof(uuid)));
        NV(nvmlDeviceGetName(d1, name, sizeof(name)));
        nvmlDevice_t byuuid;
        NV(nvmlDeviceGetHandleByUUID(uuid, &byuuid));
        CT_ASSERT(byuuid == d1, "handle by uuid");
        CT_ASSERT(nvmlDeviceGetUUID(d1, uuid, 10) == NVML_ERROR_INSUFFICIENT_SIZE, "short buffer");

        /* not listed before a context */
        nvmlProcessInfo_v1_t pi[8];
        n = 8;
        NV(nvmlDeviceGetComputeRunningProcesses(d0, &n, pi));
        CT_ASSERT(n == 0, "listed before a context: %u", n);
        CUdevice dev;
        CUcontext ctx;
        CT_CHECK(cuInit(0));
        CT_CHECK(cuDeviceGet(&dev, 0));
        CUuuid cu;
        CT_CHECK(cuDeviceGetUuid(&cu, 0));
        NV(nvmlDeviceGetUUID(d0, uuid, sizeof(uuid)));
        char want[64];
        snprintf(want, sizeof(want), "GPU-%02x%02x%02x%02x-%02x%02x-", (unsigned char)cu.bytes[0],
                 (unsigned char)cu.bytes[1], (unsigned char)cu.bytes[2], (unsigned char)cu.bytes[3],
                 (unsigned char)cu.bytes[4], (unsigned char)cu.bytes[5]);
        CT_ASSERT(strncmp(uuid, want, strlen(want)) == 0, "CUDA and NVML UUIDs differ: %s %s", uuid, want);
        n = 8;
        NV(nvmlDeviceGetComputeRunningProcesses(d0, &n, pi));
        CT_ASSERT(n == 0, "listed after cuInit only");
        CT_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
        CT_CHECK(cuCtxSetCurrent(ctx));
        n = 8;
        NV(nvmlDeviceGetComputeRunningProcesses(d0, &n, pi));
        CT_ASSERT(n == 1 && pi[0].pid == (unsigned)getpid() && pi[0].usedGpuMemory == 256 * MiB,
                  "after the first context: n=%u used=%llu", n, n ? pi[0].usedGpuMemory : 0);
        CUdeviceptr p;
        CT_CHECK(cuMemAlloc(&p, 100 * MiB));

        /* a second process */
        int r1[2], r2[2];
        CT_ASSERT(pipe(r1) == 0 && pipe(r2) == 0, "pipe");
        pid_t kid = fork();
        if (kid == 0) {
                nvmlShutdown();
                child(r1[1], r2[0]);
        }
        char c;
        CT_ASSERT(read(r1[0], &c, 1) == 1, "child did not start");
        n = 0;
        CT_ASSERT(nvmlDeviceGetComputeRunningProcesses(d0, &n, NULL) == NVML_ERROR_INSUFFICIENT_SIZE &&
                  n == 2, "size protocol: n=%u", n);
        n = 1;
        CT_ASSERT(nvmlDeviceGetComputeRunningProcesses(d0, &n, pi) == NVML_ERROR_INSUFFICIENT_SIZE &&
                  n == 2, "size protocol (short array)");
        n = 8;
        NV(nvmlDeviceGetComputeRunningProcesses(d0, &n, pi));
        CT_ASSERT(n == 2, "two processes: %u", n);
        CT_ASSERT(used_of(pi, n, getpid()) == 356 * MiB, "our used %llu", used_of(pi, n, getpid()));
        CT_ASSERT(used_of(pi, n, kid) == 306 * MiB, "child used %llu", used_of(pi, n, kid));
        nvmlProcessInfo_t p3[8];
        nvmlProcessInfo_v2_t p2[8];
        n = 8;
        NV(nvmlDeviceGetComputeRunningProcesses_v3(d0, &n, p3));
        CT_ASSERT(n == 2 && (p3[0].usedGpuMemory + p3[1].usedGpuMemory) == 662 * MiB, "v3");
        n = 8;
        NV(nvmlDeviceGetComputeRunningProcesses_v2(d0, &n, p2));
        CT_ASSERT(n == 2 && (p2[0].usedGpuMemory + p2[1].usedGpuMemory) == 662 * MiB, "v2");
        n = 8;
        NV(nvmlDeviceGetComputeRunningProcesses_v3(d1, &n, p3));
        CT_ASSERT(n == 0, "device 1 has no processes");
        nvmlMemory_t m;
        NV(nvmlDeviceGetMemoryInfo(d0, &m));
        CT_ASSERT(m.used == 662 * MiB && m.total == 4 * GiB && m.free == m.total - m.used, "memory");
        nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
        NV(nvmlDeviceGetMemoryInfo_v2(d0, &m2));
        CT_ASSERT(m2.used == 662 * MiB, "memory v2");
        m2.version = 1;
        CT_ASSERT(nvmlDeviceGetMemoryInfo_v2(d0, &m2) == NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "version");
        CT_ASSERT(write(r2[1], &c, 1) == 1, "pipe");
        CT_ASSERT(st_wait(kid) == 0, "child failed");

        /* utilisation samples from simulated busy time */
        struct ct_kernels k;
        ct_load_kernels(&k);
        struct timeval tv;
        gettimeofday(&tv, NULL);
        unsigned long long since = (unsigned long long)tv.tv_sec * 1000000ull + (unsigned long long)tv.tv_usec;
        for (int i = 0; i < 300; i++)
                CT_CHECK(ct_busy(&k, NULL, 1000000ull));
        CT_CHECK(cuCtxSynchronize());
        nvmlProcessUtilizationSample_t s[8];
        n = 8;
        NV(nvmlDeviceGetProcessUtilization(d0, s, &n, since));
        CT_ASSERT(n == 1 && s[0].pid == (unsigned)getpid() && s[0].smUtil >= 60 && s[0].timeStamp >= since,
                  "sample: n=%u util=%u", n, n ? s[0].smUtil : 0);
        nvmlUtilization_t u;
        NV(nvmlDeviceGetUtilizationRates(d0, &u));
        CT_ASSERT(u.gpu >= 20 && u.gpu <= 100, "device utilisation %u", u.gpu);
        n = 8;
        CT_ASSERT(nvmlDeviceGetProcessUtilization(d1, s, &n, 0) == NVML_ERROR_NOT_FOUND, "no samples");

        /* a lost GPU */
        char cmd[4200];
        snprintf(cmd, sizeof(cmd), "'%s' --set-lost 1", getenv("SIMGPU_SMI"));
        CT_ASSERT(system(cmd) == 0, "simgpu-smi --set-lost");
        CT_ASSERT(nvmlDeviceGetName(d1, name, sizeof(name)) == NVML_ERROR_GPU_IS_LOST, "lost");
        NV(nvmlDeviceGetName(d0, name, sizeof(name)));
        snprintf(cmd, sizeof(cmd), "'%s' --clear-lost 1", getenv("SIMGPU_SMI"));
        CT_ASSERT(system(cmd) == 0, "simgpu-smi --clear-lost");
        NV(nvmlDeviceGetName(d1, name, sizeof(name)));
        CT_ASSERT(strcmp(nvmlErrorString(NVML_ERROR_GPU_IS_LOST), "GPU is lost") == 0, "error string");
        NV(nvmlShutdown());
        CT_ASSERT(nvmlShutdown() == NVML_ERROR_UNINITIALIZED, "double shutdown");
        printf("nvml: ok\n");
        return 0;
}
