/* SPDX-License-Identifier: Apache-2.0 */
/* A stand-in for gpusliced's arbiter service (one slice) for the gate's
 * daemon-mode tests; see gate_faked.c. */
#ifndef GATE_FAKED_H
#define GATE_FAKED_H

#include <stdint.h>

#include <gpuslice/slice_conf.h>

#define FAKED_MAX 4

/* Creates <slice_dir>/compute, listens on sock_path and serves in a thread.
 * 0 or -errno. */
int faked_start(const char *slice_dir, const char *sock_path, const char *slice, unsigned milli,
                enum gs_compute_policy policy);
/* Instance i (< FAKED_MAX) of the stand-in, each its own slice, arbiter
 * and socket; its page shows the outage window `window` (a
 * GS_ARB_WINDOW_PACK word, 0: none). faked_start is instance 0 without
 * a window (the shim falls back to its local arbiter). 0 or -errno. */
int faked_start_at(int i, const char *slice_dir, const char *sock_path, const char *slice,
                   unsigned milli, enum gs_compute_policy policy, uint64_t window);
/* Stops serving: closes every connection, shows no lease, stops beating. */
void faked_stop(void);
void faked_stop_at(int i);
/* As a SIGSTOP'd daemon: stops answering and beating, keeps every
 * connection open and the page as it is. */
void faked_freeze_at(int i);
/* DONE and WANT frames received so far. */
unsigned long faked_dones(void);
unsigned long faked_wants(void);

#endif
