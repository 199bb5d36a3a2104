/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster-level placement: fits, the four policies, the workload model and
 * fragmentation. See cluster_placement.h.
 *
 * Fragmentation (FGD, Weng et al., ATC'23, as its public simulator computes
 * it): for a node and a pod shape t, F(t) is the node's whole free GPU share
 * when t cannot run there at all (GPU model not allowed, too little CPU, or
 * fewer than t.k GPUs with t's share free), and otherwise the free share of
 * the GPUs that individually cannot take t's share. A CPU-only shape counts
 * the whole free share (it never uses it). The node's fragmentation is
 * sum_t w(t) F(t) over the model, w normalised to 1; fgd weighs shapes by
 * pod count and tests only CPU, as the paper does.
 *
 * gpuslice's policy scores the loss of a node instead: what it expects to
 * stay unallocated at the end of an overloaded run, in milli-GPU.
 *   1. Each GPU's free share f is expected to be left with leftover[f]
 *      (cluster_model.c): the share that remains once pods drawn from the
 *      model have filled it, each arriving pod either fitting or, with
 *      chance 1 - gamma, the run ending first. Unlike FGD's fragmentation
 *      this sees that a share which only a large pod with a large
 *      remainder fits (an 810m pod leaving 190m that few pods fit) is worth
 *      less than one that several smaller pods fill exactly, so small pods
 *      open fresh GPUs rather than leave them to such pods.
 *   2. CPU and host memory: free share that the node's free CPU or memory
 *      cannot feed, at the CPU and memory per milli-GPU of the GPU pods
 *      seen, counts as lost, so CPU-hungry pods (and CPU-only pods) go
 *      where they strand the least GPU.
 *   3. Ties (equal loss, common on empty and full nodes) go to the node
 *      left with the least free GPU share, then the least free CPU, and
 *      inside a node to the GPU with the least free share, so empty GPUs
 *      and nodes stay whole for whole-GPU and multi-GPU pods.
 * Its model is learned online (gs_cp_model_observe per arriving pod). */
#include "cluster_placement.h"

#include <errno.h>
#include <string.h>

#include "cluster_model_int.h"

/* The FGD paper's best-fit normalisers: the largest node's CPU and GPU. */
#define CP_BEST_FIT_CPU 128000.0
#define CP_BEST_FIT_GPU 8000.0
/* Span of the fragmentation change that the score maps onto [0,100]. */
#define CP_DELTA_SPAN ((double)GS_CP_MAX_GPUS * GS_CP_MILLI_PER_GPU)



/* A node as fragmentation sees it (possibly after a hypothetical pod). */
struct cp_view {
        uint32_t free[GS_CP_MAX_GPUS];
        unsigned n;
        uint64_t cpu, mem;
        const char *model;
};

/* ---- names ---------------------------------------------------------- */

static const char *const policy_names[GS_CP_N_POLICIES] = { "first-fit", "best-fit", "fgd",
                                                            "gpuslice" };

int gs_cp_policy_parse(const char *s, enum gs_cp_policy *ret)
{
        for (unsigned i = 0; i < GS_CP_N_POLICIES; i++)
                if (s && strcmp(s, policy_names[i]) == 0) {
                        *ret = (enum gs_cp_policy)i;
                        return 0;
                }
        return -EINVAL;
}

const char *gs_cp_policy_name(enum gs_cp_policy p)
{
        return (unsigned)p < GS_CP_N_POLICIES ? policy_names[p] : "?";
}

/* ---- the model ------------------------------------------------------ */

/* ---- fit ------------------------------------------------------------ */

/* Is model in the '|'-separated list (NULL or "": any)? */
static bool model_allowed(const char *list, const char *model)
{
        if (cp_models_empty(list))
                return true;
        size_t len = strlen(model);
        if (len == 0)
                return false;
        for (const char *s = list; *s;) {
                const char *bar = strchr(s, '|');
                size_t n = bar ? (size_t)(bar - s) : strlen(s);
                if (n == len && memcmp(s, model, n) == 0)
                        return true;
                if (!bar)
                        break;
                s = bar + 1;
        }
        return false;
}

static bool pod_valid(const struct gs_cp_pod *p)
{
        if (p->n_gpus > GS_CP_MAX_GPUS)
                return false;
        return p->n_gpus != 1 || (p->milli >= 1 && p->milli <= GS_CP_MILLI_PER_GPU);
}

static bool whole(const struct gs_cp_pod *p)
{
        return p->n_gpus > 1 || (p->n_gpus == 1 && p->milli == GS_CP_MILLI_PER_GPU);
}

static bool gpu_memory_fits(const struct gs_cp_gpu *g, uint64_t want)
{
        return want == 0 || g->total_memory == 0 || g->free_memory >= want;
}

/* Can GPU i of n take p (one of p's GPUs)? */
static bool gpu_fits(const struct gs_cp_node *n, unsigned i, const struct gs_cp_pod *p)
{
        const struct gs_cp_gpu *g = &n->gpus[i];
        uint32_t want = whole(p) ? GS_CP_MILLI_PER_GPU : p->milli;
        return g->free_milli >= want && gpu_memory_fits(g, p->gpu_memory);
}

static bool host_fits(uint64_t free, uint64_t want)
{
        return free == GS_CP_UNTRACKED || want <= free;
}

bool gs_cp_fits(const struct gs_cp_node *n, const struct gs_cp_pod *p)
{
        if (!pod_valid(p) || n->n_gpus > GS_CP_MAX_GPUS)
                return false;
        if (!host_fits(n->free_cpu_milli, p->cpu_milli) ||
            !host_fits(n->free_host_memory, p->host_memory))
                return false;
        if (p->n_gpus == 0)
                return true;
        if (!model_allowed(p->models, n->model))
                return false;
        unsigned ok = 0;
        for (unsigned i = 0; i < n->n_gpus; i++)
                ok += gpu_fits(n, i, p);
        return ok >= p->n_gpus;
}

/* ---- commit --------------------------------------------------------- */

static uint64_t sub_sat(uint64_t a, uint64_t b)
{
        return a > b ? a - b : 0;
}

void gs_cp_commit(struct gs_cp_node *n, const struct gs_cp_pod *p, const struct gs_cp_choice *c)
{
        if (n->free_cpu_milli != GS_CP_UNTRACKED)
                n->free_cpu_milli = sub_sat(n->free_cpu_milli, p->cpu_milli);
        if (n->free_host_memory != GS_CP_UNTRACKED)
                n->free_host_memory = sub_sat(n->free_host_memory, p->host_memory);
        for (unsigned i = 0; i < c->n && i < GS_CP_MAX_GPUS; i++) {
                if (c->gpus[i] >= n->n_gpus)
                        continue;
                struct gs_cp_gpu *g = &n->gpus[c->gpus[i]];
                if (whole(p)) {
                        g->free_milli = 0;
                        g->free_memory = 0;
                } else {
                        g->free_milli = g->free_milli > p->milli ? g->free_milli - p->milli : 0;
                        g->free_memory = sub_sat(g->free_memory, p->gpu_memory);
                }
        }
}

/* ---- fragmentation -------------------------------------------------- */

static void view_of(const struct gs_cp_node *n, struct cp_view *v)
{
        v->n = n->n_gpus;
        for (unsigned i = 0; i < n->n_gpus; i++)
                v->free[i] = n->gpus[i].free_milli;
        v->cpu = n->free_cpu_milli;
        v->mem = n->free_host_memory;
        v->model = n->model;
}

/* The view after p takes the GPUs of c. */
static void view_apply(struct cp_view *v, const struct gs_cp_pod *p, const struct gs_cp_choice *c)
{
        if (v->cpu != GS_CP_UNTRACKED)
                v->cpu = sub_sat(v->cpu, p->cpu_milli);
        if (v->mem != GS_CP_UNTRACKED)
                v->mem = sub_sat(v->mem, p->host_memory);
        for (unsigned i = 0; i < c->n; i++) {
                uint32_t *f = &v->free[c->gpus[i]];
                uint32_t take = whole(p) ? *f : p->milli;
                *f = *f > take ? *f - take : 0;
        }
}

/* The free share of the view that shapes of g cannot use (F above), for a
 * shape whose host side fits. */
static uint64_t group_frag(const struct cp_group *g, const struct cp_view *v, uint64_t total)
{
        if (g->k == 0 || !model_allowed(g->models, v->model))
                return total;
        unsigned hosts = 0;
        uint64_t part = 0;
        for (unsigned i = 0; i < v->n; i++) {
                if (v->free[i] >= g->milli)
                        hosts++;
                else
                        part += v->free[i];
        }
        return hosts >= g->k ? part : total;
}

static uint64_t view_free(const struct cp_view *v)
{
        uint64_t total = 0;
        for (unsigned i = 0; i < v->n; i++)
                total += v->free[i];
        return total;
}

/* Fragmentation for an empty model: shares 100m..1000m, equally likely. */
static double frag_uniform(const struct cp_view *v)
{
        double acc = 0;
        for (uint32_t milli = 100; milli <= GS_CP_MILLI_PER_GPU; milli += 100)
                for (unsigned i = 0; i < v->n; i++)
                        if (v->free[i] < milli)
                                acc += v->free[i];
        return acc / 10.0;
}

/* FGD's fragmentation of a view: sum over shapes of count x F, over the
 * count of shapes. */
static double fgd_frag(const struct gs_cp_model *m, const struct cp_view *v)
{
        uint64_t total = view_free(v);
        if (total == 0)
                return 0;
        if (!m || m->n_shapes == 0)
                return frag_uniform(v);
        double acc = 0, n = 0;
        for (size_t gi = 0; gi < m->n_groups; gi++) {
                const struct cp_group *g = &m->groups[gi];
                uint64_t part = group_frag(g, v, total);
                for (size_t si = 0; si < g->n_shapes; si++) {
                        const struct cp_shape *s = &g->shapes[si];
                        bool host = host_fits(v->cpu, s->cpu);
                        acc += (double)s->count * (double)(host ? part : total);
                        n += (double)s->count;
                }
        }
        return n > 0 ? acc / n : frag_uniform(v);
}

/* Free share of the view that its free CPU or host memory cannot feed, at
 * the model's CPU and memory per milli-GPU of GPU pods. */
static double stranded(const struct gs_cp_model *m, const struct cp_view *v, uint64_t total)
{
        double s = 0;
        if (v->cpu != GS_CP_UNTRACKED && m->cpu_per_milli > 0) {
                double usable = (double)v->cpu / m->cpu_per_milli;
                s = (double)total > usable ? (double)total - usable : 0;
        }
        if (v->mem != GS_CP_UNTRACKED && m->mem_per_milli > 0) {
                double usable = (double)v->mem / m->mem_per_milli;
                double sm = (double)total > usable ? (double)total - usable : 0;
                s = sm > s ? sm : s;
        }
        return s;
}

/* gpuslice's loss of a view: the share its GPUs are expected to be left
 * with (the model's leftover table, GPU by GPU) plus the free share its
 * CPU or memory cannot feed; milli-GPU, lower is better. */
static double gpuslice_loss(const struct gs_cp_model *m, const struct cp_view *v)
{
        uint64_t total = view_free(v);
        if (total == 0)
                return 0;
        if (!m || m->gpu_demand <= 0)
                return frag_uniform(v);
        double loss = 0;
        for (unsigned i = 0; i < v->n; i++)
                loss += m->leftover[v->free[i] <= GS_CP_MILLI_PER_GPU ? v->free[i] : 0];
        return loss + stranded(m, v, total);
}

static double policy_loss(enum gs_cp_policy pol, const struct gs_cp_model *m,
                          const struct cp_view *v)
{
        return pol == GS_CP_FGD ? fgd_frag(m, v) : gpuslice_loss(m, v);
}

double gs_cp_node_frag(const struct gs_cp_model *m, const struct gs_cp_node *n)
{
        struct cp_view v;
        view_of(n, &v);
        return fgd_frag(m, &v);
}

/* ---- choices -------------------------------------------------------- */

/* The first k GPUs of n that can each take one of p's GPUs. */
static void choose_first(const struct gs_cp_node *n, const struct gs_cp_pod *p,
                         struct gs_cp_choice *c)
{
        c->n = 0;
        for (unsigned i = 0; i < n->n_gpus && c->n < p->n_gpus; i++)
                if (gpu_fits(n, i, p))
                        c->gpus[c->n++] = i;
}

/* A share: the fitting GPU with the least free share (ties: lowest index). */
static void choose_tightest(const struct gs_cp_node *n, const struct gs_cp_pod *p,
                            struct gs_cp_choice *c)
{
        int best = -1;
        for (unsigned i = 0; i < n->n_gpus; i++)
                if (gpu_fits(n, i, p) &&
                    (best < 0 || n->gpus[i].free_milli < n->gpus[best].free_milli))
                        best = (int)i;
        c->n = 1;
        c->gpus[0] = (unsigned)best;
}

static uint64_t free_gpu_total(const struct gs_cp_node *n)
{
        uint64_t t = 0;
        for (unsigned i = 0; i < n->n_gpus; i++)
                t += n->gpus[i].free_milli;
        return t;
}

static double pod_gpu_milli(const struct gs_cp_pod *p)
{
        return whole(p) ? (double)p->n_gpus * GS_CP_MILLI_PER_GPU : (double)p->milli;
}

static double clamp_score(double s)
{
        return s < 0 ? 0 : s > 100 ? 100 : s;
}

/* Best-fit (the FGD paper's baseline): lower 0.5 (cpu_free - cpu)/128000 +
 * 0.5 (gpu_free - gpu)/8000 is better; untracked CPU counts as nothing
 * left. Mapped to [0,100], higher better. */
static double best_fit_score(const struct gs_cp_node *n, const struct gs_cp_pod *p)
{
        double left = 0.5 * ((double)free_gpu_total(n) - pod_gpu_milli(p)) / CP_BEST_FIT_GPU;
        if (n->free_cpu_milli != GS_CP_UNTRACKED)
                left += 0.5 * ((double)n->free_cpu_milli - (double)p->cpu_milli) / CP_BEST_FIT_CPU;
        return clamp_score(100.0 * (1.0 - left));
}

/* Loss-driven choice (fgd: its fragmentation; gpuslice: its loss): the
 * GPU(s) of n whose taking increases the node's loss least, and that
 * increase. */
static double frag_choose(enum gs_cp_policy pol, const struct gs_cp_model *m,
                          const struct gs_cp_node *n, const struct gs_cp_pod *p,
                          struct gs_cp_choice *c)
{
        struct cp_view base;
        view_of(n, &base);
        double before = policy_loss(pol, m, &base);
        if (p->n_gpus == 0 || whole(p)) {
                choose_first(n, p, c);
                struct cp_view after = base;
                view_apply(&after, p, c);
                return policy_loss(pol, m, &after) - before;
        }
        /* A share: try each GPU that fits, once per distinct free share. */
        bool tried[GS_CP_MILLI_PER_GPU + 1] = { false };
        double best = 0;
        int best_i = -1;
        for (unsigned i = 0; i < n->n_gpus; i++) {
                uint32_t f = n->gpus[i].free_milli;
                if (!gpu_fits(n, i, p) || f > GS_CP_MILLI_PER_GPU || tried[f])
                        continue;
                tried[f] = true;
                struct gs_cp_choice one = { .n = 1, .gpus = { i } };
                struct cp_view after = base;
                view_apply(&after, p, &one);
                double d = policy_loss(pol, m, &after) - before;
                bool better = best_i < 0 || d < best - 1e-9;
                /* gpuslice breaks ties towards the tighter GPU; fgd keeps
                 * the first (lowest index), as its simulator does. */
                if (!better && pol == GS_CP_GPUSLICE && d <= best + 1e-9 &&
                    f < n->gpus[best_i].free_milli)
                        better = true;
                if (better) {
                        best = d;
                        best_i = (int)i;
                }
        }
        c->n = 1;
        c->gpus[0] = (unsigned)best_i;
        return best;
}

/* gpuslice's tie-break inside a score: less free GPU share left after the
 * pod, then less free CPU, as a small fraction of one milli of delta. */
static double gpuslice_tiebreak(const struct gs_cp_node *n, const struct gs_cp_pod *p)
{
        double gpu_left = (double)free_gpu_total(n) - pod_gpu_milli(p);
        double t = gpu_left / CP_DELTA_SPAN;
        if (n->free_cpu_milli != GS_CP_UNTRACKED && n->total_cpu_milli &&
            n->total_cpu_milli != GS_CP_UNTRACKED)
                t += 1e-3 * ((double)n->free_cpu_milli - (double)p->cpu_milli) /
                     (double)n->total_cpu_milli;
        return 1e-3 * t;
}

int gs_cp_score(enum gs_cp_policy policy, const struct gs_cp_model *m, const struct gs_cp_node *n,
                const struct gs_cp_pod *p, struct gs_cp_choice *ret_choice, double *ret_score)
{
        if (!pod_valid(p) || (unsigned)policy >= GS_CP_N_POLICIES)
                return -EINVAL;
        if (!gs_cp_fits(n, p))
                return -ENOSPC;
        struct gs_cp_choice c = { .n = 0 };
        double score = 100;
        switch (policy) {
        case GS_CP_FIRST_FIT:
                choose_first(n, p, &c);
                break;
        case GS_CP_BEST_FIT:
                if (p->n_gpus == 0 || whole(p))
                        choose_first(n, p, &c);
                else
                        choose_tightest(n, p, &c);
                score = best_fit_score(n, p);
                break;
        case GS_CP_FGD:
        case GS_CP_GPUSLICE: {
                double delta = frag_choose(policy, m, n, p, &c);
                if (policy == GS_CP_GPUSLICE)
                        delta += gpuslice_tiebreak(n, p);
                score = clamp_score(50.0 - 50.0 * delta / CP_DELTA_SPAN);
                break;
        }
        }
        if (ret_choice)
                *ret_choice = c;
        if (ret_score)
                *ret_score = score;
        return 0;
}
