/* SPDX-License-Identifier: Apache-2.0 */
/* Wire encoding of the daemon's local API (pure encode/decode, no I/O).
 *
 * A frame is a 12-byte header followed by a payload:
 *   u32 magic   0x47534C50 ("GSLP"), big-endian
 *   u16 version 1
 *   u16 type    a request type, GS_MSG_REPLY|type for a success reply,
 *               GS_MSG_ERROR for an error reply
 *   u32 length  payload bytes (requests: at most GS_PROTO_MAX_REQUEST;
 *               replies: at most GS_PROTO_MAX_REPLY)
 * The payload is text: zero or more `key=value\n` lines, key
 * [a-z0-9_]{1,31}, value up to 4095 bytes without control characters. Keys
 * may repeat (lists). Documented for users in docs/daemon.md.
 *
 * Compatibility: a new optional key keeps version 1. A daemon ignores
 * request keys it does not know and a client ignores reply keys it does
 * not know, so a client whose request depends on a newer key checks that
 * the reply echoes it (create's `overuse` comes back as `slice_overuse`). */
#ifndef GS_LOCAL_PROTO_H
#define GS_LOCAL_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define GS_PROTO_MAGIC 0x47534C50u
#define GS_PROTO_VERSION 1
#define GS_PROTO_HEADER_SIZE 12
#define GS_PROTO_MAX_REQUEST (64u << 10)
#define GS_PROTO_MAX_REPLY (1u << 20)
#define GS_PROTO_MAX_ITEMS 8192
#define GS_PROTO_KEY_MAX 31
#define GS_PROTO_VALUE_MAX 4095

enum gs_msg_type {
        GS_MSG_CREATE = 1,   /* gpu_milli, [memory], [policy], [overuse], [name], [up_spec],
                              * pid -> a slice */
        GS_MSG_LIST = 2,     /* -> gpu=... and slice=... lines */
        GS_MSG_RELEASE = 3,  /* id -> released */
        GS_MSG_STATUS = 4,   /* -> daemon facts and inventory */
        GS_MSG_PLAN = 5,     /* want=<milli>,<memory> repeated -> fits or an error */
        GS_MSG_EVENTS = 6,   /* [since=<seq>] -> event=<line> repeated (oldest first) */
        GS_MSG_STOP = 7,     /* id, [grace_ms], [target=slice|up] -> stopping=<id> */
        GS_MSG_REPLY = 0x8000,
        GS_MSG_ERROR = 0xFFFF, /* code=<negative errno>, message=<text> */
};

struct gs_proto_header {
        uint16_t type;
        uint32_t length;
};

/* True for the request types above. */
bool gs_proto_request_known(uint16_t type);

/* Write a header for a payload of `length` bytes into out. */
void gs_proto_header_encode(uint8_t out[GS_PROTO_HEADER_SIZE], uint16_t type, uint32_t length);

/* Decode the header at the start of buf. -EAGAIN when len < 12 (read
 * more); -EPROTO for a wrong magic; -EPROTONOSUPPORT for another version;
 * -EMSGSIZE when the payload length exceeds max_payload. Messages are set
 * for every error but -EAGAIN. */
int gs_proto_header_decode(const uint8_t *buf, size_t len, uint32_t max_payload,
                           struct gs_proto_header *ret, struct gs_error **err);

struct gs_proto_kv {
        const char *key;
        const char *value;
};

/* A parsed payload. Owns its text; items point into it. */
struct gs_proto_msg {
        uint16_t type;
        char *text;
        struct gs_proto_kv *items;
        size_t n_items;
};

/* Parse a payload. On success *ret owns its storage (gs_proto_msg_done);
 * -EINVAL with a message naming the line for malformed text, or naming the
 * key repeated in a request (`type` a known request other than
 * GS_MSG_PLAN, whose `want` repeats; replies may repeat keys), -ENOMEM. */
int gs_proto_msg_parse(uint16_t type, const char *payload, size_t len, struct gs_proto_msg *ret,
                       struct gs_error **err);

/* Free a parsed message; NULL-safe, idempotent. */
void gs_proto_msg_done(struct gs_proto_msg *m);

/* The value of the first item with this key, or NULL. */
const char *gs_proto_msg_get(const struct gs_proto_msg *m, const char *key);

/* Builds one frame. Values have control characters replaced by '?'. */
struct gs_proto_builder {
        uint8_t *data;
        size_t len, cap;
        uint32_t max_payload;
        uint16_t type;
        int error;           /* first failure: -ENOMEM, -EMSGSIZE, -EINVAL */
};

/* Start a frame of this type whose payload may not exceed max_payload. */
void gs_proto_builder_init(struct gs_proto_builder *b, uint16_t type, uint32_t max_payload);

/* Append `key=value\n`. Errors stick in b->error (checked by finish). */
void gs_proto_builder_add(struct gs_proto_builder *b, const char *key, const char *fmt, ...)
        GS_PRINTF(3, 4);

/* Finish the frame: 0 and *ret_frame (gs_free) / *ret_len, or the first
 * error seen (the builder is freed either way). */
int gs_proto_builder_finish(struct gs_proto_builder *b, uint8_t **ret_frame, size_t *ret_len);

/* Free an unfinished builder; NULL-safe. */
void gs_proto_builder_done(struct gs_proto_builder *b);

/* Build an error frame (code, message). Returns 0 or -ENOMEM. */
int gs_proto_error_frame(int code, const char *message, uint8_t **ret_frame, size_t *ret_len);

/* The machine's daemon: one per machine, run as root (docs/daemon.md). Its
 * socket is GS_LOCAL_SYSTEM_DIR/GS_LOCAL_SOCKET_NAME, usable by root and the
 * group GS_LOCAL_GROUP. */
#define GS_LOCAL_SYSTEM_DIR "/run/gpuslice"
#define GS_LOCAL_GROUP "gpuslice"

/* The directory of a user's private simulated daemon (--sim without an
 * explicit state directory), shared by gpusliced and the CLI:
 * $XDG_RUNTIME_DIR/gpuslice-sim when xdg_runtime_dir is an absolute path,
 * else /run/gpuslice-sim for root (euid 0), else /tmp/gpuslice-sim-<euid>.
 * Returns 0 or -ENAMETOOLONG. */
int gs_local_sim_dir(unsigned euid, const char *xdg_runtime_dir, char *buf, size_t size);

/* Whether the directory `dir` of a daemon socket can be trusted by a client
 * running as `euid`: it must be a directory (symlinks followed) owned by
 * euid or by root and writable by nobody else (no group/other write bit),
 * so no other local user can have put a socket there. Returns 0; -ENOENT
 * when it does not exist (no message); -EPERM (message naming the directory,
 * its owner and mode, and what is expected) when untrusted; or another
 * negative errno from stat(2) with a message. */
int gs_local_check_dir(const char *dir, unsigned euid, struct gs_error **err);

#define GS_LOCAL_SOCKET_NAME "gpusliced.sock"

#endif /* GS_LOCAL_PROTO_H */
