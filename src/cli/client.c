/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI's client of gpusliced's local API. See client.h. */
#include "client.h"

#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "atomic_file.h"
#include "macro.h"
#include "number.h"

#define CLI_REPLY_TIMEOUT_S 30
#define CLI_START_WAIT_MS 15000

/* Where the CLI looks for gpusliced (docs/daemon.md, "Which daemon"). */
struct target {
        char sock[GS_PATH_MAX];
        char state[GS_PATH_MAX];
        bool system;    /* the machine's daemon: nothing chose another */
        bool may_start; /* a daemon may be started here when none answers */
};

/* The target: $GPUSLICE_SOCKET / $GPUSLICE_STATE_DIR when set; else, with
 * sim (or private_sim), the user's private simulated daemon; else the
 * machine's. A daemon is started only in a private place (an explicit state
 * directory, or --sim), or by root in the machine's own. */
static int target_get(const struct cli_conn_opts *opts, bool private_sim, struct target *t)
{
        const char *sock = getenv("GPUSLICE_SOCKET"), *state = getenv("GPUSLICE_STATE_DIR");
        bool has_sock = sock && *sock, has_state = state && *state;
        bool sim = opts->sim || private_sim;
        int n;

        *t = (struct target){ .system = !has_sock && !has_state && !sim };
        if (has_state)
                n = snprintf(t->state, sizeof(t->state), "%s", state);
        else if (has_sock || sim)
                n = gs_local_sim_dir((unsigned)geteuid(), getenv("XDG_RUNTIME_DIR"), t->state,
                                     sizeof(t->state)) < 0 ? -1 : 0;
        else
                n = snprintf(t->state, sizeof(t->state), "%s", GS_LOCAL_SYSTEM_DIR);
        if (n < 0 || (size_t)n >= sizeof(t->state))
                return -ENAMETOOLONG;
        if (has_sock)
                n = snprintf(t->sock, sizeof(t->sock), "%s", sock);
        else
                n = snprintf(t->sock, sizeof(t->sock), "%s/%s", t->state, GS_LOCAL_SOCKET_NAME);
        if (n < 0 || (size_t)n >= sizeof(t->sock))
                return -ENAMETOOLONG;
        t->may_start = has_state || opts->sim || (t->system && geteuid() == 0);
        return 0;
}

static int try_connect(const char *path, int *ret_fd)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        struct timeval tv = { .tv_sec = CLI_REPLY_TIMEOUT_S };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        *ret_fd = fd;
        return 0;
}

/* The gpusliced binary: $GPUSLICE_DAEMON, next to us, in the build tree
 * (src/cli -> src/daemon), else the name alone (PATH). */
static void find_daemon(char *buf, size_t size)
{
        const char *env = getenv("GPUSLICE_DAEMON");
        if (env && *env) {
                snprintf(buf, size, "%s", env);
                return;
        }
        char exe[GS_PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n > 0) {
                exe[n] = '\0';
                const char *dir = dirname(exe);
                const char *cands[] = { "gpusliced", "../daemon/gpusliced" };
                for (size_t i = 0; i < GS_ARRAY_SIZE(cands); i++) {
                        snprintf(buf, size, "%s/%s", dir, cands[i]);
                        if (access(buf, X_OK) == 0)
                                return;
                }
        }
        snprintf(buf, size, "gpusliced");
}

/* Start gpusliced detached (double fork, own session, log in the state
 * dir). Returns the daemon's pid or a negative errno. */
static pid_t start_daemon(const struct cli_conn_opts *opts, const char *sock, const char *state,
                          int lfd)
{
        char bin[GS_PATH_MAX];
        find_daemon(bin, sizeof(bin));
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid_t c = fork();
        if (c < 0)
                return -errno;
        if (c == 0) {
                close(p[0]);
                setsid();
                pid_t g = fork();
                if (g != 0) {
                        (void)!write(p[1], &g, sizeof(g));
                        _exit(0);
                }
                int nul = open("/dev/null", O_RDWR);
                if (nul >= 0) {
                        dup2(nul, 0);
                        dup2(nul, 1);
                }
                dup2(lfd, 2);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                char *argv[] = { bin,         (char *)"--socket", (char *)sock, (char *)"--state-dir",
                                 (char *)state, opts->sim ? (char *)"--sim" : NULL, NULL };
                execvp(bin, argv);
                dprintf(2, "gpuslice: cannot run %s: %m\n", bin);
                _exit(127);
        }
        close(p[1]);
        pid_t daemon = -1;
        if (read(p[0], &daemon, sizeof(daemon)) != sizeof(daemon))
                daemon = -EIO;
        close(p[0]);
        waitpid(c, NULL, 0);
        return daemon;
}

/* The lines of the daemon's log that say why it stopped. */
static void log_errors(const char *log, off_t from, char *buf, size_t size)
{
        buf[0] = '\0';
        int fd = gs_state_open(log, O_RDONLY, 0, "daemon log", NULL);
        FILE *f = fd < 0 ? NULL : fdopen(fd, "re");
        if (!f) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        fseeko(f, from, SEEK_SET);
        char line[1024];
        size_t off = 0;
        while (fgets(line, sizeof(line), f)) {
                const char *m = strstr(line, ": error: ");
                if (!m)
                        continue;
                line[strcspn(line, "\n")] = '\0';
                int n = snprintf(buf + off, size - off, "%s%s", off ? "; " : "", m + 9);
                if (n < 0 || (size_t)n >= size - off)
                        break;
                off += (size_t)n;
        }
        fclose(f);
}

/* Refuse a socket whose directory another local user controls (a shared
 * /tmp: someone may have made /tmp/gpuslice-<uid> first to answer in the
 * daemon's place). A missing directory is fine: nothing answers there. */
static int check_socket_dir(const char *sock, struct gs_error **err)
{
        char dir[GS_PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", sock);
        int r = gs_local_check_dir(dirname(dir), (unsigned)geteuid(), err);
        return r == -ENOENT ? 0 : r;
}

/* Whether the caller is in the group GS_LOCAL_GROUP but the socket sock
 * is not that group's: a daemon started before the group existed keeps its
 * socket root's until it starts again (it hands the socket over at start). */
static bool member_shut_out(const char *sock, char *ret_group, size_t size)
{
        struct group *g = getgrnam(GS_LOCAL_GROUP);
        gid_t groups[256];
        struct stat st;
        int n = getgroups((int)GS_ARRAY_SIZE(groups), groups);
        bool member = g && getegid() == g->gr_gid;

        for (int i = 0; g && i < n; i++)
                member = member || groups[i] == g->gr_gid;
        if (!member || stat(sock, &st) < 0 || st.st_gid == g->gr_gid)
                return false;
        struct group *o = getgrgid(st.st_gid);
        if (o)
                snprintf(ret_group, size, "%s", o->gr_name);
        else
                snprintf(ret_group, size, "%u", (unsigned)st.st_gid);
        return true;
}

/* Nothing answers at t: say what to do. */
static int refuse(const struct target *t, const struct cli_conn_opts *opts, int r,
                  struct gs_error **err)
{
        bool absent = r == -ENOENT || r == -ECONNREFUSED;
        char owner[64];

        if (t->system && (r == -EACCES || r == -EPERM) &&
            member_shut_out(t->sock, owner, sizeof(owner)))
                return gs_error_set(err, r,
                                    "gpusliced at %s does not let the group " GS_LOCAL_GROUP
                                    " in, though you are in it: its socket is the group %s's "
                                    "(the daemon started before the group existed); restart "
                                    "it (systemctl restart gpusliced)",
                                    t->sock, owner);
        if (t->system && (absent || r == -EACCES || r == -EPERM))
                return gs_error_set(err, r,
                                    "no gpuslice daemon at %s: start it (systemctl start gpusliced) "
                                    "or ask to be added to the group " GS_LOCAL_GROUP " (%s)%s",
                                    t->sock, strerror(-r),
                                    opts->start ? "; --sim runs a private simulated one" : "");
        if (absent && !opts->start)
                return gs_error_set(err, r,
                                    "no gpuslice daemon at %s: cannot reach gpusliced (%s); "
                                    "read-only commands never start one (`gpuslice run` and `up` "
                                    "do, there)", t->sock,
                                    strerror(-r));
        return gs_error_set(err, r, "cannot reach gpusliced at %s: %s", t->sock, strerror(-r));
}

/* The machine's daemon does not answer: a private simulated daemon the user
 * started (--sim) is used instead. It serves no real GPU, so it splits no
 * ledger; a private daemon on real GPUs is used only when named. */
static int connect_private_sim(const struct cli_conn_opts *opts, int *ret_fd)
{
        struct target p;
        struct cli_daemon_info info;
        int fd = -1;

        if (target_get(opts, true, &p) < 0 || check_socket_dir(p.sock, NULL) < 0 ||
            try_connect(p.sock, &fd) < 0)
                return -ENOENT;
        if (cli_status(fd, &info, NULL) < 0 || !info.sim) {
                close(fd);
                return -ENOENT;
        }
        *ret_fd = fd;
        return 0;
}

int cli_connect(const struct cli_conn_opts *opts, int *ret_fd, struct gs_error **err)
{
        char log[GS_PATH_MAX + 32];
        struct target t;
        if (target_get(opts, false, &t) < 0)
                return gs_error_set(err, -ENAMETOOLONG, "socket or state path too long");
        const char *sock = t.sock, *state = t.state;
        int r = check_socket_dir(sock, err);
        if (r < 0)
                return r;
        r = try_connect(sock, ret_fd);
        if (r == 0)
                return 0;
        if (t.system && connect_private_sim(opts, ret_fd) == 0)
                return 0;
        if (!opts->start || !t.may_start || (r != -ENOENT && r != -ECONNREFUSED))
                return refuse(&t, opts, r, err);
        /* The log lives beside the state; make its directory first, with
         * the mode the daemon gives it (0755 as root: every user's shim reads
         * its slice config below it; else 0700). */
        if (mkdir(state, geteuid() == 0 ? 0755 : 0700) < 0 && errno != EEXIST)
                return gs_error_set(err, -errno, "cannot create %s: %s", state, strerror(errno));
        if ((r = gs_local_check_dir(state, (unsigned)geteuid(), err)) < 0)
                return r == -ENOENT ? gs_error_set(err, r, "%s vanished", state) : r;
        snprintf(log, sizeof(log), "%s/gpusliced.log", state);
        /* A FIFO there would hang the daemon's start for good, a link
         * would have it write elsewhere: only a regular file. */
        _cleanup_close_ int lfd = gs_state_open(log, O_WRONLY | O_CREAT | O_APPEND, 0600,
                                                "the daemon's log", err);
        if (lfd < 0) {
                gs_error_wrap(err, "cannot start gpusliced");
                return lfd;
        }
        fprintf(stderr, "gpuslice: no daemon answers on %s; starting gpusliced%s (log: %s)\n", sock,
                opts->sim ? " --sim" : "", log);
        off_t log_start = 0;
        struct stat st;
        if (fstat(lfd, &st) == 0)
                log_start = st.st_size;
        pid_t daemon = start_daemon(opts, sock, state, lfd);
        if (daemon < 0)
                return gs_error_set(err, daemon, "cannot start gpusliced: %s", strerror(-daemon));
        for (int waited = 0; waited < CLI_START_WAIT_MS; waited += 20) {
                /* The directory may have appeared meanwhile: check it again. */
                if ((r = check_socket_dir(sock, err)) < 0)
                        return r;
                if (try_connect(sock, ret_fd) == 0)
                        return 0;
                if (kill(daemon, 0) < 0 && errno == ESRCH) {
                        /* It stopped; another CLI's daemon may have won the race. */
                        if (try_connect(sock, ret_fd) == 0)
                                return 0;
                        if (waited > 2000)
                                break;
                }
                struct timespec ts = { 0, 20 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        char why[2048];
        log_errors(log, log_start, why, sizeof(why));
        return gs_error_set(err, -ECONNREFUSED, "gpusliced did not start: %s",
                            why[0] ? why : "see its log");
}

static int read_full(int fd, uint8_t *buf, size_t len)
{
        size_t got = 0;
        while (got < len) {
                ssize_t n = recv(fd, buf + got, len - got, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return errno == EAGAIN ? -ETIMEDOUT : -errno;
                if (n == 0)
                        return -ECONNRESET;
                got += (size_t)n;
        }
        return 0;
}

int cli_call(int fd, struct gs_proto_builder *b, struct gs_proto_msg *ret, struct gs_error **err)
{
        uint8_t *frame = NULL;
        size_t len = 0;
        int r = gs_proto_builder_finish(b, &frame, &len);
        if (r < 0)
                return gs_error_set(err, r, "cannot build the request: %s", strerror(-r));
        size_t off = 0;
        while (off < len) {
                ssize_t n = send(fd, frame + off, len - off, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        gs_free(frame);
                        return gs_error_set(err, -errno, "cannot send to gpusliced: %s",
                                            strerror(errno));
                }
                off += (size_t)n;
        }
        gs_free(frame);
        uint8_t hdr[GS_PROTO_HEADER_SIZE];
        struct gs_proto_header h;
        if ((r = read_full(fd, hdr, sizeof(hdr))) < 0)
                return gs_error_set(err, r, "no reply from gpusliced: %s", strerror(-r));
        if ((r = gs_proto_header_decode(hdr, sizeof(hdr), GS_PROTO_MAX_REPLY, &h, err)) < 0)
                return r;
        _cleanup_free_ uint8_t *payload = malloc(h.length ? h.length : 1);
        if (!payload)
                return gs_error_set(err, -ENOMEM, "out of memory");
        if ((r = read_full(fd, payload, h.length)) < 0)
                return gs_error_set(err, r, "truncated reply from gpusliced: %s", strerror(-r));
        struct gs_proto_msg m;
        if ((r = gs_proto_msg_parse(h.type, (const char *)payload, h.length, &m, err)) < 0)
                return r;
        if (h.type == GS_MSG_ERROR) {
                const char *code = gs_proto_msg_get(&m, "code");
                const char *msg = gs_proto_msg_get(&m, "message");
                int64_t c = -EIO;
                if (!code || gs_i64_parse_str(code, -4095, -1, &c) < 0)
                        c = -EIO;
                gs_error_set(err, (int)c, "%s", msg ? msg : "gpusliced refused the request");
                gs_proto_msg_done(&m);
                return (int)c;
        }
        *ret = m;
        return 0;
}

int cli_status(int fd, struct cli_daemon_info *ret, struct gs_error **err)
{
        struct gs_proto_builder b;
        struct gs_proto_msg m;
        struct cli_daemon_info info = { 0 };

        gs_proto_builder_init(&b, GS_MSG_STATUS, GS_PROTO_MAX_REQUEST);
        int r = cli_call(fd, &b, &m, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < m.n_items; i++) {
                const char *k = m.items[i].key, *v = m.items[i].value;

                if (!strcmp(k, "sim"))
                        info.sim = !strcmp(v, "1");
                else if (!strcmp(k, "sim_libdir"))
                        snprintf(info.sim_libdir, sizeof(info.sim_libdir), "%s", v);
                else if (!strcmp(k, "sim_env") && info.n_sim_env < CLI_SIM_ENV_MAX &&
                         strlen(v) < sizeof(info.sim_env[0]) && strchr(v, '='))
                        snprintf(info.sim_env[info.n_sim_env++], sizeof(info.sim_env[0]), "%s", v);
        }
        gs_proto_msg_done(&m);
        *ret = info;
        return 0;
}

/* A number of a reply; a malformed one reads as 0 (the daemon writes
 * plain decimals, so 0 marks a reply nobody should trust). */
static uint64_t u64_of(const char *v)
{
        uint64_t x = 0;
        return gs_u64_parse_str(v, UINT64_MAX, &x) == 0 ? x : 0;
}

/* Fill a slice from the record starting at item i; returns the index
 * after the record. */
static size_t parse_slice(const struct gs_proto_msg *m, size_t i, struct cli_slice *s)
{
        memset(s, 0, sizeof(*s));
        snprintf(s->id, sizeof(s->id), "%s", m->items[i].value);
        for (i++; i < m->n_items; i++) {
                const char *k = m->items[i].key, *v = m->items[i].value;
                if (strncmp(k, "slice_", 6) != 0)
                        break;
                k += 6;
                if (!strcmp(k, "name"))
                        snprintf(s->name, sizeof(s->name), "%s", v);
                else if (!strcmp(k, "milli"))
                        s->milli = (uint32_t)u64_of(v);
                else if (!strcmp(k, "memory"))
                        s->memory = u64_of(v);
                else if (!strcmp(k, "policy"))
                        snprintf(s->policy, sizeof(s->policy), "%s", v);
                else if (!strcmp(k, "overuse"))
                        snprintf(s->overuse, sizeof(s->overuse), "%s", v);
                else if (!strcmp(k, "pid"))
                        s->pid = (int)u64_of(v);
                else if (!strcmp(k, "uid"))
                        s->uid = (unsigned)u64_of(v);
                else if (!strcmp(k, "created"))
                        s->created = (int64_t)u64_of(v);
                else if (!strcmp(k, "gpu_time")) {
                        s->has_gpu_time = true;
                        s->gpu_time = (uint32_t)GS_MIN(u64_of(v), 1000u);
                } else if (!strcmp(k, "gate_wait")) {
                        s->has_gate_wait = true;
                        s->gate_wait = (uint32_t)GS_MIN(u64_of(v), 1000u);
                } else if (!strcmp(k, "gate_wait_ns")) {
                        s->has_gate_wait_ns = true;
                        s->gate_wait_ns = u64_of(v);
                } else if (!strcmp(k, "used")) {
                        s->has_used = true;
                        s->used += u64_of(v);
                } else if (!strcmp(k, "config"))
                        snprintf(s->config, sizeof(s->config), "%s", v);
                else if (!strcmp(k, "kind"))
                        s->kube = strcmp(v, "kubernetes") == 0;
                else if (!strcmp(k, "dir"))
                        snprintf(s->slice_dir, sizeof(s->slice_dir), "%s", v);
                else if (!strcmp(k, "state")) {
                        s->stopping = strcmp(v, "stopping") == 0;
                        s->draining = strcmp(v, "draining") == 0;
                } else if (!strcmp(k, "memory_refusals")) {
                        s->has_refusals = true;
                        s->refusals = u64_of(v);
                }
                else if (!strcmp(k, "up_pid"))
                        s->up_pid = (int)GS_MIN(u64_of(v), (uint64_t)INT32_MAX);
                else if (!strcmp(k, "up_spec"))
                        snprintf(s->up_spec, sizeof(s->up_spec), "%s", v);
                else if (!strcmp(k, "gpu") && s->n_gpus < CLI_MAX_SLICE_GPUS) {
                        const char *comma = strchr(v, ',');
                        s->gpu_index[s->n_gpus] = (unsigned)u64_of(v);
                        snprintf(s->gpu_uuid[s->n_gpus], GS_GPU_UUID_MAX, "%s", comma ? comma + 1 : "");
                        s->n_gpus++;
                }
        }
        return i;
}

static size_t parse_gpu(const struct gs_proto_msg *m, size_t i, struct cli_gpu *g)
{
        memset(g, 0, sizeof(*g));
        g->index = (unsigned)u64_of(m->items[i].value);
        for (i++; i < m->n_items; i++) {
                const char *k = m->items[i].key, *v = m->items[i].value;
                if (strncmp(k, "gpu_", 4) != 0)
                        break;
                k += 4;
                if (!strcmp(k, "uuid"))
                        snprintf(g->uuid, sizeof(g->uuid), "%s", v);
                else if (!strcmp(k, "name"))
                        snprintf(g->name, sizeof(g->name), "%s", v);
                else if (!strcmp(k, "memory"))
                        g->memory = u64_of(v);
                else if (!strcmp(k, "healthy"))
                        g->healthy = u64_of(v) != 0;
                else if (!strcmp(k, "context_overhead"))
                        g->context_overhead = u64_of(v);
                else if (!strcmp(k, "free_milli"))
                        g->free_milli = (uint32_t)u64_of(v);
                else if (!strcmp(k, "free_memory"))
                        g->free_memory = u64_of(v);
                else if (!strcmp(k, "slices"))
                        g->n_slices = (unsigned)u64_of(v);
        }
        return i;
}

int cli_create_slice(int fd, uint32_t milli, uint64_t memory, const char *policy,
                     const char *overuse, const char *name, pid_t pid, const char *up_spec,
                     struct cli_slice *ret, struct gs_error **err)
{
        struct gs_proto_builder b;
        gs_proto_builder_init(&b, GS_MSG_CREATE, GS_PROTO_MAX_REQUEST);
        gs_proto_builder_add(&b, "gpu_milli", "%" PRIu32, milli);
        if (memory)
                gs_proto_builder_add(&b, "memory", "%" PRIu64, memory);
        if (policy)
                gs_proto_builder_add(&b, "policy", "%s", policy);
        if (overuse)
                gs_proto_builder_add(&b, "overuse", "%s", overuse);
        if (name)
                gs_proto_builder_add(&b, "name", "%s", name);
        if (up_spec)
                gs_proto_builder_add(&b, "up_spec", "%s", up_spec);
        gs_proto_builder_add(&b, "pid", "%d", (int)pid);
        struct gs_proto_msg m;
        int r = cli_call(fd, &b, &m, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < m.n_items; i++)
                if (!strcmp(m.items[i].key, "slice")) {
                        parse_slice(&m, i, ret);
                        gs_proto_msg_done(&m);
                        if (overuse && strcmp(ret->overuse, overuse) != 0) {
                                /* An older daemon ignored the key: the slice
                                 * would follow its policy, not the one asked. */
                                cli_release_slice(fd, ret->id, NULL, NULL);
                                return gs_error_set(err, -EPROTONOSUPPORT,
                                                    "gpusliced does not know per-slice over-use "
                                                    "policies (its slice %s has none); upgrade "
                                                    "gpusliced or leave the over-use policy out",
                                                    ret->id);
                        }
                        if (!up_spec)
                                ret->up_pid = 0;
                        return 0;
                }
        gs_proto_msg_done(&m);
        return gs_error_set(err, -EBADMSG, "gpusliced's reply names no slice");
}

int cli_release_slice(int fd, const char *id, bool *ret_stopped, struct gs_error **err)
{
        struct gs_proto_builder b;
        gs_proto_builder_init(&b, GS_MSG_RELEASE, GS_PROTO_MAX_REQUEST);
        gs_proto_builder_add(&b, "id", "%s", id);
        struct gs_proto_msg m;
        int r = cli_call(fd, &b, &m, err);
        if (r == 0) {
                const char *v = gs_proto_msg_get(&m, "stopped");
                if (ret_stopped)
                        *ret_stopped = v && !strcmp(v, "1");
                gs_proto_msg_done(&m);
        }
        return r;
}

int cli_stop_slice(int fd, const char *id, bool up, uint64_t grace_ms, int *ret_pid,
                   struct gs_error **err)
{
        struct gs_proto_builder b;
        gs_proto_builder_init(&b, GS_MSG_STOP, GS_PROTO_MAX_REQUEST);
        gs_proto_builder_add(&b, "id", "%s", id);
        gs_proto_builder_add(&b, "grace_ms", "%" PRIu64, grace_ms);
        if (up)
                gs_proto_builder_add(&b, "target", "%s", "up");
        struct gs_proto_msg m;
        int r = cli_call(fd, &b, &m, err);
        if (r == -EBADMSG && err) {
                gs_error_free(*err);
                *err = NULL;
                return gs_error_set(err, r, "this gpusliced cannot stop slices (it is older "
                                    "than `gpuslice stop`); restart it");
        }
        if (r < 0)
                return r;
        const char *v = gs_proto_msg_get(&m, up ? "up_pid" : "pid");
        *ret_pid = v ? (int)GS_MIN(u64_of(v), (uint64_t)INT32_MAX) : 0;
        gs_proto_msg_done(&m);
        return 0;
}

void cli_listing_done(struct cli_listing *l)
{
        if (!l)
                return;
        free(l->gpus);
        free(l->slices);
        *l = (struct cli_listing){ 0 };
}

int cli_list(int fd, struct cli_listing *ret, struct gs_error **err)
{
        struct gs_proto_builder b;
        gs_proto_builder_init(&b, GS_MSG_LIST, GS_PROTO_MAX_REQUEST);
        struct gs_proto_msg m;
        int r = cli_call(fd, &b, &m, err);
        if (r < 0)
                return r;
        size_t ng = 0, ns = 0;
        for (size_t i = 0; i < m.n_items; i++) {
                ng += !strcmp(m.items[i].key, "gpu");
                ns += !strcmp(m.items[i].key, "slice");
        }
        struct cli_listing l = { .gpus = calloc(ng + 1, sizeof(*l.gpus)),
                                 .slices = calloc(ns + 1, sizeof(*l.slices)) };
        if (!l.gpus || !l.slices) {
                cli_listing_done(&l);
                gs_proto_msg_done(&m);
                return gs_error_set(err, -ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < m.n_items;) {
                if (!strcmp(m.items[i].key, "gpu"))
                        i = parse_gpu(&m, i, &l.gpus[l.n_gpus++]);
                else if (!strcmp(m.items[i].key, "slice"))
                        i = parse_slice(&m, i, &l.slices[l.n_slices++]);
                else
                        i++;
        }
        gs_proto_msg_done(&m);
        *ret = l;
        return 0;
}

int cli_plan(int fd, const uint32_t *milli, const uint64_t *memory, size_t n,
             struct gs_error **err)
{
        struct gs_proto_builder b;
        gs_proto_builder_init(&b, GS_MSG_PLAN, GS_PROTO_MAX_REQUEST);
        for (size_t i = 0; i < n; i++)
                gs_proto_builder_add(&b, "want", "%" PRIu32 ",%" PRIu64, milli[i], memory[i]);
        struct gs_proto_msg m;
        int r = cli_call(fd, &b, &m, err);
        if (r == 0)
                gs_proto_msg_done(&m);
        return r;
}
