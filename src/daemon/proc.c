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

int proc_start_time(pid_t pid, uint64_t *ret)
{
        char buf[4096];
        int r = read_proc(pid, "stat", buf, sizeof(buf));
        if (r < 0)
                return r;
        /* The command name (field 2) may hold spaces and parentheses:
         * fields after it start after the last ')'. */
        char *p = strrchr(buf, ')');
        if (!p)
                return -EINVAL;
        p++;
        /* p is at " S ppid ..." : field 3 is the state; field 22 is 19 more. */
        for (int field = 2; field < 22; field++) {
                p = strchr(p, ' ');
                if (!p)
                        return -EINVAL;
                p++;
        }
        errno = 0;
        char *end = NULL;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno || end == p || (*end != ' ' && *end != '\n' && *end != '\0'))
                return -EINVAL;
        *ret = v;
        return 0;
}

int proc_uid(pid_t pid, uid_t *ret)
{
        char buf[4096];
        int r = read_proc(pid, "status", buf, sizeof(buf));
        if (r < 0)
                return r;
        char *p = strstr(buf, "\nUid:");
        if (!p)
                return -EINVAL;
        p += 5;
        errno = 0;
        char *end = NULL;
        unsigned long v = strtoul(p, &end, 10);
        if (errno || end == p || v > (uid_t)-2)
                return -EINVAL;
        *ret = (uid_t)v;
        return 0;
}

pid_t proc_parent(pid_t pid)
{
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return -1;
        buf[n] = '\0';
        const char *p = strrchr(buf, ')');
        if (!p || p[1] != ' ' || !p[2] || p[3] != ' ')
                return -1;
        char *end = NULL;
        errno = 0;
        long ppid = strtol(p + 4, &end, 10);
        if (errno || end == p + 4 || *end != ' ' || ppid < 0 || ppid > INT32_MAX)
                return -1;
        return (pid_t)ppid;
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
