/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libnvidia-ml.so.1: NVML over the shared state. These figures are
 * simgpu's ground truth (memory and device time per process), independent
 * of anything a preloaded shim counts. NVML ignores CUDA_VISIBLE_DEVICES,
 * like the real library. */
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include "gpuslice/nvml.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sim_state.h"

#define EXPORT __attribute__((visibility("default")))

struct nvmlDevice_st {
        unsigned index;
};

static struct nvmlDevice_st devs[SIM_MAX_DEVICES] = {
        { 0 }, { 1 }, { 2 }, { 3 }, { 4 }, { 5 }, { 6 }, { 7 },
        { 8 }, { 9 }, { 10 }, { 11 }, { 12 }, { 13 }, { 14 }, { 15 },
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int refs;
static struct sim_attach att = { .fd = -1 };

static nvmlReturn_t map_err(int r)
{
        switch (r) {
        case SIM_E_MISMATCH: return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
        case SIM_E_CONFIG: return NVML_ERROR_DRIVER_NOT_LOADED;
        default: return NVML_ERROR_DRIVER_NOT_LOADED;
        }
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
        nvmlReturn_t r = NVML_SUCCESS;
        pthread_mutex_lock(&mu);
        if (refs == 0) {
                struct sim_config cfg;
                int e = sim_config_load(&cfg);
                if (e == 0)
                        e = sim_state_attach(&att, &cfg, true);
                if (e)
                        r = map_err(e);
        }
        if (r == NVML_SUCCESS)
                refs++;
        pthread_mutex_unlock(&mu);
        return r;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

EXPORT nvmlReturn_t nvmlShutdown(void)
{
        nvmlReturn_t r = NVML_SUCCESS;
        pthread_mutex_lock(&mu);
        if (refs == 0)
                r = NVML_ERROR_UNINITIALIZED;
        else if (--refs == 0)
                sim_state_detach(&att);
        pthread_mutex_unlock(&mu);
        return r;
}

static struct sim_state *state(void)
{
        return __atomic_load_n(&refs, __ATOMIC_ACQUIRE) > 0 ? att.st : NULL;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
        switch (r) {
        case NVML_SUCCESS: return "Success";
        case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
        case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
        case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
        case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
        case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
        case NVML_ERROR_NOT_FOUND: return "Not Found";
        case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
        case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
        case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
        case NVML_ERROR_TIMEOUT: return "Timeout";
        case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
        case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
        case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
        case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
        case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
        case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
        case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request";
        case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch";
        case NVML_ERROR_IN_USE: return "In use by another client";
        case NVML_ERROR_MEMORY: return "Insufficient Memory";
        case NVML_ERROR_NO_DATA: return "No data";
        case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
        case NVML_ERROR_DEPRECATED: return "Deprecated";
        case NVML_ERROR_NOT_READY: return "Not Ready";
        case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
        case NVML_ERROR_INVALID_STATE: return "Invalid state";
        default: return "Unknown Error";
        }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len)
{
        if (!state())
                return NVML_ERROR_UNINITIALIZED;
        if (!v)
                return NVML_ERROR_INVALID_ARGUMENT;
        static const char ver[] = "580.65.06";
        if (len < sizeof(ver))
                return NVML_ERROR_INSUFFICIENT_SIZE;
        memcpy(v, ver, sizeof(ver));
        return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *v, unsigned int len)
{
        if (!v)
                return NVML_ERROR_INVALID_ARGUMENT;
        static const char ver[] = "13.580.65.06";
        if (len < sizeof(ver))
                return NVML_ERROR_INSUFFICIENT_SIZE;
        memcpy(v, ver, sizeof(ver));
        return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
        if (!v)
                return NVML_ERROR_INVALID_ARGUMENT;
        *v = 13000;
        return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
        return nvmlSystemGetCudaDriverVersion_v2(v);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
        struct sim_state *st = state();
        if (!st)
                return NVML_ERROR_UNINITIALIZED;
        if (!n)
                return NVML_ERROR_INVALID_ARGUMENT;
        *n = st->ndev;
        return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *n) { return nvmlDeviceGetCount_v2(n); }

/* Validates a handle; returns the device index or -1 with *r set. */
static int dev_of(nvmlDevice_t d, nvmlReturn_t *r)
{
        struct sim_state *st = state();
        if (!st) {
                *r = NVML_ERROR_UNINITIALIZED;
                return -1;
        }
        if (d < &devs[0] || d >= &devs[SIM_MAX_DEVICES] || d->index >= st->ndev) {
                *r = NVML_ERROR_INVALID_ARGUMENT;
                return -1;
        }
        if (__atomic_load_n(&st->dev[d->index].lost, __ATOMIC_RELAXED)) {
                *r = NVML_ERROR_GPU_IS_LOST;
                return -1;
        }
        return (int)d->index;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *out)
{
        struct sim_state *st = state();
        if (!st)
                return NVML_ERROR_UNINITIALIZED;
        if (!out || i >= st->ndev)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (st->dev[i].lost)
                return NVML_ERROR_GPU_IS_LOST;
        *out = &devs[i];
        return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *out)
{
        return nvmlDeviceGetHandleByIndex_v2(i, out);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *out)
{
        struct sim_state *st = state();
        if (!st)
                return NVML_ERROR_UNINITIALIZED;
        if (!uuid || !out)
                return NVML_ERROR_INVALID_ARGUMENT;
        for (unsigned i = 0; i < st->ndev; i++)
                if (strcmp(st->dev[i].uuid, uuid) == 0) {
                        if (st->dev[i].lost)
                                return NVML_ERROR_GPU_IS_LOST;
                        *out = &devs[i];
                        return NVML_SUCCESS;
                }
        return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index)
{
        nvmlReturn_t r = NVML_SUCCESS;
        int i = dev_of(d, &r);
        if (i < 0)
                return r;
        if (!index)
                return NVML_ERROR_INVALID_ARGUMENT;
        *index = (unsigned)i;
        return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor)
{
        return nvmlDeviceGetIndex(d, minor);
}

static nvmlReturn_t copy_str(char *dst, unsigned len, const char *src)
{
        if (!dst)
                return NVML_ERROR_INVALID_ARGUMENT;
        size_t n = strlen(src);
        if (len <= n)
                return NVML_ERROR_INSUFFICIENT_SIZE;
        memcpy(dst, src, n + 1);
        return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len)
{
        nvmlReturn_t r = NVML_SUCCESS;
        int i = dev_of(d, &r);
        return i < 0 ? r : copy_str(name, len, att.st->dev[i].name);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len)
{
        nvmlReturn_t r = NVML_SUCCESS;
        int i = dev_of(d, &r);
        return i < 0 ? r : copy_str(uuid, len, att.st->dev[i].uuid);
}

/* Simulated GPU i sits at PCI 0000:(0x10 + i):00.0. */
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci)
{
        nvmlReturn_t r = NVML_SUCCESS;
        int i = dev_of(d, &r);
        if (i < 0)
                return r;
        if (!pci)
                return NVML_ERROR_INVALID_ARGUMENT;
        memset(pci, 0, sizeof(*pci));
        pci->domain = 0;
        pci->bus = 0x10u + (unsigned)i;
        pci->device = 0;
        pci->pciDeviceId = 0x233510DEu; /* an H100's id, vendor NVIDIA */
        snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "0000:%02X:00.0", pci->bus & 0xffu);
        snprintf(pci->busId, sizeof(pci->busId), "00000000:%02X:00.0", pci->bus & 0xffu);
        return NVML_SUCCESS;
}

static void mem_of(int i, unsigned long long *total, unsigned long long *used)
{
        struct sim_state *st = att.st;
        sim_lock(st);
        sim_reap_dev(st, i);
        *total = st->dev[i].total;
        *used = st->dev[i].used;
        sim_unlock(st);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
        nvmlReturn_t r = NVML_SUCCESS;
        int i = dev_of(d, &r);
        if (i < 0)
                return r;
        if (!m)
                return NVML_ERROR_INVALID_ARGUMENT;
        mem_of(i, &m->total, &m->used);
        m->free = m->used < m->total ? m->total - m->used : 0;
        return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
        nvmlReturn_t r = NVML_SUCCESS;
        int i = dev_of(d, &r);
        if (i < 0)
                return r;
        if (!m)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (m->version != nvmlMemory_v2)
                return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        mem_of(i, &m->total, &m->used);
        m->reserved = 0;
        m->free = m->used < m->total ? m->total - m->used : 0;
        return NVML_SUCCESS;
}

static unsigned pct(uint64_t busy, uint64_t span)
{
        if (span == 0)
                return 0;
        uint64_t p = (busy * 100 + span / 2) / span;
        return p > 100 ? 100 : (unsigned)p;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
        nvmlReturn_t r = NVML_SUCCESS;
        int i = dev_of(d, &r);
        if (i < 0)
                return r;
        if (!u)
                return NVML_ERROR_INVALID_ARGUMENT;
        struct sim_state *st = att.st;
        sim_lock(st);
        uint64_t now = sim_now_ns();
        sim_advance(st, i, now);
        uint64_t t0 = 0, b0 = sim_dev_busy_at(st, i, now > 1000000000ull ? now - 1000000000ull : 0, &t0);
        uint64_t b1 = st->dev[i].busy_ns;
        sim_unlock(st);
        u->gpu = pct(b1 - b0, now - t0);
        u->memory = u->gpu / 2;
        return NVML_SUCCESS;
}

/* Fills up to cap entries (pid, used) of processes with a context on dev.
 * Returns the number of such processes. */
static unsigned procs_of(int dev, unsigned cap, unsigned *pids, unsigned long long *used)
{
        struct sim_state *st = att.st;
        unsigned n = 0;
        sim_lock(st);
        sim_reap_dev(st, dev);
        for (int p = 0; p < sim_proc_slots(st); p++) {
                const struct sim_proc_rec *pr = &st->proc[p];
                if (pr->state != SIM_PROC_ALIVE || pr->nctx[dev] == 0)
                        continue;
                if (n < cap) {
                        pids[n] = (unsigned)pr->pid;
                        used[n] = pr->used[dev];
                }
                n++;
        }
        sim_unlock(st);
        return n;
}

#define PROC_LIST(T, fill_extra)                                                      \
        nvmlReturn_t r = NVML_SUCCESS;                                                \
        int i = dev_of(d, &r);                                                        \
        if (i < 0)                                                                    \
                return r;                                                             \
        if (!count)                                                                   \
                return NVML_ERROR_INVALID_ARGUMENT;                                   \
        unsigned pids[SIM_MAX_PROCS];                                                 \
        unsigned long long used[SIM_MAX_PROCS];                                       \
        unsigned n = procs_of(i, SIM_MAX_PROCS, pids, used);                          \
        if (n > *count || (n && !infos)) {                                            \
                *count = n;                                                           \
                return NVML_ERROR_INSUFFICIENT_SIZE;                                  \
        }                                                                             \
        for (unsigned k = 0; k < n; k++) {                                            \
                T *e = &infos[k];                                                     \
                memset(e, 0, sizeof(*e));                                             \
                e->pid = pids[k];                                                     \
                e->usedGpuMemory = used[k];                                           \
                fill_extra;                                                           \
        }                                                                             \
        *count = n;                                                                   \
        return NVML_SUCCESS

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *count,
                                                         nvmlProcessInfo_v1_t *infos)
{
        PROC_LIST(nvmlProcessInfo_v1_t, (void)0);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count,
                                                            nvmlProcessInfo_v2_t *infos)
{
        PROC_LIST(nvmlProcessInfo_v2_t, (e->gpuInstanceId = 0xffffffffu,
                                         e->computeInstanceId = 0xffffffffu));
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                            nvmlProcessInfo_t *infos)
{
        PROC_LIST(nvmlProcessInfo_t, (e->gpuInstanceId = 0xffffffffu,
                                      e->computeInstanceId = 0xffffffffu));
}

static uint64_t realtime_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d,
                                                    nvmlProcessUtilizationSample_t *samples,
                                                    unsigned int *count,
                                                    unsigned long long last_seen)
{
        nvmlReturn_t r = NVML_SUCCESS;
        int i = dev_of(d, &r);
        if (i < 0)
                return r;
        if (!count)
                return NVML_ERROR_INVALID_ARGUMENT;
        struct sim_state *st = att.st;
        uint64_t wall_us = realtime_us();
        sim_lock(st);
        uint64_t now = sim_now_ns();
        sim_reap_dev(st, i);
        sim_advance(st, i, now);
        /* the window: since last_seen (wall-clock us), at most the last second */
        uint64_t from = now > 1000000000ull ? now - 1000000000ull : 0;
        if (last_seen && last_seen < wall_us) {
                uint64_t ago = (wall_us - last_seen) * 1000;
                uint64_t t = now > ago ? now - ago : 0;
                if (t > from)
                        from = t;
        }
        unsigned n = 0;
        for (int p = 0; p < sim_proc_slots(st); p++) {
                const struct sim_proc_rec *pr = &st->proc[p];
                if (pr->state != SIM_PROC_ALIVE || pr->nctx[i] == 0)
                        continue;
                if (samples && n < *count) {
                        uint64_t t0 = 0, b0 = sim_proc_busy_at(st, p, i, from, &t0);
                        nvmlProcessUtilizationSample_t *s = &samples[n];
                        memset(s, 0, sizeof(*s));
                        s->pid = (unsigned)pr->pid;
                        s->timeStamp = wall_us;
                        s->smUtil = pct(pr->busy[i] - b0, now - t0);
                        s->memUtil = s->smUtil / 2;
                }
                n++;
        }
        sim_unlock(st);
        if (n == 0) {
                *count = 0;
                return NVML_ERROR_NOT_FOUND;
        }
        if (!samples || n > *count) {
                *count = n;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        *count = n;
        return NVML_SUCCESS;
}
