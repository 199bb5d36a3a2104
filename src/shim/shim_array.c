/* SPDX-License-Identifier: Apache-2.0 */
/* Arrays and mipmapped arrays: charged by the size the shim computes from
 * the descriptor (src/core/array_size.c, the same formula as simgpu:
 * width x height x depth x channels x element size, each dimension at
 * least 1, rounded up to 2 MiB; a mipmapped array is the sum of its
 * levels, each dimension halved per level, layers included). On a real GPU
 * the driver's layout (tiling, alignment) may differ: the shim's figure is
 * an estimate. A descriptor the driver refuses (width 0, a channel count
 * other than 1, 2 or 4, a dimension beyond any GPU's) is refused here with
 * the driver's CUDA_ERROR_INVALID_VALUE before anything is charged, and a
 * level count is clamped as the driver clamps it: no caller's number sets
 * how long the shim computes. */
#include "array_size.h"
#include "shim.h"

static uint32_t format_bytes(CUarray_format f)
{
        switch (f) {
        case CU_AD_FORMAT_UNSIGNED_INT8:
        case CU_AD_FORMAT_SIGNED_INT8:
                return 1;
        case CU_AD_FORMAT_UNSIGNED_INT16:
        case CU_AD_FORMAT_SIGNED_INT16:
        case CU_AD_FORMAT_HALF:
                return 2;
        case CU_AD_FORMAT_UNSIGNED_INT32:
        case CU_AD_FORMAT_SIGNED_INT32:
        case CU_AD_FORMAT_FLOAT:
                return 4;
        default:
                return 1;
        }
}

/* The charge for `levels` levels of d into *ret (rounded up to 2 MiB):
 * CUDA_SUCCESS, or CUDA_ERROR_INVALID_VALUE for what the driver refuses. */
static CUresult array_charge(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels, uint64_t *ret)
{
        struct gs_array_desc a = { .width = d->Width, .height = d->Height, .depth = d->Depth,
                                   .channels = d->NumChannels, .elem_bytes = format_bytes(d->Format) };
        uint64_t b;
        if (gs_array_bytes(&a, levels, &b, NULL) < 0)
                return CUDA_ERROR_INVALID_VALUE;
        *ret = shim_round(b);
        return CUDA_SUCCESS;
}

static CUresult charge_handle(uint32_t kind, uint64_t key, uint64_t b)
{
        if (shim_table_put(kind, key, b, 0) == 0)
                return CUDA_SUCCESS;
        return CUDA_ERROR_OUT_OF_MEMORY;
}

/* After the driver's answer r to creating *pHandle, charged b bytes: records
 * the array, or gives the bytes back (destroying the array when it cannot
 * be recorded). */
static CUresult record_array(CUresult r, CUarray *pHandle, uint64_t b)
{
        if (r != CUDA_SUCCESS) {
                shim_books_release(b);
                return r;
        }
        if (charge_handle(SHIM_K_ARRAY, (uint64_t)(uintptr_t)*pHandle, b) != CUDA_SUCCESS) {
                REAL(cuArrayDestroy)(*pHandle);
                shim_books_release(b);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return r;
}

CUresult shim_w_cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
        SHIM_ENTER(cuArrayCreate_v2, REAL(cuArrayCreate_v2)(pHandle, desc));
        if (!pHandle || !desc)
                return REAL(cuArrayCreate_v2)(pHandle, desc);
        CUDA_ARRAY3D_DESCRIPTOR d3 = { .Width = desc->Width, .Height = desc->Height, .Depth = 0,
                                       .Format = desc->Format, .NumChannels = desc->NumChannels };
        uint64_t b;
        if (array_charge(&d3, 1, &b) != CUDA_SUCCESS)
                return CUDA_ERROR_INVALID_VALUE;
        if (shim_reserve(b) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        return record_array(REAL(cuArrayCreate_v2)(pHandle, desc), pHandle, b);
}

CUresult shim_w_cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
        SHIM_ENTER(cuArray3DCreate_v2, REAL(cuArray3DCreate_v2)(pHandle, desc));
        if (!pHandle || !desc)
                return REAL(cuArray3DCreate_v2)(pHandle, desc);
        uint64_t b;
        if (array_charge(desc, 1, &b) != CUDA_SUCCESS)
                return CUDA_ERROR_INVALID_VALUE;
        if (shim_reserve(b) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        return record_array(REAL(cuArray3DCreate_v2)(pHandle, desc), pHandle, b);
}

CUresult shim_w_cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                       unsigned int numMipmapLevels)
{
        SHIM_ENTER(cuMipmappedArrayCreate, REAL(cuMipmappedArrayCreate)(pHandle, desc, numMipmapLevels));
        if (!pHandle || !desc)
                return REAL(cuMipmappedArrayCreate)(pHandle, desc, numMipmapLevels);
        uint64_t b;
        if (array_charge(desc, numMipmapLevels, &b) != CUDA_SUCCESS)
                return CUDA_ERROR_INVALID_VALUE;
        if (shim_reserve(b) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = REAL(cuMipmappedArrayCreate)(pHandle, desc, numMipmapLevels);
        if (r != CUDA_SUCCESS) {
                shim_books_release(b);
                return r;
        }
        if (charge_handle(SHIM_K_MIPMAP, (uint64_t)(uintptr_t)*pHandle, b) != CUDA_SUCCESS) {
                REAL(cuMipmappedArrayDestroy)(*pHandle);
                shim_books_release(b);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return r;
}

CUresult shim_w_cuArrayDestroy(CUarray hArray)
{
        SHIM_ENTER(cuArrayDestroy, REAL(cuArrayDestroy)(hArray));
        struct shim_entry e;
        bool had = shim_table_take(SHIM_K_ARRAY, (uint64_t)(uintptr_t)hArray, &e);
        CUresult r = REAL(cuArrayDestroy)(hArray);
        shim_table_settle(had, &e, r);
        return r;
}

CUresult shim_w_cuMipmappedArrayDestroy(CUmipmappedArray h)
{
        SHIM_ENTER(cuMipmappedArrayDestroy, REAL(cuMipmappedArrayDestroy)(h));
        struct shim_entry e;
        bool had = shim_table_take(SHIM_K_MIPMAP, (uint64_t)(uintptr_t)h, &e);
        CUresult r = REAL(cuMipmappedArrayDestroy)(h);
        shim_table_settle(had, &e, r);
        return r;
}
