/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice top's data: a frame from the daemon's listing and its events,
 * and the frame as JSON. See top.h. */
#include "top.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_json.h"
#include "local_proto.h"
#include "macro.h"
#include "number.h"

static const struct {
        const char *name;
        char letter;
} reasons[TOP_N_REASONS] = {
        { "memory_over_cap", 'M' }, { "books_disagree", 'B' }, { "compute_over_share", 'C' },
        { "no_shim", 'N' },         { "wrong_gpu", 'W' },      { "unsliced", 'U' },
};

const char *top_reason_name(unsigned i)
{
        return i < TOP_N_REASONS ? reasons[i].name : "unknown";
}

char top_reason_letter(unsigned i)
{
        return i < TOP_N_REASONS ? reasons[i].letter : '?';
}

void top_frame_done(struct top_frame *f)
{
        cli_listing_done(&f->l);
        free(f->rows);
        free(f->gpu_used);
        free(f->flags);
        *f = (struct top_frame){ 0 };
}

static int measured(const struct cli_slice *s)
{
        return s->has_gpu_time ? (int)s->gpu_time : -1;
}

static int row_cmp(const void *a, const void *b)
{
        const struct top_row *x = a, *y = b;
        if (x->gpu->index != y->gpu->index)
                return x->gpu->index < y->gpu->index ? -1 : 1;
        if (measured(x->s) != measured(y->s))
                return measured(x->s) > measured(y->s) ? -1 : 1;
        return strcmp(x->s->id, y->s->id);
}

/* Copy the value of `key` in event line `line` into buf ("" when it has
 * none). Values before msg hold no spaces; msg (last) is never looked at. */
static void event_field(const char *line, const char *key, char *buf, size_t size)
{
        size_t kl = strlen(key);
        buf[0] = '\0';
        for (const char *p = line; p && *p && strncmp(p, "msg=", 4) != 0;) {
                size_t tl = strcspn(p, " ");
                if (tl > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
                        snprintf(buf, size, "%.*s", (int)(tl - kl - 1), p + kl + 1);
                        return;
                }
                p = p[tl] ? p + tl + 1 : NULL;
        }
}

static int reason_index(const char *name)
{
        for (unsigned i = 0; i < TOP_N_REASONS; i++)
                if (strcmp(reasons[i].name, name) == 0)
                        return (int)i;
        return -1;
}

/* Fold one event line into the flags of its slice. */
static void take_event(struct top_frame *f, const char *line)
{
        char slice[GS_SLICE_ID_MAX + 2], reason[32], action[16], when[24];
        event_field(line, "slice", slice, sizeof(slice));
        event_field(line, "reason", reason, sizeof(reason));
        event_field(line, "action", action, sizeof(action));
        event_field(line, "time", when, sizeof(when));
        uint64_t ms = 0;
        int r = reason_index(reason);
        if (r < 0 || gs_u64_parse_str(when, INT64_MAX, &ms) < 0 ||
            (int64_t)ms < f->now_ms - TOP_FLAG_WINDOW_S * 1000)
                return;
        for (size_t i = 0; i < f->l.n_slices; i++) {
                const struct cli_slice *s = &f->l.slices[i];
                if (strcmp(s->id, slice) != 0 || (int64_t)ms < s->created * 1000)
                        continue;
                struct top_flags *fl = &f->flags[i];
                if ((int64_t)ms >= fl->last_ms[r]) {
                        fl->last_ms[r] = (int64_t)ms;
                        snprintf(fl->action[r], sizeof(fl->action[r]), "%s", action);
                }
                if (strcmp(action, "detected") != 0)
                        fl->acted[r] = true;
        }
}

/* The watchdog's kept events into f->flags; left NULL when the daemon
 * does not answer GS_MSG_EVENTS (the frame stands without them). */
static void fetch_flags(struct top_frame *f, int fd)
{
        struct gs_proto_builder b;
        gs_proto_builder_init(&b, GS_MSG_EVENTS, GS_PROTO_MAX_REQUEST);
        struct gs_proto_msg m;
        struct gs_error *err = NULL;
        if (cli_call(fd, &b, &m, &err) < 0) {
                gs_error_free(err);
                return;
        }
        f->flags = calloc(f->l.n_slices + 1, sizeof(*f->flags));
        for (size_t i = 0; f->flags && i < m.n_items; i++)
                if (strcmp(m.items[i].key, "event") == 0)
                        take_event(f, m.items[i].value);
        gs_proto_msg_done(&m);
}

int top_frame_fetch(struct top_frame *f, struct gs_error **err)
{
        *f = (struct top_frame){ 0 };
        struct cli_conn_opts co = { .sim = false, .start = false };
        int fd = -1;
        if (cli_connect(&co, &fd, err) < 0)
                return -1;
        int r = cli_list(fd, &f->l, err);
        if (r < 0) {
                close(fd);
                return r;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        f->now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        fetch_flags(f, fd);
        close(fd);
        size_t n = 0;
        for (size_t i = 0; i < f->l.n_slices; i++)
                n += f->l.slices[i].n_gpus;
        f->rows = calloc(n + 1, sizeof(*f->rows));
        f->gpu_used = calloc(f->l.n_gpus + 1, sizeof(*f->gpu_used));
        if (!f->rows || !f->gpu_used) {
                top_frame_done(f);
                return gs_error_set(err, -ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < f->l.n_slices; i++) {
                const struct cli_slice *s = &f->l.slices[i];
                for (unsigned k = 0; k < s->n_gpus; k++)
                        for (size_t g = 0; g < f->l.n_gpus; g++) {
                                if (strcmp(f->l.gpus[g].uuid, s->gpu_uuid[k]) != 0)
                                        continue;
                                f->rows[f->n_rows++] = (struct top_row){
                                        s, &f->l.gpus[g], f->flags ? &f->flags[i] : NULL
                                };
                                /* A multi-GPU slice's figure is its sum: split it evenly. */
                                if (s->has_used)
                                        f->gpu_used[g] += s->used / s->n_gpus;
                        }
        }
        qsort(f->rows, f->n_rows, sizeof(*f->rows), row_cmp);
        return 0;
}

const char *top_flags_text(const struct top_row *r, char *buf, size_t size)
{
        if (size < TOP_N_REASONS + 2)
                return "";
        if (!r->flags) {
                snprintf(buf, size, "?");
                return buf;
        }
        size_t n = 0;
        for (unsigned i = 0; i < TOP_N_REASONS; i++) {
                if (!r->flags->last_ms[i])
                        continue;
                char c = reasons[i].letter;
                buf[n++] = r->flags->acted[i] ? c : (char)(c - 'A' + 'a');
        }
        if (!n)
                buf[n++] = '-';
        buf[n] = '\0';
        return buf;
}

/* ---- JSON ---- */

static void json_gpus(FILE *o, const struct top_frame *f)
{
        for (size_t g = 0; g < f->l.n_gpus; g++) {
                const struct cli_gpu *gpu = &f->l.gpus[g];
                fprintf(o, "%s\n  {\"index\": %u, \"uuid\": ", g ? "," : "", gpu->index);
                cli_json_string(o, gpu->uuid);
                fprintf(o, ", \"name\": ");
                cli_json_string(o, gpu->name);
                fprintf(o,
                        ", \"healthy\": %s, \"memory_total_bytes\": %" PRIu64
                        ", \"memory_used_bytes\": %" PRIu64 ", \"memory_free_bytes\": %" PRIu64
                        ", \"share_free_milli\": %" PRIu32 ", \"share_free_ratio\": %.3f"
                        ", \"slices\": %u}",
                        gpu->healthy ? "true" : "false", gpu->memory, f->gpu_used[g],
                        gpu->free_memory, gpu->free_milli, gpu->free_milli / 1000.0,
                        gpu->n_slices);
        }
}

/* "gate_wait_*" and "overuse" of a row. */
static void json_wait_flags(FILE *o, const struct top_frame *f, const struct top_row *r)
{
        const struct cli_slice *s = r->s;
        if (s->has_gate_wait)
                fprintf(o, ", \"gate_wait_milli\": %" PRIu32 ", \"gate_wait_ratio\": %.3f",
                        s->gate_wait, s->gate_wait / 1000.0);
        else
                fprintf(o, ", \"gate_wait_milli\": null, \"gate_wait_ratio\": null");
        if (s->has_gate_wait_ns)
                fprintf(o, ", \"gate_wait_seconds_total\": %.3f", (double)s->gate_wait_ns / 1e9);
        else
                fprintf(o, ", \"gate_wait_seconds_total\": null");
        if (!r->flags) {
                fprintf(o, ", \"overuse\": null");
                return;
        }
        fprintf(o, ", \"overuse\": [");
        bool first = true;
        for (unsigned i = 0; i < TOP_N_REASONS; i++) {
                int64_t t = r->flags->last_ms[i];
                if (!t)
                        continue;
                fprintf(o, "%s{\"reason\": \"%s\", \"flag\": \"%c\", \"action\": ", first ? "" : ", ",
                        reasons[i].name, reasons[i].letter);
                cli_json_string(o, r->flags->action[i]);
                fprintf(o, ", \"acted\": %s, \"seconds_ago\": %.1f}",
                        r->flags->acted[i] ? "true" : "false",
                        (double)GS_MAX(f->now_ms - t, (int64_t)0) / 1000.0);
                first = false;
        }
        fputc(']', o);
}

void top_print_json(FILE *o, const struct top_frame *f, unsigned interval_ms)
{
        fprintf(o, "{\"time_unix_seconds\": %lld, \"interval_ms\": %u, \"gpus\": [",
                (long long)time(NULL), interval_ms);
        json_gpus(o, f);
        fprintf(o, "%s], \"overuse_window_seconds\": %d, \"slices\": [", f->l.n_gpus ? "\n" : "",
                TOP_FLAG_WINDOW_S);
        for (size_t i = 0; i < f->n_rows; i++) {
                const struct top_row *r = &f->rows[i];
                const struct cli_slice *s = r->s;
                fprintf(o, "%s\n  {\"id\": ", i ? "," : "");
                cli_json_string(o, s->id);
                fprintf(o, ", \"name\": ");
                cli_json_string(o, s->name);
                fprintf(o, ", \"kind\": \"%s\", \"gpu_index\": %u, \"gpu_uuid\": ",
                        s->kube ? "kubernetes" : "local", r->gpu->index);
                cli_json_string(o, r->gpu->uuid);
                fprintf(o, ", \"share_configured_milli\": %" PRIu32
                           ", \"share_configured_ratio\": %.3f",
                        s->milli, GS_MIN(s->milli, 1000u) / 1000.0);
                if (s->has_gpu_time)
                        fprintf(o, ", \"share_measured_milli\": %" PRIu32
                                   ", \"share_measured_ratio\": %.3f",
                                s->gpu_time, s->gpu_time / 1000.0);
                else
                        fprintf(o, ", \"share_measured_milli\": null, \"share_measured_ratio\": null");
                json_wait_flags(o, f, r);
                fprintf(o, ", \"memory_used_bytes\": ");
                if (s->has_used)
                        fprintf(o, "%" PRIu64, s->used);
                else
                        fprintf(o, "null");
                fprintf(o, ", \"memory_limit_bytes\": %" PRIu64 ", \"policy\": ", s->memory);
                cli_json_string(o, s->policy);
                if (s->kube)
                        fprintf(o, ", \"pid\": null}");
                else
                        fprintf(o, ", \"pid\": %d}", s->pid);
        }
        fprintf(o, "%s]}\n", f->n_rows ? "\n" : "");
}
