/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice top's data (top_frame.c): one frame is the daemon's listing
 * (GS_MSG_LIST: GPUs, slices, each slice's measured share and time waited
 * for the compute gate over the last second) and its recent watchdog events
 * (GS_MSG_EVENTS), laid out as rows (a slice on one of its GPUs) sorted by
 * GPU index, then measured share (highest first), then id; and the frame as
 * JSON. The terminal and the text are cmd_top.c's. */
#ifndef GS_CLI_TOP_H
#define GS_CLI_TOP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "client.h"
#include "error.h"

/* Over-use flags: a slice is flagged for each reason the watchdog gave in
 * an event against it within the last TOP_FLAG_WINDOW_S seconds (and since
 * the slice was made: ids can come back). The watchdog writes events when
 * it first sees an over-use and when it acts, not while it lasts, so a
 * flag says "recently", not "now". */
#define TOP_FLAG_WINDOW_S 60
#define TOP_N_REASONS 6

/* What the events said about one slice, per reason (top_reasons order). */
struct top_flags {
        int64_t last_ms[TOP_N_REASONS]; /* unix ms of the newest event; 0: none */
        bool acted[TOP_N_REASONS];      /* one of them was past the grace period
                                         * (reported, killed, kill_failed) */
        char action[TOP_N_REASONS][16]; /* the newest event's action */
};

/* One line of the slice table: a slice on one of its GPUs. */
struct top_row {
        const struct cli_slice *s;
        const struct cli_gpu *gpu;
        const struct top_flags *flags; /* NULL when the events are unknown */
};

struct top_frame {
        struct cli_listing l;
        struct top_row *rows;
        size_t n_rows;
        uint64_t *gpu_used;       /* per GPU: the slices' NVML memory */
        struct top_flags *flags;  /* per slice of l (NULL: the daemon gave no events) */
        int64_t now_ms;           /* unix ms when the frame was fetched */
};

/* Reason `i` (0..TOP_N_REASONS-1) as the watchdog names it and its flag
 * letter: memory_over_cap M, books_disagree B, compute_over_share C,
 * no_shim N, wrong_gpu W, unsliced U. */
const char *top_reason_name(unsigned i);
char top_reason_letter(unsigned i);

/* Fetch a frame from the daemon (never starting one): the listing, then
 * the events (a daemon that refuses them leaves f->flags NULL; not an
 * error). 0, or a negative errno with *err (no daemon, a bad reply,
 * -ENOMEM). On failure *f is empty (top_frame_done is still safe). */
int top_frame_fetch(struct top_frame *f, struct gs_error **err);

/* Free the frame; *f is empty after. */
void top_frame_done(struct top_frame *f);

/* The flags of row r as text: one letter per reason flagged, upper case
 * when the watchdog acted on it (past the grace period), lower case when it
 * only detected it; "-" when none, "?" when the events are unknown. buf
 * holds at least TOP_N_REASONS + 1 bytes. */
const char *top_flags_text(const struct top_row *r, char *buf, size_t size);

/* The frame as one JSON object (docs/daemon.md, `gpuslice top`). */
void top_print_json(FILE *o, const struct top_frame *f, unsigned interval_ms);

#endif /* GS_CLI_TOP_H */
