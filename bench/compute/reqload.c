/* SPDX-License-Identifier: Apache-2.0 */
/* gs-reqload: a request-serving load at a fixed rate, for the noisy-neighbour
 * benchmark.
 *
 *   gs-reqload --rate R [--kernel T] [--kernels N] [--duration T] [--warmup T]
 *
 * Serves R requests per second (open loop: request i is due at start + i/R;
 * its latency counts from when it was due, so a stall shows as latency, not
 * as a lower offered rate). Each request launches N (default 2) gs_busy(T)
 * kernels (default 500us) on its stream and waits for them, as a forward
 * pass would. Requests due during --warmup (default 1s) are served but not
 * counted. At the end prints one line:
 *
 *   reqload pid=P rate=R requests=N seconds=S rps=X p50_us=A p99_us=B max_us=C
 *
 * rps counts requests completed in the measured period. Exit status 0, or 1
 * with a message on stderr. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "example_util.h"
#include "load_common.h"

#define PROG "gs-reqload"
#define MAX_REQUESTS 2000000

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

static void sleep_until(uint64_t t)
{
        struct timespec ts = { .tv_sec = (time_t)(t / 1000000000ull),
                               .tv_nsec = (long)(t % 1000000000ull) };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
}

static uint64_t arg_u64(const char *flag, const char *v, int duration)
{
        uint64_t x;
        if (!v || (duration ? ex_parse_duration_ns(v, &x) : ex_parse_u64(v, &x)) < 0) {
                fprintf(stderr, PROG ": %s: bad value '%s'\n", flag, v ? v : "");
                exit(2);
        }
        return x;
}

int main(int argc, char **argv)
{
        uint64_t rate = 0, kernel_ns = 500000, kernels = 2, duration_ns = 10000000000ull,
                 warmup_ns = 1000000000ull;
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (strcmp(a, "--rate") == 0)
                        rate = arg_u64(a, v, 0);
                else if (strcmp(a, "--kernels") == 0)
                        kernels = arg_u64(a, v, 0);
                else if (strcmp(a, "--kernel") == 0)
                        kernel_ns = arg_u64(a, v, 1);
                else if (strcmp(a, "--duration") == 0)
                        duration_ns = arg_u64(a, v, 1);
                else if (strcmp(a, "--warmup") == 0)
                        warmup_ns = arg_u64(a, v, 1);
                else {
                        fprintf(stderr, "usage: " PROG " --rate R [--kernel T] [--kernels N]"
                                        " [--duration T] [--warmup T]\n");
                        return 2;
                }
                i++;
        }
        if (rate < 1 || rate > 100000 || kernels < 1 || kernels > 1000 ||
            duration_ns < 100000000ull || duration_ns > 3600000000000ull) {
                fprintf(stderr, PROG ": need 1 <= --rate <= 100000, 1 <= --kernels <= 1000, "
                                "--duration between 100ms and 1h\n");
                return 2;
        }
        uint64_t total = (warmup_ns + duration_ns) / (1000000000ull / rate);
        if (total > MAX_REQUESTS) {
                fprintf(stderr, PROG ": at most %d requests per run\n", MAX_REQUESTS);
                return 2;
        }
        uint64_t *lat = calloc(total + 1, sizeof(*lat));
        if (!lat) {
                fprintf(stderr, PROG ": out of memory\n");
                return 1;
        }

        CUcontext ctx;
        CUfunction busy;
        lc_setup(PROG, &ctx, &busy);
        CUstream s;
        LC_CHECK(PROG, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        /* one request before the clock starts: module and stream warm */
        LC_CHECK(PROG, lc_busy(busy, s, kernel_ns, 0));
        LC_CHECK(PROG, cuStreamSynchronize(s));

        uint64_t period = 1000000000ull / rate, t0 = lc_now_ns(), measured_from = t0 + warmup_ns;
        uint64_t end = measured_from + duration_ns, n = 0, done = 0;
        for (uint64_t i = 0;; i++) {
                uint64_t due = t0 + i * period;
                if (due >= end)
                        break;
                sleep_until(due);
                for (uint64_t k = 0; k < kernels; k++)
                        LC_CHECK(PROG, lc_busy(busy, s, kernel_ns, 0));
                LC_CHECK(PROG, cuStreamSynchronize(s));
                uint64_t fin = lc_now_ns();
                if (due >= measured_from && n < total) {
                        lat[n++] = fin - due;
                        if (fin <= end)
                                done++;
                }
        }
        qsort(lat, n, sizeof(*lat), cmp_u64);
        double secs = (double)duration_ns / 1e9;
        uint64_t p50 = n ? lat[n / 2] : 0, p99 = n ? lat[(n * 99) / 100 - (n * 99 % 100 == 0)] : 0;
        printf("reqload pid=%d rate=%llu requests=%llu seconds=%.3f rps=%.2f p50_us=%.1f "
               "p99_us=%.1f max_us=%.1f\n",
               (int)getpid(), (unsigned long long)rate, (unsigned long long)n, secs,
               (double)done / secs, (double)p50 / 1e3, (double)p99 / 1e3,
               n ? (double)lat[n - 1] / 1e3 : 0.0);
        free(lat);
        return 0;
}
