/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster-level placement of a pod onto a node and its GPU(s): pure policy,
 * no I/O, no globals. Used by the scheduler extender (filter: gs_cp_fits;
 * prioritize: gs_cp_score on every node that fits), by the node's gs_place
 * (the GPU choice inside one node) and by the placement benchmark.
 *
 * Units: GPU share in milli-GPU (1000 per GPU); GPU and host memory in
 * bytes; CPU in milli-cores. A pod is one of
 *   - CPU only: n_gpus == 0 (milli and gpu_memory ignored);
 *   - a share of one GPU: n_gpus == 1 and milli 1..999, on one GPU with at
 *     least milli free (and gpu_memory free where it asks for memory);
 *   - whole GPUs: n_gpus == 1 and milli == 1000, or n_gpus > 1 (milli is
 *     then ignored): that many GPUs of one node, each fully free.
 *
 * Policies (all choose among the nodes and GPUs where the pod fits):
 *   - first-fit: the first node in the caller's order, its first GPU(s);
 *     every fitting node scores the same, so the caller's order decides;
 *   - best-fit: the FGD paper's baseline, the node left with the least free
 *     resources after placement (weighted sum of the node's remaining GPU,
 *     CPU and host memory as shares of the node's capacity), and on that
 *     node the GPU with the least free share that fits;
 *   - fgd: Fragmentation Gradient Descent (Weng et al., USENIX ATC'23): the
 *     node's fragmentation is the expected GPU share (milli) that a pod
 *     drawn from the model's distribution could not use on that node;
 *     pick the node and GPU(s) whose placement increases it least;
 *   - gpuslice: gpuslice's own policy: the node and GPU(s) whose placement
 *     least increases the share expected to stay unallocated (each GPU's
 *     free share as the model's pods would fill it, plus free share that
 *     the node's free CPU or host memory cannot feed), ties to the fuller
 *     node and GPU; its model is learned online (see cluster_placement.c).
 *
 * Thread safety: every function here is reentrant; a model may be read
 * (gs_cp_score) by many threads at once but must not be changed
 * (gs_cp_model_observe) while anyone reads it. */
#ifndef GS_CLUSTER_PLACEMENT_H
#define GS_CLUSTER_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GS_CP_MAX_GPUS 16
#define GS_CP_MILLI_PER_GPU 1000u
/* A resource a caller does not track (the extender leaves CPU and host
 * memory to the kube-scheduler): never a reason not to fit. */
#define GS_CP_UNTRACKED UINT64_MAX

struct gs_cp_gpu {
        uint32_t free_milli;    /* 0..1000 */
        uint64_t free_memory;   /* bytes; ignored when total_memory is 0 */
        uint64_t total_memory;  /* bytes; 0: not known, memory never checked */
};

struct gs_cp_node {
        char model[32];         /* GPU model ("V100M16"); "" unknown (matches no list) */
        unsigned n_gpus;        /* 0..GS_CP_MAX_GPUS */
        struct gs_cp_gpu gpus[GS_CP_MAX_GPUS];
        /* Free and total CPU (milli-cores) and host memory (bytes), or
         * GS_CP_UNTRACKED in both free and total. Totals are only read by the
         * policies that weigh them (best-fit, gpuslice). */
        uint64_t free_cpu_milli, free_host_memory;
        uint64_t total_cpu_milli, total_host_memory;
};

struct gs_cp_pod {
        uint32_t milli;         /* share of one GPU, 1..1000, when n_gpus == 1 */
        unsigned n_gpus;        /* 0: CPU only; 1: one GPU (share or whole); >1: whole GPUs */
        uint64_t gpu_memory;    /* bytes per GPU; 0: none asked */
        uint64_t cpu_milli;     /* 0: none */
        uint64_t host_memory;   /* bytes; 0: none */
        const char *models;     /* allowed GPU models "A|B", NULL or "": any. Borrowed */
};

enum gs_cp_policy {
        GS_CP_FIRST_FIT = 0,
        GS_CP_BEST_FIT = 1,
        GS_CP_FGD = 2,
        GS_CP_GPUSLICE = 3,
};
#define GS_CP_N_POLICIES 4

/* The GPUs of one node a pod takes (positions in gs_cp_node.gpus); n == 0
 * for a CPU-only pod. */
struct gs_cp_choice {
        unsigned n;
        unsigned gpus[GS_CP_MAX_GPUS];
};

/* The workload distribution a policy packs for: weighted pod shapes (GPU
 * count, share, CPU, host memory, allowed models). fgd is given the trace's
 * whole pod list before the replay; gpuslice learns it online, one
 * gs_cp_model_observe per pod that arrives. first-fit and best-fit ignore
 * it. Opaque; at most a few thousand distinct shapes are kept, rarer ones
 * beyond that folded into the nearest kept shape. */
struct gs_cp_model;

/* A new, empty model, or NULL when out of memory. An empty model is valid:
 * fgd and gpuslice then fall back to a uniform distribution of GPU shares. */
struct gs_cp_model *gs_cp_model_new(void);

/* Free a model; accepts NULL; returns NULL. */
struct gs_cp_model *gs_cp_model_free(struct gs_cp_model *m);

/* Add one pod of p's shape (weight 1) to the distribution. p->models is
 * copied. 0, or -ENOMEM (the model is unchanged). */
int gs_cp_model_observe(struct gs_cp_model *m, const struct gs_cp_pod *p);

/* Keep only the most common shapes, as FGD's "typical pods" do: shapes
 * keyed by (GPU count, share, CPU, models), most frequent first, until they
 * account for at least `share` (0..1; the FGD simulator uses 0.95) of the
 * pods observed; the others are dropped. Later observations add shapes
 * again. */
void gs_cp_model_keep_popular(struct gs_cp_model *m, double share);

/* Number of pods observed so far. */
uint64_t gs_cp_model_count(const struct gs_cp_model *m);

/* Whether p can be placed on n at all: GPU model in p->models, CPU and host
 * memory (where tracked), one GPU with the share and memory (shares), or
 * enough fully free GPUs (whole GPUs). Pure. */
bool gs_cp_fits(const struct gs_cp_node *n, const struct gs_cp_pod *p);

/* Score of placing p on n under policy: 0 with *ret_score in [0,100]
 * (higher is better; comparable across nodes of one cluster for the same
 * pod and model) and *ret_choice the GPUs it would take; -ENOSPC when p
 * does not fit on n (outputs untouched); -EINVAL for a bad pod (share 0 or
 * over 1000, more GPUs than GS_CP_MAX_GPUS) or policy. m may be NULL for
 * first-fit and best-fit (and is then an empty model for the others).
 * Either output may be NULL. Pure: n and m are not changed. */
int gs_cp_score(enum gs_cp_policy policy, const struct gs_cp_model *m, const struct gs_cp_node *n,
                const struct gs_cp_pod *p, struct gs_cp_choice *ret_choice, double *ret_score);

/* Charge p to n on the GPUs of c (from gs_cp_score on this n and p): share
 * and GPU memory of each chosen GPU (a whole GPU: all of it), CPU and host
 * memory where tracked. Saturates at 0; does not check fit. */
void gs_cp_commit(struct gs_cp_node *n, const struct gs_cp_pod *p, const struct gs_cp_choice *c);

/* Fragmentation of n under m as fgd defines it: the expected free GPU
 * share (milli) that a pod drawn from m could not use on n. In
 * [0, 1000 * n_gpus]. For reports (the benchmark's fragmentation). */
double gs_cp_node_frag(const struct gs_cp_model *m, const struct gs_cp_node *n);

/* Parse "first-fit", "best-fit", "fgd", "gpuslice": 0, or -EINVAL. */
int gs_cp_policy_parse(const char *s, enum gs_cp_policy *ret);

/* The name gs_cp_policy_parse accepts for p ("?" for a bad value). */
const char *gs_cp_policy_name(enum gs_cp_policy p);

#ifdef __cplusplus
}
#endif

#endif /* GS_CLUSTER_PLACEMENT_H */
