/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI's option layer (cli_opts.h): getopt_long built from a command's
 * table, its errors in gpuslice's words, its --help and the dump of every
 * table for scripts/gen-cli-docs. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_json.h"
#include "cli_opts.h"
#include "macro.h"

/* getopt_long's val for table entry i without a letter (above any char). */
#define LONG_ONLY_BASE 256
/* Options of one command at most (the help is added to them). */
#define OPTS_MAX 32
/* The widest left column of the help ("  -o, --output FORMAT  "). */
#define HELP_COL_MAX 30

static const struct cli_opt help_opt = { 'h', 'h', "help", NULL, "print this help and exit", NULL };

/* The table's entry i; i == n_opts is the help. */
static const struct cli_opt *entry(const struct cli_cmd *cmd, size_t i)
{
        return i < cmd->n_opts ? &cmd->opts[i] : &help_opt;
}

static int val_of(const struct cli_cmd *cmd, size_t i)
{
        const struct cli_opt *o = entry(cmd, i);
        return o->letter ? (unsigned char)o->letter : LONG_ONLY_BASE + (int)i;
}

/* The entry whose getopt val is v, or NULL. */
static const struct cli_opt *by_val(const struct cli_cmd *cmd, int v)
{
        for (size_t i = 0; i <= cmd->n_opts && i <= OPTS_MAX; i++)
                if (val_of(cmd, i) == v)
                        return entry(cmd, i);
        return NULL;
}

void cli_args_init(struct cli_args *a, const struct cli_cmd *cmd, int argc, char **argv)
{
        *a = (struct cli_args){ .cmd = cmd, .argc = argc, .argv = argv, .ind = 1 };
}

/* Print the usage line and where the options are told, after an error. */
static void usage_hint(const struct cli_cmd *cmd)
{
        fprintf(stderr, "Usage: gpuslice %s %s\nRun 'gpuslice help %s' for its options.\n",
                cmd->name, cmd->usage, cmd->name);
}

int cli_usage_error(const struct cli_cmd *cmd, const char *fmt, ...)
{
        va_list ap;
        fprintf(stderr, "gpuslice %s: ", cmd->name);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        usage_hint(cmd);
        return CLI_EXIT_USAGE;
}

/* The error for an unknown or ambiguous long option `word` ("--x=1"). */
static int bad_long(const struct cli_cmd *cmd, const char *word)
{
        size_t len = strcspn(word, "=");
        char cands[256] = "";
        size_t n = 0, used = 0;
        for (size_t i = 0; i <= cmd->n_opts && len > 2; i++) {
                const char *name = entry(cmd, i)->name;
                if (strncmp(name, word + 2, len - 2) != 0)
                        continue;
                int w = snprintf(cands + used, sizeof(cands) - used, "%s--%s", n ? ", " : "", name);
                if (w > 0 && (size_t)w < sizeof(cands) - used)
                        used += (size_t)w;
                n++;
        }
        if (n > 1)
                cli_usage_error(cmd, "option '%.*s' is ambiguous: %s", (int)len, word, cands);
        else
                cli_usage_error(cmd, "unknown option '%.*s'", (int)len, word);
        return CLI_ARGS_BAD;
}

int cli_args_next(struct cli_args *a)
{
        const struct cli_cmd *cmd = a->cmd;
        struct option longopts[OPTS_MAX + 2];
        char shortopts[2 * OPTS_MAX + 8];
        size_t ns = 0, n = cmd->n_opts < OPTS_MAX ? cmd->n_opts : OPTS_MAX;

        if (cmd->flags & CLI_CMD_OPERANDS_FIRST)
                shortopts[ns++] = '+';
        shortopts[ns++] = ':'; /* a missing argument returns ':' */
        for (size_t i = 0; i <= n; i++) {
                const struct cli_opt *o = entry(cmd, i == n ? cmd->n_opts : i);
                size_t k = i == n ? cmd->n_opts : i;
                longopts[i] = (struct option){ o->name, o->arg ? required_argument : no_argument,
                                               NULL, val_of(cmd, k) };
                if (o->letter) {
                        shortopts[ns++] = o->letter;
                        if (o->arg)
                                shortopts[ns++] = ':';
                }
        }
        longopts[n + 1] = (struct option){ 0 };
        shortopts[ns] = '\0';

        /* getopt's state is global: restart it on this argv at the first call. */
        if (!a->started)
                optind = 0;
        a->started = true;
        opterr = 0;
        int li = -1;
        int c = getopt_long(a->argc, a->argv, shortopts, longopts, &li);
        a->ind = optind;
        a->arg = optarg;
        if (c == -1)
                return 0;
        if (c == ':') {
                const struct cli_opt *o = by_val(cmd, optopt);
                if (o && optopt < LONG_ONLY_BASE && a->argv[optind - 1][1] != '-')
                        cli_usage_error(cmd, "option '-%c' needs an argument (%s)", o->letter,
                                        o->arg);
                else
                        cli_usage_error(cmd, "option '--%s' needs an argument (%s)",
                                        o ? o->name : "?", o ? o->arg : "?");
                return CLI_ARGS_BAD;
        }
        if (c == '?') {
                const struct cli_opt *o = optopt ? by_val(cmd, optopt) : NULL;
                if (o) {
                        cli_usage_error(cmd, "option '--%s' takes no argument", o->name);
                        return CLI_ARGS_BAD;
                }
                if (optopt) {
                        cli_usage_error(cmd, "unknown option '-%c'", optopt);
                        return CLI_ARGS_BAD;
                }
                return bad_long(cmd, a->argv[optind - 1]);
        }
        if (c == 'h') {
                cli_cmd_help(cmd, stdout);
                return CLI_ARGS_HELP;
        }
        const struct cli_opt *o = by_val(cmd, c);
        if (!o)
                return bad_long(cmd, a->argv[optind - 1]);
        if (li >= 0)
                snprintf(a->opt, sizeof(a->opt), "--%s", o->name);
        else
                snprintf(a->opt, sizeof(a->opt), "-%c", o->letter);
        return o->id;
}

int cli_args_exit(int r)
{
        return r == CLI_ARGS_HELP ? 0 : CLI_EXIT_USAGE;
}

/* "  -o, --output FORMAT" or "      --sim" into buf; its length. */
static size_t left_column(const struct cli_opt *o, char *buf, size_t size)
{
        int n;
        if (o->letter)
                n = snprintf(buf, size, "  -%c, --%s%s%s", o->letter, o->name, o->arg ? " " : "",
                             o->arg ? o->arg : "");
        else
                n = snprintf(buf, size, "      --%s%s%s", o->name, o->arg ? " " : "",
                             o->arg ? o->arg : "");
        return n > 0 ? (size_t)n : 0;
}

/* Text with each line after the first indented by `indent` columns. */
static void put_indented(FILE *f, const char *text, size_t indent)
{
        for (const char *p = text; *p;) {
                size_t len = strcspn(p, "\n");
                fprintf(f, "%.*s\n", (int)len, p);
                p += len;
                if (*p == '\n' && *++p)
                        fprintf(f, "%*s", (int)indent, "");
        }
}

void cli_cmd_help(const struct cli_cmd *cmd, FILE *f)
{
        char buf[128];
        size_t col = 0;

        fprintf(f, "Usage: gpuslice %s %s\n", cmd->name, cmd->usage);
        if (cmd->description)
                fputs(cmd->description, f);
        else
                fprintf(f, "%c%s.\n", cmd->summary[0] & ~0x20, cmd->summary + 1);
        for (size_t i = 0; i <= cmd->n_opts; i++) {
                size_t w = left_column(entry(cmd, i), buf, sizeof(buf)) + 2;
                if (w <= HELP_COL_MAX && w > col)
                        col = w;
        }
        fputs("\nOptions:\n", f);
        for (size_t i = 0; i <= cmd->n_opts; i++) {
                const struct cli_opt *o = entry(cmd, i);
                size_t w = left_column(o, buf, sizeof(buf));
                if (w + 2 > col)
                        fprintf(f, "%s\n%*s", buf, (int)col, "");
                else
                        fprintf(f, "%-*s", (int)col, buf);
                put_indented(f, o->help, col);
        }
        if (cmd->footer) {
                fputc('\n', f);
                fputs(cmd->footer, f);
        }
}

/* ---- the dump for scripts/gen-cli-docs ---- */

/* A string, or null for NULL (an empty string stays ""). */
static void json_str(FILE *f, const char *s)
{
        if (s)
                cli_json_string(f, s);
        else
                fputs("null", f);
}

static void dump_cmd(const struct cli_cmd *cmd, FILE *f)
{
        fputs("{\"name\": ", f);
        json_str(f, cmd->name);
        fputs(", \"usage\": ", f);
        json_str(f, cmd->usage);
        fputs(", \"summary\": ", f);
        json_str(f, cmd->summary);
        fputs(", \"description\": ", f);
        json_str(f, cmd->description);
        fputs(", \"footer\": ", f);
        json_str(f, cmd->footer);
        fprintf(f, ", \"json\": %s, \"hidden\": %s, \"operand\": ",
                cmd->flags & CLI_CMD_JSON ? "true" : "false",
                cmd->flags & CLI_CMD_HIDDEN ? "true" : "false");
        json_str(f, cmd->operand);
        fputs(", \"options\": [", f);
        for (size_t i = 0; i <= cmd->n_opts; i++) {
                const struct cli_opt *o = entry(cmd, i);
                char letter[2] = { o->letter, 0 };
                fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
                json_str(f, o->name);
                fputs(", \"letter\": ", f);
                json_str(f, o->letter ? letter : NULL);
                fputs(", \"arg\": ", f);
                json_str(f, o->arg);
                fputs(", \"help\": ", f);
                json_str(f, o->help);
                fputs(", \"values\": ", f);
                json_str(f, o->values);
                fputc('}', f);
        }
        fputs("]}", f);
}

void cli_dump_options(const char *version, const struct cli_cmd *global,
                      const struct cli_cmd *const *cmds, size_t n, FILE *f)
{
        fputs("{\"version\": ", f);
        json_str(f, version);
        fputs(",\n\"program\": ", f);
        dump_cmd(global, f);
        fputs(",\n\"commands\": [", f);
        for (size_t i = 0; i < n; i++) {
                fputs(i ? ",\n  " : "\n  ", f);
                dump_cmd(cmds[i], f);
        }
        fputs("]}\n", f);
}
