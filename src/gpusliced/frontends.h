/* SPDX-License-Identifier: Apache-2.0 */
/* The front-ends gpusliced runs in threads of their own, over the daemon's
 * node: the kubelet device plugin (--kubelet, kubelet.c) and the DRA
 * driver (--dra, dra.c); threads.c starts and stops them. */
#ifndef GS_GPUSLICED_FRONTENDS_H
#define GS_GPUSLICED_FRONTENDS_H

#include "daemon.h"

/* Set up t (not started) for `run`, which serves until stop_fd is readable
 * and returns 0, or a negative errno with *err when it fails. */
void daemon_thread_init(struct daemon_thread *t, const char *what,
                        int (*run)(struct daemon *d, int stop_fd, struct gs_error **err));

/* Start t's thread; its end is watched on d->loop (an end nobody asked
 * for stops the daemon). 0, or a negative errno (logged). */
int daemon_thread_start(struct daemon *d, struct daemon_thread *t);

/* Stop t's thread and wait for it (no-op when not running). */
void daemon_thread_stop(struct daemon *d, struct daemon_thread *t);

/* This node's name for the API server: --node-name, else $NODE_NAME,
 * else the host name (in buf, size bytes); NULL when none. */
const char *daemon_node_name(const struct daemon *d, char *buf, size_t size);

struct apiserver;
/* A new API-server client for d (--kubeconfig, else the pod's service
 * account); each thread makes its own. 0 and *ret, or a negative errno
 * with *err. */
int daemon_apiserver(const struct daemon *d, struct apiserver **ret, struct gs_error **err);

/* --report-node: the node's per-GPU state as an annotation of its Node
 * (reporter.c), until stop_fd is readable. */
int reporter_run(struct daemon *d, int stop_fd, struct gs_error **err);

/* The device plugin over d's node (kube_plugin_run). */
int kubelet_run(struct daemon *d, int stop_fd, struct gs_error **err);

/* The DRA driver over d's node: the kubelet's DRA plugin service and the
 * node's ResourceSlice. */
int dra_run(struct daemon *d, int stop_fd, struct gs_error **err);

/* The watchdog's evictions (evictor.c). Prepare: reach the API server
 * (--kubeconfig, else the pod's service account) and set d->evictions;
 * 1 when it can, 0 when not (logged: policy evict then kills). Before the
 * watchdog starts. */
int evictor_prepare(struct daemon *d);
/* The evictor's thread: evict what the watchdog asks until stop_fd is
 * readable; returns 0. */
int evictor_run(struct daemon *d, int stop_fd, struct gs_error **err);
/* After the thread and the watchdog have stopped: free what prepare made. */
void evictor_done(struct daemon *d);

#endif /* GS_GPUSLICED_FRONTENDS_H */
