/* SPDX-License-Identifier: Apache-2.0 */
/* The admitted-pods record (ext_admitted.h): a flat array under a mutex.
 * Each filter or prioritize call walks it once per candidate node, so a
 * burst of thousands of pending decisions costs a few milliseconds. */
#include "ext_admitted.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "quantity.h"

void ext_admitted_init(struct ext_admitted *a, int64_t ttl_s)
{
        memset(a, 0, sizeof(*a));
        pthread_mutex_init(&a->lock, NULL);
        a->ttl_s = ttl_s;
}

void ext_admitted_done(struct ext_admitted *a)
{
        free(a->items);
        a->items = NULL;
        a->n_items = a->cap_items = 0;
        pthread_mutex_destroy(&a->lock);
}

static void remove_at(struct ext_admitted *a, size_t i)
{
        a->items[i] = a->items[--a->n_items];
}

static ssize_t find_locked(const struct ext_admitted *a, const char *uid)
{
        for (size_t i = 0; i < a->n_items; i++)
                if (strcmp(a->items[i].uid, uid) == 0)
                        return (ssize_t)i;
        return -1;
}

int ext_admitted_add(struct ext_admitted *a, const struct ext_admitted_entry *e)
{
        pthread_mutex_lock(&a->lock);
        ssize_t at = find_locked(a, e->uid);
        if (at >= 0) {
                a->items[at] = *e;
                pthread_mutex_unlock(&a->lock);
                return 0;
        }
        if (a->n_items == EXT_ADMITTED_MAX) {
                size_t oldest = 0;
                for (size_t i = 1; i < a->n_items; i++)
                        if (a->items[i].at_s < a->items[oldest].at_s)
                                oldest = i;
                remove_at(a, oldest);
        }
        if (a->n_items == a->cap_items) {
                size_t cap = a->cap_items ? a->cap_items * 2 : 64;
                struct ext_admitted_entry *m = realloc(a->items, cap * sizeof(*m));
                if (!m) {
                        pthread_mutex_unlock(&a->lock);
                        return -ENOMEM;
                }
                a->items = m;
                a->cap_items = cap;
        }
        a->items[a->n_items++] = *e;
        pthread_mutex_unlock(&a->lock);
        return 0;
}

void ext_admitted_forget(struct ext_admitted *a, const char *uid)
{
        pthread_mutex_lock(&a->lock);
        ssize_t at = find_locked(a, uid);
        if (at >= 0)
                remove_at(a, (size_t)at);
        pthread_mutex_unlock(&a->lock);
}

static bool reported(const struct ext_admitted_entry *e, const struct ext_node_state *st)
{
        if (st->has_pods) {
                for (size_t i = 0; i < st->n_pods; i++)
                        if (strcmp(st->pods[i], e->uid) == 0)
                                return true;
                return false;
        }
        return st->generation > e->generation &&
               (st->generation > e->at_us || st->time_s > e->at_s);
}

static void charge(const struct ext_charge *c, struct ext_node_state *st)
{
        for (unsigned i = 0; i < st->n_gpus; i++) {
                struct ext_gpu *g = &st->gpus[i];
                if (!(c->gpus & (1ull << g->index)))
                        continue;
                uint64_t mem = c->milli >= GS_MILLI_PER_GPU ? g->memory_total
                               : c->memory                  ? c->memory
                                           : gs_default_memory_cap(c->milli, g->memory_total);
                g->milli_free = g->milli_free > c->milli ? g->milli_free - c->milli : 0;
                g->memory_free = g->memory_free > mem ? g->memory_free - mem : 0;
        }
}

unsigned ext_admitted_apply(struct ext_admitted *a, const char *node, struct ext_node_state *st,
                            int64_t now_s)
{
        unsigned charged = 0;
        pthread_mutex_lock(&a->lock);
        for (size_t i = 0; i < a->n_items;) {
                struct ext_admitted_entry *e = &a->items[i];
                bool mine = strcmp(e->node, node) == 0;
                if (now_s - e->at_s > a->ttl_s || (mine && reported(e, st))) {
                        remove_at(a, i);
                        continue;
                }
                if (mine) {
                        for (unsigned k = 0; k < e->n_charges && k < EXT_MAX_SLICES; k++)
                                charge(&e->charges[k], st);
                        charged++;
                }
                i++;
        }
        pthread_mutex_unlock(&a->lock);
        return charged;
}

size_t ext_admitted_count(struct ext_admitted *a)
{
        pthread_mutex_lock(&a->lock);
        size_t n = a->n_items;
        pthread_mutex_unlock(&a->lock);
        return n;
}
