/* SPDX-License-Identifier: Apache-2.0 */
/* /proc/<pid>/stat parsing. See proc_stat.h. */
#include "proc_stat.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "number.h"

/* One space-terminated field of stat in [p, end): its bounds. */
static const char *next_field(const char *p, const char *end, const char **ret_field_end)
{
        const char *q = memchr(p, ' ', (size_t)(end - p));
        *ret_field_end = q ? q : end;
        return q ? q + 1 : NULL;
}

int gs_proc_stat_parse(const char *text, size_t len, struct gs_proc_stat *ret)
{
        const char *end = text + len;
        const char *p = NULL;
        for (const char *q = text; q < end; q++)
                if (*q == ')')
                        p = q;
        if (!p || end - p < 3 || p[1] != ' ')
                return -EINVAL;
        p += 2; /* field 3 */
        struct gs_proc_stat s = { 0 };
        const char *fend = NULL;
        for (int field = 3; field <= 22; field++) {
                if (!p)
                        return -EINVAL;
                const char *next = next_field(p, end, &fend);
                size_t n = (size_t)(fend - p);
                uint64_t v;
                if (field == 3) {
                        if (n != 1)
                                return -EINVAL;
                        s.state = *p;
                } else if (field == 4) {
                        if (gs_u64_parse(p, n, INT32_MAX, &v) < 0)
                                return -EINVAL;
                        s.ppid = (pid_t)v;
                } else if (field == 22) {
                        /* The last field of interest may end the text. */
                        while (n && (p[n - 1] == '\n' || p[n - 1] == '\0'))
                                n--;
                        if (gs_u64_parse(p, n, UINT64_MAX, &v) < 0)
                                return -EINVAL;
                        s.start_time = v;
                }
                p = next;
        }
        *ret = s;
        return 0;
}
