/* SPDX-License-Identifier: Apache-2.0 */
/* The kubelet's device ids of gpuslice.io/gpu-milli, "gpu<g>-u<n>" (GPU
 * g < GS_MAX_GPUS, unit n < 1000, no leading zeros), and sets of them. A
 * Kubernetes slice records the ids the kubelet gave it (the ledger's
 * `units=` token) in a compact text of ranges per GPU:
 *   "0.0-299,0.400,1.5-9"   (gpu.first-last or gpu.unit, ascending)
 * Pure: no I/O. */
#ifndef GS_UNIT_IDS_H
#define GS_UNIT_IDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inventory.h"
#include "quantity.h"

#define GS_UNIT_ID_MAX 16 /* "gpu63-u999" and its NUL, with room */
#define GS_UNIT_WORDS ((GS_MAX_GPUS * GS_MILLI_PER_GPU + 63) / 64)

struct gs_unit_set {
        uint64_t bits[GS_UNIT_WORDS];
};

/* Parse "gpu<g>-u<n>". 0, or -EINVAL. */
int gs_unit_id_parse(const char *id, unsigned *ret_gpu, unsigned *ret_unit);

/* Write "gpu<g>-u<n>" into buf (at least GS_UNIT_ID_MAX bytes). */
void gs_unit_id_format(unsigned gpu, unsigned unit, char *buf, size_t size);

/* Empty the set. */
void gs_unit_set_clear(struct gs_unit_set *s);
/* Add one unit; returns false when it was already in the set. */
bool gs_unit_set_add(struct gs_unit_set *s, unsigned gpu, unsigned unit);
bool gs_unit_set_has(const struct gs_unit_set *s, unsigned gpu, unsigned unit);
/* Number of units in the set, and in it on one GPU. */
size_t gs_unit_set_count(const struct gs_unit_set *s);
size_t gs_unit_set_count_gpu(const struct gs_unit_set *s, unsigned gpu);
/* Whether the two sets share a unit. */
bool gs_unit_set_intersects(const struct gs_unit_set *a, const struct gs_unit_set *b);
/* Whether every unit of a is in b (an empty a is in every set). */
bool gs_unit_set_is_subset(const struct gs_unit_set *a, const struct gs_unit_set *b);
/* a |= b */
void gs_unit_set_union(struct gs_unit_set *a, const struct gs_unit_set *b);

/* The set as range text (see above) into *ret (malloc'ed; "" for an empty
 * set). 0 or -ENOMEM. */
int gs_unit_set_encode(const struct gs_unit_set *s, char **ret);

/* Parse range text (ascending, non-overlapping, each range within one GPU)
 * into *ret (cleared first). 0, or -EINVAL for anything else. */
int gs_unit_set_decode(const char *text, struct gs_unit_set *ret);

#endif /* GS_UNIT_IDS_H */
