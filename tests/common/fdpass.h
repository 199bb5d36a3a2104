/* SPDX-License-Identifier: Apache-2.0 */
/* Passing a file descriptor over a unix socket (SCM_RIGHTS, with one data
 * byte 'f'), for the tests of shareable handles (tests/sim/test_share.c,
 * tests/shim/shim_share_test.c). Header-only; no assertions: each test
 * judges the result with its own macros.
 *
 *   ct_send_fd(s, fd)  0, or -errno (-EPIPE: the byte was not sent)
 *   ct_recv_fd(s)      the descriptor received, or -errno (-EPIPE: the other
 *                      end is gone; -EBADMSG: a byte came without one)
 */
#ifndef GS_TESTS_FDPASS_H
#define GS_TESTS_FDPASS_H

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

static inline int ct_send_fd(int s, int fd)
{
        char c = 'f';
        struct iovec iov = { .iov_base = &c, .iov_len = 1 };
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u;
        memset(&u, 0, sizeof(u));
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                            .msg_controllen = sizeof(u.buf) };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        ssize_t n = sendmsg(s, &m, 0);
        return n == 1 ? 0 : n < 0 ? -errno : -EPIPE;
}

static inline int ct_recv_fd(int s)
{
        char c;
        struct iovec iov = { .iov_base = &c, .iov_len = 1 };
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u;
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                            .msg_controllen = sizeof(u.buf) };
        ssize_t n = recvmsg(s, &m, 0);
        if (n != 1)
                return n < 0 ? -errno : -EPIPE;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        if (!cm || cm->cmsg_type != SCM_RIGHTS)
                return -EBADMSG;
        int fd;
        memcpy(&fd, CMSG_DATA(cm), sizeof(int));
        return fd;
}

#endif /* GS_TESTS_FDPASS_H */
