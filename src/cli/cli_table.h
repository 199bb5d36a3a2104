/* SPDX-License-Identifier: Apache-2.0 */
/* A text table for the CLI's listings: columns sized to their longest cell
 * (names are never cut), numbers right-aligned, two spaces between columns,
 * no trailing spaces. Rows are added first, then printed, all at once or
 * row by row (a listing that interleaves two tables, as ls does). */
#ifndef GS_CLI_TABLE_H
#define GS_CLI_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct cli_table {
        size_t n_cols;
        const char *const *titles; /* n_cols headers */
        const bool *right;         /* n_cols: right-aligned; NULL: all left */
        size_t n_rows, cap;
        char **cells;              /* n_rows x n_cols, owned */
        size_t *width;             /* n_cols */
};

/* An empty table of n_cols columns (titles and right are borrowed). 0 or
 * -ENOMEM. */
int cli_table_init(struct cli_table *t, size_t n_cols, const char *const *titles,
                   const bool *right);

/* Add a row of n_cols cells (copied; NULL is "-"). 0 or -ENOMEM. */
int cli_table_add(struct cli_table *t, const char *const *cells);

/* Print the header line, or row i, after `indent`. */
void cli_table_print_header(const struct cli_table *t, FILE *f, const char *indent);
void cli_table_print_row(const struct cli_table *t, size_t i, FILE *f, const char *indent);

void cli_table_done(struct cli_table *t);

#endif /* GS_CLI_TABLE_H */
