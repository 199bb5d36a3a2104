/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu shared state: creation, attach, the robust lock, process records
 * and reaping. Layout in sim_state.h. */
#include "sim_state.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Start time of pid (/proc/<pid>/stat field 22) into *out: 0, -ENOENT /
 * -ESRCH when there is no such process, another -errno when it cannot be
 * read (EMFILE: no descriptor left, EACCES). */
static int proc_start(pid_t pid, uint64_t *out)
{
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        int err = errno;
        close(fd);
        if (n < 0)
                return err == ESRCH ? -ESRCH : -EIO;
        if (n == 0)
                return -ESRCH; /* the process went away while we read */
        buf[n] = 0;
        /* comm may contain spaces and parens: fields start after the last ')' */
        char *p = strrchr(buf, ')');
        if (!p)
                return -EIO;
        p++;
        /* field 3 (state) is the first after ')'; starttime is field 22 */
        for (int field = 2; field < 22 && *p; p++)
                if (*p == ' ')
                        field++;
        return sim_parse_u64_prefix(p, out, NULL) == 0 ? 0 : -EIO;
}

uint64_t sim_proc_start_time(pid_t pid)
{
        uint64_t v = 0;
        return proc_start(pid, &v) == 0 ? v : 0;
}

/* st is the mapping of a file just created by ftruncate, so every byte is
 * already zero: only the header and the device records are written, and
 * the process and context tables (most of the file) stay holes until used. */
static void init_state(struct sim_state *st, const struct sim_config *cfg)
{
        st->version = SIM_STATE_VERSION;
        st->total_size = sizeof(*st);
        pthread_mutexattr_t ma;
        pthread_mutexattr_init(&ma);
        pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
        pthread_mutex_init(&st->lock, &ma);
        pthread_mutexattr_destroy(&ma);
        st->ndev = cfg->ndev;
        st->sms = cfg->sms;
        st->memory = cfg->memory;
        st->ctx_overhead = cfg->ctx_overhead;
        st->timeslice_ns = cfg->timeslice_ns;
        st->queue_depth = cfg->queue_depth;
        uint64_t now = sim_now_ns();
        st->created_ns = now;
        for (unsigned i = 0; i < SIM_MAX_DEVICES; i++) {
                struct sim_dev_rec *d = &st->dev[i];
                memcpy(d->name, cfg->name, sizeof(d->name));
                sim_make_uuid(i, d->uuid_bytes, d->uuid);
                d->total = cfg->memory;
                d->now_ns = now;
                d->last_snap_ns = now;
                d->cur_ctx = -1;
        }
        /* publish last */
        __atomic_store_n(&st->magic, SIM_STATE_MAGIC, __ATOMIC_RELEASE);
}

static int create_file(const char *dir, const char *path, const struct sim_config *cfg)
{
        char tmp[4200];
        snprintf(tmp, sizeof(tmp), "%s/state.tmp.%d", dir, (int)getpid());
        int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) {
                sim_log("cannot create %s: %s", tmp, strerror(errno));
                return SIM_E_OS;
        }
        int r = 0;
        if (ftruncate(fd, (off_t)sizeof(struct sim_state)) < 0) {
                sim_log("ftruncate %s: %s", tmp, strerror(errno));
                r = SIM_E_OS;
        } else {
                void *m = mmap(NULL, sizeof(struct sim_state), PROT_READ | PROT_WRITE, MAP_SHARED,
                               fd, 0);
                if (m == MAP_FAILED) {
                        sim_log("mmap %s: %s", tmp, strerror(errno));
                        r = SIM_E_OS;
                } else {
                        init_state(m, cfg);
                        munmap(m, sizeof(struct sim_state));
                        /* link() is atomic and fails if another process won */
                        if (link(tmp, path) < 0 && errno != EEXIST) {
                                sim_log("link %s: %s", path, strerror(errno));
                                r = SIM_E_OS;
                        }
                }
        }
        close(fd);
        unlink(tmp);
        return r;
}

int sim_state_attach(struct sim_attach *a, const struct sim_config *cfg, bool create)
{
        a->st = NULL;
        a->fd = -1;
        char path[4200];
        snprintf(path, sizeof(path), "%s/state", cfg->dir);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
                if (!create)
                        return SIM_E_ABSENT;
                if (mkdir(cfg->dir, 0700) < 0 && errno != EEXIST) {
                        sim_log("cannot create %s: %s", cfg->dir, strerror(errno));
                        return SIM_E_OS;
                }
                int r = create_file(cfg->dir, path, cfg);
                if (r)
                        return r;
                fd = open(path, O_RDWR | O_CLOEXEC);
        }
        if (fd < 0) {
                sim_log("cannot open %s: %s", path, strerror(errno));
                return SIM_E_OS;
        }
        struct stat sb;
        if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size != sizeof(struct sim_state)) {
                sim_log("%s: size %lld, expected %zu (another simgpu version?)", path,
                        (long long)sb.st_size, sizeof(struct sim_state));
                close(fd);
                return SIM_E_MISMATCH;
        }
        void *m = mmap(NULL, sizeof(struct sim_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
                sim_log("mmap %s: %s", path, strerror(errno));
                close(fd);
                return SIM_E_OS;
        }
        struct sim_state *st = m;
        if (__atomic_load_n(&st->magic, __ATOMIC_ACQUIRE) != SIM_STATE_MAGIC ||
            st->version != SIM_STATE_VERSION || st->total_size != sizeof(*st) ||
            st->ndev < 1 || st->ndev > SIM_MAX_DEVICES) {
                sim_log("%s: bad magic/version/size (another simgpu version?)", path);
                munmap(m, sizeof(*st));
                close(fd);
                return SIM_E_MISMATCH;
        }
        if (st->ndev != cfg->ndev || st->memory != cfg->memory ||
            st->ctx_overhead != cfg->ctx_overhead)
                sim_log("%s exists with another configuration; the file wins", path);
        a->st = st;
        a->fd = fd;
        return 0;
}

void sim_state_detach(struct sim_attach *a)
{
        if (a->st)
                munmap(a->st, sizeof(*a->st));
        if (a->fd >= 0)
                close(a->fd);
        a->st = NULL;
        a->fd = -1;
}

/* After a lock owner died mid-update: make the books consistent again. */
static void repair(struct sim_state *st)
{
        sim_log("lock owner died; repairing state");
        int n_procs = sim_proc_slots(st), n_ctxs = sim_ctx_slots(st);
        for (unsigned d = 0; d < SIM_MAX_DEVICES; d++) {
                uint64_t used = 0;
                for (int p = 0; p < n_procs; p++)
                        if (st->proc[p].state == SIM_PROC_ALIVE)
                                used += st->proc[p].used[d];
                st->dev[d].used = used;
                if (st->dev[d].cur_ctx >= n_ctxs)
                        st->dev[d].cur_ctx = -1;
        }
        for (int c = 0; c < n_ctxs; c++) {
                struct sim_ctx_rec *x = &st->ctx[c];
                if (x->count > SIM_QUEUE_MAX || x->head >= SIM_QUEUE_MAX) {
                        x->count = 0;
                        x->head = 0;
                        x->done_seq = x->enq_seq;
                }
        }
        st->next_reap_ns = 0;
}

void sim_lock(struct sim_state *st)
{
        int r = pthread_mutex_lock(&st->lock);
        if (r == EOWNERDEAD) {
                pthread_mutex_consistent(&st->lock);
                repair(st);
        }
}

void sim_unlock(struct sim_state *st)
{
        pthread_mutex_unlock(&st->lock);
}

/* Whether pid's descriptor fd still refers to the file (dev, ino): false
 * only when it certainly does not (closed: at an execve, or reused for
 * another file). */
static bool attach_held(pid_t pid, int fd, uint64_t dev, uint64_t ino)
{
        if (fd < 0)
                return true;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
        struct stat sb;
        if (stat(path, &sb) < 0)
                return errno != ENOENT;
        return (uint64_t)sb.st_dev == dev && (uint64_t)sb.st_ino == ino;
}

bool sim_proc_alive(const struct sim_proc_rec *p)
{
        if (p->state != SIM_PROC_ALIVE)
                return false;
        if (kill(p->pid, 0) < 0 && errno == ESRCH)
                return false;
        uint64_t st = 0;
        int r = proc_start(p->pid, &st);
        if (r == -ENOENT || r == -ESRCH)
                return false;
        if (r < 0)
                return true; /* cannot tell: not dead */
        if (st != p->start_time)
                return false; /* a recycled pid */
        return attach_held(p->pid, p->att_fd, p->att_dev, p->att_ino);
}

static void reap_one(struct sim_state *st, int p);

/* 32 bits of the kernel's AT_RANDOM bytes: the same for every copy of
 * simgpu in one process image, new at each execve (never 0). */
static uint32_t image_token(void)
{
        const unsigned char *r = (const unsigned char *)(uintptr_t)getauxval(AT_RANDOM);
        uint32_t t = 0;
        if (r)
                memcpy(&t, r + 12, sizeof(t));
        return t ? t : 1;
}

int sim_proc_register(struct sim_state *st, int att_fd)
{
        pid_t pid = getpid();
        uint64_t start = sim_proc_start_time(pid);
        uint32_t image = image_token();
        int free_slot = -1, exited_slot = -1, n = sim_proc_slots(st);
        for (int i = 0; i < n; i++) {
                struct sim_proc_rec *p = &st->proc[i];
                if (p->state == SIM_PROC_ALIVE && p->pid == pid && p->start_time == start) {
                        if (p->image == image)
                                return i; /* another copy of simgpu in this image */
                        /* our pid before an execve: that image is gone */
                        sim_advance_all(st, sim_now_ns());
                        reap_one(st, i);
                        if (free_slot < 0)
                                free_slot = i;
                        continue;
                }
                if (p->state == SIM_PROC_FREE && free_slot < 0)
                        free_slot = i;
                if (p->state == SIM_PROC_EXITED && exited_slot < 0)
                        exited_slot = i;
        }
        /* The lowest free record (records above the mark are all free),
         * then the oldest exited one, whose figures are given up. */
        if (free_slot < 0 && n < SIM_MAX_PROCS)
                free_slot = n;
        int s = free_slot >= 0 ? free_slot : exited_slot;
        if (s < 0) {
                sim_reap(st, true);
                for (int i = 0; i < n && s < 0; i++)
                        if (st->proc[i].state != SIM_PROC_ALIVE)
                                s = i;
                if (s < 0)
                        return SIM_E_FULL;
        }
        if (s >= n)
                st->proc_slots = (uint32_t)s + 1;
        struct sim_proc_rec *p = &st->proc[s];
        memset(p, 0, sizeof(*p));
        p->pid = pid;
        p->start_time = start;
        p->image = image;
        p->att_fd = -1;
        struct stat sb;
        if (att_fd >= 0 && fstat(att_fd, &sb) == 0) {
                p->att_fd = att_fd;
                p->att_dev = (uint64_t)sb.st_dev;
                p->att_ino = (uint64_t)sb.st_ino;
        }
        uint64_t now = sim_now_ns();
        for (unsigned d = 0; d < SIM_MAX_DEVICES; d++) {
                p->snaps[d][0].t_ns = now;
                p->snap_head[d] = 1;
        }
        p->state = SIM_PROC_ALIVE;
        return s;
}

uint64_t sim_ipc_leave(struct sim_state *st, struct sim_ipc_rec *r, int p)
{
        if (r->exporter == p)
                r->exporter_holds = 0;
        for (int k = 0; k < SIM_IPC_IMPORTERS; k++)
                if (r->imp[k] == p) {
                        r->imp[k] = -1;
                        r->imp_refs[k] = 0;
                }
        int next = r->exporter_holds ? r->exporter : -1;
        for (int k = 0; next < 0 && k < SIM_IPC_IMPORTERS; k++)
                if (r->imp[k] >= 0)
                        next = r->imp[k];
        if (next < 0) {
                r->in_use = 0; /* nobody holds it: the memory is freed */
                return r->owner == p ? r->bytes : 0;
        }
        if (r->owner != p || r->dev < 0 || r->dev >= SIM_MAX_DEVICES || next >= SIM_MAX_PROCS)
                return 0;
        /* the charge follows the memory to a process that keeps it alive */
        uint64_t *from = &st->proc[p].used[r->dev], *to = &st->proc[next].used[r->dev];
        *from = *from >= r->bytes ? *from - r->bytes : 0;
        *to += r->bytes;
        r->owner = next;
        return 0;
}

static void reap_one(struct sim_state *st, int p)
{
        struct sim_proc_rec *pr = &st->proc[p];
        sim_log("reaping dead process %d", pr->pid);
        /* imports and exports it held (what others keep alive moves to them) */
        for (int i = 0; i < SIM_MAX_IPC; i++)
                if (st->ipc[i].in_use)
                        sim_ipc_leave(st, &st->ipc[i], p);
        for (int c = 0; c < sim_ctx_slots(st); c++)
                if (st->ctx[c].in_use && st->ctx[c].proc == p)
                        sim_ctx_release(st, c);
        for (int e = 0; e < SIM_MAX_EVENTS; e++)
                if (st->ev[e].in_use && st->ev[e].proc == p)
                        st->ev[e].in_use = 0;
        for (unsigned d = 0; d < SIM_MAX_DEVICES; d++) {
                uint64_t u = pr->used[d];
                st->dev[d].used = st->dev[d].used >= u ? st->dev[d].used - u : 0;
                pr->used[d] = 0;
                pr->nctx[d] = 0;
        }
        pr->state = SIM_PROC_EXITED; /* busy figures stay readable until reused */
}

/* Whether process record p is to be checked for a device-dev answer (every
 * live one when dev < 0). */
static bool reap_candidate(const struct sim_proc_rec *p, int dev)
{
        if (p->state != SIM_PROC_ALIVE)
                return false;
        return dev < 0 || p->nctx[dev] || p->used[dev];
}

/* Reaps the dead among the candidates for dev. Each is checked once: its
 * death is decided before the timelines are advanced (to charge what ran
 * before it), and only those are reaped after. */
static int reap_some(struct sim_state *st, int dev, uint64_t now)
{
        uint8_t dead[SIM_MAX_PROCS];
        int n_procs = sim_proc_slots(st), n = 0;
        for (int p = 0; p < n_procs; p++) {
                dead[p] = reap_candidate(&st->proc[p], dev) && !sim_proc_alive(&st->proc[p]);
                n += dead[p];
        }
        if (!n)
                return 0;
        /* charge what ran before the death, then return the resources */
        sim_advance_all(st, now);
        for (int p = 0; p < n_procs; p++)
                if (dead[p])
                        reap_one(st, p);
        return n;
}

int sim_reap(struct sim_state *st, bool force)
{
        uint64_t now = sim_now_ns();
        if (!force && now < st->next_reap_ns)
                return 0;
        st->next_reap_ns = now + SIM_REAP_PERIOD_NS;
        return reap_some(st, -1, now);
}

int sim_reap_dev(struct sim_state *st, int dev)
{
        if (dev < 0 || dev >= SIM_MAX_DEVICES)
                return 0;
        return reap_some(st, dev, sim_now_ns());
}
