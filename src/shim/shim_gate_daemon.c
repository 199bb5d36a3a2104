/* SPDX-License-Identifier: Apache-2.0 */
/* The gate's link to gpusliced's arbiter: the GSAR frames on the daemon's
 * unix socket (HELLO/WELCOME, WANT, DONE; the daemon may send ERROR) and
 * the read-only lease page <slice_dir>/compute. Everything here is slow
 * path: called when a thread has no lease, and from the background thread.
 * Every call is bounded (socket timeouts of 200 ms, non-blocking reads). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "arbiter_wire.h"
#include "shim.h"
#include "shim_gate.h"

/* The state is shim_gs.link (struct shim_gate_state), `dl` below. */

struct gs_arb_page *shim_daemon_page(void)
{
        struct shim_link_state *dl = &shim_gs.link;
        return atomic_load_explicit(&dl->linked, memory_order_acquire) ? dl->page : NULL;
}

uint64_t shim_daemon_epoch(void)
{
        struct shim_link_state *dl = &shim_gs.link;
        return atomic_load_explicit(&dl->epoch, memory_order_relaxed);
}

static int map_page(const struct gs_slice_conf *conf)
{
        struct shim_link_state *dl = &shim_gs.link;
        if (dl->page)
                return 0;
        char path[GS_PATH_MAX + 32];
        int n = snprintf(path, sizeof(path), "%s/%s", conf->slice_dir, GS_ARB_PAGE_FILE);
        if (n < 0 || (size_t)n >= sizeof(path))
                return -ENAMETOOLONG;
        int pfd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (pfd < 0)
                return -errno;
        struct stat sb;
        int r = 0;
        if (fstat(pfd, &sb) < 0)
                r = -errno;
        else if ((uint64_t)sb.st_size < sizeof(struct gs_arb_page))
                r = -EPROTO;
        void *m = MAP_FAILED;
        if (r == 0) {
                m = mmap(NULL, sizeof(struct gs_arb_page), PROT_READ, MAP_SHARED, pfd, 0);
                if (m == MAP_FAILED)
                        r = -errno;
        }
        close(pfd);
        if (r < 0)
                return r;
        struct gs_arb_page *p = m;
        if (__atomic_load_n(&p->magic, __ATOMIC_ACQUIRE) != GS_ARB_PAGE_MAGIC ||
            p->version != GS_ARB_PROTO_VERSION || p->size != sizeof(struct gs_arb_page)) {
                munmap(m, sizeof(struct gs_arb_page));
                return -EPROTO;
        }
        dl->page = p;
        return 0;
}

static int send_locked(const struct gs_arb_msg *m)
{
        struct shim_link_state *dl = &shim_gs.link;
        uint8_t buf[GS_ARB_MSG_SIZE];
        gs_arb_msg_encode(buf, m);
        ssize_t w = send(dl->fd, buf, sizeof(buf), MSG_NOSIGNAL);
        return w == (ssize_t)sizeof(buf) ? 0 : -EIO;
}

static void close_locked(void)
{
        struct shim_link_state *dl = &shim_gs.link;
        atomic_store_explicit(&dl->linked, false, memory_order_release);
        if (dl->fd >= 0)
                close(dl->fd);
        dl->fd = -1;
}

int shim_daemon_connect(const struct gs_slice_conf *conf)
{
        struct shim_link_state *dl = &shim_gs.link;
        if (!conf->daemon_socket[0])
                return -ENOTCONN;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(conf->daemon_socket) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, conf->daemon_socket, strlen(conf->daemon_socket) + 1);
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return -errno;
        struct timeval tv = { .tv_sec = 0, .tv_usec = 200000 };
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        int r = 0;
        if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                r = -errno;
                close(s);
                return r;
        }
        uint8_t buf[GS_ARB_MSG_SIZE];
        struct gs_arb_msg m = { .type = GS_ARB_MSG_HELLO, .value = GS_ARB_PROTO_VERSION };
        gs_arb_msg_encode(buf, &m);
        size_t got = 0;
        if (send(s, buf, sizeof(buf), MSG_NOSIGNAL) != (ssize_t)sizeof(buf)) {
                r = -EIO;
        } else {
                while (got < sizeof(buf)) {
                        ssize_t n = recv(s, buf + got, sizeof(buf) - got, 0);
                        if (n <= 0) {
                                r = n == 0 ? -ECONNRESET : -errno;
                                break;
                        }
                        got += (size_t)n;
                }
        }
        if (r == 0)
                r = gs_arb_msg_decode(buf, got, &m);
        if (r == 0 && m.type != GS_ARB_MSG_WELCOME)
                r = m.type == GS_ARB_MSG_ERROR && m.value > 0 && m.value < 4096 ? -(int)m.value : -EPROTO;
        if (r == 0)
                r = map_page(conf);
        if (r == 0 && atomic_load_explicit(&dl->page->epoch, memory_order_acquire) != m.value)
                r = -ESTALE;
        if (r < 0) {
                close(s);
                return r;
        }
        int fl = fcntl(s, F_GETFL);
        if (fl >= 0)
                fcntl(s, F_SETFL, fl | O_NONBLOCK);
        pthread_mutex_lock(&dl->mu);
        close_locked();
        dl->fd = s;
        atomic_store_explicit(&dl->epoch, m.value, memory_order_relaxed);
        atomic_store_explicit(&dl->linked, true, memory_order_release);
        pthread_mutex_unlock(&dl->mu);
        return 0;
}

/* Reads whatever the daemon sent; false when the link broke. Lock held. */
static bool poll_locked(void)
{
        struct shim_link_state *dl = &shim_gs.link;
        for (;;) {
                uint8_t buf[GS_ARB_MSG_SIZE];
                ssize_t n = recv(dl->fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0)
                        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
                if (n == 0)
                        return false;
                if ((size_t)n < sizeof(buf)) {
                        /* Frames are 32 bytes and sent whole; a short read
                         * means the stream is out of step. */
                        return false;
                }
                struct gs_arb_msg m;
                if (gs_arb_msg_decode(buf, sizeof(buf), &m) < 0 || m.type == GS_ARB_MSG_ERROR)
                        return false;
                if (m.type == GS_ARB_MSG_WELCOME &&
                    m.value != atomic_load_explicit(&dl->epoch, memory_order_relaxed))
                        return false;
        }
}

bool shim_daemon_healthy(uint64_t now)
{
        struct shim_link_state *dl = &shim_gs.link;
        if (!atomic_load_explicit(&dl->linked, memory_order_acquire))
                return false;
        uint64_t hb = atomic_load_explicit(&dl->page->heartbeat_ns, memory_order_acquire);
        bool ok = atomic_load_explicit(&dl->page->epoch, memory_order_acquire) ==
                          atomic_load_explicit(&dl->epoch, memory_order_relaxed) &&
                  hb + GS_ARB_STALE_NS > now;
        pthread_mutex_lock(&dl->mu);
        if (dl->fd < 0)
                ok = false;
        else if (ok)
                ok = poll_locked();
        if (!ok)
                close_locked();
        pthread_mutex_unlock(&dl->mu);
        return ok;
}

bool shim_daemon_send(enum gs_arb_msg_type type, uint64_t gen, uint64_t value, uint32_t flags)
{
        struct shim_link_state *dl = &shim_gs.link;
        struct gs_arb_msg m = { .type = type, .gen = gen, .value = value, .flags = flags };
        pthread_mutex_lock(&dl->mu);
        bool ok = dl->fd >= 0 && send_locked(&m) == 0;
        if (!ok)
                close_locked();
        pthread_mutex_unlock(&dl->mu);
        return ok;
}

void shim_daemon_close(void)
{
        struct shim_link_state *dl = &shim_gs.link;
        pthread_mutex_lock(&dl->mu);
        close_locked();
        pthread_mutex_unlock(&dl->mu);
}
