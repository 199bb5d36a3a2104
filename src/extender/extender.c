/* SPDX-License-Identifier: Apache-2.0 */
/* The filter and prioritize verbs of gpuslice-extender (extender.h): a
 * node's report less the record's charges, put to core's cluster
 * placement policy, and the replies in the scheduler's JSON. */
#include "extender.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ext_place.h"
#include "log.h"

static int64_t now_s(const struct extender *e)
{
        return e->cfg.now ? e->cfg.now() : (int64_t)time(NULL);
}

/* The wall clock in microseconds (the test clock's seconds when set). */
static uint64_t now_us(const struct extender *e)
{
        if (e->cfg.now)
                return (uint64_t)e->cfg.now() * 1000000u;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000;
}

int extender_init(struct extender *e, const struct ext_config *cfg)
{
        memset(e, 0, sizeof(*e));
        e->cfg = *cfg;
        if (!(e->model = gs_cp_model_new()))
                return -ENOMEM;
        pthread_mutex_init(&e->model_lock, NULL);
        ext_admitted_init(&e->admitted, cfg->admitted_ttl_s);
        return 0;
}

void extender_done(struct extender *e)
{
        if (!e || !e->model)
                return;
        e->model = gs_cp_model_free(e->model);
        pthread_mutex_destroy(&e->model_lock);
        ext_admitted_done(&e->admitted);
}

/* Whether a node's report is too old; *age its age in seconds. */
static bool stale(const struct extender *e, const struct ext_node_state *st, int64_t now,
                  int64_t *age)
{
        *age = now - st->time_s;
        return *age > e->cfg.stale_after_s;
}

/* The node's report, less what the record charges there, as core sees
 * it. false with n->why set when there is no usable report. */
static bool view_of(struct extender *e, struct ext_node *n, int64_t now, struct ext_view *v)
{
        if (!n->state_ok)
                return false;
        int64_t age;
        if (stale(e, &n->st, now, &age)) {
                snprintf(n->why, sizeof(n->why),
                         "per-GPU state is stale: the node's last report "
                         "(%s, generation %llu) is %llds old, over --stale-after %llds",
                         EXT_ANNOTATION_GPUS, (unsigned long long)n->st.generation, (long long)age,
                         (long long)e->cfg.stale_after_s);
                return false;
        }
        unsigned charged = ext_admitted_apply(&e->admitted, n->name, &n->st, now);
        ext_view_of(&n->st, v);
        v->charged = charged;
        return true;
}

static char *dump(json_t *j, size_t *len)
{
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (s)
                *len = strlen(s);
        return s;
}

/* The ExtenderFilterResult of a request that could not be read. */
static int filter_error(const char *msg, unsigned *status, char **resp, size_t *resp_len)
{
        json_t *j = json_pack("{s:n,s:n,s:{},s:{},s:s}", "Nodes", "NodeNames", "FailedNodes",
                              "FailedAndUnresolvableNodes", "Error", msg);
        *status = 400;
        return (*resp = dump(j, resp_len)) ? 0 : -ENOMEM;
}

static int decode(const char *body, size_t len, struct ext_args *a, json_t **items,
                  struct gs_error **err)
{
        int r = ext_args_decode(body, len, a, items, err);
        if (r < 0 && r != -ENOMEM)
                gs_log_warn("extender: a request that is not an ExtenderArgs: %s",
                            gs_error_msg(*err));
        return r;
}

/* One node's filter verdict: 0 passes, 1 fails, 2 never could. No score,
 * so no model and no lock. */
static int filter_node(struct extender *e, const struct ext_pod *p, struct ext_node *n, int64_t now,
                       char *why, size_t size)
{
        struct ext_view v;
        if (!view_of(e, n, now, &v)) {
                snprintf(why, size, "%s", n->why);
                return 1;
        }
        if (ext_place(GS_CP_BEST_FIT, NULL, &v, p, NULL, NULL, NULL) == 0)
                return 0;
        return ext_why_not(p, &v, why, size) ? 2 : 1;
}

static int filter_reply(struct extender *e, struct ext_args *a, json_t *items, json_t *res)
{
        json_t *passed = json_array(), *failed = json_object(), *never = json_object();
        json_t *list = json_pack("{s:s,s:s,s:{},s:o}", "apiVersion", "v1", "kind", "NodeList",
                                 "metadata", "items", passed);
        json_t *names = a->names_only ? json_array() : NULL;
        if (!list || !failed || !never || (a->names_only && !names)) {
                json_decref(list);
                json_decref(failed);
                json_decref(never);
                json_decref(names);
                return -ENOMEM;
        }
        int64_t now = now_s(e);
        char why[512];
        for (size_t i = 0; i < a->n_nodes; i++) {
                struct ext_node *n = &a->nodes[i];
                int v = 0;
                if (a->pod.invalid[0]) {
                        snprintf(why, sizeof(why), "the pod cannot be placed: %s", a->pod.invalid);
                        v = 2;
                } else if (a->pod.n_slices) {
                        v = filter_node(e, &a->pod, n, now, why, sizeof(why));
                }
                if (v == 0 && a->names_only)
                        json_array_append_new(names, json_string(n->name));
                else if (v == 0)
                        json_array_append(passed, json_array_get(items, n->json_index));
                else
                        json_object_set_new(v == 2 ? never : failed, n->name, json_string(why));
        }
        gs_log_debug("extender: filter %s/%s (%um): %zu node(s), %zu passed", a->pod.ns,
                     a->pod.name, a->pod.milli, a->n_nodes,
                     a->n_nodes - json_object_size(failed) - json_object_size(never));
        json_object_set_new(res, "Nodes", a->names_only ? json_null() : list);
        if (a->names_only)
                json_decref(list);
        json_object_set_new(res, "NodeNames", a->names_only ? names : json_null());
        json_object_set_new(res, "FailedNodes", failed);
        json_object_set_new(res, "FailedAndUnresolvableNodes", never);
        json_object_set_new(res, "Error", json_string(""));
        return 0;
}

int ext_filter_http(void *ctx, const char *body, size_t len, unsigned *status, char **resp,
                    size_t *resp_len)
{
        struct extender *e = ctx;
        struct ext_args a = { 0 };
        json_t *items = NULL;
        struct gs_error *err = NULL;
        int r = decode(body, len, &a, &items, &err);
        if (r < 0) {
                r = r == -ENOMEM ? r : filter_error(gs_error_msg(err), status, resp, resp_len);
                gs_error_free(err);
                return r;
        }
        /* A pod being filtered is not bound: drop its previous decision. */
        ext_admitted_forget(&e->admitted, a.pod.uid);
        json_t *res = json_object();
        r = res ? filter_reply(e, &a, items, res) : -ENOMEM;
        ext_args_done(&a);
        json_decref(items);
        if (r < 0) {
                json_decref(res);
                return r;
        }
        *status = 200;
        return (*resp = dump(res, resp_len)) ? 0 : -ENOMEM;
}

/* The best node of a prioritize call and what it would take there. */
struct best {
        ssize_t node;
        double score;
        unsigned n_charges;
        struct ext_charge charges[EXT_MAX_SLICES];
};

/* Record the decision and teach the model the pod's shape (each slice);
 * called with the model's lock held, so that the next pod's prioritize
 * sees both. */
static void record_locked(struct extender *e, const struct ext_args *a, const struct best *b,
                          int64_t now)
{
        const struct ext_node *n = &a->nodes[b->node];
        struct ext_admitted_entry en = { .n_charges = b->n_charges,
                                         .generation = n->st.generation,
                                         .at_s = now,
                                         .at_us = now_us(e) };
        memcpy(en.charges, b->charges, sizeof(en.charges));
        snprintf(en.uid, sizeof(en.uid), "%s", a->pod.uid);
        snprintf(en.node, sizeof(en.node), "%s", n->name);
        if (ext_admitted_add(&e->admitted, &en) < 0)
                gs_log_warn("extender: out of memory: pod %s/%s not recorded on %s", a->pod.ns,
                            a->pod.name, n->name);
        for (unsigned k = 0; k < a->pod.n_slices; k++) {
                uint32_t m = a->pod.slices[k];
                struct gs_cp_pod cp = {
                        .n_gpus = m >= GS_CP_MILLI_PER_GPU ? m / GS_CP_MILLI_PER_GPU : 1,
                        .milli = GS_MIN(m, GS_CP_MILLI_PER_GPU),
                        .gpu_memory =
                                a->pod.n_slices == 1 && m < GS_CP_MILLI_PER_GPU ? a->pod.memory : 0,
                };
                if (gs_cp_model_observe(e->model, &cp) < 0)
                        gs_log_warn("extender: out of memory: the workload model misses a pod");
        }
}

static int prioritize(struct extender *e, struct ext_args *a, json_t *list)
{
        double *scores = calloc(a->n_nodes ? a->n_nodes : 1, sizeof(*scores));
        if (!scores)
                return -ENOMEM;
        int64_t now = now_s(e);
        struct best b = { .node = -1, .score = -1 };
        bool asks = a->pod.n_slices && !a->pod.invalid[0];
        pthread_mutex_lock(&e->model_lock);
        for (size_t i = 0; asks && i < a->n_nodes; i++) {
                struct ext_view v;
                struct ext_charge charges[EXT_MAX_SLICES];
                unsigned n = 0;
                scores[i] = -1;
                if (!view_of(e, &a->nodes[i], now, &v) ||
                    ext_place(e->cfg.policy, e->model, &v, &a->pod, &scores[i], charges, &n) < 0)
                        continue;
                if (scores[i] > b.score ||
                    (scores[i] == b.score && strcmp(a->nodes[i].name, a->nodes[b.node].name) < 0)) {
                        b.node = (ssize_t)i;
                        b.score = scores[i];
                        b.n_charges = n;
                        memcpy(b.charges, charges, n * sizeof(charges[0]));
                }
        }
        if (b.node >= 0)
                record_locked(e, a, &b, now);
        pthread_mutex_unlock(&e->model_lock);
        for (size_t i = 0; i < a->n_nodes; i++) {
                long long s = (ssize_t)i == b.node ? EXT_MAX_PRIORITY
                              : scores[i] <= 0
                                      ? 0
                                      : (long long)(scores[i] * EXT_OTHERS_MAX / 100.0 + 0.5);
                json_array_append_new(list, json_pack("{s:s,s:I}", "Host", a->nodes[i].name,
                                                      "Score", (json_int_t)s));
        }
        free(scores);
        if (b.node >= 0)
                gs_log_debug("extender: pod %s/%s (%um) to %s (score %.1f)", a->pod.ns, a->pod.name,
                             a->pod.milli, a->nodes[b.node].name, b.score);
        return 0;
}

int ext_prioritize_http(void *ctx, const char *body, size_t len, unsigned *status, char **resp,
                        size_t *resp_len)
{
        struct extender *e = ctx;
        struct ext_args a = { 0 };
        struct gs_error *err = NULL;
        int r = decode(body, len, &a, NULL, &err);
        if (r < 0) {
                if (r != -ENOMEM) {
                        *status = 400;
                        r = (*resp = dump(json_pack("{s:s}", "Error", gs_error_msg(err)), resp_len))
                                    ? 0
                                    : -ENOMEM;
                }
                gs_error_free(err);
                return r;
        }
        json_t *list = json_array();
        r = list ? prioritize(e, &a, list) : -ENOMEM;
        ext_args_done(&a);
        if (r < 0) {
                json_decref(list);
                return r;
        }
        *status = 200;
        return (*resp = dump(list, resp_len)) ? 0 : -ENOMEM;
}
