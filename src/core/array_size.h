/* SPDX-License-Identifier: Apache-2.0 */
/* What a CUDA array or mipmapped array occupies, from its descriptor, and
 * which descriptors a driver refuses (pure: no CUDA; the shim maps the
 * descriptor). The shim charges this before it calls the driver, so it
 * must never loop on what the caller passed, nor overflow: a descriptor is
 * checked first, and the level count is clamped as the driver clamps it
 * (cuMipmappedArrayCreate: to [1, 1 + floor(log2(max(w, h, d)))]). */
#ifndef GS_ARRAY_SIZE_H
#define GS_ARRAY_SIZE_H

#include <stdint.h>

/* The largest dimensions any driver accepts (a real GPU's limits are
 * smaller; simgpu refuses beyond these): larger is CUDA_ERROR_INVALID_VALUE. */
#define GS_ARRAY_MAX_WIDTH (1ull << 20)
#define GS_ARRAY_MAX_HEIGHT (1ull << 20)
#define GS_ARRAY_MAX_DEPTH (1ull << 16)
/* The most levels any accepted descriptor has: 1 + log2(GS_ARRAY_MAX_WIDTH). */
#define GS_ARRAY_MAX_LEVELS 21u

struct gs_array_desc {
        uint64_t width;      /* elements, at least 1 */
        uint64_t height;     /* 0: a 1D array */
        uint64_t depth;      /* 0: a 1D or 2D array (layers of a layered array) */
        uint32_t channels;   /* 1, 2 or 4 */
        uint32_t elem_bytes; /* bytes per channel element, at most 16 (0: counted as 1) */
};

/* Checks d as a driver does: width 0, a channel count other than 1, 2 or
 * 4, or a dimension beyond GS_ARRAY_MAX_* is -EINVAL (and an element
 * size above 16, the caller's mistake). Otherwise the bytes
 * of `levels` levels (clamped to [1, 1 + floor(log2(max dimension))]),
 * each dimension halved per level down to 1, not rounded, into *ret_bytes,
 * and the levels counted into *ret_levels (NULL: not wanted): 0. At most
 * GS_ARRAY_MAX_LEVELS iterations whatever `levels` is; no overflow (the
 * largest accepted array is below 2^63 bytes). */
int gs_array_bytes(const struct gs_array_desc *d, uint32_t levels, uint64_t *ret_bytes,
                   uint32_t *ret_levels);

#endif /* GS_ARRAY_SIZE_H */
