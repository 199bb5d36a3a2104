/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuslice up -d`: the supervisor detached from the terminal. The command
 * forks it into a session of its own (setsid: no terminal, no SIGHUP when
 * the terminal goes), stdin from /dev/null, stdout and stderr appended to
 * up's own log; it then runs the same supervisor as the foreground `up`
 * (restarts, backoff, refusals; the shepherds still kill every API when it
 * dies). The command waits until each API has been started once, or refused
 * for good, as the supervisor reports over a pipe, prints that, and returns;
 * `gpuslice down` stops the supervisor later. */
#ifndef GS_CLI_UP_DETACH_H
#define GS_CLI_UP_DETACH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "up_supervise.h"

#define UP_DETACH_WAIT_MS 60000 /* at most this long for every API to start */

struct up_detach {
        int report_fd;             /* the supervisor's end of the report pipe; -1 once done */
        size_t n_apis;
        bool *reported;            /* per API: started once, or refused for good */
        size_t n_reported;
        const struct up_api *apis;
        struct up_hooks inner;     /* the real hooks (up_slices) */
};

/* Fork the supervisor. In the supervisor: returns 0 with *d ready and
 * *hooks replaced by hooks that report each API's first start to the
 * command (then call up_supervise with them). In the command: waits for the
 * report, prints each API's start and where its log is, and returns the
 * exit status (> 0 wins over 0: 0 every API started; 4 some were refused;
 * 125 the supervisor could not start). up_log: the supervisor's own output. */
int up_detach_fork(const char *up_log, const char *spec_path, const struct up_api *apis,
                   size_t n_apis, struct up_hooks *hooks, struct up_detach *d, int *ret_status);

/* In the supervisor, after up_supervise: free what up_detach_fork made. */
void up_detach_done(struct up_detach *d);

#endif /* GS_CLI_UP_DETACH_H */
