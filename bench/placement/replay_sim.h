/* SPDX-License-Identifier: Apache-2.0 */
/* One replay of a pod list on a node list under the FGD simulator's
 * protocol (see /work/shared/data/alibaba-gpu-v2023/README.md and
 * docs/scheduling.md): the list tuned to `tune` x the GPU capacity (copies
 * drawn with replacement, or pods removed at random), the originals
 * shuffled by the seed and the copies after them, pods placed one at a
 * time on the best-scoring node (ties: the lower node index), no
 * departures, a pod that fits nowhere fails. */
#ifndef GS_BENCH_REPLAY_SIM_H
#define GS_BENCH_REPLAY_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster_placement.h"
#include "trace.h"

/* Curve points: allocation at arrived demand 0%, 1%, ... 150% of capacity. */
#define SIM_CURVE_POINTS 151

struct sim_config {
        const struct trace_node *nodes;
        size_t n_nodes;
        const struct trace_pod *pods;
        size_t n_pods;
        double tune;                          /* 1.3 */
        const struct gs_cp_model *given;      /* fgd's model and the fragmentation metric's */
};

struct sim_result {
        double alloc_at_100;    /* % of GPU capacity allocated when arrived demand reached 100% */
        double alloc_max;       /* highest % reached */
        double frag_at_100;     /* sum of node fragmentation at 100%, % of capacity */
        double curve[SIM_CURVE_POINTS];
        size_t n_curve;         /* points filled (arrived demand reached) */
        size_t n_arrived, n_failed;
        double seconds;         /* CPU time of the whole replay */
        /* With time_scores: the CPU time (ns) of scoring every node for each
         * arriving pod; malloc'd, the caller frees. */
        uint64_t *score_ns;
        size_t n_score;
};

/* Total GPU capacity of the nodes in milli-GPU. */
uint64_t sim_capacity(const struct trace_node *nodes, size_t n);

/* Fill a gs_cp_pod from a trace pod (models borrow p->spec). */
void sim_pod_of(const struct trace_pod *p, struct gs_cp_pod *ret);

/* Run one replay. 0 and *ret, or -ENOMEM. */
int sim_run(const struct sim_config *c, enum gs_cp_policy policy, uint64_t seed,
            bool time_scores, struct sim_result *ret);

#endif /* GS_BENCH_REPLAY_SIM_H */
