/* SPDX-License-Identifier: Apache-2.0 */
/* The one log of gpuslice's programs: every module writes records here and
 * the program decides where they go (gpusliced and the standalone plugin
 * point it at node_log_stderr, one format for all; tests may capture it).
 * Silent until a sink is set. Not part of the shim (it has its own file
 * log, GPUSLICE_LOG). The sink is set once at start-up, before threads. */
#ifndef GS_LOG_H
#define GS_LOG_H

#include "macro.h"

enum gs_log_level { GS_LOG_ERROR = 0, GS_LOG_WARN = 1, GS_LOG_INFO = 2, GS_LOG_DEBUG = 3 };

/* Receives one formatted record (no trailing newline; may hold any byte
 * but NUL). Must be thread-safe and must not log. */
typedef void (*gs_log_sink_fn)(void *ctx, enum gs_log_level level, const char *msg);

/* Records above this level are dropped before formatting. */
extern enum gs_log_level gs_log_max_level;

/* Send records to fn(ctx, ...) from now on (NULL: drop them). */
void gs_log_set_sink(gs_log_sink_fn fn, void *ctx);

/* Format and send one record; errno is preserved (%m works). */
void gs_log_write(enum gs_log_level level, const char *fmt, ...) GS_PRINTF(2, 3);

/* The level's name as records spell it: "error", "warning", "info", "debug". */
const char *gs_log_level_name(enum gs_log_level level);

#define gs_log(level, ...)                                   \
        do {                                                 \
                if ((level) <= gs_log_max_level)             \
                        gs_log_write((level), __VA_ARGS__);  \
        } while (0)
#define gs_log_error(...) gs_log(GS_LOG_ERROR, __VA_ARGS__)
#define gs_log_warn(...) gs_log(GS_LOG_WARN, __VA_ARGS__)
#define gs_log_info(...) gs_log(GS_LOG_INFO, __VA_ARGS__)
#define gs_log_debug(...) gs_log(GS_LOG_DEBUG, __VA_ARGS__)

#endif /* GS_LOG_H */
