/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice run: run a command in a GPU slice. The child is forked stopped
 * before exec (it waits on a pipe), the daemon makes a slice for its pid,
 * and the child then receives its environment (slice config, shim preload,
 * visible GPU) over the pipe and execs. Signals are forwarded; the exit
 * status is the command's (128+N when killed by signal N). */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opts.h"
#include "client.h"
#include "compute_policy.h"
#include "overuse_policy.h"
#include "quantity.h"
#include "shepherd.h"
#include "slice_env.h"
#include "slice_log.h"

#define ENV_MAX 16384

enum { OPT_GPU = 1, OPT_MEMORY, OPT_POLICY, OPT_OVERUSE, OPT_NAME, OPT_SIM, OPT_LOG_DIR };

static const struct cli_opt run_table[] = {
        { OPT_GPU, 0, "gpu", "SHARE", "300m, 0.3 (a slice) or 1, 2 (whole GPUs, no limits)", NULL },
        { OPT_MEMORY, 0, "gpu-memory", "SIZE", "memory cap, e.g. 6Gi (default: share x GPU memory)",
          NULL },
        { OPT_POLICY, 0, "policy", "P", "share (default: idle time is lent) or cap", "share cap" },
        { OPT_OVERUSE, 0, "overuse", "P",
          "what the watchdog does when the slice is caught over its limits:\n"
          "report, kill or evict (default: gpusliced's --overuse-policy)",
          "report kill evict" },
        { OPT_NAME, 0, "name", "NAME", "a name for the slice ([A-Za-z0-9._-], shown by ls)", NULL },
        { OPT_SIM, 0, "sim", NULL, "use simgpu, the simulated driver (also for a started daemon)",
          NULL },
        { OPT_LOG_DIR, 0, "log-dir", "DIR",
          "where the slice's log goes (gpuslice logs NAME): DIR/NAME.log; default\n"
          "$GPUSLICE_LOG_DIR, else /var/log/gpuslice for root, else ~/.local/state/gpuslice/logs",
          NULL },
};

const struct cli_cmd cli_cmd_run = {
        .name = "run",
        .usage = "--gpu SHARE [OPTIONS] -- CMD [ARGS...]",
        .summary = "run a command in a GPU slice (gpuslice run --gpu 300m -- CMD...)",
        .description = "Run CMD in a slice of one GPU (or on whole GPUs), with its memory cap "
                       "enforced.\n",
        .footer = "Exit status: CMD's status; 128+N if CMD was killed by signal N; 125 if gpuslice\n"
                  "itself failed (no slice); 126/127 if CMD could not be executed.\n",
        .opts = run_table,
        .n_opts = GS_ARRAY_SIZE(run_table),
        .flags = CLI_CMD_OPERANDS_FIRST,
        .operand = "COMMAND",
};

static volatile sig_atomic_t child_pid;

static void forward(int sig, siginfo_t *si, void *uc)
{
        (void)uc;
        /* A terminal's Ctrl-C already reached the child (same process
         * group); forward only signals sent to us alone. */
        if (si && si->si_code == SI_KERNEL)
                return;
        if (child_pid > 0)
                kill((pid_t)child_pid, sig);
}

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

/* In the child: wait for the environment, then exec. Never returns. */
static void child_main(int rfd, char **cmd)
{
        static char env[ENV_MAX];
        size_t len = 0;
        for (;;) {
                ssize_t n = read(rfd, env + len, sizeof(env) - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        close(rfd);
        if (len == 0)
                _exit(CLI_EXIT_FAILURE); /* the parent got no slice */
        env[len] = '\0';
        for (size_t off = 0; off < len; off += strlen(env + off) + 1)
                putenv(env + off);
        execvp(cmd[0], cmd);
        int e = errno;
        fprintf(stderr, "gpuslice run: cannot execute %s: %s\n", cmd[0], strerror(e));
        _exit(e == ENOENT ? 127 : 126);
}

struct run_opts {
        uint32_t milli;
        uint64_t memory;
        const char *policy, *overuse, *name;
        const char *log_dir;
        bool sim;
};

/* Parse run's options into o; 1 after --help, -EINVAL after a usage error
 * (printed), else 0 and *ret_cmd is the command line. */
static int parse_run(int argc, char **argv, struct run_opts *o, char ***ret_cmd)
{
        struct gs_error *err = NULL;
        bool have_gpu = false;
        struct cli_args a;
        int c;
        cli_args_init(&a, &cli_cmd_run, argc, argv);
        while ((c = cli_args_next(&a)) > 0) {
                const char *v = a.arg;
                int r = 0;
                switch (c) {
                case OPT_GPU:
                        r = gs_gpu_quantity_parse("--gpu", v, &o->milli, &err);
                        have_gpu = true;
                        break;
                case OPT_MEMORY:
                        r = gs_memory_size_parse("--gpu-memory", v, &o->memory, &err);
                        break;
                case OPT_POLICY:
                        if (gs_compute_policy_parse_str(v, &(enum gs_compute_policy){ 0 }) < 0)
                                r = gs_error_set(&err, -EINVAL, "--policy: '%s' is not %s", v,
                                                 "share or cap");
                        o->policy = v;
                        break;
                case OPT_OVERUSE:
                        if (gs_overuse_policy_parse_str(v, &(enum gs_overuse_policy){ 0 }) < 0)
                                r = gs_error_set(&err, -EINVAL, "--overuse: '%s' is not one of %s",
                                                 v, GS_OVERUSE_POLICY_NAMES);
                        o->overuse = v;
                        break;
                case OPT_NAME: o->name = v; break;
                case OPT_SIM: o->sim = true; break;
                case OPT_LOG_DIR: o->log_dir = v; break;
                }
                if (r < 0) {
                        cli_usage_error(&cli_cmd_run, "%s", gs_error_msg(err));
                        gs_error_free(err);
                        return -EINVAL;
                }
        }
        if (c < 0)
                return c == CLI_ARGS_HELP ? 1 : -EINVAL;
        if (!have_gpu || a.ind >= argc) {
                cli_usage_error(&cli_cmd_run, "%s",
                                have_gpu ? "no command given (after --)" : "--gpu is required");
                return -EINVAL;
        }
        if (o->memory && o->milli >= 1000) {
                fprintf(stderr, "gpuslice run: --gpu-memory applies to slices (below 1 GPU); "
                                "whole GPUs have no memory cap\n");
                return -EINVAL;
        }
        *ret_cmd = argv + a.ind;
        return 0;
}

static int wait_child(pid_t pid)
{
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return CLI_EXIT_FAILURE;
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
        return CLI_EXIT_FAILURE;
}

int cmd_run(int argc, char **argv)
{
        struct run_opts o = { 0 };
        char **cmd = NULL;
        int r = parse_run(argc, argv, &o, &cmd);
        if (r != 0)
                return r > 0 ? 0 : CLI_EXIT_USAGE;

        struct gs_error *err = NULL;
        int fd = -1;
        struct cli_conn_opts co = { .sim = o.sim, .start = true };
        /* The daemon says what it serves: simgpu is remembered there. */
        static struct cli_daemon_info info;
        if (cli_connect(&co, &fd, &err) < 0 || cli_status(fd, &info, &err) < 0 ||
            (o.sim && !info.sim &&
             gs_error_set(&err, -EINVAL, "--sim: this gpusliced serves NVIDIA GPUs, not simgpu "
                          "(a private simulated one: --sim without GPUSLICE_SOCKET and "
                          "GPUSLICE_STATE_DIR, or a state directory of its own)") < 0)) {
                fprintf(stderr, "gpuslice run: %s\n", gs_error_msg(err));
                gs_error_free(err);
                if (fd >= 0)
                        close(fd);
                return CLI_EXIT_FAILURE;
        }
        /* Signals that arrive before the child runs are held, then forwarded. */
        sigset_t set, old;
        sigemptyset(&set);
        for (size_t i = 0; i < GS_ARRAY_SIZE(forwarded); i++)
                sigaddset(&set, forwarded[i]);
        sigprocmask(SIG_BLOCK, &set, &old);
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
                perror("gpuslice run: pipe");
                return CLI_EXIT_FAILURE;
        }
        /* The command runs below a shepherd (shepherd.h): whatever it starts
         * dies with it, and it dies with us, even by kill -9. */
        pid_t cmd_pid = -1;
        pid_t shep = shepherd_fork(false, &cmd_pid);
        if (shep < 0) {
                fprintf(stderr, "gpuslice run: cannot start the command: %s\n", strerror(-shep));
                return CLI_EXIT_FAILURE;
        }
        if (shep == 0) {
                close(p[1]);
                close(fd);
                sigprocmask(SIG_SETMASK, &old, NULL);
                child_main(p[0], cmd);
        }
        close(p[0]);
        child_pid = cmd_pid;
        struct sigaction sa = { .sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART };
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < GS_ARRAY_SIZE(forwarded); i++)
                sigaction(forwarded[i], &sa, NULL);

        struct cli_slice s;
        static char env_data[ENV_MAX];
        struct slice_env env = { .buf = env_data, .size = sizeof(env_data) };
        r = cli_create_slice(fd, o.milli, o.memory, o.policy, o.overuse, o.name, cmd_pid, NULL,
                             &s, &err);
        if (r == 0 && (r = slice_env_build(&s, &info, &env, &err)) < 0) {
                struct gs_error *e2 = NULL;
                cli_release_slice(fd, s.id, NULL, &e2);
                gs_error_free(e2);
        }
        close(fd);
        if (r < 0) {
                fprintf(stderr, "gpuslice run: %s\n", gs_error_msg(err));
                gs_error_free(err);
                close(p[1]);                  /* the child exits without running CMD */
                kill(cmd_pid, SIGKILL);
                wait_child(shep);
                return CLI_EXIT_FAILURE;
        }
        struct gs_error *log_err = NULL; /* no log: the command runs all the same */
        if (slice_log_for_slice(o.log_dir, &s, &env, &log_err) < 0) {
                fprintf(stderr, "gpuslice run: no log for slice %s: %s\n", s.id,
                        gs_error_msg(log_err));
                gs_error_free(log_err);
        }
        size_t off = 0;
        while (off < env.len) {
                ssize_t n = write(p[1], env.buf + off, env.len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                off += (size_t)n;
        }
        close(p[1]);
        sigprocmask(SIG_SETMASK, &old, NULL);
        return wait_child(shep); /* the shepherd leaves as the command did */
}
