/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the device plugin's message decoding: the first byte
 * picks the message (AllocateRequest, PreferredAllocationRequest,
 * ListPodResourcesResponse, Empty, a unit id), the rest is its wire bytes.
 * Decoded requests also go through the preferred-allocation handler of a
 * plugin with two GPUs. Lives in fuzz/kube/ because it links gs_kube
 * (gRPC, protobuf-c); tests/kube/CMakeLists.txt replays its corpus. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_plugin.h"
#include "node.h"
#include "unit_ids.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct dp *plugin(void)
{
        static struct dp *d;
        if (d)
                return d;
        char tmpl[] = "/tmp/gs-fuzz-dp-XXXXXX";
        if (!mkdtemp(tmpl))
                abort();
        struct node_config nc = {.state_dir = tmpl};
        struct node *node = NULL;
        if (node_open(&nc, &node, NULL) < 0)
                abort();
        static struct gs_inventory inv = {
                .gpus = {{.index = 0, .uuid = "GPU-fuzz-0", .memory_total = 16ull << 30, .healthy = true},
                         {.index = 1, .uuid = "GPU-fuzz-1", .memory_total = 8ull << 30, .healthy = true}},
                .n_gpus = 2};
        node_set_inventory_locked(node, &inv);
        struct dp_config cfg = {.node = node, .release_grace_s = 60};
        if (dp_new(&cfg, &d, NULL) < 0)
                abort();
        return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        const uint8_t *p = data + 1;
        size_t n = size - 1;
        switch (data[0] % 5) {
        case 0: {
                struct dp_strv *c = NULL;
                size_t nc = 0;
                if (dp_decode_allocate(p, n, &c, &nc) == 0)
                        dp_strv_array_free(c, nc);
                break;
        }
        case 1: {
                uint8_t *out = NULL;
                size_t len = 0;
                struct gs_error *err = NULL;
                dp_handle_preferred(plugin(), p, n, &out, &len, &err);
                free(out);
                gs_error_free(err);
                break;
        }
        case 2: {
                struct dp_pod_devices *pods = NULL;
                size_t np = 0;
                if (dp_decode_pod_resources(p, n, DP_RESOURCE, &pods, &np) == 0)
                        dp_pod_devices_array_free(pods, np);
                break;
        }
        case 3:
                dp_decode_empty(p, n);
                break;
        default: {
                char id[80];
                size_t l = n < sizeof(id) - 1 ? n : sizeof(id) - 1;
                memcpy(id, p, l);
                id[l] = '\0';
                unsigned g, u;
                if (gs_unit_id_parse(id, &g, &u) == 0 && (g >= DP_MAX_GPUS || u >= DP_UNITS_PER_GPU))
                        abort();
                break;
        }
        }
        return 0;
}
