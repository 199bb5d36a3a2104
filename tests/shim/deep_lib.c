/* SPDX-License-Identifier: Apache-2.0 */
/* A library linked against libcuda.so.1, for the RTLD_DEEPBIND route
 * (shim_routes_test.c): loaded deep-bound, its references to the driver
 * would resolve in its own dependencies (the driver) before the preloaded
 * shim. */
#include <cuda.h>
#include <stddef.h>

/* Allocates up to n blocks of `bytes` with cuMemAlloc (the context current
 * on the calling thread); returns how many succeeded. */
__attribute__((visibility("default"))) unsigned deep_fill(unsigned n, size_t bytes);
unsigned deep_fill(unsigned n, size_t bytes)
{
        unsigned got = 0;
        CUdeviceptr p;
        while (got < n && cuMemAlloc(&p, bytes) == CUDA_SUCCESS)
                got++;
        return got;
}
