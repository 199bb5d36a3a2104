/* SPDX-License-Identifier: Apache-2.0 */
/* Shareable handles of VMM allocations (POSIX file descriptors passed over
 * a unix socket), judged by simgpu's ground truth (simgpu-smi), 64 MiB
 * context overhead (ENV). The model (sim/vmm_share.c, docs/simgpu.md): the
 * memory lives while any process holds a handle reference or a mapping of
 * it; it is charged to the exporter while the exporter holds it, then to an
 * importer that keeps it alive; the bytes are shared for real. */
#include "simtest.h"

#include <sys/socket.h>

#include "fdpass.h"

#define OVERHEAD (64 * MiB)
#define FD_TYPE CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR

static int sock[2]; /* [0] the parent's end, [1] the child's */

static void say(int fd, char c)
{
        CT_ASSERT(write(fd, &c, 1) == 1, "write");
}

static char hear(int fd)
{
        char c = 0;
        CT_ASSERT(read(fd, &c, 1) == 1, "read");
        return c;
}

/* Sends file descriptor fd over the socket (SCM_RIGHTS). */
static void send_fd(int s, int fd)
{
        CT_ASSERT(ct_send_fd(s, fd) == 0, "sendmsg");
}

static int recv_fd(int s)
{
        int fd = ct_recv_fd(s);
        CT_ASSERT(fd != -EBADMSG, "no descriptor received");
        CT_ASSERT(fd >= 0, "recvmsg");
        return fd;
}

static const CUmemAllocationProp share_prop = {
        .type = CU_MEM_ALLOCATION_TYPE_PINNED,
        .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
        .requestedHandleTypes = FD_TYPE,
};

/* Maps h (size bytes) at a fresh reservation, read-write. */
static CUdeviceptr map(CUmemGenericAllocationHandle h, size_t size)
{
        CUdeviceptr va;
        CT_CHECK(cuMemAddressReserve(&va, size, 0, 0, 0));
        CT_CHECK(cuMemMap(va, size, 0, h, 0));
        CUmemAccessDesc acc = { .location = share_prop.location,
                                .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        CT_CHECK(cuMemSetAccess(va, size, &acc, 1));
        return va;
}

static void unmap(CUdeviceptr va, size_t size)
{
        CT_CHECK(cuMemUnmap(va, size));
        CT_CHECK(cuMemAddressFree(va, size));
}

/* The importer: imports the descriptor it is sent, checks and writes the
 * bytes, then follows the parent's steps. */
static int importer(void)
{
        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx);
        int fd = recv_fd(sock[1]);
        CUmemGenericAllocationHandle h, h2;
        CT_CHECK(cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, FD_TYPE));
        CT_CHECK(cuMemImportFromShareableHandle(&h2, (void *)(intptr_t)fd, FD_TYPE));
        CT_ASSERT(h2 == h, "imported twice in one process: the same handle");
        CT_CHECK(cuMemRelease(h2)); /* one reference left */
        CT_CHECK(close(fd)); /* the handle does not need the descriptor */
        CUmemAllocationProp p;
        CT_CHECK(cuMemGetAllocationPropertiesFromHandle(&p, h));
        CT_ASSERT(p.type == CU_MEM_ALLOCATION_TYPE_PINNED &&
                  p.location.type == CU_MEM_LOCATION_TYPE_DEVICE && p.location.id == 0 &&
                  (p.requestedHandleTypes & FD_TYPE), "the import's properties");
        CUdeviceptr va = map(h, 256 * MiB);
        CT_ASSERT(st_peek(va) == 7, "the exporter's bytes: %u", st_peek(va));
        CT_CHECK(cuMemsetD32(va, 9, 1));
        say(sock[1], 'm'); /* mapped */
        CT_ASSERT(hear(sock[1]) == 'r', "step"); /* the exporter released it */
        CT_ASSERT(st_peek(va) == 9, "alive after the exporter's release: %u", st_peek(va));
        unmap(va, 256 * MiB);
        say(sock[1], 'u'); /* unmapped, the handle still held */
        CT_ASSERT(hear(sock[1]) == 'g', "step");
        CT_CHECK(cuMemRelease(h));
        say(sock[1], 'd'); /* released */
        CT_ASSERT(hear(sock[1]) == 'e', "step");
        return 0;
}

/* An importer that exits holding the memory after its exporter let go. */
static int dying_importer(void)
{
        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx);
        int fd = recv_fd(sock[1]);
        CUmemGenericAllocationHandle h;
        CT_CHECK(cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, FD_TYPE));
        close(fd);
        map(h, 128 * MiB);
        say(sock[1], 'm');
        CT_ASSERT(hear(sock[1]) == 'x', "step");
        return 0; /* exits mapped and holding it */
}

static pid_t spawn(int (*fn)(void))
{
        CT_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sock) == 0, "socketpair");
        pid_t pid = fork();
        CT_ASSERT(pid >= 0, "fork");
        if (pid == 0) {
                close(sock[0]);
                _exit(fn());
        }
        close(sock[1]);
        return pid;
}

int main(void)
{
        st_fresh();
        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx);
        pid_t me = getpid();

        /* export needs the type among the requested ones */
        CUmemAllocationProp plain = share_prop;
        plain.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
        CUmemGenericAllocationHandle h;
        int fd = -1;
        CT_CHECK(cuMemCreate(&h, 2 * MiB, &plain, 0));
        CT_EXPECT(cuMemExportToShareableHandle(&fd, h, FD_TYPE, 0), CUDA_ERROR_INVALID_VALUE);
        CT_CHECK(cuMemRelease(h));
        CT_ASSERT(st_used_of(me) == OVERHEAD, "start %llu", (unsigned long long)st_used_of(me));

        /* 1. export, import in another process, the exporter releases, the
         *    importer unmaps and releases */
        CT_CHECK(cuMemCreate(&h, 256 * MiB, &share_prop, 0));
        CT_EXPECT(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_WIN32, 0),
                  CUDA_ERROR_INVALID_VALUE);
        CT_EXPECT(cuMemExportToShareableHandle(&fd, h, FD_TYPE, 1), CUDA_ERROR_INVALID_VALUE);
        CT_CHECK(cuMemExportToShareableHandle(&fd, h, FD_TYPE, 0));
        CT_ASSERT(fd >= 0, "a descriptor");
        CUdeviceptr va = map(h, 256 * MiB);
        CT_CHECK(cuMemsetD32(va, 7, 1));
        pid_t imp = spawn(importer);
        send_fd(sock[0], fd);
        CT_ASSERT(hear(sock[0]) == 'm', "importer mapped");
        CT_ASSERT(st_peek(va) == 9, "the importer's write is seen: %u", st_peek(va));
        CT_ASSERT(st_used_of(me) == OVERHEAD + 256 * MiB, "exporter %llu",
                  (unsigned long long)st_used_of(me));
        CT_ASSERT(st_used_of(imp) == OVERHEAD,
                  "an import is not charged while the exporter holds it: %llu",
                  (unsigned long long)st_used_of(imp));
        CT_ASSERT(st_dev_used() == 2 * OVERHEAD + 256 * MiB, "device %llu",
                  (unsigned long long)st_dev_used());
        unmap(va, 256 * MiB);
        CT_ASSERT(st_used_of(me) == OVERHEAD + 256 * MiB, "unmapped, the handle still held: %llu",
                  (unsigned long long)st_used_of(me));
        CT_CHECK(cuMemRelease(h));
        CT_ASSERT(st_used_of(me) == OVERHEAD, "the exporter let go: %llu",
                  (unsigned long long)st_used_of(me));
        CT_ASSERT(st_used_of(imp) == OVERHEAD + 256 * MiB, "the importer keeps it alive: %llu",
                  (unsigned long long)st_used_of(imp));
        CT_ASSERT(st_dev_used() == 2 * OVERHEAD + 256 * MiB, "the memory lives: device %llu",
                  (unsigned long long)st_dev_used());
        say(sock[0], 'r');
        CT_ASSERT(hear(sock[0]) == 'u', "importer unmapped");
        CT_ASSERT(st_used_of(imp) == OVERHEAD + 256 * MiB, "its handle still holds it: %llu",
                  (unsigned long long)st_used_of(imp));
        say(sock[0], 'g');
        CT_ASSERT(hear(sock[0]) == 'd', "importer released");
        CT_ASSERT(st_used_of(imp) == OVERHEAD, "released: %llu",
                  (unsigned long long)st_used_of(imp));
        CT_ASSERT(st_dev_used() == 2 * OVERHEAD, "the last release frees it: %llu",
                  (unsigned long long)st_dev_used());
        /* the descriptor alone does not hold it in simgpu */
        CUmemGenericAllocationHandle again;
        CT_EXPECT(cuMemImportFromShareableHandle(&again, (void *)(intptr_t)fd, FD_TYPE),
                  CUDA_ERROR_INVALID_VALUE);
        CT_EXPECT(cuMemImportFromShareableHandle(&again, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_FABRIC),
                  CUDA_ERROR_NOT_SUPPORTED);
        close(fd);
        say(sock[0], 'e');
        CT_ASSERT(st_wait(imp) == 0, "importer failed");
        close(sock[0]);

        /* 2. the importer exits holding what its exporter released */
        CT_CHECK(cuMemCreate(&h, 128 * MiB, &share_prop, 0));
        CT_CHECK(cuMemExportToShareableHandle(&fd, h, FD_TYPE, 0));
        imp = spawn(dying_importer);
        send_fd(sock[0], fd);
        close(fd);
        CT_ASSERT(hear(sock[0]) == 'm', "importer mapped");
        CT_CHECK(cuMemRelease(h));
        CT_ASSERT(st_used_of(imp) == OVERHEAD + 128 * MiB, "the importer's now: %llu",
                  (unsigned long long)st_used_of(imp));
        say(sock[0], 'x');
        CT_ASSERT(st_wait(imp) == 0, "importer failed");
        close(sock[0]);
        CT_ASSERT(st_dev_used() == OVERHEAD, "freed with its last holder: %llu",
                  (unsigned long long)st_dev_used());
        printf("share: ok\n");
        return 0;
}
