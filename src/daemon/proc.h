/* Facts about processes from /proc, bounded and strictly parsed. */
#ifndef GS_DAEMON_PROC_H
#define GS_DAEMON_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* The start time of `pid` (clock ticks since boot, /proc/pid/stat field
 * 22): with the pid it identifies one process across pid reuse.
 * 0 or -ESRCH (gone) / -EINVAL (unparsable). */
int proc_start_time(pid_t pid, uint64_t *ret);

/* The real uid of `pid`. 0 or -ESRCH / -EINVAL. */
int proc_uid(pid_t pid, uid_t *ret);

#endif /* GS_DAEMON_PROC_H */
