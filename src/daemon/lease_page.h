/* SPDX-License-Identifier: Apache-2.0 */
/* The lease page of one slice, daemon side: the file
 * <state>/pages/<id>/compute (include/gpuslice/arbiter_proto.h), in a
 * directory only the daemon may write (never the tenant's slice
 * directory: a tenant there could replace the page with its own), created
 * by gpusliced mode 0444 and written only through the daemon's own shared
 * mapping (seqlock lease, epoch, heartbeat, futex wake of waiting shim
 * threads). The slice config names it (`lease_page`). */
#ifndef GS_DAEMON_LEASE_PAGE_H
#define GS_DAEMON_LEASE_PAGE_H

#include <stdint.h>

#include "gpuslice/arbiter_proto.h"
#include "gpuslice/slice_conf.h"

struct lease_page {
        int fd;                 /* -1 when closed */
        struct gs_arb_page *p;  /* NULL when closed */
};

#define LEASE_PAGE_INIT { .fd = -1, .p = NULL }

/* Create `<dir>/compute` (dir: the slice's page directory), or take over the page a previous daemon left
 * there (kept in place, so shims that have it mapped see the change):
 * either way it shows no lease, this daemon's `epoch`, a fresh heartbeat
 * and the slice's identity (`id`, `milli`, `policy`, `quantum_ns`). The
 * file is a regular file owned by the daemon, mode 0444, one page long.
 * Returns 0, or a negative errno (pg left closed). */
int lease_page_open(struct lease_page *pg, const char *dir, const char *id, uint32_t milli,
                    enum gs_compute_policy policy, uint64_t quantum_ns, uint64_t epoch,
                    uint64_t now_ns);

/* Publish the lease {gen, start, until} (seqlock write), then bump the
 * futex word and wake every thread waiting on it (shared futex). */
void lease_page_write(struct lease_page *pg, uint64_t gen, uint64_t start_ns, uint64_t until_ns);

/* Refresh the heartbeat. */
void lease_page_beat(struct lease_page *pg, uint64_t now_ns);

/* Update the identity fields after a change of share or policy. */
void lease_page_identity(struct lease_page *pg, uint32_t milli, enum gs_compute_policy policy);

/* Unmap and close (the file stays; removing it is the slice's owner's
 * business). NULL-safe, idempotent. */
void lease_page_close(struct lease_page *pg);

#endif /* GS_DAEMON_LEASE_PAGE_H */
