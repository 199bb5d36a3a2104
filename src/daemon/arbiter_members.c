/* SPDX-License-Identifier: Apache-2.0 */
/* Which slice a process connecting to the compute arbiter belongs to (see
 * arbiter_server_int.h): ancestry for local slices, the identity of the
 * mounted slice directory for Kubernetes pods. */
#include "arbiter_server_int.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "node_edits.h" /* NODE_CONTAINER_SLICE_DIR */
#include "node_files.h"
#include "log.h"
#include "proc.h"

bool arb_member_learn_dir(struct arb_member *m, const char *dir)
{
        struct stat st;
        int r = stat(dir, &st) < 0 ? -errno : S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
        if (r < 0) {
                gs_log_debug("compute: slice %s: cannot stat its directory %s: %s", m->id, dir,
                           strerror(-r));
                return false;
        }
        m->dir_dev = st.st_dev;
        m->dir_ino = st.st_ino;
        m->dir_known = true;
        return true;
}

/* The Kubernetes slice member m's directory is known (stat'ed at join, or
 * now if that failed). */
static bool member_dir_known(struct daemon *d, struct arb_member *m)
{
        if (m->kind == GS_SLICE_LOCAL)
                return false;
        if (m->dir_known)
                return true;
        const struct gs_slice *s = gs_ledger_find(&d->node->ledger, m->id);
        char dir[DAEMON_PATH_MAX];
        if (!s)
                return false;
        node_slice_dir_path(d->node, s->id, dir, sizeof(dir));
        return arb_member_learn_dir(m, dir);
}

/* The slice the process `pid` (the peer's SO_PEERCRED pid) belongs to:
 *  - a local slice: its own process's, or its nearest ancestor's (tried
 *    first);
 *  - a Kubernetes slice: its processes live in containers and have no
 *    slice pid, but the device plugin bind-mounts the slice's directory
 *    into them at NODE_CONTAINER_SLICE_DIR, and a bind mount keeps the
 *    directory's st_dev/st_ino. A tenant cannot make that match without
 *    mounting another pod's slice directory, so it is the proof.
 * NULL, with the reason in why, when it is in none. */
struct arb_member *arb_member_of_pid(struct daemon *d, pid_t pid, char *why, size_t why_size)
{
        struct arbsrv *srv = d->arb;
        if (pid <= 0) {
                snprintf(why, why_size, "its pid is unknown (a pid namespace the daemon does "
                                        "not see)");
                return NULL;
        }
        pid_t p = pid;
        for (int depth = 0; depth < ARB_PID_DEPTH && p > 1; depth++) {
                for (size_t i = 0; i < srv->n_members; i++) {
                        struct arb_member *m = srv->members[i];
                        /* a draining slice's pid may be another's now */
                        if (m->kind == GS_SLICE_LOCAL && m->pid == p &&
                            !slices_drain_stale(d, m->id))
                                return m;
                }
                p = proc_parent(p);
        }
        bool any = false;
        for (size_t i = 0; i < srv->n_members; i++)
                any = member_dir_known(d, srv->members[i]) || any;
        if (!any) {
                snprintf(why, why_size, "the process is in no slice (no local slice's process "
                                        "is its ancestor, and no Kubernetes slice's directory "
                                        "is known)");
                return NULL;
        }
        struct stat st;
        int r = proc_root_stat_dir(pid, NODE_CONTAINER_SLICE_DIR, &st);
        if (r < 0) {
                const char *hint = r == -EACCES || r == -EPERM
                                           ? "; the daemon needs CAP_SYS_PTRACE to identify "
                                             "pods' processes"
                                   : r == -ENOTDIR || r == -ELOOP
                                           ? " (a symlink is not followed)" : "";
                snprintf(why, why_size, "the process is in no slice (no local slice's process is "
                         "its ancestor, and /proc/%d/root%s: %s%s)", (int)pid,
                         NODE_CONTAINER_SLICE_DIR, strerror(-r), hint);
                return NULL;
        }
        for (size_t i = 0; i < srv->n_members; i++) {
                struct arb_member *m = srv->members[i];
                if (m->kind != GS_SLICE_LOCAL && m->dir_known && m->dir_dev == st.st_dev &&
                    m->dir_ino == st.st_ino)
                        return m;
        }
        snprintf(why, why_size, "the process is in no slice (no local slice's process is its "
                 "ancestor, and its %s is no Kubernetes slice's directory)",
                 NODE_CONTAINER_SLICE_DIR);
        return NULL;
}

void arb_windows_assign(struct arb_gpu *g)
{
        /* In slot order, back to back from the period's start: the shares
         * on one GPU sum to at most 1000 (the ledger's invariant), so the
         * windows are disjoint. A sum above 1000 (a corrupt ledger) gets
         * no windows past the period's end: those slices fall back to
         * their own share alone, as before windows existed. */
        uint32_t off = 0;
        for (int i = 0; i < GS_ARB_MAX_SLICES; i++) {
                struct arb_member *m = g->slot[i];
                if (!m || !m->page.p)
                        continue;
                uint64_t w = 0;
                if (m->milli >= 1 && off + m->milli <= 1000)
                        w = GS_ARB_WINDOW_PACK(off, m->milli);
                off += m->milli;
                atomic_store_explicit(&m->page.p->window, w, memory_order_release);
        }
}
