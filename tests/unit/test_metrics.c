/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus text builder: exact text for families and samples,
 * escaping of label values and help, name validation, one header per
 * family, the size bound and the sticky first error. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "metrics.h"

static void test_family_and_samples(void **state)
{
        (void)state;
        struct gs_metrics m;
        gs_metrics_init(&m, 1 << 20);
        assert_int_equal(gs_metrics_family(&m, "gs_mem_bytes", GS_METRIC_GAUGE, "Memory."), 0);
        struct gs_metric_label l[] = { { "gpu", "0" }, { "UUID", "GPU-1" } };
        assert_int_equal(gs_metrics_sample_u64(&m, l, 2, 18446744073709551615ull), 0);
        assert_int_equal(gs_metrics_sample(&m, NULL, 0, 1.5), 0);
        assert_int_equal(gs_metrics_family(&m, "gs_ops_total", GS_METRIC_COUNTER, "Ops."), 0);
        assert_int_equal(gs_metrics_sample(&m, l, 1, 0.25), 0);
        assert_int_equal(gs_metrics_family(&m, "gs_x", GS_METRIC_UNTYPED, ""), 0);
        assert_int_equal(gs_metrics_sample(&m, NULL, 0, NAN), 0);
        assert_int_equal(gs_metrics_sample(&m, NULL, 0, INFINITY), 0);
        assert_int_equal(gs_metrics_sample(&m, NULL, 0, -INFINITY), 0);
        size_t len;
        const char *t = gs_metrics_text(&m, &len);
        const char *want = "# HELP gs_mem_bytes Memory.\n"
                           "# TYPE gs_mem_bytes gauge\n"
                           "gs_mem_bytes{gpu=\"0\",UUID=\"GPU-1\"} 18446744073709551615\n"
                           "gs_mem_bytes 1.5\n"
                           "# HELP gs_ops_total Ops.\n"
                           "# TYPE gs_ops_total counter\n"
                           "gs_ops_total{gpu=\"0\"} 0.25\n"
                           "# HELP gs_x \n"
                           "# TYPE gs_x untyped\n"
                           "gs_x NaN\n"
                           "gs_x +Inf\n"
                           "gs_x -Inf\n";
        assert_string_equal(t, want);
        assert_int_equal(len, strlen(want));
        assert_int_equal(gs_metrics_error(&m), 0);
        gs_metrics_done(&m);
}

static void test_escaping(void **state)
{
        (void)state;
        struct gs_metrics m;
        gs_metrics_init(&m, 4096);
        assert_int_equal(gs_metrics_family(&m, "a", GS_METRIC_GAUGE, "back\\slash \"q\"\nline"),
                         0);
        struct gs_metric_label l[] = { { "v", "a\\b\"c\nd" }, { "skip", NULL }, { "e", "" } };
        assert_int_equal(gs_metrics_sample_u64(&m, l, 3, 1), 0);
        struct gs_metric_label none[] = { { "skip", NULL } };
        assert_int_equal(gs_metrics_sample_u64(&m, none, 1, 2), 0);
        assert_string_equal(gs_metrics_text(&m, NULL),
                            "# HELP a back\\\\slash \"q\"\\nline\n"
                            "# TYPE a gauge\n"
                            "a{v=\"a\\\\b\\\"c\\nd\",e=\"\"} 1\n"
                            "a 2\n");
        gs_metrics_done(&m);
}

static void test_names(void **state)
{
        (void)state;
        assert_true(gs_metrics_valid_name("gpuslice_gpu_memory_total_bytes"));
        assert_true(gs_metrics_valid_name("a:b_c9"));
        assert_true(gs_metrics_valid_name(":x"));
        assert_true(gs_metrics_valid_name("_x"));
        assert_false(gs_metrics_valid_name(""));
        assert_false(gs_metrics_valid_name(NULL));
        assert_false(gs_metrics_valid_name("9a"));
        assert_false(gs_metrics_valid_name("a-b"));
        assert_false(gs_metrics_valid_name("a b"));
        assert_false(gs_metrics_valid_name("a{"));
        assert_false(gs_metrics_valid_name("é"));
        char longname[GS_METRICS_NAME_MAX + 2];
        memset(longname, 'a', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = '\0';
        assert_false(gs_metrics_valid_name(longname));
        longname[GS_METRICS_NAME_MAX] = '\0';
        assert_true(gs_metrics_valid_name(longname));

        assert_true(gs_metrics_valid_label("UUID"));
        assert_true(gs_metrics_valid_label("_x"));
        assert_true(gs_metrics_valid_label("modelName"));
        assert_false(gs_metrics_valid_label("__name__"));
        assert_false(gs_metrics_valid_label("a:b"));
        assert_false(gs_metrics_valid_label("1a"));
        assert_false(gs_metrics_valid_label(""));
}

static void test_rejects(void **state)
{
        (void)state;
        struct gs_metrics m;
        struct gs_metric_label l[] = { { "a", "1" }, { "a", "2" } };
        struct gs_metric_label bad[] = { { "__x", "1" } };

        gs_metrics_init(&m, 4096);
        assert_int_equal(gs_metrics_sample(&m, NULL, 0, 1), -EINVAL); /* no family */
        gs_metrics_done(&m);

        gs_metrics_init(&m, 4096);
        assert_int_equal(gs_metrics_family(&m, "bad-name", GS_METRIC_GAUGE, "h"), -EINVAL);
        gs_metrics_done(&m);

        gs_metrics_init(&m, 4096);
        assert_int_equal(gs_metrics_family(&m, "c", GS_METRIC_COUNTER, "h"), -EINVAL);
        gs_metrics_done(&m);

        gs_metrics_init(&m, 4096);
        assert_int_equal(gs_metrics_family(&m, "g", GS_METRIC_GAUGE, NULL), -EINVAL);
        gs_metrics_done(&m);

        gs_metrics_init(&m, 4096);
        assert_int_equal(gs_metrics_family(&m, "g", GS_METRIC_GAUGE, "h"), 0);
        assert_int_equal(gs_metrics_sample(&m, l, 2, 1), -EINVAL); /* repeated label */
        gs_metrics_done(&m);

        gs_metrics_init(&m, 4096);
        assert_int_equal(gs_metrics_family(&m, "g", GS_METRIC_GAUGE, "h"), 0);
        assert_int_equal(gs_metrics_sample(&m, bad, 1, 1), -EINVAL); /* reserved label */
        gs_metrics_done(&m);

        gs_metrics_init(&m, 4096);
        assert_int_equal(gs_metrics_family(&m, "g", GS_METRIC_GAUGE, "h"), 0);
        assert_int_equal(gs_metrics_sample(&m, l, GS_METRICS_MAX_LABELS + 1, 1), -EINVAL);
        gs_metrics_done(&m);

        gs_metrics_init(&m, 4096);
        assert_int_equal(gs_metrics_family(&m, "c_total", GS_METRIC_COUNTER, "h"), 0);
        assert_int_equal(gs_metrics_sample(&m, NULL, 0, -1), -EINVAL);
        gs_metrics_done(&m);

        gs_metrics_init(&m, 4096);
        assert_int_equal(gs_metrics_family(&m, "c_total", GS_METRIC_COUNTER, "h"), 0);
        assert_int_equal(gs_metrics_sample(&m, NULL, 0, NAN), -EINVAL);
        gs_metrics_done(&m);
}

static void test_family_once(void **state)
{
        (void)state;
        struct gs_metrics m;
        gs_metrics_init(&m, 4096);
        assert_int_equal(gs_metrics_family(&m, "a", GS_METRIC_GAUGE, "h"), 0);
        assert_int_equal(gs_metrics_family(&m, "b", GS_METRIC_GAUGE, "h"), 0);
        assert_int_equal(gs_metrics_family(&m, "a", GS_METRIC_GAUGE, "h"), -EEXIST);
        /* Sticky: later calls fail with the first error and add nothing. */
        size_t before;
        gs_metrics_text(&m, &before);
        assert_int_equal(gs_metrics_family(&m, "c", GS_METRIC_GAUGE, "h"), -EEXIST);
        assert_int_equal(gs_metrics_sample(&m, NULL, 0, 1), -EEXIST);
        size_t after;
        gs_metrics_text(&m, &after);
        assert_int_equal(before, after);
        assert_int_equal(gs_metrics_error(&m), -EEXIST);
        gs_metrics_done(&m);
}

static void test_bound(void **state)
{
        (void)state;
        struct gs_metrics m;
        /* "# HELP a h\n# TYPE a gauge\n" is 26 bytes, "a 1\n" 4. */
        gs_metrics_init(&m, 26 + 4 * 3 + 2);
        assert_int_equal(gs_metrics_family(&m, "a", GS_METRIC_GAUGE, "h"), 0);
        for (int i = 0; i < 3; i++)
                assert_int_equal(gs_metrics_sample_u64(&m, NULL, 0, 1), 0);
        assert_int_equal(gs_metrics_sample_u64(&m, NULL, 0, 1), -E2BIG);
        size_t len;
        const char *t = gs_metrics_text(&m, &len);
        assert_int_equal(len, 26 + 12); /* only complete lines */
        assert_int_equal(t[len - 1], '\n');
        assert_int_equal(strlen(t), len);
        gs_metrics_done(&m);

        /* A text much larger than the first allocation grows, then stops. */
        gs_metrics_init(&m, 100000);
        assert_int_equal(gs_metrics_family(&m, "big", GS_METRIC_GAUGE, "h"), 0);
        char value[300];
        memset(value, 'x', sizeof(value) - 1);
        value[sizeof(value) - 1] = '\0';
        struct gs_metric_label l[] = { { "v", value } };
        int r = 0, n = 0;
        while ((r = gs_metrics_sample_u64(&m, l, 1, 7)) == 0)
                n++;
        assert_int_equal(r, -E2BIG);
        assert_true(n > 300 && n < 340);
        gs_metrics_text(&m, &len);
        assert_true(len <= 100000);
        char *taken = gs_metrics_take(&m, &len);
        assert_non_null(taken);
        assert_int_equal(strlen(taken), len);
        free(taken);
        assert_int_equal(gs_metrics_error(&m), 0); /* taken: empty again */
        assert_string_equal(gs_metrics_text(&m, NULL), "");
        gs_metrics_done(&m);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_family_and_samples),
                cmocka_unit_test(test_escaping),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_rejects),
                cmocka_unit_test(test_family_once),
                cmocka_unit_test(test_bound),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
