/* Device plugin logic (see device_plugin.h). */
#include "dp_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"

#define GRANULARITY (2ull << 20)

void dp_alloc_done(struct dp_alloc *a)
{
        dp_strv_done(&a->uuids);
        dp_strv_done(&a->ids);
}

int dp_id_parse(const char *id, unsigned *ret_gpu, unsigned *ret_unit)
{
        unsigned v[2] = {0, 0};
        const char *p = id;
        if (strncmp(p, "gpu", 3) != 0)
                return -EINVAL;
        p += 3;
        for (int k = 0; k < 2; k++) {
                const char *start = p;
                while (*p >= '0' && *p <= '9') {
                        v[k] = v[k] * 10 + (unsigned)(*p - '0');
                        if (v[k] >= 100000)
                                return -EINVAL;
                        p++;
                }
                if (p == start || (p - start > 1 && *start == '0'))
                        return -EINVAL;
                if (k == 0) {
                        if (strncmp(p, "-u", 2) != 0)
                                return -EINVAL;
                        p += 2;
                }
        }
        if (*p || v[0] >= DP_MAX_GPUS || v[1] >= DP_UNITS_PER_GPU)
                return -EINVAL;
        *ret_gpu = v[0];
        *ret_unit = v[1];
        return 0;
}

bool dp_strv_has(const struct dp_strv *s, const char *x)
{
        for (size_t i = 0; i < s->n; i++)
                if (strcmp(s->v[i], x) == 0)
                        return true;
        return false;
}

/* Units in use on GPU i by our allocations. */
uint32_t dp_used_locked(const struct dp *d, size_t i)
{
        uint32_t used = 0;
        for (size_t k = 0; k < d->n_allocs; k++) {
                const struct dp_alloc *a = &d->allocs[k];
                if (dp_strv_has(&a->uuids, d->gpus[i].uuid))
                        used += a->exclusive ? DP_UNITS_PER_GPU : a->units;
        }
        if (d->hooks.gpu_used)
                used += d->hooks.gpu_used(d->hooks.ctx, d->gpus[i].uuid);
        return used > DP_UNITS_PER_GPU ? DP_UNITS_PER_GPU : used;
}

uint32_t dp_free_locked(const struct dp *d, size_t i)
{
        return d->gpus[i].healthy ? DP_UNITS_PER_GPU - dp_used_locked(d, i) : 0;
}

/* Keep the allocations the daemon's ledger knows, drop the rest (their
 * slice directories too), and move next_seq past every id it has used. */
static int sync_with_ledger(struct dp *d, struct gs_error **err)
{
        const char **names = calloc(d->n_allocs ? d->n_allocs : 1, sizeof(*names));
        bool *known = calloc(d->n_allocs ? d->n_allocs : 1, sizeof(*known));
        int r = 0;
        if (!names || !known) {
                r = gs_error_set(err, -ENOMEM, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < d->n_allocs; i++)
                names[i] = d->allocs[i].slice;
        int64_t top = d->hooks.sync(d->hooks.ctx, names, d->n_allocs, known);
        if (top < 0) {
                r = gs_error_set(err, (int)top, "device plugin: cannot reconcile with the ledger");
                goto out;
        }
        if ((uint64_t)top >= d->next_seq)
                d->next_seq = (uint64_t)top + 1;
        size_t kept = 0;
        for (size_t i = 0; i < d->n_allocs; i++) {
                if (known[i]) {
                        d->allocs[kept++] = d->allocs[i];
                        continue;
                }
                fprintf(stderr, "gpuslice-kube: %s is not in the ledger (freed before a "
                                "restart): dropped\n", d->allocs[i].slice);
                if (!d->allocs[i].exclusive)
                        dp_store_remove_slice(d, d->allocs[i].slice);
                dp_alloc_done(&d->allocs[i]);
        }
        bool changed = kept != d->n_allocs;
        d->n_allocs = kept;
        if (changed)
                r = dp_store_save(d, err);
out:
        free(names);
        free(known);
        return r;
}

int dp_new(const struct dp_config *cfg, const struct dp_gpu *gpus, size_t n_gpus, struct dp **ret,
           struct gs_error **err)
{
        if (!cfg->state_dir || !*cfg->state_dir)
                return gs_error_set(err, -EINVAL, "device plugin: no state directory");
        if (n_gpus > DP_MAX_GPUS)
                return gs_error_set(err, -EINVAL, "device plugin: %zu GPUs, at most %u", n_gpus,
                                    DP_MAX_GPUS);
        struct dp *d = calloc(1, sizeof(*d));
        if (!d)
                return gs_error_set(err, -ENOMEM, "out of memory");
        pthread_mutex_init(&d->lock, NULL);
        d->state_dir = strdup(cfg->state_dir);
        d->shim_path = cfg->shim_path && *cfg->shim_path ? strdup(cfg->shim_path) : NULL;
        d->daemon_socket =
                cfg->daemon_socket && *cfg->daemon_socket ? strdup(cfg->daemon_socket) : NULL;
        d->cdi_kind = cfg->cdi_kind && *cfg->cdi_kind ? strdup(cfg->cdi_kind) : NULL;
        d->policy = cfg->policy;
        d->grace = cfg->release_grace_s;
        d->hooks = cfg->hooks;
        d->next_seq = 1;
        d->generation = 1;
        memcpy(d->gpus, gpus, n_gpus * sizeof(*gpus));
        d->n_gpus = n_gpus;
        int r = 0;
        if (!d->state_dir)
                r = gs_error_set(err, -ENOMEM, "out of memory");
        if (r >= 0)
                r = dp_store_write_preload(d, err);
        if (r >= 0)
                r = dp_store_load(d, err);
        if (r >= 0 && d->hooks.sync)
                r = sync_with_ledger(d, err);
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
        for (size_t i = 0; i < d->n_allocs; i++)
                dp_alloc_done(&d->allocs[i]);
        free(d->allocs);
        free(d->state_dir);
        free(d->shim_path);
        free(d->daemon_socket);
        free(d->cdi_kind);
        pthread_mutex_destroy(&d->lock);
        free(d);
        return NULL;
}

int dp_set_gpus(struct dp *d, const struct dp_gpu *gpus, size_t n_gpus)
{
        if (n_gpus > DP_MAX_GPUS)
                return -EINVAL;
        pthread_mutex_lock(&d->lock);
        bool changed = n_gpus != d->n_gpus;
        for (size_t i = 0; !changed && i < n_gpus; i++)
                changed = strcmp(gpus[i].uuid, d->gpus[i].uuid) != 0 ||
                          gpus[i].healthy != d->gpus[i].healthy;
        memcpy(d->gpus, gpus, n_gpus * sizeof(*gpus));
        d->n_gpus = n_gpus;
        if (changed)
                d->generation++;
        pthread_mutex_unlock(&d->lock);
        return changed ? 1 : 0;
}

uint64_t dp_generation(struct dp *d)
{
        pthread_mutex_lock(&d->lock);
        uint64_t g = d->generation;
        pthread_mutex_unlock(&d->lock);
        return g;
}

size_t dp_n_allocations(struct dp *d)
{
        pthread_mutex_lock(&d->lock);
        size_t n = d->n_allocs;
        pthread_mutex_unlock(&d->lock);
        return n;
}

uint32_t dp_gpu_used(struct dp *d, size_t i)
{
        pthread_mutex_lock(&d->lock);
        uint32_t u = i < d->n_gpus ? dp_used_locked(d, i) : 0;
        pthread_mutex_unlock(&d->lock);
        return u;
}

int dp_encode_devices(struct dp *d, uint64_t *ret_gen, uint8_t **ret_buf, size_t *ret_len)
{
        pthread_mutex_lock(&d->lock);
        size_t n = d->n_gpus * DP_UNITS_PER_GPU;
        struct dp_device *devs = calloc(n ? n : 1, sizeof(*devs));
        char *names = calloc(n ? n : 1, 16);
        int r = -ENOMEM;
        if (devs && names) {
                for (size_t i = 0; i < n; i++) {
                        char *id = names + i * 16;
                        snprintf(id, 16, "gpu%u-u%u", (unsigned)(i / DP_UNITS_PER_GPU) % 100u,
                                 (unsigned)(i % DP_UNITS_PER_GPU));
                        devs[i].id = id;
                        devs[i].healthy = d->gpus[i / DP_UNITS_PER_GPU].healthy;
                }
                r = dp_encode_list(devs, n, ret_buf, ret_len);
                if (r >= 0)
                        *ret_gen = d->generation;
        }
        pthread_mutex_unlock(&d->lock);
        free(devs);
        free(names);
        return r;
}

int dp_handle_options(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret, size_t *ret_len,
                      char **ret_msg)
{
        (void)d;
        int r = dp_decode_empty(req, len);
        if (r < 0)
                return r;
        return dp_encode_options(false, true, ret, ret_len);
}

int dp_handle_prestart(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret,
                       size_t *ret_len, char **ret_msg)
{
        (void)d;
        int r = dp_decode_prestart(req, len);
        if (r < 0)
                return r;
        return dp_encode_empty(ret, ret_len);
}

int dp_msg(char **ret_msg, int code, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *m = NULL;
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        free(*ret_msg);
        *ret_msg = m;
        return code;
}

/* Preferred answer for one container: units of the single best-fitting GPU
 * (the least free GPU by our ledger that has room and enough available
 * ids), must-include ids first. Falls back to the kubelet's order. */
static int prefer_one(struct dp *d, const struct dp_pref_request *q, struct dp_strv *out)
{
        if (q->size <= 0 || (size_t)q->size > q->available.n ||
            q->must_include.n > (size_t)q->size)
                return -EINVAL;
        size_t size = (size_t)q->size;
        /* taken[gpu * 1000 + unit]: in the answer already (O(1) lookups,
         * the lists can hold tens of thousands of ids). */
        _cleanup_free_ bool *taken = calloc((size_t)DP_MAX_GPUS * DP_UNITS_PER_GPU, sizeof(bool));
        if (!taken)
                return -ENOMEM;
        unsigned g, u;
        int must_gpu = -1;
        for (size_t i = 0; i < q->must_include.n; i++) {
                if (dp_id_parse(q->must_include.v[i], &g, &u) < 0)
                        return -EINVAL;
                if (taken[g * DP_UNITS_PER_GPU + u])
                        return -EINVAL; /* listed twice */
                taken[g * DP_UNITS_PER_GPU + u] = true;
                must_gpu = must_gpu == -1 || must_gpu == (int)g ? (int)g : -2;
        }
        size_t avail[DP_MAX_GPUS] = {0};
        for (size_t i = 0; i < q->available.n; i++)
                if (dp_id_parse(q->available.v[i], &g, &u) == 0 &&
                    !taken[g * DP_UNITS_PER_GPU + u])
                        avail[g]++;
        bool whole = size >= DP_UNITS_PER_GPU;
        size_t need_gpus = whole ? size / DP_UNITS_PER_GPU : 1;
        bool pick[DP_MAX_GPUS] = {false};
        size_t picked = 0;
        if (!whole || size % DP_UNITS_PER_GPU == 0) {
                size_t extra = size - q->must_include.n;
                while (picked < need_gpus) {
                        int best = -1;
                        for (size_t i = 0; i < d->n_gpus; i++) {
                                uint32_t fr = dp_free_locked(d, i);
                                if (pick[i] || (must_gpu >= 0 && !whole && i != (size_t)must_gpu))
                                        continue;
                                if (whole ? (fr != DP_UNITS_PER_GPU ||
                                             avail[i] < DP_UNITS_PER_GPU)
                                          : (fr < size || avail[i] < extra))
                                        continue;
                                if (best < 0 || fr < dp_free_locked(d, (size_t)best))
                                        best = (int)i;
                        }
                        if (best < 0)
                                break;
                        pick[best] = true;
                        picked++;
                }
        }
        out->v = calloc(size, sizeof(char *));
        if (!out->v)
                return -ENOMEM;
        for (size_t i = 0; i < q->must_include.n; i++)
                out->v[out->n++] = strdup(q->must_include.v[i]);
        bool fits = picked == need_gpus;
        /* The chosen GPU(s) first; if that falls short, any available id
         * (the kubelet fills a short answer itself anyway). */
        for (int pass = fits ? 0 : 1; pass < 2 && out->n < size; pass++)
                for (size_t i = 0; i < q->available.n && out->n < size; i++) {
                        const char *id = q->available.v[i];
                        if (dp_id_parse(id, &g, &u) < 0 || taken[g * DP_UNITS_PER_GPU + u] ||
                            (pass == 0 && !pick[g]))
                                continue;
                        taken[g * DP_UNITS_PER_GPU + u] = true;
                        out->v[out->n++] = strdup(id);
                }
        for (size_t i = 0; i < out->n; i++)
                if (!out->v[i])
                        return -ENOMEM;
        return 0;
}

int dp_handle_preferred(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret,
                        size_t *ret_len, char **ret_msg)
{
        struct dp_pref_request *reqs = NULL;
        size_t n = 0;
        int r = dp_decode_preferred(req, len, &reqs, &n);
        if (r < 0)
                return dp_msg(ret_msg, r, "GetPreferredAllocation: malformed request");
        struct dp_strv *out = calloc(n ? n : 1, sizeof(*out));
        if (!out) {
                dp_pref_request_array_free(reqs, n);
                return -ENOMEM;
        }
        pthread_mutex_lock(&d->lock);
        for (size_t i = 0; i < n && r >= 0; i++)
                r = prefer_one(d, &reqs[i], &out[i]);
        pthread_mutex_unlock(&d->lock);
        if (r >= 0)
                r = dp_encode_preferred_response(out, n, ret, ret_len);
        else
                dp_msg(ret_msg, r, "GetPreferredAllocation: invalid allocation size or ids");
        dp_strv_array_free(out, n);
        dp_pref_request_array_free(reqs, n);
        return r;
}

