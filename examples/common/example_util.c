/* SPDX-License-Identifier: Apache-2.0 */
/* Parsing and formatting helpers of the example programs. */
#include "example_util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Parse the leading digits of s into *ret; *end points past them. */
static int parse_digits(const char *s, uint64_t *ret, const char **end)
{
        uint64_t v = 0;
        const char *p = s;

        if (*p < '0' || *p > '9')
                return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
                unsigned d = (unsigned)(*p - '0');

                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *ret = v;
        *end = p;
        return 0;
}

int ex_parse_u64(const char *s, uint64_t *ret)
{
        uint64_t v;
        const char *end;
        int r = parse_digits(s, &v, &end);

        if (r < 0)
                return r;
        if (*end)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int scale(uint64_t v, uint64_t mult, uint64_t *ret)
{
        if (mult && v > UINT64_MAX / mult)
                return -ERANGE;
        *ret = v * mult;
        return 0;
}

struct unit {
        const char *suffix;
        uint64_t mult;
};

/* Digits followed by exactly one of the n suffixes in units, scaled. */
static int parse_with_unit(const char *s, const struct unit *units, size_t n, uint64_t *ret)
{
        uint64_t v;
        const char *end;
        int r = parse_digits(s, &v, &end);

        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if (strcmp(end, units[i].suffix) == 0)
                        return scale(v, units[i].mult, ret);
        return -EINVAL;
}

int ex_parse_bytes(const char *s, uint64_t *ret)
{
        static const struct unit units[] = {
                { "", 1 }, { "Ki", 1ull << 10 }, { "Mi", 1ull << 20 }, { "Gi", 1ull << 30 },
                { "Ti", 1ull << 40 }, { "k", 1000ull }, { "M", 1000000ull },
                { "G", 1000000000ull }, { "T", 1000000000000ull },
        };

        return parse_with_unit(s, units, sizeof(units) / sizeof(units[0]), ret);
}

int ex_parse_duration_ns(const char *s, uint64_t *ret)
{
        static const struct unit units[] = {
                { "", 1 }, { "ns", 1 }, { "us", 1000ull }, { "ms", 1000000ull },
                { "s", 1000000000ull },
        };

        return parse_with_unit(s, units, sizeof(units) / sizeof(units[0]), ret);
}

void ex_format_bytes(uint64_t bytes, char *buf, size_t size)
{
        static const char *const sfx[] = { "Ti", "Gi", "Mi", "Ki" };

        for (unsigned i = 0; i < 4; i++) {
                uint64_t unit = 1ull << (10 * (4 - i));

                if (bytes >= unit && bytes % unit == 0) {
                        snprintf(buf, size, "%" PRIu64 "%s", bytes / unit, sfx[i]);
                        return;
                }
        }
        snprintf(buf, size, "%" PRIu64, bytes);
}

void ex_format_duration(uint64_t ns, char *buf, size_t size)
{
        if (ns >= 1000000000ull && ns % 1000000ull == 0)
                snprintf(buf, size, "%.3gs", (double)ns / 1e9);
        else if (ns >= 1000000ull)
                snprintf(buf, size, "%.4gms", (double)ns / 1e6);
        else if (ns >= 1000ull)
                snprintf(buf, size, "%.4gus", (double)ns / 1e3);
        else
                snprintf(buf, size, "%" PRIu64 "ns", ns);
}
