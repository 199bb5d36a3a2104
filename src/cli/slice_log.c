/* SPDX-License-Identifier: Apache-2.0 */
/* The log of a slice (see slice_log.h). */
#include "slice_log.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "macro.h"
#include "quantity.h"
#include "slice_env.h"

/* buf = a followed by b. */
static int put(char *buf, size_t size, struct gs_error **err, const char *a, const char *b)
{
        int n = snprintf(buf, size, "%s%s", a, b);

        if (n < 0 || (size_t)n >= size)
                return gs_error_set(err, -ENAMETOOLONG, "log directory %s%s is too long", a, b);
        return 0;
}

int slice_log_dir(const char *override, char *buf, size_t size, struct gs_error **err)
{
        const char *env = getenv(SLICE_LOG_DIR_ENV);
        const char *xdg = getenv("XDG_STATE_HOME");
        const char *home = getenv("HOME");

        if (override && *override)
                return put(buf, size, err, override, "");
        if (env && *env)
                return put(buf, size, err, env, "");
        if (geteuid() == 0)
                return put(buf, size, err, "/var/log/gpuslice", "");
        if (xdg && xdg[0] == '/')
                return put(buf, size, err, xdg, "/gpuslice/logs");
        if (!home || home[0] != '/') {
                struct passwd *pw = getpwuid(geteuid());

                home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
        }
        if (!home)
                return gs_error_set(err, -ENOENT, "no home directory for the slices' logs: "
                                    "set --log-dir or $%s", SLICE_LOG_DIR_ENV);
        return put(buf, size, err, home, "/.local/state/gpuslice/logs");
}

int slice_log_path(const char *dir, const char *name, char *buf, size_t size,
                   struct gs_error **err)
{
        size_t len = strlen(name);

        if (len == 0 || name[0] == '.' || strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklm"
                                                       "nopqrstuvwxyz0123456789._-") != len)
                return gs_error_set(err, -EINVAL, "'%.80s' is not a slice name or id "
                                    "([A-Za-z0-9._-], not starting with '.')", name);
        int n = snprintf(buf, size, "%s/%s.log", dir, name);
        if (n < 0 || (size_t)n >= size)
                return gs_error_set(err, -ENAMETOOLONG, "log path %s/%s.log is too long", dir,
                                    name);
        return 0;
}

/* mkdir -p: the missing components get `mode`. */
static int make_dirs(const char *dir, mode_t mode)
{
        char path[4096];
        int n = snprintf(path, sizeof(path), "%s", dir);

        if (n < 0 || (size_t)n >= sizeof(path))
                return -ENAMETOOLONG;
        for (char *p = path + 1;; p++) {
                if (*p != '/' && *p != '\0')
                        continue;
                char c = *p;

                *p = '\0';
                if (mkdir(path, mode) < 0 && errno != EEXIST)
                        return -errno;
                *p = c;
                if (!c)
                        break;
        }
        return 0;
}

int slice_log_open_append(const char *path)
{
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW |
                                    O_NONBLOCK,
                      0640);
        struct stat sb;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
                close(fd);
                return -EINVAL;
        }
        fcntl(fd, F_SETFL, O_APPEND); /* blocking writes from here on */
        return fd;
}

int slice_log_start(const char *path, const char *line, struct gs_error **err)
{
        _cleanup_free_ char *dir = strdup(path);
        char *slash = dir ? strrchr(dir, '/') : NULL;
        struct stat sb;
        int r;

        if (!dir)
                return -ENOMEM;
        if (slash && slash != dir) {
                *slash = '\0';
                r = make_dirs(dir, geteuid() == 0 ? 0750 : 0700);
                if (r < 0)
                        return gs_error_set(err, r, "cannot make the log directory %s: %s", dir,
                                            strerror(-r));
        }
        if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
            (uint64_t)sb.st_size > SLICE_LOG_ROTATE_BYTES) {
                char old[4200];

                snprintf(old, sizeof(old), "%s.1", path);
                rename(path, old); /* best effort: else it grows on */
        }
        int fd = slice_log_open_append(path);
        if (fd < 0)
                return gs_error_set(err, fd, "cannot open the log %s: %s", path,
                                    fd == -EINVAL ? "not a regular file" : strerror(-fd));
        char buf[1024];
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        int n = snprintf(buf, sizeof(buf), "%lld.%03ld gpuslice[%d]: %s\n", (long long)ts.tv_sec,
                         ts.tv_nsec / 1000000, (int)getpid(), line);
        if (n > 0 && write(fd, buf, GS_MIN((size_t)n, sizeof(buf) - 1)) < 0)
                r = -errno;
        else
                r = 0;
        close(fd);
        return r < 0 ? gs_error_set(err, r, "cannot write the log %s: %s", path, strerror(-r)) : 0;
}

void slice_log_env_add(struct slice_env *e, const char *path)
{
        int n = snprintf(e->buf + e->len, e->size - e->len, "GPUSLICE_LOG=%s", path);

        if (n < 0 || (size_t)n + 1 > e->size - e->len) {
                e->overflow = true;
                return;
        }
        e->len += (size_t)n + 1;
}

int slice_log_for_slice(const char *log_dir, const struct cli_slice *s, struct slice_env *e,
                        struct gs_error **err)
{
        char dir[4096], path[4200], line[512];
        char share[32] = "", mem[32] = "whole GPUs";
        int r;

        if (slice_log_user_set())
                return 0;
        if ((r = slice_log_dir(log_dir, dir, sizeof(dir), err)) < 0 ||
            (r = slice_log_path(dir, s->name[0] ? s->name : s->id, path, sizeof(path), err)) < 0)
                return r;
        gs_gpu_quantity_format(s->milli, share, sizeof(share));
        if (s->memory)
                gs_memory_quantity_format(s->memory, mem, sizeof(mem));
        snprintf(line, sizeof(line), "run: slice %s%s%s for pid %d: %s of GPU %u, memory cap %s",
                 s->id, s->name[0] ? " " : "", s->name, s->pid, share,
                 s->n_gpus ? s->gpu_index[0] : 0, mem);
        if ((r = slice_log_start(path, line, err)) < 0)
                return r;
        slice_log_env_add(e, path);
        return 0;
}

bool slice_log_user_set(void)
{
        const char *v = getenv("GPUSLICE_LOG");

        return v && *v;
}
