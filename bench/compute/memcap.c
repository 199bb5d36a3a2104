/* SPDX-License-Identifier: Apache-2.0 */
/* gs-memcap: the memory-cap scenario of the real-GPU kit, one allocation path
 * per run, inside a slice (`gpuslice run --gpu 500m --gpu-memory 2Gi --
 * gs-memcap alloc`).
 *
 *   gs-memcap alloc|pitch|async|vmm|array
 *
 * Reads the slice's cap and context overhead from $GPUSLICE_CONFIG (the
 * daemon's config, readable by the slice), then allocates 64 MiB at a time by
 * that path until the driver (the shim) refuses, at most cap/64Mi + 8 times
 * (so a missing cap on a real 140 GiB GPU ends quickly and shows). Prints
 *
 *   memcap path=P pid=N cap=B ctx=B chunk=B chunks=N allocated=B refusal=NAME
 *   peak
 *
 * and waits for a line (or EOF) on stdin, so the caller can read NVML's
 * per-process figure from outside the shim while everything is held. Then it
 * frees everything, allocates one chunk again and prints
 * `after_free=ok|<error>`. Exit status 0 when the run completed (the caller
 * judges the figures), 1 on an unexpected failure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "example_util.h"
#include "load_common.h"

#define PROG "gs-memcap"
#define CHUNK (64ull << 20)
#define MAX_CHUNKS 4096

enum path { P_ALLOC, P_PITCH, P_ASYNC, P_VMM, P_ARRAY };

struct obj {
        uint64_t v;
};

static CUstream stream;
static CUdevice dev;

static const char *errname(CUresult r)
{
        const char *s = NULL;
        return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "CUDA_ERROR_<unknown>";
}

static CUresult alloc_one(enum path p, struct obj *o)
{
        CUresult r;
        switch (p) {
        case P_ALLOC: {
                CUdeviceptr d;
                r = cuMemAlloc(&d, CHUNK);
                o->v = d;
                return r;
        }
        case P_PITCH: {
                CUdeviceptr d;
                size_t pitch;
                r = cuMemAllocPitch(&d, &pitch, 8192, CHUNK / 8192 - 64, 4);
                o->v = d;
                return r;
        }
        case P_ASYNC: {
                CUdeviceptr d;
                r = cuMemAllocAsync(&d, CHUNK, stream);
                if (r == CUDA_SUCCESS)
                        r = cuStreamSynchronize(stream);
                o->v = d;
                return r;
        }
        case P_VMM: {
                CUmemAllocationProp prop;
                memset(&prop, 0, sizeof(prop));
                prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
                prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
                prop.location.id = dev;
                CUmemGenericAllocationHandle h;
                r = cuMemCreate(&h, CHUNK, &prop, 0);
                o->v = (uint64_t)h;
                return r;
        }
        case P_ARRAY: {
                CUDA_ARRAY_DESCRIPTOR d;
                memset(&d, 0, sizeof(d));
                d.Width = 8192;
                d.Height = 2048; /* x 4 bytes = 64 MiB */
                d.Format = CU_AD_FORMAT_FLOAT;
                d.NumChannels = 1;
                CUarray a;
                r = cuArrayCreate(&a, &d);
                o->v = (uint64_t)(uintptr_t)a;
                return r;
        }
        }
        return CUDA_ERROR_INVALID_VALUE;
}

static CUresult free_one(enum path p, struct obj *o)
{
        switch (p) {
        case P_ALLOC:
        case P_PITCH:
                return cuMemFree((CUdeviceptr)o->v);
        case P_ASYNC: {
                CUresult r = cuMemFreeAsync((CUdeviceptr)o->v, stream);
                return r == CUDA_SUCCESS ? cuStreamSynchronize(stream) : r;
        }
        case P_VMM:
                return cuMemRelease((CUmemGenericAllocationHandle)o->v);
        case P_ARRAY:
                return cuArrayDestroy((CUarray)(uintptr_t)o->v);
        }
        return CUDA_ERROR_INVALID_VALUE;
}

/* memory_limit and context_overhead from the slice config (key = value). */
static int read_conf(uint64_t *cap, uint64_t *ctx)
{
        const char *path = getenv("GPUSLICE_CONFIG");
        FILE *f = path ? fopen(path, "re") : NULL;
        if (!f)
                return -1;
        char line[512];
        *cap = 0;
        *ctx = 0;
        while (fgets(line, sizeof(line), f)) {
                char key[64], val[128];
                if (sscanf(line, " %63[a-z_] = %127s", key, val) != 2)
                        continue;
                uint64_t v;
                if (ex_parse_u64(val, &v) < 0)
                        continue;
                if (strcmp(key, "memory_limit") == 0)
                        *cap = v;
                else if (strcmp(key, "context_overhead") == 0)
                        *ctx = v;
        }
        fclose(f);
        return *cap ? 0 : -1;
}

int main(int argc, char **argv)
{
        static const char *const names[] = { "alloc", "pitch", "async", "vmm", "array" };
        int p = -1;
        for (int i = 0; argc == 2 && i < 5; i++)
                if (strcmp(argv[1], names[i]) == 0)
                        p = i;
        if (p < 0) {
                fprintf(stderr, "usage: " PROG " alloc|pitch|async|vmm|array\n");
                return 2;
        }
        uint64_t cap, ctxo;
        if (read_conf(&cap, &ctxo) < 0) {
                fprintf(stderr, PROG ": no slice config with memory_limit ($GPUSLICE_CONFIG)\n");
                return 1;
        }
        CUcontext ctx;
        LC_CHECK(PROG, cuInit(0));
        LC_CHECK(PROG, cuDeviceGet(&dev, 0));
        LC_CHECK(PROG, cuDevicePrimaryCtxRetain(&ctx, dev));
        LC_CHECK(PROG, cuCtxSetCurrent(ctx));
        LC_CHECK(PROG, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

        uint64_t limit = cap / CHUNK + 8;
        limit = limit > MAX_CHUNKS ? MAX_CHUNKS : limit;
        struct obj *objs = calloc(limit, sizeof(*objs));
        if (!objs)
                return 1;
        uint64_t n = 0;
        CUresult refusal = CUDA_SUCCESS;
        while (n < limit) {
                refusal = alloc_one((enum path)p, &objs[n]);
                if (refusal != CUDA_SUCCESS)
                        break;
                n++;
        }
        printf("memcap path=%s pid=%d cap=%llu ctx=%llu chunk=%llu chunks=%llu allocated=%llu "
               "refusal=%s\npeak\n",
               names[p], (int)getpid(), (unsigned long long)cap, (unsigned long long)ctxo,
               CHUNK, (unsigned long long)n, (unsigned long long)(n * CHUNK),
               refusal == CUDA_SUCCESS ? "none" : errname(refusal));
        fflush(stdout);
        char buf[64];
        if (!fgets(buf, sizeof(buf), stdin) && ferror(stdin))
                fprintf(stderr, PROG ": stdin: %s\n", strerror(errno));
        for (uint64_t i = 0; i < n; i++)
                LC_CHECK(PROG, free_one((enum path)p, &objs[i]));
        struct obj again;
        CUresult r = alloc_one((enum path)p, &again);
        printf("after_free=%s\n", r == CUDA_SUCCESS ? "ok" : errname(r));
        if (r == CUDA_SUCCESS)
                LC_CHECK(PROG, free_one((enum path)p, &again));
        free(objs);
        return 0;
}
