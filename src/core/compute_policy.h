/* SPDX-License-Identifier: Apache-2.0 */
/* The compute policy of a slice (`share` or `cap`) by name: the one place
 * that spells them. Part of the guest subset (the shim logs the name). */
#ifndef GS_COMPUTE_POLICY_H
#define GS_COMPUTE_POLICY_H

#include <stddef.h>

#include <gpuslice/slice_conf.h>

/* What a message lists as accepted. */
#define GS_COMPUTE_POLICY_NAMES "share, cap"

/* Parse the `len` bytes at s ("share" or "cap"). 0 and *ret, or -EINVAL. */
int gs_compute_policy_parse(const char *s, size_t len, enum gs_compute_policy *ret);

/* gs_compute_policy_parse over a NUL-terminated string. */
int gs_compute_policy_parse_str(const char *s, enum gs_compute_policy *ret);

/* "share" or "cap" (anything but GS_POLICY_CAP is share). */
const char *gs_compute_policy_name(enum gs_compute_policy p);

#endif /* GS_COMPUTE_POLICY_H */
