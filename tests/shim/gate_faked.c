/* SPDX-License-Identifier: Apache-2.0 */
/* A stand-in for gpusliced's arbiter service, for the gate's daemon-mode
 * tests: one slice, the real arbiter (src/core/arbiter.c) and frame codec
 * (src/core/arbiter_wire.c), a lease page written by the documented writer
 * protocol, GSAR frames on a unix socket, heartbeats. Runs as a thread in
 * the (unpreloaded) test parent. */
#include "gate_faked.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "arbiter.h"
#include "arbiter_wire.h"

#define MAX_CONNS 16

static struct {
        pthread_t th;
        atomic_bool stop;
        int lfd;
        int conns[MAX_CONNS];
        struct gs_arb_page *page;
        struct gs_arbiter arb;
        int slot;
        uint64_t epoch, beat;
        atomic_ulong dones, wants;
} fk;

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void page_write(uint64_t gen, uint64_t start, uint64_t until)
{
        struct gs_arb_page *p = fk.page;
        if (atomic_load(&p->gen) == gen && atomic_load(&p->until_ns) == until)
                return;
        uint64_t s = atomic_load(&p->seq);
        atomic_store(&p->seq, s + 1);
        atomic_store(&p->gen, gen);
        atomic_store(&p->start_ns, start);
        atomic_store(&p->until_ns, until);
        atomic_store(&p->seq, s + 2);
        atomic_fetch_add(&p->futex, 1);
        syscall(SYS_futex, (uint32_t *)&p->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void reply(int fd, enum gs_arb_msg_type t, uint64_t value)
{
        uint8_t buf[GS_ARB_MSG_SIZE];
        struct gs_arb_msg m = { .type = t, .value = value };
        gs_arb_msg_encode(buf, &m);
        if (send(fd, buf, sizeof(buf), MSG_NOSIGNAL) != (ssize_t)sizeof(buf))
                fprintf(stderr, "fake daemon: send failed\n");
}

static void on_frame(int fd, const uint8_t *buf)
{
        struct gs_arb_msg m;
        uint64_t now = now_ns();
        if (gs_arb_msg_decode(buf, GS_ARB_MSG_SIZE, &m) < 0)
                return;
        switch (m.type) {
        case GS_ARB_MSG_HELLO:
                reply(fd, GS_ARB_MSG_WELCOME, fk.epoch);
                break;
        case GS_ARB_MSG_WANT:
                atomic_fetch_add(&fk.wants, 1);
                gs_arbiter_want(&fk.arb, fk.slot, now);
                break;
        case GS_ARB_MSG_IDLE:
                gs_arbiter_idle(&fk.arb, fk.slot, now);
                break;
        case GS_ARB_MSG_DONE:
                atomic_fetch_add(&fk.dones, 1);
                gs_arbiter_done(&fk.arb, fk.slot, m.gen, m.value, m.flags & GS_ARB_F_PENDING, now);
                break;
        default:
                break;
        }
}

static void *loop(void *arg)
{
        (void)arg;
        while (!atomic_load(&fk.stop)) {
                uint64_t now = now_ns();
                if (now - fk.beat >= 50000000ull) {
                        atomic_store(&fk.page->heartbeat_ns, now);
                        fk.beat = now;
                }
                struct gs_arb_decision d;
                gs_arbiter_next(&fk.arb, now, &d);
                if (d.state == GS_ARB_GRANTED)
                        page_write(d.gen, d.grant_start, d.grant_until);
                struct pollfd pf[MAX_CONNS + 1];
                int n = 0;
                pf[n++] = (struct pollfd){ .fd = fk.lfd, .events = POLLIN };
                for (int i = 0; i < MAX_CONNS; i++)
                        if (fk.conns[i] >= 0)
                                pf[n++] = (struct pollfd){ .fd = fk.conns[i], .events = POLLIN };
                uint64_t wait = d.wake_at > now ? d.wake_at - now : 0;
                if (wait > 5000000ull)
                        wait = 5000000ull;
                struct timespec ts = { 0, (long)wait };
                if (ppoll(pf, (nfds_t)n, &ts, NULL) <= 0)
                        continue;
                if (pf[0].revents & POLLIN) {
                        int c = accept4(fk.lfd, NULL, NULL, SOCK_CLOEXEC);
                        for (int i = 0; c >= 0 && i < MAX_CONNS; i++) {
                                if (fk.conns[i] < 0) {
                                        fk.conns[i] = c;
                                        c = -1;
                                }
                        }
                        if (c >= 0)
                                close(c);
                }
                for (int k = 1; k < n; k++) {
                        if (!pf[k].revents)
                                continue;
                        uint8_t buf[GS_ARB_MSG_SIZE];
                        ssize_t r = recv(pf[k].fd, buf, sizeof(buf), MSG_WAITALL);
                        if (r == (ssize_t)sizeof(buf)) {
                                on_frame(pf[k].fd, buf);
                                continue;
                        }
                        for (int i = 0; i < MAX_CONNS; i++)
                                if (fk.conns[i] == pf[k].fd) {
                                        close(fk.conns[i]);
                                        fk.conns[i] = -1;
                                }
                }
        }
        return NULL;
}

int faked_start(const char *slice_dir, const char *sock_path, const char *slice, unsigned milli,
                enum gs_compute_policy policy)
{
        memset(&fk, 0, sizeof(fk));
        for (int i = 0; i < MAX_CONNS; i++)
                fk.conns[i] = -1;
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", slice_dir, GS_ARB_PAGE_FILE);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || ftruncate(fd, sizeof(struct gs_arb_page)) < 0)
                return -errno;
        fk.page = mmap(NULL, sizeof(struct gs_arb_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (fk.page == MAP_FAILED)
                return -errno;
        gs_arbiter_init(&fk.arb, NULL);
        uint64_t now = now_ns();
        fk.slot = gs_arbiter_slice_join(&fk.arb, milli, policy, now);
        fk.epoch = 7;
        struct gs_arb_page *p = fk.page;
        p->version = GS_ARB_PROTO_VERSION;
        p->size = sizeof(*p);
        snprintf(p->slice, sizeof(p->slice), "%s", slice);
        p->milli = milli;
        p->policy = (uint32_t)policy;
        p->quantum_ns = fk.arb.p.quantum_ns;
        atomic_store(&p->epoch, fk.epoch);
        atomic_store(&p->heartbeat_ns, now);
        fk.beat = now;
        __atomic_store_n(&p->magic, GS_ARB_PAGE_MAGIC, __ATOMIC_RELEASE);

        fk.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
        if (fk.lfd < 0 || bind(fk.lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fk.lfd, 16) < 0)
                return -errno;
        return -pthread_create(&fk.th, NULL, loop, NULL);
}

void faked_stop(void)
{
        atomic_store(&fk.stop, true);
        pthread_join(fk.th, NULL);
        for (int i = 0; i < MAX_CONNS; i++)
                if (fk.conns[i] >= 0)
                        close(fk.conns[i]);
        close(fk.lfd);
        /* No lease, and the heartbeat stops: a gone daemon. */
        page_write(atomic_load(&fk.page->gen), 0, 0);
}

unsigned long faked_dones(void)
{
        return atomic_load(&fk.dones);
}

unsigned long faked_wants(void)
{
        return atomic_load(&fk.wants);
}
