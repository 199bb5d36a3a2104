/* SPDX-License-Identifier: Apache-2.0 */
/* Crash-safe file replace and bounded reads. See atomic_file.h. */
#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"

/* Tests replace it to simulate a directory that cannot be synced. */
GS_TESTABLE int (*atomic_dir_fsync)(int fd) = fsync;

static int write_all(int fd, const char *buf, size_t len)
{
        while (len) {
                ssize_t n = write(fd, buf, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -EIO;
                buf += n;
                len -= (size_t)n;
        }
        return 0;
}

static int sync_dir(const char *path)
{
        _cleanup_free_ char *dircopy = strdup(path);
        if (!dircopy)
                return -ENOMEM;
        _cleanup_close_ int dfd = open(dirname(dircopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        errno = 0;
        if (dfd < 0 || atomic_dir_fsync(dfd) < 0)
                return errno ? -errno : -EIO;
        return 0;
}

int gs_file_replace(const char *path, const void *data, size_t len, mode_t mode,
                    struct gs_error **err)
{
        _cleanup_free_ char *tmp = NULL;
        if (asprintf(&tmp, "%s.tmp", path) < 0) {
                tmp = NULL;
                return gs_error_set(err, -ENOMEM, "out of memory");
        }
        /* A leftover temp file (a crash mid-write) is ours to replace; a
         * link, FIFO or device there is refused, never followed or
         * blocked on. */
        int fd = gs_state_open(tmp, O_WRONLY | O_CREAT | O_TRUNC, mode & 0777, NULL, err);
        if (fd < 0)
                return fd;
        int r = write_all(fd, data, len);
        if (r == 0 && fchmod(fd, mode) < 0)
                r = -errno;
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0) {
                unlink(tmp);
                return gs_error_set(err, r, "cannot write %s: %s", path, strerror(-r));
        }
        /* The new content is in place: from here on the replace has
         * happened, whatever the directory sync says. */
        r = sync_dir(path);
        return r < 0 ? -r : 0;
}

int gs_file_read(const char *path, size_t max, char **ret_buf, size_t *ret_len,
                 struct gs_error **err)
{
        /* A FIFO put in the file's place must not hang us, a link is not
         * followed. */
        _cleanup_close_ int fd = gs_state_open(path, O_RDONLY, 0, NULL, err);
        if (fd < 0)
                return fd;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return gs_error_set(err, -errno, "cannot stat %s: %s", path, strerror(errno));
        if ((uint64_t)st.st_size > max)
                return gs_error_set(err, -EFBIG, "%s is larger than %zu bytes", path, max);
        size_t size = (size_t)st.st_size;
        _cleanup_free_ char *buf = malloc(size + 1);
        if (!buf)
                return gs_error_set(err, -ENOMEM, "out of memory");
        size_t got = 0;
        while (got < size) {
                ssize_t n = read(fd, buf + got, size - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int e = errno;
                        return gs_error_set(err, -e, "cannot read %s: %s", path, strerror(e));
                }
                if (n == 0)
                        break;
                got += (size_t)n;
        }
        buf[got] = '\0';
        *ret_buf = TAKE_PTR(buf);
        *ret_len = got;
        return 0;
}

const char *gs_file_kind_name(mode_t mode)
{
        switch (mode & S_IFMT) {
        case S_IFREG: return "a regular file";
        case S_IFDIR: return "a directory";
        case S_IFIFO: return "a FIFO";
        case S_IFLNK: return "a symbolic link";
        case S_IFSOCK: return "a socket";
        case S_IFCHR: return "a character device";
        case S_IFBLK: return "a block device";
        default: return "an unknown kind of file";
        }
}

int gs_state_open(const char *path, int flags, mode_t mode, const char *what,
                  struct gs_error **err)
{
        const char *sep = what && *what ? " " : "";
        what = what ? what : "";
        int fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, mode);
        if (fd < 0) {
                int e = errno;
                struct stat st;
                if (e == ENOENT && !(flags & O_CREAT))
                        return -ENOENT;
                /* O_NOFOLLOW on a link: ELOOP; a socket: ENXIO; a
                 * directory opened for writing: EISDIR; a device on a
                 * nodev mount: EACCES. Name what is there instead. */
                if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
                        return gs_error_set(err, e == ELOOP ? -ELOOP : -EINVAL,
                                            "%s%s%s is %s, not a regular file%s", what, sep, path,
                                            gs_file_kind_name(st.st_mode),
                                            S_ISLNK(st.st_mode) ? " (links are never followed)"
                                                                : "");
                return gs_error_set(err, -e, "cannot %s %s%s%s: %s",
                                    flags & O_CREAT ? "create" : "open", what, sep, path,
                                    strerror(e));
        }
        struct stat st;
        if (fstat(fd, &st) < 0) {
                int e = errno;
                close(fd);
                return gs_error_set(err, -e, "cannot stat %s%s%s: %s", what, sep, path,
                                    strerror(e));
        }
        if (!S_ISREG(st.st_mode)) {
                close(fd);
                return gs_error_set(err, -EINVAL, "%s%s%s is %s, not a regular file", what, sep,
                                    path, gs_file_kind_name(st.st_mode));
        }
        return fd;
}

int gs_dir_check_trusted(const char *what, const char *dir, const struct stat *st, unsigned euid,
                         bool root_ok, struct gs_error **err)
{
        if (!S_ISDIR(st->st_mode))
                return gs_error_set(err, -EPERM, "refusing %s %s: it is %s, not a directory", what,
                                    dir, gs_file_kind_name(st->st_mode));
        if (st->st_uid != euid && !(root_ok && st->st_uid == 0))
                return gs_error_set(err, -EPERM,
                                    "refusing %s %s: the directory is owned by uid %u, expected "
                                    "uid %u (%s)%s; another user may have created it",
                                    what, dir, (unsigned)st->st_uid, euid,
                                    root_ok ? "you" : "this process's user",
                                    root_ok ? " or root" : "");
        if (st->st_mode & (S_IWGRP | S_IWOTH))
                return gs_error_set(err, -EPERM,
                                    "refusing %s %s: the directory (mode %04o) is writable by "
                                    "group or others, expected only its owner (uid %u) to write "
                                    "there",
                                    what, dir, (unsigned)(st->st_mode & 07777),
                                    (unsigned)st->st_uid);
        return 0;
}
