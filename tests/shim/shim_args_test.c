/* SPDX-License-Identifier: Apache-2.0 */
/* The shim refuses what the driver refuses before it charges or computes
 * anything (issue 13, hardening): array, 3D array and mipmapped array
 * descriptors a driver refuses, level counts no array has, and pitched
 * allocations with an element size other than 4, 8 or 16. Each call
 * must return simgpu's own answer (found by asking simgpu directly, outside
 * the shim: the scenario's parent runs the same calls unhooked first), and
 * neither simgpu's ground truth (simgpu-smi, outside the shim) nor the
 * slice's books may move. That the shim's work does not grow with a
 * caller's level count is checked on its size function, whose iterations
 * are counted (fuzz/fuzz_array_size.c, fuzz_array_size_corpus); here an
 * absurd level count must still get simgpu's answer and cost nothing.
 *
 * usage: shim_args_test arrays */
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shim_harness.h"

static const char conf[] = "version = 1\nslice = test\ngpu_uuid = %UUID%\n"
                           "memory_limit = 1073741824\ncompute_milli = 1000\n"
                           "context_overhead = 67108864\nslice_dir = %DIR%\n";

/* One call: a 3D descriptor, how it is created, and a level count (for
 * cuMemAllocPitch: Width bytes by Height rows, `levels` the element size). */
enum how { H_2D, H_3D, H_MIP, H_PITCH };
struct call {
        const char *what;
        enum how how;
        CUDA_ARRAY3D_DESCRIPTOR d;
        unsigned levels;
};

static const struct call calls[] = {
        { "mipmap, 2^32-1 levels", H_MIP,
          { .Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4 },
          0xffffffffu },
        { "mipmap, 100 levels of a 5-wide array", H_MIP,
          { .Width = 5, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1 }, 100 },
        { "mipmap, width 2^40", H_MIP,
          { .Width = 1ull << 40, .Height = 4, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 }, 4 },
        { "2D, width 0", H_2D, { .Width = 0, .Height = 16, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 },
          1 },
        { "2D, width 2^40 x height 2^40", H_2D,
          { .Width = 1ull << 40, .Height = 1ull << 40, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4 },
          1 },
        { "2D, 3 channels", H_2D, { .Width = 64, .Height = 64, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 3 },
          1 },
        { "3D, depth 2^40", H_3D,
          { .Width = 8, .Height = 8, .Depth = 1ull << 40, .Format = CU_AD_FORMAT_HALF, .NumChannels = 2 },
          1 },
        { "3D, height 2^62", H_3D,
          { .Width = 8, .Height = 1ull << 62, .Depth = 2, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 },
          1 },
        /* 2 GiB at any pitch: past the 1 GiB cap, so a shim that charges
         * before it checks the element size answers out of memory */
        { "pitch, element size 3", H_PITCH, { .Width = 65536, .Height = 32768 }, 3 },
        { "pitch, element size 32", H_PITCH, { .Width = 65536, .Height = 32768 }, 32 },
        { "pitch, element size 0", H_PITCH, { .Width = 65536, .Height = 32768 }, 0 },
};
#define N_CALLS (sizeof(calls) / sizeof(calls[0]))

/* Makes c; on success destroys what was made. Returns the creation's answer. */
static CUresult make(const struct call *c)
{
        CUresult r;
        if (c->how == H_PITCH) {
                CUdeviceptr p;
                size_t pitch;
                r = cuMemAllocPitch(&p, &pitch, c->d.Width, c->d.Height, c->levels);
                if (r == CUDA_SUCCESS)
                        CU_OK(cuMemFree(p));
                return r;
        }
        if (c->how == H_MIP) {
                CUmipmappedArray m;
                r = cuMipmappedArrayCreate(&m, &c->d, c->levels);
                if (r == CUDA_SUCCESS)
                        CU_OK(cuMipmappedArrayDestroy(m));
                return r;
        }
        CUarray a;
        if (c->how == H_2D) {
                CUDA_ARRAY_DESCRIPTOR d2 = { .Width = c->d.Width, .Height = c->d.Height,
                                             .Format = c->d.Format, .NumChannels = c->d.NumChannels };
                r = cuArrayCreate(&a, &d2);
        } else {
                r = cuArray3DCreate(&a, &c->d);
        }
        if (r == CUDA_SUCCESS)
                CU_OK(cuArrayDestroy(a));
        return r;
}

/* Child (preloaded): every call gets simgpu's answer, read from fd 3
 * (written by the unhooked parent), and nothing moves. */
static int run_arrays(void)
{
        st_ctx_up(NULL, NULL);
        int want[N_CALLS];
        FILE *in = fdopen(3, "r");
        EXPECT(in, "no answers from the parent");
        for (unsigned i = 0; i < N_CALLS; i++)
                EXPECT(fscanf(in, "%d", &want[i]) == 1, "answer %u missing", i);
        fclose(in);
        uint64_t sim0 = st_sim_used(getpid()), books0 = st_slice_used();
        for (unsigned i = 0; i < N_CALLS; i++) {
                CUresult r = make(&calls[i]);
                EXPECT((int)r == want[i], "%s: the shim answered %d, simgpu answers %d", calls[i].what,
                       (int)r, want[i]);
                EXPECT(want[i] != CUDA_SUCCESS, "%s: simgpu accepts it: not a refusal test",
                       calls[i].what);
                uint64_t sim = st_sim_used(getpid()), books = st_slice_used();
                EXPECT(sim == sim0, "%s: simgpu's ground truth moved %llu -> %llu", calls[i].what,
                       (unsigned long long)sim0, (unsigned long long)sim);
                EXPECT(books == books0, "%s: the slice's books moved %llu -> %llu", calls[i].what,
                       (unsigned long long)books0, (unsigned long long)books);
        }
        /* A valid mipmap still goes through and is charged. */
        CUDA_ARRAY3D_DESCRIPTOR ok = { .Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT,
                                       .NumChannels = 4 };
        CUmipmappedArray m;
        CU_OK(cuMipmappedArrayCreate(&m, &ok, 11));
        EXPECT(st_slice_used() > books0, "a valid mipmapped array is not charged");
        CU_OK(cuMipmappedArrayDestroy(m));
        EXPECT(st_slice_used() == books0, "its charge is not given back");
        return 0;
}

/* Parent side, before st_run: simgpu's own answers, unhooked, in a child
 * of this process with its own simgpu state (SIMGPU_DIR of its own). */
static int driver_answers(int wfd)
{
        char dir[] = "/tmp/gs-shim-args-XXXXXX";
        if (!mkdtemp(dir))
                return -1;
        pid_t pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0) {
                setenv("SIMGPU_DIR", dir, 1);
                unsetenv("LD_PRELOAD");
                st_ctx_up(NULL, NULL);
                FILE *out = fdopen(wfd, "w");
                for (unsigned i = 0; i < N_CALLS; i++)
                        fprintf(out, "%d\n", (int)make(&calls[i]));
                fclose(out);
                _exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0)
                return -1;
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
        const char *role = getenv("SHIMTEST_ROLE");
        if (role) {
                if (!strcmp(role, "arrays"))
                        return run_arrays();
                fprintf(stderr, "unknown scenario %s\n", role);
                return 2;
        }
        if (argc < 2 || strcmp(argv[1], "arrays"))
                return 2;
        /* The answers travel to the preloaded child on fd 3 (a file). */
        FILE *f = tmpfile();
        if (!f || dup2(fileno(f), 3) < 0 || driver_answers(3) < 0) {
                fprintf(stderr, "cannot ask simgpu for its answers\n");
                return 1;
        }
        lseek(3, 0, SEEK_SET);
        struct st_setup s = { .config = conf };
        return st_run(argc, argv, &s);
}
