/* SPDX-License-Identifier: Apache-2.0 */
/* Parsing a ResourceClaim's allocation for this driver. See dra_claim.h. */
#include "dra_claim.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "compute_policy.h"
#include "overuse_policy.h"
#include "quantity.h"

static const char *str_of(const json_t *o, const char *key)
{
        const json_t *v = json_object_get(o, key);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

static int copy_name(char *dst, size_t size, const char *v, const char *field,
                     struct gs_error **err)
{
        if (!v || !*v || strlen(v) >= size)
                return gs_error_set(err, -EINVAL, "claim: %s is missing or longer than %zu",
                                    field, size - 1);
        memcpy(dst, v, strlen(v) + 1);
        return 0;
}

/* A Quantity of consumedCapacity: "300", "1k", "6Gi", "6442450944", "0".
 * A memory other than "0" (the default cap) is at least GS_MEMORY_MIN. */
static int quantity(const json_t *v, const char *field, bool memory, uint64_t *ret,
                    struct gs_error **err)
{
        if (!v) {
                *ret = 0;
                return 0;
        }
        if (!json_is_string(v))
                return gs_error_set(err, -EINVAL, "claim: %s is not a quantity", field);
        const char *s = json_string_value(v);
        if (strcmp(s, "0") == 0) {
                *ret = 0;
                return 0;
        }
        int r = memory ? gs_memory_size_parse(field, s, ret, err)
                       : gs_memory_quantity_parse(field, s, ret, err);
        return r < 0 ? gs_error_wrap(err, "claim") : 0;
}

/* One known field of the parameters into s. */
static int parse_parameter(const char *key, const json_t *v, struct dra_share *s,
                           struct gs_error **err)
{
        const char *str = json_is_string(v) ? json_string_value(v) : NULL;
        if (strcmp(key, "policy") == 0) {
                if (!str || gs_compute_policy_parse_str(str, &s->policy) < 0)
                        return gs_error_set(err, -EINVAL,
                                            "claim config: policy is not one of %s",
                                            GS_COMPUTE_POLICY_NAMES);
                s->has_policy = true;
                return 0;
        }
        if (strcmp(key, "overuse") == 0) {
                if (!str || gs_overuse_policy_parse_str(str, &s->overuse) < 0)
                        return gs_error_set(err, -EINVAL,
                                            "claim config: overuse \"%.40s\" is not one of %s",
                                            str ? str : "(not a string)",
                                            GS_OVERUSE_POLICY_NAMES);
                return 0;
        }
        return gs_error_set(err, -EINVAL,
                            "claim config: unknown field '%.40s' (accepted: apiVersion, kind, "
                            "policy, overuse)", key);
}

/* {"apiVersion": DRA_CONFIG_API, "kind": DRA_CONFIG_KIND, "policy": "cap",
 *  "overuse": "kill"} */
static int parse_parameters(const json_t *p, struct dra_share *s, struct gs_error **err)
{
        if (!json_is_object(p))
                return gs_error_set(err, -EINVAL, "claim config: parameters are not an object");
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)p, key, v)
        {
                if (strcmp(key, "apiVersion") == 0 || strcmp(key, "kind") == 0)
                        continue;
                int r = parse_parameter(key, v, s, err);
                if (r < 0)
                        return r;
        }
        const char *api = str_of(p, "apiVersion"), *kind = str_of(p, "kind");
        if (!api || strcmp(api, DRA_CONFIG_API) != 0 || !kind || strcmp(kind, DRA_CONFIG_KIND) != 0)
                return gs_error_set(err, -EINVAL,
                                    "claim config: apiVersion/kind must be %s/%s", DRA_CONFIG_API,
                                    DRA_CONFIG_KIND);
        return 0;
}

static bool config_applies(const json_t *cfg, const char *request)
{
        const json_t *reqs = json_object_get(cfg, "requests");
        if (!json_is_array(reqs) || json_array_size(reqs) == 0)
                return true;
        size_t i;
        const json_t *r;
        json_array_foreach(reqs, i, r)
        {
                const char *name = json_is_string(r) ? json_string_value(r) : "";
                size_t n = strlen(name);
                /* "req" applies to its subrequests "req/sub" too. */
                if (strcmp(name, request) == 0 ||
                    (strncmp(request, name, n) == 0 && request[n] == '/'))
                        return true;
        }
        return false;
}

/* The policies for a share: configs of this driver in order, class ones
 * first (FromClass), then the claim's (FromClaim), the last one wins. */
static int share_policy(const json_t *configs, const char *driver, struct dra_share *s,
                        struct gs_error **err)
{
        static const char *const sources[] = { "FromClass", "FromClaim" };
        for (size_t pass = 0; pass < 2; pass++) {
                size_t i;
                const json_t *c;
                json_array_foreach(configs, i, c)
                {
                        const char *src = str_of(c, "source");
                        const json_t *op = json_object_get(c, "opaque");
                        const char *drv = op ? str_of(op, "driver") : NULL;
                        if (!src || strcmp(src, sources[pass]) != 0 || !drv ||
                            strcmp(drv, driver) != 0 || !config_applies(c, s->request))
                                continue;
                        int r = parse_parameters(json_object_get(op, "parameters"), s, err);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static int parse_result(const json_t *res, const json_t *configs, const char *driver,
                        struct dra_share *s, struct gs_error **err)
{
        *s = (struct dra_share){ 0 };
        int r = copy_name(s->request, sizeof(s->request), str_of(res, "request"), "request", err);
        if (r >= 0)
                r = copy_name(s->device, sizeof(s->device), str_of(res, "device"), "device", err);
        const char *share = str_of(res, "shareID");
        if (r >= 0 && share)
                r = copy_name(s->share_id, sizeof(s->share_id), share, "shareID", err);
        const json_t *cc = json_object_get(res, "consumedCapacity");
        if (r >= 0 && cc && !json_is_object(cc))
                r = gs_error_set(err, -EINVAL, "claim: consumedCapacity is not a map");
        if (r >= 0)
                r = quantity(json_object_get(cc, "milli"), "consumedCapacity.milli", false,
                             &s->milli, err);
        if (r >= 0)
                r = quantity(json_object_get(cc, "memory"), "consumedCapacity.memory", true,
                             &s->memory, err);
        if (r >= 0 && (s->milli == 0 || s->milli > GS_MILLI_PER_GPU))
                r = gs_error_set(err, -EINVAL,
                                 "claim: result for request %s consumes %llu milli of device "
                                 "%s (accepted: 1..1000)",
                                 s->request, (unsigned long long)s->milli, s->device);
        if (r >= 0)
                r = share_policy(configs, driver, s, err);
        return r;
}

int dra_claim_parse(const char *json, size_t len, const char *uid, const char *driver,
                    const char *pool, struct dra_claim_alloc *ret, struct gs_error **err)
{
        json_error_t je;
        json_t *root = json_loadb(json, len, 0, &je);
        if (!root)
                return gs_error_set(err, -EINVAL, "claim: not JSON (line %d: %s)", je.line,
                                    je.text);
        int r = dra_claim_parse_json(root, uid, driver, pool, ret, err);
        json_decref(root);
        return r;
}

int dra_claim_parse_json(const json_t *root, const char *uid, const char *driver,
                         const char *pool, struct dra_claim_alloc *ret, struct gs_error **err)
{
        int r = 0;
        const json_t *meta = json_object_get(root, "metadata");
        const char *have_uid = meta ? str_of(meta, "uid") : NULL;
        const json_t *devs = json_object_get(
                json_object_get(json_object_get(root, "status"), "allocation"), "devices");
        const json_t *results = json_object_get(devs, "results");
        const json_t *configs = json_object_get(devs, "config");
        struct dra_claim_alloc a = { .n_shares = 0 };
        json_t *none = json_array(); /* no config: an empty list */
        if (!have_uid)
                r = gs_error_set(err, -EINVAL, "claim: no metadata.uid");
        else if (strcmp(have_uid, uid) != 0)
                r = gs_error_set(err, -ESTALE, "claim has uid %.64s, not %.64s: it was "
                                 "deleted and made again", have_uid, uid);
        else if (!json_is_array(results))
                r = gs_error_set(err, -ENODATA, "claim %.64s is not allocated", uid);
        else if (configs && !json_is_array(configs))
                r = gs_error_set(err, -EINVAL, "claim: allocation.devices.config is not a list");
        size_t i;
        const json_t *res;
        if (r >= 0)
                json_array_foreach(results, i, res)
                {
                        const char *d = str_of(res, "driver"), *p = str_of(res, "pool");
                        if (!d || !p || strcmp(d, driver) != 0 || strcmp(p, pool) != 0)
                                continue;
                        if (a.n_shares == DRA_MAX_SHARES) {
                                r = gs_error_set(err, -E2BIG, "claim: more than %d results on "
                                                 "this node", DRA_MAX_SHARES);
                                break;
                        }
                        r = parse_result(res, configs ? configs : none, driver,
                                         &a.shares[a.n_shares], err);
                        if (r < 0)
                                break;
                        a.n_shares++;
                }
        json_decref(none);
        if (r < 0)
                return r;
        *ret = a;
        return 0;
}
