/* SPDX-License-Identifier: Apache-2.0 */
/* The slice's shared state files (<slice_dir>/memory, <slice_dir>/compute.local):
 * opened or created, sized, checked and mapped the same way by every
 * process of the slice, under the file's flock. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim.h"

int shim_statefile_open(const char *dir, const char *name, size_t size, mode_t mode, const char *what,
                        struct shim_statefile *ret)
{
        *ret = (struct shim_statefile){ .fd = -1, .map = MAP_FAILED, .size = size };
        int n = snprintf(ret->path, sizeof(ret->path), "%s/%s", dir, name);
        if (n < 0 || (size_t)n >= sizeof(ret->path))
                return -ENAMETOOLONG;
        ret->fd = open(ret->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, mode);
        if (ret->fd < 0) {
                int r = -errno;
                shim_log("%s: cannot open %s: %s", what, ret->path, strerror(-r));
                return r;
        }
        int r = 0;
        struct stat sb;
        if (flock(ret->fd, LOCK_EX) < 0 || fstat(ret->fd, &sb) < 0) {
                r = -errno;
                shim_log("%s: cannot lock %s: %s", what, ret->path, strerror(errno));
                goto fail;
        }
        ret->fresh = sb.st_size == 0;
        if (ret->fresh && ftruncate(ret->fd, (off_t)size) < 0) {
                r = -errno;
                shim_log("%s: cannot size %s: %s", what, ret->path, strerror(errno));
                goto fail;
        }
        if (!ret->fresh && (uint64_t)sb.st_size != size) {
                shim_log("%s: %s has %lld bytes, expected %zu (another layout version?)", what,
                         ret->path, (long long)sb.st_size, size);
                r = -EPROTO;
                goto fail;
        }
        ret->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, ret->fd, 0);
        if (ret->map == MAP_FAILED) {
                r = -errno;
                shim_log("%s: cannot map %s: %s", what, ret->path, strerror(errno));
                goto fail;
        }
        if (!ret->fresh && __atomic_load_n((uint64_t *)ret->map, __ATOMIC_ACQUIRE) == 0) {
                /* Right size, no magic: its creator died between sizing it
                 * and storing the magic (which it does last, under this
                 * flock). Nobody can have attached to it: start it afresh. */
                shim_log("%s: %s was left half-created (no magic): initialising it", what, ret->path);
                memset(ret->map, 0, size);
                ret->fresh = true;
        }
        return 0;
fail:
        shim_statefile_close(ret, false);
        return r;
}

void *shim_statefile_close(struct shim_statefile *f, bool keep_map)
{
        void *map = keep_map ? f->map : NULL;
        if (!keep_map && f->map != MAP_FAILED)
                munmap(f->map, f->size);
        f->map = MAP_FAILED;
        if (f->fd >= 0) {
                /* Unlock explicitly: the mapping keeps the open file
                 * description (and with it the flock) alive after close. */
                flock(f->fd, LOCK_UN);
                close(f->fd);
        }
        f->fd = -1;
        return map;
}
