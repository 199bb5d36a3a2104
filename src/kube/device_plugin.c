/* Device plugin logic: the advertised list, preferred allocations, and
 * releases from PodResources (see device_plugin.h; Allocate is in
 * dp_allocate.c). Placement is core's (gs_place, through the node layer
 * for Allocate): the preferred answer and Allocate make one decision. */
#include "dp_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "node_edits.h"
#include "node_files.h"

int dp_slice_units(const struct gs_slice *s, struct gs_unit_set *ret)
{
        if (!s->units) {
                gs_unit_set_clear(ret);
                return 0;
        }
        return gs_unit_set_decode(s->units, ret);
}

static struct dp_seen *seen_find(struct dp *d, const char *slice, bool add)
{
        for (size_t i = 0; i < d->n_seen; i++)
                if (strcmp(d->seen[i].slice, slice) == 0)
                        return &d->seen[i];
        if (!add)
                return NULL;
        struct dp_seen *n = realloc(d->seen, (d->n_seen + 1) * sizeof(*n));
        if (!n)
                return NULL;
        d->seen = n;
        struct dp_seen *x = &d->seen[d->n_seen++];
        *x = (struct dp_seen){ 0 };
        snprintf(x->slice, sizeof(x->slice), "%s", slice);
        return x;
}

void dp_release_locked(struct dp *d, const char *slice, const char *why)
{
        char id[GS_SLICE_ID_MAX + 1];
        snprintf(id, sizeof(id), "%s", slice);
        struct dp_seen *x = seen_find(d, id, false);
        if (x && x->holder[0])
                gs_log_info("slice %s was held by %s", id, x->holder);
        if (x)
                *x = d->seen[--d->n_seen];
        node_slice_release_locked(d->node, id, why);
}

int dp_new(const struct dp_config *cfg, struct dp **ret, struct gs_error **err)
{
        if (!cfg->node)
                return gs_error_set(err, -EINVAL, "device plugin: no node");
        struct dp *d = calloc(1, sizeof(*d));
        if (!d)
                return gs_error_set(err, -ENOMEM, "out of memory");
        d->node = cfg->node;
        d->grace = cfg->release_grace_s;
        d->generation = 1;
        node_lock(d->node);
        int r = node_files_write_preload(d->node, NODE_CONTAINER_SHIM, err);
        node_unlock(d->node);
        if (r < 0) {
                dp_free(d);
                return r;
        }
        *ret = d;
        return 0;
}

struct dp *dp_free(struct dp *d)
{
        if (!d)
                return NULL;
        free(d->seen);
        free(d);
        return NULL;
}

int dp_set_inventory(struct dp *d, const struct gs_inventory *inv)
{
        node_lock(d->node);
        bool changed = node_set_inventory_locked(d->node, inv);
        if (changed)
                d->generation++;
        node_unlock(d->node);
        return changed ? 1 : 0;
}

uint64_t dp_generation(struct dp *d)
{
        node_lock(d->node);
        uint64_t g = d->generation;
        node_unlock(d->node);
        return g;
}

size_t dp_n_allocations(struct dp *d)
{
        node_lock(d->node);
        size_t n = 0;
        for (size_t i = 0; i < d->node->ledger.n_slices; i++)
                n += d->node->ledger.slices[i].kind == GS_SLICE_KUBE;
        node_unlock(d->node);
        return n;
}

int dp_encode_devices(struct dp *d, uint64_t *ret_gen, uint8_t **ret_buf, size_t *ret_len)
{
        node_lock(d->node);
        const struct gs_inventory *inv = &d->node->inv;
        size_t n = GS_MIN((size_t)inv->n_gpus, (size_t)DP_MAX_GPUS) * DP_UNITS_PER_GPU;
        struct dp_device *devs = calloc(n ? n : 1, sizeof(*devs));
        char *names = calloc(n ? n : 1, GS_UNIT_ID_MAX);
        int r = -ENOMEM;
        if (devs && names) {
                for (size_t i = 0; i < n; i++) {
                        char *id = names + i * GS_UNIT_ID_MAX;
                        gs_unit_id_format((unsigned)(i / DP_UNITS_PER_GPU),
                                          (unsigned)(i % DP_UNITS_PER_GPU), id, GS_UNIT_ID_MAX);
                        devs[i].id = id;
                        devs[i].healthy = inv->gpus[i / DP_UNITS_PER_GPU].healthy;
                }
                r = dp_encode_list(devs, n, ret_buf, ret_len);
                if (r >= 0)
                        *ret_gen = d->generation;
        }
        node_unlock(d->node);
        free(devs);
        free(names);
        return r;
}

int dp_handle_options(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret, size_t *ret_len,
                      struct gs_error **err)
{
        (void)d, (void)err;
        int r = dp_decode_empty(req, len);
        if (r < 0)
                return r;
        return dp_encode_options(false, true, ret, ret_len);
}

int dp_handle_prestart(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret,
                       size_t *ret_len, struct gs_error **err)
{
        (void)d, (void)err;
        int r = dp_decode_prestart(req, len);
        if (r < 0)
                return r;
        return dp_encode_empty(ret, ret_len);
}

/* The GPUs core's placement would choose for `size` units, among those
 * with enough available ids (and the must-include ids' GPU). Returns the
 * number chosen (0: none fits) with pick[] set. */
static size_t prefer_gpus(struct dp *d, size_t size, size_t extra, int must_gpu,
                          const size_t avail[DP_MAX_GPUS], bool pick[DP_MAX_GPUS])
{
        const struct gs_inventory *inv = &d->node->inv;
        bool whole = size >= DP_UNITS_PER_GPU;
        struct gs_placement_request req = { .milli = (uint32_t)size };
        for (unsigned i = 0; i < inv->n_gpus && i < DP_MAX_GPUS; i++)
                if (whole ? avail[i] >= DP_UNITS_PER_GPU
                          : avail[i] >= extra && (must_gpu < 0 || i == (unsigned)must_gpu))
                        req.allowed |= 1ull << i;
        if (req.allowed == 0)
                return 0;
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        node_usage_locked(d->node, usage);
        struct gs_placement p;
        if (gs_place(inv, usage, d->node->placement, &req, &p, NULL) < 0)
                return 0;
        for (unsigned i = 0; i < p.n_gpus; i++)
                pick[p.gpus[i]] = true;
        return p.n_gpus;
}

/* Preferred answer for one container: units of the GPU(s) placement
 * chooses, must-include ids first. Falls back to the kubelet's order. */
static int prefer_one(struct dp *d, const struct dp_pref_request *q, struct dp_strv *out)
{
        if (q->size <= 0 || (size_t)q->size > q->available.n ||
            q->must_include.n > (size_t)q->size)
                return -EINVAL;
        size_t size = (size_t)q->size;
        /* In the answer already: O(1) lookups, the lists can hold tens of
         * thousands of ids. */
        _cleanup_free_ struct gs_unit_set *taken = calloc(1, sizeof(*taken));
        if (!taken)
                return -ENOMEM;
        unsigned g, u;
        int must_gpu = -1;
        for (size_t i = 0; i < q->must_include.n; i++) {
                if (gs_unit_id_parse(q->must_include.v[i], &g, &u) < 0 ||
                    !gs_unit_set_add(taken, g, u))
                        return -EINVAL; /* not ours, or listed twice */
                must_gpu = must_gpu == -1 || must_gpu == (int)g ? (int)g : -2;
        }
        size_t avail[DP_MAX_GPUS] = { 0 };
        for (size_t i = 0; i < q->available.n; i++)
                if (gs_unit_id_parse(q->available.v[i], &g, &u) == 0 &&
                    !gs_unit_set_has(taken, g, u))
                        avail[g]++;
        bool whole = size >= DP_UNITS_PER_GPU;
        size_t need_gpus = whole ? size / DP_UNITS_PER_GPU : 1;
        bool pick[DP_MAX_GPUS] = { false };
        bool fits = (!whole || size % DP_UNITS_PER_GPU == 0) &&
                    prefer_gpus(d, size, size - q->must_include.n, whole ? -1 : must_gpu, avail,
                                pick) == need_gpus;
        out->v = calloc(size, sizeof(char *));
        if (!out->v)
                return -ENOMEM;
        for (size_t i = 0; i < q->must_include.n; i++)
                out->v[out->n++] = strdup(q->must_include.v[i]);
        /* The chosen GPU(s) first; if that falls short, any available id
         * (the kubelet fills a short answer itself anyway). */
        for (int pass = fits ? 0 : 1; pass < 2 && out->n < size; pass++)
                for (size_t i = 0; i < q->available.n && out->n < size; i++) {
                        const char *id = q->available.v[i];
                        if (gs_unit_id_parse(id, &g, &u) < 0 || gs_unit_set_has(taken, g, u) ||
                            (pass == 0 && !pick[g]))
                                continue;
                        gs_unit_set_add(taken, g, u);
                        out->v[out->n++] = strdup(id);
                }
        for (size_t i = 0; i < out->n; i++)
                if (!out->v[i])
                        return -ENOMEM;
        return 0;
}

int dp_handle_preferred(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret,
                        size_t *ret_len, struct gs_error **err)
{
        struct dp_pref_request *reqs = NULL;
        size_t n = 0;
        int r = dp_decode_preferred(req, len, &reqs, &n);
        if (r < 0)
                return gs_error_set(err, r, "GetPreferredAllocation: malformed request");
        struct dp_strv *out = calloc(n ? n : 1, sizeof(*out));
        if (!out) {
                dp_pref_request_array_free(reqs, n);
                return -ENOMEM;
        }
        node_lock(d->node);
        for (size_t i = 0; i < n && r >= 0; i++)
                r = prefer_one(d, &reqs[i], &out[i]);
        node_unlock(d->node);
        if (r >= 0)
                r = dp_encode_preferred_response(out, n, ret, ret_len);
        else
                gs_error_set(err, r, "GetPreferredAllocation: invalid allocation size or ids");
        dp_strv_array_free(out, n);
        dp_pref_request_array_free(reqs, n);
        return r;
}

/* The units PodResources shows held, and the pod of each (first seen). */
struct held {
        struct gs_unit_set units;
        int16_t pod_of[GS_MAX_GPUS * DP_UNITS_PER_GPU]; /* -1: none; pods are few */
};

static void note_holder(struct dp *d, const struct gs_slice *s, const struct gs_unit_set *units,
                        const struct held *h, const struct dp_pod_devices *pods)
{
        struct dp_seen *x = seen_find(d, s->id, true);
        if (!x)
                return;
        x->unheld = 0;
        for (size_t b = 0; b < GS_MAX_GPUS * DP_UNITS_PER_GPU; b++)
                if (gs_unit_set_has(units, (unsigned)(b / DP_UNITS_PER_GPU),
                                    (unsigned)(b % DP_UNITS_PER_GPU)) &&
                    h->pod_of[b] >= 0) {
                        const struct dp_pod_devices *p = &pods[h->pod_of[b]];
                        snprintf(x->holder, sizeof(x->holder), "%s/%s/%s", p->ns, p->pod,
                                 p->container);
                        return;
                }
}

int dp_reconcile(struct dp *d, const struct dp_pod_devices *pods, size_t n_pods, int64_t now)
{
        struct held *h = malloc(sizeof(*h));
        struct gs_unit_set *units = malloc(sizeof(*units));
        if (!h || !units) {
                free(h);
                free(units);
                return -ENOMEM;
        }
        gs_unit_set_clear(&h->units);
        memset(h->pod_of, 0xff, sizeof(h->pod_of));
        for (size_t i = 0; i < n_pods; i++)
                for (size_t j = 0; j < pods[i].ids.n; j++) {
                        unsigned g, u;
                        if (gs_unit_id_parse(pods[i].ids.v[j], &g, &u) == 0 &&
                            gs_unit_set_add(&h->units, g, u) && i <= INT16_MAX)
                                h->pod_of[g * DP_UNITS_PER_GPU + u] = (int16_t)i;
                }
        int released = 0;
        node_lock(d->node);
        struct gs_ledger *l = &d->node->ledger;
        for (size_t k = l->n_slices; k-- > 0;) {
                const struct gs_slice *s = &l->slices[k];
                if (s->kind != GS_SLICE_KUBE || dp_slice_units(s, units) < 0)
                        continue;
                if (gs_unit_set_intersects(units, &h->units)) {
                        note_holder(d, s, units, h, pods);
                        continue;
                }
                if (now - s->created < d->grace)
                        continue;
                struct dp_seen *x = seen_find(d, s->id, true);
                if (!x || ++x->unheld < 2)
                        continue;
                dp_release_locked(d, s->id, "no pod holds it any more");
                released++;
        }
        node_unlock(d->node);
        free(h);
        free(units);
        return released;
}
