/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice-kubelet-plugin: the device plugin on its own, for tests, the
 * benchmark and nodes without gpusliced. The GPU list comes from an
 * inventory file (re-read every health period), one GPU a line:
 *     <uuid> <memory-bytes> healthy|lost
 * or from NVML (--nvml [DIR]: libnvidia-ml.so.1 from DIR, e.g. simgpu's).
 * gpusliced --kubelet runs the same kube_plugin_run() on its own NVML. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "compute_policy.h"
#include "gs_version.h"
#include "kube_plugin.h"
#include "log.h"
#include "log_stderr.h"
#include "macro.h"
#include "node.h"
#include "number.h"
#include "nvml.h"

static int parse_num(const char *s, long long min, long long max, long long *ret)
{
        int64_t v;
        if (gs_i64_parse_str(s, min, max, &v) < 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* kube_options.read_inventory over the node layer's NVML loader. */
static int nvml_inventory(void *ctx, struct gs_inventory *inv, struct gs_error **err)
{
        return nvml_read_inventory(ctx, inv, err);
}

static int file_inventory(void *ctx, struct gs_inventory *inv, struct gs_error **err)
{
        const char *path = ctx;
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f)
                return gs_error_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
        char line[512];
        unsigned n = 0, lineno = 0;
        while (fgets(line, sizeof(line), f)) {
                lineno++;
                if (line[0] == '#' || line[0] == '\n')
                        continue;
                line[strcspn(line, "\n")] = '\0';
                char *save = NULL;
                const char *uuid = strtok_r(line, " ", &save);
                const char *mem_s = strtok_r(NULL, " ", &save);
                const char *state = strtok_r(NULL, " ", &save);
                uint64_t mem = 0;
                if (!uuid || !mem_s || !state || strtok_r(NULL, " ", &save) ||
                    strlen(uuid) >= GS_GPU_UUID_MAX ||
                    gs_u64_parse_str(mem_s, UINT64_MAX, &mem) < 0 || mem == 0 ||
                    (strcmp(state, "healthy") != 0 && strcmp(state, "lost") != 0))
                        return gs_error_set(err, -EINVAL,
                                            "%s:%u: expected <uuid> <memory-bytes> healthy|lost",
                                            path, lineno);
                if (n >= GS_MAX_GPUS)
                        return gs_error_set(err, -EINVAL, "%s: more than %d GPUs", path,
                                            GS_MAX_GPUS);
                struct gs_gpu *g = &inv->gpus[n];
                memset(g, 0, sizeof(*g));
                g->index = n;
                snprintf(g->uuid, sizeof(g->uuid), "%s", uuid);
                g->memory_total = mem;
                g->healthy = strcmp(state, "healthy") == 0;
                n++;
        }
        inv->n_gpus = n;
        return 0;
}

static void usage(FILE *f)
{
        fputs("usage: gpuslice-kubelet-plugin --inventory FILE | --nvml-dir DIR | --nvml [options]\n"
              "  --kubelet-dir DIR     device plugin directory (" KUBE_PLUGIN_DIR ")\n"
              "  --pod-resources SOCK  PodResources socket (" KUBE_POD_RESOURCES_SOCKET ")\n"
              "  --endpoint NAME       our socket's name (" KUBE_ENDPOINT ")\n"
              "  --state-dir DIR       ledger, slice configs and dirs (" KUBE_STATE_DIR ")\n"
              "  --shim PATH           host libgpuslice.so ('' for none)\n"
              "  --daemon-socket PATH  host gpusliced.sock to mount into slices\n"
              "  --cdi-kind KIND       also answer CDI device KIND=<gpu uuid>\n"
              "  --policy share|cap    compute policy of the slices\n"
              "  --release-grace S     never free an allocation younger than S seconds (60)\n"
              "  --pod-poll-ms MS      PodResources period (10000)\n"
              "  --health-poll-ms MS   inventory refresh period (2000)\n"
              "  --version             print the version and exit\n",
              f);
}

int main(int argc, char **argv)
{
        struct kube_options o;
        kube_options_init(&o);
        struct node_config nc = { .state_dir = KUBE_STATE_DIR, .shim_path = KUBE_SHIM_PATH };
        static char program[] = "gpuslice-kubelet-plugin";
        gs_log_set_sink(node_log_stderr, program);
        const char *inventory = NULL, *nvml_dir = NULL;
        bool use_nvml = false;
        static const struct option longopts[] = {
                {"kubelet-dir", required_argument, NULL, 'k'},
                {"pod-resources", required_argument, NULL, 'p'},
                {"endpoint", required_argument, NULL, 'e'},
                {"state-dir", required_argument, NULL, 's'},
                {"shim", required_argument, NULL, 'S'},
                {"daemon-socket", required_argument, NULL, 'D'},
                {"cdi-kind", required_argument, NULL, 'c'},
                {"policy", required_argument, NULL, 'P'},
                {"release-grace", required_argument, NULL, 'g'},
                {"pod-poll-ms", required_argument, NULL, 'r'},
                {"health-poll-ms", required_argument, NULL, 'h'},
                {"inventory", required_argument, NULL, 'i'},
                {"nvml-dir", required_argument, NULL, 'N'},
                {"nvml", no_argument, NULL, 'n'},
                {"help", no_argument, NULL, 'H'},
                {"version", no_argument, NULL, 'V'},
                {0},
        };
        int c;
        long long v;
        while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
                switch (c) {
                case 'k': o.plugin_dir = optarg; break;
                case 'p': o.pod_resources_socket = optarg; break;
                case 'e': o.endpoint = optarg; break;
                case 's': nc.state_dir = optarg; break;
                case 'S': nc.shim_path = optarg; break;
                case 'D': nc.daemon_socket = optarg; break;
                case 'c': nc.cdi_kind = optarg; break;
                case 'i': inventory = optarg; break;
                case 'N': nvml_dir = optarg; use_nvml = true; break;
                case 'n': use_nvml = true; break;
                case 'P':
                        if (gs_compute_policy_parse_str(optarg, &nc.compute_policy) < 0) {
                                fprintf(stderr, "--policy: expected %s\n", GS_COMPUTE_POLICY_NAMES);
                                return 2;
                        }
                        break;
                case 'g':
                case 'r':
                case 'h':
                        if (parse_num(optarg, c == 'g' ? 0 : 10, 86400000, &v) < 0) {
                                fprintf(stderr, "%s: expected a number, got '%s'\n",
                                        argv[optind - 1], optarg);
                                return 2;
                        }
                        if (c == 'g')
                                o.release_grace_s = v;
                        else if (c == 'r')
                                o.pod_poll_ms = (unsigned)v;
                        else
                                o.health_poll_ms = (unsigned)v;
                        break;
                case 'H':
                        usage(stdout);
                        return 0;
                case 'V':
                        printf("gpuslice-kubelet-plugin %s\n", GS_VERSION);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (!inventory == !use_nvml || optind != argc) {
                usage(stderr);
                return 2;
        }
        struct nvml *nvml = NULL;
        if (use_nvml) {
                _cleanup_error_ struct gs_error *e = NULL;
                if (nvml_open(nvml_dir, &nvml, &e) < 0) {
                        fprintf(stderr, "gpuslice-kubelet-plugin: %s\n", gs_error_msg(e));
                        return 1;
                }
                o.read_inventory = nvml_inventory;
                o.inventory_ctx = nvml;
        } else {
                o.read_inventory = file_inventory;
                o.inventory_ctx = (void *)inventory;
        }
        struct node *node = NULL;
        _cleanup_error_ struct gs_error *nerr = NULL;
        if (node_open(&nc, &node, &nerr) < 0) {
                fprintf(stderr, "gpuslice-kubelet-plugin: %s\n", gs_error_msg(nerr));
                nvml_close(nvml);
                return 1;
        }
        o.node = node;

        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigprocmask(SIG_BLOCK, &set, NULL);
        _cleanup_close_ int sfd = signalfd(-1, &set, SFD_CLOEXEC);
        if (sfd < 0) {
                perror("signalfd");
                return 1;
        }
        signal(SIGPIPE, SIG_IGN);
        _cleanup_error_ struct gs_error *err = NULL;
        int r = kube_plugin_run(&o, sfd, &err);
        nvml_close(nvml);
        node_close(node);
        if (r < 0) {
                fprintf(stderr, "gpuslice-kubelet-plugin: %s\n", gs_error_msg(err));
                return 1;
        }
        return 0;
}
