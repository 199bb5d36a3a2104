/* SPDX-License-Identifier: Apache-2.0 */
/* Placement: inside a slice nothing is allocated on a GPU the slice was not
 * placed on. The slice's GPU is told by UUID (shim_dev_is_slice), so a
 * process that unsets or rewrites CUDA_VISIBLE_DEVICES before cuInit sees
 * the other GPUs under other ordinals but still reaches only its own.
 * Contexts on other GPUs are refused in shim_ctx.c; here: allocations that
 * name a location (cuMemCreate, checked from shim_mem.c) and the routes to
 * another GPU's memory pools (a pool allocates on its own device, whatever
 * the stream's): cuMemPoolCreate, cuDeviceGetDefaultMemPool and
 * cuDeviceGetMemPool of another GPU are refused with
 * CUDA_ERROR_INVALID_DEVICE. */
#include "shim.h"

bool shim_location_ok(const CUmemLocation *loc, const char *what)
{
        if (!loc || loc->type != CU_MEM_LOCATION_TYPE_DEVICE || shim_dev_is_slice(loc->id))
                return true;
        shim_log("%s on device %d refused: not the slice's GPU %s (CUDA_ERROR_INVALID_DEVICE)", what,
                 loc->id, shim_conf.gpu_uuid);
        return false;
}

static CUresult refuse_dev(CUdevice dev, const char *what)
{
        shim_log("%s of device %d refused: not the slice's GPU %s (CUDA_ERROR_INVALID_DEVICE)", what,
                 (int)dev, shim_conf.gpu_uuid);
        return CUDA_ERROR_INVALID_DEVICE;
}

CUresult shim_w_cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
        SHIM_ENTER(cuMemPoolCreate, REAL(cuMemPoolCreate)(pool, props));
        if (props && !shim_location_ok(&props->location, "cuMemPoolCreate"))
                return CUDA_ERROR_INVALID_DEVICE;
        return REAL(cuMemPoolCreate)(pool, props);
}

CUresult shim_w_cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
        SHIM_ENTER(cuDeviceGetDefaultMemPool, REAL(cuDeviceGetDefaultMemPool)(pool, dev));
        if (!shim_dev_is_slice(dev))
                return refuse_dev(dev, "cuDeviceGetDefaultMemPool");
        return REAL(cuDeviceGetDefaultMemPool)(pool, dev);
}

CUresult shim_w_cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
        SHIM_ENTER(cuDeviceGetMemPool, REAL(cuDeviceGetMemPool)(pool, dev));
        if (!shim_dev_is_slice(dev))
                return refuse_dev(dev, "cuDeviceGetMemPool");
        return REAL(cuDeviceGetMemPool)(pool, dev);
}
