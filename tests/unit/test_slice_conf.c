/* SPDX-License-Identifier: Apache-2.0 */
/* The slice config parser and writer: what a daemon writes, the shim reads;
 * anything malformed is rejected with a message naming line, key and value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "slice_conf_io.h"

#define GOOD                                                                  \
        "# written by gpusliced\n"                                            \
        "version = 1\n"                                                       \
        "slice = api-1.prod_x\n"                                              \
        "gpu_uuid = GPU-0c5a3e9e-8f1b-4e2a-9d8e-123456789abc\n"               \
        "memory_limit = 1073741824\n"                                         \
        "compute_milli = 300\n"                                               \
        "slice_dir = /run/gpuslice/slices/api-1\n"

static int parse(const char *text, struct gs_slice_conf *c, struct gs_error **err)
{
        return gs_slice_conf_parse(text, strlen(text), c, err);
}

static void good_minimal(void **state)
{
        (void)state;
        struct gs_slice_conf c;
        struct gs_error *err = NULL;
        assert_int_equal(parse(GOOD, &c, &err), 0);
        assert_null(err);
        assert_int_equal(c.version, 1);
        assert_string_equal(c.slice, "api-1.prod_x");
        assert_string_equal(c.gpu_uuid, "GPU-0c5a3e9e-8f1b-4e2a-9d8e-123456789abc");
        assert_int_equal(c.memory_limit, 1073741824ull);
        assert_int_equal(c.compute_milli, 300);
        assert_int_equal(c.policy, GS_POLICY_SHARE);
        assert_int_equal(c.context_overhead, 0);
        assert_string_equal(c.slice_dir, "/run/gpuslice/slices/api-1");
        assert_string_equal(c.daemon_socket, "");
}

static void good_all_keys_spacing(void **state)
{
        (void)state;
        struct gs_slice_conf c;
        struct gs_error *err = NULL;
        const char *t = "\n  version=1\r\n\tslice =s\ngpu_uuid= GPU-1  \n# c\nmemory_limit = 4194304\n"
                        "compute_milli = 1000\npolicy = cap\ncontext_overhead = 2097152\n"
                        "slice_dir = /x\ndaemon_socket = /run/gpuslice/gpusliced.sock"; /* no final \n */
        assert_int_equal(parse(t, &c, &err), 0);
        assert_int_equal(c.policy, GS_POLICY_CAP);
        assert_int_equal(c.context_overhead, 2097152);
        assert_int_equal(c.compute_milli, 1000);
        assert_string_equal(c.gpu_uuid, "GPU-1");
        assert_string_equal(c.daemon_socket, "/run/gpuslice/gpusliced.sock");
}

struct bad_case {
        const char *text;
        const char *needle; /* must appear in the message */
};

static void bad_inputs(void **state)
{
        (void)state;
        static const struct bad_case cases[] = {
                { GOOD "memory_limit = 5\n", "given twice" },
                { GOOD "colour = blue\n", "unknown key 'colour'" },
                { GOOD "policy = fair\n", "'policy': value 'fair'" },
                { GOOD "just words\n", "line 8" },
                { "version = 2\n", "'version': value '2'" },
                { "version = 1\n", "required key 'slice'" },
                { "version = 1\nslice = a b\n", "'slice'" },
                { "version = 1\nslice = \n", "'slice': value ''" },
                { "version = 1\nmemory_limit = 0\n", "'memory_limit': value '0'" },
                { "version = 1\nmemory_limit = -1\n", "'memory_limit'" },
                { "version = 1\nmemory_limit = 1e9\n", "'memory_limit'" },
                { "version = 1\nmemory_limit = 99999999999999999999999\n", "'memory_limit'" },
                { "version = 1\ncompute_milli = 1001\n", "'compute_milli': value '1001'" },
                { "version = 1\ncompute_milli = 0\n", "'compute_milli'" },
                { "version = 1\nslice_dir = relative/dir\n", "'slice_dir'" },
                { "version = 1\ngpu_uuid = GPU 1\n", "'gpu_uuid'" },
                { GOOD "context_overhead = 1073741824\n", "context_overhead" },
                { "version = 1\ndaemon_socket = /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
                  "'daemon_socket'" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct gs_slice_conf c;
                memset(&c, 0x5a, sizeof(c));
                struct gs_error *err = NULL;
                int r = parse(cases[i].text, &c, &err);
                if (r != -EINVAL || !err || !strstr(gs_error_msg(err), cases[i].needle))
                        fail_msg("case %zu: r=%d msg=%s", i, r, gs_error_msg(err));
                /* ret untouched on failure */
                assert_int_equal(((unsigned char *)&c)[0], 0x5a);
                gs_error_free(err);
        }
}

static void nul_and_size(void **state)
{
        (void)state;
        struct gs_slice_conf c;
        struct gs_error *err = NULL;
        const char t[] = "version = 1\nslice = a\0b\n";
        assert_int_equal(gs_slice_conf_parse(t, sizeof(t) - 1, &c, &err), -EINVAL);
        assert_non_null(strstr(gs_error_msg(err), "NUL"));
        err = gs_error_free(err);
        char *big = calloc(1, GS_SLICE_CONF_MAX_BYTES + 2);
        assert_non_null(big);
        memset(big, '#', GS_SLICE_CONF_MAX_BYTES + 1);
        assert_int_equal(gs_slice_conf_parse(big, GS_SLICE_CONF_MAX_BYTES + 1, &c, &err), -E2BIG);
        err = gs_error_free(err);
        free(big);
}

static void round_trip(void **state)
{
        (void)state;
        struct gs_slice_conf c, back;
        struct gs_error *err = NULL;
        assert_int_equal(parse(GOOD "policy = cap\ncontext_overhead = 268435456\n"
                                    "daemon_socket = /run/s.sock\n", &c, &err), 0);
        char buf[GS_SLICE_CONF_MAX_BYTES];
        int n = gs_slice_conf_format(&c, buf, sizeof(buf), &err);
        assert_true(n > 0);
        assert_int_equal(parse(buf, &back, &err), 0);
        assert_memory_equal(&c, &back, sizeof(c));
        assert_int_equal(gs_slice_conf_format(&c, buf, 20, &err), -ENOSPC);
        c.compute_milli = 0;
        assert_int_equal(gs_slice_conf_format(&c, buf, sizeof(buf), &err), -EINVAL);
        gs_error_free(err);
}

static void load_file(void **state)
{
        (void)state;
        char path[] = "/tmp/gs-slice-conf-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, GOOD, strlen(GOOD)), (ssize_t)strlen(GOOD));
        close(fd);
        struct gs_slice_conf c;
        struct gs_error *err = NULL;
        assert_int_equal(gs_slice_conf_load(path, &c, &err), 0);
        assert_int_equal(c.memory_limit, 1073741824ull);
        unlink(path);
        assert_int_equal(gs_slice_conf_load(path, &c, &err), -ENOENT);
        assert_null(err);
        assert_true(gs_slice_conf_load("/tmp", &c, &err) < 0);
        assert_non_null(err);
        gs_error_free(err);
}

/* A FIFO named as the config (GPUSLICE_CONFIG points anywhere) must be
 * refused at once: blocking in open() would hang the host process's first
 * CUDA call. The alarm turns a regression into a failure, not a timeout. */
static void fifo_refused(void **state)
{
        (void)state;
        char path[] = "/tmp/gs-conf-fifo-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        unlink(path);
        assert_int_equal(mkfifo(path, 0600), 0);
        struct gs_slice_conf c;
        struct gs_error *err = NULL;
        alarm(10);
        int r = gs_slice_conf_load(path, &c, &err);
        alarm(0);
        unlink(path);
        assert_int_equal(r, -EINVAL);
        assert_non_null(err);
        assert_non_null(strstr(gs_error_msg(err), "not a regular file"));
        gs_error_free(err);
}

static void alloc_failure(void **state)
{
        (void)state;
        struct gs_slice_conf c;
        for (long n = 0; n < 4; n++) {
                struct gs_error *err = NULL;
                gs_alloc_fail_after(n);
                int r = parse(GOOD "bogus = 1\n", &c, &err);
                gs_alloc_fail_after(-1);
                assert_true(r < 0);
                gs_error_free(err);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(good_minimal), cmocka_unit_test(good_all_keys_spacing),
                cmocka_unit_test(bad_inputs),   cmocka_unit_test(nul_and_size),
                cmocka_unit_test(round_trip),   cmocka_unit_test(load_file),
                cmocka_unit_test(alloc_failure), cmocka_unit_test(fifo_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
