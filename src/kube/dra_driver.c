/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA driver's claims and ResourceSlice. See dra_driver.h. */
#include "dra_driver.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra_claim.h"
#include "dra_slices.h"
#include "log.h"
#include "macro.h"
#include "node_cdi.h"
#include "node_edits.h"
#include "pod_eviction.h"
#include "quantity.h"

struct dra_driver {
        struct node *node;
        struct apiserver *api;
        pthread_mutex_t api_lock;     /* one request at a time on api */
        char driver[254];
        char node_name[254];
        char node_uid[64];            /* learnt once, for the slice's owner */
        char cdi_dir[NODE_PATH_MAX];
        json_t *published;            /* the last ResourceSlice the server took */
        int64_t generation;           /* its pool generation */
};

int dra_driver_new(const struct dra_driver_config *cfg, struct dra_driver **ret,
                   struct gs_error **err)
{
        if (!cfg->node || !cfg->api || !cfg->node_name || !*cfg->node_name)
                return gs_error_set(err, -EINVAL, "DRA driver: a node, an API server client "
                                    "and the node's name are required");
        struct dra_driver *d = calloc(1, sizeof(*d));
        if (!d)
                return gs_error_set(err, -ENOMEM, "out of memory");
        d->node = cfg->node;
        d->api = cfg->api;
        pthread_mutex_init(&d->api_lock, NULL);
        snprintf(d->driver, sizeof(d->driver), "%s", cfg->driver ? cfg->driver : DRA_DRIVER_NAME);
        snprintf(d->node_name, sizeof(d->node_name), "%s", cfg->node_name);
        snprintf(d->cdi_dir, sizeof(d->cdi_dir), "%s", cfg->cdi_dir ? cfg->cdi_dir : DRA_CDI_DIR);
        *ret = d;
        return 0;
}

struct dra_driver *dra_driver_free(struct dra_driver *d)
{
        if (!d)
                return NULL;
        json_decref(d->published);
        pthread_mutex_destroy(&d->api_lock);
        free(d);
        return NULL;
}

/* The CDI device of a share: "<claim uid>-<slice id>" (unique on the node,
 * the same for every prepare of the claim). */
static void cdi_name(const struct gs_slice *s, char *buf, size_t size)
{
        snprintf(buf, size, "%s-%s", s->claim.uid, s->id);
}

/* The answer for one prepared share (its CDI spec written again: prepare
 * is repeated, and repairs what a crash or a cleaner removed). */
static int share_device(struct dra_driver *d, const struct gs_slice *s, struct dra_device *dev,
                        struct gs_error **err)
{
        struct node_edits *e = malloc(sizeof(*e));
        char name[NODE_CDI_NAME_MAX + 1], qualified[NODE_CDI_QUALIFIED_MAX];
        int pos = node_gpu_position_locked(d->node, s->gpus[0].uuid);
        int r = e && pos >= 0 ? 0 : gs_error_set(err, e ? -ENODEV : -ENOMEM,
                                                 "slice %s: its GPU is not in the inventory", s->id);
        if (r >= 0 && (r = node_container_edits_locked(d->node, s, e)) < 0)
                gs_error_set(err, r, "slice %s: container paths too long", s->id);
        cdi_name(s, name, sizeof(name));
        if (r >= 0)
                r = node_cdi_write_locked(d->node, d->cdi_dir, name, e, qualified,
                                          sizeof(qualified), err);
        char device[64];
        if (r >= 0) {
                dra_device_name(&d->node->inv.gpus[pos], device, sizeof(device));
                *dev = (struct dra_device){ .pool_name = strdup(d->node_name),
                                            .device_name = strdup(device),
                                            .share_id = s->claim.share[0] ? strdup(s->claim.share)
                                                                          : NULL };
                r = dev->pool_name && dev->device_name && (!s->claim.share[0] || dev->share_id)
                            ? 0
                            : -ENOMEM;
                if (r >= 0)
                        r = dra_device_add_request_name(dev, s->claim.request);
                if (r >= 0)
                        r = dra_device_add_cdi_id(dev, qualified);
                /* The GPU's own CDI device (NVIDIA's), when the node names one. */
                for (size_t i = 0; r >= 0 && i < e->n_cdi_devices; i++)
                        r = dra_device_add_cdi_id(dev, e->cdi_devices[i]);
                if (r < 0)
                        gs_error_set(err, r, "out of memory");
        }
        free(e);
        return r;
}

/* The answer from the shares recorded for claim uid (lock held): 1 when the
 * node has prepared the claim, 0 when not. */
static int answer_recorded(struct dra_driver *d, const char *uid, struct dra_device **ret,
                           size_t *ret_n, struct gs_error **err)
{
        const struct gs_ledger *l = &d->node->ledger;
        size_t n = 0;
        for (size_t i = 0; i < l->n_slices; i++)
                n += l->slices[i].kind == GS_SLICE_DRA && strcmp(l->slices[i].claim.uid, uid) == 0;
        if (n == 0)
                return 0;
        struct dra_device *devs = calloc(n, sizeof(*devs));
        if (!devs)
                return gs_error_set(err, -ENOMEM, "out of memory");
        size_t k = 0;
        int r = 0;
        for (size_t i = 0; r >= 0 && i < l->n_slices; i++) {
                const struct gs_slice *s = &l->slices[i];
                if (s->kind == GS_SLICE_DRA && strcmp(s->claim.uid, uid) == 0)
                        r = share_device(d, s, &devs[k++], err);
        }
        if (r < 0) {
                dra_device_array_free(devs, n);
                return r;
        }
        *ret = devs;
        *ret_n = n;
        return 1;
}

/* Release every share of claim uid (lock held). */
static void release_claim(struct dra_driver *d, const char *uid, const char *why)
{
        struct gs_ledger *l = &d->node->ledger;
        for (size_t i = l->n_slices; i-- > 0;) {
                const struct gs_slice *s = &l->slices[i];
                if (s->kind != GS_SLICE_DRA || strcmp(s->claim.uid, uid) != 0)
                        continue;
                char name[NODE_CDI_NAME_MAX + 1];
                cdi_name(s, name, sizeof(name));
                int r = node_cdi_remove(d->cdi_dir, name);
                if (r < 0)
                        gs_log_warn("DRA: cannot remove the CDI spec of %s: %s", name, strerror(-r));
                node_slice_release_locked(d->node, s->id, why);
        }
}

/* Make the node's slices for the claim's shares (lock held). All or none. */
static int make_shares(struct dra_driver *d, const struct dra_claim *c,
                       const struct dra_claim_alloc *a, struct gs_error **err)
{
        for (size_t i = 0; i < a->n_shares; i++) {
                const struct dra_share *sh = &a->shares[i];
                int pos = dra_device_position_locked(d->node, sh->device);
                if (pos < 0) {
                        release_claim(d, c->uid, "its claim's other shares could not be made");
                        return gs_error_set(err, -ENODEV,
                                            "claim %s/%s: device %s of pool %s is not one of "
                                            "this node's GPUs",
                                            c->ns, c->name, sh->device, d->node_name);
                }
                struct gs_slice_claim claim = { 0 };
                snprintf(claim.uid, sizeof(claim.uid), "%s", c->uid);
                /* A subrequest's result ("req/sub", firstAvailable) is
                 * the base request's for the kubelet, which matches
                 * request_names to the containers' claims[].request. */
                snprintf(claim.request, sizeof(claim.request), "%.*s",
                         (int)strcspn(sh->request, "/"), sh->request);
                snprintf(claim.share, sizeof(claim.share), "%s", sh->share_id);
                snprintf(claim.ns, sizeof(claim.ns), "%s", c->ns);
                snprintf(claim.name, sizeof(claim.name), "%s", c->name);
                bool whole = sh->milli >= GS_MILLI_PER_GPU;
                struct node_request req = { .kind = GS_SLICE_DRA,
                                            .milli = whole ? GS_MILLI_PER_GPU : (uint32_t)sh->milli,
                                            .memory = whole ? 0 : sh->memory,
                                            .has_policy = sh->has_policy,
                                            .policy = sh->policy,
                                            .overuse = sh->overuse,
                                            .allowed_gpus = 1ull << pos,
                                            .claim = &claim };
                struct gs_slice s;
                int r = node_slice_prepare_locked(d->node, &req, &s, err);
                if (r < 0) {
                        release_claim(d, c->uid, "its claim's other shares could not be made");
                        return gs_error_wrap(err, "claim %s/%s (%s on %s)", c->ns, c->name,
                                             sh->request, sh->device);
                }
        }
        return 0;
}

/* Remember the pod a claim is reserved for (the first; the watchdog
 * evicts through the claim when it has more) with each of its slices. */
static void record_pod_locked(struct dra_driver *d, const char *claim_uid,
                              const struct kube_pod_ref *pod)
{
        struct node_pod p = { 0 };
        snprintf(p.ns, sizeof(p.ns), "%s", pod->ns);
        snprintf(p.name, sizeof(p.name), "%s", pod->name);
        snprintf(p.uid, sizeof(p.uid), "%s", pod->uid);
        const struct gs_ledger *l = &d->node->ledger;
        for (size_t i = 0; i < l->n_slices; i++)
                if (l->slices[i].kind == GS_SLICE_DRA &&
                    strcmp(l->slices[i].claim.uid, claim_uid) == 0)
                        node_set_pod_locked(d->node, l->slices[i].id, &p);
}

static int op_prepare(void *ctx, const struct dra_claim *c, struct dra_device **ret,
                      size_t *ret_n, struct gs_error **err)
{
        struct dra_driver *d = ctx;
        node_lock(d->node);
        int r = answer_recorded(d, c->uid, ret, ret_n, err);
        node_unlock(d->node);
        if (r != 0)
                return r < 0 ? r : 0;
        /* Not prepared yet: what did the scheduler allocate? */
        char path[640];
        snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s",
                 c->ns, c->name);
        json_t *claim = NULL;
        pthread_mutex_lock(&d->api_lock);
        r = apiserver_get(d->api, path, &claim, err);
        pthread_mutex_unlock(&d->api_lock);
        if (r < 0)
                return gs_error_wrap(err, "claim %s/%s", c->ns, c->name);
        struct dra_claim_alloc a;
        r = dra_claim_parse_json(claim, c->uid, d->driver, d->node_name, &a, err);
        struct kube_pod_ref pod;
        struct gs_error *pod_err = NULL;
        bool have_pod = r >= 0 && kube_claim_reserved_pods(claim, &pod, 1, &pod_err) > 0;
        gs_error_free(pod_err);
        json_decref(claim);
        if (r < 0)
                return gs_error_wrap(err, "claim %s/%s", c->ns, c->name);
        node_lock(d->node);
        r = make_shares(d, c, &a, err);
        if (r >= 0 && have_pod)
                record_pod_locked(d, c->uid, &pod);
        if (r >= 0 && (r = answer_recorded(d, c->uid, ret, ret_n, err)) == 0)
                *ret_n = 0, *ret = NULL; /* nothing of ours in the claim */
        node_unlock(d->node);
        if (r >= 0)
                gs_log_info("DRA: claim %s/%s (%s) prepared: %zu share%s", c->ns, c->name, c->uid,
                            *ret_n, *ret_n == 1 ? "" : "s");
        return r < 0 ? r : 0;
}

static int op_unprepare(void *ctx, const struct dra_claim *c, struct gs_error **err)
{
        struct dra_driver *d = ctx;
        (void)err;
        node_lock(d->node);
        release_claim(d, c->uid, "the kubelet unprepared its claim");
        node_unlock(d->node);
        return 0;
}

struct dra_ops dra_driver_ops(struct dra_driver *d)
{
        return (struct dra_ops){ .ctx = d, .prepare = op_prepare, .unprepare = op_unprepare };
}

struct orphan_scan {
        struct dra_driver *d;
        int removed;
};

static int remove_unowned(void *ctx, const char *device_name)
{
        struct orphan_scan *o = ctx;
        const struct gs_ledger *l = &o->d->node->ledger;
        char name[NODE_CDI_NAME_MAX + 1];
        for (size_t i = 0; i < l->n_slices; i++) {
                if (l->slices[i].kind != GS_SLICE_DRA)
                        continue;
                cdi_name(&l->slices[i], name, sizeof(name));
                if (strcmp(name, device_name) == 0)
                        return 0;
        }
        gs_log_info("DRA: removing CDI spec %s: no prepared claim owns it", device_name);
        if (node_cdi_remove(o->d->cdi_dir, device_name) == 0)
                o->removed++;
        return 0;
}

int dra_driver_reconcile_cdi(struct dra_driver *d)
{
        struct orphan_scan o = { .d = d };
        int repaired = 0;
        node_lock(d->node);
        const struct gs_ledger *l = &d->node->ledger;
        for (size_t i = 0; i < l->n_slices; i++) {
                if (l->slices[i].kind != GS_SLICE_DRA)
                        continue;
                struct dra_device dev;
                struct gs_error *err = NULL;
                if (share_device(d, &l->slices[i], &dev, &err) < 0) {
                        gs_log_error("DRA: slice %s: %s", l->slices[i].id, gs_error_msg(err));
                        gs_error_free(err);
                        continue;
                }
                dra_device_done(&dev);
                repaired++;
        }
        struct gs_error *err = NULL;
        int r = node_cdi_list(d->cdi_dir, remove_unowned, &o, &err);
        node_unlock(d->node);
        if (r < 0) {
                gs_log_warn("DRA: %s", gs_error_msg(err));
                gs_error_free(err);
        }
        return r < 0 ? r : repaired + o.removed;
}

static void slice_path(const struct dra_driver *d, char *buf, size_t size)
{
        snprintf(buf, size, "/apis/resource.k8s.io/v1/resourceslices/%s-%s", d->node_name,
                 d->driver);
}

/* The Node's uid, once (for the slice's ownerReference: it is deleted
 * with its Node). Failures leave it unknown; the slice is sent without. */
static void learn_node_uid(struct dra_driver *d)
{
        if (d->node_uid[0])
                return;
        char path[320];
        snprintf(path, sizeof(path), "/api/v1/nodes/%s", d->node_name);
        json_t *node = NULL;
        struct gs_error *err = NULL;
        if (apiserver_get(d->api, path, &node, &err) == 0) {
                const char *uid = json_string_value(
                        json_object_get(json_object_get(node, "metadata"), "uid"));
                if (uid)
                        snprintf(d->node_uid, sizeof(d->node_uid), "%s", uid);
        } else {
                gs_log_warn("DRA: Node %s: %s (its ResourceSlice gets no owner)", d->node_name,
                            gs_error_msg(err));
        }
        gs_error_free(err);
        json_decref(node);
}

/* Send `want` (generation filled in here): replace the server's slice with
 * the next generation of its pool, or create it. */
static int send_slice(struct dra_driver *d, json_t *want, struct gs_error **err)
{
        char path[600];
        slice_path(d, path, sizeof(path));
        json_t *have = NULL;
        long status = 0;
        struct gs_error *get_err = NULL;
        int r = apiserver_request(d->api, "GET", path, NULL, &status, &have, &get_err);
        json_t *spec = json_object_get(want, "spec");
        json_t *pool = json_object_get(spec, "pool");
        if (r == 0) {
                const json_t *hp = json_object_get(json_object_get(have, "spec"), "pool");
                json_int_t gen = json_integer_value(json_object_get(hp, "generation"));
                const json_t *rv = json_object_get(json_object_get(have, "metadata"),
                                                   "resourceVersion");
                json_object_set_new(pool, "generation", json_integer(gen + 1));
                if (rv)
                        json_object_set(json_object_get(want, "metadata"), "resourceVersion",
                                        (json_t *)rv);
                r = apiserver_replace(d->api, path, want, NULL, err);
        } else if (status == 404) {
                json_object_set_new(pool, "generation", json_integer(d->generation + 1));
                char coll[] = "/apis/resource.k8s.io/v1/resourceslices";
                r = apiserver_create(d->api, coll, want, NULL, err);
        } else {
                gs_error_set(err, r, "%s", gs_error_msg(get_err));
        }
        gs_error_free(get_err);
        if (r == 0) {
                d->generation = json_integer_value(json_object_get(pool, "generation"));
                json_object_del(json_object_get(want, "metadata"), "resourceVersion");
        }
        json_decref(have);
        return r;
}

int dra_driver_publish(struct dra_driver *d, struct gs_error **err)
{
        pthread_mutex_lock(&d->api_lock);
        learn_node_uid(d);
        node_lock(d->node);
        json_t *want = dra_resource_slice_locked(d->node, d->driver, d->node_name, d->node_uid,
                                                 d->generation);
        node_unlock(d->node);
        int r = 0;
        if (!want)
                r = gs_error_set(err, -ENOMEM, "out of memory");
        else if (d->published && dra_resource_slice_same_devices(d->published, want))
                r = 0;
        else if ((r = send_slice(d, want, err)) == 0) {
                json_decref(d->published);
                d->published = json_incref(want);
                gs_log_info("DRA: ResourceSlice of %s published (pool generation %" PRId64
                            ", %zu device%s)",
                            d->node_name, d->generation,
                            json_array_size(json_object_get(json_object_get(want, "spec"), "devices")),
                            json_array_size(json_object_get(json_object_get(want, "spec"),
                                                            "devices")) == 1 ? "" : "s");
                r = 1;
        } else {
                gs_error_wrap(err, "DRA: publishing the ResourceSlice of %s", d->node_name);
        }
        json_decref(want);
        pthread_mutex_unlock(&d->api_lock);
        return r;
}

int dra_driver_check_published(struct dra_driver *d, struct gs_error **err)
{
        char path[600];
        slice_path(d, path, sizeof(path));
        pthread_mutex_lock(&d->api_lock);
        int r = 0;
        if (d->published) {
                json_t *have = NULL;
                long status = 0;
                struct gs_error *e = NULL;
                r = apiserver_request(d->api, "GET", path, NULL, &status, &have, &e);
                if (r == 0 && !dra_resource_slice_same_devices(have, d->published))
                        r = 1;
                else if (r < 0 && status == 404)
                        r = 1;
                else if (r < 0)
                        gs_error_set(err, r, "DRA: checking the ResourceSlice of %s: %s",
                                     d->node_name, gs_error_msg(e));
                gs_error_free(e);
                json_decref(have);
                if (r == 1) {
                        gs_log_warn("DRA: the ResourceSlice of %s was %s: publishing it again",
                                    d->node_name, status == 404 ? "deleted" : "changed");
                        json_decref(d->published);
                        d->published = NULL;
                        d->node_uid[0] = '\0'; /* a recreated Node has a new uid */
                }
        }
        pthread_mutex_unlock(&d->api_lock);
        return r;
}

int dra_driver_unpublish(struct dra_driver *d, struct gs_error **err)
{
        char path[600];
        slice_path(d, path, sizeof(path));
        struct gs_error *e = NULL;
        pthread_mutex_lock(&d->api_lock);
        int r = apiserver_delete(d->api, path, &e);
        pthread_mutex_unlock(&d->api_lock);
        if (r == -ENOENT)
                r = 0;
        else if (r < 0)
                gs_error_set(err, r, "%s", gs_error_msg(e));
        gs_error_free(e);
        json_decref(d->published);
        d->published = NULL;
        return r;
}
