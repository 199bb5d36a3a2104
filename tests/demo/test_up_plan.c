/* SPDX-License-Identifier: Apache-2.0 */
/* The fit check of `gpuslice up` (src/cli/up_plan.c): a spec is placed as a
 * whole before anything starts, and a refusal names the API and what each
 * GPU would be short of. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "up_plan.h"

static struct gs_inventory one_gpu(unsigned n)
{
        struct gs_inventory inv = { .n_gpus = n };

        for (unsigned i = 0; i < n; i++) {
                inv.gpus[i] = (struct gs_gpu){ .index = i, .memory_total = 16ull << 30,
                                               .healthy = true,
                                               .context_overhead = 256ull << 20 };
                snprintf(inv.gpus[i].uuid, sizeof(inv.gpus[i].uuid), "GPU-sim-%u", i);
                snprintf(inv.gpus[i].name, sizeof(inv.gpus[i].name), "Sim GPU");
        }
        return inv;
}

/* One fit check's world: the GPUs, what is already placed on them (nothing
 * unless a test says so) and the refusal message of the last check. */
struct plan {
        struct gs_inventory inv;
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        char msg[4096];
};

static void plan_init(struct plan *p, unsigned n_gpus)
{
        struct gs_ledger l;

        p->inv = one_gpu(n_gpus);
        gs_ledger_init(&l);
        gs_placement_usage(&p->inv, &l, p->usage);
        gs_ledger_done(&l);
        p->msg[0] = '\0';
}

static struct gs_spec *spec_of(const char *yaml)
{
        struct gs_spec *spec = NULL;
        struct gs_error *err = NULL;

        if (gs_spec_load_buffer("test.yaml", yaml, strlen(yaml), &spec, &err) < 0)
                fail_msg("spec: %s", gs_error_msg(err));
        return spec;
}

static int check(struct plan *p, const char *yaml)
{
        struct gs_spec *spec = spec_of(yaml);
        struct gs_error *err = NULL;
        int r = up_plan_check(&p->inv, p->usage, GS_PLACE_BINPACK, spec, &err);

        snprintf(p->msg, sizeof(p->msg), "%s", err ? gs_error_msg(err) : "");
        gs_error_free(err);
        gs_spec_free(spec);
        return r;
}

static void test_example_spec_fits(void **state)
{
        struct plan p;

        (void)state;
        plan_init(&p, 1);
        assert_int_equal(check(&p,
                               "- {name: a, command: [x], compute: {gpu: 100m, gpu_memory: 1536Mi}}\n"
                               "- {name: b, command: [x], compute: {gpu: 300m, gpu_memory: 3Gi}}\n"
                               "- {name: c, command: [x], compute: {gpu: 600m, gpu_memory: 6Gi}}\n"),
                         0);
        assert_int_equal(p.usage[0].free_milli, 1000); /* the check changes nothing */
}

static void test_share_short(void **state)
{
        struct plan p;

        (void)state;
        plan_init(&p, 1);
        assert_int_equal(check(&p,
                               "- {name: a, command: [x], compute: {gpu: 600m, gpu_memory: 1Gi}}\n"
                               "- {name: big, command: [x], compute: {gpu: 600m, gpu_memory: 1Gi}}\n"),
                         -ENOSPC);
        assert_non_null(strstr(p.msg, "API big"));
        assert_non_null(strstr(p.msg, "GPU 0"));
        assert_non_null(strstr(p.msg, "short of 200m share (400m free)"));
        assert_null(strstr(p.msg, "memory ("));
}

static void test_memory_short(void **state)
{
        struct plan p;

        (void)state;
        plan_init(&p, 2);
        assert_int_equal(check(&p,
                               "- {name: a, command: [x], compute: {gpu: 100m, gpu_memory: 12Gi}}\n"
                               "- {name: b, command: [x], compute: {gpu: 100m, gpu_memory: 12Gi}}\n"
                               "- {name: c, command: [x], compute: {gpu: 100m, gpu_memory: 8Gi}}\n"),
                         -ENOSPC);
        assert_non_null(strstr(p.msg, "API c"));
        assert_non_null(strstr(p.msg, "GPU 0"));
        assert_non_null(strstr(p.msg, "GPU 1"));
        assert_non_null(strstr(p.msg, "short of 4.0Gi memory (4.0Gi free)"));
}

static void test_existing_slices_count(void **state)
{
        struct plan p;

        (void)state;
        plan_init(&p, 1);
        p.usage[0].free_milli = 500;
        p.usage[0].n_slices = 1;
        assert_int_equal(check(&p,
                               "- {name: a, command: [x], compute: {gpu: 600m, gpu_memory: 1Gi}}\n"),
                         -ENOSPC);
        assert_non_null(strstr(p.msg, "short of 100m share (500m free)"));
        assert_int_equal(check(&p, "- {name: w, command: [x], compute: {gpu: 1}}\n"), -ENOSPC);
        assert_non_null(strstr(p.msg, "holds slices"));
}

static void test_never_fits(void **state)
{
        struct plan p;

        (void)state;
        plan_init(&p, 1);
        assert_int_equal(check(&p,
                               "- {name: a, command: [x], compute: {gpu: 100m, gpu_memory: 20Gi}}\n"),
                         -EINVAL);
        assert_non_null(strstr(p.msg, "can never fit"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_example_spec_fits),
                cmocka_unit_test(test_share_short),
                cmocka_unit_test(test_memory_short),
                cmocka_unit_test(test_existing_slices_count),
                cmocka_unit_test(test_never_fits),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
