/* SPDX-License-Identifier: Apache-2.0 */
/* A driver for the supervisor of `gpuslice up` without a daemon: runs
 * `sh -c CMD` for every NAME=CMD argument under up_supervise() with hooks that
 * hand each start the variable UP_TEST_SLICE=NAME-PID and log every release,
 * so tests can check prefixing, restarts, backoff and stopping on their own.
 *
 * usage: up_supervise_driver [--grace MS] [--reset MS] NAME=CMD... */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "up_supervise.h"

struct driver {
        const struct up_api *apis;
        unsigned starts, releases;
        bool flaked;
};

/* An API named refused-* is refused for good, flaky-* on its first start
 * only (as a daemon would refuse a slice, or be unreachable once). */
static int prepare(void *ud, size_t api, pid_t pid, char *blob, size_t size,
                   struct up_failure *fail)
{
        struct driver *d = ud;
        const char *name = d->apis[api].name;
        int n = snprintf(blob, size, "UP_TEST_SLICE=%s-%ld", name, (long)pid);

        d->starts++;
        if (strncmp(name, "refused", 7) == 0) {
                fail->permanent = true;
                snprintf(fail->reason, sizeof(fail->reason), "its slice could not be made: no room");
                return -ENOSPC;
        }
        if (strncmp(name, "flaky", 5) == 0 && !d->flaked) {
                d->flaked = true;
                return -ECONNREFUSED;
        }
        return n < 0 || (size_t)n >= size ? -1 : n + 1;
}

static void exited(void *ud, size_t api, pid_t pid)
{
        struct driver *d = ud;

        d->releases++;
        fprintf(stderr, "driver: released %s-%ld\n", d->apis[api].name, (long)pid);
}

int main(int argc, char **argv)
{
        static struct up_api apis[16];
        static char *argvs[16][4];
        struct up_options opt;
        struct driver d = { .apis = apis };
        size_t n = 0;
        int first = 1, r;

        up_options_default(&opt);
        while (first + 1 < argc && strncmp(argv[first], "--", 2) == 0) {
                uint64_t v = strtoull(argv[first + 1], NULL, 10);

                if (strcmp(argv[first], "--grace") == 0)
                        opt.grace_ms = v;
                else if (strcmp(argv[first], "--reset") == 0)
                        opt.reset_after_ms = v;
                first += 2;
        }
        for (int i = first; i < argc && n < 16; i++, n++) {
                char *eq = strchr(argv[i], '=');

                if (!eq) {
                        fprintf(stderr, "usage: %s [--grace MS] NAME=CMD...\n", argv[0]);
                        return 2;
                }
                *eq = '\0';
                argvs[n][0] = (char *)"/bin/sh";
                argvs[n][1] = (char *)"-c";
                argvs[n][2] = eq + 1;
                apis[n] = (struct up_api){ .name = argv[i], .argv = argvs[n] };
        }
        r = up_supervise(apis, n, &(struct up_hooks){ .prepare = prepare, .exited = exited,
                                                       .ud = &d },
                         &opt);
        fprintf(stderr, "driver: result %d, %u starts, %u releases\n", r, d.starts, d.releases);
        return r < 0 ? 1 : r;
}
