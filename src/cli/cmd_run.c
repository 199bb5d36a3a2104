/* gpuslice run: run a command in a GPU slice. The child is forked stopped
 * before exec (it waits on a pipe), the daemon makes a slice for its pid,
 * and the child then receives its environment (slice config, shim preload,
 * visible GPU) over the pipe and execs. Signals are forwarded; the exit
 * status is the command's (128+N when killed by signal N). */
#include <dlfcn.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "quantity.h"

#ifndef GS_SIM_LIBDIR
#define GS_SIM_LIBDIR ""
#endif

#define ENV_MAX 16384

static const char run_usage[] =
        "Usage: gpuslice run --gpu SHARE [OPTIONS] -- CMD [ARGS...]\n"
        "Run CMD in a slice of one GPU (or on whole GPUs), with its memory cap enforced.\n\n"
        "  --gpu SHARE          300m, 0.3 (a slice) or 1, 2 (whole GPUs, no limits)\n"
        "  --gpu-memory SIZE    memory cap, e.g. 6Gi (default: share x GPU memory)\n"
        "  --policy P           share (default: idle time is lent) or cap\n"
        "  --name NAME          a name for the slice ([A-Za-z0-9._-], shown by ls)\n"
        "  --sim                use simgpu, the simulated driver (also for a started daemon)\n"
        "  -h, --help           this text\n\n"
        "Exit status: CMD's status; 128+N if CMD was killed by signal N; 125 if gpuslice\n"
        "itself failed (no slice); 126/127 if CMD could not be executed.\n";

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

/* The shim: $GPUSLICE_SHIM, the build tree (src/cli -> src/shim), an
 * install tree (bin -> lib/gpuslice), or next to us. */
static int find_shim(char *buf, size_t size)
{
        const char *env = getenv("GPUSLICE_SHIM");
        if (env && *env) {
                snprintf(buf, size, "%s", env);
                return access(buf, R_OK) == 0 ? 0 : -ENOENT;
        }
        char exe[GS_PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n <= 0)
                return -ENOENT;
        exe[n] = '\0';
        const char *dir = dirname(exe);
        const char *cands[] = { "../shim/libgpuslice.so", "../lib/gpuslice/libgpuslice.so",
                                "libgpuslice.so" };
        for (size_t i = 0; i < GS_ARRAY_SIZE(cands); i++) {
                char cand[GS_PATH_MAX + 64], real[PATH_MAX];
                snprintf(cand, sizeof(cand), "%s/%s", dir, cands[i]);
                if (access(cand, R_OK) == 0 && realpath(cand, real)) {
                        snprintf(buf, size, "%s", real);
                        return 0;
                }
        }
        return -ENOENT;
}

#ifdef GS_SANITIZE
/* A sanitizer-built shim inside an uninstrumented program needs the ASan
 * runtime loaded first: find the one this binary uses. */
static int find_asan(struct dl_phdr_info *info, size_t size, void *data)
{
        (void)size;
        if (info->dlpi_name && strstr(info->dlpi_name, "libasan.so")) {
                snprintf(data, GS_PATH_MAX, "%s", info->dlpi_name);
                return 1;
        }
        return 0;
}
#endif

struct envbuf {
        char data[ENV_MAX];
        size_t len;
        bool overflow;
};

static void env_add(struct envbuf *e, const char *key, const char *value)
{
        int n = snprintf(e->data + e->len, sizeof(e->data) - e->len, "%s=%s", key, value);
        if (n < 0 || (size_t)n + 1 >= sizeof(e->data) - e->len) {
                e->overflow = true;
                return;
        }
        e->len += (size_t)n + 1; /* keep the NUL as separator */
}

/* Prepend `first` to a colon-separated variable. */
static void env_prepend(struct envbuf *e, const char *key, const char *first, char sep)
{
        const char *old = getenv(key);
        char v[ENV_MAX / 2];
        if (old && *old)
                snprintf(v, sizeof(v), "%s%c%s", first, sep, old);
        else
                snprintf(v, sizeof(v), "%s", first);
        env_add(e, key, v);
}

static int build_env(const struct cli_slice *s, bool sim, struct envbuf *e, struct gs_error **err)
{
        char vis[CLI_MAX_SLICE_GPUS * GS_GPU_UUID_MAX] = "";
        for (unsigned i = 0; i < s->n_gpus; i++) {
                size_t l = strlen(vis);
                snprintf(vis + l, sizeof(vis) - l, "%s%s", i ? "," : "", s->gpu_uuid[i]);
        }
        env_add(e, "CUDA_VISIBLE_DEVICES", vis);
        env_add(e, "GPUSLICE_SLICE", s->id);
        if (sim) {
                const char *env = getenv("GPUSLICE_SIM_LIBDIR");
                const char *dir = env && *env ? env : GS_SIM_LIBDIR;
                if (*dir)
                        env_prepend(e, "LD_LIBRARY_PATH", dir, ':');
        }
        if (s->config[0]) {
                char shim[GS_PATH_MAX];
                if (find_shim(shim, sizeof(shim)) < 0)
                        return gs_error_set(err, -ENOENT,
                                            "the shim libgpuslice.so was not found (next to gpuslice, "
                                            "in ../shim, ../lib/gpuslice); set GPUSLICE_SHIM");
                char preload[2 * GS_PATH_MAX + 2];
                snprintf(preload, sizeof(preload), "%s", shim);
#ifdef GS_SANITIZE
                char asan[GS_PATH_MAX] = "";
                dl_iterate_phdr(find_asan, asan);
                if (asan[0])
                        snprintf(preload, sizeof(preload), "%s:%s", asan, shim);
                if (!getenv("ASAN_OPTIONS"))
                        env_add(e, "ASAN_OPTIONS", "detect_leaks=0");
#endif
                env_prepend(e, "LD_PRELOAD", preload, ':');
                env_add(e, "GPUSLICE_CONFIG", s->config);
        }
        if (e->overflow)
                return gs_error_set(err, -E2BIG, "environment too large");
        return 0;
}

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
        const char *policy, *name;
        bool sim;
};

static int parse_run(int argc, char **argv, struct run_opts *o)
{
        static const struct option opts[] = {
                { "gpu", required_argument, NULL, 'g' },   { "gpu-memory", required_argument, NULL, 'm' },
                { "policy", required_argument, NULL, 'p' }, { "name", required_argument, NULL, 'n' },
                { "sim", no_argument, NULL, 's' },          { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        struct gs_error *err = NULL;
        bool have_gpu = false;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                int r = 0;
                switch (c) {
                case 'g':
                        r = gs_gpu_quantity_parse("--gpu", optarg, &o->milli, &err);
                        have_gpu = true;
                        break;
                case 'm':
                        r = gs_memory_quantity_parse("--gpu-memory", optarg, &o->memory, &err);
                        break;
                case 'p':
                        if (strcmp(optarg, "share") && strcmp(optarg, "cap"))
                                r = gs_error_set(&err, -EINVAL,
                                                 "--policy: '%s' is not share or cap", optarg);
                        o->policy = optarg;
                        break;
                case 'n': o->name = optarg; break;
                case 's': o->sim = true; break;
                case 'h': fputs(run_usage, stdout); return 1;
                default: fputs(run_usage, stderr); return -EINVAL;
                }
                if (r < 0) {
                        fprintf(stderr, "gpuslice run: %s\n", gs_error_msg(err));
                        gs_error_free(err);
                        return -EINVAL;
                }
        }
        if (!have_gpu || optind >= argc) {
                fprintf(stderr, "gpuslice run: %s\n\n%s",
                        have_gpu ? "no command given (after --)" : "--gpu is required", run_usage);
                return -EINVAL;
        }
        if (o->memory && o->milli >= 1000) {
                fprintf(stderr, "gpuslice run: --gpu-memory applies to slices (below 1 GPU); "
                                "whole GPUs have no memory cap\n");
                return -EINVAL;
        }
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
        int r = parse_run(argc, argv, &o);
        if (r != 0)
                return r > 0 ? 0 : CLI_EXIT_USAGE;
        char **cmd = argv + optind;

        struct gs_error *err = NULL;
        int fd = -1;
        struct cli_conn_opts co = { .sim = o.sim, .start = true };
        if (cli_connect(&co, &fd, &err) < 0) {
                fprintf(stderr, "gpuslice run: %s\n", gs_error_msg(err));
                gs_error_free(err);
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
        pid_t pid = fork();
        if (pid < 0) {
                perror("gpuslice run: fork");
                return CLI_EXIT_FAILURE;
        }
        if (pid == 0) {
                close(p[1]);
                close(fd);
                sigprocmask(SIG_SETMASK, &old, NULL);
                child_main(p[0], cmd);
        }
        close(p[0]);
        child_pid = pid;
        struct sigaction sa = { .sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART };
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < GS_ARRAY_SIZE(forwarded); i++)
                sigaction(forwarded[i], &sa, NULL);

        struct cli_slice s;
        struct envbuf env = { .len = 0 };
        r = cli_create_slice(fd, o.milli, o.memory, o.policy, o.name, pid, &s, &err);
        if (r == 0 && (r = build_env(&s, o.sim, &env, &err)) < 0) {
                struct gs_error *e2 = NULL;
                cli_release_slice(fd, s.id, &e2);
                gs_error_free(e2);
        }
        close(fd);
        if (r < 0) {
                fprintf(stderr, "gpuslice run: %s\n", gs_error_msg(err));
                gs_error_free(err);
                close(p[1]);                  /* the child exits without running CMD */
                kill(pid, SIGKILL);
                wait_child(pid);
                return CLI_EXIT_FAILURE;
        }
        size_t off = 0;
        while (off < env.len) {
                ssize_t n = write(p[1], env.data + off, env.len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                off += (size_t)n;
        }
        close(p[1]);
        sigprocmask(SIG_SETMASK, &old, NULL);
        return wait_child(pid);
}
