/* SPDX-License-Identifier: Apache-2.0 */
/* The process supervisor behind `gpuslice up`: runs one process per API,
 * prefixes every line they print with the API's name, restarts an API that
 * exits with exponential backoff, and on SIGINT/SIGTERM/SIGHUP stops them
 * all (SIGTERM to each API's process group, SIGKILL after a grace period).
 * Each API runs below a shepherd (shepherd.h), so whatever it starts dies
 * with it, and everything dies with the supervisor, even by SIGKILL.
 *
 * It knows nothing of slices: the caller's hooks give each new process its
 * slice (after fork, before exec, the child waits for them) and release it
 * when the process is gone. Single-threaded; owns SIGINT, SIGTERM, SIGHUP and
 * SIGCHLD while it runs. */
#ifndef GS_UP_SUPERVISE_H
#define GS_UP_SUPERVISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define UP_ENV_BLOB_MAX 65536 /* bytes of extra environment one start may add */
#define UP_GAVE_UP 4          /* up_supervise's result when an API was not restarted */

/* Why prepare could not give a start what it needs. */
struct up_failure {
        bool permanent;   /* a restart cannot fix it (the daemon refused the slice, a bad
                           * config): the API is not restarted */
        char reason[512]; /* one line for the user; empty: strerror of the result */
};

struct up_api {
        const char *name;       /* printed as "[name] " before each line */
        char *const *argv;      /* NULL-terminated; argv[0] looked up on PATH unless it has a '/' */
        char *const *env;       /* NULL-terminated "K=V" added to every start; may be NULL */
        const char *log_path;   /* its output is also appended here (without the prefix),
                                 * opened for each start after prepare; NULL: none */
};

struct up_hooks {
        /* Called in the parent for each start, after fork, while the child
         * waits. Writes "K=V\0K=V\0..." (at most UP_ENV_BLOB_MAX bytes) into
         * blob and returns its length (>= 0), or a negative errno after
         * filling *fail (zeroed before the call): the child is then killed,
         * and the API restarted with backoff, or never again when
         * fail->permanent. */
        int (*prepare)(void *ud, size_t api, pid_t pid, char *blob, size_t size,
                       struct up_failure *fail);
        /* Called once the process started for api is reaped (exited or killed). */
        void (*exited)(void *ud, size_t api, pid_t pid);
        /* Optional, called after exited: whether that process was stopped
         * on purpose (`gpuslice stop`): it is then not restarted. */
        bool (*stopped)(void *ud, size_t api);
        void *ud;
};

struct up_options {
        uint64_t backoff_initial_ms; /* first restart delay (500) */
        uint64_t backoff_max_ms;     /* cap of the doubling (30000) */
        uint64_t reset_after_ms;     /* up this long: the next delay is initial again (30000) */
        uint64_t grace_ms;           /* SIGTERM to SIGKILL on stop (10000) */
        bool quiet;                  /* the APIs' lines go only to their log_path, not to our
                                      * stdout/stderr (a detached `up -d`) */
};

/* The defaults above. */
void up_options_default(struct up_options *o);

/* Start every API and supervise them until SIGINT, SIGTERM or SIGHUP, then stop them
 * all and return 0 (a clean stop), or 1 when some API had to be killed with
 * SIGKILL. An API stopped on purpose (hooks->stopped) is not restarted ("up:
 * NAME: stopped; not restarted"), and once none is left either the
 * supervisor returns 0. An API that failed for a reason a restart cannot fix (a permanent
 * prepare failure, or a command that could not be run: exit status 126 or
 * 127) is not restarted ("up: NAME: not restarted: REASON"); the others keep
 * running, and once no API is left the supervisor returns by itself. Either
 * way the result is then UP_GAVE_UP. Returns a negative errno when the
 * supervisor itself cannot run (signalfd, pipes); APIs already started are
 * stopped first. */
int up_supervise(const struct up_api *apis, size_t n_apis, const struct up_hooks *hooks,
                 const struct up_options *opt);

#endif /* GS_UP_SUPERVISE_H */
