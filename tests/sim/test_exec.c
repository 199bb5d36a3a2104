/* SPDX-License-Identifier: Apache-2.0 */
/* An execve ends the old image's use of the GPU, as with the real driver
 * (its descriptors are close-on-exec): a process that allocated and then
 * execs shows none of that memory in simgpu's ground truth (simgpu-smi),
 * whether the new image uses CUDA (it shows only its own) or not; and so
 * does closing libcuda's descriptor. 64 MiB context overhead (ENV). */
#include "simtest.h"

#include <fcntl.h>

#define OVERHEAD (64 * MiB)

/* The image after the exec: tell the parent we are there (one byte on
 * fd `out`) and wait for it to close `in`. With `cuda`, first make a
 * context and a 32 MiB allocation. */
static int after_exec(bool cuda, int out, int in)
{
        if (cuda) {
                CUdevice dev;
                CUcontext ctx;
                ct_setup(&dev, &ctx);
                CUdeviceptr p;
                CT_CHECK(cuMemAlloc(&p, 32 * MiB));
        }
        char c = 'r';
        CT_ASSERT(write(out, &c, 1) == 1, "write");
        while (read(in, &c, 1) > 0)
                ;
        return 0;
}

/* Forks a child that allocates 512 MiB, then execs this program in mode
 * `mode`; returns the child's pid with *ret_in open to read its signal and
 * *ret_release to close to let it end. */
static pid_t start(const char *self, const char *mode, int *ret_in, int *ret_release)
{
        int up[2], down[2];
        CT_ASSERT(pipe(up) == 0 && pipe(down) == 0, "pipe");
        pid_t pid = fork();
        CT_ASSERT(pid >= 0, "fork");
        if (pid == 0) {
                close(up[0]);
                close(down[1]);
                CUdevice dev;
                CUcontext ctx;
                ct_setup(&dev, &ctx);
                CUdeviceptr p;
                CT_CHECK(cuMemAlloc(&p, 512 * MiB));
                struct ct_smi_proc pr;
                CT_ASSERT(ct_smi_proc(getpid(), 0, &pr) == 0 && pr.used_bytes == OVERHEAD + 512 * MiB,
                          "before the exec: %llu", pr.used_bytes);
                char a[16], b[16];
                snprintf(a, sizeof(a), "%d", up[1]);
                snprintf(b, sizeof(b), "%d", down[0]);
                execl(self, self, mode, a, b, (char *)NULL);
                _exit(127);
        }
        close(up[1]);
        close(down[0]);
        char c;
        CT_ASSERT(read(up[0], &c, 1) == 1, "the child did not reach its new image");
        *ret_in = up[0];
        *ret_release = down[1];
        return pid;
}

static void finish(pid_t pid, int in, int release)
{
        close(release);
        close(in);
        CT_ASSERT(st_wait(pid) == 0, "child failed");
}

/* A descriptor number given on the command line. */
static bool parse_fd(const char *s, int *out)
{
        int v = 0;
        if (!*s)
                return false;
        for (; *s; s++) {
                if (*s < '0' || *s > '9' || v > 100000)
                        return false;
                v = v * 10 + (*s - '0');
        }
        *out = v;
        return true;
}

static uint64_t dev_used(void)
{
        struct ct_smi_dev d;
        CT_ASSERT(ct_smi_dev(0, &d) == 0, "simgpu-smi device 0");
        return d.used;
}

/* A process that closes libcuda's descriptor of the state file (as it could
 * close the real driver's device files) ends its use of the GPU: the reaper
 * returns what it held, and its later allocations are refused, never
 * charged to a record that is no longer its own. */
static void closed_descriptor(void)
{
        int up[2], down[2];
        CT_ASSERT(pipe(up) == 0 && pipe(down) == 0, "pipe");
        pid_t pid = fork();
        CT_ASSERT(pid >= 0, "fork");
        if (pid == 0) {
                CUdevice dev;
                CUcontext ctx;
                ct_setup(&dev, &ctx);
                CUdeviceptr p, q;
                CT_CHECK(cuMemAlloc(&p, 256 * MiB));
                for (int fd = 3; fd < 1024; fd++)
                        if (fd != up[1] && fd != down[0])
                                close(fd);
                char c = 'c';
                CT_ASSERT(write(up[1], &c, 1) == 1, "write");
                CT_ASSERT(read(down[0], &c, 1) == 1, "read");
                CT_ASSERT(cuMemAlloc(&q, 64 * MiB) != CUDA_SUCCESS, "allocated without its descriptor");
                CT_CHECK(cuMemFree(p));
                CT_ASSERT(write(up[1], &c, 1) == 1, "write");
                _exit(0);
        }
        close(up[1]);
        close(down[0]);
        char c;
        CT_ASSERT(read(up[0], &c, 1) == 1, "child");
        struct ct_smi_proc pr;
        int listed = ct_smi_proc(pid, 0, &pr);
        CT_ASSERT(listed < 0 || !pr.alive || pr.used_bytes == 0, "still charged: %llu", pr.used_bytes);
        CT_ASSERT(dev_used() == 0, "device used %llu", (unsigned long long)dev_used());
        CT_ASSERT(write(down[1], &c, 1) == 1, "write");
        CT_ASSERT(read(up[0], &c, 1) == 1, "child");
        CT_ASSERT(dev_used() == 0, "after its late free: device used %llu",
                  (unsigned long long)dev_used());
        CT_ASSERT(st_wait(pid) == 0, "child failed");
        close(up[0]);
        close(down[1]);
}

int main(int argc, char **argv)
{
        if (argc == 4) {
                int out = -1, in = -1;
                CT_ASSERT(parse_fd(argv[2], &out) && parse_fd(argv[3], &in), "fds");
                return after_exec(strcmp(argv[1], "cuda") == 0, out, in);
        }
        st_fresh();
        int in, release;
        /* a new image without CUDA: nothing of the old one is left */
        pid_t pid = start(argv[0], "plain", &in, &release);
        struct ct_smi_proc pr;
        int listed = ct_smi_proc(pid, 0, &pr);
        CT_ASSERT(listed < 0 || !pr.alive || pr.used_bytes == 0,
                  "after exec into a program without CUDA: %llu bytes still charged to it",
                  pr.used_bytes);
        CT_ASSERT(dev_used() == 0, "device used %llu after the exec", (unsigned long long)dev_used());
        finish(pid, in, release);
        /* a new image with CUDA: only its own context and allocation */
        pid = start(argv[0], "cuda", &in, &release);
        CT_ASSERT(ct_smi_proc(pid, 0, &pr) == 0 && pr.alive, "the new image is listed");
        CT_ASSERT(pr.used_bytes == OVERHEAD + 32 * MiB,
                  "after exec into a CUDA program: %llu, expected its own %llu", pr.used_bytes,
                  (unsigned long long)(OVERHEAD + 32 * MiB));
        CT_ASSERT(pr.contexts == 1, "contexts %d", pr.contexts);
        CT_ASSERT(dev_used() == OVERHEAD + 32 * MiB, "device used %llu",
                  (unsigned long long)dev_used());
        finish(pid, in, release);
        closed_descriptor();
        printf("exec: ok\n");
        return 0;
}
