/* SPDX-License-Identifier: Apache-2.0 */
/* Shim scenarios that check a tenant cannot loosen its slice: the config
 * that wins, the recorded limit, writable configs, half-made books, exits
 * racing allocations, a FIFO log, graph memory nodes. Dispatched by
 * shim_test.c. */
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

/* ---- a tenant cannot raise its own limits ---- */

int log_has(const char *needle)
{
        FILE *lf = fopen(getenv("GPUSLICE_LOG"), "re");
        if (!lf)
                return 0;
        char line[2048];
        int found = 0;
        while (fgets(line, sizeof(line), lf))
                if (strstr(line, needle))
                        found = 1;
        fclose(lf);
        return found;
}

/* The default config exists (here: GPUSLICE_TEST_DEFAULT_CONFIG stands in
 * for /run/gpuslice/slice.conf): GPUSLICE_CONFIG naming a forged config
 * with a 4 GiB limit and no context overhead is ignored. */
int run_forged(void)
{
        setup_ctx();
        EXPECT(st_slice_used() == ST_CTX, "the authoritative config's context overhead: %llu",
               (unsigned long long)st_slice_used());
        size_t fr, tot;
        CU_OK(cuMemGetInfo(&fr, &tot));
        EXPECT(tot == ST_CAP, "total %zu: the forged limit was used", tot);
        fill_with(cuMemAlloc, "forged GPUSLICE_CONFIG");
        EXPECT(log_has("ignored"), "the log says GPUSLICE_CONFIG was ignored");
        return 0;
}

int run_lim_b(void)
{
        setup_ctx();
        CUdeviceptr p[32];
        unsigned n = 0;
        while (n < 32 && cuMemAlloc(&p[n], CHUNK) == CUDA_SUCCESS)
                n++;
        size_t fr = 0, tot = 0;
        CU_OK(cuMemGetInfo(&fr, &tot));
        printf("%u %zu\n", n, tot);
        fflush(stdout);
        return 0;
}

/* A second process of the slice whose config says 4 GiB is held to the
 * 1 GiB the slice's first process recorded in the shared file. */
int run_biglimit(void)
{
        setup_ctx();
        char text[4096], big[600];
        const char *conf = getenv("GPUSLICE_CONFIG");
        FILE *f = fopen(conf, "re");
        EXPECT(f, "open %s", conf);
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        char *lim = strstr(text, "memory_limit = 1073741824");
        EXPECT(lim, "config has the 1 GiB limit");
        memcpy(lim, "memory_limit = 4294967296", 25); /* same length */
        snprintf(big, sizeof(big), "%s.big", conf);
        f = fopen(big, "we");
        EXPECT(f, "write %s", big);
        fputs(text, f);
        fclose(f);
        EXPECT(chmod(big, 0644) == 0, "chmod");
        setenv("GPUSLICE_CONFIG", big, 1);
        int fd, pid = st_spawn("lim_b", &fd);
        char line[64];
        read_line(fd, line, sizeof(line));
        int st;
        waitpid(pid, &st, 0);
        close(fd);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "B failed");
        unsigned got = 0;
        unsigned long long tot = 0;
        EXPECT(sscanf(line, "%u %llu", &got, &tot) == 2, "B said '%s'", line);
        /* A's context + B's context + 14 chunks = 1 GiB */
        EXPECT(got == ROOM - 1, "B got %u chunks with a 4 GiB config; the slice's cap allows %llu", got,
               (unsigned long long)(ROOM - 1));
        EXPECT(tot == ST_CAP, "B reports total %llu, not the slice's cap", tot);
        return 0;
}

/* A group-writable config is refused: fail closed, with the reason logged. */
int run_writable(void)
{
        if (cuInit(0) != CUDA_ERROR_NOT_INITIALIZED)
                return 1;
        CUdeviceptr p;
        if (cuMemAlloc(&p, MiB) != CUDA_ERROR_NOT_INITIALIZED)
                return 2;
        return log_has("group- or world-writable") ? 0 : 3;
}

/* A config owned by another user (neither root nor this process's user) is
 * refused: it could have been written by anyone but the daemon. */
int run_foreignconf(void)
{
        if (cuInit(0) != CUDA_ERROR_NOT_INITIALIZED)
                return 1;
        CUdeviceptr p;
        if (cuMemAlloc(&p, MiB) != CUDA_ERROR_NOT_INITIALIZED)
                return 2;
        return log_has("owned by uid 4242, expected root") ? 0 : 3;
}

/* A config in a directory others can write (no sticky bit) is refused:
 * another user could have swapped it. */
int run_opendir(void)
{
        if (cuInit(0) != CUDA_ERROR_NOT_INITIALIZED)
                return 1;
        return log_has("others could replace the config") ? 0 : 3;
}

/* Books the shim cannot use (a directory, garbage of another size: what a
 * tenant can make of the file it may write) fail the slice closed for
 * memory: nothing is allocated uncharged. */
int run_badbooks(void)
{
        if (cuInit(0) != CUDA_ERROR_NOT_INITIALIZED)
                return 1;
        CUdeviceptr p;
        if (cuMemAlloc(&p, MiB) != CUDA_ERROR_NOT_INITIALIZED)
                return 2;
        return log_has("unusable") && log_has("failing closed") ? 0 : 3;
}

/* ---- the creator of the books died before storing the magic ---- */

int run_halfmade(void)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", getenv("SHIMTEST_SLICE_DIR"), GS_SLICE_STATE_FILE);
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0660);
        EXPECT(fd >= 0, "the books must not exist before the first CUDA call: %s", strerror(errno));
        EXPECT(ftruncate(fd, (off_t)sizeof(struct gs_slice_state)) == 0, "ftruncate");
        close(fd);
        setup_ctx();
        EXPECT(st_slice_used() == ST_CTX, "books work after a half-made file");
        CUdeviceptr p;
        CU_OK(cuMemAlloc(&p, CHUNK));
        EXPECT(st_slice_used() == ST_CTX + CHUNK, "charged");
        CU_OK(cuMemFree(p));
        EXPECT(log_has("half-created"), "the log says so");
        return 0;
}

/* ---- threads allocating while the process exits ---- */

static void *exit_racer_thread(void *arg)
{
        (void)arg;
        CU_OK(cuCtxSetCurrent(ctx));
        for (;;) {
                CUdeviceptr d;
                if (cuMemAlloc(&d, 2 * MiB) == CUDA_SUCCESS)
                        cuMemFree(d);
        }
        return NULL;
}

int run_exit_racer(void)
{
        setup_ctx();
        pthread_t t[4];
        for (unsigned i = 0; i < 4; i++)
                pthread_create(&t[i], NULL, exit_racer_thread, NULL);
        struct timespec ts = { 0, 5 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        exit(0); /* destructors run while the threads still allocate */
}

/* Every exit leaves the slice's books as they were once the process is
 * gone (credited by the next report): nothing charged to a slot no one
 * holds. */
int run_exitrace(void)
{
        setenv("ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0", 1);
        setup_ctx();
        for (int i = 0; i < 20; i++) {
                int fd, pid = st_spawn("exit_racer", &fd);
                int st;
                waitpid(pid, &st, 0);
                close(fd);
                size_t fr, tot;
                CU_OK(cuMemGetInfo(&fr, &tot));
                uint64_t used = st_slice_used();
                EXPECT(used == ST_CTX, "round %d: %llu bytes stay charged after the process exited", i,
                       (unsigned long long)used);
        }
        return 0;
}

/* ---- GPUSLICE_LOG naming a FIFO does not hang the program ---- */

int run_logfifo(void)
{
        setup_ctx();
        CUdeviceptr p;
        CU_OK(cuMemAlloc(&p, CHUNK));
        CU_OK(cuMemFree(p));
        return 0;
}

/* ---- graph memory nodes are refused inside a slice ---- */

int run_graphalloc(void)
{
        setup_ctx();
        typedef CUresult add_t(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                               CUDA_MEM_ALLOC_NODE_PARAMS *);
        add_t *add = (add_t *)dlsym(RTLD_DEFAULT, "cuGraphAddMemAllocNode");
        EXPECT(add, "the shim exports cuGraphAddMemAllocNode");
        CUDA_MEM_ALLOC_NODE_PARAMS mp = { .bytesize = 4 * GiB };
        CUgraphNode node;
        EXPECT(add(&node, NULL, NULL, 0, &mp) == CUDA_ERROR_NOT_SUPPORTED, "mem alloc node refused");
        typedef CUresult add2_t(CUgraphNode *, CUgraph, const CUgraphNode *, const CUgraphEdgeData *,
                                size_t, CUgraphNodeParams *);
        add2_t *add2 = (add2_t *)dlsym(RTLD_DEFAULT, "cuGraphAddNode_v2");
        EXPECT(add2, "the shim exports cuGraphAddNode_v2");
        CUgraphNodeParams gp = { .type = CU_GRAPH_NODE_TYPE_MEM_ALLOC };
        EXPECT(add2(&node, NULL, NULL, NULL, 0, &gp) == CUDA_ERROR_NOT_SUPPORTED,
               "generic mem alloc node refused");
        EXPECT(st_slice_used() == ST_CTX, "nothing charged");
        EXPECT(log_has("graph memory-allocation nodes are not supported"), "logged");
        return 0;
}

