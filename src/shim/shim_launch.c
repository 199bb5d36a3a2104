/* Work submission hooks. While memory is the only limit they are pure
 * pass-throughs: one load of the real pointer and a call; no syscall, no
 * lock, no atomic read-modify-write. The compute-share gate (issue 5) goes
 * in SHIM_LAUNCH_GATE: it runs before every launch path, including the
 * per-thread-stream variants and graph launches. */
#include "shim.h"

/* The compute gate hook point: returns CUDA_SUCCESS to let the launch go.
 * Empty until the compute share is enforced. */
#define SHIM_LAUNCH_GATE(stream) CUDA_SUCCESS

/* The real pointer is NULL only before the first hooked call resolved it
 * (impossible in practice: a launch needs a context, made through a hook). */
#define LAUNCH(hook, stream, ...)                                             \
        do {                                                                  \
                shim_t_##hook *f_ = REAL(hook);                               \
                if (__builtin_expect(!f_, 0)) {                               \
                        shim_init();                                          \
                        f_ = REAL(hook);                                      \
                        if (!f_)                                              \
                                return CUDA_ERROR_NOT_FOUND;                  \
                }                                                             \
                CUresult g_ = SHIM_LAUNCH_GATE(stream);                       \
                if (g_ != CUDA_SUCCESS)                                       \
                        return g_;                                            \
                return f_(__VA_ARGS__);                                       \
        } while (0)

CUresult shim_w_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shm, CUstream s, void **params,
                               void **extra)
{
        LAUNCH(cuLaunchKernel, s, f, gx, gy, gz, bx, by, bz, shm, s, params, extra);
}

CUresult shim_w_cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz, unsigned shm, CUstream s, void **params,
                                    void **extra)
{
        LAUNCH(cuLaunchKernel_ptsz, s, f, gx, gy, gz, bx, by, bz, shm, s, params, extra);
}

CUresult shim_w_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
        LAUNCH(cuLaunchKernelEx, config ? config->hStream : NULL, config, f, params, extra);
}

CUresult shim_w_cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
                                      void **extra)
{
        LAUNCH(cuLaunchKernelEx_ptsz, config ? config->hStream : NULL, config, f, params, extra);
}

CUresult shim_w_cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                          unsigned bx, unsigned by, unsigned bz, unsigned shm,
                                          CUstream s, void **params)
{
        LAUNCH(cuLaunchCooperativeKernel, s, f, gx, gy, gz, bx, by, bz, shm, s, params);
}

CUresult shim_w_cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                               unsigned bx, unsigned by, unsigned bz, unsigned shm,
                                               CUstream s, void **params)
{
        LAUNCH(cuLaunchCooperativeKernel_ptsz, s, f, gx, gy, gz, bx, by, bz, shm, s, params);
}

CUresult shim_w_cuGraphLaunch(CUgraphExec g, CUstream s)
{
        LAUNCH(cuGraphLaunch, s, g, s);
}

CUresult shim_w_cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
        LAUNCH(cuGraphLaunch_ptsz, s, g, s);
}
