/* SPDX-License-Identifier: Apache-2.0 */
/* The node's per-GPU state for the cluster scheduler's extender
 * (gpuslice-extender, docs/scheduling.md): the free share and memory of
 * each GPU after every slice (local, device plugin, DRA), written as an
 * annotation of the node's Node object, which the scheduler sends to the
 * extender with every ExtenderArgs. The value is JSON:
 *
 *   {"generation": 1764571234567890, "time": "2026-12-01T14:07:00Z",
 *    "gpus": [{"index": 0, "uuid": "GPU-…", "model": "NVIDIA H200",
 *              "healthy": true, "milli_free": 600, "slices": 1,
 *              "memory_free": 103079215104, "memory_total": 150323855360,
 *              "context_overhead": 268435456}],
 *    "placement": "binpack", "pods": ["<pod uid>", ...]}
 *
 * `generation` moves whenever the content does (microseconds of the wall
 * clock at the change, so it also moves across daemon restarts); `time` is
 * when the report was written (heartbeats rewrite it with the same
 * generation), so the extender can tell stale state; `pods` are the uids
 * of the pods known to hold a slice here (from the kubelet's checkpoint or
 * a DRA claim's reservedFor; a pod admitted moments ago may not be listed
 * yet), so the extender can tell which of the pods it sent here the
 * report already counts; `placement` is the node's policy among its GPUs
 * and `context_overhead` what a slice's cap must hold beyond its work, so
 * the extender predicts the node's own choice with the same gs_place. */
#ifndef GS_NODE_REPORT_H
#define GS_NODE_REPORT_H

#include <stdint.h>

#include "apiserver.h"
#include "error.h"
#include "inventory.h"
#include "placement.h"

#define KUBE_NODE_REPORT_ANNOTATION "gpuslice.io/gpus"

/* The annotation's value for inv and usage (usage[i] is GPU i's), the
 * node's placement policy and the pod uids pods[0..n_pods), at generation gen, written at unix_s. 0 and
 * *ret (free()), or -ENOMEM. */
int kube_node_report_text(const struct gs_inventory *inv, const struct gs_gpu_usage *usage,
                          enum gs_placement_policy placement, const char *const *pods,
                          size_t n_pods, uint64_t gen, int64_t unix_s, char **ret,
                          struct gs_error **err);

/* Write text as the annotation of Node `node` (a JSON merge patch of
 * metadata.annotations only). 0, or a negative errno with *err as
 * apiserver_request (-ENOENT: no such Node). */
int kube_node_report_publish(struct apiserver *a, const char *node, const char *text,
                             struct gs_error **err);

#endif /* GS_NODE_REPORT_H */
