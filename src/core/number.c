/* SPDX-License-Identifier: Apache-2.0 */
/* Decimal number parsing. See number.h. */
#include "number.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

int gs_u64_parse(const char *s, size_t len, uint64_t max, uint64_t *ret)
{
        if (!s || len == 0 || len > 20)
                return -EINVAL;
        uint64_t x = 0;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                unsigned digit = (unsigned)(s[i] - '0');
                if (x > (UINT64_MAX - digit) / 10)
                        return -EINVAL;
                x = x * 10 + digit;
        }
        if (x > max)
                return -EINVAL;
        *ret = x;
        return 0;
}

int gs_u64_parse_str(const char *s, uint64_t max, uint64_t *ret)
{
        return s ? gs_u64_parse(s, strlen(s), max, ret) : -EINVAL;
}

int gs_i64_parse_str(const char *s, int64_t min, int64_t max, int64_t *ret)
{
        if (!s)
                return -EINVAL;
        bool neg = s[0] == '-';
        uint64_t mag;
        /* |INT64_MIN| = INT64_MAX + 1 */
        if (gs_u64_parse_str(s + neg, (uint64_t)INT64_MAX + (neg ? 1u : 0u), &mag) < 0)
                return -EINVAL;
        int64_t v = neg ? (mag == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)mag)
                        : (int64_t)mag;
        if (v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

int gs_u64_parse_prefix(const char *s, uint64_t max, uint64_t *ret, const char **ret_end)
{
        if (!s)
                return -EINVAL;
        size_t n = strspn(s, "0123456789");
        uint64_t v;
        if (gs_u64_parse(s, n, max, &v) < 0)
                return -EINVAL;
        *ret = v;
        if (ret_end)
                *ret_end = s + n;
        return 0;
}

int gs_decimal_milli_parse_str(const char *s, uint64_t max_milli, uint64_t *ret)
{
        if (!s)
                return -EINVAL;
        const char *dot = strchr(s, '.');
        size_t whole_len = dot ? (size_t)(dot - s) : strlen(s);
        uint64_t whole, frac = 0;
        if (gs_u64_parse(s, whole_len, UINT64_MAX / 1000, &whole) < 0)
                return -EINVAL;
        if (dot) {
                size_t n = strlen(dot + 1);
                if (n == 0 || n > 3 || gs_u64_parse(dot + 1, n, 999, &frac) < 0)
                        return -EINVAL;
                for (size_t i = n; i < 3; i++)
                        frac *= 10;
        }
        uint64_t v = whole * 1000 + frac;
        if (v > max_milli)
                return -EINVAL;
        *ret = v;
        return 0;
}
