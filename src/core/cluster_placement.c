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
 * gpuslice's policy differs in three ways, each aimed at the allocation
 * ratio (GPU share allocated over capacity) rather than the pod count:
 *   1. shapes are weighted by the GPU share they ask (count x k x milli):
 *      a fragment matters in proportion to the GPU demand it turns away, so
 *      the rare 8-GPU pods that carry a large part of the demand keep their
 *      whole nodes, and CPU-only shapes (no GPU demand) weigh nothing;
 *   2. a shape runs on a node only if its host memory fits as well as its
 *      CPU (the trace's nodes run out of memory as well as of CPU);
 *   3. ties (equal fragmentation increase, common on empty and full nodes)
 *      go to the node left with the least free GPU share, then the least
 *      free CPU, and inside a node to the GPU with the least free share, so
 *      empty GPUs and nodes stay empty for whole-GPU pods.
 * Its model is learned online (gs_cp_model_observe per arriving pod). */
#include "cluster_placement.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "macro.h"

/* Most distinct shapes a model keeps (see gs_cp_model_observe). */
#define CP_MAX_SHAPES 4096u
/* The FGD paper's best-fit normalisers: the largest node's CPU and GPU. */
#define CP_BEST_FIT_CPU 128000.0
#define CP_BEST_FIT_GPU 8000.0
/* Span of the fragmentation change that the score maps onto [0,100]. */
#define CP_DELTA_SPAN ((double)GS_CP_MAX_GPUS * GS_CP_MILLI_PER_GPU)

struct cp_shape {
        uint64_t cpu, mem;   /* milli-cores, bytes */
        uint64_t count;
};

/* Shapes with the same GPU ask (k GPUs of milli each, allowed models). */
struct cp_group {
        unsigned k;          /* 0: CPU only */
        uint32_t milli;      /* per GPU; 1000 for whole GPUs, 0 for CPU only */
        char *models;        /* NULL: any */
        struct cp_shape *shapes;
        size_t n_shapes, cap;
};

struct gs_cp_model {
        struct cp_group *groups;
        size_t n_groups, cap;
        size_t n_shapes;
        uint64_t count;
};

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

struct gs_cp_model *gs_cp_model_new(void)
{
        return gs_calloc(1, sizeof(struct gs_cp_model));
}

struct gs_cp_model *gs_cp_model_free(struct gs_cp_model *m)
{
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n_groups; i++) {
                gs_free(m->groups[i].models);
                gs_free(m->groups[i].shapes);
        }
        gs_free(m->groups);
        gs_free(m);
        return NULL;
}

uint64_t gs_cp_model_count(const struct gs_cp_model *m)
{
        return m ? m->count : 0;
}

static bool models_empty(const char *s)
{
        return !s || !*s;
}

static bool models_equal(const char *a, const char *b)
{
        if (models_empty(a) || models_empty(b))
                return models_empty(a) && models_empty(b);
        return strcmp(a, b) == 0;
}

/* The pod's GPU ask in the model's terms: k GPUs of milli each. */
static void pod_ask(const struct gs_cp_pod *p, unsigned *ret_k, uint32_t *ret_milli)
{
        *ret_k = p->n_gpus;
        *ret_milli = p->n_gpus == 0 ? 0 : p->n_gpus > 1 ? GS_CP_MILLI_PER_GPU : p->milli;
}

static struct cp_group *group_find(const struct gs_cp_model *m, unsigned k, uint32_t milli,
                                   const char *models)
{
        for (size_t i = 0; i < m->n_groups; i++) {
                struct cp_group *g = &m->groups[i];
                if (g->k == k && g->milli == milli && models_equal(g->models, models))
                        return g;
        }
        return NULL;
}

static int group_add(struct gs_cp_model *m, unsigned k, uint32_t milli, const char *models,
                     struct cp_group **ret)
{
        if (m->n_groups == m->cap) {
                size_t cap = m->cap ? 2 * m->cap : 16;
                struct cp_group *g = gs_realloc(m->groups, cap * sizeof(*g));
                if (!g)
                        return -ENOMEM;
                m->groups = g;
                m->cap = cap;
        }
        char *copy = NULL;
        if (!models_empty(models)) {
                copy = gs_strdup(models);
                if (!copy)
                        return -ENOMEM;
        }
        struct cp_group *g = &m->groups[m->n_groups++];
        *g = (struct cp_group){ .k = k, .milli = milli, .models = copy };
        *ret = g;
        return 0;
}

/* The kept shape nearest to (cpu, mem) in g, for folding once the model is
 * full. NULL when g has none. */
static struct cp_shape *shape_nearest(struct cp_group *g, uint64_t cpu, uint64_t mem)
{
        struct cp_shape *best = NULL;
        double best_d = 0;
        for (size_t i = 0; i < g->n_shapes; i++) {
                double dc = ((double)g->shapes[i].cpu - (double)cpu) / 1000.0;
                double dm = ((double)g->shapes[i].mem - (double)mem) / (double)(1ull << 30);
                double d = dc * dc + dm * dm;
                if (!best || d < best_d) {
                        best = &g->shapes[i];
                        best_d = d;
                }
        }
        return best;
}

int gs_cp_model_observe(struct gs_cp_model *m, const struct gs_cp_pod *p)
{
        unsigned k;
        uint32_t milli;
        pod_ask(p, &k, &milli);
        struct cp_group *g = group_find(m, k, milli, p->models);
        for (size_t i = 0; g && i < g->n_shapes; i++)
                if (g->shapes[i].cpu == p->cpu_milli && g->shapes[i].mem == p->host_memory) {
                        g->shapes[i].count++;
                        m->count++;
                        return 0;
                }
        if (m->n_shapes >= CP_MAX_SHAPES) {
                struct cp_shape *s = g ? shape_nearest(g, p->cpu_milli, p->host_memory) : NULL;
                if (s)
                        s->count++;
                m->count++;
                return 0;
        }
        if (!g) {
                int r = group_add(m, k, milli, p->models, &g);
                if (r < 0)
                        return r;
        }
        if (g->n_shapes == g->cap) {
                size_t cap = g->cap ? 2 * g->cap : 8;
                struct cp_shape *s = gs_realloc(g->shapes, cap * sizeof(*s));
                if (!s)
                        return -ENOMEM;
                g->shapes = s;
                g->cap = cap;
        }
        g->shapes[g->n_shapes++] =
                (struct cp_shape){ .cpu = p->cpu_milli, .mem = p->host_memory, .count = 1 };
        m->n_shapes++;
        m->count++;
        return 0;
}

/* One FGD key (group, CPU) and the pods that have it. */
struct cp_key {
        size_t group;
        uint64_t cpu, count;
        bool keep;
};

static int key_cmp(const void *a, const void *b)
{
        const struct cp_key *x = a, *y = b;
        if (x->count != y->count)
                return x->count < y->count ? 1 : -1;
        if (x->group != y->group)
                return x->group < y->group ? -1 : 1;
        return x->cpu < y->cpu ? -1 : x->cpu > y->cpu;
}

static bool key_kept(const struct cp_key *keys, size_t n, size_t group, uint64_t cpu)
{
        for (size_t i = 0; i < n; i++)
                if (keys[i].group == group && keys[i].cpu == cpu)
                        return keys[i].keep;
        return false;
}

void gs_cp_model_keep_popular(struct gs_cp_model *m, double share)
{
        if (!m || m->n_shapes == 0)
                return;
        struct cp_key *keys = gs_calloc(m->n_shapes, sizeof(*keys));
        if (!keys)
                return; /* out of memory: keep every shape */
        size_t n = 0;
        uint64_t total = 0;
        for (size_t gi = 0; gi < m->n_groups; gi++)
                for (size_t si = 0; si < m->groups[gi].n_shapes; si++) {
                        const struct cp_shape *s = &m->groups[gi].shapes[si];
                        size_t k = 0;
                        while (k < n && !(keys[k].group == gi && keys[k].cpu == s->cpu))
                                k++;
                        if (k == n)
                                keys[n++] = (struct cp_key){ .group = gi, .cpu = s->cpu };
                        keys[k].count += s->count;
                        total += s->count;
                }
        qsort(keys, n, sizeof(*keys), key_cmp);
        double want = share * (double)total, cum = 0;
        for (size_t i = 0; i < n && cum < want; i++) {
                keys[i].keep = true;
                cum += (double)keys[i].count;
        }
        m->n_shapes = 0;
        for (size_t gi = 0; gi < m->n_groups; gi++) {
                struct cp_group *g = &m->groups[gi];
                size_t out = 0;
                for (size_t si = 0; si < g->n_shapes; si++)
                        if (key_kept(keys, n, gi, g->shapes[si].cpu))
                                g->shapes[out++] = g->shapes[si];
                g->n_shapes = out;
                m->n_shapes += out;
        }
        gs_free(keys);
}

/* ---- fit ------------------------------------------------------------ */

/* Is model in the '|'-separated list (NULL or "": any)? */
static bool model_allowed(const char *list, const char *model)
{
        if (models_empty(list))
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

/* How the policy weighs shapes and tests them against a node. */
struct cp_frag_rule {
        bool by_volume;   /* weight count x GPU share asked (else count) */
        bool memory;      /* host memory must fit too (else CPU only) */
};

static double shape_weight(const struct cp_group *g, const struct cp_shape *s,
                           const struct cp_frag_rule *r)
{
        if (!r->by_volume)
                return (double)s->count;
        return (double)s->count * (double)g->k * (double)g->milli;
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

static double frag_eval(const struct gs_cp_model *m, const struct cp_frag_rule *r,
                        const struct cp_view *v)
{
        uint64_t total = 0;
        for (unsigned i = 0; i < v->n; i++)
                total += v->free[i];
        if (total == 0)
                return 0;
        if (!m || m->count == 0)
                return frag_uniform(v);
        double acc = 0, wsum = 0;
        for (size_t gi = 0; gi < m->n_groups; gi++) {
                const struct cp_group *g = &m->groups[gi];
                uint64_t part = group_frag(g, v, total);
                for (size_t si = 0; si < g->n_shapes; si++) {
                        const struct cp_shape *s = &g->shapes[si];
                        double w = shape_weight(g, s, r);
                        if (w <= 0)
                                continue;
                        bool host = host_fits(v->cpu, s->cpu) &&
                                    (!r->memory || host_fits(v->mem, s->mem));
                        acc += w * (double)(host ? part : total);
                        wsum += w;
                }
        }
        return wsum > 0 ? acc / wsum : frag_uniform(v);
}

static const struct cp_frag_rule fgd_rule = { .by_volume = false, .memory = false };
static const struct cp_frag_rule gpuslice_rule = { .by_volume = true, .memory = true };

double gs_cp_node_frag(const struct gs_cp_model *m, const struct gs_cp_node *n)
{
        struct cp_view v;
        view_of(n, &v);
        return frag_eval(m, &fgd_rule, &v);
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

/* Fragmentation-driven choice (fgd, gpuslice): the GPU(s) of n whose
 * taking increases the node's fragmentation least, and that increase. */
static double frag_choose(enum gs_cp_policy pol, const struct gs_cp_model *m,
                          const struct gs_cp_node *n, const struct gs_cp_pod *p,
                          struct gs_cp_choice *c)
{
        const struct cp_frag_rule *r = pol == GS_CP_FGD ? &fgd_rule : &gpuslice_rule;
        struct cp_view base;
        view_of(n, &base);
        double before = frag_eval(m, r, &base);
        if (p->n_gpus == 0 || whole(p)) {
                choose_first(n, p, c);
                struct cp_view after = base;
                view_apply(&after, p, c);
                return frag_eval(m, r, &after) - before;
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
                double d = frag_eval(m, r, &after) - before;
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
