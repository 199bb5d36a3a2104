/* SPDX-License-Identifier: Apache-2.0 */
/* Test helper: a tenant that goes around the shim with a second copy of the
 * driver library, loaded by path.
 *
 *   gs_second_driver MODE SHIM_BYTES COPY_BYTES GO_FIFO
 *
 * MODE is "good" (the shim's route only), "path" (dlopen of a private copy
 * of libcuda.so.1) or "newlm" (dlmopen(LM_ID_NEWLM) of that copy: a link
 * map of its own, where no preloaded library is). Every mode first does
 * what a well-behaved program does, through the ordinary driver (and so the
 * shim, when it is preloaded): context on device 0, SHIM_BYTES allocated,
 * "shim-ready" on stdout. It then waits for a line on the FIFO GO_FIFO. A
 * mode other than "good" then copies the libcuda.so.1 the process has
 * loaded to a private directory under $TMPDIR (or /tmp), loads the copy by
 * its path (dlmopen for "newlm": glibc's own, found in libc's symbol table,
 * since the shim refuses a driver in a new namespace), takes cuInit,
 * cuDeviceGet, cuDevicePrimaryCtxRetain, cuCtxSetCurrent and cuMemAlloc_v2
 * from the copy's dynamic symbol table, read in memory (the routes no
 * interposer can close: the shim answers dlsym and dlvsym on the copy with
 * its wrappers), checks with dladdr that each really is in the copy, makes
 * a primary context of its own with it and allocates COPY_BYTES: "ready"
 * (with the copy's path). Then (in every mode) it waits for a line on
 * GO_FIFO, says "exit" and exits 0.
 *
 * Only leaf entry points of the copy are called (cuMemAlloc_v2, not
 * cuMemAlloc): simgpu's legacy names call their _v2 through the PLT, which
 * in the default link map binds to the shim's exports, not to the copy.
 *
 * Exit status: 0; 2 usage; 3 the ordinary route failed; 4 copying or
 * loading the copy failed; 5 a CUDA call of the copy failed (its name and
 * result on stdout). */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

/* The copy's entry points, typed from cuda.h. */
struct copy_api {
        typeof(&cuInit) init;
        typeof(&cuDeviceGet) device_get;
        typeof(&cuDevicePrimaryCtxRetain) ctx_retain;
        typeof(&cuCtxSetCurrent) ctx_set_current;
        typeof(&cuMemAlloc) mem_alloc; /* cuda.h maps cuMemAlloc to cuMemAlloc_v2 */
};

/* Blocks until a line arrives on fd. The FIFO is held open for reading and
 * writing, so a writer's close is never an end of file and a line is never
 * taken for the next one's. Returns 0 or -errno. */
static int wait_line(int fd)
{
        char c = 0;
        while (c != '\n') {
                ssize_t n = read(fd, &c, 1);
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n == 0)
                        return -EPIPE;
        }
        return 0;
}

/* The ordinary route: context and bytes on device 0. Returns 0 or -1. */
static int ordinary_alloc(unsigned long long bytes)
{
        CUdevice dev;
        CUcontext ctx;
        CUdeviceptr p;
        if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
            cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
            cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
                return -1;
        if (bytes && cuMemAlloc(&p, bytes) != CUDA_SUCCESS)
                return -1;
        return 0;
}

/* Writes into buf the path of the libcuda.so.1 this process has loaded
 * (the real driver behind the shim). Returns 0 or -1. */
static int loaded_driver_path(char *buf, size_t size)
{
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        struct link_map *lm = NULL;
        if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name[0])
                return -1;
        int n = snprintf(buf, size, "%s", lm->l_name);
        dlclose(h);
        return n > 0 && (size_t)n < size ? 0 : -1;
}

/* Copies the file src to a new private directory dir (a buffer of 4096)
 * as libcuda.so.1; the copy's path in dst. Returns 0 or -1. */
static int copy_driver(const char *src, char *dir, char *dst, size_t size)
{
        const char *tmp = getenv("TMPDIR");
        if (snprintf(dir, 4096, "%s/gs-second-driver-XXXXXX", tmp && *tmp ? tmp : "/tmp") >= 4096 ||
            !mkdtemp(dir))
                return -1;
        if (snprintf(dst, size, "%s/libcuda.so.1", dir) >= (int)size)
                return -1;
        int in = open(src, O_RDONLY | O_CLOEXEC);
        int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
        struct stat sb;
        int r = in >= 0 && out >= 0 && fstat(in, &sb) == 0 ? 0 : -1;
        for (off_t off = 0; r == 0 && off < sb.st_size;) {
                ssize_t n = sendfile(out, in, &off, (size_t)(sb.st_size - off));
                if (n <= 0)
                        r = -1;
        }
        if (in >= 0)
                close(in);
        if (out >= 0 && close(out) != 0)
                r = -1;
        return r;
}

/* The address of function `name` in the dynamic symbol table of the loaded
 * object h (its GNU hash table), read in memory: what a tenant does to go
 * around dlsym and dlvsym. NULL when not there. */
static void *elf_sym(void *h, const char *name)
{
        struct link_map *lm = NULL;
        if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
                return NULL;
        const ElfW(Sym) *sym = NULL;
        const char *str = NULL;
        const uint32_t *gh = NULL;
        for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
                /* relocated in place by the dynamic linker, else an offset */
                uintptr_t p = d->d_un.d_ptr < lm->l_addr ? lm->l_addr + d->d_un.d_ptr : d->d_un.d_ptr;
                if (d->d_tag == DT_SYMTAB)
                        sym = (const ElfW(Sym) *)p;
                else if (d->d_tag == DT_STRTAB)
                        str = (const char *)p;
                else if (d->d_tag == DT_GNU_HASH)
                        gh = (const uint32_t *)p;
        }
        if (!sym || !str || !gh || !gh[0])
                return NULL;
        const ElfW(Addr) *bloom = (const ElfW(Addr) *)(const void *)(gh + 4);
        const uint32_t *buckets = (const uint32_t *)(const void *)(bloom + gh[2]);
        const uint32_t *chain = buckets + gh[0];
        uint32_t hash = 5381;
        for (const char *c = name; *c; c++)
                hash = hash * 33 + (unsigned char)*c;
        for (uint32_t i = buckets[hash % gh[0]]; i >= gh[1]; i++) {
                uint32_t ch = chain[i - gh[1]];
                if ((ch | 1) == (hash | 1) && sym[i].st_shndx != SHN_UNDEF &&
                    strcmp(str + sym[i].st_name, name) == 0)
                        return (void *)(lm->l_addr + sym[i].st_value);
                if (ch & 1)
                        break;
        }
        return NULL;
}

/* elf_sym on the copy's handle; NULL unless the symbol is in the copy. */
static void *copy_sym(void *h, const char *copy, const char *name)
{
        void *p = elf_sym(h, name);
        Dl_info info;
        if (!p || !dladdr(p, &info) || !info.dli_fname || strcmp(info.dli_fname, copy) != 0) {
                printf("not-in-copy %s %s\n", name, p && dladdr(p, &info) ? info.dli_fname : "-");
                return NULL;
        }
        return p;
}

static int load_copy(const char *mode, const char *copy, struct copy_api *api)
{
        void *h = NULL;
        if (strcmp(mode, "newlm") == 0) {
                void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
                typeof(&dlmopen) real = libc ? (typeof(&dlmopen))elf_sym(libc, "dlmopen") : NULL;
                if (!real) {
                        printf("dlopen: no dlmopen in libc's symbol table\n");
                        return -1;
                }
                h = real(LM_ID_NEWLM, copy, RTLD_NOW | RTLD_LOCAL);
        } else {
                h = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
        }
        if (!h) {
                printf("dlopen %s\n", dlerror());
                return -1;
        }
        api->init = copy_sym(h, copy, "cuInit");
        api->device_get = copy_sym(h, copy, "cuDeviceGet");
        api->ctx_retain = copy_sym(h, copy, "cuDevicePrimaryCtxRetain");
        api->ctx_set_current = copy_sym(h, copy, "cuCtxSetCurrent");
        api->mem_alloc = copy_sym(h, copy, "cuMemAlloc_v2");
        if (!api->init || !api->device_get || !api->ctx_retain || !api->ctx_set_current ||
            !api->mem_alloc)
                return -1;
        return 0;
}

#define COPY_CALL(call)                                                \
        do {                                                           \
                CUresult r_ = (call);                                  \
                if (r_ != CUDA_SUCCESS) {                              \
                        printf("copy-failed %s %d\n", #call, (int)r_); \
                        return 5;                                      \
                }                                                      \
        } while (0)

/* The second copy's route: context and bytes on device 0. Exit status. */
static int copy_alloc(const char *mode, unsigned long long bytes)
{
        char src[4096], dir[4096], copy[4200];
        struct copy_api api;
        if (loaded_driver_path(src, sizeof(src)) < 0 ||
            copy_driver(src, dir, copy, sizeof(copy)) < 0) {
                printf("copy-failed: %s\n", strerror(errno));
                return 4;
        }
        int r = load_copy(mode, copy, &api);
        /* The copy stays mapped: the file and its directory can go. */
        unlink(copy);
        rmdir(dir);
        if (r < 0)
                return 4;
        CUdevice dev;
        CUcontext ctx;
        CUdeviceptr p;
        COPY_CALL(api.init(0));
        COPY_CALL(api.device_get(&dev, 0));
        COPY_CALL(api.ctx_retain(&ctx, dev));
        COPY_CALL(api.ctx_set_current(ctx));
        COPY_CALL(api.mem_alloc(&p, bytes));
        printf("ready %s\n", copy);
        return 0;
}

int main(int argc, char **argv)
{
        if (argc != 5)
                return 2;
        const char *mode = argv[1];
        if (strcmp(mode, "good") != 0 && strcmp(mode, "path") != 0 && strcmp(mode, "newlm") != 0)
                return 2;
        char *end1 = NULL, *end2 = NULL;
        unsigned long long shim_bytes = strtoull(argv[2], &end1, 10);
        unsigned long long copy_bytes = strtoull(argv[3], &end2, 10);
        if (!end1 || *end1 || !end2 || *end2)
                return 2;
        setvbuf(stdout, NULL, _IOLBF, 0);
        int go = open(argv[4], O_RDWR | O_CLOEXEC);
        if (go < 0)
                return 2;
        if (ordinary_alloc(shim_bytes) < 0) {
                printf("no-cuda\n");
                return 3;
        }
        printf("shim-ready\n");
        if (strcmp(mode, "good") != 0) {
                if (wait_line(go) < 0)
                        return 2;
                int r = copy_alloc(mode, copy_bytes);
                if (r != 0)
                        return r;
        }
        if (wait_line(go) < 0)
                return 2;
        printf("exit\n");
        return 0;
}
