/* SPDX-License-Identifier: Apache-2.0 */
/* The stderr log sink. See log_stderr.h. */
#include "log_stderr.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void node_log_stderr(void *ctx, enum gs_log_level level, const char *msg)
{
        const char *program = ctx ? ctx : "gpuslice";
        char stamp[32], line[2300];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
        int n = snprintf(line, sizeof(line), "%s %s[%d]: %s: %s\n", stamp, program, (int)getpid(),
                         gs_log_level_name(level), msg);
        if (n <= 0)
                return;
        size_t len = GS_MIN((size_t)n, sizeof(line) - 1);
        /* One record is one line: no embedded newlines. */
        for (size_t i = 0; i + 1 < len; i++)
                if (line[i] == '\n')
                        line[i] = ' ';
        line[len - 1] = '\n';
        ssize_t w = write(STDERR_FILENO, line, len);
        (void)w;
}

int node_log_level_parse(const char *s, enum gs_log_level *ret)
{
        static const enum gs_log_level levels[] = { GS_LOG_ERROR, GS_LOG_WARN, GS_LOG_INFO,
                                                    GS_LOG_DEBUG };
        for (size_t i = 0; i < GS_ARRAY_SIZE(levels); i++)
                if (strcmp(s, gs_log_level_name(levels[i])) == 0) {
                        *ret = levels[i];
                        return 0;
                }
        return -EINVAL;
}
