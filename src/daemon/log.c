/* gpusliced's stderr log. See log.h. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum dlog_level dlog_max_level = DLOG_INFO;

void dlog_write(enum dlog_level level, const char *fmt, ...)
{
        static const char *const names[] = { "error", "warning", "info", "debug" };
        int saved_errno = errno; /* for %m */
        char stamp[32], msg[2048], line[2200];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
        va_list ap;
        va_start(ap, fmt);
        errno = saved_errno;
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        /* One record is one line: no embedded newlines. */
        for (char *p = msg; *p; p++)
                if (*p == '\n')
                        *p = ' ';
        int n = snprintf(line, sizeof(line), "%s gpusliced[%d]: %s: %s\n", stamp, (int)getpid(),
                         names[level], msg);
        if (n > 0) {
                ssize_t w = write(STDERR_FILENO, line, GS_MIN((size_t)n, sizeof(line) - 1));
                (void)w;
        }
}
