/* SPDX-License-Identifier: Apache-2.0 */
/* A node's report (the annotation gpuslice.io/gpus, ext_args.h), parsed
 * strictly: every GPU field present and in range, no GPU index twice. */
#include "ext_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "number.h"

static int digits(const char *s, size_t n, int *ret)
{
        uint64_t v;
        if (gs_u64_parse(s, n, 9999, &v) < 0)
                return -EINVAL;
        *ret = (int)v;
        return 0;
}

int ext_rfc3339_parse(const char *s, int64_t *ret)
{
        /* YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM) */
        struct tm tm = { 0 };
        int y, mo, d, h, mi, sec;
        if (strlen(s) < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
            s[13] != ':' || s[16] != ':' || digits(s, 4, &y) < 0 || digits(s + 5, 2, &mo) < 0 ||
            digits(s + 8, 2, &d) < 0 || digits(s + 11, 2, &h) < 0 || digits(s + 14, 2, &mi) < 0 ||
            digits(s + 17, 2, &sec) < 0)
                return -EINVAL;
        if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || y < 1970)
                return -EINVAL;
        const char *p = s + 19;
        if (*p == '.') {
                size_t n = strspn(p + 1, "0123456789");
                if (n == 0 || n > 9)
                        return -EINVAL;
                p += 1 + n;
        }
        int64_t off = 0;
        if ((p[0] == 'Z' || p[0] == 'z') && !p[1]) {
                off = 0;
        } else if ((p[0] == '+' || p[0] == '-') && strlen(p) == 6 && p[3] == ':') {
                int oh, om;
                if (digits(p + 1, 2, &oh) < 0 || digits(p + 4, 2, &om) < 0 || oh > 23 || om > 59)
                        return -EINVAL;
                off = (p[0] == '+' ? 1 : -1) * (int64_t)(oh * 3600 + om * 60);
        } else {
                return -EINVAL;
        }
        tm.tm_year = y - 1900;
        tm.tm_mon = mo - 1;
        tm.tm_mday = d;
        tm.tm_hour = h;
        tm.tm_min = mi;
        tm.tm_sec = sec;
        time_t t = timegm(&tm);
        if (t == (time_t)-1)
                return -EINVAL;
        *ret = (int64_t)t - off;
        return 0;
}

static int get_u64(const json_t *o, const char *key, uint64_t max, uint64_t *ret)
{
        const json_t *v = json_object_get(o, key);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (uint64_t)json_integer_value(v) > max)
                return -EINVAL;
        *ret = (uint64_t)json_integer_value(v);
        return 0;
}

static int gpu_parse(const json_t *g, size_t i, struct ext_gpu *out, struct gs_error **err)
{
        uint64_t index, milli, mfree, mtotal;
        const json_t *healthy = json_object_get(g, "healthy");
        const char *uuid = json_string_value(json_object_get(g, "uuid"));
        const char *model = json_string_value(json_object_get(g, "model"));
        if (!json_is_object(g))
                return gs_error_set(err, -EINVAL, "gpus[%zu] is not an object", i);
        if (get_u64(g, "index", GS_MAX_GPUS - 1, &index) < 0)
                return gs_error_set(err, -EINVAL,
                                    "gpus[%zu].index is not an integer from 0 to "
                                    "%d",
                                    i, GS_MAX_GPUS - 1);
        if (get_u64(g, "milli_free", 1000, &milli) < 0)
                return gs_error_set(err, -EINVAL,
                                    "gpus[%zu].milli_free is not an integer from 0 "
                                    "to 1000",
                                    i);
        if (get_u64(g, "memory_total", INT64_MAX, &mtotal) < 0 ||
            get_u64(g, "memory_free", mtotal, &mfree) < 0)
                return gs_error_set(err, -EINVAL,
                                    "gpus[%zu]: memory_free and memory_total must "
                                    "be byte counts, free at most total",
                                    i);
        if (!json_is_boolean(healthy))
                return gs_error_set(err, -EINVAL, "gpus[%zu].healthy is not a boolean", i);
        if ((uuid && strlen(uuid) >= sizeof(out->uuid)) ||
            (model && strlen(model) >= sizeof(out->model)))
                return gs_error_set(err, -EINVAL, "gpus[%zu]: uuid or model too long", i);
        out->index = (unsigned)index;
        out->milli_free = (uint32_t)milli;
        out->memory_free = mfree;
        out->memory_total = mtotal;
        out->healthy = json_is_true(healthy);
        uint64_t slices = milli < 1000, overhead = GS_DEFAULT_CONTEXT_OVERHEAD;
        if ((json_object_get(g, "slices") && get_u64(g, "slices", GS_LEDGER_MAX_SLICES, &slices) < 0) ||
            (json_object_get(g, "context_overhead") &&
             get_u64(g, "context_overhead", mtotal, &overhead) < 0))
                return gs_error_set(err, -EINVAL, "gpus[%zu]: slices and context_overhead must be "
                                    "counts (the overhead at most memory_total)", i);
        out->n_slices = (unsigned)slices;
        out->context_overhead = overhead;
        snprintf(out->uuid, sizeof(out->uuid), "%s", uuid ? uuid : "");
        snprintf(out->model, sizeof(out->model), "%s", model ? model : "");
        return 0;
}

static int pods_parse(const json_t *pods, struct ext_node_state *st, struct gs_error **err)
{
        if (!pods)
                return 0;
        if (!json_is_array(pods) || json_array_size(pods) > EXT_MAX_REPORTED_PODS)
                return gs_error_set(err, -EINVAL, "pods is not an array of at most %d uids",
                                    EXT_MAX_REPORTED_PODS);
        st->has_pods = true;
        if (json_array_size(pods) == 0)
                return 0;
        st->pods = calloc(json_array_size(pods), sizeof(*st->pods));
        if (!st->pods)
                return gs_error_set(err, -ENOMEM, "out of memory");
        size_t i;
        const json_t *v;
        json_array_foreach(pods, i, v)
        {
                const char *uid = json_string_value(v);
                if (!uid || !*uid || strlen(uid) >= EXT_UID_MAX)
                        return gs_error_set(err, -EINVAL, "pods[%zu] is not a pod uid", i);
                memcpy(st->pods[i], uid, strlen(uid) + 1);
                st->n_pods++;
        }
        return 0;
}

static int state_parse(const json_t *root, struct ext_node_state *st, struct gs_error **err)
{
        if (!json_is_object(root))
                return gs_error_set(err, -EINVAL, "not a JSON object");
        if (get_u64(root, "generation", INT64_MAX, &st->generation) < 0)
                return gs_error_set(err, -EINVAL, "generation is not a non-negative integer");
        const char *t = json_string_value(json_object_get(root, "time"));
        if (!t || ext_rfc3339_parse(t, &st->time_s) < 0)
                return gs_error_set(err, -EINVAL, "time is not an RFC 3339 timestamp");
        const json_t *gpus = json_object_get(root, "gpus");
        if (!json_is_array(gpus) || json_array_size(gpus) > GS_MAX_GPUS)
                return gs_error_set(err, -EINVAL, "gpus is not an array of at most %d GPUs",
                                    GS_MAX_GPUS);
        if (json_array_size(gpus)) {
                st->gpus = calloc(json_array_size(gpus), sizeof(*st->gpus));
                if (!st->gpus)
                        return gs_error_set(err, -ENOMEM, "out of memory");
        }
        const json_t *pl = json_object_get(root, "placement");
        st->placement = GS_PLACE_BINPACK;
        if (pl && (!json_is_string(pl) ||
                   gs_placement_policy_parse(json_string_value(pl), &st->placement, NULL) < 0))
                return gs_error_set(err, -EINVAL, "placement is not a placement policy");
        uint64_t seen = 0;
        size_t i;
        const json_t *g;
        json_array_foreach(gpus, i, g)
        {
                int r = gpu_parse(g, i, &st->gpus[i], err);
                if (r < 0)
                        return r;
                if (seen & (1ull << st->gpus[i].index))
                        return gs_error_set(err, -EINVAL, "gpus[%zu].index %u appears twice", i,
                                            st->gpus[i].index);
                seen |= 1ull << st->gpus[i].index;
                st->n_gpus++;
        }
        return pods_parse(json_object_get(root, "pods"), st, err);
}

int ext_node_state_parse(const char *text, size_t len, struct ext_node_state *ret,
                         struct gs_error **err)
{
        json_error_t je;
        json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!root)
                return gs_error_set(err, -EINVAL, "not JSON (column %d: %.80s)", je.column,
                                    je.text);
        struct ext_node_state st = { 0 };
        int r = state_parse(root, &st, err);
        json_decref(root);
        if (r < 0) {
                ext_node_state_done(&st);
                return r;
        }
        *ret = st;
        return 0;
}

void ext_node_state_done(struct ext_node_state *st)
{
        if (!st)
                return;
        free(st->gpus);
        free(st->pods);
        memset(st, 0, sizeof(*st));
}
