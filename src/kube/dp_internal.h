/* Internal state of the device plugin, shared by device_plugin.c (logic)
 * and dp_store.c (the allocation record and slice files). */
#ifndef GS_DP_INTERNAL_H
#define GS_DP_INTERNAL_H

#include <pthread.h>

#include "device_plugin.h"
#include "macro.h"

/* One Allocate container: a slice on one GPU, or whole GPUs. */
struct dp_alloc {
        char slice[GS_SLICE_ID_MAX + 1];
        uint32_t units;
        bool exclusive;       /* whole GPUs, no shim */
        struct dp_strv uuids; /* its GPU(s) */
        struct dp_strv ids;   /* unit ids the kubelet gave it, sorted */
        int64_t created;      /* unix seconds */
        int unheld;           /* reconciliations in a row nobody held it */
        char holder[256];     /* "ns/pod/container" once PodResources says */
};

struct dp {
        pthread_mutex_t lock;
        char *state_dir;
        char *shim_path;
        char *daemon_socket;
        char *cdi_kind;
        enum gs_compute_policy policy;
        int64_t grace;
        struct dp_hooks hooks;
        struct dp_gpu gpus[DP_MAX_GPUS];
        size_t n_gpus;
        struct dp_alloc *allocs;
        size_t n_allocs;
        uint64_t next_seq;
        uint64_t generation;
};

void dp_alloc_done(struct dp_alloc *a);
/* Whether s holds x. */
bool dp_strv_has(const struct dp_strv *s, const char *x);
/* Units our allocations use on GPU i / free there (0 when unhealthy).
 * Caller holds d->lock. */
uint32_t dp_used_locked(const struct dp *d, size_t i);
uint32_t dp_free_locked(const struct dp *d, size_t i);
/* Replace *ret_msg with a formatted message; returns code. */
int dp_msg(char **ret_msg, int code, const char *fmt, ...) GS_PRINTF(3, 4);

/* Load state_dir/allocations into d (missing file: nothing). -EBADMSG with
 * *err naming the line for a damaged record. */
int dp_store_load(struct dp *d, struct gs_error **err);
/* Persist every allocation (temp file, fsync, rename). */
int dp_store_save(struct dp *d, struct gs_error **err);
/* Write slices/<slice>/ and its slice.conf for a slice allocation. */
int dp_store_write_slice(struct dp *d, const struct gs_slice_conf *conf, struct gs_error **err);
/* Remove slices/<slice>/ and what is in it (one level). */
void dp_store_remove_slice(struct dp *d, const char *slice);
/* Host paths of a slice's directory and config file (malloc'ed). */
char *dp_store_slice_dir(const struct dp *d, const char *slice);
char *dp_store_slice_conf(const struct dp *d, const char *slice);
/* Write state_dir/ld.so.preload naming the container path of the shim. */
int dp_store_write_preload(struct dp *d, struct gs_error **err);
char *dp_store_preload_path(const struct dp *d);

#endif /* GS_DP_INTERNAL_H */
