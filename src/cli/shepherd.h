/* SPDX-License-Identifier: Apache-2.0 */
/* The shepherd: a small process between `gpuslice run`/`up` and each command
 * they start, so that nothing a command starts outlives the gpuslice process
 * that started it, whatever kills that process (kill -9 included).
 *
 *   gpuslice (run/up) --- shepherd --- command --- its children...
 *
 * The shepherd is a child subreaper (PR_SET_CHILD_SUBREAPER): every
 * descendant of the command whose parent dies (a double fork, a daemon that
 * setsid()s) is reparented to it instead of init. Its parent-death signal
 * tells it when gpuslice dies; the command's parent-death signal is SIGKILL,
 * so it dies with the shepherd. When gpuslice dies, or when the command's
 * own process ends, the shepherd kills (SIGKILL) every process left below
 * it, waits for them, and exits with the command's status (the same exit
 * code, or the same signal). The daemon frees the command's slice once its
 * process is gone (it follows the pid with a pidfd). */
#ifndef GS_CLI_SHEPHERD_H
#define GS_CLI_SHEPHERD_H

#include <stdbool.h>
#include <sys/types.h>

/* Fork a shepherd and, below it, the command's process. Like fork(2), it
 * returns twice: 0 in the command's process (its signal mask is the
 * caller's; with own_group it leads a new process group; its parent-death
 * signal is SIGKILL), and the shepherd's pid (> 0) in the caller, with the
 * command's pid in *ret_cmd. The caller waits for the shepherd (its child),
 * whose status mirrors the command's, and signals the command itself
 * (*ret_cmd, or its group with own_group). The shepherd ignores signals
 * other than its parent's death and closes every descriptor but 0-2.
 * Returns a negative errno (nothing started) when fork fails. */
pid_t shepherd_fork(bool own_group, pid_t *ret_cmd);

#endif /* GS_CLI_SHEPHERD_H */
