/* SPDX-License-Identifier: Apache-2.0 */
/* Small language helpers shared by every part of gpuslice: cleanup
 * attributes, ownership transfer, export and test-visibility markers. */
#ifndef GS_MACRO_H
#define GS_MACRO_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define GS_EXPORT __attribute__((visibility("default")))
#define GS_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define GS_UNUSED __attribute__((unused))

/* GS_TESTABLE marks functions that are file-local in the product and
 * visible to unit tests (the test build of the core defines GS_TESTING). */
#ifdef GS_TESTING
#define GS_TESTABLE
#else
#define GS_TESTABLE static
#endif

#define GS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define GS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define GS_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Round x up to a multiple of the power of two `align`. */
#define GS_ALIGN_UP(x, align) (((x) + ((align) - 1)) & ~((__typeof__(x))(align) - 1))

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void gs_freep(void *p) { free(*(void **)p); }
static inline void gs_closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}
static inline void gs_fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}

#define _cleanup_free_ _cleanup_(gs_freep)
#define _cleanup_close_ _cleanup_(gs_closep)
#define _cleanup_fclose_ _cleanup_(gs_fclosep)

/* Hand ownership of a pointer or fd on: returns the value and clears the
 * variable so its cleanup does nothing. */
#define TAKE_PTR(p) ({ __typeof__(p) _tp = (p); (p) = NULL; _tp; })
#define TAKE_FD(fd) ({ int _tf = (fd); (fd) = -1; _tf; })

#endif /* GS_MACRO_H */
