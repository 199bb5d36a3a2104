/* gpusliced: the node daemon. Flags, start-up (state directory and its
 * lock, the ledger, the inventory, reconciliation), then the event loop.
 * See docs/daemon.md. */
#include "daemon.h"

#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube_plugin.h"
#include "arbiter_server.h"
#include "log.h"
#include "nvml.h"

#ifndef GS_SIM_LIBDIR
#define GS_SIM_LIBDIR ""
#endif

static const char usage_text[] =
        "Usage: gpusliced [OPTIONS]\n"
        "The gpuslice node daemon: GPU inventory, the slice ledger, placement and the\n"
        "local API used by `gpuslice run`, `up` and `ls`.\n\n"
        "  --state-dir DIR     ledger and slice configs (default: /run/gpuslice as root,\n"
        "                      else $XDG_RUNTIME_DIR/gpuslice or /tmp/gpuslice-UID)\n"
        "  --socket PATH       local API socket (default: STATE_DEFAULT/gpusliced.sock)\n"
        "  --policy P          placement: binpack (best fit, default) or spread\n"
        "  --sim               use simgpu, the simulated driver, instead of NVIDIA's\n"
        "                      (library directory: $GPUSLICE_SIM_LIBDIR or the build's)\n"
        "  --log-level L       error, warning, info (default) or debug\n"
        "  --compute-policy P  compute policy of slices that ask for none: share\n"
        "                      (default: idle GPU time is lent) or cap\n"
        "  --kubelet           also be the kubelet device plugin for gpuslice.io/gpu-milli\n"
        "                      (Kubernetes slices share the ledger with local ones)\n"
        "  --kubelet-dir DIR   device plugin directory (" KUBE_PLUGIN_DIR ")\n"
        "  --pod-resources S   the kubelet's PodResources socket\n"
        "                      (" KUBE_POD_RESOURCES_SOCKET ")\n"
        "  --cdi-kind KIND     also answer Allocate with the CDI device KIND=<gpu uuid>\n"
        "  --shim PATH         host path of libgpuslice.so mounted into pods\n"
        "                      (" KUBE_SHIM_PATH "; '' for none)\n"
        "  --release-grace S   never free a pod's slice younger than S seconds (60)\n"
        "  --pod-poll-ms MS    PodResources period (10000)\n"
        "  --health-poll-ms MS GPU health refresh period (2000)\n"
        "  -h, --help          this text\n";

static int parse_ms(const char *flag, const char *v, long long min, long long *ret)
{
        char *end = NULL;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || x < min || x > 86400000)
                return fprintf(stderr, "gpusliced: %s: expected a number from %lld to 86400000, "
                                       "got '%s'\n", flag, min, v), -EINVAL;
        *ret = x;
        return 0;
}

/* mkdir -p with `mode` for the last component. */
static int make_dirs(const char *path, mode_t mode)
{
        char buf[GS_PATH_MAX];
        if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
                return -ENAMETOOLONG;
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return -errno;
        struct stat st;
        if (lstat(buf, &st) < 0)
                return -errno;
        /* A shared /tmp: the directory must be ours and not a symlink. */
        if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
                return -EPERM;
        return 0;
}

static int parse_args(struct daemon *d, int argc, char **argv)
{
        static const struct option opts[] = {
                { "state-dir", required_argument, NULL, 's' },
                { "socket", required_argument, NULL, 'S' },
                { "policy", required_argument, NULL, 'p' },
                { "sim", no_argument, NULL, 'm' },
                { "log-level", required_argument, NULL, 'l' },
                { "compute-policy", required_argument, NULL, 'C' },
                { "kubelet", no_argument, NULL, 'K' },
                { "kubelet-dir", required_argument, NULL, 'k' },
                { "pod-resources", required_argument, NULL, 'R' },
                { "cdi-kind", required_argument, NULL, 'c' },
                { "shim", required_argument, NULL, 'H' },
                { "release-grace", required_argument, NULL, 'g' },
                { "pod-poll-ms", required_argument, NULL, 'r' },
                { "health-poll-ms", required_argument, NULL, 'e' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        bool have_socket = false;
        char dir[DAEMON_DIR_MAX];
        if (gs_local_default_dir(geteuid(), getenv("XDG_RUNTIME_DIR"), dir, sizeof(dir)) < 0)
                return -ENAMETOOLONG;
        snprintf(d->state_dir, sizeof(d->state_dir), "%s", dir);
        int c;
        struct gs_error *err = NULL;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        if (snprintf(d->state_dir, sizeof(d->state_dir), "%s", optarg) >=
                            (int)sizeof(d->state_dir))
                                return fprintf(stderr, "gpusliced: --state-dir too long\n"), -EINVAL;
                        break;
                case 'S':
                        if (snprintf(d->socket_path, sizeof(d->socket_path), "%s", optarg) >=
                            (int)sizeof(d->socket_path))
                                return fprintf(stderr, "gpusliced: --socket too long\n"), -EINVAL;
                        have_socket = true;
                        break;
                case 'p':
                        if (gs_placement_policy_parse(optarg, &d->policy, &err) < 0) {
                                fprintf(stderr, "gpusliced: --policy: %s\n", gs_error_msg(err));
                                gs_error_free(err);
                                return -EINVAL;
                        }
                        break;
                case 'm':
                        d->sim = true;
                        break;
                case 'K':
                        d->kube.enabled = true;
                        break;
                case 'k':
                        d->kube.plugin_dir = optarg;
                        break;
                case 'R':
                        d->kube.pod_resources_socket = optarg;
                        break;
                case 'c':
                        d->kube.cdi_kind = optarg;
                        break;
                case 'H':
                        d->kube.shim_path = optarg;
                        break;
                case 'g':
                case 'r':
                case 'e': {
                        long long v;
                        if (parse_ms(argv[optind - 1], optarg, c == 'g' ? 0 : 10, &v) < 0)
                                return -EINVAL;
                        if (c == 'g')
                                d->kube.release_grace_s = v;
                        else if (c == 'r')
                                d->kube.pod_poll_ms = (unsigned)v;
                        else
                                d->kube.health_poll_ms = (unsigned)v;
                        break;
                }
                case 'C':
                        if (arbsrv_policy_parse(optarg, &d->compute_policy) < 0)
                                return fprintf(stderr, "gpusliced: --compute-policy: '%s' is not "
                                                       "share or cap\n", optarg), -EINVAL;
                        break;
                case 'l':
                        if (strcmp(optarg, "error") == 0)
                                dlog_max_level = DLOG_ERROR;
                        else if (strcmp(optarg, "warning") == 0)
                                dlog_max_level = DLOG_WARN;
                        else if (strcmp(optarg, "info") == 0)
                                dlog_max_level = DLOG_INFO;
                        else if (strcmp(optarg, "debug") == 0)
                                dlog_max_level = DLOG_DEBUG;
                        else
                                return fprintf(stderr, "gpusliced: --log-level: '%s' is not error, "
                                                       "warning, info or debug\n", optarg), -EINVAL;
                        break;
                case 'h':
                        fputs(usage_text, stdout);
                        exit(0);
                default:
                        fputs(usage_text, stderr);
                        return -EINVAL;
                }
        }
        if (optind < argc)
                return fprintf(stderr, "gpusliced: unexpected argument '%s'\n%s", argv[optind],
                               usage_text), -EINVAL;
        if (!have_socket)
                snprintf(d->socket_path, sizeof(d->socket_path), "%s/%s", d->state_dir,
                         GS_LOCAL_SOCKET_NAME);
        snprintf(d->ledger_path, sizeof(d->ledger_path), "%s/ledger", d->state_dir);
        snprintf(d->kube_state_dir, sizeof(d->kube_state_dir), "%s/kube", d->state_dir);
        if (!d->kube.enabled && (d->kube.plugin_dir || d->kube.pod_resources_socket ||
                                 d->kube.cdi_kind || d->kube.shim_path ||
                                 d->kube.release_grace_s >= 0 || d->kube.pod_poll_ms ||
                                 d->kube.health_poll_ms))
                return fprintf(stderr, "gpusliced: the device plugin's options need --kubelet\n"),
                       -EINVAL;
        return 0;
}

/* The state directory, its subdirectories and its lock (one daemon each). */
static int prepare_state(struct daemon *d)
{
        mode_t mode = geteuid() == 0 ? 0755 : 0700;
        char path[DAEMON_PATH_MAX];
        int r = make_dirs(d->state_dir, mode);
        if (r < 0) {
                dlog_error("cannot use state directory %s: %s", d->state_dir, strerror(-r));
                return r;
        }
        snprintf(path, sizeof(path), "%s/lock", d->state_dir);
        d->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (d->lock_fd < 0 || flock(d->lock_fd, LOCK_EX | LOCK_NB) < 0) {
                dlog_error("state directory %s is in use by another gpusliced (lock %s: %m)",
                           d->state_dir, path);
                return -EBUSY;
        }
        const char *subs[] = { "conf", "slices" };
        for (size_t i = 0; i < GS_ARRAY_SIZE(subs); i++) {
                snprintf(path, sizeof(path), "%s/%s", d->state_dir, subs[i]);
                if (mkdir(path, 0755) < 0 && errno != EEXIST) {
                        dlog_error("cannot create %s: %m", path);
                        return -errno;
                }
        }
        char sockdir[DAEMON_PATH_MAX];
        snprintf(sockdir, sizeof(sockdir), "%s", d->socket_path);
        r = make_dirs(dirname(sockdir), mode);
        if (r < 0 && r != -EPERM) {
                dlog_error("cannot create the socket's directory for %s: %s", d->socket_path,
                           strerror(-r));
                return r;
        }
        return 0;
}

static int load_ledger(struct daemon *d)
{
        struct gs_error *err = NULL;
        int r = gs_ledger_load(&d->ledger, d->ledger_path, &err);
        if (r == -ENOENT) {
                dlog_info("no state file %s yet: starting with an empty ledger", d->ledger_path);
                return 0;
        }
        if (r < 0) {
                dlog_error("%s", gs_error_msg(err));
                dlog_error("refusing to start: an empty ledger could over-commit GPUs that running "
                           "slices use. Repair or remove %s once no slice process runs.",
                           d->ledger_path);
                gs_error_free(err);
                return r;
        }
        dlog_info("loaded %zu slice%s from %s", d->ledger.n_slices,
                  d->ledger.n_slices == 1 ? "" : "s", d->ledger_path);
        return 0;
}

static int open_inventory(struct daemon *d)
{
        const char *sim_dir = NULL;
        if (d->sim) {
                const char *env = getenv("GPUSLICE_SIM_LIBDIR");
                snprintf(d->sim_dir, sizeof(d->sim_dir), "%s", env && *env ? env : GS_SIM_LIBDIR);
                if (!d->sim_dir[0]) {
                        dlog_error("--sim: this build has no simgpu; set GPUSLICE_SIM_LIBDIR to the "
                                   "directory of simgpu's libnvidia-ml.so.1");
                        return -ENOENT;
                }
                sim_dir = d->sim_dir;
                dlog_info("--sim: using simgpu, the simulated NVIDIA driver, from %s", sim_dir);
        }
        struct gs_error *err = NULL;
        int r = nvml_open(sim_dir, &d->nvml, &err);
        if (r == 0)
                r = nvml_read_inventory(d->nvml, &d->inv, &err);
        if (r < 0) {
                dlog_error("%s", gs_error_msg(err));
                gs_error_free(err);
                return r;
        }
        nvml_measure_overhead(d->nvml, sim_dir, &d->inv);
        for (unsigned i = 0; i < d->inv.n_gpus; i++) {
                const struct gs_gpu *g = &d->inv.gpus[i];
                char mem[32], ovh[32];
                dlog_info("GPU %u: %s (%s), %s, %s, context overhead %s%s", g->index, g->uuid,
                          g->name, gs_bytes_human(g->memory_total, mem, sizeof(mem)),
                          g->healthy ? "healthy" : "UNHEALTHY",
                          gs_bytes_human(g->context_overhead, ovh, sizeof(ovh)),
                          g->overhead_measured ? " (measured)" : " (default: not measurable)");
        }
        return 0;
}

static int setup_loop(struct daemon *d)
{
        d->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (d->epfd < 0)
                return -errno;
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        sigprocmask(SIG_BLOCK, &set, NULL);
        signal(SIGPIPE, SIG_IGN);
        int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        d->sig = (struct watch){ .kind = WATCH_SIGNAL, .fd = fd };
        return server_watch(d, &d->sig, EPOLLIN);
}

int main(int argc, char **argv)
{
        static struct daemon d;
        d.epfd = d.lock_fd = -1;
        d.listen.fd = d.sig.fd = -1;
        d.kube_stop_fd = d.kube_stop_rd = d.kube_done_wr = d.kube_done.fd = -1;
        d.kube.release_grace_s = -1;
        pthread_mutex_init(&d.lock, NULL);
        gs_ledger_init(&d.ledger);
        if (parse_args(&d, argc, argv) < 0)
                return 2;
        int r;
        if ((r = prepare_state(&d)) < 0 || (r = load_ledger(&d)) < 0 || (r = open_inventory(&d)) < 0)
                return 1;
        if ((r = setup_loop(&d)) < 0) {
                dlog_error("cannot set up the event loop: %s", strerror(-r));
                return 1;
        }
        if (slices_reconcile(&d) < 0 || arbsrv_init(&d) < 0)
                return 1;
        struct gs_error *err = NULL;
        if (server_listen(&d, &err) < 0) {
                dlog_error("%s", gs_error_msg(err));
                gs_error_free(err);
                return 1;
        }
        dlog_info("listening on %s (state %s, policy %s, %u GPU%s, %zu slice%s)", d.socket_path,
                  d.state_dir, gs_placement_policy_name(d.policy), d.inv.n_gpus,
                  d.inv.n_gpus == 1 ? "" : "s", d.ledger.n_slices,
                  d.ledger.n_slices == 1 ? "" : "s");
        if (kubelet_start(&d) < 0)
                d.stop = d.kube_failed = true;
        server_run(&d);
        kubelet_stop(&d);
        server_shutdown(&d);
        arbsrv_done(&d);
        r = gs_ledger_save(&d.ledger, d.ledger_path, &err);
        if (r < 0)
                dlog_error("%s", gs_error_msg(err));
        gs_error_free(err);
        dlog_info("stopped; %zu slice%s kept for the next start", d.ledger.n_slices,
                  d.ledger.n_slices == 1 ? "" : "s");
        slices_unfollow_all(&d);
        nvml_close(d.nvml);
        gs_ledger_done(&d.ledger);
        close(d.sig.fd);
        close(d.epfd);
        close(d.lock_fd);
        pthread_mutex_destroy(&d.lock);
        return r < 0 || d.kube_failed ? 1 : 0;
}
