/* SPDX-License-Identifier: Apache-2.0 */
/* cuGetProcAddress over a driver that hands out internal aliases (the fake
 * libcuda.so.1 of fake_cuda.c): the shim must still hand out the wrapper of
 * the variant the request selects, never the driver's pointer, and the
 * wrapper enforces the cap. The test starts as a parent (no preload), writes
 * a slice config and re-executes itself preloaded over the fake driver. */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXPECT(cond, ...)                                                                   \
        do {                                                                                \
                if (!(cond)) {                                                              \
                        fprintf(stderr, "EXPECT(%s) failed: ", #cond);                      \
                        fprintf(stderr, __VA_ARGS__);                                       \
                        fprintf(stderr, "\n");                                              \
                        exit(1);                                                            \
                }                                                                           \
        } while (0)

typedef CUresult gpa_t(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static void *wrapper(const char *name)
{
        void *p = dlsym(RTLD_DEFAULT, name);
        EXPECT(p, "the shim exports %s", name);
        return p;
}

static int child(void)
{
        gpa_t *gpa = (gpa_t *)wrapper("cuGetProcAddress_v2");
        void *f = NULL;
        EXPECT(gpa("cuMemAlloc", &f, 13000, 0, NULL) == CUDA_SUCCESS, "cuMemAlloc found");
        EXPECT(f == wrapper("cuMemAlloc_v2"), "cuMemAlloc: got %p, not the v2 wrapper", f);
        /* the wrapper enforces the 1 GiB cap: 16 x 64 MiB, then refused */
        CUresult (*alloc)(CUdeviceptr *, size_t) = (CUresult(*)(CUdeviceptr *, size_t))f;
        unsigned n = 0;
        CUdeviceptr d;
        CUresult r;
        while (n < 64 && (r = alloc(&d, 64ull << 20)) == CUDA_SUCCESS)
                n++;
        EXPECT(n == 16 && r == CUDA_ERROR_OUT_OF_MEMORY, "%u allocations then %d", n, (int)r);
        static const struct {
                const char *sym;
                int ver;
                cuuint64_t flags;
                const char *want;
        } cases[] = {
                { "cuCtxCreate", 13000, 0, "cuCtxCreate_v4" },
                { "cuCtxCreate", 12050, 0, "cuCtxCreate_v4" },
                { "cuCtxCreate", 11040, 0, "cuCtxCreate_v3" },
                { "cuCtxCreate", 3020, 0, "cuCtxCreate_v2" },
                { "cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                  "cuLaunchKernel_ptsz" },
                { "cuLaunchKernel", 13000, 0, "cuLaunchKernel" },
                { "cuLaunchKernel", 6050, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                  "cuLaunchKernel" },
        };
        for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                f = NULL;
                EXPECT(gpa(cases[i].sym, &f, cases[i].ver, cases[i].flags, NULL) == CUDA_SUCCESS,
                       "%s found", cases[i].sym);
                EXPECT(f == wrapper(cases[i].want), "%s(%d, %llu): %p is not the wrapper of %s",
                       cases[i].sym, cases[i].ver, (unsigned long long)cases[i].flags, f,
                       cases[i].want);
        }
        return 0;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
        (void)sb, (void)flag, (void)ftw;
        return remove(p);
}

int main(int argc, char **argv)
{
        (void)argc;
        if (getenv("PROCADDR_CHILD"))
                return child();
        char dir[] = "/tmp/gs-procaddr-XXXXXX";
        EXPECT(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
        char conf[300], slicedir[300], logp[300];
        snprintf(conf, sizeof(conf), "%s/slice.conf", dir);
        snprintf(slicedir, sizeof(slicedir), "%s/slice", dir);
        snprintf(logp, sizeof(logp), "%s/shim.log", dir);
        EXPECT(mkdir(slicedir, 0700) == 0, "mkdir");
        FILE *f = fopen(conf, "we");
        EXPECT(f, "config");
        fprintf(f, "version = 1\nslice = alias\ngpu_uuid = GPU-00000000-0000-0000-0000-000000000001\n"
                   "memory_limit = 1073741824\ncompute_milli = 1000\nslice_dir = %s\n",
                slicedir);
        fclose(f);
        chmod(conf, 0644);
        pid_t pid = fork();
        EXPECT(pid >= 0, "fork");
        if (pid == 0) {
                setenv("PROCADDR_CHILD", "1", 1);
                setenv("LD_PRELOAD", GS_SHIM_PATH, 1);
                setenv("LD_LIBRARY_PATH", GS_FAKE_CUDA_DIR, 1);
                setenv("GPUSLICE_CONFIG", conf, 1);
                setenv("GPUSLICE_LOG", logp, 1);
                unsetenv("GPUSLICE_TEST_DEFAULT_CONFIG");
                setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 1);
                execl("/proc/self/exe", argv[0], (char *)NULL);
                _exit(127);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
        if (rc) {
                f = fopen(logp, "re");
                char line[1024];
                while (f && fgets(line, sizeof(line), f))
                        fputs(line, stderr);
                if (f)
                        fclose(f);
        }
        nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
        return rc;
}
