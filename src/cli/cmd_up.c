/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice up SPEC: start every API of an API spec, each in its own slice.
 *
 * Order of work: load the spec; check that every command can be run; ask the
 * daemon (starting the embedded one if none runs) for its GPUs and slices and
 * place the whole spec on paper; refuse it as a whole, starting nothing, when
 * one API does not fit. Then hand the APIs to the supervisor (up_supervise.c),
 * which starts them, prefixes their output, restarts them with backoff and
 * stops them on Ctrl-C; every start gets a fresh slice for its process (as
 * `gpuslice run` does) and every exit releases it. Each API's output and its
 * shim's lines also go to its log (slice_log.h); with -d the supervisor runs
 * detached (up_detach.h) until `gpuslice down`. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opts.h"
#include "error.h"
#include "macro.h"
#include "number.h"
#include "spec.h"
#include "slice_log.h"
#include "up_detach.h"
#include "up_plan.h"
#include "up_slices.h"
#include "up_supervise.h"

/* Exit status when the spec does not fit (nothing was started). */
#define UP_EXIT_NO_FIT 3

struct up_state {
        struct gs_spec *spec;
        struct up_api *apis;
        char ***argvs;          /* per API: resolved argv (owned) */
        char ***envs;           /* per API: "K=V" of the spec (owned) */
        char **logs;            /* per API: its log's path (owned); NULL entries: none */
        char *spec_abs;         /* the spec's absolute path (owned), for gpuslice down */
        char *up_log;           /* -d: the supervisor's own log (owned) */
        struct up_slices *slices;
};

enum { OPT_SIM = 1, OPT_GRACE, OPT_DETACH, OPT_LOG_DIR };

static const struct cli_opt up_table[] = {
        { OPT_SIM, 0, "sim", NULL, "use simgpu (no NVIDIA driver needed) if no daemon runs", NULL },
        { OPT_GRACE, 0, "grace", "SECONDS", "how long APIs get to stop before SIGKILL (default 10)",
          NULL },
        { OPT_DETACH, 'd', "detach", NULL,
          "run in the background: return once every API is started; the APIs'\n"
          "output goes to their logs only; gpuslice down SPEC stops them",
          NULL },
        { OPT_LOG_DIR, 0, "log-dir", "DIR",
          "where each API's log goes (gpuslice logs NAME): DIR/NAME.log; default\n"
          "$GPUSLICE_LOG_DIR, else /var/log/gpuslice for root, else ~/.local/state/gpuslice/logs",
          NULL },
};

const struct cli_cmd cli_cmd_up = {
        .name = "up",
        .usage = "[-d] [--sim] [--grace SECONDS] [--log-dir DIR] SPEC",
        .summary = "start every API of a spec file in its slice (gpuslice up apis.yaml)",
        .description =
                "Start every API of the API spec SPEC (YAML), each in its own GPU slice, and\n"
                "keep them running until Ctrl-C:\n"
                "  - the whole spec is placed before anything starts; if one API does not fit,\n"
                "    nothing starts and the message says which GPU would be short of what;\n"
                "  - each output line is prefixed with its API's name, [name] ...; it also goes\n"
                "    to the API's log, with the shim's lines (gpuslice logs NAME);\n"
                "  - an API that exits is restarted after 0.5s, doubling to 30s (reset once it\n"
                "    has stayed up 30s); one that failed for a reason a restart cannot fix\n"
                "    (its slice refused by the daemon, its command not found or not\n"
                "    executable: exit status 127 or 126) is not restarted: `up: NAME: not\n"
                "    restarted: REASON`; the others keep running, and once none is left `up`\n"
                "    exits; either way with status 4;\n"
                "  - Ctrl-C, SIGTERM or SIGHUP stops them all (SIGTERM, then SIGKILL after the grace\n"
                "    period, default 10s) and frees their slices; exit status 0. If `up` itself is\n"
                "    killed, even with kill -9, every API and what it started dies with it;\n"
                "  - gpuslice stop NAME stops one API for good (it is not restarted);\n"
                "    gpuslice down SPEC, from any terminal, stops them all as Ctrl-C does;\n"
                "  - with -d, up returns once every API is started and its supervisor runs on\n"
                "    in the background (its own log: DIR/up-SPEC.log) until gpuslice down.\n",
        .footer = "Exit status: 0 after Ctrl-C; 2 usage; 3 the spec does not fit (nothing was\n"
                  "started); 4 an API was not restarted; 125 gpuslice itself failed.\n",
        .opts = up_table,
        .n_opts = GS_ARRAY_SIZE(up_table),
        .operand = "FILE",
};

/* Free everything of st; safe on a half-built state. */
static void state_done(struct up_state *st)
{
        size_t n = st->spec ? st->spec->n_apis : 0;

        for (size_t i = 0; i < n; i++) {
                if (st->argvs)
                        free(st->argvs[i]); /* the strings belong to the spec */
                if (st->envs && st->envs[i]) {
                        for (char **e = st->envs[i]; *e; e++)
                                free(*e);
                        free(st->envs[i]);
                }
        }
        for (size_t i = 0; st->logs && i < n; i++)
                free(st->logs[i]);
        free(st->logs);
        free(st->spec_abs);
        free(st->up_log);
        free(st->argvs);
        free(st->envs);
        free(st->apis);
        st->slices = up_slices_free(st->slices);
        st->spec = gs_spec_free(st->spec);
}

static bool is_executable(const char *path)
{
        struct stat sb;

        return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

/* Is `name` (no '/') an executable on PATH? */
static bool on_path(const char *name)
{
        const char *path = getenv("PATH");
        char buf[PATH_MAX];

        if (!path || !*path)
                path = "/usr/local/bin:/usr/bin:/bin";
        while (*path) {
                size_t len = strcspn(path, ":");
                int n = snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, len ? path : ".", name);

                if (n > 0 && (size_t)n < sizeof(buf) && is_executable(buf))
                        return true;
                path += len + (path[len] == ':');
        }
        return false;
}

/* Build the argv of API i: a relative command path (with a '/') is taken
 * relative to the spec file's directory, as docker compose does; a bare name
 * is looked up on PATH. Fails with a message when it cannot be run. */
static int resolve_argv(struct up_state *st, size_t i, const char *spec_dir,
                        struct gs_error **err)
{
        const struct gs_api_spec *api = &st->spec->apis[i];
        char **argv;

        if (!api->command || api->n_command == 0)
                return gs_error_set(err, -EINVAL,
                                    "API %s has no command: `up` runs commands on this machine "
                                    "(image: is for Kubernetes, see `gpuslice render`)",
                                    api->name);
        argv = calloc(api->n_command + 1, sizeof(*argv));
        if (!argv)
                return -ENOMEM;
        memcpy(argv, api->command, api->n_command * sizeof(*argv));
        st->argvs[i] = argv;
        if (!strchr(argv[0], '/'))
                return on_path(argv[0]) ? 0
                                        : gs_error_set(err, -ENOENT,
                                                       "API %s: command %s is not on PATH",
                                                       api->name, argv[0]);
        if (argv[0][0] != '/') {
                char *abs = NULL;

                if (asprintf(&abs, "%s/%s", spec_dir, argv[0]) < 0)
                        return -ENOMEM;
                /* The joined path lives in the spec so it is freed with it. */
                free(st->spec->apis[i].command[0]);
                st->spec->apis[i].command[0] = abs;
                argv[0] = abs;
        }
        if (!is_executable(argv[0]))
                return gs_error_set(err, -ENOENT, "API %s: command %s is not an executable file",
                                    api->name, argv[0]);
        return 0;
}

static int build_env(struct up_state *st, size_t i)
{
        const struct gs_api_spec *api = &st->spec->apis[i];
        char **env = calloc(api->n_env + 1, sizeof(*env));

        if (!env)
                return -ENOMEM;
        st->envs[i] = env;
        for (size_t k = 0; k < api->n_env; k++)
                if (asprintf(&env[k], "%s=%s", api->env[k].name, api->env[k].value) < 0) {
                        env[k] = NULL;
                        return -ENOMEM;
                }
        return 0;
}

static int prepare_apis(struct up_state *st, const char *spec_path, struct gs_error **err)
{
        size_t n = st->spec->n_apis;
        _cleanup_free_ char *copy = strdup(spec_path);
        const char *dir;
        int r;

        if (!copy)
                return -ENOMEM;
        dir = strrchr(copy, '/') ? (*strrchr(copy, '/') = '\0', copy[0] ? copy : "/") : ".";
        st->apis = calloc(n, sizeof(*st->apis));
        st->argvs = calloc(n, sizeof(*st->argvs));
        st->envs = calloc(n, sizeof(*st->envs));
        if (!st->apis || !st->argvs || !st->envs)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const struct gs_api_spec *api = &st->spec->apis[i];

                r = resolve_argv(st, i, dir, err);
                if (r < 0)
                        return r;
                r = build_env(st, i);
                if (r < 0)
                        return r;
                if (api->replicas > 1)
                        fprintf(stderr, "up: %s asks for %u replicas; `up` runs one process per "
                                "API (replicas apply on Kubernetes)\n", api->name, api->replicas);
                st->apis[i] = (struct up_api){ .name = api->name, .argv = st->argvs[i],
                                               .env = st->envs[i] };
        }
        return 0;
}

static int parse_grace(const char *s, uint64_t *ret_ms)
{
        return gs_decimal_milli_parse_str(s, 3600 * 1000, ret_ms);
}

/* The logs: one per API (DIR/NAME.log) and, with -d, the supervisor's own
 * (DIR/up-SPECFILE.log); the spec's absolute path, by which `gpuslice down`
 * finds this up. A log directory that cannot be named leaves the APIs
 * without logs (said), unless -d needs one. */
static int prepare_logs(struct up_state *st, const char *spec_path, const char *log_dir,
                        bool detach, struct gs_error **err)
{
        size_t n = st->spec->n_apis;
        char dir[4096], path[4200];
        struct gs_error *lerr = NULL;
        int r;

        st->spec_abs = realpath(spec_path, NULL);
        st->logs = calloc(n, sizeof(*st->logs));
        if (!st->spec_abs || !st->logs)
                return st->spec_abs ? -ENOMEM
                                    : gs_error_set(err, -errno, "%s: %s", spec_path, strerror(errno));
        if ((r = slice_log_dir(log_dir, dir, sizeof(dir), &lerr)) < 0) {
                if (detach) {
                        *err = lerr;
                        return r;
                }
                fprintf(stderr, "up: the APIs run without logs: %s\n", gs_error_msg(lerr));
                gs_error_free(lerr);
                return 0;
        }
        for (size_t i = 0; i < n; i++) {
                if (slice_log_path(dir, st->spec->apis[i].name, path, sizeof(path), NULL) < 0)
                        continue; /* a name the spec accepted but a file cannot have: no log */
                if (!(st->logs[i] = strdup(path)))
                        return -ENOMEM;
                st->apis[i].log_path = st->logs[i];
        }
        if (!detach)
                return 0;
        const char *base = strrchr(st->spec_abs, '/') ? strrchr(st->spec_abs, '/') + 1 : st->spec_abs;
        if (asprintf(&st->up_log, "%s/up-%s.log", dir, base) < 0) {
                st->up_log = NULL;
                return -ENOMEM;
        }
        for (char *p = st->up_log + strlen(dir) + 1; *p; p++)
                if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-", *p))
                        *p = '_';
        char line[600];
        snprintf(line, sizeof(line), "up -d: %.500s", st->spec_abs);
        return slice_log_start(st->up_log, line, err);
}

int cmd_up(int argc, char **argv)
{
        struct up_slices_options sopt = { .sim = false };
        struct up_state st = { 0 };
        struct up_detach det = { .report_fd = -1 };
        const char *log_dir = NULL;
        bool detach = false;
        struct up_options opt;
        struct up_hooks hooks;
        _cleanup_error_ struct gs_error *err = NULL;
        struct cli_args a;
        int c, r;

        up_options_default(&opt);
        cli_args_init(&a, &cli_cmd_up, argc, argv);
        while ((c = cli_args_next(&a)) > 0) {
                switch (c) {
                case OPT_SIM:
                        sopt.sim = true;
                        break;
                case OPT_DETACH:
                        detach = true;
                        break;
                case OPT_LOG_DIR:
                        log_dir = a.arg;
                        break;
                case OPT_GRACE:
                        if (parse_grace(a.arg, &opt.grace_ms) < 0)
                                return cli_usage_error(&cli_cmd_up,
                                                       "--grace %s: expected seconds (0..3600)",
                                                       a.arg);
                        break;
                }
        }
        if (c < 0)
                return cli_args_exit(c);
        if (a.ind != argc - 1)
                return cli_usage_error(&cli_cmd_up, "expected one API spec file");
        const char *spec_path = argv[a.ind];

        r = gs_spec_load_file(spec_path, &st.spec, &err);
        if (r == 0)
                r = prepare_apis(&st, spec_path, &err);
        if (r == 0)
                r = prepare_logs(&st, spec_path, log_dir, detach, &err);
        sopt.up_spec = st.spec_abs;
        sopt.log_paths = st.logs;
        if (r == 0)
                r = up_slices_open(&sopt, st.spec, &st.slices, &err);
        if (r == 0)
                r = up_slices_check_fit(st.slices, &err);
        if (r < 0) {
                fprintf(stderr, "gpuslice up: %s%s\n",
                        err ? gs_error_msg(err) : strerror(-r),
                        r == -ENOSPC ? "\nNothing was started." : "");
                state_done(&st);
                return r == -ENOSPC ? UP_EXIT_NO_FIT : CLI_EXIT_FAILURE;
        }

        fprintf(stderr, "up: starting %zu API%s from %s\n", st.spec->n_apis,
                st.spec->n_apis == 1 ? "" : "s", spec_path);
        hooks = (struct up_hooks){ .prepare = up_slices_prepare, .exited = up_slices_exited,
                                   .stopped = up_slices_stopped, .ud = st.slices };
        if (detach) {
                int status = 0;

                r = up_detach_fork(st.up_log, spec_path, st.apis, st.spec->n_apis, &hooks, &det,
                                   &status);
                if (r != 0) { /* the command: the supervisor runs on, or never started */
                        if (r < 0)
                                fprintf(stderr, "gpuslice up: cannot start the supervisor: %s\n",
                                        strerror(-r));
                        state_done(&st);
                        return r < 0 ? CLI_EXIT_FAILURE : status;
                }
                opt.quiet = true;
        }
        r = up_supervise(st.apis, st.spec->n_apis, &hooks, &opt);
        up_detach_done(&det);
        if (r < 0) {
                fprintf(stderr, "gpuslice up: cannot supervise the APIs: %s\n", strerror(-r));
                r = CLI_EXIT_FAILURE;
        }
        if (up_slices_release_all(st.slices) > 0)
                r = 1;
        else
                fprintf(stderr, "up: all APIs stopped; their slices are freed\n");
        state_done(&st);
        return r;
}
