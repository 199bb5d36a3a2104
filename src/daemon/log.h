/* gpusliced's log: one line per record on stderr,
 *   2026-11-30T03:04:05Z gpusliced[1234]: info: message
 * so that `grep ': error: '` finds every failure. */
#ifndef GS_DAEMON_LOG_H
#define GS_DAEMON_LOG_H

#include "macro.h"

enum dlog_level { DLOG_ERROR = 0, DLOG_WARN = 1, DLOG_INFO = 2, DLOG_DEBUG = 3 };

/* Records above this level are dropped before formatting. */
extern enum dlog_level dlog_max_level;

/* Write one record (a trailing newline is added). Never fails visibly. */
void dlog_write(enum dlog_level level, const char *fmt, ...) GS_PRINTF(2, 3);

#define dlog(level, ...)                                   \
        do {                                               \
                if ((level) <= dlog_max_level)             \
                        dlog_write((level), __VA_ARGS__);  \
        } while (0)
#define dlog_error(...) dlog(DLOG_ERROR, __VA_ARGS__)
#define dlog_warn(...) dlog(DLOG_WARN, __VA_ARGS__)
#define dlog_info(...) dlog(DLOG_INFO, __VA_ARGS__)
#define dlog_debug(...) dlog(DLOG_DEBUG, __VA_ARGS__)

#endif /* GS_DAEMON_LOG_H */
