/* SPDX-License-Identifier: Apache-2.0 */
/* The environment of a process in a slice (see slice_env.h). */
#include "slice_env.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"

#ifndef GS_SIM_LIBDIR
#define GS_SIM_LIBDIR ""
#endif

static void env_add(struct slice_env *e, const char *key, const char *value)
{
        int n = snprintf(e->buf + e->len, e->size - e->len, "%s=%s", key, value);

        if (n < 0 || (size_t)n + 1 > e->size - e->len) {
                e->overflow = true;
                return;
        }
        e->len += (size_t)n + 1; /* the NUL separates entries */
}

/* KEY=first[:old value] */
static void env_prepend(struct slice_env *e, const char *key, const char *first)
{
        const char *old = getenv(key);
        _cleanup_free_ char *v = NULL;

        if (asprintf(&v, "%s%s%s", first, old && *old ? ":" : "", old ? old : "") < 0) {
                v = NULL;
                e->overflow = true;
                return;
        }
        env_add(e, key, v);
}

int slice_env_find_shim(char *buf, size_t size)
{
        static const char *const cands[] = { "../shim/libgpuslice.so",
                                             "../lib/gpuslice/libgpuslice.so", "libgpuslice.so" };
        const char *env = getenv("GPUSLICE_SHIM");
        char exe[GS_PATH_MAX];
        ssize_t n;

        if (env && *env) {
                snprintf(buf, size, "%s", env);
                return access(buf, R_OK) == 0 ? 0 : -ENOENT;
        }
        n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n <= 0)
                return -ENOENT;
        exe[n] = '\0';
        const char *dir = dirname(exe);
        for (size_t i = 0; i < GS_ARRAY_SIZE(cands); i++) {
                char cand[GS_PATH_MAX + 64], real[PATH_MAX];

                snprintf(cand, sizeof(cand), "%s/%s", dir, cands[i]);
                if (access(cand, R_OK) == 0 && realpath(cand, real)) {
                        snprintf(buf, size, "%s", real);
                        return 0;
                }
        }
        return -ENOENT;
}

#ifdef GS_SANITIZE
/* A sanitizer-built shim inside an uninstrumented program needs the ASan
 * runtime loaded first: find the one this binary uses. */
static int find_asan(struct dl_phdr_info *info, size_t size, void *data)
{
        (void)size;
        if (info->dlpi_name && strstr(info->dlpi_name, "libasan.so")) {
                snprintf(data, GS_PATH_MAX, "%s", info->dlpi_name);
                return 1;
        }
        return 0;
}
#endif

int slice_env_build(const struct cli_slice *s, const struct cli_daemon_info *daemon,
                    struct slice_env *e, struct gs_error **err)
{
        char vis[CLI_MAX_SLICE_GPUS * (GS_GPU_UUID_MAX + 1)] = "";
        size_t vl = 0;

        for (unsigned i = 0; i < s->n_gpus && vl < sizeof(vis); i++)
                vl += (size_t)snprintf(vis + vl, sizeof(vis) - vl, "%s%s", i ? "," : "",
                                       s->gpu_uuid[i]);
        env_add(e, "CUDA_VISIBLE_DEVICES", vis);
        env_add(e, "GPUSLICE_SLICE", s->id);
        if (daemon->sim) {
                /* The daemon's simgpu: its libraries and its machine. */
                const char *dir = daemon->sim_libdir;

                if (!*dir)
                        dir = getenv("GPUSLICE_SIM_LIBDIR");
                if (!dir || !*dir)
                        dir = GS_SIM_LIBDIR;
                if (*dir)
                        env_prepend(e, "LD_LIBRARY_PATH", dir);
                for (size_t i = 0; i < daemon->n_sim_env; i++) {
                        const char *kv = daemon->sim_env[i], *eq = strchr(kv, '=');
                        char key[64];

                        if (!eq || (size_t)(eq - kv) >= sizeof(key))
                                continue;
                        snprintf(key, sizeof(key), "%.*s", (int)(eq - kv), kv);
                        if (!getenv(key)) /* one set here is the caller's choice */
                                env_add(e, key, eq + 1);
                }
        }
        if (s->config[0]) {
                char shim[GS_PATH_MAX], preload[2 * GS_PATH_MAX + 2];

                if (slice_env_find_shim(shim, sizeof(shim)) < 0)
                        return gs_error_set(err, -ENOENT,
                                            "the shim libgpuslice.so was not found (next to "
                                            "gpuslice, in ../shim, ../lib/gpuslice); set "
                                            "GPUSLICE_SHIM");
                snprintf(preload, sizeof(preload), "%s", shim);
#ifdef GS_SANITIZE
                char asan[GS_PATH_MAX] = "";

                dl_iterate_phdr(find_asan, asan);
                if (asan[0])
                        snprintf(preload, sizeof(preload), "%s:%s", asan, shim);
                if (!getenv("ASAN_OPTIONS"))
                        env_add(e, "ASAN_OPTIONS", "detect_leaks=0");
#endif
                env_prepend(e, "LD_PRELOAD", preload);
                env_add(e, "GPUSLICE_CONFIG", s->config);
        }
        if (e->overflow)
                return gs_error_set(err, -E2BIG, "the environment of the slice is too large");
        return 0;
}
