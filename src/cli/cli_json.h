/* SPDX-License-Identifier: Apache-2.0 */
/* JSON string values for the CLI's --json output (ps, ls, events, top):
 * '"' and '\' escaped, other control bytes as \u00XX, the rest (UTF-8
 * included) as is. */
#ifndef GS_CLI_JSON_H
#define GS_CLI_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Write s (at most len bytes; up to a NUL before that) to f as a JSON string. */
void cli_json_string_n(FILE *f, const char *s, size_t len);

/* Write the NUL-terminated s to f as a JSON string. */
void cli_json_string(FILE *f, const char *s);

/* Write s to f as a JSON string, or null when s is NULL or empty. */
void cli_json_string_or_null(FILE *f, const char *s);

#endif /* GS_CLI_JSON_H */
