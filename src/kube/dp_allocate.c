/* Allocate and release: map each container's units to a physical GPU with
 * room by the plugin's own record, whatever ids the kubelet picked, and free
 * allocations once PodResources shows nobody holds their units. */
#include "dp_internal.h"

#include "quantity.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ENVS 6
#define MAX_MOUNTS 6

/* One container's answer with the strings it owns. */
struct built {
        char *own[MAX_ENVS + MAX_MOUNTS * 2];
        size_t n_own;
        struct dp_kv envs[MAX_ENVS];
        struct dp_mount mounts[MAX_MOUNTS];
        char **cdi;
        size_t n_cdi;
        bool hooked; /* slice_add succeeded */
        struct dp_container_alloc ca;
        char slice[GS_SLICE_ID_MAX + 1]; /* the allocation made, "" if none */
};

static void built_done(struct built *b)
{
        for (size_t i = 0; i < b->n_own; i++)
                free(b->own[i]);
        for (size_t i = 0; i < b->n_cdi; i++)
                free(b->cdi[i]);
        free(b->cdi);
        memset(b, 0, sizeof(*b));
}

static const char *own(struct built *b, char *s)
{
        if (!s)
                return NULL;
        b->own[b->n_own++] = s;
        return s;
}

static int strcmp_p(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool sorted_has(const struct dp_strv *s, const char *x)
{
        return s->n && bsearch(&x, s->v, s->n, sizeof(char *), strcmp_p) != NULL;
}

/* Drop allocation k: its files, the ledger's slice, the record entry. */
static void release_locked(struct dp *d, size_t k)
{
        struct dp_alloc *a = &d->allocs[k];
        fprintf(stderr, "gpuslice-kube: released %s (%" PRIu32 " units%s%s)\n", a->slice,
                a->units, a->holder[0] ? ", held by " : "", a->holder);
        if (!a->exclusive)
                dp_store_remove_slice(d, a->slice);
        if (d->hooks.slice_remove)
                d->hooks.slice_remove(d->hooks.ctx, a->slice);
        dp_alloc_done(a);
        memmove(a, a + 1, (d->n_allocs - k - 1) * sizeof(*a));
        d->n_allocs--;
}

/* Drop the allocation named `slice`, if it is still recorded. */
static void release_slice_locked(struct dp *d, const char *slice)
{
        for (size_t k = 0; k < d->n_allocs; k++)
                if (strcmp(d->allocs[k].slice, slice) == 0) {
                        release_locked(d, k);
                        return;
                }
}

struct id_ref {
        const char *id; /* first member: strcmp_p compares it */
        size_t container;
};

/* A unit id named twice anywhere in one AllocateRequest: the kubelet never
 * does this, and honouring it would let one container's "previous holder"
 * release the allocation just made for another. Returns 0 or -EINVAL. */
static int check_unique_ids(const struct dp_strv *containers, size_t n, char **ret_msg)
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
                        refs[k++] = (struct id_ref){containers[c].v[i], c};
        qsort(refs, total, sizeof(*refs), strcmp_p);
        int r = 0;
        for (size_t i = 1; i < total && r == 0; i++) {
                const struct id_ref *x = &refs[i - 1], *y = &refs[i];
                if (strcmp(x->id, y->id) != 0)
                        continue;
                size_t lo = x->container < y->container ? x->container : y->container;
                size_t hi = x->container < y->container ? y->container : x->container;
                if (lo == hi)
                        r = dp_msg(ret_msg, -EINVAL, "Allocate: unit %s requested twice", x->id);
                else
                        r = dp_msg(ret_msg, -EINVAL,
                                   "Allocate: unit %s is requested by both container %zu and "
                                   "container %zu of one request; a unit belongs to one "
                                   "container",
                                   x->id, lo, hi);
        }
        free(refs);
        return r;
}

static size_t find_gpu(const struct dp *d, const char *uuid)
{
        for (size_t i = 0; i < d->n_gpus; i++)
                if (strcmp(d->gpus[i].uuid, uuid) == 0)
                        return i;
        return SIZE_MAX;
}

static void describe_free(const struct dp *d, char *buf, size_t size)
{
        size_t off = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < d->n_gpus && off < size; i++) {
                uint32_t local = d->hooks.gpu_used ? d->hooks.gpu_used(d->hooks.ctx, d->gpus[i].uuid)
                                                   : 0;
                char held[64] = "";
                if (local)
                        snprintf(held, sizeof(held), " (%" PRIu32 " held by local gpuslice slices)",
                                 local);
                int n = snprintf(buf + off, size - off, "%sgpu%zu %" PRIu32 "%s%s", i ? ", " : "",
                                 i, dp_free_locked(d, i), d->gpus[i].healthy ? "" : " (unhealthy)",
                                 held);
                if (n < 0)
                        break;
                off += (size_t)n;
        }
}

/* Choose GPUs for `units`; hint: GPU most of the kubelet's ids are on. */
static int place(const struct dp *d, uint32_t units, int hint, bool pick[], char **ret_msg)
{
        bool whole = units >= DP_UNITS_PER_GPU;
        size_t need = whole ? units / DP_UNITS_PER_GPU : 1;
        uint32_t want = whole ? DP_UNITS_PER_GPU : units;
        size_t got = 0;
        if (hint >= 0 && (size_t)hint < d->n_gpus && dp_free_locked(d, (size_t)hint) >= want) {
                pick[hint] = true;
                got++;
        }
        while (got < need) {
                int best = -1;
                for (size_t i = 0; i < d->n_gpus; i++) {
                        uint32_t fr = dp_free_locked(d, i);
                        if (pick[i] || fr < want)
                                continue;
                        if (best < 0 || fr < dp_free_locked(d, (size_t)best))
                                best = (int)i;
                }
                if (best < 0)
                        break;
                pick[best] = true;
                got++;
        }
        if (got == need)
                return 0;
        char free_desc[1024];
        describe_free(d, free_desc, sizeof(free_desc));
        if (whole)
                return dp_msg(ret_msg, -ENOSPC,
                              "gpuslice.io/gpu-milli: %" PRIu32 " units asks for %zu whole GPUs, "
                              "but only %zu GPUs on this node are entirely free (free units per "
                              "GPU: %s)",
                              units, need, got, free_desc);
        return dp_msg(ret_msg, -ENOSPC,
                      "gpuslice.io/gpu-milli: no single GPU on this node has %" PRIu32
                      " units free (free units per GPU: %s); a slice must fit on one GPU, so "
                      "the scheduler needs the gpuslice extender to place it",
                      units, free_desc);
}

static int build_slice(struct dp *d, const struct dp_alloc *a, const struct dp_gpu *g,
                       struct built *b, char **ret_msg)
{
        struct gs_slice_conf c;
        memset(&c, 0, sizeof(c));
        c.version = GS_SLICE_CONF_VERSION;
        snprintf(c.slice, sizeof(c.slice), "%s", a->slice);
        snprintf(c.gpu_uuid, sizeof(c.gpu_uuid), "%s", g->uuid);
        c.memory_limit = gs_default_memory_cap(a->units, g->memory);
        if (c.memory_limit == 0)
                return dp_msg(ret_msg, -ENOSPC, "gpuslice.io/gpu-milli: %" PRIu32
                              " units of a GPU with %" PRIu64 " bytes is under 2 MiB",
                              a->units, g->memory);
        c.compute_milli = a->units;
        c.policy = d->policy;
        snprintf(c.slice_dir, sizeof(c.slice_dir), "%s", DP_CONTAINER_SLICE_DIR);
        if (d->daemon_socket)
                snprintf(c.daemon_socket, sizeof(c.daemon_socket), "%s", d->daemon_socket);
        struct gs_error *e = NULL;
        int r = dp_store_write_slice(d, &c, &e);
        if (r >= 0 && d->hooks.slice_add) {
                struct dp_slice_info info = {a->slice, a->units,
                                             (const char *const *)a->uuids.v, a->uuids.n, &c};
                r = d->hooks.slice_add(d->hooks.ctx, &info, &e);
                b->hooked = r >= 0;
        }
        if (r < 0) {
                dp_msg(ret_msg, r, "gpuslice: cannot set up slice %s: %s", a->slice,
                       gs_error_msg(e));
                gs_error_free(e);
                dp_store_remove_slice(d, a->slice);
                return r;
        }
        size_t ne = 0, nm = 0;
        b->envs[ne++] = (struct dp_kv){"NVIDIA_VISIBLE_DEVICES", own(b, strdup(g->uuid))};
        b->envs[ne++] = (struct dp_kv){"CUDA_VISIBLE_DEVICES", own(b, strdup(g->uuid))};
        b->envs[ne++] = (struct dp_kv){"GPUSLICE_CONFIG", DP_CONTAINER_CONF};
        b->envs[ne++] = (struct dp_kv){"GPUSLICE_SLICE", own(b, strdup(a->slice))};
        b->mounts[nm++] = (struct dp_mount){DP_CONTAINER_CONF,
                                            own(b, dp_store_slice_conf(d, a->slice)), true};
        b->mounts[nm++] = (struct dp_mount){DP_CONTAINER_SLICE_DIR,
                                            own(b, dp_store_slice_dir(d, a->slice)), false};
        if (d->shim_path) {
                b->mounts[nm++] = (struct dp_mount){DP_CONTAINER_SHIM, d->shim_path, true};
                b->mounts[nm++] = (struct dp_mount){DP_CONTAINER_PRELOAD,
                                                    own(b, dp_store_preload_path(d)), true};
        }
        if (d->daemon_socket)
                b->mounts[nm++] = (struct dp_mount){d->daemon_socket, d->daemon_socket, false};
        b->ca.envs = b->envs;
        b->ca.n_envs = ne;
        b->ca.mounts = b->mounts;
        b->ca.n_mounts = nm;
        for (size_t i = 0; i < ne; i++)
                if (!b->envs[i].value)
                        return -ENOMEM;
        for (size_t i = 0; i < nm; i++)
                if (!b->mounts[i].host_path)
                        return -ENOMEM;
        return 0;
}

static int build_whole(struct dp *d, const struct dp_alloc *a, struct built *b,
                       char **ret_msg)
{
        size_t len = 1;
        for (size_t i = 0; i < a->uuids.n; i++)
                len += strlen(a->uuids.v[i]) + 1;
        char *list = calloc(1, len);
        if (!list)
                return -ENOMEM;
        for (size_t i = 0; i < a->uuids.n; i++) {
                if (i)
                        strncat(list, ",", len - strlen(list) - 1);
                strncat(list, a->uuids.v[i], len - strlen(list) - 1);
        }
        own(b, list);
        if (d->hooks.slice_add) {
                struct gs_error *e = NULL;
                struct dp_slice_info info = {a->slice, a->units,
                                             (const char *const *)a->uuids.v, a->uuids.n, NULL};
                int r = d->hooks.slice_add(d->hooks.ctx, &info, &e);
                b->hooked = r >= 0;
                if (r < 0) {
                        dp_msg(ret_msg, r, "gpuslice: cannot record %s: %s", a->slice,
                               gs_error_msg(e));
                        gs_error_free(e);
                        return r;
                }
        }
        b->envs[0] = (struct dp_kv){"NVIDIA_VISIBLE_DEVICES", list};
        b->envs[1] = (struct dp_kv){"CUDA_VISIBLE_DEVICES", list};
        b->envs[2] = (struct dp_kv){"GPUSLICE_SLICE", own(b, strdup(a->slice))};
        b->ca.envs = b->envs;
        b->ca.n_envs = 3;
        return b->envs[2].value ? 0 : -ENOMEM;
}

static int add_cdi(struct dp *d, const struct dp_alloc *a, struct built *b)
{
        if (!d->cdi_kind)
                return 0;
        b->cdi = calloc(a->uuids.n, sizeof(char *));
        if (!b->cdi)
                return -ENOMEM;
        for (size_t i = 0; i < a->uuids.n; i++) {
                if (asprintf(&b->cdi[i], "%s=%s", d->cdi_kind, a->uuids.v[i]) < 0)
                        return -ENOMEM;
                b->n_cdi++;
        }
        b->ca.cdi_devices = (const char *const *)b->cdi;
        b->ca.n_cdi_devices = b->n_cdi;
        return 0;
}

static int allocate_one(struct dp *d, struct dp_strv *ids, struct built *b, char **ret_msg)
{
        if (ids->n == 0)
                return dp_msg(ret_msg, -EINVAL, "Allocate: a container request with no device ids");
        unsigned count[DP_MAX_GPUS] = {0};
        for (size_t i = 0; i < ids->n; i++) {
                unsigned g, u;
                if (dp_id_parse(ids->v[i], &g, &u) < 0 || g >= d->n_gpus)
                        return dp_msg(ret_msg, -EINVAL,
                                      "Allocate: %s is not a gpuslice.io/gpu-milli unit of this "
                                      "node (units are gpu<N>-u<0..999>)",
                                      ids->v[i]);
                count[g]++;
        }
        qsort(ids->v, ids->n, sizeof(char *), strcmp_p);
        for (size_t i = 1; i < ids->n; i++)
                if (strcmp(ids->v[i - 1], ids->v[i]) == 0)
                        return dp_msg(ret_msg, -EINVAL, "Allocate: unit %s requested twice",
                                      ids->v[i]);
        uint32_t units = (uint32_t)ids->n;
        if (units > DP_UNITS_PER_GPU && units % DP_UNITS_PER_GPU)
                return dp_msg(ret_msg, -EINVAL,
                              "gpuslice.io/gpu-milli: %" PRIu32 " units is neither a slice of "
                              "one GPU (1..999) nor whole GPUs (1000, 2000, ...)",
                              units);
        /* The kubelet hands out a unit only when its previous holder is
         * gone: allocations that still name these units are over. */
        for (size_t k = d->n_allocs; k-- > 0;) {
                const struct dp_alloc *a = &d->allocs[k];
                for (size_t i = 0; i < ids->n; i++)
                        if (sorted_has(&a->ids, ids->v[i])) {
                                release_locked(d, k);
                                break;
                        }
        }
        int hint = -1;
        for (size_t g = 0; g < d->n_gpus; g++)
                if (count[g] && (hint < 0 || count[g] > count[hint]))
                        hint = (int)g;
        bool pick[DP_MAX_GPUS] = {false};
        int r = place(d, units, hint, pick, ret_msg);
        if (r < 0)
                return r;
        struct dp_alloc a;
        memset(&a, 0, sizeof(a));
        snprintf(a.slice, sizeof(a.slice), "k8s-%" PRIu64, d->next_seq++);
        a.units = units;
        a.exclusive = units >= DP_UNITS_PER_GPU;
        a.created = (int64_t)time(NULL);
        a.ids = *ids;
        size_t npick = 0;
        for (size_t g = 0; g < d->n_gpus; g++)
                npick += pick[g];
        a.uuids.v = calloc(npick, sizeof(char *));
        if (!a.uuids.v)
                return -ENOMEM;
        for (size_t g = 0; g < d->n_gpus; g++)
                if (pick[g] && (a.uuids.v[a.uuids.n++] = strdup(d->gpus[g].uuid)) == NULL) {
                        dp_strv_done(&a.uuids);
                        return -ENOMEM;
                }
        size_t first = find_gpu(d, a.uuids.v[0]);
        r = a.exclusive ? build_whole(d, &a, b, ret_msg) : build_slice(d, &a, &d->gpus[first], b, ret_msg);
        if (r >= 0)
                r = add_cdi(d, &a, b);
        struct dp_alloc *nv = r >= 0 ? realloc(d->allocs, (d->n_allocs + 1) * sizeof(*nv)) : NULL;
        if (!nv) {
                if (!a.exclusive)
                        dp_store_remove_slice(d, a.slice);
                if (b->hooked && d->hooks.slice_remove)
                        d->hooks.slice_remove(d->hooks.ctx, a.slice);
                dp_strv_done(&a.uuids);
                return r < 0 ? r : -ENOMEM;
        }
        d->allocs = nv;
        d->allocs[d->n_allocs++] = a;
        snprintf(b->slice, sizeof(b->slice), "%s", a.slice);
        *ids = (struct dp_strv){0}; /* now owned by the record */
        fprintf(stderr, "gpuslice-kube: allocated %s: %" PRIu32 " units on %s%s\n", a.slice,
                units, a.uuids.v[0], a.uuids.n > 1 ? " and more" : "");
        return 0;
}

int dp_handle_allocate(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret,
                       size_t *ret_len, char **ret_msg)
{
        struct dp_strv *containers = NULL;
        size_t n = 0;
        int r = dp_decode_allocate(req, len, &containers, &n);
        if (r < 0)
                return dp_msg(ret_msg, r, "Allocate: malformed request (%s)",
                              r == -E2BIG ? "too many containers or ids"
                              : r == -EINVAL ? "empty or over-long device id"
                                             : "not an AllocateRequest");
        if (n == 0) {
                free(containers);
                return dp_msg(ret_msg, -EINVAL, "Allocate: no container requests");
        }
        r = check_unique_ids(containers, n, ret_msg);
        if (r < 0) {
                dp_strv_array_free(containers, n);
                return r;
        }
        struct built *b = calloc(n, sizeof(*b));
        if (!b) {
                dp_strv_array_free(containers, n);
                return -ENOMEM;
        }
        pthread_mutex_lock(&d->lock);
        size_t done = 0;
        for (; done < n; done++) {
                r = allocate_one(d, &containers[done], &b[done], ret_msg);
                if (r < 0)
                        break;
        }
        if (r < 0) {
                /* Roll back exactly what this call made. */
                for (size_t i = 0; i < done; i++)
                        release_slice_locked(d, b[i].slice);
        } else {
                struct gs_error *e = NULL;
                r = dp_store_save(d, &e);
                if (r < 0) {
                        dp_msg(ret_msg, r, "gpuslice: cannot record the allocation: %s",
                               gs_error_msg(e));
                        gs_error_free(e);
                        for (size_t i = 0; i < n; i++)
                                release_slice_locked(d, b[i].slice);
                }
        }
        pthread_mutex_unlock(&d->lock);
        if (r >= 0) {
                struct dp_container_alloc *ca = calloc(n, sizeof(*ca));
                if (!ca)
                        r = -ENOMEM;
                for (size_t i = 0; ca && i < n; i++)
                        ca[i] = b[i].ca;
                if (ca)
                        r = dp_encode_allocate_response(ca, n, ret, ret_len);
                free(ca);
        }
        for (size_t i = 0; i < n; i++)
                built_done(&b[i]);
        free(b);
        dp_strv_array_free(containers, n);
        return r;
}

int dp_reconcile(struct dp *d, const struct dp_pod_devices *pods, size_t n_pods, int64_t now)
{
        size_t total = 0;
        for (size_t i = 0; i < n_pods; i++)
                total += pods[i].ids.n;
        struct {
                const char *id;
                size_t pod;
        } *held = calloc(total ? total : 1, sizeof(*held));
        if (!held)
                return -ENOMEM;
        size_t k = 0;
        for (size_t i = 0; i < n_pods; i++)
                for (size_t j = 0; j < pods[i].ids.n; j++)
                        held[k++] = (__typeof__(*held)){pods[i].ids.v[j], i};
        qsort(held, total, sizeof(*held), strcmp_p); /* id is the first member */
        int released = 0;
        pthread_mutex_lock(&d->lock);
        for (size_t a = d->n_allocs; a-- > 0;) {
                struct dp_alloc *x = &d->allocs[a];
                __typeof__(held) hit = NULL;
                for (size_t i = 0; i < x->ids.n && !hit; i++) {
                        const char *key = x->ids.v[i];
                        hit = bsearch(&key, held, total, sizeof(*held), strcmp_p);
                }
                if (hit) {
                        const struct dp_pod_devices *p = &pods[hit->pod];
                        x->unheld = 0;
                        snprintf(x->holder, sizeof(x->holder), "%s/%s/%s", p->ns, p->pod,
                                 p->container);
                        continue;
                }
                if (now - x->created < d->grace)
                        continue;
                if (++x->unheld < 2)
                        continue;
                release_locked(d, a);
                released++;
        }
        if (released) {
                struct gs_error *e = NULL;
                if (dp_store_save(d, &e) < 0) {
                        fprintf(stderr, "gpuslice-kube: %s\n", gs_error_msg(e));
                        gs_error_free(e);
                }
        }
        pthread_mutex_unlock(&d->lock);
        free(held);
        return released;
}
