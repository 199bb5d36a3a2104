/* SPDX-License-Identifier: Apache-2.0 */
/* The gate's link to gpusliced's arbiter: the GSAR frames on the daemon's
 * unix socket (HELLO/WELCOME, WANT, DONE; the daemon may send ERROR) and
 * the read-only lease page the config names (`lease_page`, in a directory
 * only the daemon may write), checked for owner and mode. Everything here is slow
 * path: called when a thread has no lease, and from the background thread.
 * Every call is bounded (socket timeouts of 200 ms, non-blocking reads). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
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

/* Logged once per reason: the link is retried every 500 ms. */
static _Atomic int page_refused_logged;

static int page_refuse(const char *path, int r, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static int page_refuse(const char *path, int r, const char *fmt, ...)
{
        if (atomic_exchange(&page_refused_logged, -r) == -r)
                return r;
        char why[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        shim_log("compute: lease page %s refused: %s; no leases from the daemon, launches are "
                 "gated locally",
                 path, why);
        return r;
}

/* The directory of the page and the page itself must be the daemon's: owned
 * by root or the config's owner (shim_uid_trusted) and writable by neither
 * group nor others, so that no tenant can replace the page or write a lease
 * into it (docs/internals/trust.md). A page in the tenant's slice directory
 * was exactly that hole. The final name is opened without following a
 * link, relative to the checked directory. Returns the page's fd or
 * -errno (logged). */
static int page_open(const char *path)
{
        char dir[GS_PATH_MAX];
        const char *slash = strrchr(path, '/');
        if (!slash || !slash[1] || (size_t)(slash - path) >= sizeof(dir))
                return page_refuse(path, -EINVAL, "not the path of a file");
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        memcpy(dir, path, n);
        dir[n] = '\0';
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat ds, sb;
        if (dfd < 0 || fstat(dfd, &ds) < 0) {
                int r = -errno;
                if (dfd >= 0)
                        close(dfd);
                return page_refuse(path, r, "its directory cannot be opened: %s",
                                   strerror(-r));
        }
        if (!shim_uid_trusted(dfd, ds.st_uid)) {
                close(dfd);
                return page_refuse(path, -EPERM,
                                   "its directory is owned by uid %u, expected root or uid %u "
                                   "(the config's owner)",
                                   (unsigned)ds.st_uid, (unsigned)shim_conf_uid);
        }
        if (ds.st_mode & (S_IWGRP | S_IWOTH)) {
                close(dfd);
                return page_refuse(path, -EPERM,
                                   "its directory has mode %04o: others could replace the page",
                                   (unsigned)(ds.st_mode & 07777));
        }
        int pfd = openat(dfd, slash + 1, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        int e = errno;
        close(dfd);
        if (pfd < 0)
                return page_refuse(path, -e, "cannot open it: %s", strerror(e));
        int r = 0;
        if (fstat(pfd, &sb) < 0)
                r = page_refuse(path, -errno, "cannot stat it");
        else if (!S_ISREG(sb.st_mode))
                r = page_refuse(path, -EINVAL, "not a regular file (type %o)",
                                (unsigned)(sb.st_mode & S_IFMT));
        else if (!shim_uid_trusted(pfd, sb.st_uid))
                r = page_refuse(path, -EPERM,
                                "owned by uid %u, expected root or uid %u (the config's owner)",
                                (unsigned)sb.st_uid, (unsigned)shim_conf_uid);
        else if (sb.st_mode & (S_IWGRP | S_IWOTH))
                r = page_refuse(path, -EPERM, "mode %04o: others could write leases into it",
                                (unsigned)(sb.st_mode & 07777));
        else if ((uint64_t)sb.st_size < sizeof(struct gs_arb_page))
                r = page_refuse(path, -EPROTO, "%llu bytes, too short",
                                (unsigned long long)sb.st_size);
        if (r < 0) {
                close(pfd);
                return r;
        }
        return pfd;
}

/* Maps the daemon's lease page named by the config (once; kept). Without a
 * `lease_page` the daemon cannot be trusted for leases: a page looked for
 * in the tenant's slice directory could be the tenant's own. */
static int map_page(const struct gs_slice_conf *conf)
{
        struct shim_link_state *dl = &shim_gs.link;
        if (dl->page)
                return 0;
        if (!conf->lease_page[0])
                return page_refuse("(none)", -ENOENT,
                                   "the config names no lease_page (a daemon-owned page)");
        int pfd = page_open(conf->lease_page);
        if (pfd < 0)
                return pfd;
        void *m = mmap(NULL, sizeof(struct gs_arb_page), PROT_READ, MAP_SHARED, pfd, 0);
        int r = m == MAP_FAILED ? -errno : 0;
        close(pfd);
        if (r < 0)
                return r;
        struct gs_arb_page *p = m;
        if (__atomic_load_n(&p->magic, __ATOMIC_ACQUIRE) != GS_ARB_PAGE_MAGIC ||
            p->version != GS_ARB_PROTO_VERSION || p->size != sizeof(struct gs_arb_page)) {
                munmap(m, sizeof(struct gs_arb_page));
                return -EPROTO;
        }
        atomic_store(&page_refused_logged, 0);
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
        /* The page first: a daemon whose page cannot be trusted is not
         * talked to at all. */
        int pr = map_page(conf);
        if (pr < 0)
                return pr;
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
