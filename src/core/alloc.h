/* SPDX-License-Identifier: Apache-2.0 */
/* The core library allocates through gs_malloc and friends so that tests
 * can fail the Nth allocation and check for a clean -ENOMEM with nothing
 * leaked. In the product they are plain libc calls. */
#ifndef GS_ALLOC_H
#define GS_ALLOC_H

#include <stddef.h>

/* Like malloc/calloc/realloc/strdup/strndup, but fail (return NULL) once the
 * failure countdown set by gs_alloc_fail_after() reaches zero. */
void *gs_malloc(size_t n);
void *gs_calloc(size_t n, size_t size);
void *gs_realloc(void *p, size_t n);
char *gs_strdup(const char *s);
char *gs_strndup(const char *s, size_t n);
/* Free memory from the functions above; accepts NULL. */
void gs_free(void *p);

/* Test hook: make the (n+1)th allocation from now fail, and every one after
 * it; n < 0 turns failure injection off. Not thread-safe; tests only. */
void gs_alloc_fail_after(long n);

#endif /* GS_ALLOC_H */
