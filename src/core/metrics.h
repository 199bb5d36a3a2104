/* SPDX-License-Identifier: Apache-2.0 */
/* A builder of the Prometheus text exposition format, version 0.0.4: one
 * family at a time (its # HELP and # TYPE lines, then its samples), label
 * values escaped (backslash, double quote, newline), help text escaped
 * (backslash, newline), metric and label names validated, and a bound on
 * the size of the whole text. Pure: it only fills a buffer.
 *
 *   struct gs_metrics m;
 *   gs_metrics_init(&m, 1 << 20);
 *   gs_metrics_family(&m, "gpuslice_gpu_memory_total_bytes", GS_METRIC_GAUGE, "...");
 *   gs_metrics_sample_u64(&m, labels, n_labels, bytes);
 *   ...
 *   if (gs_metrics_error(&m) == 0) send(gs_metrics_text(&m, &len)) ...
 *   gs_metrics_done(&m);
 *
 * The first failure is sticky: later calls do nothing and return it, and the
 * text then holds only complete lines written before the failure. */
#ifndef GS_METRICS_H
#define GS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_METRICS_NAME_MAX 200  /* longest metric or label name */
#define GS_METRICS_MAX_LABELS 16 /* labels of one sample */

enum gs_metric_type {
        GS_METRIC_GAUGE,
        GS_METRIC_COUNTER, /* its name must end in _total */
        GS_METRIC_UNTYPED,
};

/* A label of a sample. A NULL value leaves the label out of the sample (the
 * same as an empty value to Prometheus, and shorter). */
struct gs_metric_label {
        const char *name;
        const char *value;
};

struct gs_metrics {
        char *buf;
        size_t len, cap, max;
        int err;                        /* the first failure (negative errno), or 0 */
        char family[GS_METRICS_NAME_MAX + 1]; /* the family samples go to; "" before any */
        enum gs_metric_type type;       /* the current family's */
        char **seen;                    /* every family begun (each once) */
        size_t n_seen, cap_seen;
};

/* Start an empty text of at most max_bytes bytes. No allocation yet. */
void gs_metrics_init(struct gs_metrics *m, size_t max_bytes);

/* Free the text; m may be initialised again. NULL-safe. */
void gs_metrics_done(struct gs_metrics *m);

/* True when `name` is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*, at most
 * GS_METRICS_NAME_MAX bytes). */
bool gs_metrics_valid_name(const char *name);

/* True when `name` is a valid label name ([a-zA-Z_][a-zA-Z0-9_]*, at most
 * GS_METRICS_NAME_MAX bytes, not starting with the reserved "__"). */
bool gs_metrics_valid_label(const char *name);

/* Begin family `name` of `type` with its help text (one line of text; any
 * backslash and newline in it are escaped): writes its # HELP and # TYPE
 * lines; the samples that follow belong to it. 0, or -EINVAL (an invalid
 * name, a counter not named *_total, a NULL help), -EEXIST (the family was
 * begun before: a family's samples must be together), -E2BIG (past the
 * bound), -ENOMEM. */
int gs_metrics_family(struct gs_metrics *m, const char *name, enum gs_metric_type type,
                      const char *help);

/* Add a sample of the current family: its name, the labels whose value is
 * not NULL (values escaped), and `value` (NaN, +Inf, -Inf written as the
 * format spells them). 0, or -EINVAL (no family begun, an invalid or
 * repeated label name, more than GS_METRICS_MAX_LABELS labels, a negative
 * or NaN counter), -E2BIG, -ENOMEM. */
int gs_metrics_sample(struct gs_metrics *m, const struct gs_metric_label *labels, size_t n_labels,
                      double value);

/* The same with an integer value, written exactly (bytes above 2^53 keep
 * every digit). */
int gs_metrics_sample_u64(struct gs_metrics *m, const struct gs_metric_label *labels,
                          size_t n_labels, uint64_t value);

/* The first failure so far (a negative errno), or 0. */
int gs_metrics_error(const struct gs_metrics *m);

/* The text so far (NUL-terminated; "" when empty) and its length. */
const char *gs_metrics_text(const struct gs_metrics *m, size_t *len);

/* Hand the text over: returns the buffer (malloc'd, NUL-terminated, the
 * caller frees it; NULL when empty) with its length in *len, and leaves m
 * empty as after gs_metrics_done. */
char *gs_metrics_take(struct gs_metrics *m, size_t *len);

#endif /* GS_METRICS_H */
