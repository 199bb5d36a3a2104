/* SPDX-License-Identifier: Apache-2.0 */
/* API specs: the YAML list of APIs that `gpuslice up` starts and
 * `gpuslice render` turns into Kubernetes manifests (design.md, "Users and
 * their first commands"; user reference in docs/spec.md).
 *
 *   - name: iris-classifier
 *     command: ["./serve", "--port", "8080"]
 *     image: registry/iris:1.0
 *     port: 8080
 *     replicas: 1
 *     env: {MODEL: iris}
 *     compute: {gpu: 300m, gpu_memory: 6Gi, cpu: 500m, mem: 2Gi, policy: share,
 *               overuse: kill}
 *
 * Loading is all-or-nothing: the first problem rejects the whole file with
 * a message naming the file, the line, the API and the field. */
#ifndef GS_SPEC_H
#define GS_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include <gpuslice/slice_conf.h>

#include "error.h"
#include "overuse_policy.h"

#define GS_SPEC_MAX_BYTES (1u << 20) /* larger files are rejected unread */
#define GS_SPEC_MAX_APIS 256
#define GS_SPEC_MAX_ARGS 1024        /* entries of command */
#define GS_SPEC_MAX_ENV 256
#define GS_SPEC_MAX_STRING 4096      /* bytes of any one string (image, argument, env value) */
#define GS_API_NAME_MAX 63           /* a DNS-1123 label */
#define GS_SPEC_DEFAULT_PORT 8080
#define GS_SPEC_MAX_REPLICAS 1000

struct gs_env_var {
        char *name;  /* [A-Za-z_][A-Za-z0-9_]* */
        char *value; /* may be "" */
};

struct gs_api_compute {
        uint32_t gpu_milli;            /* 1..999 (a slice) or a multiple of 1000 (whole GPUs) */
        uint64_t gpu_memory;           /* bytes; 0 = default, share x GPU memory at placement */
        uint32_t cpu_milli;            /* 0 = not given */
        uint64_t mem;                  /* bytes; 0 = not given */
        enum gs_compute_policy policy; /* GS_POLICY_SHARE unless `policy: cap` */
        enum gs_overuse_policy overuse; /* GS_OVERUSE_DEFAULT (the daemon's) unless given */
};

struct gs_api_spec {
        char *name;                    /* DNS label, unique in the spec */
        char **command;                /* argv, NULL when absent; command[0] is not "" */
        size_t n_command;
        char *image;                   /* NULL when absent; command or image is set */
        uint16_t port;                 /* 1..65535, default GS_SPEC_DEFAULT_PORT */
        uint32_t replicas;             /* 1..GS_SPEC_MAX_REPLICAS, default 1 */
        struct gs_env_var *env;
        size_t n_env;
        struct gs_api_compute compute;
        unsigned line;                 /* 1-based line of the API in its file */
};

struct gs_spec {
        char *source;                  /* the file name given to the loader, for messages */
        struct gs_api_spec *apis;      /* in file order */
        size_t n_apis;                 /* 1..GS_SPEC_MAX_APIS */
};

/* Load the API spec in `buf` (len bytes, need not be NUL-terminated);
 * `name` is used in messages (usually the file name). On success stores a
 * new spec in *ret_spec (free with gs_spec_free) and returns 0. On failure
 * returns -EINVAL (bad spec), -EFBIG (over GS_SPEC_MAX_BYTES) or -ENOMEM,
 * sets *err (when err is non-NULL) and leaves *ret_spec untouched. */
int gs_spec_load_buffer(const char *name, const char *buf, size_t len, struct gs_spec **ret_spec,
                        struct gs_error **err);

/* Read and load the API spec file at `path` as gs_spec_load_buffer does.
 * Also fails with the negative errno of open/read (message names the path). */
int gs_spec_load_file(const char *path, struct gs_spec **ret_spec, struct gs_error **err);

/* Free a spec and everything it owns; accepts NULL, returns NULL. */
struct gs_spec *gs_spec_free(struct gs_spec *spec);
static inline void gs_spec_freep(struct gs_spec **s) { *s = gs_spec_free(*s); }
#define _cleanup_spec_ _cleanup_(gs_spec_freep)

/* The API called `name` in spec, or NULL. */
const struct gs_api_spec *gs_spec_find(const struct gs_spec *spec, const char *name);

/* Whether `s` is a DNS-1123 label: 1..63 of [a-z0-9-], starting and ending
 * with a letter or digit. */
int gs_dns_label_valid(const char *s);

#endif /* GS_SPEC_H */
