/* SPDX-License-Identifier: Apache-2.0 */
/* Draining local slices (daemon.h): a slice whose process is gone, or that
 * its owner released, is freed only once none of its processes (its
 * descendants that outlived it included: setsid, double fork) holds GPU
 * memory by NVML, as the watchdog samples it. Until then it stays in the
 * ledger, so no placement over-commits its GPU. */
#include "daemon.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "placement.h" /* gs_bytes_human */
#include "proc.h"
#include "watchdog_daemon.h"

static struct drain *drain_find(const struct daemon *d, const char *id, size_t *ret_pos)
{
        for (size_t i = 0; i < d->n_drains; i++)
                if (strcmp(d->drains[i]->id, id) == 0) {
                        if (ret_pos)
                                *ret_pos = i;
                        return d->drains[i];
                }
        return NULL;
}

void slices_drain_forget(struct daemon *d, const char *id)
{
        size_t pos;
        struct drain *x = drain_find(d, id, &pos);
        if (!x)
                return;
        free(x);
        d->drains[pos] = d->drains[--d->n_drains];
}

void slices_drain_forget_all(struct daemon *d)
{
        while (d->n_drains)
                free(d->drains[--d->n_drains]);
}

bool slices_draining(const struct daemon *d, const char *id)
{
        return drain_find(d, id, NULL) != NULL;
}

bool slices_drain_stale(const struct daemon *d, const char *id)
{
        const struct gs_slice *s = drain_find(d, id, NULL) ? gs_ledger_find(&d->node->ledger, id)
                                                           : NULL;
        uint64_t start;
        return s && (proc_start_time(s->pid, &start) < 0 || start != s->start_time);
}

static int drain_add(struct daemon *d, const char *id, const char *why)
{
        if (drain_find(d, id, NULL))
                return 0;
        struct drain *x = d->n_drains < GS_LEDGER_MAX_SLICES ? calloc(1, sizeof(*x)) : NULL;
        if (!x)
                return -ENOMEM;
        snprintf(x->id, sizeof(x->id), "%s", id);
        snprintf(x->why, sizeof(x->why), "%s", why);
        x->since_ms = node_now_ms();
        d->drains[d->n_drains++] = x;
        return 0;
}

int slices_drain_add(struct daemon *d, const char *id)
{
        return drain_add(d, id, "its process is gone");
}

int slices_drain(struct daemon *d, const char *id, const char *why)
{
        if (!d->wd || drain_add(d, id, why) < 0)
                return node_slice_release_locked(d->node, id, why);
        /* The sample frees it at once when nothing of it holds memory. */
        watchdog_sample_now(d);
        if (!slices_draining(d, id))
                return 0;
        struct wd_figures fig;
        watchdog_slice_figures(d, id, &fig);
        uint64_t used = 0;
        for (unsigned g = 0; g < GS_SLICE_MAX_GPUS; g++)
                used += fig.used[g];
        char mem[32];
        gs_log_info("slice %s: %s, but %" PRIu32 " process%s of it still hold%s %s of GPU "
                    "memory by NVML: draining (kept, so nothing is placed over it) until the "
                    "driver has freed it",
                    id, why, fig.holders, fig.holders == 1 ? "" : "es",
                    fig.holders == 1 ? "s" : "", gs_bytes_human(used, mem, sizeof(mem)));
        return 0;
}

void slices_drain_start(struct daemon *d)
{
        if (d->wd)
                return; /* its first sample decides */
        while (d->n_drains) {
                char id[GS_SLICE_ID_MAX + 1];
                snprintf(id, sizeof(id), "%s", d->drains[0]->id);
                node_slice_release_locked(d->node, id, "its process is gone");
                slices_drain_forget(d, id); /* also when the release failed */
        }
}
