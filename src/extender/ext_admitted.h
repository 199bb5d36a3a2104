/* SPDX-License-Identifier: Apache-2.0 */
/* The admitted-pods record of gpuslice-extender: pods the extender sent
 * to a node (its top score in prioritize) that the node's report does not
 * show yet. Between a scheduling decision and the node's next report
 * (seconds: bind, the kubelet's admission, Allocate, the report's write),
 * every later pod would otherwise see the old free shares and a burst
 * could over-commit one GPU; so each entry's units are charged against
 * the node's reported state until
 *   - the report lists the pod's uid (reports with a "pods" list), or
 *   - without such a list, a report with a newer generation than the one
 *     the decision saw, of a change after the decision: gpusliced's
 *     generation is the wall clock's microseconds at the change
 *     (node_report.h), so a generation above the decision's time, or a
 *     report written in a later second (time), or
 *   - the entry's TTL passes (the pod went elsewhere or never bound), or
 *   - the pod is filtered again (a pod being scheduled is not bound).
 * In memory only: a restarted extender forgets its entries, and the TTL
 * bounds what a lost one costs. Thread-safe (one mutex). */
#ifndef GS_EXT_ADMITTED_H
#define GS_EXT_ADMITTED_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ext_args.h"

#define EXT_ADMITTED_MAX 16384 /* entries; the oldest is dropped beyond */

/* One slice of a pod as placed: the GPUs it takes and what on each. */
struct ext_charge {
        uint64_t gpus;   /* bit i: the report's GPU index i */
        uint32_t milli;  /* per GPU: 1..999, or 1000 for each whole GPU */
        uint64_t memory; /* per GPU, bytes; 0: the default share of the GPU */
};

struct ext_admitted_entry {
        char uid[EXT_UID_MAX];
        char node[EXT_NAME_MAX];
        unsigned n_charges;
        struct ext_charge charges[EXT_MAX_SLICES];
        uint64_t generation; /* of the report the decision saw */
        int64_t at_s;        /* when (unix seconds) */
        uint64_t at_us;      /* when (unix microseconds) */
};

struct ext_admitted {
        pthread_mutex_t lock;
        int64_t ttl_s;
        struct ext_admitted_entry *items;
        size_t n_items, cap_items;
};

/* An empty record whose entries live ttl_s seconds at most. */
void ext_admitted_init(struct ext_admitted *a, int64_t ttl_s);

/* Free the entries; the record is empty and unusable until init. */
void ext_admitted_done(struct ext_admitted *a);

/* Record (or replace) pod uid's decision. 0, or -ENOMEM (nothing
 * recorded; the caller logs). */
int ext_admitted_add(struct ext_admitted *a, const struct ext_admitted_entry *e);

/* Drop pod uid's entry, if any (it is being scheduled again). */
void ext_admitted_forget(struct ext_admitted *a, const char *uid);

/* Drop entries whose TTL passed and, for node `node`, those its report st
 * shows (rules above); then charge what remains for that node to st's
 * GPUs (share and memory saturate at 0). Returns how many entries were
 * charged. */
unsigned ext_admitted_apply(struct ext_admitted *a, const char *node, struct ext_node_state *st,
                            int64_t now_s);

/* The number of entries (for logs and tests). */
size_t ext_admitted_count(struct ext_admitted *a);

#endif /* GS_EXT_ADMITTED_H */
