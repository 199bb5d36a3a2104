/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's view of the GPUs through NVML (the only way in), loaded with
 * dlopen so that gpusliced starts on machines without a driver and can be
 * pointed at simgpu. */
#ifndef GS_DAEMON_NVML_H
#define GS_DAEMON_NVML_H

#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "inventory.h"

struct nvml;

/* Load and initialise libnvidia-ml.so.1: from directory sim_dir when it is
 * non-NULL (simgpu), else from the system. On failure *err says which
 * library could not be loaded and how to use the simulator. */
int nvml_open(const char *sim_dir, struct nvml **ret, struct gs_error **err);

/* Shut NVML down and unload it; NULL-safe. */
void nvml_close(struct nvml *n);

/* Where NUMA nodes of PCI devices are read (default "/sys": its
 * bus/pci/devices/<domain:bus:dev.fn>/numa_node). For a test's fake tree. */
void nvml_set_sysfs_root(struct nvml *n, const char *root);

/* Read every GPU (index, UUID, name, memory, health, NUMA node). A GPU
 * that fails a query is listed as unhealthy; failing to count GPUs is an
 * error. */
int nvml_read_inventory(struct nvml *n, struct gs_inventory *inv, struct gs_error **err);

/* Device memory in use on the GPU with NVML index `index` (every process
 * and the driver's own), from nvmlDeviceGetMemoryInfo. 0, or -EIO. */
int nvml_gpu_memory_used(struct nvml *n, unsigned index, uint64_t *ret);

/* The GPU's utilisation in percent (0..100): the part of NVML's last
 * sample period (1/6 s to 1 s, by the driver) in which a kernel ran,
 * nvmlDeviceGetUtilizationRates' `gpu`. 0, -ENOSYS (this NVML lacks it) or
 * -EIO. No state is kept: safe outside the node's lock, as the other
 * queries here. */
int nvml_gpu_utilisation(struct nvml *n, unsigned index, unsigned *ret);

/* Device memory used by process `pid` on the GPU with NVML index `index`
 * (sum of its entries), from NVML's process list: the ground truth.
 * 0, -ENOENT (the process uses none), or another -errno. */
int nvml_process_memory(struct nvml *n, unsigned index, pid_t pid, uint64_t *ret);

/* One process on a GPU, as NVML sees it (nvml_gpu_processes). */
struct nvml_proc {
        uint32_t pid;
        uint64_t used; /* bytes: the sum of its entries */
        int util;      /* SM utilisation in percent over the sample window, -1 unknown */
};

/* Every process NVML lists on the GPU with NVML index `index`
 * (nvmlDeviceGetComputeRunningProcesses_v3), with its used memory, and its
 * utilisation from nvmlDeviceGetProcessUtilization since last_seen_us
 * (wall-clock microseconds; 0: NVML's own window) where NVML has samples.
 * At most `max` into out; returns their number, or -EIO when the list
 * cannot be read. Bounded: one call of each. */
int nvml_gpu_processes(struct nvml *n, unsigned index, uint64_t last_seen_us,
                       struct nvml_proc *out, size_t max);

/* Measure each GPU's CUDA context overhead once: a short-lived child
 * creates a context per GPU with libcuda and reads its own used memory from
 * NVML. GPUs it cannot measure get GS_DEFAULT_CONTEXT_OVERHEAD. Bounded to
 * a few seconds. */
void nvml_measure_overhead(struct nvml *n, const char *sim_dir, struct gs_inventory *inv);

#endif /* GS_DAEMON_NVML_H */
