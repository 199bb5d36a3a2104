/* The gpuslice device plugin's logic, independent of gRPC: the advertised
 * units (1000 per GPU, ids "gpu<idx>-u<n>"), preferred allocations, the
 * mapping of each Allocate to a physical GPU with room, the slice configs it
 * writes, its persistent record of allocations, and releases learnt from
 * PodResources. Thread-safe: every function takes the plugin's lock. */
#ifndef GS_DEVICE_PLUGIN_H
#define GS_DEVICE_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpuslice/slice_conf.h>

#include "dp_codec.h"
#include "error.h"

#define DP_RESOURCE "gpuslice.io/gpu-milli"
#define DP_UNITS_PER_GPU 1000u
#define DP_MAX_GPUS 64u
/* Where things appear inside a container of a slice. */
#define DP_CONTAINER_CONF GS_SLICE_CONF_DEFAULT_PATH
#define DP_CONTAINER_SLICE_DIR "/run/gpuslice/slice"
#define DP_CONTAINER_SHIM "/usr/lib/gpuslice/libgpuslice.so"
#define DP_CONTAINER_PRELOAD "/etc/ld.so.preload"

/* One physical GPU as the inventory sees it. */
struct dp_gpu {
        char uuid[96];
        uint64_t memory; /* bytes */
        bool healthy;
};

/* Optional link to the node daemon's ledger. Called with the plugin's lock
 * held: they must not call back into the plugin. slice_add runs when a
 * slice is made (its failure fails the Allocate; conf->slice is "k8s-<n>"),
 * slice_remove when it is freed; gpu_used returns the units (0..1000) that
 * slices NOT made through slice_add hold on the GPU with this uuid (local
 * `gpuslice run` slices), so that pods and local slices never over-commit
 * a GPU together. */
struct dp_slice_info {
        const char *slice;                 /* "k8s-<n>" */
        uint32_t units;                    /* 1..999, or 1000 x number of GPUs */
        const char *const *uuids;          /* its GPU(s) */
        size_t n_uuids;
        const struct gs_slice_conf *conf;  /* the config written; NULL for whole GPUs */
};
struct dp_hooks {
        void *ctx;
        int (*slice_add)(void *ctx, const struct dp_slice_info *s, struct gs_error **err);
        void (*slice_remove)(void *ctx, const char *slice);
        uint32_t (*gpu_used)(void *ctx, const char *uuid);
        /* Once, at start, after the allocation record is loaded: `slices`
         * are the n slices on the plugin's record. The daemon's ledger is the
         * authority on which slices exist: it sets known[i] for those it
         * holds (the plugin drops the others: freed just before a crash),
         * frees its Kubernetes slices that are not named (made just before a
         * crash, their Allocate never answered), and returns the highest n
         * of any "k8s-<n>" it has ever held (0 if none), so that ids are not
         * reused. A negative errno fails the start. */
        int64_t (*sync)(void *ctx, const char *const *slices, size_t n, bool *known);
};

struct dp_config {
        const char *state_dir;     /* host dir: allocation record, slices/<id>/ (required) */
        const char *shim_path;     /* host path of libgpuslice.so; NULL or "": no shim mounts */
        const char *daemon_socket; /* host path of gpusliced.sock to mount; NULL: none */
        const char *cdi_kind;      /* e.g. "nvidia.com/gpu": answer CDI name kind=<uuid> */
        enum gs_compute_policy policy;
        int64_t release_grace_s;   /* an allocation is never freed younger than this */
        struct dp_hooks hooks;
};

struct dp;

/* Create the plugin state: make state_dir, write its ld.so.preload file,
 * take the initial inventory and load the allocation record (a record that
 * cannot be parsed fails, rather than forgetting live slices). */
int dp_new(const struct dp_config *cfg, const struct dp_gpu *gpus, size_t n_gpus, struct dp **ret,
           struct gs_error **err);
/* NULL-safe; returns NULL. Allocations stay recorded on disk. */
struct dp *dp_free(struct dp *d);

/* Replace the inventory (health changes). Returns 1 when the advertised
 * list changed (the generation moved), 0 when not, -EINVAL for too many. */
int dp_set_gpus(struct dp *d, const struct dp_gpu *gpus, size_t n_gpus);

/* Generation of the advertised list; moves on every change. */
uint64_t dp_generation(struct dp *d);
/* The current ListAndWatchResponse, encoded, and its generation. */
int dp_encode_devices(struct dp *d, uint64_t *ret_gen, uint8_t **ret_buf, size_t *ret_len);

/* gRPC handlers (see dp_unary_fn in dp_grpc.h): request bytes in, response
 * bytes out; errors as negative errno plus a message for the pod's events. */
int dp_handle_options(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret, size_t *ret_len,
                      char **ret_msg);
int dp_handle_preferred(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret,
                        size_t *ret_len, char **ret_msg);
int dp_handle_allocate(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret,
                       size_t *ret_len, char **ret_msg);
int dp_handle_prestart(struct dp *d, const uint8_t *req, size_t len, uint8_t **ret,
                       size_t *ret_len, char **ret_msg);

/* Free every allocation none of whose units any container holds in `pods`
 * (from PodResources List), once it is older than the grace period and was
 * seen unheld on two reconciliations in a row. now: unix seconds. Returns
 * the number of allocations freed. */
int dp_reconcile(struct dp *d, const struct dp_pod_devices *pods, size_t n_pods, int64_t now);

/* Number of live allocations, and the units in use on GPU index i. */
size_t dp_n_allocations(struct dp *d);
uint32_t dp_gpu_used(struct dp *d, size_t i);

/* Parse a unit id "gpu<idx>-u<n>" (idx < DP_MAX_GPUS, n < 1000, no leading
 * zeros, nothing else). Returns 0, or -EINVAL. */
int dp_id_parse(const char *id, unsigned *ret_gpu, unsigned *ret_unit);

#endif /* GS_DEVICE_PLUGIN_H */
