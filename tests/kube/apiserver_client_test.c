/* SPDX-License-Identifier: Apache-2.0 */
/* Drives the API-server client (src/kube/apiserver.h) against the stand-in
 * API server (tests/kube/apiserver_sim.py); tests/kube/test_apiserver.py
 * runs it. Usage:
 *
 *   apiserver_client_test CONFIG SCENARIO [ARGS]
 *   CONFIG:  --server URL [--ca FILE] [--token-file FILE] [--token TOKEN]
 *          | --kubeconfig FILE [--context NAME]
 *          | --in-cluster SA_DIR
 *          [--timeout-ms N]
 *   SCENARIO:
 *     crud NODE            create, get, list, replace, patch, delete a ResourceSlice
 *     invalid NODE         objects the server refuses: 422 and 400, nothing stored
 *     conflict NODE        a replace with a stale resourceVersion: 409 Conflict
 *     rotate PATH          GET, print "ready", wait for a line on stdin, GET again
 *     call METHOD PATH [JSON]  one apiserver_request; prints one JSON line
 *                          {"rc", "errno", "status", "ms", "error", "body"}
 *
 * Scenarios print "ok: ..." per step, "FAIL: ..." and exit 1 on a wrong
 * result; a config that does not load prints "config-error: MSG", exit 3. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apiserver.h"
#include "log.h"
#include "number.h"

#define SLICES "/apis/resource.k8s.io/v1/resourceslices"

static int failures;

static void check(bool ok, const char *fmt, ...) GS_PRINTF(2, 3);
static void check(bool ok, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        printf("%s: ", ok ? "ok" : "FAIL");
        vprintf(fmt, ap);
        printf("\n");
        fflush(stdout);
        va_end(ap);
        if (!ok)
                failures++;
}

static const char *emsg(const struct gs_error *e)
{
        return e ? gs_error_msg(e) : "no error";
}

static void log_sink(void *ctx, enum gs_log_level level, const char *msg)
{
        fprintf(stderr, "[%s] %s\n", gs_log_level_name(level), msg);
}

static unsigned long long now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (unsigned long long)ts.tv_sec * 1000u + (unsigned long long)ts.tv_nsec / 1000000u;
}

static const char *errno_name(int rc)
{
        static const struct {
                int e;
                const char *name;
        } names[] = { { 0, "0" },
                      { -ENOENT, "ENOENT" },
                      { -EEXIST, "EEXIST" },
                      { -ESTALE, "ESTALE" },
                      { -EINVAL, "EINVAL" },
                      { -EACCES, "EACCES" },
                      { -EPERM, "EPERM" },
                      { -EBUSY, "EBUSY" },
                      { -EIO, "EIO" },
                      { -EPROTO, "EPROTO" },
                      { -ETIMEDOUT, "ETIMEDOUT" },
                      { -ECONNREFUSED, "ECONNREFUSED" },
                      { -ECONNRESET, "ECONNRESET" },
                      { -EHOSTUNREACH, "EHOSTUNREACH" },
                      { -EFBIG, "EFBIG" },
                      { -EBADMSG, "EBADMSG" },
                      { -ENOMEM, "ENOMEM" } };
        for (size_t i = 0; i < GS_ARRAY_SIZE(names); i++)
                if (names[i].e == rc)
                        return names[i].name;
        return "other";
}

/* A ResourceSlice as the DRA driver publishes one GPU: consumable milli and
 * memory capacities (KEP-5075) on a device shared by many claims. */
static json_t *slice_new(const char *name, const char *node, long long generation)
{
        return json_pack(
                "{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:s, s:{s:s, s:I, s:i}, s:s, s:[{s:s, s:b, "
                "s:{s:{s:s}, s:{s:s}, s:{s:i}, s:{s:s}}, "
                "s:{s:{s:s, s:{s:s, s:{s:s, s:s, s:s}}}, s:{s:s, s:{s:s, s:{s:s, s:s, s:s}}}}}]}}",
                "apiVersion", "resource.k8s.io/v1", "kind", "ResourceSlice", "metadata", "name",
                name, "labels", "gpu.gpuslice.io/node", node, "spec", "driver", "gpu.gpuslice.io",
                "pool", "name", node, "generation", (json_int_t)generation, "resourceSliceCount", 1,
                "nodeName", node, "devices", "name", "gpu-0", "allowMultipleAllocations", 1,
                "attributes", "uuid", "string", "GPU-0c5a3e9e-8f1b-4e2a-9d8e-123456789abc",
                "productName", "string", "NVIDIA H100 80GB HBM3", "index", "int", 0,
                "gpu.gpuslice.io/computeCapability", "version", "9.0.0", "capacity", "milli",
                "value", "1000", "requestPolicy", "default", "1000", "validRange", "min", "1",
                "max", "1000", "step", "1", "memory", "value", "80Gi", "requestPolicy", "default",
                "80Gi", "validRange", "min", "2Mi", "max", "80Gi", "step", "2Mi");
}

static const char *str_at(const json_t *o, const char *a, const char *b)
{
        return json_string_value(json_object_get(json_object_get(o, a), b));
}

static json_t *device0(json_t *slice)
{
        return json_array_get(json_object_get(json_object_get(slice, "spec"), "devices"), 0);
}

static void report(const char *what, int rc, long status, struct gs_error *e)
{
        printf("%s: rc=%s status=%ld error: %s\n", what, errno_name(rc), status,
               e ? gs_error_msg(e) : "(none)");
        fflush(stdout);
}

static int scenario_crud(struct apiserver *a, const char *node)
{
        char name[128], path[256];
        snprintf(name, sizeof(name), "%s-gpu.gpuslice.io", node);
        snprintf(path, sizeof(path), SLICES "/%s", name);
        json_t *s = slice_new(name, node, 1), *got = NULL;
        struct gs_error *e = NULL;
        int r = apiserver_create(a, SLICES, s, &got, &e);
        check(r == 0 && str_at(got, "metadata", "uid"), "create: %s", emsg(e));
        e = gs_error_free(e);
        char rv1[64] = "";
        snprintf(rv1, sizeof(rv1), "%s", got ? str_at(got, "metadata", "resourceVersion") : "");
        check(json_integer_value(json_object_get(json_object_get(got, "metadata"), "generation")) ==
                      1,
              "created with generation 1, resourceVersion %s", rv1);
        json_decref(got);
        got = NULL;

        long st = 0;
        r = apiserver_request(a, "POST", SLICES, s, &st, NULL, &e);
        check(r == -EEXIST && st == 409, "create again: rc %d status %ld", r, st);
        report("create-again", r, st, e);
        e = gs_error_free(e);

        r = apiserver_get(a, path, &got, &e);
        check(r == 0 && strcmp(str_at(got, "metadata", "resourceVersion"), rv1) == 0, "get: %s",
              emsg(e));
        e = gs_error_free(e);

        char fsel[160];
        snprintf(fsel, sizeof(fsel), "spec.nodeName=%s", node);
        json_t *list = NULL;
        r = apiserver_list(a, SLICES, "gpu.gpuslice.io/node", fsel, &list, &e);
        check(r == 0 && json_array_size(json_object_get(list, "items")) == 1,
              "list by field and label selector: %s", emsg(e));
        e = gs_error_free(e);
        json_decref(list);
        list = NULL;
        r = apiserver_list(a, SLICES, NULL, "spec.nodeName=elsewhere", &list, &e);
        check(r == 0 && json_array_size(json_object_get(list, "items")) == 0,
              "list for another node is empty: %s", emsg(e));
        e = gs_error_free(e);
        json_decref(list);

        /* A change: bump the pool generation, as the driver does. */
        json_t *pool = json_object_get(json_object_get(got, "spec"), "pool");
        json_object_set_new(pool, "generation", json_integer(2));
        json_object_set_new(json_object_get(device0(got), "attributes"), "driverVersion",
                            json_pack("{s:s}", "version", "0.1.0"));
        json_t *put = NULL;
        r = apiserver_replace(a, path, got, &put, &e);
        check(r == 0 &&
                      json_integer_value(json_object_get(json_object_get(put, "metadata"),
                                                         "generation")) == 2 &&
                      strcmp(str_at(put, "metadata", "resourceVersion"), rv1) != 0,
              "replace bumps generation to 2: %s", emsg(e));
        e = gs_error_free(e);
        json_decref(put);

        json_t *patch =
                json_pack("{s:{s:{s:s}}}", "metadata", "labels", "gpu.gpuslice.io/epoch", "7");
        json_t *patched = NULL;
        r = apiserver_patch_merge(a, path, patch, &patched, &e);
        check(r == 0 &&
                      strcmp(str_at(json_object_get(patched, "metadata"), "labels",
                                    "gpu.gpuslice.io/epoch")
                                     ?: "",
                             "7") == 0 &&
                      json_integer_value(json_object_get(json_object_get(patched, "metadata"),
                                                         "generation")) == 2,
              "merge patch of a label keeps generation 2: %s", emsg(e));
        e = gs_error_free(e);
        json_decref(patch);
        json_decref(patched);

        r = apiserver_delete(a, path, &e);
        check(r == 0, "delete: %s", emsg(e));
        e = gs_error_free(e);
        r = apiserver_request(a, "GET", path, NULL, &st, NULL, &e);
        check(r == -ENOENT && st == 404, "get after delete: 404");
        report("get-deleted", r, st, e);
        e = gs_error_free(e);
        r = apiserver_delete(a, path, &e);
        check(r == -ENOENT, "delete again: -ENOENT");
        e = gs_error_free(e);
        json_decref(got);
        json_decref(s);
        return failures ? 1 : 0;
}

/* Each of these is refused by the server; prints the messages. */
static int scenario_invalid(struct apiserver *a, const char *node)
{
        static const struct {
                const char *what;
                int rc;
                long status;
        } cases[] = {
                { "missing-driver", -EINVAL, 422 },      { "policy-without-multi", -EINVAL, 422 },
                { "unknown-field", -EINVAL, 400 },       { "wrong-type", -EINVAL, 400 },
                { "two-node-selections", -EINVAL, 422 }, { "bad-step", -EINVAL, 422 },
        };
        for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
                char name[128];
                snprintf(name, sizeof(name), "%s-bad-%zu", node, i);
                json_t *s = slice_new(name, node, 1);
                json_t *spec = json_object_get(s, "spec"), *dev = device0(s);
                switch (i) {
                case 0: json_object_del(spec, "driver"); break;
                case 1: json_object_set_new(dev, "allowMultipleAllocations", json_false()); break;
                case 2: json_object_set_new(dev, "sharable", json_true()); break;
                case 3:
                        json_object_set_new(json_object_get(spec, "pool"), "generation",
                                            json_string("1"));
                        break;
                case 4: json_object_set_new(spec, "allNodes", json_true()); break;
                case 5: {
                        /* (80Gi - 2Mi) is not a multiple of 5Mi. */
                        json_t *mem = json_object_get(json_object_get(dev, "capacity"), "memory");
                        json_t *pol = json_object_get(mem, "requestPolicy");
                        json_string_set(json_object_get(json_object_get(pol, "validRange"), "step"),
                                        "5Mi");
                        break;
                }
                }
                long st = 0;
                struct gs_error *e = NULL;
                char path[256];
                snprintf(path, sizeof(path), SLICES "?fieldValidation=Strict");
                int r = apiserver_request(a, "POST", path, s, &st, NULL, &e);
                check(r == cases[i].rc && st == cases[i].status, "%s refused: rc %d status %ld",
                      cases[i].what, r, st);
                report(cases[i].what, r, st, e);
                gs_error_free(e);
                json_decref(s);
                snprintf(path, sizeof(path), SLICES "/%s", name);
                e = NULL;
                r = apiserver_get(a, path, NULL, &e);
                check(r == -ENOENT, "%s: nothing stored", cases[i].what);
                gs_error_free(e);
        }
        return failures ? 1 : 0;
}

static int scenario_conflict(struct apiserver *a, const char *node)
{
        char name[128], path[256];
        snprintf(name, sizeof(name), "%s-conflict", node);
        snprintf(path, sizeof(path), SLICES "/%s", name);
        json_t *s = slice_new(name, node, 1), *v1 = NULL, *v2 = NULL;
        struct gs_error *e = NULL;
        int r = apiserver_create(a, SLICES, s, &v1, &e);
        check(r == 0, "create: %s", emsg(e));
        e = gs_error_free(e);
        json_t *copy = json_deep_copy(v1);
        json_object_set_new(json_object_get(json_object_get(v1, "spec"), "pool"), "generation",
                            json_integer(2));
        r = apiserver_replace(a, path, v1, &v2, &e);
        check(r == 0, "replace with the current resourceVersion: %s", emsg(e));
        e = gs_error_free(e);
        /* Another writer's view: the resourceVersion before that change. */
        json_object_set_new(json_object_get(json_object_get(copy, "spec"), "pool"), "generation",
                            json_integer(3));
        long st = 0;
        r = apiserver_request(a, "PUT", path, copy, &st, NULL, &e);
        check(r == -ESTALE && st == 409, "replace with a stale resourceVersion: rc %d status %ld",
              r, st);
        report("stale-replace", r, st, e);
        e = gs_error_free(e);
        r = apiserver_delete(a, path, &e);
        check(r == 0, "delete: %s", emsg(e));
        gs_error_free(e);
        json_decref(s);
        json_decref(v1);
        json_decref(v2);
        json_decref(copy);
        return failures ? 1 : 0;
}

static int scenario_rotate(struct apiserver *a, const char *path)
{
        struct gs_error *e = NULL;
        int r = apiserver_get(a, path, NULL, &e);
        check(r == 0, "GET before the rotation: %s", emsg(e));
        e = gs_error_free(e);
        printf("ready\n");
        fflush(stdout);
        char line[64];
        if (!fgets(line, sizeof(line), stdin))
                return 1;
        r = apiserver_get(a, path, NULL, &e);
        check(r == 0, "GET after the rotation: %s", emsg(e));
        gs_error_free(e);
        return failures ? 1 : 0;
}

static int scenario_call(struct apiserver *a, const char *method, const char *path,
                         const char *body)
{
        json_t *b = NULL, *got = NULL;
        if (body && !(b = json_loads(body, 0, NULL))) {
                fprintf(stderr, "call: the body is not JSON\n");
                return 2;
        }
        long st = 0;
        struct gs_error *e = NULL;
        unsigned long long t0 = now_ms();
        int r = apiserver_request(a, method, path, b, &st, &got, &e);
        unsigned long long ms = now_ms() - t0;
        json_t *out = json_pack("{s:i, s:s, s:I, s:I, s:s?, s:o?}", "rc", r, "errno", errno_name(r),
                                "status", (json_int_t)st, "ms", (json_int_t)ms, "error",
                                e ? gs_error_msg(e) : NULL, "body", got);
        char *line = json_dumps(out, JSON_COMPACT);
        printf("%s\n", line ? line : "{}");
        free(line);
        json_decref(out);
        json_decref(b);
        gs_error_free(e);
        return 0;
}

static int load_config(int *i, int argc, char **argv, struct apiserver_config *cfg)
{
        struct gs_error *e = NULL;
        int r = 0;
        for (; *i < argc && strncmp(argv[*i], "--", 2) == 0; (*i)++) {
                const char *opt = argv[*i], *val = *i + 1 < argc ? argv[*i + 1] : NULL;
                if (!val)
                        break;
                (*i)++;
                if (strcmp(opt, "--server") == 0) {
                        cfg->server = val;
                } else if (strcmp(opt, "--ca") == 0) {
                        cfg->ca_file = val;
                } else if (strcmp(opt, "--token-file") == 0) {
                        cfg->token_file = val;
                } else if (strcmp(opt, "--token") == 0) {
                        cfg->token = val;
                } else if (strcmp(opt, "--timeout-ms") == 0) {
                        uint64_t v = 0;
                        if (gs_u64_parse_str(val, 600000, &v) < 0)
                                return -EINVAL;
                        cfg->timeout_ms = (unsigned)v;
                } else if (strcmp(opt, "--kubeconfig") == 0) {
                        const char *ctx = NULL;
                        if (*i + 2 < argc && strcmp(argv[*i + 1], "--context") == 0) {
                                ctx = argv[*i + 2];
                                *i += 2;
                        }
                        r = apiserver_config_from_kubeconfig(val, ctx, cfg, &e);
                } else if (strcmp(opt, "--in-cluster") == 0) {
                        r = apiserver_config_in_cluster(val, cfg, &e);
                } else {
                        fprintf(stderr, "unknown option %s\n", opt);
                        return -EINVAL;
                }
                if (r < 0) {
                        printf("config-error: %s\n", emsg(e));
                        gs_error_free(e);
                        return r;
                }
        }
        return 0;
}

int main(int argc, char **argv)
{
        gs_log_set_sink(log_sink, NULL);
        if (getenv("GS_TEST_DEBUG"))
                gs_log_max_level = GS_LOG_DEBUG;
        struct apiserver_config cfg = { 0 };
        int i = 1;
        int r = load_config(&i, argc, argv, &cfg);
        if (r < 0) {
                apiserver_config_done(&cfg);
                return 3;
        }
        if (i >= argc) {
                fprintf(stderr, "usage: see the top of apiserver_client_test.c\n");
                apiserver_config_done(&cfg);
                return 2;
        }
        struct apiserver *a = NULL;
        struct gs_error *e = NULL;
        if (apiserver_new(&cfg, &a, &e) < 0) {
                printf("config-error: %s\n", emsg(e));
                gs_error_free(e);
                apiserver_config_done(&cfg);
                return 3;
        }
        apiserver_config_done(&cfg);
        const char *sc = argv[i], *arg1 = i + 1 < argc ? argv[i + 1] : "node-a";
        if (strcmp(sc, "crud") == 0)
                r = scenario_crud(a, arg1);
        else if (strcmp(sc, "invalid") == 0)
                r = scenario_invalid(a, arg1);
        else if (strcmp(sc, "conflict") == 0)
                r = scenario_conflict(a, arg1);
        else if (strcmp(sc, "rotate") == 0)
                r = scenario_rotate(a, arg1);
        else if (strcmp(sc, "call") == 0 && i + 2 < argc)
                r = scenario_call(a, argv[i + 1], argv[i + 2], i + 3 < argc ? argv[i + 3] : NULL);
        else {
                fprintf(stderr, "unknown scenario %s\n", sc);
                r = 2;
        }
        apiserver_free(a);
        return r;
}
