/* SPDX-License-Identifier: Apache-2.0 */
/* Protobuf-c boundary of the device plugin (see dp_codec.h). */
#include "dp_codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin_v1beta1.pb-c.h"
#include "pb_pack.h"
#include "podresources_v1.pb-c.h"

void dp_strv_done(struct dp_strv *s)
{
        if (!s)
                return;
        for (size_t i = 0; i < s->n; i++)
                free(s->v[i]);
        free(s->v);
        s->v = NULL;
        s->n = 0;
}

void dp_strv_array_free(struct dp_strv *a, size_t n)
{
        if (!a)
                return;
        for (size_t i = 0; i < n; i++)
                dp_strv_done(&a[i]);
        free(a);
}

void dp_pod_devices_array_free(struct dp_pod_devices *a, size_t n)
{
        if (!a)
                return;
        for (size_t i = 0; i < n; i++) {
                free(a[i].ns);
                free(a[i].pod);
                free(a[i].container);
                dp_strv_done(&a[i].ids);
        }
        free(a);
}

void dp_pref_request_array_free(struct dp_pref_request *a, size_t n)
{
        if (!a)
                return;
        for (size_t i = 0; i < n; i++) {
                dp_strv_done(&a[i].available);
                dp_strv_done(&a[i].must_include);
        }
        free(a);
}

/* Copy n ids into an owned list, validating each. */
static int strv_copy(char *const *ids, size_t n, struct dp_strv *ret)
{
        if (n > DP_MAX_IDS)
                return -E2BIG;
        struct dp_strv s = {0};
        if (n) {
                s.v = calloc(n, sizeof(char *));
                if (!s.v)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                size_t len = ids[i] ? strlen(ids[i]) : 0;
                if (len == 0 || len > DP_MAX_ID_LEN) {
                        dp_strv_done(&s);
                        return -EINVAL;
                }
                s.v[i] = strdup(ids[i]);
                if (!s.v[i]) {
                        dp_strv_done(&s);
                        return -ENOMEM;
                }
                s.n = i + 1;
        }
        *ret = s;
        return 0;
}


int dp_decode_empty(const uint8_t *buf, size_t len)
{
        V1beta1__Empty *m = v1beta1__empty__unpack(NULL, len, buf);
        if (!m)
                return -EBADMSG;
        v1beta1__empty__free_unpacked(m, NULL);
        return 0;
}

int dp_decode_prestart(const uint8_t *buf, size_t len)
{
        V1beta1__PreStartContainerRequest *m =
                v1beta1__pre_start_container_request__unpack(NULL, len, buf);
        if (!m)
                return -EBADMSG;
        v1beta1__pre_start_container_request__free_unpacked(m, NULL);
        return 0;
}

int dp_decode_allocate(const uint8_t *buf, size_t len, struct dp_strv **ret_containers,
                       size_t *ret_n)
{
        V1beta1__AllocateRequest *m = v1beta1__allocate_request__unpack(NULL, len, buf);
        if (!m)
                return -EBADMSG;
        int r = 0;
        struct dp_strv *c = NULL;
        size_t n = m->n_container_requests;
        if (n > DP_MAX_CONTAINERS) {
                r = -E2BIG;
                goto out;
        }
        c = calloc(n ? n : 1, sizeof(*c));
        if (!c) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                r = strv_copy(m->container_requests[i]->devices_ids,
                              m->container_requests[i]->n_devices_ids, &c[i]);
                if (r < 0)
                        goto out;
        }
        *ret_containers = c;
        *ret_n = n;
        c = NULL;
out:
        dp_strv_array_free(c, n);
        v1beta1__allocate_request__free_unpacked(m, NULL);
        return r;
}

int dp_encode_allocate_response(const struct dp_container_alloc *c, size_t n, uint8_t **ret_buf,
                                size_t *ret_len)
{
        int r = -ENOMEM;
        V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
        V1beta1__ContainerAllocateResponse *cr = calloc(n ? n : 1, sizeof(*cr));
        V1beta1__ContainerAllocateResponse **crp = calloc(n ? n : 1, sizeof(*crp));
        if (!cr || !crp)
                goto out;
        for (size_t i = 0; i < n; i++) {
                V1beta1__ContainerAllocateResponse init = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;
                cr[i] = init;
                crp[i] = &cr[i];
        }
        resp.n_container_responses = n;
        resp.container_responses = crp;
        for (size_t i = 0; i < n; i++) {
                const struct dp_container_alloc *a = &c[i];
                V1beta1__ContainerAllocateResponse *x = &cr[i];
                x->envs = calloc(a->n_envs + 1, sizeof(*x->envs));
                x->mounts = calloc(a->n_mounts + 1, sizeof(*x->mounts));
                x->cdi_devices = calloc(a->n_cdi_devices + 1, sizeof(*x->cdi_devices));
                if (!x->envs || !x->mounts || !x->cdi_devices)
                        goto out;
                for (size_t j = 0; j < a->n_envs; j++) {
                        V1beta1__ContainerAllocateResponse__EnvsEntry *e = malloc(sizeof(*e));
                        if (!e)
                                goto out;
                        v1beta1__container_allocate_response__envs_entry__init(e);
                        e->key = (char *)a->envs[j].key;
                        e->value = (char *)a->envs[j].value;
                        x->envs[x->n_envs++] = e;
                }
                for (size_t j = 0; j < a->n_mounts; j++) {
                        V1beta1__Mount *mt = malloc(sizeof(*mt));
                        if (!mt)
                                goto out;
                        v1beta1__mount__init(mt);
                        mt->container_path = (char *)a->mounts[j].container_path;
                        mt->host_path = (char *)a->mounts[j].host_path;
                        mt->read_only = a->mounts[j].read_only;
                        x->mounts[x->n_mounts++] = mt;
                }
                for (size_t j = 0; j < a->n_cdi_devices; j++) {
                        V1beta1__CDIDevice *d = malloc(sizeof(*d));
                        if (!d)
                                goto out;
                        v1beta1__cdidevice__init(d);
                        d->name = (char *)a->cdi_devices[j];
                        x->cdi_devices[x->n_cdi_devices++] = d;
                }
        }
        r = kube_pb_pack(&resp.base, ret_buf, ret_len);
out:
        if (cr) {
                for (size_t i = 0; i < n; i++) {
                        for (size_t j = 0; j < cr[i].n_envs; j++)
                                free(cr[i].envs[j]);
                        for (size_t j = 0; j < cr[i].n_mounts; j++)
                                free(cr[i].mounts[j]);
                        for (size_t j = 0; j < cr[i].n_cdi_devices; j++)
                                free(cr[i].cdi_devices[j]);
                        free(cr[i].envs);
                        free(cr[i].mounts);
                        free(cr[i].cdi_devices);
                }
        }
        free(cr);
        free(crp);
        return r;
}

int dp_decode_preferred(const uint8_t *buf, size_t len, struct dp_pref_request **ret_reqs,
                        size_t *ret_n)
{
        V1beta1__PreferredAllocationRequest *m =
                v1beta1__preferred_allocation_request__unpack(NULL, len, buf);
        if (!m)
                return -EBADMSG;
        int r = 0;
        size_t n = m->n_container_requests;
        struct dp_pref_request *reqs = NULL;
        if (n > DP_MAX_CONTAINERS) {
                r = -E2BIG;
                goto out;
        }
        reqs = calloc(n ? n : 1, sizeof(*reqs));
        if (!reqs) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                V1beta1__ContainerPreferredAllocationRequest *c = m->container_requests[i];
                r = strv_copy(c->available_deviceids, c->n_available_deviceids,
                              &reqs[i].available);
                if (r >= 0)
                        r = strv_copy(c->must_include_deviceids, c->n_must_include_deviceids,
                                      &reqs[i].must_include);
                if (r < 0)
                        goto out;
                reqs[i].size = c->allocation_size;
        }
        *ret_reqs = reqs;
        *ret_n = n;
        reqs = NULL;
out:
        dp_pref_request_array_free(reqs, n);
        v1beta1__preferred_allocation_request__free_unpacked(m, NULL);
        return r;
}

int dp_encode_preferred_response(const struct dp_strv *c, size_t n, uint8_t **ret_buf,
                                 size_t *ret_len)
{
        int r = -ENOMEM;
        V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
        V1beta1__ContainerPreferredAllocationResponse *cr = calloc(n ? n : 1, sizeof(*cr));
        V1beta1__ContainerPreferredAllocationResponse **crp = calloc(n ? n : 1, sizeof(*crp));
        if (!cr || !crp)
                goto out;
        for (size_t i = 0; i < n; i++) {
                v1beta1__container_preferred_allocation_response__init(&cr[i]);
                cr[i].n_deviceids = c[i].n;
                cr[i].deviceids = c[i].v;
                crp[i] = &cr[i];
        }
        resp.n_container_responses = n;
        resp.container_responses = crp;
        r = kube_pb_pack(&resp.base, ret_buf, ret_len);
out:
        free(cr);
        free(crp);
        return r;
}

int dp_encode_list(const struct dp_device *devs, size_t n, uint8_t **ret_buf, size_t *ret_len)
{
        int r = -ENOMEM;
        V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
        V1beta1__Device *d = calloc(n ? n : 1, sizeof(*d));
        V1beta1__Device **dp = calloc(n ? n : 1, sizeof(*dp));
        /* Few NUMA nodes: one TopologyInfo per node, shared by its devices. */
        enum { MAX_NUMA = 64 };
        V1beta1__NUMANode numa[MAX_NUMA];
        V1beta1__NUMANode *numa_p[MAX_NUMA];
        V1beta1__TopologyInfo topo[MAX_NUMA];
        if (!d || !dp)
                goto out;
        for (int k = 0; k < MAX_NUMA; k++) {
                v1beta1__numanode__init(&numa[k]);
                numa[k].id = k;
                numa_p[k] = &numa[k];
                v1beta1__topology_info__init(&topo[k]);
                topo[k].n_nodes = 1;
                topo[k].nodes = &numa_p[k];
        }
        for (size_t i = 0; i < n; i++) {
                v1beta1__device__init(&d[i]);
                d[i].id = (char *)devs[i].id;
                d[i].health = (char *)(devs[i].healthy ? "Healthy" : "Unhealthy");
                if (devs[i].numa_node >= 0 && devs[i].numa_node < MAX_NUMA)
                        d[i].topology = &topo[devs[i].numa_node];
                dp[i] = &d[i];
        }
        resp.n_devices = n;
        resp.devices = dp;
        r = kube_pb_pack(&resp.base, ret_buf, ret_len);
out:
        free(d);
        free(dp);
        return r;
}

int dp_encode_options(bool pre_start_required, bool preferred_available, uint8_t **ret_buf,
                      size_t *ret_len)
{
        V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
        o.pre_start_required = pre_start_required;
        o.get_preferred_allocation_available = preferred_available;
        return kube_pb_pack(&o.base, ret_buf, ret_len);
}

int dp_encode_register(const char *version, const char *endpoint, const char *resource,
                       bool preferred_available, uint8_t **ret_buf, size_t *ret_len)
{
        V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
        V1beta1__RegisterRequest m = V1BETA1__REGISTER_REQUEST__INIT;
        o.get_preferred_allocation_available = preferred_available;
        m.version = (char *)version;
        m.endpoint = (char *)endpoint;
        m.resource_name = (char *)resource;
        m.options = &o;
        return kube_pb_pack(&m.base, ret_buf, ret_len);
}

int dp_encode_empty(uint8_t **ret_buf, size_t *ret_len)
{
        V1beta1__Empty m = V1BETA1__EMPTY__INIT;
        return kube_pb_pack(&m.base, ret_buf, ret_len);
}

int dp_decode_pod_resources(const uint8_t *buf, size_t len, const char *resource,
                            struct dp_pod_devices **ret, size_t *ret_n)
{
        V1__ListPodResourcesResponse *m = v1__list_pod_resources_response__unpack(NULL, len, buf);
        if (!m)
                return -EBADMSG;
        int r = 0;
        size_t cap = 0, n = 0;
        struct dp_pod_devices *out = NULL;
        for (size_t i = 0; i < m->n_pod_resources; i++) {
                const V1__PodResources *p = m->pod_resources[i];
                for (size_t j = 0; j < p->n_containers; j++) {
                        const V1__ContainerResources *c = p->containers[j];
                        for (size_t k = 0; k < c->n_devices; k++) {
                                const V1__ContainerDevices *d = c->devices[k];
                                if (!d->resource_name || strcmp(d->resource_name, resource) != 0 ||
                                    d->n_device_ids == 0)
                                        continue;
                                if (n == cap) {
                                        size_t ncap = cap ? cap * 2 : 16;
                                        struct dp_pod_devices *nv =
                                                realloc(out, ncap * sizeof(*nv));
                                        if (!nv) {
                                                r = -ENOMEM;
                                                goto fail;
                                        }
                                        out = nv;
                                        cap = ncap;
                                }
                                struct dp_pod_devices *e = &out[n];
                                memset(e, 0, sizeof(*e));
                                n++;
                                e->ns = strdup(p->namespace_ ? p->namespace_ : "");
                                e->pod = strdup(p->name ? p->name : "");
                                e->container = strdup(c->name ? c->name : "");
                                if (!e->ns || !e->pod || !e->container) {
                                        r = -ENOMEM;
                                        goto fail;
                                }
                                r = strv_copy(d->device_ids, d->n_device_ids, &e->ids);
                                if (r < 0)
                                        goto fail;
                        }
                }
        }
        v1__list_pod_resources_response__free_unpacked(m, NULL);
        *ret = out;
        *ret_n = n;
        return 0;
fail:
        dp_pod_devices_array_free(out, n);
        v1__list_pod_resources_response__free_unpacked(m, NULL);
        return r;
}

int dp_decode_container_env(const uint8_t *buf, size_t len, const char *key, char *ret,
                            size_t size)
{
        V1beta1__ContainerAllocateResponse *m =
                v1beta1__container_allocate_response__unpack(NULL, len, buf);
        if (!m)
                return -EBADMSG;
        int r = -ENOENT;
        for (size_t i = 0; i < m->n_envs; i++) {
                const char *k = m->envs[i]->key, *v = m->envs[i]->value;
                if (!k || !v || strcmp(k, key) != 0)
                        continue;
                r = strlen(v) < size ? 0 : -ENAMETOOLONG;
                if (r == 0)
                        memcpy(ret, v, strlen(v) + 1);
                break;
        }
        v1beta1__container_allocate_response__free_unpacked(m, NULL);
        return r;
}
