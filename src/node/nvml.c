/* SPDX-License-Identifier: Apache-2.0 */
/* NVML (and, for one measurement, libcuda) loaded with dlopen. Every
 * function pointer is declared with typeof against the project's NVML
 * header and cuda.h, so the compiler checks each signature. */
#include "nvml.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>
#include <gpuslice/nvml.h>

#include "log.h"
#include "macro.h"
#include "number.h"

struct nvml {
        void *lib;
        __typeof__(&nvmlInit_v2) init;
        __typeof__(&nvmlShutdown) shutdown;
        __typeof__(&nvmlDeviceGetCount_v2) count;
        __typeof__(&nvmlDeviceGetHandleByIndex_v2) handle;
        __typeof__(&nvmlDeviceGetUUID) uuid;
        __typeof__(&nvmlDeviceGetName) name;
        __typeof__(&nvmlDeviceGetMemoryInfo) meminfo;
        __typeof__(&nvmlDeviceGetComputeRunningProcesses_v3) procs;
        __typeof__(&nvmlErrorString) errstr;
        __typeof__(&nvmlDeviceGetPciInfo_v3) pci;
        __typeof__(&nvmlDeviceGetProcessUtilization) putil;
        __typeof__(&nvmlDeviceGetUtilizationRates) util;
        char sysfs[PATH_MAX];
};

#define NVML_MAX_PROCS 1024 /* processes read per GPU */

#define LOAD(lib, ptr, sym) ((ptr) = (__typeof__(ptr))dlsym((lib), (sym)))

static const char *nerr(const struct nvml *n, nvmlReturn_t r)
{
        return n->errstr ? n->errstr(r) : "NVML error";
}

void nvml_close(struct nvml *n)
{
        if (!n)
                return;
        if (n->shutdown)
                n->shutdown();
        if (n->lib)
                dlclose(n->lib);
        free(n);
}

int nvml_open(const char *sim_dir, struct nvml **ret, struct gs_error **err)
{
        char path[PATH_MAX + 32];
        if (sim_dir)
                snprintf(path, sizeof(path), "%s/libnvidia-ml.so.1", sim_dir);
        else
                snprintf(path, sizeof(path), "libnvidia-ml.so.1");
        struct nvml *n = calloc(1, sizeof(*n));
        if (!n)
                return gs_error_set(err, -ENOMEM, "out of memory");
        n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!n->lib) {
                const char *why = dlerror();
                free(n);
                if (sim_dir)
                        return gs_error_set(err, -ENOENT,
                                            "--sim: cannot load simgpu's %s (%s); build simgpu or "
                                            "set GPUSLICE_SIM_LIBDIR",
                                            path, why ? why : "unknown");
                return gs_error_set(err, -ENOENT,
                                    "no NVIDIA driver found: libnvidia-ml.so.1 is not loadable (%s). "
                                    "Install the NVIDIA driver, or try gpuslice on simulated GPUs "
                                    "with --sim (gpusliced --sim, gpuslice run --sim ...)",
                                    why ? why : "unknown");
        }
        LOAD(n->lib, n->init, "nvmlInit_v2");
        LOAD(n->lib, n->shutdown, "nvmlShutdown");
        LOAD(n->lib, n->count, "nvmlDeviceGetCount_v2");
        LOAD(n->lib, n->handle, "nvmlDeviceGetHandleByIndex_v2");
        LOAD(n->lib, n->uuid, "nvmlDeviceGetUUID");
        LOAD(n->lib, n->name, "nvmlDeviceGetName");
        LOAD(n->lib, n->meminfo, "nvmlDeviceGetMemoryInfo");
        LOAD(n->lib, n->procs, "nvmlDeviceGetComputeRunningProcesses_v3");
        LOAD(n->lib, n->errstr, "nvmlErrorString");
        LOAD(n->lib, n->pci, "nvmlDeviceGetPciInfo_v3");
        LOAD(n->lib, n->putil, "nvmlDeviceGetProcessUtilization");
        LOAD(n->lib, n->util, "nvmlDeviceGetUtilizationRates");
        snprintf(n->sysfs, sizeof(n->sysfs), "/sys");
        if (!n->init || !n->shutdown || !n->count || !n->handle || !n->uuid || !n->meminfo) {
                dlclose(n->lib);
                free(n);
                return gs_error_set(err, -ENOSYS, "%s lacks the NVML functions gpusliced needs", path);
        }
        nvmlReturn_t r = n->init();
        if (r != NVML_SUCCESS) {
                struct gs_error *e = NULL;
                gs_error_set(&e, -EIO, "NVML failed to initialise: %s", nerr(n, r));
                n->shutdown = NULL;
                nvml_close(n);
                *err = e;
                return -EIO;
        }
        *ret = n;
        return 0;
}

void nvml_set_sysfs_root(struct nvml *n, const char *root)
{
        snprintf(n->sysfs, sizeof(n->sysfs), "%s", root);
}

/* The NUMA node of the GPU's PCI device, from sysfs (-1 there: none). */
static void read_numa(const struct nvml *n, nvmlDevice_t dev, struct gs_gpu *g)
{
        nvmlPciInfo_t pci;
        if (!n->pci || n->pci(dev, &pci) != NVML_SUCCESS)
                return;
        char path[PATH_MAX + 64], buf[32];
        snprintf(path, sizeof(path), "%s/bus/pci/devices/%04x:%02x:%02x.0/numa_node", n->sysfs,
                 pci.domain & 0xffffu, pci.bus & 0xffu, pci.device & 0x1fu);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        ssize_t len = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (len <= 0)
                return;
        buf[len] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        uint64_t node;
        if (gs_u64_parse_str(buf, 1023, &node) == 0) { /* "-1": no NUMA */
                g->numa_known = true;
                g->numa_node = (unsigned)node;
        }
}

int nvml_read_inventory(struct nvml *n, struct gs_inventory *inv, struct gs_error **err)
{
        unsigned count = 0;
        nvmlReturn_t r = n->count(&count);
        if (r != NVML_SUCCESS)
                return gs_error_set(err, -EIO, "NVML cannot count GPUs: %s", nerr(n, r));
        if (count > GS_MAX_GPUS) {
                gs_log_warn("%u GPUs found; managing the first %d", count, GS_MAX_GPUS);
                count = GS_MAX_GPUS;
        }
        memset(inv, 0, sizeof(*inv));
        for (unsigned i = 0; i < count; i++) {
                struct gs_gpu *g = &inv->gpus[i];
                nvmlDevice_t dev;
                nvmlMemory_t mem;
                g->index = i;
                g->context_overhead = GS_DEFAULT_CONTEXT_OVERHEAD;
                g->healthy = n->handle(i, &dev) == NVML_SUCCESS &&
                             n->uuid(dev, g->uuid, sizeof(g->uuid)) == NVML_SUCCESS &&
                             n->meminfo(dev, &mem) == NVML_SUCCESS;
                if (g->healthy) {
                        g->memory_total = mem.total;
                        read_numa(n, dev, g);
                        if (!n->name || n->name(dev, g->name, sizeof(g->name)) != NVML_SUCCESS)
                                snprintf(g->name, sizeof(g->name), "unknown");
                } else {
                        gs_log_warn("GPU %u does not answer NVML queries: marked unhealthy", i);
                        if (!g->uuid[0])
                                snprintf(g->uuid, sizeof(g->uuid), "GPU-unknown-%u", i);
                }
                /* Names and UUIDs reach logs, the protocol and the ledger. */
                for (char *p = g->name; *p; p++)
                        if ((unsigned char)*p < 0x20)
                                *p = '?';
                for (char *p = g->uuid; *p; p++)
                        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                              (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
                                *p = '_';
        }
        inv->n_gpus = count;
        return 0;
}

int nvml_gpu_memory_used(struct nvml *n, unsigned index, uint64_t *ret)
{
        nvmlDevice_t dev;
        nvmlMemory_t mem;
        if (n->handle(index, &dev) != NVML_SUCCESS || n->meminfo(dev, &mem) != NVML_SUCCESS)
                return -EIO;
        *ret = mem.used;
        return 0;
}

int nvml_gpu_utilisation(struct nvml *n, unsigned index, unsigned *ret)
{
        if (!n->util)
                return -ENOSYS;
        nvmlDevice_t dev;
        nvmlUtilization_t u;
        if (n->handle(index, &dev) != NVML_SUCCESS || n->util(dev, &u) != NVML_SUCCESS)
                return -EIO;
        *ret = u.gpu > 100 ? 100 : u.gpu;
        return 0;
}

int nvml_process_memory(struct nvml *n, unsigned index, pid_t pid, uint64_t *ret)
{
        nvmlDevice_t dev;
        nvmlProcessInfo_t infos[256];
        unsigned cnt = GS_ARRAY_SIZE(infos);
        if (!n->procs || n->handle(index, &dev) != NVML_SUCCESS ||
            n->procs(dev, &cnt, infos) != NVML_SUCCESS)
                return -EIO;
        uint64_t sum = 0;
        bool found = false;
        for (unsigned i = 0; i < cnt && i < GS_ARRAY_SIZE(infos); i++)
                if (infos[i].pid == (unsigned)pid) {
                        sum += infos[i].usedGpuMemory;
                        found = true;
                }
        if (!found)
                return -ENOENT;
        *ret = sum;
        return 0;
}

int nvml_gpu_processes(struct nvml *n, unsigned index, uint64_t last_seen_us,
                       struct nvml_proc *out, size_t max)
{
        nvmlDevice_t dev;
        static nvmlProcessInfo_t infos[NVML_MAX_PROCS];
        static nvmlProcessUtilizationSample_t samples[NVML_MAX_PROCS];
        unsigned cnt = NVML_MAX_PROCS;
        if (!n->procs || n->handle(index, &dev) != NVML_SUCCESS)
                return -EIO;
        nvmlReturn_t r = n->procs(dev, &cnt, infos);
        if (r == NVML_ERROR_INSUFFICIENT_SIZE)
                cnt = 0; /* more than NVML_MAX_PROCS: read none rather than guess */
        if (r != NVML_SUCCESS)
                return -EIO;
        size_t k = 0;
        for (unsigned i = 0; i < cnt && i < NVML_MAX_PROCS; i++) {
                size_t j = 0;
                while (j < k && out[j].pid != infos[i].pid)
                        j++;
                if (j == k) {
                        if (k == max)
                                continue;
                        out[k++] = (struct nvml_proc){ .pid = infos[i].pid, .util = -1 };
                }
                out[j].used += infos[i].usedGpuMemory;
        }
        unsigned ns = NVML_MAX_PROCS;
        if (n->putil && n->putil(dev, samples, &ns, last_seen_us) == NVML_SUCCESS)
                for (unsigned i = 0; i < ns && i < NVML_MAX_PROCS; i++)
                        for (size_t j = 0; j < k; j++)
                                if (out[j].pid == samples[i].pid)
                                        out[j].util = (int)(samples[i].smUtil > 100
                                                                    ? 100 : samples[i].smUtil);
        return (int)k;
}

/* ---- context overhead, measured in a child ---- */

struct cuda_fns {
        __typeof__(&cuInit) init;
        __typeof__(&cuDeviceGetCount) count;
        __typeof__(&cuDeviceGet) get;
        __typeof__(&cuDeviceGetUuid) uuid;
        __typeof__(&cuDevicePrimaryCtxRetain) retain;
        __typeof__(&cuDevicePrimaryCtxRelease) release;
        __typeof__(&cuCtxSetCurrent) set_current;
};

static void format_uuid(const CUuuid *u, char *buf, size_t size)
{
        const unsigned char *b = (const unsigned char *)u->bytes;
        snprintf(buf, size,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                 b[14], b[15]);
}

/* In the child: write "position overhead\n" per measured GPU to fd. */
static void measure_child(struct nvml *n, const char *sim_dir, const struct gs_inventory *inv,
                          int fd)
{
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s%slibcuda.so.1", sim_dir ? sim_dir : "", sim_dir ? "/" : "");
        unsetenv("CUDA_VISIBLE_DEVICES");
        void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!lib)
                return;
        struct cuda_fns f;
        LOAD(lib, f.init, "cuInit");
        LOAD(lib, f.count, "cuDeviceGetCount");
        LOAD(lib, f.get, "cuDeviceGet");
        LOAD(lib, f.uuid, "cuDeviceGetUuid_v2");
        if (!f.uuid)
                f.uuid = (__typeof__(f.uuid))dlsym(lib, "cuDeviceGetUuid");
        LOAD(lib, f.retain, "cuDevicePrimaryCtxRetain");
        LOAD(lib, f.release, "cuDevicePrimaryCtxRelease_v2");
        LOAD(lib, f.set_current, "cuCtxSetCurrent");
        int count = 0;
        if (!f.init || !f.count || !f.get || !f.retain || !f.release || !f.set_current ||
            f.init(0) != CUDA_SUCCESS || f.count(&count) != CUDA_SUCCESS)
                return;
        for (int ord = 0; ord < count; ord++) {
                CUdevice dev;
                CUcontext ctx;
                CUuuid uuid;
                char ustr[64] = "";
                if (f.get(&dev, ord) != CUDA_SUCCESS)
                        continue;
                if (f.uuid && f.uuid(&uuid, dev) == CUDA_SUCCESS)
                        format_uuid(&uuid, ustr, sizeof(ustr));
                int pos = -1;
                for (unsigned i = 0; i < inv->n_gpus; i++)
                        if (strcmp(inv->gpus[i].uuid, ustr) == 0)
                                pos = (int)i;
                if (pos < 0 && (unsigned)count == inv->n_gpus)
                        pos = ord; /* no UUID: CUDA and NVML agree on order by default */
                if (pos < 0 || f.retain(&ctx, dev) != CUDA_SUCCESS)
                        continue;
                f.set_current(ctx);
                uint64_t used = 0;
                if (nvml_process_memory(n, inv->gpus[pos].index, getpid(), &used) == 0 && used > 0)
                        dprintf(fd, "%d %" PRIu64 "\n", pos, used);
                f.set_current(NULL);
                f.release(dev);
        }
}

void nvml_measure_overhead(struct nvml *n, const char *sim_dir, struct gs_inventory *inv)
{
        int p[2];
        if (inv->n_gpus == 0 || pipe2(p, O_CLOEXEC) < 0)
                return;
        pid_t child = fork();
        if (child < 0) {
                close(p[0]);
                close(p[1]);
                return;
        }
        if (child == 0) {
                close(p[0]);
                measure_child(n, sim_dir, inv, p[1]);
                _exit(0);
        }
        close(p[1]);
        char buf[4096];
        size_t len = 0;
        /* Bounded: a hung driver costs start-up 10 s, not forever. */
        for (;;) {
                struct pollfd pfd = { .fd = p[0], .events = POLLIN };
                if (poll(&pfd, 1, 10000) <= 0) {
                        kill(child, SIGKILL);
                        gs_log_warn("context overhead measurement timed out");
                        break;
                }
                ssize_t r = read(p[0], buf + len, sizeof(buf) - 1 - len);
                if (r <= 0)
                        break;
                len += (size_t)r;
                if (len == sizeof(buf) - 1)
                        break;
        }
        close(p[0]);
        waitpid(child, NULL, 0);
        buf[len] = '\0';
        for (char *line = buf; *line;) {
                char *nl = strchr(line, '\n');
                if (!nl)
                        break;
                *nl = '\0';
                uint64_t pos, v;
                const char *q = line;
                if (gs_u64_parse_prefix(q, GS_MAX_GPUS - 1, &pos, &q) == 0 && *q++ == ' ' &&
                    gs_u64_parse_str(q, UINT64_MAX, &v) == 0 && pos < inv->n_gpus) {
                        inv->gpus[pos].context_overhead = v;
                        inv->gpus[pos].overhead_measured = true;
                }
                line = nl + 1;
        }
}
