/* SPDX-License-Identifier: Apache-2.0 */
/* The watchdog's actions (watchdog_int.h): every verdict an event, and
 * once it has held for the grace period, the slice's policy: report, kill
 * (SIGKILL through a pidfd after the process is mapped again), or evict
 * (the pod through the daemon's evictor, falling back to kill). */
#include "watchdog_int.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int pidfd_open_(pid_t pid)
{
        return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* SIGKILL pid if it is still in snapshot slice `slice` (-1: in none):
 * the pidfd pins the process, then its slice is mapped again. 0 or a
 * negative errno (-ESTALE: no longer attributable as it was). */
static int kill_one(struct wd_state *w, pid_t pid, int slice)
{
        for (size_t i = 0; i < w->n_killed; i++)
                if (w->killed[i] == pid)
                        return 0; /* another verdict of this sample killed it */
        if (pid <= 1 || pid == getpid())
                return -EPERM;
        int fd = pidfd_open_(pid);
        if (fd < 0)
                return -errno;
        char why[160];
        w->gen++; /* a fresh walk */
        int now = wd_map_pid(w, pid, why, sizeof(why));
        int r = 0;
        if (now != slice)
                r = -ESTALE;
        else if (syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0) < 0)
                r = -errno;
        close(fd);
        if (r == 0 && w->n_killed < WD_MAX_VERDICTS)
                w->killed[w->n_killed++] = pid;
        return r;
}

/* Kill what verdict v names under the kill policy: its process, or for a
 * slice-wide verdict (pid 0) every process of the slice on its GPU.
 * Returns the number killed, or a negative errno for the first failure. */
static int kill_verdict(struct wd_state *w, const struct gs_wd_snapshot *snap,
                        const struct gs_wd_verdict *v, int slice)
{
        if (v->pid) {
                int r = kill_one(w, (pid_t)v->pid, slice);
                return r < 0 ? r : 1;
        }
        int n = 0, err = 0;
        for (size_t g = 0; g < snap->n_gpus; g++) {
                if (strcmp(snap->gpus[g].uuid, v->gpu) != 0)
                        continue;
                for (size_t k = 0; k < snap->gpus[g].n_procs; k++) {
                        const struct gs_wd_proc *p = &snap->gpus[g].procs[k];
                        if (p->slice != slice)
                                continue;
                        int r = kill_one(w, (pid_t)p->pid, slice);
                        if (r == 0)
                                n++;
                        else if (!err)
                                err = r;
                }
        }
        return n ? n : err;
}

/* Why pid could not be mapped, from this sample. */
static const char *why_of(const struct wd_state *w, const struct gs_wd_snapshot *snap, uint32_t pid)
{
        for (size_t g = 0; g < snap->n_gpus; g++)
                for (size_t k = 0; k < snap->gpus[g].n_procs; k++)
                        if (snap->gpus[g].procs[k].pid == pid && w->why[g][k][0])
                                return w->why[g][k];
        return "";
}

void wd_act(struct wd_state *w, const struct gs_wd_snapshot *snap,
                const struct gs_wd_verdict *v)
{
        bool kill_policy = w->a.policy != GS_OVERUSE_REPORT;
        bool unsliced = v->reason == GS_WD_UNSLICED;
        bool killable = kill_policy && (!unsliced || w->a.kill_unsliced);
        if (!v->fresh && !v->became_actionable && !(v->actionable && killable))
                return;
        char msg[EVENTS_LINE_MAX];
        struct event_fields f = { .reason = gs_wd_reason_name(v->reason),
                                  .pid = (pid_t)v->pid,
                                  .slice = v->slice,
                                  .gpu = v->gpu,
                                  .used = v->used ? v->used : v->slice_used,
                                  .cap = v->cap,
                                  .books = v->books,
                                  .util_milli = v->util_milli,
                                  .share_milli = v->share_milli,
                                  .msg = msg };
        const char *why = unsliced ? why_of(w, snap, v->pid) : "";
        if (!v->actionable) {
                snprintf(msg, sizeof(msg), "%s%s%s (acting after %" PRId64 " ms of grace)", v->msg,
                         *why ? ": " : "", why, w->a.grace_ms);
                f.action = "detected";
                events_add(w->ev, &f);
                return;
        }
        int r = 0;
        if (killable)
                r = kill_verdict(w, snap, v, unsliced ? -1 : wd_slice_index(w, v->slice));
        if (!v->became_actionable)
                return;
        if (!kill_policy) {
                f.action = "reported";
                snprintf(msg, sizeof(msg), "%s%s%s (policy report)", v->msg, *why ? ": " : "", why);
        } else if (!killable) {
                f.action = "reported";
                snprintf(msg, sizeof(msg),
                         "%s%s%s (not killed: outside every slice, and "
                         "--kill-unsliced is not given)",
                         v->msg, *why ? ": " : "", why);
        } else if (r > 0) {
                f.action = "killed";
                snprintf(msg, sizeof(msg), "%s: SIGKILL%s", v->msg,
                         w->a.policy == GS_OVERUSE_EVICT ? " (evict falls back to kill: no API-server "
                                                   "access)"
                                                 : "");
        } else {
                f.action = "kill_failed";
                snprintf(msg, sizeof(msg), "%s: not killed: %s", v->msg,
                         r == -ESTALE ? "no longer attributable to the same slice" : strerror(-r));
        }
        events_add(w->ev, &f);
}
