/* SPDX-License-Identifier: Apache-2.0 */
/* The slice config file: a strict `key = value` parser and its writer.
 * Everything in the file comes from outside the process, so every field is
 * bounded and checked; anything unexpected rejects the whole file. */
#include "slice_conf_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "alloc.h"
#include "compute_policy.h"
#include "macro.h"
#include "number.h"

enum conf_key {
        KEY_VERSION,
        KEY_SLICE,
        KEY_GPU_UUID,
        KEY_MEMORY_LIMIT,
        KEY_COMPUTE_MILLI,
        KEY_POLICY,
        KEY_CONTEXT_OVERHEAD,
        KEY_SLICE_DIR,
        KEY_DAEMON_SOCKET,
        KEY_LEASE_PAGE,
        KEY_COUNT,
};

static const struct {
        const char *name;
        bool required;
} conf_keys[KEY_COUNT] = {
        [KEY_VERSION] = { "version", true },
        [KEY_SLICE] = { "slice", true },
        [KEY_GPU_UUID] = { "gpu_uuid", true },
        [KEY_MEMORY_LIMIT] = { "memory_limit", true },
        [KEY_COMPUTE_MILLI] = { "compute_milli", true },
        [KEY_POLICY] = { "policy", false },
        [KEY_CONTEXT_OVERHEAD] = { "context_overhead", false },
        [KEY_SLICE_DIR] = { "slice_dir", true },
        [KEY_DAEMON_SOCKET] = { "daemon_socket", false },
        [KEY_LEASE_PAGE] = { "lease_page", false },
};

/* Values are shown in messages; keep them short and printable. */
#define SHOWN_MAX 64

static void show_value(const char *v, size_t n, char out[SHOWN_MAX + 4])
{
        size_t k = 0;
        for (size_t i = 0; i < n && k < SHOWN_MAX; i++) {
                unsigned char c = (unsigned char)v[i];
                out[k++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
        }
        if (n > SHOWN_MAX) {
                memcpy(out + k, "...", 3);
                k += 3;
        }
        out[k] = '\0';
}

static bool is_space(char c)
{
        return c == ' ' || c == '\t' || c == '\r';
}

static bool parse_u64(const char *v, size_t n, uint64_t *ret)
{
        return gs_u64_parse(v, n, UINT64_MAX, ret) == 0;
}

static bool valid_slice_id(const char *v, size_t n)
{
        if (n == 0 || n > GS_SLICE_ID_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = v[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-'))
                        return false;
        }
        return true;
}

static bool valid_uuid(const char *v, size_t n, size_t max)
{
        if (n == 0 || n >= max)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = v[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == ':' || c == '.'))
                        return false;
        }
        return true;
}

static bool valid_abs_path(const char *v, size_t n, size_t max)
{
        if (n == 0 || n >= max || v[0] != '/')
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
                        return false;
        return true;
}

static int bad_value(struct gs_error **err, unsigned line, const char *key, const char *v,
                     size_t n, const char *accepted)
{
        char shown[SHOWN_MAX + 4];
        show_value(v, n, shown);
        return gs_error_set(err, -EINVAL, "slice config line %u: key '%s': value '%s' is invalid (%s)",
                            line, key, shown, accepted);
}

static int set_key(struct gs_slice_conf *c, enum conf_key k, unsigned line, const char *v, size_t n,
                   struct gs_error **err)
{
        const char *name = conf_keys[k].name;
        uint64_t x = 0;

        switch (k) {
        case KEY_VERSION:
                if (!parse_u64(v, n, &x) || x != GS_SLICE_CONF_VERSION)
                        return bad_value(err, line, name, v, n, "accepted: 1");
                c->version = (unsigned)x;
                return 0;
        case KEY_SLICE:
                if (!valid_slice_id(v, n))
                        return bad_value(err, line, name, v, n,
                                         "accepted: 1 to 63 characters of A-Z a-z 0-9 . _ -");
                memcpy(c->slice, v, n);
                c->slice[n] = '\0';
                return 0;
        case KEY_GPU_UUID:
                if (!valid_uuid(v, n, sizeof(c->gpu_uuid)))
                        return bad_value(err, line, name, v, n,
                                         "accepted: a GPU UUID such as GPU-9d69dfb7-410b-4dd5-a4b3-0772bcaafb82");
                memcpy(c->gpu_uuid, v, n);
                c->gpu_uuid[n] = '\0';
                return 0;
        case KEY_MEMORY_LIMIT:
                if (!parse_u64(v, n, &x) || x == 0)
                        return bad_value(err, line, name, v, n, "accepted: a decimal number of bytes > 0");
                c->memory_limit = x;
                return 0;
        case KEY_COMPUTE_MILLI:
                if (!parse_u64(v, n, &x) || x < 1 || x > 1000)
                        return bad_value(err, line, name, v, n, "accepted: 1 to 1000");
                c->compute_milli = (uint32_t)x;
                return 0;
        case KEY_POLICY:
                if (gs_compute_policy_parse(v, n, &c->policy) < 0)
                        return bad_value(err, line, name, v, n,
                                         "accepted: " GS_COMPUTE_POLICY_NAMES);
                return 0;
        case KEY_CONTEXT_OVERHEAD:
                if (!parse_u64(v, n, &x))
                        return bad_value(err, line, name, v, n, "accepted: a decimal number of bytes");
                c->context_overhead = x;
                return 0;
        case KEY_SLICE_DIR:
                if (!valid_abs_path(v, n, sizeof(c->slice_dir)))
                        return bad_value(err, line, name, v, n, "accepted: an absolute path");
                memcpy(c->slice_dir, v, n);
                c->slice_dir[n] = '\0';
                return 0;
        case KEY_DAEMON_SOCKET:
                if (!valid_abs_path(v, n, sizeof(((struct sockaddr_un *)NULL)->sun_path)))
                        return bad_value(err, line, name, v, n,
                                         "accepted: an absolute path shorter than 108 bytes");
                memcpy(c->daemon_socket, v, n);
                c->daemon_socket[n] = '\0';
                return 0;
        case KEY_LEASE_PAGE:
                if (!valid_abs_path(v, n, sizeof(c->lease_page)) || v[n - 1] == '/')
                        return bad_value(err, line, name, v, n,
                                         "accepted: the absolute path of a file");
                memcpy(c->lease_page, v, n);
                c->lease_page[n] = '\0';
                return 0;
        case KEY_COUNT:
                break;
        }
        return -EINVAL;
}

int gs_slice_conf_parse(const char *text, size_t len, struct gs_slice_conf *ret,
                        struct gs_error **err)
{
        if (len > GS_SLICE_CONF_MAX_BYTES)
                return gs_error_set(err, -E2BIG, "slice config: %zu bytes, at most %d accepted", len,
                                    GS_SLICE_CONF_MAX_BYTES);

        /* Large (two path buffers): keep it off the stack of a host thread. */
        _cleanup_free_ struct gs_slice_conf *cp = gs_calloc(1, sizeof(*cp));
        if (!cp)
                return gs_error_set(err, -ENOMEM, "slice config: out of memory");
        cp->policy = GS_POLICY_SHARE;
        bool seen[KEY_COUNT] = { false };
        unsigned line = 0;
        size_t pos = 0;

        while (pos < len) {
                line++;
                size_t end = pos;
                while (end < len && text[end] != '\n')
                        end++;
                size_t b = pos, e = end;
                pos = end < len ? end + 1 : end;

                for (size_t i = b; i < e; i++)
                        if (text[i] == '\0')
                                return gs_error_set(err, -EINVAL, "slice config line %u: NUL byte", line);
                while (b < e && is_space(text[b]))
                        b++;
                while (e > b && is_space(text[e - 1]))
                        e--;
                if (b == e || text[b] == '#')
                        continue;

                size_t eq = b;
                while (eq < e && text[eq] != '=')
                        eq++;
                if (eq == e) {
                        char shown[SHOWN_MAX + 4];
                        show_value(text + b, e - b, shown);
                        return gs_error_set(err, -EINVAL,
                                            "slice config line %u: '%s' is not of the form key = value",
                                            line, shown);
                }
                size_t kb = b, ke = eq, vb = eq + 1, ve = e;
                while (ke > kb && is_space(text[ke - 1]))
                        ke--;
                while (vb < ve && is_space(text[vb]))
                        vb++;

                enum conf_key k = KEY_COUNT;
                for (int i = 0; i < KEY_COUNT; i++) {
                        size_t kl = strlen(conf_keys[i].name);
                        if (ke - kb == kl && memcmp(text + kb, conf_keys[i].name, kl) == 0) {
                                k = (enum conf_key)i;
                                break;
                        }
                }
                if (k == KEY_COUNT) {
                        char shown[SHOWN_MAX + 4];
                        show_value(text + kb, ke - kb, shown);
                        return gs_error_set(err, -EINVAL,
                                            "slice config line %u: unknown key '%s' (accepted: version, "
                                            "slice, gpu_uuid, memory_limit, compute_milli, policy, "
                                            "context_overhead, slice_dir, daemon_socket, lease_page)",
                                            line, shown);
                }
                if (seen[k])
                        return gs_error_set(err, -EINVAL, "slice config line %u: key '%s' given twice", line,
                                            conf_keys[k].name);
                seen[k] = true;
                int r = set_key(cp, k, line, text + vb, ve - vb, err);
                if (r < 0)
                        return r;
        }

        for (int i = 0; i < KEY_COUNT; i++)
                if (conf_keys[i].required && !seen[i])
                        return gs_error_set(err, -EINVAL, "slice config: required key '%s' is missing",
                                            conf_keys[i].name);
        if (cp->context_overhead >= cp->memory_limit)
                return gs_error_set(err, -EINVAL,
                                    "slice config: context_overhead %llu must be below memory_limit %llu",
                                    (unsigned long long)cp->context_overhead,
                                    (unsigned long long)cp->memory_limit);
        *ret = *cp;
        return 0;
}

int gs_slice_conf_load(const char *path, struct gs_slice_conf *ret, struct gs_error **err)
{
        /* O_NONBLOCK: a FIFO (or device) named here must not hang the host
         * process in open(); it is refused below as not a regular file. On a
         * regular file the flag changes nothing. */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                int r = -errno;
                if (r == -ENOENT)
                        return r;
                return gs_error_set(err, r, "slice config %s: cannot open: %s", path, strerror(-r));
        }
        struct stat st;
        if (fstat(fd, &st) < 0)
                return gs_error_set(err, -errno, "slice config %s: cannot stat", path);
        if (!S_ISREG(st.st_mode))
                return gs_error_set(err, -EINVAL, "slice config %s: not a regular file", path);
        if (st.st_size > GS_SLICE_CONF_MAX_BYTES)
                return gs_error_set(err, -E2BIG, "slice config %s: %lld bytes, at most %d accepted", path,
                                    (long long)st.st_size, GS_SLICE_CONF_MAX_BYTES);

        const size_t cap = GS_SLICE_CONF_MAX_BYTES + 1;
        _cleanup_free_ char *buf = gs_malloc(cap);
        if (!buf)
                return gs_error_set(err, -ENOMEM, "slice config %s: out of memory", path);
        size_t n = 0;
        for (;;) {
                ssize_t got = read(fd, buf + n, cap - n);
                if (got < 0) {
                        if (errno == EINTR)
                                continue;
                        return gs_error_set(err, -errno, "slice config %s: read failed", path);
                }
                if (got == 0)
                        break;
                n += (size_t)got;
                if (n == cap)
                        return gs_error_set(err, -E2BIG, "slice config %s: more than %d bytes", path,
                                            GS_SLICE_CONF_MAX_BYTES);
        }
        int r = gs_slice_conf_parse(buf, n, ret, err);
        if (r < 0)
                gs_error_wrap(err, "%s", path);
        return r;
}

int gs_slice_conf_format(const struct gs_slice_conf *conf, char *buf, size_t size,
                         struct gs_error **err)
{
        int n = snprintf(buf, size,
                         "# gpuslice slice config\n"
                         "version = %u\n"
                         "slice = %s\n"
                         "gpu_uuid = %s\n"
                         "memory_limit = %llu\n"
                         "compute_milli = %u\n"
                         "policy = %s\n"
                         "context_overhead = %llu\n"
                         "slice_dir = %s\n"
                         "%s%s%s"
                         "%s%s%s",
                         conf->version, conf->slice, conf->gpu_uuid,
                         (unsigned long long)conf->memory_limit, conf->compute_milli,
                         gs_compute_policy_name(conf->policy),
                         (unsigned long long)conf->context_overhead, conf->slice_dir,
                         conf->daemon_socket[0] ? "daemon_socket = " : "", conf->daemon_socket,
                         conf->daemon_socket[0] ? "\n" : "",
                         conf->lease_page[0] ? "lease_page = " : "", conf->lease_page,
                         conf->lease_page[0] ? "\n" : "");
        if (n < 0)
                return gs_error_set(err, -EINVAL, "slice config: cannot format");
        if ((size_t)n >= size)
                return -ENOSPC;
        /* What we write must read back. */
        struct gs_slice_conf check;
        int r = gs_slice_conf_parse(buf, (size_t)n, &check, err);
        if (r < 0) {
                buf[0] = '\0';
                return gs_error_wrap(err, "slice config to write");
        }
        return n;
}
