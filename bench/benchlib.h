/* SPDX-License-Identifier: Apache-2.0 */
/* Set-up shared by the benchmarks that measure the shim over simgpu
 * (bench_gate, bench_shim): each runs itself again in child processes,
 * plain or with LD_PRELOAD=libgpuslice.so, and every child drives
 * libcuda.so.1 through the function table bench_cu and writes its figures
 * back through a pipe. Every helper that can fail prints "<name>: <what>"
 * and exits 1: a benchmark has no way on past a broken set-up. */
#ifndef GS_BENCHLIB_H
#define GS_BENCHLIB_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

/* The driver entry points the benchmarks call, resolved by bench_load. */
struct bench_cu {
        CUresult (*init)(unsigned);
        CUresult (*dev_get)(CUdevice *, int);
        CUresult (*retain)(CUcontext *, CUdevice);
        CUresult (*set_current)(CUcontext);
        CUresult (*alloc)(CUdeviceptr *, size_t);
        CUresult (*free)(CUdeviceptr);
        CUresult (*meminfo)(size_t *, size_t *);
        CUresult (*mod_load)(CUmodule *, const void *);
        CUresult (*get_fn)(CUfunction *, CUmodule, const char *);
        CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void **, void **);
        CUresult (*sync)(void);
        CUresult (*uuid)(CUuuid *, CUdevice);
};
extern struct bench_cu bench_cu;

/* Names the program in every message bench_die prints (call first). name
 * must outlive the program (a string literal). */
void bench_init(const char *name);

/* Prints "<name>: what" to stderr and exits 1. */
__attribute__((noreturn)) void bench_die(const char *what);

/* Dies naming the call unless it returns CUDA_SUCCESS. */
#define BENCH_CHK(call)                                                       \
        do {                                                                  \
                if ((call) != CUDA_SUCCESS)                                   \
                        bench_die(#call);                                     \
        } while (0)

/* Loads libcuda.so.1 (LD_LIBRARY_PATH points at simgpu) and fills bench_cu;
 * dies if the library or any entry point is missing. */
void bench_load(void);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* In a child: cuInit, device 0, its primary context made current. */
void bench_ctx_setup(void);

/* In a child with a current context: loads the project kernels from
 * $GS_KERNELS_PTX and returns gs_busy(unsigned long long ns). */
CUfunction bench_busy_kernel(void);

/* Makes the scratch directory from template tmpl (mkdtemp, rewritten in
 * place) with simgpu's state in tmpl/sim (SIMGPU_DIR, 64Gi per GPU), no
 * inherited GPUSLICE_CONFIG, and writes device 0's UUID ("GPU-...") into
 * uuid. */
void bench_sim_setup(char *tmpl, char *uuid, size_t size);

/* Runs this program again (/proc/self/exe) with child_env=1 set, and with
 * LD_PRELOAD=preload and GPUSLICE_CONFIG=conf when preload is non-NULL;
 * reads exactly size bytes of figures from its stdout into out.
 * 0 if it delivered them and exited 0, else -1. */
int bench_run_child(const char *child_env, const char *preload, const char *conf, void *out,
                    size_t size);

/* Removes dir and everything under it (best effort). */
void bench_rm_tree(const char *dir);

#endif /* GS_BENCHLIB_H */
