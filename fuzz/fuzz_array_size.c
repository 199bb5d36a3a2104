/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the array size function (src/core/array_size.c), which
 * the shim runs on a caller's descriptor before it charges anything. The
 * input is the descriptor: width, height, depth (8 bytes each, little
 * endian), channels, element size and level count (4 bytes each); missing
 * bytes are 0. Besides crashes and sanitizer reports it checks the
 * contract: a descriptor is refused exactly when a driver refuses it; an
 * accepted one sums at most GS_ARRAY_MAX_LEVELS levels, whatever level
 * count was asked for (the shim's loop is bounded by the descriptor, not
 * by the caller's number); the sum equals a recomputation in 128-bit
 * arithmetic (no overflow), and is at least the first level. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "array_size.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t take(const uint8_t **p, size_t *left, size_t n)
{
        uint64_t v = 0;
        for (size_t i = 0; i < n; i++) {
                uint8_t b = 0;
                if (*left) {
                        b = **p;
                        (*p)++;
                        (*left)--;
                }
                v |= (uint64_t)b << (8 * i);
        }
        return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct gs_array_desc d;
        d.width = take(&data, &size, 8);
        d.height = take(&data, &size, 8);
        d.depth = take(&data, &size, 8);
        d.channels = (uint32_t)take(&data, &size, 4);
        d.elem_bytes = (uint32_t)take(&data, &size, 4);
        uint32_t levels = (uint32_t)take(&data, &size, 4);

        uint64_t bytes = 0;
        uint32_t summed = 0;
        int r = gs_array_bytes(&d, levels, &bytes, &summed);
        int invalid = d.width == 0 || (d.channels != 1 && d.channels != 2 && d.channels != 4) ||
                      d.width > GS_ARRAY_MAX_WIDTH || d.height > GS_ARRAY_MAX_HEIGHT ||
                      d.depth > GS_ARRAY_MAX_DEPTH || d.elem_bytes > 16;
        if (invalid) {
                if (r != -EINVAL)
                        abort();
                return 0;
        }
        if (r != 0 || summed < 1 || summed > GS_ARRAY_MAX_LEVELS)
                abort();
        if (levels >= 1 && summed > levels)
                abort();
        unsigned __int128 w = d.width, h = d.height ? d.height : 1, z = d.depth ? d.depth : 1;
        unsigned __int128 elem = (unsigned __int128)(d.elem_bytes ? d.elem_bytes : 1) * d.channels;
        unsigned __int128 sum = 0, first = w * h * z * elem;
        for (uint32_t l = 0; l < summed; l++) {
                sum += w * h * z * elem;
                w = w > 1 ? w / 2 : 1;
                h = h > 1 ? h / 2 : 1;
                z = z > 1 ? z / 2 : 1;
        }
        /* The level count is clamped where every dimension reached 1. */
        if (levels > summed && !(w == 1 && h == 1 && z == 1))
                abort();
        if (sum != bytes || bytes < first || sum >> 63)
                abort();
        return 0;
}
