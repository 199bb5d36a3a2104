/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's listing, fetched once or polled (cli_listing.h). */
#include "cli_listing.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

int64_t cli_now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cli_fetch_listing(const struct cli_conn_opts *co, const char *cmd, int *ret_fd,
                      struct cli_listing *ret)
{
        struct gs_error *err = NULL;
        int fd = -1;

        if (cli_connect(co, &fd, &err) < 0 || cli_list(fd, ret, &err) < 0) {
                fprintf(stderr, "gpuslice %s: %s\n", cmd, gs_error_msg(err));
                gs_error_free(err);
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        *ret_fd = fd;
        return 0;
}

bool cli_wait_listing(const struct cli_conn_opts *co, cli_listing_left_fn left, void *ctx,
                      int64_t deadline_ms)
{
        for (;;) {
                struct cli_listing l = { 0 };
                size_t n = SIZE_MAX;
                int fd = -1;

                if (cli_connect(co, &fd, NULL) == 0 && cli_list(fd, &l, NULL) == 0) {
                        n = left(&l, ctx);
                        cli_listing_done(&l);
                }
                if (fd >= 0)
                        close(fd);
                if (n == 0)
                        return true;
                if (cli_now_ms() >= deadline_ms)
                        return false;
                nanosleep(&(struct timespec){ 0, 100 * 1000 * 1000 }, NULL);
        }
}
