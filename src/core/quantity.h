/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes-style quantities for GPU shares, CPU and memory
 * (design.md, "Quantities"). */
#ifndef GS_QUANTITY_H
#define GS_QUANTITY_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define GS_MILLI_PER_GPU 1000u
#define GS_MEM_GRANULARITY (2ull << 20) /* the driver's 2 MiB allocation granularity */
#define GS_QUANTITY_MAX_GPUS 64u          /* most whole GPUs of a pod's request (extender) */
/* Most whole GPUs one slice holds, and so one API's `gpu` or `--gpu`: the
 * node's and the local protocol's bound (GS_SLICE_MAX_GPUS, gpu_milli up
 * to 8000). */
#define GS_QUANTITY_MAX_SLICE_GPUS 8u
#define GS_CPU_MAX_MILLI 100000000u       /* 100000 cores: a sanity bound */
#define GS_QUANTITY_MAX_LEN 128           /* longer quantity strings are rejected */

/* Parse a GPU quantity (`300m`, `0.3`, `1`, `2`, `1000m`), up to 8 GPUs. On success
 * *ret_milli is 1..999 (a slice) or a whole multiple of 1000 (exclusive
 * GPUs). Anything else fails with -EINVAL and an error naming `field`, the
 * value and what is accepted. */
int gs_gpu_quantity_parse(const char *field, const char *value, uint32_t *ret_milli,
                          struct gs_error **err);

/* Parse a memory quantity (`6Gi`, `512Mi`, `2G`, `1048576`, suffixes
 * Ki Mi Gi Ti Pi Ei and k M G T P E, decimal fractions such as `1.5Gi` when
 * they land on a whole byte). *ret_bytes > 0 on success. */
int gs_memory_quantity_parse(const char *field, const char *value, uint64_t *ret_bytes,
                             struct gs_error **err);

/* The least memory a slice's cap (or a pod's memory) may be: a plain number
 * means bytes, and `gpu_memory: 3000` (MiB to HAMi users) would otherwise
 * pass the fit check and fail at the first CUDA context. */
#define GS_MEMORY_MIN (64ull << 20)

/* Refuse `bytes` below GS_MEMORY_MIN. `value` is the text the user wrote
 * (NULL when the bytes came as a number, e.g. over the local API); it is
 * only quoted in the message. Returns 0, or -EINVAL with an error such as
 * `gpu_memory: 3000 is 3000 bytes, below the 64Mi minimum; did you mean
 * 3000Mi?` (the suggestion when the value is a plain number whose Mi would
 * be allowed). Pure; thread-safe. */
int gs_memory_minimum_check(const char *field, const char *value, uint64_t bytes,
                            struct gs_error **err);

/* gs_memory_quantity_parse, then gs_memory_minimum_check: for every memory
 * a user gives a slice or a pod. *ret_bytes is written only on success. */
int gs_memory_size_parse(const char *field, const char *value, uint64_t *ret_bytes,
                         struct gs_error **err);

/* Parse a CPU quantity (`500m`, `0.5`, `2`) into millicores (> 0). */
int gs_cpu_quantity_parse(const char *field, const char *value, uint32_t *ret_milli,
                          struct gs_error **err);

/* Write the canonical form of a GPU share (`300m`, `1`, `2`) into buf.
 * Returns the length, or -ENOSPC if it does not fit. */
int gs_gpu_quantity_format(uint32_t milli, char *buf, size_t size);

/* Write a memory size in the largest binary unit that divides it exactly
 * (`6Gi`, `1536Mi`, `1000`). Returns the length, or -ENOSPC. */
int gs_memory_quantity_format(uint64_t bytes, char *buf, size_t size);

/* The default memory cap of a slice: milli/1000 of gpu_memory, rounded down
 * to the 2 MiB granularity. For milli >= 1000 returns gpu_memory. */
uint64_t gs_default_memory_cap(uint32_t milli, uint64_t gpu_memory);

/* Write a CPU quantity in millicores as `500m` or, when whole, `2`.
 * Returns the length, or -ENOSPC. */
int gs_cpu_quantity_format(uint32_t milli, char *buf, size_t size);

/* Write `s` into buf for an error message: printable ASCII kept, `"` and
 * `\` and every other byte escaped (\xNN), cut with "..." after about 48
 * characters. Always NUL-terminates when size > 0; returns buf. Keeps hostile
 * input (terminal escapes, megabytes of digits) out of messages. */
const char *gs_quote(const char *s, char *buf, size_t size);
#define GS_QUOTE_MAX 208 /* a buffer this large never truncates early */

#endif /* GS_QUANTITY_H */
