/* SPDX-License-Identifier: Apache-2.0 */
/* Internal state of the device plugin, shared by device_plugin.c (the
 * advertised list, preferred allocations, releases) and dp_allocate.c
 * (Allocate). The slices themselves are the node's (its ledger). */
#ifndef GS_DP_INTERNAL_H
#define GS_DP_INTERNAL_H

#include "device_plugin.h"
#include "kubelet_checkpoint.h"
#include "unit_ids.h"

/* What the plugin learns at run time about one Kubernetes slice (not
 * persisted: PodResources tells it again after a restart). */
struct dp_seen {
        char slice[GS_SLICE_ID_MAX + 1];
        int unheld;         /* reconciliations in a row nobody held it */
        char holder[256];   /* "ns/pod/container" once PodResources says */
        int64_t nudged;     /* when a held-by-the-checkpoint-only slice last made the
                             * kubelet rewrite its checkpoint (unix seconds) */
        bool listed;        /* PodResources has listed a container of it */
};

/* An init container's units are handed on during its pod's admission, in
 * the seconds after its own Allocate. */
#define DP_REUSE_WINDOW_S 120

/* Whether PodResources has ever listed a container holding slice `id`
 * (since this process started). */
bool dp_seen_listed(struct dp *d, const char *id);

struct dp {
        struct node *node;
        int64_t grace;
        char checkpoint_path[NODE_PATH_MAX]; /* "" when none */
        /* The advertised list's generation moves only when its content
         * does (not on every change of the node's ledger). */
        uint64_t generation;
        uint64_t node_generation_seen;
        uint64_t fingerprint;
        struct dp_seen *seen;
        size_t n_seen;
};

/* The unit set of a recorded Kubernetes slice (empty when it has none).
 * 0, -ENOMEM, or -EINVAL for a damaged record. */
int dp_slice_units(const struct gs_slice *s, struct gs_unit_set *ret);

/* Free a Kubernetes slice through the node (lock held) and forget what
 * was seen of it. */
void dp_release_locked(struct dp *d, const char *slice, const char *why);

/* Read the kubelet's checkpoint into *ret: 1 read, 0 none configured or
 * none there (nothing is known), or a negative errno (logged). */
int dp_checkpoint_read(struct dp *d, struct kube_checkpoint *ret);

#endif /* GS_DP_INTERNAL_H */
