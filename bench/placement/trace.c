/* SPDX-License-Identifier: Apache-2.0 */
/* CSV reading for the placement benchmark. See trace.h. Numbers go through
 * core's one parser (number.h). */
#include "trace.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "number.h"

#define MAX_LINE 4096
#define MAX_COLS 32
#define MAX_ROWS 10000000u

struct fields {
        const char *s[MAX_COLS];
        size_t len[MAX_COLS];
        unsigned n;
};

/* Split a line (its newline removed) at commas; no quoting in the trace. */
static void split(char *line, struct fields *f)
{
        f->n = 0;
        char *s = line;
        for (;;) {
                char *comma = strchr(s, ',');
                if (f->n < MAX_COLS) {
                        f->s[f->n] = s;
                        f->len[f->n] = comma ? (size_t)(comma - s) : strlen(s);
                        f->n++;
                }
                if (!comma)
                        break;
                s = comma + 1;
        }
}

static int column(const struct fields *h, const char *name)
{
        for (unsigned i = 0; i < h->n; i++)
                if (h->len[i] == strlen(name) && memcmp(h->s[i], name, h->len[i]) == 0)
                        return (int)i;
        return -1;
}

/* The numeric field at col (empty: 0). */
static int field_u64(const struct fields *f, int col, uint64_t max, uint64_t *ret)
{
        if (col < 0 || (unsigned)col >= f->n || f->len[col] == 0) {
                *ret = 0;
                return 0;
        }
        return gs_u64_parse(f->s[col], f->len[col], max, ret);
}

static void field_str(const struct fields *f, int col, char *buf, size_t size)
{
        buf[0] = '\0';
        if (col < 0 || (unsigned)col >= f->n)
                return;
        size_t n = f->len[col] < size - 1 ? f->len[col] : size - 1;
        memcpy(buf, f->s[col], n);
        buf[n] = '\0';
}

/* Read path line by line: the header into *h (its text in hbuf), then each
 * row through row(ctx, fields, line number). */
static int read_csv(const char *path, char *hbuf, struct fields *h,
                    int (*row)(void *ctx, const struct fields *f, const struct fields *h,
                               unsigned line),
                    void *ctx)
{
        FILE *fp = fopen(path, "re");
        if (!fp) {
                int r = -errno;
                fprintf(stderr, "%s: %s\n", path, strerror(-r));
                return r;
        }
        char line[MAX_LINE];
        unsigned no = 0;
        int r = 0;
        while (fgets(line, sizeof(line), fp)) {
                no++;
                size_t len = strlen(line);
                if (len && line[len - 1] == '\n')
                        line[--len] = '\0';
                if (len && line[len - 1] == '\r')
                        line[--len] = '\0';
                if (no == 1) {
                        memcpy(hbuf, line, len + 1);
                        split(hbuf, h);
                        continue;
                }
                if (len == 0)
                        continue;
                struct fields f;
                split(line, &f);
                r = row(ctx, &f, h, no);
                if (r < 0) {
                        fprintf(stderr, "%s:%u: bad row\n", path, no);
                        break;
                }
        }
        fclose(fp);
        if (no == 0) {
                fprintf(stderr, "%s: empty file\n", path);
                return -EINVAL;
        }
        return r;
}

struct vec {
        void *items;
        size_t n, cap, size;
};

static void *vec_push(struct vec *v)
{
        if (v->n == v->cap) {
                if (v->n >= MAX_ROWS)
                        return NULL;
                size_t cap = v->cap ? 2 * v->cap : 1024;
                void *p = realloc(v->items, cap * v->size);
                if (!p)
                        return NULL;
                v->items = p;
                v->cap = cap;
        }
        return (char *)v->items + v->size * v->n++;
}

static int node_row(void *ctx, const struct fields *f, const struct fields *h, unsigned line)
{
        (void)line;
        struct trace_node *n = vec_push(ctx);
        if (!n)
                return -ENOMEM;
        uint64_t gpus;
        if (field_u64(f, column(h, "cpu_milli"), UINT32_MAX * 1000ull, &n->cpu_milli) < 0 ||
            field_u64(f, column(h, "memory_mib"), UINT32_MAX * 1024ull, &n->memory_mib) < 0 ||
            field_u64(f, column(h, "gpu"), 16, &gpus) < 0)
                return -EINVAL;
        n->n_gpus = (unsigned)gpus;
        field_str(f, column(h, "model"), n->model, sizeof(n->model));
        return 0;
}

static int pod_row(void *ctx, const struct fields *f, const struct fields *h, unsigned line)
{
        (void)line;
        struct trace_pod *p = vec_push(ctx);
        if (!p)
                return -ENOMEM;
        uint64_t gpus, milli;
        if (field_u64(f, column(h, "cpu_milli"), UINT32_MAX * 1000ull, &p->cpu_milli) < 0 ||
            field_u64(f, column(h, "memory_mib"), UINT32_MAX * 1024ull, &p->memory_mib) < 0 ||
            field_u64(f, column(h, "num_gpu"), 16, &gpus) < 0 ||
            field_u64(f, column(h, "gpu_milli"), 1000, &milli) < 0)
                return -EINVAL;
        p->n_gpus = (unsigned)gpus;
        p->gpu_milli = gpus == 0 ? 0 : gpus > 1 ? 1000 : (uint32_t)milli;
        if (gpus == 1 && milli == 0)
                return -EINVAL;
        field_str(f, column(h, "gpu_spec"), p->spec, sizeof(p->spec));
        return 0;
}

static int need_columns(const char *path, const struct fields *h, const char *const *names)
{
        for (; *names; names++)
                if (column(h, *names) < 0) {
                        fprintf(stderr, "%s: no column '%s' in the header\n", path, *names);
                        return -EINVAL;
                }
        return 0;
}

/* Read the rows of path (records of `size` bytes, one per row through
 * `row`) into *ret and *ret_n, once the header has every column of cols. */
static int read_table(const char *path, const char *const *cols, size_t size,
                      int (*row)(void *ctx, const struct fields *f, const struct fields *h,
                                 unsigned line),
                      void **ret, size_t *ret_n)
{
        struct vec v = { .size = size };
        char hbuf[MAX_LINE];
        struct fields h = { .n = 0 };
        int r = read_csv(path, hbuf, &h, row, &v);
        if (r >= 0)
                r = need_columns(path, &h, cols);
        if (r < 0) {
                free(v.items);
                return r;
        }
        *ret = v.items;
        *ret_n = v.n;
        return 0;
}

int trace_nodes_read(const char *path, struct trace_node **ret, size_t *ret_n)
{
        static const char *const cols[] = { "cpu_milli", "memory_mib", "gpu", "model", NULL };
        void *items = NULL;
        int r = read_table(path, cols, sizeof(struct trace_node), node_row, &items, ret_n);
        if (r == 0)
                *ret = items;
        return r;
}

int trace_pods_read(const char *path, struct trace_pod **ret, size_t *ret_n)
{
        static const char *const cols[] = { "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", NULL };
        void *items = NULL;
        int r = read_table(path, cols, sizeof(struct trace_pod), pod_row, &items, ret_n);
        if (r == 0)
                *ret = items;
        return r;
}
