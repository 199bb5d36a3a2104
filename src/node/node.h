/* SPDX-License-Identifier: Apache-2.0 */
/* The node layer (gs_node): the only owner of a slice's lifecycle on a
 * node, shared by every front-end (the daemon's local API, the kubelet
 * device plugin in the daemon or standalone; later the DRA driver, the
 * watchdog, the extender's node side).
 *
 *   prepare:  place (core's gs_place) -> record (the ledger, the only
 *             record, saved) -> files (one layout, one writer: node_files.c)
 *             -> the backend's container edits (node_edits.h)
 *   release:  observers told -> files removed -> record removed (saved)
 *
 * A crash between record and files is repaired at start by
 * node_reconcile_files_locked: every recorded slice gets its files back and
 * files no record names are removed. How a slice is made depends on its
 * backend (node_backend.h): `whole` GPUs or a `shim` slice.
 *
 * Locking: one mutex guards the ledger and the inventory. Functions named
 * *_locked require the caller to hold it (node_lock/node_unlock); the
 * daemon's event loop holds it while it serves a batch of events, the
 * plugin's handlers while they serve a call. */
#ifndef GS_NODE_H
#define GS_NODE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "inventory.h"
#include "ledger.h"
#include "placement.h"

#define NODE_DIR_MAX 1024  /* longest state directory */
#define NODE_PATH_MAX 1200 /* state directory + a file inside */

struct node_config {
        const char *state_dir;     /* ledger, conf/, slices/ (required) */
        const char *daemon_socket; /* written into slice configs; NULL: none */
        const char *shim_path;     /* host libgpuslice.so for containers; NULL/"": none */
        const char *cdi_kind;      /* containers also get CDI devices KIND=<uuid>; NULL: none */
        enum gs_placement_policy placement;
        enum gs_compute_policy compute_policy; /* for requests that name none */
};

/* Told whenever a slice leaves the ledger, by whichever front-end (the
 * daemon ends the slice's compute lease and stops following its process).
 * Called with the lock held, before the slice's files are removed. */
struct node_observer {
        void *ctx;
        void (*slice_removed)(void *ctx, const struct gs_slice *s, const char *why);
};

/* The pod a pod slice belongs to, as its front-end learnt it (the device
 * plugin from PodResources, the DRA driver from the claim's reservedFor).
 * Strings are NUL-terminated; container and uid may be "". */
struct node_pod {
        char ns[64];         /* metadata.namespace (a DNS label) */
        char name[254];      /* metadata.name (a DNS subdomain) */
        char container[64];  /* "" when the slice is the whole pod's (DRA) */
        char uid[64];        /* metadata.uid, "" when unknown (PodResources has none) */
};

struct node_pod_entry {
        char slice[GS_SLICE_ID_MAX + 1];
        struct node_pod pod;
};

struct node {
        pthread_mutex_t lock;
        char state_dir[NODE_DIR_MAX];
        char ledger_path[NODE_PATH_MAX];
        char daemon_socket[NODE_PATH_MAX]; /* "" when none */
        char shim_path[NODE_PATH_MAX];     /* "" when none */
        char cdi_kind[128];                /* "" when none */
        enum gs_placement_policy placement;
        enum gs_compute_policy compute_policy;
        int lock_fd;                       /* flock of <state_dir>/lock */
        /* Read freely under the lock; changed only through this layer. */
        struct gs_inventory inv;
        struct gs_ledger ledger;
        struct node_observer observer;
        /* Moves on every change of the ledger or of the inventory's
         * identity or health (what front-ends advertise depends on both). */
        uint64_t generation;
        /* The ledger's next_id as node_open loaded it: a smaller id the
         * ledger lacks was released by this node, not lost. */
        uint64_t opened_next_id;
        /* Pods of pod slices (node_pods.c), in memory only. */
        struct node_pod_entry *pods;
        size_t n_pods, cap_pods;
        uint64_t pods_generation; /* moves whenever a pod is learnt or forgotten */
        /* A change that could not reach the disk (node_retry_locked). */
        bool save_pending;   /* the ledger on disk is older than the one in memory */
        bool repair_pending; /* files of freed slices are left behind */
};

/* What a front-end asks for. */
struct node_request {
        enum gs_slice_kind kind;
        uint32_t milli;            /* 1..999 slice, k*1000 whole GPUs */
        uint64_t memory;           /* bytes; 0: share x GPU memory */
        bool has_policy;           /* false: the node's compute_policy */
        enum gs_compute_policy policy;
        enum gs_overuse_policy overuse; /* GS_OVERUSE_DEFAULT: the daemon's */
        const char *name;          /* optional label, [A-Za-z0-9._-] */
        /* local: the process the slice lives for (checked by the caller) */
        pid_t pid;
        uint64_t start_time;
        uid_t uid;
        /* Kubernetes: the kubelet's unit ids (range text, unit_ids.h) */
        const char *units;
        /* DRA: which share of which claim, with its namespace and name
         * when known (copied) */
        const struct gs_slice_claim *claim;
        /* placement hints (gs_placement_request) */
        bool prefer;
        unsigned preferred_gpu;    /* inventory position */
        uint64_t allowed_gpus;     /* bit i: position i may be used; 0: all */
};

/* Create the state layout under cfg->state_dir (mode 0755 as root, else
 * 0700; it must be ours and no symlink), take its lock (one daemon or
 * plugin per state directory: -EBUSY), and load the ledger (a missing
 * ledger is empty; a damaged one fails rather than over-commit). The
 * inventory starts empty: set it with node_set_inventory_locked, then call
 * node_reconcile_files_locked. 0 and *ret, or a negative errno with *err. */
int node_open(const struct node_config *cfg, struct node **ret, struct gs_error **err);

/* Release the lock file and free; slices stay recorded. NULL-safe. */
struct node *node_close(struct node *n);

void node_lock(struct node *n);
void node_unlock(struct node *n);

/* Take a fresh inventory reading. A GPU that answers no query keeps the
 * identity (uuid, memory) it had, only its health changes; changes of
 * health are logged. Returns true when any GPU's health or identity
 * changed. */
bool node_set_inventory_locked(struct node *n, const struct gs_inventory *inv);

/* Position of the GPU with this uuid in the inventory, or -1. */
int node_gpu_position_locked(const struct node *n, const char *uuid);

/* Free share and memory of every GPU by the ledger (local and Kubernetes
 * slices alike): the one usage formula. */
void node_usage_locked(const struct node *n, struct gs_gpu_usage usage[GS_MAX_GPUS]);

/* Make a slice: place it, record it (saved), write its files. On success
 * *ret is a copy of the ledger's entry (its units borrowed). On failure
 * nothing is left behind; -ENOSPC with each GPU's free share and memory in
 * *err when nothing fits, -EINVAL for a request that can never fit. */
int node_slice_prepare_locked(struct node *n, const struct node_request *req,
                              struct gs_slice *ret, struct gs_error **err);

/* Free slice `id` for `why` (logged): observers, files, record (saved).
 * 0, -ENOENT when no such slice, or the save's error (the slice is gone
 * from memory either way; the failure is logged). */
int node_slice_release_locked(struct node *n, const char *id, const char *why);

/* Grow (or shrink) recorded slice `id` in place to `milli` on its GPU
 * (memory: the default cap for the new share) and record `units`; its
 * files are rewritten, its id and paths stay. For a pod's slice whose
 * containers have not started yet (the kubelet hands an init container's
 * units to the next container of the pod). 0, -ENOENT, -EINVAL (a whole-GPU
 * slice or share), -ENODEV when its GPU is not healthy, or -ENOSPC when its
 * GPU has no room (nothing changed). */
int node_slice_resize_locked(struct node *n, const char *id, uint32_t milli, const char *units,
                             struct gs_error **err);

/* Put back a slice the node lost but a caller knows is in use (a pod the
 * kubelet still runs after a node reboot lost the ledger): recorded with
 * its own id (next_id moves past it), its files written. Placed where it
 * says even when the GPU is then over-committed (it runs already; logged).
 * 0, -EEXIST when the id is recorded, -ENODEV for a GPU not in the
 * inventory, -EINVAL for an invalid slice. */
int node_slice_restore_locked(struct node *n, const struct gs_slice *s, struct gs_error **err);

/* Pods. Record which pod holds pod slice `id` (replacing what was known).
 * 0, -ENOENT (no such pod slice), -EINVAL (p has an empty namespace or name
 * or an unterminated field), -ENOMEM. Forgotten when the slice is freed. */
int node_set_pod_locked(struct node *n, const char *id, const struct node_pod *p);
/* The pod known to hold slice `id`: 0 and *ret, or -ENOENT (none known). */
int node_pod_locked(const struct node *n, const char *id, struct node_pod *ret);
/* Forget slice id's pod (no-op when none is known). */
void node_forget_pod_locked(struct node *n, const char *id);

/* The ledger's invariants that need the inventory (set it first): every
 * slice's GPU is one of the node's (while every GPU is healthy: an
 * unhealthy one may have answered no uuid; warned then), and the memory
 * caps of the slices on a GPU add up to at most its memory (slices marked
 * overcommitted aside). The shares are checked at load
 * (gs_ledger_check_shares). 0, or -EINVAL naming the slice. */
int node_check_ledger_locked(struct node *n, struct gs_error **err);

/* Persist the ledger; a failing directory sync is logged, not an error. A
 * full disk (ENOSPC, EDQUOT) is -EIO: -ENOSPC means "does not fit". */
int node_save_locked(struct node *n, struct gs_error **err);

/* Try again what could not reach the disk (a read-only or full state
 * directory): the ledger's save (a failed save leaves save_pending set),
 * then the removal of files no slice of the ledger names. Called
 * periodically by the front-end that owns the loop; logs when it succeeds.
 * Returns true while something is still pending. */
bool node_retry_locked(struct node *n);

/* After a start: give every recorded slice whose files are missing or
 * stale its files again, and remove the files and directories of slices
 * the ledger does not hold (a crash between record and files, or a slice
 * freed before a crash). Needs the inventory (configs carry the GPU's
 * context overhead). Returns the number of repairs, or a negative errno. */
int node_reconcile_files_locked(struct node *n);

#endif /* GS_NODE_H */
