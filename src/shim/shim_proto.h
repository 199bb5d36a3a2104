/* SPDX-License-Identifier: Apache-2.0 */
/* Prototypes of legacy driver ABIs that CUDA 13's cuda.h no longer declares
 * but that libcuda still exports (and cuGetProcAddress still hands out for
 * old cudaVersion values). Declarations only: they give hooks.def the types
 * of those symbols; nothing named shim_proto_* is ever defined. */
#ifndef SHIM_PROTO_H
#define SHIM_PROTO_H

#include <cuda.h>

typedef unsigned int shim_deviceptr_v1; /* 32-bit CUdeviceptr of CUDA < 3.2 */

CUresult shim_proto_cuGetProcAddress_v1(const char *symbol, void **pfn, int cudaVersion,
                                        cuuint64_t flags);
CUresult shim_proto_cuMemGetInfo_v1(unsigned int *free, unsigned int *total);
CUresult shim_proto_cuDeviceTotalMem_v1(unsigned int *bytes, CUdevice dev);
CUresult shim_proto_cuCtxCreate_v1(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult shim_proto_cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                   unsigned int flags, CUdevice dev);
CUresult shim_proto_cuMemAlloc_v1(shim_deviceptr_v1 *dptr, unsigned int bytesize);
CUresult shim_proto_cuMemAllocPitch_v1(shim_deviceptr_v1 *dptr, unsigned int *pPitch,
                                       unsigned int WidthInBytes, unsigned int Height,
                                       unsigned int ElementSizeBytes);
/* The v1 descriptors had 32-bit sizes; the shim never reads them. */
CUresult shim_proto_cuArrayCreate_v1(CUarray *pHandle, const void *pAllocateArray);
CUresult shim_proto_cuArray3DCreate_v1(CUarray *pHandle, const void *pAllocateArray);

#endif /* SHIM_PROTO_H */
