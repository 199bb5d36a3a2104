/* SPDX-License-Identifier: Apache-2.0 */
/* The one parser of decimal numbers in gpuslice: every number that comes
 * from a file, a request, a flag or /proc goes through it. Strict: plain
 * decimal digits only (no sign, no space, no base prefix; at most 20 of
 * them), at most `max`; the text need not be NUL-terminated. */
#ifndef GS_NUMBER_H
#define GS_NUMBER_H

#include <stddef.h>
#include <stdint.h>

/* Parse the `len` bytes at s. 0 and *ret, or -EINVAL (empty, not a plain
 * decimal, over max); *ret untouched on failure. */
int gs_u64_parse(const char *s, size_t len, uint64_t max, uint64_t *ret);

/* gs_u64_parse over a NUL-terminated string. */
int gs_u64_parse_str(const char *s, uint64_t max, uint64_t *ret);

/* A signed decimal ("-" then digits, or digits) within [min, max], over a
 * NUL-terminated string. 0 and *ret, or -EINVAL. */
int gs_i64_parse_str(const char *s, int64_t min, int64_t max, int64_t *ret);

/* The decimal number at the start of s (digits up to the first non-digit)
 * with the rest returned in *ret_end, for fields inside a larger text
 * (/proc files). At least one digit; at most max. 0 or -EINVAL. */
int gs_u64_parse_prefix(const char *s, uint64_t max, uint64_t *ret, const char **ret_end);

/* A plain decimal with at most three decimals ("2", "0.5", "1.25") in
 * thousandths (2000, 500, 1250), at most max_milli. 0 or -EINVAL. */
int gs_decimal_milli_parse_str(const char *s, uint64_t max_milli, uint64_t *ret);

#endif /* GS_NUMBER_H */
