/* The device plugin's files under its state directory:
 *   allocations          the record of live allocations (survives restarts)
 *   ld.so.preload        mounted over /etc/ld.so.preload in slice containers
 *   slices/<id>/         a slice's directory, mounted into its containers
 *   slices/<id>/slice.conf  its config, mounted read-only
 * Record format, one line each:
 *   version 1
 *   next <seq>
 *   alloc <slice> <units> <exclusive 0|1> <created> <uuid,...> <id,...> */
#include "dp_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "slice_conf_io.h"

#define RECORD_MAX_LINE (DP_MAX_IDS * (DP_MAX_ID_LEN + 1) + 4096)

static char *path_join(const char *a, const char *b, const char *c)
{
        char *p = NULL;
        if (asprintf(&p, "%s/%s%s%s", a, b, c ? "/" : "", c ? c : "") < 0)
                return NULL;
        return p;
}

char *dp_store_slice_dir(const struct dp *d, const char *slice)
{
        char *s = path_join(d->state_dir, "slices", NULL);
        if (!s)
                return NULL;
        char *p = path_join(s, slice, NULL);
        free(s);
        return p;
}

char *dp_store_slice_conf(const struct dp *d, const char *slice)
{
        _cleanup_free_ char *dir = dp_store_slice_dir(d, slice);
        return dir ? path_join(dir, "slice.conf", NULL) : NULL;
}

char *dp_store_preload_path(const struct dp *d)
{
        return path_join(d->state_dir, "ld.so.preload", NULL);
}

/* Write `data` to path atomically (temp file, fsync, rename). */
static int write_atomic(const char *path, const char *data, size_t len, mode_t mode,
                        struct gs_error **err)
{
        _cleanup_free_ char *tmp = NULL;
        if (asprintf(&tmp, "%s.tmp", path) < 0)
                return gs_error_set(err, -ENOMEM, "out of memory");
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        if (fd < 0)
                return gs_error_set(err, -errno, "cannot create %s: %s", tmp, strerror(errno));
        size_t off = 0;
        while (off < len) {
                ssize_t w = write(fd, data + off, len - off);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        int e = errno;
                        unlink(tmp);
                        return gs_error_set(err, -e, "cannot write %s: %s", tmp, strerror(e));
                }
                off += (size_t)w;
        }
        if (fchmod(fd, mode) < 0 || fsync(fd) < 0 || rename(tmp, path) < 0) {
                int e = errno;
                unlink(tmp);
                return gs_error_set(err, -e, "cannot write %s: %s", path, strerror(e));
        }
        return 0;
}

static int mkdir_p(const char *path, struct gs_error **err)
{
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return gs_error_set(err, -ENOMEM, "out of memory");
        for (char *s = p + 1;; s++) {
                if (*s == '/' || *s == '\0') {
                        char c = *s;
                        *s = '\0';
                        if (mkdir(p, 0755) < 0 && errno != EEXIST)
                                return gs_error_set(err, -errno, "cannot create %s: %s", p,
                                                    strerror(errno));
                        *s = c;
                        if (c == '\0')
                                break;
                }
        }
        return 0;
}

int dp_store_write_preload(struct dp *d, struct gs_error **err)
{
        int r = mkdir_p(d->state_dir, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *slices = path_join(d->state_dir, "slices", NULL);
        if (!slices)
                return gs_error_set(err, -ENOMEM, "out of memory");
        r = mkdir_p(slices, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *path = dp_store_preload_path(d);
        if (!path)
                return gs_error_set(err, -ENOMEM, "out of memory");
        const char *line = DP_CONTAINER_SHIM "\n";
        return write_atomic(path, line, strlen(line), 0644, err);
}

int dp_store_write_slice(struct dp *d, const struct gs_slice_conf *c, struct gs_error **err)
{
        _cleanup_free_ char *dir = dp_store_slice_dir(d, c->slice);
        _cleanup_free_ char *conf = dp_store_slice_conf(d, c->slice);
        if (!dir || !conf)
                return gs_error_set(err, -ENOMEM, "out of memory");
        int r = mkdir_p(dir, err);
        if (r < 0)
                return r;
        /* Tenants share the slice dir for accounting; they never see the
         * config writable (it is mounted read-only). */
        if (chmod(dir, 0777) < 0)
                return gs_error_set(err, -errno, "cannot chmod %s: %s", dir, strerror(errno));
        char buf[GS_SLICE_CONF_MAX_BYTES];
        int n = gs_slice_conf_format(c, buf, sizeof(buf), err);
        if (n < 0)
                return n;
        return write_atomic(conf, buf, (size_t)n, 0644, err);
}

void dp_store_remove_slice(struct dp *d, const char *slice)
{
        _cleanup_free_ char *dir = dp_store_slice_dir(d, slice);
        if (!dir)
                return;
        DIR *dh = opendir(dir);
        if (dh) {
                struct dirent *de;
                while ((de = readdir(dh)))
                        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                                unlinkat(dirfd(dh), de->d_name, 0);
                closedir(dh);
        }
        rmdir(dir);
}

/* Append a comma-joined list to a growing buffer. */
static int put(FILE *f, const struct dp_strv *s)
{
        for (size_t i = 0; i < s->n; i++)
                if (fprintf(f, "%s%s", i ? "," : "", s->v[i]) < 0)
                        return -EIO;
        return 0;
}

int dp_store_save(struct dp *d, struct gs_error **err)
{
        char *data = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&data, &len);
        if (!f)
                return gs_error_set(err, -ENOMEM, "out of memory");
        fprintf(f, "version 1\nnext %" PRIu64 "\n", d->next_seq);
        for (size_t i = 0; i < d->n_allocs; i++) {
                const struct dp_alloc *a = &d->allocs[i];
                fprintf(f, "alloc %s %" PRIu32 " %d %" PRId64 " ", a->slice, a->units,
                        a->exclusive ? 1 : 0, a->created);
                put(f, &a->uuids);
                fputc(' ', f);
                put(f, &a->ids);
                fputc('\n', f);
        }
        bool bad = ferror(f) != 0;
        fclose(f);
        if (bad) {
                free(data);
                return gs_error_set(err, -EIO, "cannot format the allocation record");
        }
        _cleanup_free_ char *path = path_join(d->state_dir, "allocations", NULL);
        int r = path ? write_atomic(path, data, len, 0600, err)
                     : gs_error_set(err, -ENOMEM, "out of memory");
        free(data);
        return r;
}

static int split_list(char *s, struct dp_strv *ret)
{
        struct dp_strv v = {0};
        size_t cap = 0;
        char *tok;
        while ((tok = strsep(&s, ","))) {
                size_t l = strlen(tok);
                if (l == 0 || l > 95 || v.n >= DP_MAX_IDS)
                        goto bad;
                if (v.n == cap) {
                        cap = cap ? cap * 2 : 8;
                        char **nv = realloc(v.v, cap * sizeof(char *));
                        if (!nv)
                                goto bad;
                        v.v = nv;
                }
                v.v[v.n] = strdup(tok);
                if (!v.v[v.n])
                        goto bad;
                v.n++;
        }
        *ret = v;
        return 0;
bad:
        dp_strv_done(&v);
        return -EBADMSG;
}

static int parse_u64(const char *s, uint64_t max, uint64_t *ret)
{
        if (!s || !*s || *s == '-' || *s == '+')
                return -EINVAL;
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || *end || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_alloc(char *line, struct dp_alloc *a)
{
        char *f[7];
        for (int i = 0; i < 7; i++) {
                f[i] = strsep(&line, " ");
                if (!f[i])
                        return -EBADMSG;
        }
        if (line || strcmp(f[0], "alloc") != 0)
                return -EBADMSG;
        uint64_t units, excl, created;
        size_t sl = strlen(f[1]);
        if (sl == 0 || sl > GS_SLICE_ID_MAX || parse_u64(f[2], 64u * 1000u, &units) < 0 ||
            units == 0 || parse_u64(f[3], 1, &excl) < 0 ||
            parse_u64(f[4], INT64_MAX, &created) < 0)
                return -EBADMSG;
        memset(a, 0, sizeof(*a));
        memcpy(a->slice, f[1], sl + 1);
        a->units = (uint32_t)units;
        a->exclusive = excl != 0;
        a->created = (int64_t)created;
        if (split_list(f[5], &a->uuids) < 0)
                return -EBADMSG;
        if (split_list(f[6], &a->ids) < 0) {
                dp_strv_done(&a->uuids);
                return -EBADMSG;
        }
        return 0;
}

int dp_store_load(struct dp *d, struct gs_error **err)
{
        _cleanup_free_ char *path = path_join(d->state_dir, "allocations", NULL);
        if (!path)
                return gs_error_set(err, -ENOMEM, "out of memory");
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f) {
                if (errno == ENOENT)
                        return 0;
                return gs_error_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
        }
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        unsigned lineno = 0;
        bool version_seen = false;
        while ((n = getline(&line, &cap, f)) >= 0) {
                lineno++;
                if ((size_t)n > RECORD_MAX_LINE)
                        return gs_error_set(err, -EBADMSG, "%s:%u: line too long", path, lineno);
                if (n > 0 && line[n - 1] == '\n')
                        line[--n] = '\0';
                if (n == 0 || line[0] == '#')
                        continue;
                uint64_t v;
                if (strncmp(line, "version ", 8) == 0) {
                        if (parse_u64(line + 8, 1, &v) < 0 || v != 1)
                                return gs_error_set(err, -EBADMSG, "%s:%u: unknown version",
                                                    path, lineno);
                        version_seen = true;
                        continue;
                }
                if (strncmp(line, "next ", 5) == 0) {
                        if (parse_u64(line + 5, UINT64_MAX, &v) < 0)
                                return gs_error_set(err, -EBADMSG, "%s:%u: bad next", path,
                                                    lineno);
                        d->next_seq = v;
                        continue;
                }
                struct dp_alloc a;
                if (!version_seen || parse_alloc(line, &a) < 0)
                        return gs_error_set(err, -EBADMSG, "%s:%u: damaged allocation record",
                                            path, lineno);
                struct dp_alloc *nv = realloc(d->allocs, (d->n_allocs + 1) * sizeof(*nv));
                if (!nv) {
                        dp_alloc_done(&a);
                        return gs_error_set(err, -ENOMEM, "out of memory");
                }
                d->allocs = nv;
                d->allocs[d->n_allocs++] = a;
        }
        return 0;
}
