/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice top: a live terminal view of the node's GPUs and slices, like
 * nvtop or `nvidia-smi dmon`, refreshed from gpusliced's local API.
 *
 * Contract:
 * - Read-only: it never starts a daemon; when none answers it says so and
 *   exits 1 (in the live view, a daemon that goes away later is shown as a
 *   line on screen and retried every interval).
 * - The live view needs a terminal on stdin and stdout. It puts the
 *   terminal in non-canonical, no-echo mode (signals stay enabled) on the
 *   alternate screen, and restores the saved settings and the main screen on
 *   every exit path: `q`, Ctrl-C/SIGINT (exit 0), SIGTERM/SIGHUP/SIGQUIT
 *   (restored, then the signal's default action), Ctrl-Z (restored while
 *   stopped, raw again on SIGCONT), EOF on stdin, and exit().
 * - `--once` prints one frame as plain text without terminal control and
 *   `--json` one JSON object (units in the key names); both exit 0.
 * - Names are printed whole unless the terminal (TIOCGWINSZ on stdout; 120
 *   columns when it is not a terminal) is narrower than the line needs; then
 *   the name columns shrink and long names end with an ellipsis.
 * - Sorted by GPU index, then measured share (highest first), then id.
 * - Per slice also the time it waited for the compute gate over the last
 *   second (the daemon's arbiter measures it) and its over-use flags (the
 *   watchdog's recent events against it, top.h). The data and the JSON
 *   are top_frame.c's. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opts.h"
#include "client.h"
#include "macro.h"
#include "number.h"
#include "placement.h"
#include "top.h"

#define TOP_DEFAULT_WIDTH 120
#define TOP_MIN_NAME 8
#define TOP_BAR 10

enum { OPT_INTERVAL = 1, OPT_ONCE, OPT_JSON };

static const struct cli_opt top_table[] = {
        { OPT_INTERVAL, 0, "interval", "MS",
          "refresh period in milliseconds (100..3600000, default 1000)", NULL },
        { OPT_ONCE, 0, "once", NULL, "print one frame as plain text and exit", NULL },
        { OPT_JSON, 0, "json", NULL, "print one frame as JSON and exit (keys in docs/daemon.md)",
          NULL },
};

const struct cli_cmd cli_cmd_top = {
        .name = "top",
        .usage = "[--interval MS] [--once | --json]",
        .summary = "a live view of GPUs and slices (--once, --json)",
        .description =
                "A live view of the GPUs and their slices: share configured and measured over the "
                "last\nsecond, time waited for the compute gate over the last second (WAIT), "
                "memory used and\ncap, policy, and over-use flags (FLAGS: the watchdog's events "
                "against the slice in the\nlast minute; M memory over cap, B books disagree, C "
                "compute over share, N no shim,\nW wrong GPU; lower case while only detected, "
                "upper case once reported or acted on).\nKeys: q (or Ctrl-C) quits.\n",
        .footer = "gpuslice top never starts gpusliced: start one with `gpusliced` (or any "
                  "`gpuslice run`).\n",
        .opts = top_table,
        .n_opts = GS_ARRAY_SIZE(top_table),
        .flags = CLI_CMD_JSON,
};

/* ---- text ---- */

/* Print s in exactly w columns (left-aligned); longer text ends with an
 * ellipsis. The text is ASCII (names are labels, ids, UUIDs). */
static void put_cell(FILE *o, const char *s, size_t w)
{
        size_t n = strlen(s);
        if (n <= w)
                fprintf(o, "%-*s", (int)w, s);
        else if (w > 0)
                fprintf(o, "%.*s\u2026", (int)(w - 1), s);
}

/* A bar of TOP_BAR cells for used out of total. */
static void put_bar(FILE *o, uint64_t used, uint64_t total)
{
        unsigned fill = 0;
        if (total)
                fill = used >= total ? TOP_BAR
                                     : (unsigned)((used * TOP_BAR + total / 2) / total);
        if (used && !fill)
                fill = 1;
        fputc('[', o);
        for (unsigned i = 0; i < TOP_BAR; i++)
                fputc(i < fill ? '#' : '.', o);
        fputc(']', o);
}

static void put_percent(FILE *o, int milli, int w)
{
        char b[16];
        if (milli < 0)
                snprintf(b, sizeof(b), "-");
        else
                snprintf(b, sizeof(b), "%d.%d%%", milli / 10, milli % 10);
        fprintf(o, "%*s", w, b);
}

/* Shrink *w (not below TOP_MIN_NAME, nor below what it is) so that a line
 * of `fixed` other columns fits `width`. */
static void fit(size_t *w, size_t fixed, size_t width)
{
        if (fixed + *w <= width || *w <= TOP_MIN_NAME)
                return;
        size_t room = width > fixed ? width - fixed : 0;
        *w = room > TOP_MIN_NAME ? room : TOP_MIN_NAME;
}

/* Fixed widths of the columns other than the names (with their spaces). */
#define GPU_FIXED (5 + 14 + 1 + (TOP_BAR + 2) + 20 + 11 + 7)
#define SLICE_FIXED \
        (4 + 1 + 1 + 6 + 7 + 1 + 8 + 1 + 6 + 1 + (TOP_BAR + 2) + 1 + 19 + 1 + 6 + 1 + TOP_N_REASONS)

/* The time waited for the gate over the last second, in ms ("-" when
 * unknown: no member of the arbiter, or under a second of samples). */
static void put_wait(FILE *o, const struct cli_slice *s, int w)
{
        char b[16];
        if (s->has_gate_wait)
                snprintf(b, sizeof(b), "%" PRIu32 "ms", s->gate_wait);
        else
                snprintf(b, sizeof(b), "-");
        fprintf(o, "%*s", w, b);
}

/* The slice table: a header, then one line per row. */
static void print_slices(FILE *o, const struct top_frame *f, size_t sid, size_t sname)
{
        char a[32], b[32], flags[TOP_N_REASONS + 2];
        fprintf(o, "%-3s %-*s ", "GPU", (int)sid, "SLICE");
        put_cell(o, "NAME", sname);
        fprintf(o, " %-5s %7s %8s %6s %-*s %19s %-6s %s\n", "KIND", "SHARE", "MEASURED", "WAIT",
                TOP_BAR + 2, "MEMORY", "USED / CAP", "POLICY", "FLAGS");
        if (f->n_rows == 0)
                fputs("(no slices)\n", o);
        for (size_t i = 0; i < f->n_rows; i++) {
                const struct cli_slice *s = f->rows[i].s;
                char mem[48];
                snprintf(mem, sizeof(mem), "%s / %s",
                         s->has_used ? gs_bytes_human(s->used, a, sizeof(a)) : "-",
                         s->memory ? gs_bytes_human(s->memory, b, sizeof(b)) : "whole");
                fprintf(o, "%-3u %-*s ", f->rows[i].gpu->index, (int)sid, s->id);
                put_cell(o, s->name[0] ? s->name : "-", sname);
                fprintf(o, " %-5s ", s->kube ? "pod" : "local");
                put_percent(o, (int)GS_MIN(s->milli, 1000u), 7);
                fputc(' ', o);
                put_percent(o, s->has_gpu_time ? (int)s->gpu_time : -1, 8);
                fputc(' ', o);
                put_wait(o, s, 6);
                fputc(' ', o);
                put_bar(o, s->has_used ? s->used : 0,
                        s->memory ? s->memory : f->rows[i].gpu->memory);
                fprintf(o, " %19s %-6s %s\n", mem, s->policy,
                        top_flags_text(&f->rows[i], flags, sizeof(flags)));
        }
}

static void print_text(FILE *o, const struct top_frame *f, size_t width, const char *status)
{
        char a[32], b[32];
        size_t gname = 4, sname = 4, sid = 5;
        for (size_t g = 0; g < f->l.n_gpus; g++)
                gname = GS_MAX(gname, strlen(f->l.gpus[g].name));
        for (size_t i = 0; i < f->n_rows; i++) {
                sname = GS_MAX(sname, strlen(f->rows[i].s->name[0] ? f->rows[i].s->name : "-"));
                sid = GS_MAX(sid, strlen(f->rows[i].s->id));
        }
        fit(&gname, GPU_FIXED, width);
        fit(&sname, SLICE_FIXED + sid, width);

        if (status)
                fprintf(o, "%s\n", status);
        if (f->l.n_gpus == 0) {
                fputs("No GPUs.\n", o);
                return;
        }
        fprintf(o, "%-4s %-13s ", "GPU", "UUID");
        put_cell(o, "NAME", gname);
        fprintf(o, " %-*s %19s %10s %6s\n", TOP_BAR + 2, "MEMORY", "USED / TOTAL", "FREE SHARE",
                "SLICES");
        for (size_t g = 0; g < f->l.n_gpus; g++) {
                const struct cli_gpu *gpu = &f->l.gpus[g];
                char uuid[16], share[16], mem[48];
                snprintf(uuid, sizeof(uuid), "%.12s", gpu->uuid);
                snprintf(share, sizeof(share), "%" PRIu32 "m", gpu->free_milli);
                snprintf(mem, sizeof(mem), "%s / %s", gs_bytes_human(f->gpu_used[g], a, sizeof(a)),
                         gs_bytes_human(gpu->memory, b, sizeof(b)));
                fprintf(o, "%-4u %-13s ", gpu->index, uuid);
                put_cell(o, gpu->name, gname);
                fputc(' ', o);
                put_bar(o, f->gpu_used[g], gpu->memory);
                fprintf(o, " %19s %10s %6u%s\n", mem, share, gpu->n_slices,
                        gpu->healthy ? "" : "  UNHEALTHY");
        }
        fputc('\n', o);
        print_slices(o, f, sid, sname);
}

/* The terminal's columns and rows (TIOCGWINSZ on stdout); 120 x 0 (no
 * limit) when stdout is not a terminal. */
static size_t term_size(size_t *rows)
{
        struct winsize ws;
        if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
                if (rows)
                        *rows = ws.ws_row;
                return ws.ws_col;
        }
        if (rows)
                *rows = 0;
        return TOP_DEFAULT_WIDTH;
}

static size_t term_width(void)
{
        return term_size(NULL);
}

/* ---- the terminal ---- */

/* Leave the alternate screen, show the cursor, wrap lines again. */
#define TTY_LEAVE "\033[?7h\033[?25h\033[?1049l"
#define TTY_ENTER "\033[?1049h\033[?25l\033[?7l"

static struct termios tty_saved;
static volatile sig_atomic_t tty_raw;      /* the terminal is in our mode */
static volatile sig_atomic_t top_signal;   /* a signal asked us to stop */
static volatile sig_atomic_t top_redraw;   /* resized or continued */

static void write_all(int fd, const char *s, size_t n)
{
        while (n) {
                ssize_t w = write(fd, s, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return;
                s += w;
                n -= (size_t)w;
        }
}

/* Async-signal-safe. */
static void tty_restore(void)
{
        if (!tty_raw)
                return;
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &tty_saved);
        write_all(STDOUT_FILENO, TTY_LEAVE, sizeof(TTY_LEAVE) - 1);
        tty_raw = 0;
}

/* Async-signal-safe. */
static int tty_enter(void)
{
        struct termios raw = tty_saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) < 0)
                return -errno;
        tty_raw = 1;
        write_all(STDOUT_FILENO, TTY_ENTER, sizeof(TTY_ENTER) - 1);
        return 0;
}

static void on_stop_signal(int sig)
{
        top_signal = sig;
}

static void on_winch(int sig)
{
        (void)sig;
        top_redraw = 1;
}

/* Ctrl-Z: give the terminal back while stopped, take it again after. */
static void on_tstp(int sig)
{
        int e = errno;
        bool was_raw = tty_raw;
        tty_restore();
        struct sigaction dfl = { .sa_handler = SIG_DFL }, self = { .sa_handler = on_tstp };
        sigemptyset(&dfl.sa_mask);
        sigemptyset(&self.sa_mask);
        sigaction(sig, &dfl, NULL);
        sigset_t m;
        sigemptyset(&m);
        sigaddset(&m, sig);
        sigprocmask(SIG_UNBLOCK, &m, NULL);
        raise(sig);
        /* Continued. */
        sigaction(sig, &self, NULL);
        if (was_raw)
                tty_enter();
        top_redraw = 1;
        errno = e;
}

static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

static void install_handlers(sigset_t *blocked)
{
        sigemptyset(blocked);
        struct sigaction sa = { .sa_handler = on_stop_signal };
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++) {
                sigaction(stop_signals[i], &sa, NULL);
                sigaddset(blocked, stop_signals[i]);
        }
        sa.sa_handler = on_winch;
        sigaction(SIGWINCH, &sa, NULL);
        sigaddset(blocked, SIGWINCH);
        sa.sa_handler = on_tstp;
        sigaction(SIGTSTP, &sa, NULL);
}

static uint64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* One screen: clear, home, the frame (or why there is none). */
/* Append text to out as screen lines: each cut at cols columns (UTF-8
 * continuation bytes take none) and erased to its end, at most rows lines
 * (0: any), the rest of the screen erased. No newline after the last line,
 * so a full screen does not scroll. */
static void put_screen(FILE *out, const char *text, size_t len, size_t cols, size_t rows)
{
        fputs("\033[H", out);
        size_t row = 0, i = 0;
        while (i < len && (!rows || row < rows)) {
                size_t end = i;
                while (end < len && text[end] != '\n')
                        end++;
                if (row)
                        fputs("\r\n", out);
                size_t col = 0;
                for (size_t k = i; k < end; k++) {
                        bool cont = ((unsigned char)text[k] & 0xC0) == 0x80;
                        if (!cont && col == cols)
                                break;
                        col += !cont;
                        fputc(text[k], out);
                }
                fputs("\033[K", out);
                row++;
                i = end + 1;
        }
        fputs("\033[J", out);
}

/* One screen: the frame, or why there is none. */
static void draw(unsigned interval_ms)
{
        char *buf = NULL, *scr = NULL;
        size_t len = 0, slen = 0;
        FILE *o = open_memstream(&buf, &len);
        if (!o)
                return;
        char clock[16] = "";
        time_t now = time(NULL);
        struct tm tm;
        if (localtime_r(&now, &tm))
                strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
        size_t rows, cols = term_size(&rows);
        struct top_frame f;
        struct gs_error *err = NULL;
        char status[512];
        if (top_frame_fetch(&f, &err) < 0) {
                fprintf(o, "gpuslice top %s  every %u ms  q: quit\n\n", clock, interval_ms);
                fprintf(o, "gpusliced does not answer: %s\n", gs_error_msg(err));
                gs_error_free(err);
        } else {
                snprintf(status, sizeof(status),
                         "gpuslice top %s  %zu GPU%s, %zu slice%s  every %u ms  q: quit\n", clock,
                         f.l.n_gpus, f.l.n_gpus == 1 ? "" : "s", f.l.n_slices,
                         f.l.n_slices == 1 ? "" : "s", interval_ms);
                print_text(o, &f, cols, status);
                top_frame_done(&f);
        }
        FILE *so = fclose(o) == 0 && buf ? open_memstream(&scr, &slen) : NULL;
        if (so) {
                put_screen(so, buf, len, cols, rows);
                if (fclose(so) == 0 && scr)
                        write_all(STDOUT_FILENO, scr, slen);
        }
        free(scr);
        free(buf);
}

static int run_live(unsigned interval_ms)
{
        if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
                fputs("gpuslice top: the live view needs a terminal; use --once or --json\n",
                      stderr);
                return CLI_EXIT_USAGE;
        }
        if (tcgetattr(STDIN_FILENO, &tty_saved) < 0) {
                fprintf(stderr, "gpuslice top: cannot read the terminal's settings: %s\n",
                        strerror(errno));
                return 1;
        }
        sigset_t blocked, orig;
        install_handlers(&blocked);
        sigprocmask(SIG_BLOCK, &blocked, &orig);
        atexit(tty_restore);
        if (tty_enter() < 0) {
                sigprocmask(SIG_SETMASK, &orig, NULL);
                fprintf(stderr, "gpuslice top: cannot set the terminal's mode: %s\n",
                        strerror(errno));
                return 1;
        }
        bool quit = false;
        uint64_t next = 0;
        while (!quit && !top_signal) {
                uint64_t now = mono_ms();
                if (top_redraw || now >= next) {
                        top_redraw = 0;
                        draw(interval_ms);
                        next = now + interval_ms;
                        continue;
                }
                uint64_t wait = next - now;
                struct timespec ts = { (time_t)(wait / 1000), (long)(wait % 1000) * 1000000L };
                struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
                int n = ppoll(&p, 1, &ts, &orig);
                if (n < 0)
                        continue;  /* EINTR: a signal; the loop looks at the flags */
                if (n == 0)
                        continue;
                if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) {
                        quit = true;
                        break;
                }
                char keys[64];
                ssize_t got = read(STDIN_FILENO, keys, sizeof(keys));
                if (got <= 0) {
                        quit = got == 0 || (errno != EINTR && errno != EAGAIN);
                        continue;
                }
                for (ssize_t i = 0; i < got; i++)
                        if (keys[i] == 'q' || keys[i] == 'Q' || keys[i] == 3)
                                quit = true;
        }
        tty_restore();
        int sig = top_signal;
        if (sig && sig != SIGINT) {
                /* Die of the signal, as the caller expects. */
                struct sigaction dfl = { .sa_handler = SIG_DFL };
                sigemptyset(&dfl.sa_mask);
                sigaction(sig, &dfl, NULL);
                sigprocmask(SIG_SETMASK, &orig, NULL);
                raise(sig);
        }
        sigprocmask(SIG_SETMASK, &orig, NULL);
        return 0;
}

int cmd_top(int argc, char **argv)
{
        bool once = false, json = false;
        unsigned interval_ms = 1000;
        struct cli_args a;
        int c;
        cli_args_init(&a, &cli_cmd_top, argc, argv);
        while ((c = cli_args_next(&a)) > 0) {
                uint64_t v;
                switch (c) {
                case OPT_INTERVAL:
                        if (gs_u64_parse_str(a.arg, 3600000, &v) < 0 || v < 100)
                                return cli_usage_error(&cli_cmd_top,
                                                       "--interval '%s': expected milliseconds, "
                                                       "100 to 3600000",
                                                       a.arg);
                        interval_ms = (unsigned)v;
                        break;
                case OPT_ONCE: once = true; break;
                case OPT_JSON: json = true; break;
                }
        }
        if (c < 0)
                return cli_args_exit(c);
        if (a.ind < argc)
                return cli_usage_error(&cli_cmd_top, "unexpected argument '%s'", argv[a.ind]);
        if (once && json)
                return cli_usage_error(&cli_cmd_top,
                                       "--once and --json are exclusive (--json prints one frame)");
        /* Fail clearly before taking the terminal when no daemon answers. */
        struct top_frame f;
        struct gs_error *err = NULL;
        if (top_frame_fetch(&f, &err) < 0) {
                fprintf(stderr,
                        "gpuslice top: %s\n"
                        "gpuslice top: is gpusliced running? gpuslice top never starts one: run "
                        "`gpusliced` (or any `gpuslice run`) first\n",
                        gs_error_msg(err));
                gs_error_free(err);
                return 1;
        }
        if (json || once) {
                if (json)
                        top_print_json(stdout, &f, interval_ms);
                else
                        print_text(stdout, &f, term_width(), NULL);
                top_frame_done(&f);
                return fflush(stdout) == 0 ? 0 : 1;
        }
        top_frame_done(&f);
        return run_live(interval_ms);
}
