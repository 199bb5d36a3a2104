/* SPDX-License-Identifier: Apache-2.0 */
/* The contract between the two halves of the per-GPU state: what
 * gpusliced --report-node writes (kube_node_report_text, src/kube) is what
 * gpuslice-extender reads (ext_node_state_parse, src/extender), field by
 * field, so that neither side can drift alone. A test may link two
 * front-ends; the programs never do. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ext_args.h"
#include "node_report.h"

static void test_report_round_trip(void **state)
{
        (void)state;
        static struct gs_inventory inv;
        inv.n_gpus = 3;
        for (unsigned i = 0; i < inv.n_gpus; i++) {
                inv.gpus[i].index = i;
                snprintf(inv.gpus[i].uuid, sizeof(inv.gpus[i].uuid),
                         "GPU-0c5a3e9e-8f1b-4e2a-9d8e-12345678900%u", i);
                snprintf(inv.gpus[i].name, sizeof(inv.gpus[i].name), "NVIDIA H200");
                inv.gpus[i].memory_total = 150323855360ull;
                inv.gpus[i].healthy = i != 2;
                inv.gpus[i].context_overhead = 314572800ull;
        }
        struct gs_gpu_usage usage[3] = {
                { .free_milli = 600, .free_memory = 90194313216ull, .n_slices = 1 },
                { .free_milli = 1000, .free_memory = 150323855360ull },
                { .free_milli = 1000, .free_memory = 150323855360ull },
        };
        char *text = NULL;
        struct gs_error *err = NULL;
        const char *pods[] = { "0f3c2a4e-6b1d-4c8e-9a7f-2d5b8e1c4a90",
                               "7a1e9c3b-2f4d-4e6a-8b0c-5d9f1e3a7b24" };
        assert_int_equal(kube_node_report_text(&inv, usage, GS_PLACE_SPREAD, pods, 2, 1764571234567890ull,
                                               1796140800, &text, &err),
                         0);
        struct ext_node_state st;
        assert_int_equal(ext_node_state_parse(text, strlen(text), &st, &err), 0);
        assert_null(err);
        assert_int_equal(st.generation, 1764571234567890ull);
        assert_int_equal(st.time_s, 1796140800);
        assert_int_equal(st.n_gpus, 3);
        assert_int_equal(st.placement, GS_PLACE_SPREAD);
        assert_int_equal(st.gpus[0].n_slices, 1);
        assert_int_equal(st.gpus[1].n_slices, 0);
        assert_int_equal(st.gpus[0].context_overhead, inv.gpus[0].context_overhead);
        assert_true(st.has_pods);
        assert_int_equal(st.n_pods, 2);
        assert_string_equal(st.pods[0], pods[0]);
        assert_string_equal(st.pods[1], pods[1]);
        for (unsigned i = 0; i < 3; i++) {
                assert_int_equal(st.gpus[i].index, i);
                assert_string_equal(st.gpus[i].uuid, inv.gpus[i].uuid);
                assert_string_equal(st.gpus[i].model, "NVIDIA H200");
                assert_int_equal(st.gpus[i].healthy, inv.gpus[i].healthy);
                assert_int_equal(st.gpus[i].memory_total, inv.gpus[i].memory_total);
                assert_int_equal(st.gpus[i].memory_free, usage[i].free_memory);
        }
        assert_int_equal(st.gpus[0].milli_free, 600);
        assert_int_equal(st.gpus[1].milli_free, 1000);
        assert_int_equal(st.gpus[2].milli_free, 0); /* unhealthy: nothing to give */
        ext_node_state_done(&st);
        free(text);
}

static void test_rfc3339(void **state)
{
        (void)state;
        int64_t t;
        assert_int_equal(ext_rfc3339_parse("2026-12-01T00:00:00Z", &t), 0);
        assert_int_equal(t, 1796083200);
        assert_int_equal(ext_rfc3339_parse("2026-12-01T01:30:00.123456+01:30", &t), 0);
        assert_int_equal(t, 1796083200);
        assert_int_equal(ext_rfc3339_parse("2026-11-30T23:00:00-01:00", &t), 0);
        assert_int_equal(t, 1796083200);
        const char *bad[] = { "",
                              "2026-12-01",
                              "2026-12-01 00:00:00Z",
                              "2026-13-01T00:00:00Z",
                              "2026-12-01T24:00:00Z",
                              "2026-12-01T00:00:00",
                              "1969-12-31T23:59:59Z",
                              "2026-12-01T00:00:00.Z",
                              "2026-12-01T00:00:00+0100",
                              "2026-12-01T00:00:00Zjunk",
                              "+026-12-01T00:00:00Z" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(ext_rfc3339_parse(bad[i], &t), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_report_round_trip),
                cmocka_unit_test(test_rfc3339),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
