/* SPDX-License-Identifier: Apache-2.0 */
/* The slice's shared books: <slice_dir>/memory (include/gpuslice/
 * slice_state.h), shared by every process of the slice. The lock is robust
 * and held only for the arithmetic; liveness checks (procfs reads) happen
 * outside it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gpuslice/slice_state.h>

#include "proc_stat.h"
#include "shim.h"

static struct gs_slice_state *st;
static uint64_t my_owner;   /* identity of this process */
/* -1: none yet (after fork: taken lazily). Set and cleared only under the
 * state lock; readers that act on the slot re-read it under that lock. */
static int my_slot = -1;
/* Set by books_exit: the process is exiting (its slot stays charged until
 * it is gone); no new slot is taken and every later reservation is
 * refused. */
static bool books_closed;
static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER; /* claiming only */

/* Start time (field 22 of /proc/<pid>/stat) and state of a process: 0,
 * -ESRCH when the process does not exist, or another -errno when its
 * identity cannot be read (an fd table full, /proc unreadable): the
 * process may well be alive. */
static int proc_identity(int pid, uint64_t *ret_start, char *ret_state)
{
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                int r = -errno;
                /* ENOENT: no such process, unless /proc itself is missing. */
                if (r == -ENOENT && kill(pid, 0) < 0 && errno == ESRCH)
                        return -ESRCH;
                return r == -ENOENT ? -EIO : r;
        }
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        int err = n < 0 ? -errno : -EIO;
        close(fd);
        struct gs_proc_stat ps;
        if (n <= 0 || gs_proc_stat_parse(buf, (size_t)n, &ps) < 0)
                return n == 0 || err == -ESRCH ? -ESRCH : err; /* an empty file: it just died */
        if (ret_state)
                *ret_state = ps.state;
        *ret_start = ps.start_time;
        return 0;
}

/* Whether the process of a slot still holds its memory. A process is dead
 * only when it is known to be: gone, a zombie (the driver freed its memory
 * at exit), or its pid reused (another start time). One whose identity
 * cannot be read counts as alive: its memory stays charged and the slice
 * refuses an allocation rather than let it past the cap. */
static bool owner_alive(uint64_t owner)
{
        if (owner == my_owner)
                return true;
        char state = '?';
        uint64_t start = 0;
        int r = proc_identity(GS_SLOT_OWNER_PID(owner), &start, &state);
        if (r == -ESRCH)
                return false;
        if (r < 0) {
                shim_log("books: cannot read the identity of pid %d (%s): counted as alive",
                         GS_SLOT_OWNER_PID(owner), strerror(-r));
                return true;
        }
        if (state == 'Z' || state == 'X')
                return false;
        return (start & ((1ull << 40) - 1)) == GS_SLOT_OWNER_START(owner);
}

static int state_lock(void)
{
        int r = pthread_mutex_lock(&st->lock);
        if (r == EOWNERDEAD) {
                /* A process died inside the lock: `used` and the slots are
                 * changed together under it, so the slots are the truth. */
                uint64_t sum = 0;
                for (unsigned i = 0; i < GS_SLICE_STATE_SLOTS; i++)
                        if (st->slots[i].owner)
                                sum += st->slots[i].charged;
                st->used = sum;
                pthread_mutex_consistent(&st->lock);
                shim_log("books: repaired after a process died holding the lock (used %llu)",
                         (unsigned long long)sum);
                return 0;
        }
        return r ? -r : 0;
}

static void state_unlock(void)
{
        pthread_mutex_unlock(&st->lock);
}

/* Frees the slots of dead processes (and of this process's pre-exec image,
 * which has the same identity but another slot). Returns bytes reclaimed. */
static uint64_t reclaim_dead(void)
{
        uint64_t total = 0;
        for (unsigned i = 0; i < GS_SLICE_STATE_SLOTS; i++) {
                uint64_t o = __atomic_load_n(&st->slots[i].owner, __ATOMIC_ACQUIRE);
                if (!o || (int)i == __atomic_load_n(&my_slot, __ATOMIC_ACQUIRE))
                        continue;
                if (o != my_owner && owner_alive(o))
                        continue;
                if (state_lock() < 0)
                        return total;
                if (st->slots[i].owner == o) {
                        uint64_t c = st->slots[i].charged;
                        st->used = st->used >= c ? st->used - c : 0;
                        st->reclaimed += c;
                        st->slots[i].charged = 0;
                        __atomic_store_n(&st->slots[i].owner, 0, __ATOMIC_RELEASE);
                        total += c;
                        shim_log("books: reclaimed %llu bytes of dead pid %d",
                                 (unsigned long long)c, GS_SLOT_OWNER_PID(o));
                }
                state_unlock();
        }
        return total;
}

static int claim_slot(void)
{
        pthread_mutex_lock(&slot_mu);
        int r = 0;
        if (__atomic_load_n(&my_slot, __ATOMIC_ACQUIRE) >= 0)
                goto out;
        if (__atomic_load_n(&books_closed, __ATOMIC_ACQUIRE)) {
                r = -ESHUTDOWN;
                goto out;
        }
        uint64_t start = 0;
        r = proc_identity((int)getpid(), &start, NULL);
        if (r < 0) {
                /* Without it, other processes would take this one for dead
                 * and reclaim its memory: take no slot (refuse). */
                shim_log("books: cannot read this process's identity (%s): refusing", strerror(-r));
                goto out;
        }
        my_owner = GS_SLOT_OWNER(getpid(), start & ((1ull << 40) - 1));
        for (int attempt = 0; attempt < 2; attempt++) {
                if (attempt == 1)
                        reclaim_dead();
                r = state_lock();
                if (r < 0)
                        goto out;
                if (__atomic_load_n(&books_closed, __ATOMIC_ACQUIRE)) {
                        state_unlock();
                        r = -ESHUTDOWN;
                        goto out;
                }
                for (unsigned i = 0; i < GS_SLICE_STATE_SLOTS; i++) {
                        if (st->slots[i].owner == 0) {
                                st->slots[i].charged = 0;
                                st->slots[i].peak = 0;
                                __atomic_store_n(&st->slots[i].owner, my_owner, __ATOMIC_RELEASE);
                                __atomic_store_n(&my_slot, (int)i, __ATOMIC_RELEASE);
                                break;
                        }
                }
                state_unlock();
                if (__atomic_load_n(&my_slot, __ATOMIC_ACQUIRE) >= 0)
                        goto out;
        }
        r = -ENOSPC;
        shim_log("books: all %u process slots of the slice are taken", GS_SLICE_STATE_SLOTS);
out:
        pthread_mutex_unlock(&slot_mu);
        return r;
}

static int init_state(struct gs_slice_state *s, const struct gs_slice_conf *conf)
{
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        int r = pthread_mutex_init(&s->lock, &a);
        pthread_mutexattr_destroy(&a);
        if (r)
                return -r;
        s->version = GS_SLICE_STATE_VERSION;
        s->n_slots = GS_SLICE_STATE_SLOTS;
        s->file_size = sizeof(*s);
        s->limit = conf->memory_limit;
        snprintf(s->slice, sizeof(s->slice), "%s", conf->slice);
        __atomic_store_n(&s->magic, GS_SLICE_STATE_MAGIC, __ATOMIC_RELEASE);
        return 0;
}

int shim_books_attach(const struct gs_slice_conf *conf)
{
        struct shim_statefile f;
        int r = shim_statefile_open(conf->slice_dir, GS_SLICE_STATE_FILE, sizeof(struct gs_slice_state),
                                    0660, "books", &f);
        if (r < 0)
                return r; /* logged */
        struct gs_slice_state *s = f.map;
        if (f.fresh) {
                r = init_state(s, conf);
                if (r < 0)
                        goto out;
        } else if (__atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) != GS_SLICE_STATE_MAGIC ||
                   s->version != GS_SLICE_STATE_VERSION || s->file_size != sizeof(*s) ||
                   s->n_slots != GS_SLICE_STATE_SLOTS) {
                r = -EPROTO;
                shim_log("books: %s is not a version %u slice state file", f.path,
                         GS_SLICE_STATE_VERSION);
                goto out;
        }
        if (s->limit != conf->memory_limit)
                shim_log("books: %s was created with limit %llu, this process's config says %llu: "
                         "enforcing the lower, %llu",
                         f.path, (unsigned long long)s->limit, (unsigned long long)conf->memory_limit,
                         (unsigned long long)(s->limit < conf->memory_limit ? s->limit
                                                                           : conf->memory_limit));
out:
        if (r == 0)
                st = shim_statefile_close(&f, true);
        else
                shim_statefile_close(&f, false);
        if (r < 0) {
                if (r != -EPROTO)
                        shim_log("books: cannot attach %s: %s", f.path, strerror(-r));
                return r;
        }
        r = claim_slot();
        if (r < 0)
                return r;
        reclaim_dead();
        return 0;
}

uint64_t shim_books_limit(uint64_t conf_limit)
{
        if (!st)
                return conf_limit;
        uint64_t rec = __atomic_load_n(&st->limit, __ATOMIC_RELAXED);
        return rec && rec < conf_limit ? rec : conf_limit;
}

static int reserve_once(uint64_t bytes, bool force)
{
        if (state_lock() < 0)
                return -EIO;
        /* The slot is re-read under the lock: a slot that is no longer ours
         * (reclaimed as an earlier image's) takes nothing, and an exiting
         * process reserves nothing. */
        int slot = __atomic_load_n(&my_slot, __ATOMIC_ACQUIRE);
        if (slot < 0 || (unsigned)slot >= GS_SLICE_STATE_SLOTS || st->slots[slot].owner != my_owner ||
            (!force && __atomic_load_n(&books_closed, __ATOMIC_ACQUIRE))) {
                state_unlock();
                return -ESHUTDOWN;
        }
        struct gs_slice_slot *s = &st->slots[slot];
        /* The lower of this process's config and the limit recorded in the
         * shared file by the slice's first process: a process with a bigger
         * config cannot raise the slice's cap. */
        uint64_t limit = shim_conf.memory_limit;
        if (st->limit && st->limit < limit)
                limit = st->limit;
        int r = 0;
        if (force || (st->used <= limit && bytes <= limit - st->used)) {
                st->used += bytes;
                s->charged += bytes;
                if (s->charged > s->peak)
                        s->peak = s->charged;
                if (st->used > st->peak)
                        st->peak = st->used;
        } else {
                r = -ENOMEM;
        }
        state_unlock();
        return r;
}

int shim_books_reserve(uint64_t bytes)
{
        if (__atomic_load_n(&my_slot, __ATOMIC_ACQUIRE) < 0 && claim_slot() < 0)
                return -ENOMEM;
        int r = reserve_once(bytes, false);
        if (r == -ESHUTDOWN) {
                shim_log("books: refusing %llu bytes: this process has left the slice's books "
                         "(exiting)", (unsigned long long)bytes);
                return -ENOMEM;
        }
        if (r == -ENOMEM && reclaim_dead() > 0)
                r = reserve_once(bytes, false);
        return r;
}

void shim_books_refused(uint64_t bytes)
{
        if (!st)
                return;
        /* Lock-free and never blocking: the daemon reads these each sample. */
        if (__atomic_fetch_add(&st->ooms, 1, __ATOMIC_RELAXED) == 0) {
                __atomic_store_n(&st->refused_pid, (uint32_t)getpid(), __ATOMIC_RELAXED);
                __atomic_store_n(&st->refused_first, bytes, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&st->refused_last, bytes, __ATOMIC_RELAXED);
}

void shim_books_force(uint64_t bytes)
{
        if (__atomic_load_n(&my_slot, __ATOMIC_ACQUIRE) < 0 && claim_slot() < 0)
                return;
        reserve_once(bytes, true);
}

void shim_books_release(uint64_t bytes)
{
        if (!st || !bytes || __atomic_load_n(&my_slot, __ATOMIC_ACQUIRE) < 0)
                return;
        if (state_lock() < 0)
                return;
        int slot = __atomic_load_n(&my_slot, __ATOMIC_ACQUIRE);
        if (slot >= 0 && (unsigned)slot < GS_SLICE_STATE_SLOTS && st->slots[slot].owner == my_owner) {
                struct gs_slice_slot *s = &st->slots[slot];
                uint64_t b = bytes <= s->charged ? bytes : s->charged;
                s->charged -= b;
                st->used = st->used >= b ? st->used - b : 0;
        }
        state_unlock();
}

uint64_t shim_books_used(void)
{
        return st ? __atomic_load_n(&st->used, __ATOMIC_RELAXED) : 0;
}

void shim_books_atfork_child(void)
{
        pthread_mutex_init(&slot_mu, NULL);
        my_slot = -1;
        my_owner = 0;
        books_closed = false;
}

void shim_books_reclaim(void)
{
        if (st)
                reclaim_dead();
}

/* A process that is exiting still holds its memory until it is gone (the
 * driver frees it then, and exit() may block after the destructors, in a
 * final stdio flush): its slot stays charged, and is reclaimed like a
 * killed one's by the next process of the slice that attaches, reports or
 * needs the room once the process is really gone. From here on this
 * process reserves nothing. */
__attribute__((destructor)) static void books_exit(void)
{
        if (!st)
                return;
        /* No slot is taken and nothing reserved after this point
         * (claim_slot and reserve_once check the flag under the state lock
         * too). */
        __atomic_store_n(&books_closed, true, __ATOMIC_RELEASE);
}

pthread_mutex_t *shim_books_test_mutex(bool shared)
{
        return shared ? (st ? &st->lock : NULL) : &slot_mu;
}
