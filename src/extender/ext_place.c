/* SPDX-License-Identifier: Apache-2.0 */
/* A pod's slices on one node's report (ext_place.h). */
#include "ext_place.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "placement.h"
#include "quantity.h"

void ext_view_of(const struct ext_node_state *st, struct ext_view *v)
{
        struct gs_cp_node *n = &v->node;
        memset(v, 0, sizeof(*v));
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
                v->slices[n->n_gpus] = g->n_slices;
                v->overhead[n->n_gpus] = g->context_overhead;
                v->map[n->n_gpus++] = g->index;
        }
        v->placement = st->placement;
}

/* One slice as core's pod; the pod's GPU memory applies to a single share. */
static void cp_slice(const struct ext_pod *p, uint32_t milli, struct gs_cp_pod *out)
{
        memset(out, 0, sizeof(*out));
        out->n_gpus = milli >= GS_MILLI_PER_GPU ? milli / GS_MILLI_PER_GPU : 1;
        out->milli = milli >= GS_MILLI_PER_GPU ? GS_CP_MILLI_PER_GPU : milli;
        out->gpu_memory = milli < GS_MILLI_PER_GPU && p->n_slices == 1 ? p->memory : 0;
}

/* The memory a slice takes on GPU g, as the node charges it. */
static uint64_t cap_on(const struct gs_cp_pod *cp, const struct gs_cp_gpu *g)
{
        if (cp->n_gpus > 1 || cp->milli >= GS_CP_MILLI_PER_GPU)
                return g->total_memory;
        return cp->gpu_memory ? cp->gpu_memory : gs_default_memory_cap(cp->milli, g->total_memory);
}

/* Where the node itself puts a slice: core's gs_place with the node's
 * reported policy over what the report says is free (the same decision the
 * node makes, refusals included: a cap that cannot hold a context, whole
 * GPUs only where no slice is). The extender predicts the node's choice
 * rather than making one: the device plugin's Allocate cannot be told which
 * GPU a pod was meant for. 0 or -ENOSPC. */
static int node_choice(const struct ext_view *v, const struct gs_cp_node *n,
                       const unsigned *slices, const struct gs_cp_pod *cp,
                       struct gs_cp_choice *c)
{
        struct gs_inventory inv = { .n_gpus = n->n_gpus };
        struct gs_gpu_usage usage[GS_CP_MAX_GPUS];
        for (unsigned i = 0; i < n->n_gpus; i++) {
                inv.gpus[i] = (struct gs_gpu){ .index = i,
                                               .memory_total = n->gpus[i].total_memory,
                                               .healthy = true,
                                               .context_overhead = v->overhead[i],
                                               .overhead_measured = true };
                snprintf(inv.gpus[i].uuid, sizeof(inv.gpus[i].uuid), "GPU-%u", i);
                usage[i] = (struct gs_gpu_usage){ .free_milli = n->gpus[i].free_milli,
                                                  .free_memory = n->gpus[i].free_memory,
                                                  .n_slices = slices[i] };
        }
        bool whole = cp->n_gpus > 1 || cp->milli >= GS_CP_MILLI_PER_GPU;
        struct gs_placement_request req = {
                .milli = whole ? cp->n_gpus * GS_MILLI_PER_GPU : cp->milli,
                .memory = whole ? 0 : cp->gpu_memory,
        };
        struct gs_placement got;
        if (gs_place(&inv, usage, v->placement, &req, &got, NULL) < 0)
                return -ENOSPC;
        memset(c, 0, sizeof(*c));
        c->n = got.n_gpus;
        memcpy(c->gpus, got.gpus, got.n_gpus * sizeof(got.gpus[0]));
        return 0;
}

static void node_commit(struct gs_cp_node *n, const struct gs_cp_pod *cp,
                        const struct gs_cp_choice *c)
{
        for (unsigned i = 0; i < c->n; i++) {
                struct gs_cp_gpu *g = &n->gpus[c->gpus[i]];
                uint32_t milli = GS_MIN(cp->milli, GS_CP_MILLI_PER_GPU);
                uint64_t mem = cap_on(cp, g);
                g->free_milli = g->free_milli > milli ? g->free_milli - milli : 0;
                g->free_memory = g->free_memory > mem ? g->free_memory - mem : 0;
        }
}

int ext_place(enum gs_cp_policy policy, const struct gs_cp_model *m, const struct ext_view *v,
              const struct ext_pod *p, double *ret_score, struct ext_charge *ret_charges,
              unsigned *ret_n)
{
        struct gs_cp_node left = v->node;
        unsigned slices[GS_CP_MAX_GPUS];
        memcpy(slices, v->slices, sizeof(slices));
        struct ext_charge charges[EXT_MAX_SLICES];
        double sum = 0;
        for (unsigned k = 0; k < p->n_slices; k++) { /* the kubelet's order */
                struct gs_cp_pod cp;
                struct gs_cp_choice c;
                double score = 0;
                cp_slice(p, p->slices[k], &cp);
                if (!gs_cp_fits(&left, &cp) || node_choice(v, &left, slices, &cp, &c) < 0)
                        return -ENOSPC;
                if (ret_score && gs_cp_score(policy, m, &left, &cp, NULL, &score) < 0)
                        score = 0;
                sum += score;
                charges[k] = (struct ext_charge){ .milli = GS_MIN(cp.milli, GS_CP_MILLI_PER_GPU),
                                                  .memory = cp.gpu_memory };
                for (unsigned i = 0; i < c.n; i++)
                        charges[k].gpus |= 1ull << v->map[c.gpus[i]];
                node_commit(&left, &cp, &c);
                for (unsigned i = 0; i < c.n; i++)
                        slices[c.gpus[i]]++;
        }
        if (ret_score)
                *ret_score = p->n_slices ? sum / p->n_slices : 0;
        if (ret_charges)
                memcpy(ret_charges, charges, p->n_slices * sizeof(charges[0]));
        if (ret_n)
                *ret_n = p->n_slices;
        return 0;
}

static int why_one(const struct ext_pod *p, uint32_t milli, const struct gs_cp_node *n, char *why,
                   size_t size, bool *never)
{
        char q[32], mem[32];
        unsigned whole = 0;
        uint32_t largest = 0;
        uint64_t largest_total = 0, mem_best = 0;
        for (unsigned i = 0; i < n->n_gpus; i++) {
                whole += n->gpus[i].free_milli == GS_CP_MILLI_PER_GPU;
                largest = GS_MAX(largest, n->gpus[i].free_milli);
                largest_total = GS_MAX(largest_total, n->gpus[i].total_memory);
                if (n->gpus[i].free_milli >= milli)
                        mem_best = GS_MAX(mem_best, n->gpus[i].free_memory);
        }
        if (milli >= GS_MILLI_PER_GPU) {
                unsigned need = milli / GS_MILLI_PER_GPU;
                *never = need > n->n_gpus;
                return snprintf(why, size, "%u of %u GPUs fully free; the pod needs %u whole GPU%s",
                                whole, n->n_gpus, need, need == 1 ? "" : "s");
        }
        if (p->memory && largest_total && p->memory > largest_total) {
                *never = true;
                gs_memory_quantity_format(p->memory, mem, sizeof(mem));
                return snprintf(why, size,
                                "the pod asks %s of GPU memory, more than any GPU here "
                                "has (%s)",
                                mem, gs_bytes_human(largest_total, q, sizeof(q)));
        }
        if (largest >= milli && p->memory) {
                gs_memory_quantity_format(p->memory, mem, sizeof(mem));
                return snprintf(why, size,
                                "no GPU has both %um and %s free: the most memory free "
                                "on a GPU with %um free is %s",
                                milli, mem, milli, gs_bytes_human(mem_best, q, sizeof(q)));
        }
        if (largest >= milli)
                return snprintf(why, size,
                                "no GPU with %um free has the slice's memory cap free (%um of "
                                "the GPU's memory): the most memory free on one is %s",
                                milli, milli, gs_bytes_human(mem_best, q, sizeof(q)));
        return snprintf(why, size, "largest free share %um on one GPU; the pod needs %um", largest,
                        milli);
}

/* Several slices: each container's, with the GPUs' free shares. */
static int why_many(const struct ext_pod *p, const struct gs_cp_node *n, char *why, size_t size,
                    bool *never)
{
        unsigned whole = 0;
        for (unsigned k = 0; k < p->n_slices; k++)
                whole += p->slices[k] >= GS_MILLI_PER_GPU ? p->slices[k] / GS_MILLI_PER_GPU : 0;
        *never = whole > n->n_gpus;
        size_t len = (size_t)snprintf(why, size, "the pod's %u slices (", p->n_slices);
        for (unsigned k = 0; k < p->n_slices && len < size; k++)
                len += (size_t)snprintf(why + len, size - len, "%s%um", k ? ", " : "",
                                        p->slices[k]);
        if (len < size)
                len += (size_t)snprintf(why + len, size - len,
                                        ", one per container) do not fit "
                                        "together; free shares per GPU:");
        for (unsigned i = 0; i < n->n_gpus && len < size; i++)
                len += (size_t)snprintf(why + len, size - len, "%s %um", i ? "," : "",
                                        n->gpus[i].free_milli);
        return (int)GS_MIN(len, size);
}

bool ext_why_not(const struct ext_pod *p, const struct ext_view *v, char *why, size_t size)
{
        bool never = false;
        int len = p->n_slices == 1 ? why_one(p, p->slices[0], &v->node, why, size, &never)
                                   : why_many(p, &v->node, why, size, &never);
        if (len > 0 && (size_t)len < size && v->charged)
                snprintf(why + len, size - (size_t)len,
                         " (counting %u pod%s sent here that the node has not reported yet)",
                         v->charged, v->charged == 1 ? "" : "s");
        return never;
}
