/* SPDX-License-Identifier: Apache-2.0 */
/* The shepherd between gpuslice and a command it runs (see shepherd.h). */
#include "shepherd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "number.h"
#include "proc_stat.h"

/* The shepherd's parent-death signal. Any signal wakes it; it then looks
 * at getppid(), so a SIGHUP from a terminal is told apart. */
#define SHEPHERD_PDEATHSIG SIGHUP

/* SIGKILL every process whose parent is us (our children: the command, and
 * its descendants reparented to us). */
static void kill_children(pid_t me)
{
        DIR *d = opendir("/proc");
        struct dirent *e;

        if (!d)
                return;
        while ((e = readdir(d))) {
                char path[300], text[1024];
                struct gs_proc_stat st;
                int64_t pid;
                ssize_t n;
                int fd;

                if (e->d_name[0] < '1' || e->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                n = read(fd, text, sizeof(text));
                close(fd);
                if (n > 0 && gs_proc_stat_parse(text, (size_t)n, &st) == 0 && st.ppid == me &&
                    gs_i64_parse_str(e->d_name, 1, INT32_MAX, &pid) == 0)
                        kill((pid_t)pid, SIGKILL);
        }
        closedir(d);
}

/* Kill everything below us and reap it; a descendant whose parent dies is
 * reparented to us (we are a subreaper), so no children left means none. */
static void kill_all(pid_t me, pid_t cmd, int *status, bool *done)
{
        for (;;) {
                int st;
                pid_t w;

                kill_children(me);
                w = waitpid(-1, &st, 0);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return; /* ECHILD: nothing left */
                if (w == cmd && !*done) {
                        *status = st;
                        *done = true;
                }
        }
}

/* Leave as the command did: its exit code, or its signal. */
static _Noreturn void mirror(int status)
{
        if (WIFSIGNALED(status)) {
                int sig = WTERMSIG(status);
                struct rlimit none = { 0, 0 };
                sigset_t one;

                setrlimit(RLIMIT_CORE, &none); /* the command's core, not ours */
                signal(sig, SIG_DFL);
                sigemptyset(&one);
                sigaddset(&one, sig);
                sigprocmask(SIG_UNBLOCK, &one, NULL);
                kill(getpid(), sig);
                _exit(128 + sig);
        }
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : CLI_EXIT_FAILURE);
}

static _Noreturn void shepherd_main(pid_t parent, pid_t cmd)
{
        pid_t me = getpid();
        int status = 0;
        bool done = false;
        sigset_t all;

        sigfillset(&all);
        for (;;) {
                struct timespec tick = { 1, 0 };
                siginfo_t si;
                int st;
                pid_t w;

                while ((w = waitpid(-1, &st, WNOHANG)) > 0)
                        if (w == cmd) {
                                status = st;
                                done = true;
                        }
                if (done || getppid() != parent)
                        break;
                /* Signals are blocked: they wait here, none is lost. The
                 * tick is a second line behind the parent-death signal. */
                sigtimedwait(&all, &si, &tick);
        }
        kill_all(me, cmd, &status, &done);
        mirror(done ? status : SIGKILL);
}

pid_t shepherd_fork(bool own_group, pid_t *ret_cmd)
{
        pid_t parent = getpid(), shep, cmd = -1;
        sigset_t all, caller;
        int p[2];

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, &caller);
        shep = fork();
        if (shep < 0) {
                int e = errno;

                sigprocmask(SIG_SETMASK, &caller, NULL);
                close(p[0]);
                close(p[1]);
                return -e;
        }
        if (shep > 0) {
                ssize_t n;

                sigprocmask(SIG_SETMASK, &caller, NULL);
                close(p[1]);
                do
                        n = read(p[0], &cmd, sizeof(cmd));
                while (n < 0 && errno == EINTR);
                close(p[0]);
                if (n != (ssize_t)sizeof(cmd) || cmd <= 0) {
                        waitpid(shep, NULL, 0);
                        return -EAGAIN;
                }
                *ret_cmd = cmd;
                return shep;
        }
        /* The shepherd. Signals stay blocked: it only waits for them. The
         * parent may have died before prctl: look after it. */
        close(p[0]);
        char comm[17] = "";
        prctl(PR_GET_NAME, comm);
        prctl(PR_SET_NAME, "gpuslice-shep"); /* in ps; the command gets its name back */
        prctl(PR_SET_PDEATHSIG, SHEPHERD_PDEATHSIG);
        if (getppid() != parent)
                _exit(CLI_EXIT_FAILURE);
        prctl(PR_SET_CHILD_SUBREAPER, 1);
        shep = getpid();
        cmd = fork();
        if (cmd < 0)
                _exit(CLI_EXIT_FAILURE); /* the caller reads EOF */
        if (cmd == 0) {
                close(p[1]);
                prctl(PR_SET_NAME, comm);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != shep)
                        _exit(CLI_EXIT_FAILURE);
                if (own_group)
                        setpgid(0, 0);
                sigprocmask(SIG_SETMASK, &caller, NULL);
                return 0;
        }
        if (own_group)
                setpgid(cmd, cmd); /* also here: the group exists before the caller knows cmd */
        (void)!write(p[1], &cmd, sizeof(cmd));
        close(p[1]);
        close_range(3, ~0u, 0); /* the caller's sockets and pipes are not ours to hold */
        shepherd_main(parent, cmd);
}
