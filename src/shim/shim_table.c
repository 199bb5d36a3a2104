/* SPDX-License-Identifier: Apache-2.0 */
/* Per-process table of what this process charged: (kind, pointer/handle) ->
 * bytes. Open addressing with linear probing and tombstones, grown at half
 * load, so put/get/take are O(1) whatever the number of live allocations.
 * One process-local mutex, held only for the table operation. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shim_entry *slots;
static size_t n_slots;  /* power of two, 0 before the first put */
static size_t n_live;
static size_t n_tomb;

static uint64_t mix(uint32_t kind, uint64_t key)
{
        uint64_t x = key ^ ((uint64_t)kind << 56) ^ 0x9e3779b97f4a7c15ull;
        x ^= x >> 30;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 27;
        x *= 0x94d049bb133111ebull;
        x ^= x >> 31;
        return x;
}

/* Index of (kind, key), or of the slot to insert it at when absent
 * (*found false). Requires n_slots > n_live + n_tomb. */
static size_t probe(uint32_t kind, uint64_t key, bool *found)
{
        size_t mask = n_slots - 1, i = (size_t)mix(kind, key) & mask;
        size_t first_tomb = SIZE_MAX;
        for (;;) {
                struct shim_entry *e = &slots[i];
                if (e->kind == 0) {
                        if (e->tomb) {
                                if (first_tomb == SIZE_MAX)
                                        first_tomb = i;
                        } else {
                                *found = false;
                                return first_tomb != SIZE_MAX ? first_tomb : i;
                        }
                } else if (e->kind == kind && e->key == key) {
                        *found = true;
                        return i;
                }
                i = (i + 1) & mask;
        }
}

static int grow(void)
{
        size_t want = n_slots ? n_slots : 1024;
        while ((n_live + 1) * 2 > want)
                want *= 2;
        struct shim_entry *fresh = calloc(want, sizeof(*fresh));
        if (!fresh)
                return -ENOMEM;
        struct shim_entry *old = slots;
        size_t old_n = n_slots;
        slots = fresh;
        n_slots = want;
        n_tomb = 0;
        for (size_t i = 0; i < old_n; i++) {
                if (old[i].kind == 0)
                        continue;
                bool found;
                size_t j = probe(old[i].kind, old[i].key, &found);
                slots[j] = old[i];
        }
        free(old);
        return 0;
}

int shim_table_put(uint32_t kind, uint64_t key, uint64_t bytes, uint64_t aux)
{
        return shim_table_put_in(kind, key, bytes, aux, 0);
}

int shim_table_put_in(uint32_t kind, uint64_t key, uint64_t bytes, uint64_t aux, uint64_t ctx)
{
        int r = 0;
        pthread_mutex_lock(&table_mu);
        if ((n_live + n_tomb + 1) * 2 > n_slots) {
                r = grow();
                if (r < 0)
                        goto out;
        }
        bool found;
        size_t i = probe(kind, key, &found);
        if (!found) {
                if (slots[i].tomb)
                        n_tomb--;
                n_live++;
        }
        slots[i] = (struct shim_entry){ .key = key, .bytes = bytes, .aux = aux, .ctx = ctx, .kind = kind };
out:
        pthread_mutex_unlock(&table_mu);
        return r;
}

bool shim_table_get(uint32_t kind, uint64_t key, struct shim_entry *ret)
{
        bool found = false;
        pthread_mutex_lock(&table_mu);
        if (n_slots) {
                size_t i = probe(kind, key, &found);
                if (found)
                        *ret = slots[i];
        }
        pthread_mutex_unlock(&table_mu);
        return found;
}

bool shim_table_take(uint32_t kind, uint64_t key, struct shim_entry *ret)
{
        bool found = false;
        pthread_mutex_lock(&table_mu);
        if (n_slots) {
                size_t i = probe(kind, key, &found);
                if (found) {
                        *ret = slots[i];
                        slots[i] = (struct shim_entry){ .tomb = 1 };
                        n_live--;
                        n_tomb++;
                }
        }
        pthread_mutex_unlock(&table_mu);
        return found;
}

size_t shim_table_drop_ctx(uint64_t ctx, uint32_t kinds, struct shim_entry *ret, size_t n_ret)
{
        size_t n = 0;
        pthread_mutex_lock(&table_mu);
        for (size_t i = 0; i < n_slots && n < n_ret; i++) {
                struct shim_entry *e = &slots[i];
                if (e->kind == 0 || e->kind >= 32 || !(kinds & (1u << e->kind)) || e->ctx != ctx)
                        continue;
                ret[n++] = *e;
                *e = (struct shim_entry){ .tomb = 1 };
                n_live--;
                n_tomb++;
        }
        pthread_mutex_unlock(&table_mu);
        return n;
}

void shim_table_settle(bool had, const struct shim_entry *e, CUresult r)
{
        if (had && r != CUDA_SUCCESS)
                shim_table_put(e->kind, e->key, e->bytes, e->aux);
        else if (had)
                shim_books_release(e->bytes);
}

void shim_table_atfork_child(void)
{
        /* Only the forking thread exists in the child: no one else can hold
         * the lock's memory meaningfully; start over. */
        pthread_mutex_init(&table_mu, NULL);
        free(slots);
        slots = NULL;
        n_slots = n_live = n_tomb = 0;
}

pthread_mutex_t *shim_table_test_mutex(void)
{
        return &table_mu;
}
