/* SPDX-License-Identifier: Apache-2.0 */
/* Text tables sized to their content (cli_table.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli_table.h"

int cli_table_init(struct cli_table *t, size_t n_cols, const char *const *titles,
                   const bool *right)
{
        *t = (struct cli_table){ .n_cols = n_cols, .titles = titles, .right = right };
        t->width = calloc(n_cols, sizeof(*t->width));
        if (!t->width)
                return -ENOMEM;
        for (size_t c = 0; c < n_cols; c++)
                t->width[c] = strlen(titles[c]);
        return 0;
}

int cli_table_add(struct cli_table *t, const char *const *cells)
{
        if (t->n_rows == t->cap) {
                size_t cap = t->cap ? 2 * t->cap : 16;
                char **grown = realloc(t->cells, cap * t->n_cols * sizeof(*grown));
                if (!grown)
                        return -ENOMEM;
                t->cells = grown;
                t->cap = cap;
        }
        char **row = t->cells + t->n_rows * t->n_cols;
        for (size_t c = 0; c < t->n_cols; c++) {
                row[c] = strdup(cells[c] ? cells[c] : "-");
                if (!row[c]) {
                        while (c-- > 0)
                                free(row[c]);
                        return -ENOMEM;
                }
        }
        for (size_t c = 0; c < t->n_cols; c++)
                if (strlen(row[c]) > t->width[c])
                        t->width[c] = strlen(row[c]);
        t->n_rows++;
        return 0;
}

static void print_cells(const struct cli_table *t, const char *const *cells, FILE *f,
                        const char *indent)
{
        size_t end = t->n_cols; /* trailing empty cells are left out */
        while (end > 1 && !cells[end - 1][0])
                end--;
        fputs(indent, f);
        for (size_t c = 0; c < end; c++) {
                bool last = c + 1 == end;
                int w = (int)t->width[c];
                if (t->right && t->right[c])
                        fprintf(f, "%*s", w, cells[c]);
                else if (last)
                        fputs(cells[c], f);
                else
                        fprintf(f, "%-*s", w, cells[c]);
                if (!last)
                        fputs("  ", f);
        }
        fputc('\n', f);
}

void cli_table_print_header(const struct cli_table *t, FILE *f, const char *indent)
{
        print_cells(t, t->titles, f, indent);
}

void cli_table_print_row(const struct cli_table *t, size_t i, FILE *f, const char *indent)
{
        if (i < t->n_rows)
                print_cells(t, (const char *const *)(t->cells + i * t->n_cols), f, indent);
}

void cli_table_done(struct cli_table *t)
{
        for (size_t i = 0; i < t->n_rows * t->n_cols; i++)
                free(t->cells[i]);
        free(t->cells);
        free(t->width);
        *t = (struct cli_table){ 0 };
}
