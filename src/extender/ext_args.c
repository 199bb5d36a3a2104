/* SPDX-License-Identifier: Apache-2.0 */
/* ExtenderArgs decoding (ext_args.h): the envelope, the pod's request as
 * the kubelet counts it, and each Node's name and report. The report
 * itself is parsed by ext_state.c. */
#include "ext_args.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "number.h"
#include "quantity.h"

#define MILLI_MAX (GS_QUANTITY_MAX_GPUS * GS_MILLI_PER_GPU)

/* The member of object o named `name`, compared case-insensitively (Go's
 * encoding/json decodes ExtenderArgs so; an exact match wins). */
static json_t *get_ci(const json_t *o, const char *name)
{
        json_t *exact = json_object_get(o, name);
        if (exact)
                return exact;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)o, k, v) if (strcasecmp(k, name) == 0) return v;
        return NULL;
}

static int copy_str(const json_t *v, char *dst, size_t size)
{
        const char *s = json_string_value(v);
        if (!s || strlen(s) >= size)
                return -EINVAL;
        memcpy(dst, s, strlen(s) + 1);
        return 0;
}

/* An integer Kubernetes quantity as the API server serialises it: digits
 * with an optional decimal suffix (k, M, G) or exponent (e3): 1000 comes
 * back as "1k". 0 and *ret (at most MILLI_MAX), or -EINVAL. */
static int int_quantity_parse(const json_t *v, uint64_t *ret)
{
        if (json_is_integer(v)) {
                json_int_t i = json_integer_value(v);
                if (i < 0 || (uint64_t)i > MILLI_MAX)
                        return -EINVAL;
                *ret = (uint64_t)i;
                return 0;
        }
        const char *s = json_string_value(v);
        if (!s)
                return -EINVAL;
        size_t digits = strspn(s, "0123456789");
        uint64_t n, mult = 1;
        if (digits == 0 || gs_u64_parse(s, digits, MILLI_MAX, &n) < 0)
                return -EINVAL;
        const char *suf = s + digits;
        if (strcmp(suf, "k") == 0) {
                mult = 1000;
        } else if (strcmp(suf, "M") == 0) {
                mult = 1000000;
        } else if (suf[0] == 'e' || suf[0] == 'E') {
                uint64_t e;
                if (gs_u64_parse_str(suf + 1, 6, &e) < 0)
                        return -EINVAL;
                while (e--)
                        mult *= 10;
        } else if (*suf) {
                return -EINVAL;
        }
        if (n && mult > MILLI_MAX / n)
                return -EINVAL;
        *ret = n * mult;
        return 0;
}

/* The gpuslice.io/gpu-milli of one container: its limit, else its
 * request (the API server defaults the request to the limit; a request
 * alone is refused for extended resources, but be lenient). */
static int container_milli(const json_t *c, uint64_t *ret, char *why, size_t size)
{
        const json_t *res = json_object_get(c, "resources");
        const json_t *v = json_object_get(json_object_get(res, "limits"), EXT_RESOURCE);
        if (!v)
                v = json_object_get(json_object_get(res, "requests"), EXT_RESOURCE);
        *ret = 0;
        if (!v)
                return 0;
        if (int_quantity_parse(v, ret) < 0) {
                char q[GS_QUOTE_MAX];
                const char *name = json_string_value(json_object_get(c, "name"));
                snprintf(why, size, "container %.63s: %s %s is not an integer from 0 to %u",
                         name ? name : "?", EXT_RESOURCE,
                         json_is_string(v) ? gs_quote(json_string_value(v), q, sizeof(q))
                                           : "(not a string)",
                         MILLI_MAX);
                return -EINVAL;
        }
        return 0;
}

/* Say why the pod can never be placed; returns -EINVAL. */
static int GS_PRINTF(2, 3) set_invalid(struct ext_pod *p, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->invalid, sizeof(p->invalid), fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static bool slice_valid(uint64_t m)
{
        return m < GS_MILLI_PER_GPU || m % GS_MILLI_PER_GPU == 0;
}

static const char *name_of(const json_t *c)
{
        const char *n = json_string_value(json_object_get(c, "name"));
        return n ? n : "?";
}

/* One slice per container with units, as the node makes them: each app
 * container and each sidecar has its own; a plain init container's units
 * are handed on to the containers after it, so with one the pod is
 * counted as a single slice of its effective request (stricter than the
 * node, never looser). */
static int pod_slices(const json_t *apps, const json_t *inits, bool plain_init, uint64_t total,
                      struct ext_pod *p)
{
        size_t size = sizeof(p->invalid);
        if (plain_init) {
                if (!slice_valid(total))
                        return set_invalid(p,
                                           "%s %llu (init containers counted as "
                                           "the kubelet does): a slice is 1..999, whole GPUs are "
                                           "multiples of 1000",
                                           EXT_RESOURCE, (unsigned long long)total);
                p->slices[p->n_slices++] = (uint32_t)total;
                return 0;
        }
        const json_t *lists[2] = { inits, apps };
        for (int l = 0; l < 2; l++) {
                size_t i;
                const json_t *c;
                json_array_foreach(lists[l], i, c)
                {
                        uint64_t m;
                        container_milli(c, &m, p->invalid, size); /* checked before */
                        if (m == 0)
                                continue;
                        if (!slice_valid(m))
                                return set_invalid(p,
                                                   "container %.63s: %s %llu: a "
                                                   "slice is 1..999, whole GPUs are multiples of "
                                                   "1000",
                                                   name_of(c), EXT_RESOURCE, (unsigned long long)m);
                        if (p->n_slices == EXT_MAX_SLICES)
                                return set_invalid(p,
                                                   "more than %d containers ask "
                                                   "for %s",
                                                   EXT_MAX_SLICES, EXT_RESOURCE);
                        p->slices[p->n_slices++] = (uint32_t)m;
                }
        }
        return 0;
}

/* The pod's effective request, as the kubelet and the scheduler count it
 * (PodRequests): app containers and restartable init containers (sidecars,
 * restartPolicy Always) run together; each ordinary init container runs
 * alone beside the sidecars started before it. Then its slices. */
static int pod_request(const json_t *spec, struct ext_pod *p)
{
        const json_t *apps = json_object_get(spec, "containers");
        const json_t *inits = json_object_get(spec, "initContainers");
        if (json_array_size(apps) + json_array_size(inits) > EXT_MAX_CONTAINERS)
                return set_invalid(p, "more than %d containers", EXT_MAX_CONTAINERS);
        uint64_t app_sum = 0, sidecars = 0, init_max = 0, m;
        bool plain_init = false;
        size_t i;
        const json_t *c;
        json_array_foreach(apps, i, c)
        {
                if (container_milli(c, &m, p->invalid, sizeof(p->invalid)) < 0)
                        return -EINVAL;
                app_sum += m;
        }
        json_array_foreach(inits, i, c)
        {
                if (container_milli(c, &m, p->invalid, sizeof(p->invalid)) < 0)
                        return -EINVAL;
                const char *rp = json_string_value(json_object_get(c, "restartPolicy"));
                if (rp && strcmp(rp, "Always") == 0) {
                        sidecars += m;
                        init_max = GS_MAX(init_max, sidecars);
                } else {
                        init_max = GS_MAX(init_max, m + sidecars);
                        plain_init |= m > 0;
                }
        }
        uint64_t total = GS_MAX(app_sum + sidecars, init_max);
        if (total > MILLI_MAX)
                return set_invalid(p, "%s %llu in all: more than %u", EXT_RESOURCE,
                                   (unsigned long long)total, MILLI_MAX);
        p->milli = (uint32_t)total;
        return total ? pod_slices(apps, inits, plain_init, total, p) : 0;
}

static int pod_decode(const json_t *pod, struct ext_pod *p, struct gs_error **err)
{
        if (!json_is_object(pod))
                return gs_error_set(err, -EINVAL, "Pod is missing or not an object");
        const json_t *meta = json_object_get(pod, "metadata");
        const json_t *uid = json_object_get(meta, "uid");
        if (copy_str(json_object_get(meta, "name"), p->name, sizeof(p->name)) < 0 ||
            (json_object_get(meta, "namespace") &&
             copy_str(json_object_get(meta, "namespace"), p->ns, sizeof(p->ns)) < 0) ||
            (uid && copy_str(uid, p->uid, sizeof(p->uid)) < 0))
                return gs_error_set(err, -EINVAL,
                                    "Pod.metadata: name, namespace or uid missing, "
                                    "not a string or too long");
        if (!uid) /* a pod the API server has not stored; key it by name */
                snprintf(p->uid, sizeof(p->uid), "%.20s/%.40s", p->ns, p->name);
        if (pod_request(json_object_get(pod, "spec"), p) < 0) {
                p->milli = 0;
                p->n_slices = 0;
        }
        const char *mem = json_string_value(
                json_object_get(json_object_get(meta, "annotations"), EXT_ANNOTATION_MEMORY));
        if (mem && !p->invalid[0]) {
                struct gs_error *e = NULL;
                if (gs_memory_size_parse("annotation " EXT_ANNOTATION_MEMORY, mem, &p->memory,
                                             &e) < 0) {
                        /* Like a bad request: an invalid pod asks for nothing. */
                        snprintf(p->invalid, sizeof(p->invalid), "%s", gs_error_msg(e));
                        p->milli = 0;
                        p->n_slices = 0;
                }
                gs_error_free(e);
        }
        return 0;
}

static int node_decode(const json_t *obj, struct ext_node *n, struct gs_error **err)
{
        const json_t *meta = json_object_get(obj, "metadata");
        if (copy_str(json_object_get(meta, "name"), n->name, sizeof(n->name)) < 0 || !n->name[0])
                return gs_error_set(err, -EINVAL,
                                    "a node of Nodes.items has no metadata.name (or "
                                    "one that is not a string or too long)");
        const json_t *ann =
                json_object_get(json_object_get(meta, "annotations"), EXT_ANNOTATION_GPUS);
        if (!ann) {
                snprintf(n->why, sizeof(n->why),
                         "no per-GPU state: annotation %s is missing (is "
                         "gpusliced running there with --report-node?)",
                         EXT_ANNOTATION_GPUS);
                return 0;
        }
        struct gs_error *e = NULL;
        const char *text = json_string_value(ann);
        if (!text) {
                snprintf(n->why, sizeof(n->why), "annotation %s is not a string",
                         EXT_ANNOTATION_GPUS);
        } else if (ext_node_state_parse(text, json_string_length(ann), &n->st, &e) < 0) {
                if (e && e->code == -ENOMEM) {
                        gs_error_free(e);
                        return gs_error_set(err, -ENOMEM, "out of memory");
                }
                snprintf(n->why, sizeof(n->why), "annotation %s is malformed: %s",
                         EXT_ANNOTATION_GPUS, gs_error_msg(e));
        } else {
                n->state_ok = true;
        }
        gs_error_free(e);
        return 0;
}

static int nodes_alloc(struct ext_args *a, size_t n, struct gs_error **err)
{
        if (n > EXT_MAX_NODES)
                return gs_error_set(err, -EINVAL, "%zu nodes (at most %d)", n, EXT_MAX_NODES);
        a->nodes = calloc(n ? n : 1, sizeof(*a->nodes));
        if (!a->nodes)
                return gs_error_set(err, -ENOMEM, "out of memory");
        return 0;
}

static int nodes_decode(const json_t *nodes, const json_t *names, struct ext_args *a,
                        struct gs_error **err)
{
        if (nodes && !json_is_null(nodes)) {
                const json_t *items = json_object_get(nodes, "items");
                if (!json_is_object(nodes) || !(json_is_array(items) || json_is_null(items)))
                        return gs_error_set(err, -EINVAL,
                                            "Nodes is not a NodeList (an object "
                                            "with an items array)");
                int r = nodes_alloc(a, json_array_size(items), err);
                if (r < 0)
                        return r;
                size_t i;
                const json_t *obj;
                json_array_foreach(items, i, obj)
                {
                        a->nodes[i].json_index = i;
                        if ((r = node_decode(obj, &a->nodes[i], err)) < 0)
                                return r;
                        a->n_nodes++;
                }
                return 0;
        }
        if (!json_is_array(names))
                return gs_error_set(err, -EINVAL, "neither Nodes nor NodeNames is given");
        a->names_only = true;
        int r = nodes_alloc(a, json_array_size(names), err);
        if (r < 0)
                return r;
        size_t i;
        const json_t *v;
        json_array_foreach(names, i, v)
        {
                if (copy_str(v, a->nodes[i].name, sizeof(a->nodes[i].name)) < 0)
                        return gs_error_set(err, -EINVAL,
                                            "NodeNames[%zu] is not a string (or is "
                                            "too long)",
                                            i);
                a->nodes[i].json_index = i;
                snprintf(a->nodes[i].why, sizeof(a->nodes[i].why),
                         "no per-GPU state: the scheduler sent node names only (nodeCacheCapable "
                         "must be false for gpuslice-extender)");
                a->n_nodes++;
        }
        return 0;
}

int ext_args_decode(const char *buf, size_t len, struct ext_args *ret, json_t **ret_nodes,
                    struct gs_error **err)
{
        json_error_t je;
        json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(root)) {
                json_decref(root);
                return gs_error_set(err, -EINVAL,
                                    "ExtenderArgs is not a JSON object (line %d, "
                                    "column %d: %.80s)",
                                    je.line, je.column, root ? "not an object" : je.text);
        }
        struct ext_args a = { 0 };
        int r = pod_decode(get_ci(root, "Pod"), &a.pod, err);
        if (r == 0)
                r = nodes_decode(get_ci(root, "Nodes"), get_ci(root, "NodeNames"), &a, err);
        if (r < 0) {
                ext_args_done(&a);
                json_decref(root);
                return r;
        }
        if (ret_nodes) {
                json_t *items =
                        a.names_only ? NULL : json_object_get(get_ci(root, "Nodes"), "items");
                *ret_nodes = json_is_array(items) ? json_incref(items) : NULL;
        }
        json_decref(root);
        *ret = a;
        return 0;
}

void ext_args_done(struct ext_args *a)
{
        if (!a)
                return;
        for (size_t i = 0; i < a->n_nodes; i++)
                ext_node_state_done(&a->nodes[i].st);
        free(a->nodes);
        memset(a, 0, sizeof(*a));
}
