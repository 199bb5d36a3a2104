/* SPDX-License-Identifier: Apache-2.0 */
/* The log of a slice: one file per slice name, kept after the slice is
 * gone, where the shim writes (GPUSLICE_LOG: its refusals, its gate) and,
 * for `gpuslice up`, the API's own output. `gpuslice logs NAME` reads it.
 *
 * Where (slice_log_dir): --log-dir, else $GPUSLICE_LOG_DIR, else for root
 * /var/log/gpuslice, else $XDG_STATE_HOME/gpuslice/logs, else
 * ~/.local/state/gpuslice/logs. The file is DIR/NAME.log; at a slice's start
 * a file past SLICE_LOG_ROTATE_BYTES becomes NAME.log.1 (one generation
 * kept). A GPUSLICE_LOG the user set wins: that slice's log goes there. */
#ifndef GS_CLI_SLICE_LOG_H
#define GS_CLI_SLICE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"

#define SLICE_LOG_ROTATE_BYTES (16u << 20)
#define SLICE_LOG_DIR_ENV "GPUSLICE_LOG_DIR"

/* The log directory (see above); override: --log-dir, or NULL. 0, or
 * -ENAMETOOLONG / -ENOENT (no home directory) with *err set. */
int slice_log_dir(const char *override, char *buf, size_t size, struct gs_error **err);

/* DIR/NAME.log. name: a slice name or id ([A-Za-z0-9._-], not starting
 * with '.'). 0, or -EINVAL / -ENAMETOOLONG with *err naming it. */
int slice_log_path(const char *dir, const char *name, char *buf, size_t size,
                   struct gs_error **err);

/* Get the log at path ready for a new slice: its directory made (0700;
 * 0750 for root), the file rotated when too big, created (0640) if absent,
 * and `line` appended as "<time> gpuslice[<pid>]: line" (the shim's
 * format). Refuses anything but a regular file (no symlink followed).
 * 0, or a negative errno with *err set. */
int slice_log_start(const char *path, const char *line, struct gs_error **err);

/* Open the log at path for appending (O_APPEND, O_CLOEXEC, O_NOFOLLOW, a
 * regular file only): the fd, or a negative errno. */
int slice_log_open_append(const char *path);

struct slice_env;

/* Append GPUSLICE_LOG=path to a slice's environment (slice_env.h); sets
 * e->overflow when it does not fit. */
void slice_log_env_add(struct slice_env *e, const char *path);

struct cli_slice;

/* For `gpuslice run`: start the log of slice s (named by its name, else its
 * id) in the log directory (log_dir: --log-dir, or NULL) and add
 * GPUSLICE_LOG for it to e, unless the user set GPUSLICE_LOG. 0, or a
 * negative errno with *err set (the command may run without a log). */
int slice_log_for_slice(const char *log_dir, const struct cli_slice *s, struct slice_env *e,
                        struct gs_error **err);

/* Whether the user set GPUSLICE_LOG themselves (then it is left alone). */
bool slice_log_user_set(void);

#endif /* GS_CLI_SLICE_LOG_H */
