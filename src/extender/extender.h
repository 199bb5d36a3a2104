/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice-extender's verbs (docs/scheduling.md, "gpuslice-extender"):
 * the kube-scheduler's filter and prioritize calls answered from each
 * node's per-GPU report (the Node annotation gpuslice.io/gpus) less the
 * pods the extender sent there that the report does not show yet
 * (ext_admitted.h), with the cluster placement policy of core
 * (cluster_placement.h).
 *
 *   filter      a node passes when one of its GPUs can take the pod's
 *               share (and memory, when the pod asks), or it has enough
 *               fully free GPUs for whole GPUs; a failed node's reason
 *               names the largest free share it has. Nodes without a
 *               report, or with one older than stale_after_s, fail
 *               (FailedNodes). A pod no node could ever take fails
 *               every node as unresolvable.
 *   prioritize  10 for the one best node by the policy's score (ties broken
 *               by name), which is recorded as admitted there, and the
 *               policy's score (0..100) scaled to 0..EXT_OTHERS_MAX for the
 *               others: the top is unique and leads by at least
 *               (10 - EXT_OTHERS_MAX) x 10 x weight points, so the
 *               scheduler most likely binds there.
 *
 * No bind verb: the scheduler binds, and the record covers the time until
 * the node reports the pod. What remains (the scheduler picking another
 * node than the extender's top) is bounded by the TTL and the node's own
 * admission check; docs/scheduling.md discusses it.
 *
 * Thread-safety: the verbs may run concurrently (the model under its own
 * lock, the record under its own). */
#ifndef GS_EXTENDER_H
#define GS_EXTENDER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster_placement.h"
#include "ext_admitted.h"
#include "ext_args.h"

#define EXT_MAX_PRIORITY 10 /* MaxExtenderPriority of kube-scheduler */
#define EXT_OTHERS_MAX 5    /* the most a node other than the best one gets */

struct ext_config {
        enum gs_cp_policy policy;
        int64_t stale_after_s; /* a report older than this is stale */
        int64_t admitted_ttl_s;
        /* The clock, unix seconds (NULL: time()); tests give their own. */
        int64_t (*now)(void);
};

struct extender {
        struct ext_config cfg;
        pthread_mutex_t model_lock;
        struct gs_cp_model *model; /* learnt online from every pod filtered */
        struct ext_admitted admitted;
};

/* Set up e with cfg. 0, or -ENOMEM. */
int extender_init(struct extender *e, const struct ext_config *cfg);

/* Free what e holds; NULL-safe. */
void extender_done(struct extender *e);

/* The filter verb on an ExtenderArgs body: 0 with *status (200, or 400
 * for a body that is not an ExtenderArgs), *resp (an ExtenderFilterResult,
 * JSON, malloc'd) and *resp_len; -ENOMEM when no answer could be built.
 * A node_http_post_fn with e as ctx. */
int ext_filter_http(void *e, const char *body, size_t len, unsigned *status, char **resp,
                    size_t *resp_len);

/* The prioritize verb: as ext_filter_http, answering a HostPriorityList
 * (400 with the same ExtenderFilterResult error shape would confuse the
 * scheduler's decoder, so a bad body is answered 400 with
 * {"Error": "..."}, which it reports as the status). */
int ext_prioritize_http(void *e, const char *body, size_t len, unsigned *status, char **resp,
                        size_t *resp_len);

#endif /* GS_EXTENDER_H */
