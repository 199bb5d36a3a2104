/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced's compute arbiter service: one gs_arbiter per GPU, each slice
 * below one GPU a member of its GPU's arbiter with a lease page
 * (lease_page.h), and the shims' GSAR connections on the daemon's socket
 * (include/gpuslice/arbiter_proto.h). Everything here runs on the event
 * loop's thread with d->lock held (the loop serves every event under it).
 *
 * Who may speak for a slice: a connection's SO_PEERCRED pid must be the
 * slice's process or one of its descendants (parent chain in /proc), with
 * the slice's uid (or root). A process in no slice is refused (ERROR
 * EPERM). Kubernetes slices get a page but no connection maps to them yet
 * (their processes live in containers): their shims run on local
 * enforcement. See docs/daemon.md, "Compute shares". */
#ifndef GS_DAEMON_ARBITER_SERVER_H
#define GS_DAEMON_ARBITER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpuslice/slice_conf.h"

struct daemon;
struct gs_slice;
struct gs_proto_builder;

/* Start the service (after the ledger is reconciled, before serving):
 * bumps the epoch kept in <state_dir>/arbiter.epoch, makes one arbiter per
 * GPU, joins every slice of the ledger and (re)writes its lease page, and
 * registers its timer with epoll. Returns 0 or a negative errno (logged). */
int arbsrv_init(struct daemon *d);

/* Stop: close every shim connection, take every lease back (pages show no
 * lease), unmap the pages, free everything. NULL-safe on a daemon whose
 * service never started. */
void arbsrv_done(struct daemon *d);

/* A slice was created (its directory exists): join its GPU's arbiter and
 * create its page. Whole-GPU slices are ignored. Failures are logged (the
 * slice then runs on its shim's local enforcement). */
void arbsrv_slice_added(struct daemon *d, const struct gs_slice *s);

/* A slice is being freed: leave the arbiter at once (a lease it held ends
 * now), close its shims' connections, unmap its page. No-op when unknown. */
void arbsrv_slice_removed(struct daemon *d, const char *id);

/* True when process pid, connecting as uid, belongs to a slice the
 * arbiter serves (arb_member_of_pid, with the slice's uid or root): it may
 * take the connections kept for slices' processes. False without the
 * service. */
bool arbsrv_pid_in_slice(struct daemon *d, pid_t pid, uid_t uid);

/* True when `buf` starts with the GSAR magic (a shim, not the local API). */
bool arbsrv_is_gsar(const uint8_t *buf, size_t len);

/* Take over a connection whose first frame is GSAR: `fd` (owned from now
 * on; closed on failure), its peer credentials and the bytes read so far
 * (copied). A connection over the limits (arbiter_server_int.h: per uid,
 * the slots kept for root and slices' processes) is answered ERROR EBUSY
 * and closed. */
void arbsrv_adopt(struct daemon *d, int fd, pid_t pid, uid_t uid, const uint8_t *buf, size_t len);

/* The slice's compute record for `gpuslice ls` and `gpuslice top`, when
 * the slice is a member: `slice_gpu_time`, its measured share of its GPU
 * over the last second in milli (from the arbiter's charges);
 * `slice_gate_wait`, the part of the last second it waited for a lease, in
 * milli (both once a second of samples is there); `slice_gate_wait_ns`, the
 * time it waited in all (gs_arbiter_wait_ns: what counts as waiting). */
void arbsrv_add_record(const struct daemon *d, const char *id, struct gs_proto_builder *b);

/* A slice's compute figures since it joined its GPU's arbiter (this run of
 * the daemon), for metrics. */
struct arbsrv_stats {
        uint64_t charged_ns; /* device time charged to it (its work's measured time) */
        uint64_t leases;     /* holds of the GPU it was granted */
        uint64_t wait_ns;    /* time it waited for a lease (gs_arbiter_wait_ns) */
        int measured_milli;  /* its share of the GPU over the last second; -1 unknown */
        int wait_milli;      /* the part of the last second it waited; -1 unknown */
};

/* Fill *ret for slice `id`: true, or false when it is no member (a whole-GPU
 * slice, or the service is not running). With the node's lock held. The
 * waiting time is the daemon's own measure (from a process's WANT to the
 * lease it is granted), not the shims' word; a slice on its shim's local
 * enforcement (no daemon connection, e.g. a pod whose processes cannot be
 * mapped) waits where the daemon cannot see it, and shows none. */
bool arbsrv_slice_stats(const struct daemon *d, const char *id, struct arbsrv_stats *ret);

#endif /* GS_DAEMON_ARBITER_SERVER_H */
