/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the compute-grant frame decoder as the daemon reads a stream: frame
 * after frame; every accepted frame must re-encode to the same bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        while (size) {
                struct gs_arb_msg m;
                if (gs_arb_msg_decode(data, size, &m) < 0)
                        return 0;
                uint8_t again[GS_ARB_MSG_SIZE];
                gs_arb_msg_encode(again, &m);
                if (memcmp(again, data, GS_ARB_MSG_SIZE) != 0)
                        abort();
                (void)gs_arb_msg_type_name(m.type);
                data += GS_ARB_MSG_SIZE;
                size -= GS_ARB_MSG_SIZE;
        }
        return 0;
}
