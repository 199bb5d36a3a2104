/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libcuda: shareable handles of VMM allocations
 * (cuMemExportToShareableHandle, cuMemImportFromShareableHandle) with
 * CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.
 *
 * The handle is a real file descriptor: a dup of the allocation's memfd,
 * which a process can pass over a unix socket (SCM_RIGHTS). The importer
 * finds the machine-wide record (a sim_ipc_rec with vmm set, shared with
 * ipc.c and the reaper) by the memfd's inode and gets a handle of its own
 * to the same bytes. The model, after the real driver's reference counting:
 *  - the memory lives while any process holds a handle reference or a
 *    mapping of it (the last cuMemRelease / cuMemUnmap of the last holder,
 *    or its death, frees it);
 *  - it is charged once: to the exporter while it holds it, then to an
 *    importer that keeps it alive (NVML and simgpu-smi show it under that
 *    process);
 *  - the file descriptor alone does not hold it (a real driver's does:
 *    simgpu cannot see its close); importing from a descriptor whose memory
 *    was freed fails with CUDA_ERROR_INVALID_VALUE;
 *  - export needs the type in the allocation's requestedHandleTypes
 *    (CUDA_ERROR_INVALID_VALUE otherwise); other types than POSIX file
 *    descriptors are CUDA_ERROR_NOT_SUPPORTED;
 *  - importing twice in one process returns the same handle with one more
 *    reference (the driver does not promise a new one). */
#include "sim_cuda.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* This process's shared handles (guarded by sim_g.mu). */
static struct sim_vmm_handle *shared;

/* Under the state lock: this process leaves its shared-handle record slot
 * (id). */
static void leave(struct sim_state *st, int slot, uint64_t id)
{
        sim_ipc_leave_own(st, slot, id, true);
}

/* Under sim_g.mu. */
static void unlink_shared(struct sim_vmm_handle *h)
{
        for (struct sim_vmm_handle **pp = &shared; *pp; pp = &(*pp)->share_next)
                if (*pp == h) {
                        *pp = h->share_next;
                        return;
                }
}

bool sim_vmm_share_leave(struct sim_vmm_handle *h)
{
        pthread_mutex_lock(&sim_g.mu);
        bool is_shared = h->share_slot >= 0;
        if (is_shared)
                unlink_shared(h);
        pthread_mutex_unlock(&sim_g.mu);
        if (!is_shared)
                return false;
        if (h->share_pid != (int)getpid())
                return true; /* a forked child's copy: the parent holds it, not us */
        struct sim_state *st = sim_g.st;
        sim_lock(st);
        leave(st, h->share_slot, h->share_id);
        sim_unlock(st);
        return true;
}

/* Under sim_g.mu: makes h shared (a record with this process as its
 * exporter and owner: it is charged for h already). CUDA_SUCCESS or
 * CUDA_ERROR_OUT_OF_MEMORY (no free record). */
static CUresult share_locked(struct sim_vmm_handle *h)
{
        struct stat sb;
        if (fstat(h->fd, &sb) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        struct sim_state *st = sim_g.st;
        sim_lock(st);
        /* memfd -1: not an IPC handle's, cuIpcOpenMemHandle cannot map it */
        int slot = sim_ipc_claim(st, h->dev, -1, h->size, true, (uint64_t)sb.st_ino);
        if (slot >= 0)
                h->share_id = st->ipc[slot].id;
        sim_unlock(st);
        if (slot < 0) {
                sim_log("no free record for a shareable handle (%d machine-wide)", SIM_MAX_IPC);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        h->share_slot = slot;
        h->share_pid = (int)getpid();
        h->share_next = shared;
        shared = h;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle hh,
                                                 CUmemAllocationHandleType type,
                                                 unsigned long long flags)
{
        SIM_NEED_INIT();
        struct sim_vmm_handle *h = sim_vmm_handle_of(hh);
        if (!out || !h || flags || type == CU_MEM_HANDLE_TYPE_NONE ||
            !(h->prop.requestedHandleTypes & type))
                return CUDA_ERROR_INVALID_VALUE;
        if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
                return CUDA_ERROR_NOT_SUPPORTED;
        pthread_mutex_lock(&sim_g.mu);
        CUresult r = CUDA_SUCCESS;
        if (h->share_slot < 0 || h->share_pid != (int)getpid())
                r = share_locked(h);
        int fd = r == CUDA_SUCCESS ? dup(h->fd) : -1;
        pthread_mutex_unlock(&sim_g.mu);
        if (r != CUDA_SUCCESS)
                return r;
        if (fd < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *(int *)out = fd;
        return CUDA_SUCCESS;
}

/* The program-visible ordinal of physical device phys, or -1. */
static int ordinal_of(int phys)
{
        for (int o = 0; o < sim_g.nvis; o++)
                if (sim_g.vis[o] == phys)
                        return o;
        return -1;
}

/* Under sim_g.mu and the state lock: joins the record of the memfd with
 * inode ino and `bytes` bytes as an importer; its slot, or -1 with *rc. */
static int join_locked(struct sim_state *st, uint64_t ino, uint64_t bytes, CUresult *rc)
{
        for (int i = 0; i < SIM_MAX_IPC; i++) {
                struct sim_ipc_rec *r = &st->ipc[i];
                if (!r->in_use || !r->vmm || r->ino != ino || r->bytes != bytes)
                        continue;
                if (r->exporter == sim_g.proc && r->exporter_holds)
                        return i; /* its own export, through a handle it holds */
                int k = -1;
                for (int j = 0; j < SIM_IPC_IMPORTERS; j++)
                        if (r->imp[j] == sim_g.proc || (k < 0 && r->imp[j] < 0))
                                k = j;
                if (k < 0) {
                        sim_log("shareable handle: more than %d importers", SIM_IPC_IMPORTERS);
                        *rc = CUDA_ERROR_OUT_OF_MEMORY;
                        return -1;
                }
                r->imp[k] = sim_g.proc;
                r->imp_refs[k] = 1;
                return i;
        }
        *rc = CUDA_ERROR_INVALID_VALUE; /* not an allocation's, or freed */
        return -1;
}

SIM_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *out, void *os,
                                                   CUmemAllocationHandleType type)
{
        SIM_NEED_INIT();
        if (!out)
                return CUDA_ERROR_INVALID_VALUE;
        if (type == CU_MEM_HANDLE_TYPE_WIN32 || type == CU_MEM_HANDLE_TYPE_WIN32_KMT ||
            type == CU_MEM_HANDLE_TYPE_FABRIC)
                return CUDA_ERROR_NOT_SUPPORTED;
        if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
                return CUDA_ERROR_INVALID_VALUE;
        int fd = (int)(intptr_t)os;
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0 ||
            (uint64_t)sb.st_size % SIM_GRANULE)
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t ino = (uint64_t)sb.st_ino, bytes = (uint64_t)sb.st_size;
        pthread_mutex_lock(&sim_g.mu);
        for (struct sim_vmm_handle *h = shared; h; h = h->share_next) {
                struct stat hs;
                if (h->share_pid == (int)getpid() && h->magic == SIM_MAGIC_VMM && h->refs > 0 &&
                    fstat(h->fd, &hs) == 0 && hs.st_ino == sb.st_ino) {
                        h->refs++; /* held here already: the same handle */
                        pthread_mutex_unlock(&sim_g.mu);
                        *out = (CUmemGenericAllocationHandle)(uintptr_t)h;
                        return CUDA_SUCCESS;
                }
        }
        struct sim_state *st = sim_g.st;
        CUresult rc = CUDA_SUCCESS;
        sim_lock(st);
        sim_reap(st, false);
        int slot = join_locked(st, ino, bytes, &rc);
        int dev = slot >= 0 ? st->ipc[slot].dev : -1;
        uint64_t id = slot >= 0 ? st->ipc[slot].id : 0;
        sim_unlock(st);
        struct sim_vmm_handle *h = NULL;
        int ord = dev >= 0 ? ordinal_of(dev) : -1;
        if (slot >= 0 && ord < 0)
                rc = CUDA_ERROR_NOT_SUPPORTED; /* on a GPU this process cannot see */
        int own = -1;
        if (rc == CUDA_SUCCESS) {
                h = calloc(1, sizeof(*h));
                own = h ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
                if (own < 0)
                        rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (rc != CUDA_SUCCESS) {
                free(h);
                if (slot >= 0) {
                        sim_lock(st);
                        leave(st, slot, id);
                        sim_unlock(st);
                }
                pthread_mutex_unlock(&sim_g.mu);
                return rc;
        }
        *h = (struct sim_vmm_handle){
                .magic = SIM_MAGIC_VMM, .fd = own, .dev = dev, .refs = 1, .size = bytes,
                .prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                          .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = ord },
                          .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR },
                .share_slot = slot, .share_pid = (int)getpid(), .share_id = id, .share_next = shared,
        };
        shared = h;
        pthread_mutex_unlock(&sim_g.mu);
        *out = (CUmemGenericAllocationHandle)(uintptr_t)h;
        return CUDA_SUCCESS;
}
