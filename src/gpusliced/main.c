/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced: the node daemon. Flags, start-up (state directory and its
 * lock, the ledger, the inventory, reconciliation), then the event loop.
 * See docs/daemon.md. */
#include "daemon.h"

#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
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
#include "frontends.h"
#include "http_server.h"
#include "compute_policy.h"
#include "gs_version.h"
#include "install_shim.h"
#include "log.h"
#include "log_stderr.h"
#include "number.h"
#include "nvml.h"
#include "watchdog_daemon.h"

#ifndef GS_SIM_LIBDIR
#define GS_SIM_LIBDIR ""
#endif

static const char usage_text[] =
        "Usage: gpusliced [OPTIONS]\n"
        "       gpusliced install-shim [--from PATH] DEST   copy the shim to a host path\n"
        "       gpusliced --version\n"
        "The gpuslice node daemon: GPU inventory, the slice ledger, placement and the\n"
        "local API used by `gpuslice run`, `up` and `ls`.\n\n"
        "  --state-dir DIR     ledger and slice configs (default: " GS_LOCAL_SYSTEM_DIR ", the\n"
        "                      machine's daemon, as root; with --sim a private one:\n"
        "                      $XDG_RUNTIME_DIR/gpuslice-sim, /run/gpuslice-sim as root,\n"
        "                      else /tmp/gpuslice-sim-UID; with --kubelet as root:\n"
        "                      " KUBE_STATE_DIR_DURABLE "). Without --sim, a user other than\n"
        "                      root must give it (a private daemon)\n"
        "  --socket PATH       local API socket (default: STATE_DEFAULT/gpusliced.sock)\n"
        "  --socket-group G    as root, the group that may use the socket (mode 0660;\n"
        "                      default " GS_LOCAL_GROUP " when it exists; '' for root only)\n"
        "  --policy P          placement: binpack (best fit, default), spread or gpuslice\n"
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
        "  --dra               also be the DRA driver gpu.gpuslice.io (Kubernetes 1.36+;\n"
        "                      claims share the ledger with local and plugin slices)\n"
        "  --node-name NAME    this node (default: $NODE_NAME, else the host name)\n"
        "  --kubeconfig FILE   reach the API server with FILE (default: in-cluster)\n"
        "  --cdi-dir DIR       where CDI specs of prepared claims go (/var/run/cdi)\n"
        "  --dra-registry-dir DIR  the kubelet's plugin watcher directory\n"
        "                      (/var/lib/kubelet/plugins_registry)\n"
        "  --dra-plugin-dir DIR    holds dra.sock (/var/lib/kubelet/plugins/gpu.gpuslice.io)\n"
        "  --sysfs DIR         where PCI devices' NUMA nodes are read (/sys)\n"
        "  --metrics-listen A  serve Prometheus metrics at http://A/metrics; A is\n"
        "                      IPV4:PORT or [IPV6]:PORT, port 0 any free one (off)\n"
        "  --watch-interval MS the watchdog's sampling period (500; 0: off)\n"
        "  --overuse-policy P  what the watchdog does with an over-use: report (default),\n"
        "                      kill, or evict (pods: the Eviction API; else kill)\n"
        "  --overuse-grace MS  an over-use must hold this long before it is acted on (2000)\n"
        "  --kill-unsliced     kill GPU processes in no slice too (default: report them)\n"
        "  --report-node       write the GPUs' free share and memory as an annotation of\n"
        "                      this node's Node, for gpuslice-extender (needs API access)\n"
        "  -h, --help          this text\n";

/* The socket's group (--socket-group); NULL: GS_LOCAL_GROUP if it exists. */
static const char *socket_group;

static struct wd_args wd_args = { .interval_ms = WD_DEFAULT_INTERVAL_MS,
                                  .grace_ms = WD_DEFAULT_GRACE_MS,
                                  .policy = GS_OVERUSE_REPORT };

static int parse_ms(const char *flag, const char *v, long long min, long long *ret)
{
        int64_t x;
        if (gs_i64_parse_str(v, min, 86400000, &x) < 0)
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

/* Whether the directory of `socket` is `state` or one of its ancestors
 * (mounting it into pods would show them every slice's files). */
static bool socket_dir_holds(const char *socket, const char *state)
{
        const char *slash = strrchr(socket, '/');
        size_t len = slash ? (size_t)(slash - socket) : 0;
        if (len == 0)
                return true; /* "/" or a relative name: refuse */
        return strncmp(state, socket, len) == 0 && (state[len] == '\0' || state[len] == '/');
}

static int parse_args(struct daemon *d, int argc, char **argv)
{
        static const struct option opts[] = {
                { "state-dir", required_argument, NULL, 's' },
                { "socket", required_argument, NULL, 'S' },
                { "socket-group", required_argument, NULL, 'X' },
                { "policy", required_argument, NULL, 'p' },
                { "sim", no_argument, NULL, 'm' },
                { "log-level", required_argument, NULL, 'l' },
                { "compute-policy", required_argument, NULL, 'C' },
                { "kubelet", no_argument, NULL, 'K' },
                { "dra", no_argument, NULL, 'D' },
                { "node-name", required_argument, NULL, 'N' },
                { "kubeconfig", required_argument, NULL, 'q' },
                { "cdi-dir", required_argument, NULL, 'I' },
                { "dra-registry-dir", required_argument, NULL, 'G' },
                { "dra-plugin-dir", required_argument, NULL, 'P' },
                { "kubelet-dir", required_argument, NULL, 'k' },
                { "pod-resources", required_argument, NULL, 'R' },
                { "cdi-kind", required_argument, NULL, 'c' },
                { "shim", required_argument, NULL, 'H' },
                { "release-grace", required_argument, NULL, 'g' },
                { "pod-poll-ms", required_argument, NULL, 'r' },
                { "health-poll-ms", required_argument, NULL, 'e' },
                { "sysfs", required_argument, NULL, 'y' },
                { "metrics-listen", required_argument, NULL, 'M' },
                { "watch-interval", required_argument, NULL, 'W' },
                { "overuse-policy", required_argument, NULL, 'O' },
                { "overuse-grace", required_argument, NULL, 'A' },
                { "kill-unsliced", no_argument, NULL, 'U' },
                { "report-node", no_argument, NULL, 'Q' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        bool have_socket = false, have_state = false;
        int c;
        struct gs_error *err = NULL;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        if (snprintf(d->state_dir, sizeof(d->state_dir), "%s", optarg) >=
                            (int)sizeof(d->state_dir))
                                return fprintf(stderr, "gpusliced: --state-dir too long\n"), -EINVAL;
                        have_state = true;
                        break;
                case 'S':
                        if (snprintf(d->socket_path, sizeof(d->socket_path), "%s", optarg) >=
                            (int)sizeof(d->socket_path))
                                return fprintf(stderr, "gpusliced: --socket too long\n"), -EINVAL;
                        have_socket = true;
                        break;
                case 'X':
                        socket_group = optarg;
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
                case 'y':
                        d->sysfs = optarg;
                        break;
                case 'W':
                case 'A': {
                        long long v;
                        if (parse_ms(argv[optind - 1], optarg, 0, &v) < 0)
                                return -EINVAL;
                        if (c == 'W' && v > 0 && v < 50)
                                return fprintf(stderr, "gpusliced: --watch-interval: at least 50 "
                                                       "ms (or 0: off), got '%s'\n", optarg),
                                       -EINVAL;
                        if (c == 'W')
                                wd_args.interval_ms = (unsigned)v;
                        else
                                wd_args.grace_ms = v;
                        break;
                }
                case 'O':
                        if (gs_overuse_policy_parse_str(optarg, &wd_args.policy) < 0)
                                return fprintf(stderr, "gpusliced: --overuse-policy: '%s' is not "
                                                       "report, kill or evict\n", optarg), -EINVAL;
                        break;
                case 'Q':
                        d->report_node = true;
                        break;
                case 'U':
                        wd_args.kill_unsliced = true;
                        break;
                case 'M': {
                        struct sockaddr_storage ss;
                        socklen_t len;
                        if (node_http_parse_listen(optarg, &ss, &len, &err) < 0) {
                                fprintf(stderr, "gpusliced: --metrics-listen: %s\n",
                                        gs_error_msg(err));
                                gs_error_free(err);
                                return -EINVAL;
                        }
                        d->metrics_listen = optarg;
                        break;
                }
                case 'D':
                        d->dra.enabled = true;
                        break;
                case 'N':
                        d->dra.node_name = optarg;
                        break;
                case 'q':
                        d->dra.kubeconfig = optarg;
                        break;
                case 'I':
                        d->dra.cdi_dir = optarg;
                        break;
                case 'G':
                        d->dra.registry_dir = optarg;
                        break;
                case 'P':
                        d->dra.plugin_dir = optarg;
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
                        if (gs_compute_policy_parse_str(optarg, &d->compute_policy) < 0)
                                return fprintf(stderr, "gpusliced: --compute-policy: '%s' is not "
                                                       "share or cap\n", optarg), -EINVAL;
                        break;
                case 'l':
                        if (node_log_level_parse(optarg, &gs_log_max_level) < 0)
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
        /* One daemon per machine: root's, in GS_LOCAL_SYSTEM_DIR. A private
         * one only when asked for: --sim, or a state directory of its own. */
        if (!have_state && d->sim) {
                if (gs_local_sim_dir(geteuid(), getenv("XDG_RUNTIME_DIR"), d->state_dir,
                                     sizeof(d->state_dir)) < 0)
                        return fprintf(stderr, "gpusliced: $XDG_RUNTIME_DIR too long\n"), -EINVAL;
        } else if (!have_state && geteuid() == 0) {
                snprintf(d->state_dir, sizeof(d->state_dir), "%s", GS_LOCAL_SYSTEM_DIR);
        } else if (!have_state) {
                return fprintf(stderr,
                               "gpusliced: the machine's daemon runs as root (systemctl start "
                               "gpusliced; its socket: " GS_LOCAL_SYSTEM_DIR "/%s); as uid %u, "
                               "give --state-dir DIR for a private daemon, or --sim\n",
                               GS_LOCAL_SOCKET_NAME, (unsigned)geteuid()),
                       -EINVAL;
        }
        if (!have_socket)
                snprintf(d->socket_path, sizeof(d->socket_path), "%s/%s", d->state_dir,
                         GS_LOCAL_SOCKET_NAME);
        /* A node's pods outlive the daemon and /run (a reboot): their
         * slices' state is kept on disk; the socket stays under /run. */
        bool pods = d->kube.enabled || d->dra.enabled;
        if (pods && !have_state && geteuid() == 0)
                snprintf(d->state_dir, sizeof(d->state_dir), "%s", KUBE_STATE_DIR_DURABLE);
        if (pods && socket_dir_holds(d->socket_path, d->state_dir))
                return fprintf(stderr,
                               "gpusliced: --kubelet/--dra: pods mount the directory of the socket %s, "
                               "which holds the state directory %s; put the socket in a "
                               "directory of its own (e.g. --socket /run/gpuslice/%s with "
                               "--state-dir " KUBE_STATE_DIR_DURABLE ")\n",
                               d->socket_path, d->state_dir, GS_LOCAL_SOCKET_NAME),
                       -EINVAL;
        if (!pods && (d->kube.cdi_kind || d->kube.shim_path))
                return fprintf(stderr, "gpusliced: --cdi-kind and --shim need --kubelet or --dra\n"),
                       -EINVAL;
        if (d->dra.kubeconfig && !pods)
                return fprintf(stderr, "gpusliced: --kubeconfig needs --kubelet or --dra\n"),
                       -EINVAL;
        if (d->report_node && !pods)
                return fprintf(stderr, "gpusliced: --report-node needs --kubelet or --dra\n"),
                       -EINVAL;
        if (d->dra.node_name && !d->dra.enabled && !d->report_node)
                return fprintf(stderr, "gpusliced: --node-name needs --dra or --report-node\n"),
                       -EINVAL;
        if (!d->dra.enabled && (d->dra.cdi_dir ||
                                d->dra.registry_dir || d->dra.plugin_dir))
                return fprintf(stderr, "gpusliced: the DRA driver's options need --dra\n"),
                       -EINVAL;
        if (!d->kube.enabled && (d->kube.plugin_dir || d->kube.pod_resources_socket ||
                                 d->kube.release_grace_s >= 0 || d->kube.pod_poll_ms ||
                                 d->kube.health_poll_ms))
                return fprintf(stderr, "gpusliced: the device plugin's options need --kubelet\n"),
                       -EINVAL;
        return 0;
}

/* The node (state directory, its lock, the ledger) and the socket's
 * directory. */
static int prepare_state(struct daemon *d)
{
        struct node_config cfg = { .state_dir = d->state_dir,
                                   .daemon_socket = d->socket_path,
                                   .shim_path = d->kube.shim_path ? d->kube.shim_path
                                                                  : KUBE_SHIM_PATH,
                                   .cdi_kind = d->kube.cdi_kind,
                                   .placement = d->policy,
                                   .compute_policy = d->compute_policy };
        struct gs_error *err = NULL;
        int r = node_open(&cfg, &d->node, &err);
        if (r < 0) {
                gs_log_error("%s", gs_error_msg(err));
                gs_error_free(err);
                return r;
        }
        d->node->observer = (struct node_observer){ .ctx = d, .slice_removed = slices_removed };
        mode_t mode = geteuid() == 0 ? 0755 : 0700;
        char sockdir[DAEMON_PATH_MAX];
        snprintf(sockdir, sizeof(sockdir), "%s", d->socket_path);
        r = make_dirs(dirname(sockdir), mode);
        if (r < 0 && r != -EPERM) {
                gs_log_error("cannot create the socket's directory for %s: %s", d->socket_path,
                             strerror(-r));
                return r;
        }
        return 0;
}

static int open_inventory(struct daemon *d)
{
        const char *sim_dir = NULL;
        if (d->sim) {
                const char *env = getenv("GPUSLICE_SIM_LIBDIR");
                snprintf(d->sim_dir, sizeof(d->sim_dir), "%s", env && *env ? env : GS_SIM_LIBDIR);
                if (!d->sim_dir[0]) {
                        gs_log_error("--sim: this build has no simgpu; set GPUSLICE_SIM_LIBDIR to the "
                                   "directory of simgpu's libnvidia-ml.so.1");
                        return -ENOENT;
                }
                sim_dir = d->sim_dir;
                gs_log_info("--sim: using simgpu, the simulated NVIDIA driver, from %s", sim_dir);
        }
        struct gs_error *err = NULL;
        static struct gs_inventory inv;
        int r = nvml_open(sim_dir, &d->nvml, &err);
        if (r == 0 && d->sysfs)
                nvml_set_sysfs_root(d->nvml, d->sysfs);
        if (r == 0)
                r = nvml_read_inventory(d->nvml, &inv, &err);
        if (r < 0) {
                gs_log_error("%s", gs_error_msg(err));
                gs_error_free(err);
                return r;
        }
        nvml_measure_overhead(d->nvml, sim_dir, &inv);
        node_set_inventory_locked(d->node, &inv);
        if (node_check_ledger_locked(d->node, &err) < 0) {
                gs_log_error("refusing to start: the ledger %s does not fit this node: %s (repair "
                             "it, deleting its 'sum' line, or remove it once no slice process "
                             "runs)",
                             d->node->ledger_path, gs_error_msg(err));
                gs_error_free(err);
                return -EINVAL;
        }
        for (unsigned i = 0; i < inv.n_gpus; i++) {
                const struct gs_gpu *g = &inv.gpus[i];
                char mem[32], ovh[32];
                gs_log_info("GPU %u: %s (%s), %s, %s, context overhead %s%s", g->index, g->uuid,
                          g->name, gs_bytes_human(g->memory_total, mem, sizeof(mem)),
                          g->healthy ? "healthy" : "UNHEALTHY",
                          gs_bytes_human(g->context_overhead, ovh, sizeof(ovh)),
                          g->overhead_measured ? " (measured)" : " (default: not measurable)");
        }
        return 0;
}

/* As root, hand the socket (created 0660 root:root) to the group that may
 * use it: --socket-group, else GS_LOCAL_GROUP when that group exists. */
static int share_socket(const struct daemon *d)
{
        const char *name = socket_group ? socket_group : GS_LOCAL_GROUP;
        if (geteuid() != 0 || !name[0])
                return 0;
        struct group *g = getgrnam(name);
        if (!g) {
                if (!socket_group) {
                        gs_log_info("no group %s: only root may use %s (groupadd --system %s "
                                    "to share it)", name, d->socket_path, name);
                        return 0;
                }
                gs_log_error("--socket-group: no group '%s'", name);
                return -ENOENT;
        }
        if (chown(d->socket_path, (uid_t)-1, g->gr_gid) < 0) {
                gs_log_error("cannot give %s to group %s: %s", d->socket_path, name,
                             strerror(errno));
                return -errno;
        }
        gs_log_info("the group %s may use %s", name, d->socket_path);
        return 0;
}

static void on_signal(struct node_watch *w, uint32_t events)
{
        struct daemon *d = w->ctx;
        struct signalfd_siginfo si;
        (void)events;
        while (read(d->sig.fd, &si, sizeof(si)) == sizeof(si)) {
                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
                        gs_log_info("signal %u: shutting down", si.ssi_signo);
                        node_loop_stop(&d->loop);
                } else {
                        gs_log_info("signal %u ignored", si.ssi_signo);
                }
        }
}

static int setup_loop(struct daemon *d)
{
        struct gs_error *err = NULL;
        int r = node_loop_init(&d->loop, &d->node->lock, &err);
        if (r < 0) {
                gs_log_error("%s", gs_error_msg(err));
                gs_error_free(err);
                return r;
        }
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
        d->sig = (struct node_watch){ .fd = fd, .fn = on_signal, .ctx = d };
        return node_loop_watch(&d->loop, &d->sig, EPOLLIN);
}

int main(int argc, char **argv)
{
        if (argc > 1 && strcmp(argv[1], "install-shim") == 0)
                return install_shim_main(argc - 1, argv + 1);
        if (argc > 1 && strcmp(argv[1], "--version") == 0)
                return printf("gpusliced %s\n", GS_VERSION) < 0;
        static struct daemon d;
        d.listen.fd = d.sig.fd = -1;
        d.loop.epfd = -1;
        daemon_thread_init(&d.kube_thread, "kubelet device plugin", kubelet_run);
        daemon_thread_init(&d.dra_thread, "DRA driver", dra_run);
        daemon_thread_init(&d.evict_thread, "evictor", evictor_run);
        daemon_thread_init(&d.report_thread, "node reporter", reporter_run);
        d.kube.release_grace_s = -1;
        static char program[] = "gpusliced";
        gs_log_set_sink(node_log_stderr, program);
        if (parse_args(&d, argc, argv) < 0)
                return 2;
        int r;
        if ((r = prepare_state(&d)) < 0 || (r = open_inventory(&d)) < 0)
                return 1;
        if ((r = setup_loop(&d)) < 0) {
                gs_log_error("cannot set up the event loop: %s", strerror(-r));
                return 1;
        }
        /* Single-threaded until the plugin starts; the lock for form's sake. */
        node_lock(d.node);
        node_reconcile_files_locked(d.node);
        r = slices_reconcile(&d) < 0 || arbsrv_init(&d) < 0 ? -1 : 0;
        node_unlock(d.node);
        if (r < 0)
                return 1;
        struct gs_error *err = NULL;
        bool evicting = (d.kube.enabled || d.dra.enabled) && evictor_prepare(&d) == 1;
        if (local_api_listen(&d, &err) < 0 || watchdog_start(&d, &wd_args, &err) < 0) {
                gs_log_error("%s", gs_error_msg(err));
                gs_error_free(err);
                return 1;
        }
        if (share_socket(&d) < 0)
                return 1;
        const struct node *n = d.node;
        gs_log_info("listening on %s (state %s, policy %s, %u GPU%s, %zu slice%s)", d.socket_path,
                    d.state_dir, gs_placement_policy_name(d.policy), n->inv.n_gpus,
                    n->inv.n_gpus == 1 ? "" : "s", n->ledger.n_slices,
                    n->ledger.n_slices == 1 ? "" : "s");
        bool metrics_failed = metrics_start(&d) < 0;
        if (metrics_failed)
                d.loop.stop = true;
        if ((d.kube.enabled && daemon_thread_start(&d, &d.kube_thread) < 0) ||
            (d.dra.enabled && daemon_thread_start(&d, &d.dra_thread) < 0) ||
            (evicting && daemon_thread_start(&d, &d.evict_thread) < 0) ||
            (d.report_node && daemon_thread_start(&d, &d.report_thread) < 0))
                d.loop.stop = true;
        node_loop_run(&d.loop);
        metrics_stop(&d);
        daemon_thread_stop(&d, &d.kube_thread);
        daemon_thread_stop(&d, &d.dra_thread);
        daemon_thread_stop(&d, &d.evict_thread);
        daemon_thread_stop(&d, &d.report_thread);
        node_lock(d.node);
        local_api_shutdown(&d);
        arbsrv_done(&d);
        r = node_save_locked(d.node, &err);
        if (r < 0)
                gs_log_error("%s", gs_error_msg(err));
        gs_error_free(err);
        gs_log_info("stopped; %zu slice%s kept for the next start", n->ledger.n_slices,
                    n->ledger.n_slices == 1 ? "" : "s");
        slices_unfollow_all(&d);
        watchdog_stop(&d);
        evictor_done(&d);
        nvml_close(d.nvml);
        node_unlock(d.node);
        close(d.sig.fd);
        node_loop_done(&d.loop);
        node_close(d.node);
        return r < 0 || metrics_failed || d.kube_thread.failed || d.dra_thread.failed ? 1 : 0;
}
