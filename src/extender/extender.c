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

#include "log.h"
#include "placement.h"
#include "quantity.h"

/* A node's report as core's policy sees it; map[i] is the report's GPU
 * index of position i. Unhealthy GPUs count as full. */
struct cp_view {
        struct gs_cp_node node;
        unsigned map[GS_CP_MAX_GPUS];
        unsigned charged; /* record entries charged */
};

static int64_t now_s(const struct extender *e)
{
        return e->cfg.now ? e->cfg.now() : (int64_t)time(NULL);
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

static void to_cp_pod(const struct ext_pod *p, struct gs_cp_pod *out)
{
        memset(out, 0, sizeof(*out));
        out->n_gpus = p->milli >= GS_MILLI_PER_GPU ? p->milli / GS_MILLI_PER_GPU : 1;
        out->milli = p->milli >= GS_MILLI_PER_GPU ? GS_CP_MILLI_PER_GPU : p->milli;
        out->gpu_memory = p->milli >= GS_MILLI_PER_GPU ? 0 : p->memory;
}

static void to_cp_node(const struct ext_node_state *st, struct cp_view *v)
{
        struct gs_cp_node *n = &v->node;
        memset(n, 0, sizeof(*n));
        n->free_cpu_milli = n->total_cpu_milli = GS_CP_UNTRACKED;
        n->free_host_memory = n->total_host_memory = GS_CP_UNTRACKED;
        if (st->n_gpus)
                snprintf(n->model, sizeof(n->model), "%.*s", (int)sizeof(n->model) - 1,
                         st->gpus[0].model);
        for (unsigned i = 0; i < st->n_gpus && n->n_gpus < GS_CP_MAX_GPUS; i++) {
                const struct ext_gpu *g = &st->gpus[i];
                struct gs_cp_gpu *c = &n->gpus[n->n_gpus];
                c->total_memory = g->memory_total;
                c->free_milli = g->healthy ? g->milli_free : 0;
                c->free_memory = g->healthy ? g->memory_free : 0;
                v->map[n->n_gpus++] = g->index;
        }
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
static bool view_of(struct extender *e, struct ext_node *n, int64_t now, struct cp_view *v)
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
        to_cp_node(&n->st, v);
        v->charged = charged;
        return true;
}

/* Why pod p does not fit on node v, in *why; true when it never could
 * (more whole GPUs than the node has, memory above every GPU's size). */
static bool why_not(const struct ext_pod *p, const struct cp_view *v, char *why, size_t size)
{
        const struct gs_cp_node *n = &v->node;
        char q[32], mem[32];
        unsigned whole = 0;
        uint32_t largest = 0;
        uint64_t largest_total = 0;
        for (unsigned i = 0; i < n->n_gpus; i++) {
                whole += n->gpus[i].free_milli == GS_CP_MILLI_PER_GPU;
                largest = GS_MAX(largest, n->gpus[i].free_milli);
                largest_total = GS_MAX(largest_total, n->gpus[i].total_memory);
        }
        int len;
        bool never = false;
        if (p->milli >= GS_MILLI_PER_GPU) {
                unsigned need = p->milli / GS_MILLI_PER_GPU;
                never = need > n->n_gpus;
                len = snprintf(why, size, "%u of %u GPUs fully free; the pod needs %u whole GPU%s",
                               whole, n->n_gpus, need, need == 1 ? "" : "s");
        } else if (p->memory && largest_total && p->memory > largest_total) {
                never = true;
                gs_memory_quantity_format(p->memory, mem, sizeof(mem));
                len = snprintf(why, size,
                               "the pod asks %s of GPU memory, more than any GPU here "
                               "has (%s)",
                               mem, gs_bytes_human(largest_total, q, sizeof(q)));
        } else {
                uint64_t mem_best = 0;
                for (unsigned i = 0; i < n->n_gpus; i++)
                        if (n->gpus[i].free_milli >= p->milli)
                                mem_best = GS_MAX(mem_best, n->gpus[i].free_memory);
                if (largest >= p->milli && p->memory) {
                        gs_memory_quantity_format(p->memory, mem, sizeof(mem));
                        len = snprintf(why, size,
                                       "no GPU has both %um and %s free: the most "
                                       "memory free on a GPU with %um free is %s",
                                       p->milli, mem, p->milli,
                                       gs_bytes_human(mem_best, q, sizeof(q)));
                } else {
                        len = snprintf(why, size,
                                       "largest free share %um on one GPU; the pod "
                                       "needs %um",
                                       largest, p->milli);
                }
        }
        if (len > 0 && (size_t)len < size && v->charged)
                snprintf(why + len, size - (size_t)len,
                         " (counting %u pod%s sent here that the "
                         "node has not reported yet)",
                         v->charged, v->charged == 1 ? "" : "s");
        return never;
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

/* One node's filter verdict: 0 passes, 1 fails, 2 never could. */
static int filter_node(struct extender *e, const struct ext_pod *p, const struct gs_cp_pod *cp,
                       struct ext_node *n, int64_t now, char *why, size_t size)
{
        struct cp_view v;
        if (!view_of(e, n, now, &v)) {
                snprintf(why, size, "%s", n->why);
                return 1;
        }
        if (gs_cp_fits(&v.node, cp))
                return 0;
        return why_not(p, &v, why, size) ? 2 : 1;
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
        struct gs_cp_pod cp;
        to_cp_pod(&a->pod, &cp);
        int64_t now = now_s(e);
        char why[512];
        for (size_t i = 0; i < a->n_nodes; i++) {
                struct ext_node *n = &a->nodes[i];
                int v = 0;
                if (a->pod.invalid[0]) {
                        snprintf(why, sizeof(why), "the pod cannot be placed: %s", a->pod.invalid);
                        v = 2;
                } else if (a->pod.milli) {
                        v = filter_node(e, &a->pod, &cp, n, now, why, sizeof(why));
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
        struct cp_view view;
        struct gs_cp_choice choice;
};

/* Record the decision and teach the model the pod's shape; called with
 * the model's lock held, so that the next pod's prioritize sees both. */
static void record_locked(struct extender *e, const struct ext_args *a, const struct best *b,
                          const struct gs_cp_pod *cp, int64_t now)
{
        const struct ext_node *n = &a->nodes[b->node];
        struct ext_admitted_entry en = { .milli = cp->milli,
                                         .memory = cp->gpu_memory,
                                         .generation = n->st.generation,
                                         .at_s = now };
        snprintf(en.uid, sizeof(en.uid), "%s", a->pod.uid);
        snprintf(en.node, sizeof(en.node), "%s", n->name);
        for (unsigned i = 0; i < b->choice.n; i++)
                en.gpus |= 1ull << b->view.map[b->choice.gpus[i]];
        if (ext_admitted_add(&e->admitted, &en) < 0)
                gs_log_warn("extender: out of memory: pod %s/%s not recorded on %s", a->pod.ns,
                            a->pod.name, n->name);
        if (gs_cp_model_observe(e->model, cp) < 0)
                gs_log_warn("extender: out of memory: the workload model misses a pod");
}

static int prioritize(struct extender *e, struct ext_args *a, json_t *list)
{
        double *scores = calloc(a->n_nodes ? a->n_nodes : 1, sizeof(*scores));
        if (!scores)
                return -ENOMEM;
        struct gs_cp_pod cp;
        to_cp_pod(&a->pod, &cp);
        int64_t now = now_s(e);
        struct best b = { .node = -1, .score = -1 };
        bool asks = a->pod.milli && !a->pod.invalid[0];
        pthread_mutex_lock(&e->model_lock);
        for (size_t i = 0; asks && i < a->n_nodes; i++) {
                struct cp_view v;
                struct gs_cp_choice c;
                scores[i] = -1;
                if (!view_of(e, &a->nodes[i], now, &v) ||
                    gs_cp_score(e->cfg.policy, e->model, &v.node, &cp, &c, &scores[i]) < 0)
                        continue;
                if (scores[i] > b.score ||
                    (scores[i] == b.score && strcmp(a->nodes[i].name, a->nodes[b.node].name) < 0)) {
                        b = (struct best){
                                .node = (ssize_t)i, .score = scores[i], .view = v, .choice = c
                        };
                }
        }
        if (b.node >= 0)
                record_locked(e, a, &b, &cp, now);
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
