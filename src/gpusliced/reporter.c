/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced --report-node: the node's per-GPU state for the scheduler's
 * extender, as an annotation of its Node (src/kube/node_report.h), from a
 * thread of its own: written when the node's slices or GPUs change
 * (checked every second) and rewritten every 30 s as a heartbeat, so the
 * extender can tell a report that stopped. */
#include "frontends.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apiserver.h"
#include "log.h"
#include "node_report.h"

#define REPORT_CHECK_MS 1000
#define REPORT_HEARTBEAT_S 30
#define REPORT_BACKOFF_MAX_MS 10000

static int64_t now_s(void)
{
        return (int64_t)time(NULL);
}

static uint64_t now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000;
}

/* One report of d's node: its text in *ret (free()), when anything moved
 * since *seen (the node's generation), or with `force`. 1 written, 0 not
 * needed, or a negative errno. */
static int report_text(struct daemon *d, uint64_t *seen, uint64_t *gen, bool force, char **ret,
                       struct gs_error **err)
{
        static struct gs_inventory inv; /* large: not on the stack; one reporter */
        static struct gs_gpu_usage usage[GS_MAX_GPUS];
        static char uids[GS_LEDGER_MAX_SLICES][64];
        static const char *pods[GS_LEDGER_MAX_SLICES];
        size_t n_pods = 0;
        node_lock(d->node);
        uint64_t g = d->node->generation + (d->node->pods_generation << 32);
        bool moved = g != *seen || !*gen;
        if (moved || force) {
                inv = d->node->inv;
                node_usage_locked(d->node, usage);
                for (size_t i = 0; i < d->node->n_pods && n_pods < GS_LEDGER_MAX_SLICES; i++) {
                        const char *uid = d->node->pods[i].pod.uid;
                        bool dup = false;
                        for (size_t k = 0; k < n_pods && !dup; k++)
                                dup = strcmp(pods[k], uid) == 0;
                        if (!*uid || dup)
                                continue; /* a pod of several slices is listed once */
                        snprintf(uids[n_pods], sizeof(uids[0]), "%s", uid);
                        pods[n_pods] = uids[n_pods];
                        n_pods++;
                }
        }
        node_unlock(d->node);
        if (!moved && !force)
                return 0;
        if (moved) {
                uint64_t us = now_us();
                *gen = us > *gen ? us : *gen + 1;
                *seen = g;
        }
        int r = kube_node_report_text(&inv, usage, d->policy, pods, n_pods, *gen, now_s(), ret,
                                      err);
        return r < 0 ? r : 1;
}

int reporter_run(struct daemon *d, int stop_fd, struct gs_error **err)
{
        char host[256];
        const char *name = daemon_node_name(d, host, sizeof(host));
        if (!name || !*name)
                return gs_error_set(err, -EINVAL, "--report-node: no node name (--node-name or "
                                    "$NODE_NAME)");
        struct apiserver *api = NULL;
        int r = daemon_apiserver(d, &api, err);
        if (r < 0)
                return gs_error_wrap(err, "--report-node");
        gs_log_info("reporting the GPUs of node %s as its annotation %s (API server %s)", name,
                    KUBE_NODE_REPORT_ANNOTATION, apiserver_server(api));
        uint64_t seen = 0, gen = 0;
        int64_t last = 0;
        unsigned wait_ms = 0, backoff_ms = 0;
        char failed[512] = "";
        for (;;) {
                struct pollfd pfd = { .fd = stop_fd, .events = POLLIN };
                int n = poll(&pfd, 1, (int)wait_ms);
                if (n > 0 || (n < 0 && errno != EINTR))
                        break;
                wait_ms = REPORT_CHECK_MS;
                struct gs_error *e = NULL;
                char *text = NULL;
                bool due = failed[0] || now_s() - last >= REPORT_HEARTBEAT_S;
                r = report_text(d, &seen, &gen, due, &text, &e);
                bool wrote = r == 1;
                if (wrote)
                        r = kube_node_report_publish(api, name, text, &e);
                free(text);
                if (r < 0) { /* written again (same generation) once it works */
                        if (strcmp(failed, gs_error_msg(e)) != 0)
                                gs_log_warn("%s (retrying)", gs_error_msg(e));
                        snprintf(failed, sizeof(failed), "%s", gs_error_msg(e));
                        backoff_ms = backoff_ms ? backoff_ms * 2 : REPORT_CHECK_MS;
                        if (backoff_ms > REPORT_BACKOFF_MAX_MS)
                                backoff_ms = REPORT_BACKOFF_MAX_MS;
                        wait_ms = backoff_ms;
                } else if (wrote) {
                        if (failed[0])
                                gs_log_info("node %s reported again", name);
                        failed[0] = '\0';
                        backoff_ms = 0;
                        last = now_s();
                }
                gs_error_free(e);
        }
        apiserver_free(api);
        return 0;
}
