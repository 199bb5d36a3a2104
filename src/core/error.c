/* SPDX-License-Identifier: Apache-2.0 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"

/* An error that could not be allocated still has a message. */
static struct gs_error oom_error = { -ENOMEM, (char *)"out of memory" };

int gs_error_set(struct gs_error **err, int code, const char *fmt, ...)
{
        if (!err || *err)
                return code;
        struct gs_error *e = gs_malloc(sizeof(*e));
        if (!e) {
                *err = &oom_error;
                return code;
        }
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&e->msg, fmt, ap) < 0)
                e->msg = NULL;
        va_end(ap);
        if (!e->msg) {
                gs_free(e);
                *err = &oom_error;
                return code;
        }
        e->code = code;
        *err = e;
        return code;
}

int gs_error_wrap(struct gs_error **err, const char *fmt, ...)
{
        if (!err || !*err)
                return -EINVAL;
        struct gs_error *e = *err;
        if (e == &oom_error)
                return e->code;
        char *prefix = NULL, *joined = NULL;
        va_list ap;
        va_start(ap, fmt);
        int r = vasprintf(&prefix, fmt, ap);
        va_end(ap);
        if (r >= 0 && asprintf(&joined, "%s: %s", prefix, e->msg) >= 0) {
                free(e->msg);
                e->msg = joined;
        }
        free(prefix);
        return e->code;
}

struct gs_error *gs_error_free(struct gs_error *e)
{
        if (!e || e == &oom_error)
                return NULL;
        free(e->msg);
        gs_free(e);
        return NULL;
}

const char *gs_error_msg(const struct gs_error *e)
{
        return e && e->msg ? e->msg : "unknown error";
}
