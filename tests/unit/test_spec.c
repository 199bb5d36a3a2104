/* SPDX-License-Identifier: Apache-2.0 */
/* API specs: good files load with every field and default right; every bad
 * one is rejected with a message naming the file, the line, the API and
 * the field; allocation failure anywhere gives a clean -ENOMEM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "alloc.h"
#include "spec.h"

#define GIB (1ull << 30)

/* Load text from an exact-size heap copy with no NUL after it, so that
 * ASan catches any read past len. */
static int load(const char *yaml, struct gs_spec **ret, struct gs_error **err)
{
        size_t len = strlen(yaml);
        char *copy = malloc(len ? len : 1);
        assert_non_null(copy);
        memcpy(copy, yaml, len);
        int r = gs_spec_load_buffer("apis.yaml", copy, len, ret, err);
        free(copy);
        return r;
}

static const char full_spec[] =
        "# two APIs\n"
        "- name: iris-classifier\n"
        "  command: [\"./serve\", \"--port\", \"8080\", \"\"]\n"
        "  image: registry.example/iris:1.0\n"
        "  port: 9090\n"
        "  replicas: 3\n"
        "  env: {MODEL: iris, EMPTY: \"\", N: 1}\n"
        "  compute:\n"
        "    gpu: 300m\n"
        "    gpu_memory: 6Gi\n"
        "    cpu: 500m\n"
        "    mem: 2Gi\n"
        "    policy: cap\n"
        "- name: big\n"
        "  image: registry.example/big:2\n"
        "  compute: {gpu: \"1\", overuse: evict}\n";

static void test_full(void **state)
{
        (void)state;
        struct gs_spec *spec = NULL;
        struct gs_error *err = NULL;
        int r = load(full_spec, &spec, &err);
        if (r < 0)
                print_error("%s\n", gs_error_msg(err));
        assert_int_equal(r, 0);
        assert_null(err);
        assert_string_equal(spec->source, "apis.yaml");
        assert_int_equal(spec->n_apis, 2);

        const struct gs_api_spec *a = &spec->apis[0];
        assert_string_equal(a->name, "iris-classifier");
        assert_int_equal(a->line, 2);
        assert_int_equal(a->n_command, 4);
        assert_string_equal(a->command[0], "./serve");
        assert_string_equal(a->command[2], "8080");
        assert_string_equal(a->command[3], "");
        assert_null(a->command[4]); /* argv is NULL-terminated */
        assert_string_equal(a->image, "registry.example/iris:1.0");
        assert_int_equal(a->port, 9090);
        assert_int_equal(a->replicas, 3);
        assert_int_equal(a->n_env, 3);
        assert_string_equal(a->env[0].name, "MODEL");
        assert_string_equal(a->env[0].value, "iris");
        assert_string_equal(a->env[1].value, "");
        assert_string_equal(a->env[2].value, "1");
        assert_int_equal(a->compute.gpu_milli, 300);
        assert_true(a->compute.gpu_memory == 6 * GIB);
        assert_int_equal(a->compute.cpu_milli, 500);
        assert_true(a->compute.mem == 2 * GIB);
        assert_int_equal(a->compute.policy, GS_POLICY_CAP);
        assert_int_equal(a->compute.overuse, GS_OVERUSE_DEFAULT); /* the daemon's */

        const struct gs_api_spec *b = &spec->apis[1];
        assert_string_equal(b->name, "big");
        assert_int_equal(b->line, 14);
        assert_null(b->command);
        assert_int_equal(b->n_command, 0);
        assert_int_equal(b->port, GS_SPEC_DEFAULT_PORT);
        assert_int_equal(b->replicas, 1);
        assert_int_equal(b->n_env, 0);
        assert_int_equal(b->compute.gpu_milli, 1000);
        assert_true(b->compute.gpu_memory == 0);
        assert_int_equal(b->compute.cpu_milli, 0);
        assert_true(b->compute.mem == 0);
        assert_int_equal(b->compute.policy, GS_POLICY_SHARE);
        assert_int_equal(b->compute.overuse, GS_OVERUSE_EVICT); /* whole GPUs too */

        assert_ptr_equal(gs_spec_find(spec, "big"), b);
        assert_ptr_equal(gs_spec_find(spec, "iris-classifier"), a);
        assert_null(gs_spec_find(spec, "bi"));
        assert_null(gs_spec_find(NULL, "big"));
        assert_null(gs_spec_free(spec));
        assert_null(gs_spec_free(NULL));
}

static const struct {
        const char *yaml;
        uint32_t gpu_milli;
} good_variants[] = {
        { "- {name: a, command: [x], compute: {gpu: 1}}", 1000 },
        { "- {name: a, command: [x], compute: {gpu: \"1\"}}", 1000 },
        { "- {name: a, command: [x], compute: {gpu: '0.3'}}", 300 },
        { "- {name: a, command: [x], compute: {gpu: 3e-1}}", 300 },
        { "[{name: a, image: x, compute: {gpu: 0.5}}]", 500 },
        { "%YAML 1.1\n---\n- name: a\n  command:\n    - x\n  compute:\n    gpu: 1m\n...\n", 1 },
        { "- name: a0-b\n  command: [x]\n  compute: {gpu: 999m, policy: share}\n", 999 },
        { "- {name: a, command: [x], compute: {gpu: 300m, overuse: kill}}", 300 },
        { "- {name: a, command: [x], compute: {gpu: 300m, overuse: \"report\"}}", 300 },
        { "\xef\xbb\xbf- {name: a, command: [x], compute: {gpu: 2}}", 2000 }, /* UTF-8 BOM */
        { "- name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"
          "  command: [x]\n  compute: {gpu: 8}\n", 8000 },
};

static void test_good_variants(void **state)
{
        (void)state;
        for (size_t i = 0; i < GS_ARRAY_SIZE(good_variants); i++) {
                struct gs_spec *spec = NULL;
                struct gs_error *err = NULL;
                int r = load(good_variants[i].yaml, &spec, &err);
                if (r < 0)
                        print_error("case %zu: %s\n", i, gs_error_msg(err));
                assert_int_equal(r, 0);
                assert_int_equal(spec->n_apis, 1);
                assert_int_equal(spec->apis[0].compute.gpu_milli, good_variants[i].gpu_milli);
                gs_spec_free(spec);
        }
}

#define API "- name: a\n  command: [x]\n"
#define GPU_OK "  compute: {gpu: 300m}\n"

static const struct {
        const char *yaml;
        const char *want; /* must appear in the message */
} bad_cases[] = {
        /* the document */
        { "", "apis.yaml: the file is empty: expected a list of APIs" },
        { "# nothing here\n\n", "apis.yaml: the file is empty" },
        { "---\n", "apis.yaml:2: expected a list of APIs, each starting with \"- name:\", got nothing" },
        { "name: a\n", "apis.yaml:1: expected a list of APIs, each starting with \"- name:\", got a mapping" },
        { "just text", "got a string" },
        { "[]", "apis.yaml:1: the list of APIs is empty" },
        { "- 1\n", "apis.yaml:1: API #1: expected a mapping" },
        { API GPU_OK "---\n" API GPU_OK, "apis.yaml:4:1: a second YAML document" },
        { "- name: [a\n", "apis.yaml:2:1: not valid YAML" },
        { "- name: a\n command: x\n", "not valid YAML" },
        { "- name: a\x01\n", "apis.yaml: not valid YAML text: control characters are not allowed" },
        { "- name: a\xff\n", "not valid YAML text" },
        { "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "nested too deeply" },
        /* anchors, aliases, tags */
        { "- &x {name: a, command: [x], compute: {gpu: 1}}\n", "apis.yaml:1:3: anchors (&x) and aliases are not supported" },
        { "- *x\n", "apis.yaml:1:3: aliases (*x) and anchors are not supported" },
        { "- !!binary aGVsbG8=\n", "YAML tags (tag:yaml.org,2002:binary) are not supported" },
        { "- name: !!str a\n", "YAML tags" },
        { "- !foo {name: a}\n", "YAML tags (!foo)" },
        /* keys */
        { API GPU_OK "  comand: [x]\n", "apis.yaml:4: a: unknown key \"comand\"; accepted keys: name, command, image, port, replicas, env, compute" },
        { API "  compute: {gpus: 1}\n", "apis.yaml:3: a: unknown key \"compute.gpus\"; accepted keys: gpu, gpu_memory, cpu, mem, policy, overuse" },
        { API GPU_OK "  name: b\n", "apis.yaml:4: a: name: given twice" },
        { API "  compute: {gpu: 1, gpu: 2}\n", "apis.yaml:3: a: compute.gpu: given twice" },
        { "- ? [k]\n  : v\n", "API #1: keys must be plain words, got a list" },
        { "- name: a\n  \"na\\0me\": b\n", "apis.yaml:2: a: na...: a key contains a NUL character" },
        /* name */
        { "- name: Iris\n  command: [x]\n" GPU_OK, "apis.yaml:1: API #1: name: \"Iris\" is not a valid name: use 1 to 63 lowercase letters, digits and '-', starting and ending with a letter or digit (a DNS label)" },
        { "- name: -a\n", "API #1: name: \"-a\" is not a valid name" },
        { "- name: a-\n", "name: \"a-\" is not a valid name" },
        { "- name: a_b\n", "name: \"a_b\" is not a valid name" },
        { "- name: \"\"\n", "name: \"\" is not a valid name" },
        { "- name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", "is not a valid name" },
        { "- name:\n", "API #1: name: expected a value such as iris-classifier, got nothing" },
        { "- name: [a]\n", "name: expected a value such as iris-classifier, got a list" },
        { "- name: \"a\\0b\"\n", "name: contains a NUL character" },
        { API GPU_OK "- name: b\n  image: x\n" GPU_OK "- name: a\n  image: y\n" GPU_OK,
          "apis.yaml:7: a: name: another API is already called \"a\" (line 1); names must be unique" },
        /* missing pieces */
        { "- command: [x]\n" GPU_OK, "apis.yaml:1: API #1: name: missing" },
        { "- name: a\n" GPU_OK, "apis.yaml:1: a: neither command nor image given" },
        { API, "apis.yaml:1: a: compute: missing; every API needs at least compute.gpu" },
        { API "  compute: {cpu: 1}\n", "apis.yaml:3: a: compute.gpu: missing" },
        /* command and image */
        { "- name: a\n  command: ./serve\n" GPU_OK, "apis.yaml:2: a: command: expected a non-empty list of strings such as [\"./serve\", \"--port\", \"8080\"], got a string" },
        { "- name: a\n  command: []\n" GPU_OK, "command: expected a non-empty list of strings such as [\"./serve\", \"--port\", \"8080\"], got an empty list" },
        { "- name: a\n  command: {a: b}\n" GPU_OK, "got a mapping" },
        { "- name: a\n  command: [[x]]\n" GPU_OK, "command[0]: expected a value such as \"./serve\", got a list" },
        { "- name: a\n  command:\n  - x\n  -\n" GPU_OK, "apis.yaml:4: a: command[1]: expected a value such as \"./serve\", got nothing" },
        { "- name: a\n  command: [\"\"]\n" GPU_OK, "command[0]: the program must not be empty" },
        { "- name: a\n  image: \"a b\"\n" GPU_OK, "image: \"a b\" is not a valid image reference" },
        { "- name: a\n  image:\n" GPU_OK, "image: expected a value such as registry.example/iris:1.0, got nothing" },
        /* port, replicas */
        { API GPU_OK "  port: 0\n", "apis.yaml:4: a: port: \"0\" is not valid: use a whole number from 1 to 65535" },
        { API GPU_OK "  port: 65536\n", "port: \"65536\" is not valid" },
        { API GPU_OK "  port: 080\n", "port: \"080\" is not valid" },
        { API GPU_OK "  port: -1\n", "port: \"-1\" is not valid" },
        { API GPU_OK "  port: 80.5\n", "port: \"80.5\" is not valid" },
        { API GPU_OK "  port: 99999999999999999999\n", "port: \"99999999999999999999\" is not valid" },
        { API GPU_OK "  port: [1]\n", "port: expected a value such as 8080, got a list" },
        { API GPU_OK "  replicas: 0\n", "replicas: \"0\" is not valid: use a whole number from 1 to 1000" },
        { API GPU_OK "  replicas: 1001\n", "replicas: \"1001\" is not valid" },
        /* env */
        { API GPU_OK "  env: [A]\n", "apis.yaml:4: a: env: expected a mapping of names to values such as {MODEL: iris}, got a list" },
        { API GPU_OK "  env: {1A: x}\n", "env: \"1A\" is not a valid variable name" },
        { API GPU_OK "  env: {A-B: x}\n", "env: \"A-B\" is not a valid variable name" },
        { API GPU_OK "  env: {[A]: x}\n", "env: \"a list\" is not a valid variable name" },
        { API GPU_OK "  env: {A: x, A: y}\n", "env.A: given twice" },
        { API GPU_OK "  env: {A: [1]}\n", "env.A: expected a value such as \"value\" (or \"\" for empty), got a list" },
        { API GPU_OK "  env:\n    A:\n", "apis.yaml:5: a: env.A: expected a value such as \"value\" (or \"\" for empty), got nothing" },
        /* compute */
        { API "  compute: 300m\n", "apis.yaml:3: a: compute: expected a mapping such as {gpu: 300m}, got a string" },
        { API "  compute:\n    gpu: 1500m\n", "apis.yaml:4: a: compute.gpu: \"1500m\" is not a valid GPU quantity (above one GPU only whole GPUs are allowed): below one GPU use 1m..999m (or 0.001..0.999); from one GPU up use whole GPUs (1, 2, 1000m)" },
        { API "  compute: {gpu: 0}\n", "a: compute.gpu: \"0\" is not a valid GPU quantity (it is zero)" },
        { API "  compute: {gpu: -300m}\n", "(it is negative)" },
        { API "  compute: {gpu: 0.0005}\n", "(finer than 1m" },
        { API "  compute: {gpu: 300M}\n", "(more than 8 GPUs, the most one slice holds)" },
        { API "  compute: {gpu: 300x}\n", "(unknown suffix \"x\")" },
        { API "  compute: {gpu: [1]}\n", "compute.gpu: expected a value such as 300m, got a list" },
        { API "  compute: {gpu: }\n", "compute.gpu: expected a value such as 300m, got nothing" },
        { API "  compute: {gpu: \" 1\"}\n", "compute.gpu: \" 1\" is not a valid GPU quantity (it contains white space)" },
        { API "  compute: {gpu: 300m, gpu_memory: 6Gb}\n", "a: compute.gpu_memory: \"6Gb\" is not a valid memory quantity (unknown suffix \"Gb\")" },
        { API "  compute: {gpu: 300m, gpu_memory: 0}\n", "compute.gpu_memory: \"0\" is not a valid memory quantity (it is zero)" },
        { API "  compute: {gpu: 300m, gpu_memory: 3000}\n", "apis.yaml:3: a: compute.gpu_memory: 3000 is 3000 bytes, below the 64Mi minimum; did you mean 3000Mi?" },
        { API "  compute: {gpu: 300m, gpu_memory: \"3000\"}\n", "compute.gpu_memory: 3000 is 3000 bytes, below the 64Mi minimum; did you mean 3000Mi?" },
        { API "  compute: {gpu: 300m, gpu_memory: 63Mi}\n", "compute.gpu_memory: 63Mi is 66060288 bytes, below the 64Mi minimum" },
        { API "  compute: {gpu: 300m, mem: 512}\n", "compute.mem: 512 is 512 bytes, below the 64Mi minimum; did you mean 512Mi?" },
        { API "  compute: {gpu: 300m, mem: 100m}\n", "compute.mem: \"100m\" is not a valid memory quantity (m means milli" },
        { API "  compute: {gpu: 300m, mem: 16Ei}\n", "compute.mem: \"16Ei\" is not a valid memory quantity (it is larger than 16Ei)" },
        { API "  compute: {gpu: 300m, cpu: 0.0001}\n", "compute.cpu: \"0.0001\" is not a valid CPU quantity (finer than 1m" },
        { API "  compute: {gpu: 300m, policy: fair}\n", "compute.policy: \"fair\" is not a policy: use share" },
        { API "  compute: {gpu: 300m, overuse: stop}\n", "apis.yaml:3: a: compute.overuse: \"stop\" is not an over-use policy: use one of report, kill, evict" },
        { API "  compute: {gpu: 300m, overuse: default}\n", "compute.overuse: \"default\" is not an over-use policy" },
        { API "  compute: {gpu: 300m, overuse: Kill}\n", "compute.overuse: \"Kill\" is not an over-use policy" },
        { API "  compute: {gpu: 300m, overuse: [kill]}\n", "compute.overuse: expected a value such as kill, got a list" },
        { API "  compute: {gpu: 300m, overuse: kill, overuse: report}\n", "overuse" },
        { API "  compute:\n    gpu: 1\n    gpu_memory: 6Gi\n", "apis.yaml:5: a: compute.gpu_memory: only for slices below one GPU" },
        { API "  compute: {gpu: 2, policy: cap}\n", "compute.policy: only for slices below one GPU" },
};

static void test_bad(void **state)
{
        (void)state;
        for (size_t i = 0; i < GS_ARRAY_SIZE(bad_cases); i++) {
                struct gs_spec *spec = (struct gs_spec *)0x1;
                struct gs_error *err = NULL;
                int r = load(bad_cases[i].yaml, &spec, &err);
                if (r != -EINVAL || !err || !strstr(err->msg, bad_cases[i].want))
                        print_error("case %zu: r=%d\n  want: %s\n  got:  %s\n", i, r,
                                    bad_cases[i].want, gs_error_msg(err));
                assert_int_equal(r, -EINVAL);
                assert_non_null(err);
                assert_int_equal(err->code, -EINVAL);
                assert_non_null(strstr(err->msg, bad_cases[i].want));
                assert_ptr_equal(spec, (struct gs_spec *)0x1); /* untouched */
                gs_error_free(err);
        }
}

static void test_exact_message(void **state)
{
        (void)state;
        struct gs_spec *spec = NULL;
        struct gs_error *err = NULL;
        assert_int_equal(load("- name: iris-classifier\n"
                              "  command: [\"./serve\"]\n"
                              "  compute:\n"
                              "    gpu: 1500m\n",
                              &spec, &err),
                         -EINVAL);
        assert_string_equal(err->msg,
                            "apis.yaml:4: iris-classifier: compute.gpu: \"1500m\" is not a valid "
                            "GPU quantity (above one GPU only whole GPUs are allowed): below one "
                            "GPU use 1m..999m (or 0.001..0.999); from one GPU up use whole GPUs "
                            "(1, 2, 1000m), at most 8");
        gs_error_free(err);
}

/* A string of n APIs a0, a1, ... */
static char *many_apis(size_t n)
{
        size_t cap = n * 64 + 1, len = 0;
        char *s = malloc(cap);
        assert_non_null(s);
        for (size_t i = 0; i < n; i++)
                len += (size_t)snprintf(s + len, cap - len,
                                        "- {name: a%zu, image: x, compute: {gpu: 1m}}\n", i);
        return s;
}

static void test_limits(void **state)
{
        (void)state;
        struct gs_spec *spec = NULL;
        struct gs_error *err = NULL;

        char *s = many_apis(GS_SPEC_MAX_APIS);
        assert_int_equal(load(s, &spec, &err), 0);
        assert_int_equal(spec->n_apis, GS_SPEC_MAX_APIS);
        assert_non_null(gs_spec_find(spec, "a255"));
        spec = gs_spec_free(spec);
        free(s);

        s = many_apis(GS_SPEC_MAX_APIS + 1);
        assert_int_equal(load(s, &spec, &err), -EINVAL);
        assert_string_equal(err->msg, "apis.yaml:1: more than 256 APIs in one file");
        err = gs_error_free(err);
        free(s);

        /* Over 1 MiB: rejected before parsing. */
        size_t big = GS_SPEC_MAX_BYTES + 1;
        s = malloc(big);
        assert_non_null(s);
        memset(s, '#', big);
        assert_int_equal(gs_spec_load_buffer("big.yaml", s, big, &spec, &err), -EFBIG);
        assert_non_null(strstr(err->msg, "big.yaml: larger than the 1048576 bytes"));
        err = gs_error_free(err);
        free(s);

        /* A long flow list nests nothing, but the node count stays bounded. */
        size_t k = (GS_SPEC_MAX_BYTES - 16) / 2;
        s = malloc(GS_SPEC_MAX_BYTES);
        assert_non_null(s);
        size_t len = 0;
        memcpy(s, "- command: [", 12);
        len = 12;
        for (size_t i = 0; i < k; i++, len += 2)
                memcpy(s + len, "x,", 2);
        memcpy(s + len, "x]\n", 3);
        len += 3;
        assert_true(len <= GS_SPEC_MAX_BYTES);
        int r = gs_spec_load_buffer("wide.yaml", s, len, &spec, &err);
        assert_int_equal(r, -EINVAL);
        assert_non_null(strstr(err->msg, "wide.yaml:1:"));
        assert_non_null(strstr(err->msg, "too many values"));
        err = gs_error_free(err);
        free(s);

        /* An empty buffer may be NULL. */
        assert_int_equal(gs_spec_load_buffer("e.yaml", NULL, 0, &spec, &err), -EINVAL);
        assert_string_equal(err->msg, "e.yaml: the file is empty: expected a list of APIs, each "
                                      "starting with \"- name:\"");
        err = gs_error_free(err);

        /* err may be NULL. */
        assert_int_equal(load("[]", &spec, NULL), -EINVAL);
}

static char *write_temp(const char *content, size_t len)
{
        char *path = strdup("/tmp/gs-test-spec-XXXXXX");
        assert_non_null(path);
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, content, len), (ssize_t)len);
        close(fd);
        return path;
}

static void test_file(void **state)
{
        (void)state;
        struct gs_spec *spec = NULL;
        struct gs_error *err = NULL;

        char *path = write_temp(full_spec, strlen(full_spec));
        assert_int_equal(gs_spec_load_file(path, &spec, &err), 0);
        assert_int_equal(spec->n_apis, 2);
        assert_string_equal(spec->source, path);
        spec = gs_spec_free(spec);
        unlink(path);
        free(path);

        const char bad[] = "- name: a\n  command: [x]\n  compute: {gpu: 1.5}\n";
        path = write_temp(bad, strlen(bad));
        assert_int_equal(gs_spec_load_file(path, &spec, &err), -EINVAL);
        char want[128];
        snprintf(want, sizeof(want), "%s:3: a: compute.gpu: \"1.5\" is not", path);
        assert_non_null(strstr(err->msg, want));
        err = gs_error_free(err);
        unlink(path);
        free(path);

        assert_int_equal(gs_spec_load_file("/nonexistent/apis.yaml", &spec, &err), -ENOENT);
        assert_string_equal(err->msg, "/nonexistent/apis.yaml: cannot open: No such file or directory");
        err = gs_error_free(err);

        assert_int_equal(gs_spec_load_file("/tmp", &spec, &err), -EISDIR);
        err = gs_error_free(err);

        /* A big regular file is refused from its size. */
        path = write_temp("#", 1);
        assert_int_equal(truncate(path, GS_SPEC_MAX_BYTES + 1), 0);
        assert_int_equal(gs_spec_load_file(path, &spec, &err), -EFBIG);
        err = gs_error_free(err);
        unlink(path);
        free(path);

        /* A device that never ends is cut at the limit. */
        assert_int_equal(gs_spec_load_file("/dev/zero", &spec, &err), -EFBIG);
        err = gs_error_free(err);
        assert_null(spec);
}

/* Fail the Nth allocation for every N until loading succeeds: each failure
 * is a clean -ENOMEM, nothing leaks (ASan checks), nothing is returned. */
static void test_alloc_failure(void **state)
{
        (void)state;
        char *path = write_temp(full_spec, strlen(full_spec));
        for (int file = 0; file < 2; file++) {
                long n;
                for (n = 0; n < 100000; n++) {
                        struct gs_spec *spec = NULL;
                        struct gs_error *err = NULL;
                        gs_alloc_fail_after(n);
                        int r = file ? gs_spec_load_file(path, &spec, &err)
                                     : load(full_spec, &spec, &err);
                        gs_alloc_fail_after(-1);
                        if (r == 0) {
                                assert_non_null(spec);
                                assert_null(err);
                                assert_int_equal(spec->n_apis, 2);
                                gs_spec_free(spec);
                                break;
                        }
                        if (r != -ENOMEM)
                                print_error("n=%ld r=%d %s\n", n, r, gs_error_msg(err));
                        assert_int_equal(r, -ENOMEM);
                        assert_null(spec);
                        assert_non_null(err);
                        assert_int_equal(err->code, -ENOMEM);
                        gs_error_free(err);
                }
                assert_true(n > 20); /* the loader really allocates through gs_malloc */
        }
        unlink(path);
        free(path);
}

static void test_dns_label(void **state)
{
        (void)state;
        assert_true(gs_dns_label_valid("a"));
        assert_true(gs_dns_label_valid("0"));
        assert_true(gs_dns_label_valid("iris-classifier-2"));
        assert_false(gs_dns_label_valid(""));
        assert_false(gs_dns_label_valid("A"));
        assert_false(gs_dns_label_valid("a.b"));
        assert_false(gs_dns_label_valid("-a"));
        assert_false(gs_dns_label_valid("a-"));
        assert_false(gs_dns_label_valid("é"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_full),
                cmocka_unit_test(test_good_variants),
                cmocka_unit_test(test_bad),
                cmocka_unit_test(test_exact_message),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_file),
                cmocka_unit_test(test_alloc_failure),
                cmocka_unit_test(test_dns_label),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
