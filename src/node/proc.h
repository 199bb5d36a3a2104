/* SPDX-License-Identifier: Apache-2.0 */
/* Facts about processes from /proc, bounded and strictly parsed (the
 * stat text by core's gs_proc_stat_parse). */
#ifndef GS_NODE_PROC_H
#define GS_NODE_PROC_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* The start time of `pid` (clock ticks since boot, /proc/pid/stat field
 * 22): with the pid it identifies one process across pid reuse.
 * 0 or -ESRCH (gone) / -EINVAL (unparsable). */
int proc_start_time(pid_t pid, uint64_t *ret);

/* The real uid of `pid`. 0 or -ESRCH / -EINVAL. */
int proc_uid(pid_t pid, uid_t *ret);

/* The parent pid of `pid`, or -1 when it is gone or unreadable. */
pid_t proc_parent(pid_t pid);

/* Identity of the directory `path` (absolute) as process `pid` sees it,
 * below /proc/<pid>/root (its root and mount namespace), into *ret. Walked
 * one component at a time, refusing symlinks: an absolute symlink there
 * would resolve against the caller's root, so the process could point it
 * at any directory of the host. 0, or a negative errno (-EACCES: the
 * caller may not look into the process, e.g. lacks CAP_SYS_PTRACE;
 * -ENOTDIR/-ELOOP: a component is a symlink or no directory). */
int proc_root_stat_dir(pid_t pid, const char *path, struct stat *ret);

#endif /* GS_NODE_PROC_H */
