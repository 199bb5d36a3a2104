/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced's Prometheus endpoint (--metrics-listen): /metrics, served by
 * the node layer's bounded HTTP server in its own thread. A scrape takes the
 * node's lock once, copies what it needs (inventory, ledger, pods, the
 * arbiter's figures, the events' tallies), lets the lock go, asks NVML for
 * its memory and utilisation readings, and formats the text with core's
 * builder (metrics.h). Every metric is described in docs/metrics.md; names
 * and labels join with NVIDIA's DCGM exporter (`gpu`, `UUID`, and
 * `namespace`, `pod`, `container` for pod slices). */
#include "daemon.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arbiter_server.h"
#include "compute_policy.h"
#include "events.h"
#include "gs_version.h"
#include "http_server.h"
#include "log.h"
#include "metrics.h"
#include "nvml.h"
#include "watchdog_daemon.h"

#define METRICS_MAX_BYTES (8u << 20)
#define METRICS_VERSION GS_VERSION /* the build's, gs_version.h */

struct gpu_snap {
        unsigned nvml_index;
        char index[12];
        char uuid[GS_GPU_UUID_MAX];
        char name[GS_GPU_NAME_MAX];
        bool healthy;
        uint64_t total;
        bool used_known;
        uint64_t used;
        bool util_known;
        unsigned util;  /* percent, NVML */
        struct gs_gpu_usage usage;
};

struct slice_gpu_snap {
        unsigned nvml_index;
        char index[12];
        char uuid[GS_GPU_UUID_MAX];
        bool used_known;
        uint64_t used;
};

struct slice_snap {
        char id[GS_SLICE_ID_MAX + 1];
        char name[GS_SLICE_NAME_MAX + 1];
        const char *kind;
        const char *policy;
        pid_t pid;                      /* local slices: NVML's memory is asked by it */
        uint32_t milli;
        uint64_t memory_cap;
        bool has_pod;                   /* a pod slice whose pod the node knows */
        struct node_pod pod;
        unsigned n_gpus;
        struct slice_gpu_snap gpus[GS_SLICE_MAX_GPUS];
        bool arb_known;
        struct arbsrv_stats arb;
        bool wd_known;                  /* the watchdog sampled it: */
        struct wd_figures wd;           /* its NVML figures over all its processes */
};

struct snapshot {
        unsigned n_gpus;
        struct gpu_snap gpus[GS_MAX_GPUS];
        size_t n_slices;
        struct slice_snap *slices;
        size_t n_tally;
        struct events_tally tally[EVENTS_TALLY_MAX];
};

static int64_t started_at; /* unix seconds: when metrics_start ran */

static const char *kind_name(enum gs_slice_kind k)
{
        switch (k) {
        case GS_SLICE_LOCAL:
                return "local";
        case GS_SLICE_KUBE:
                return "kubelet";
        case GS_SLICE_DRA:
                return "dra";
        default:
                return "unknown";
        }
}

static void snap_slice(const struct daemon *d, const struct gs_slice *s, struct slice_snap *o)
{
        snprintf(o->id, sizeof(o->id), "%s", s->id);
        snprintf(o->name, sizeof(o->name), "%s", s->name);
        o->kind = kind_name(s->kind);
        o->policy = gs_compute_policy_name(s->policy);
        o->milli = s->milli;
        o->memory_cap = s->memory_cap;
        /* Only a local slice has a process of its own to look up (a pod's
         * processes are in containers; see docs/metrics.md). */
        o->pid = s->kind == GS_SLICE_LOCAL ? s->pid : 0;
        o->n_gpus = s->n_gpus;
        for (unsigned g = 0; g < s->n_gpus && g < GS_SLICE_MAX_GPUS; g++) {
                struct slice_gpu_snap *og = &o->gpus[g];
                snprintf(og->index, sizeof(og->index), "%u", s->gpus[g].index);
                snprintf(og->uuid, sizeof(og->uuid), "%s", s->gpus[g].uuid);
                og->nvml_index = s->gpus[g].index;
        }
        o->arb_known = arbsrv_slice_stats(d, s->id, &o->arb);
        o->wd_known = watchdog_slice_figures(d, s->id, &o->wd) && o->wd.sampled;
        o->has_pod = gs_slice_in_container(s) && node_pod_locked(d->node, s->id, &o->pod) == 0;
}

/* NVML's memory and utilisation figures of the snapshot, asked outside the
 * node's lock (a slow driver call stalls no front-end; these calls keep no
 * state). */
static void read_nvml(struct daemon *d, struct snapshot *snap)
{
        if (!d->nvml)
                return;
        for (unsigned i = 0; i < snap->n_gpus; i++) {
                struct gpu_snap *g = &snap->gpus[i];
                g->used_known = nvml_gpu_memory_used(d->nvml, g->nvml_index, &g->used) == 0;
                g->util_known = nvml_gpu_utilisation(d->nvml, g->nvml_index, &g->util) == 0;
        }
        for (size_t i = 0; i < snap->n_slices; i++) {
                struct slice_snap *s = &snap->slices[i];
                for (unsigned g = 0; s->pid > 0 && g < s->n_gpus && g < GS_SLICE_MAX_GPUS; g++) {
                        struct slice_gpu_snap *og = &s->gpus[g];
                        int r = nvml_process_memory(d->nvml, og->nvml_index, s->pid, &og->used);
                        if (r == -ENOENT)
                                og->used = 0;
                        og->used_known = r == 0 || r == -ENOENT;
                }
                /* every process of it, as the watchdog last saw them (what
                 * `gpuslice ls` shows too) */
                for (unsigned g = 0; s->wd_known && g < s->n_gpus && g < GS_SLICE_MAX_GPUS; g++) {
                        struct slice_gpu_snap *og = &s->gpus[g];
                        if (!og->used_known || s->wd.used[g] > og->used)
                                og->used = s->wd.used[g];
                        og->used_known = true;
                }
        }
}

/* Copy what a scrape reports, under the node's lock, then NVML's figures
 * outside it. */
static int take_snapshot(struct daemon *d, struct snapshot *snap)
{
        node_lock(d->node);
        const struct gs_inventory *inv = &d->node->inv;
        const struct gs_ledger *l = &d->node->ledger;
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        node_usage_locked(d->node, usage);
        snap->n_gpus = inv->n_gpus;
        for (unsigned i = 0; i < inv->n_gpus; i++) {
                const struct gs_gpu *g = &inv->gpus[i];
                struct gpu_snap *o = &snap->gpus[i];
                snprintf(o->index, sizeof(o->index), "%u", g->index);
                snprintf(o->uuid, sizeof(o->uuid), "%s", g->uuid);
                snprintf(o->name, sizeof(o->name), "%s", g->name);
                o->healthy = g->healthy;
                o->total = g->memory_total;
                o->nvml_index = g->index;
                o->used_known = o->util_known = false; /* until read_nvml asks */
                o->usage = usage[i];
        }
        snap->n_slices = 0;
        snap->slices = l->n_slices ? calloc(l->n_slices, sizeof(*snap->slices)) : NULL;
        if (l->n_slices && !snap->slices) {
                node_unlock(d->node);
                return -ENOMEM;
        }
        for (size_t i = 0; i < l->n_slices; i++)
                snap_slice(d, &l->slices[i], &snap->slices[snap->n_slices++]);
        snap->n_tally = events_tallies(d->events, snap->tally, EVENTS_TALLY_MAX);
        node_unlock(d->node);
        read_nvml(d, snap);
        return 0;
}

/* ---- formatting, outside the lock ---- */

/* gpu, UUID: the labels the DCGM exporter joins on (its camelCase
 * modelName is refused by promtool's lint: gpuslice_gpu_info has the model
 * as model_name). */
static void gpu_labels(const struct gpu_snap *g, struct gs_metric_label l[3])
{
        l[0] = (struct gs_metric_label){ "gpu", g->index };
        l[1] = (struct gs_metric_label){ "UUID", g->uuid };
        l[2] = (struct gs_metric_label){ "model_name", g->name };
}

#define SLICE_LABELS 9

/* slice, name, kind, gpu, UUID, the pod's namespace, pod and container
 * (left out when unknown or empty: a local slice, a pod slice whose
 * front-end has not said, a DRA slice held by the whole pod), and policy
 * when `policy`. */
static size_t slice_labels(const struct slice_snap *s, unsigned g, bool policy,
                           struct gs_metric_label l[SLICE_LABELS])
{
        const struct node_pod *p = s->has_pod ? &s->pod : NULL;
        l[0] = (struct gs_metric_label){ "slice", s->id };
        l[1] = (struct gs_metric_label){ "name", s->name[0] ? s->name : NULL };
        l[2] = (struct gs_metric_label){ "kind", s->kind };
        l[3] = (struct gs_metric_label){ "gpu", s->gpus[g].index };
        l[4] = (struct gs_metric_label){ "UUID", s->gpus[g].uuid };
        l[5] = (struct gs_metric_label){ "namespace", p && p->ns[0] ? p->ns : NULL };
        l[6] = (struct gs_metric_label){ "pod", p && p->name[0] ? p->name : NULL };
        l[7] = (struct gs_metric_label){ "container", p && p->container[0] ? p->container : NULL };
        l[8] = (struct gs_metric_label){ "policy", s->policy };
        return policy ? 9 : 8;
}

static void format_daemon(struct gs_metrics *m, const struct snapshot *snap)
{
        struct gs_metric_label v[] = { { "version", METRICS_VERSION } };
        gs_metrics_family(m, "gpuslice_build_info", GS_METRIC_GAUGE,
                          "Always 1; the version of gpusliced in the label.");
        gs_metrics_sample_u64(m, v, 1, 1);
        gs_metrics_family(m, "gpuslice_daemon_up", GS_METRIC_GAUGE,
                          "1 while gpusliced serves (a scrape that fails means it does not).");
        gs_metrics_sample_u64(m, NULL, 0, 1);
        gs_metrics_family(m, "gpuslice_daemon_start_time_seconds", GS_METRIC_GAUGE,
                          "When gpusliced started serving metrics, in seconds since the epoch.");
        gs_metrics_sample_u64(m, NULL, 0, (uint64_t)started_at);
        gs_metrics_family(m, "gpuslice_slices", GS_METRIC_GAUGE,
                          "Slices in the node's ledger (local, device plugin and DRA).");
        gs_metrics_sample_u64(m, NULL, 0, snap->n_slices);
}

static void format_gpus(struct gs_metrics *m, const struct snapshot *snap)
{
        struct gs_metric_label l[3];
        gs_metrics_family(m, "gpuslice_gpu_info", GS_METRIC_GAUGE,
                          "Always 1; the GPU's model (NVML's name) in the label model_name.");
        for (unsigned i = 0; i < snap->n_gpus; i++) {
                gpu_labels(&snap->gpus[i], l);
                gs_metrics_sample_u64(m, l, 3, 1);
        }
        gs_metrics_family(m, "gpuslice_gpu_healthy", GS_METRIC_GAUGE,
                          "1 when the GPU answers every NVML query, else 0.");
        for (unsigned i = 0; i < snap->n_gpus; i++) {
                gpu_labels(&snap->gpus[i], l);
                gs_metrics_sample_u64(m, l, 2, snap->gpus[i].healthy ? 1 : 0);
        }
        gs_metrics_family(m, "gpuslice_gpu_memory_total_bytes", GS_METRIC_GAUGE,
                          "The GPU's device memory, from NVML.");
        for (unsigned i = 0; i < snap->n_gpus; i++) {
                gpu_labels(&snap->gpus[i], l);
                gs_metrics_sample_u64(m, l, 2, snap->gpus[i].total);
        }
        gs_metrics_family(m, "gpuslice_gpu_memory_used_bytes", GS_METRIC_GAUGE,
                          "Device memory in use on the GPU (every process), from NVML.");
        for (unsigned i = 0; i < snap->n_gpus; i++) {
                if (!snap->gpus[i].used_known)
                        continue;
                gpu_labels(&snap->gpus[i], l);
                gs_metrics_sample_u64(m, l, 2, snap->gpus[i].used);
        }
        gs_metrics_family(m, "gpuslice_gpu_utilization_ratio", GS_METRIC_GAUGE,
                          "Part of NVML's last sample period in which a kernel ran on the GPU "
                          "(nvmlDeviceGetUtilizationRates), 0 to 1.");
        for (unsigned i = 0; i < snap->n_gpus; i++) {
                if (!snap->gpus[i].util_known)
                        continue;
                gpu_labels(&snap->gpus[i], l);
                gs_metrics_sample(m, l, 2, snap->gpus[i].util / 100.0);
        }
        gs_metrics_family(m, "gpuslice_gpu_slices", GS_METRIC_GAUGE,
                          "Slices placed on the GPU by the ledger.");
        for (unsigned i = 0; i < snap->n_gpus; i++) {
                gpu_labels(&snap->gpus[i], l);
                gs_metrics_sample_u64(m, l, 2, snap->gpus[i].usage.n_slices);
        }
        gs_metrics_family(m, "gpuslice_gpu_free_milli", GS_METRIC_GAUGE,
                          "Compute share of the GPU not given to any slice, in thousandths.");
        for (unsigned i = 0; i < snap->n_gpus; i++) {
                gpu_labels(&snap->gpus[i], l);
                gs_metrics_sample_u64(m, l, 2, snap->gpus[i].usage.free_milli);
        }
        gs_metrics_family(m, "gpuslice_gpu_free_memory_bytes", GS_METRIC_GAUGE,
                          "Device memory of the GPU not given to any slice's cap, by the ledger.");
        for (unsigned i = 0; i < snap->n_gpus; i++) {
                gpu_labels(&snap->gpus[i], l);
                gs_metrics_sample_u64(m, l, 2, snap->gpus[i].usage.free_memory);
        }
}

enum slice_fig {
        FIG_INFO,
        FIG_SHARE,
        FIG_CAP,
        FIG_USED,
        FIG_GPU_TIME,
        FIG_LEASES,
        FIG_WAIT,
        FIG_MEASURED,
        FIG_REFUSALS,
};

static const struct {
        const char *name;
        enum gs_metric_type type;
        const char *help;
} slice_families[] = {
        [FIG_INFO] = { "gpuslice_slice_info", GS_METRIC_GAUGE,
                       "Always 1; the slice's compute policy (share or cap) in the label." },
        [FIG_SHARE] = { "gpuslice_slice_share_milli", GS_METRIC_GAUGE,
                        "The slice's configured compute share of the GPU, in thousandths." },
        [FIG_CAP] = { "gpuslice_slice_memory_cap_bytes", GS_METRIC_GAUGE,
                      "The slice's device memory cap (whole-GPU slices have none)." },
        [FIG_USED] = { "gpuslice_slice_memory_used_bytes", GS_METRIC_GAUGE,
                       "Device memory the slice's processes use on the GPU, from NVML (local "
                       "slices)." },
        [FIG_GPU_TIME] = { "gpuslice_slice_gpu_time_seconds_total", GS_METRIC_COUNTER,
                           "Device time the compute arbiter charged to the slice's work since "
                           "the daemon started." },
        [FIG_LEASES] = { "gpuslice_slice_leases_total", GS_METRIC_COUNTER,
                         "Leases of the GPU the compute arbiter granted the slice since the "
                         "daemon started." },
        [FIG_WAIT] = { "gpuslice_slice_gate_wait_seconds_total", GS_METRIC_COUNTER,
                       "Time the slice had work waiting for a lease of the GPU and none was "
                       "granted, by the compute arbiter, since the daemon started." },
        [FIG_MEASURED] = { "gpuslice_slice_measured_share_milli", GS_METRIC_GAUGE,
                           "The slice's measured share of the GPU's time over the last second, "
                           "in thousandths (the arbiter's charges)." },
        [FIG_REFUSALS] = { "gpuslice_slice_memory_refusals_total", GS_METRIC_COUNTER,
                           "Allocations the shim refused at the slice's memory cap "
                           "(CUDA_ERROR_OUT_OF_MEMORY), as the watchdog counted them from the "
                           "slice's books." },
};

/* One sample of figure f for GPU g of slice s, when it has one. */
static void slice_sample(struct gs_metrics *m, enum slice_fig f, const struct slice_snap *s,
                         unsigned g)
{
        struct gs_metric_label l[SLICE_LABELS];
        size_t n = slice_labels(s, g, f == FIG_INFO, l);
        switch (f) {
        case FIG_INFO:
                gs_metrics_sample_u64(m, l, n, 1);
                break;
        case FIG_SHARE:
                gs_metrics_sample_u64(m, l, n, s->n_gpus ? s->milli / s->n_gpus : s->milli);
                break;
        case FIG_CAP:
                if (s->memory_cap)
                        gs_metrics_sample_u64(m, l, n, s->memory_cap);
                break;
        case FIG_USED:
                if (s->gpus[g].used_known)
                        gs_metrics_sample_u64(m, l, n, s->gpus[g].used);
                break;
        case FIG_GPU_TIME:
                if (s->arb_known)
                        gs_metrics_sample(m, l, n, (double)s->arb.charged_ns / 1e9);
                break;
        case FIG_LEASES:
                if (s->arb_known)
                        gs_metrics_sample_u64(m, l, n, s->arb.leases);
                break;
        case FIG_WAIT:
                if (s->arb_known)
                        gs_metrics_sample(m, l, n, (double)s->arb.wait_ns / 1e9);
                break;
        case FIG_MEASURED:
                if (s->arb_known && s->arb.measured_milli >= 0)
                        gs_metrics_sample_u64(m, l, n, (uint64_t)s->arb.measured_milli);
                break;
        case FIG_REFUSALS:
                if (s->wd_known && s->memory_cap)
                        gs_metrics_sample_u64(m, l, n, s->wd.refusals);
                break;
        }
}

static void format_slices(struct gs_metrics *m, const struct snapshot *snap)
{
        for (size_t f = 0; f < GS_ARRAY_SIZE(slice_families); f++) {
                gs_metrics_family(m, slice_families[f].name, slice_families[f].type,
                                  slice_families[f].help);
                for (size_t i = 0; i < snap->n_slices; i++)
                        for (unsigned g = 0; g < snap->slices[i].n_gpus; g++)
                                slice_sample(m, (enum slice_fig)f, &snap->slices[i], g);
        }
}

/* The watchdog's events since the daemon started, per reason and action
 * (bounded: a slice label would grow with every slice ever made; the
 * events themselves name the slice). */
static void format_overuse(struct gs_metrics *m, const struct snapshot *snap)
{
        gs_metrics_family(m, "gpuslice_overuse_events_total", GS_METRIC_COUNTER,
                          "Watchdog events since the daemon started, by reason (memory_over_cap, "
                          "books_disagree, books_forged, unsliced, wrong_gpu, no_shim, "
                          "compute_over_share, memory_refused) and "
                          "action (detected, reported, killed, ...)");
        for (size_t i = 0; i < snap->n_tally; i++) {
                struct gs_metric_label l[2] = { { "reason", snap->tally[i].reason },
                                                { "action", snap->tally[i].action } };
                gs_metrics_sample_u64(m, l, 2, snap->tally[i].n);
        }
}

int metrics_text(struct daemon *d, char **body, size_t *len)
{
        struct snapshot snap;
        int r = take_snapshot(d, &snap);
        if (r < 0)
                return r;
        struct gs_metrics m;
        gs_metrics_init(&m, METRICS_MAX_BYTES);
        format_daemon(&m, &snap);
        format_gpus(&m, &snap);
        format_slices(&m, &snap);
        format_overuse(&m, &snap);
        free(snap.slices);
        snap.slices = NULL;
        r = gs_metrics_error(&m);
        if (r < 0) {
                gs_log_warn("metrics: the text could not be built: %s", strerror(-r));
                gs_metrics_done(&m);
                return r;
        }
        *body = gs_metrics_take(&m, len);
        return 0;
}

static int metrics_body(void *ctx, char **body, size_t *len)
{
        return metrics_text(ctx, body, len);
}

int metrics_start(struct daemon *d)
{
        if (!d->metrics_listen)
                return 0;
        started_at = (int64_t)time(NULL);
        const struct node_http_route routes[] = {
                { .path = "/metrics",
                  .content_type = "text/plain; version=0.0.4; charset=utf-8",
                  .fn = metrics_body,
                  .ctx = d },
        };
        struct gs_error *err = NULL;
        int r = node_http_start("metrics", d->metrics_listen, routes, GS_ARRAY_SIZE(routes),
                                &d->metrics, &err);
        if (r < 0) {
                gs_log_error("--metrics-listen: %s", gs_error_msg(err));
                gs_error_free(err);
        }
        return r;
}

void metrics_stop(struct daemon *d)
{
        d->metrics = node_http_stop(d->metrics);
}
