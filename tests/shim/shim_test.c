/* SPDX-License-Identifier: Apache-2.0 */
/* Shim scenarios on simgpu; each ctest runs one: `shim_test SCENARIO`.
 * The cap is ST_CAP (1 GiB) including ST_CTX (64 MiB) of context overhead,
 * so 960 MiB = 15 x 64 MiB are left for allocations. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gpuslice/nvml.h>
#include <gpuslice/slice_state.h>

#include "shim_test.h"

const char good_conf[] = "version = 1\nslice = test\ngpu_uuid = %UUID%\n"
                                "memory_limit = 1073741824\ncompute_milli = 500\n"
                                "context_overhead = 67108864\nslice_dir = %DIR%\n";

CUdevice dev;
CUcontext ctx;

void setup_ctx(void)
{
        st_ctx_up(&dev, &ctx);
}

void check_ground_truth(void)
{
        uint64_t sim = st_sim_used(getpid());
        EXPECT(sim <= ST_CAP, "simgpu charges this process %llu > cap", (unsigned long long)sim);
        EXPECT(st_slice_used() <= ST_CAP, "books above the cap");
}

/* ---- one allocation path: fill to the cap, refuse, free, room again ---- */

enum path { P_ALLOC, P_PITCH, P_MANAGED, P_ASYNC, P_POOL, P_VMM, P_ARRAY, P_ARRAY3D, P_MIPMAP };

struct obj {
        uint64_t v;
};

static CUmemoryPool pool;
static CUstream stream;

static CUresult alloc_one(enum path p, struct obj *o)
{
        CUresult r = CUDA_ERROR_UNKNOWN;
        switch (p) {
        case P_ALLOC: {
                CUdeviceptr d;
                r = cuMemAlloc(&d, CHUNK - 4096); /* rounds up to the chunk */
                o->v = d;
                break;
        }
        case P_PITCH: {
                CUdeviceptr d;
                size_t pitch;
                r = cuMemAllocPitch(&d, &pitch, 8192 - 100, 8192, 4);
                o->v = d;
                break;
        }
        case P_MANAGED: {
                CUdeviceptr d;
                r = cuMemAllocManaged(&d, CHUNK, CU_MEM_ATTACH_GLOBAL);
                o->v = d;
                break;
        }
        case P_ASYNC:
        case P_POOL: {
                CUdeviceptr d;
                r = p == P_ASYNC ? cuMemAllocAsync(&d, CHUNK, stream)
                                 : cuMemAllocFromPoolAsync(&d, CHUNK, pool, stream);
                if (r == CUDA_SUCCESS)
                        CU_OK(cuStreamSynchronize(stream));
                o->v = d;
                break;
        }
        case P_VMM: {
                CUmemGenericAllocationHandle h;
                CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                             .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev } };
                r = cuMemCreate(&h, CHUNK, &prop, 0);
                o->v = h;
                break;
        }
        case P_ARRAY: {
                CUarray a;
                CUDA_ARRAY_DESCRIPTOR d = { .Width = 4096, .Height = 4096, .Format = CU_AD_FORMAT_FLOAT,
                                            .NumChannels = 1 };
                r = cuArrayCreate(&a, &d);
                o->v = (uint64_t)(uintptr_t)a;
                break;
        }
        case P_ARRAY3D: {
                CUarray a;
                CUDA_ARRAY3D_DESCRIPTOR d = { .Width = 1024, .Height = 1024, .Depth = 16,
                                              .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4 };
                r = cuArray3DCreate(&a, &d);
                o->v = (uint64_t)(uintptr_t)a;
                break;
        }
        case P_MIPMAP: {
                CUmipmappedArray m;
                /* 2048 x 1024 x 4 x 4 B = 32 MiB + 8 + 2 + ... rounds to 44 MiB */
                CUDA_ARRAY3D_DESCRIPTOR d = { .Width = 2048, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT,
                                              .NumChannels = 4 };
                r = cuMipmappedArrayCreate(&m, &d, 6);
                o->v = (uint64_t)(uintptr_t)m;
                break;
        }
        }
        return r;
}

static void free_one(enum path p, struct obj *o)
{
        switch (p) {
        case P_ALLOC:
        case P_PITCH:
        case P_MANAGED:
                CU_OK(cuMemFree(o->v));
                break;
        case P_ASYNC:
        case P_POOL:
                CU_OK(cuMemFreeAsync(o->v, stream));
                CU_OK(cuStreamSynchronize(stream));
                break;
        case P_VMM:
                CU_OK(cuMemRelease(o->v));
                break;
        case P_ARRAY:
        case P_ARRAY3D:
                CU_OK(cuArrayDestroy((CUarray)(uintptr_t)o->v));
                break;
        case P_MIPMAP:
                CU_OK(cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)o->v));
                break;
        }
}

static int run_path(enum path p)
{
        setup_ctx();
        EXPECT(st_slice_used() == ST_CTX, "context overhead charged: %llu",
               (unsigned long long)st_slice_used());
        if (p == P_ASYNC || p == P_POOL)
                CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
        if (p == P_POOL) {
                CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                         .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev } };
                CU_OK(cuMemPoolCreate(&pool, &props));
        }
        struct obj objs[64];
        unsigned n = 0;
        CUresult r;
        while ((r = alloc_one(p, &objs[n])) == CUDA_SUCCESS) {
                n++;
                if (getenv("SHIMTEST_DEBUG"))
                        fprintf(stderr, "after %u: books %llu sim %llu\n", n,
                                (unsigned long long)st_slice_used(), (unsigned long long)st_sim_used(getpid()));
                check_ground_truth();
                EXPECT(n < 64, "no refusal after %u allocations", n);
        }
        EXPECT(r == CUDA_ERROR_OUT_OF_MEMORY, "refusal is %d, not CUDA_ERROR_OUT_OF_MEMORY", (int)r);
        if (p != P_MIPMAP)
                EXPECT(n == ROOM, "%u allocations fitted, expected %llu (then %d)", n, (unsigned long long)ROOM, (int)r);
        else
                EXPECT(n == (ST_CAP - ST_CTX) / (44 * MiB), "%u mipmapped arrays fitted", n);
        uint64_t used = st_slice_used();
        EXPECT(used <= ST_CAP, "books %llu above cap", (unsigned long long)used);
        /* A refused call charges nothing. */
        struct obj extra;
        EXPECT(alloc_one(p, &extra) == CUDA_ERROR_OUT_OF_MEMORY, "second refusal");
        EXPECT(st_slice_used() == used, "a refused allocation changed the books");
        check_ground_truth();
        /* Freeing makes room again. */
        free_one(p, &objs[--n]);
        EXPECT(alloc_one(p, &objs[n]) == CUDA_SUCCESS, "no room after a free");
        n++;
        check_ground_truth();
        while (n)
                free_one(p, &objs[--n]);
        if (p == P_POOL)
                CU_OK(cuMemPoolDestroy(pool));
        size_t fr, tot;
        CU_OK(cuMemGetInfo(&fr, &tot));
        EXPECT(fr == ST_CAP - ST_CTX, "after freeing all, free = %zu", fr);
        EXPECT(st_slice_used() == ST_CTX, "books after freeing all: %llu", (unsigned long long)st_slice_used());
        CU_OK(cuDevicePrimaryCtxRelease(dev));
        EXPECT(st_slice_used() == 0, "books after the last release: %llu",
               (unsigned long long)st_slice_used());
        return 0;
}

/* ---- contexts ---- */

static int run_ctx(void)
{
        CU_OK(cuInit(0));
        CU_OK(cuDeviceGet(&dev, 0));
        CUcontext a, b;
        CU_OK(cuCtxCreate(&a, NULL, 0, dev));
        EXPECT(st_slice_used() == ST_CTX, "one context");
        CU_OK(cuCtxCreate(&b, NULL, 0, dev));
        EXPECT(st_slice_used() == 2 * ST_CTX, "two contexts");
        EXPECT(st_sim_used(getpid()) == 2 * ST_CTX, "simgpu agrees");
        CU_OK(cuCtxDestroy(b));
        EXPECT(st_slice_used() == ST_CTX, "destroy gives back");
        CUcontext p1, p2;
        CU_OK(cuDevicePrimaryCtxRetain(&p1, dev));
        CU_OK(cuDevicePrimaryCtxRetain(&p2, dev));
        EXPECT(st_slice_used() == 2 * ST_CTX, "primary charged once");
        CU_OK(cuDevicePrimaryCtxRelease(dev));
        EXPECT(st_slice_used() == 2 * ST_CTX, "primary still retained");
        CU_OK(cuDevicePrimaryCtxRelease(dev));
        EXPECT(st_slice_used() == ST_CTX, "primary released");
        /* Contexts count against the cap: 15 more fit, the 16th does not. */
        CUcontext many[16];
        unsigned n = 0;
        CUresult r;
        while ((r = cuCtxCreate(&many[n], NULL, 0, dev)) == CUDA_SUCCESS && n < 15)
                n++;
        EXPECT(n == 15 && r == CUDA_ERROR_OUT_OF_MEMORY, "contexts: %u then %d", n, (int)r);
        while (n)
                CU_OK(cuCtxDestroy(many[--n]));
        CU_OK(cuCtxDestroy(a));
        EXPECT(st_slice_used() == 0, "all contexts gone");
        return 0;
}

/* ---- two processes, and a killed one ---- */

int read_line(int fd, char *buf, size_t size)
{
        size_t n = 0;
        while (n + 1 < size) {
                ssize_t r = read(fd, buf + n, 1);
                if (r <= 0)
                        break;
                if (buf[n] == '\n')
                        break;
                n++;
        }
        buf[n] = '\0';
        return (int)n;
}

static int alloc_chunks(unsigned max, CUdeviceptr *out)
{
        unsigned n = 0;
        while (n < max && cuMemAlloc(&out[n], CHUNK) == CUDA_SUCCESS)
                n++;
        return (int)n;
}

static int run_mp_b(void)
{
        setup_ctx();
        CUdeviceptr p[16];
        int n = alloc_chunks(16, p);
        printf("%d\n", n);
        fflush(stdout);
        return 0;
}

static int run_mp_hold(void)
{
        setup_ctx();
        CUdeviceptr p[16];
        int n = alloc_chunks(6, p);
        printf("%d\n", n);
        fflush(stdout);
        pause();
        return 0;
}

static int run_multiproc(void)
{
        setup_ctx();
        CUdeviceptr p[16];
        EXPECT(alloc_chunks(8, p) == 8, "A takes 512 MiB");
        /* B: its context (64) + 6 chunks fill 64 + 512 + 64 + 384 = 1024. */
        int fd, pid = st_spawn("mp_b", &fd);
        char line[64];
        read_line(fd, line, sizeof(line));
        int st;
        waitpid(pid, &st, 0);
        close(fd);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "B failed");
        EXPECT(!strcmp(line, "6"), "B got %s chunks, expected 6 (one cap for both)", line);
        size_t fr, tot; /* a report credits processes that are gone */
        CU_OK(cuMemGetInfo(&fr, &tot));
        EXPECT(st_slice_used() == ST_CTX + 8 * CHUNK, "B's memory came back once it was gone");
        /* C takes the rest and is killed with SIGKILL. */
        pid = st_spawn("mp_hold", &fd);
        read_line(fd, line, sizeof(line));
        EXPECT(!strcmp(line, "6"), "C got %s chunks", line);
        EXPECT(st_slice_used() == ST_CAP, "slice full: %llu", (unsigned long long)st_slice_used());
        CUdeviceptr q;
        EXPECT(cuMemAlloc(&q, CHUNK) == CUDA_ERROR_OUT_OF_MEMORY, "full slice refuses");
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        close(fd);
        /* C's 448 MiB come back: 7 chunks now fit. */
        EXPECT(alloc_chunks(7, p + 8) == 7, "a killed process's memory was not reclaimed");
        EXPECT(st_slice_used() == ST_CAP, "books %llu", (unsigned long long)st_slice_used());
        check_ground_truth();
        return 0;
}

/* ---- threads racing for the last bytes ---- */

static unsigned granted[8];

static void *racer(void *arg)
{
        unsigned i = (unsigned)(uintptr_t)arg;
        CU_OK(cuCtxSetCurrent(ctx));
        CUdeviceptr d;
        while (cuMemAlloc(&d, 2 * MiB) == CUDA_SUCCESS)
                granted[i]++;
        return NULL;
}

static int run_threads(void)
{
        setup_ctx();
        pthread_t t[8];
        for (unsigned i = 0; i < 8; i++)
                pthread_create(&t[i], NULL, racer, (void *)(uintptr_t)i);
        unsigned total = 0;
        for (unsigned i = 0; i < 8; i++) {
                pthread_join(t[i], NULL);
                total += granted[i];
        }
        EXPECT(total == (ST_CAP - ST_CTX) / (2 * MiB), "threads got %u x 2 MiB", total);
        EXPECT(st_slice_used() == ST_CAP, "books");
        check_ground_truth();
        return 0;
}

/* ---- routes: dlsym and cuGetProcAddress ---- */

void fill_with(CUresult (*alloc)(CUdeviceptr *, size_t), const char *how)
{
        CUdeviceptr p[32];
        unsigned n = 0;
        CUresult r;
        while (n < 32 && (r = alloc(&p[n], CHUNK)) == CUDA_SUCCESS)
                n++;
        EXPECT(n == ROOM && r == CUDA_ERROR_OUT_OF_MEMORY, "%s: %u allocations then %d", how, n, (int)r);
        check_ground_truth();
        while (n)
                CU_OK(cuMemFree(p[--n]));
}

static int run_routes(void)
{
        setup_ctx();
        void *h = dlopen("libcuda.so.1", RTLD_NOW);
        EXPECT(h, "dlopen libcuda");
        void *self = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
        EXPECT(self == (void *)&cuMemAlloc, "RTLD_DEFAULT gives the shim's export");
        void *viah = dlsym(h, "cuMemAlloc_v2");
        EXPECT(viah == self, "dlsym(libcuda) gives the wrapper, not the driver");
        fill_with((CUresult(*)(CUdeviceptr *, size_t))viah, "dlsym(libcuda, cuMemAlloc_v2)");
        /* unhooked names pass through to the driver */
        void *sync = dlsym(h, "cuCtxSynchronize");
        EXPECT(sync && sync != dlsym(RTLD_DEFAULT, "cuMemGetInfo_v2"), "unhooked name");
        EXPECT(dlsym(h, "noSuchSymbol") == NULL, "missing names stay missing");

        typedef CUresult gpa2_t(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
        gpa2_t *gpa = (gpa2_t *)dlsym(h, "cuGetProcAddress_v2");
        EXPECT(gpa == (gpa2_t *)dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"), "cuGetProcAddress_v2 hooked");
        static const int versions[] = { 3020, 11030, 12000, 13000 };
        for (unsigned i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
                for (int pt = 0; pt < 2; pt++) {
                        void *f = NULL;
                        CUdriverProcAddressQueryResult qs;
                        cuuint64_t fl = pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                           : CU_GET_PROC_ADDRESS_DEFAULT;
                        CU_OK(gpa("cuMemAlloc", &f, versions[i], fl, &qs));
                        EXPECT(qs == CU_GET_PROC_ADDRESS_SUCCESS, "symbol status");
                        EXPECT(f == self, "cuGetProcAddress(cuMemAlloc, %d, %d) not hooked", versions[i], pt);
                        if (i == 0 && pt == 0)
                                fill_with((CUresult(*)(CUdeviceptr *, size_t))f, "cuGetProcAddress");
                }
        }
        /* per-thread variants map to the per-thread wrappers */
        void *f = NULL;
        CU_OK(gpa("cuMemAllocAsync", &f, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
        EXPECT(f == dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz"), "ptsz alloc");
        CU_OK(gpa("cuMemAllocAsync", &f, 13000, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
        EXPECT(f == dlsym(RTLD_DEFAULT, "cuMemAllocAsync"), "legacy-stream alloc");
        CU_OK(gpa("cuLaunchKernel", &f, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
        EXPECT(f == dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz"), "ptsz launch");
        CU_OK(gpa("cuCtxCreate", &f, 13000, 0, NULL));
        EXPECT(f == dlsym(RTLD_DEFAULT, "cuCtxCreate_v4"), "cuCtxCreate v4");
        CU_OK(gpa("cuCtxCreate", &f, 11040, 0, NULL));
        EXPECT(f == dlsym(RTLD_DEFAULT, "cuCtxCreate_v3"), "cuCtxCreate v3");
        CU_OK(gpa("cuCtxCreate", &f, 3020, 0, NULL));
        EXPECT(f == dlsym(RTLD_DEFAULT, "cuCtxCreate_v2"), "cuCtxCreate v2");
        CU_OK(gpa("cuGetProcAddress", &f, 13000, 0, NULL));
        EXPECT(f == (void *)gpa, "cuGetProcAddress itself stays hooked");
        CU_OK(gpa("cuGetProcAddress", &f, 11030, 0, NULL));
        EXPECT(f == dlsym(RTLD_DEFAULT, "cuGetProcAddress"), "legacy cuGetProcAddress hooked");
        /* the old entry point enforces too */
        typedef CUresult gpa1_t(const char *, void **, int, cuuint64_t);
        gpa1_t *gpa1 = (gpa1_t *)f;
        CU_OK(gpa1("cuMemAlloc", &f, 12000, 0));
        EXPECT(f == self, "legacy cuGetProcAddress maps cuMemAlloc");
        /* unknown names: the driver's answer, untouched */
        CUdriverProcAddressQueryResult qs = CU_GET_PROC_ADDRESS_SUCCESS;
        CUresult r = gpa("cuNoSuchThing", &f, 13000, 0, &qs);
        EXPECT(r != CUDA_SUCCESS || f == NULL, "unknown symbol");
        /* The driver answers with an internal entry point (simgpu, like the
         * real driver, never its exported address): it must come back
         * untouched, a function of libcuda, not of the shim. */
        CU_OK(gpa("cuCtxSynchronize", &f, 13000, 0, NULL));
        Dl_info di;
        EXPECT(f && dladdr(f, &di) && di.dli_fname && strstr(di.dli_fname, "libcuda"),
               "unhooked symbol passes through: %p is in %s", f, f && dladdr(f, &di) ? di.dli_fname : "?");
        return 0;
}

/* ---- reports ---- */

static int run_report(void)
{
        setup_ctx();
        size_t fr = 0, tot = 0;
        CU_OK(cuMemGetInfo(&fr, &tot));
        EXPECT(tot == ST_CAP && fr == ST_CAP - ST_CTX, "cuMemGetInfo %zu/%zu", fr, tot);
        CUdeviceptr p;
        CU_OK(cuMemAlloc(&p, 256 * MiB + 1));
        CU_OK(cuMemGetInfo(&fr, &tot));
        EXPECT(fr == ST_CAP - ST_CTX - 258 * MiB, "2 MiB granularity: free %zu", fr);
        size_t tm = 0;
        CU_OK(cuDeviceTotalMem(&tm, dev));
        EXPECT(tm == ST_CAP, "cuDeviceTotalMem %zu", tm);
        /* NULL out-pointers: whatever the driver says, no crash */
        CUresult r = cuMemGetInfo(NULL, &tot);
        if (r == CUDA_SUCCESS)
                EXPECT(tot == ST_CAP, "total with NULL free");
        EXPECT(nvmlInit_v2() == NVML_SUCCESS, "nvmlInit");
        nvmlDevice_t nd;
        EXPECT(nvmlDeviceGetHandleByIndex_v2(0, &nd) == NVML_SUCCESS, "nvml handle");
        nvmlMemory_t m;
        EXPECT(nvmlDeviceGetMemoryInfo(nd, &m) == NVML_SUCCESS, "nvml memory");
        EXPECT(m.total == ST_CAP && m.free == fr && m.used == m.total - m.free, "nvml %llu/%llu/%llu",
               m.total, m.free, m.used);
        nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
        EXPECT(nvmlDeviceGetMemoryInfo_v2(nd, &m2) == NVML_SUCCESS, "nvml memory v2");
        EXPECT(m2.total == ST_CAP && m2.free == fr, "nvml v2 %llu/%llu", m2.total, m2.free);
        /* dlsym route of NVML */
        void *nh = dlopen("libnvidia-ml.so.1", RTLD_NOW);
        EXPECT(nh && dlsym(nh, "nvmlDeviceGetMemoryInfo") == (void *)&nvmlDeviceGetMemoryInfo,
               "dlsym(libnvidia-ml) hooked");
        nvmlShutdown();
        /* A pointer the shim never charged goes to the driver; books untouched. */
        uint64_t before = st_slice_used();
        EXPECT(cuMemFree(p + 4096) != CUDA_SUCCESS, "driver refuses an interior pointer");
        EXPECT(st_slice_used() == before, "a refused free changed the books");
        CU_OK(cuMemFree(p));
        EXPECT(st_slice_used() == ST_CTX, "free gives back 258 MiB");
        EXPECT(cuMemFree(p) != CUDA_SUCCESS, "double free refused by the driver");
        EXPECT(st_slice_used() == ST_CTX, "a double free changed the books");
        return 0;
}

/* Another tenant holds most of the GPU: free never exceeds physical free. */
static int run_report_tight(void)
{
        setup_ctx();
        size_t fr = 0, tot = 0;
        CU_OK(cuMemGetInfo(&fr, &tot));
        EXPECT(tot == ST_CAP, "total %zu", tot);
        /* 2 GiB GPU, parent holds 1.5 GiB + its context, we hold a context */
        EXPECT(fr <= 2 * GiB - 1536 * MiB - 2 * ST_CTX, "free %zu above physical free", fr);
        EXPECT(fr > 0, "free %zu", fr);
        return 0;
}

/* ---- no slice: untouched ---- */

static int run_passthrough(void)
{
        setup_ctx();
        size_t fr, tot;
        CU_OK(cuMemGetInfo(&fr, &tot));
        EXPECT(tot == 8 * GiB, "full device visible: %zu", tot);
        CUdeviceptr p;
        CU_OK(cuMemAlloc(&p, 4 * GiB));
        CU_OK(cuMemFree(p));
        void *h = dlopen("libcuda.so.1", RTLD_NOW);
        EXPECT(h && dlsym(h, "cuMemAlloc_v2") != (void *)&cuMemAlloc, "no wrapper handed out");
        return 0;
}

/* ---- malformed config: fail closed, silently ---- */

static int run_failclosed(void)
{
        if (cuInit(0) != CUDA_ERROR_NOT_INITIALIZED)
                return 1;
        CUdeviceptr p;
        if (cuMemAlloc(&p, MiB) != CUDA_ERROR_NOT_INITIALIZED)
                return 2;
        CUcontext c;
        if (cuDevicePrimaryCtxRetain(&c, 0) != CUDA_ERROR_NOT_INITIALIZED)
                return 3;
        void *f;
        if (cuGetProcAddress("cuMemAlloc", &f, 13000, 0, NULL) != CUDA_ERROR_NOT_INITIALIZED)
                return 4;
        nvmlMemory_t m;
        if (nvmlDeviceGetMemoryInfo(NULL, &m) == NVML_SUCCESS)
                return 5;
        char path[512];
        snprintf(path, sizeof(path), "%s", getenv("GPUSLICE_LOG"));
        FILE *lf = fopen(path, "re");
        if (!lf)
                return 6;
        char line[2048];
        int found = 0;
        while (fgets(line, sizeof(line), lf))
                if (strstr(line, "line 2") && strstr(line, "failing closed"))
                        found = 1;
        fclose(lf);
        return found ? 0 : 7;
}

/* ---- a context on another GPU is refused ---- */

static int run_wrongdev(void)
{
        CU_OK(cuInit(0));
        CUdevice d1;
        CU_OK(cuDeviceGet(&d1, 1));
        CUcontext c;
        EXPECT(cuCtxCreate(&c, NULL, 0, d1) == CUDA_ERROR_INVALID_DEVICE, "ctx on GPU 1");
        EXPECT(cuDevicePrimaryCtxRetain(&c, d1) == CUDA_ERROR_INVALID_DEVICE, "primary on GPU 1");
        EXPECT(st_slice_used() == 0, "nothing charged");
        setup_ctx();
        return 0;
}

int main(int argc, char **argv)
{
        const char *role = getenv("SHIMTEST_ROLE");
        if (role) {
                static const struct {
                        const char *name;
                        int p;
                } paths[] = { { "alloc", P_ALLOC }, { "pitch", P_PITCH },     { "managed", P_MANAGED },
                              { "async", P_ASYNC }, { "pool", P_POOL },       { "vmm", P_VMM },
                              { "array", P_ARRAY }, { "array3d", P_ARRAY3D }, { "mipmap", P_MIPMAP } };
                for (unsigned i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
                        if (!strcmp(role, paths[i].name))
                                return run_path((enum path)paths[i].p);
                if (!strcmp(role, "ctx"))
                        return run_ctx();
                if (!strcmp(role, "multiproc"))
                        return run_multiproc();
                if (!strcmp(role, "mp_b"))
                        return run_mp_b();
                if (!strcmp(role, "mp_hold"))
                        return run_mp_hold();
                if (!strcmp(role, "threads"))
                        return run_threads();
                if (!strcmp(role, "routes"))
                        return run_routes();
                if (!strcmp(role, "report"))
                        return run_report();
                if (!strcmp(role, "report_tight"))
                        return run_report_tight();
                if (!strcmp(role, "passthrough"))
                        return run_passthrough();
                if (!strcmp(role, "failclosed"))
                        return run_failclosed();
                if (!strcmp(role, "wrongdev"))
                        return run_wrongdev();
                static const struct {
                        const char *name;
                        int (*fn)(void);
                } more[] = { { "forged", run_forged },         { "lim_b", run_lim_b },
                             { "biglimit", run_biglimit },     { "writable", run_writable },
                             { "halfmade", run_halfmade },     { "exit_racer", run_exit_racer },
                             { "exitrace", run_exitrace },     { "logfifo", run_logfifo },
                             { "graphalloc", run_graphalloc }, { "foreignconf", run_foreignconf },
                             { "opendir", run_opendir },       { "badbooks_dir", run_badbooks },
                             { "badbooks_size", run_badbooks },
                             { "vmm_lifetime", run_vmm_lifetime },
                             { "pool_destroy", run_pool_destroy },
                             { "pool_many", run_pool_many },
                             { "pool_noctx", run_pool_noctx },
                             { "ctx_lost", run_ctx_lost },
                             { "exit_blocker", run_exit_blocker },
                             { "exit_flush", run_exit_flush },
                             { "lt_hold", run_lt_hold },
                             { "fd_full", run_fd_full },
                             { "ipc", run_ipc },
                             { "ipc_exporter", run_ipc_exporter },
                             { "limits", run_limits },
                             { "globals", run_globals },
                             { "chunks", run_chunks } };
                for (unsigned i = 0; i < sizeof(more) / sizeof(more[0]); i++)
                        if (!strcmp(role, more[i].name))
                                return more[i].fn();
                fprintf(stderr, "unknown scenario %s\n", role);
                return 2;
        }
        if (argc < 2)
                return 2;
        struct st_setup s = { .config = good_conf };
        if (!strcmp(argv[1], "passthrough")) {
                if (access("/run/gpuslice/slice.conf", F_OK) == 0)
                        return 77; /* this machine is itself in a slice */
                s.config = NULL;
        } else if (!strcmp(argv[1], "failclosed")) {
                s.config = "version = 1\nmemory_limit = lots\n";
                s.expect_silent = 1;
        } else if (!strcmp(argv[1], "wrongdev")) {
                s.sim_devices = 2;
        } else if (!strcmp(argv[1], "forged")) {
                if (access("/run/gpuslice/slice.conf", F_OK) == 0)
                        return 77; /* the real default wins over the stand-in */
                s.forged = "version = 1\nslice = test\ngpu_uuid = %UUID%\n"
                           "memory_limit = 4294967296\ncompute_milli = 1000\n"
                           "slice_dir = %DIR%\n";
        } else if (!strcmp(argv[1], "writable")) {
                s.conf_mode = 0664;
                s.expect_silent = 1;
        } else if (!strcmp(argv[1], "foreignconf")) {
                if (geteuid() != 0)
                        return 77; /* only root can give a file away */
                s.conf_uid = 4242;
                s.expect_silent = 1;
        } else if (!strcmp(argv[1], "badbooks_dir") || !strcmp(argv[1], "badbooks_size")) {
                s.bad_books = !strcmp(argv[1], "badbooks_dir") ? 1 : 2;
                s.expect_silent = 1;
        } else if (!strcmp(argv[1], "opendir")) {
                s.dir_mode = 0777;
                s.expect_silent = 1;
        } else if (!strcmp(argv[1], "logfifo")) {
                s.log_fifo = 1;
        } else if (!strncmp(argv[1], "pool_", 5)) {
                /* Pools reserve exactly what they hand out (no 32 MiB chunks):
                 * 70 pools fit in the cap. */
                setenv("SIMGPU_POOL_CHUNK", "2097152", 1);
        } else if (!strcmp(argv[1], "report_tight")) {
                s.sim_memory = 2 * GiB;
                s.parent_holds = 1536 * MiB;
        }
        return st_run(argc, argv, &s);
}
