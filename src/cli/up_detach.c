/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuslice up -d` (see up_detach.h). The report is text over a pipe, one
 * line per API, "started <index> <pid>" or "refused <index> <reason>", then
 * "ready" once every API has one. */
#include "up_detach.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "cli_listing.h"
#include "macro.h"
#include "number.h"

#define REPORT_MAX 65536

static void report(struct up_detach *d, const char *line)
{
        size_t len = strlen(line);

        while (d->report_fd >= 0 && len > 0) {
                ssize_t n = write(d->report_fd, line, len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) { /* the command is gone: nobody to tell */
                        close(d->report_fd);
                        d->report_fd = -1;
                        return;
                }
                line += n;
                len -= (size_t)n;
        }
}

static void reported(struct up_detach *d, size_t api, const char *line)
{
        if (d->reported[api])
                return;
        d->reported[api] = true;
        d->n_reported++;
        report(d, line);
        if (d->n_reported == d->n_apis) {
                report(d, "ready\n");
                if (d->report_fd >= 0)
                        close(d->report_fd);
                d->report_fd = -1;
        }
}

static int detach_prepare(void *ud, size_t api, pid_t pid, char *blob, size_t size,
                          struct up_failure *fail)
{
        struct up_detach *d = ud;
        int r = d->inner.prepare(d->inner.ud, api, pid, blob, size, fail);
        char line[700];

        if (r >= 0) {
                snprintf(line, sizeof(line), "started %zu %d\n", api, (int)pid);
                reported(d, api, line);
        } else if (fail->permanent) {
                snprintf(line, sizeof(line), "refused %zu %s\n", api, fail->reason);
                for (char *p = line + 8; *p && p[1]; p++)
                        if (*p == '\n')
                                *p = ' ';
                reported(d, api, line);
        }
        return r;
}

static void detach_exited(void *ud, size_t api, pid_t pid)
{
        struct up_detach *d = ud;

        d->inner.exited(d->inner.ud, api, pid);
}

static bool detach_stopped(void *ud, size_t api)
{
        struct up_detach *d = ud;

        return d->inner.stopped && d->inner.stopped(d->inner.ud, api);
}

/* One line of the report, printed for the user. Returns 1 for "ready". */
static int show_line(const char *line, const struct up_api *apis, size_t n_apis, bool *started,
                     bool *refused)
{
        uint64_t i = 0;
        const char *sp = strchr(line, ' ');
        const char *arg = sp ? strchr(sp + 1, ' ') : NULL;

        if (!strcmp(line, "ready"))
                return 1;
        if (!sp || !arg || gs_u64_parse(sp + 1, (size_t)(arg - sp - 1), n_apis - 1, &i) < 0)
                return 0;
        if (!strncmp(line, "started ", 8)) {
                started[i] = true;
                printf("up: %s started (pid %s)\n", apis[i].name, arg + 1);
        } else if (!strncmp(line, "refused ", 8)) {
                refused[i] = true;
                printf("up: %s: not started: %s\n", apis[i].name, arg + 1);
        }
        fflush(stdout);
        return 0;
}

/* The command's side: read the report until "ready", EOF or the deadline. */
static int wait_report(int fd, pid_t sup, const char *up_log, const char *spec_path,
                       const struct up_api *apis, size_t n_apis)
{
        _cleanup_free_ bool *started = calloc(n_apis, sizeof(bool));
        _cleanup_free_ bool *refused = calloc(n_apis, sizeof(bool));
        _cleanup_free_ char *buf = malloc(REPORT_MAX);
        int64_t deadline = cli_now_ms() + UP_DETACH_WAIT_MS;
        size_t len = 0, n_started = 0, n_refused = 0;
        bool ready = false, eof = false;

        if (!started || !refused || !buf)
                return CLI_EXIT_FAILURE;
        while (!ready && !eof && cli_now_ms() < deadline) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ssize_t n;

                if (poll(&p, 1, (int)GS_MIN(deadline - cli_now_ms(), 1000)) <= 0)
                        continue;
                n = read(fd, buf + len, REPORT_MAX - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        eof = true;
                        break;
                }
                len += (size_t)n;
                char *nl;

                while (!ready && (nl = memchr(buf, '\n', len))) {
                        *nl = '\0';
                        ready = show_line(buf, apis, n_apis, started, refused) == 1;
                        len -= (size_t)(nl + 1 - buf);
                        memmove(buf, nl + 1, len);
                }
                if (len == REPORT_MAX - 1)
                        len = 0; /* an over-long line: dropped */
        }
        for (size_t i = 0; i < n_apis; i++) {
                n_started += started[i];
                n_refused += refused[i];
        }
        int st = 0;
        bool sup_gone = waitpid(sup, &st, WNOHANG) == sup;
        if (!ready && !sup_gone && !eof) {
                printf("up: still starting after %ds:", UP_DETACH_WAIT_MS / 1000);
                for (size_t i = 0; i < n_apis; i++)
                        if (!started[i] && !refused[i])
                                printf(" %s", apis[i].name);
                printf(" (the supervisor, pid %d, keeps trying; its log: %s)\n", (int)sup, up_log);
                return 1;
        }
        if (eof && !ready && !sup_gone) {
                /* it closed the report by dying: reap it (we are its parent) */
                sup_gone = waitpid(sup, &st, 0) == sup;
        }
        if (sup_gone || n_started == 0) {
                printf("up: the supervisor has exited; nothing runs (its log: %s)\n", up_log);
                return n_refused ? UP_GAVE_UP : CLI_EXIT_FAILURE;
        }
        printf("up: %zu of %zu API%s running in the background (supervisor pid %d); logs: "
               "gpuslice logs NAME; stop: gpuslice down %s\n",
               n_started, n_apis, n_apis == 1 ? "" : "s", (int)sup, spec_path);
        return n_refused ? UP_GAVE_UP : 0;
}

int up_detach_fork(const char *up_log, const char *spec_path, const struct up_api *apis,
                   size_t n_apis, struct up_hooks *hooks, struct up_detach *d, int *ret_status)
{
        int p[2], log_fd, null_fd;
        pid_t pid;

        log_fd = open(up_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
                      0640);
        if (log_fd < 0)
                return -errno;
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null_fd < 0 || pipe2(p, O_CLOEXEC) < 0) {
                int e = errno;

                close(log_fd);
                if (null_fd >= 0)
                        close(null_fd);
                return -e;
        }
        fflush(NULL);
        pid = fork();
        if (pid < 0) {
                int e = errno;

                close(p[0]);
                close(p[1]);
                close(log_fd);
                close(null_fd);
                return -e;
        }
        if (pid > 0) {
                close(p[1]);
                close(log_fd);
                close(null_fd);
                *ret_status = wait_report(p[0], pid, up_log, spec_path, apis, n_apis);
                close(p[0]);
                return 1;
        }
        /* The supervisor: a session of its own, no terminal. */
        close(p[0]);
        setsid(); /* a closing terminal's SIGHUP reaches its session, not this one */
        if (dup2(null_fd, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0)
                _exit(CLI_EXIT_FAILURE);
        close(null_fd);
        close(log_fd);
        *d = (struct up_detach){ .report_fd = p[1], .n_apis = n_apis, .apis = apis,
                                 .inner = *hooks, .reported = calloc(n_apis, sizeof(bool)) };
        if (!d->reported)
                _exit(CLI_EXIT_FAILURE);
        *hooks = (struct up_hooks){ .prepare = detach_prepare, .exited = detach_exited,
                                    .stopped = detach_stopped, .ud = d };
        fprintf(stderr, "up: detached supervisor pid %d for %s\n", (int)getpid(), spec_path);
        return 0;
}

void up_detach_done(struct up_detach *d)
{
        if (d->report_fd >= 0)
                close(d->report_fd);
        d->report_fd = -1;
        free(d->reported);
        d->reported = NULL;
}
