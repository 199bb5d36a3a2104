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

struct fake {
        pthread_t th;
        atomic_bool stop;
        int lfd;
        int conns[MAX_CONNS];
        struct gs_arb_page *page;
        struct gs_arbiter arb;
        int slot;
        uint64_t epoch, beat;
        atomic_ulong dones, wants;
};
static struct fake fks[FAKED_MAX];

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void page_write(struct fake *f, uint64_t gen, uint64_t start, uint64_t until)
{
        struct gs_arb_page *p = f->page;
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

static void on_frame(struct fake *f, int fd, const uint8_t *buf)
{
        struct gs_arb_msg m;
        uint64_t now = now_ns();
        if (gs_arb_msg_decode(buf, GS_ARB_MSG_SIZE, &m) < 0)
                return;
        switch (m.type) {
        case GS_ARB_MSG_HELLO:
                reply(fd, GS_ARB_MSG_WELCOME, f->epoch);
                break;
        case GS_ARB_MSG_WANT:
                atomic_fetch_add(&f->wants, 1);
                gs_arbiter_want(&f->arb, f->slot, now);
                break;
        case GS_ARB_MSG_IDLE:
                gs_arbiter_idle(&f->arb, f->slot, now);
                break;
        case GS_ARB_MSG_DONE:
                atomic_fetch_add(&f->dones, 1);
                gs_arbiter_done(&f->arb, f->slot, m.gen, m.value, m.flags & GS_ARB_F_PENDING, now);
                break;
        default:
                break;
        }
}

static void *loop(void *arg)
{
        struct fake *f = arg;
        while (!atomic_load(&f->stop)) {
                uint64_t now = now_ns();
                if (now - f->beat >= 50000000ull) {
                        atomic_store(&f->page->heartbeat_ns, now);
                        f->beat = now;
                }
                struct gs_arb_decision d;
                gs_arbiter_next(&f->arb, now, &d);
                if (d.state == GS_ARB_GRANTED)
                        page_write(f, d.gen, d.grant_start, d.grant_until);
                struct pollfd pf[MAX_CONNS + 1];
                int n = 0;
                pf[n++] = (struct pollfd){ .fd = f->lfd, .events = POLLIN };
                for (int i = 0; i < MAX_CONNS; i++)
                        if (f->conns[i] >= 0)
                                pf[n++] = (struct pollfd){ .fd = f->conns[i], .events = POLLIN };
                uint64_t wait = d.wake_at > now ? d.wake_at - now : 0;
                if (wait > 5000000ull)
                        wait = 5000000ull;
                struct timespec ts = { 0, (long)wait };
                if (ppoll(pf, (nfds_t)n, &ts, NULL) <= 0)
                        continue;
                if (pf[0].revents & POLLIN) {
                        int c = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
                        for (int i = 0; c >= 0 && i < MAX_CONNS; i++) {
                                if (f->conns[i] < 0) {
                                        f->conns[i] = c;
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
                                on_frame(f, pf[k].fd, buf);
                                continue;
                        }
                        for (int i = 0; i < MAX_CONNS; i++)
                                if (f->conns[i] == pf[k].fd) {
                                        close(f->conns[i]);
                                        f->conns[i] = -1;
                                }
                }
        }
        return NULL;
}

int faked_start_at(int idx, const char *slice_dir, const char *sock_path, const char *slice,
                   unsigned milli, enum gs_compute_policy policy, uint64_t window)
{
        struct fake *f = &fks[idx];
        memset(f, 0, sizeof(*f));
        for (int i = 0; i < MAX_CONNS; i++)
                f->conns[i] = -1;
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", slice_dir, GS_ARB_PAGE_FILE);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || ftruncate(fd, sizeof(struct gs_arb_page)) < 0)
                return -errno;
        f->page = mmap(NULL, sizeof(struct gs_arb_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (f->page == MAP_FAILED)
                return -errno;
        gs_arbiter_init(&f->arb, NULL);
        uint64_t now = now_ns();
        f->slot = gs_arbiter_slice_join(&f->arb, milli, policy, now);
        f->epoch = 7;
        struct gs_arb_page *p = f->page;
        p->version = GS_ARB_PROTO_VERSION;
        p->size = sizeof(*p);
        snprintf(p->slice, sizeof(p->slice), "%s", slice);
        p->milli = milli;
        p->policy = (uint32_t)policy;
        p->quantum_ns = f->arb.p.quantum_ns;
        atomic_store(&p->epoch, f->epoch);
        atomic_store(&p->heartbeat_ns, now);
        f->beat = now;
        atomic_store(&p->window, window);
        __atomic_store_n(&p->magic, GS_ARB_PAGE_MAGIC, __ATOMIC_RELEASE);

        f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
        if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(f->lfd, 16) < 0)
                return -errno;
        return -pthread_create(&f->th, NULL, loop, f);
}

int faked_start(const char *slice_dir, const char *sock_path, const char *slice, unsigned milli,
                enum gs_compute_policy policy)
{
        return faked_start_at(0, slice_dir, sock_path, slice, milli, policy, 0);
}

void faked_stop_at(int idx)
{
        struct fake *f = &fks[idx];
        atomic_store(&f->stop, true);
        pthread_join(f->th, NULL);
        for (int i = 0; i < MAX_CONNS; i++)
                if (f->conns[i] >= 0)
                        close(f->conns[i]);
        close(f->lfd);
        /* No lease, and the heartbeat stops: a gone daemon. */
        page_write(f, atomic_load(&f->page->gen), 0, 0);
}

void faked_stop(void)
{
        faked_stop_at(0);
}

void faked_freeze_at(int i)
{
        struct fake *f = &fks[i];
        atomic_store(&f->stop, true);
        pthread_join(f->th, NULL);
}

unsigned long faked_dones(void)
{
        struct fake *f = &fks[0];
        return atomic_load(&f->dones);
}

unsigned long faked_wants(void)
{
        struct fake *f = &fks[0];
        return atomic_load(&f->wants);
}
