/* SPDX-License-Identifier: Apache-2.0 */
/* The log sink of gpuslice's programs (gpusliced, gpuslice-kubelet-plugin):
 * one line per record on stderr,
 *   2026-11-30T03:04:05Z gpusliced[1234]: info: message
 * so that `grep ': error: '` finds every failure, whichever module wrote it. */
#ifndef GS_NODE_LOG_STDERR_H
#define GS_NODE_LOG_STDERR_H

#include "log.h"

/* A gs_log_sink_fn; ctx is the program's name (a string that outlives the
 * program's logging). Never fails visibly. */
void node_log_stderr(void *ctx, enum gs_log_level level, const char *msg);

/* Parse a --log-level value ("error", "warning", "info", "debug"). 0 and
 * *ret, or -EINVAL. */
int node_log_level_parse(const char *s, enum gs_log_level *ret);

#endif /* GS_NODE_LOG_STDERR_H */
