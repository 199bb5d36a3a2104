/* SPDX-License-Identifier: Apache-2.0 */
/* Work submission hooks. Every launch path (the per-thread-stream
 * variants and graph launches included, by every route) passes the compute
 * gate (shim_gate.h). With the gate off (no slice, or a whole GPU) a hook
 * is one load of the real pointer, one load of a flag and a call; with it
 * on, while the slice holds a lease, the gate adds atomic loads, a vDSO
 * clock read and one process-wide counter (launches between the gate and
 * the driver's return, which the early end of a hold must see): no syscall,
 * no lock. */
#include "shim.h"
#include "shim_gate.h"

/* The real pointer is NULL only before the first hooked call resolved it
 * (impossible in practice: a launch needs a context, made through a hook).
 * The driver's own nested launches (depth > 0) are not gated twice. */
#define LAUNCH(hook, ptsz, stream, ...)                                       \
        do {                                                                  \
                shim_t_##hook *f_ = REAL(hook);                               \
                if (__builtin_expect(!f_, 0)) {                               \
                        shim_init();                                          \
                        f_ = REAL(hook);                                      \
                        if (!f_)                                              \
                                return CUDA_ERROR_NOT_FOUND;                  \
                }                                                             \
                if (__builtin_expect(!shim_gate_on, 1))                       \
                        return f_(__VA_ARGS__);                               \
                shim_gate_inflight_inc();                                     \
                CUresult g_ = shim_gate_enter(stream, ptsz);                  \
                if (g_ != CUDA_SUCCESS) {                                     \
                        shim_gate_inflight_dec();                             \
                        return g_;                                            \
                }                                                             \
                ++shim_depth;                                                 \
                CUresult r_ = f_(__VA_ARGS__);                                \
                --shim_depth;                                                 \
                shim_gate_inflight_dec();                                     \
                if (__builtin_expect(shim_gate_probe, 0))                     \
                        shim_gate_after(stream, ptsz);                        \
                return r_;                                                    \
        } while (0)

CUresult shim_w_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shm, CUstream s, void **params,
                               void **extra)
{
        LAUNCH(cuLaunchKernel, false, s, f, gx, gy, gz, bx, by, bz, shm, s, params, extra);
}

CUresult shim_w_cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz, unsigned shm, CUstream s, void **params,
                                    void **extra)
{
        LAUNCH(cuLaunchKernel_ptsz, true, s, f, gx, gy, gz, bx, by, bz, shm, s, params, extra);
}

CUresult shim_w_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
        LAUNCH(cuLaunchKernelEx, false, config ? config->hStream : NULL, config, f, params, extra);
}

CUresult shim_w_cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
                                      void **extra)
{
        LAUNCH(cuLaunchKernelEx_ptsz, true, config ? config->hStream : NULL, config, f, params, extra);
}

CUresult shim_w_cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                          unsigned bx, unsigned by, unsigned bz, unsigned shm,
                                          CUstream s, void **params)
{
        LAUNCH(cuLaunchCooperativeKernel, false, s, f, gx, gy, gz, bx, by, bz, shm, s, params);
}

CUresult shim_w_cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                               unsigned bx, unsigned by, unsigned bz, unsigned shm,
                                               CUstream s, void **params)
{
        LAUNCH(cuLaunchCooperativeKernel_ptsz, true, s, f, gx, gy, gz, bx, by, bz, shm, s, params);
}

CUresult shim_w_cuGraphLaunch(CUgraphExec g, CUstream s)
{
        LAUNCH(cuGraphLaunch, false, s, g, s);
}

CUresult shim_w_cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
        LAUNCH(cuGraphLaunch_ptsz, true, s, g, s);
}

/* Stream teardown: the gate ends its measurement on the stream first. */
CUresult shim_w_cuStreamDestroy(CUstream s)
{
        shim_t_cuStreamDestroy *f = REAL(cuStreamDestroy);
        if (!f) {
                shim_init();
                if (!(f = REAL(cuStreamDestroy)))
                        return CUDA_ERROR_NOT_FOUND;
        }
        shim_gate_stream_destroy(s);
        return f(s);
}

CUresult shim_w_cuStreamDestroy_v2(CUstream s)
{
        shim_t_cuStreamDestroy_v2 *f = REAL(cuStreamDestroy_v2);
        if (!f) {
                shim_init();
                if (!(f = REAL(cuStreamDestroy_v2)))
                        return CUDA_ERROR_NOT_FOUND;
        }
        shim_gate_stream_destroy(s);
        return f(s);
}
