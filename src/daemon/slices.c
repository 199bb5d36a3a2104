/* gpusliced's requests: create, list, release, status, plan; the files of
 * each slice (config, slice directory); following each slice's process. */
#include "daemon.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arbiter_server.h"
#include "log.h"
#include "nvml.h"
#include "proc.h"
#include "quantity.h"
#include "slice_conf_io.h"

static int pidfd_open_compat(pid_t pid)
{
        return (int)syscall(SYS_pidfd_open, pid, 0);
}

static void conf_path(const struct daemon *d, const char *id, char *buf, size_t size)
{
        snprintf(buf, size, "%s/conf/%s.conf", d->state_dir, id);
}

static void slice_dir_path(const struct daemon *d, const char *id, char *buf, size_t size)
{
        snprintf(buf, size, "%s/slices/%s", d->state_dir, id);
}

/* Kubernetes slices' files are the device plugin's (dp_store.c):
 * <kube state>/slices/<id>/ and its slice.conf. */
void slices_conf_path(const struct daemon *d, const struct gs_slice *s, char *buf, size_t size)
{
        if (s->kind == GS_SLICE_KUBE)
                snprintf(buf, size, "%s/slices/%s/slice.conf", d->kube_state_dir, s->id);
        else
                conf_path(d, s->id, buf, size);
}

void slices_dir_path(const struct daemon *d, const struct gs_slice *s, char *buf, size_t size)
{
        if (s->kind == GS_SLICE_KUBE)
                snprintf(buf, size, "%s/slices/%s", d->kube_state_dir, s->id);
        else
                slice_dir_path(d, s->id, buf, size);
}

/* Remove a slice's config and its directory (one level of files, which the
 * shim created). Best effort; logged. */
static void remove_slice_files(const struct daemon *d, const char *id)
{
        char path[DAEMON_PATH_MAX];
        conf_path(d, id, path, sizeof(path));
        if (unlink(path) < 0 && errno != ENOENT)
                dlog_warn("cannot remove %s: %m", path);
        slice_dir_path(d, id, path, sizeof(path));
        DIR *dir = opendir(path);
        if (dir) {
                struct dirent *e;
                while ((e = readdir(dir)))
                        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                                unlinkat(dirfd(dir), e->d_name, 0);
                closedir(dir);
        }
        if (rmdir(path) < 0 && errno != ENOENT)
                dlog_warn("cannot remove %s: %m", path);
}

static int write_conf(const struct daemon *d, const struct gs_slice *s, struct gs_error **err)
{
        char dir[DAEMON_PATH_MAX], path[DAEMON_PATH_MAX], tmp[DAEMON_PATH_MAX + 8];
        slice_dir_path(d, s->id, dir, sizeof(dir));
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return gs_error_set(err, -errno, "cannot create slice directory %s: %s", dir,
                                    strerror(errno));
        if (geteuid() == 0 && s->uid != 0 && chown(dir, s->uid, (gid_t)-1) < 0)
                return gs_error_set(err, -errno, "cannot hand %s to uid %u: %s", dir,
                                    (unsigned)s->uid, strerror(errno));
        if (gs_slice_is_whole(s))
                return 0; /* whole GPUs run without shim limits: no config */

        struct gs_slice_conf conf = { .version = GS_SLICE_CONF_VERSION,
                                      .memory_limit = s->memory_cap,
                                      .compute_milli = s->milli,
                                      .policy = s->policy };
        snprintf(conf.slice, sizeof(conf.slice), "%s", s->id);
        snprintf(conf.gpu_uuid, sizeof(conf.gpu_uuid), "%s", s->gpus[0].uuid);
        snprintf(conf.slice_dir, sizeof(conf.slice_dir), "%s", dir);
        snprintf(conf.daemon_socket, sizeof(conf.daemon_socket), "%s", d->socket_path);
        for (unsigned i = 0; i < d->inv.n_gpus; i++)
                if (strcmp(d->inv.gpus[i].uuid, s->gpus[0].uuid) == 0)
                        conf.context_overhead = d->inv.gpus[i].context_overhead;
        char text[GS_SLICE_CONF_MAX_BYTES + 1];
        int n = gs_slice_conf_format(&conf, text, sizeof(text), err);
        if (n < 0)
                return gs_error_wrap(err, "slice %s config", s->id), n;

        conf_path(d, s->id, path, sizeof(path));
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0444);
        if (fd < 0)
                return gs_error_set(err, -errno, "cannot create %s: %s", tmp, strerror(errno));
        if (write(fd, text, (size_t)n) != n || fchmod(fd, 0444) < 0 || fsync(fd) < 0 ||
            rename(tmp, path) < 0) {
                int e = errno ? errno : EIO;
                unlink(tmp);
                return gs_error_set(err, -e, "cannot write %s: %s", path, strerror(e));
        }
        return 0;
}

static int save(struct daemon *d, struct gs_error **err)
{
        int r = gs_ledger_save(&d->ledger, d->ledger_path, err);
        if (r > 0) /* saved; only the directory sync failed */
                dlog_warn("state saved to %s, but its directory could not be synced (%s): "
                          "the change may not survive a power loss",
                          d->ledger_path, strerror(r));
        return r < 0 ? r : 0;
}

/* ---- following processes ---- */

static struct follow *follow_find(struct daemon *d, const char *id, size_t *ret_pos)
{
        for (size_t i = 0; i < d->n_follows; i++)
                if (strcmp(d->follows[i]->id, id) == 0) {
                        if (ret_pos)
                                *ret_pos = i;
                        return d->follows[i];
                }
        return NULL;
}

static int follow_add(struct daemon *d, const char *id, int pidfd)
{
        if (d->n_follows >= GS_LEDGER_MAX_SLICES)
                return -ENOSPC;
        struct follow *f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->w = (struct watch){ .kind = WATCH_PIDFD, .fd = pidfd };
        snprintf(f->id, sizeof(f->id), "%s", id);
        int r = server_watch(d, &f->w, EPOLLIN);
        if (r < 0) {
                free(f);
                return r;
        }
        d->follows[d->n_follows++] = f;
        return 0;
}

static void follow_drop(struct daemon *d, const char *id)
{
        size_t pos;
        struct follow *f = follow_find(d, id, &pos);
        if (!f)
                return;
        epoll_ctl(d->epfd, EPOLL_CTL_DEL, f->w.fd, NULL);
        close(f->w.fd);
        free(f);
        d->follows[pos] = d->follows[--d->n_follows];
}

void slices_unfollow_all(struct daemon *d)
{
        while (d->n_follows)
                follow_drop(d, d->follows[0]->id);
}

/* Open a pidfd for the slice's process if it is still the same process.
 * Returns the fd, or -ESRCH when it is gone or replaced. */
static int open_owner(const struct gs_slice *s)
{
        int fd = pidfd_open_compat(s->pid);
        if (fd < 0)
                return -ESRCH;
        uint64_t start;
        /* Checked after opening: the pidfd now pins this very process. */
        if (proc_start_time(s->pid, &start) < 0 || start != s->start_time) {
                close(fd);
                return -ESRCH;
        }
        return fd;
}

static void free_slice(struct daemon *d, const char *id, const char *why)
{
        char idc[GS_SLICE_ID_MAX + 1];
        snprintf(idc, sizeof(idc), "%s", id);
        struct gs_slice *s = gs_ledger_find(&d->ledger, idc);
        if (s)
                dlog_info("slice %s freed (%" PRIu32 "m on %s, pid %d): %s", idc, s->milli,
                          s->gpus[0].uuid, (int)s->pid, why);
        arbsrv_slice_removed(d, idc); /* a lease it held ends now */
        follow_drop(d, idc);
        gs_ledger_remove(&d->ledger, idc);
        remove_slice_files(d, idc);
}

void slices_process_exited(struct daemon *d, struct follow *f)
{
        char id[GS_SLICE_ID_MAX + 1];
        snprintf(id, sizeof(id), "%s", f->id);
        free_slice(d, id, "its process exited");
        struct gs_error *err = NULL;
        if (save(d, &err) < 0)
                dlog_error("%s", gs_error_msg(err));
        gs_error_free(err);
}

int slices_reconcile(struct daemon *d)
{
        size_t kept = 0, freed = 0;
        for (size_t i = 0; i < d->ledger.n_slices;) {
                const struct gs_slice *s = &d->ledger.slices[i];
                if (s->kind == GS_SLICE_KUBE) {
                        /* No local process: the kubelet plugin frees it once
                         * PodResources shows no pod holds it. */
                        if (!d->kube.enabled)
                                dlog_warn("slice %s belongs to Kubernetes; it stays until "
                                          "gpusliced --kubelet frees it", s->id);
                        kept++;
                        i++;
                        continue;
                }
                int fd = open_owner(s);
                if (fd >= 0 && follow_add(d, s->id, fd) == 0) {
                        dlog_info("slice %s: process %d still runs; following it", s->id,
                                  (int)s->pid);
                        kept++;
                        i++;
                        continue;
                }
                if (fd >= 0)
                        close(fd);
                free_slice(d, s->id, "its process is gone");
                freed++;
        }
        dlog_info("ledger reconciled: %zu slice%s kept, %zu freed", kept, kept == 1 ? "" : "s",
                  freed);
        struct gs_error *err = NULL;
        int r = save(d, &err);
        if (r < 0)
                dlog_error("%s", gs_error_msg(err));
        gs_error_free(err);
        return r;
}

/* ---- requests ---- */

/* Strict decimal: digits only (no sign, space or base prefix), len of them,
 * value <= max. Returns 0 or -EINVAL. */
static int parse_u64(const char *v, size_t len, uint64_t max, uint64_t *ret)
{
        if (len == 0 || len > 20)
                return -EINVAL;
        uint64_t x = 0;
        for (size_t i = 0; i < len; i++) {
                if (v[i] < '0' || v[i] > '9')
                        return -EINVAL;
                unsigned digit = (unsigned)(v[i] - '0');
                if (x > (UINT64_MAX - digit) / 10)
                        return -EINVAL;
                x = x * 10 + digit;
        }
        if (x > max)
                return -EINVAL;
        *ret = x;
        return 0;
}

static int get_u64(const struct gs_proto_msg *m, const char *key, uint64_t max, bool required,
                   uint64_t *ret, struct gs_error **err)
{
        const char *v = gs_proto_msg_get(m, key);
        if (!v) {
                if (required)
                        return gs_error_set(err, -EINVAL, "request lacks '%s'", key);
                return 0;
        }
        if (parse_u64(v, strlen(v), max, ret) < 0)
                return gs_error_set(err, -EINVAL, "'%s' = '%.40s' is not a number up to %" PRIu64,
                                    key, v, max);
        return 0;
}

/* A memory request: at most the largest GPU's memory (and so far from
 * UINT64_MAX that rounding up cannot wrap), rounded up to the granularity. */
static int check_memory(const struct daemon *d, uint64_t *memory, struct gs_error **err)
{
        uint64_t largest = 0;
        for (unsigned i = 0; i < d->inv.n_gpus; i++)
                if (d->inv.gpus[i].memory_total > largest)
                        largest = d->inv.gpus[i].memory_total;
        if (*memory > UINT64_MAX - (GS_MEM_GRANULARITY - 1) || *memory > largest) {
                char mem[32];
                return gs_error_set(err, -EINVAL,
                                    "memory %" PRIu64 " bytes is more than the largest GPU "
                                    "of this node has (%s)",
                                    *memory, gs_bytes_human(largest, mem, sizeof(mem)));
        }
        if (*memory % GS_MEM_GRANULARITY)
                *memory = GS_ALIGN_UP(*memory, GS_MEM_GRANULARITY);
        return 0;
}

static void add_gpu_records(const struct daemon *d, struct gs_proto_builder *b)
{
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        gs_placement_usage(&d->inv, &d->ledger, usage);
        for (unsigned i = 0; i < d->inv.n_gpus; i++) {
                const struct gs_gpu *g = &d->inv.gpus[i];
                gs_proto_builder_add(b, "gpu", "%u", g->index);
                gs_proto_builder_add(b, "gpu_uuid", "%s", g->uuid);
                gs_proto_builder_add(b, "gpu_name", "%s", g->name);
                gs_proto_builder_add(b, "gpu_memory", "%" PRIu64, g->memory_total);
                gs_proto_builder_add(b, "gpu_healthy", "%d", g->healthy ? 1 : 0);
                gs_proto_builder_add(b, "gpu_context_overhead", "%" PRIu64, g->context_overhead);
                gs_proto_builder_add(b, "gpu_free_milli", "%" PRIu32, usage[i].free_milli);
                gs_proto_builder_add(b, "gpu_free_memory", "%" PRIu64, usage[i].free_memory);
                gs_proto_builder_add(b, "gpu_slices", "%u", usage[i].n_slices);
        }
}

static void add_slice_record(const struct daemon *d, const struct gs_slice *s,
                             struct gs_proto_builder *b)
{
        char path[DAEMON_PATH_MAX];
        gs_proto_builder_add(b, "slice", "%s", s->id);
        gs_proto_builder_add(b, "slice_name", "%s", s->name);
        gs_proto_builder_add(b, "slice_milli", "%" PRIu32, s->milli);
        gs_proto_builder_add(b, "slice_memory", "%" PRIu64, s->memory_cap);
        gs_proto_builder_add(b, "slice_policy", "%s", s->policy == GS_POLICY_CAP ? "cap" : "share");
        gs_proto_builder_add(b, "slice_pid", "%d", (int)s->pid);
        gs_proto_builder_add(b, "slice_uid", "%u", (unsigned)s->uid);
        gs_proto_builder_add(b, "slice_created", "%" PRId64, s->created);
        gs_proto_builder_add(b, "slice_kind", "%s", s->kind == GS_SLICE_KUBE ? "kubernetes" : "local");
        for (unsigned g = 0; g < s->n_gpus; g++) {
                gs_proto_builder_add(b, "slice_gpu", "%u,%s", s->gpus[g].index, s->gpus[g].uuid);
                uint64_t used;
                if (d->nvml && s->kind == GS_SLICE_LOCAL &&
                    nvml_process_memory(d->nvml, s->gpus[g].index, s->pid, &used) == 0)
                        gs_proto_builder_add(b, "slice_used", "%" PRIu64, used);
        }
        if (!gs_slice_is_whole(s)) {
                slices_conf_path(d, s, path, sizeof(path));
                gs_proto_builder_add(b, "slice_config", "%s", path);
        }
        slices_dir_path(d, s, path, sizeof(path));
        gs_proto_builder_add(b, "slice_dir", "%s", path);
        arbsrv_add_record(d, s->id, b);
}

/* Check that the peer may make a slice for pid, and pin the process. */
static int owner_check(const struct conn *c, pid_t pid, struct gs_slice *s, int *ret_pidfd,
                       struct gs_error **err)
{
        uid_t uid;
        int r = proc_uid(pid, &uid);
        if (r < 0)
                return gs_error_set(err, -ESRCH, "process %d does not exist", (int)pid);
        if (c->uid != 0 && c->uid != uid)
                return gs_error_set(err, -EPERM,
                                    "process %d belongs to uid %u; uid %u may only make slices for "
                                    "its own processes",
                                    (int)pid, (unsigned)uid, (unsigned)c->uid);
        s->pid = pid;
        s->uid = uid;
        if (proc_start_time(pid, &s->start_time) < 0)
                return gs_error_set(err, -ESRCH, "process %d does not exist", (int)pid);
        int fd = open_owner(s);
        if (fd < 0)
                return gs_error_set(err, -ESRCH, "process %d exited", (int)pid);
        *ret_pidfd = fd;
        return 0;
}

static int parse_request(const struct daemon *d, const struct gs_proto_msg *m,
                         struct gs_placement_request *req, struct gs_slice *s, pid_t *ret_pid,
                         struct gs_error **err)
{
        uint64_t milli = 0, memory = 0, pid = 0;
        int r;
        if ((r = get_u64(m, "gpu_milli", 1000ull * GS_SLICE_MAX_GPUS, true, &milli, err)) < 0 ||
            (r = get_u64(m, "memory", UINT64_MAX, false, &memory, err)) < 0 ||
            (r = get_u64(m, "pid", INT32_MAX, true, &pid, err)) < 0)
                return r;
        const char *policy = gs_proto_msg_get(m, "policy");
        if (!policy)
                s->policy = d->compute_policy; /* gpusliced --compute-policy */
        else if (strcmp(policy, "share") == 0)
                s->policy = GS_POLICY_SHARE;
        else if (strcmp(policy, "cap") == 0)
                s->policy = GS_POLICY_CAP;
        else
                return gs_error_set(err, -EINVAL, "policy '%.40s' is unknown (accepted: share, cap)",
                                    policy);
        const char *name = gs_proto_msg_get(m, "name");
        if (name && snprintf(s->name, sizeof(s->name), "%s", name) >= (int)sizeof(s->name))
                return gs_error_set(err, -EINVAL, "name '%.70s' is longer than %d", name,
                                    GS_SLICE_NAME_MAX);
        if (pid == 0)
                return gs_error_set(err, -EINVAL, "pid 0 is not a process");
        if (memory && milli >= 1000)
                return gs_error_set(err, -EINVAL, "whole-GPU requests take no memory cap");
        if ((r = check_memory(d, &memory, err)) < 0)
                return r;
        *req = (struct gs_placement_request){ .milli = (uint32_t)milli, .memory = memory };
        *ret_pid = (pid_t)pid;
        return 0;
}

static int handle_create(struct daemon *d, const struct conn *c, const struct gs_proto_msg *m,
                         struct gs_proto_builder *reply, struct gs_error **err)
{
        struct gs_slice s = { 0 };
        struct gs_placement_request req = { 0 };
        pid_t pid = 0;
        int r = parse_request(d, m, &req, &s, &pid, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < d->ledger.n_slices; i++)
                if (d->ledger.slices[i].pid == pid)
                        return gs_error_set(err, -EEXIST, "process %d already has slice %s",
                                            (int)pid, d->ledger.slices[i].id);
        if (d->ledger.n_slices >= GS_LEDGER_MAX_SLICES)
                return gs_error_set(err, -ENOSPC, "the node holds its limit of %d slices",
                                    GS_LEDGER_MAX_SLICES);
        _cleanup_close_ int pidfd = -1;
        if ((r = owner_check(c, pid, &s, &pidfd, err)) < 0)
                return r;
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        gs_placement_usage(&d->inv, &d->ledger, usage);
        struct gs_placement p;
        if ((r = gs_place(&d->inv, usage, d->policy, &req, &p, err)) < 0)
                return r;
        s.milli = req.milli;
        s.memory_cap = p.memory_cap;
        s.created = (int64_t)time(NULL);
        s.n_gpus = p.n_gpus;
        for (unsigned i = 0; i < p.n_gpus; i++) {
                s.gpus[i].index = d->inv.gpus[p.gpus[i]].index;
                snprintf(s.gpus[i].uuid, sizeof(s.gpus[i].uuid), "%s", d->inv.gpus[p.gpus[i]].uuid);
        }
        gs_ledger_assign_id(&d->ledger, &s);
        if ((r = gs_ledger_add(&d->ledger, &s, err)) < 0)
                return r;
        if ((r = write_conf(d, &s, err)) < 0 || (r = save(d, err)) < 0 ||
            (r = follow_add(d, s.id, pidfd)) < 0) {
                if (r < 0 && err && !*err)
                        gs_error_set(err, r, "cannot follow process %d: %s", (int)pid, strerror(-r));
                gs_ledger_remove(&d->ledger, s.id);
                remove_slice_files(d, s.id);
                struct gs_error *e2 = NULL;
                if (save(d, &e2) < 0)
                        dlog_error("%s", gs_error_msg(e2));
                gs_error_free(e2);
                return r;
        }
        TAKE_FD(pidfd);
        arbsrv_slice_added(d, &s);
        char mem[32];
        dlog_info("slice %s created: %" PRIu32 "m, memory %s, on GPU %u (%s) for pid %d uid %u%s%s",
                  s.id, s.milli, s.memory_cap ? gs_bytes_human(s.memory_cap, mem, sizeof(mem)) : "whole",
                  s.gpus[0].index, s.gpus[0].uuid, (int)s.pid, (unsigned)s.uid,
                  s.name[0] ? " name " : "", s.name);
        gs_proto_builder_add(reply, "id", "%s", s.id);
        add_slice_record(d, &s, reply);
        return 0;
}

static int handle_release(struct daemon *d, const struct conn *c, const struct gs_proto_msg *m,
                          struct gs_error **err)
{
        const char *id = gs_proto_msg_get(m, "id");
        if (!id)
                return gs_error_set(err, -EINVAL, "request lacks 'id'");
        struct gs_slice *s = gs_ledger_find(&d->ledger, id);
        if (!s)
                return gs_error_set(err, -ENOENT, "no slice '%.64s'", id);
        if (s->kind == GS_SLICE_KUBE)
                return gs_error_set(err, -EPERM,
                                    "slice %s belongs to a Kubernetes pod; it is freed when the "
                                    "kubelet no longer lists a pod holding it", s->id);
        if (c->uid != 0 && c->uid != s->uid)
                return gs_error_set(err, -EPERM, "slice %s belongs to uid %u", s->id,
                                    (unsigned)s->uid);
        free_slice(d, id, "released by its owner");
        return save(d, err);
}

static int handle_plan(struct daemon *d, const struct gs_proto_msg *m,
                       struct gs_proto_builder *reply, struct gs_error **err)
{
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        gs_placement_usage(&d->inv, &d->ledger, usage);
        unsigned n = 0;
        for (size_t i = 0; i < m->n_items; i++) {
                if (strcmp(m->items[i].key, "want"))
                        continue;
                n++;
                const char *v = m->items[i].value;
                const char *comma = strchr(v, ',');
                uint64_t milli = 0, memory = 0;
                if (!comma ||
                    parse_u64(v, (size_t)(comma - v), 1000ull * GS_SLICE_MAX_GPUS, &milli) < 0 ||
                    parse_u64(comma + 1, strlen(comma + 1), UINT64_MAX, &memory) < 0 || milli == 0)
                        return gs_error_set(err, -EINVAL,
                                            "want #%u '%.40s' is not <milli>,<memory> (milli "
                                            "1..%u, both plain decimal numbers)",
                                            n, v, 1000u * GS_SLICE_MAX_GPUS);
                if (memory && milli >= 1000)
                        return gs_error_set(err, -EINVAL,
                                            "want #%u: whole-GPU requests take no memory cap", n);
                int r = check_memory(d, &memory, err);
                if (r < 0) {
                        gs_error_wrap(err, "want #%u", n);
                        return r;
                }
                struct gs_placement_request req = { .milli = (uint32_t)milli, .memory = memory };
                struct gs_placement p;
                r = gs_place(&d->inv, usage, d->policy, &req, &p, err);
                if (r < 0) {
                        gs_error_wrap(err, "slice #%u (%" PRIu64 "m)", n, milli);
                        return r;
                }
                gs_placement_commit(usage, &req, &p);
                gs_proto_builder_add(reply, "place", "%u", d->inv.gpus[p.gpus[0]].index);
        }
        return 0;
}

int slices_handle(struct daemon *d, const struct conn *c, const struct gs_proto_msg *m,
                  struct gs_proto_builder *reply, struct gs_error **err)
{
        switch (m->type) {
        case GS_MSG_CREATE:
                return handle_create(d, c, m, reply, err);
        case GS_MSG_RELEASE:
                return handle_release(d, c, m, err);
        case GS_MSG_PLAN:
                return handle_plan(d, m, reply, err);
        case GS_MSG_LIST:
        case GS_MSG_STATUS:
                if (m->type == GS_MSG_STATUS) {
                        gs_proto_builder_add(reply, "version", "%s", "0.1.0");
                        gs_proto_builder_add(reply, "pid", "%d", (int)getpid());
                        gs_proto_builder_add(reply, "policy", "%s",
                                             gs_placement_policy_name(d->policy));
                        gs_proto_builder_add(reply, "sim", "%d", d->sim ? 1 : 0);
                        gs_proto_builder_add(reply, "state_dir", "%s", d->state_dir);
                        gs_proto_builder_add(reply, "socket", "%s", d->socket_path);
                        gs_proto_builder_add(reply, "slices", "%zu", d->ledger.n_slices);
                }
                add_gpu_records(d, reply);
                if (m->type == GS_MSG_LIST)
                        for (size_t i = 0; i < d->ledger.n_slices; i++)
                                add_slice_record(d, &d->ledger.slices[i], reply);
                return 0;
        default:
                return gs_error_set(err, -EBADMSG, "unknown request type %u", m->type);
        }
}
