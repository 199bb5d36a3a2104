/* SPDX-License-Identifier: Apache-2.0 */
/* The node's event loop: one epoll instance and one thread, with watches
 * (an fd and the function that serves its events) and ticks (functions
 * asked before every wait when they next need to run). Every protocol a
 * daemon serves is a kind of watch: the local API's connections, the
 * compute arbiter's shims, pidfds, signals; an HTTP endpoint is one more.
 * Each batch of events is served with `lock` held (the node's lock), so
 * what the handlers touch is consistent with other threads' calls into
 * the node layer. */
#ifndef GS_NODE_EVENT_LOOP_H
#define GS_NODE_EVENT_LOOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

struct node_watch;
/* Serve `events` (EPOLLIN, EPOLLOUT, EPOLLHUP ...) on w->fd. May unwatch
 * and free w, and watch others. */
typedef void (*node_watch_fn)(struct node_watch *w, uint32_t events);

/* Embed it first in whatever the fd belongs to. */
struct node_watch {
        int fd;
        node_watch_fn fn;
        void *ctx;
};

/* Run what is due; return milliseconds until it next needs to run, or -1
 * when nothing is pending. Called with the lock held. */
typedef int (*node_tick_fn)(void *ctx, int64_t now_ms);

#define NODE_LOOP_MAX_TICKS 4

struct node_loop {
        int epfd;
        bool stop;
        /* The batch being served: a watch unwatched by a handler is taken
         * out of what is left of it (it may be freed right after). */
        void *batch;
        int batch_n, batch_at;
        pthread_mutex_t *lock;
        struct {
                node_tick_fn fn;
                void *ctx;
        } ticks[NODE_LOOP_MAX_TICKS];
        unsigned n_ticks;
};

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t node_now_ms(void);

/* Create the epoll instance; lock is taken around every batch. 0 or -errno
 * with *err. */
int node_loop_init(struct node_loop *l, pthread_mutex_t *lock, struct gs_error **err);
/* Close the epoll instance (watches are their owners' to close). */
void node_loop_done(struct node_loop *l);

/* Start watching w->fd for `events`, change the events, stop. A watch
 * unwatched from a handler gets no further event of the current batch, so
 * its owner may free it at once. */
int node_loop_watch(struct node_loop *l, struct node_watch *w, uint32_t events);
int node_loop_rewatch(struct node_loop *l, struct node_watch *w, uint32_t events);
void node_loop_unwatch(struct node_loop *l, struct node_watch *w);

/* Add a tick. 0, or -ENOSPC past NODE_LOOP_MAX_TICKS. */
int node_loop_add_tick(struct node_loop *l, node_tick_fn fn, void *ctx);

/* Serve events until node_loop_stop. 0, or -errno when epoll fails. */
int node_loop_run(struct node_loop *l);

/* Make node_loop_run return after the current batch (from a handler). */
void node_loop_stop(struct node_loop *l);

#endif /* GS_NODE_EVENT_LOOP_H */
