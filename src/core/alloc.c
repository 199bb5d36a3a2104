/* SPDX-License-Identifier: Apache-2.0 */
#include "alloc.h"

#include <stdlib.h>
#include <string.h>

static long fail_countdown = -1;

static int should_fail(void)
{
        if (fail_countdown < 0)
                return 0;
        if (fail_countdown == 0)
                return 1;
        fail_countdown--;
        return 0;
}

void gs_alloc_fail_after(long n) { fail_countdown = n; }

void *gs_malloc(size_t n) { return should_fail() ? NULL : malloc(n ? n : 1); }

void *gs_calloc(size_t n, size_t size)
{
        return should_fail() ? NULL : calloc(n ? n : 1, size ? size : 1);
}

void *gs_realloc(void *p, size_t n) { return should_fail() ? NULL : realloc(p, n ? n : 1); }

char *gs_strdup(const char *s) { return should_fail() ? NULL : strdup(s); }

char *gs_strndup(const char *s, size_t n) { return should_fail() ? NULL : strndup(s, n); }

void gs_free(void *p) { free(p); }
