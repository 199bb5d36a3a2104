/* SPDX-License-Identifier: Apache-2.0 */
/* The ResourceSlice a node's DRA driver publishes (resource.k8s.io/v1,
 * kubernetes/api resource/v1/types.go; KEP-5075 consumable capacity): one
 * device per healthy GPU, `allowMultipleAllocations: true`, with the
 * consumable capacities `milli` (step 1) and `memory` (bytes, step 2 MiB)
 * that DRA claims may take. What local `gpuslice run` slices and the device
 * plugin's pods hold is subtracted, so the scheduler's view is the node's;
 * DRA slices are the scheduler's own to count. Built from the node's state
 * (lock held); the driver sends it. */
#ifndef GS_DRA_SLICES_H
#define GS_DRA_SLICES_H

#include <jansson.h>
#include <stddef.h>

#include "inventory.h"
#include "node.h"


/* The device name of a GPU in the pool: "gpu-" and its UUID, lower case
 * (a DNS label, stable across reboots and re-numbering). */
void dra_device_name(const struct gs_gpu *g, char *buf, size_t size);

/* The position in the inventory of the GPU whose device name is `name`,
 * or -1. */
int dra_device_position_locked(const struct node *n, const char *name);

/* The ResourceSlice object (a new reference) for `node_name` (also the
 * pool's name) with pool generation `generation`; node_uid, when known, makes
 * the Node its owner (deleted with it). NULL on out of memory. */
json_t *dra_resource_slice_locked(const struct node *n, const char *driver,
                                  const char *node_name, const char *node_uid,
                                  int64_t generation);

/* Whether two slices publish the same devices (their specs' devices
 * equal): a change needs a new generation. */
bool dra_resource_slice_same_devices(const json_t *a, const json_t *b);

#endif /* GS_DRA_SLICES_H */
