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
        w->gen++; /* a fresh walk, not the cache */
        w->no_cache = true;
        int now = wd_map_pid(w, pid, why, sizeof(why));
        w->no_cache = false;
        int r = 0;
        if (now != slice)
                r = -ESTALE;
        else if (slice >= 0 && !w->a.kill_unsliced && wd_pid_claimed(w, pid))
                r = -EACCES; /* the books are no ground for a kill; as unsliced it was not */
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

/* An event's fields from verdict v (its figures), with msg; no action. */
static struct event_fields verdict_fields(const struct gs_wd_verdict *v, const char *msg)
{
        return (struct event_fields){ .reason = gs_wd_reason_name(v->reason),
                                      .pid = (pid_t)v->pid,
                                      .slice = v->slice,
                                      .gpu = v->gpu,
                                      .used = v->used ? v->used : v->slice_used,
                                      .cap = v->cap,
                                      .books = v->books,
                                      .util_milli = v->util_milli,
                                      .share_milli = v->share_milli,
                                      .msg = msg };
}

static struct wd_evicting *evicting_of(struct wd_state *w, const char *slice)
{
        for (size_t i = 0; i < w->n_evicting; i++)
                if (strcmp(w->evicting[i].slice, slice) == 0)
                        return &w->evicting[i];
        return NULL;
}

static void evicting_drop(struct wd_state *w, struct wd_evicting *x)
{
        evictions_forget(w->evictions, x->slice);
        *x = w->evicting[--w->n_evicting];
}

void wd_evictions_poll(struct wd_state *w)
{
        for (size_t i = 0; i < w->n_evicting;) {
                struct wd_evicting *x = &w->evicting[i];
                if (wd_slice_index(w, x->slice) < 0) {
                        evicting_drop(w, x); /* its pod is gone and its slice with it */
                        continue;
                }
                i++;
                char said[EVICT_MSG_MAX];
                enum evict_state st = evictions_state(w->evictions, x->slice, said, NULL);
                if (x->reported || st != EVICT_DONE)
                        continue; /* a failure is the verdict's to handle (evict_slice) */
                char msg[EVENTS_LINE_MAX];
                struct event_fields f = { .reason = gs_wd_reason_name(x->reason),
                                          .action = "evicted",
                                          .slice = x->slice,
                                          .gpu = x->gpu,
                                          .msg = msg };
                x->done_ms = w->now_ms ? w->now_ms : 1;
                snprintf(msg, sizeof(msg), "slice %s: %s (the kubelet now stops it)", x->slice,
                         said);
                x->reported = true;
                events_add(w->ev, &f);
        }
}

/* A failure worth asking again: a disruption budget that allows no
 * eviction now (429), an API server that did not answer in time. */
static bool transient(int err)
{
        return err == -EBUSY || err == -ETIMEDOUT || err == -EIO || err == -ECONNREFUSED;
}

/* Whom to evict for pod slice `id`: 0 and *r, or -ENOENT when neither its
 * pod nor its claim is known (msg says so). */
static int evict_request_of(struct wd_state *w, const char *id, struct evict_request *r)
{
        *r = (struct evict_request){ 0 };
        snprintf(r->slice, sizeof(r->slice), "%s", id);
        struct node_pod pod;
        bool have = node_pod_locked(w->node, id, &pod) == 0;
        if (have) {
                snprintf(r->pod_ns, sizeof(r->pod_ns), "%s", pod.ns);
                snprintf(r->pod_name, sizeof(r->pod_name), "%s", pod.name);
                snprintf(r->pod_uid, sizeof(r->pod_uid), "%s", pod.uid);
        }
        const struct gs_slice *s = gs_ledger_find(&w->node->ledger, id);
        if (s && s->kind == GS_SLICE_DRA && s->claim.ns[0] && s->claim.name[0]) {
                snprintf(r->claim_ns, sizeof(r->claim_ns), "%s", s->claim.ns);
                snprintf(r->claim_name, sizeof(r->claim_name), "%s", s->claim.name);
                snprintf(r->claim_uid, sizeof(r->claim_uid), "%s", s->claim.uid);
                have = true;
        }
        return have ? 0 : -ENOENT;
}

/* Policy evict, on an actionable verdict of a pod slice: ask for the
 * pod's eviction once, then wait for it. Returns true when the verdict is
 * handled (an eviction asked or in hand), false when its processes are to
 * be killed instead, with why in `fallback`. */
static bool evict_slice(struct wd_state *w, const struct gs_wd_verdict *v, char *fallback,
                        size_t size)
{
        if (!w->evictions) {
                snprintf(fallback, size, "evict falls back to kill: the daemon has no "
                         "API-server access");
                return false;
        }
        struct wd_evicting *x = evicting_of(w, v->slice);
        struct evict_request r;
        if (x) {
                char said[EVICT_MSG_MAX];
                int err = 0;
                enum evict_state st = evictions_state(w->evictions, v->slice, said, &err);
                if (st == EVICT_PENDING)
                        return true;
                if (st == EVICT_DONE && w->now_ms - x->done_ms < WD_EVICT_WAIT_MS)
                        return true;
                if (st == EVICT_FAILED && transient(err) &&
                    w->now_ms - x->asked_ms < WD_EVICT_RETRY_MS) {
                        if (w->now_ms - x->last_ask_ms < WD_EVICT_REASK_MS)
                                return true;
                        if (evict_request_of(w, v->slice, &r) == 0) {
                                evictions_forget(w->evictions, v->slice);
                                if (evictions_submit(w->evictions, &r) == 0) {
                                        x->last_ask_ms = w->now_ms;
                                        return true; /* asked again, as kubectl drain does */
                                }
                        }
                }
                if (st == EVICT_DONE) {
                        snprintf(fallback, size, "evicted %" PRId64 " s ago and still over "
                                 "its limits", (w->now_ms - x->done_ms) / 1000);
                } else {
                        snprintf(fallback, size, "the eviction failed: %s", said);
                        char msg[EVENTS_LINE_MAX];
                        struct event_fields f = { .reason = gs_wd_reason_name(v->reason),
                                                  .action = "evict_failed",
                                                  .slice = v->slice,
                                                  .gpu = v->gpu,
                                                  .msg = msg };
                        char tried[48] = "";
                        if (transient(err))
                                snprintf(tried, sizeof(tried), " (asked for %d s)",
                                         WD_EVICT_RETRY_MS / 1000);
                        snprintf(msg, sizeof(msg), "slice %s: %.400s%s; its processes are "
                                 "killed instead", v->slice, said, tried);
                        events_add(w->ev, &f);
                }
                evicting_drop(w, x); /* asked again if it over-uses after the kill */
                return false;
        }
        if (evict_request_of(w, v->slice, &r) < 0) {
                snprintf(fallback, size, "evict falls back to kill: no pod is known for slice "
                         "%s yet", v->slice);
                return false;
        }
        if (w->n_evicting == EVICTIONS_MAX || evictions_submit(w->evictions, &r) < 0) {
                snprintf(fallback, size, "evict falls back to kill: %d evictions in hand "
                         "already", EVICTIONS_MAX);
                return false;
        }
        x = &w->evicting[w->n_evicting++];
        *x = (struct wd_evicting){ .reason = v->reason,
                                   .asked_ms = w->now_ms,
                                   .last_ask_ms = w->now_ms };
        snprintf(x->slice, sizeof(x->slice), "%s", v->slice);
        snprintf(x->gpu, sizeof(x->gpu), "%s", v->gpu);
        char msg[EVENTS_LINE_MAX];
        if (r.pod_name[0])
                snprintf(msg, sizeof(msg), "%.300s: evicting pod %s/%s", v->msg, r.pod_ns,
                         r.pod_name);
        else
                snprintf(msg, sizeof(msg), "%.290s: evicting the pods of claim %s/%s", v->msg,
                         r.claim_ns, r.claim_name);
        struct event_fields f = verdict_fields(v, msg);
        f.action = "evicting";
        events_add(w->ev, &f);
        return true;
}

/* The policy for verdict v: its slice's own, else the daemon's. */
static enum gs_overuse_policy policy_of(const struct wd_state *w, const struct gs_wd_verdict *v)
{
        int k = v->slice[0] ? wd_slice_index(w, v->slice) : -1;
        return gs_overuse_policy_effective(k >= 0 ? w->slices[k].overuse : GS_OVERUSE_DEFAULT,
                                           w->a.policy);
}

void wd_act(struct wd_state *w, const struct gs_wd_snapshot *snap, const struct gs_wd_verdict *v)
{
        enum gs_overuse_policy policy = policy_of(w, v);
        bool kill_policy = policy != GS_OVERUSE_REPORT;
        bool unsliced = v->reason == GS_WD_UNSLICED;
        /* Forged books alone harm no one but their slice: over-use is
         * NVML's to judge (memory_over_cap), so they are only reported. */
        bool forged = v->reason == GS_WD_BOOKS_FORGED;
        bool killable = kill_policy && !forged && (!unsliced || w->a.kill_unsliced);
        if (!v->fresh && !v->became_actionable && !(v->actionable && killable))
                return;
        char msg[EVENTS_LINE_MAX];
        struct event_fields f = verdict_fields(v, msg);
        const char *why = unsliced ? why_of(w, snap, v->pid) : "";
        if (!v->actionable) {
                snprintf(msg, sizeof(msg), "%s%s%s (acting after %" PRId64 " ms of grace)", v->msg,
                         *why ? ": " : "", why, w->a.grace_ms);
                f.action = "detected";
                events_add(w->ev, &f);
                return;
        }
        int k = unsliced ? -1 : wd_slice_index(w, v->slice);
        char fallback[EVICT_MSG_MAX + 64] = "";
        bool pod = k >= 0 && w->slices[k].kind != GS_SLICE_LOCAL;
        if (killable && policy == GS_OVERUSE_EVICT && pod &&
            evict_slice(w, v, fallback, sizeof(fallback)))
                return;
        if (killable && policy == GS_OVERUSE_EVICT && !pod && !fallback[0])
                snprintf(fallback, sizeof(fallback), "evict falls back to kill: %s",
                         unsliced ? "a process in no slice has no pod" : "a local slice has no pod");
        int r = 0;
        if (killable)
                r = kill_verdict(w, snap, v, k);
        if (!v->became_actionable && !(fallback[0] && r > 0))
                return;
        if (!kill_policy) {
                f.action = "reported";
                snprintf(msg, sizeof(msg), "%s%s%s (policy report)", v->msg, *why ? ": " : "", why);
        } else if (forged) {
                f.action = "reported";
                snprintf(msg, sizeof(msg), "%s (reported, not killed: over-use is judged on "
                         "NVML's figures)", v->msg);
        } else if (!killable) {
                f.action = "reported";
                snprintf(msg, sizeof(msg),
                         "%s%s%s (not killed: outside every slice, and "
                         "--kill-unsliced is not given)",
                         v->msg, *why ? ": " : "", why);
        } else if (r > 0) {
                f.action = "killed";
                snprintf(msg, sizeof(msg), "%s: SIGKILL%s%s%s", v->msg, fallback[0] ? " (" : "",
                         fallback, fallback[0] ? ")" : "");
        } else {
                f.action = "kill_failed";
                snprintf(msg, sizeof(msg), "%s: not killed: %s", v->msg,
                         r == -ESTALE   ? "no longer attributable to the same slice"
                         : r == -EACCES ? "in its slice by its books slot only, which the "
                                          "tenant can write"
                                        : strerror(-r));
        }
        events_add(w->ev, &f);
}
