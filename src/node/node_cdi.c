/* SPDX-License-Identifier: Apache-2.0 */
/* CDI specs of slice shares. See node_cdi.h and docs/internals/cdi.md. */
#include "node_cdi.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "log.h"
#include "macro.h"

#define TMP_SUFFIX ".tmp"

static bool is_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

int node_cdi_name_check(const char *name, struct gs_error **err)
{
        if (!name || !name[0])
                return gs_error_set(err, -EINVAL, "CDI device name is empty");
        size_t len = strlen(name);
        if (len > NODE_CDI_NAME_MAX)
                return gs_error_set(err, -EINVAL,
                                    "CDI device name \"%.40s...\" is %zu characters long (at "
                                    "most %d)",
                                    name, len, NODE_CDI_NAME_MAX);
        for (size_t i = 0; i < len; i++) {
                char c = name[i];
                if (is_alnum(c))
                        continue;
                if ((c == '-' || c == '_' || c == '.') && i > 0 && i + 1 < len)
                        continue;
                return gs_error_set(err, -EINVAL,
                                    "CDI device name \"%s\": invalid character at %zu (accepted: "
                                    "letters, digits and '-', '_', '.' between, beginning and "
                                    "ending with a letter or digit)",
                                    name, i);
        }
        return 0;
}

/* The lowest cdiVersion for what we write. The fields we use (kind,
 * devices[].name, containerEdits.env, containerEdits.mounts with hostPath,
 * containerPath and options) are all in v0.3.0, the earliest version the
 * reference implementation (specs-go/version.go) still accepts. We leave
 * out the mount `type` added in v0.4.0: for a bind mount it is a dummy
 * (SPEC.md), and runc and crun make any mount whose options hold "bind" a
 * bind mount whatever its type. The class "slice" has no '.' (v0.6.0), and
 * we use no annotations (v0.6.0), device nodes or hooks. Only a device name
 * that begins with a digit needs more: v0.5.0 first allowed that. A runtime
 * refuses a spec whose version is below what its content needs, and an
 * older runtime one whose version its CDI library does not know yet, so the
 * lowest is the most widely read. */
static const char *cdi_version_of(const char *device_name)
{
        return device_name[0] >= '0' && device_name[0] <= '9' ? "0.5.0" : "0.3.0";
}

/* json_string, telling text that is not UTF-8 (-EINVAL, naming `what`)
 * from a lack of memory. */
static json_t *str_json(const char *s, const char *what, int *r, struct gs_error **err)
{
        json_t *j = json_string(s);
        if (j || *r < 0)
                return j;
        json_t *raw = json_string_nocheck(s);
        if (raw) {
                json_decref(raw);
                *r = gs_error_set(err, -EINVAL, "%s is not valid UTF-8", what);
        } else {
                *r = gs_error_set(err, -ENOMEM, "out of memory");
        }
        return NULL;
}

/* Take `value` into obj[key] (NULL: already an error in *r). */
static void set(json_t *obj, const char *key, json_t *value, int *r, struct gs_error **err)
{
        if (json_object_set_new(obj, key, value) < 0 && *r == 0)
                *r = gs_error_set(err, -ENOMEM, "out of memory");
}

static void append(json_t *arr, json_t *value, int *r, struct gs_error **err)
{
        if (json_array_append_new(arr, value) < 0 && *r == 0)
                *r = gs_error_set(err, -ENOMEM, "out of memory");
}

static int env_json(const struct node_edits *e, json_t **ret, struct gs_error **err)
{
        json_auto_t *arr = json_array();
        int r = arr ? 0 : gs_error_set(err, -ENOMEM, "out of memory");
        for (size_t i = 0; r == 0 && i < e->n_envs; i++) {
                const struct node_env *v = &e->envs[i];
                if (!v->key || !v->key[0] || strchr(v->key, '='))
                        return gs_error_set(err, -EINVAL, "env %zu has key \"%s\"", i,
                                            v->key ? v->key : "");
                char kv[256 + NODE_EDIT_VALUE_MAX];
                if (snprintf(kv, sizeof(kv), "%s=%s", v->key, v->value) >= (int)sizeof(kv))
                        return gs_error_set(err, -ENAMETOOLONG, "env %s too long", v->key);
                append(arr, str_json(kv, v->key, &r, err), &r, err);
        }
        if (r == 0)
                *ret = TAKE_PTR(arr);
        return r;
}

static int path_ok(const char *path, const char *what, const char *cpath, struct gs_error **err)
{
        if (!path || path[0] != '/')
                return gs_error_set(err, -EINVAL, "mount %s: %s \"%s\" is not an absolute path",
                                    cpath ? cpath : "(none)", what, path ? path : "");
        return 0;
}

/* {"containerPath", "hostPath", "options"}: a bind mount, never a
 * set-uid or device file; read-only or read-write as the edit says. No
 * "type" (see cdi_version_of). */
static json_t *mount_json(const struct node_mount *m, int *r, struct gs_error **err)
{
        json_t *o = json_object();
        json_t *opts = json_array();
        if (!o || !opts) {
                json_decref(o);
                json_decref(opts);
                *r = gs_error_set(err, -ENOMEM, "out of memory");
                return NULL;
        }
        static const char *const tail[] = { "nosuid", "nodev", "bind" };
        append(opts, json_string(m->read_only ? "ro" : "rw"), r, err);
        for (size_t i = 0; i < GS_ARRAY_SIZE(tail); i++)
                append(opts, json_string(tail[i]), r, err);
        set(o, "hostPath", str_json(m->host_path, m->container_path, r, err), r, err);
        set(o, "containerPath", str_json(m->container_path, m->container_path, r, err), r, err);
        set(o, "options", opts, r, err);
        return o;
}

static int mounts_json(const struct node_edits *e, json_t **ret, struct gs_error **err)
{
        json_auto_t *arr = json_array();
        int r = arr ? 0 : gs_error_set(err, -ENOMEM, "out of memory");
        for (size_t i = 0; r == 0 && i < e->n_mounts; i++) {
                const struct node_mount *m = &e->mounts[i];
                if ((r = path_ok(m->container_path, "container path", m->container_path, err)) <
                            0 ||
                    (r = path_ok(m->host_path, "host path", m->container_path, err)) < 0)
                        return r;
                append(arr, mount_json(m, &r, err), &r, err);
        }
        if (r == 0)
                *ret = TAKE_PTR(arr);
        return r;
}

/* The whole spec as text (malloc'ed, ending in a newline). */
static int spec_text(const char *device_name, const struct node_edits *e, char **ret,
                     struct gs_error **err)
{
        if (e->n_envs > NODE_EDITS_MAX_ENVS || e->n_mounts > NODE_EDITS_MAX_MOUNTS)
                return gs_error_set(err, -EINVAL, "%zu envs, %zu mounts (at most %d, %d)",
                                    e->n_envs, e->n_mounts, NODE_EDITS_MAX_ENVS,
                                    NODE_EDITS_MAX_MOUNTS);
        /* The reference implementation refuses a device with no edits. */
        if (e->n_envs == 0 && e->n_mounts == 0)
                return gs_error_set(err, -EINVAL, "no container edits");
        json_auto_t *env = NULL;
        json_auto_t *mounts = NULL;
        int r = 0;
        if (e->n_envs && (r = env_json(e, &env, err)) < 0)
                return r;
        if (e->n_mounts && (r = mounts_json(e, &mounts, err)) < 0)
                return r;
        json_auto_t *spec = json_object();
        json_t *devices = json_array();
        json_t *device = json_object();
        json_t *edits = json_object();
        if (!spec || !devices || !device || !edits) {
                json_decref(devices);
                json_decref(device);
                json_decref(edits);
                return gs_error_set(err, -ENOMEM, "out of memory");
        }
        if (env)
                set(edits, "env", TAKE_PTR(env), &r, err);
        if (mounts)
                set(edits, "mounts", TAKE_PTR(mounts), &r, err);
        set(device, "name", json_string(device_name), &r, err);
        set(device, "containerEdits", edits, &r, err);
        append(devices, device, &r, err);
        set(spec, "cdiVersion", json_string(cdi_version_of(device_name)), &r, err);
        set(spec, "kind", json_string(NODE_CDI_KIND), &r, err);
        set(spec, "devices", devices, &r, err);
        if (r < 0)
                return r;
        /* Sorted keys and the edits' order: the same share gives the same
         * bytes, whatever jansson's hashing. */
        char *text = json_dumps(spec, JSON_INDENT(2) | JSON_SORT_KEYS);
        if (!text)
                return gs_error_set(err, -ENOMEM, "out of memory");
        size_t len = strlen(text);
        char *out = realloc(text, len + 2);
        if (!out) {
                free(text);
                return gs_error_set(err, -ENOMEM, "out of memory");
        }
        out[len] = '\n';
        out[len + 1] = '\0';
        *ret = out;
        return 0;
}

static int spec_path(const char *cdi_dir, const char *device_name, char *buf, size_t size,
                     struct gs_error **err)
{
        if (!cdi_dir || !cdi_dir[0])
                return gs_error_set(err, -EINVAL, "no CDI directory");
        int len = snprintf(buf, size, "%s/" NODE_CDI_FILE_PREFIX "%s" NODE_CDI_FILE_SUFFIX, cdi_dir,
                           device_name);
        /* Room for gs_file_replace's temp name too. */
        if (len < 0 || (size_t)len + sizeof(TMP_SUFFIX) > size)
                return gs_error_set(err, -ENAMETOOLONG, "CDI spec path %s/%s... too long", cdi_dir,
                                    NODE_CDI_FILE_PREFIX);
        return 0;
}

/* The runtime (root) reads the directory; one we create is 0755 whatever
 * the umask, as the runtimes' own is. */
static int ensure_dir(const char *dir, struct gs_error **err)
{
        if (mkdir(dir, 0755) == 0) {
                if (chmod(dir, 0755) < 0)
                        return gs_error_set(err, -errno, "cannot chmod CDI directory %s: %s", dir,
                                            strerror(errno));
        } else if (errno != EEXIST) {
                return gs_error_set(err, -errno, "cannot create CDI directory %s: %s", dir,
                                    strerror(errno));
        }
        struct stat st;
        if (stat(dir, &st) < 0)
                return gs_error_set(err, -errno, "CDI directory %s: %s", dir, strerror(errno));
        if (!S_ISDIR(st.st_mode))
                return gs_error_set(err, -ENOTDIR, "CDI directory %s is not a directory", dir);
        return 0;
}

int node_cdi_write_locked(const struct node *n, const char *cdi_dir, const char *device_name,
                          const struct node_edits *edits, char *ret_qualified_name, size_t size,
                          struct gs_error **err)
{
        /* The lock is what matters here (see node_cdi.h): the node itself
         * is not read. */
        (void)n;
        int r = node_cdi_name_check(device_name, err);
        if (r < 0)
                return r;
        char qualified[NODE_CDI_QUALIFIED_MAX];
        snprintf(qualified, sizeof(qualified), "%s=%s", NODE_CDI_KIND, device_name);
        if (ret_qualified_name && strlen(qualified) >= size)
                return gs_error_set(err, -ENAMETOOLONG,
                                    "CDI device %s: %zu bytes for its qualified name, %zu needed",
                                    device_name, size, strlen(qualified) + 1);
        char path[PATH_MAX];
        if ((r = spec_path(cdi_dir, device_name, path, sizeof(path), err)) < 0)
                return r;
        _cleanup_free_ char *text = NULL;
        if ((r = spec_text(device_name, edits, &text, err)) < 0)
                return gs_error_wrap(err, "CDI spec for %s", qualified), r;
        if ((r = ensure_dir(cdi_dir, err)) < 0)
                return r;
        r = gs_file_replace(path, text, strlen(text), NODE_CDI_SPEC_MODE, err);
        if (r < 0)
                return r;
        if (r > 0)
                gs_log_warn("%s written, but its directory could not be synced (%s)", path,
                            strerror(r));
        if (ret_qualified_name)
                snprintf(ret_qualified_name, size, "%s", qualified);
        return 0;
}

int node_cdi_remove(const char *cdi_dir, const char *device_name)
{
        char path[PATH_MAX], tmp[PATH_MAX + sizeof(TMP_SUFFIX)];
        int r;
        if ((r = node_cdi_name_check(device_name, NULL)) < 0 ||
            (r = spec_path(cdi_dir, device_name, path, sizeof(path), NULL)) < 0)
                return r;
        snprintf(tmp, sizeof(tmp), "%s" TMP_SUFFIX, path);
        /* The temp file first: once the spec is gone, nothing lists it. */
        if (unlink(tmp) < 0 && errno != ENOENT)
                gs_log_warn("cannot remove %s: %m", tmp);
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

/* The device name of a directory entry that is one of our spec files (or
 * the temp file of one), into buf; false for anything else. */
static bool entry_name(const char *file, bool *tmp, char *buf, size_t size)
{
        size_t len = strlen(file), pre = strlen(NODE_CDI_FILE_PREFIX);
        size_t suf = strlen(NODE_CDI_FILE_SUFFIX), tsuf = strlen(TMP_SUFFIX);
        if (strncmp(file, NODE_CDI_FILE_PREFIX, pre) != 0)
                return false;
        *tmp = len > tsuf && strcmp(file + len - tsuf, TMP_SUFFIX) == 0;
        if (*tmp)
                len -= tsuf;
        if (len <= pre + suf || strncmp(file + len - suf, NODE_CDI_FILE_SUFFIX, suf) != 0)
                return false;
        size_t name_len = len - pre - suf;
        if (name_len >= size)
                return false;
        memcpy(buf, file + pre, name_len);
        buf[name_len] = '\0';
        return node_cdi_name_check(buf, NULL) == 0;
}

static void free_entries(struct dirent **list, int n)
{
        for (int i = 0; i < n; i++)
                free(list[i]);
        free(list);
}

/* Byte order, whatever the locale: a temp file sorts after its spec. */
static int by_name(const struct dirent **a, const struct dirent **b)
{
        return strcmp((*a)->d_name, (*b)->d_name);
}

static int has_prefix(const struct dirent *e)
{
        return strncmp(e->d_name, NODE_CDI_FILE_PREFIX, strlen(NODE_CDI_FILE_PREFIX)) == 0;
}

int node_cdi_list(const char *cdi_dir, node_cdi_list_fn fn, void *ctx, struct gs_error **err)
{
        struct dirent **list = NULL;
        int n = scandir(cdi_dir, &list, has_prefix, by_name);
        if (n < 0) {
                if (errno == ENOENT)
                        return 0;
                return gs_error_set(err, -errno, "cannot read CDI directory %s: %s", cdi_dir,
                                    strerror(errno));
        }
        _cleanup_close_ int dfd = open(cdi_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                int e = errno;
                free_entries(list, n);
                return gs_error_set(err, -e, "cannot open CDI directory %s: %s", cdi_dir,
                                    strerror(e));
        }
        int count = 0, r = 0;
        for (int i = 0; i < n && r == 0; i++) {
                char name[NODE_CDI_NAME_MAX + 1];
                bool tmp;
                if (!entry_name(list[i]->d_name, &tmp, name, sizeof(name)))
                        continue;
                struct stat st;
                if (fstatat(dfd, list[i]->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    S_ISDIR(st.st_mode))
                        continue;
                /* A temp file whose spec exists: that name was given. */
                char spec[NAME_MAX + 1];
                snprintf(spec, sizeof(spec), NODE_CDI_FILE_PREFIX "%s" NODE_CDI_FILE_SUFFIX, name);
                if (tmp && fstatat(dfd, spec, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    !S_ISDIR(st.st_mode))
                        continue;
                r = fn(ctx, name);
                count++;
        }
        free_entries(list, n);
        return r < 0 ? r : count;
}
