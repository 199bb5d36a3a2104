/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu configuration from the environment, and its log file. */
#include "sim_state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void sim_log(const char *fmt, ...)
{
        const char *path = getenv("SIMGPU_LOG");
        if (!path || !*path)
                return;
        char buf[1024];
        int n = snprintf(buf, sizeof(buf), "simgpu[%d]: ", (int)getpid());
        if (n < 0)
                return;
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
        va_end(ap);
        if (m < 0)
                return;
        size_t len = strnlen(buf, sizeof(buf) - 2);
        buf[len++] = '\n';
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
                return;
        ssize_t w = write(fd, buf, len);
        (void)w;
        close(fd);
}

uint64_t sim_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int sim_parse_u64_prefix(const char *s, uint64_t *out, const char **end)
{
        if (!s || *s < '0' || *s > '9')
                return -EINVAL; /* must start with a digit: no sign, no blanks */
        uint64_t v = 0;
        for (; *s >= '0' && *s <= '9'; s++) {
                unsigned d = (unsigned)(*s - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -EINVAL;
                v = v * 10 + d;
        }
        *out = v;
        if (end)
                *end = s;
        return 0;
}

int sim_parse_size(const char *s, uint64_t *out)
{
        const char *end = NULL;
        uint64_t v;
        if (sim_parse_u64_prefix(s, &v, &end) < 0)
                return -EINVAL;
        unsigned shift = 0;
        if (*end) {
                static const char *const sfx[] = { "Ki", "Mi", "Gi", "Ti" };
                unsigned i;
                for (i = 0; i < 4; i++)
                        if (strcmp(end, sfx[i]) == 0)
                                break;
                if (i == 4)
                        return -EINVAL;
                shift = 10 * (i + 1);
        }
        if (shift && v > (~0ull >> shift))
                return -EINVAL;
        *out = (uint64_t)v << shift;
        return 0;
}

static int parse_u64_range(const char *var, uint64_t lo, uint64_t hi, uint64_t def,
                           bool size, uint64_t *out)
{
        const char *s = getenv(var);
        if (!s) {
                *out = def;
                return 0;
        }
        uint64_t v = 0;
        int r;
        if (size) {
                r = sim_parse_size(s, &v);
        } else {
                const char *end = NULL;
                r = sim_parse_u64_prefix(s, &v, &end) == 0 && !*end ? 0 : -EINVAL;
        }
        if (r < 0 || v < lo || v > hi) {
                sim_log("bad %s=\"%.64s\": expected %s in %llu..%llu", var, s,
                        size ? "a size (bytes or Ki/Mi/Gi/Ti)" : "an integer",
                        (unsigned long long)lo, (unsigned long long)hi);
                return SIM_E_CONFIG;
        }
        *out = v;
        return 0;
}

int sim_config_load(struct sim_config *cfg)
{
        memset(cfg, 0, sizeof(*cfg));
        uint64_t v;
        if (parse_u64_range("SIMGPU_DEVICES", 1, SIM_MAX_DEVICES, 1, false, &v))
                return SIM_E_CONFIG;
        cfg->ndev = (uint32_t)v;
        if (parse_u64_range("SIMGPU_SMS", 1, 1024, 132, false, &v))
                return SIM_E_CONFIG;
        cfg->sms = (uint32_t)v;
        if (parse_u64_range("SIMGPU_MEMORY", SIM_GRANULE, 1ull << 42, 16ull << 30, true, &v))
                return SIM_E_CONFIG;
        cfg->memory = v;
        if (parse_u64_range("SIMGPU_CTX_OVERHEAD", 0, 1ull << 34, 256ull << 20, true, &v))
                return SIM_E_CONFIG;
        if (v % SIM_GRANULE) {
                sim_log("bad SIMGPU_CTX_OVERHEAD=%llu: must be a multiple of 2 MiB",
                        (unsigned long long)v);
                return SIM_E_CONFIG;
        }
        cfg->ctx_overhead = v;
        if (parse_u64_range("SIMGPU_POOL_CHUNK", SIM_GRANULE, 1ull << 30, 32ull << 20, true, &v))
                return SIM_E_CONFIG;
        if (v % SIM_GRANULE) {
                sim_log("bad SIMGPU_POOL_CHUNK=%llu: must be a multiple of 2 MiB",
                        (unsigned long long)v);
                return SIM_E_CONFIG;
        }
        cfg->pool_chunk = v;
        if (parse_u64_range("SIMGPU_QUEUE_DEPTH", 1, SIM_QUEUE_MAX, 1024, false, &v))
                return SIM_E_CONFIG;
        cfg->queue_depth = (uint32_t)v;
        if (parse_u64_range("SIMGPU_TIMESLICE_US", 50, 1000000, 2000, false, &v))
                return SIM_E_CONFIG;
        cfg->timeslice_ns = v * 1000;

        const char *name = getenv("SIMGPU_NAME");
        if (!name)
                name = "NVIDIA H100 (simgpu)";
        size_t nl = strlen(name);
        if (nl == 0 || nl >= SIM_NAME_MAX) {
                sim_log("bad SIMGPU_NAME: must be 1..%d characters", SIM_NAME_MAX - 1);
                return SIM_E_CONFIG;
        }
        for (size_t i = 0; i < nl; i++) {
                if ((unsigned char)name[i] < 0x20 || name[i] == '"' || name[i] == '\\' ||
                    name[i] == 0x7f) {
                        sim_log("bad SIMGPU_NAME: control characters, quotes and backslashes are not allowed");
                        return SIM_E_CONFIG;
                }
        }
        memcpy(cfg->name, name, nl + 1);

        const char *dir = getenv("SIMGPU_DIR");
        int n;
        if (dir && *dir) {
                n = snprintf(cfg->dir, sizeof(cfg->dir), "%s", dir);
        } else {
                const char *xdg = getenv("XDG_RUNTIME_DIR");
                if (xdg && *xdg)
                        n = snprintf(cfg->dir, sizeof(cfg->dir), "%s/simgpu", xdg);
                else
                        n = snprintf(cfg->dir, sizeof(cfg->dir), "/tmp/simgpu-%u",
                                     (unsigned)getuid());
        }
        if (n < 0 || (size_t)n >= sizeof(cfg->dir) - 16) {
                sim_log("bad SIMGPU_DIR: path too long");
                return SIM_E_CONFIG;
        }
        return 0;
}

/* splitmix64: deterministic bits for the UUIDs. */
static uint64_t mix(uint64_t x)
{
        x += 0x9e3779b97f4a7c15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
}

void sim_make_uuid(unsigned i, uint8_t b[16], char str[SIM_UUID_MAX])
{
        uint64_t h1 = mix(0x73696d677075ull + i), h2 = mix(h1 ^ 0x5555);
        for (int k = 0; k < 8; k++) {
                b[k] = (uint8_t)(h1 >> (8 * k));
                b[8 + k] = (uint8_t)(h2 >> (8 * k));
        }
        b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 style */
        b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
        snprintf(str, SIM_UUID_MAX,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                 b[12], b[13], b[14], b[15]);
}
