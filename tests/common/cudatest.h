/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers for driver-API test programs (simgpu, shim, arbiter...).
 * Header-only; include after nothing else (it includes cuda.h itself).
 *
 * Environment the tests get from their ctest ENV:
 *   GS_KERNELS_PTX  path of the project kernels' PTX (gs_busy, gs_fill)
 *   SIMGPU_SMI      path of simgpu-smi (ground truth), optional
 *
 * API (stable; other areas' tests rely on it):
 *   CT_CHECK(call)            call must return CUDA_SUCCESS, else print
 *                             file:line, the call and the CUresult name, exit 1
 *   CT_EXPECT(call, want)     call must return want
 *   CT_ASSERT(cond, fmt, ...) else print the message and exit 1
 *   ct_now_ns()               CLOCK_MONOTONIC ns
 *   ct_setup(&dev, &ctx)      cuInit + device 0 + its primary context, current
 *   ct_load_kernels(&k)       load the PTX, resolve gs_busy and gs_fill
 *   ct_busy(&k, stream, ns)   launch gs_busy(ns) (1 block of 1 thread)
 *   ct_fill(&k, stream, p, v, n)  launch gs_fill(p, v, n)
 *   ct_smi_proc(pid, dev, &p) read simgpu-smi --json's record of a process
 *   ct_smi_dev(dev, &d)       ... and of a device
 */
#ifndef GS_TESTS_CUDATEST_H
#define GS_TESTS_CUDATEST_H

#include <cuda.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static inline const char *ct_errname(CUresult r)
{
        const char *s = NULL;
        if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
                return "CUDA_ERROR_<unknown>";
        return s;
}

#define CT_CHECK(call)                                                                  \
        do {                                                                            \
                CUresult ct_r_ = (call);                                                \
                if (ct_r_ != CUDA_SUCCESS) {                                            \
                        fprintf(stderr, "%s:%d: %s -> %s (%d)\n", __FILE__, __LINE__,  \
                                #call, ct_errname(ct_r_), (int)ct_r_);                 \
                        exit(1);                                                        \
                }                                                                       \
        } while (0)

#define CT_EXPECT(call, want)                                                           \
        do {                                                                            \
                CUresult ct_r_ = (call);                                                \
                if (ct_r_ != (want)) {                                                  \
                        fprintf(stderr, "%s:%d: %s -> %s (%d), expected %s\n", __FILE__,\
                                __LINE__, #call, ct_errname(ct_r_), (int)ct_r_, #want); \
                        exit(1);                                                        \
                }                                                                       \
        } while (0)

#define CT_ASSERT(cond, ...)                                                            \
        do {                                                                            \
                if (!(cond)) {                                                          \
                        fprintf(stderr, "%s:%d: assertion %s failed: ", __FILE__,      \
                                __LINE__, #cond);                                       \
                        fprintf(stderr, __VA_ARGS__);                                   \
                        fputc('\n', stderr);                                            \
                        exit(1);                                                        \
                }                                                                       \
        } while (0)

static inline uint64_t ct_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void ct_setup(CUdevice *dev, CUcontext *ctx)
{
        CT_CHECK(cuInit(0));
        CT_CHECK(cuDeviceGet(dev, 0));
        CT_CHECK(cuDevicePrimaryCtxRetain(ctx, *dev));
        CT_CHECK(cuCtxSetCurrent(*ctx));
}

struct ct_kernels {
        CUmodule mod;
        CUfunction busy; /* gs_busy(unsigned long long ns) */
        CUfunction fill; /* gs_fill(unsigned *p, unsigned v, size_t n) */
};

/* Reads f to its end into a NUL-terminated malloc'd buffer (not closing
 * it), or NULL when out of memory. */
static inline char *ct_read_stream(FILE *f)
{
        size_t cap = 1 << 16, n = 0;
        char *buf = malloc(cap + 1);
        while (buf) {
                size_t r = fread(buf + n, 1, cap - n, f);
                n += r;
                if (r == 0)
                        break;
                if (n == cap) {
                        char *nb = realloc(buf, cap * 2 + 1);
                        if (!nb) {
                                free(buf);
                                buf = NULL;
                                break;
                        }
                        buf = nb;
                        cap *= 2;
                }
        }
        if (buf)
                buf[n] = 0;
        return buf;
}

static inline char *ct_read_file(const char *path)
{
        FILE *f = fopen(path, "rb");
        if (!f)
                return NULL;
        char *buf = ct_read_stream(f);
        fclose(f);
        return buf;
}

static inline void ct_load_kernels(struct ct_kernels *k)
{
        const char *path = getenv("GS_KERNELS_PTX");
        CT_ASSERT(path && *path, "GS_KERNELS_PTX is not set");
        char *ptx = ct_read_file(path);
        CT_ASSERT(ptx, "cannot read %s", path);
        CT_CHECK(cuModuleLoadData(&k->mod, ptx));
        free(ptx);
        CT_CHECK(cuModuleGetFunction(&k->busy, k->mod, "gs_busy"));
        CT_CHECK(cuModuleGetFunction(&k->fill, k->mod, "gs_fill"));
}

static inline CUresult ct_busy(const struct ct_kernels *k, CUstream s, unsigned long long ns)
{
        void *args[] = { &ns };
        return cuLaunchKernel(k->busy, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

static inline CUresult ct_fill(const struct ct_kernels *k, CUstream s, CUdeviceptr p,
                               unsigned v, size_t n)
{
        void *args[] = { &p, &v, &n };
        return cuLaunchKernel(k->fill, 256, 1, 1, 256, 1, 1, 0, s, args, NULL);
}

/* --- simgpu ground truth through `simgpu-smi --json` --- */

struct ct_smi_proc {
        long pid;
        int device;
        int alive;
        unsigned long long used_bytes;
        unsigned long long busy_ns;
        int contexts;
};

struct ct_smi_dev {
        int index;
        unsigned long long total, used, busy_ns, sim_time_ns;
};

static inline const char *ct_json_num(const char *line, const char *key, unsigned long long *v)
{
        char pat[64];
        snprintf(pat, sizeof(pat), "\"%s\": ", key);
        const char *p = strstr(line, pat);
        if (!p)
                return NULL;
        p += strlen(pat);
        if (*p == 't' || *p == 'f') {
                *v = *p == 't';
                return p;
        }
        char *end = NULL;
        errno = 0;
        *v = strtoull(p, &end, 10);
        return errno || end == p ? NULL : end;
}

/* Runs simgpu-smi --json (path from $SIMGPU_SMI) and returns its output
 * (malloc'd), or NULL. */
static inline char *ct_smi_json(void)
{
        const char *smi = getenv("SIMGPU_SMI");
        CT_ASSERT(smi && *smi, "SIMGPU_SMI is not set");
        char cmd[4200];
        snprintf(cmd, sizeof(cmd), "'%s' --json", smi);
        FILE *f = popen(cmd, "r");
        if (!f)
                return NULL;
        char *buf = ct_read_stream(f);
        int st = pclose(f);
        if (st != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* One process's figures on one device (0 found, -1 not listed). Every
 * process record is one line of the JSON with "pid". */
static inline int ct_smi_proc(pid_t pid, int dev, struct ct_smi_proc *out)
{
        char *js = ct_smi_json();
        CT_ASSERT(js, "simgpu-smi --json failed");
        int rc = -1;
        char *save = NULL;
        for (char *line = strtok_r(js, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                unsigned long long v;
                if (!ct_json_num(line, "pid", &v) || (pid_t)v != pid)
                        continue;
                unsigned long long d = 0;
                ct_json_num(line, "device", &d);
                if ((int)d != dev)
                        continue;
                memset(out, 0, sizeof(*out));
                out->pid = (long)v;
                out->device = (int)d;
                if (ct_json_num(line, "alive", &v))
                        out->alive = (int)v;
                ct_json_num(line, "used_bytes", &out->used_bytes);
                ct_json_num(line, "busy_ns", &out->busy_ns);
                if (ct_json_num(line, "contexts", &v))
                        out->contexts = (int)v;
                rc = 0;
                break;
        }
        free(js);
        return rc;
}

static inline int ct_smi_dev(int dev, struct ct_smi_dev *out)
{
        char *js = ct_smi_json();
        CT_ASSERT(js, "simgpu-smi --json failed");
        int rc = -1;
        char *save = NULL;
        for (char *line = strtok_r(js, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                unsigned long long v;
                if (strstr(line, "\"pid\"") || !ct_json_num(line, "index", &v) || (int)v != dev)
                        continue;
                memset(out, 0, sizeof(*out));
                out->index = dev;
                ct_json_num(line, "memory_total", &out->total);
                ct_json_num(line, "memory_used", &out->used);
                ct_json_num(line, "busy_ns", &out->busy_ns);
                ct_json_num(line, "sim_time_ns", &out->sim_time_ns);
                rc = 0;
                break;
        }
        free(js);
        return rc;
}

#endif /* GS_TESTS_CUDATEST_H */
