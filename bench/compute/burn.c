/* SPDX-License-Identifier: Apache-2.0 */
/* gs-burn: a saturating GPU load for the compute-share benchmark.
 *
 *   gs-burn [--kernel T] [--route launch|ex|graph] [--duration T]
 *           [--progress FILE] [--inflight T]
 *
 * Launches the project kernel gs_busy(T) (default 1ms; 0 measures pure launch
 * cost) back to back for --duration (default 10s; until SIGTERM/SIGINT
 * otherwise) by cuLaunchKernel, cuLaunchKernelEx, or cuGraphLaunch of a
 * captured batch (graph of clamp(10ms/T, 1, 100) kernels). Work is issued in
 * units (one graph, or the same number of plain launches) with an event after
 * each, and at most --inflight (default 20ms, at least two units) of work is
 * kept queued, so the device never runs dry and the program still stops
 * promptly. Prints nothing per kernel. With --progress, appends
 * "<CLOCK_MONOTONIC ns> <completed kernels>" every >= 50 ms as units complete
 * (the real-GPU ground truth: completed kernels x their length). At the end
 * prints one line:
 *
 *   burn pid=P route=R kernel_ns=K kernels=N seconds=S launches=L launch_ns=X launch_max_ns=M
 *
 * launch_ns is the mean host time inside one launch call (blocking included),
 * launch_max_ns the longest (the longest a launch waited at the gate).
 * Exit status 0, or 1 with a message on stderr. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "example_util.h"
#include "load_common.h"

#define PROG "gs-burn"
#define MAX_RING 256

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
        (void)sig;
        stop = 1;
}

static void usage(void)
{
        fprintf(stderr, "usage: " PROG " [--kernel T] [--route launch|ex|graph] [--duration T]"
                        " [--progress FILE] [--inflight T]\n");
        exit(2);
}

static uint64_t arg_duration(const char *flag, const char *v)
{
        uint64_t ns;
        if (!v || ex_parse_duration_ns(v, &ns) < 0) {
                fprintf(stderr, PROG ": %s: '%s' is not a duration (10us, 1ms, 5s)\n", flag,
                        v ? v : "");
                exit(2);
        }
        return ns;
}

int main(int argc, char **argv)
{
        uint64_t kernel_ns = 1000000, duration_ns = 10000000000ull, inflight_ns = 20000000;
        enum lc_route route = LC_LAUNCH;
        const char *progress = NULL;
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (strcmp(a, "--kernel") == 0)
                        kernel_ns = arg_duration(a, v);
                else if (strcmp(a, "--duration") == 0)
                        duration_ns = arg_duration(a, v);
                else if (strcmp(a, "--inflight") == 0)
                        inflight_ns = arg_duration(a, v);
                else if (strcmp(a, "--route") == 0) {
                        if (!v || lc_parse_route(v, &route) < 0)
                                usage();
                } else if (strcmp(a, "--progress") == 0 && v)
                        progress = v;
                else
                        usage();
                i++;
        }
        if (kernel_ns > 10000000000ull) {
                fprintf(stderr, PROG ": --kernel: at most 10s\n");
                return 2;
        }

        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);

        FILE *pf = NULL;
        if (progress) {
                pf = fopen(progress, "we");
                if (!pf) {
                        fprintf(stderr, PROG ": %s: %s\n", progress, strerror(errno));
                        return 1;
                }
        }

        CUcontext ctx;
        CUfunction busy;
        lc_setup(PROG, &ctx, &busy);
        CUstream s;
        LC_CHECK(PROG, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

        /* A unit is ~10 ms of work (1..100 kernels); the ring bounds queued units. */
        unsigned per_unit = kernel_ns ? (unsigned)(10000000ull / kernel_ns) : 100;
        per_unit = per_unit < 1 ? 1 : per_unit > 100 ? 100 : per_unit;
        uint64_t unit_ns = kernel_ns * per_unit;
        unsigned ring = unit_ns ? (unsigned)((inflight_ns + unit_ns - 1) / unit_ns) : 64;
        ring = ring < 2 ? 2 : ring > MAX_RING ? MAX_RING : ring;
        CUevent ev[MAX_RING];
        for (unsigned i = 0; i < ring; i++)
                LC_CHECK(PROG, cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
        CUgraphExec ge = NULL;
        if (route == LC_GRAPH)
                ge = lc_graph(PROG, busy, s, kernel_ns, per_unit);

        uint64_t issued = 0, reaped = 0, launches = 0, launch_time = 0, launch_max = 0;
        uint64_t t0 = lc_now_ns(), last_progress = 0;
        if (pf) {
                fprintf(pf, "%llu 0\n", (unsigned long long)t0);
                fflush(pf);
        }
        while (!stop && lc_now_ns() - t0 < duration_ns) {
                if (issued - reaped == ring) { /* ring full: wait for the oldest unit */
                        LC_CHECK(PROG, cuEventSynchronize(ev[reaped % ring]));
                        reaped++;
                        uint64_t now = lc_now_ns();
                        if (pf && now - last_progress >= 50000000ull) {
                                fprintf(pf, "%llu %llu\n", (unsigned long long)now,
                                        (unsigned long long)(reaped * per_unit));
                                fflush(pf);
                                last_progress = now;
                        }
                }
                if (route == LC_GRAPH) {
                        uint64_t a = lc_now_ns();
                        LC_CHECK(PROG, cuGraphLaunch(ge, s));
                        uint64_t took = lc_now_ns() - a;
                        launch_time += took;
                        launch_max = took > launch_max ? took : launch_max;
                        launches++;
                } else {
                        for (unsigned k = 0; k < per_unit; k++) {
                                uint64_t a = lc_now_ns();
                                LC_CHECK(PROG, lc_busy(busy, s, kernel_ns, route == LC_LAUNCH_EX));
                                uint64_t took = lc_now_ns() - a;
                                launch_time += took;
                                launch_max = took > launch_max ? took : launch_max;
                                launches++;
                        }
                }
                LC_CHECK(PROG, cuEventRecord(ev[issued % ring], s));
                issued++;
        }
        LC_CHECK(PROG, cuStreamSynchronize(s));
        uint64_t t1 = lc_now_ns();
        if (pf) {
                fprintf(pf, "%llu %llu\n", (unsigned long long)t1,
                        (unsigned long long)(issued * per_unit));
                fclose(pf);
        }
        printf("burn pid=%d route=%s kernel_ns=%llu kernels=%llu seconds=%.3f launches=%llu "
               "launch_ns=%.1f launch_max_ns=%llu\n",
               (int)getpid(), route == LC_GRAPH ? "graph" : route == LC_LAUNCH_EX ? "ex" : "launch",
               (unsigned long long)kernel_ns, (unsigned long long)(issued * per_unit),
               (double)(t1 - t0) / 1e9, (unsigned long long)launches,
               launches ? (double)launch_time / (double)launches : 0.0, (unsigned long long)launch_max);
        return 0;
}
