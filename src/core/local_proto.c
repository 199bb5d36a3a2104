/* SPDX-License-Identifier: Apache-2.0 */
/* Wire encoding of the daemon's local API. See local_proto.h. */
#include "local_proto.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "atomic_file.h"
#include "macro.h"

bool gs_proto_request_known(uint16_t type)
{
        return type >= GS_MSG_CREATE && type <= GS_MSG_STOP;
}

static void put_be32(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)(v >> 24);
        p[1] = (uint8_t)(v >> 16);
        p[2] = (uint8_t)(v >> 8);
        p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void gs_proto_header_encode(uint8_t out[GS_PROTO_HEADER_SIZE], uint16_t type, uint32_t length)
{
        put_be32(out, GS_PROTO_MAGIC);
        out[4] = 0;
        out[5] = GS_PROTO_VERSION;
        out[6] = (uint8_t)(type >> 8);
        out[7] = (uint8_t)type;
        put_be32(out + 8, length);
}

int gs_proto_header_decode(const uint8_t *buf, size_t len, uint32_t max_payload,
                           struct gs_proto_header *ret, struct gs_error **err)
{
        if (len < GS_PROTO_HEADER_SIZE)
                return -EAGAIN;
        uint32_t magic = get_be32(buf);
        if (magic != GS_PROTO_MAGIC)
                return gs_error_set(err, -EPROTO,
                                    "bad frame magic 0x%08x (expected 0x%08x, a gpuslice local API "
                                    "frame)",
                                    magic, GS_PROTO_MAGIC);
        unsigned version = (unsigned)buf[4] << 8 | buf[5];
        if (version != GS_PROTO_VERSION)
                return gs_error_set(err, -EPROTONOSUPPORT,
                                    "protocol version %u is not supported (this side speaks %d)",
                                    version, GS_PROTO_VERSION);
        uint32_t length = get_be32(buf + 8);
        if (length > max_payload)
                return gs_error_set(err, -EMSGSIZE, "frame payload of %u bytes exceeds the limit of %u",
                                    length, max_payload);
        *ret = (struct gs_proto_header){ .type = (uint16_t)(buf[6] << 8 | buf[7]), .length = length };
        return 0;
}

static bool key_ok(const char *k, size_t n)
{
        if (n == 0 || n > GS_PROTO_KEY_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9') || k[i] == '_'))
                        return false;
        return true;
}

static bool value_ok(const char *v, size_t n)
{
        if (n > GS_PROTO_VALUE_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)v[i];
                if (c < 0x20 || c == 0x7f)
                        return false;
        }
        return true;
}

void gs_proto_msg_done(struct gs_proto_msg *m)
{
        if (!m)
                return;
        gs_free(m->text);
        gs_free(m->items);
        *m = (struct gs_proto_msg){ 0 };
}

static int kv_key_cmp(const void *a, const void *b)
{
        const struct gs_proto_kv *const *x = a, *const *y = b;
        return strcmp((*x)->key, (*y)->key);
}

/* A request's keys are single-valued (but a plan's `want`): a repeated key
 * is refused rather than one of its values silently taken. Sorted, so a
 * frame of GS_PROTO_MAX_ITEMS lines costs n log n. */
static int reject_repeats(const struct gs_proto_msg *m, struct gs_error **err)
{
        if (m->n_items < 2)
                return 0;
        const struct gs_proto_kv **by_key = gs_calloc(m->n_items, sizeof(*by_key));
        if (!by_key)
                return gs_error_set(err, -ENOMEM, "out of memory");
        for (size_t i = 0; i < m->n_items; i++)
                by_key[i] = &m->items[i];
        qsort(by_key, m->n_items, sizeof(*by_key), kv_key_cmp);
        int r = 0;
        for (size_t i = 1; i < m->n_items && r == 0; i++)
                if (strcmp(by_key[i]->key, by_key[i - 1]->key) == 0)
                        r = gs_error_set(err, -EINVAL,
                                         "key '%s' is repeated (a request gives each key once)",
                                         by_key[i]->key);
        gs_free(by_key);
        return r;
}

int gs_proto_msg_parse(uint16_t type, const char *payload, size_t len, struct gs_proto_msg *ret,
                       struct gs_error **err)
{
        struct gs_proto_msg m = { .type = type };
        if (len > GS_PROTO_MAX_REPLY)
                return gs_error_set(err, -EMSGSIZE, "payload of %zu bytes is too large", len);
        if (len && payload[len - 1] != '\n')
                return gs_error_set(err, -EINVAL, "payload does not end with a newline");
        size_t lines = 0;
        for (size_t i = 0; i < len; i++)
                lines += payload[i] == '\n';
        if (lines > GS_PROTO_MAX_ITEMS)
                return gs_error_set(err, -EINVAL, "payload has more than %d lines",
                                    GS_PROTO_MAX_ITEMS);
        m.text = gs_malloc(len + 1);
        m.items = gs_calloc(lines ? lines : 1, sizeof(*m.items));
        if (!m.text || !m.items) {
                gs_proto_msg_done(&m);
                return gs_error_set(err, -ENOMEM, "out of memory");
        }
        if (len)
                memcpy(m.text, payload, len);
        m.text[len] = '\0';
        char *line = m.text;
        for (size_t n = 0; n < lines; n++) {
                char *nl = memchr(line, '\n', len - (size_t)(line - m.text));
                char *eq = memchr(line, '=', (size_t)(nl - line));
                if (!eq || !key_ok(line, (size_t)(eq - line)) ||
                    !value_ok(eq + 1, (size_t)(nl - eq - 1))) {
                        gs_proto_msg_done(&m);
                        return gs_error_set(err, -EINVAL,
                                            "payload line %zu is not key=value (key [a-z0-9_]{1,%d}, "
                                            "value up to %d printable bytes)",
                                            n + 1, GS_PROTO_KEY_MAX, GS_PROTO_VALUE_MAX);
                }
                *eq = '\0';
                *nl = '\0';
                m.items[n] = (struct gs_proto_kv){ .key = line, .value = eq + 1 };
                line = nl + 1;
        }
        m.n_items = lines;
        if (type != GS_MSG_PLAN && gs_proto_request_known(type)) {
                int r = reject_repeats(&m, err);
                if (r < 0) {
                        gs_proto_msg_done(&m);
                        return r;
                }
        }
        *ret = m;
        return 0;
}

const char *gs_proto_msg_get(const struct gs_proto_msg *m, const char *key)
{
        for (size_t i = 0; i < m->n_items; i++)
                if (strcmp(m->items[i].key, key) == 0)
                        return m->items[i].value;
        return NULL;
}

void gs_proto_builder_init(struct gs_proto_builder *b, uint16_t type, uint32_t max_payload)
{
        *b = (struct gs_proto_builder){ .type = type, .max_payload = max_payload };
        b->cap = 1024;
        b->data = gs_malloc(b->cap);
        if (!b->data)
                b->error = -ENOMEM;
        b->len = GS_PROTO_HEADER_SIZE;
}

static int reserve(struct gs_proto_builder *b, size_t extra)
{
        if (b->len + extra - GS_PROTO_HEADER_SIZE > b->max_payload)
                return -EMSGSIZE;
        if (b->len + extra <= b->cap)
                return 0;
        size_t ncap = GS_MAX(b->cap * 2, b->len + extra);
        uint8_t *n = gs_realloc(b->data, ncap);
        if (!n)
                return -ENOMEM;
        b->data = n;
        b->cap = ncap;
        return 0;
}

void gs_proto_builder_add(struct gs_proto_builder *b, const char *key, const char *fmt, ...)
{
        if (b->error)
                return;
        size_t klen = strlen(key);
        if (!key_ok(key, klen)) {
                b->error = -EINVAL;
                return;
        }
        char value[GS_PROTO_VALUE_MAX + 1];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(value, sizeof(value), fmt, ap);
        va_end(ap);
        if (n < 0) {
                b->error = -EINVAL;
                return;
        }
        size_t vlen = GS_MIN((size_t)n, sizeof(value) - 1);
        for (size_t i = 0; i < vlen; i++)
                if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f)
                        value[i] = '?';
        int r = reserve(b, klen + vlen + 2);
        if (r < 0) {
                b->error = r;
                return;
        }
        memcpy(b->data + b->len, key, klen);
        b->data[b->len + klen] = '=';
        memcpy(b->data + b->len + klen + 1, value, vlen);
        b->data[b->len + klen + 1 + vlen] = '\n';
        b->len += klen + vlen + 2;
}

void gs_proto_builder_done(struct gs_proto_builder *b)
{
        if (!b)
                return;
        gs_free(b->data);
        b->data = NULL;
        b->len = b->cap = 0;
}

int gs_proto_builder_finish(struct gs_proto_builder *b, uint8_t **ret_frame, size_t *ret_len)
{
        if (b->error) {
                int r = b->error;
                gs_proto_builder_done(b);
                return r;
        }
        gs_proto_header_encode(b->data, b->type, (uint32_t)(b->len - GS_PROTO_HEADER_SIZE));
        *ret_frame = b->data;
        *ret_len = b->len;
        b->data = NULL;
        b->len = b->cap = 0;
        return 0;
}

int gs_proto_error_frame(int code, const char *message, uint8_t **ret_frame, size_t *ret_len)
{
        struct gs_proto_builder b;
        gs_proto_builder_init(&b, GS_MSG_ERROR, GS_PROTO_MAX_REPLY);
        gs_proto_builder_add(&b, "code", "%d", code);
        gs_proto_builder_add(&b, "message", "%s", message);
        return gs_proto_builder_finish(&b, ret_frame, ret_len);
}

int gs_local_sim_dir(unsigned euid, const char *xdg_runtime_dir, char *buf, size_t size)
{
        int n;
        if (xdg_runtime_dir && xdg_runtime_dir[0] == '/')
                n = snprintf(buf, size, "%s/gpuslice-sim", xdg_runtime_dir);
        else if (euid == 0)
                n = snprintf(buf, size, "/run/gpuslice-sim");
        else
                n = snprintf(buf, size, "/tmp/gpuslice-sim-%u", euid);
        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int gs_local_check_dir(const char *dir, unsigned euid, struct gs_error **err)
{
        struct stat st;
        if (stat(dir, &st) < 0) {
                int e = errno;
                if (e == ENOENT)
                        return -ENOENT;
                return gs_error_set(err, -e, "cannot check the daemon's directory %s: %s", dir,
                                    strerror(e));
        }
        return gs_dir_check_trusted("the daemon socket in", dir, &st, euid, true, err);
}
