/* SPDX-License-Identifier: Apache-2.0 */
/* The subset of NVIDIA's NVML API that gpuslice uses and simgpu implements,
 * declared from NVIDIA's public API documentation. Types, values and struct
 * layouts match the real libnvidia-ml.so.1 ABI exactly; a program built
 * against this header can load the real library.
 *
 * As in the real nvml.h, unversioned calls are mapped to their current
 * versions (nvmlInit -> nvmlInit_v2, ...) unless NVML_NO_UNVERSIONED_FUNC_DEFS
 * is defined. Note the exception kept by the real header:
 * nvmlDeviceGetComputeRunningProcesses maps to _v3 (nvmlProcessInfo_t); the
 * unversioned SYMBOL is the v1 layout (nvmlProcessInfo_v1_t), reachable with
 * NVML_NO_UNVERSIONED_FUNC_DEFS or dlsym. */
#ifndef GS_NVML_H
#define GS_NVML_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nvmlReturn_enum {
        NVML_SUCCESS = 0,
        NVML_ERROR_UNINITIALIZED = 1,
        NVML_ERROR_INVALID_ARGUMENT = 2,
        NVML_ERROR_NOT_SUPPORTED = 3,
        NVML_ERROR_NO_PERMISSION = 4,
        NVML_ERROR_ALREADY_INITIALIZED = 5,
        NVML_ERROR_NOT_FOUND = 6,
        NVML_ERROR_INSUFFICIENT_SIZE = 7,
        NVML_ERROR_INSUFFICIENT_POWER = 8,
        NVML_ERROR_DRIVER_NOT_LOADED = 9,
        NVML_ERROR_TIMEOUT = 10,
        NVML_ERROR_IRQ_ISSUE = 11,
        NVML_ERROR_LIBRARY_NOT_FOUND = 12,
        NVML_ERROR_FUNCTION_NOT_FOUND = 13,
        NVML_ERROR_CORRUPTED_INFOROM = 14,
        NVML_ERROR_GPU_IS_LOST = 15,
        NVML_ERROR_RESET_REQUIRED = 16,
        NVML_ERROR_OPERATING_SYSTEM = 17,
        NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
        NVML_ERROR_IN_USE = 19,
        NVML_ERROR_MEMORY = 20,
        NVML_ERROR_NO_DATA = 21,
        NVML_ERROR_VGPU_ECC_NOT_ENABLED = 22,
        NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
        NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
        NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
        NVML_ERROR_DEPRECATED = 26,
        NVML_ERROR_NOT_READY = 27,
        NVML_ERROR_GPU_NOT_FOUND = 28,
        NVML_ERROR_INVALID_STATE = 29,
        NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st *nvmlDevice_t;

#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_VALUE_NOT_AVAILABLE (-1)

#define NVML_INIT_FLAG_NO_GPUS 1
#define NVML_INIT_FLAG_NO_ATTACH 2

#define NVML_STRUCT_VERSION(data, ver) (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((ver) << 24U))

typedef struct nvmlMemory_st {
        unsigned long long total;
        unsigned long long free;
        unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
        unsigned int version;
        unsigned long long total;
        unsigned long long reserved;
        unsigned long long free;
        unsigned long long used;
} nvmlMemory_v2_t;

#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

typedef struct nvmlUtilization_st {
        unsigned int gpu;
        unsigned int memory;
} nvmlUtilization_t;

typedef struct nvmlProcessInfo_v1_st {
        unsigned int pid;
        unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct nvmlProcessInfo_v2_st {
        unsigned int pid;
        unsigned long long usedGpuMemory;
        unsigned int gpuInstanceId;
        unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

typedef struct nvmlProcessInfo_st {
        unsigned int pid;
        unsigned long long usedGpuMemory;
        unsigned int gpuInstanceId;
        unsigned int computeInstanceId;
} nvmlProcessInfo_t;

#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
typedef struct nvmlPciInfo_st {
        char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
        unsigned int domain;
        unsigned int bus;
        unsigned int device;
        unsigned int pciDeviceId;
        unsigned int pciSubSystemId;
        char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "00000000:3B:00.0" */
} nvmlPciInfo_t;

typedef struct nvmlProcessUtilizationSample_st {
        unsigned int pid;
        unsigned long long timeStamp; /* CPU timestamp in microseconds */
        unsigned int smUtil;
        unsigned int memUtil;
        unsigned int encUtil;
        unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion);
nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_v2_t *infos);
#ifdef NVML_NO_UNVERSIONED_FUNC_DEFS
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos);
#endif
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount,
                                             unsigned long long lastSeenTimeStamp);
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);

#ifndef NVML_NO_UNVERSIONED_FUNC_DEFS
#define nvmlInit nvmlInit_v2
#define nvmlDeviceGetCount nvmlDeviceGetCount_v2
#define nvmlDeviceGetHandleByIndex nvmlDeviceGetHandleByIndex_v2
#define nvmlDeviceGetComputeRunningProcesses nvmlDeviceGetComputeRunningProcesses_v3
#endif

#ifdef __cplusplus
}
#endif

#endif /* GS_NVML_H */
