/* SPDX-License-Identifier: Apache-2.0 */
/* The shim's only output: lines appended to the file named by GPUSLICE_LOG.
 * Never stdout or stderr; the fd is O_CLOEXEC; errno is preserved. Only a
 * regular file is used: the open never blocks (O_NONBLOCK, so a FIFO without
 * a reader cannot hang the host process), never follows a final symlink,
 * and anything that is not a regular file is closed again and ignored. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

static int log_fd = -1;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_open_once(void)
{
        const char *path = secure_getenv("GPUSLICE_LOG");
        if (!path || !path[0])
                return;
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK |
                                    O_NOFOLLOW,
                      0640);
        if (fd < 0)
                return;
        struct stat sb;
        if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
                close(fd);
                return;
        }
        log_fd = fd;
}

void shim_log_open(void)
{
        int saved = errno;
        pthread_once(&log_once, log_open_once);
        errno = saved;
}

void shim_log(const char *fmt, ...)
{
        int saved = errno;
        pthread_once(&log_once, log_open_once);
        if (log_fd < 0) {
                errno = saved;
                return;
        }
        char buf[1024];
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int n = snprintf(buf, sizeof(buf), "%lld.%03ld gpuslice[%d]: ", (long long)ts.tv_sec,
                         ts.tv_nsec / 1000000, (int)getpid());
        if (n < 0)
                n = 0;
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
        va_end(ap);
        size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
        if (len > sizeof(buf) - 2)
                len = sizeof(buf) - 2;
        buf[len++] = '\n';
        ssize_t w = write(log_fd, buf, len);
        (void)w;
        errno = saved;
}

/* Child side of fork: the fd is inherited and stays valid. */
