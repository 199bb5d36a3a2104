/* SPDX-License-Identifier: Apache-2.0 */
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
#include <time.h>

#include "log.h"
#include "quantity.h"
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

bool dp_seen_listed(struct dp *d, const char *id)
{
        struct dp_seen *x = seen_find(d, id, false);
        return x && x->listed;
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
        snprintf(d->checkpoint_path, sizeof(d->checkpoint_path), "%s",
                 cfg->checkpoint_path ? cfg->checkpoint_path : "");
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
        node_unlock(d->node);
        return changed ? 1 : 0;
}

static unsigned local_units(const struct node *n, unsigned i);
static int pod_units(const struct node *n, struct gs_unit_set *ret);

/* FNV-1a over what the advertised list depends on: each GPU's health,
 * NUMA node and hold by other slices (local, DRA), and where they hold units, which ids
 * pods have (the ids marked for them are others). */
static uint64_t list_fingerprint(const struct node *n)
{
        uint64_t h = 1469598103934665603ull;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
        struct gs_unit_set *pods = NULL;
        for (unsigned g = 0; g < n->inv.n_gpus && g < DP_MAX_GPUS; g++) {
                const struct gs_gpu *x = &n->inv.gpus[g];
                unsigned held = local_units(n, g);
                MIX(x->healthy);
                MIX(x->numa_known ? x->numa_node + 1 : 0);
                MIX(held);
                if (!held)
                        continue;
                if (!pods && (!(pods = malloc(sizeof(*pods))) || pod_units(n, pods) < 0)) {
                        MIX(n->generation); /* cannot tell: assume it changed */
                        break;
                }
                for (unsigned w = g * DP_UNITS_PER_GPU / 64; w <= (g + 1) * DP_UNITS_PER_GPU / 64 &&
                                                             w < GS_UNIT_WORDS; w++)
                        MIX(pods->bits[w]);
        }
#undef MIX
        free(pods);
        return h;
}

/* Lock held. */
static uint64_t generation_locked(struct dp *d)
{
        if (d->node->generation != d->node_generation_seen) {
                d->node_generation_seen = d->node->generation;
                uint64_t fp = list_fingerprint(d->node);
                if (fp != d->fingerprint) {
                        d->fingerprint = fp;
                        d->generation++;
                }
        }
        return d->generation;
}

uint64_t dp_generation(struct dp *d)
{
        node_lock(d->node);
        uint64_t g = generation_locked(d);
        node_unlock(d->node);
        return g;
}

int dp_checkpoint_read(struct dp *d, struct kube_checkpoint *ret)
{
        if (!d->checkpoint_path[0])
                return 0;
        struct gs_error *err = NULL;
        int r = kube_checkpoint_load(d->checkpoint_path, DP_RESOURCE, ret, &err);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                gs_log_warn("kubelet: %s: trusting no unit to be free", gs_error_msg(err));
        gs_error_free(err);
        return r < 0 ? r : 1;
}

/* Units (0..1000) the slices the kubelet did not ask for (local ones, DRA
 * claims) hold on GPU i: their shares, or their memory caps as a fraction
 * of the GPU's memory when that is more. */
static unsigned local_units(const struct node *n, unsigned i)
{
        const struct gs_gpu *g = &n->inv.gpus[i];
        uint64_t milli = 0, memory = 0;
        for (size_t k = 0; k < n->ledger.n_slices; k++) {
                const struct gs_slice *s = &n->ledger.slices[k];
                for (unsigned j = 0; s->kind != GS_SLICE_KUBE && j < s->n_gpus; j++)
                        if (strcmp(s->gpus[j].uuid, g->uuid) == 0) {
                                bool whole = gs_slice_is_whole(s);
                                milli += whole ? DP_UNITS_PER_GPU : s->milli;
                                memory += whole ? g->memory_total : s->memory_cap;
                        }
        }
        uint64_t by_memory =
                g->memory_total ? (memory * 1000 + g->memory_total - 1) / g->memory_total : 0;
        return (unsigned)GS_MIN(GS_MAX(milli, by_memory), (uint64_t)DP_UNITS_PER_GPU);
}

/* Every unit a pod slice was allocated (free of pods' use otherwise). */
static int pod_units(const struct node *n, struct gs_unit_set *ret)
{
        _cleanup_free_ struct gs_unit_set *one = malloc(sizeof(*one));
        if (!one)
                return -ENOMEM;
        gs_unit_set_clear(ret);
        for (size_t k = 0; k < n->ledger.n_slices; k++)
                if (n->ledger.slices[k].kind == GS_SLICE_KUBE &&
                    dp_slice_units(&n->ledger.slices[k], one) == 0)
                        gs_unit_set_union(ret, one);
        return 0;
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

/* 1000 ids per GPU, healthy as their GPU, except that as many as local
 * slices hold are Unhealthy (the kubelet then counts them out of the
 * node's allocatable, so the scheduler does not send pods for them): the
 * highest-numbered ids no pod slice was given. */
int dp_encode_devices(struct dp *d, uint64_t *ret_gen, uint8_t **ret_buf, size_t *ret_len)
{
        node_lock(d->node);
        const struct node *nd = d->node;
        const struct gs_inventory *inv = &nd->inv;
        size_t n = GS_MIN((size_t)inv->n_gpus, (size_t)DP_MAX_GPUS) * DP_UNITS_PER_GPU;
        struct dp_device *devs = calloc(n ? n : 1, sizeof(*devs));
        char *names = calloc(n ? n : 1, GS_UNIT_ID_MAX);
        struct gs_unit_set *taken = malloc(sizeof(*taken));
        int r = -ENOMEM;
        if (devs && names && taken && pod_units(nd, taken) == 0) {
                for (unsigned g = 0; g < n / DP_UNITS_PER_GPU; g++) {
                        unsigned held = local_units(nd, g);
                        for (unsigned u = DP_UNITS_PER_GPU; u-- > 0;) {
                                size_t i = (size_t)g * DP_UNITS_PER_GPU + u;
                                char *id = names + i * GS_UNIT_ID_MAX;
                                gs_unit_id_format(g, u, id, GS_UNIT_ID_MAX);
                                bool local = held && !gs_unit_set_has(taken, g, u);
                                held -= local;
                                devs[i] = (struct dp_device){
                                        .id = id,
                                        .healthy = inv->gpus[g].healthy && !local,
                                        .numa_node = inv->gpus[g].numa_known
                                                             ? (int)inv->gpus[g].numa_node
                                                             : -1 };
                        }
                }
                r = dp_encode_list(devs, n, ret_buf, ret_len);
                if (r >= 0)
                        *ret_gen = generation_locked(d);
        }
        node_unlock(d->node);
        free(devs);
        free(names);
        free(taken);
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
        /* The chosen GPU(s) first, lowest unit numbers first (few ranges in
         * the ledger); if that falls short, any available id (the kubelet
         * fills a short answer itself anyway). */
        _cleanup_free_ struct gs_unit_set *avail_set = calloc(1, sizeof(*avail_set));
        if (!avail_set)
                return -ENOMEM;
        for (size_t i = 0; i < q->available.n; i++)
                if (gs_unit_id_parse(q->available.v[i], &g, &u) == 0)
                        gs_unit_set_add(avail_set, g, u);
        for (unsigned pg = 0; fits && pg < DP_MAX_GPUS && out->n < size; pg++)
                for (unsigned pu = 0; pick[pg] && pu < DP_UNITS_PER_GPU && out->n < size; pu++) {
                        if (!gs_unit_set_has(avail_set, pg, pu) || gs_unit_set_has(taken, pg, pu))
                                continue;
                        char id[GS_UNIT_ID_MAX];
                        gs_unit_id_format(pg, pu, id, sizeof(id));
                        gs_unit_set_add(taken, pg, pu);
                        out->v[out->n++] = strdup(id);
                }
        for (size_t i = 0; i < q->available.n && out->n < size; i++) {
                const char *id = q->available.v[i];
                if (gs_unit_id_parse(id, &g, &u) < 0 || gs_unit_set_has(taken, g, u))
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

#define CHECKPOINT_HOLDER "the kubelet's checkpoint"
#define NUDGE_S 60

/* Which slice each container runs in: the slice whose units hold all of
 * the container's (the same units, or a share of an init container's
 * slice it reuses). */
struct holders {
        struct gs_unit_set *sets;      /* owned: one per container */
        size_t n;
        struct {
                struct gs_unit_set *units;
                const char *who;       /* "ns/pod/container" or "checkpoint" */
        } c[];
};

static bool held_by(const struct holders *h, const struct gs_unit_set *slice_units,
                    const char **ret_who)
{
        for (size_t i = 0; i < h->n; i++)
                if (gs_unit_set_count(h->c[i].units) &&
                    gs_unit_set_is_subset(h->c[i].units, slice_units)) {
                        *ret_who = h->c[i].who;
                        return true;
                }
        return false;
}

static struct holders *holders_new(const struct dp_pod_devices *pods, size_t n_pods,
                                   const struct kube_checkpoint *cp, char (*who)[256])
{
        size_t n = n_pods + (cp ? cp->n_entries : 0);
        struct holders *h = calloc(1, sizeof(*h) + n * sizeof(h->c[0]));
        struct gs_unit_set *sets = calloc(n ? n : 1, sizeof(*sets));
        if (!h || !sets) {
                free(h);
                free(sets);
                return NULL;
        }
        h->sets = sets;
        for (size_t i = 0; i < n_pods; i++) {
                h->c[h->n].units = &sets[h->n];
                for (size_t j = 0; j < pods[i].ids.n; j++) {
                        unsigned g, u;
                        if (gs_unit_id_parse(pods[i].ids.v[j], &g, &u) == 0)
                                gs_unit_set_add(&sets[h->n], g, u);
                }
                snprintf(who[i], sizeof(who[i]), "%s/%s/%s", pods[i].ns, pods[i].pod,
                         pods[i].container);
                h->c[h->n++].who = who[i];
        }
        for (size_t i = 0; cp && i < cp->n_entries; i++) {
                sets[h->n] = *cp->entries[i].units;
                h->c[h->n].units = &sets[h->n];
                h->c[h->n++].who = CHECKPOINT_HOLDER;
        }
        return h;
}

static struct holders *holders_free(struct holders *h)
{
        if (h)
                free(h->sets);
        free(h);
        return NULL;
}

/* Remember the pod of "ns/pod/container" with slice id, and its uid from
 * the kubelet's checkpoint (the entry whose cached answer names the slice;
 * PodResources has no uid) when cp has one. */
static void record_pod_locked(struct dp *d, const char *id, const char *holder,
                              const struct kube_checkpoint *cp)
{
        struct node_pod p = { 0 };
        for (size_t i = 0; cp && i < cp->n_entries; i++)
                if (strcmp(cp->entries[i].slice, id) == 0 &&
                    strlen(cp->entries[i].pod_uid) < sizeof(p.uid)) {
                        memcpy(p.uid, cp->entries[i].pod_uid, strlen(cp->entries[i].pod_uid));
                        break;
                }
        size_t ns = strcspn(holder, "/");
        const char *pod = holder + ns + (holder[ns] == '/');
        size_t name = strcspn(pod, "/");
        const char *container = pod + name + (pod[name] == '/');
        if (ns == 0 || ns >= sizeof(p.ns) || name == 0 || name >= sizeof(p.name) ||
            strlen(container) >= sizeof(p.container))
                return;
        memcpy(p.ns, holder, ns);
        memcpy(p.name, pod, name);
        memcpy(p.container, container, strlen(container));
        node_set_pod_locked(d->node, id, &p);
}

int dp_reconcile(struct dp *d, const struct dp_pod_devices *pods, size_t n_pods, int64_t now)
{
        struct kube_checkpoint cp = { 0 };
        node_lock(d->node);
        int have_cp = dp_checkpoint_read(d, &cp);
        node_unlock(d->node);
        if (have_cp < 0)
                return 0; /* an unreadable checkpoint: nothing is known to be free */
        char (*who)[256] = calloc(n_pods ? n_pods : 1, sizeof(*who));
        struct holders *h = who ? holders_new(pods, n_pods, have_cp ? &cp : NULL, who) : NULL;
        struct gs_unit_set *units = malloc(sizeof(*units));
        int released = 0;
        if (!h || !units) {
                released = -ENOMEM;
                goto out;
        }
        node_lock(d->node);
        bool nudge = false;
        struct gs_ledger *l = &d->node->ledger;
        for (size_t k = l->n_slices; k-- > 0;) {
                const struct gs_slice *s = &l->slices[k];
                const char *holder = NULL;
                if (s->kind != GS_SLICE_KUBE || dp_slice_units(s, units) < 0)
                        continue;
                struct dp_seen *x = seen_find(d, s->id, true);
                if (held_by(h, units, &holder)) {
                        bool cp_only = strcmp(holder, CHECKPOINT_HOLDER) == 0;
                        if (x) {
                                x->unheld = 0;
                                x->listed |= !cp_only;
                                if (!cp_only || !x->holder[0])
                                        snprintf(x->holder, sizeof(x->holder), "%s", holder);
                        }
                        if (!cp_only)
                                record_pod_locked(d, s->id, holder, have_cp ? &cp : NULL);
                        /* Held by the checkpoint alone: an init container's
                         * slice, or a pod the kubelet forgot but has not
                         * written out yet (it writes on every allocation and
                         * every ListAndWatch message): send it one, at most
                         * once a minute per slice. */
                        if (cp_only && x && now - x->nudged >= NUDGE_S) {
                                x->nudged = now;
                                nudge = true;
                        }
                        continue;
                }
                if (now - s->created < d->grace)
                        continue;
                if (!x || ++x->unheld < 2)
                        continue;
                dp_release_locked(d, s->id, "no container holds it any more");
                released++;
        }
        if (nudge)
                d->generation++; /* the same list again */
        node_unlock(d->node);
out:
        holders_free(h);
        free(who);
        free(units);
        kube_checkpoint_done(&cp);
        return released;
}

/* The slice an entry's cached answer names, rebuilt from the entries that
 * name it. */
static int restored_slice(const struct dp *d, const struct kube_checkpoint *cp, size_t first,
                          struct gs_slice *s, struct gs_unit_set *units)
{
        const struct kube_cp_entry *e = &cp->entries[first];
        gs_unit_set_clear(units);
        for (size_t i = first; i < cp->n_entries; i++)
                if (strcmp(cp->entries[i].slice, e->slice) == 0)
                        gs_unit_set_union(units, cp->entries[i].units);
        *s = (struct gs_slice){ .kind = GS_SLICE_KUBE,
                                .policy = d->node->compute_policy,
                                .created = (int64_t)time(NULL) };
        snprintf(s->id, sizeof(s->id), "%s", e->slice);
        char gpus[sizeof(e->gpus)];
        snprintf(gpus, sizeof(gpus), "%s", e->gpus);
        char *save = NULL;
        for (char *tok = strtok_r(gpus, ",", &save); tok && s->n_gpus < GS_SLICE_MAX_GPUS;
             tok = strtok_r(NULL, ",", &save)) {
                int pos = node_gpu_position_locked(d->node, tok);
                if (pos < 0)
                        return -ENODEV;
                s->gpus[s->n_gpus].index = d->node->inv.gpus[pos].index;
                snprintf(s->gpus[s->n_gpus].uuid, sizeof(s->gpus[0].uuid), "%s", tok);
                s->n_gpus++;
        }
        if (s->n_gpus == 0)
                return -EINVAL;
        size_t count = gs_unit_set_count(units);
        if (s->n_gpus > 1 || count >= DP_UNITS_PER_GPU) {
                s->milli = DP_UNITS_PER_GPU * s->n_gpus;
        } else {
                int pos = node_gpu_position_locked(d->node, s->gpus[0].uuid);
                s->milli = (uint32_t)count;
                s->memory_cap = gs_default_memory_cap(s->milli, d->node->inv.gpus[pos].memory_total);
        }
        return gs_unit_set_encode(units, &s->units);
}

int dp_restore_from_checkpoint(struct dp *d)
{
        struct kube_checkpoint cp = { 0 };
        _cleanup_free_ struct gs_unit_set *units = malloc(sizeof(*units));
        if (!units)
                return -ENOMEM;
        node_lock(d->node);
        int r = dp_checkpoint_read(d, &cp);
        int restored = 0;
        for (size_t i = 0; r > 0 && i < cp.n_entries; i++) {
                const struct kube_cp_entry *e = &cp.entries[i];
                if (!e->slice[0] || gs_ledger_find(&d->node->ledger, e->slice))
                        continue;
                /* The kubelet keeps a deleted pod's entry until its next
                 * Allocate: an id the ledger had handed out before it was
                 * loaded, and lacks, was released here, not lost. */
                uint64_t seq;
                if (gs_slice_id_number(e->slice, &seq) == 0 && seq < d->node->opened_next_id)
                        continue;
                struct gs_slice s;
                struct gs_error *err = NULL;
                int q = restored_slice(d, &cp, i, &s, units);
                if (q >= 0)
                        q = node_slice_restore_locked(d->node, &s, &err);
                if (q < 0)
                        gs_log_error("kubelet: pod %s container %s holds slice %s, which cannot be "
                                     "restored: %s", e->pod_uid, e->container, e->slice,
                                     err ? gs_error_msg(err) : strerror(-q));
                else
                        restored++;
                free(s.units);
                gs_error_free(err);
        }
        node_unlock(d->node);
        kube_checkpoint_done(&cp);
        if (restored)
                gs_log_warn("kubelet: %d slice%s of running pods restored from the kubelet's "
                            "checkpoint (the node's record had lost them)",
                            restored, restored == 1 ? "" : "s");
        return r < 0 ? r : restored;
}
