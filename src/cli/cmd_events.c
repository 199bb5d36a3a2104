/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice events: what the daemon's watchdog saw and did (its kept
 * events, oldest first), as a table or as JSON; --follow keeps asking for
 * new ones every second. The daemon's event lines are documented in
 * src/daemon/events.h and docs/overuse.md. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_json.h"
#include "cli_opts.h"
#include "client.h"
#include "macro.h"
#include "number.h"

enum { OPT_JSON = 1, OPT_FOLLOW };

static const struct cli_opt events_table[] = {
        { OPT_JSON, 0, "json", NULL,
          "one JSON object per event, in an array (with --follow: one per line)", NULL },
        { OPT_FOLLOW, 'f', "follow", NULL, "keep printing new events until interrupted", NULL },
};

const struct cli_cmd cli_cmd_events = {
        .name = "events",
        .usage = "[--json] [--follow]",
        .summary = "what the watchdog detected and did (--json, --follow)",
        .description = "List what the daemon's watchdog detected and did (over-use of memory or "
                       "compute,\nbooks that disagree with the driver, GPU processes outside "
                       "slices), oldest first.\n",
        .footer = "gpuslice events never starts a daemon: with none it says so and exits 1.\n",
        .opts = events_table,
        .n_opts = GS_ARRAY_SIZE(events_table),
        .flags = CLI_CMD_JSON,
};

/* The fields of an event line in order ("msg" runs to the end) and their
 * JSON keys, with units in the names (docs/overuse.md). */
enum field_kind { F_STRING, F_INT, F_RATIO }; /* F_RATIO: the line has milli */
static const struct {
        const char *key, *json;
        enum field_kind kind;
} fields[] = {
        { "seq", "seq", F_INT },
        { "time", "time_unix_ms", F_INT },
        { "reason", "reason", F_STRING },
        { "action", "action", F_STRING },
        { "pid", "pid", F_INT },
        { "slice", "slice", F_STRING },
        { "gpu", "gpu_uuid", F_STRING },
        { "used", "memory_used_bytes", F_INT },
        { "cap", "memory_limit_bytes", F_INT },
        { "books", "memory_books_bytes", F_INT },
        { "util", "gpu_time_ratio", F_RATIO },
        { "share", "gpu_milli", F_INT },
};

/* The value of `key` in line (up to the next space; msg: to the end). */
static const char *value(const char *line, const char *key, size_t *len)
{
        char pat[16];
        snprintf(pat, sizeof(pat), "%s=", key);
        const char *p = line;
        size_t kl = strlen(pat);
        while (p && *p) {
                if (strncmp(p, pat, kl) == 0) {
                        p += kl;
                        *len = strcmp(key, "msg") == 0 ? strlen(p) : strcspn(p, " ");
                        return p;
                }
                p = strchr(p, ' ');
                if (p)
                        p++;
        }
        *len = 0;
        return "";
}

static void print_json(const char *line, bool first, bool array)
{
        size_t len;
        printf("%s{", array ? (first ? "[\n  " : ",\n  ") : "");
        for (size_t i = 0; i < GS_ARRAY_SIZE(fields); i++) {
                const char *v = value(line, fields[i].key, &len);
                uint64_t n;
                bool num = fields[i].kind != F_STRING && len &&
                           gs_u64_parse(v, len, UINT64_MAX, &n) == 0;
                printf("%s\"%s\": ", i ? ", " : "", fields[i].json);
                if (num && fields[i].kind == F_RATIO)
                        printf("%" PRIu64 ".%03" PRIu64, n / 1000, n % 1000);
                else if (num)
                        printf("%" PRIu64, n);
                else if (len == 0 || (len == 1 && v[0] == '-'))
                        printf("null");
                else
                        cli_json_string_n(stdout, v, len);
        }
        const char *m = value(line, "msg", &len);
        printf(", \"msg\": ");
        cli_json_string_n(stdout, m, len);
        printf("}%s", array ? "" : "\n");
}

static void print_text(const char *line)
{
        size_t len;
        const char *t = value(line, "time", &len);
        uint64_t ms = 0;
        gs_u64_parse(t, len, UINT64_MAX, &ms);
        time_t sec = (time_t)(ms / 1000);
        struct tm tm;
        char when[32] = "?";
        if (localtime_r(&sec, &tm))
                strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
        size_t rl, al, sl, pl, ml;
        const char *r = value(line, "reason", &rl), *a = value(line, "action", &al);
        const char *s = value(line, "slice", &sl), *p = value(line, "pid", &pl);
        const char *m = value(line, "msg", &ml);
        printf("%s  %-18.*s %-11.*s slice %-8.*s pid %-8.*s %.*s\n", when, (int)rl, r, (int)al, a,
               (int)sl, s, (int)pl, p, (int)ml, m);
}

/* Ask for the events after `since`; print them; *since moves on. */
static int fetch(int fd, uint64_t *since, bool json, bool array, bool *first, struct gs_error **err)
{
        struct gs_proto_builder b;
        gs_proto_builder_init(&b, GS_MSG_EVENTS, GS_PROTO_MAX_REQUEST);
        gs_proto_builder_add(&b, "since", "%" PRIu64, *since);
        struct gs_proto_msg m;
        int r = cli_call(fd, &b, &m, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < m.n_items; i++) {
                if (strcmp(m.items[i].key, "event") != 0)
                        continue;
                const char *line = m.items[i].value;
                uint64_t seq = 0;
                const char *end;
                if (strncmp(line, "seq=", 4) != 0 ||
                    gs_u64_parse_prefix(line + 4, UINT64_MAX, &seq, &end) < 0)
                        continue;
                if (seq > *since)
                        *since = seq;
                if (json)
                        print_json(line, *first, array);
                else
                        print_text(line);
                *first = false;
        }
        gs_proto_msg_done(&m);
        fflush(stdout);
        return 0;
}

int cmd_events(int argc, char **argv)
{
        bool json = false, follow = false;
        struct cli_args a;
        int c;
        cli_args_init(&a, &cli_cmd_events, argc, argv);
        while ((c = cli_args_next(&a)) > 0) {
                switch (c) {
                case OPT_JSON: json = true; break;
                case OPT_FOLLOW: follow = true; break;
                }
        }
        if (c < 0)
                return cli_args_exit(c);
        if (a.ind < argc)
                return cli_usage_error(&cli_cmd_events, "unexpected argument '%s'", argv[a.ind]);
        struct cli_conn_opts co = { .start = false };
        struct gs_error *err = NULL;
        uint64_t since = 0;
        bool first = true, array = json && !follow;
        do {
                int fd = -1;
                if (cli_connect(&co, &fd, &err) < 0 ||
                    fetch(fd, &since, json, array, &first, &err) < 0) {
                        if (fd >= 0)
                                close(fd);
                        fprintf(stderr, "gpuslice events: %s\n", gs_error_msg(err));
                        gs_error_free(err);
                        return 1;
                }
                close(fd);
                if (follow)
                        sleep(1);
        } while (follow);
        if (array)
                printf("%s]\n", first ? "[" : "\n");
        return 0;
}
