/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster placement: fits (shares, memory, whole GPUs on one node, models,
 * CPU and memory), each policy's choice on small hand-made nodes, commit,
 * the workload model (typical pods, out of memory). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "cluster_placement.h"
#include "placement.h"

#define GiB (1ull << 30)

/* A node of n GPUs with the given free shares, untracked CPU and memory. */
static struct gs_cp_node node(const char *model, unsigned n, const uint32_t *free)
{
        struct gs_cp_node x = { .n_gpus = n,
                                .free_cpu_milli = GS_CP_UNTRACKED,
                                .free_host_memory = GS_CP_UNTRACKED,
                                .total_cpu_milli = GS_CP_UNTRACKED,
                                .total_host_memory = GS_CP_UNTRACKED };
        snprintf(x.model, sizeof(x.model), "%s", model);
        for (unsigned i = 0; i < n; i++)
                x.gpus[i] = (struct gs_cp_gpu){ .free_milli = free[i] };
        return x;
}

static struct gs_cp_pod share(uint32_t milli)
{
        return (struct gs_cp_pod){ .milli = milli, .n_gpus = 1 };
}

static void policy_names(void **state)
{
        (void)state;
        enum gs_cp_policy p;
        static const char *const names[] = { "first-fit", "best-fit", "fgd", "gpuslice" };
        for (unsigned i = 0; i < 4; i++) {
                assert_int_equal(gs_cp_policy_parse(names[i], &p), 0);
                assert_int_equal(p, i);
                assert_string_equal(gs_cp_policy_name(p), names[i]);
        }
        assert_int_equal(gs_cp_policy_parse("binpack", &p), -EINVAL);
        assert_int_equal(gs_cp_policy_parse(NULL, &p), -EINVAL);
        assert_string_equal(gs_cp_policy_name((enum gs_cp_policy)9), "?");
}

static void fits_share_and_memory(void **state)
{
        (void)state;
        struct gs_cp_node n = node("T4", 2, (uint32_t[]){ 300, 600 });
        struct gs_cp_pod p = share(600);
        assert_true(gs_cp_fits(&n, &p));
        p.milli = 601;
        assert_false(gs_cp_fits(&n, &p));        /* 900 free in all, 600 at most on one GPU */
        /* GPU memory: checked where the node knows it. */
        n.gpus[1].total_memory = 16 * GiB;
        n.gpus[1].free_memory = 4 * GiB;
        p = share(500);
        p.gpu_memory = 6 * GiB;
        assert_false(gs_cp_fits(&n, &p));
        n.gpus[1].free_memory = 6 * GiB;
        assert_true(gs_cp_fits(&n, &p));
        n.gpus[1].total_memory = 0;              /* unknown: not checked */
        n.gpus[1].free_memory = 0;
        assert_true(gs_cp_fits(&n, &p));
        /* Bad pods never fit. */
        p = share(0);
        assert_false(gs_cp_fits(&n, &p));
        p = share(1001);
        assert_false(gs_cp_fits(&n, &p));
}

static void fits_whole_gpus_on_one_node(void **state)
{
        (void)state;
        struct gs_cp_node n = node("G2", 4, (uint32_t[]){ 1000, 1000, 999, 1000 });
        struct gs_cp_pod p = { .n_gpus = 3 };
        assert_true(gs_cp_fits(&n, &p));
        p.n_gpus = 4;                            /* GPU 2 holds a share */
        assert_false(gs_cp_fits(&n, &p));
        p = share(1000);                         /* one whole GPU */
        n = node("G2", 2, (uint32_t[]){ 999, 999 });
        assert_false(gs_cp_fits(&n, &p));
        p = (struct gs_cp_pod){ .n_gpus = GS_CP_MAX_GPUS + 1 };
        assert_false(gs_cp_fits(&n, &p));
}

static void fits_models_cpu_memory(void **state)
{
        (void)state;
        struct gs_cp_node n = node("V100M32", 1, (uint32_t[]){ 1000 });
        struct gs_cp_pod p = share(500);
        p.models = "V100M16|V100M32";
        assert_true(gs_cp_fits(&n, &p));
        p.models = "V100M16|T4";
        assert_false(gs_cp_fits(&n, &p));
        p.models = "V100M3";                     /* a prefix is not the model */
        assert_false(gs_cp_fits(&n, &p));
        p.models = "";
        assert_true(gs_cp_fits(&n, &p));
        struct gs_cp_node unknown = node("", 1, (uint32_t[]){ 1000 });
        p.models = "T4";
        assert_false(gs_cp_fits(&unknown, &p));
        p.models = NULL;
        assert_true(gs_cp_fits(&unknown, &p));
        /* CPU and host memory where tracked. */
        n.free_cpu_milli = 4000;
        n.free_host_memory = 8 * GiB;
        p.cpu_milli = 4000;
        p.host_memory = 8 * GiB;
        assert_true(gs_cp_fits(&n, &p));
        p.cpu_milli = 4001;
        assert_false(gs_cp_fits(&n, &p));
        p.cpu_milli = 1000;
        p.host_memory = 8 * GiB + 1;
        assert_false(gs_cp_fits(&n, &p));
        /* A CPU-only pod needs no GPU, and ignores models. */
        struct gs_cp_pod cpu = { .n_gpus = 0, .cpu_milli = 2000, .models = "T4" };
        struct gs_cp_node full = node("G2", 1, (uint32_t[]){ 0 });
        full.free_cpu_milli = 2000;
        assert_true(gs_cp_fits(&full, &cpu));
}

static void score_errors_leave_outputs(void **state)
{
        (void)state;
        struct gs_cp_node n = node("T4", 1, (uint32_t[]){ 200 });
        struct gs_cp_pod p = share(300);
        struct gs_cp_choice c = { .n = 7 };
        double s = -5;
        for (unsigned pol = 0; pol < GS_CP_N_POLICIES; pol++) {
                assert_int_equal(gs_cp_score((enum gs_cp_policy)pol, NULL, &n, &p, &c, &s), -ENOSPC);
                assert_int_equal(c.n, 7);
                assert_true(s == -5);
        }
        p = share(0);
        assert_int_equal(gs_cp_score(GS_CP_FGD, NULL, &n, &p, &c, &s), -EINVAL);
        p = share(100);
        assert_int_equal(gs_cp_score((enum gs_cp_policy)7, NULL, &n, &p, &c, &s), -EINVAL);
        assert_int_equal(gs_cp_score(GS_CP_FGD, NULL, &n, &p, NULL, NULL), 0);
}

static void first_and_best_fit(void **state)
{
        (void)state;
        struct gs_cp_node n = node("T4", 3, (uint32_t[]){ 200, 1000, 500 });
        struct gs_cp_pod p = share(400);
        struct gs_cp_choice c;
        double s;
        assert_int_equal(gs_cp_score(GS_CP_FIRST_FIT, NULL, &n, &p, &c, &s), 0);
        assert_int_equal(c.n, 1);
        assert_int_equal(c.gpus[0], 1);          /* first GPU with room */
        assert_true(s == 100);
        assert_int_equal(gs_cp_score(GS_CP_BEST_FIT, NULL, &n, &p, &c, &s), 0);
        assert_int_equal(c.gpus[0], 2);          /* least free share that fits */
        /* Best-fit prefers the node left with less. */
        struct gs_cp_node fuller = node("T4", 3, (uint32_t[]){ 0, 0, 500 });
        double s_full;
        assert_int_equal(gs_cp_score(GS_CP_BEST_FIT, NULL, &fuller, &p, &c, &s_full), 0);
        assert_true(s_full > s);
        assert_true(s >= 0 && s_full <= 100);
        /* Whole GPUs: the first fully free ones. */
        struct gs_cp_node w = node("G2", 4, (uint32_t[]){ 1000, 300, 1000, 1000 });
        struct gs_cp_pod two = { .n_gpus = 2 };
        assert_int_equal(gs_cp_score(GS_CP_BEST_FIT, NULL, &w, &two, &c, &s), 0);
        assert_int_equal(c.n, 2);
        assert_int_equal(c.gpus[0], 0);
        assert_int_equal(c.gpus[1], 2);
}

/* A model of `count` pods of each share in shares[] (0-terminated). */
static struct gs_cp_model *model_of(const uint32_t *shares, unsigned count, uint64_t cpu)
{
        struct gs_cp_model *m = gs_cp_model_new();
        assert_non_null(m);
        for (; *shares; shares++)
                for (unsigned i = 0; i < count; i++) {
                        struct gs_cp_pod p = share(*shares);
                        p.cpu_milli = cpu;
                        assert_int_equal(gs_cp_model_observe(m, &p), 0);
                }
        return m;
}

static void fgd_minimises_fragmentation(void **state)
{
        (void)state;
        struct gs_cp_model *m = model_of((uint32_t[]){ 500, 0 }, 10, 0);
        assert_int_equal(gs_cp_model_count(m), 10);
        struct gs_cp_node n = node("T4", 2, (uint32_t[]){ 1000, 600 });
        struct gs_cp_pod p = share(500);
        struct gs_cp_choice c;
        double s;
        /* GPU 1 would keep 100m that no 500m pod can use; GPU 0 keeps 500m. */
        assert_int_equal(gs_cp_score(GS_CP_FGD, m, &n, &p, &c, &s), 0);
        assert_int_equal(c.gpus[0], 0);
        assert_int_equal(gs_cp_score(GS_CP_BEST_FIT, m, &n, &p, &c, &s), 0);
        assert_int_equal(c.gpus[0], 1);
        /* Fragmentation as FGD defines it. */
        assert_true(gs_cp_node_frag(m, &n) == 0);
        n.gpus[1].free_milli = 100;
        assert_true(gs_cp_node_frag(m, &n) == 100);
        /* A node where the pod adds no fragment scores above one where it does. */
        struct gs_cp_node a = node("T4", 1, (uint32_t[]){ 1000 });
        struct gs_cp_node b = node("T4", 1, (uint32_t[]){ 600 });
        double sa, sb;
        assert_int_equal(gs_cp_score(GS_CP_FGD, m, &a, &p, NULL, &sa), 0);
        assert_int_equal(gs_cp_score(GS_CP_FGD, m, &b, &p, NULL, &sb), 0);
        assert_true(sa > sb);
        gs_cp_model_free(m);
}

static void gpuslice_opens_fresh_gpu(void **state)
{
        (void)state;
        /* Pods of 600m and 400m: a 400m pod on the 600m GPU leaves 200m
         * that nothing fits; on the fresh GPU it leaves 600m, which a 600m
         * pod fills. */
        struct gs_cp_model *m = model_of((uint32_t[]){ 600, 400, 0 }, 50, 0);
        struct gs_cp_node n = node("T4", 2, (uint32_t[]){ 1000, 600 });
        struct gs_cp_pod p = share(400);
        struct gs_cp_choice c;
        assert_int_equal(gs_cp_score(GS_CP_GPUSLICE, m, &n, &p, &c, NULL), 0);
        assert_int_equal(c.gpus[0], 0);
        /* And a 600m pod takes the 600m GPU exactly. */
        p = share(600);
        assert_int_equal(gs_cp_score(GS_CP_GPUSLICE, m, &n, &p, &c, NULL), 0);
        assert_int_equal(c.gpus[0], 1);
        /* An empty model is valid (uniform shares). */
        struct gs_cp_model *empty = gs_cp_model_new();
        assert_int_equal(gs_cp_score(GS_CP_GPUSLICE, empty, &n, &p, &c, NULL), 0);
        assert_int_equal(gs_cp_score(GS_CP_GPUSLICE, NULL, &n, &p, &c, NULL), 0);
        gs_cp_model_free(empty);
        gs_cp_model_free(m);
}

static void gpuslice_counts_stranded_cpu(void **state)
{
        (void)state;
        /* Whole-GPU pods with 10 cores each: a CPU-only pod of 10 cores
         * strands a GPU on the node with 20 cores, none on the one with 40. */
        struct gs_cp_model *m = model_of((uint32_t[]){ 1000, 0 }, 10, 10000);
        struct gs_cp_node tight = node("G2", 2, (uint32_t[]){ 1000, 1000 });
        struct gs_cp_node roomy = tight;
        tight.free_cpu_milli = tight.total_cpu_milli = 20000;
        roomy.free_cpu_milli = roomy.total_cpu_milli = 40000;
        struct gs_cp_pod cpu = { .n_gpus = 0, .cpu_milli = 10000 };
        double st, sr;
        assert_int_equal(gs_cp_score(GS_CP_GPUSLICE, m, &tight, &cpu, NULL, &st), 0);
        assert_int_equal(gs_cp_score(GS_CP_GPUSLICE, m, &roomy, &cpu, NULL, &sr), 0);
        assert_true(sr > st);
        /* Ties go to the fuller node: same loss, less GPU left. */
        struct gs_cp_node empty = node("G2", 2, (uint32_t[]){ 1000, 1000 });
        struct gs_cp_node half = node("G2", 2, (uint32_t[]){ 0, 1000 });
        struct gs_cp_pod one = share(1000);
        double se, sh;
        assert_int_equal(gs_cp_score(GS_CP_GPUSLICE, m, &empty, &one, NULL, &se), 0);
        assert_int_equal(gs_cp_score(GS_CP_GPUSLICE, m, &half, &one, NULL, &sh), 0);
        assert_true(sh > se);
        gs_cp_model_free(m);
}

static void commit_charges(void **state)
{
        (void)state;
        struct gs_cp_node n = node("T4", 2, (uint32_t[]){ 1000, 1000 });
        n.gpus[0].total_memory = n.gpus[0].free_memory = 16 * GiB;
        n.gpus[1].total_memory = n.gpus[1].free_memory = 16 * GiB;
        n.free_cpu_milli = n.total_cpu_milli = 8000;
        struct gs_cp_pod p = share(300);
        p.gpu_memory = 4 * GiB;
        p.cpu_milli = 3000;
        p.host_memory = GiB;                     /* host memory untracked on n */
        struct gs_cp_choice c = { .n = 1, .gpus = { 1 } };
        gs_cp_commit(&n, &p, &c);
        assert_int_equal(n.gpus[1].free_milli, 700);
        assert_int_equal(n.gpus[1].free_memory, 12 * GiB);
        assert_int_equal(n.gpus[0].free_milli, 1000);
        assert_int_equal(n.free_cpu_milli, 5000);
        assert_true(n.free_host_memory == GS_CP_UNTRACKED);
        /* A whole GPU takes all of it; CPU saturates at 0. */
        struct gs_cp_pod w = share(1000);
        w.cpu_milli = 9000;
        c.gpus[0] = 0;
        gs_cp_commit(&n, &w, &c);
        assert_int_equal(n.gpus[0].free_milli, 0);
        assert_int_equal(n.gpus[0].free_memory, 0);
        assert_int_equal(n.free_cpu_milli, 0);
        /* What score chose, commit charges: the same node no longer fits. */
        struct gs_cp_node one = node("T4", 1, (uint32_t[]){ 500 });
        struct gs_cp_pod half = share(500);
        struct gs_cp_choice got;
        assert_int_equal(gs_cp_score(GS_CP_GPUSLICE, NULL, &one, &half, &got, NULL), 0);
        gs_cp_commit(&one, &half, &got);
        assert_false(gs_cp_fits(&one, &half));
}

static void model_typical_pods_and_oom(void **state)
{
        (void)state;
        struct gs_cp_model *m = model_of((uint32_t[]){ 500, 0 }, 19, 0);
        struct gs_cp_pod rare = share(200);
        assert_int_equal(gs_cp_model_observe(m, &rare), 0);
        struct gs_cp_node n = node("T4", 1, (uint32_t[]){ 300 });
        /* 300m free: a fragment for 500m pods (19 of 20), not for 200m. */
        assert_true(gs_cp_node_frag(m, &n) > 284.9 && gs_cp_node_frag(m, &n) < 285.1);
        gs_cp_model_keep_popular(m, 0.95);       /* 500m alone is 95% */
        assert_true(gs_cp_node_frag(m, &n) == 300);
        /* Out of memory: -ENOMEM and the model unchanged. */
        uint64_t before = gs_cp_model_count(m);
        struct gs_cp_pod novel = share(123);
        novel.models = "A10";
        gs_alloc_fail_after(0);
        assert_int_equal(gs_cp_model_observe(m, &novel), -ENOMEM);
        gs_alloc_fail_after(-1);
        assert_int_equal(gs_cp_model_count(m), before);
        assert_null(gs_cp_model_free(m));
        assert_null(gs_cp_model_free(NULL));
        assert_int_equal(gs_cp_model_count(NULL), 0);
}

/* The node's gs_place with policy gpuslice takes the cluster policy's GPU;
 * binpack is unchanged. */
static void node_place_gpuslice(void **state)
{
        (void)state;
        struct gs_inventory inv;
        memset(&inv, 0, sizeof(inv));
        inv.n_gpus = 2;
        for (unsigned i = 0; i < 2; i++) {
                inv.gpus[i].index = i;
                snprintf(inv.gpus[i].uuid, sizeof(inv.gpus[i].uuid), "GPU-%u", i);
                inv.gpus[i].memory_total = 10 * GiB;
                inv.gpus[i].healthy = true;
        }
        struct gs_gpu_usage usage[2] = { { .free_milli = 1000, .free_memory = 10 * GiB },
                                         { .free_milli = 600, .free_memory = 6 * GiB, .n_slices = 1 } };
        struct gs_cp_model *m = model_of((uint32_t[]){ 600, 400, 0 }, 50, 0);
        struct gs_placement_request req = { .milli = 400, .memory = GiB, .model = m };
        struct gs_placement p;
        assert_int_equal(gs_place(&inv, usage, GS_PLACE_BINPACK, &req, &p, NULL), 0);
        assert_int_equal(p.gpus[0], 1);
        assert_int_equal(gs_place(&inv, usage, GS_PLACE_GPUSLICE, &req, &p, NULL), 0);
        assert_int_equal(p.gpus[0], 0);
        assert_int_equal(p.memory_cap, GiB);
        /* A preferred GPU that fits still wins. */
        req.prefer = true;
        req.preferred_gpu = 1;
        assert_int_equal(gs_place(&inv, usage, GS_PLACE_GPUSLICE, &req, &p, NULL), 0);
        assert_int_equal(p.gpus[0], 1);
        /* Only GPUs that fit are chosen (GPU 0 excluded by the hint mask). */
        req = (struct gs_placement_request){ .milli = 400, .memory = GiB, .model = m, .allowed = 2 };
        assert_int_equal(gs_place(&inv, usage, GS_PLACE_GPUSLICE, &req, &p, NULL), 0);
        assert_int_equal(p.gpus[0], 1);
        enum gs_placement_policy pol;
        assert_int_equal(gs_placement_policy_parse("gpuslice", &pol, NULL), 0);
        assert_int_equal(pol, GS_PLACE_GPUSLICE);
        assert_string_equal(gs_placement_policy_name(pol), "gpuslice");
        gs_cp_model_free(m);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(policy_names),
                cmocka_unit_test(fits_share_and_memory),
                cmocka_unit_test(fits_whole_gpus_on_one_node),
                cmocka_unit_test(fits_models_cpu_memory),
                cmocka_unit_test(score_errors_leave_outputs),
                cmocka_unit_test(first_and_best_fit),
                cmocka_unit_test(fgd_minimises_fragmentation),
                cmocka_unit_test(gpuslice_opens_fresh_gpu),
                cmocka_unit_test(gpuslice_counts_stranded_cpu),
                cmocka_unit_test(commit_charges),
                cmocka_unit_test(model_typical_pods_and_oom),
                cmocka_unit_test(node_place_gpuslice),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
