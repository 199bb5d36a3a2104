/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced's evictor: the watchdog's evict policy on Kubernetes. A thread
 * of its own takes the evictions the watchdog asks for (src/daemon/
 * evictions.h), finds the pods (the one the front-end learnt, or a DRA
 * claim's reservedFor) and evicts them through the Eviction API
 * (src/kube/pod_eviction.h), so no HTTP call runs on the event loop or
 * under the node's lock. */
#include "frontends.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "apiserver.h"
#include "evictions.h"
#include "log.h"
#include "pod_eviction.h"

#define EVICT_MAX_PODS 8 /* pods of one claim evicted for one slice */

static struct apiserver *evictor_api; /* the evictor thread's own client */

int evictor_prepare(struct daemon *d)
{
        struct gs_error *err = NULL;
        int r = daemon_apiserver(d, &evictor_api, &err);
        if (r == 0 && (r = evictions_new(&d->evictions)) < 0)
                gs_error_set(&err, r, "out of memory");
        if (r < 0) {
                gs_log_info("evictions: no API-server access (%s); policy evict kills instead",
                            gs_error_msg(err));
                gs_error_free(err);
                evictor_api = apiserver_free(evictor_api);
                return 0;
        }
        return 1;
}

void evictor_done(struct daemon *d)
{
        d->evictions = evictions_free(d->evictions);
        evictor_api = apiserver_free(evictor_api);
}

/* Evict the pods of request q: 0, or the first failure's negative errno;
 * msg (size bytes) says what happened. */
static int evict(const struct evict_request *q, char *msg, size_t size)
{
        struct kube_pod_ref pods[EVICT_MAX_PODS];
        int n = 0;
        struct gs_error *err = NULL;
        if (q->pod_name[0]) {
                pods[0] = (struct kube_pod_ref){ 0 };
                snprintf(pods[0].ns, sizeof(pods[0].ns), "%s", q->pod_ns);
                snprintf(pods[0].name, sizeof(pods[0].name), "%s", q->pod_name);
                snprintf(pods[0].uid, sizeof(pods[0].uid), "%s", q->pod_uid);
                n = 1;
        } else {
                n = kube_claim_pods(evictor_api, q->claim_ns, q->claim_name, q->claim_uid, pods,
                                    EVICT_MAX_PODS, &err);
                if (n == 0)
                        gs_error_set(&err, -ENOENT, "claim %s/%s is reserved for no pod",
                                     q->claim_ns, q->claim_name);
                if (n <= 0) {
                        snprintf(msg, size, "%s", gs_error_msg(err));
                        gs_error_free(err);
                        return n < 0 ? n : -ENOENT;
                }
                if (n > EVICT_MAX_PODS)
                        n = EVICT_MAX_PODS;
        }
        size_t used = 0;
        int evicted = 0, failure = 0;
        for (int i = 0; i < n; i++) {
                int r = kube_evict_pod(evictor_api, &pods[i], &err);
                if (r == 0 || r == -ENOENT) { /* gone already: nothing left to stop */
                        evicted++;
                        used += (size_t)snprintf(msg + used, used < size ? size - used : 0,
                                                 "%spod %s/%s %s", used ? "; " : "", pods[i].ns,
                                                 pods[i].name,
                                                 r == 0 ? "evicted" : "already gone");
                } else {
                        if (!failure)
                                failure = r;
                        used += (size_t)snprintf(msg + used, used < size ? size - used : 0,
                                                 "%s%s", used ? "; " : "", gs_error_msg(err));
                }
                gs_error_free(err);
                err = NULL;
        }
        return failure ? failure : evicted > 0 ? 0 : -ENOENT;
}

int evictor_run(struct daemon *d, int stop_fd, struct gs_error **err)
{
        (void)err;
        gs_log_info("evictions: through the API server %s", apiserver_server(evictor_api));
        for (;;) {
                struct pollfd pfd[2] = { { .fd = stop_fd, .events = POLLIN },
                                         { .fd = evictions_fd(d->evictions), .events = POLLIN } };
                int n = poll(pfd, 2, -1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 || pfd[0].revents)
                        return 0;
                struct evict_request q;
                while (evictions_take(d->evictions, &q) == 1) {
                        char msg[EVICT_MSG_MAX];
                        int r = evict(&q, msg, sizeof(msg));
                        if (r == 0)
                                gs_log_info("slice %s: %s", q.slice, msg);
                        else
                                gs_log_warn("slice %s: %s", q.slice, msg);
                        evictions_finish(d->evictions, q.slice, r, msg);
                }
        }
}
