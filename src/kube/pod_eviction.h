/* SPDX-License-Identifier: Apache-2.0 */
/* The watchdog's evict policy on Kubernetes: evicting a pod through the
 * Eviction API (the pods/eviction subresource, policy/v1; upstream
 * pkg/registry/core/pod/storage/eviction.go), so that the pod's
 * PodDisruptionBudget is honoured and its controller replaces it, and
 * finding the pods a DRA claim is reserved for. Over the one API-server
 * client (apiserver.h); blocking, for a worker thread. */
#ifndef GS_POD_EVICTION_H
#define GS_POD_EVICTION_H

#include <stddef.h>

#include "apiserver.h"
#include "error.h"

#define KUBE_NAMESPACE_MAX 63
#define KUBE_NAME_MAX 253
#define KUBE_UID_MAX 63

/* A pod by identity. */
struct kube_pod_ref {
        char ns[KUBE_NAMESPACE_MAX + 1];
        char name[KUBE_NAME_MAX + 1];
        char uid[KUBE_UID_MAX + 1]; /* "" when unknown */
};

/* POST /api/v1/namespaces/<ns>/pods/<name>/eviction with a policy/v1
 * Eviction, with deleteOptions.preconditions.uid when p->uid is known (a
 * pod of the same name made since is never evicted in its place). The
 * client retries a 429 (a disruption budget that allows no eviction now)
 * and 5xx within its timeout. 0: the eviction was accepted (the kubelet
 * now stops the pod within its termination grace period); -ENOENT: no such
 * pod (already gone); -EBUSY: still refused by a disruption budget after
 * the client's retries; -ESTALE: the uid precondition failed; other
 * negative errnos as apiserver_request. *err names the pod. */
int kube_evict_pod(struct apiserver *a, const struct kube_pod_ref *p, struct gs_error **err);

/* The pods claim <ns>/<name> is reserved for (status.reservedFor entries
 * of resource "pods" in the core group), when the claim's uid is
 * claim_uid (NULL or "": not checked). Writes at most max to out and
 * returns how many there are (0: reserved for no pod), or a negative
 * errno with *err: -ENOENT (no such claim), -ESTALE (another claim of that
 * name now), -EBADMSG (a malformed claim), or as apiserver_request. */
int kube_claim_pods(struct apiserver *a, const char *ns, const char *name, const char *claim_uid,
                    struct kube_pod_ref *out, size_t max, struct gs_error **err);

/* The pods in status.reservedFor of a claim object (as kube_claim_pods,
 * without a request): how many, at most max written; -EBADMSG with *err
 * for a malformed claim. */
int kube_claim_reserved_pods(const json_t *claim, struct kube_pod_ref *out, size_t max,
                             struct gs_error **err);

/* Whether s is a valid DNS label (RFC 1123: [a-z0-9-], at most 63, no
 * leading or trailing '-'), as namespaces are; subdomain: dot-separated
 * labels, at most 253, as pod and claim names are. */
bool kube_dns_label_valid(const char *s);
bool kube_dns_subdomain_valid(const char *s);

#endif /* GS_POD_EVICTION_H */
