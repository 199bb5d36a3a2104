/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for simgpu's own tests (on top of tests/common/cudatest.h). */
#ifndef GS_TESTS_SIMTEST_H
#define GS_TESTS_SIMTEST_H

#include "cudatest.h"

#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* Removes the test's private simgpu state so the ENV configuration applies.
 * Call before cuInit. */
static inline void st_fresh(void)
{
        const char *dir = getenv("SIMGPU_DIR");
        CT_ASSERT(dir && *dir, "SIMGPU_DIR is not set");
        char path[4200];
        snprintf(path, sizeof(path), "%s/state", dir);
        unlink(path);
}

/* Waits for a child; returns its exit status (or 128+signal). */
static inline int st_wait(pid_t pid)
{
        int st = 0;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* simgpu's ground truth (simgpu-smi): the device memory process pid holds
 * on device 0 (0 when it holds none or is gone). */
static inline uint64_t st_used_of(pid_t pid)
{
        struct ct_smi_proc p;
        return ct_smi_proc(pid, 0, &p) == 0 && p.alive ? p.used_bytes : 0;
}

/* ... and device 0's memory in use, all processes together. */
static inline uint64_t st_dev_used(void)
{
        struct ct_smi_dev d;
        CT_ASSERT(ct_smi_dev(0, &d) == 0, "device 0");
        return d.used;
}

/* The 32-bit word at device address p. */
static inline unsigned st_peek(CUdeviceptr p)
{
        unsigned v = 0;
        CT_CHECK(cuMemcpyDtoH(&v, p, sizeof(v)));
        return v;
}

#endif
