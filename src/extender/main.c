/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice-extender: the kube-scheduler extender for gpuslice.io/gpu-milli
 * (docs/scheduling.md). Serves POST /filter and POST /prioritize (and GET
 * /healthz for probes) over HTTP until SIGINT or SIGTERM. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extender.h"
#include "http_server.h"
#include "gs_version.h"
#include "log.h"
#include "log_stderr.h"
#include "number.h"
#include "quantity.h"

#define DEFAULT_LISTEN "0.0.0.0:8888"
/* The scheduler sends every candidate Node object (10-25 KiB each with its
 * image list): 32 MiB is over a thousand nodes. */
#define DEFAULT_BODY_MAX (32u << 20)
#define DEFAULT_STALE_S 90 /* the node's heartbeat is 30 s: three missed */
#define DEFAULT_TTL_S 60
#define DURATION_MAX_S (7 * 86400)

struct options {
        const char *listen;
        struct ext_config cfg;
        size_t body_max;
};

static void usage(FILE *f)
{
        fprintf(f,
                "usage: gpuslice-extender [options]\n"
                "  --listen ADDR:PORT     where to serve (default %s)\n"
                "  --policy NAME          first-fit, best-fit, fgd or gpuslice (default)\n"
                "  --stale-after DUR      a node report older than this fails the node "
                "(default %ds)\n"
                "  --admitted-ttl DUR     how long a pod sent to a node is charged there "
                "without the node\n"
                "                         reporting it (default %ds)\n"
                "  --max-body SIZE        largest request body (default 32Mi; 413 beyond)\n"
                "  --log-level LEVEL      error, warning, info (default) or debug\n"
                "  --version\n"
                "DUR: seconds, or a number with s, m or h (30s, 2m); SIZE: bytes or Ki, Mi.\n",
                DEFAULT_LISTEN, DEFAULT_STALE_S, DEFAULT_TTL_S);
}

/* "30", "30s", "2m", "1h": seconds, 1..DURATION_MAX_S. 0 or -EINVAL. */
static int duration_parse(const char *s, int64_t *ret)
{
        size_t n = strspn(s, "0123456789");
        uint64_t v, mult = 1;
        if (n == 0 || gs_u64_parse(s, n, DURATION_MAX_S, &v) < 0)
                return -EINVAL;
        if (strcmp(s + n, "m") == 0)
                mult = 60;
        else if (strcmp(s + n, "h") == 0)
                mult = 3600;
        else if (s[n] && strcmp(s + n, "s") != 0)
                return -EINVAL;
        if (v == 0 || v * mult > DURATION_MAX_S)
                return -EINVAL;
        *ret = (int64_t)(v * mult);
        return 0;
}

static int bad(const char *flag, const char *value, const char *accepted)
{
        char q[GS_QUOTE_MAX];
        gs_log_error("%s %s: expected %s", flag, gs_quote(value, q, sizeof(q)), accepted);
        return -EINVAL;
}

/* 0 to run, 1 when done (--version, --help), or -EINVAL (logged). */
static int parse_args(struct options *o, int argc, char **argv)
{
        enum { O_LISTEN = 256, O_POLICY, O_STALE, O_TTL, O_BODY, O_LOG, O_VERSION, O_HELP };
        static const struct option longs[] = {
                { "listen", required_argument, NULL, O_LISTEN },
                { "policy", required_argument, NULL, O_POLICY },
                { "stale-after", required_argument, NULL, O_STALE },
                { "admitted-ttl", required_argument, NULL, O_TTL },
                { "max-body", required_argument, NULL, O_BODY },
                { "log-level", required_argument, NULL, O_LOG },
                { "version", no_argument, NULL, O_VERSION },
                { "help", no_argument, NULL, O_HELP },
                { NULL, 0, NULL, 0 },
        };
        int c;
        uint64_t bytes;
        while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
                switch (c) {
                case O_LISTEN: o->listen = optarg; break;
                case O_POLICY:
                        if (gs_cp_policy_parse(optarg, &o->cfg.policy) < 0)
                                return bad("--policy", optarg,
                                           "first-fit, best-fit, fgd or gpuslice");
                        break;
                case O_STALE:
                        if (duration_parse(optarg, &o->cfg.stale_after_s) < 0)
                                return bad("--stale-after", optarg,
                                           "a duration (30s, 2m) up to 7 days");
                        break;
                case O_TTL:
                        if (duration_parse(optarg, &o->cfg.admitted_ttl_s) < 0)
                                return bad("--admitted-ttl", optarg,
                                           "a duration (60s, 5m) up to 7 days");
                        break;
                case O_BODY:
                        if (gs_memory_quantity_parse("--max-body", optarg, &bytes, NULL) < 0 ||
                            bytes > NODE_HTTP_BODY_MAX_LIMIT)
                                return bad("--max-body", optarg, "a size from 1 to 64Mi");
                        o->body_max = (size_t)bytes;
                        break;
                case O_LOG:
                        if (node_log_level_parse(optarg, &gs_log_max_level) < 0)
                                return bad("--log-level", optarg, "error, warning, info or debug");
                        break;
                case O_VERSION:
                        printf("gpuslice-extender %s\n", GS_VERSION);
                        return 1;
                case O_HELP:
                        usage(stdout);
                        return 1;
                default: usage(stderr); return -EINVAL;
                }
        }
        if (optind < argc) {
                gs_log_error("unexpected argument '%.80s'", argv[optind]);
                return -EINVAL;
        }
        return 0;
}

static int healthz(void *ctx, char **body, size_t *len)
{
        (void)ctx;
        *body = strdup("ok\n");
        *len = 3;
        return *body ? 0 : -ENOMEM;
}

int main(int argc, char **argv)
{
        static char program[] = "gpuslice-extender";
        gs_log_set_sink(node_log_stderr, program);
        struct options o = {
                .listen = DEFAULT_LISTEN,
                .cfg = { .policy = GS_CP_GPUSLICE,
                         .stale_after_s = DEFAULT_STALE_S,
                         .admitted_ttl_s = DEFAULT_TTL_S },
                .body_max = DEFAULT_BODY_MAX,
        };
        int r = parse_args(&o, argc, argv);
        if (r != 0)
                return r < 0 ? 2 : 0;
        /* Block the stop signals before any thread starts, then wait. */
        sigset_t stop;
        sigemptyset(&stop);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &stop, NULL);
        signal(SIGPIPE, SIG_IGN);
        static struct extender e;
        if (extender_init(&e, &o.cfg) < 0) {
                gs_log_error("out of memory");
                return 1;
        }
        const struct node_http_route routes[] = {
                { .path = "/filter",
                  .content_type = "application/json",
                  .post = ext_filter_http,
                  .ctx = &e,
                  .body_max = o.body_max },
                { .path = "/prioritize",
                  .content_type = "application/json",
                  .post = ext_prioritize_http,
                  .ctx = &e,
                  .body_max = o.body_max },
                { .path = "/healthz", .content_type = "text/plain; charset=utf-8", .fn = healthz },
        };
        struct node_http *h = NULL;
        struct gs_error *err = NULL;
        if (node_http_start("extender", o.listen, routes, GS_ARRAY_SIZE(routes), &h, &err) < 0) {
                gs_log_error("--listen: %s", gs_error_msg(err));
                gs_error_free(err);
                extender_done(&e);
                return 1;
        }
        gs_log_info("policy %s, node state stale after %llds, admitted pods charged up to %llds, "
                    "bodies up to %zu bytes",
                    gs_cp_policy_name(o.cfg.policy), (long long)o.cfg.stale_after_s,
                    (long long)o.cfg.admitted_ttl_s, o.body_max);
        int sig = 0;
        sigwait(&stop, &sig);
        gs_log_info("signal %d: stopping", sig);
        node_http_stop(h);
        extender_done(&e);
        return 0;
}
