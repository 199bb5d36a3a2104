/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA driver's reading of a ResourceClaim (dra_claim.c) and the
 * ResourceSlice it offers (dra_slices.c): claims shaped as the scheduler
 * writes them (resource.k8s.io/v1: status.allocation.devices.results with
 * shareID and consumedCapacity, config with opaque parameters), and the
 * slice's capacities after local and device-plugin slices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "dra_claim.h"
#include "dra_slices.h"
#include "node.h"
#include "quantity.h"

#define UID "5c1d0f3e-7a2b-4c9d-8e1f-2a3b4c5d6e7f"
#define DRV "gpu.gpuslice.io"

static const char claim_fmt[] =
        "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
        "\"metadata\":{\"name\":\"c\",\"namespace\":\"ml\",\"uid\":\"%s\"},"
        "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{"
        "\"deviceClassName\":\"gpu.gpuslice.io\",\"capacity\":{\"requests\":{\"milli\":\"300\","
        "\"memory\":\"3Gi\"}}}}]}},"
        "\"status\":{\"allocation\":{\"devices\":{\"results\":["
        "{\"request\":\"gpu\",\"driver\":\"gpu.gpuslice.io\",\"pool\":\"node-a\","
        "\"device\":\"gpu-0001\",\"shareID\":\"9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a\","
        "\"consumedCapacity\":{\"milli\":\"%s\",\"memory\":\"%s\"}},"
        "{\"request\":\"other\",\"driver\":\"example.com/nic\",\"pool\":\"node-a\","
        "\"device\":\"nic-0\"}]%s}}}}";

static int parse(const char *uid_in_claim, const char *milli, const char *memory,
                 const char *config, struct dra_claim_alloc *a)
{
        char buf[4096];
        snprintf(buf, sizeof(buf), claim_fmt, uid_in_claim, milli, memory, config);
        struct gs_error *err = NULL;
        int r = dra_claim_parse(buf, strlen(buf), UID, DRV, "node-a", a, &err);
        if (r < 0)
                print_message("claim refused: %s\n", gs_error_msg(err));
        gs_error_free(err);
        return r;
}

static const char cfg_cap[] =
        ",\"config\":[{\"source\":\"FromClass\",\"opaque\":{\"driver\":\"gpu.gpuslice.io\","
        "\"parameters\":{\"apiVersion\":\"gpu.gpuslice.io/v1alpha1\",\"kind\":\"SliceConfig\","
        "\"policy\":\"share\"}}},{\"source\":\"FromClaim\",\"requests\":[\"gpu\"],\"opaque\":{"
        "\"driver\":\"gpu.gpuslice.io\",\"parameters\":{\"apiVersion\":\"gpu.gpuslice.io/v1alpha1\","
        "\"kind\":\"SliceConfig\",\"policy\":\"cap\"}}}]";

static void results_of_this_driver(void **state)
{
        (void)state;
        struct dra_claim_alloc a;
        assert_int_equal(parse(UID, "300", "3Gi", "", &a), 0);
        assert_int_equal(a.n_shares, 1); /* the NIC's result is another driver's */
        assert_string_equal(a.shares[0].request, "gpu");
        assert_string_equal(a.shares[0].device, "gpu-0001");
        assert_string_equal(a.shares[0].share_id, "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a");
        assert_int_equal(a.shares[0].milli, 300);
        assert_int_equal(a.shares[0].memory, 3ull << 30);
        assert_false(a.shares[0].has_policy);
        /* Canonical quantities as the API server writes them. */
        assert_int_equal(parse(UID, "1k", "3221225472", "", &a), 0);
        assert_int_equal(a.shares[0].milli, 1000);
        assert_int_equal(a.shares[0].memory, 3ull << 30);
        assert_int_equal(parse(UID, "300", "0", "", &a), 0);
        assert_int_equal(a.shares[0].memory, 0); /* none asked: the node's default */
        /* A plain number is bytes: below 64Mi it is refused (issue 15). */
        assert_int_equal(parse(UID, "300", "3000", "", &a), -EINVAL);
        assert_int_equal(parse(UID, "300", "64Mi", "", &a), 0);
}

static void claim_config_over_class_config(void **state)
{
        (void)state;
        struct dra_claim_alloc a;
        assert_int_equal(parse(UID, "300", "3Gi", cfg_cap, &a), 0);
        assert_true(a.shares[0].has_policy);
        assert_int_equal(a.shares[0].policy, GS_POLICY_CAP);
}

/* overuse in the opaque config: the claim's over the class's, per field
 * (a later config that names only the policy keeps the over-use policy). */
static void overuse_from_config(void **state)
{
        (void)state;
        struct dra_claim_alloc a;
        assert_int_equal(parse(UID, "300", "3Gi", "", &a), 0);
        assert_int_equal(a.shares[0].overuse, GS_OVERUSE_DEFAULT);
        assert_int_equal(parse(UID, "300", "3Gi", cfg_cap, &a), 0);
        assert_int_equal(a.shares[0].overuse, GS_OVERUSE_DEFAULT);
        static const char cfg[] =
                ",\"config\":[{\"source\":\"FromClass\",\"opaque\":{\"driver\":\"gpu.gpuslice.io\","
                "\"parameters\":{\"apiVersion\":\"gpu.gpuslice.io/v1alpha1\",\"kind\":\"SliceConfig\","
                "\"overuse\":\"report\"}}},{\"source\":\"FromClaim\",\"requests\":[\"gpu\"],"
                "\"opaque\":{\"driver\":\"gpu.gpuslice.io\",\"parameters\":{\"apiVersion\":"
                "\"gpu.gpuslice.io/v1alpha1\",\"kind\":\"SliceConfig\",\"overuse\":\"evict\"}}},"
                "{\"source\":\"FromClaim\",\"opaque\":{\"driver\":\"gpu.gpuslice.io\","
                "\"parameters\":{\"apiVersion\":\"gpu.gpuslice.io/v1alpha1\",\"kind\":"
                "\"SliceConfig\",\"policy\":\"cap\"}}}]";
        assert_int_equal(parse(UID, "300", "3Gi", cfg, &a), 0);
        assert_int_equal(a.shares[0].overuse, GS_OVERUSE_EVICT);
        assert_true(a.shares[0].has_policy);
        assert_int_equal(a.shares[0].policy, GS_POLICY_CAP);
        static const char *const bad[] = { "\"stop\"", "\"default\"", "\"KILL\"", "1", "null" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char c[512];
                snprintf(c, sizeof(c),
                         ",\"config\":[{\"source\":\"FromClaim\",\"opaque\":{\"driver\":"
                         "\"gpu.gpuslice.io\",\"parameters\":{\"apiVersion\":"
                         "\"gpu.gpuslice.io/v1alpha1\",\"kind\":\"SliceConfig\",\"overuse\":%s}}}]",
                         bad[i]);
                char buf[4096];
                snprintf(buf, sizeof(buf), claim_fmt, UID, "300", "3Gi", c);
                struct gs_error *err = NULL;
                assert_int_equal(dra_claim_parse(buf, strlen(buf), UID, DRV, "node-a", &a, &err),
                                 -EINVAL);
                assert_non_null(strstr(gs_error_msg(err), "overuse"));
                assert_non_null(strstr(gs_error_msg(err), "report, kill, evict"));
                gs_error_free(err);
        }
}

static void refusals(void **state)
{
        (void)state;
        struct dra_claim_alloc a;
        /* Another claim of the same name (deleted and made again). */
        assert_int_equal(parse("00000000-0000-4000-8000-000000000000", "300", "3Gi", "", &a),
                         -ESTALE);
        assert_int_equal(parse(UID, "1001", "3Gi", "", &a), -EINVAL);
        assert_int_equal(parse(UID, "0", "3Gi", "", &a), -EINVAL);
        assert_int_equal(parse(UID, "300m", "3Gi", "", &a), -EINVAL);
        assert_int_equal(parse(UID, "300", "lots", "", &a), -EINVAL);
        static const char unknown[] =
                ",\"config\":[{\"source\":\"FromClaim\",\"opaque\":{\"driver\":\"gpu.gpuslice.io\","
                "\"parameters\":{\"apiVersion\":\"gpu.gpuslice.io/v1alpha1\",\"kind\":\"SliceConfig\","
                "\"policy\":\"cap\",\"memory\":\"1Gi\"}}}]";
        assert_int_equal(parse(UID, "300", "3Gi", unknown, &a), -EINVAL);
        static const char bad_policy[] =
                ",\"config\":[{\"source\":\"FromClaim\",\"opaque\":{\"driver\":\"gpu.gpuslice.io\","
                "\"parameters\":{\"apiVersion\":\"gpu.gpuslice.io/v1alpha1\",\"kind\":\"SliceConfig\","
                "\"policy\":\"turbo\"}}}]";
        assert_int_equal(parse(UID, "300", "3Gi", bad_policy, &a), -EINVAL);
        /* Not allocated yet. */
        struct gs_error *err = NULL;
        const char pending[] = "{\"metadata\":{\"uid\":\"" UID "\"},\"status\":{}}";
        assert_int_equal(dra_claim_parse(pending, strlen(pending), UID, DRV, "node-a", &a, &err),
                         -ENODATA);
        gs_error_free(err);
        err = NULL;
        assert_int_equal(dra_claim_parse("{", 1, UID, DRV, "node-a", &a, &err), -EINVAL);
        gs_error_free(err);
}

/* A node with two GPUs, a local 200m slice on GPU 0 and a device-plugin
 * pod of 100 units on GPU 1, and a DRA share of 300m on GPU 0. */
static void resource_slice(void **state)
{
        (void)state;
        char dir[] = "/tmp/gs-dra-XXXXXX";
        assert_non_null(mkdtemp(dir));
        struct node_config cfg = { .state_dir = dir };
        struct node *n = NULL;
        assert_int_equal(node_open(&cfg, &n, NULL), 0);
        struct gs_inventory inv = { .n_gpus = 2 };
        for (unsigned i = 0; i < 2; i++) {
                inv.gpus[i] = (struct gs_gpu){ .index = i, .memory_total = 16ull << 30,
                                               .healthy = true,
                                               .context_overhead = 256ull << 20 };
                snprintf(inv.gpus[i].uuid, sizeof(inv.gpus[i].uuid),
                         "GPU-0000000%u-AAAA-4BBB-8CCC-DDDDDDDDDDDD", i);
                snprintf(inv.gpus[i].name, sizeof(inv.gpus[i].name), "NVIDIA H100 (simgpu)");
        }
        inv.gpus[1].numa_known = true;
        inv.gpus[1].numa_node = 1;
        node_lock(n);
        node_set_inventory_locked(n, &inv);
        char name0[64];
        dra_device_name(&inv.gpus[0], name0, sizeof(name0));
        assert_string_equal(name0, "gpu-00000000-aaaa-4bbb-8ccc-dddddddddddd");
        assert_int_equal(dra_device_position_locked(n, name0), 0);
        struct gs_slice s;
        struct node_request local = { .kind = GS_SLICE_LOCAL, .milli = 200, .pid = getpid(),
                                      .uid = getuid(), .prefer = true, .preferred_gpu = 0,
                                      .allowed_gpus = 1 };
        assert_int_equal(node_slice_prepare_locked(n, &local, &s, NULL), 0);
        struct node_request pod = { .kind = GS_SLICE_KUBE, .milli = 100, .units = "1.0-99",
                                    .allowed_gpus = 2 };
        assert_int_equal(node_slice_prepare_locked(n, &pod, &s, NULL), 0);
        struct gs_slice_claim c = { .uid = UID, .request = "gpu" };
        struct node_request dra = { .kind = GS_SLICE_DRA, .milli = 300, .memory = 3ull << 30,
                                    .allowed_gpus = 1, .claim = &c };
        assert_int_equal(node_slice_prepare_locked(n, &dra, &s, NULL), 0);
        json_t *rs = dra_resource_slice_locked(n, DRV, "node-a", "node-uid-1", 7);
        node_unlock(n);
        assert_non_null(rs);
        char *text = json_dumps(rs, JSON_SORT_KEYS);
        const char *out = getenv("GS_DRA_SLICE_OUT"); /* for a schema check */
        FILE *f = out ? fopen(out, "w") : NULL;
        if (f) {
                fputs(text, f);
                fclose(f);
        }
        json_t *spec = json_object_get(rs, "spec");
        assert_string_equal(json_string_value(json_object_get(spec, "driver")), DRV);
        assert_string_equal(json_string_value(json_object_get(spec, "nodeName")), "node-a");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(spec, "pool"),
                                                            "generation")), 7);
        json_t *devs = json_object_get(spec, "devices");
        assert_int_equal(json_array_size(devs), 2);
        json_t *d0 = json_array_get(devs, 0), *d1 = json_array_get(devs, 1);
        assert_true(json_is_true(json_object_get(d0, "allowMultipleAllocations")));
        /* GPU 0: the local 200m is the node's; the DRA 300m the scheduler's. */
        json_t *m0 = json_object_get(json_object_get(d0, "capacity"), "milli");
        assert_string_equal(json_string_value(json_object_get(m0, "value")), "800");
        json_t *mem0 = json_object_get(json_object_get(d0, "capacity"), "memory");
        char want[32];
        snprintf(want, sizeof(want), "%llu",
                 (unsigned long long)((16ull << 30) - gs_default_memory_cap(200, 16ull << 30)));
        assert_string_equal(json_string_value(json_object_get(mem0, "value")), want);
        json_t *m1 = json_object_get(json_object_get(d1, "capacity"), "milli");
        assert_string_equal(json_string_value(json_object_get(m1, "value")), "900");
        assert_int_equal(json_integer_value(json_object_get(
                                 json_object_get(json_object_get(d1, "attributes"), "numaNode"),
                                 "int")),
                         1);
        json_t *owner = json_array_get(json_object_get(json_object_get(rs, "metadata"),
                                                       "ownerReferences"), 0);
        assert_string_equal(json_string_value(json_object_get(owner, "uid")), "node-uid-1");
        /* A lost GPU is not offered; the same state gives the same devices. */
        node_lock(n);
        json_t *again = dra_resource_slice_locked(n, DRV, "node-a", NULL, 8);
        inv.gpus[1].healthy = false;
        node_set_inventory_locked(n, &inv);
        json_t *lost = dra_resource_slice_locked(n, DRV, "node-a", NULL, 9);
        node_unlock(n);
        assert_true(dra_resource_slice_same_devices(rs, again));
        assert_false(dra_resource_slice_same_devices(rs, lost));
        assert_int_equal(json_array_size(json_object_get(json_object_get(lost, "spec"),
                                                         "devices")), 1);
        free(text);
        json_decref(rs);
        json_decref(again);
        json_decref(lost);
        node_close(n);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        assert_int_equal(system(cmd), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(results_of_this_driver),
                cmocka_unit_test(claim_config_over_class_config),
                cmocka_unit_test(overuse_from_config),
                cmocka_unit_test(refusals),
                cmocka_unit_test(resource_slice),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
