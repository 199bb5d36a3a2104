/* SPDX-License-Identifier: Apache-2.0 */
/* The all-or-nothing fit check of `gpuslice up`: before anything starts,
 * place every API of the spec on the node's GPUs as the daemon would (its
 * policy, the slices already there) and refuse the whole spec when one does
 * not fit, naming the API and what each GPU would be short of. Pure: no I/O. */
#ifndef GS_UP_PLAN_H
#define GS_UP_PLAN_H

#include "error.h"
#include "inventory.h"
#include "placement.h"
#include "spec.h"

/* Place spec's APIs in file order on inv given the current usage (one entry
 * per GPU, as gs_placement_usage fills it). Returns 0 when all fit (usage is
 * not changed), -ENOSPC when some API does not fit, -EINVAL when one can
 * never fit on this node; then *err says which API and, for each GPU, what
 * it would be short of (share, memory, health). */
int up_plan_check(const struct gs_inventory *inv, const struct gs_gpu_usage *usage,
                  enum gs_placement_policy policy, const struct gs_spec *spec,
                  struct gs_error **err);

#endif /* GS_UP_PLAN_H */
