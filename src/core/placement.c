/* SPDX-License-Identifier: Apache-2.0 */
/* Placement of slices on a node's GPUs. See placement.h. */
#include "placement.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "quantity.h"

int gs_placement_policy_parse(const char *s, enum gs_placement_policy *ret, struct gs_error **err)
{
        if (strcmp(s, "binpack") == 0)
                *ret = GS_PLACE_BINPACK;
        else if (strcmp(s, "spread") == 0)
                *ret = GS_PLACE_SPREAD;
        else if (strcmp(s, "gpuslice") == 0)
                *ret = GS_PLACE_GPUSLICE;
        else
                return gs_error_set(err, -EINVAL,
                                    "placement policy '%.40s' is unknown (accepted: binpack, spread, "
                                    "gpuslice)",
                                    s);
        return 0;
}

const char *gs_placement_policy_name(enum gs_placement_policy p)
{
        return p == GS_PLACE_SPREAD ? "spread" : p == GS_PLACE_GPUSLICE ? "gpuslice" : "binpack";
}

static int gpu_position(const struct gs_inventory *inv, const char *uuid)
{
        for (unsigned i = 0; i < inv->n_gpus; i++)
                if (strcmp(inv->gpus[i].uuid, uuid) == 0)
                        return (int)i;
        return -1;
}

void gs_placement_usage(const struct gs_inventory *inv, const struct gs_ledger *l,
                        struct gs_gpu_usage *usage)
{
        for (unsigned i = 0; i < inv->n_gpus; i++)
                usage[i] = (struct gs_gpu_usage){ .free_milli = GS_MILLI_PER_GPU,
                                                  .free_memory = inv->gpus[i].memory_total };
        for (size_t k = 0; k < l->n_slices; k++) {
                const struct gs_slice *s = &l->slices[k];
                bool whole = gs_slice_is_whole(s);
                for (unsigned g = 0; g < s->n_gpus; g++) {
                        int p = gpu_position(inv, s->gpus[g].uuid);
                        if (p < 0)
                                continue;
                        struct gs_gpu_usage *u = &usage[p];
                        uint32_t m = whole ? GS_MILLI_PER_GPU : s->milli;
                        uint64_t mem = whole ? u->free_memory : s->memory_cap;
                        u->free_milli = u->free_milli > m ? u->free_milli - m : 0;
                        u->free_memory = u->free_memory > mem ? u->free_memory - mem : 0;
                        u->n_slices++;
                }
        }
}

char *gs_bytes_human(uint64_t bytes, char *buf, size_t size)
{
        static const char *const units[] = { "Ki", "Mi", "Gi", "Ti", "Pi" };
        if (bytes < 1024) {
                snprintf(buf, size, "%" PRIu64 "B", bytes);
                return buf;
        }
        double v = (double)bytes / 1024.0;
        unsigned u = 0;
        while (v >= 1024.0 && u + 1 < GS_ARRAY_SIZE(units)) {
                v /= 1024.0;
                u++;
        }
        /* Round down so "free" is never overstated. */
        double shown = (double)(uint64_t)(v * 10.0) / 10.0;
        snprintf(buf, size, "%.1f%s", shown, units[u]);
        return buf;
}

/* "GPU 0 (GPU-…): 400m and 7.2Gi free; GPU 1 (…): unhealthy" */
static void describe_gpus(const struct gs_inventory *inv, const struct gs_gpu_usage *usage,
                          char *buf, size_t size)
{
        size_t off = 0;
        buf[0] = '\0';
        for (unsigned i = 0; i < inv->n_gpus && off + 1 < size; i++) {
                const struct gs_gpu *g = &inv->gpus[i];
                char mem[32];
                int n;
                if (!g->healthy)
                        n = snprintf(buf + off, size - off, "%sGPU %u (%s): unhealthy",
                                     i ? "; " : "", g->index, g->uuid);
                else
                        n = snprintf(buf + off, size - off,
                                     "%sGPU %u (%s): %" PRIu32 "m and %s free (%u slice%s)",
                                     i ? "; " : "", g->index, g->uuid, usage[i].free_milli,
                                     gs_bytes_human(usage[i].free_memory, mem, sizeof(mem)),
                                     usage[i].n_slices, usage[i].n_slices == 1 ? "" : "s");
                if (n < 0)
                        break;
                off += (size_t)n;
        }
}

static bool allowed(const struct gs_placement_request *req, unsigned i)
{
        return req->allowed == 0 || (i < 64 && (req->allowed >> i) & 1u);
}

static bool whole_free(const struct gs_inventory *inv, const struct gs_gpu_usage *usage,
                       const struct gs_placement_request *req, unsigned i)
{
        return i < inv->n_gpus && inv->gpus[i].healthy && usage[i].n_slices == 0 &&
               allowed(req, i);
}

static int place_whole(const struct gs_inventory *inv, const struct gs_gpu_usage *usage,
                       const struct gs_placement_request *req, struct gs_placement *ret,
                       struct gs_error **err)
{
        unsigned want = req->milli / GS_MILLI_PER_GPU;
        if (want > GS_SLICE_MAX_GPUS)
                return gs_error_set(err, -EINVAL,
                                    "%u whole GPUs requested but one slice holds at most %u (this "
                                    "node has %u GPU%s)", want, GS_SLICE_MAX_GPUS, inv->n_gpus,
                                    inv->n_gpus == 1 ? "" : "s");
        if (want > inv->n_gpus)
                return gs_error_set(err, -EINVAL,
                                    "%u whole GPUs requested but this node has %u GPU%s", want,
                                    inv->n_gpus, inv->n_gpus == 1 ? "" : "s");
        struct gs_placement p = { .n_gpus = 0, .memory_cap = 0 };
        if (req->prefer && whole_free(inv, usage, req, req->preferred_gpu))
                p.gpus[p.n_gpus++] = req->preferred_gpu;
        for (unsigned i = 0; i < inv->n_gpus && p.n_gpus < want; i++)
                if (whole_free(inv, usage, req, i) && !(req->prefer && i == req->preferred_gpu))
                        p.gpus[p.n_gpus++] = i;
        if (p.n_gpus < want) {
                char desc[2048];
                describe_gpus(inv, usage, desc, sizeof(desc));
                return gs_error_set(err, -ENOSPC,
                                    "%u whole GPU%s requested but only %u GPU%s hold%s no slices: %s",
                                    want, want == 1 ? "" : "s", p.n_gpus, p.n_gpus == 1 ? "" : "s",
                                    p.n_gpus == 1 ? "s" : "", desc);
        }
        *ret = p;
        return 0;
}

/* The gpuslice policy's choice among the GPUs that fit (fits[i]): the
 * cluster policy's GPU on this node seen as a gs_cp_node, the GPUs that do
 * not fit shown full. -1 when it cannot say (more GPUs than it handles). */
static int choose_gpuslice(const struct gs_inventory *inv, const struct gs_gpu_usage *usage,
                           const struct gs_placement_request *req, const bool *fits)
{
        if (inv->n_gpus > GS_CP_MAX_GPUS)
                return -1;
        struct gs_cp_node n = { .n_gpus = inv->n_gpus,
                                .free_cpu_milli = GS_CP_UNTRACKED,
                                .free_host_memory = GS_CP_UNTRACKED,
                                .total_cpu_milli = GS_CP_UNTRACKED,
                                .total_host_memory = GS_CP_UNTRACKED };
        for (unsigned i = 0; i < inv->n_gpus; i++)
                n.gpus[i].free_milli = fits[i] ? usage[i].free_milli : 0;
        struct gs_cp_pod pod = { .milli = req->milli, .n_gpus = 1 };
        struct gs_cp_choice c;
        if (gs_cp_score(GS_CP_GPUSLICE, req->model, &n, &pod, &c, NULL) < 0 || c.n != 1 ||
            !fits[c.gpus[0]])
                return -1;
        return (int)c.gpus[0];
}

/* Is candidate a better choice than the current best under the policy? */
static bool better(enum gs_placement_policy policy, const struct gs_gpu_usage *c,
                   const struct gs_gpu_usage *b)
{
        if (c->free_milli != b->free_milli)
                return policy == GS_PLACE_BINPACK ? c->free_milli < b->free_milli
                                                  : c->free_milli > b->free_milli;
        if (c->free_memory != b->free_memory)
                return policy == GS_PLACE_BINPACK ? c->free_memory < b->free_memory
                                                  : c->free_memory > b->free_memory;
        return false; /* equal: keep the lower index */
}

/* Whether a slice capped at `cap` bytes on GPU g leaves room beyond one
 * CUDA context's overhead (the shim charges each context against the cap:
 * at or below it, not one context could be created; slice_conf.h refuses
 * such a config). */
static bool cap_holds_context(const struct gs_gpu *g, uint64_t cap)
{
        return cap > g->context_overhead;
}

/* The refusal of a fractional request whose memory (explicit or the
 * share's default) holds no CUDA context on any GPU of the node: why, and
 * what to ask for instead. */
static int refuse_no_context(const struct gs_inventory *inv, const struct gs_placement_request *req,
                             struct gs_error **err)
{
        const struct gs_gpu *g = &inv->gpus[0];
        for (unsigned i = 1; i < inv->n_gpus; i++)
                if (inv->gpus[i].memory_total > g->memory_total)
                        g = &inv->gpus[i];
        char ovh[32], mem[32], cap[32];
        gs_bytes_human(g->context_overhead, ovh, sizeof(ovh));
        if (req->memory)
                return gs_error_set(err, -EINVAL,
                                    "gpu memory %s is not more than a CUDA context takes on the "
                                    "GPUs of this node (%s on GPU %u): the slice's processes could "
                                    "not create one; ask for more than %s",
                                    gs_bytes_human(req->memory, mem, sizeof(mem)), ovh, g->index,
                                    ovh);
        uint32_t least = 0;
        for (uint32_t m = req->milli + 1; m < GS_MILLI_PER_GPU && !least; m++)
                if (cap_holds_context(g, gs_default_memory_cap(m, g->memory_total)))
                        least = m;
        char hint[64] = "a larger share";
        if (least)
                snprintf(hint, sizeof(hint), "a share of at least %" PRIu32 "m", least);
        return gs_error_set(err, -EINVAL,
                            "gpu share %" PRIu32 "m gets %s of memory by default (%" PRIu32
                            "/1000 of GPU %u's %s), not more than a CUDA context takes there "
                            "(%s): the slice's processes could not create one; ask for %s, or "
                            "for gpu memory above %s",
                            req->milli,
                            gs_bytes_human(gs_default_memory_cap(req->milli, g->memory_total), cap,
                                           sizeof(cap)),
                            req->milli, g->index, gs_bytes_human(g->memory_total, mem, sizeof(mem)),
                            ovh, hint, ovh);
}

int gs_place(const struct gs_inventory *inv, const struct gs_gpu_usage *usage,
             enum gs_placement_policy policy, const struct gs_placement_request *req,
             struct gs_placement *ret, struct gs_error **err)
{
        uint32_t milli = req->milli;
        if (milli == 0 || (milli > GS_MILLI_PER_GPU && milli % GS_MILLI_PER_GPU))
                return gs_error_set(err, -EINVAL,
                                    "gpu share %" PRIu32 "m is neither 1m..999m nor whole GPUs",
                                    milli);
        if (inv->n_gpus == 0)
                return gs_error_set(err, -ENOSPC, "this node has no GPUs");
        if (milli % GS_MILLI_PER_GPU == 0)
                return place_whole(inv, usage, req, ret, err);

        int best = -1;
        uint64_t best_cap = 0, largest = 0;
        bool any_context = false; /* a GPU where the cap holds a context */
        bool fits[GS_MAX_GPUS] = { false };
        bool took_preferred = false;
        enum gs_placement_policy order = policy == GS_PLACE_SPREAD ? GS_PLACE_SPREAD : GS_PLACE_BINPACK;
        for (unsigned i = 0; i < inv->n_gpus; i++) {
                const struct gs_gpu *g = &inv->gpus[i];
                largest = GS_MAX(largest, g->memory_total);
                uint64_t cap = req->memory ? req->memory : gs_default_memory_cap(milli, g->memory_total);
                bool context = cap_holds_context(g, cap);
                any_context = any_context || context;
                if (!g->healthy || !context || usage[i].free_milli < milli ||
                    usage[i].free_memory < cap || !allowed(req, i))
                        continue;
                fits[i] = true;
                bool preferred = req->prefer && i == req->preferred_gpu;
                took_preferred = took_preferred || preferred;
                bool best_preferred = best >= 0 && req->prefer && (unsigned)best == req->preferred_gpu;
                if (best < 0 || preferred ||
                    (!best_preferred && better(order, &usage[i], &usage[best]))) {
                        best = (int)i;
                        best_cap = cap;
                }
        }
        char want_mem[32];
        if (req->memory && req->memory > largest)
                return gs_error_set(err, -EINVAL,
                                    "gpu memory %s is more than any GPU of this node has (largest: %s)",
                                    gs_bytes_human(req->memory, want_mem, sizeof(want_mem)),
                                    gs_bytes_human(largest, (char[32]){ 0 }, 32));
        if (!any_context)
                return refuse_no_context(inv, req, err);
        if (best < 0) {
                char desc[2048];
                describe_gpus(inv, usage, desc, sizeof(desc));
                if (req->memory)
                        return gs_error_set(err, -ENOSPC,
                                            "no single GPU has room for %" PRIu32 "m and %s: %s",
                                            milli,
                                            gs_bytes_human(req->memory, want_mem, sizeof(want_mem)),
                                            desc);
                return gs_error_set(err, -ENOSPC,
                                    "no single GPU has room for %" PRIu32
                                    "m and its default memory (%" PRIu32 "/1000 of the GPU): %s",
                                    milli, milli, desc);
        }
        if (policy == GS_PLACE_GPUSLICE && !took_preferred) {
                int g = choose_gpuslice(inv, usage, req, fits);
                if (g >= 0 && g != best) {
                        best = g;
                        best_cap = req->memory ? req->memory
                                               : gs_default_memory_cap(milli, inv->gpus[g].memory_total);
                }
        }
        *ret = (struct gs_placement){ .n_gpus = 1, .gpus = { (unsigned)best }, .memory_cap = best_cap };
        return 0;
}

void gs_placement_commit(struct gs_gpu_usage *usage, const struct gs_placement_request *req,
                         const struct gs_placement *p)
{
        for (unsigned i = 0; i < p->n_gpus; i++) {
                struct gs_gpu_usage *u = &usage[p->gpus[i]];
                uint32_t m = p->memory_cap ? req->milli : GS_MILLI_PER_GPU;
                uint64_t mem = p->memory_cap ? p->memory_cap : u->free_memory;
                u->free_milli = u->free_milli > m ? u->free_milli - m : 0;
                u->free_memory = u->free_memory > mem ? u->free_memory - mem : 0;
                u->n_slices++;
        }
}
