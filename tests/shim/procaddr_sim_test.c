/* SPDX-License-Identifier: Apache-2.0 */
/* cuGetProcAddress over simgpu, which (like the real driver) answers with
 * internal entry points, never the exported symbols a preloaded shim
 * interposes: for every hooked base name, version and stream flavour the
 * shim must hand out the wrapper of exactly the variant the driver chose,
 * never the driver's pointer (an ungated route) and never another variant's
 * wrapper (another ABI).
 *
 * The parent (no preload) asks simgpu for every (base, version, flags) and
 * follows each answer's trampoline to the exported symbol it runs (dladdr);
 * the child, preloaded in a slice, asks the shim for the same and expects
 * dlsym(RTLD_DEFAULT, that symbol): the shim's wrapper of that variant. */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/trampoline.h"

#define EXPECT(cond, ...)                                                                   \
        do {                                                                                \
                if (!(cond)) {                                                              \
                        fprintf(stderr, "EXPECT(%s) failed: ", #cond);                      \
                        fprintf(stderr, __VA_ARGS__);                                       \
                        fprintf(stderr, "\n");                                              \
                        exit(1);                                                            \
                }                                                                           \
        } while (0)

/* The shim's hooked driver entry points and their `since` (hooks.def). */
static const struct {
        const char *sym;
        int since;
} hooks[] = {
#define CU(s, p, v) { #s, v },
#define NVML(s, p)
#include "hooks.def"
#undef CU
#undef NVML
};
#define N_HOOKS (sizeof(hooks) / sizeof(hooks[0]))

typedef CUresult gpa_t(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

/* The base name of a hooked symbol (cuX, cuX_vN, with _ptsz/_ptds). */
static void base_of(const char *sym, char *out, size_t n)
{
        snprintf(out, n, "%s", sym);
        size_t len = strlen(out);
        if (len > 5 && (!strcmp(out + len - 5, "_ptsz") || !strcmp(out + len - 5, "_ptds")))
                out[len -= 5] = 0;
        char *v = strrchr(out, '_');
        if (v && v[1] == 'v' && v[2] >= '0' && v[2] <= '9' && strspn(v + 2, "0123456789") == strlen(v + 2))
                *v = 0;
}

/* Where simgpu's entry point fn leads (its trampoline's jump), or fn. */
static void *target_of(void *fn)
{
        void *t = ct_trampoline_target(fn);
        return t ? t : fn;
}

static const int versions[] = { 2000, 3020, 4000, 7000, 11000, 11020, 11040, 12000, 12030, 12050, 13000 };

/* Parent: simgpu's answers, one "base version flags symbol" line each. */
static void expectations(FILE *out)
{
        gpa_t *gpa = (gpa_t *)dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
        EXPECT(gpa, "simgpu's cuGetProcAddress_v2");
        for (size_t i = 0; i < N_HOOKS; i++) {
                char base[128];
                base_of(hooks[i].sym, base, sizeof(base));
                for (size_t v = 0; v < sizeof(versions) / sizeof(versions[0]); v++)
                        for (int pt = 0; pt < 2; pt++) {
                                cuuint64_t fl = pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
                                void *f = NULL;
                                if (gpa(base, &f, versions[v], fl, NULL) != CUDA_SUCCESS || !f)
                                        continue;
                                Dl_info di;
                                void *t = target_of(f);
                                EXPECT(dladdr(t, &di) && di.dli_sname && t == di.dli_saddr,
                                       "%s@%d: simgpu's answer leads to no exported symbol", base,
                                       versions[v]);
                                fprintf(out, "%s %d %d %s\n", base, versions[v], pt, di.dli_sname);
                        }
        }
}

/* Child: the shim's answers, compared. */
static int child(const char *path)
{
        gpa_t *gpa = (gpa_t *)dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
        EXPECT(gpa, "the shim exports cuGetProcAddress_v2");
        FILE *in = fopen(path, "re");
        EXPECT(in, "%s: %s", path, strerror(errno));
        char base[128], sym[128];
        int ver, pt, n = 0, bad = 0;
        while (fscanf(in, "%127s %d %d %127s", base, &ver, &pt, sym) == 4) {
                cuuint64_t fl = pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
                void *f = NULL;
                CUresult r = gpa(base, &f, ver, fl, NULL);
                void *want = dlsym(RTLD_DEFAULT, sym);
                Dl_info di = { 0 };
                bool in_shim = f && dladdr(f, &di) && di.dli_fname && strstr(di.dli_fname, "libgpuslice");
                bool hooked = want && dladdr(want, &di) && di.dli_fname &&
                              strstr(di.dli_fname, "libgpuslice");
                n++;
                if (hooked && (r != CUDA_SUCCESS || f != want)) {
                        fprintf(stderr, "%s@%d%s: the driver chose %s, the shim answered %d %p, not "
                                        "its wrapper %p\n",
                                base, ver, pt ? " per-thread" : "", sym, (int)r, f, want);
                        bad++;
                } else if (!hooked && r == CUDA_SUCCESS && !in_shim) {
                        fprintf(stderr, "%s@%d%s: the driver chose %s, which the shim does not hook, "
                                        "and the shim handed out the driver's pointer (ungated)\n",
                                base, ver, pt ? " per-thread" : "", sym);
                        bad++;
                } else if (!hooked && r == CUDA_SUCCESS) {
                        fprintf(stderr, "%s@%d%s: the driver chose %s, which the shim does not hook, "
                                        "and the shim handed out another variant's wrapper\n",
                                base, ver, pt ? " per-thread" : "", sym);
                        bad++;
                }
        }
        fclose(in);
        EXPECT(n > 100, "only %d answers compared", n);
        EXPECT(bad == 0, "%d of %d answers wrong", bad, n);
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
        const char *c = getenv("PROCADDR_SIM_CHILD");
        if (c)
                return child(c);
        char dir[] = "/tmp/gs-procaddr-sim-XXXXXX";
        EXPECT(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
        char conf[300], slicedir[300], logp[300], exp[300], simdir[300];
        snprintf(conf, sizeof(conf), "%s/slice.conf", dir);
        snprintf(slicedir, sizeof(slicedir), "%s/slice", dir);
        snprintf(logp, sizeof(logp), "%s/shim.log", dir);
        snprintf(exp, sizeof(exp), "%s/expected", dir);
        snprintf(simdir, sizeof(simdir), "%s/sim", dir);
        EXPECT(mkdir(slicedir, 0700) == 0, "mkdir");
        setenv("SIMGPU_DIR", simdir, 1);
        EXPECT(cuInit(0) == CUDA_SUCCESS, "cuInit");
        CUuuid u;
        EXPECT(cuDeviceGetUuid(&u, 0) == CUDA_SUCCESS, "uuid");
        const unsigned char *b = (const unsigned char *)u.bytes;
        FILE *f = fopen(exp, "we");
        EXPECT(f, "expected");
        expectations(f);
        fclose(f);
        f = fopen(conf, "we");
        EXPECT(f, "config");
        fprintf(f, "version = 1\nslice = procaddr\ngpu_uuid = GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-"
                   "%02x%02x-%02x%02x%02x%02x%02x%02x\nmemory_limit = 1073741824\n"
                   "compute_milli = 1000\nslice_dir = %s\n",
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15], slicedir);
        fclose(f);
        chmod(conf, 0644);
        pid_t pid = fork();
        EXPECT(pid >= 0, "fork");
        if (pid == 0) {
                setenv("PROCADDR_SIM_CHILD", exp, 1);
                setenv("LD_PRELOAD", GS_SHIM_PATH, 1);
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
        nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
        return rc;
}
