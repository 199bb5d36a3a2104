/* SPDX-License-Identifier: Apache-2.0 */
/* A ResourceClaim as the DRA driver reads it at NodePrepareResources
 * (resource.k8s.io/v1, kubernetes/api resource/v1/types.go): the results
 * the scheduler allocated from this driver's pool (device, shareID and
 * consumedCapacity of `milli` and `memory`) and the opaque configuration
 * that applies to each (the compute and over-use policies). Pure: parses JSON it is
 * handed; the driver fetches it. */
#ifndef GS_DRA_CLAIM_H
#define GS_DRA_CLAIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpuslice/slice_conf.h>

#include "error.h"
#include "overuse_policy.h"

#define DRA_MAX_SHARES 8        /* results of one claim on one node */
#define DRA_NAME_MAX 63         /* DNS labels: requests, devices */
#define DRA_CONFIG_API "gpu.gpuslice.io/v1alpha1"
#define DRA_CONFIG_KIND "SliceConfig"

/* One allocated share of a device. */
struct dra_share {
        char request[DRA_NAME_MAX + 1];   /* the claim's request (subrequests: "req/sub") */
        char device[DRA_NAME_MAX + 1];    /* the device in our pool */
        char share_id[DRA_NAME_MAX + 1];  /* "" when the result has none */
        uint64_t milli;                   /* consumed `milli` (0: not consumed) */
        uint64_t memory;                  /* consumed `memory` in bytes (0: default) */
        bool has_policy;
        enum gs_compute_policy policy;
        enum gs_overuse_policy overuse;   /* GS_OVERUSE_DEFAULT: the daemon's */
};

struct dra_claim_alloc {
        struct dra_share shares[DRA_MAX_SHARES];
        size_t n_shares;
};

/* Parse the claim `json` (len bytes): it must have metadata.uid == uid and
 * an allocation; its results for `driver` from `pool` become shares, each
 * with the policy and the over-use policy of the last opaque config of this
 * driver that applies to its request and names it (a claim's config over
 * its class's): parameters {"apiVersion": DRA_CONFIG_API, "kind":
 * DRA_CONFIG_KIND, "policy": "share"|"cap", "overuse": "report"|"kill"|
 * "evict"}, both optional. 0 and *ret (n_shares may
 * be 0: nothing of ours); -ESTALE when the uid differs (a newer claim of
 * the same name), -ENODATA when the claim is not allocated, -EINVAL with
 * *err naming the field for anything malformed (unknown config fields
 * included: the config is ours to define strictly). */
int dra_claim_parse(const char *json, size_t len, const char *uid, const char *driver,
                    const char *pool, struct dra_claim_alloc *ret, struct gs_error **err);

/* dra_claim_parse over a parsed object (jansson's json_t). */
struct json_t;
int dra_claim_parse_json(const struct json_t *root, const char *uid, const char *driver,
                         const char *pool, struct dra_claim_alloc *ret, struct gs_error **err);

#endif /* GS_DRA_CLAIM_H */
