/* SPDX-License-Identifier: Apache-2.0 */
/* The data model of a node's GPUs, as the daemon reads it from NVML (or
 * simgpu). Pure data: the node layer fills it (src/node/nvml.c), placement
 * and the local API read it. */
#ifndef GS_INVENTORY_H
#define GS_INVENTORY_H

#include <stdbool.h>
#include <stdint.h>

#define GS_MAX_GPUS 64
#define GS_GPU_UUID_MAX 96 /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
#define GS_GPU_NAME_MAX 96 /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */

/* Context overhead assumed when it cannot be measured (no libcuda, or the
 * driver does not report per-process memory): a typical CUDA 12/13 context. */
#define GS_DEFAULT_CONTEXT_OVERHEAD (256ull << 20)

struct gs_gpu {
        unsigned index;                 /* NVML index */
        char uuid[GS_GPU_UUID_MAX];     /* "GPU-…", the stable identity */
        char name[GS_GPU_NAME_MAX];
        uint64_t memory_total;          /* bytes */
        bool healthy;                   /* answered every NVML query */
        uint64_t context_overhead;      /* bytes per CUDA context */
        bool overhead_measured;         /* false: GS_DEFAULT_CONTEXT_OVERHEAD */
        bool numa_known;                /* the PCI device names its NUMA node */
        unsigned numa_node;
};

struct gs_inventory {
        struct gs_gpu gpus[GS_MAX_GPUS];
        unsigned n_gpus;
};

#endif /* GS_INVENTORY_H */
