/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the local API decoder: header then payload, as the daemon reads. */
#include <stddef.h>
#include <stdint.h>

#include "local_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        while (size) {
                struct gs_proto_header h;
                struct gs_error *err = NULL;
                int r = gs_proto_header_decode(data, size, GS_PROTO_MAX_REQUEST, &h, &err);
                gs_error_free(err);
                if (r < 0)
                        return 0;
                data += GS_PROTO_HEADER_SIZE;
                size -= GS_PROTO_HEADER_SIZE;
                if (h.length > size)
                        return 0;
                struct gs_proto_msg m;
                err = NULL;
                if (gs_proto_msg_parse(h.type, (const char *)data, h.length, &m, &err) == 0) {
                        for (size_t i = 0; i < m.n_items; i++)
                                (void)gs_proto_msg_get(&m, m.items[i].key);
                        gs_proto_msg_done(&m);
                }
                gs_error_free(err);
                data += h.length;
                size -= h.length;
        }
        return 0;
}
