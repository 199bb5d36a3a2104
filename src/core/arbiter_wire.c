/* SPDX-License-Identifier: Apache-2.0 */
/* Fixed 32-byte little-endian frames of the compute-grant protocol. */
#include "arbiter_wire.h"

#include <errno.h>
#include <string.h>

static void put16(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
        for (int i = 0; i < 4; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
        for (int i = 0; i < 8; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
        return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const uint8_t *p)
{
        uint32_t v = 0;
        for (int i = 3; i >= 0; i--)
                v = (v << 8) | p[i];
        return v;
}

static uint64_t get64(const uint8_t *p)
{
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--)
                v = (v << 8) | p[i];
        return v;
}

void gs_arb_msg_encode(uint8_t out[GS_ARB_MSG_SIZE], const struct gs_arb_msg *m)
{
        memset(out, 0, GS_ARB_MSG_SIZE);
        put32(out, GS_ARB_MSG_MAGIC);
        put16(out + 4, (uint16_t)GS_ARB_PROTO_VERSION);
        put16(out + 6, (uint16_t)m->type);
        put64(out + 8, m->gen);
        put64(out + 16, m->value);
        put32(out + 24, m->flags);
}

int gs_arb_msg_decode(const uint8_t *buf, size_t len, struct gs_arb_msg *ret)
{
        if (len < GS_ARB_MSG_SIZE)
                return -EAGAIN;
        if (get32(buf) != GS_ARB_MSG_MAGIC)
                return -EPROTO;
        if (get16(buf + 4) != GS_ARB_PROTO_VERSION)
                return -EPROTONOSUPPORT;
        struct gs_arb_msg m = { .type = (enum gs_arb_msg_type)get16(buf + 6),
                                .gen = get64(buf + 8),
                                .value = get64(buf + 16),
                                .flags = get32(buf + 24) };
        if (get32(buf + 28) != 0 || (m.flags & ~GS_ARB_F_ALL))
                return -EBADMSG;
        switch (m.type) {
        case GS_ARB_MSG_HELLO:
                if (m.value == 0 || m.flags)
                        return -EBADMSG;
                break;
        case GS_ARB_MSG_DONE:
                if (m.value > GS_ARB_MAX_BUSY_NS || m.gen == 0)
                        return -EBADMSG;
                break;
        case GS_ARB_MSG_WELCOME:
        case GS_ARB_MSG_WANT:
        case GS_ARB_MSG_IDLE:
        case GS_ARB_MSG_ERROR:
                if (m.flags)
                        return -EBADMSG;
                break;
        default:
                return -EBADMSG;
        }
        *ret = m;
        return 0;
}

const char *gs_arb_msg_type_name(uint32_t type)
{
        static const char *const names[] = { "?", "hello", "welcome", "want", "idle", "done", "error" };
        return type < sizeof(names) / sizeof(names[0]) ? names[type] : "?";
}
