/* SPDX-License-Identifier: Apache-2.0 */
/* Over-use policies by name (overuse_policy.h). */
#include "overuse_policy.h"

#include <errno.h>
#include <string.h>

static const char *const names[] = {
        [GS_OVERUSE_DEFAULT] = "default",
        [GS_OVERUSE_REPORT] = "report",
        [GS_OVERUSE_KILL] = "kill",
        [GS_OVERUSE_EVICT] = "evict",
};

int gs_overuse_policy_parse(const char *s, size_t len, enum gs_overuse_policy *ret)
{
        for (unsigned i = GS_OVERUSE_REPORT; i <= GS_OVERUSE_EVICT; i++)
                if (strlen(names[i]) == len && memcmp(s, names[i], len) == 0) {
                        *ret = (enum gs_overuse_policy)i;
                        return 0;
                }
        return -EINVAL;
}

int gs_overuse_policy_parse_str(const char *s, enum gs_overuse_policy *ret)
{
        return gs_overuse_policy_parse(s, strlen(s), ret);
}

const char *gs_overuse_policy_name(enum gs_overuse_policy p)
{
        return (unsigned)p <= GS_OVERUSE_EVICT ? names[p] : "default";
}

enum gs_overuse_policy gs_overuse_policy_effective(enum gs_overuse_policy slice,
                                                   enum gs_overuse_policy daemon)
{
        if (slice != GS_OVERUSE_DEFAULT)
                return slice;
        return daemon == GS_OVERUSE_DEFAULT ? GS_OVERUSE_REPORT : daemon;
}
