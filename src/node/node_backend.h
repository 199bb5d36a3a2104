/* SPDX-License-Identifier: Apache-2.0 */
/* How a slice is made on a node, behind one small table: `whole` (one or
 * more exclusive GPUs, no shim, no files) and `shim` (a share of one GPU
 * enforced by libgpuslice.so: a config and a slice directory). MPS and MIG
 * will be two more files. The lifecycle (node_lifecycle.c) and the
 * container edits (node_edits.c) ask the backend instead of testing
 * "whole or slice" themselves. */
#ifndef GS_NODE_BACKEND_H
#define GS_NODE_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "ledger.h"

struct node;

struct node_backend {
        const char *name;
        bool needs_shim;  /* its processes run with the shim preloaded */
        /* Whether a request of `milli` with `memory` (0: default) is this
         * backend's, and valid for it: 1 yes, 0 not this backend's, or
         * -EINVAL with *err for a request it refuses. */
        int (*fit)(uint32_t milli, uint64_t memory, struct gs_error **err);
        /* Optional (NULL: nothing to do); call them through the
         * node_backend_* functions below. */
        /* Write the slice's files (recorded already). 0 or -errno, *err. */
        int (*prepare)(struct node *n, const struct gs_slice *s, struct gs_error **err);
        /* Remove what prepare wrote; best effort, logged. */
        void (*release)(struct node *n, const struct gs_slice *s);
        /* Whether the files prepare writes are all in place (reconcile). */
        bool (*files_ok)(struct node *n, const struct gs_slice *s);
};

extern const struct node_backend node_backend_whole;
extern const struct node_backend node_backend_shim;

/* The backend's prepare, release and files_ok, where it has them. */
int node_backend_prepare(const struct node_backend *be, struct node *n, const struct gs_slice *s,
                         struct gs_error **err);
void node_backend_release(const struct node_backend *be, struct node *n, const struct gs_slice *s);
bool node_backend_files_ok(const struct node_backend *be, struct node *n,
                           const struct gs_slice *s);

/* The backend of a recorded slice. */
const struct node_backend *node_backend_of(const struct gs_slice *s);

/* The backend for a request: 0 and *ret, or -EINVAL with *err naming what
 * no backend accepts. */
int node_backend_for(uint32_t milli, uint64_t memory, const struct node_backend **ret,
                     struct gs_error **err);

#endif /* GS_NODE_BACKEND_H */
