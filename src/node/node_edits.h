/* SPDX-License-Identifier: Apache-2.0 */
/* What a container of a slice receives (the device plugin's Allocate answer
 * today; a DRA driver's CDI spec later): environment, mounts and CDI
 * device names, computed from the slice's record by its backend. Fixed
 * buffers: no allocation, nothing to free. */
#ifndef GS_NODE_EDITS_H
#define GS_NODE_EDITS_H

#include <stdbool.h>
#include <stddef.h>

#include <gpuslice/slice_conf.h>

#include "ledger.h"
#include "node.h"

/* Where things appear inside a container of a slice. */
#define NODE_CONTAINER_CONF GS_SLICE_CONF_DEFAULT_PATH
#define NODE_CONTAINER_SLICE_DIR "/run/gpuslice/slice"
/* The slice's page directory (<state>/pages/<id>), read-only. */
#define NODE_CONTAINER_LEASE_DIR "/run/gpuslice/lease"
#define NODE_CONTAINER_SHIM "/usr/lib/gpuslice/libgpuslice.so"
#define NODE_CONTAINER_PRELOAD "/etc/ld.so.preload"
/* The daemon's socket DIRECTORY is mounted here (never the socket file: a
 * restarted daemon binds a new inode, which a file mount would miss). */
#define NODE_CONTAINER_DAEMON_DIR "/run/gpuslice/daemon"

#define NODE_EDITS_MAX_ENVS 6
#define NODE_EDITS_MAX_MOUNTS 7
#define NODE_EDIT_VALUE_MAX (GS_SLICE_MAX_GPUS * GS_GPU_UUID_MAX)

struct node_env {
        const char *key;
        char value[NODE_EDIT_VALUE_MAX];
};

struct node_mount {
        const char *container_path;
        char host_path[NODE_PATH_MAX];
        bool read_only;
};

struct node_edits {
        struct node_env envs[NODE_EDITS_MAX_ENVS];
        size_t n_envs;
        struct node_mount mounts[NODE_EDITS_MAX_MOUNTS];
        size_t n_mounts;
        char cdi_devices[GS_SLICE_MAX_GPUS][128 + GS_GPU_UUID_MAX];
        size_t n_cdi_devices;
};

/* The edits for a container of slice s. Every slice: its GPUs visible
 * (NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES) and GPUSLICE_SLICE; a
 * shim slice also GPUSLICE_CONFIG, its config (read-only) and directory
 * (read-write), the shim and ld.so.preload (read-only, when the node has a
 * shim path) and the directory of the daemon's socket (when it has one) at
 * NODE_CONTAINER_DAEMON_DIR, read-only, with the slice's page directory
 * at NODE_CONTAINER_LEASE_DIR, read-only; CDI names when the node has a CDI kind. 0, or
 * -ENAMETOOLONG. */
int node_container_edits_locked(const struct node *n, const struct gs_slice *s,
                                struct node_edits *ret);

/* Where a container finds the daemon's socket ("" when the node has none). */
void node_container_socket_path(const struct node *n, char *buf, size_t size);

/* The host directory of the daemon's socket ("" when none). */
void node_socket_dir(const struct node *n, char *buf, size_t size);

#endif /* GS_NODE_EDITS_H */
