/* SPDX-License-Identifier: Apache-2.0 */
/* The workload model of cluster placement: weighted pod shapes, FGD's
 * typical pods, and the leftover table of gpuslice's policy. See
 * cluster_placement.h and cluster_model_int.h. */
#include "cluster_model_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "macro.h"

/* Most distinct shapes a model keeps (see gs_cp_model_observe). */
#define CP_MAX_SHAPES 4096u
/* The chance, each time a pod arrives, that a free share is still offered
 * to pods later (1 - gamma: the run or the overload ends first). Results
 * hardly move between 0.9 and 0.99 (docs/scheduling.md). */
#define CP_LEFTOVER_GAMMA 0.95

static void leftover_refresh(struct gs_cp_model *m);

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

bool cp_models_empty(const char *s)
{
        return !s || !*s;
}

static bool models_equal(const char *a, const char *b)
{
        if (cp_models_empty(a) || cp_models_empty(b))
                return cp_models_empty(a) && cp_models_empty(b);
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
        if (!cp_models_empty(models)) {
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
                        leftover_refresh(m);
                        return 0;
                }
        if (m->n_shapes >= CP_MAX_SHAPES) {
                struct cp_shape *s = g ? shape_nearest(g, p->cpu_milli, p->host_memory) : NULL;
                if (s)
                        s->count++;
                m->count++;
                leftover_refresh(m);
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
        leftover_refresh(m);
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
        m->leftover_count = 0;
        leftover_refresh(m);
}

/* Recompute leftover[] (see struct gs_cp_model) and the demand ratios.
 * Each pod that arrives at a GPU with f free is of share s with the odds p_s
 * of the GPU pods seen (count, x k for whole GPUs, which take k GPUs); it
 * fills the GPU when s <= f, and the run goes on with chance gamma:
 *   leftover[f] = (1 - gamma) f + gamma (sum_{s <= f} p_s leftover[f - s]
 *                                        + (1 - p_fit(f)) leftover[f]).
 * So a share that no pod fits keeps all of f, and one that only rare pods
 * fit keeps most of it. O(1001 x distinct shares); done for each of the
 * first 256 pods and then every 64th, as the distribution moves slowly once
 * known. */
static void leftover_refresh(struct gs_cp_model *m)
{
        if (m->count > 256 && m->count % 64 != 0 && m->leftover_count != 0)
                return;
        double by_share[GS_CP_MILLI_PER_GPU + 1] = { 0 };
        double cpu = 0, mem = 0, gpu = 0;
        for (size_t gi = 0; gi < m->n_groups; gi++) {
                const struct cp_group *g = &m->groups[gi];
                if (g->k == 0 || g->milli > GS_CP_MILLI_PER_GPU)
                        continue;
                for (size_t si = 0; si < g->n_shapes; si++) {
                        double n_pods = (double)g->shapes[si].count;
                        by_share[g->milli] += n_pods * (double)g->k;
                        cpu += n_pods * (double)g->shapes[si].cpu;
                        mem += n_pods * (double)g->shapes[si].mem;
                        gpu += n_pods * (double)g->k * (double)g->milli;
                }
        }
        m->gpu_demand = gpu;
        m->cpu_per_milli = gpu > 0 ? cpu / gpu : 0;
        m->mem_per_milli = gpu > 0 ? mem / gpu : 0;
        /* The shares that occur, compacted, and their total weight. */
        uint32_t share[GS_CP_MILLI_PER_GPU + 1];
        double w[GS_CP_MILLI_PER_GPU + 1], wt = 0;
        size_t n = 0;
        for (uint32_t f = 1; f <= GS_CP_MILLI_PER_GPU; f++)
                if (by_share[f] > 0) {
                        share[n] = f;
                        w[n++] = by_share[f];
                        wt += by_share[f];
                }
        const double gamma = CP_LEFTOVER_GAMMA;
        for (uint32_t f = 0; f <= GS_CP_MILLI_PER_GPU; f++) {
                /* leftover[f] = (1 - gamma) f + gamma (sum over fitting
                 * shares of p leftover[f - s] + (1 - p_fit) leftover[f]),
                 * solved for leftover[f]. */
                double acc = 0, ws = 0;
                for (size_t k = 0; k < n && share[k] <= f; k++) {
                        acc += w[k] * m->leftover[f - share[k]];
                        ws += w[k];
                }
                double p_fit = wt > 0 ? ws / wt : 0;
                double fill = wt > 0 ? acc / wt : 0;
                m->leftover[f] = ((1 - gamma) * (double)f + gamma * fill) / (1 - gamma * (1 - p_fit));
        }
        m->leftover_count = m->count;
}
