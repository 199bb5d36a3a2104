/* SPDX-License-Identifier: Apache-2.0 */
/* The lease page, daemon side (see lease_page.h and arbiter_proto.h). */
#include "lease_page.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arbiter_page.h"
#include "macro.h"

static size_t page_len(void)
{
        long ps = sysconf(_SC_PAGESIZE);
        size_t n = ps > 0 ? (size_t)ps : 4096u;
        return GS_MAX(n, sizeof(struct gs_arb_page));
}

/* Open `name` in dfd for writing although it is (our own) mode 0444: a
 * daemon that does not run as root cannot open its own read-only file for
 * writing, so it lends itself write permission for the open. */
static int open_rw(int dfd, const char *name)
{
        int fd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0444);
        if (fd >= 0 || errno != EACCES)
                return fd < 0 ? -errno : fd;
        _cleanup_close_ int rfd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (rfd < 0 || fstat(rfd, &st) < 0)
                return -EACCES;
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
                return -EPERM;
        if (fchmod(rfd, 0600) < 0)
                return -errno;
        fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        (void)fchmod(rfd, 0444);
        return fd < 0 ? -e : fd;
}

int lease_page_open(struct lease_page *pg, const char *dir, const char *id, uint32_t milli,
                    enum gs_compute_policy policy, uint64_t quantum_ns, uint64_t epoch,
                    uint64_t now_ns)
{
        *pg = (struct lease_page)LEASE_PAGE_INIT;
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        _cleanup_close_ int fd = open_rw(dfd, GS_ARB_PAGE_FILE);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) < 0)
                return -errno;
        if (fd == -EPERM || (fd >= 0 && (!S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
                                         st.st_nlink != 1))) {
                /* Not a file this daemon made (the slice directory belongs
                 * to the tenant): replace it. */
                if (fd >= 0)
                        close(TAKE_FD(fd));
                if (unlinkat(dfd, GS_ARB_PAGE_FILE, 0) < 0 && errno != ENOENT)
                        return -errno;
                fd = openat(dfd, GS_ARB_PAGE_FILE, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                            0444);
                if (fd < 0 || fstat(fd, &st) < 0)
                        return -errno;
        }
        if (fd < 0)
                return fd;
        size_t len = page_len();
        if ((size_t)st.st_size != len && ftruncate(fd, (off_t)len) < 0)
                return -errno;
        if (fchmod(fd, 0444) < 0)
                return -errno;
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
                return -errno;
        struct gs_arb_page *p = m;
        bool ours = p->magic == GS_ARB_PAGE_MAGIC && p->version == GS_ARB_PROTO_VERSION &&
                    p->size == sizeof(*p);
        if (!ours) {
                /* A fresh page: identity first, the magic last. */
                memset(m, 0, len);
                p->version = GS_ARB_PROTO_VERSION;
                p->size = (uint32_t)sizeof(*p);
        }
        snprintf(p->slice, sizeof(p->slice), "%s", id);
        p->milli = milli;
        p->policy = (uint32_t)policy;
        p->quantum_ns = quantum_ns;
        pg->fd = TAKE_FD(fd);
        pg->p = p;
        atomic_store_explicit(&p->epoch, epoch, memory_order_release);
        atomic_store_explicit(&p->heartbeat_ns, now_ns, memory_order_release);
        /* No lease under this daemon yet; the generation is kept (it only
         * grows, the epoch tells instances apart). */
        lease_page_write(pg, atomic_load_explicit(&p->gen, memory_order_relaxed), 0, 0);
        if (!ours)
                __atomic_store_n(&p->magic, GS_ARB_PAGE_MAGIC, __ATOMIC_RELEASE);
        (void)msync(m, len, MS_ASYNC);
        return 0;
}

void lease_page_write(struct lease_page *pg, uint64_t gen, uint64_t start_ns, uint64_t until_ns)
{
        struct gs_arb_page *p = pg->p;
        if (!p)
                return;
        gs_arb_page_write(p, gen, start_ns, until_ns);
}

void lease_page_beat(struct lease_page *pg, uint64_t now_ns)
{
        if (pg->p)
                atomic_store_explicit(&pg->p->heartbeat_ns, now_ns, memory_order_release);
}

void lease_page_identity(struct lease_page *pg, uint32_t milli, enum gs_compute_policy policy)
{
        if (!pg->p)
                return;
        pg->p->milli = milli;
        pg->p->policy = (uint32_t)policy;
}

void lease_page_close(struct lease_page *pg)
{
        if (pg->p)
                munmap(pg->p, page_len());
        if (pg->fd >= 0)
                close(pg->fd);
        *pg = (struct lease_page)LEASE_PAGE_INIT;
}
