/* SPDX-License-Identifier: Apache-2.0 */
/* The slices of `gpuslice up`: the link between the supervisor and the
 * daemon. Checks that a whole spec fits, gives every start of an API a fresh
 * slice for its process (and the environment that puts the process in it, as
 * `gpuslice run` does), and releases the slice when the process is gone. */
#ifndef GS_UP_SLICES_H
#define GS_UP_SLICES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"
#include "spec.h"

struct up_slices;

struct up_slices_options {
        bool sim;            /* a daemon started for us uses simgpu */
        const char *up_spec; /* the spec's absolute path, recorded with each slice so that
                              * `gpuslice down` finds this up; NULL: not recorded */
        char *const *log_paths; /* per API: its log (slice_log.h), started at each slice and
                                 * given to the shim as GPUSLICE_LOG; NULL or NULL entries: none */
};

/* Connect to the daemon (starting the embedded one when none answers) and
 * prepare to hand out slices for spec's APIs (spec must outlive the object).
 * 0 and *ret, or a negative errno with *err set. */
int up_slices_open(const struct up_slices_options *opt, const struct gs_spec *spec,
                   struct up_slices **ret, struct gs_error **err);

/* Whether every API of the spec fits on the node together, now. 0, or
 * -ENOSPC with *err naming the API and what each GPU would be short of, or
 * another negative errno (daemon unreachable) with *err set. */
int up_slices_check_fit(struct up_slices *s, struct gs_error **err);

struct up_failure;

/* up_hooks.prepare: a slice for process pid of API `api`, and its
 * environment ("K=V\0...") in blob. On failure (-errno) fail says why, and
 * is permanent when the daemon answered and refused (no room, a bad
 * request, not allowed) or the slice's environment cannot be built; a
 * daemon that cannot be reached, is busy or cut off is worth a retry. */
int up_slices_prepare(void *ud, size_t api, pid_t pid, char *blob, size_t size,
                      struct up_failure *fail);

/* up_hooks.exited: release the slice of the process that ended. */
void up_slices_exited(void *ud, size_t api, pid_t pid);

/* up_hooks.stopped: whether the daemon said, as that slice was released,
 * that `gpuslice stop` had stopped it (then it is not restarted). */
bool up_slices_stopped(void *ud, size_t api);

/* Release whatever is still held and check with the daemon that no slice of
 * ours is left. Returns how many are left (0 when all are freed). */
int up_slices_release_all(struct up_slices *s);

/* Free; NULL-safe; returns NULL. */
struct up_slices *up_slices_free(struct up_slices *s);

#endif /* GS_UP_SLICES_H */
