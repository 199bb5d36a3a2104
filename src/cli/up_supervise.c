/* SPDX-License-Identifier: Apache-2.0 */
/* The process supervisor of `gpuslice up` (see up_supervise.h). */
#include "up_supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "shepherd.h"

#define LINE_MAX_BYTES 4096
#define BLOB_MAX_VARS 256

extern char **environ;

struct linebuf {
        int fd;          /* read end of the pipe, -1 when closed */
        int out;         /* 1 or 2: where prefixed lines go */
        size_t len;
        char buf[LINE_MAX_BYTES];
};

struct proc {
        const struct up_api *api;
        size_t index;
        pid_t pid;              /* its shepherd (our child); 0 when not running */
        pid_t cmd;              /* the API's own process, below the shepherd */
        bool stop_sent;
        uint64_t started_ms;
        uint64_t next_start_ms; /* 0: no start pending */
        uint64_t backoff_ms;    /* the delay before the next restart */
        unsigned restarts;
        bool prep_failed;       /* this start's prepare failed: fail says why */
        bool given_up;          /* failed for good, or stopped: never started again */
        int log_fd;             /* its log (api->log_path) for this start; -1: none */
        struct up_failure fail;
        struct linebuf lines[2];
};

struct sup {
        struct proc *procs;
        size_t n;
        const struct up_hooks *hooks;
        const struct up_options *opt;
        sigset_t old_mask;
        int sfd;
        int devnull;
        bool stopping;
        bool killed;
        bool gave_up;           /* some API was not restarted after a failure */
        bool any_stopped;       /* some API was stopped on purpose (hooks->stopped) */
        uint64_t kill_at_ms;
        char *blob;             /* UP_ENV_BLOB_MAX + 1 bytes, reused for each start */
};

void up_options_default(struct up_options *o)
{
        *o = (struct up_options){ .backoff_initial_ms = 500, .backoff_max_ms = 30000,
                                  .reset_after_ms = 30000, .grace_ms = 10000 };
}

static uint64_t now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void write_all(int fd, const char *p, size_t len)
{
        while (len > 0) {
                ssize_t n = write(fd, p, len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return;
                p += n;
                len -= (size_t)n;
        }
}

/* Print one line of an API's output as "[name] line\n" (unless quiet),
 * and append it as it is to the API's log. */
static void emit_line(const struct proc *p, int out, const char *line, size_t len)
{
        char buf[LINE_MAX_BYTES + 80];
        int hl;

        if (p->log_fd >= 0) {
                size_t l = GS_MIN(len, (size_t)LINE_MAX_BYTES);

                memcpy(buf, line, l);
                buf[l] = '\n';
                write_all(p->log_fd, buf, l + 1);
        }
        if (out < 0)
                return;
        hl = snprintf(buf, sizeof(buf), "[%s] ", p->api->name);

        if (hl < 0 || (size_t)hl >= sizeof(buf))
                return;
        if (len > sizeof(buf) - (size_t)hl - 1)
                len = sizeof(buf) - (size_t)hl - 1;
        memcpy(buf + hl, line, len);
        buf[(size_t)hl + len] = '\n';
        write_all(out, buf, (size_t)hl + len + 1);
}

/* Read what is available on one output pipe and print its complete lines.
 * At EOF (or with `final`) the rest is printed as a line and the fd closed. */
static void pump(const struct proc *p, struct linebuf *lb, bool final)
{
        for (;;) {
                ssize_t n;
                size_t start = 0;

                if (lb->fd < 0)
                        return;
                n = read(lb->fd, lb->buf + lb->len, sizeof(lb->buf) - lb->len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n > 0)
                        lb->len += (size_t)n;
                for (size_t i = 0; i < lb->len; i++) {
                        if (lb->buf[i] == '\n') {
                                emit_line(p, lb->out, lb->buf + start, i - start);
                                start = i + 1;
                        }
                }
                memmove(lb->buf, lb->buf + start, lb->len - start);
                lb->len -= start;
                if (lb->len == sizeof(lb->buf)) { /* an over-long line: print it in pieces */
                        emit_line(p, lb->out, lb->buf, lb->len);
                        lb->len = 0;
                }
                if (n == 0 || (n < 0 && (errno != EAGAIN || final))) {
                        if (lb->len)
                                emit_line(p, lb->out, lb->buf, lb->len);
                        lb->len = 0;
                        close(lb->fd);
                        lb->fd = -1;
                        return;
                }
                if (n < 0)
                        return; /* EAGAIN: nothing more for now */
        }
}

/* Build the environment of a start: ours, then the API's own (replacing
 * variables of the same name). Room is left for BLOB_MAX_VARS more. */
static char **env_build(const struct up_api *api)
{
        size_t n = 0, m = 0, k = 0;
        char **envp;

        while (environ && environ[n])
                n++;
        while (api->env && api->env[m])
                m++;
        envp = calloc(n + m + BLOB_MAX_VARS + 1, sizeof(*envp));
        if (!envp)
                return NULL;
        for (size_t i = 0; i < n; i++)
                envp[k++] = environ[i];
        for (size_t i = 0; i < m; i++) {
                const char *eq = strchr(api->env[i], '=');
                size_t kl = eq ? (size_t)(eq - api->env[i]) + 1 : strlen(api->env[i]);
                size_t j;

                for (j = 0; j < k; j++)
                        if (strncmp(envp[j], api->env[i], kl) == 0)
                                break;
                envp[j] = api->env[i];
                if (j == k)
                        k++;
        }
        return envp;
}

/* In the child, before exec: add the "K=V\0..." blob to envp (replacing
 * variables of the same name). Async-signal-safe: no allocation. */
static void env_merge_blob(char **envp, char *blob, size_t len)
{
        size_t k = 0, added = 0;

        while (envp[k])
                k++;
        for (size_t off = 0; off < len && added < BLOB_MAX_VARS;) {
                char *var = blob + off;
                size_t vl = strnlen(var, len - off);
                char *eq = memchr(var, '=', vl);
                size_t j;

                off += vl + 1;
                if (!eq)
                        continue;
                for (j = 0; j < k; j++)
                        if (strncmp(envp[j], var, (size_t)(eq - var) + 1) == 0)
                                break;
                envp[j] = var;
                if (j == k) {
                        k++;
                        added++;
                }
        }
}

/* Exits 126 when the command exists but cannot be executed, 127 when it
 * is not there, as shells do: the supervisor does not restart either. */
static void child_fail(const char *what, const char *arg)
{
        int e = errno;
        const char *err = strerror(e);

        write_all(2, "up: ", 4);
        write_all(2, what, strlen(what));
        write_all(2, arg, strlen(arg));
        write_all(2, ": ", 2);
        write_all(2, err, strlen(err));
        write_all(2, "\n", 1);
        _exit(e == EACCES || e == EPERM || e == ENOEXEC || e == EISDIR ? 126 : 127);
}

/* The child side of a start: never returns. */
static void child_run(struct sup *s, const struct proc *p, const int go[2], const int out[2],
                      const int err[2], char **envp)
{
        int go_fd = go[0];
        size_t len = 0;
        ssize_t n;

        close(go[1]); /* or the read below never sees the parent's EOF */

        signal(SIGPIPE, SIG_DFL);
        sigprocmask(SIG_SETMASK, &s->old_mask, NULL);
        if (dup2(s->devnull, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
                _exit(127);
        /* Wait for the parent: '1' then the environment blob, or nothing. */
        while (len < UP_ENV_BLOB_MAX + 1) {
                n = read(go_fd, s->blob + len, UP_ENV_BLOB_MAX + 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        if (len == 0 || s->blob[0] != '1')
                _exit(127);
        env_merge_blob(envp, s->blob + 1, len - 1);
        execvpe(p->api->argv[0], p->api->argv, envp);
        child_fail("cannot run ", p->api->argv[0]);
}

static int pipe_pair(int fds[2])
{
        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        return 0;
}

static void close_pair(int fds[2])
{
        for (int i = 0; i < 2; i++) {
                if (fds[i] >= 0)
                        close(fds[i]);
                fds[i] = -1;
        }
}

/* Start the process of p. On failure to even fork, schedules a retry. */
static void proc_start(struct sup *s, struct proc *p)
{
        int out[2] = { -1, -1 }, err[2] = { -1, -1 }, go[2] = { -1, -1 };
        char **envp = env_build(p->api);
        pid_t pid, cmd = 0;
        int len;

        p->next_start_ms = 0;
        if (!envp || pipe_pair(out) < 0 || pipe_pair(err) < 0 || pipe_pair(go) < 0)
                goto fail;
        fflush(NULL);
        /* Below a shepherd, in a process group of its own: nothing it
         * starts outlives `up`, even `kill -9` of it (shepherd.h). */
        pid = shepherd_fork(true, &cmd);
        if (pid < 0) {
                errno = -pid;
                goto fail;
        }
        if (pid == 0)
                child_run(s, p, go, out, err, envp);
        free(envp);
        envp = NULL;
        p->pid = pid;
        p->cmd = cmd;
        p->stop_sent = false;
        p->started_ms = now_ms();
        p->lines[0] = (struct linebuf){ .fd = TAKE_FD(out[0]), .out = s->opt->quiet ? -1 : 1 };
        p->lines[1] = (struct linebuf){ .fd = TAKE_FD(err[0]), .out = s->opt->quiet ? -1 : 2 };
        fcntl(p->lines[0].fd, F_SETFL, O_NONBLOCK);
        fcntl(p->lines[1].fd, F_SETFL, O_NONBLOCK);
        close_pair(out);
        close_pair(err);
        close(go[0]);
        go[0] = -1;
        s->blob[0] = '1';
        p->fail = (struct up_failure){ 0 };
        len = s->hooks->prepare(s->hooks->ud, p->index, cmd, s->blob + 1, UP_ENV_BLOB_MAX,
                                &p->fail);
        p->prep_failed = len < 0 || len > UP_ENV_BLOB_MAX;
        if (p->prep_failed) {
                if (!p->fail.reason[0])
                        snprintf(p->fail.reason, sizeof(p->fail.reason), "%s",
                                 strerror(len < 0 ? -len : E2BIG));
                kill(cmd, SIGKILL); /* reaped, then rescheduled or given up */
        } else {
                /* After prepare, which may have rotated the log. */
                if (p->api->log_path)
                        p->log_fd = open(p->api->log_path, O_WRONLY | O_APPEND | O_CREAT |
                                                                   O_CLOEXEC | O_NOFOLLOW |
                                                                   O_NOCTTY,
                                         0640);
                write_all(go[1], s->blob, (size_t)len + 1);
        }
        close_pair(go);
        return;
fail:
        fprintf(stderr, "up: [%s] cannot start: %s\n", p->api->name, strerror(errno));
        free(envp);
        close_pair(out);
        close_pair(err);
        close_pair(go);
        p->next_start_ms = now_ms() + p->backoff_ms;
}

static void describe_status(int status, char *buf, size_t size)
{
        if (WIFEXITED(status))
                snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
        else if (WIFSIGNALED(status))
                snprintf(buf, size, "was killed by signal %d (%s)", WTERMSIG(status),
                         strsignal(WTERMSIG(status)));
        else
                snprintf(buf, size, "ended (status 0x%x)", (unsigned)status);
}

/* Why p's last start cannot be fixed by starting it again, or NULL. */
static const char *permanent_reason(const struct proc *p, int status, char *buf, size_t size)
{
        if (p->prep_failed)
                return p->fail.permanent ? p->fail.reason : NULL;
        if (!WIFEXITED(status) || (WEXITSTATUS(status) != 126 && WEXITSTATUS(status) != 127))
                return NULL;
        snprintf(buf, size, "%s exited with status %d (command %s)", p->api->argv[0],
                 WEXITSTATUS(status), WEXITSTATUS(status) == 126 ? "not executable" : "not found");
        return buf;
}

static void proc_reaped(struct sup *s, struct proc *p, int status)
{
        char why[sizeof(p->fail.reason) + 128];
        const char *permanent;
        uint64_t ran = now_ms() - p->started_ms;
        pid_t pid = p->cmd;
        char what[96];

        p->pid = p->cmd = 0;
        pump(p, &p->lines[0], true);
        pump(p, &p->lines[1], true);
        if (p->log_fd >= 0)
                close(p->log_fd);
        p->log_fd = -1;
        describe_status(status, what, sizeof(what));
        if (s->stopping) {
                /* Whatever it left behind, its shepherd killed. */
                fprintf(stderr, "up: [%s] stopped (%s)\n", p->api->name, what);
                s->hooks->exited(s->hooks->ud, p->index, pid);
                return;
        }
        s->hooks->exited(s->hooks->ud, p->index, pid);
        if (s->hooks->stopped && s->hooks->stopped(s->hooks->ud, p->index)) {
                fprintf(stderr, "up: %s: stopped (gpuslice stop, %s); not restarted\n",
                        p->api->name, what);
                p->given_up = true;
                s->any_stopped = true;
                return;
        }
        permanent = permanent_reason(p, status, why, sizeof(why));
        if (permanent) {
                fprintf(stderr, "up: %s: not restarted: %s\n", p->api->name, permanent);
                p->given_up = true;
                s->gave_up = true;
                return;
        }
        if (p->prep_failed)
                snprintf(what, sizeof(what), "could not be started (%.60s)", p->fail.reason);
        if (ran >= s->opt->reset_after_ms)
                p->backoff_ms = s->opt->backoff_initial_ms;
        p->restarts++;
        p->next_start_ms = now_ms() + p->backoff_ms;
        fprintf(stderr, "up: [%s] %s after %.1fs; restarting in %.1fs (restart %u)\n",
                p->api->name, what, (double)ran / 1000.0, (double)p->backoff_ms / 1000.0,
                p->restarts);
        p->backoff_ms = p->backoff_ms * 2 > s->opt->backoff_max_ms ? s->opt->backoff_max_ms
                                                                    : p->backoff_ms * 2;
}

static void reap(struct sup *s)
{
        for (size_t i = 0; i < s->n; i++) {
                struct proc *p = &s->procs[i];
                int status;
                pid_t r;

                if (p->pid <= 0)
                        continue;
                do
                        r = waitpid(p->pid, &status, WNOHANG);
                while (r < 0 && errno == EINTR);
                if (r == p->pid || (r < 0 && errno == ECHILD))
                        proc_reaped(s, p, r == p->pid ? status : 0);
        }
}

static void signal_all(struct sup *s, int sig)
{
        for (size_t i = 0; i < s->n; i++) {
                struct proc *p = &s->procs[i];

                if (p->pid > 0 && kill(-p->cmd, sig) < 0)
                        kill(p->cmd, sig);
        }
}

static size_t n_running(const struct sup *s)
{
        size_t n = 0;

        for (size_t i = 0; i < s->n; i++)
                n += s->procs[i].pid > 0;
        return n;
}

static void begin_stop(struct sup *s, int sig)
{
        if (s->stopping) {
                fprintf(stderr, "up: %s again: killing every API now\n", strsignal(sig));
                signal_all(s, SIGKILL);
                s->killed = s->killed || n_running(s) > 0;
                return;
        }
        s->stopping = true;
        s->kill_at_ms = now_ms() + s->opt->grace_ms;
        for (size_t i = 0; i < s->n; i++)
                s->procs[i].next_start_ms = 0;
        fprintf(stderr, "up: %s: stopping %zu API%s (SIGTERM, SIGKILL after %.1fs)\n",
                strsignal(sig), n_running(s), n_running(s) == 1 ? "" : "s",
                (double)s->opt->grace_ms / 1000.0);
        signal_all(s, SIGTERM);
}

static void handle_signals(struct sup *s)
{
        struct signalfd_siginfo si;

        while (read(s->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (si.ssi_signo == SIGCHLD)
                        reap(s);
                else
                        begin_stop(s, (int)si.ssi_signo);
        }
        reap(s); /* SIGCHLDs coalesce: always look */
}

/* Milliseconds poll may sleep: until the next pending start or the kill
 * deadline, -1 when nothing is due. */
static int next_timeout(const struct sup *s)
{
        uint64_t now = now_ms(), due = UINT64_MAX;

        for (size_t i = 0; i < s->n; i++)
                if (s->procs[i].next_start_ms && s->procs[i].next_start_ms < due)
                        due = s->procs[i].next_start_ms;
        if (s->stopping && s->kill_at_ms < due)
                due = s->kill_at_ms;
        if (due == UINT64_MAX)
                return -1;
        return due <= now ? 0 : (int)GS_MIN(due - now, 60000u);
}

static void run_timers(struct sup *s)
{
        uint64_t now = now_ms();

        if (s->stopping) {
                if (now >= s->kill_at_ms && n_running(s) > 0) {
                        fprintf(stderr, "up: grace period over: killing %zu API%s with SIGKILL\n",
                                n_running(s), n_running(s) == 1 ? "" : "s");
                        signal_all(s, SIGKILL);
                        s->killed = true;
                        s->kill_at_ms = UINT64_MAX;
                }
                return;
        }
        for (size_t i = 0; i < s->n; i++) {
                struct proc *p = &s->procs[i];

                if (p->next_start_ms && p->next_start_ms <= now && p->pid == 0)
                        proc_start(s, p);
        }
}

/* Whether every API was given up: nothing runs and nothing will. */
static bool all_given_up(const struct sup *s)
{
        if (s->n == 0)
                return false;
        for (size_t i = 0; i < s->n; i++)
                if (!s->procs[i].given_up)
                        return false;
        return true;
}

static void loop(struct sup *s)
{
        struct pollfd pfds[1 + 2 * 256];
        struct { size_t proc; int line; } owners[1 + 2 * 256];

        while ((!s->stopping && !all_given_up(s)) || n_running(s) > 0) {
                nfds_t n = 0;

                pfds[n++] = (struct pollfd){ .fd = s->sfd, .events = POLLIN };
                for (size_t i = 0; i < s->n && n + 2 <= GS_ARRAY_SIZE(pfds); i++) {
                        for (int j = 0; j < 2; j++) {
                                if (s->procs[i].lines[j].fd < 0)
                                        continue;
                                owners[n].proc = i;
                                owners[n].line = j;
                                pfds[n++] = (struct pollfd){ .fd = s->procs[i].lines[j].fd,
                                                             .events = POLLIN };
                        }
                }
                if (poll(pfds, n, next_timeout(s)) < 0 && errno != EINTR)
                        break;
                for (nfds_t k = 1; k < n; k++) {
                        struct proc *p = &s->procs[owners[k].proc];

                        if (pfds[k].revents)
                                pump(p, &p->lines[owners[k].line], false);
                }
                if (pfds[0].revents)
                        handle_signals(s);
                run_timers(s);
        }
}

int up_supervise(const struct up_api *apis, size_t n_apis, const struct up_hooks *hooks,
                 const struct up_options *opt)
{
        struct sup s = { .n = n_apis, .hooks = hooks, .opt = opt, .sfd = -1, .devnull = -1 };
        void (*old_pipe)(int) = SIG_DFL;
        sigset_t mask;
        int r = 0;

        if (n_apis > 256)
                return -E2BIG;
        s.procs = calloc(n_apis, sizeof(*s.procs));
        s.blob = malloc(UP_ENV_BLOB_MAX + 1);
        if (!s.procs || !s.blob) {
                r = -ENOMEM;
                goto out;
        }
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP); /* a closed terminal stops them as Ctrl-C does */
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, &s.old_mask);
        /* A closed stdout (`gpuslice up ... | head`) must not kill the
         * supervisor and orphan the APIs; children get SIGPIPE back. */
        old_pipe = signal(SIGPIPE, SIG_IGN);
        s.sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        s.devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (s.sfd < 0 || s.devnull < 0) {
                r = -errno;
                goto out_mask;
        }
        for (size_t i = 0; i < n_apis; i++) {
                s.procs[i] = (struct proc){ .api = &apis[i], .index = i, .log_fd = -1,
                                            .backoff_ms = opt->backoff_initial_ms,
                                            .lines = { { .fd = -1 }, { .fd = -1 } } };
                proc_start(&s, &s.procs[i]);
        }
        loop(&s);
        if (n_running(&s) > 0) { /* poll itself failed: do not leave APIs behind */
                signal_all(&s, SIGKILL);
                for (size_t i = 0; i < n_apis; i++)
                        if (s.procs[i].pid > 0) {
                                waitpid(s.procs[i].pid, NULL, 0);
                                hooks->exited(hooks->ud, i, s.procs[i].cmd);
                        }
                r = -EIO;
        } else {
                r = s.gave_up ? UP_GAVE_UP : s.killed ? 1 : 0;
        }
        if ((s.gave_up || s.any_stopped) && !s.stopping)
                fprintf(stderr, "up: no API is left running\n");
        for (size_t i = 0; i < n_apis; i++) {
                for (int j = 0; j < 2; j++)
                        pump(&s.procs[i], &s.procs[i].lines[j], true);
                if (s.procs[i].log_fd >= 0)
                        close(s.procs[i].log_fd);
        }
out_mask:
        if (s.sfd >= 0)
                close(s.sfd);
        if (s.devnull >= 0)
                close(s.devnull);
        sigprocmask(SIG_SETMASK, &s.old_mask, NULL);
        signal(SIGPIPE, old_pipe);
out:
        free(s.procs);
        free(s.blob);
        return r;
}
