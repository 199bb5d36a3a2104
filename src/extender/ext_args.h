/* SPDX-License-Identifier: Apache-2.0 */
/* What the kube-scheduler sends gpuslice-extender, decoded: the
 * ExtenderArgs of k8s.io/kube-scheduler/extender/v1 ({"Pod", "Nodes",
 * "NodeNames"}, Go field names, matched case-insensitively as Go's
 * encoding/json does) reduced to what placement needs. The pod's request:
 * resources.limits["gpuslice.io/gpu-milli"] (requests when a container has
 * no limit) of each container, init containers counted as the kubelet
 * counts them; its annotation gpuslice.io/gpu-memory. Each node's
 * per-GPU state: the annotation gpuslice.io/gpus that gpusliced
 * --report-node writes (src/kube/node_report.h), parsed here.
 *
 * Everything is bounded (EXT_MAX_NODES nodes, GS_MAX_GPUS GPUs per node,
 * EXT_MAX_REPORTED_PODS pod uids per report, string lengths below) and every
 * failure says what and where. */
#ifndef GS_EXT_ARGS_H
#define GS_EXT_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "error.h"
#include "inventory.h"
#include "placement.h"

#define EXT_RESOURCE "gpuslice.io/gpu-milli"
#define EXT_ANNOTATION_GPUS "gpuslice.io/gpus"
#define EXT_ANNOTATION_MEMORY "gpuslice.io/gpu-memory"
#define EXT_MAX_NODES 20000        /* a cluster far above Kubernetes' tested 5,000 */
#define EXT_MAX_CONTAINERS 256     /* per pod, init containers included */
#define EXT_MAX_SLICES 16          /* containers of one pod with units */
#define EXT_MAX_REPORTED_PODS 1024 /* pod uids one node report may list */
#define EXT_NAME_MAX 254           /* a DNS subdomain (253) and its NUL */
#define EXT_UID_MAX 64

/* One GPU of a node's report. */
struct ext_gpu {
        unsigned index;
        char uuid[GS_GPU_UUID_MAX];
        char model[GS_GPU_NAME_MAX];
        bool healthy;
        uint32_t milli_free;  /* 0..1000 */
        uint64_t memory_free; /* bytes, <= memory_total */
        uint64_t memory_total;
        unsigned n_slices;         /* slices on it ("slices"; absent: 1 unless all free) */
        uint64_t context_overhead; /* bytes ("context_overhead"; absent: the default) */
};

/* A node's report, the value of its annotation gpuslice.io/gpus. */
struct ext_node_state {
        uint64_t generation; /* moves with every change of the content */
        int64_t time_s;      /* when the report was written (unix seconds) */
        unsigned n_gpus;     /* at most GS_MAX_GPUS */
        struct ext_gpu *gpus;
        enum gs_placement_policy placement; /* the node's ("placement"; absent: binpack) */
        /* The uids of the pods holding slices, when the report lists them
         * (optional "pods" key; has_pods false without it). */
        bool has_pods;
        char (*pods)[EXT_UID_MAX];
        size_t n_pods;
};

/* The part of the Pod that placement reads. */
struct ext_pod {
        char uid[EXT_UID_MAX];
        char ns[EXT_NAME_MAX];
        char name[EXT_NAME_MAX];
        /* The effective gpuslice.io/gpu-milli in all, as the kubelet
         * counts it (0: none asked), and the slices the node will make of
         * it: one per container with units, each 1..999 (a share of one
         * GPU) or a multiple of 1000 (whole GPUs); a single one of the
         * effective request when a plain init container has units (they
         * are handed on). `invalid` holds why the request can never be
         * placed ("" when it can; milli and n_slices are 0 then). */
        uint32_t milli;
        unsigned n_slices;
        uint32_t slices[EXT_MAX_SLICES];
        char invalid[192];
        uint64_t memory; /* gpuslice.io/gpu-memory in bytes, 0 = not asked */
};

/* One candidate node: its name and, when the scheduler sent the Node
 * object, its report (state_ok) or why there is none (`why`). */
struct ext_node {
        char name[EXT_NAME_MAX];
        bool state_ok;
        char why[256];
        struct ext_node_state st;
        size_t json_index; /* position in Nodes.items, for the reply */
};

struct ext_args {
        struct ext_pod pod;
        bool names_only; /* NodeNames form (nodeCacheCapable: true): no states */
        struct ext_node *nodes;
        size_t n_nodes;
};

/* Decode an ExtenderArgs body (len bytes, need not be NUL-terminated).
 * 0 and *ret (release with ext_args_done), or -EINVAL (not JSON, not the
 * shape, a bound exceeded) or -ENOMEM, with *err saying what. A node
 * whose annotation is missing or malformed is not a failure: it is
 * decoded with state_ok false and `why` saying so. If ret_nodes is not
 * NULL it receives the decoded Nodes.items array (a new reference, NULL in
 * the NodeNames form) so that a filter reply can echo the objects. */
int ext_args_decode(const char *buf, size_t len, struct ext_args *ret, json_t **ret_nodes,
                    struct gs_error **err);

/* Free what ext_args_decode allocated; NULL-safe, leaves *a zeroed. */
void ext_args_done(struct ext_args *a);

/* Parse a node report (the annotation's value, len bytes). 0 and *ret
 * (release with ext_node_state_done), or -EINVAL / -ENOMEM with *err naming
 * the field and the value. */
int ext_node_state_parse(const char *text, size_t len, struct ext_node_state *ret,
                         struct gs_error **err);

/* Free what a state holds (GPUs, pods); NULL-safe, leaves it zeroed. */
void ext_node_state_done(struct ext_node_state *st);

/* Parse an RFC 3339 timestamp ("2026-12-01T14:07:00Z", fractional seconds
 * and numeric offsets accepted) into unix seconds. 0 or -EINVAL. */
int ext_rfc3339_parse(const char *s, int64_t *ret);

#endif /* GS_EXT_ARGS_H */
