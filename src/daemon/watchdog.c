/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced's watchdog sampler (watchdog_daemon.h): NVML's processes,
 * mapped to slices, the books read read-only, core's rules, the policy.
 * Runs as a tick of the event loop with the node's lock held: one sample
 * reads each GPU's process list once, /proc/<pid>/stat along each
 * process's ancestry (memoised within the sample) and each slice's books
 * file once. */
#include "watchdog_daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <gpuslice/slice_state.h>

#include "daemon.h"
#include "events.h"
#include "log.h"
#include "node_edits.h" /* NODE_CONTAINER_SLICE_DIR */
#include "node_files.h"
#include "number.h"
#include "nvml.h"
#include "proc.h"
#include "watchdog.h"

#include "watchdog_int.h"

/* ---- mapping a pid to a slice ---- */

static struct memo *memo_slot(struct wd_state *w, pid_t pid)
{
        size_t h = ((size_t)pid * 2654435761u) & (WD_MEMO - 1);
        for (size_t i = 0; i < WD_MEMO; i++) {
                struct memo *m = &w->memo[(h + i) & (WD_MEMO - 1)];
                if (m->gen != w->gen || m->pid == pid)
                        return m;
        }
        return NULL;
}

static int local_slice_of(const struct wd_state *w, pid_t p)
{
        for (size_t i = 0; i < w->n_slices; i++)
                if (w->slice_pid[i] == p)
                        return (int)i;
        return -1;
}

/* The snapshot index of pid's slice, or -1 with the reason in why: a local
 * slice whose process is pid or an ancestor (the walk is memoised), else
 * the pod slice whose directory is mounted at NODE_CONTAINER_SLICE_DIR in
 * pid's root. Certain either way: ancestry cannot be forged, and a bind
 * mount of another pod's slice directory is out of a tenant's reach. */
static int map_pid(struct wd_state *w, pid_t pid, char *why, size_t why_size)
{
        pid_t chain[WD_DEPTH];
        unsigned n = 0;
        int found = -1;
        bool known = false;
        for (pid_t p = pid; p > 1 && n < WD_DEPTH; p = proc_parent(p)) {
                struct memo *m = memo_slot(w, p);
                if (m && m->gen == w->gen) {
                        found = m->slice;
                        known = true;
                        break;
                }
                if ((found = local_slice_of(w, p)) >= 0) {
                        known = true;
                        break;
                }
                chain[n++] = p;
        }
        (void)known;
        for (unsigned i = 0; i < n; i++) {
                struct memo *m = memo_slot(w, chain[i]);
                if (m)
                        *m = (struct memo){ .gen = w->gen, .pid = chain[i], .slice = found };
        }
        if (found >= 0)
                return found;
        if (!w->any_pod) {
                snprintf(why, why_size, "no local slice's process is its ancestor");
                return -1;
        }
        struct stat st;
        int r = proc_root_stat_dir(pid, NODE_CONTAINER_SLICE_DIR, &st);
        if (r < 0) {
                snprintf(why, why_size,
                         "no local slice's process is its ancestor, and "
                         "/proc/%d/root%s: %s%s",
                         (int)pid, NODE_CONTAINER_SLICE_DIR, strerror(-r),
                         r == -EACCES || r == -EPERM ? " (the daemon needs CAP_SYS_PTRACE)" : "");
                return -1;
        }
        for (size_t i = 0; i < w->n_slices; i++)
                if (w->dir_known[i] && w->dir_dev[i] == st.st_dev && w->dir_ino[i] == st.st_ino)
                        return (int)i;
        snprintf(why, why_size,
                 "no local slice's process is its ancestor, and its %s is no "
                 "slice's directory",
                 NODE_CONTAINER_SLICE_DIR);
        return -1;
}

/* The pid of host process `pid` in its own pid namespace (NSpid's last
 * field), or pid itself: what the shim wrote into its books slot. */
static uint32_t inner_pid(pid_t pid)
{
        char path[64], buf[4096];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return (uint32_t)pid;
        ssize_t len = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (len <= 0)
                return (uint32_t)pid;
        buf[len] = '\0';
        char *l = strstr(buf, "\nNSpid:");
        if (!l)
                return (uint32_t)pid;
        l += 7;
        char *end = strchr(l, '\n');
        if (end)
                *end = '\0';
        char *last = strrchr(l, '\t');
        uint64_t v;
        return gs_u64_parse_str(last ? last + 1 : l, 0x3fffff, &v) == 0 && v > 0 ? (uint32_t)v
                                                                                 : (uint32_t)pid;
}

static struct seen *seen_of(struct wd_state *w, pid_t pid)
{
        for (size_t i = 0; i < w->n_seen; i++)
                if (w->seen[i].pid == pid)
                        return &w->seen[i];
        return NULL;
}

bool wd_pid_claimed(const struct wd_state *w, pid_t pid)
{
        for (size_t i = 0; i < w->n_seen; i++)
                if (w->seen[i].pid == pid)
                        return w->seen[i].claimed;
        return false;
}

int wd_slice_index(const struct wd_state *w, const char *id)
{
        for (size_t i = 0; i < w->n_slices; i++)
                if (strcmp(w->slices[i].id, id) == 0)
                        return (int)i;
        return -1;
}

/* map_pid, remembering what it found: a process mapped once keeps its
 * slice (checked by its start time) when its ancestry no longer leads to
 * the slice's process. */
static int map_pid_seen(struct wd_state *w, pid_t pid, char *why, size_t why_size)
{
        int found = map_pid(w, pid, why, why_size);
        struct seen *e = seen_of(w, pid);
        uint64_t start;
        if (found >= 0) {
                if (e && strcmp(e->slice, w->slices[found].id) == 0) {
                        e->last = w->n_samples;
                        return found;
                }
                if (proc_start_time(pid, &start) < 0)
                        return found;
                if (!e && w->n_seen < WD_SEEN)
                        e = &w->seen[w->n_seen++];
                if (e) {
                        *e = (struct seen){ .pid = pid, .start = start, .last = w->n_samples };
                        snprintf(e->slice, sizeof(e->slice), "%s", w->slices[found].id);
                }
                return found;
        }
        if (!e) {
                int c = wd_books_claim(w, pid);
                if (c < 0 || proc_start_time(pid, &start) < 0 || w->n_seen == WD_SEEN)
                        return c;
                /* remembered, so it stays in its slice when its slot goes */
                e = &w->seen[w->n_seen++];
                *e = (struct seen){ .pid = pid, .start = start, .last = w->n_samples,
                                    .claimed = true };
                _Static_assert(sizeof(e->slice) == sizeof(w->slices[c].id), "slice ids");
                memcpy(e->slice, w->slices[c].id, sizeof(e->slice));
                why[0] = '\0';
                return c;
        }
        int k = wd_slice_index(w, e->slice);
        if (k < 0 || proc_start_time(pid, &start) < 0 || start != e->start) {
                *e = w->seen[--w->n_seen]; /* another process now, or its slice is gone */
                return -1;
        }
        e->last = w->n_samples;
        why[0] = '\0';
        return k;
}

int wd_map_pid(struct wd_state *w, pid_t pid, char *why, size_t why_size)
{
        struct pcache *c = w->no_cache ? NULL : wd_pcache_get(w, pid);
        if (c) {
                if (c->slice >= 0) {
                        struct seen *e = seen_of(w, pid);
                        if (e)
                                e->last = w->n_samples; /* still listed: kept */
                }
                snprintf(why, why_size, "%s", c->why);
                return c->slice;
        }
        int k = map_pid_seen(w, pid, why, why_size);
        wd_pcache_put(w, pid, k, k < 0 ? why : "");
        return k;
}

/* Forget processes NVML has not listed for WD_SEEN_KEEP samples. */
static void seen_sweep(struct wd_state *w)
{
        for (size_t i = 0; i < w->n_seen;)
                if (w->n_samples - w->seen[i].last > WD_SEEN_KEEP)
                        w->seen[i] = w->seen[--w->n_seen];
                else
                        i++;
}

/* ---- the books, read-only ---- */

/* Whether the books read add up: `used` is the sum of the used slots'
 * charges (the shim changes both under its lock). */
static bool books_add_up(const struct gs_slice_state *st, uint64_t *ret_sum)
{
        uint64_t sum = 0;
        for (unsigned i = 0; i < GS_SLICE_STATE_SLOTS; i++)
                if (st->slots[i].owner)
                        sum += st->slots[i].charged;
        *ret_sum = sum;
        return sum == st->used;
}

static void read_books(struct daemon *d, struct wd_state *w, struct gs_wd_slice *s, size_t k)
{
        char path[DAEMON_PATH_MAX + 16];
        node_slice_dir_path(d->node, s->id, path, sizeof(path));
        strncat(path, "/" GS_SLICE_STATE_FILE, sizeof(path) - strlen(path) - 1);
        s->books = &w->books[w->n_books];
        s->n_books = 0;
        s->books_valid = false;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) {
                /* no books yet: no process of the slice has started */
                s->books_valid = errno == ENOENT;
                return;
        }
        const struct gs_slice_state *st = &w->state;
        ssize_t len = 0;
        uint64_t sum = 0;
        /* The read is not atomic with the shim's updates: books that do not
         * add up are read again (a torn read does not repeat), and only
         * books that never add up are taken as written. */
        for (int tries = 0; tries < 3; tries++) {
                len = pread(fd, &w->state, sizeof(w->state), 0);
                if (len != (ssize_t)sizeof(*st) || books_add_up(st, &sum))
                        break;
        }
        close(fd);
        if (len != (ssize_t)sizeof(*st) || st->magic != GS_SLICE_STATE_MAGIC ||
            st->version != GS_SLICE_STATE_VERSION || st->file_size != sizeof(*st) ||
            st->n_slots != GS_SLICE_STATE_SLOTS)
                return;
        s->books_valid = true;
        s->books_used = st->used;
        s->books_sum = sum;
        w->books_ooms[k] = st->ooms;
        w->refused_first[k] = st->refused_first;
        w->refused_pid[k] = st->refused_pid;
        for (unsigned i = 0; i < GS_SLICE_STATE_SLOTS && w->n_books < WD_MAX_BOOKS; i++) {
                uint64_t o = __atomic_load_n(&st->slots[i].owner, __ATOMIC_RELAXED);
                if (!o)
                        continue;
                w->book_start[w->n_books] = GS_SLOT_OWNER_START(o);
                w->books[w->n_books++] = (struct gs_wd_book){
                        .pid = (uint32_t)GS_SLOT_OWNER_PID(o),
                        .charged = __atomic_load_n(&st->slots[i].charged, __ATOMIC_RELAXED),
                };
                s->n_books++;
        }
}

/* ---- one sample ---- */

static void snapshot_slices(struct daemon *d, struct wd_state *w)
{
        const struct gs_ledger *l = &d->node->ledger;
        w->n_slices = 0;
        w->n_books = 0;
        w->any_pod = false;
        for (size_t i = 0; i < l->n_slices && i < GS_LEDGER_MAX_SLICES; i++) {
                const struct gs_slice *s = &l->slices[i];
                struct gs_wd_slice *ws = &w->slices[w->n_slices];
                size_t k = w->n_slices++;
                *ws = (struct gs_wd_slice){ .kind = s->kind,
                                            .shim = !gs_slice_is_whole(s),
                                            .cap = gs_slice_is_whole(s) ? 0 : s->memory_cap,
                                            .milli = s->milli,
                                            .policy = s->policy,
                                            .overuse = s->overuse };
                snprintf(ws->id, sizeof(ws->id), "%s", s->id);
                snprintf(ws->gpu, sizeof(ws->gpu), "%s", s->n_gpus ? s->gpus[0].uuid : "");
                for (unsigned g = 1; g < s->n_gpus && g < GS_SLICE_MAX_GPUS; g++)
                        snprintf(ws->more_gpus[ws->n_more_gpus++], sizeof(ws->more_gpus[0]), "%s",
                                 s->gpus[g].uuid);
                w->slice_pid[k] = 0;
                w->dir_known[k] = false;
                w->slice_uid[k] = s->uid;
                w->books_ooms[k] = w->refused_first[k] = 0;
                w->refused_pid[k] = 0;
                if (s->kind == GS_SLICE_LOCAL) {
                        uint64_t start;
                        if (s->pid > 1 && proc_start_time(s->pid, &start) == 0 &&
                            start == s->start_time)
                                w->slice_pid[k] = s->pid;
                } else {
                        char dir[DAEMON_PATH_MAX];
                        struct stat st;
                        node_slice_dir_path(d->node, s->id, dir, sizeof(dir));
                        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
                                w->dir_known[k] = true;
                                w->dir_dev[k] = st.st_dev;
                                w->dir_ino[k] = st.st_ino;
                                w->any_pod = true;
                        }
                }
                if (ws->shim)
                        read_books(d, w, ws, k);
        }
        /* What a process's mapping depends on (FNV-1a): the cache keeps
         * mappings only while it is the same. */
        uint64_t key = 0xcbf29ce484222325ull;
        uint64_t parts[4];
        for (size_t k = 0; k < w->n_slices; k++) {
                parts[0] = d->node->generation;
                parts[1] = (uint64_t)w->slice_pid[k];
                parts[2] = w->dir_known[k] ? (uint64_t)w->dir_ino[k] : 0;
                parts[3] = w->dir_known[k] ? (uint64_t)w->dir_dev[k] : 0;
                for (size_t b = 0; b < sizeof(parts); b++)
                        key = (key ^ ((const unsigned char *)parts)[b]) * 0x100000001b3ull;
        }
        wd_pcache_rekey(w, key ^ d->node->generation ^ w->n_slices);
}

static int64_t cpu_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint64_t wall_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000;
}

/* Pod processes: the books hold the pid each process has in its own pid
 * namespace; put the host pid NVML reports in its place. */
static void translate_book(struct wd_state *w, const struct gs_wd_proc *p)
{
        const struct gs_wd_slice *s = &w->slices[p->slice];
        struct pcache *c = wd_pcache_get(w, (pid_t)p->pid);
        uint32_t in = c && c->inner ? c->inner : inner_pid((pid_t)p->pid);
        if (c)
                c->inner = in; /* fixed for the process's life */
        if (in == p->pid || !s->n_books)
                return;
        struct gs_wd_book *b = &w->books[s->books - w->books];
        for (size_t i = 0; i < s->n_books; i++)
                if (b[i].pid == in)
                        b[i].pid = p->pid;
}

static void sample(struct daemon *d, struct wd_state *w, int64_t now_ms)
{
        int64_t c0 = cpu_us();
        w->gen++;
        w->n_killed = 0;
        w->now_ms = now_ms;
        snapshot_slices(d, w);
        wd_evictions_poll(w);
        const struct gs_inventory *inv = &d->node->inv;
        size_t n_gpus = 0;
        for (unsigned i = 0; i < inv->n_gpus && i < GS_MAX_GPUS; i++) {
                struct gs_wd_gpu *g = &w->gpus[n_gpus];
                uint64_t now_us = wall_us();
                int64_t n0 = cpu_us();
                int n = nvml_gpu_processes(d->nvml, inv->gpus[i].index, w->last_seen_us[i],
                                           w->raw[i], WD_MAX_PROCS);
                w->nvml_us_sum += (uint64_t)(cpu_us() - n0);
                if (n < 0) {
                        if (!w->nvml_failed[i])
                                gs_log_warn("watchdog: NVML cannot list the processes of GPU "
                                            "%s; it is not watched until it answers",
                                            inv->gpus[i].uuid);
                        w->nvml_failed[i] = true;
                        continue;
                }
                w->nvml_failed[i] = false;
                w->last_seen_us[i] = now_us;
                snprintf(g->uuid, sizeof(g->uuid), "%s", inv->gpus[i].uuid);
                g->procs = w->procs[n_gpus];
                g->n_procs = 0;
                for (int k = 0; k < n; k++) {
                        const struct nvml_proc *rp = &w->raw[i][k];
                        struct gs_wd_proc *p = &w->procs[n_gpus][g->n_procs];
                        w->why[n_gpus][g->n_procs][0] = '\0';
                        *p = (struct gs_wd_proc){ .pid = rp->pid,
                                                  .used = rp->used,
                                                  .util = rp->util };
                        p->slice = wd_map_pid(w, (pid_t)rp->pid, w->why[n_gpus][g->n_procs],
                                                sizeof(w->why[0][0]));
                        g->n_procs++;
                        if (p->slice >= 0 && w->slices[p->slice].kind != GS_SLICE_LOCAL)
                                translate_book(w, p);
                }
                n_gpus++;
        }
        struct gs_wd_snapshot snap = {
                .gpus = w->gpus, .n_gpus = n_gpus, .slices = w->slices, .n_slices = w->n_slices
        };
        size_t nv = gs_wd_evaluate(w->rules, &snap, now_ms, w->verdicts, WD_MAX_VERDICTS);
        if (nv > WD_MAX_VERDICTS) {
                gs_log_warn("watchdog: %zu verdicts in one sample; acting on the first %d", nv,
                            WD_MAX_VERDICTS);
                nv = WD_MAX_VERDICTS;
        }
        for (size_t i = 0; i < nv; i++)
                wd_act(w, &snap, &w->verdicts[i]);
        wd_acct_update(d, w, &snap);
        seen_sweep(w);
        wd_pcache_sweep(w);
        uint64_t c = (uint64_t)(cpu_us() - c0);
        w->n_samples++;
        w->cpu_us_sum += c;
        if (c > w->cpu_us_max)
                w->cpu_us_max = c;
}

bool watchdog_sample_now(struct daemon *d)
{
        struct wd_state *w = d->wd;
        if (!w)
                return false;
        sample(d, w, node_now_ms());
        return true;
}

static int wd_tick(void *ctx, int64_t now_ms)
{
        struct daemon *d = ctx;
        struct wd_state *w = d->wd;
        if (!w)
                return -1;
        if (now_ms < w->next_ms)
                return (int)(w->next_ms - now_ms);
        w->next_ms = now_ms + w->a.interval_ms;
        sample(d, w, now_ms);
        return (int)w->a.interval_ms;
}

int watchdog_start(struct daemon *d, const struct wd_args *a, struct gs_error **err)
{
        struct wd_state *w = calloc(1, sizeof(*w));
        if (!w)
                return gs_error_set(err, -ENOMEM, "out of memory for the watchdog");
        w->a = *a;
        struct gs_wd_config cfg;
        gs_wd_config_default(&cfg);
        cfg.grace_ms = a->grace_ms;
        int r = events_open(d->state_dir, EVENTS_KEEP, &w->ev, err);
        if (r < 0) {
                free(w);
                return r;
        }
        d->events = w->ev;
        if (a->interval_ms == 0) {
                gs_log_info("watchdog: off (--watch-interval 0); events are still served");
                free(w);
                /* Nothing will see a draining slice drained: free them. */
                node_lock(d->node);
                slices_drain_start(d);
                node_unlock(d->node);
                return 0;
        }
        if (!(w->rules = gs_wd_new(&cfg))) {
                events_close(w->ev);
                d->events = NULL;
                free(w);
                return gs_error_set(err, -ENOMEM, "out of memory for the watchdog");
        }
        w->node = d->node;
        w->evictions = d->evictions;
        wd_pcache_init(w);
        if (a->policy == GS_OVERUSE_EVICT && !d->evictions)
                gs_log_warn("watchdog: --overuse-policy evict: the daemon has no API-server "
                            "access (it needs --kubelet or --dra, and --kubeconfig or a service "
                            "account); offenders are killed instead");
        d->wd = w;
        r = node_loop_add_tick(&d->loop, wd_tick, d);
        if (r < 0) {
                d->wd = NULL;
                gs_wd_free(w->rules);
                free(w);
                return gs_error_set(err, r, "the event loop has no room for the watchdog's tick");
        }
        gs_log_info("watchdog: every %u ms, grace %" PRId64 " ms, policy %s%s", a->interval_ms,
                    a->grace_ms, gs_overuse_policy_name(a->policy),
                    a->kill_unsliced ? ", unsliced GPU processes are killed too" : "");
        return 0;
}

void watchdog_stop(struct daemon *d)
{
        struct wd_state *w = d->wd;
        if (w) {
                if (w->n_samples)
                        gs_log_info("watchdog: %" PRIu64 " samples, CPU per sample mean %" PRIu64
                                    " us (of which NVML's calls %" PRIu64 " us), max %" PRIu64
                                    " us",
                                    w->n_samples, w->cpu_us_sum / w->n_samples,
                                    w->nvml_us_sum / w->n_samples, w->cpu_us_max);
                gs_wd_free(w->rules);
                wd_pcache_flush(w);
                free(w);
                d->wd = NULL;
        }
        events_close(d->events);
        d->events = NULL;
}
