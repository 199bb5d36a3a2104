/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced's events (events.h): a ring of lines in memory, an append log
 * on disk compacted through gs_file_replace. */
#include "events.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "log.h"
#include "macro.h"
#include "number.h"

struct events {
        char path[1200];
        int fd;            /* O_APPEND; -1 when it cannot be written */
        bool write_failed; /* logged once */
        size_t keep;
        char (*lines)[EVENTS_LINE_MAX];
        size_t head, n;  /* ring: oldest at head */
        size_t appended; /* lines appended since the last rewrite */
        uint64_t next_seq;
        struct events_tally tally[EVENTS_TALLY_MAX];
        size_t n_tally;
};

size_t events_tallies(const struct events *e, struct events_tally *out, size_t max)
{
        if (!e)
                return 0;
        size_t n = e->n_tally < max ? e->n_tally : max;
        for (size_t i = 0; i < n; i++)
                out[i] = e->tally[i];
        return n;
}

static void count(struct events *e, const char *reason, const char *action)
{
        for (size_t i = 0; i < e->n_tally; i++)
                if (strcmp(e->tally[i].reason, reason) == 0 &&
                    strcmp(e->tally[i].action, action) == 0) {
                        e->tally[i].n++;
                        return;
                }
        if (e->n_tally == EVENTS_TALLY_MAX)
                return;
        struct events_tally *t = &e->tally[e->n_tally++];
        snprintf(t->reason, sizeof(t->reason), "%s", reason);
        snprintf(t->action, sizeof(t->action), "%s", action);
        t->n = 1;
}

size_t events_count(const struct events *e)
{
        return e ? e->n : 0;
}

const char *events_line(const struct events *e, size_t i)
{
        return e->lines[(e->head + i) % e->keep];
}

uint64_t events_line_seq(const char *line)
{
        uint64_t seq;
        const char *end;
        if (strncmp(line, "seq=", 4) != 0 ||
            gs_u64_parse_prefix(line + 4, UINT64_MAX, &seq, &end) < 0 || *end != ' ')
                return 0;
        return seq;
}

static void push(struct events *e, const char *line)
{
        size_t pos = (e->head + e->n) % e->keep;
        if (e->n == e->keep)
                e->head = (e->head + 1) % e->keep;
        else
                e->n++;
        snprintf(e->lines[pos], EVENTS_LINE_MAX, "%s", line);
}

/* Rewrite the file with the kept lines (crash-safe), then append again. */
static void compact(struct events *e)
{
        size_t size = e->n * EVENTS_LINE_MAX + 1, len = 0;
        char *buf = malloc(size);
        if (!buf)
                return;
        for (size_t i = 0; i < e->n; i++)
                len += (size_t)snprintf(buf + len, size - len, "%s\n", events_line(e, i));
        struct gs_error *err = NULL;
        if (gs_file_replace(e->path, buf, len, 0600, &err) < 0) {
                gs_log_warn("events: %s", gs_error_msg(err));
                gs_error_free(err);
        }
        free(buf);
        if (e->fd >= 0)
                close(e->fd);
        /* Never a link, FIFO or device (the rename above made it a file;
         * this holds if something replaced it since). */
        e->fd = gs_state_open(e->path, O_WRONLY | O_APPEND | O_CREAT, 0600, "events log", &err);
        if (e->fd < 0) {
                gs_log_warn("events: %s", gs_error_msg(err));
                gs_error_free(err);
                err = NULL;
                e->fd = -1;
        }
        e->appended = 0;
}

static void load(struct events *e)
{
        char *buf = NULL;
        size_t len = 0;
        struct gs_error *err = NULL;
        int r = gs_file_read(e->path, e->keep * 2 * EVENTS_LINE_MAX + 4096, &buf, &len, &err);
        if (r < 0) {
                if (r != -ENOENT)
                        gs_log_warn("events: previous events not loaded: %s", gs_error_msg(err));
                gs_error_free(err);
                return;
        }
        for (char *line = buf; line < buf + len;) {
                char *nl = memchr(line, '\n', (size_t)(buf + len - line));
                if (!nl)
                        break; /* torn last line */
                *nl = '\0';
                uint64_t seq = events_line_seq(line);
                if (strlen(line) < EVENTS_LINE_MAX && seq) {
                        push(e, line);
                        if (seq >= e->next_seq)
                                e->next_seq = seq + 1;
                }
                line = nl + 1;
        }
        free(buf);
}

int events_open(const char *state_dir, size_t keep, struct events **ret, struct gs_error **err)
{
        struct events *e = calloc(1, sizeof(*e));
        if (!e || !keep || !(e->lines = calloc(keep, EVENTS_LINE_MAX))) {
                if (e)
                        free(e->lines);
                free(e);
                return gs_error_set(err, -ENOMEM, "out of memory for %zu events", keep);
        }
        e->keep = keep;
        e->next_seq = 1;
        if (snprintf(e->path, sizeof(e->path), "%s/%s", state_dir, EVENTS_FILE) >=
            (int)sizeof(e->path)) {
                free(e->lines);
                free(e);
                return gs_error_set(err, -ENAMETOOLONG, "state directory too long for events");
        }
        load(e);
        compact(e); /* drops torn lines and starts the count */
        if (e->fd < 0)
                gs_log_warn("events: %s not open: events are kept in memory only", e->path);
        *ret = e;
        return 0;
}

void events_close(struct events *e)
{
        if (!e)
                return;
        if (e->fd >= 0)
                close(e->fd);
        free(e->lines);
        free(e);
}

/* A value without spaces or control characters ("-" when empty). */
static void token(char *dst, size_t size, const char *s)
{
        size_t k = 0;
        if (!s || !*s)
                s = "-";
        for (; *s && k + 1 < size; s++)
                dst[k++] = (unsigned char)*s <= ' ' || *s == 0x7f ? '_' : *s;
        dst[k] = '\0';
}

void events_add(struct events *e, const struct event_fields *f)
{
        char reason[48], action[64], slice[80], gpu[96], msg[EVENTS_LINE_MAX];
        token(reason, sizeof(reason), f->reason);
        token(action, sizeof(action), f->action);
        token(slice, sizeof(slice), f->slice);
        token(gpu, sizeof(gpu), f->gpu);
        count(e, reason, action);
        size_t k = 0;
        for (const char *s = f->msg ? f->msg : ""; *s && k + 1 < sizeof(msg); s++)
                msg[k++] = (unsigned char)*s < ' ' || *s == 0x7f ? ' ' : *s;
        msg[k] = '\0';
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        char line[EVENTS_LINE_MAX + 2];
        int len = snprintf(line, EVENTS_LINE_MAX,
                           "seq=%" PRIu64 " time=%" PRId64 " reason=%s action=%s pid=%d slice=%s "
                           "gpu=%s used=%" PRIu64 " cap=%" PRIu64 " books=%" PRIu64 " util=%" PRIu32
                           " share=%" PRIu32 " msg=%s",
                           e->next_seq++, ms, reason, action, (int)f->pid, slice, gpu, f->used,
                           f->cap, f->books, f->util_milli, f->share_milli, msg);
        if (len < 0)
                return;
        if (len >= EVENTS_LINE_MAX)
                len = EVENTS_LINE_MAX - 1;
        gs_log_warn("event: %s", line);
        push(e, line);
        line[len] = '\n';
        if (e->fd >= 0 && write(e->fd, line, (size_t)len + 1) != (ssize_t)len + 1 &&
            !e->write_failed) {
                e->write_failed = true;
                gs_log_warn("events: cannot append to %s: %s", e->path, strerror(errno));
        }
        if (++e->appended >= e->keep)
                compact(e);
}
