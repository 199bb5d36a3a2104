/* SPDX-License-Identifier: Apache-2.0 */
/* The slice ledger: every slice the node daemon has granted, persisted
 * crash-safely under the daemon's state directory.
 *
 * The on-disk form is versioned text (see docs/daemon.md, "State"):
 *
 *   gpuslice-ledger 1
 *   next_id 18
 *   slice id=s17 milli=300 memory=6442450944 policy=share pid=4242
 *         start=991234 uid=1000 created=1764471845 name=iris gpu=0,GPU-1234…
 *   sum 5d3c0c1fd1b2a8e4
 *   end 1
 *
 * (one `slice` line per slice, tokens separated by single spaces; `gpu=`
 * repeats for whole-GPU slices; `sum` is gs_ledger_checksum of every byte
 * before its line, so an edited or damaged record is detected; `end`
 * carries the slice count so a truncated file is detected). A ledger
 * without `sum` (written before it existed) still decodes, with `unsummed`
 * set; the next save writes it. Decoding also checks
 * gs_ledger_check_shares. A Kubernetes slice (made by the kubelet
 * device plugin of `gpusliced --kubelet`) carries `kind=k8s`, an id
 * "k8s-<n>" and pid=0 start=0 uid=0: it belongs to no local process and is
 * freed by the plugin when PodResources shows no pod holds it; its
 * `units=` token records the kubelet's unit ids it was allocated for
 * (range text, unit_ids.h). A DRA slice carries `kind=dra claim=<uid>
 * request=<name>` and `share=<shareID>` when the result has one, and
 * `claim_ns=<namespace> claim_name=<name>` when the driver knew them (so
 * the claim and its pods can be found again after a restart). Any slice
 * with a policy of its own for over-use carries `overuse=report|kill|evict`
 * (none: the daemon's, GS_OVERUSE_DEFAULT). Optional tokens may be
 * missing from older ledgers. A slice restored over a full GPU carries
 * `overcommit=1`. Ids of all kinds come from one counter,
 * next_id, so none is reused across restarts. Anything else is rejected as
 * a whole. */
#ifndef GS_LEDGER_H
#define GS_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "inventory.h"
#include "overuse_policy.h"
#include "gpuslice/slice_conf.h"

#define GS_LEDGER_VERSION 1
#define GS_LEDGER_MAX_SLICES 1024
#define GS_LEDGER_MAX_BYTES (4u << 20)   /* state file size limit */
#define GS_SLICE_MAX_GPUS 8              /* most GPUs one whole-GPU slice holds */
#define GS_SLICE_NAME_MAX 63

struct gs_slice_gpu {
        unsigned index;
        char uuid[GS_GPU_UUID_MAX];
};

/* Who a slice belongs to, and so what frees it. */
enum gs_slice_kind {
        GS_SLICE_LOCAL = 0,   /* a local process (gpuslice run/up): freed when it exits */
        GS_SLICE_KUBE = 1,    /* a Kubernetes container: freed by the device plugin */
        GS_SLICE_DRA = 2,     /* a share of a DRA claim: freed when the kubelet unprepares it */
};

#define GS_CLAIM_FIELD_MAX 63
#define GS_CLAIM_NS_MAX 63     /* metadata.namespace: a DNS label */
#define GS_CLAIM_NAME_MAX 253  /* metadata.name: a DNS subdomain */

/* A DRA slice's claim: which share of which claim it is. */
struct gs_slice_claim {
        char uid[GS_CLAIM_FIELD_MAX + 1];     /* the ResourceClaim's metadata.uid */
        char request[GS_CLAIM_FIELD_MAX + 1]; /* the claim's request this result is for */
        char share[GS_CLAIM_FIELD_MAX + 1];   /* the result's shareID ("" when none) */
        char ns[GS_CLAIM_NS_MAX + 1];         /* the claim's namespace ("" when unknown) */
        char name[GS_CLAIM_NAME_MAX + 1];     /* the claim's name ("" when unknown) */
};

struct gs_slice {
        char id[GS_SLICE_ID_MAX + 1];   /* "s<n>" (local) or "k8s-<n>", never reused */
        enum gs_slice_kind kind;
        uint32_t milli;                 /* 1..999 slice, k*1000 whole GPUs */
        uint64_t memory_cap;            /* bytes (whole GPUs: 0, no limit) */
        enum gs_compute_policy policy;
        enum gs_overuse_policy overuse; /* GS_OVERUSE_DEFAULT: the daemon's */
        pid_t pid;                      /* the process the slice lives for (kube: 0) */
        uint64_t start_time;            /* its start time (/proc/pid/stat field 22) */
        uid_t uid;                      /* its owner */
        int64_t created;                /* unix seconds */
        char name[GS_SLICE_NAME_MAX + 1]; /* [A-Za-z0-9._-], "" when none */
        unsigned n_gpus;
        struct gs_slice_gpu gpus[GS_SLICE_MAX_GPUS];
        /* Kubernetes: the kubelet's unit ids (range text, unit_ids.h), or
         * NULL. A slice inside the ledger owns it (gs_ledger_add copies
         * it, remove frees it); a copy of a ledger entry borrows it. */
        char *units;
        struct gs_slice_claim claim;    /* GS_SLICE_DRA only */
        /* Restored onto a GPU without room for it (node_slice_restore_locked:
         * it ran already): outside the share check of gs_ledger_check_shares,
         * token `overcommit=1`. */
        bool overcommitted;
};

struct gs_ledger {
        struct gs_slice *slices;
        size_t n_slices;
        size_t cap;
        uint64_t next_id;               /* next slice number, starts at 1 */
        bool unsummed;                  /* decoded from a ledger without `sum` */
};

/* The ledger's checksum of `len` bytes of text (FNV-1a, 64 bits): the
 * `sum` line's value over every byte before it. Against damage and
 * careless edits, not against someone who can write the state directory
 * (root's): they can compute it too. */
uint64_t gs_ledger_checksum(const char *text, size_t len);

/* The capacity invariants of a ledger, whatever the inventory: on each GPU
 * (by uuid) the shares of its slices add up to at most 1000m,
 * and a whole-GPU slice holds its GPUs alone (slices marked overcommitted
 * aside). 0, or -EINVAL naming the slice and GPU. */
int gs_ledger_check_shares(const struct gs_ledger *l, struct gs_error **err);

/* Initialise an empty ledger (no allocation). */
void gs_ledger_init(struct gs_ledger *l);
/* Free the ledger's storage and leave it empty; NULL-safe. */
void gs_ledger_done(struct gs_ledger *l);

/* True when a slice is whole GPUs (milli a multiple of 1000). */
bool gs_slice_is_whole(const struct gs_slice *s);

/* True for a pod's slice (device plugin or DRA): its processes run in
 * containers that see the slice's files where the node mounts them, it has
 * no process of its own, and only its front-end frees it. */
bool gs_slice_in_container(const struct gs_slice *s);

/* Whether s is a DNS label (1-63 of [a-z0-9-], alphanumeric at both
 * ends: a Kubernetes namespace). */
bool gs_ledger_dns_label_ok(const char *s);

/* Whether s is a DNS subdomain (1-253 of [a-z0-9.-], each dot-separated
 * part alphanumeric at both ends: a Kubernetes object name). */
bool gs_ledger_dns_subdomain_ok(const char *s);

/* Check a slice's fields (id, name, share, GPUs, policies, claim) for validity.
 * Returns 0 or -EINVAL with a message. */
int gs_slice_validate(const struct gs_slice *s, struct gs_error **err);

/* Give `s` the next id ("s<n>" for a local slice, "k8s-<n>" for a
 * Kubernetes one, n = next_id) and advance next_id. */
void gs_ledger_assign_id(struct gs_ledger *l, struct gs_slice *s);

/* The number n of an id gs_ledger_assign_id gave ("s<n>", "k8s-<n>",
 * "dra-<n>"). 0, or -EINVAL when the id ends in no number. */
int gs_slice_id_number(const char *id, uint64_t *ret);

/* Copy a valid slice (and its units text) into the ledger. -EEXIST for a duplicate id, -ENOSPC
 * past GS_LEDGER_MAX_SLICES, -ENOMEM, -EINVAL for an invalid slice. */
int gs_ledger_add(struct gs_ledger *l, const struct gs_slice *s, struct gs_error **err);

/* Remove the slice with this id. 0, or -ENOENT. Pointers into the ledger
 * are invalidated by add and remove. */
int gs_ledger_remove(struct gs_ledger *l, const char *id);

/* The slice with this id, or NULL. */
struct gs_slice *gs_ledger_find(const struct gs_ledger *l, const char *id);

/* Serialise the ledger. On success *ret_buf (gs_free) holds *ret_len bytes
 * of text, NUL-terminated. -ENOMEM on failure. */
int gs_ledger_encode(const struct gs_ledger *l, char **ret_buf, size_t *ret_len);

/* Parse a serialised ledger into `l` (initialised; replaced on success,
 * untouched on failure). Any defect (unknown version, bad token, bad count,
 * duplicate id, oversize) fails with -EINVAL (or -ENOMEM) and a message
 * naming the line. */
int gs_ledger_decode(struct gs_ledger *l, const char *buf, size_t len, struct gs_error **err);

/* Load `path` into `l`. A missing file is -ENOENT (l left empty, no
 * message); an unreadable, oversize or corrupt file fails with a message
 * naming the file. */
int gs_ledger_load(struct gs_ledger *l, const char *path, struct gs_error **err);

/* Save crash-safely through gs_file_replace (atomic_file.h): 0, a
 * negative errno with *err (`path` keeps the previous state), or a positive
 * errno when only the directory sync failed (the new state is in place;
 * callers keep their change and log a warning). */
int gs_ledger_save(const struct gs_ledger *l, const char *path, struct gs_error **err);

#endif /* GS_LEDGER_H */
