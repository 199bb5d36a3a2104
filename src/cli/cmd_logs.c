/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice logs NAME: a slice's log (slice_log.h): what the shim said
 * (refusals, its gate) and, for `gpuslice up`, the API's own output. With
 * -f it follows the file as tail -f does (across a rotation), until Ctrl-C. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opts.h"
#include "client.h"
#include "macro.h"
#include "number.h"
#include "slice_log.h"

enum { OPT_FOLLOW = 1, OPT_TAIL, OPT_LOG_DIR };

static const struct cli_opt logs_opts[] = {
        { OPT_FOLLOW, 'f', "follow", NULL, "keep printing what is appended, until Ctrl-C", NULL },
        { OPT_TAIL, 'n', "tail", "N", "only the last N lines (default: all)", NULL },
        { OPT_LOG_DIR, 0, "log-dir", "DIR",
          "where the logs are (default: $GPUSLICE_LOG_DIR, else /var/log/gpuslice for\n"
          "root, else $XDG_STATE_HOME/gpuslice/logs or ~/.local/state/gpuslice/logs)",
          NULL },
};

const struct cli_cmd cli_cmd_logs = {
        .name = "logs",
        .usage = "[-f] [--tail N] [--log-dir DIR] NAME",
        .summary = "show a slice's log: the shim's lines and an up API's output",
        .description = "NAME is the slice's name (gpuslice run --name, an API of gpuslice up) or,\n"
                       "for a slice without one, its id (the id of a running slice with a name\n"
                       "finds its name's log). The log outlives the slice; each new slice of that\n"
                       "name appends to it.",
        .footer = "Exit status: 0; 1 when there is no log of that name.\n",
        .opts = logs_opts,
        .n_opts = GS_ARRAY_SIZE(logs_opts),
        .operand = "NAME",
};

static volatile sig_atomic_t interrupted;

/* The name of the slice whose id is `id`, when the daemon (if one answers;
 * none is started) lists one with a name: its log bears the name. */
static bool name_of_id(const char *id, char *buf, size_t size)
{
        struct cli_conn_opts co = { .start = false };
        struct cli_listing l = { 0 };
        bool found = false;
        int fd = -1;

        if (cli_connect(&co, &fd, NULL) == 0 && cli_list(fd, &l, NULL) == 0) {
                for (size_t i = 0; i < l.n_slices && !found; i++)
                        if (!strcmp(l.slices[i].id, id) && l.slices[i].name[0]) {
                                snprintf(buf, size, "%s", l.slices[i].name);
                                found = true;
                        }
                cli_listing_done(&l);
        }
        if (fd >= 0)
                close(fd);
        return found;
}

static void on_signal(int sig)
{
        (void)sig;
        interrupted = 1;
}

static int write_all(const char *p, size_t len)
{
        while (len > 0) {
                ssize_t n = write(1, p, len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -errno;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Copy fd from offset `from` to its end onto stdout; returns the offset
 * reached, or a negative errno when stdout is gone. */
static int64_t copy_from(int fd, int64_t from)
{
        char buf[65536];

        for (;;) {
                ssize_t n = pread(fd, buf, sizeof(buf), from);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return from;
                if (write_all(buf, (size_t)n) < 0)
                        return -EPIPE;
                from += n;
        }
}

/* Where the last `lines` lines of fd (size bytes) start. */
static int64_t tail_start(int fd, int64_t size, uint64_t lines)
{
        char buf[65536];
        int64_t end = size;
        uint64_t seen = 0;

        if (lines == 0)
                return size;
        while (end > 0) {
                size_t want = (size_t)GS_MIN(end, (int64_t)sizeof(buf));
                ssize_t n = pread(fd, buf, want, end - (int64_t)want);

                if (n != (ssize_t)want)
                        return 0;
                for (size_t i = want; i-- > 0;) {
                        /* the final newline of the file ends the last line */
                        if (buf[i] == '\n' && end - (int64_t)want + (int64_t)i != size - 1 &&
                            ++seen == lines)
                                return end - (int64_t)want + (int64_t)i + 1;
                }
                end -= (int64_t)want;
        }
        return 0;
}

/* tail -f: print what is appended; a log rotated away (another file now at
 * path) is read to its end, then the new one from its start; a truncated
 * one from its start. Until SIGINT/SIGTERM. */
static int follow(const char *path, int fd, int64_t off)
{
        struct stat cur, now;

        if (fstat(fd, &cur) < 0)
                return -errno;
        while (!interrupted) {
                struct timespec tick = { 0, 200 * 1000 * 1000 };

                off = copy_from(fd, off);
                if (off < 0)
                        return 0; /* stdout closed (| head): done */
                if (fstat(fd, &cur) == 0 && cur.st_size < off)
                        off = 0; /* truncated */
                if (stat(path, &now) == 0 && (now.st_ino != cur.st_ino || now.st_dev != cur.st_dev)) {
                        int nfd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

                        if (nfd >= 0) {
                                if (copy_from(fd, off) < 0) {
                                        close(nfd);
                                        return 0;
                                }
                                close(fd);
                                fd = nfd;
                                off = 0;
                                fstat(fd, &cur);
                                continue;
                        }
                }
                nanosleep(&tick, NULL);
        }
        close(fd);
        return 0;
}

int cmd_logs(int argc, char **argv)
{
        const char *log_dir = NULL;
        bool do_follow = false, have_tail = false;
        uint64_t tail = 0;
        struct cli_args a;
        int c;

        cli_args_init(&a, &cli_cmd_logs, argc, argv);
        while ((c = cli_args_next(&a)) > 0) {
                switch (c) {
                case OPT_FOLLOW: do_follow = true; break;
                case OPT_LOG_DIR: log_dir = a.arg; break;
                case OPT_TAIL:
                        if (gs_u64_parse_str(a.arg, UINT32_MAX, &tail) < 0)
                                return cli_usage_error(&cli_cmd_logs, "--tail %s: expected a "
                                                       "number of lines", a.arg);
                        have_tail = true;
                        break;
                }
        }
        if (c < 0)
                return cli_args_exit(c);
        if (a.ind >= argc)
                return cli_usage_error(&cli_cmd_logs, "no slice name given");
        if (a.ind != argc - 1)
                return cli_usage_error(&cli_cmd_logs, "one slice name, not %d", argc - a.ind);

        const char *name = argv[a.ind];
        char dir[4096], path[4200];
        struct gs_error *err = NULL;
        if (slice_log_dir(log_dir, dir, sizeof(dir), &err) < 0 ||
            slice_log_path(dir, name, path, sizeof(path), &err) < 0) {
                fprintf(stderr, "gpuslice logs: %s\n", gs_error_msg(err));
                gs_error_free(err);
                return 1;
        }
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        int e = fd < 0 ? errno : 0;
        char named[GS_SLICE_NAME_MAX + 1];
        if (e == ENOENT && name_of_id(name, named, sizeof(named)) &&
            slice_log_path(dir, named, path, sizeof(path), NULL) == 0) {
                fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* an id given: the log bears its name */
                e = fd < 0 ? errno : 0;
        }
        if (fd < 0) {
                if (e == ENOENT)
                        fprintf(stderr, "gpuslice logs: no log for '%s': %s does not exist (the "
                                "slices gpuslice run and up start log there; another "
                                "directory: --log-dir or $%s)\n",
                                name, path, SLICE_LOG_DIR_ENV);
                else
                        fprintf(stderr, "gpuslice logs: cannot read %s: %s\n", path, strerror(e));
                return 1;
        }
        struct stat sb;
        if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
                fprintf(stderr, "gpuslice logs: %s is not a regular file\n", path);
                close(fd);
                return 1;
        }
        struct sigaction sa = { .sa_handler = on_signal };
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
        int64_t off = have_tail ? tail_start(fd, sb.st_size, tail) : 0;
        off = copy_from(fd, off);
        if (!do_follow || off < 0) {
                close(fd);
                return 0;
        }
        return follow(path, fd, off) < 0 ? 1 : 0;
}
