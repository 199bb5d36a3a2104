/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's listing as the CLI's commands fetch it: once (ps, ls, stop,
 * down), or polled until what a command waits for is gone from it (stop,
 * down). */
#ifndef GS_CLI_LISTING_H
#define GS_CLI_LISTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"

/* CLOCK_MONOTONIC in milliseconds. */
int64_t cli_now_ms(void);

/* Connect as co says and fetch the listing into *ret (cli_listing_done) and
 * the open connection into *ret_fd. 0; or -1 after printing
 * "gpuslice CMD: why" to stderr, with nothing left open. */
int cli_fetch_listing(const struct cli_conn_opts *co, const char *cmd, int *ret_fd,
                      struct cli_listing *ret);

/* What cli_wait_listing asks of each fresh listing: how many of the things
 * waited for are still there (0 ends the wait). */
typedef size_t (*cli_listing_left_fn)(const struct cli_listing *l, void *ctx);

/* Fetch the listing every 100 ms (a new connection each time; one that
 * fails is skipped) and pass it to left(), until it returns 0 (true) or the
 * monotonic clock reaches deadline_ms (false). */
bool cli_wait_listing(const struct cli_conn_opts *co, cli_listing_left_fn left, void *ctx,
                      int64_t deadline_ms);

#endif /* GS_CLI_LISTING_H */
