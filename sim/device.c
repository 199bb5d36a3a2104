/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libcuda: initialisation, devices and their attributes. */
#include "sim_cuda.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sim_global sim_g = { .once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER };

/* CUDA_VISIBLE_DEVICES as the real driver reads it: a comma-separated list of
 * indices or GPU-UUID prefixes; parsing stops at the first invalid or
 * duplicate entry; an unset variable shows every device. */
static void parse_visible(void)
{
        const struct sim_state *st = sim_g.st;
        const char *v = getenv("CUDA_VISIBLE_DEVICES");
        sim_g.nvis = 0;
        if (!v) {
                for (unsigned i = 0; i < st->ndev; i++)
                        sim_g.vis[sim_g.nvis++] = (int)i;
                return;
        }
        char buf[1024];
        snprintf(buf, sizeof(buf), "%s", v);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok && sim_g.nvis < SIM_MAX_DEVICES;
             tok = strtok_r(NULL, ",", &save)) {
                while (*tok == ' ')
                        tok++;
                int phys = -1;
                if (strncmp(tok, "GPU-", 4) == 0) {
                        size_t len = strlen(tok);
                        for (unsigned i = 0; i < st->ndev; i++) {
                                if (strncmp(st->dev[i].uuid, tok, len) == 0) {
                                        if (phys >= 0) { /* ambiguous prefix */
                                                phys = -1;
                                                break;
                                        }
                                        phys = (int)i;
                                }
                        }
                } else if (*tok >= '0' && *tok <= '9') {
                        const char *end = NULL;
                        uint64_t x;
                        if (sim_parse_u64_prefix(tok, &x, &end) == 0 &&
                            (*end == 0 || *end == ' ') && x < st->ndev)
                                phys = (int)x;
                }
                if (phys < 0)
                        break;
                for (int k = 0; k < sim_g.nvis; k++)
                        if (sim_g.vis[k] == phys)
                                phys = -1;
                if (phys < 0)
                        break;
                sim_g.vis[sim_g.nvis++] = phys;
        }
}

static CUresult map_err(int r)
{
        switch (r) {
        case SIM_E_CONFIG: return CUDA_ERROR_INVALID_VALUE;
        case SIM_E_MISMATCH: return CUDA_ERROR_SYSTEM_DRIVER_MISMATCH;
        case SIM_E_FULL: return CUDA_ERROR_OUT_OF_MEMORY;
        default: return CUDA_ERROR_OPERATING_SYSTEM;
        }
}

static void do_init(void)
{
        int r = sim_config_load(&sim_g.cfg);
        if (r == 0)
                r = sim_state_attach(&sim_g.att, &sim_g.cfg, true);
        if (r) {
                sim_g.init_rc = map_err(r);
                return;
        }
        sim_g.st = sim_g.att.st;
        sim_lock(sim_g.st);
        sim_reap(sim_g.st, true);
        r = sim_proc_register(sim_g.st, sim_g.att.fd);
        sim_unlock(sim_g.st);
        if (r < 0) {
                sim_log("no free process slot (%d processes)", SIM_MAX_PROCS);
                sim_g.init_rc = map_err(r);
                return;
        }
        sim_g.proc = r;
        sim_g.pid = getpid();
        parse_visible();
        if (sim_g.nvis == 0) {
                sim_g.init_rc = CUDA_ERROR_NO_DEVICE;
                return;
        }
        sim_g.init_rc = CUDA_SUCCESS;
        __atomic_store_n(&sim_g.inited, 1, __ATOMIC_RELEASE);
}

void sim_obj_add(struct sim_link *l)
{
        pthread_mutex_lock(&sim_g.mu);
        if (!sim_g.objs.next)
                sim_g.objs.next = sim_g.objs.prev = &sim_g.objs;
        l->next = sim_g.objs.next;
        l->prev = &sim_g.objs;
        sim_g.objs.next->prev = l;
        sim_g.objs.next = l;
        pthread_mutex_unlock(&sim_g.mu);
}

void sim_obj_del(struct sim_link *l)
{
        pthread_mutex_lock(&sim_g.mu);
        if (l->next) {
                l->prev->next = l->next;
                l->next->prev = l->prev;
                l->next = l->prev = NULL;
        }
        pthread_mutex_unlock(&sim_g.mu);
}

/* A forked child is a new process to simgpu: it starts uninitialised, with
 * no contexts, and registers itself at its own cuInit. (The real driver
 * refuses CUDA in such a child; being lenient keeps fork-based tests simple.) */
static void atfork_child(void)
{
        sim_state_detach(&sim_g.att);
        pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
        memcpy(&sim_g.once, &once, sizeof(once));
        memcpy(&sim_g.mu, &mu, sizeof(mu));
        __atomic_store_n(&sim_g.inited, 0, __ATOMIC_RELAXED);
        sim_g.init_rc = CUDA_SUCCESS;
        sim_g.st = NULL;
        memset(sim_g.primary, 0, sizeof(sim_g.primary));
        memset(sim_g.primary_refs, 0, sizeof(sim_g.primary_refs));
        sim_g.ctxs = NULL;
        memset(sim_g.default_pool, 0, sizeof(sim_g.default_pool));
        memset(sim_g.cur_pool, 0, sizeof(sim_g.cur_pool));
        sim_g.pools = NULL;
        sim_g.objs.next = sim_g.objs.prev = NULL;
        sim_mem_forget();
        sim_ipc_forget();
        sim_ctx_tls_forget();
}

__attribute__((constructor)) static void register_atfork(void)
{
        sim_g.att.fd = -1;
        pthread_atfork(NULL, NULL, atfork_child);
}

SIM_EXPORT CUresult cuInit(unsigned int flags)
{
        if (flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_once(&sim_g.once, do_init);
        return sim_g.init_rc;
}

SIM_EXPORT CUresult cuDriverGetVersion(int *v)
{
        if (!v)
                return CUDA_ERROR_INVALID_VALUE;
        *v = SIM_DRIVER_VERSION;
        return CUDA_SUCCESS;
}

int sim_dev_phys(CUdevice ordinal)
{
        if (ordinal < 0 || ordinal >= sim_g.nvis)
                return -1;
        return sim_g.vis[ordinal];
}

SIM_EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
        SIM_NEED_INIT();
        if (!dev)
                return CUDA_ERROR_INVALID_VALUE;
        if (sim_dev_phys(ordinal) < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        *dev = ordinal;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetCount(int *count)
{
        SIM_NEED_INIT();
        if (!count)
                return CUDA_ERROR_INVALID_VALUE;
        *count = sim_g.nvis;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
        SIM_NEED_INIT();
        int p = sim_dev_phys(dev);
        if (p < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        if (!name || len <= 0)
                return CUDA_ERROR_INVALID_VALUE;
        snprintf(name, (size_t)len, "%s", sim_g.st->dev[p].name);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
        SIM_NEED_INIT();
        int p = sim_dev_phys(dev);
        if (p < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        if (!uuid)
                return CUDA_ERROR_INVALID_VALUE;
        memcpy(uuid->bytes, sim_g.st->dev[p].uuid_bytes, 16);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
        return cuDeviceGetUuid_v2(uuid, dev);
}

SIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
        SIM_NEED_INIT();
        int p = sim_dev_phys(dev);
        if (p < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        if (!bytes)
                return CUDA_ERROR_INVALID_VALUE;
        *bytes = sim_g.st->dev[p].total;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
        size_t b = 0;
        CUresult r = cuDeviceTotalMem_v2(bytes ? &b : NULL, dev);
        if (r == CUDA_SUCCESS)
                *bytes = b > 0xffffffffu ? 0xffffffffu : (unsigned)b;
        return r;
}

SIM_EXPORT CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice dev)
{
        SIM_NEED_INIT();
        int p = sim_dev_phys(dev);
        if (p < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        if (!bus || len <= 0)
                return CUDA_ERROR_INVALID_VALUE;
        snprintf(bus, (size_t)len, "00000000:%02X:00.0", 0x10 + p);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *bus)
{
        SIM_NEED_INIT();
        if (!dev || !bus)
                return CUDA_ERROR_INVALID_VALUE;
        for (int o = 0; o < sim_g.nvis; o++) {
                char b[32];
                cuDeviceGetPCIBusId(b, sizeof(b), o);
                /* accept with or without the 8-digit domain */
                if (strcasecmp(b, bus) == 0 || strcasecmp(b + 4, bus) == 0) {
                        *dev = o;
                        return CUDA_SUCCESS;
                }
        }
        return CUDA_ERROR_INVALID_DEVICE;
}

static int attribute(CUdevice_attribute a, int phys)
{
        const struct sim_state *st = sim_g.st;
        switch (a) {
        case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
        case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
        case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
        case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
        case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
        case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
        case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
        case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
        case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
        case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
        case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
        case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
        case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
        case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
        case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return (int)st->sms;
        case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: return 0;
        case CU_DEVICE_ATTRIBUTE_INTEGRATED: return 0;
        case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: return CU_COMPUTEMODE_DEFAULT;
        case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
        case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
        case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return 0x10 + phys;
        case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: return 0;
        case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: return 0;
        case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: return 0;
        case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
        case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
        case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 50 << 20;
        case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
        case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
        case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
        case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
        case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
        case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
        case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
        case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
        case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: return 0;
        case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
        case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
        case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
        case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
        case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
        case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
        case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: return 32 << 20;
        default: return 0;
        }
}

SIM_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute a, CUdevice dev)
{
        SIM_NEED_INIT();
        int p = sim_dev_phys(dev);
        if (p < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        if (!pi || (int)a < 1 || a >= CU_DEVICE_ATTRIBUTE_MAX)
                return CUDA_ERROR_INVALID_VALUE;
        *pi = attribute(a, p);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
        SIM_NEED_INIT();
        if (sim_dev_phys(dev) < 0)
                return CUDA_ERROR_INVALID_DEVICE;
        if (!major || !minor)
                return CUDA_ERROR_INVALID_VALUE;
        *major = 9;
        *minor = 0;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGetExportTable(const void **table, const CUuuid *id)
{
        if (table)
                *table = NULL;
        return CUDA_ERROR_NOT_SUPPORTED;
}
