/* SPDX-License-Identifier: Apache-2.0 */
/* The one crash-safe file replace of gpuslice: write `path`.tmp (never
 * following a link), fsync it, give it its mode, rename it over `path`, and
 * fsync the directory. Every state file, slice config and CDI spec is
 * written through it. Also the bounded whole-file reader they are read
 * back with. */
#ifndef GS_ATOMIC_FILE_H
#define GS_ATOMIC_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "error.h"

/* Replace `path` with `len` bytes of data, mode `mode` (umask does not
 * apply). Returns 0 when all of it succeeded. On failure (negative errno,
 * *err names the file) `path` still holds its previous content and no
 * temp file is left. Once the rename has succeeded the replace has
 * happened: if only the directory sync then fails, the result is a
 * positive errno (e.g. EIO) with *err untouched; callers keep their change
 * and should log a warning that it may not survive a power loss. */
int gs_file_replace(const char *path, const void *data, size_t len, mode_t mode,
                    struct gs_error **err);

/* Read the regular file `path` (not a link, not a FIFO, at most max bytes)
 * into *ret_buf (malloc'ed, NUL-terminated) and *ret_len. -ENOENT for a
 * missing file with no message; otherwise a negative errno with *err
 * naming the file (-EFBIG over max, -EINVAL not a regular file: what it is
 * instead, "a FIFO", "a symbolic link", ...). */
int gs_file_read(const char *path, size_t max, char **ret_buf, size_t *ret_len,
                 struct gs_error **err);

/* What kind of file `mode` (st_mode) is, for messages: "a regular file",
 * "a directory", "a FIFO", "a symbolic link", "a socket", "a character
 * device", "a block device" or "an unknown kind of file". */
const char *gs_file_kind_name(mode_t mode);

/* Open the state file `path` with `flags` (O_RDONLY, O_RDWR, O_WRONLY,
 * optionally O_CREAT, O_APPEND, O_TRUNC; `mode` for O_CREAT), always adding
 * O_NOFOLLOW, O_NONBLOCK (a FIFO or device must not block the open) and
 * O_CLOEXEC, and accept only a regular file. Returns the fd (the caller
 * closes it); -ENOENT for a missing file without O_CREAT (no message);
 * -ELOOP for a symbolic link, -EINVAL for anything else that is not a
 * regular file, each with *err "<what> <path> is a FIFO, not a regular
 * file" (`what`: "ledger", "lock", ...; NULL: the path alone); or
 * another negative errno with a message. */
int gs_state_open(const char *path, int flags, mode_t mode, const char *what,
                  struct gs_error **err);

/* Whether the directory `dir` (its lstat in *st) may hold files that a
 * process running as `euid` trusts: a directory, owned by euid (or by root
 * too when root_ok), and writable by nobody else. A group or other write
 * bit is refused even with the sticky bit: sticky stops others from
 * removing or renaming the owner's entries, not from creating, first, the
 * names the owner will use (a `conf` symlink, a `lock`). Returns 0, or
 * -EPERM with *err "refusing <what> <dir>: ..." naming the owner or mode
 * found and what is expected. Shared by the CLI's check of the daemon's
 * socket directory and the daemon's check of its state directory. */
int gs_dir_check_trusted(const char *what, const char *dir, const struct stat *st, unsigned euid,
                         bool root_ok, struct gs_error **err);

#endif /* GS_ATOMIC_FILE_H */
