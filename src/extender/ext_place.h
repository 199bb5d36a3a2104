/* SPDX-License-Identifier: Apache-2.0 */
/* A pod's slices on one node's report, through core's cluster placement
 * (cluster_placement.h): whether they fit, where the policy puts them, at
 * what score, and in words why not. Pure: no lock, no clock, no I/O; the
 * caller holds whatever guards the model. */
#ifndef GS_EXT_PLACE_H
#define GS_EXT_PLACE_H

#include <stdbool.h>
#include <stddef.h>

#include "cluster_placement.h"
#include "ext_admitted.h"
#include "ext_args.h"

/* A node's report as core's policy sees it; map[i] is the report's GPU
 * index of position i (the first GS_CP_MAX_GPUS GPUs). Unhealthy GPUs
 * count as full; CPU and host memory are the scheduler's, not tracked. */
struct ext_view {
        struct gs_cp_node node;
        unsigned map[GS_CP_MAX_GPUS];
        /* What the node's own choice (gs_place) reads beyond node: */
        enum gs_placement_policy placement;
        unsigned slices[GS_CP_MAX_GPUS];
        uint64_t overhead[GS_CP_MAX_GPUS];
        unsigned charged; /* record entries charged to it (for reasons) */
};

/* The view of a report. */
void ext_view_of(const struct ext_node_state *st, struct ext_view *ret);

/* Place p's slices on v one after the other in the kubelet's order (init
 * containers, then app containers), each on the GPU the node itself would
 * choose (binpack, as gs_place by default) given what the ones before
 * took: that prediction is what the record charges. With ret_score, each
 * slice is also scored by `policy` (m: the model, may be NULL for
 * first-fit and best-fit) and *ret_score is the mean (0..100). 0 with the
 * outputs (ret_charges[0..*ret_n), report indices; any may be NULL), or
 * -ENOSPC when a slice finds no room. */
int ext_place(enum gs_cp_policy policy, const struct gs_cp_model *m, const struct ext_view *v,
              const struct ext_pod *p, double *ret_score, struct ext_charge *ret_charges,
              unsigned *ret_n);

/* Why p does not fit on v, in why[0..size); true when it never could
 * (more whole GPUs than the node has, memory above every GPU's size). */
bool ext_why_not(const struct ext_pod *p, const struct ext_view *v, char *why, size_t size);

#endif /* GS_EXT_PLACE_H */
