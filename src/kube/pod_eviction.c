/* SPDX-License-Identifier: Apache-2.0 */
/* Pod eviction and a claim's pods (pod_eviction.h). */
#include "pod_eviction.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool label_chars(const char *s, size_t n)
{
        if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                        return false;
        }
        return true;
}

bool kube_dns_label_valid(const char *s)
{
        return label_chars(s, strlen(s));
}

bool kube_dns_subdomain_valid(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > KUBE_NAME_MAX)
                return false;
        for (const char *p = s;;) {
                const char *dot = strchr(p, '.');
                size_t len = dot ? (size_t)(dot - p) : strlen(p);
                if (!label_chars(p, len))
                        return false;
                if (!dot)
                        return true;
                p = dot + 1;
        }
}

int kube_evict_pod(struct apiserver *a, const struct kube_pod_ref *p, struct gs_error **err)
{
        if (!kube_dns_label_valid(p->ns) || !kube_dns_subdomain_valid(p->name))
                return gs_error_set(err, -EINVAL, "evict pod %.63s/%.253s: not a valid namespace "
                                    "and pod name", p->ns, p->name);
        json_t *body = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "policy/v1", "kind",
                                 "Eviction", "metadata", "name", p->name, "namespace", p->ns);
        if (body && p->uid[0])
                json_object_set_new(body, "deleteOptions",
                                    json_pack("{s:{s:s}}", "preconditions", "uid", p->uid));
        if (!body)
                return gs_error_set(err, -ENOMEM, "out of memory");
        char path[64 + KUBE_NAMESPACE_MAX + KUBE_NAME_MAX];
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/eviction", p->ns, p->name);
        int r = apiserver_create(a, path, body, NULL, err); /* a failed uid precondition: 409 */
        json_decref(body);
        if (r < 0)
                return gs_error_wrap(err, "evict pod %s/%s", p->ns, p->name);
        return 0;
}

static void copy_field(char *dst, size_t size, const json_t *v)
{
        const char *s = json_string_value(v);
        snprintf(dst, size, "%s", s ? s : "");
}

int kube_claim_reserved_pods(const json_t *claim, struct kube_pod_ref *out, size_t max,
                             struct gs_error **err)
{
        const json_t *md = json_object_get(claim, "metadata");
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        const char *name = json_string_value(json_object_get(md, "name"));
        if (!ns || !kube_dns_label_valid(ns) || !name)
                return gs_error_set(err, -EBADMSG, "a claim without a valid metadata.namespace "
                                    "and name");
        const json_t *list = json_object_get(json_object_get(claim, "status"), "reservedFor");
        if (list && !json_is_array(list))
                return gs_error_set(err, -EBADMSG, "claim %s/%.253s: status.reservedFor is not a "
                                    "list", ns, name);
        size_t n = 0, i;
        const json_t *ref;
        json_array_foreach(list, i, ref) {
                const char *group = json_string_value(json_object_get(ref, "apiGroup"));
                const char *res = json_string_value(json_object_get(ref, "resource"));
                if ((group && *group) || !res || strcmp(res, "pods") != 0)
                        continue; /* a consumer that is not a pod */
                if (n < max) {
                        struct kube_pod_ref *p = &out[n];
                        snprintf(p->ns, sizeof(p->ns), "%s", ns); /* a claim's pods share its namespace */
                        copy_field(p->name, sizeof(p->name), json_object_get(ref, "name"));
                        copy_field(p->uid, sizeof(p->uid), json_object_get(ref, "uid"));
                        if (!kube_dns_subdomain_valid(p->name))
                                return gs_error_set(err, -EBADMSG, "claim %s/%.253s: "
                                                    "reservedFor[%zu] names no valid pod", ns,
                                                    name, i);
                }
                n++;
        }
        return n > (size_t)INT_MAX ? INT_MAX : (int)n;
}

int kube_claim_pods(struct apiserver *a, const char *ns, const char *name, const char *claim_uid,
                    struct kube_pod_ref *out, size_t max, struct gs_error **err)
{
        if (!kube_dns_label_valid(ns) || !kube_dns_subdomain_valid(name))
                return gs_error_set(err, -EINVAL, "claim %.63s/%.253s: not a valid namespace and "
                                    "name", ns, name);
        char path[64 + KUBE_NAMESPACE_MAX + KUBE_NAME_MAX];
        snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s",
                 ns, name);
        json_t *claim = NULL;
        int r = apiserver_get(a, path, &claim, err);
        if (r < 0)
                return gs_error_wrap(err, "claim %s/%s", ns, name);
        const char *uid = json_string_value(json_object_get(json_object_get(claim, "metadata"),
                                                            "uid"));
        if (claim_uid && *claim_uid && (!uid || strcmp(uid, claim_uid) != 0))
                r = gs_error_set(err, -ESTALE, "claim %s/%s: uid %s, not %s (another claim of "
                                 "that name)", ns, name, uid ? uid : "(none)", claim_uid);
        else
                r = kube_claim_reserved_pods(claim, out, max, err);
        json_decref(claim);
        return r;
}
