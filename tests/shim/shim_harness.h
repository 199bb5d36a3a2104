/* SPDX-License-Identifier: Apache-2.0 */
/* Harness of the shim tests: the test program starts as a PARENT (no
 * preload): it makes a private simgpu state directory and slice directory,
 * writes the slice config, then re-executes itself as the CHILD with
 * LD_PRELOAD=libgpuslice.so, which runs the scenario. Ground truth comes
 * from outside the shim: simgpu-smi --json (run without the preload) and the
 * slice's accounting file. */
#ifndef SHIM_HARNESS_H
#define SHIM_HARNESS_H

#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* Fails the test (exit 1) with a message when cond is false. */
#define EXPECT(cond, ...)                                                                   \
        do {                                                                                \
                if (!(cond)) {                                                              \
                        fprintf(stderr, "%s:%d: EXPECT(%s) failed: ", __FILE__, __LINE__, #cond); \
                        fprintf(stderr, __VA_ARGS__);                                       \
                        fprintf(stderr, "\n");                                              \
                        exit(1);                                                            \
                }                                                                           \
        } while (0)
#define CU_OK(call)                                                                         \
        do {                                                                                \
                CUresult r_ = (call);                                                       \
                EXPECT(r_ == CUDA_SUCCESS, "%s returned %d", #call, (int)r_);               \
        } while (0)

/* Test set-up, chosen by the parent per scenario. */
struct st_setup {
        const char *config;     /* slice config text; NULL: no GPUSLICE_CONFIG; "%UUID%",
                                   "%DIR%" are substituted */
        uint64_t sim_memory;    /* SIMGPU_MEMORY */
        unsigned sim_devices;   /* SIMGPU_DEVICES */
        int expect_silent;      /* child must write nothing to stdout/stderr */
        uint64_t parent_holds;  /* bytes the parent allocates outside the slice first */
        unsigned conf_mode;     /* mode of the config file; 0: 0644 */
        unsigned conf_uid;      /* if set: the config is chown'ed to this uid (root only) */
        unsigned dir_mode;      /* if set: the mode of the config's directory */
        int bad_books;          /* <slice_dir>/memory made unusable first: 1 a directory,
                                   2 garbage of the wrong size */
        const char *forged;     /* if set: `config` is named by GPUSLICE_TEST_DEFAULT_CONFIG
                                   (standing in for /run/gpuslice/slice.conf) and this text,
                                   named by GPUSLICE_CONFIG, is what a tenant wrote */
        int log_fifo;           /* GPUSLICE_LOG names a FIFO nobody reads */
};

/* Runs `scenario` in a preloaded child. Returns the exit code for main. */
int st_run(int argc, char **argv, const struct st_setup *setup);

/* Child side: cuInit, device 0 and its primary context, made current;
 * each returned where its pointer is not NULL. */
void st_ctx_up(CUdevice *ret_dev, CUcontext *ret_ctx);
/* Child side: the output of `simgpu-smi --json`, run OUTSIDE the shim
 * (LD_PRELOAD removed), in a static buffer that the next call overwrites
 * (the caller may cut it up). Fails the test when simgpu-smi fails. */
char *st_sim_json(void);
/* Child side: bytes simgpu charges to process pid on device 0 (context
 * overhead included), from st_sim_json. */
uint64_t st_sim_used(int pid);
/* Child side: bytes charged to the whole slice in its accounting file. */
uint64_t st_slice_used(void);
/* Child side: writes the config of a second slice, `slice = other`, on
 * the harness's GPU (the gpu_uuid of GPUSLICE_CONFIG), with `limits` (its
 * memory_limit = ... lines) and its own books in a new directory
 * SHIMTEST_SLICE_DIR/../<name>; the config is <name>.conf beside it, its
 * path returned in path. */
void st_write_other_conf(const char *name, const char *limits, char *path, size_t size);
/* Child side: starts this program again as `role` (inheriting the preload)
 * with stdout connected to a pipe whose read end is returned in *ret_fd. */
int st_spawn(const char *role, int *ret_fd);
/* The slice's cap and context overhead used by the default config. */
#define ST_CAP (1 * GiB)
#define ST_CTX (64 * MiB)

#endif /* SHIM_HARNESS_H */
