/* NVML inventory for gpuslice-kubelet-plugin --nvml: dlopen
 * libnvidia-ml.so.1 (from a directory such as simgpu's, or the system),
 * read each GPU's UUID and memory; a GPU whose queries fail (lost) is listed
 * unhealthy under a stable placeholder uuid when its UUID is unreadable. */
#include "plugin_nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <gpuslice/nvml.h>

struct plugin_nvml {
        void *lib;
        __typeof__(&nvmlInit_v2) init;
        __typeof__(&nvmlShutdown) shutdown;
        __typeof__(&nvmlDeviceGetCount_v2) count;
        __typeof__(&nvmlDeviceGetHandleByIndex_v2) handle;
        __typeof__(&nvmlDeviceGetUUID) uuid;
        __typeof__(&nvmlDeviceGetMemoryInfo) memory;
        char last_uuid[GS_MAX_GPUS][GS_GPU_UUID_MAX];
        uint64_t last_memory[GS_MAX_GPUS];
};

int plugin_nvml_open(const char *dir, struct plugin_nvml **ret, struct gs_error **err)
{
        char path[4096];
        if (dir)
                snprintf(path, sizeof(path), "%s/libnvidia-ml.so.1", dir);
        else
                snprintf(path, sizeof(path), "libnvidia-ml.so.1");
        struct plugin_nvml *n = calloc(1, sizeof(*n));
        if (!n)
                return gs_error_set(err, -ENOMEM, "out of memory");
        n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!n->lib) {
                free(n);
                return gs_error_set(err, -ENOENT, "cannot load %s: %s", path, dlerror());
        }
#define SYM(f, name)                                                                           \
        do {                                                                                   \
                *(void **)&n->f = dlsym(n->lib, name);                                         \
                if (!n->f) {                                                                   \
                        dlclose(n->lib);                                                       \
                        free(n);                                                               \
                        return gs_error_set(err, -ENOENT, "%s: no symbol %s", path, name);     \
                }                                                                              \
        } while (0)
        SYM(init, "nvmlInit_v2");
        SYM(shutdown, "nvmlShutdown");
        SYM(count, "nvmlDeviceGetCount_v2");
        SYM(handle, "nvmlDeviceGetHandleByIndex_v2");
        SYM(uuid, "nvmlDeviceGetUUID");
        SYM(memory, "nvmlDeviceGetMemoryInfo");
#undef SYM
        nvmlReturn_t r = n->init();
        if (r != NVML_SUCCESS) {
                dlclose(n->lib);
                free(n);
                return gs_error_set(err, -EIO, "nvmlInit failed: %d", (int)r);
        }
        *ret = n;
        return 0;
}

void plugin_nvml_close(struct plugin_nvml *n)
{
        if (!n)
                return;
        n->shutdown();
        dlclose(n->lib);
        free(n);
}

int plugin_nvml_inventory(void *ctx, struct gs_inventory *inv, struct gs_error **err)
{
        struct plugin_nvml *n = ctx;
        unsigned count = 0;
        nvmlReturn_t r = n->count(&count);
        if (r != NVML_SUCCESS)
                return gs_error_set(err, -EIO, "nvmlDeviceGetCount failed: %d", (int)r);
        if (count > GS_MAX_GPUS)
                count = GS_MAX_GPUS;
        for (unsigned i = 0; i < count; i++) {
                struct gs_gpu *g = &inv->gpus[i];
                memset(g, 0, sizeof(*g));
                g->index = i;
                nvmlDevice_t dev;
                nvmlMemory_t mem;
                bool ok = n->handle(i, &dev) == NVML_SUCCESS &&
                          n->uuid(dev, g->uuid, sizeof(g->uuid)) == NVML_SUCCESS &&
                          n->memory(dev, &mem) == NVML_SUCCESS;
                if (ok) {
                        g->memory_total = mem.total;
                        snprintf(n->last_uuid[i], sizeof(n->last_uuid[i]), "%s", g->uuid);
                        n->last_memory[i] = mem.total;
                } else {
                        /* Lost: keep what we knew so the units keep their GPU. */
                        if (n->last_uuid[i][0])
                                snprintf(g->uuid, sizeof(g->uuid), "%s", n->last_uuid[i]);
                        else
                                snprintf(g->uuid, sizeof(g->uuid), "unknown-gpu-%u", i);
                        g->memory_total = n->last_memory[i];
                }
                g->healthy = ok;
        }
        inv->n_gpus = count;
        return 0;
}
