/* SPDX-License-Identifier: Apache-2.0 */
/* A stand-in for gpusliced's arbiter service (one slice) for the gate's
 * daemon-mode tests; see gate_faked.c. */
#ifndef GATE_FAKED_H
#define GATE_FAKED_H

#include <gpuslice/slice_conf.h>

/* Creates <slice_dir>/compute, listens on sock_path and serves in a thread.
 * 0 or -errno. */
int faked_start(const char *slice_dir, const char *sock_path, const char *slice, unsigned milli,
                enum gs_compute_policy policy);
/* Stops serving: closes every connection, shows no lease, stops beating. */
void faked_stop(void);
/* DONE and WANT frames received so far. */
unsigned long faked_dones(void);
unsigned long faked_wants(void);

#endif
