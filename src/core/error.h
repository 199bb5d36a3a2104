/* SPDX-License-Identifier: Apache-2.0 */
/* Human-readable errors for places where a person reads them (spec and
 * config parsing, the CLI, API handlers). See docs/internals/error-handling.md.
 *
 * A function that can fail returns 0 (or a positive value) on success and a
 * negative errno on failure; when it also takes `struct gs_error **err`, it
 * sets *err once, at the failure site, with a message naming the field, the
 * value and what is accepted. Callers may wrap the message with context on
 * the way up; whoever reports it frees it. */
#ifndef GS_ERROR_H
#define GS_ERROR_H

#include "macro.h"

struct gs_error {
        int code;      /* negative errno */
        char *msg;     /* never NULL in a set error */
};

/* Set *err (if err is non-NULL and *err is NULL) to a new error with code
 * `code` (a negative errno) and a printf-formatted message. Returns `code`,
 * so a failure site can `return gs_error_set(err, -EINVAL, "...")`. */
int gs_error_set(struct gs_error **err, int code, const char *fmt, ...) GS_PRINTF(3, 4);

/* Prefix the message of *err with a printf-formatted context and ": ".
 * Does nothing if err or *err is NULL. Returns the error's code (or -EINVAL
 * when there is none), for `return gs_error_wrap(err, "file %s", path)`. */
int gs_error_wrap(struct gs_error **err, const char *fmt, ...) GS_PRINTF(2, 3);

/* Free an error; accepts NULL. Returns NULL. */
struct gs_error *gs_error_free(struct gs_error *e);
static inline void gs_error_freep(struct gs_error **e) { *e = gs_error_free(*e); }
#define _cleanup_error_ _cleanup_(gs_error_freep)

/* The message of an error, or a fallback for a NULL error. */
const char *gs_error_msg(const struct gs_error *e);

#endif /* GS_ERROR_H */
