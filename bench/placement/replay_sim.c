/* SPDX-License-Identifier: Apache-2.0 */
/* One replay of the placement benchmark. See replay_sim.h. */
#include "replay_sim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* splitmix64: small, seedable, the same on every machine. */
static uint64_t rng_next(uint64_t *s)
{
        uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

static size_t rng_below(uint64_t *s, size_t n)
{
        return (size_t)(rng_next(s) % n);
}

static uint64_t cpu_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t sim_capacity(const struct trace_node *nodes, size_t n)
{
        uint64_t c = 0;
        for (size_t i = 0; i < n; i++)
                c += (uint64_t)nodes[i].n_gpus * GS_CP_MILLI_PER_GPU;
        return c;
}

static uint64_t pod_demand(const struct trace_pod *p)
{
        return (uint64_t)p->n_gpus * p->gpu_milli;
}

void sim_pod_of(const struct trace_pod *p, struct gs_cp_pod *ret)
{
        *ret = (struct gs_cp_pod){
                .milli = p->n_gpus == 1 ? p->gpu_milli : GS_CP_MILLI_PER_GPU,
                .n_gpus = p->n_gpus,
                .cpu_milli = p->cpu_milli,
                .host_memory = p->memory_mib << 20,
                .models = p->spec[0] ? p->spec : NULL,
        };
}

/* The arrival order for one seed: indices into c->pods. */
static int workload(const struct sim_config *c, uint64_t seed, size_t **ret, size_t *ret_n)
{
        uint64_t rng = seed;
        uint64_t target = (uint64_t)(c->tune * (double)sim_capacity(c->nodes, c->n_nodes));
        uint64_t total = 0;
        for (size_t i = 0; i < c->n_pods; i++)
                total += pod_demand(&c->pods[i]);
        size_t cap = c->n_pods + 16, n = c->n_pods;
        size_t *order = malloc(cap * sizeof(*order));
        if (!order)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                order[i] = i;
        /* Over the target: remove originals at random until at or below it. */
        while (total > target && n > 0) {
                size_t k = rng_below(&rng, n);
                total -= pod_demand(&c->pods[order[k]]);
                order[k] = order[--n];
        }
        /* Shuffle the originals (Fisher-Yates). */
        for (size_t i = n; i > 1; i--) {
                size_t k = rng_below(&rng, i);
                size_t t = order[i - 1];
                order[i - 1] = order[k];
                order[k] = t;
        }
        /* Under the target: copies drawn with replacement, appended, until
         * the first whose per-GPU share would pass it. */
        while (c->n_pods > 0) {
                size_t k = rng_below(&rng, c->n_pods);
                if (total + c->pods[k].gpu_milli > target)
                        break;
                if (n == cap) {
                        size_t *o = realloc(order, 2 * cap * sizeof(*o));
                        if (!o) {
                                free(order);
                                return -ENOMEM;
                        }
                        order = o;
                        cap *= 2;
                }
                order[n++] = k;
                total += pod_demand(&c->pods[k]);
        }
        *ret = order;
        *ret_n = n;
        return 0;
}

static struct gs_cp_node *nodes_new(const struct sim_config *c)
{
        struct gs_cp_node *nodes = calloc(c->n_nodes ? c->n_nodes : 1, sizeof(*nodes));
        if (!nodes)
                return NULL;
        for (size_t i = 0; i < c->n_nodes; i++) {
                const struct trace_node *t = &c->nodes[i];
                struct gs_cp_node *n = &nodes[i];
                memcpy(n->model, t->model, sizeof(n->model));
                n->n_gpus = t->n_gpus;
                for (unsigned g = 0; g < t->n_gpus; g++)
                        n->gpus[g].free_milli = GS_CP_MILLI_PER_GPU;
                n->free_cpu_milli = n->total_cpu_milli = t->cpu_milli;
                n->free_host_memory = n->total_host_memory = t->memory_mib << 20;
        }
        return nodes;
}

static double cluster_frag(const struct gs_cp_model *m, const struct gs_cp_node *nodes, size_t n)
{
        double f = 0;
        for (size_t i = 0; i < n; i++)
                f += gs_cp_node_frag(m, &nodes[i]);
        return f;
}

/* Filter + prioritize: the best-scoring node for p (ties: lower index), or
 * -1 when it fits nowhere. */
static long pick_node(enum gs_cp_policy pol, const struct gs_cp_model *m,
                      const struct gs_cp_node *nodes, size_t n, const struct gs_cp_pod *p,
                      struct gs_cp_choice *ret)
{
        long best = -1;
        double best_score = -1;
        for (size_t i = 0; i < n; i++) {
                struct gs_cp_choice c;
                double s;
                if (gs_cp_score(pol, m, &nodes[i], p, &c, &s) < 0)
                        continue;
                if (best < 0 || s > best_score) {
                        best = (long)i;
                        best_score = s;
                        *ret = c;
                        if (pol == GS_CP_FIRST_FIT)
                                break;
                }
        }
        return best;
}

int sim_run(const struct sim_config *c, enum gs_cp_policy pol, uint64_t seed, bool time_scores,
            struct sim_result *ret)
{
        uint64_t t0 = cpu_ns();
        size_t *order = NULL, n_order = 0;
        int r = workload(c, seed, &order, &n_order);
        if (r < 0)
                return r;
        struct gs_cp_node *nodes = nodes_new(c);
        struct gs_cp_model *learned = pol == GS_CP_GPUSLICE ? gs_cp_model_new() : NULL;
        uint64_t *ns = time_scores ? calloc(n_order + 1, sizeof(*ns)) : NULL;
        if (!nodes || (pol == GS_CP_GPUSLICE && !learned) || (time_scores && !ns)) {
                r = -ENOMEM;
                goto out;
        }
        const struct gs_cp_model *m = pol == GS_CP_GPUSLICE ? learned : c->given;
        struct sim_result res = { .n_curve = 0 };
        double cap = (double)sim_capacity(c->nodes, c->n_nodes);
        uint64_t arrived = 0, allocated = 0;
        bool at_100 = false;
        for (size_t i = 0; i < n_order; i++) {
                const struct trace_pod *tp = &c->pods[order[i]];
                struct gs_cp_pod p;
                sim_pod_of(tp, &p);
                if (learned && gs_cp_model_observe(learned, &p) < 0) {
                        r = -ENOMEM;
                        goto out;
                }
                struct gs_cp_choice choice;
                uint64_t s0 = time_scores ? cpu_ns() : 0;
                long k = pick_node(pol, m, nodes, c->n_nodes, &p, &choice);
                if (time_scores)
                        ns[res.n_score++] = cpu_ns() - s0;
                res.n_arrived++;
                arrived += pod_demand(tp);
                if (k < 0) {
                        res.n_failed++;
                } else {
                        gs_cp_commit(&nodes[k], &p, &choice);
                        allocated += pod_demand(tp);
                }
                double arrived_pct = 100.0 * (double)arrived / cap;
                double alloc_pct = 100.0 * (double)allocated / cap;
                while (res.n_curve < SIM_CURVE_POINTS && (double)res.n_curve <= arrived_pct)
                        res.curve[res.n_curve++] = alloc_pct;
                if (!at_100 && arrived_pct >= 100.0) {
                        at_100 = true;
                        res.alloc_at_100 = alloc_pct;
                        res.frag_at_100 = 100.0 * cluster_frag(c->given, nodes, c->n_nodes) / cap;
                }
                if (alloc_pct > res.alloc_max)
                        res.alloc_max = alloc_pct;
        }
        if (!at_100) {
                res.alloc_at_100 = res.alloc_max;
                res.frag_at_100 = 100.0 * cluster_frag(c->given, nodes, c->n_nodes) / cap;
        }
        res.seconds = (double)(cpu_ns() - t0) / 1e9;
        res.score_ns = ns;
        ns = NULL;
        *ret = res;
        r = 0;
out:
        free(ns);
        gs_cp_model_free(learned);
        free(nodes);
        free(order);
        return r;
}
