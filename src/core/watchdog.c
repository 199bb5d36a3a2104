/* SPDX-License-Identifier: Apache-2.0 */
/* The watchdog's rules (watchdog.h): verdicts from one snapshot, with
 * grace and compute windows remembered across evaluations. */
#include "watchdog.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "placement.h" /* gs_bytes_human */

struct track {
        enum gs_wd_reason reason;
        uint32_t pid;
        char slice[GS_SLICE_ID_MAX + 1];
        int64_t first_ms;
        uint64_t gen;   /* last evaluation that found it */
        bool announced; /* became_actionable was reported */
};

struct window {
        char slice[GS_SLICE_ID_MAX + 1];
        uint64_t gen;
        int64_t t[GS_WD_WINDOW_SAMPLES];
        uint32_t util[GS_WD_WINDOW_SAMPLES]; /* percent, summed over processes */
        unsigned pos, n;
};

struct gs_wd {
        struct gs_wd_config cfg;
        uint64_t gen;
        struct track tracks[GS_WD_MAX_TRACK];
        size_t n_tracks;
        struct window windows[GS_WD_MAX_WINDOWS];
        size_t n_windows;
        /* this evaluation */
        struct gs_wd_verdict *out;
        size_t max, n;
        int64_t now;
};

static const char *const reason_names[GS_WD_N_REASONS] = {
        [GS_WD_MEMORY_OVER_CAP] = "memory_over_cap",
        [GS_WD_BOOKS_DISAGREE] = "books_disagree",
        [GS_WD_UNSLICED] = "unsliced",
        [GS_WD_WRONG_GPU] = "wrong_gpu",
        [GS_WD_NO_SHIM] = "no_shim",
        [GS_WD_COMPUTE_OVER_SHARE] = "compute_over_share",
        [GS_WD_BOOKS_FORGED] = "books_forged",
};

const char *gs_wd_reason_name(enum gs_wd_reason r)
{
        return (unsigned)r < GS_WD_N_REASONS ? reason_names[r] : "unknown";
}

void gs_wd_config_default(struct gs_wd_config *c)
{
        *c = (struct gs_wd_config){ .grace_ms = 2000,
                                    .books_tolerance = GS_WD_GRANULE,
                                    .window_ms = 5000,
                                    .compute_tolerance_milli = 50 };
}

struct gs_wd *gs_wd_new(const struct gs_wd_config *cfg)
{
        struct gs_wd *w = calloc(1, sizeof(*w));
        if (!w)
                return NULL;
        if (cfg)
                w->cfg = *cfg;
        else
                gs_wd_config_default(&w->cfg);
        return w;
}

void gs_wd_free(struct gs_wd *w)
{
        free(w);
}

/* The grace memory of (reason, pid, slice): found, or made now. NULL when
 * GS_WD_MAX_TRACK are remembered (the verdict is then never actionable). */
static struct track *track_of(struct gs_wd *w, enum gs_wd_reason r, uint32_t pid, const char *slice,
                              bool *fresh)
{
        for (size_t i = 0; i < w->n_tracks; i++) {
                struct track *t = &w->tracks[i];
                if (t->reason == r && t->pid == pid && strcmp(t->slice, slice) == 0) {
                        *fresh = false;
                        return t;
                }
        }
        *fresh = true;
        if (w->n_tracks == GS_WD_MAX_TRACK)
                return NULL;
        struct track *t = &w->tracks[w->n_tracks++];
        *t = (struct track){ .reason = r, .pid = pid, .first_ms = w->now };
        snprintf(t->slice, sizeof(t->slice), "%s", slice);
        return t;
}

/* Record verdict v (its reason, pid, slice, figures and message set):
 * grace from its memory, then into out when there is room. */
static void emit(struct gs_wd *w, struct gs_wd_verdict *v)
{
        bool fresh;
        struct track *t = track_of(w, v->reason, v->pid, v->slice, &fresh);
        v->fresh = fresh;
        v->first_seen_ms = t ? t->first_ms : w->now;
        v->actionable = t && w->now - t->first_ms >= w->cfg.grace_ms;
        v->became_actionable = v->actionable && !t->announced;
        if (t) {
                t->gen = w->gen;
                if (v->actionable)
                        t->announced = true;
        }
        if (w->n < w->max)
                w->out[w->n] = *v;
        w->n++;
}

static struct gs_wd_verdict verdict(enum gs_wd_reason r, uint32_t pid, const char *slice,
                                    const char *gpu)
{
        struct gs_wd_verdict v = { .reason = r, .pid = pid };
        snprintf(v.slice, sizeof(v.slice), "%s", slice ? slice : "");
        snprintf(v.gpu, sizeof(v.gpu), "%s", gpu);
        return v;
}

static const struct gs_wd_book *book_of(const struct gs_wd_slice *s, uint32_t pid)
{
        for (size_t i = 0; i < s->n_books; i++)
                if (s->books[i].pid == pid)
                        return &s->books[i];
        return NULL;
}

/* Whether pid holds a slot in any slice's books (it loaded the shim). */
static bool registered(const struct gs_wd_snapshot *s, uint32_t pid)
{
        for (size_t i = 0; i < s->n_slices; i++)
                if (s->slices[i].books_valid && book_of(&s->slices[i], pid))
                        return true;
        return false;
}

/* Whether slice sl was placed on the GPU `uuid`. */
static bool on_gpu(const struct gs_wd_slice *sl, const char *uuid)
{
        if (strcmp(sl->gpu, uuid) == 0)
                return true;
        for (unsigned i = 0; i < sl->n_more_gpus && i < GS_SLICE_MAX_GPUS - 1; i++)
                if (strcmp(sl->more_gpus[i], uuid) == 0)
                        return true;
        return false;
}

static bool gpu_has_slices(const struct gs_wd_snapshot *s, const char *uuid)
{
        for (size_t i = 0; i < s->n_slices; i++)
                if (on_gpu(&s->slices[i], uuid))
                        return true;
        return false;
}

/* Whether NVML's use of process p (of shim slice sl) is covered by books. */
static bool covered(const struct gs_wd *w, const struct gs_wd_snapshot *s,
                    const struct gs_wd_slice *sl, const struct gs_wd_proc *p)
{
        if (!sl->books_valid || !registered(s, p->pid))
                return false;
        const struct gs_wd_book *b = book_of(sl, p->pid);
        uint64_t books = b ? b->charged : 0;
        return books + w->cfg.books_tolerance >= p->used;
}

GS_PRINTF(2, 3) static void msgf(struct gs_wd_verdict *v, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(v->msg, sizeof(v->msg), fmt, ap);
        va_end(ap);
}

static void mib(uint64_t b, char *buf, size_t size)
{
        gs_bytes_human(b, buf, size);
}

/* Rules that look at one process at a time. */
static void proc_rules(struct gs_wd *w, const struct gs_wd_snapshot *s, const struct gs_wd_gpu *g,
                       const struct gs_wd_proc *p)
{
        char a[32], b[32];
        mib(p->used, a, sizeof(a));
        if (p->slice < 0 || (size_t)p->slice >= s->n_slices) {
                if (!gpu_has_slices(s, g->uuid))
                        return;
                struct gs_wd_verdict v = verdict(GS_WD_UNSLICED, p->pid, NULL, g->uuid);
                v.used = p->used;
                msgf(&v, "process %" PRIu32 " uses %s on %s, which has slices, and is in none",
                     p->pid, a, g->uuid);
                emit(w, &v);
                return;
        }
        const struct gs_wd_slice *sl = &s->slices[p->slice];
        if (!on_gpu(sl, g->uuid)) {
                struct gs_wd_verdict v = verdict(GS_WD_WRONG_GPU, p->pid, sl->id, g->uuid);
                v.used = p->used;
                v.cap = sl->cap;
                msgf(&v, "process %" PRIu32 " of slice %s uses %s on %s; its slice is on %s",
                     p->pid, sl->id, a, g->uuid, sl->gpu);
                emit(w, &v);
                return;
        }
        if (!sl->shim || p->used == 0)
                return;
        if (!sl->books_valid) {
                struct gs_wd_verdict v = verdict(GS_WD_BOOKS_DISAGREE, p->pid, sl->id, g->uuid);
                v.used = p->used;
                v.cap = sl->cap;
                msgf(&v,
                     "process %" PRIu32 " of slice %s uses %s by NVML, and the slice's books "
                     "cannot be read",
                     p->pid, sl->id, a);
                emit(w, &v);
                return;
        }
        if (!registered(s, p->pid)) {
                struct gs_wd_verdict v = verdict(GS_WD_NO_SHIM, p->pid, sl->id, g->uuid);
                v.used = p->used;
                v.cap = sl->cap;
                msgf(&v,
                     "process %" PRIu32 " of slice %s uses %s by NVML and never loaded the "
                     "shim (no slot in the books)",
                     p->pid, sl->id, a);
                emit(w, &v);
                return;
        }
        const struct gs_wd_book *bk = book_of(sl, p->pid);
        uint64_t books = bk ? bk->charged : 0;
        if (books + w->cfg.books_tolerance < p->used) {
                struct gs_wd_verdict v = verdict(GS_WD_BOOKS_DISAGREE, p->pid, sl->id, g->uuid);
                v.used = p->used;
                v.books = books;
                v.cap = sl->cap;
                mib(books, b, sizeof(b));
                msgf(&v, "process %" PRIu32 " of slice %s: the books say %s, NVML says %s", p->pid,
                     sl->id, b, a);
                emit(w, &v);
        }
}

/* Memory over cap, for slice index si on its GPU. */
static void cap_rule(struct gs_wd *w, const struct gs_wd_snapshot *s, size_t si)
{
        const struct gs_wd_slice *sl = &s->slices[si];
        if (!sl->cap)
                return;
        for (size_t gi = 0; gi < s->n_gpus; gi++) {
                const struct gs_wd_gpu *g = &s->gpus[gi];
                if (strcmp(g->uuid, sl->gpu) != 0)
                        continue;
                uint64_t total = 0;
                size_t uncovered = 0;
                for (size_t k = 0; k < g->n_procs; k++)
                        if (g->procs[k].slice == (int)si) {
                                total += g->procs[k].used;
                                uncovered += !covered(w, s, sl, &g->procs[k]);
                        }
                if (total <= sl->cap)
                        return;
                char a[32], b[32], c[32];
                mib(total, a, sizeof(a));
                mib(sl->cap, b, sizeof(b));
                for (size_t k = 0; k < g->n_procs; k++) {
                        const struct gs_wd_proc *p = &g->procs[k];
                        if (p->slice != (int)si || (uncovered && covered(w, s, sl, p)))
                                continue;
                        struct gs_wd_verdict v =
                                verdict(GS_WD_MEMORY_OVER_CAP, p->pid, sl->id, g->uuid);
                        v.used = p->used;
                        v.slice_used = total;
                        v.cap = sl->cap;
                        const struct gs_wd_book *bk = book_of(sl, p->pid);
                        v.books = bk ? bk->charged : 0;
                        mib(p->used, c, sizeof(c));
                        msgf(&v,
                             "slice %s holds %s on %s by NVML, over its cap of %s; process "
                             "%" PRIu32 " holds %s",
                             sl->id, a, g->uuid, b, p->pid, c);
                        emit(w, &v);
                }
                return;
        }
}

/* Books that do not add up, for shim slice index si. */
static void forged_rule(struct gs_wd *w, const struct gs_wd_snapshot *s, size_t si)
{
        const struct gs_wd_slice *sl = &s->slices[si];
        if (!sl->books_valid || sl->books_used == sl->books_sum)
                return;
        char a[32], b[32];
        mib(sl->books_used, a, sizeof(a));
        mib(sl->books_sum, b, sizeof(b));
        struct gs_wd_verdict v = verdict(GS_WD_BOOKS_FORGED, 0, sl->id, sl->gpu);
        v.books = sl->books_used;
        v.used = sl->books_sum;
        v.cap = sl->cap;
        msgf(&v,
             "slice %s's books say it uses %s, its processes' slots %s: the file was written "
             "outside the shim",
             sl->id, a, b);
        emit(w, &v);
}

static struct window *window_of(struct gs_wd *w, const char *id)
{
        for (size_t i = 0; i < w->n_windows; i++)
                if (strcmp(w->windows[i].slice, id) == 0)
                        return &w->windows[i];
        if (w->n_windows == GS_WD_MAX_WINDOWS)
                return NULL;
        struct window *win = &w->windows[w->n_windows++];
        memset(win, 0, sizeof(*win));
        snprintf(win->slice, sizeof(win->slice), "%s", id);
        return win;
}

/* Compute over share, for a cap slice: the mean of its samples within the
 * window, once the window holds samples spanning at least half of it. */
static void compute_rule(struct gs_wd *w, const struct gs_wd_snapshot *s, size_t si)
{
        const struct gs_wd_slice *sl = &s->slices[si];
        struct window *win = window_of(w, sl->id);
        if (!win)
                return;
        win->gen = w->gen;
        uint32_t sum = 0;
        bool any = false;
        for (size_t gi = 0; gi < s->n_gpus; gi++)
                for (size_t k = 0; k < s->gpus[gi].n_procs; k++) {
                        const struct gs_wd_proc *p = &s->gpus[gi].procs[k];
                        if (p->slice == (int)si && p->util >= 0 &&
                            strcmp(s->gpus[gi].uuid, sl->gpu) == 0) {
                                sum += (uint32_t)p->util;
                                any = true;
                        }
                }
        win->t[win->pos] = w->now;
        win->util[win->pos] = any ? sum : 0;
        win->pos = (win->pos + 1) % GS_WD_WINDOW_SAMPLES;
        if (win->n < GS_WD_WINDOW_SAMPLES)
                win->n++;
        if (sl->policy != GS_POLICY_CAP || !sl->milli || sl->milli >= 1000)
                return;
        uint64_t total = 0;
        unsigned n = 0;
        int64_t oldest = w->now;
        for (unsigned i = 0; i < win->n; i++) {
                if (w->now - win->t[i] > w->cfg.window_ms)
                        continue;
                total += win->util[i];
                n++;
                if (win->t[i] < oldest)
                        oldest = win->t[i];
        }
        if (n < 2 || w->now - oldest < w->cfg.window_ms / 2)
                return;
        uint32_t milli = (uint32_t)(total * 10 / n);
        if (milli <= sl->milli + w->cfg.compute_tolerance_milli)
                return;
        struct gs_wd_verdict v = verdict(GS_WD_COMPUTE_OVER_SHARE, 0, sl->id, sl->gpu);
        v.util_milli = milli;
        v.share_milli = sl->milli;
        msgf(&v,
             "slice %s (policy cap, share %" PRIu32 "m) used %" PRIu32
             "m of %s over the last %" PRId64 " ms",
             sl->id, sl->milli, milli, sl->gpu, w->now - oldest);
        emit(w, &v);
}

/* Forget what this evaluation did not find. */
static void sweep(struct gs_wd *w)
{
        size_t k = 0;
        for (size_t i = 0; i < w->n_tracks; i++)
                if (w->tracks[i].gen == w->gen)
                        w->tracks[k++] = w->tracks[i];
        w->n_tracks = k;
        k = 0;
        for (size_t i = 0; i < w->n_windows; i++)
                if (w->windows[i].gen == w->gen)
                        w->windows[k++] = w->windows[i];
        w->n_windows = k;
}

size_t gs_wd_evaluate(struct gs_wd *w, const struct gs_wd_snapshot *s, int64_t now_ms,
                      struct gs_wd_verdict *out, size_t max)
{
        w->gen++;
        w->out = out;
        w->max = max;
        w->n = 0;
        w->now = now_ms;
        for (size_t gi = 0; gi < s->n_gpus; gi++)
                for (size_t k = 0; k < s->gpus[gi].n_procs; k++)
                        proc_rules(w, s, &s->gpus[gi], &s->gpus[gi].procs[k]);
        for (size_t si = 0; si < s->n_slices; si++) {
                if (s->slices[si].shim) {
                        cap_rule(w, s, si);
                        forged_rule(w, s, si);
                }
                compute_rule(w, s, si);
        }
        sweep(w);
        return w->n;
}
