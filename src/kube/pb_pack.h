/* SPDX-License-Identifier: Apache-2.0 */
/* Packing a protobuf-c message into a fresh buffer, for the device plugin's
 * and the DRA driver's codecs (the only files that touch protobuf-c). */
#ifndef GS_KUBE_PB_PACK_H
#define GS_KUBE_PB_PACK_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

/* 0 and a malloc'ed *ret_buf of *ret_len bytes (1 byte allocated for an
 * empty message), or -ENOMEM. */
int kube_pb_pack(const ProtobufCMessage *m, uint8_t **ret_buf, size_t *ret_len);

#endif /* GS_KUBE_PB_PACK_H */
