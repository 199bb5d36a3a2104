/* SPDX-License-Identifier: Apache-2.0 */
/* The gpuslice device plugin's logic, independent of gRPC: the advertised
 * units (1000 per GPU, ids "gpu<idx>-u<n>", unit_ids.h), preferred
 * allocations, and the translation of each Allocate into a slice made by
 * the node layer (placed by core's gs_place, recorded in the node's
 * ledger, the only record, with the kubelet's unit ids), and releases
 * learnt from PodResources. Thread-safe: every function takes the node's
 * lock, so pods, local slices and other front-ends never over-commit a GPU
 * together. */
#ifndef GS_DEVICE_PLUGIN_H
#define GS_DEVICE_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dp_codec.h"
#include "error.h"
#include "node.h"

#define DP_RESOURCE "gpuslice.io/gpu-milli"
#define DP_UNITS_PER_GPU 1000u
#define DP_MAX_GPUS 64u

struct dp_config {
        struct node *node;         /* the node's slices and inventory (required) */
        int64_t release_grace_s;   /* a slice is never freed younger than this */
        /* The kubelet's device-manager checkpoint (kubelet_checkpoint.h);
         * NULL: none (tests of the plugin alone). With it, units the
         * kubelet still holds for a container are never taken as freed:
         * an Allocate naming them reuses their slice (init containers), and
         * a slice is not released while the checkpoint lists its units. */
        const char *checkpoint_path;
};

struct dp;

/* Create the plugin over cfg->node: write the node's ld.so.preload for
 * containers. 0 and *ret, or a negative errno with *err. */
int dp_new(const struct dp_config *cfg, struct dp **ret, struct gs_error **err);
/* NULL-safe; returns NULL. Slices stay recorded in the node's ledger. */
struct dp *dp_free(struct dp *d);

/* A fresh inventory reading (health changes): passed to the node; returns
 * 1 when the advertised list changed (the generation moved), else 0. */
int dp_set_inventory(struct dp *d, const struct gs_inventory *inv);

/* Generation of the advertised list; moves on every change. */
uint64_t dp_generation(struct dp *d);
/* The current ListAndWatchResponse, encoded, and its generation. */
int dp_encode_devices(struct dp *d, uint64_t *ret_gen, uint8_t **ret_buf, size_t *ret_len);

/* gRPC handlers (see dp_unary_fn in dp_grpc.h): request bytes in, response
 * bytes out; errors as negative errno with *err for the pod's events. */
int dp_handle_options(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret, size_t *ret_len,
                      struct gs_error **err);
int dp_handle_preferred(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret,
                        size_t *ret_len, struct gs_error **err);
int dp_handle_allocate(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret,
                       size_t *ret_len, struct gs_error **err);
int dp_handle_prestart(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret,
                       size_t *ret_len, struct gs_error **err);

/* Free every Kubernetes slice that no container holds: none in `pods`
 * (from PodResources List) nor in the kubelet's checkpoint holds only units
 * of it (a container's units all within the slice's), once it is older than
 * the grace period and was seen unheld on two reconciliations in a row.
 * now: unix seconds. Returns the number of slices freed. */
int dp_reconcile(struct dp *d, const struct dp_pod_devices *pods, size_t n_pods, int64_t now);

/* Before registering: every container the kubelet's checkpoint lists with
 * an answer of ours gets its slice back if the node lost it (a node reboot
 * that emptied the state, a ledger restored from a backup), with its id,
 * GPU and units from the answer the kubelet cached. Returns the number of
 * slices restored (0 without a checkpoint), or a negative errno when the
 * checkpoint cannot be read. */
int dp_restore_from_checkpoint(struct dp *d);

/* Number of Kubernetes slices on the node's record. */
size_t dp_n_allocations(struct dp *d);

#endif /* GS_DEVICE_PLUGIN_H */
