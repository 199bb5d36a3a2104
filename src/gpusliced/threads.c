/* SPDX-License-Identifier: Apache-2.0 */
/* Front-ends in threads of their own. See frontends.h. */
#include "frontends.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "apiserver.h"
#include "log.h"

static void *thread_main(void *arg)
{
        struct daemon_thread *t = arg;
        struct daemon *d = t->done.ctx;
        struct gs_error *err = NULL;
        if (t->run(d, t->stop_rd, &err) < 0) {
                gs_log_error("%s: %s", t->what, gs_error_msg(err));
                t->failed = true;
        }
        gs_error_free(err);
        /* Tell the event loop (it stops the daemon if it did not ask). */
        (void)!write(t->done_wr, "x", 1);
        return NULL;
}

static void on_done(struct node_watch *w, uint32_t events)
{
        struct daemon *d = w->ctx;
        (void)events;
        gs_log_error("a front-end thread stopped: shutting down");
        node_loop_stop(&d->loop);
}

void daemon_thread_init(struct daemon_thread *t, const char *what,
                        int (*run)(struct daemon *d, int stop_fd, struct gs_error **err))
{
        *t = (struct daemon_thread){ .what = what, .run = run, .stop_rd = -1, .stop_wr = -1,
                                     .done_wr = -1, .done = { .fd = -1 } };
}

int daemon_thread_start(struct daemon *d, struct daemon_thread *t)
{
        int stop[2], done[2];
        if (pipe2(stop, O_CLOEXEC) < 0) {
                int e = errno;
                gs_log_error("%s: pipe: %s", t->what, strerror(e));
                t->failed = true;
                return -e;
        }
        if (pipe2(done, O_CLOEXEC | O_NONBLOCK) < 0) {
                int e = errno;
                close(stop[0]);
                close(stop[1]);
                gs_log_error("%s: pipe: %s", t->what, strerror(e));
                t->failed = true;
                return -e;
        }
        t->stop_rd = stop[0];
        t->stop_wr = stop[1];
        t->done_wr = done[1];
        t->done = (struct node_watch){ .fd = done[0], .fn = on_done, .ctx = d };
        int r = node_loop_watch(&d->loop, &t->done, EPOLLIN);
        if (r >= 0)
                r = -pthread_create(&t->thread, NULL, thread_main, t);
        if (r < 0) {
                gs_log_error("%s: cannot start: %s", t->what, strerror(-r));
                t->failed = true;
                node_loop_unwatch(&d->loop, &t->done);
                close(stop[0]);
                close(stop[1]);
                close(done[0]);
                close(done[1]);
                t->stop_rd = t->stop_wr = t->done_wr = t->done.fd = -1;
                return r;
        }
        t->running = true;
        return 0;
}

void daemon_thread_stop(struct daemon *d, struct daemon_thread *t)
{
        if (!t->running)
                return;
        close(t->stop_wr); /* the thread's poll sees the hang-up */
        pthread_join(t->thread, NULL);
        t->running = false;
        node_loop_unwatch(&d->loop, &t->done);
        close(t->done.fd);
        close(t->done_wr);
        close(t->stop_rd);
        t->stop_wr = t->stop_rd = t->done_wr = t->done.fd = -1;
}

const char *daemon_node_name(const struct daemon *d, char *buf, size_t size)
{
        if (d->dra.node_name)
                return d->dra.node_name;
        const char *env = getenv("NODE_NAME"); /* the DaemonSet's downward API */
        if (env && *env)
                return env;
        if (gethostname(buf, size) < 0)
                return NULL;
        buf[size - 1] = '\0';
        return buf;
}

int daemon_apiserver(const struct daemon *d, struct apiserver **ret, struct gs_error **err)
{
        struct apiserver_config cfg;
        int r = d->dra.kubeconfig
                        ? apiserver_config_from_kubeconfig(d->dra.kubeconfig, NULL, &cfg, err)
                        : apiserver_config_in_cluster(NULL, &cfg, err);
        if (r == 0) {
                r = apiserver_new(&cfg, ret, err);
                apiserver_config_done(&cfg);
        }
        return r < 0 ? gs_error_wrap(err, "the API server") : 0;
}
