/* SPDX-License-Identifier: Apache-2.0 */
/* Evictions the watchdog asks for (policy evict), handed to a worker
 * thread that speaks to the API server (gpusliced's evictor), so that no
 * HTTP call runs on the event loop or under the node's lock. The watchdog
 * submits a request per slice and reads its state on later samples; the
 * worker takes requests and reports how each ended. Thread-safe (one
 * mutex); nothing here speaks Kubernetes. */
#ifndef GS_DAEMON_EVICTIONS_H
#define GS_DAEMON_EVICTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "ledger.h"

#define EVICT_MSG_MAX 320
#define EVICTIONS_MAX 64 /* slices with an eviction in hand at once */

/* Whom to evict for one slice: its pod when the front-end knows it, and
 * (DRA) its claim, through which the worker finds the pods otherwise. */
struct evict_request {
        char slice[GS_SLICE_ID_MAX + 1];
        char pod_ns[64];
        char pod_name[254];
        char pod_uid[64];
        char claim_ns[64];
        char claim_name[254];
        char claim_uid[64];
};

enum evict_state {
        EVICT_NONE,    /* nothing asked for this slice */
        EVICT_PENDING, /* submitted, the worker has not finished it */
        EVICT_DONE,    /* the API server accepted the eviction */
        EVICT_FAILED,  /* it could not be evicted (msg says why) */
};

struct evictions;

/* An empty set with its wake-up pipe; 0 or -errno. */
int evictions_new(struct evictions **ret);
/* NULL-safe; returns NULL. After the worker has stopped. */
struct evictions *evictions_free(struct evictions *e);

/* Watchdog: ask for r->slice's eviction. 0; -EEXIST when the slice has
 * one in hand already (any state but NONE); -ENOSPC when EVICTIONS_MAX are. */
int evictions_submit(struct evictions *e, const struct evict_request *r);
/* Watchdog: the state of slice's eviction; with msg (EVICT_MSG_MAX bytes,
 * may be NULL) what the worker said: the pods evicted, or the failure, and
 * with ret_err (may be NULL) a failure's negative errno. */
enum evict_state evictions_state(struct evictions *e, const char *slice, char *msg, int *ret_err);
/* Watchdog: forget slice's eviction (the slice is gone, or it is to be
 * asked again). A request the worker holds still finishes; its result is
 * then dropped. */
void evictions_forget(struct evictions *e, const char *slice);

/* Worker: the fd that is readable while a request waits (poll it with the
 * worker's stop fd), and the next request: 1 and *ret, or 0 when none. */
int evictions_fd(const struct evictions *e);
int evictions_take(struct evictions *e, struct evict_request *ret);
/* Worker: how slice's request ended: 0 accepted, else a negative errno
 * (-EBUSY: a disruption budget refused it; -ETIMEDOUT, -EIO,
 * -ECONNREFUSED: the API server did not answer in time), msg one line. */
void evictions_finish(struct evictions *e, const char *slice, int result, const char *msg);

#endif /* GS_DAEMON_EVICTIONS_H */
