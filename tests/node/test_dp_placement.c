/* SPDX-License-Identifier: Apache-2.0 */
/* Device plugin (gs_kube) through the node layer and core's placement:
 * requests are built with the protobuf-c types the kubelet's messages are
 * generated to and fed to the handlers. Covers: the GPU GetPreferred-
 * Allocation packs units on is the GPU Allocate then places the slice on,
 * across fill states (binpack: the fullest GPU that fits, checked against
 * a model of the rule); whole GPUs; local slices shrinking what pods get
 * (-ENOSPC naming each GPU's free units and the local share); a refusal
 * naming both GPUs; all-or-nothing Allocate of several containers; and
 * dp_reconcile freeing a slice only after two unheld rounds past grace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deviceplugin_v1beta1.pb-c.h"
#include "device_plugin.h"
#include "node_edits.h"
#include "node_test_util.h"
#include "unit_ids.h"

/* An owned list of unit ids. */
struct ids {
        char **v;
        size_t n;
};

static void ids_add(struct ids *l, unsigned gpu, unsigned unit)
{
        l->v = realloc(l->v, (l->n + 1) * sizeof(char *));
        assert_non_null(l->v);
        l->v[l->n] = malloc(GS_UNIT_ID_MAX);
        assert_non_null(l->v[l->n]);
        gs_unit_id_format(gpu, unit, l->v[l->n++], GS_UNIT_ID_MAX);
}

/* Units first..first+count-1 of GPU gpu. */
static void ids_range(struct ids *l, unsigned gpu, unsigned first, unsigned count)
{
        for (unsigned u = first; u < first + count; u++)
                ids_add(l, gpu, u);
}

static void ids_done(struct ids *l)
{
        for (size_t i = 0; i < l->n; i++)
                free(l->v[i]);
        free(l->v);
        *l = (struct ids){ 0 };
}

/* The one GPU all ids are on, or -1 when they span several. */
static int ids_gpu(const struct ids *l)
{
        int gpu = -1;
        for (size_t i = 0; i < l->n; i++) {
                unsigned g, u;
                assert_int_equal(gs_unit_id_parse(l->v[i], &g, &u), 0);
                if (gpu >= 0 && (unsigned)gpu != g)
                        return -1;
                gpu = (int)g;
        }
        return gpu;
}

struct fx {
        struct t_env *e;
        struct dp *dp;
        unsigned n_gpus;
        struct gs_unit_set used; /* the kubelet's view: units given to pods */
};

static struct fx *fx_new(unsigned n_gpus, int64_t grace)
{
        struct fx *f = calloc(1, sizeof(*f));
        assert_non_null(f);
        f->e = t_env_new(n_gpus, "/opt/gpuslice/libgpuslice.so", NULL, NULL);
        f->n_gpus = n_gpus;
        struct dp_config cfg = { .node = f->e->node, .release_grace_s = grace };
        struct gs_error *err = NULL;
        if (dp_new(&cfg, &f->dp, &err) < 0)
                fail_msg("dp_new: %s", gs_error_msg(err));
        return f;
}

static void fx_free(struct fx *f)
{
        dp_free(f->dp);
        t_env_free(f->e);
        free(f);
}

/* Every unit the kubelet still has to give. */
static struct ids available(const struct fx *f)
{
        struct ids l = { 0 };
        for (unsigned g = 0; g < f->n_gpus; g++)
                for (unsigned u = 0; u < DP_UNITS_PER_GPU; u++)
                        if (!gs_unit_set_has(&f->used, g, u))
                                ids_add(&l, g, u);
        return l;
}

/* GetPreferredAllocation for one container: the answer. */
static struct ids preferred(struct fx *f, const struct ids *avail, const struct ids *must,
                            int32_t size)
{
        V1beta1__ContainerPreferredAllocationRequest c =
                V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
        c.n_available_deviceids = avail->n;
        c.available_deviceids = avail->v;
        if (must) {
                c.n_must_include_deviceids = must->n;
                c.must_include_deviceids = must->v;
        }
        c.allocation_size = size;
        V1beta1__ContainerPreferredAllocationRequest *cs[] = { &c };
        V1beta1__PreferredAllocationRequest q = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
        q.n_container_requests = 1;
        q.container_requests = cs;
        size_t len = v1beta1__preferred_allocation_request__get_packed_size(&q);
        uint8_t *buf = malloc(len + 1);
        assert_non_null(buf);
        v1beta1__preferred_allocation_request__pack(&q, buf);
        uint8_t *out = NULL;
        size_t out_len = 0;
        struct gs_error *err = NULL;
        int r = dp_handle_preferred(f->dp, buf, len, &out, &out_len, &err);
        free(buf);
        if (r < 0)
                fail_msg("preferred %d: %d %s", (int)size, r, gs_error_msg(err));
        V1beta1__PreferredAllocationResponse *resp =
                v1beta1__preferred_allocation_response__unpack(NULL, out_len, out);
        free(out);
        assert_non_null(resp);
        assert_int_equal(resp->n_container_responses, 1);
        struct ids got = { 0 };
        const V1beta1__ContainerPreferredAllocationResponse *cr = resp->container_responses[0];
        for (size_t i = 0; i < cr->n_deviceids; i++) {
                unsigned g, u;
                assert_int_equal(gs_unit_id_parse(cr->deviceids[i], &g, &u), 0);
                ids_add(&got, g, u);
        }
        v1beta1__preferred_allocation_response__free_unpacked(resp, NULL);
        return got;
}

/* Allocate for n containers. On success *ret is the unpacked answer (free
 * with v1beta1__allocate_response__free_unpacked); on failure *err. */
static int allocate(struct fx *f, const struct ids *containers, size_t n,
                    V1beta1__AllocateResponse **ret, struct gs_error **err)
{
        V1beta1__ContainerAllocateRequest cs[4], *cp[4];
        assert_true(n <= 4);
        for (size_t i = 0; i < n; i++) {
                cs[i] = (V1beta1__ContainerAllocateRequest)V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
                cs[i].n_devices_ids = containers[i].n;
                cs[i].devices_ids = containers[i].v;
                cp[i] = &cs[i];
        }
        V1beta1__AllocateRequest q = V1BETA1__ALLOCATE_REQUEST__INIT;
        q.n_container_requests = n;
        q.container_requests = cp;
        size_t len = v1beta1__allocate_request__get_packed_size(&q);
        uint8_t *buf = malloc(len + 1);
        assert_non_null(buf);
        v1beta1__allocate_request__pack(&q, buf);
        uint8_t *out = NULL;
        size_t out_len = 0;
        int r = dp_handle_allocate(f->dp, buf, len, &out, &out_len, err);
        free(buf);
        if (r < 0) {
                assert_null(out);
                return r;
        }
        *ret = v1beta1__allocate_response__unpack(NULL, out_len, out);
        free(out);
        assert_non_null(*ret);
        assert_int_equal((*ret)->n_container_responses, n);
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < containers[i].n; k++) {
                        unsigned g, u;
                        assert_int_equal(gs_unit_id_parse(containers[i].v[k], &g, &u), 0);
                        gs_unit_set_add(&f->used, g, u);
                }
        return r;
}

static const char *env_of(const V1beta1__ContainerAllocateResponse *c, const char *key)
{
        for (size_t i = 0; i < c->n_envs; i++)
                if (strcmp(c->envs[i]->key, key) == 0)
                        return c->envs[i]->value;
        return NULL;
}

/* Allocate one container; fails the test on refusal. Returns the slice. */
static struct gs_slice allocate_ok(struct fx *f, const struct ids *ids)
{
        V1beta1__AllocateResponse *resp = NULL;
        struct gs_error *err = NULL;
        int r = allocate(f, ids, 1, &resp, &err);
        if (r < 0)
                fail_msg("Allocate %zu units: %d %s", ids->n, r, gs_error_msg(err));
        const char *id = env_of(resp->container_responses[0], "GPUSLICE_SLICE");
        assert_non_null(id);
        const struct gs_slice *s = gs_ledger_find(&f->e->node->ledger, id);
        assert_non_null(s);
        struct gs_slice copy = *s;
        copy.units = NULL; /* borrowed; may move */
        /* What the container sees is the slice's GPU. */
        char gpus[512] = "";
        for (unsigned i = 0; i < s->n_gpus; i++)
                snprintf(gpus + strlen(gpus), sizeof(gpus) - strlen(gpus), "%s%s", i ? "," : "",
                         s->gpus[i].uuid);
        assert_string_equal(env_of(resp->container_responses[0], "NVIDIA_VISIBLE_DEVICES"), gpus);
        v1beta1__allocate_response__free_unpacked(resp, NULL);
        return copy;
}

static int gpu_of(const struct gs_slice *s)
{
        for (unsigned g = 0; g < GS_MAX_GPUS; g++)
                if (strcmp(s->gpus[0].uuid, t_uuid(g)) == 0)
                        return (int)g;
        return -1;
}

/* An independent model of binpack: the GPU with the least free share that
 * fits (ties: least free memory, then lowest index), or -1. */
struct model {
        uint32_t milli[8];
        uint64_t mem[8];
};

static int model_pick(const struct model *m, unsigned n, uint32_t size)
{
        int best = -1;
        uint64_t cap = gs_default_memory_cap(size, T_GPU_MEM);
        for (unsigned g = 0; g < n; g++) {
                if (m->milli[g] < size || m->mem[g] < cap)
                        continue;
                if (best < 0 || m->milli[g] < m->milli[best] ||
                    (m->milli[g] == m->milli[best] && m->mem[g] < m->mem[best]))
                        best = (int)g;
        }
        return best;
}

static void preferred_is_where_allocate_places(void **state)
{
        (void)state;
        struct fx *f = fx_new(3, 0);
        struct model m;
        for (unsigned g = 0; g < 3; g++)
                m.milli[g] = 1000, m.mem[g] = T_GPU_MEM;
        static const uint32_t sizes[] = { 300, 500, 400, 700, 200, 100, 600, 150, 50 };
        static const int want[] = { 0, 0, 1, 2, 0, 2, 1, 2, 2 };
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
                int expect = model_pick(&m, 3, sizes[i]);
                assert_int_equal(expect, want[i]); /* the model agrees with the table */
                struct ids avail = available(f);
                struct ids pref = preferred(f, &avail, NULL, (int32_t)sizes[i]);
                assert_int_equal(pref.n, sizes[i]);
                int pg = ids_gpu(&pref);
                if (pg != expect)
                        fail_msg("step %zu (%um): preferred packs on GPU %d, binpack says %d", i,
                                 (unsigned)sizes[i], pg, expect);
                struct gs_slice s = allocate_ok(f, &pref);
                if (gpu_of(&s) != pg)
                        fail_msg("step %zu (%um): preferred GPU %d, Allocate placed on GPU %d", i,
                                 (unsigned)sizes[i], pg, gpu_of(&s));
                assert_int_equal(s.milli, sizes[i]);
                m.milli[pg] -= sizes[i];
                m.mem[pg] -= gs_default_memory_cap(sizes[i], T_GPU_MEM);
                ids_done(&avail);
                ids_done(&pref);
        }
        /* GPU 0 and 1 are full, GPU 2 has 0m left: nothing of 1m fits. */
        assert_int_equal(model_pick(&m, 3, 1), -1);
        assert_int_equal(dp_n_allocations(f->dp), 9);
        fx_free(f);
}

static void must_include_and_whole(void **state)
{
        (void)state;
        struct fx *f = fx_new(4, 0);
        /* The kubelet insists on a unit of GPU 2: the slice goes there. */
        struct ids avail = available(f), must = { 0 };
        ids_add(&must, 2, 500);
        struct ids pref = preferred(f, &avail, &must, 100);
        assert_int_equal(pref.n, 100);
        assert_int_equal(ids_gpu(&pref), 2);
        assert_string_equal(pref.v[0], "gpu2-u500");
        struct gs_slice s = allocate_ok(f, &pref);
        assert_int_equal(gpu_of(&s), 2);
        ids_done(&avail);
        ids_done(&pref);
        ids_done(&must);

        /* A whole GPU: the first one holding no slice, no shim files. */
        avail = available(f);
        pref = preferred(f, &avail, NULL, 1000);
        assert_int_equal(ids_gpu(&pref), 0);
        int confs = t_count(f->e, "conf");
        s = allocate_ok(f, &pref);
        assert_int_equal(gpu_of(&s), 0);
        assert_int_equal(s.memory_cap, 0);
        assert_int_equal(t_count(f->e, "conf"), confs);
        ids_done(&avail);
        ids_done(&pref);

        /* Two whole GPUs: the two that hold no slice. */
        avail = available(f);
        pref = preferred(f, &avail, NULL, 2000);
        assert_int_equal(pref.n, 2000);
        struct gs_unit_set picked;
        gs_unit_set_clear(&picked);
        for (size_t i = 0; i < pref.n; i++) {
                unsigned g, u;
                assert_int_equal(gs_unit_id_parse(pref.v[i], &g, &u), 0);
                gs_unit_set_add(&picked, g, u);
        }
        assert_int_equal(gs_unit_set_count_gpu(&picked, 1), 1000);
        assert_int_equal(gs_unit_set_count_gpu(&picked, 3), 1000);
        s = allocate_ok(f, &pref);
        assert_int_equal(s.n_gpus, 2);
        assert_string_equal(s.gpus[0].uuid, t_uuid(1));
        assert_string_equal(s.gpus[1].uuid, t_uuid(3));
        assert_int_equal(dp_n_allocations(f->dp), 3);
        ids_done(&avail);
        ids_done(&pref);

        /* The device plugin's containers get the ld.so.preload node_open wrote. */
        char preload[NODE_PATH_MAX];
        node_preload_path(f->e->node, preload, sizeof(preload));
        assert_int_equal(t_mode(preload), 0644);
        FILE *pf = fopen(preload, "r");
        assert_non_null(pf);
        char line[256] = "";
        assert_non_null(fgets(line, sizeof(line), pf));
        fclose(pf);
        assert_string_equal(line, NODE_CONTAINER_SHIM "\n");
        fx_free(f);
}

static void local_slices_shrink_pods(void **state)
{
        (void)state;
        struct fx *f = fx_new(1, 0);
        struct node_request req = t_local(600);
        struct gs_slice local = t_prepare(f->e, &req);
        assert_int_equal(local.kind, GS_SLICE_LOCAL);

        struct ids six = { 0 };
        ids_range(&six, 0, 0, 600);
        struct gs_error *err = NULL;
        V1beta1__AllocateResponse *resp = NULL;
        assert_int_equal(allocate(f, &six, 1, &resp, &err), -ENOSPC);
        const char *msg = gs_error_msg(err);
        if (!strstr(msg, "gpu0 400") || !strstr(msg, "600 held by other gpuslice slices"))
                fail_msg("refusal '%s' lacks the free units or the local share", msg);
        err = gs_error_free(err);
        assert_int_equal(dp_n_allocations(f->dp), 0);
        assert_int_equal(f->e->node->ledger.n_slices, 1);
        ids_done(&six);

        struct ids three = { 0 };
        ids_range(&three, 0, 0, 300);
        struct gs_slice s = allocate_ok(f, &three);
        assert_int_equal(s.kind, GS_SLICE_KUBE);
        assert_int_equal(s.milli, 300);
        ids_done(&three);

        struct ids two = { 0 };
        ids_range(&two, 0, 300, 200);
        assert_int_equal(allocate(f, &two, 1, &resp, &err), -ENOSPC);
        msg = gs_error_msg(err);
        if (!strstr(msg, "gpu0 100 (600 held by other gpuslice slices)"))
                fail_msg("refusal '%s' lacks 'gpu0 100 (600 held ...)'", msg);
        err = gs_error_free(err);
        ids_done(&two);
        fx_free(f);
}

/* A DRA claim's share is the device plugin's to respect like a local one:
 * its units are refused to pods and named in the refusal. */
static void dra_claims_shrink_pods(void **state)
{
        (void)state;
        struct fx *f = fx_new(1, 0);
        struct gs_slice_claim claim = { .uid = "0b6e3d1c-claim", .request = "gpu" };
        struct node_request req = { .kind = GS_SLICE_DRA, .milli = 600, .claim = &claim };
        struct gs_slice dra = t_prepare(f->e, &req);
        assert_int_equal(dra.kind, GS_SLICE_DRA);

        struct ids six = { 0 };
        ids_range(&six, 0, 0, 600);
        struct gs_error *err = NULL;
        V1beta1__AllocateResponse *resp = NULL;
        assert_int_equal(allocate(f, &six, 1, &resp, &err), -ENOSPC);
        const char *msg = gs_error_msg(err);
        if (!strstr(msg, "gpu0 400 (600 held by other gpuslice slices)"))
                fail_msg("refusal '%s' lacks the claim's share", msg);
        err = gs_error_free(err);
        assert_int_equal(dp_n_allocations(f->dp), 0);
        ids_done(&six);
        /* What is left is a pod's. */
        struct ids four = { 0 };
        ids_range(&four, 0, 0, 400);
        struct gs_slice s = allocate_ok(f, &four);
        assert_int_equal(s.milli, 400);
        ids_done(&four);
        fx_free(f);
}

/* The kubelet's ids are a hint: a GPU without room for them is passed over. */
static void ids_on_a_full_gpu_go_elsewhere(void **state)
{
        (void)state;
        struct fx *f = fx_new(2, 0);
        struct node_request req = t_local(600);
        req.allowed_gpus = 1u << 0;
        t_prepare(f->e, &req);
        /* Preferred counts the local slice: 500 goes on GPU 1. */
        struct ids avail = available(f);
        struct ids pref = preferred(f, &avail, NULL, 500);
        assert_int_equal(ids_gpu(&pref), 1);
        ids_done(&avail);
        ids_done(&pref);
        /* A kubelet that ignores the preference still gets a slice with room. */
        struct ids five = { 0 };
        ids_range(&five, 0, 0, 500);
        struct gs_slice s = allocate_ok(f, &five);
        assert_int_equal(gpu_of(&s), 1);
        ids_done(&five);

        /* Every GPU holds a slice: a whole GPU is refused, in units. */
        struct ids whole = { 0 };
        ids_range(&whole, 1, 0, 1000);
        struct gs_error *err = NULL;
        V1beta1__AllocateResponse *resp = NULL;
        assert_int_equal(allocate(f, &whole, 1, &resp, &err), -ENOSPC);
        const char *msg = gs_error_msg(err);
        if (!strstr(msg, "1000 units ask for 1 whole GPUs") || !strstr(msg, "gpu1 500"))
                fail_msg("whole refusal '%s'", msg);
        gs_error_free(err);
        assert_int_equal(dp_n_allocations(f->dp), 1);
        ids_done(&whole);
        fx_free(f);
}

static void refusal_names_both_gpus(void **state)
{
        (void)state;
        struct fx *f = fx_new(2, 0);
        struct ids a = { 0 }, b = { 0 };
        ids_range(&a, 0, 0, 400);
        ids_range(&b, 1, 0, 400);
        assert_int_equal(gpu_of((struct gs_slice[]){ allocate_ok(f, &a) }), 0);
        assert_int_equal(gpu_of((struct gs_slice[]){ allocate_ok(f, &b) }), 1);
        ids_done(&a);
        ids_done(&b);

        struct ids seven = { 0 };
        ids_range(&seven, 0, 400, 600);
        ids_range(&seven, 1, 400, 100);
        struct gs_error *err = NULL;
        V1beta1__AllocateResponse *resp = NULL;
        assert_int_equal(allocate(f, &seven, 1, &resp, &err), -ENOSPC);
        const char *msg = gs_error_msg(err);
        if (!strstr(msg, "gpu0 600") || !strstr(msg, "gpu1 600") || !strstr(msg, "700 units"))
                fail_msg("refusal '%s' does not name both GPUs' free units", msg);
        err = gs_error_free(err);
        assert_int_equal(dp_n_allocations(f->dp), 2);

        /* All or nothing: the first container fits, the second does not; the
         * first one's slice is rolled back. */
        struct ids two[2] = { { 0 }, { 0 } };
        ids_range(&two[0], 0, 400, 300);
        ids_range(&two[1], 1, 400, 600);
        ids_range(&two[1], 0, 700, 100);
        assert_int_equal(allocate(f, two, 2, &resp, &err), -ENOSPC);
        err = gs_error_free(err);
        assert_int_equal(dp_n_allocations(f->dp), 2);
        assert_int_equal(t_count(f->e, "conf"), 2);
        assert_int_equal(t_count(f->e, "slices"), 2);
        struct gs_ledger disk;
        assert_int_equal(t_disk_slices(f->e, &disk), 2);
        gs_ledger_done(&disk);
        ids_done(&two[0]);
        ids_done(&two[1]);
        ids_done(&seven);
        fx_free(f);
}

static int removed_calls;
static void count_removed(void *ctx, const struct gs_slice *s, const char *why)
{
        (void)ctx, (void)s, (void)why;
        removed_calls++;
}

static void reconcile_after_grace(void **state)
{
        (void)state;
        struct fx *f = fx_new(1, 30);
        f->e->node->observer = (struct node_observer){ .slice_removed = count_removed };
        removed_calls = 0;
        struct ids a = { 0 }, b = { 0 };
        ids_range(&a, 0, 0, 300);
        ids_range(&b, 0, 300, 300);
        struct gs_slice sa = allocate_ok(f, &a), sb = allocate_ok(f, &b);
        int64_t t0 = sa.created > sb.created ? sa.created : sb.created;
        char conf_a[NODE_PATH_MAX];
        t_conf_path(f->e, sa.id, conf_a, sizeof(conf_a));

        /* B is held by a pod (PodResources names one of its units). */
        char ns[] = "default", name[] = "p", ctr[] = "c", u450[] = "gpu0-u450", u0[] = "gpu0-u0";
        char *held_ids[] = { u450 };
        struct dp_pod_devices pod = { .ns = ns, .pod = name, .container = ctr,
                                      .ids = { .v = held_ids, .n = 1 } };
        /* Young slices are kept, however many rounds. */
        for (int i = 0; i < 3; i++)
                assert_int_equal(dp_reconcile(f->dp, &pod, 1, t0 + 10), 0);
        assert_int_equal(dp_n_allocations(f->dp), 2);

        /* Past grace: one unheld round is not enough ... */
        assert_int_equal(dp_reconcile(f->dp, &pod, 1, t0 + 31), 0);
        assert_int_equal(dp_n_allocations(f->dp), 2);
        assert_true(t_exists(conf_a));
        /* ... a held round in between starts the count again (a slice is
         * held by a container whose units are all within it) ... */
        char ctr2[] = "c2";
        char *a_ids[] = { u0 };
        struct dp_pod_devices both[2] = { pod, { .ns = ns, .pod = name, .container = ctr2,
                                                 .ids = { .v = a_ids, .n = 1 } } };
        assert_int_equal(dp_reconcile(f->dp, both, 2, t0 + 32), 0);
        assert_int_equal(dp_reconcile(f->dp, &pod, 1, t0 + 33), 0);
        assert_int_equal(dp_n_allocations(f->dp), 2);
        /* ... the second unheld round in a row frees A, not B. */
        assert_int_equal(dp_reconcile(f->dp, &pod, 1, t0 + 34), 1);
        assert_int_equal(dp_n_allocations(f->dp), 1);
        assert_null(gs_ledger_find(&f->e->node->ledger, sa.id));
        assert_non_null(gs_ledger_find(&f->e->node->ledger, sb.id));
        assert_false(t_exists(conf_a));
        assert_int_equal(removed_calls, 1);
        struct gs_ledger disk;
        assert_int_equal(t_disk_slices(f->e, &disk), 1);
        gs_ledger_done(&disk);

        /* B stays while held. */
        for (int i = 0; i < 4; i++)
                assert_int_equal(dp_reconcile(f->dp, &pod, 1, t0 + 40 + i), 0);
        assert_non_null(gs_ledger_find(&f->e->node->ledger, sb.id));
        /* Local slices are never the plugin's to free. */
        struct node_request req = t_local(100);
        struct gs_slice local = t_prepare(f->e, &req);
        /* The pod is gone: B goes after two rounds. */
        assert_int_equal(dp_reconcile(f->dp, NULL, 0, t0 + 50), 0);
        assert_int_equal(dp_reconcile(f->dp, NULL, 0, t0 + 51), 1);
        assert_int_equal(dp_n_allocations(f->dp), 0);
        assert_int_equal(dp_reconcile(f->dp, NULL, 0, t0 + 52), 0);
        assert_non_null(gs_ledger_find(&f->e->node->ledger, local.id));
        assert_int_equal(removed_calls, 2);
        ids_done(&a);
        ids_done(&b);
        fx_free(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(preferred_is_where_allocate_places, t_teardown),
                cmocka_unit_test_teardown(must_include_and_whole, t_teardown),
                cmocka_unit_test_teardown(local_slices_shrink_pods, t_teardown),
                cmocka_unit_test_teardown(dra_claims_shrink_pods, t_teardown),
                cmocka_unit_test_teardown(ids_on_a_full_gpu_go_elsewhere, t_teardown),
                cmocka_unit_test_teardown(refusal_names_both_gpus, t_teardown),
                cmocka_unit_test_teardown(reconcile_after_grace, t_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
