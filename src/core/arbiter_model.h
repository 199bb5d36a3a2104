/* SPDX-License-Identifier: Apache-2.0 */
/* A small discrete-event model of one GPU driven by the compute arbiter, for
 * the arbiter's unit tests and bench/bench_arbiter_model.c (no I/O, no
 * clock: simulated time only; deterministic).
 *
 * What it models:
 * - the device runs one unit of work at a time, in submission order, and a
 *   unit cannot be interrupted (time-slicing without preemption);
 * - each slice, while active, saturates: it launches units of `batch`
 *   kernels of `kernel_ns` each (batch > 1 models a CUDA graph: one gate
 *   decision admits the whole graph);
 * - the shim's gate admits a unit while the slice holds the grant, its own
 *   queued work would start before grant_until (the last unit may overrun
 *   the lease by up to its length) and less than ahead_ns of its work is
 *   queued (so a lease cut short is not stuck behind a lease's worth of
 *   queued work);
 * - a hand-off costs `handoff_ns` of device idle time: half for the old
 *   holder's drain report to reach the daemon, half for the new holder to
 *   see its grant. A want/idle message also takes handoff_ns/2. Renewals
 *   are free (the daemon extends the lease in the shared page before it
 *   expires);
 * - the holder reports the device time of its hold exactly (the shim
 *   measures it with events);
 * - a process that dies loses its queued work at once; the daemon learns of
 *   it handoff_ns/2 later (socket hang-up) and calls gs_arbiter_slice_leave.
 * Ground truth is each slice's device time per bin (default 1 ms), from
 * which shares over sliding windows are computed. */
#ifndef GS_ARBITER_MODEL_H
#define GS_ARBITER_MODEL_H

#include <stdint.h>

#include "arbiter.h"

#define GS_ARBM_MAX_SLICES 16

struct gs_arbm_slice {
        uint32_t milli;
        enum gs_compute_policy policy;
        uint64_t kernel_ns; /* length of one kernel, > 0 */
        uint32_t batch;     /* kernels per launch unit (graph); 0 means 1 */
        uint64_t on_ns;     /* saturating from on_ns ... */
        uint64_t off_ns;    /* ... until off_ns; 0 means to the end */
        uint64_t die_ns;    /* the process dies then; 0 means never */
};

struct gs_arbm_config {
        struct gs_arbiter_params params;
        unsigned n;
        struct gs_arbm_slice slices[GS_ARBM_MAX_SLICES];
        uint64_t duration_ns;
        uint64_t handoff_ns; /* device idle per hand-off */
        uint64_t bin_ns;     /* ground-truth resolution; 0 means 1 ms */
        uint64_t probe_ns;   /* result: first unit each slice starts at or after it */
        uint64_t ahead_ns;   /* the gate's launch-ahead bound; 0 means 1 ms */
};

struct gs_arbm_result {
        unsigned n;
        uint64_t bin_ns;
        uint64_t n_bins;
        uint64_t *busy;                               /* n x n_bins, ns per bin */
        uint64_t total_ns[GS_ARBM_MAX_SLICES];        /* device time per slice */
        uint64_t first_after_probe[GS_ARBM_MAX_SLICES]; /* GS_ARB_NEVER if none */
        uint64_t first_after_on[GS_ARBM_MAX_SLICES];    /* first unit start >= on_ns */
        uint64_t max_slice_busy_run_ns;               /* longest hold seen (metrics) */
        uint64_t handoffs;                            /* new grants */
        uint64_t idle_ns;                             /* device idle within duration */
        uint64_t events;                              /* loop iterations */
};

/* Run the model. On success *ret owns res->busy (gs_arbm_result_done).
 * -EINVAL for a bad config (n 0 or above 16, a share out of 1..1000, a zero
 * kernel length or duration), -ENOMEM. */
int gs_arbm_run(const struct gs_arbm_config *cfg, struct gs_arbm_result *ret);

/* Free what gs_arbm_run allocated; NULL-safe, idempotent. */
void gs_arbm_result_done(struct gs_arbm_result *res);

/* Fraction of wall time slice `i` used the device in [from_ns, to_ns). */
double gs_arbm_share(const struct gs_arbm_result *res, unsigned i, uint64_t from_ns,
                     uint64_t to_ns);

/* The worst absolute error, in percentage points, of slice i's share over
 * every window of window_ns (sliding by one bin) inside [from_ns, to_ns),
 * against `expected` (a fraction). 0 when no window fits. */
double gs_arbm_window_error(const struct gs_arbm_result *res, unsigned i, uint64_t window_ns,
                            uint64_t from_ns, uint64_t to_ns, double expected);

#endif /* GS_ARBITER_MODEL_H */
