/* SPDX-License-Identifier: Apache-2.0 */
/* The watchdog's mapping cache (watchdog_int.h): what a GPU process was
 * mapped to, kept across samples while the process lives (a pidfd pins
 * its identity: a reused pid is another process) and the slices that
 * decide the mapping are unchanged (the map key). A hit costs one
 * pidfd_send_signal(0) instead of /proc reads along the ancestry. */
#include "watchdog_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

#define PC_EMPTY 0
#define PC_GONE (-1)

static size_t slot_of(pid_t pid)
{
        return ((size_t)pid * 2654435761u) & (WD_PCACHE - 1);
}

static void drop(struct wd_state *w, struct pcache *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        c->pid = PC_GONE;
        w->n_pcache_live--;
}

void wd_pcache_flush(struct wd_state *w)
{
        for (size_t i = 0; i < WD_PCACHE; i++) {
                struct pcache *c = &w->pcache[i];
                if (c->pid > 0)
                        close(c->fd);
                *c = (struct pcache){ .pid = PC_EMPTY, .fd = -1 };
        }
        w->n_pcache_live = w->n_pcache_used = 0;
}

void wd_pcache_init(struct wd_state *w)
{
        for (size_t i = 0; i < WD_PCACHE; i++)
                w->pcache[i] = (struct pcache){ .pid = PC_EMPTY, .fd = -1 };
        /* One pidfd per cached process: within a quarter of the descriptors
         * the daemon may open (raised to the hard limit when it can be). */
        struct rlimit rl;
        w->pcache_budget = 0;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ? 65536
                                                                                    : rl.rlim_max;
                if (rl.rlim_cur < want) {
                        struct rlimit up = { .rlim_cur = want, .rlim_max = rl.rlim_max };
                        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
                                rl.rlim_cur = want;
                }
                size_t quarter = (size_t)(rl.rlim_cur / 4);
                w->pcache_budget = quarter < WD_PCACHE / 2 ? quarter : WD_PCACHE / 2;
        }
}

void wd_pcache_rekey(struct wd_state *w, uint64_t key)
{
        if (key != w->map_key || w->n_pcache_used > WD_PCACHE / 2)
                wd_pcache_flush(w);
        w->map_key = key;
}

static struct pcache *find(struct wd_state *w, pid_t pid)
{
        size_t h = slot_of(pid);
        for (size_t i = 0; i < WD_PCACHE; i++) {
                struct pcache *c = &w->pcache[(h + i) & (WD_PCACHE - 1)];
                if (c->pid == pid)
                        return c;
                if (c->pid == PC_EMPTY)
                        return NULL;
        }
        return NULL;
}

static bool alive(int fd)
{
        return syscall(SYS_pidfd_send_signal, fd, 0, NULL, 0) == 0;
}

struct pcache *wd_pcache_get(struct wd_state *w, pid_t pid)
{
        struct pcache *c = find(w, pid);
        if (!c)
                return NULL;
        if (!alive(c->fd)) {
                drop(w, c); /* gone: the pid may be another process now */
                return NULL;
        }
        c->last = w->n_samples;
        return c;
}

struct pcache *wd_pcache_put(struct wd_state *w, pid_t pid, int slice, const char *why)
{
        if (pid <= 1 || w->n_pcache_live >= w->pcache_budget ||
            w->n_pcache_used >= WD_PCACHE / 2)
                return NULL;
        int fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0)
                return NULL;
        size_t h = slot_of(pid);
        struct pcache *c = NULL;
        for (size_t i = 0; i < WD_PCACHE && !c; i++) {
                struct pcache *x = &w->pcache[(h + i) & (WD_PCACHE - 1)];
                if (x->pid == pid) {
                        close(x->fd);
                        w->n_pcache_live--;
                        c = x;
                } else if (x->pid == PC_EMPTY) {
                        w->n_pcache_used++;
                        c = x;
                }
        }
        if (!c) {
                close(fd);
                return NULL;
        }
        *c = (struct pcache){ .pid = pid, .fd = fd, .slice = slice, .last = w->n_samples };
        snprintf(c->why, sizeof(c->why), "%s", why ? why : "");
        w->n_pcache_live++;
        return c;
}

void wd_pcache_sweep(struct wd_state *w)
{
        for (size_t i = 0; i < WD_PCACHE; i++) {
                struct pcache *c = &w->pcache[i];
                if (c->pid > 0 && w->n_samples - c->last > WD_PCACHE_KEEP)
                        drop(w, c);
        }
}
