/* SPDX-License-Identifier: Apache-2.0 */
/* What the daemon keeps of each slice across the watchdog's samples
 * (watchdog_int.h): the slice's memory by NVML over all its processes
 * (the authoritative figure: `gpuslice ls`, metrics, draining), its
 * refusals at the cap (read from the books, counted here, one
 * memory_refused event per slice), and the draining slices it frees once
 * none of their processes holds GPU memory. Also the books' claim on a
 * process no certain route maps. */
#include "watchdog_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "daemon.h"
#include "log.h"
#include "placement.h" /* gs_bytes_human */
#include "proc.h"

int wd_books_claim(struct wd_state *w, pid_t pid)
{
        uint64_t start = 0;
        bool have_start = false;
        for (size_t k = 0; k < w->n_slices; k++) {
                const struct gs_wd_slice *s = &w->slices[k];
                /* A pod's books hold container pids; its processes are
                 * mapped by their mounted slice directory. */
                if (s->kind != GS_SLICE_LOCAL || !s->books_valid || !s->n_books)
                        continue;
                size_t base = (size_t)(s->books - w->books);
                for (size_t i = 0; i < s->n_books; i++) {
                        if (s->books[i].pid != (uint32_t)pid)
                                continue;
                        if (!have_start) {
                                if (proc_start_time(pid, &start) < 0)
                                        return -1;
                                have_start = true;
                        }
                        if ((start & ((1ull << 40) - 1)) != w->book_start[base + i])
                                continue; /* the slot names another process of that pid */
                        /* The books are the tenant's: they may claim only
                         * processes of the slice's own user. */
                        uid_t uid;
                        if (proc_uid(pid, &uid) < 0 || uid != w->slice_uid[k])
                                continue;
                        return (int)k;
                }
        }
        return -1;
}

/* The index of slice id's record in w->acct, or -1. */
static int acct_index(const struct wd_state *w, const char *id)
{
        for (size_t i = 0; i < w->n_acct; i++)
                if (strcmp(w->acct[i].id, id) == 0)
                        return (int)i;
        return -1;
}

static struct wd_acct *acct_of(struct wd_state *w, const char *id)
{
        int i = acct_index(w, id);
        if (i >= 0)
                return &w->acct[i];
        if (w->n_acct == GS_LEDGER_MAX_SLICES)
                return NULL;
        struct wd_acct *a = &w->acct[w->n_acct++];
        *a = (struct wd_acct){ 0 };
        snprintf(a->id, sizeof(a->id), "%s", id);
        return a;
}

static const struct gs_wd_gpu *snap_gpu(const struct gs_wd_snapshot *snap, const char *uuid)
{
        for (size_t g = 0; g < snap->n_gpus; g++)
                if (strcmp(snap->gpus[g].uuid, uuid) == 0)
                        return &snap->gpus[g];
        return NULL;
}

/* The slice's NVML figures in this sample, per GPU of its ledger record. */
static void figures(const struct gs_slice *ls, int k, const struct gs_wd_snapshot *snap,
                    struct wd_acct *a)
{
        a->sampled = true;
        a->nvml_ok = true;
        a->holders = 0;
        for (unsigned g = 0; g < ls->n_gpus && g < GS_SLICE_MAX_GPUS; g++) {
                a->used[g] = 0;
                const struct gs_wd_gpu *sg = snap_gpu(snap, ls->gpus[g].uuid);
                if (!sg) {
                        a->nvml_ok = false; /* NVML did not answer for it */
                        continue;
                }
                for (size_t p = 0; p < sg->n_procs; p++) {
                        if (sg->procs[p].slice != k || !sg->procs[p].used)
                                continue;
                        a->used[g] += sg->procs[p].used;
                        a->holders++;
                }
        }
}

/* Count the refusals the books say happened since the last sample (a
 * counter that went down was reset by hand: what it says now is new), and
 * report the slice's first. */
static void refusals(struct wd_state *w, const struct gs_wd_slice *s, size_t k,
                     struct wd_acct *a)
{
        if (!s->shim || !s->books_valid)
                return;
        uint64_t now = w->books_ooms[k];
        a->refusals += now >= a->books_ooms ? now - a->books_ooms : now;
        a->books_ooms = now;
        if (!a->refusals || a->refusal_reported)
                return;
        a->refusal_reported = true;
        char msg[EVENTS_LINE_MAX], req[32], cap[32], used[32];
        uint64_t bytes = w->refused_first[k];
        struct event_fields f = { .reason = "memory_refused",
                                  .action = "reported",
                                  .pid = s->kind == GS_SLICE_LOCAL ? (pid_t)w->refused_pid[k] : 0,
                                  .slice = s->id,
                                  .gpu = s->gpu,
                                  .used = bytes,
                                  .cap = s->cap,
                                  .books = s->books_used,
                                  .msg = msg };
        snprintf(msg, sizeof(msg),
                 "slice %s: the shim refused an allocation of %s at its cap of %s (the books "
                 "say %s in use): CUDA_ERROR_OUT_OF_MEMORY; later refusals are counted "
                 "(gpuslice ls, gpuslice_slice_memory_refusals_total), not reported one by one",
                 s->id, gs_bytes_human(bytes, req, sizeof(req)),
                 gs_bytes_human(s->cap, cap, sizeof(cap)),
                 gs_bytes_human(s->books_used, used, sizeof(used)));
        events_add(w->ev, &f);
}

/* Free the draining slices of which no process holds GPU memory, by this
 * sample's NVML (a GPU NVML did not answer for keeps its slices). */
static void drain(struct daemon *d, struct wd_state *w)
{
        struct drain ids[16];
        size_t n = 0;
        for (size_t i = 0; i < d->n_drains && n < 16; i++) {
                int j = acct_index(w, d->drains[i]->id);
                const struct wd_acct *a = j >= 0 ? &w->acct[j] : NULL;
                if (a && a->gen == w->gen && a->nvml_ok && a->holders == 0)
                        ids[n++] = *d->drains[i];
        }
        /* Released outside the walk: the node's observer drops each from
         * the list (slices_removed). */
        for (size_t i = 0; i < n; i++) {
                char why[160];
                snprintf(why, sizeof(why), "%s; no process of it holds GPU memory (NVML)",
                         ids[i].why);
                node_slice_release_locked(d->node, ids[i].id, why);
        }
}

void wd_acct_update(struct daemon *d, struct wd_state *w, const struct gs_wd_snapshot *snap)
{
        const struct gs_ledger *l = &d->node->ledger;
        for (size_t k = 0; k < w->n_slices; k++) {
                const struct gs_wd_slice *s = &w->slices[k];
                const struct gs_slice *ls = gs_ledger_find(l, s->id);
                struct wd_acct *a = ls ? acct_of(w, s->id) : NULL;
                if (!a)
                        continue;
                a->gen = w->gen;
                figures(ls, (int)k, snap, a);
                refusals(w, s, k, a);
        }
        /* forget the slices that are gone */
        for (size_t i = 0; i < w->n_acct;)
                if (w->acct[i].gen != w->gen)
                        w->acct[i] = w->acct[--w->n_acct];
                else
                        i++;
        drain(d, w);
}

bool watchdog_slice_figures(const struct daemon *d, const char *id, struct wd_figures *ret)
{
        const struct wd_state *w = d->wd;
        *ret = (struct wd_figures){ 0 };
        if (!w)
                return false;
        int i = acct_index(w, id);
        if (i < 0)
                return false;
        const struct wd_acct *a = &w->acct[i];
        ret->sampled = a->sampled;
        memcpy(ret->used, a->used, sizeof(ret->used));
        ret->holders = a->holders;
        ret->refusals = a->refusals;
        return true;
}
