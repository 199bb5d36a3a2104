/* SPDX-License-Identifier: Apache-2.0 */
/* The kubelet's device-manager checkpoint
 * (/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint), read-only:
 * which containers of which pods the kubelet considers to hold which of our
 * unit ids, and the Allocate answer it cached for each. It is the kubelet's
 * own record: it lists init containers (PodResources does not), survives
 * kubelet restarts and node reboots, and is written after every Allocate
 * (pkg/kubelet/cm/devicemanager/manager.go, writeCheckpoint; the format is
 * pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go: JSON
 *   {"Data": {"PodDeviceEntries": [{"PodUID", "ContainerName",
 *    "ResourceName", "DeviceIDs": {"<numa>": [ids]} (older kubelets: a
 *    plain list), "AllocResp": base64 of ContainerAllocateResponse}],
 *    "RegisteredDevices": {...}}, "Checksum": n}). */
#ifndef GS_KUBELET_CHECKPOINT_H
#define GS_KUBELET_CHECKPOINT_H

#include <stddef.h>

#include "error.h"
#include "ledger.h"
#include "unit_ids.h"

#define KUBE_CHECKPOINT_NAME "kubelet_internal_checkpoint"
#define KUBE_CHECKPOINT_MAX_BYTES (64u << 20)

/* One container's entry for our resource. */
struct kube_cp_entry {
        char pod_uid[64];
        char container[254];
        struct gs_unit_set *units;          /* the ids it holds (owned) */
        char slice[GS_SLICE_ID_MAX + 1];    /* GPUSLICE_SLICE of the cached answer, "" */
        char gpus[GS_SLICE_MAX_GPUS * GS_GPU_UUID_MAX]; /* its NVIDIA_VISIBLE_DEVICES, "" */
};

struct kube_checkpoint {
        struct kube_cp_entry *entries;
        size_t n_entries;
        struct gs_unit_set *all;            /* union of every entry's units (owned) */
};

/* Read the checkpoint at `path`, keeping the entries of `resource`. 0 and
 * *ret; -ENOENT (no message) when there is none; another negative errno
 * with *err naming the file for one that cannot be read or parsed (the
 * caller then trusts nothing it says). Ids that are not ours (not
 * "gpu<g>-u<n>") are ignored. */
int kube_checkpoint_load(const char *path, const char *resource, struct kube_checkpoint *ret,
                         struct gs_error **err);

/* Free what load allocated; leaves an empty checkpoint. NULL-safe. */
void kube_checkpoint_done(struct kube_checkpoint *cp);

#endif /* GS_KUBELET_CHECKPOINT_H */
