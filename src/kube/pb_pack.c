/* SPDX-License-Identifier: Apache-2.0 */
/* See pb_pack.h. */
#include "pb_pack.h"

#include <errno.h>
#include <stdlib.h>

int kube_pb_pack(const ProtobufCMessage *m, uint8_t **ret_buf, size_t *ret_len)
{
        size_t len = protobuf_c_message_get_packed_size(m);
        uint8_t *buf = malloc(len ? len : 1);
        if (!buf)
                return -ENOMEM;
        protobuf_c_message_pack(m, buf);
        *ret_buf = buf;
        *ret_len = len;
        return 0;
}
