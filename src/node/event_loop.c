/* SPDX-License-Identifier: Apache-2.0 */
/* The event loop. See event_loop.h. */
#include "event_loop.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"

int64_t node_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int node_loop_init(struct node_loop *l, pthread_mutex_t *lock, struct gs_error **err)
{
        *l = (struct node_loop){ .epfd = epoll_create1(EPOLL_CLOEXEC), .lock = lock };
        if (l->epfd < 0)
                return gs_error_set(err, -errno, "epoll_create1: %s", strerror(errno));
        return 0;
}

void node_loop_done(struct node_loop *l)
{
        if (l->epfd >= 0)
                close(l->epfd);
        l->epfd = -1;
}

int node_loop_watch(struct node_loop *l, struct node_watch *w, uint32_t events)
{
        struct epoll_event ev = { .events = events, .data.ptr = w };
        return epoll_ctl(l->epfd, EPOLL_CTL_ADD, w->fd, &ev) < 0 ? -errno : 0;
}

int node_loop_rewatch(struct node_loop *l, struct node_watch *w, uint32_t events)
{
        struct epoll_event ev = { .events = events, .data.ptr = w };
        return epoll_ctl(l->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0 ? -errno : 0;
}

void node_loop_unwatch(struct node_loop *l, struct node_watch *w)
{
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
        struct epoll_event *evs = l->batch;
        for (int i = l->batch_at + 1; evs && i < l->batch_n; i++)
                if (evs[i].data.ptr == w)
                        evs[i].data.ptr = NULL;
}

int node_loop_add_tick(struct node_loop *l, node_tick_fn fn, void *ctx)
{
        if (l->n_ticks == NODE_LOOP_MAX_TICKS)
                return -ENOSPC;
        l->ticks[l->n_ticks].fn = fn;
        l->ticks[l->n_ticks].ctx = ctx;
        l->n_ticks++;
        return 0;
}

void node_loop_stop(struct node_loop *l)
{
        l->stop = true;
}

/* Run the ticks; the soonest next run, -1 for none. */
static int run_ticks(struct node_loop *l)
{
        int timeout = -1;
        int64_t now = node_now_ms();
        for (unsigned i = 0; i < l->n_ticks; i++) {
                int t = l->ticks[i].fn(l->ticks[i].ctx, now);
                if (t >= 0 && (timeout < 0 || t < timeout))
                        timeout = t;
        }
        return timeout;
}

int node_loop_run(struct node_loop *l)
{
        struct epoll_event evs[64];
        while (!l->stop) {
                pthread_mutex_lock(l->lock);
                int timeout = run_ticks(l);
                pthread_mutex_unlock(l->lock);
                if (l->stop)
                        break;
                int n = epoll_wait(l->epfd, evs, (int)GS_ARRAY_SIZE(evs), timeout);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int e = errno;
                        gs_log_error("epoll_wait: %s", strerror(e));
                        return -e;
                }
                pthread_mutex_lock(l->lock);
                l->batch = evs;
                l->batch_n = n;
                for (l->batch_at = 0; l->batch_at < n && !l->stop; l->batch_at++) {
                        struct node_watch *w = evs[l->batch_at].data.ptr;
                        if (w) /* NULL: unwatched by an earlier handler */
                                w->fn(w, evs[l->batch_at].events);
                }
                l->batch = NULL;
                l->batch_n = 0;
                pthread_mutex_unlock(l->lock);
        }
        return 0;
}
