/* SPDX-License-Identifier: Apache-2.0 */
/* Encoding of the shim<->daemon compute-grant frames
 * (include/gpuslice/arbiter_proto.h): pure encode/decode, no I/O. */
#ifndef GS_ARBITER_WIRE_H
#define GS_ARBITER_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "gpuslice/arbiter_proto.h"

struct gs_arb_msg {
        enum gs_arb_msg_type type;
        uint64_t gen;
        uint64_t value;
        uint32_t flags;
};

/* Write `m` as one GS_ARB_MSG_SIZE-byte frame into out. */
void gs_arb_msg_encode(uint8_t out[GS_ARB_MSG_SIZE], const struct gs_arb_msg *m);

/* Decode the frame at the start of buf into *ret (written only on
 * success). -EAGAIN when len < GS_ARB_MSG_SIZE (read more); -EPROTO for a
 * wrong magic; -EPROTONOSUPPORT for another version; -EBADMSG for an
 * unknown type, unknown flag bits, a non-zero reserved field, flags on a
 * type that takes none, a HELLO without a version, or a DONE whose busy
 * time exceeds GS_ARB_MAX_BUSY_NS. */
int gs_arb_msg_decode(const uint8_t *buf, size_t len, struct gs_arb_msg *ret);

/* A short name for a type ("want"), or "?" for an unknown one. */
const char *gs_arb_msg_type_name(uint32_t type);

#endif /* GS_ARBITER_WIRE_H */
