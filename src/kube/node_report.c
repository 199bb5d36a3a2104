/* SPDX-License-Identifier: Apache-2.0 */
/* The node's per-GPU report for the extender (node_report.h). */
#include "node_report.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pod_eviction.h"

static void rfc3339(int64_t unix_s, char *buf, size_t size)
{
        time_t t = (time_t)unix_s;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int kube_node_report_text(const struct gs_inventory *inv, const struct gs_gpu_usage *usage,
                          enum gs_placement_policy placement, const char *const *pods,
                          size_t n_pods, uint64_t gen, int64_t unix_s, char **ret,
                          struct gs_error **err)
{
        char when[32];
        rfc3339(unix_s, when, sizeof(when));
        json_t *gpus = json_array(), *uids = json_array();
        json_t *o = json_pack("{s:I, s:s, s:o, s:s, s:o}", "generation", (json_int_t)gen, "time",
                              when, "gpus", gpus, "placement",
                              gs_placement_policy_name(placement), "pods", uids);
        for (size_t i = 0; o && uids && i < n_pods; i++)
                if (json_array_append_new(uids, json_string(pods[i])) < 0) {
                        json_decref(o);
                        o = NULL;
                }
        for (unsigned i = 0; o && gpus && i < inv->n_gpus; i++) {
                const struct gs_gpu *g = &inv->gpus[i];
                json_t *e = json_pack("{s:I, s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I}", "index",
                                      (json_int_t)g->index, "uuid", g->uuid, "model", g->name,
                                      "healthy", g->healthy, "milli_free",
                                      (json_int_t)(g->healthy ? usage[i].free_milli : 0),
                                      "slices", (json_int_t)usage[i].n_slices, "memory_free",
                                      (json_int_t)usage[i].free_memory, "memory_total",
                                      (json_int_t)g->memory_total, "context_overhead",
                                      (json_int_t)g->context_overhead);
                if (!e || json_array_append_new(gpus, e) < 0) {
                        json_decref(o);
                        o = NULL;
                }
        }
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!text)
                return gs_error_set(err, -ENOMEM, "out of memory for the node's report");
        *ret = text;
        return 0;
}

int kube_node_report_publish(struct apiserver *a, const char *node, const char *text,
                             struct gs_error **err)
{
        if (!kube_dns_subdomain_valid(node))
                return gs_error_set(err, -EINVAL, "node name %.253s is not a DNS subdomain", node);
        json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations",
                                  KUBE_NODE_REPORT_ANNOTATION, text);
        if (!patch)
                return gs_error_set(err, -ENOMEM, "out of memory");
        char path[32 + KUBE_NAME_MAX];
        snprintf(path, sizeof(path), "/api/v1/nodes/%s", node);
        int r = apiserver_patch_merge(a, path, patch, NULL, err);
        json_decref(patch);
        if (r < 0)
                return gs_error_wrap(err, "the report of node %s", node);
        return 0;
}
