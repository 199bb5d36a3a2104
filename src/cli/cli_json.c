/* SPDX-License-Identifier: Apache-2.0 */
/* JSON string values for the CLI's --json output (cli_json.h). */
#include "cli_json.h"

#include <stdint.h>

void cli_json_string_n(FILE *f, const char *s, size_t len)
{
        fputc('"', f);
        for (size_t i = 0; i < len && s[i]; i++) {
                unsigned char c = (unsigned char)s[i];

                if (c == '"' || c == '\\')
                        fprintf(f, "\\%c", c);
                else if (c < 0x20)
                        fprintf(f, "\\u%04x", c);
                else
                        fputc(c, f);
        }
        fputc('"', f);
}

void cli_json_string(FILE *f, const char *s)
{
        cli_json_string_n(f, s, SIZE_MAX);
}

void cli_json_string_or_null(FILE *f, const char *s)
{
        if (s && *s)
                cli_json_string(f, s);
        else
                fputs("null", f);
}
