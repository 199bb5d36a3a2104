/* SPDX-License-Identifier: Apache-2.0 */
/* The watchdog's evictions in hand (evictions.h). */
#include "evictions.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct entry {
        struct evict_request req;
        enum evict_state state;
        bool taken; /* the worker holds it */
        int err;    /* a failure's negative errno */
        char msg[EVICT_MSG_MAX];
};

struct evictions {
        pthread_mutex_t lock;
        int wake[2]; /* a byte per waiting request; non-blocking */
        struct entry e[EVICTIONS_MAX];
        size_t n;
};

int evictions_new(struct evictions **ret)
{
        struct evictions *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        if (pipe2(e->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
                int r = -errno;
                free(e);
                return r;
        }
        pthread_mutex_init(&e->lock, NULL);
        *ret = e;
        return 0;
}

struct evictions *evictions_free(struct evictions *e)
{
        if (e) {
                close(e->wake[0]);
                close(e->wake[1]);
                pthread_mutex_destroy(&e->lock);
                free(e);
        }
        return NULL;
}

static struct entry *find(struct evictions *e, const char *slice)
{
        for (size_t i = 0; i < e->n; i++)
                if (strcmp(e->e[i].req.slice, slice) == 0)
                        return &e->e[i];
        return NULL;
}

int evictions_submit(struct evictions *e, const struct evict_request *r)
{
        pthread_mutex_lock(&e->lock);
        int ret = 0;
        if (find(e, r->slice))
                ret = -EEXIST;
        else if (e->n == EVICTIONS_MAX)
                ret = -ENOSPC;
        else
                e->e[e->n++] = (struct entry){ .req = *r, .state = EVICT_PENDING };
        pthread_mutex_unlock(&e->lock);
        if (ret == 0 && write(e->wake[1], "x", 1) < 0) {
                /* full pipe: the worker has bytes to read and will find it */
        }
        return ret;
}

enum evict_state evictions_state(struct evictions *e, const char *slice, char *msg, int *ret_err)
{
        pthread_mutex_lock(&e->lock);
        const struct entry *x = find(e, slice);
        enum evict_state s = x ? x->state : EVICT_NONE;
        if (msg)
                snprintf(msg, EVICT_MSG_MAX, "%s", x ? x->msg : "");
        if (ret_err)
                *ret_err = x ? x->err : 0;
        pthread_mutex_unlock(&e->lock);
        return s;
}

void evictions_forget(struct evictions *e, const char *slice)
{
        pthread_mutex_lock(&e->lock);
        struct entry *x = find(e, slice);
        if (x)
                *x = e->e[--e->n];
        pthread_mutex_unlock(&e->lock);
}

int evictions_fd(const struct evictions *e)
{
        return e->wake[0];
}

int evictions_take(struct evictions *e, struct evict_request *ret)
{
        char buf[64];
        while (read(e->wake[0], buf, sizeof(buf)) > 0) {
        }
        pthread_mutex_lock(&e->lock);
        int found = 0;
        for (size_t i = 0; i < e->n && !found; i++)
                if (e->e[i].state == EVICT_PENDING && !e->e[i].taken) {
                        e->e[i].taken = true;
                        *ret = e->e[i].req;
                        found = 1;
                }
        pthread_mutex_unlock(&e->lock);
        return found;
}

void evictions_finish(struct evictions *e, const char *slice, int result, const char *msg)
{
        pthread_mutex_lock(&e->lock);
        struct entry *x = find(e, slice);
        if (x && x->taken && x->state == EVICT_PENDING) {
                x->state = result == 0 ? EVICT_DONE : EVICT_FAILED;
                x->err = result;
                snprintf(x->msg, sizeof(x->msg), "%s", msg);
        }
        pthread_mutex_unlock(&e->lock);
}
