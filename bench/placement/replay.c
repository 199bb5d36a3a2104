/* SPDX-License-Identifier: Apache-2.0 */
/* gs-placement-replay: the placement benchmark (bench/run-placement.sh).
 *
 *   gs-placement-replay --nodes NODES.csv --pods PODS.csv [--label NAME]
 *       [--policies first-fit,best-fit,fgd,gpuslice] [--seeds 42-51]
 *       [--tune 1.3] [--published-fgd PCT] [--published-best-fit PCT]
 *       [--curve FILE] [--timing]
 *
 * Replays the pod list on the node list with each policy and seed (see
 * replay_sim.h) and prints, per policy, the GPU allocation ratio when the
 * arrived demand reached 100% of capacity and the highest ratio reached
 * (mean [min-max] over the seeds), the fragmentation at 100% and the CPU
 * time of the replays; with published figures, a VERDICT line for
 * "gpuslice's highest ratio >= FGD's published figure + 0.5 points".
 * --curve writes the mean allocation ratio against arrived demand per
 * policy (gnuplot data); --timing times filter + prioritize over every node
 * for each pod of the first gpuslice replay (p50/p99 of thread CPU time). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_placement.h"
#include "number.h"
#include "replay_sim.h"
#include "trace.h"

#define MAX_SEEDS 64

struct options {
        const char *nodes, *pods, *label, *curve;
        bool policies[GS_CP_N_POLICIES];
        uint64_t seed_lo, seed_hi;
        double tune;
        double published[GS_CP_N_POLICIES];   /* < 0: none */
        bool timing;
};

struct summary {
        double at100[MAX_SEEDS], max[MAX_SEEDS], frag[MAX_SEEDS];
        double curve[SIM_CURVE_POINTS];
        size_t n_curve;
        size_t n, failed, arrived;
        double seconds;
};

static int usage(void)
{
        fprintf(stderr, "usage: gs-placement-replay --nodes NODES.csv --pods PODS.csv [--label NAME]\n"
                        "  [--policies first-fit,best-fit,fgd,gpuslice] [--seeds 42-51] [--tune 1.3]\n"
                        "  [--published-fgd PCT] [--published-best-fit PCT] [--curve FILE] [--timing]\n");
        return 2;
}

/* "95.4" -> 95.4, through core's decimal parser (thousandths). */
static int parse_pct(const char *s, double *ret)
{
        uint64_t milli;
        if (gs_decimal_milli_parse_str(s, 1000000, &milli) < 0)
                return -EINVAL;
        *ret = (double)milli / 1000.0;
        return 0;
}

static int parse_policies(char *s, bool *on)
{
        memset(on, 0, GS_CP_N_POLICIES * sizeof(*on));
        char *save = NULL;
        for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                enum gs_cp_policy p;
                if (gs_cp_policy_parse(t, &p) < 0)
                        return -EINVAL;
                on[p] = true;
        }
        return 0;
}

static int parse_seeds(const char *s, uint64_t *lo, uint64_t *hi)
{
        const char *dash = strchr(s, '-');
        if (!dash)
                return gs_u64_parse_str(s, UINT32_MAX, lo) < 0 ? -EINVAL : (*hi = *lo, 0);
        if (gs_u64_parse(s, (size_t)(dash - s), UINT32_MAX, lo) < 0 ||
            gs_u64_parse_str(dash + 1, UINT32_MAX, hi) < 0 || *hi < *lo ||
            *hi - *lo >= MAX_SEEDS)
                return -EINVAL;
        return 0;
}

static int parse_args(int argc, char **argv, struct options *o)
{
        *o = (struct options){ .seed_lo = 42, .seed_hi = 51, .tune = 1.3, .label = "pods" };
        for (unsigned i = 0; i < GS_CP_N_POLICIES; i++) {
                o->policies[i] = true;
                o->published[i] = -1;
        }
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                const char *v = i + 1 < argc ? argv[i + 1] : NULL;
                int r = 0;
                if (strcmp(a, "--timing") == 0) {
                        o->timing = true;
                        continue;
                }
                if (!v)
                        return -EINVAL;
                i++;
                if (strcmp(a, "--nodes") == 0)
                        o->nodes = v;
                else if (strcmp(a, "--pods") == 0)
                        o->pods = v;
                else if (strcmp(a, "--label") == 0)
                        o->label = v;
                else if (strcmp(a, "--curve") == 0)
                        o->curve = v;
                else if (strcmp(a, "--policies") == 0)
                        r = parse_policies(argv[i], o->policies);
                else if (strcmp(a, "--seeds") == 0)
                        r = parse_seeds(v, &o->seed_lo, &o->seed_hi);
                else if (strcmp(a, "--tune") == 0) {
                        double t;
                        r = parse_pct(v, &t);
                        o->tune = t;
                } else if (strcmp(a, "--published-fgd") == 0)
                        r = parse_pct(v, &o->published[GS_CP_FGD]);
                else if (strcmp(a, "--published-best-fit") == 0)
                        r = parse_pct(v, &o->published[GS_CP_BEST_FIT]);
                else
                        r = -EINVAL;
                if (r < 0)
                        return r;
        }
        return o->nodes && o->pods && o->tune > 0 ? 0 : -EINVAL;
}

static void stats(const double *v, size_t n, double *mean, double *lo, double *hi)
{
        *mean = 0;
        *lo = n ? v[0] : 0;
        *hi = *lo;
        for (size_t i = 0; i < n; i++) {
                *mean += v[i];
                *lo = v[i] < *lo ? v[i] : *lo;
                *hi = v[i] > *hi ? v[i] : *hi;
        }
        *mean = n ? *mean / (double)n : 0;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

static void print_timing(uint64_t *ns, size_t n, size_t n_nodes)
{
        if (n == 0)
                return;
        qsort(ns, n, sizeof(*ns), cmp_u64);
        double p50 = (double)ns[n / 2] / 1e6, p99 = (double)ns[(n * 99) / 100] / 1e6;
        printf("  filter+prioritize, one pod over all %zu nodes (gpuslice, thread CPU time, %zu pods):"
               " p50 %.3f ms, p99 %.3f ms (target p99 <= 5 ms)\n",
               n_nodes, n, p50, p99);
        printf("VERDICT scoring p99 <= 5 ms: %s (%.3f ms)\n", p99 <= 5.0 ? "PASS" : "FAIL", p99);
}

static void summarise(const struct sim_result *r, struct summary *s)
{
        s->at100[s->n] = r->alloc_at_100;
        s->max[s->n] = r->alloc_max;
        s->frag[s->n] = r->frag_at_100;
        s->n++;
        s->failed += r->n_failed;
        s->arrived += r->n_arrived;
        s->seconds += r->seconds;
        if (s->n == 1 || r->n_curve < s->n_curve)
                s->n_curve = r->n_curve;
        for (size_t i = 0; i < SIM_CURVE_POINTS; i++)
                s->curve[i] += i < r->n_curve ? r->curve[i] : 0;
}

static int run_policy(const struct options *o, const struct sim_config *c, enum gs_cp_policy pol,
                      struct summary *s)
{
        memset(s, 0, sizeof(*s));
        for (uint64_t seed = o->seed_lo; seed <= o->seed_hi; seed++) {
                bool time_it = o->timing && pol == GS_CP_GPUSLICE && seed == o->seed_lo;
                struct sim_result r;
                int e = sim_run(c, pol, seed, time_it, &r);
                if (e < 0)
                        return e;
                summarise(&r, s);
                if (time_it)
                        print_timing(r.score_ns, r.n_score, c->n_nodes);
                free(r.score_ns);
        }
        return 0;
}

static void print_row(const struct options *o, enum gs_cp_policy pol, const struct summary *s)
{
        double m100, l100, h100, mmax, lmax, hmax, mf, lf, hf;
        stats(s->at100, s->n, &m100, &l100, &h100);
        stats(s->max, s->n, &mmax, &lmax, &hmax);
        stats(s->frag, s->n, &mf, &lf, &hf);
        char pub[32] = "-";
        if (o->published[pol] >= 0)
                snprintf(pub, sizeof(pub), "%.1f", o->published[pol]);
        printf("  %-10s %6.2f [%6.2f-%6.2f]  %6.2f [%6.2f-%6.2f]  %6.2f  %9s  %6.2f%%  %7.1f s\n",
               gs_cp_policy_name(pol), m100, l100, h100, mmax, lmax, hmax, mf, pub,
               s->arrived ? 100.0 * (double)s->failed / (double)s->arrived : 0.0, s->seconds);
}

static int write_curve(const char *path, const struct options *o, struct summary *s)
{
        FILE *f = fopen(path, "we");
        if (!f) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                return -errno;
        }
        fprintf(f, "# arrived_pct");
        for (unsigned p = 0; p < GS_CP_N_POLICIES; p++)
                if (o->policies[p])
                        fprintf(f, " %s", gs_cp_policy_name((enum gs_cp_policy)p));
        fprintf(f, "\n");
        size_t n = SIM_CURVE_POINTS;
        for (unsigned p = 0; p < GS_CP_N_POLICIES; p++)
                if (o->policies[p] && s[p].n_curve < n)
                        n = s[p].n_curve;
        for (size_t i = 0; i < n; i++) {
                fprintf(f, "%zu", i);
                for (unsigned p = 0; p < GS_CP_N_POLICIES; p++)
                        if (o->policies[p])
                                fprintf(f, " %.3f", s[p].curve[i] / (double)s[p].n);
                fprintf(f, "\n");
        }
        return fclose(f) == 0 ? 0 : -EIO;
}

int main(int argc, char **argv)
{
        struct options o;
        if (parse_args(argc, argv, &o) < 0)
                return usage();
        struct trace_node *nodes = NULL;
        struct trace_pod *pods = NULL;
        size_t n_nodes = 0, n_pods = 0;
        if (trace_nodes_read(o.nodes, &nodes, &n_nodes) < 0 ||
            trace_pods_read(o.pods, &pods, &n_pods) < 0)
                return 1;
        /* fgd's model: the whole pod list, its typical 95% (as its simulator). */
        struct gs_cp_model *given = gs_cp_model_new();
        for (size_t i = 0; given && i < n_pods; i++) {
                struct gs_cp_pod p;
                sim_pod_of(&pods[i], &p);
                if (gs_cp_model_observe(given, &p) < 0)
                        given = gs_cp_model_free(given);
        }
        if (!given) {
                fprintf(stderr, "out of memory\n");
                return 1;
        }
        gs_cp_model_keep_popular(given, 0.95);
        struct sim_config c = { .nodes = nodes, .n_nodes = n_nodes, .pods = pods,
                                .n_pods = n_pods, .tune = o.tune, .given = given };
        printf("list %s: %zu pods on %zu nodes, %.0f GPUs; tuned to %.0f%% of capacity; seeds %llu-%llu\n",
               o.label, n_pods, n_nodes, (double)sim_capacity(nodes, n_nodes) / 1000.0,
               100.0 * o.tune, (unsigned long long)o.seed_lo, (unsigned long long)o.seed_hi);
        printf("  %-10s %-24s  %-24s  %6s  %9s  %7s  %9s\n", "policy", "alloc% @100% arrived",
               "highest alloc%", "frag%", "published", "failed", "CPU time");
        static struct summary s[GS_CP_N_POLICIES];
        for (unsigned p = 0; p < GS_CP_N_POLICIES; p++) {
                if (!o.policies[p])
                        continue;
                if (run_policy(&o, &c, (enum gs_cp_policy)p, &s[p]) < 0) {
                        fprintf(stderr, "out of memory\n");
                        return 1;
                }
                print_row(&o, (enum gs_cp_policy)p, &s[p]);
                fflush(stdout);
        }
        for (unsigned p = 0; p < GS_CP_N_POLICIES; p++)
                if (o.policies[p]) {
                        printf("  pods arrived per replay: %zu\n", s[p].arrived / s[p].n);
                        break;
                }
        if (o.policies[GS_CP_GPUSLICE] && o.published[GS_CP_FGD] >= 0) {
                double mean, lo, hi;
                stats(s[GS_CP_GPUSLICE].max, s[GS_CP_GPUSLICE].n, &mean, &lo, &hi);
                double want = o.published[GS_CP_FGD] + 0.5;
                printf("VERDICT %s: gpuslice %.2f%% (highest allocation, mean of %zu seeds) vs FGD published"
                       " %.1f%% + 0.5 = %.1f%%: %s\n",
                       o.label, mean, s[GS_CP_GPUSLICE].n, o.published[GS_CP_FGD], want,
                       mean >= want ? "PASS" : "FAIL");
        }
        int rc = o.curve && write_curve(o.curve, &o, s) < 0 ? 1 : 0;
        gs_cp_model_free(given);
        free(nodes);
        free(pods);
        return rc;
}
