/* SPDX-License-Identifier: Apache-2.0 */
/* Facts about processes from /proc. See proc.h. */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "number.h"
#include "proc_stat.h"

static int read_proc(pid_t pid, const char *what, char *buf, size_t size)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? -ESRCH : -errno;
        ssize_t n = read(fd, buf, size - 1);
        if (n < 0)
                return errno == ESRCH ? -ESRCH : -errno;
        buf[n] = '\0';
        return 0;
}

static int read_stat(pid_t pid, struct gs_proc_stat *ret)
{
        char buf[4096];
        int r = read_proc(pid, "stat", buf, sizeof(buf));
        if (r < 0)
                return r;
        return gs_proc_stat_parse(buf, strlen(buf), ret);
}

int proc_start_time(pid_t pid, uint64_t *ret)
{
        struct gs_proc_stat st;
        int r = read_stat(pid, &st);
        if (r < 0)
                return r;
        *ret = st.start_time;
        return 0;
}

int proc_uid(pid_t pid, uid_t *ret)
{
        char buf[4096];
        int r = read_proc(pid, "status", buf, sizeof(buf));
        if (r < 0)
                return r;
        const char *p = strstr(buf, "\nUid:");
        if (!p)
                return -EINVAL;
        p += 5;
        p += strspn(p, " \t");
        uint64_t v;
        if (gs_u64_parse_prefix(p, (uid_t)-2, &v, NULL) < 0)
                return -EINVAL;
        *ret = (uid_t)v;
        return 0;
}

pid_t proc_parent(pid_t pid)
{
        struct gs_proc_stat st;
        return read_stat(pid, &st) < 0 ? -1 : st.ppid;
}

int proc_root_stat_dir(pid_t pid, const char *path, struct stat *ret)
{
        char root[32];
        snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
        _cleanup_close_ int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        for (const char *p = path; *p;) {
                size_t n = strcspn(p, "/");
                if (n > NAME_MAX)
                        return -ENAMETOOLONG;
                if (n) {
                        char comp[NAME_MAX + 1];
                        memcpy(comp, p, n);
                        comp[n] = '\0';
                        int next = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (next < 0)
                                return -errno;
                        close(fd);
                        fd = next;
                }
                p += n + (p[n] == '/');
        }
        return fstat(fd, ret) < 0 ? -errno : 0;
}
