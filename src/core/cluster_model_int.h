/* SPDX-License-Identifier: Apache-2.0 */
/* Internal to cluster placement (cluster_placement.c, cluster_model.c):
 * the model's layout, which the policies read directly. */
#ifndef GS_CLUSTER_MODEL_INT_H
#define GS_CLUSTER_MODEL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster_placement.h"

struct cp_shape {
        uint64_t cpu, mem;   /* milli-cores, bytes */
        uint64_t count;
};

/* Shapes with the same GPU ask (k GPUs of milli each, allowed models). */
struct cp_group {
        unsigned k;          /* 0: CPU only */
        uint32_t milli;      /* per GPU; 1000 for whole GPUs, 0 for CPU only */
        char *models;        /* NULL: any */
        struct cp_shape *shapes;
        size_t n_shapes, cap;
};

struct gs_cp_model {
        struct cp_group *groups;
        size_t n_groups, cap;
        size_t n_shapes;
        uint64_t count;
        /* leftover[f]: expected share a GPU with f free is left with once
         * pods drawn from the model have filled it until none fits; valid
         * when leftover_count == count. */
        double leftover[GS_CP_MILLI_PER_GPU + 1];
        uint64_t leftover_count;
        /* GPU pods' CPU (milli-cores) and host memory (bytes) per milli-GPU
         * they ask, and the GPU share they ask in all (count x k x milli). */
        double cpu_per_milli, mem_per_milli, gpu_demand;
};

/* Whether a models list means "any GPU model" (NULL or ""). */
bool cp_models_empty(const char *s);

#endif /* GS_CLUSTER_MODEL_INT_H */
