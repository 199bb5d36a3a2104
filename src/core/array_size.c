/* SPDX-License-Identifier: Apache-2.0 */
/* Sizes of CUDA arrays; see array_size.h. */
#include "array_size.h"

#include <errno.h>
#include <stddef.h>

static uint64_t at_least_1(uint64_t v)
{
        return v ? v : 1;
}

int gs_array_bytes(const struct gs_array_desc *d, uint32_t levels, uint64_t *ret_bytes,
                   uint32_t *ret_levels)
{
        if (d->width == 0 || (d->channels != 1 && d->channels != 2 && d->channels != 4) ||
            d->width > GS_ARRAY_MAX_WIDTH || d->height > GS_ARRAY_MAX_HEIGHT ||
            d->depth > GS_ARRAY_MAX_DEPTH || d->elem_bytes > 16)
                return -EINVAL;
        uint64_t w = d->width, h = at_least_1(d->height), z = at_least_1(d->depth);
        uint64_t m = w > h ? w : h;
        m = m > z ? m : z;
        uint32_t most = 1;
        while (m >>= 1)
                most++;
        if (levels < 1)
                levels = 1;
        if (levels > most)
                levels = most;
        uint64_t elem = (uint64_t)at_least_1(d->elem_bytes) * d->channels, sum = 0;
        for (uint32_t l = 0; l < levels; l++) {
                /* <= 2^20 * 2^20 * 2^16 * 64 = 2^62 at level 0, each level at
                 * most half the one before: the sum stays below 2^63. */
                sum += w * h * z * elem;
                w = w > 1 ? w / 2 : 1;
                h = h > 1 ? h / 2 : 1;
                z = z > 1 ? z / 2 : 1;
        }
        *ret_bytes = sum;
        if (ret_levels)
                *ret_levels = levels;
        return 0;
}
