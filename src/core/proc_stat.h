/* SPDX-License-Identifier: Apache-2.0 */
/* The one parser of /proc/<pid>/stat (pure: the caller reads the file).
 * Used by the node layer and by the shim (guest subset). */
#ifndef GS_PROC_STAT_H
#define GS_PROC_STAT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gs_proc_stat {
        char state;          /* field 3: R, S, D, Z, ... */
        pid_t ppid;          /* field 4 */
        uint64_t start_time; /* field 22: clock ticks since boot */
};

/* Parse the text of /proc/<pid>/stat (`len` bytes, need not be
 * NUL-terminated). The command name (field 2) may hold spaces and
 * parentheses: fields after it start after its last ')'. 0 and *ret, or
 * -EINVAL (*ret untouched). */
int gs_proc_stat_parse(const char *text, size_t len, struct gs_proc_stat *ret);

#endif /* GS_PROC_STAT_H */
