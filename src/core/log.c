/* SPDX-License-Identifier: Apache-2.0 */
/* The log sink. See log.h. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

enum gs_log_level gs_log_max_level = GS_LOG_INFO;
static gs_log_sink_fn sink_fn;
static void *sink_ctx;

void gs_log_set_sink(gs_log_sink_fn fn, void *ctx)
{
        sink_fn = fn;
        sink_ctx = ctx;
}

const char *gs_log_level_name(enum gs_log_level level)
{
        static const char *const names[] = { "error", "warning", "info", "debug" };
        return (unsigned)level < GS_ARRAY_SIZE(names) ? names[level] : "debug";
}

void gs_log_write(enum gs_log_level level, const char *fmt, ...)
{
        int saved_errno = errno;
        if (!sink_fn)
                return;
        char msg[2048];
        va_list ap;
        va_start(ap, fmt);
        errno = saved_errno; /* for %m */
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        sink_fn(sink_ctx, level, msg);
        errno = saved_errno;
}
