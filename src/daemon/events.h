/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced's events: what the watchdog saw and did, the last N kept in
 * memory and on disk across restarts, served by the local API
 * (GS_MSG_EVENTS) to `gpuslice events`.
 *
 * An event is one line of text, space-separated key=value tokens in this
 * order, the message last and running to the end of the line:
 *   seq=<n> time=<unix ms> reason=<r> action=<a> pid=<n> slice=<id|-> gpu=<uuid|->
 *   used=<bytes> cap=<bytes> books=<bytes> util=<milli> share=<milli> msg=<text>
 * Values other than msg hold no spaces; no field holds a newline.
 *
 * On disk: <state_dir>/events.log, one event per line, appended with
 * O_APPEND (a crash can leave only the last line torn; a line that does not
 * start with "seq=" and end in a newline is dropped when loading). Once as
 * many lines have been appended as are kept, the file is rewritten with the
 * kept ones through gs_file_replace (write, fsync, rename), so it stays
 * below 2N lines. Not thread-safe: the event loop's thread only. */
#ifndef GS_DAEMON_EVENTS_H
#define GS_DAEMON_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

#define EVENTS_KEEP 1000
#define EVENTS_LINE_MAX 640
#define EVENTS_FILE "events.log"

struct events;

/* Load the kept events of state_dir (a missing file is none; a damaged
 * line is dropped) and open the file for appending. 0 and *ret, or a
 * negative errno with *err. */
int events_open(const char *state_dir, size_t keep, struct events **ret, struct gs_error **err);
void events_close(struct events *e); /* NULL-safe */

/* What one event says; strings may be NULL ("-"), msg is sanitised. */
struct event_fields {
        const char *reason, *action;
        pid_t pid;
        const char *slice, *gpu;
        uint64_t used, cap, books;
        uint32_t util_milli, share_milli;
        const char *msg;
};

/* Events added since events_open, counted per (reason, action): what
 * /metrics exports as a counter. At most EVENTS_TALLY_MAX pairs (the
 * watchdog's reasons times its actions fit; others are not counted). */
#define EVENTS_TALLY_MAX 48
struct events_tally {
        char reason[48], action[64];
        uint64_t n;
};

/* Copy the tallies into out (room for max); returns how many. */
size_t events_tallies(const struct events *e, struct events_tally *out, size_t max);

/* Record an event now: in memory, appended to the file (a failing write is
 * logged once, the event is kept in memory), and logged as a warning. */
void events_add(struct events *e, const struct event_fields *f);

/* The seq of an event line, 0 when it has none. */
uint64_t events_line_seq(const char *line);

/* The kept events, oldest first: count, and the i-th line (no newline). */
size_t events_count(const struct events *e);
const char *events_line(const struct events *e, size_t i);

#endif /* GS_DAEMON_EVENTS_H */
