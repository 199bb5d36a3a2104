/* SPDX-License-Identifier: Apache-2.0 */
/* Unit ids and their sets. See unit_ids.h. */
#include "unit_ids.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "number.h"

/* Digits at *p up to a non-digit, as a number below `limit`, no leading
 * zeros (an id is compared as a string by the kubelet: one spelling). */
static int take_number(const char **p, uint64_t limit, uint64_t *ret)
{
        size_t n = strspn(*p, "0123456789");
        if (n == 0 || (n > 1 && **p == '0') || gs_u64_parse(*p, n, limit - 1, ret) < 0)
                return -EINVAL;
        *p += n;
        return 0;
}

int gs_unit_id_parse(const char *id, unsigned *ret_gpu, unsigned *ret_unit)
{
        uint64_t g, u;
        const char *p = id;
        if (strncmp(p, "gpu", 3) != 0)
                return -EINVAL;
        p += 3;
        if (take_number(&p, GS_MAX_GPUS, &g) < 0 || strncmp(p, "-u", 2) != 0)
                return -EINVAL;
        p += 2;
        if (take_number(&p, GS_MILLI_PER_GPU, &u) < 0 || *p)
                return -EINVAL;
        *ret_gpu = (unsigned)g;
        *ret_unit = (unsigned)u;
        return 0;
}

void gs_unit_id_format(unsigned gpu, unsigned unit, char *buf, size_t size)
{
        snprintf(buf, size, "gpu%u-u%u", gpu, unit);
}

static size_t bit_of(unsigned gpu, unsigned unit)
{
        return (size_t)gpu * GS_MILLI_PER_GPU + unit;
}

void gs_unit_set_clear(struct gs_unit_set *s)
{
        memset(s, 0, sizeof(*s));
}

bool gs_unit_set_has(const struct gs_unit_set *s, unsigned gpu, unsigned unit)
{
        if (gpu >= GS_MAX_GPUS || unit >= GS_MILLI_PER_GPU)
                return false;
        size_t b = bit_of(gpu, unit);
        return (s->bits[b / 64] >> (b % 64)) & 1u;
}

bool gs_unit_set_add(struct gs_unit_set *s, unsigned gpu, unsigned unit)
{
        if (gpu >= GS_MAX_GPUS || unit >= GS_MILLI_PER_GPU || gs_unit_set_has(s, gpu, unit))
                return false;
        size_t b = bit_of(gpu, unit);
        s->bits[b / 64] |= 1ull << (b % 64);
        return true;
}

size_t gs_unit_set_count(const struct gs_unit_set *s)
{
        size_t n = 0;
        for (size_t i = 0; i < GS_UNIT_WORDS; i++)
                n += (size_t)__builtin_popcountll(s->bits[i]);
        return n;
}

size_t gs_unit_set_count_gpu(const struct gs_unit_set *s, unsigned gpu)
{
        size_t n = 0;
        for (unsigned u = 0; gpu < GS_MAX_GPUS && u < GS_MILLI_PER_GPU; u++)
                n += gs_unit_set_has(s, gpu, u);
        return n;
}

bool gs_unit_set_intersects(const struct gs_unit_set *a, const struct gs_unit_set *b)
{
        for (size_t i = 0; i < GS_UNIT_WORDS; i++)
                if (a->bits[i] & b->bits[i])
                        return true;
        return false;
}

bool gs_unit_set_is_subset(const struct gs_unit_set *a, const struct gs_unit_set *b)
{
        for (size_t i = 0; i < GS_UNIT_WORDS; i++)
                if (a->bits[i] & ~b->bits[i])
                        return false;
        return true;
}

void gs_unit_set_union(struct gs_unit_set *a, const struct gs_unit_set *b)
{
        for (size_t i = 0; i < GS_UNIT_WORDS; i++)
                a->bits[i] |= b->bits[i];
}

int gs_unit_set_encode(const struct gs_unit_set *s, char **ret)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f)
                return -ENOMEM;
        bool first = true;
        for (unsigned g = 0; g < GS_MAX_GPUS; g++)
                for (unsigned u = 0; u < GS_MILLI_PER_GPU; u++) {
                        if (!gs_unit_set_has(s, g, u))
                                continue;
                        unsigned last = u;
                        while (last + 1 < GS_MILLI_PER_GPU && gs_unit_set_has(s, g, last + 1))
                                last++;
                        if (last == u)
                                fprintf(f, "%s%u.%u", first ? "" : ",", g, u);
                        else
                                fprintf(f, "%s%u.%u-%u", first ? "" : ",", g, u, last);
                        first = false;
                        u = last;
                }
        bool bad = ferror(f) != 0;
        if (fclose(f) != 0 || bad || !buf) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        return 0;
}

int gs_unit_set_decode(const char *text, struct gs_unit_set *ret)
{
        gs_unit_set_clear(ret);
        const char *p = text;
        size_t prev_end = 0; /* one past the last bit of the previous range */
        bool any = false;
        while (*p) {
                uint64_t g, first, last;
                if (any) {
                        if (*p != ',')
                                return -EINVAL;
                        p++;
                }
                if (take_number(&p, GS_MAX_GPUS, &g) < 0 || *p++ != '.' ||
                    take_number(&p, GS_MILLI_PER_GPU, &first) < 0)
                        return -EINVAL;
                last = first;
                if (*p == '-') {
                        p++;
                        if (take_number(&p, GS_MILLI_PER_GPU, &last) < 0 || last <= first)
                                return -EINVAL;
                }
                size_t b = bit_of((unsigned)g, (unsigned)first);
                if (any && b < prev_end)
                        return -EINVAL; /* not ascending, or overlapping */
                for (uint64_t u = first; u <= last; u++)
                        gs_unit_set_add(ret, (unsigned)g, (unsigned)u);
                prev_end = bit_of((unsigned)g, (unsigned)last) + 1;
                any = true;
        }
        return 0;
}
