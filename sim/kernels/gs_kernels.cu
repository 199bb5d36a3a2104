/* The project kernels. simgpu recognises them by their .entry name and
 * simulates them; on a real GPU they run as written. extern "C" keeps the
 * entry names unmangled.
 *
 * gs_busy(ns): occupies the device for ns nanoseconds of device time (spins
 *   on %globaltimer).
 * gs_fill(p, v, n): p[i] = v for i < n (grid-stride loop). */
extern "C" __global__ void gs_busy(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
extern "C" __global__ void gs_fill(unsigned int *p, unsigned int v, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) p[i] = v;
}
