/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice as a DRA driver (`gpusliced --dra`): what NodePrepareResources
 * and NodeUnprepareResources do with a claim, and the ResourceSlice that
 * offers the node's GPUs to the scheduler. A prepared claim's shares are
 * slices of the node (kind dra, placed on the GPU the scheduler chose,
 * recorded in the ledger with the claim's uid, request and shareID), each
 * with a CDI spec carrying its container edits. The kubelet side is
 * dra_plugin.h; the API server is reached through apiserver.h. */
#ifndef GS_DRA_DRIVER_H
#define GS_DRA_DRIVER_H

#include <stdint.h>

#include "apiserver.h"
#include "dra_plugin.h"
#include "error.h"
#include "node.h"

#define DRA_CDI_DIR "/var/run/cdi"

struct dra_driver_config {
        struct node *node;      /* the node's slices and GPUs (required) */
        struct apiserver *api;  /* claims and ResourceSlices (required) */
        const char *driver;     /* DRA_DRIVER_NAME when NULL */
        const char *node_name;  /* this node: the pool's name (required) */
        const char *cdi_dir;    /* DRA_CDI_DIR when NULL */
};

struct dra_driver;

/* 0 and *ret, or -EINVAL/-ENOMEM with *err. */
int dra_driver_new(const struct dra_driver_config *cfg, struct dra_driver **ret,
                   struct gs_error **err);
/* NULL-safe; returns NULL. Prepared claims stay recorded. */
struct dra_driver *dra_driver_free(struct dra_driver *d);

/* The callbacks for dra_plugin_run (ctx: d). Prepare reads the claim from
 * the API server only when the node has not prepared it yet (the kubelet
 * retries and repeats; the ledger answers again the same). */
struct dra_ops dra_driver_ops(struct dra_driver *d);

/* After a start: every prepared share gets its CDI spec back if it is
 * missing, and CDI specs of ours that no prepared share owns are removed.
 * Returns how many were repaired, or a negative errno. */
int dra_driver_reconcile_cdi(struct dra_driver *d);

/* Publish the node's ResourceSlice when what it offers changed (or was
 * never sent): create it, or replace it with the pool's next generation.
 * Cheap when nothing changed (no request). 1 sent, 0 nothing to do, or a
 * negative errno with *err (the caller retries later). */
int dra_driver_publish(struct dra_driver *d, struct gs_error **err);

/* Check that the ResourceSlice last published is still there with the
 * same devices (someone may delete or edit it): if not, forget it so the
 * next dra_driver_publish sends it again. 1 forgotten, 0 as published
 * (or nothing published yet), a negative errno with *err. */
int dra_driver_check_published(struct dra_driver *d, struct gs_error **err);

/* Delete the node's ResourceSlice (uninstall). 0 also when it is gone. */
int dra_driver_unpublish(struct dra_driver *d, struct gs_error **err);

#endif /* GS_DRA_DRIVER_H */
