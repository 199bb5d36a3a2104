/* SPDX-License-Identifier: Apache-2.0 */
/* See shim_harness.h. */
#include "shim_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gpuslice/slice_state.h>


static char dir[256];

static void write_file(const char *path, const char *text, unsigned mode)
{
        FILE *f = fopen(path, "we");
        EXPECT(f, "cannot write %s: %s", path, strerror(errno));
        fputs(text, f);
        fclose(f);
        /* whatever the umask: the shim refuses group/world-writable configs */
        EXPECT(chmod(path, mode ? mode : 0644) == 0, "chmod %s: %s", path, strerror(errno));
}

/* Replaces every `key` in `in` by `val` into out. */
static void subst(char *out, size_t size, const char *in, const char *key, const char *val)
{
        size_t n = 0, kl = strlen(key), vl = strlen(val);
        while (*in && n + 1 < size) {
                if (!strncmp(in, key, kl) && n + vl + 1 < size) {
                        memcpy(out + n, val, vl);
                        n += vl;
                        in += kl;
                } else {
                        out[n++] = *in++;
                }
        }
        out[n] = '\0';
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
        (void)sb;
        (void)flag;
        (void)ftw;
        return remove(p);
}

static void dump(const char *path)
{
        struct stat sb;
        if (stat(path, &sb) < 0 || !S_ISREG(sb.st_mode))
                return; /* a FIFO would block */
        FILE *f = fopen(path, "re");
        if (!f)
                return;
        char line[1024];
        fprintf(stderr, "---- %s ----\n", path);
        while (fgets(line, sizeof(line), f))
                fputs(line, stderr);
        fclose(f);
}

int st_run(int argc, char **argv, const struct st_setup *s)
{
        EXPECT(argc >= 2, "usage: %s SCENARIO", argv[0]);
        snprintf(dir, sizeof(dir), "/tmp/gs-shimtest-XXXXXX");
        EXPECT(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
        char simdir[300], slicedir[300], conf[300], logp[300], outp[300], num[32], forged[300];
        snprintf(simdir, sizeof(simdir), "%s/sim", dir);
        snprintf(slicedir, sizeof(slicedir), "%s/slice", dir);
        snprintf(conf, sizeof(conf), "%s/slice.conf", dir);
        snprintf(logp, sizeof(logp), "%s/shim.log", dir);
        snprintf(outp, sizeof(outp), "%s/out", dir);
        snprintf(forged, sizeof(forged), "%s/forged.conf", dir);
        mkdir(simdir, 0700);
        mkdir(slicedir, 0700);
        if (s->bad_books) {
                char books[400];
                snprintf(books, sizeof(books), "%s/%s", slicedir, GS_SLICE_STATE_FILE);
                if (s->bad_books == 1)
                        EXPECT(mkdir(books, 0700) == 0, "mkdir %s: %s", books, strerror(errno));
                else
                        write_file(books, "not the books of any slice\n", 0600);
        }
        setenv("SIMGPU_DIR", simdir, 1);
        snprintf(num, sizeof(num), "%llu", (unsigned long long)(s->sim_memory ? s->sim_memory : 8 * GiB));
        setenv("SIMGPU_MEMORY", num, 1);
        snprintf(num, sizeof(num), "%llu", (unsigned long long)ST_CTX);
        setenv("SIMGPU_CTX_OVERHEAD", num, 1);
        snprintf(num, sizeof(num), "%u", s->sim_devices ? s->sim_devices : 1);
        setenv("SIMGPU_DEVICES", num, 1);
        unsetenv("GPUSLICE_CONFIG");
        unsetenv("GPUSLICE_TEST_DEFAULT_CONFIG");
        if (s->log_fifo)
                EXPECT(mkfifo(logp, 0600) == 0, "mkfifo: %s", strerror(errno));

        /* The parent is not preloaded: it asks the driver directly. */
        CU_OK(cuInit(0));
        CUdevice d;
        CU_OK(cuDeviceGet(&d, 0));
        CUuuid u;
        CU_OK(cuDeviceGetUuid(&u, d));
        const unsigned char *b = (const unsigned char *)u.bytes;
        char uuid[64];
        snprintf(uuid, sizeof(uuid),
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        CUcontext pc = NULL;
        CUdeviceptr held = 0;
        if (s->parent_holds) {
                CU_OK(cuDevicePrimaryCtxRetain(&pc, d));
                CU_OK(cuCtxSetCurrent(pc));
                CU_OK(cuMemAlloc(&held, s->parent_holds));
        }
        if (s->config) {
                char t1[4096], t2[4096];
                subst(t1, sizeof(t1), s->config, "%UUID%", uuid);
                subst(t2, sizeof(t2), t1, "%DIR%", slicedir);
                write_file(conf, t2, s->conf_mode);
                if (s->conf_uid)
                        EXPECT(chown(conf, s->conf_uid, (gid_t)-1) == 0, "chown %s: %s", conf,
                               strerror(errno));
                if (s->dir_mode)
                        EXPECT(chmod(dir, s->dir_mode) == 0, "chmod %s: %s", dir, strerror(errno));
        }
        if (s->forged) {
                char t1[4096], t2[4096];
                subst(t1, sizeof(t1), s->forged, "%UUID%", uuid);
                subst(t2, sizeof(t2), t1, "%DIR%", slicedir);
                write_file(forged, t2, 0);
        }

        pid_t pid = fork();
        EXPECT(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                setenv("LD_PRELOAD", GS_SHIM_PATH, 1);
                if (s->config && s->forged) {
                        setenv("GPUSLICE_TEST_DEFAULT_CONFIG", conf, 1);
                        setenv("GPUSLICE_CONFIG", forged, 1);
                } else if (s->config) {
                        setenv("GPUSLICE_CONFIG", conf, 1);
                }
                setenv("GPUSLICE_LOG", logp, 1);
                setenv("SHIMTEST_ROLE", argv[1], 1);
                setenv("SHIMTEST_SLICE_DIR", slicedir, 1);
#ifdef GS_SANITIZE
                /* The shim comes before libasan in the preload order. */
                setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 1);
#endif
                if (s->expect_silent) {
                        int fd = open(outp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
                                _exit(2);
                }
                execl("/proc/self/exe", argv[0], argv[1], (char *)NULL);
                _exit(127);
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (rc == 0 && s->expect_silent) {
                struct stat sb;
                if (stat(outp, &sb) == 0 && sb.st_size != 0) {
                        fprintf(stderr, "the preloaded program wrote to stdout/stderr:\n");
                        dump(outp);
                        rc = 1;
                }
        }
        if (rc != 0) {
                fprintf(stderr, "scenario %s failed (%d)\n", argv[1], rc);
                if (s->expect_silent)
                        dump(outp);
                dump(logp);
        }
        if (held)
                cuMemFree(held);
        if (pc)
                cuDevicePrimaryCtxRelease(d);
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        return rc;
}

static void *map_file(const char *path, size_t size)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        EXPECT(fd >= 0, "open %s: %s", path, strerror(errno));
        void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        EXPECT(p != MAP_FAILED, "mmap %s: %s", path, strerror(errno));
        return p;
}

void st_ctx_up(CUdevice *ret_dev, CUcontext *ret_ctx)
{
        CUdevice dev;
        CUcontext ctx;
        CU_OK(cuInit(0));
        CU_OK(cuDeviceGet(&dev, 0));
        CU_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
        CU_OK(cuCtxSetCurrent(ctx));
        if (ret_dev)
                *ret_dev = dev;
        if (ret_ctx)
                *ret_ctx = ctx;
}

char *st_sim_json(void)
{
        int p[2];
        EXPECT(pipe2(p, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
        pid_t child = fork();
        EXPECT(child >= 0, "fork: %s", strerror(errno));
        if (child == 0) {
                dup2(p[1], 1);
                unsetenv("LD_PRELOAD");
                execl(GS_SIM_SMI, "simgpu-smi", "--json", (char *)NULL);
                _exit(127);
        }
        close(p[1]);
        static char out[1 << 18];
        size_t n = 0;
        ssize_t r;
        while (n < sizeof(out) - 1 && (r = read(p[0], out + n, sizeof(out) - 1 - n)) > 0)
                n += (size_t)r;
        out[n] = '\0';
        close(p[0]);
        int st;
        waitpid(child, &st, 0);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "simgpu-smi --json failed");
        return out;
}

/* The used_bytes of pid on device 0 in st_sim_json (0 when not listed).
 * Every process record is one line of its output. */
uint64_t st_sim_used(int pid)
{
        char *out = st_sim_json();
        char want[64];
        snprintf(want, sizeof(want), "\"pid\": %d,", pid);
        uint64_t used = 0;
        for (char *line = out; line && *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                const char *u = strstr(line, "\"used_bytes\": ");
                if (strstr(line, want) && strstr(line, "\"device\": 0,") && u)
                        used = strtoull(u + 14, NULL, 10);
                line = nl ? nl + 1 : NULL;
        }
        return used;
}

void st_write_other_conf(const char *name, const char *limits, char *path, size_t size)
{
        char sdir[512], line[1024], uuid[1024] = "", text[2048];
        snprintf(sdir, sizeof(sdir), "%s/../%s", getenv("SHIMTEST_SLICE_DIR"), name);
        EXPECT(mkdir(sdir, 0700) == 0, "mkdir %s: %s", sdir, strerror(errno));
        FILE *f = fopen(getenv("GPUSLICE_CONFIG"), "re");
        EXPECT(f, "the slice's config");
        while (fgets(line, sizeof(line), f))
                if (!strncmp(line, "gpu_uuid = ", 11))
                        snprintf(uuid, sizeof(uuid), "%s", line + 11);
        fclose(f);
        snprintf(text, sizeof(text), "version = 1\nslice = other\ngpu_uuid = %s%sslice_dir = %s\n",
                 uuid, limits, sdir);
        snprintf(path, size, "%s/../%s.conf", getenv("SHIMTEST_SLICE_DIR"), name);
        f = fopen(path, "we");
        EXPECT(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
        EXPECT(chmod(path, 0644) == 0, "chmod %s", path);
}

uint64_t st_slice_used(void)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", getenv("SHIMTEST_SLICE_DIR"), GS_SLICE_STATE_FILE);
        const struct gs_slice_state *st = map_file(path, sizeof(struct gs_slice_state));
        EXPECT(st->magic == GS_SLICE_STATE_MAGIC, "not a slice state file");
        uint64_t used = __atomic_load_n(&st->used, __ATOMIC_RELAXED);
        munmap((void *)st, sizeof(struct gs_slice_state));
        return used;
}

int st_spawn(const char *role, int *ret_fd)
{
        int p[2];
        EXPECT(pipe2(p, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
        pid_t pid = fork();
        EXPECT(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                dup2(p[1], 1);
                setenv("SHIMTEST_ROLE", role, 1);
                execl("/proc/self/exe", "shim_test", role, (char *)NULL);
                _exit(127);
        }
        close(p[1]);
        *ret_fd = p[0];
        return pid;
}
