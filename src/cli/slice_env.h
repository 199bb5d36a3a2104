/* SPDX-License-Identifier: Apache-2.0 */
/* The environment of a process in a slice, as `gpuslice run` and
 * `gpuslice up` set it: the slice's GPU(s) visible, its id, the shim
 * preloaded with its config (slices only), simgpu's libraries for --sim. */
#ifndef GS_CLI_SLICE_ENV_H
#define GS_CLI_SLICE_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include "client.h"
#include "error.h"

/* A caller-owned buffer of "KEY=VALUE" entries, each NUL-terminated, one
 * after the other (len bytes used of size). */
struct slice_env {
        char *buf;
        size_t size, len;
        bool overflow;    /* an entry did not fit */
};

/* Append to e: CUDA_VISIBLE_DEVICES (the slice's GPU uuids), GPUSLICE_SLICE;
 * when the daemon serves simgpu (daemon->sim, from cli_status), its
 * libraries (daemon->sim_libdir, else $GPUSLICE_SIM_LIBDIR or the build's)
 * prepended to LD_LIBRARY_PATH and its SIMGPU_* settings that are not set
 * here; for a slice with a config, the shim (found by
 * slice_env_find_shim; the ASan runtime ahead of it in a sanitizer build)
 * prepended to LD_PRELOAD, and GPUSLICE_CONFIG. Variables prepended to keep
 * the caller's current value after ours. Returns 0; -ENOENT when the shim
 * is not found, -E2BIG when e is too small, with *err set. */
int slice_env_build(const struct cli_slice *s, const struct cli_daemon_info *daemon,
                    struct slice_env *e, struct gs_error **err);

/* The shim: $GPUSLICE_SHIM, else (resolved to an absolute path) the build
 * tree (src/cli -> src/shim), an install tree (bin -> lib/gpuslice), or
 * next to this binary. 0, or -ENOENT. */
int slice_env_find_shim(char *buf, size_t size);

#endif /* GS_CLI_SLICE_ENV_H */
