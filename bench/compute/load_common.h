/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the compute benchmark's load programs (gs-burn, gs-reqload,
 * gs-memcap): driver-API set-up and the project kernel gs_busy, launched by
 * one of three routes. Header-only (static inline), so each program stays
 * one file plus this. The programs run unchanged on simgpu and on a real
 * GPU: the kernels come from $GS_KERNELS_PTX (PTX or a cubin built for the
 * real architecture by tests/gpu/run.sh), loaded with cuModuleLoad. */
#ifndef GS_BENCH_LOAD_COMMON_H
#define GS_BENCH_LOAD_COMMON_H

#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LC_CHECK(prog, call)                                                             \
        do {                                                                             \
                CUresult lc_r_ = (call);                                                 \
                if (lc_r_ != CUDA_SUCCESS) {                                             \
                        const char *lc_n_ = NULL;                                        \
                        if (cuGetErrorName(lc_r_, &lc_n_) != CUDA_SUCCESS || !lc_n_)     \
                                lc_n_ = "?";                                             \
                        fprintf(stderr, "%s: %s failed: %s (%d)\n", (prog), #call, lc_n_, \
                                (int)lc_r_);                                             \
                        exit(1);                                                         \
                }                                                                        \
        } while (0)

enum lc_route { LC_LAUNCH, LC_LAUNCH_EX, LC_GRAPH };

static inline uint64_t lc_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int lc_parse_route(const char *s, enum lc_route *r)
{
        if (strcmp(s, "launch") == 0)
                *r = LC_LAUNCH;
        else if (strcmp(s, "ex") == 0)
                *r = LC_LAUNCH_EX;
        else if (strcmp(s, "graph") == 0)
                *r = LC_GRAPH;
        else
                return -1;
        return 0;
}

/* cuInit, device 0, its primary context made current, gs_busy resolved. */
static inline void lc_setup(const char *prog, CUcontext *ctx, CUfunction *busy)
{
        const char *path = getenv("GS_KERNELS_PTX");
        if (!path || !*path) {
                fprintf(stderr, "%s: GS_KERNELS_PTX is not set (path of gs_kernels.ptx/.cubin)\n",
                        prog);
                exit(1);
        }
        CUdevice dev;
        CUmodule mod;
        LC_CHECK(prog, cuInit(0));
        LC_CHECK(prog, cuDeviceGet(&dev, 0));
        LC_CHECK(prog, cuDevicePrimaryCtxRetain(ctx, dev));
        LC_CHECK(prog, cuCtxSetCurrent(*ctx));
        LC_CHECK(prog, cuModuleLoad(&mod, path));
        LC_CHECK(prog, cuModuleGetFunction(busy, mod, "gs_busy"));
}

/* Launches gs_busy(ns) once on stream s by cuLaunchKernel or cuLaunchKernelEx. */
static inline CUresult lc_busy(CUfunction busy, CUstream s, unsigned long long ns, int ex)
{
        void *args[] = { &ns };
        if (!ex)
                return cuLaunchKernel(busy, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof(cfg));
        cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.hStream = s;
        return cuLaunchKernelEx(&cfg, busy, args, NULL);
}

/* A graph of n gs_busy(ns) kernels, captured from stream s, instantiated. */
static inline CUgraphExec lc_graph(const char *prog, CUfunction busy, CUstream s,
                                   unsigned long long ns, unsigned n)
{
        CUgraph g;
        CUgraphExec ge;
        LC_CHECK(prog, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        for (unsigned i = 0; i < n; i++)
                LC_CHECK(prog, lc_busy(busy, s, ns, 0));
        LC_CHECK(prog, cuStreamEndCapture(s, &g));
        LC_CHECK(prog, cuGraphInstantiate(&ge, g, 0));
        LC_CHECK(prog, cuGraphDestroy(g));
        return ge;
}

#endif /* GS_BENCH_LOAD_COMMON_H */
