/* SPDX-License-Identifier: Apache-2.0 */
/* Small parsing and formatting helpers shared by the example programs
 * (gs-serve, gs-loadgen). The examples stand alone: they do not link the
 * gpuslice core library, as a user's own server would not. */
#ifndef GS_EXAMPLE_UTIL_H
#define GS_EXAMPLE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define GS_EX_MIN(a, b) ((a) < (b) ? (a) : (b))

/* Parse a decimal unsigned integer; the whole string must be digits and fit.
 * Returns 0, or -EINVAL / -ERANGE with *ret untouched. */
int ex_parse_u64(const char *s, uint64_t *ret);

/* Parse a size: bytes, or a whole number with Ki Mi Gi Ti (1024-based) or
 * k M G T (1000-based). Returns 0 or -EINVAL / -ERANGE. */
int ex_parse_bytes(const char *s, uint64_t *ret);

/* Parse a duration into nanoseconds: a whole number with ns, us, ms or s
 * (no suffix: nanoseconds). Returns 0 or -EINVAL / -ERANGE. */
int ex_parse_duration_ns(const char *s, uint64_t *ret);

/* Write a size in the largest binary unit that divides it (1Gi, 1536Mi). */
void ex_format_bytes(uint64_t bytes, char *buf, size_t size);

/* Write a duration as 5ms, 500us, 1.5ms, 250ns. */
void ex_format_duration(uint64_t ns, char *buf, size_t size);

#endif /* GS_EXAMPLE_UTIL_H */
