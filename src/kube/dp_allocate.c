/* SPDX-License-Identifier: Apache-2.0 */
/* Allocate: each container's units become one slice made by the node layer
 * (placed by core on a GPU with room, whatever ids the kubelet picked,
 * recorded in the ledger with those ids), answered with the slice's
 * container edits. */
#include "dp_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "macro.h"
#include "node_edits.h"

/* One container's answer and what it points into. */
struct built {
        struct node_edits edits;
        struct dp_kv envs[NODE_EDITS_MAX_ENVS];
        struct dp_mount mounts[NODE_EDITS_MAX_MOUNTS];
        const char *cdi[GS_SLICE_MAX_GPUS];
        struct dp_container_alloc ca;
        char slice[GS_SLICE_ID_MAX + 1]; /* the slice made, "" if none */
};

static int strcmp_p(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

struct id_ref {
        const char *id; /* first member: strcmp_p compares it */
        size_t container;
};

/* A unit id named twice anywhere in one AllocateRequest: the kubelet never
 * does this, and honouring it would let one container's "previous holder"
 * release the slice just made for another. Returns 0 or -EINVAL. */
static int check_unique_ids(const struct dp_strv *containers, size_t n, struct gs_error **err)
{
        size_t total = 0;
        for (size_t c = 0; c < n; c++)
                total += containers[c].n;
        if (total < 2)
                return 0;
        struct id_ref *refs = calloc(total, sizeof(*refs));
        if (!refs)
                return -ENOMEM;
        size_t k = 0;
        for (size_t c = 0; c < n; c++)
                for (size_t i = 0; i < containers[c].n; i++)
                        refs[k++] = (struct id_ref){ containers[c].v[i], c };
        qsort(refs, total, sizeof(*refs), strcmp_p);
        int r = 0;
        for (size_t i = 1; i < total && r == 0; i++) {
                const struct id_ref *x = &refs[i - 1], *y = &refs[i];
                if (strcmp(x->id, y->id) != 0)
                        continue;
                size_t lo = GS_MIN(x->container, y->container);
                size_t hi = GS_MAX(x->container, y->container);
                if (lo == hi)
                        r = gs_error_set(err, -EINVAL, "Allocate: unit %s requested twice", x->id);
                else
                        r = gs_error_set(err, -EINVAL,
                                         "Allocate: unit %s is requested by both container %zu and "
                                         "container %zu of one request; a unit belongs to one "
                                         "container",
                                         x->id, lo, hi);
        }
        free(refs);
        return r;
}

/* The container's ids as a set, with the GPU most of them are on. */
static int parse_ids(const struct dp *d, const struct dp_strv *ids, struct gs_unit_set *set,
                     int *ret_hint, struct gs_error **err)
{
        if (ids->n == 0)
                return gs_error_set(err, -EINVAL, "Allocate: a container request with no device ids");
        unsigned count[DP_MAX_GPUS] = { 0 };
        gs_unit_set_clear(set);
        for (size_t i = 0; i < ids->n; i++) {
                unsigned g, u;
                if (gs_unit_id_parse(ids->v[i], &g, &u) < 0 || g >= d->node->inv.n_gpus)
                        return gs_error_set(err, -EINVAL,
                                            "Allocate: %s is not a gpuslice.io/gpu-milli unit of "
                                            "this node (units are gpu<N>-u<0..999>)",
                                            ids->v[i]);
                if (!gs_unit_set_add(set, g, u))
                        return gs_error_set(err, -EINVAL, "Allocate: unit %s requested twice",
                                            ids->v[i]);
                count[g]++;
        }
        int hint = -1;
        for (unsigned g = 0; g < d->node->inv.n_gpus && g < DP_MAX_GPUS; g++)
                if (count[g] && (hint < 0 || count[g] > count[hint]))
                        hint = (int)g;
        *ret_hint = hint;
        return 0;
}

/* What the kubelet's handing over of units that a pod slice already holds
 * means. It gives out units a container still holds only to reuse them
 * within that container's pod (an init container's units for the next
 * container: devicesToAllocate's reusableDevices, pkg/kubelet/cm/
 * devicemanager/manager.go), during the pod's admission; otherwise their
 * pod is gone. A slice is taken as an init container's being handed on when
 * the kubelet's checkpoint still lists all its units (written after every
 * Allocate), it was made within DP_REUSE_WINDOW_S, and PodResources never
 * listed a container of it (it never lists plain init containers; it did
 * list a gone pod's app container, whose units the checkpoint may still
 * show until the kubelet next writes it). Then the request within it gets
 * that slice; a superset grows it (no container of the pod has started
 * yet). Any other overlapped slice is over. Sets *ret_reuse to the slice to
 * answer with, "" for a new one. */
static int settle_overlaps(struct dp *d, const struct gs_unit_set *req, const char *req_text,
                           char ret_reuse[GS_SLICE_ID_MAX + 1], struct gs_error **err)
{
        struct kube_checkpoint cp = { 0 };
        int have_cp = dp_checkpoint_read(d, &cp);
        if (have_cp < 0)
                return gs_error_set(err, -EAGAIN, "the kubelet's checkpoint %s cannot be read: "
                                    "which units are free is not known", d->checkpoint_path);
        _cleanup_free_ struct gs_unit_set *other = malloc(sizeof(*other));
        int r = other ? 0 : -ENOMEM;
        char grow[GS_SLICE_ID_MAX + 1] = "";
        ret_reuse[0] = '\0';
        struct gs_ledger *l = &d->node->ledger;
        for (size_t k = l->n_slices; r == 0 && k-- > 0;) {
                const struct gs_slice *s = &l->slices[k];
                if (s->kind != GS_SLICE_KUBE || dp_slice_units(s, other) < 0 ||
                    !gs_unit_set_intersects(other, req))
                        continue;
                bool handed_on = have_cp && gs_unit_set_is_subset(other, cp.all) &&
                                 (int64_t)time(NULL) - s->created < DP_REUSE_WINDOW_S &&
                                 !dp_seen_listed(d, s->id);
                if (!handed_on) {
                        dp_release_locked(d, s->id, "the kubelet gave its units to a new container");
                        continue;
                }
                if (gs_unit_set_is_subset(req, other))
                        snprintf(ret_reuse, GS_SLICE_ID_MAX + 1, "%s", s->id);
                else if (gs_unit_set_is_subset(other, req) && !gs_slice_is_whole(s))
                        snprintf(grow, sizeof(grow), "%s", s->id);
        }
        kube_checkpoint_done(&cp);
        if (r < 0 || ret_reuse[0] || !grow[0])
                return r;
        /* The pod's next container needs more than the init container's
         * share: the pod's slice grows to it (its effective request). */
        size_t units = gs_unit_set_count(req);
        struct gs_error *e = NULL;
        if (units < DP_UNITS_PER_GPU &&
            node_slice_resize_locked(d->node, grow, (uint32_t)units, req_text, &e) == 0)
                snprintf(ret_reuse, GS_SLICE_ID_MAX + 1, "%s", grow);
        else
                gs_log_info("kubelet: slice %s not grown for a container of its pod (%s): it gets "
                            "a slice of its own", grow, e ? gs_error_msg(e) : "whole GPUs");
        gs_error_free(e);
        return 0;
}

static void build_answer(struct built *b)
{
        const struct node_edits *e = &b->edits;
        for (size_t i = 0; i < e->n_envs; i++)
                b->envs[i] = (struct dp_kv){ e->envs[i].key, e->envs[i].value };
        for (size_t i = 0; i < e->n_mounts; i++)
                b->mounts[i] = (struct dp_mount){ e->mounts[i].container_path,
                                                  e->mounts[i].host_path, e->mounts[i].read_only };
        for (size_t i = 0; i < e->n_cdi_devices; i++)
                b->cdi[i] = e->cdi_devices[i];
        b->ca = (struct dp_container_alloc){ .envs = b->envs,
                                             .n_envs = e->n_envs,
                                             .mounts = b->mounts,
                                             .n_mounts = e->n_mounts,
                                             .cdi_devices = b->cdi,
                                             .n_cdi_devices = e->n_cdi_devices };
}

/* "gpu0 200, gpu1 100 (600 held by other gpuslice slices)": each GPU's
 * free units by the node's one usage formula, as a pod's event shows it. */
static void describe_free(const struct dp *d, char *buf, size_t size)
{
        const struct node *n = d->node;
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        node_usage_locked(n, usage);
        size_t off = 0;
        buf[0] = '\0';
        for (unsigned i = 0; i < n->inv.n_gpus && off < size; i++) {
                uint64_t local = 0;
                for (size_t k = 0; k < n->ledger.n_slices; k++) {
                        const struct gs_slice *s = &n->ledger.slices[k];
                        for (unsigned g = 0; s->kind != GS_SLICE_KUBE && g < s->n_gpus; g++)
                                if (strcmp(s->gpus[g].uuid, n->inv.gpus[i].uuid) == 0)
                                        local += gs_slice_is_whole(s) ? DP_UNITS_PER_GPU : s->milli;
                }
                char held[64] = "";
                if (local)
                        snprintf(held, sizeof(held), " (%" PRIu64 " held by other gpuslice slices)",
                                 local);
                int w = snprintf(buf + off, size - off, "%sgpu%u %" PRIu32 "%s%s", i ? ", " : "", i,
                                 n->inv.gpus[i].healthy ? usage[i].free_milli : 0,
                                 n->inv.gpus[i].healthy ? "" : " (unhealthy)", held);
                if (w < 0)
                        break;
                off += (size_t)w;
        }
}

/* Replace placement's refusal with one in the pod's terms (units). */
static int refuse_no_room(const struct dp *d, uint32_t units, struct gs_error **err)
{
        char desc[2048];
        describe_free(d, desc, sizeof(desc));
        if (err) {
                gs_error_free(*err);
                *err = NULL;
        }
        if (units >= DP_UNITS_PER_GPU)
                return gs_error_set(err, -ENOSPC,
                                    "gpuslice.io/gpu-milli: %" PRIu32 " units ask for %" PRIu32
                                    " whole GPUs, but not that many GPUs on this node hold no "
                                    "slice (free units per GPU: %s)",
                                    units, units / DP_UNITS_PER_GPU, desc);
        return gs_error_set(err, -ENOSPC,
                            "gpuslice.io/gpu-milli: no single GPU on this node has %" PRIu32
                            " units free (free units per GPU: %s); a slice must fit on one GPU, "
                            "so the scheduler needs the gpuslice extender or DRA to place it",
                            units, desc);
}

static int allocate_one(struct dp *d, const struct dp_strv *ids, struct built *b,
                        struct gs_error **err)
{
        _cleanup_free_ struct gs_unit_set *set = malloc(sizeof(*set));
        if (!set)
                return -ENOMEM;
        int hint = -1;
        int r = parse_ids(d, ids, set, &hint, err);
        if (r < 0)
                return r;
        uint32_t units = (uint32_t)ids->n;
        if (units > DP_UNITS_PER_GPU && units % DP_UNITS_PER_GPU)
                return gs_error_set(err, -EINVAL,
                                    "gpuslice.io/gpu-milli: %" PRIu32 " units is neither a slice "
                                    "of one GPU (1..999) nor whole GPUs (1000, 2000, ...)",
                                    units);
        _cleanup_free_ char *text = NULL;
        if (gs_unit_set_encode(set, &text) < 0)
                return -ENOMEM;
        char reuse[GS_SLICE_ID_MAX + 1];
        if ((r = settle_overlaps(d, set, text, reuse, err)) < 0)
                return r;
        if (reuse[0]) {
                const struct gs_slice *s = gs_ledger_find(&d->node->ledger, reuse);
                gs_log_info("kubelet: %" PRIu32 " units of slice %s handed to the next container "
                            "of its pod: it shares the slice", units, reuse);
                /* Not ours to roll back: b->slice stays "". */
                if ((r = node_container_edits_locked(d->node, s, &b->edits)) < 0)
                        return gs_error_set(err, r, "slice %s: container paths too long", reuse);
                build_answer(b);
                return 0;
        }
        struct node_request req = { .kind = GS_SLICE_KUBE,
                                    .milli = units,
                                    .units = text,
                                    .prefer = hint >= 0,
                                    .preferred_gpu = hint >= 0 ? (unsigned)hint : 0 };
        struct gs_slice s;
        r = node_slice_prepare_locked(d->node, &req, &s, err);
        if (r == -ENOSPC && d->node->ledger.n_slices < GS_LEDGER_MAX_SLICES)
                return refuse_no_room(d, units, err);
        if (r < 0)
                return gs_error_wrap(err, "gpuslice.io/gpu-milli: %" PRIu32 " units", units);
        snprintf(b->slice, sizeof(b->slice), "%s", s.id);
        if ((r = node_container_edits_locked(d->node, &s, &b->edits)) < 0)
                return gs_error_set(err, r, "slice %s: container paths too long", s.id);
        build_answer(b);
        return 0;
}

int dp_handle_allocate(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret,
                       size_t *ret_len, struct gs_error **err)
{
        struct dp_strv *containers = NULL;
        size_t n = 0;
        int r = dp_decode_allocate(req, len, &containers, &n);
        if (r < 0)
                return gs_error_set(err, r, "Allocate: malformed request (%s)",
                                    r == -E2BIG    ? "too many containers or ids"
                                    : r == -EINVAL ? "empty or over-long device id"
                                                   : "not an AllocateRequest");
        if (n == 0) {
                free(containers);
                return gs_error_set(err, -EINVAL, "Allocate: no container requests");
        }
        r = check_unique_ids(containers, n, err);
        struct built *b = r < 0 ? NULL : calloc(n, sizeof(*b));
        if (r < 0 || !b) {
                dp_strv_array_free(containers, n);
                return r < 0 ? r : -ENOMEM;
        }
        node_lock(d->node);
        for (size_t i = 0; i < n && r >= 0; i++)
                r = allocate_one(d, &containers[i], &b[i], err);
        /* All or nothing: roll back exactly what this call made. */
        for (size_t i = 0; r < 0 && i < n; i++)
                if (b[i].slice[0])
                        dp_release_locked(d, b[i].slice, "its Allocate failed");
        if (r >= 0) {
                struct dp_container_alloc *ca = calloc(n, sizeof(*ca));
                for (size_t i = 0; ca && i < n; i++)
                        ca[i] = b[i].ca;
                r = ca ? dp_encode_allocate_response(ca, n, ret, ret_len) : -ENOMEM;
                free(ca);
                for (size_t i = 0; r < 0 && i < n; i++)
                        dp_release_locked(d, b[i].slice, "its answer could not be encoded");
        }
        node_unlock(d->node);
        free(b);
        dp_strv_array_free(containers, n);
        return r;
}
