/* SPDX-License-Identifier: Apache-2.0 */
/* The all-or-nothing fit check of `gpuslice up` (see up_plan.h). */
#include "up_plan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "quantity.h"

/* Append to a bounded message buffer; silently truncates. */
static void appendf(char *buf, size_t size, size_t *len, const char *fmt, ...) GS_PRINTF(4, 5);
static void appendf(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (*len >= size)
                return;
        va_start(ap, fmt);
        n = vsnprintf(buf + *len, size - *len, fmt, ap);
        va_end(ap);
        if (n > 0)
                *len = GS_MIN(size, *len + (size_t)n);
}

/* One line per GPU: what it would be short of for this request. */
static void describe_shortage(const struct gs_inventory *inv, const struct gs_gpu_usage *usage,
                              const struct gs_placement_request *req, char *buf, size_t size,
                              size_t *len)
{
        for (unsigned i = 0; i < inv->n_gpus; i++) {
                const struct gs_gpu *g = &inv->gpus[i];
                const struct gs_gpu_usage *u = &usage[i];
                char a[32], b[32];
                bool any = false;

                appendf(buf, size, len, "\n  GPU %u (%s, %s): ", g->index, g->name, g->uuid);
                if (!g->healthy) {
                        appendf(buf, size, len, "unhealthy");
                        continue;
                }
                if (req->milli >= GS_MILLI_PER_GPU) {
                        appendf(buf, size, len, "%s", u->n_slices
                                ? "holds slices, so it cannot be given whole" : "free");
                        continue;
                }
                uint64_t cap = req->memory ? req->memory
                                           : gs_default_memory_cap(req->milli, g->memory_total);
                if (u->free_milli < req->milli) {
                        appendf(buf, size, len, "short of %" PRIu32 "m share (%" PRIu32 "m free)",
                                req->milli - u->free_milli, u->free_milli);
                        any = true;
                }
                if (u->free_memory < cap) {
                        appendf(buf, size, len, "%sshort of %s memory (%s free)", any ? "; " : "",
                                gs_bytes_human(cap - u->free_memory, a, sizeof(a)),
                                gs_bytes_human(u->free_memory, b, sizeof(b)));
                        any = true;
                }
                if (!any)
                        appendf(buf, size, len, "has room");
        }
}

int up_plan_check(const struct gs_inventory *inv, const struct gs_gpu_usage *usage,
                  enum gs_placement_policy policy, const struct gs_spec *spec,
                  struct gs_error **err)
{
        struct gs_gpu_usage plan[GS_MAX_GPUS];
        char msg[4096];
        size_t len = 0;

        memcpy(plan, usage, sizeof(plan[0]) * inv->n_gpus);
        for (size_t i = 0; i < spec->n_apis; i++) {
                const struct gs_api_spec *api = &spec->apis[i];
                struct gs_placement_request req = { .milli = api->compute.gpu_milli,
                                                     .memory = api->compute.gpu_memory };
                struct gs_placement p;
                struct gs_error *perr = NULL;
                char share[32], mem[32] = "default memory";
                int r = gs_place(inv, plan, policy, &req, &p, &perr);

                if (r == 0) {
                        gs_placement_commit(plan, &req, &p);
                        continue;
                }
                gs_gpu_quantity_format(req.milli, share, sizeof(share));
                if (req.memory)
                        gs_bytes_human(req.memory, mem, sizeof(mem));
                if (r != -ENOSPC) {
                        r = gs_error_set(err, r, "API %s (gpu %s, %s) can never fit on this node: %s",
                                         api->name, share, mem, gs_error_msg(perr));
                        gs_error_free(perr);
                        return r;
                }
                gs_error_free(perr);
                appendf(msg, sizeof(msg), &len, "API %s (gpu %s, %s) does not fit", api->name,
                        share, mem);
                if (i == 1)
                        appendf(msg, sizeof(msg), &len, " once the API before it is placed");
                else if (i > 1)
                        appendf(msg, sizeof(msg), &len, " once the %zu APIs before it are placed", i);
                appendf(msg, sizeof(msg), &len, ":");
                describe_shortage(inv, plan, &req, msg, sizeof(msg), &len);
                return gs_error_set(err, -ENOSPC, "%s", msg);
        }
        return 0;
}
