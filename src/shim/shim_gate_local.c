/* SPDX-License-Identifier: Apache-2.0 */
/* Local enforcement: a one-slice arbiter (src/core/arbiter.c, policy cap
 * at the slice's share) shared by every process of the slice through the
 * file <slice_dir>/compute.local, so the slice's processes together get the
 * share (not each of them). The file holds a robust process-shared mutex,
 * the arbiter, the reports owed for the current hold, and a lease page of
 * the same layout as the daemon's, which the gate reads the same way.
 *
 * Used when there is no daemon and no outage window (shim_gate_window.c):
 * the shim times the arbiter itself (the launching threads and each
 * process's background thread call shim_local_tick). Private to the slice;
 * never read by the daemon. When the file is unusable the same arbiter
 * runs in the process's own memory (fails closed, never ungated). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arbiter_page.h"
#include "shim.h"
#include "shim_gate.h"

#define LOCAL_MAGIC 0x314c434f4c534753ULL /* "SGSLOCL1" */
#define LOCAL_VERSION 3u /* 3: the arbiter state grew (time waited for a lease) */
#define LOCAL_FILE "compute.local"

struct shim_local_state {
        uint64_t magic; /* written last at creation */
        uint32_t version, size;
        pthread_mutex_t mu; /* robust, process-shared; guards everything below */
        uint32_t milli, policy;
        int32_t slot;
        uint32_t owed;      /* reports still owed for owed_gen */
        uint64_t owed_gen;
        uint64_t owed_busy; /* busy ns reported so far for owed_gen */
        uint32_t owed_pending, pad;
        struct gs_arb_page lease; /* seq/gen/start/until/futex used */
        struct gs_arbiter arb;
};

/* The mapping is shim_gs.local (struct shim_gate_state), `ls` below. */

struct gs_arb_page *shim_local_page(void)
{
        struct shim_local_state *ls = shim_gs.local;
        return ls ? &ls->lease : NULL;
}

static int init_state(struct shim_local_state *s, const struct gs_slice_conf *conf)
{
        memset(s, 0, sizeof(*s));
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        int r = pthread_mutex_init(&s->mu, &a);
        pthread_mutexattr_destroy(&a);
        if (r)
                return -r;
        s->version = LOCAL_VERSION;
        s->size = sizeof(*s);
        s->milli = conf->compute_milli;
        s->policy = GS_POLICY_CAP;
        r = gs_arbiter_init(&s->arb, NULL);
        if (r < 0)
                return r;
        s->slot = gs_arbiter_slice_join(&s->arb, conf->compute_milli, GS_POLICY_CAP, shim_gate_now());
        if (s->slot < 0)
                return s->slot;
        s->lease.magic = GS_ARB_PAGE_MAGIC;
        s->lease.version = GS_ARB_PROTO_VERSION;
        s->lease.size = sizeof(s->lease);
        snprintf(s->lease.slice, sizeof(s->lease.slice), "%s", conf->slice);
        s->lease.milli = conf->compute_milli;
        s->lease.policy = GS_POLICY_CAP;
        s->lease.quantum_ns = s->arb.p.quantum_ns;
        __atomic_store_n(&s->magic, LOCAL_MAGIC, __ATOMIC_RELEASE);
        return 0;
}

static int attach_shared(const struct gs_slice_conf *conf);

/* The fallback when compute.local cannot be used: the same arbiter in this
 * process's own memory (never shared, so nothing another process writes
 * can open it). Static: it cannot fail to exist. */
static struct shim_local_state private_state;

bool shim_local_is_private(void)
{
        return shim_gs.local == &private_state;
}

/* compute.local is unusable: pace this process alone at the share. One
 * process is held to the share exactly; several processes of the slice
 * each get it (the file, which made them share one cap, is what broke). */
static int attach_private(const struct gs_slice_conf *conf, int why)
{
        int r = init_state(&private_state, conf);
        if (r < 0)
                return r;
        shim_gs.local = &private_state;
        shim_log("compute: local enforcement unavailable (%s/%s: %s): this process paces its "
                 "launches alone at %u milli (fails closed: never ungated)",
                 conf->slice_dir, LOCAL_FILE, strerror(-why), conf->compute_milli);
        return 0;
}

int shim_local_attach(const struct gs_slice_conf *conf)
{
        if (shim_gs.local)
                return 0;
        int r = attach_shared(conf);
        return r < 0 ? attach_private(conf, r) : 0;
}

void shim_local_forget_private(void)
{
        if (shim_local_is_private())
                shim_gs.local = NULL;
}

static int attach_shared(const struct gs_slice_conf *conf)
{
        struct shim_statefile f;
        int r = shim_statefile_open(conf->slice_dir, LOCAL_FILE, sizeof(struct shim_local_state), 0600,
                                    "compute", &f);
        if (r < 0)
                goto out;
        struct shim_local_state *s = f.map;
        if (f.fresh) {
                r = init_state(s, conf);
        } else if (__atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) != LOCAL_MAGIC ||
                   s->version != LOCAL_VERSION || s->size != sizeof(*s)) {
                r = -EPROTO;
        } else if (s->milli != conf->compute_milli) {
                shim_log("compute: %s was made for %u milli, this process's config says %u: using %u",
                         f.path, s->milli, conf->compute_milli, s->milli);
        }
out:
        if (r == 0)
                shim_gs.local = shim_statefile_close(&f, true);
        else
                shim_statefile_close(&f, false);
        if (r < 0)
                shim_log("compute: cannot use %s: %s", f.path, strerror(-r));
        return r;
}

static int local_lock(void)
{
        struct shim_local_state *ls = shim_gs.local;
        int r = pthread_mutex_lock(&ls->mu);
        if (r == EOWNERDEAD) {
                /* A process died inside the lock: every change under it is a
                 * few stores; the arbiter stays usable. */
                pthread_mutex_consistent(&ls->mu);
                return 0;
        }
        return -r;
}

/* Publishes a lease (seqlock), then wakes waiters. Lock held. */
static void publish(uint64_t gen, uint64_t start, uint64_t until)
{
        struct shim_local_state *ls = shim_gs.local;
        struct gs_arb_page *p = &ls->lease;
        if (atomic_load_explicit(&p->gen, memory_order_relaxed) == gen &&
            atomic_load_explicit(&p->until_ns, memory_order_relaxed) == until)
                return;
        gs_arb_page_write(p, gen, start, until);
}

int shim_local_tick(bool want, struct gs_arb_decision *d)
{
        struct shim_local_state *ls = shim_gs.local;
        if (!ls)
                return -ENODEV;
        int r = local_lock();
        if (r < 0)
                return r;
        uint64_t now = shim_gate_now();
        if (want)
                gs_arbiter_want(&ls->arb, ls->slot, now);
        gs_arbiter_next(&ls->arb, now, d);
        if (d->state == GS_ARB_GRANTED)
                publish(d->gen, d->grant_start, d->grant_until);
        pthread_mutex_unlock(&ls->mu);
        return 0;
}

void shim_local_join(uint64_t gen)
{
        struct shim_local_state *ls = shim_gs.local;
        if (!ls || local_lock() < 0)
                return;
        if (ls->owed_gen != gen) {
                ls->owed_gen = gen;
                ls->owed = 0;
                ls->owed_busy = 0;
                ls->owed_pending = 0;
        }
        ls->owed++;
        pthread_mutex_unlock(&ls->mu);
}

void shim_local_report(uint64_t gen, uint64_t busy, bool pending)
{
        struct shim_local_state *ls = shim_gs.local;
        if (!ls || local_lock() < 0)
                return;
        bool settle = false;
        if (ls->owed_gen == gen && ls->owed > 0) {
                ls->owed_busy += busy;
                ls->owed_pending |= pending;
                settle = --ls->owed == 0;
        }
        if (settle) {
                uint64_t now = shim_gate_now();
                gs_arbiter_done(&ls->arb, ls->slot, gen, ls->owed_busy, ls->owed_pending != 0, now);
                struct gs_arb_decision d;
                gs_arbiter_next(&ls->arb, now, &d);
                if (d.state == GS_ARB_GRANTED)
                        publish(d.gen, d.grant_start, d.grant_until);
                /* Waiters re-decide even when nothing was granted (cap credit). */
                atomic_fetch_add_explicit(&ls->lease.futex, 1, memory_order_release);
                shim_gate_futex_wake(&ls->lease.futex);
        }
        pthread_mutex_unlock(&ls->mu);
}
