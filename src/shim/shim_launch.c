/* SPDX-License-Identifier: Apache-2.0 */
/* Work submission hooks. Every launch path (the per-thread-stream
 * variants and graph launches included, by every route: the wrappers are
 * what dlsym and cuGetProcAddress hand out) passes the compute gate
 * (shim_gate.h).
 *
 * Each hook is two functions. The exported one loads the real pointer and
 * a flag and, with the gate off (no slice, or a whole GPU), jumps to the
 * driver (a tail call). With it on, it counts the launch in flight and
 * asks the inline fast path (shim_gate_fast: the thread's lease still
 * current, its queue has room; no call, no syscall, no lock); admitted,
 * the driver is its only call. Anything else goes to the hook's cold slow
 * twin: start-up, the gate proper (shim_gate_enter), the probe, a launch
 * on a thread already inside a hooked call (the driver's own, passed
 * through; a signal handler's, refused: shim_nested_ok). The
 * figure, instructions added per launch under callgrind with the gate on
 * and off, is bench/run-shim.sh's. */
#include "shim.h"
#include "shim_gate.h"

/* The exported hook: a launch the fast path admits calls the driver with
 * nothing else on the way (its only call); anything else is the slow
 * twin's, told whether the launch is counted in flight already and, for a
 * launch nested in a hooked call (depth > 0), the hook's return address:
 * the slow twin passes the driver's own nested launches through (not
 * gated twice) and refuses any other. The depth test is the one it was
 * (a TLS load, on the branch that already tests the real pointer). */
#define FAST(hook, ptsz, stream, ...)                                                           \
        do {                                                                                    \
                shim_t_##hook *f_ = REAL(hook);                                                 \
                if (__builtin_expect(f_ && !shim_gate_on, 1))                                   \
                        return f_(__VA_ARGS__);                                                 \
                if (__builtin_expect(!f_ || shim_depth > 0, 0))                                 \
                        return slow_##hook(false, __builtin_return_address(0), __VA_ARGS__);    \
                shim_gate_inflight_inc();                                                       \
                if (__builtin_expect(!shim_gate_fast((ptsz) && !(stream) ? CU_STREAM_PER_THREAD \
                                                                         : (stream)),           \
                                     0))                                                        \
                        return slow_##hook(true, NULL, __VA_ARGS__);                            \
                ++shim_depth;                                                                   \
                CUresult r_ = f_(__VA_ARGS__);                                                  \
                --shim_depth;                                                                   \
                shim_gate_inflight_dec();                                                       \
                return r_;                                                                      \
        } while (0)

/* The slow twin. The real pointer is NULL only before the first hooked
 * call resolved it (impossible in practice: a launch needs a context, made
 * through a hook). A launch on a thread inside a hooked call with the gate
 * on passes ungated only when `caller` lies in the driver; a signal
 * handler's is refused (CUDA_ERROR_NOT_PERMITTED, logged), as the memory
 * hooks refuse theirs: gating it could wait on a lease, from a handler,
 * for as long as the interrupted code is held up. */
#define SLOW(hook, ptsz, stream, ...)                                                             \
        do {                                                                                      \
                shim_t_##hook *f_ = REAL(hook);                                                   \
                if (!f_) {                                                                        \
                        shim_init();                                                              \
                        f_ = REAL(hook);                                                          \
                        if (!f_)                                                                  \
                                return CUDA_ERROR_NOT_FOUND;                                      \
                }                                                                                 \
                if (!counted && shim_depth > 0 && shim_gate_on && !shim_nested_ok(caller, #hook)) \
                        return CUDA_ERROR_NOT_PERMITTED;                                          \
                if (!counted && (!shim_gate_on || shim_depth > 0))                                \
                        return f_(__VA_ARGS__);                                                   \
                CUstream s_ = (ptsz) && !(stream) ? CU_STREAM_PER_THREAD : (stream);              \
                if (!counted)                                                                     \
                        shim_gate_inflight_inc();                                                 \
                CUresult g_ = shim_gate_enter(s_);                                                \
                if (g_ != CUDA_SUCCESS) {                                                         \
                        shim_gate_inflight_dec();                                                 \
                        return g_;                                                                \
                }                                                                                 \
                ++shim_depth;                                                                     \
                CUresult r_ = f_(__VA_ARGS__);                                                    \
                --shim_depth;                                                                     \
                shim_gate_inflight_dec();                                                         \
                if (__builtin_expect(shim_gate_t.probe, 0))                                       \
                        shim_gate_after(s_);                                                      \
                return r_;                                                                        \
        } while (0)

#define SLOW_FN static __attribute__((noinline, cold)) CUresult

SLOW_FN slow_cuLaunchKernel(bool counted, const void *caller, CUfunction f, unsigned gx,
                            unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned shm, CUstream s, void **params, void **extra)
{
        SLOW(cuLaunchKernel, false, s, f, gx, gy, gz, bx, by, bz, shm, s, params, extra);
}

CUresult shim_w_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shm, CUstream s, void **params,
                               void **extra)
{
        FAST(cuLaunchKernel, false, s, f, gx, gy, gz, bx, by, bz, shm, s, params, extra);
}

SLOW_FN slow_cuLaunchKernel_ptsz(bool counted, const void *caller, CUfunction f, unsigned gx,
                                 unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                 unsigned shm, CUstream s, void **params, void **extra)
{
        SLOW(cuLaunchKernel_ptsz, true, s, f, gx, gy, gz, bx, by, bz, shm, s, params, extra);
}

CUresult shim_w_cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shm, CUstream s,
                                    void **params, void **extra)
{
        FAST(cuLaunchKernel_ptsz, true, s, f, gx, gy, gz, bx, by, bz, shm, s, params, extra);
}

SLOW_FN slow_cuLaunchKernelEx(bool counted, const void *caller, const CUlaunchConfig *config,
                              CUfunction f, void **params, void **extra)
{
        SLOW(cuLaunchKernelEx, false, config ? config->hStream : NULL, config, f, params, extra);
}

CUresult shim_w_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                 void **extra)
{
        FAST(cuLaunchKernelEx, false, config ? config->hStream : NULL, config, f, params, extra);
}

SLOW_FN slow_cuLaunchKernelEx_ptsz(bool counted, const void *caller, const CUlaunchConfig *config,
                                   CUfunction f, void **params, void **extra)
{
        SLOW(cuLaunchKernelEx_ptsz, true, config ? config->hStream : NULL, config, f, params,
             extra);
}

CUresult shim_w_cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
                                      void **extra)
{
        FAST(cuLaunchKernelEx_ptsz, true, config ? config->hStream : NULL, config, f, params,
             extra);
}

SLOW_FN slow_cuLaunchCooperativeKernel(bool counted, const void *caller, CUfunction f, unsigned gx,
                                       unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                       unsigned bz, unsigned shm, CUstream s, void **params)
{
        SLOW(cuLaunchCooperativeKernel, false, s, f, gx, gy, gz, bx, by, bz, shm, s, params);
}

CUresult shim_w_cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                          unsigned bx, unsigned by, unsigned bz, unsigned shm,
                                          CUstream s, void **params)
{
        FAST(cuLaunchCooperativeKernel, false, s, f, gx, gy, gz, bx, by, bz, shm, s, params);
}

SLOW_FN slow_cuLaunchCooperativeKernel_ptsz(bool counted, const void *caller, CUfunction f,
                                            unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                            unsigned by, unsigned bz, unsigned shm, CUstream s,
                                            void **params)
{
        SLOW(cuLaunchCooperativeKernel_ptsz, true, s, f, gx, gy, gz, bx, by, bz, shm, s, params);
}

CUresult shim_w_cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                               unsigned bx, unsigned by, unsigned bz, unsigned shm,
                                               CUstream s, void **params)
{
        FAST(cuLaunchCooperativeKernel_ptsz, true, s, f, gx, gy, gz, bx, by, bz, shm, s, params);
}

SLOW_FN slow_cuGraphLaunch(bool counted, const void *caller, CUgraphExec g, CUstream s)
{
        SLOW(cuGraphLaunch, false, s, g, s);
}

CUresult shim_w_cuGraphLaunch(CUgraphExec g, CUstream s)
{
        FAST(cuGraphLaunch, false, s, g, s);
}

SLOW_FN slow_cuGraphLaunch_ptsz(bool counted, const void *caller, CUgraphExec g, CUstream s)
{
        SLOW(cuGraphLaunch_ptsz, true, s, g, s);
}

CUresult shim_w_cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
        FAST(cuGraphLaunch_ptsz, true, s, g, s);
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
