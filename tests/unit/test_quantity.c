/* SPDX-License-Identifier: Apache-2.0 */
/* Quantities: every accepted form lands on the exact value, every rejected
 * one fails with -EINVAL and a message naming the field, the value and
 * what is accepted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "quantity.h"

#define GIB (1ull << 30)
#define MIB (1ull << 20)

#define GPU_ACCEPTED                                                                        \
        "below one GPU use 1m..999m (or 0.001..0.999); from one GPU up use whole GPUs (1, 2, " \
        "1000m)"

struct good_u32 {
        const char *in;
        uint32_t want;
};
struct good_u64 {
        const char *in;
        uint64_t want;
};
struct bad {
        const char *in;
        const char *reason; /* a part of the message that says why */
};

static const struct good_u32 gpu_good[] = {
        { "1m", 1 },        { "999m", 999 },     { "300m", 300 },     { "0.3", 300 },
        { "0.125", 125 },   { ".5", 500 },       { "0.001", 1 },      { "0.999", 999 },
        { "1", 1000 },      { "2", 2000 },       { "1000m", 1000 },   { "2000m", 2000 },
        { "8", 8000 },      { "8000m", 8000 },   { "3e-1", 300 },     { "30E-2", 300 },
        { "1e0", 1000 },    { "0.5e1", 5000 },   { "0.8e1", 8000 },    { "+1", 1000 },
        { "1.0", 1000 },    { "1.", 1000 },      { "0.300", 300 },    { "300.0m", 300 },
        { "00300m", 300 },  { "0.0000001e6", 100 }, { "1000000e-6", 1000 },
        { "0.00000000000000000000000000000000000000000000000000003e50", 3 },
};

static const struct bad gpu_bad[] = {
        { "1500m", "above one GPU only whole GPUs" },
        { "1.5", "above one GPU only whole GPUs" },
        { "2001m", "above one GPU only whole GPUs" },
        { "0", "zero" },
        { "0m", "zero" },
        { "0.0", "zero" },
        { "-0", "zero" },
        { "-1", "negative" },
        { "-300m", "negative" },
        { "0.0005", "finer than 1m" },
        { "1e-4", "finer than 1m" },
        { "300.5m", "finer than 1m" },
        { "1.0001", "finer than 1m" },
        { "300M", "more than 8 GPUs" },
        { "9", "more than 8 GPUs" },
        { "65", "more than 8 GPUs" },
        { "9000m", "more than 8 GPUs" },
        { "65000m", "more than 8 GPUs" },
        { "1Ki", "more than 8 GPUs" },
        { "1k", "more than 8 GPUs" },
        { "1e3", "more than 8 GPUs" },
        { "100000000000000000000000000000000000000000000000000", "more than 8 GPUs" },
        { "99999999999999999999999999999999999999999", "too many significant digits" },
        { "1e1001", "exponent is out of range" },
        { "1e-99999999999", "exponent is out of range" },
        { "", "empty" },
        { " 300m", "white space" },
        { "300m ", "white space" },
        { "3 00m", "white space" },
        { "300m\n", "white space" },
        { "\t1", "white space" },
        { "300x", "unknown suffix \"x\"" },
        { "300mi", "unknown suffix \"mi\"" },
        { "1e", "unknown suffix \"e\"" },
        { "1e+", "unknown suffix \"e+\"" },
        { "1e3m", "unknown suffix \"e3m\"" },
        { "0x10", "unknown suffix \"x10\"" },
        { "NaN", "not a number" },
        { "inf", "not a number" },
        { "m", "not a number" },
        { ".", "not a number" },
        { "-", "not a number" },
        { "1..2", "not a number" },
        { "1.2.3", "not a number" },
        { "--1", "not a number" },
        { "+-1", "not a number" },
        { "1,5", "not a number" },
        { "e3", "not a number" },
        { "½", "not a number" },
};

static void test_gpu_good(void **state)
{
        (void)state;
        for (size_t i = 0; i < GS_ARRAY_SIZE(gpu_good); i++) {
                struct gs_error *err = NULL;
                uint32_t milli = 0;
                int r = gs_gpu_quantity_parse("compute.gpu", gpu_good[i].in, &milli, &err);
                if (r != 0)
                        print_error("input \"%s\": %s\n", gpu_good[i].in, gs_error_msg(err));
                assert_int_equal(r, 0);
                assert_null(err);
                assert_int_equal(milli, gpu_good[i].want);
        }
}

static void test_gpu_bad(void **state)
{
        (void)state;
        for (size_t i = 0; i < GS_ARRAY_SIZE(gpu_bad); i++) {
                struct gs_error *err = NULL;
                uint32_t milli = 4242;
                int r = gs_gpu_quantity_parse("compute.gpu", gpu_bad[i].in, &milli, &err);
                if (r != -EINVAL || !err || !strstr(err->msg, gpu_bad[i].reason) ||
                    !strstr(err->msg, GPU_ACCEPTED) || strncmp(err->msg, "compute.gpu: \"", 14))
                        print_error("input \"%s\": r=%d msg=%s\n", gpu_bad[i].in, r,
                                    gs_error_msg(err));
                assert_int_equal(r, -EINVAL);
                assert_non_null(err);
                assert_int_equal(err->code, -EINVAL);
                assert_non_null(strstr(err->msg, gpu_bad[i].reason));
                assert_non_null(strstr(err->msg, GPU_ACCEPTED));
                assert_int_equal(strncmp(err->msg, "compute.gpu: \"", 14), 0);
                assert_int_equal(milli, 4242); /* untouched on failure */
                gs_error_free(err);
        }
}

static void test_gpu_exact_message(void **state)
{
        (void)state;
        struct gs_error *err = NULL;
        uint32_t milli;
        assert_int_equal(gs_gpu_quantity_parse("compute.gpu", "1500m", &milli, &err), -EINVAL);
        assert_string_equal(err->msg,
                            "compute.gpu: \"1500m\" is not a valid GPU quantity (above one GPU "
                            "only whole GPUs are allowed): " GPU_ACCEPTED ", at most 8");
        gs_error_free(err);
}

/* Every slice in both spellings, and every milli count up to 8 GPUs (the most
 * one slice holds: above it, refused). */
static void test_gpu_exhaustive(void **state)
{
        (void)state;
        char buf[32];
        for (uint32_t m = 1; m < 1000; m++) {
                uint32_t a = 0, b = 0;
                snprintf(buf, sizeof(buf), "%um", m);
                assert_int_equal(gs_gpu_quantity_parse("gpu", buf, &a, NULL), 0);
                snprintf(buf, sizeof(buf), "0.%03u", m);
                assert_int_equal(gs_gpu_quantity_parse("gpu", buf, &b, NULL), 0);
                assert_int_equal(a, m);
                assert_int_equal(b, m);
        }
        for (uint32_t m = 1000; m <= 9000; m++) {
                uint32_t a = 0;
                snprintf(buf, sizeof(buf), "%um", m);
                int r = gs_gpu_quantity_parse("gpu", buf, &a, NULL);
                assert_int_equal(r, m % 1000 == 0 && m <= 8000 ? 0 : -EINVAL);
                if (r == 0)
                        assert_int_equal(a, m);
        }
}

static void test_gpu_hostile_value_quoted(void **state)
{
        (void)state;
        struct gs_error *err = NULL;
        uint32_t milli;
        char big[4096];
        memset(big, '9', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        assert_int_equal(gs_gpu_quantity_parse("compute.gpu", big, &milli, &err), -EINVAL);
        assert_non_null(strstr(err->msg, "too long"));
        assert_true(strlen(err->msg) < 600); /* the value is cut, not copied whole */
        err = gs_error_free(err);

        assert_int_equal(gs_gpu_quantity_parse("compute.gpu", "1\x1b[2J\"", &milli, &err),
                         -EINVAL);
        assert_non_null(strstr(err->msg, "\"1\\x1b[2J\\x22\""));
        assert_null(strchr(err->msg, '\x1b'));
        gs_error_free(err);
}

static const struct good_u64 mem_good[] = {
        { "1", 1 },
        { "1024", 1024 },
        { "1Ki", 1024 },
        { "6Gi", 6 * GIB },
        { "512Mi", 512 * MIB },
        { "1.5Gi", 1536 * MIB },
        { "0.5Ki", 512 },
        { "2G", 2000000000ull },
        { "1k", 1000 },
        { "1M", 1000000 },
        { "1T", 1000000000000ull },
        { "1P", 1000000000000000ull },
        { "1E", 1000000000000000000ull },
        { "18E", 18000000000000000000ull },
        { "1Ti", 1ull << 40 },
        { "1Pi", 1ull << 50 },
        { "1Ei", 1ull << 60 },
        { "15Ei", 15ull << 60 },
        { "15.5Ei", 31ull << 59 },
        { "1e3", 1000 },
        { "1.5e3", 1500 },
        { "0.001k", 1 },
        { "18446744073709551615", UINT64_MAX },
        { "0.0000000000009094947017729282379150390625Ti", 1 }, /* 2^-40 Ti */
        { "+4Gi", 4 * GIB },
};

static const struct bad mem_bad[] = {
        { "1m", "m means milli" },
        { "1000m", "m means milli" },
        { "0", "zero" },
        { "0Gi", "zero" },
        { "-1Gi", "negative" },
        { "1.1", "not a whole number of bytes" },
        { "0.1Ki", "not a whole number of bytes" },
        { "1e-1", "not a whole number of bytes" },
        { "0.0000000000000000000000000000001Ei", "not a whole number of bytes" },
        { "16Ei", "larger than 16Ei" },
        { "19E", "larger than 16Ei" },
        { "18446744073709551616", "larger than 16Ei" },
        { "1e20", "larger than 16Ei" },
        { "1Gb", "unknown suffix \"Gb\"" },
        { "1gi", "unknown suffix \"gi\"" },
        { "1KB", "unknown suffix \"KB\"" },
        { "1K", "unknown suffix \"K\"" },
        { "1 Gi", "white space" },
        { "", "empty" },
        { "Gi", "not a number" },
        /* 2^-60 Ei is exactly one byte, but needs 42 significant digits. */
        { "0.000000000000000000867361737988403547205962240695953369140625Ei",
          "too many significant digits" },
};

static void test_memory_good(void **state)
{
        (void)state;
        for (size_t i = 0; i < GS_ARRAY_SIZE(mem_good); i++) {
                struct gs_error *err = NULL;
                uint64_t bytes = 0;
                int r = gs_memory_quantity_parse("compute.gpu_memory", mem_good[i].in, &bytes,
                                                 &err);
                if (r != 0)
                        print_error("input \"%s\": %s\n", mem_good[i].in, gs_error_msg(err));
                assert_int_equal(r, 0);
                assert_true(bytes == mem_good[i].want);
        }
}

static void test_memory_bad(void **state)
{
        (void)state;
        for (size_t i = 0; i < GS_ARRAY_SIZE(mem_bad); i++) {
                struct gs_error *err = NULL;
                uint64_t bytes = 77;
                int r = gs_memory_quantity_parse("compute.mem", mem_bad[i].in, &bytes, &err);
                if (r != -EINVAL || !err || !strstr(err->msg, mem_bad[i].reason))
                        print_error("input \"%s\": r=%d msg=%s\n", mem_bad[i].in, r,
                                    gs_error_msg(err));
                assert_int_equal(r, -EINVAL);
                assert_non_null(strstr(err->msg, mem_bad[i].reason));
                assert_non_null(strstr(err->msg, "compute.mem: \""));
                assert_non_null(strstr(err->msg, "Ki Mi Gi Ti Pi Ei"));
                assert_true(bytes == 77);
                gs_error_free(err);
        }
}

static void test_memory_exact_message(void **state)
{
        (void)state;
        struct gs_error *err = NULL;
        uint64_t b;
        assert_int_equal(gs_memory_quantity_parse("compute.gpu_memory", "6GB", &b, &err), -EINVAL);
        assert_string_equal(err->msg,
                            "compute.gpu_memory: \"6GB\" is not a valid memory quantity (unknown "
                            "suffix \"GB\"): use a whole number of bytes, optionally with a "
                            "suffix Ki Mi Gi Ti Pi Ei (powers of 1024) or k M G T P E (powers of "
                            "1000), e.g. 6Gi, 512Mi, 1.5Gi, 2G");
        gs_error_free(err);
}

/* Memory below 64Mi is refused with a hint at the unit a plain number lacks;
 * 64Mi itself, and every suffixed size above, passes. */
static void test_memory_minimum(void **state)
{
        (void)state;
        static const struct {
                const char *in;
                const char *msg; /* NULL: accepted */
        } cases[] = {
                { "3000", "gpu_memory: 3000 is 3000 bytes, below the 64Mi minimum; did you mean 3000Mi?" },
                { "64", "gpu_memory: 64 is 64 bytes, below the 64Mi minimum; did you mean 64Mi?" },
                { "63", "gpu_memory: 63 is 63 bytes, below the 64Mi minimum" },
                { "1Ki", "gpu_memory: 1Ki is 1024 bytes, below the 64Mi minimum" },
                { "67108863", "gpu_memory: 67108863 is 67108863 bytes, below the 64Mi minimum; did you mean 67108863Mi?" },
                { "0.05G", "gpu_memory: 0.05G is 50000000 bytes, below the 64Mi minimum" },
                { "64Mi", NULL },
                { "67108864", NULL },
                { "6Gi", NULL },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct gs_error *err = NULL;
                uint64_t b = 7;
                int r = gs_memory_size_parse("gpu_memory", cases[i].in, &b, &err);
                if (!cases[i].msg) {
                        assert_int_equal(r, 0);
                        assert_true(b >= GS_MEMORY_MIN);
                        continue;
                }
                assert_int_equal(r, -EINVAL);
                assert_int_equal(b, 7); /* untouched on failure */
                assert_string_equal(err->msg, cases[i].msg);
                gs_error_free(err);
        }
        /* Malformed values keep the parser's message. */
        struct gs_error *err = NULL;
        uint64_t b;
        assert_int_equal(gs_memory_size_parse("gpu_memory", "6GB", &b, &err), -EINVAL);
        assert_non_null(strstr(err->msg, "is not a valid memory quantity"));
        gs_error_free(err);
        /* Bytes given as a number (the local API) have no text to quote. */
        err = NULL;
        assert_int_equal(gs_memory_minimum_check("memory", NULL, 3000, &err), -EINVAL);
        assert_string_equal(err->msg, "memory: 3000 bytes is below the 64Mi minimum; did you mean 3000Mi?");
        gs_error_free(err);
        assert_int_equal(gs_memory_minimum_check("memory", NULL, GS_MEMORY_MIN, NULL), 0);
}

static void test_cpu(void **state)
{
        (void)state;
        static const struct good_u32 good[] = {
                { "500m", 500 }, { "0.5", 500 },   { "2", 2000 },
                { "1.5", 1500 }, { "1m", 1 },      { "100000", 100000000 },
        };
        static const struct bad bad[] = {
                { "0", "zero" },           { "0.0005", "finer than 1m" },
                { "-1", "negative" },      { "100001", "too many cores" },
                { "1 ", "white space" },   { "1x", "unknown suffix" },
        };
        for (size_t i = 0; i < GS_ARRAY_SIZE(good); i++) {
                uint32_t m = 0;
                assert_int_equal(gs_cpu_quantity_parse("compute.cpu", good[i].in, &m, NULL), 0);
                assert_int_equal(m, good[i].want);
        }
        for (size_t i = 0; i < GS_ARRAY_SIZE(bad); i++) {
                struct gs_error *err = NULL;
                uint32_t m = 0;
                assert_int_equal(gs_cpu_quantity_parse("compute.cpu", bad[i].in, &m, &err),
                                 -EINVAL);
                assert_non_null(strstr(err->msg, bad[i].reason));
                assert_non_null(strstr(err->msg, "use millicores (1m, 500m) or cores (0.5, 2)"));
                gs_error_free(err);
        }
}

static void test_format(void **state)
{
        (void)state;
        static const struct good_u32 gpu[] = {
                { "300m", 300 }, { "1", 1000 }, { "2", 2000 }, { "1500m", 1500 }, { "1m", 1 },
        };
        static const struct good_u64 mem[] = {
                { "6Gi", 6 * GIB },   { "1536Mi", 1536 * MIB },  { "1000", 1000 },
                { "0", 0 },           { "1Ei", 1ull << 60 },     { "3Ei", 3ull << 60 },
                { "1Ki", 1024 },      { "18446744073709551615", UINT64_MAX },
        };
        char buf[32];
        for (size_t i = 0; i < GS_ARRAY_SIZE(gpu); i++) {
                int n = gs_gpu_quantity_format(gpu[i].want, buf, sizeof(buf));
                assert_int_equal(n, (int)strlen(gpu[i].in));
                assert_string_equal(buf, gpu[i].in);
        }
        for (size_t i = 0; i < GS_ARRAY_SIZE(mem); i++) {
                int n = gs_memory_quantity_format(mem[i].want, buf, sizeof(buf));
                assert_int_equal(n, (int)strlen(mem[i].in));
                assert_string_equal(buf, mem[i].in);
                uint64_t back = 0;
                if (mem[i].want)
                        assert_int_equal(gs_memory_quantity_parse("m", buf, &back, NULL), 0);
                assert_true(back == mem[i].want);
        }
        assert_int_equal(gs_cpu_quantity_format(2500, buf, sizeof(buf)), 5);
        assert_string_equal(buf, "2500m");
        assert_int_equal(gs_gpu_quantity_format(300, buf, 4), -ENOSPC);
        assert_int_equal(gs_gpu_quantity_format(300, buf, 5), 4);
        assert_int_equal(gs_memory_quantity_format(6 * GIB, buf, 3), -ENOSPC);
}

static void test_default_memory_cap(void **state)
{
        (void)state;
        static const struct {
                uint32_t milli;
                uint64_t mem, want;
        } cases[] = {
                { 300, 80 * GIB, 24 * GIB },
                { 500, 16 * GIB, 8 * GIB },
                { 333, 16 * GIB, 2727 * 2 * MIB }, /* 5720896638.3 bytes, down to 2 MiB */
                { 1, 1 * GIB, 0 },                 /* below the granularity */
                { 1, 80 * GIB, 40 * 2 * MIB },      /* 85899345.9 bytes -> 80 MiB */
                { 999, UINT64_MAX, (UINT64_MAX / 1000 * 999 + (UINT64_MAX % 1000) * 999 / 1000) &
                                           ~(2 * MIB - 1) },
                { 1000, 80 * GIB + 1, 80 * GIB + 1 },
                { 2000, 80 * GIB, 80 * GIB },
                { 0, 80 * GIB, 0 },
        };
        for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
                uint64_t got = gs_default_memory_cap(cases[i].milli, cases[i].mem);
                if (got != cases[i].want)
                        print_error("case %zu: got %llu want %llu\n", i, (unsigned long long)got,
                                    (unsigned long long)cases[i].want);
                assert_true(got == cases[i].want);
                if (cases[i].milli < 1000)
                        assert_int_equal(got % GS_MEM_GRANULARITY, 0);
        }
}

static void test_quote(void **state)
{
        (void)state;
        char buf[GS_QUOTE_MAX];
        assert_string_equal(gs_quote("300m", buf, sizeof(buf)), "300m");
        assert_string_equal(gs_quote("a\"b\\c\n", buf, sizeof(buf)), "a\\x22b\\x5cc\\x0a");
        assert_string_equal(gs_quote(NULL, buf, sizeof(buf)), "");
        char longs[100];
        memset(longs, 'x', 99);
        longs[99] = '\0';
        gs_quote(longs, buf, sizeof(buf));
        assert_int_equal(strlen(buf), 48 + 3);
        assert_string_equal(buf + 48, "...");
        char small[5];
        assert_string_equal(gs_quote("abcdef", small, sizeof(small)), "abcd");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_gpu_good),
                cmocka_unit_test(test_gpu_bad),
                cmocka_unit_test(test_gpu_exact_message),
                cmocka_unit_test(test_gpu_exhaustive),
                cmocka_unit_test(test_gpu_hostile_value_quoted),
                cmocka_unit_test(test_memory_good),
                cmocka_unit_test(test_memory_bad),
                cmocka_unit_test(test_memory_exact_message),
                cmocka_unit_test(test_memory_minimum),
                cmocka_unit_test(test_cpu),
                cmocka_unit_test(test_format),
                cmocka_unit_test(test_default_memory_cap),
                cmocka_unit_test(test_quote),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
