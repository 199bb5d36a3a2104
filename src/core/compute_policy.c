/* SPDX-License-Identifier: Apache-2.0 */
/* Compute policy names. See compute_policy.h. */
#include "compute_policy.h"

#include <errno.h>
#include <string.h>

int gs_compute_policy_parse(const char *s, size_t len, enum gs_compute_policy *ret)
{
        if (s && len == 5 && memcmp(s, "share", 5) == 0)
                *ret = GS_POLICY_SHARE;
        else if (s && len == 3 && memcmp(s, "cap", 3) == 0)
                *ret = GS_POLICY_CAP;
        else
                return -EINVAL;
        return 0;
}

int gs_compute_policy_parse_str(const char *s, enum gs_compute_policy *ret)
{
        return s ? gs_compute_policy_parse(s, strlen(s), ret) : -EINVAL;
}

const char *gs_compute_policy_name(enum gs_compute_policy p)
{
        return p == GS_POLICY_CAP ? "cap" : "share";
}
