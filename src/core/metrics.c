/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus text exposition format 0.0.4: see metrics.h. */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

void gs_metrics_init(struct gs_metrics *m, size_t max_bytes)
{
        *m = (struct gs_metrics){ .max = max_bytes };
}

void gs_metrics_done(struct gs_metrics *m)
{
        if (!m)
                return;
        free(m->buf);
        for (size_t i = 0; i < m->n_seen; i++)
                free(m->seen[i]);
        free(m->seen);
        size_t max = m->max;
        *m = (struct gs_metrics){ .max = max };
}

static bool name_char(char c, bool first, bool colon)
{
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
                return true;
        if (c == ':')
                return colon;
        return !first && c >= '0' && c <= '9';
}

static bool valid(const char *name, bool colon)
{
        if (!name || !name[0])
                return false;
        size_t i = 0;
        for (; name[i]; i++)
                if (i >= GS_METRICS_NAME_MAX || !name_char(name[i], i == 0, colon))
                        return false;
        return true;
}

bool gs_metrics_valid_name(const char *name)
{
        return valid(name, true);
}

bool gs_metrics_valid_label(const char *name)
{
        return valid(name, false) && strncmp(name, "__", 2) != 0;
}

static int fail(struct gs_metrics *m, int code)
{
        if (!m->err)
                m->err = code;
        return m->err;
}

/* Make room for `more` bytes and the NUL, within the bound. */
static int reserve(struct gs_metrics *m, size_t more)
{
        if (more > m->max || m->len > m->max - more)
                return -E2BIG;
        if (m->len + more + 1 <= m->cap)
                return 0;
        size_t cap = m->cap ? m->cap : 4096;
        while (cap < m->len + more + 1)
                cap *= 2;
        if (cap > m->max + 1)
                cap = m->max + 1;
        char *p = realloc(m->buf, cap);
        if (!p)
                return -ENOMEM;
        m->buf = p;
        m->cap = cap;
        return 0;
}

/* Append n bytes. A line is kept only once complete: end_line cuts the
 * text back to where the line began when a part of it failed. */
static int put(struct gs_metrics *m, const char *s, size_t n)
{
        int r = reserve(m, n);
        if (r < 0)
                return r;
        memcpy(m->buf + m->len, s, n);
        m->len += n;
        m->buf[m->len] = '\0';
        return 0;
}

static int puts_(struct gs_metrics *m, const char *s)
{
        return put(m, s, strlen(s));
}

/* Escaped text: backslash and newline always, the double quote in label
 * values. */
static int put_escaped(struct gs_metrics *m, const char *s, bool quote)
{
        for (const char *p = s; *p;) {
                size_t run = strcspn(p, quote ? "\\\n\"" : "\\\n");
                int r = put(m, p, run);
                if (r < 0)
                        return r;
                p += run;
                if (!*p)
                        break;
                const char *esc = *p == '\n' ? "\\n" : *p == '"' ? "\\\"" : "\\\\";
                if ((r = put(m, esc, 2)) < 0)
                        return r;
                p++;
        }
        return 0;
}

static int end_line(struct gs_metrics *m, size_t line, int r)
{
        if (r < 0) {
                m->len = line;
                if (m->buf)
                        m->buf[line] = '\0';
                return fail(m, r);
        }
        return 0;
}

static const char *type_name(enum gs_metric_type t)
{
        switch (t) {
        case GS_METRIC_COUNTER:
                return "counter";
        case GS_METRIC_GAUGE:
                return "gauge";
        default:
                return "untyped";
        }
}

static bool ends_with(const char *s, const char *suffix)
{
        size_t n = strlen(s), k = strlen(suffix);
        return n >= k && strcmp(s + n - k, suffix) == 0;
}

int gs_metrics_family(struct gs_metrics *m, const char *name, enum gs_metric_type type,
                      const char *help)
{
        if (m->err)
                return m->err;
        if (!gs_metrics_valid_name(name) || !help ||
            (type != GS_METRIC_GAUGE && type != GS_METRIC_COUNTER && type != GS_METRIC_UNTYPED) ||
            (type == GS_METRIC_COUNTER && !ends_with(name, "_total")))
                return fail(m, -EINVAL);
        for (size_t i = 0; i < m->n_seen; i++)
                if (strcmp(m->seen[i], name) == 0)
                        return fail(m, -EEXIST);
        if (m->n_seen == m->cap_seen) {
                size_t cap = m->cap_seen ? m->cap_seen * 2 : 32;
                char **p = realloc(m->seen, cap * sizeof(*p));
                if (!p)
                        return fail(m, -ENOMEM);
                m->seen = p;
                m->cap_seen = cap;
        }
        char *copy = strdup(name);
        if (!copy)
                return fail(m, -ENOMEM);
        size_t line = m->len;
        int r;
        if ((r = puts_(m, "# HELP ")) < 0 || (r = puts_(m, name)) < 0 || (r = put(m, " ", 1)) < 0 ||
            (r = put_escaped(m, help, false)) < 0 || (r = puts_(m, "\n# TYPE ")) < 0 ||
            (r = puts_(m, name)) < 0 || (r = put(m, " ", 1)) < 0 ||
            (r = puts_(m, type_name(type))) < 0 || (r = put(m, "\n", 1)) < 0) {
                free(copy);
                return end_line(m, line, r);
        }
        m->seen[m->n_seen++] = copy;
        snprintf(m->family, sizeof(m->family), "%s", name);
        m->type = type;
        return 0;
}

static int sample(struct gs_metrics *m, const struct gs_metric_label *labels, size_t n_labels,
                  const char *value)
{
        if (m->err)
                return m->err;
        if (!m->family[0] || n_labels > GS_METRICS_MAX_LABELS || (n_labels && !labels))
                return fail(m, -EINVAL);
        for (size_t i = 0; i < n_labels; i++) {
                if (!gs_metrics_valid_label(labels[i].name))
                        return fail(m, -EINVAL);
                for (size_t j = 0; j < i; j++)
                        if (strcmp(labels[i].name, labels[j].name) == 0)
                                return fail(m, -EINVAL);
        }
        size_t line = m->len;
        int r = puts_(m, m->family);
        bool open = false;
        for (size_t i = 0; r == 0 && i < n_labels; i++) {
                if (!labels[i].value)
                        continue;
                if ((r = put(m, open ? "," : "{", 1)) < 0 || (r = puts_(m, labels[i].name)) < 0 ||
                    (r = put(m, "=\"", 2)) < 0 || (r = put_escaped(m, labels[i].value, true)) < 0 ||
                    (r = put(m, "\"", 1)) < 0)
                        break;
                open = true;
        }
        if (r == 0 && open)
                r = put(m, "}", 1);
        if (r == 0 && (r = put(m, " ", 1)) == 0 && (r = puts_(m, value)) == 0)
                r = put(m, "\n", 1);
        return end_line(m, line, r);
}

int gs_metrics_sample(struct gs_metrics *m, const struct gs_metric_label *labels, size_t n_labels,
                      double value)
{
        char buf[40];
        if (m->err)
                return m->err;
        if (m->family[0] && m->type == GS_METRIC_COUNTER && (isnan(value) || value < 0))
                return fail(m, -EINVAL);
        if (isnan(value))
                snprintf(buf, sizeof(buf), "NaN");
        else if (isinf(value))
                snprintf(buf, sizeof(buf), "%s", value > 0 ? "+Inf" : "-Inf");
        else
                snprintf(buf, sizeof(buf), "%.17g", value);
        return sample(m, labels, n_labels, buf);
}

int gs_metrics_sample_u64(struct gs_metrics *m, const struct gs_metric_label *labels,
                          size_t n_labels, uint64_t value)
{
        char buf[24];
        snprintf(buf, sizeof(buf), "%" PRIu64, value);
        return sample(m, labels, n_labels, buf);
}

int gs_metrics_error(const struct gs_metrics *m)
{
        return m->err;
}

const char *gs_metrics_text(const struct gs_metrics *m, size_t *len)
{
        if (len)
                *len = m->len;
        return m->buf ? m->buf : "";
}

char *gs_metrics_take(struct gs_metrics *m, size_t *len)
{
        char *buf = m->buf;
        if (len)
                *len = m->len;
        m->buf = NULL;
        m->len = m->cap = 0;
        gs_metrics_done(m);
        return buf;
}
