/* SPDX-License-Identifier: Apache-2.0 */
/* A slice's lifecycle on the node: place -> record -> files, and release.
 * See node.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "node.h"
#include "node_backend.h"
#include "node_files.h"
#include "number.h"
#include "quantity.h"

/* The request as a slice record on the GPUs placement chose. */
static int fill_slice(const struct node *n, const struct node_request *req,
                      const struct gs_placement *p, struct gs_slice *s, struct gs_error **err)
{
        *s = (struct gs_slice){ .kind = req->kind,
                                .milli = req->milli,
                                .memory_cap = p->memory_cap,
                                .policy = req->has_policy ? req->policy : n->compute_policy,
                                .overuse = req->overuse,
                                .created = (int64_t)time(NULL),
                                .units = (char *)req->units };
        if (req->claim)
                s->claim = *req->claim;
        if (req->kind == GS_SLICE_LOCAL) {
                s->pid = req->pid;
                s->start_time = req->start_time;
                s->uid = req->uid;
        }
        if (req->name && snprintf(s->name, sizeof(s->name), "%s", req->name) >= (int)sizeof(s->name))
                return gs_error_set(err, -EINVAL, "name '%.70s' is longer than %d", req->name,
                                    GS_SLICE_NAME_MAX);
        s->n_gpus = p->n_gpus;
        for (unsigned i = 0; i < p->n_gpus; i++) {
                const struct gs_gpu *g = &n->inv.gpus[p->gpus[i]];
                s->gpus[i].index = g->index;
                snprintf(s->gpus[i].uuid, sizeof(s->gpus[i].uuid), "%s", g->uuid);
        }
        return 0;
}

/* Take a slice whose making failed out of the record again (saved; a
 * failing save is logged: the caller reports the first failure). */
static void unrecord(struct node *n, const char *id)
{
        gs_ledger_remove(&n->ledger, id);
        struct gs_error *err = NULL;
        if (node_save_locked(n, &err) < 0)
                gs_log_error("%s", gs_error_msg(err));
        gs_error_free(err);
}

static const char *kind_name(const struct gs_slice *s)
{
        return s->kind == GS_SLICE_KUBE ? "Kubernetes" : s->kind == GS_SLICE_DRA ? "DRA" : "local";
}

int node_slice_prepare_locked(struct node *n, const struct node_request *req,
                              struct gs_slice *ret, struct gs_error **err)
{
        const struct node_backend *be;
        int r = node_backend_for(req->milli, req->memory, &be, err);
        if (r < 0)
                return r;
        if (n->ledger.n_slices >= GS_LEDGER_MAX_SLICES)
                return gs_error_set(err, -ENOSPC, "the node holds its limit of %d slices",
                                    GS_LEDGER_MAX_SLICES);
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        node_usage_locked(n, usage);
        struct gs_placement_request preq = { .milli = req->milli,
                                             .memory = req->memory,
                                             .prefer = req->prefer,
                                             .preferred_gpu = req->preferred_gpu,
                                             .allowed = req->allowed_gpus };
        struct gs_placement p;
        if ((r = gs_place(&n->inv, usage, n->placement, &preq, &p, err)) < 0)
                return r;
        struct gs_slice s;
        if ((r = fill_slice(n, req, &p, &s, err)) < 0)
                return r;
        gs_ledger_assign_id(&n->ledger, &s);
        /* Record first, then files: a crash in between leaves a record
         * whose files node_reconcile_files_locked writes again. */
        if ((r = gs_ledger_add(&n->ledger, &s, err)) < 0)
                return r;
        if ((r = node_save_locked(n, err)) < 0) {
                gs_ledger_remove(&n->ledger, s.id);
                return r;
        }
        const struct gs_slice *rec = gs_ledger_find(&n->ledger, s.id);
        if ((r = node_backend_prepare(be, n, rec, err)) < 0) {
                node_backend_release(be, n, rec);
                unrecord(n, s.id);
                return r;
        }
        n->generation++;
        char mem[32];
        gs_log_info("slice %s created (%s, %s): %" PRIu32 "m, memory %s, on GPU %u (%s)%s%s",
                    rec->id, kind_name(rec), be->name,
                    rec->milli,
                    rec->memory_cap ? gs_bytes_human(rec->memory_cap, mem, sizeof(mem)) : "whole",
                    rec->gpus[0].index, rec->gpus[0].uuid, rec->name[0] ? " name " : "",
                    rec->name);
        *ret = *rec;
        return 0;
}

int node_slice_release_locked(struct node *n, const char *id, const char *why)
{
        char idc[GS_SLICE_ID_MAX + 1];
        snprintf(idc, sizeof(idc), "%s", id); /* id may point into the record */
        struct gs_slice *s = gs_ledger_find(&n->ledger, idc);
        if (!s)
                return -ENOENT;
        gs_log_info("slice %s freed (%" PRIu32 "m on %s%s): %s", idc, s->milli, s->gpus[0].uuid,
                    gs_slice_in_container(s) ? ", Kubernetes" : "", why);
        if (n->observer.slice_removed)
                n->observer.slice_removed(n->observer.ctx, s, why);
        node_backend_release(node_backend_of(s), n, s);
        gs_ledger_remove(&n->ledger, idc);
        node_forget_pod_locked(n, idc);
        n->generation++;
        struct gs_error *err = NULL;
        int r = node_save_locked(n, &err);
        if (r < 0)
                gs_log_error("%s", gs_error_msg(err));
        gs_error_free(err);
        return r;
}

int node_slice_resize_locked(struct node *n, const char *id, uint32_t milli, const char *units,
                             struct gs_error **err)
{
        struct gs_slice *s = gs_ledger_find(&n->ledger, id);
        if (!s)
                return gs_error_set(err, -ENOENT, "no slice %.64s", id);
        if (gs_slice_is_whole(s) || milli == 0 || milli >= GS_MILLI_PER_GPU)
                return gs_error_set(err, -EINVAL, "slice %s: only a share of one GPU is resized",
                                    s->id);
        int pos = node_gpu_position_locked(n, s->gpus[0].uuid);
        if (pos < 0)
                return gs_error_set(err, -ENODEV, "slice %s: its GPU is not in the inventory",
                                    s->id);
        /* A lost GPU's memory is unknown: no cap to derive, no room to grow. */
        if (!n->inv.gpus[pos].healthy || n->inv.gpus[pos].memory_total == 0)
                return gs_error_set(err, -ENODEV, "slice %s: GPU %u (%s) is not healthy; the "
                                    "slice keeps its size", s->id, n->inv.gpus[pos].index,
                                    s->gpus[0].uuid);
        uint64_t cap = gs_default_memory_cap(milli, n->inv.gpus[pos].memory_total);
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        node_usage_locked(n, usage);
        /* Room beside everything else: its own share and memory are free. */
        uint64_t free_milli = usage[pos].free_milli + s->milli;
        uint64_t free_mem = usage[pos].free_memory + s->memory_cap;
        if (milli > free_milli || cap > free_mem) {
                char mem[32];
                return gs_error_set(err, -ENOSPC,
                                    "slice %s cannot grow to %" PRIu32 "m on GPU %u (%s): %" PRIu64
                                    "m and %s free there counting its own",
                                    s->id, milli, n->inv.gpus[pos].index, s->gpus[0].uuid,
                                    free_milli, gs_bytes_human(free_mem, mem, sizeof(mem)));
        }
        char *new_units = units ? strdup(units) : NULL;
        if (units && !new_units)
                return gs_error_set(err, -ENOMEM, "out of memory");
        struct gs_slice old = *s;
        s->milli = milli;
        s->memory_cap = cap;
        s->units = new_units;
        int r = node_save_locked(n, err);
        if (r >= 0)
                r = node_backend_prepare(node_backend_of(s), n, s, err);
        if (r < 0) {
                free(new_units);
                *s = old;
                struct gs_error *e2 = NULL;
                if (node_save_locked(n, &e2) < 0 || node_backend_prepare(node_backend_of(s), n, s,
                                                                         &e2) < 0)
                        gs_log_error("slice %s: cannot restore it after a failed resize: %s",
                                     s->id, gs_error_msg(e2));
                gs_error_free(e2);
                return r;
        }
        free(old.units);
        n->generation++;
        gs_log_info("slice %s resized: %" PRIu32 "m -> %" PRIu32 "m on GPU %u", s->id, old.milli,
                    milli, s->gpus[0].index);
        return 0;
}

int node_slice_restore_locked(struct node *n, const struct gs_slice *s, struct gs_error **err)
{
        if (gs_ledger_find(&n->ledger, s->id))
                return gs_error_set(err, -EEXIST, "slice %s is recorded already", s->id);
        for (unsigned i = 0; i < s->n_gpus; i++)
                if (node_gpu_position_locked(n, s->gpus[i].uuid) < 0)
                        return gs_error_set(err, -ENODEV, "slice %s: GPU %s is not in the "
                                            "inventory", s->id, s->gpus[i].uuid);
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        node_usage_locked(n, usage);
        int pos = node_gpu_position_locked(n, s->gpus[0].uuid);
        bool whole = gs_slice_is_whole(s);
        struct gs_slice rs = *s;
        if (whole ? usage[pos].n_slices != 0
                  : usage[pos].free_milli < s->milli || usage[pos].free_memory < s->memory_cap) {
                gs_log_warn("slice %s is restored on GPU %s although it has no room for it: the "
                            "GPU is over-committed until a slice there ends", s->id,
                            s->gpus[0].uuid);
                rs.overcommitted = true; /* recorded so: the next start accepts it */
        }
        int r = gs_ledger_add(&n->ledger, &rs, err);
        if (r < 0)
                return r;
        /* Its number must never be handed out again. */
        uint64_t seq;
        if (gs_slice_id_number(s->id, &seq) == 0 && seq >= n->ledger.next_id)
                n->ledger.next_id = seq + 1;
        const struct gs_slice *rec = gs_ledger_find(&n->ledger, s->id);
        if ((r = node_save_locked(n, err)) < 0 ||
            (r = node_backend_prepare(node_backend_of(rec), n, rec, err)) < 0) {
                unrecord(n, s->id);
                return r;
        }
        n->generation++;
        gs_log_info("slice %s restored (%" PRIu32 "m on GPU %u)", rec->id, rec->milli,
                    rec->gpus[0].index);
        return 0;
}

int node_reconcile_files_locked(struct node *n)
{
        int repaired = 0;
        for (size_t i = 0; i < n->ledger.n_slices; i++) {
                const struct gs_slice *s = &n->ledger.slices[i];
                const struct node_backend *be = node_backend_of(s);
                if (node_backend_files_ok(be, n, s))
                        continue;
                struct gs_error *err = NULL;
                if (node_backend_prepare(be, n, s, &err) < 0) {
                        gs_log_error("slice %s: cannot restore its files: %s", s->id,
                                     gs_error_msg(err));
                        gs_error_free(err);
                        continue;
                }
                gs_log_warn("slice %s: its files were missing or stale (a crash between record "
                            "and files?): written again", s->id);
                repaired++;
        }
        return repaired + node_files_remove_orphans(n);
}
