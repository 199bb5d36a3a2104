/* SPDX-License-Identifier: Apache-2.0 */
/* Placement of slices on a node's GPUs (pure policy, no I/O).
 *
 * A slice (1m..999m) goes on exactly one healthy GPU with room for both its
 * share and its memory cap; whole-GPU requests (1000, 2000, ...) take that
 * many healthy GPUs that hold no slice. `binpack` (default) picks the GPU
 * with the least free share that fits (ties: least free memory, then lowest
 * index); `spread` picks the most free share (ties: most free memory, then
 * lowest index); `gpuslice` picks, among the GPUs that fit, the one the
 * cluster policy of the same name would (cluster_placement.h: the least
 * increase of the share expected to stay unallocated, against the
 * request's workload model, or uniform shares without one), so that the
 * node and the scheduler extender place by the same rule. */
#ifndef GS_PLACEMENT_H
#define GS_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster_placement.h"
#include "error.h"
#include "inventory.h"
#include "ledger.h"

enum gs_placement_policy {
        GS_PLACE_BINPACK = 0,
        GS_PLACE_SPREAD = 1,
        GS_PLACE_GPUSLICE = 2,
};

/* What is left on each GPU. */
struct gs_gpu_usage {
        uint32_t free_milli;
        uint64_t free_memory;
        unsigned n_slices;
};

struct gs_placement_request {
        uint32_t milli;       /* 1..999 or k*1000 */
        uint64_t memory;      /* bytes; 0 = default (share x GPU memory) */
        /* Hints. A preferred GPU that fits is taken before the policy's
         * choice (the kubelet's ids point at it); GPUs outside `allowed`
         * are never chosen (e.g. too few ids available on them). */
        bool prefer;
        unsigned preferred_gpu;   /* inventory position */
        uint64_t allowed;         /* bit i: position i may be chosen; 0: every GPU */
        /* gpuslice policy: the workload the choice packs for (borrowed);
         * NULL: uniform shares. Ignored by binpack and spread. */
        const struct gs_cp_model *model;
};

struct gs_placement {
        unsigned n_gpus;
        unsigned gpus[GS_SLICE_MAX_GPUS];   /* inventory positions */
        uint64_t memory_cap;                /* 0 for whole GPUs */
};

/* Parse "binpack" / "spread" / "gpuslice". 0, or -EINVAL with a message. */
int gs_placement_policy_parse(const char *s, enum gs_placement_policy *ret, struct gs_error **err);
const char *gs_placement_policy_name(enum gs_placement_policy p);

/* Fill usage[0..inv->n_gpus) from the ledger: slices whose GPU uuid is not
 * in the inventory are ignored. */
void gs_placement_usage(const struct gs_inventory *inv, const struct gs_ledger *l,
                        struct gs_gpu_usage *usage);

/* Choose GPUs for a request: the one placement decision of gpuslice, for
 * the local API, the device plugin's Allocate and preferred allocation, and
 * planning. 0 and *ret on success; -ENOSPC with a message showing each
 * GPU's free share and memory when nothing fits; -EINVAL for a request
 * that can never fit (bad share, more GPUs than exist or than a slice
 * holds, memory above every GPU's size, or a memory cap, explicit or the
 * share's default, not above any GPU's context overhead: the message says
 * the least share or memory that would work). A GPU where the cap would
 * not hold a context is never chosen. Does not change usage. */
int gs_place(const struct gs_inventory *inv, const struct gs_gpu_usage *usage,
             enum gs_placement_policy policy, const struct gs_placement_request *req,
             struct gs_placement *ret, struct gs_error **err);

/* Charge a placement to usage (for planning several slices at once). */
void gs_placement_commit(struct gs_gpu_usage *usage, const struct gs_placement_request *req,
                         const struct gs_placement *p);

/* Human form of a byte count with one decimal ("7.2Gi", "512.0Mi", "96Ki",
 * "100B"). Returns buf. */
char *gs_bytes_human(uint64_t bytes, char *buf, size_t size);

#endif /* GS_PLACEMENT_H */
