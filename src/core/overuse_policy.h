/* SPDX-License-Identifier: Apache-2.0 */
/* What the watchdog does with a slice it finds over its limits (docs/
 * overuse.md): the one place that spells the policies. A daemon has a
 * default (--overuse-policy); a slice may name its own. */
#ifndef GS_OVERUSE_POLICY_H
#define GS_OVERUSE_POLICY_H

#include <stddef.h>

enum gs_overuse_policy {
        GS_OVERUSE_DEFAULT = 0, /* a slice's: the daemon's policy */
        GS_OVERUSE_REPORT,      /* log, event, metric */
        GS_OVERUSE_KILL,        /* SIGKILL the offending processes */
        GS_OVERUSE_EVICT,       /* Kubernetes: evict the pod; else kill */
};

/* What a message lists as accepted. */
#define GS_OVERUSE_POLICY_NAMES "report, kill, evict"

/* Parse the `len` bytes at s ("report", "kill" or "evict"; never
 * "default"). 0 and *ret, or -EINVAL. */
int gs_overuse_policy_parse(const char *s, size_t len, enum gs_overuse_policy *ret);

/* gs_overuse_policy_parse over a NUL-terminated string. */
int gs_overuse_policy_parse_str(const char *s, enum gs_overuse_policy *ret);

/* "report", "kill", "evict", or "default". */
const char *gs_overuse_policy_name(enum gs_overuse_policy p);

/* A slice's policy under a daemon's: p unless it is GS_OVERUSE_DEFAULT. */
enum gs_overuse_policy gs_overuse_policy_effective(enum gs_overuse_policy slice,
                                                   enum gs_overuse_policy daemon);

#endif /* GS_OVERUSE_POLICY_H */
