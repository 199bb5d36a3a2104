/* SPDX-License-Identifier: Apache-2.0 */
/* The driver's ResourceSlice. See dra_slices.h. */
#include "dra_slices.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "quantity.h"

void dra_device_name(const struct gs_gpu *g, char *buf, size_t size)
{
        const char *u = g->uuid;
        if (strncmp(u, "GPU-", 4) == 0)
                u += 4;
        size_t off = (size_t)snprintf(buf, size, "gpu-");
        for (; *u && off + 1 < size && off < 63; u++) {
                char c = (char)tolower((unsigned char)*u);
                buf[off++] = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ? c : '-';
        }
        while (off > 4 && buf[off - 1] == '-')
                off--; /* a DNS label ends alphanumeric */
        buf[off < size ? off : size - 1] = '\0';
}

int dra_device_position_locked(const struct node *n, const char *name)
{
        char have[64];
        for (unsigned i = 0; i < n->inv.n_gpus; i++) {
                dra_device_name(&n->inv.gpus[i], have, sizeof(have));
                if (strcmp(have, name) == 0)
                        return (int)i;
        }
        return -1;
}

/* Share and memory of GPU i that local and device-plugin slices hold. */
static void held_outside_dra(const struct node *n, unsigned i, uint64_t *milli, uint64_t *memory)
{
        const struct gs_gpu *g = &n->inv.gpus[i];
        *milli = *memory = 0;
        for (size_t k = 0; k < n->ledger.n_slices; k++) {
                const struct gs_slice *s = &n->ledger.slices[k];
                if (s->kind == GS_SLICE_DRA)
                        continue;
                for (unsigned j = 0; j < s->n_gpus; j++)
                        if (strcmp(s->gpus[j].uuid, g->uuid) == 0) {
                                bool whole = gs_slice_is_whole(s);
                                *milli += whole ? GS_MILLI_PER_GPU : s->milli;
                                *memory += whole ? g->memory_total : s->memory_cap;
                        }
        }
}

static json_t *quantity(uint64_t v)
{
        char buf[32];
        snprintf(buf, sizeof(buf), "%" PRIu64, v);
        return json_string(buf);
}

static json_t *capacity(uint64_t value, uint64_t dflt, uint64_t min, const char *step)
{
        return json_pack("{s:o, s:{s:o, s:{s:o, s:o, s:s}}}", "value", quantity(value),
                         "requestPolicy", "default", quantity(dflt), "validRange", "min",
                         quantity(min), "max", quantity(value), "step", step);
}

static json_t *device(const struct node *n, unsigned i)
{
        const struct gs_gpu *g = &n->inv.gpus[i];
        uint64_t milli, memory;
        held_outside_dra(n, i, &milli, &memory);
        uint64_t free_milli = milli < GS_MILLI_PER_GPU ? GS_MILLI_PER_GPU - milli : 0;
        uint64_t free_mem = memory < g->memory_total ? g->memory_total - memory : 0;
        free_mem -= free_mem % GS_MEM_GRANULARITY; /* max: a multiple of the step */
        if (free_milli == 0 || free_mem == 0)
                return NULL; /* nothing a claim could have */
        char name[64];
        dra_device_name(g, name, sizeof(name));
        json_t *attrs = json_pack("{s:{s:s}, s:{s:s}, s:{s:I}}", "uuid", "string", g->uuid,
                                  "productName", "string", g->name, "index", "int",
                                  (json_int_t)g->index);
        if (attrs && g->numa_known)
                json_object_set_new(attrs, "numaNode", json_pack("{s:I}", "int",
                                                                  (json_int_t)g->numa_node));
        /* A claim that names no share takes what remains of the GPU's;
         * one that names no memory consumes none of the scheduler's count
         * and gets share x memory if the node has room (docs/kubernetes.md). */
        json_t *cap = json_pack("{s:o, s:o}", "milli", capacity(free_milli, free_milli, 1, "1"),
                                "memory", capacity(free_mem, 0, 0, "2Mi"));
        return json_pack("{s:s, s:o, s:o, s:b}", "name", name, "attributes", attrs, "capacity", cap,
                         "allowMultipleAllocations", 1);
}

json_t *dra_resource_slice_locked(const struct node *n, const char *driver,
                                  const char *node_name, const char *node_uid,
                                  int64_t generation)
{
        json_t *devices = json_array();
        for (unsigned i = 0; devices && i < n->inv.n_gpus; i++) {
                if (!n->inv.gpus[i].healthy)
                        continue; /* a lost GPU is not offered */
                json_t *d = device(n, i);
                if (d)
                        json_array_append_new(devices, d);
        }
        char name[320];
        snprintf(name, sizeof(name), "%s-%s", node_name, driver);
        json_t *meta = json_pack("{s:s}", "name", name);
        if (meta && node_uid && *node_uid)
                json_object_set_new(meta, "ownerReferences",
                                    json_pack("[{s:s, s:s, s:s, s:s, s:b}]", "apiVersion", "v1",
                                              "kind", "Node", "name", node_name, "uid", node_uid,
                                              "controller", 1));
        return json_pack("{s:s, s:s, s:o, s:{s:s, s:{s:s, s:I, s:I}, s:s, s:o}}", "apiVersion",
                         "resource.k8s.io/v1", "kind", "ResourceSlice", "metadata", meta, "spec",
                         "driver", driver, "pool", "name", node_name, "generation",
                         (json_int_t)generation, "resourceSliceCount", (json_int_t)1, "nodeName",
                         node_name, "devices", devices);
}

bool dra_resource_slice_same_devices(const json_t *a, const json_t *b)
{
        const json_t *da = json_object_get(json_object_get(a, "spec"), "devices");
        const json_t *db = json_object_get(json_object_get(b, "spec"), "devices");
        return da && db && json_equal(da, db);
}
