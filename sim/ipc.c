/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libcuda: CUDA IPC memory handles (cuIpcGetMemHandle,
 * cuIpcOpenMemHandle, cuIpcCloseMemHandle).
 *
 * The model, after the real driver (its kernel module counts a shared
 * allocation once per reference: the exporter's "shared owned", each
 * importer's "shared duped", and the last reference alone as that process's
 * "private" memory):
 *  - the exported allocation is charged once, to the exporter while it
 *    holds it; importers are not charged for it while it does;
 *  - the memory lives while the exporter's allocation or any import does:
 *    a cuMemFree (or the exit) of the exporter while importers hold it
 *    leaves it allocated, and its charge moves to an importer (the owner in
 *    sim_ipc_rec), which NVML and simgpu-smi then show it under; the last
 *    close frees it;
 *  - reopening a handle in the same process (context) adds a reference and
 *    returns the same pointer; the exporting process cannot open its own
 *    handle (CUDA_ERROR_INVALID_CONTEXT); a handle whose memory the
 *    exporter freed, or whose exporter is gone, cannot be opened any more
 *    (CUDA_ERROR_INVALID_HANDLE).
 * The bytes are shared for real: at export the allocation's resident pages
 * move into a memfd mapped over it, and importers map that memfd through
 * /proc/<exporter>/fd (same user). Only cuMemAlloc allocations (SIM_A_DEV)
 * can be exported. */
#include "sim_cuda.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SIM_IPC_MAGIC 0x3143504953474d53ull /* "SMGSIPC1" */

/* The handle's bytes (CU_IPC_HANDLE_SIZE = 64). */
struct sim_ipc_handle {
        uint64_t magic;
        uint64_t id;
        uint64_t bytes;
        int32_t slot; /* sim_ipc_rec index */
        int32_t dev;
};
_Static_assert(sizeof(struct sim_ipc_handle) <= CU_IPC_HANDLE_SIZE, "fits a CUipcMemHandle");

/* This process's exports and imports, guarded by ipc_mu. Lock order:
 * ipc_mu, then sim_g.mu (the allocation table), then the state lock. */
static pthread_mutex_t ipc_mu = PTHREAD_MUTEX_INITIALIZER;
struct ipc_local {
        struct ipc_local *next;
        bool import;
        int slot;      /* sim_ipc_rec index */
        uint64_t id;
        uint64_t base; /* our address of it */
        uint64_t size;
        int memfd;     /* exports: the memory's file */
        unsigned refs; /* imports: opens not yet closed */
        struct CUctx_st *ctx;
};
static struct ipc_local *locals;
static int n_exports; /* atomic: the free path looks only when there are some */

void sim_ipc_forget(void)
{
        pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
        memcpy(&ipc_mu, &mu, sizeof(mu));
        locals = NULL; /* the parent's: its nodes are left to the child's heap */
        __atomic_store_n(&n_exports, 0, __ATOMIC_RELAXED);
}

/* Under ipc_mu. */
static struct ipc_local *local_find(bool import, uint64_t base, uint64_t id)
{
        for (struct ipc_local *l = locals; l; l = l->next)
                if (l->import == import && (import ? l->id == id : l->base == base))
                        return l;
        return NULL;
}

/* Under ipc_mu. */
static void local_unlink(struct ipc_local *x)
{
        for (struct ipc_local **pp = &locals; *pp; pp = &(*pp)->next)
                if (*pp == x) {
                        *pp = x->next;
                        return;
                }
}

void sim_ipc_leave_own(struct sim_state *st, int slot, uint64_t id, bool vmm_only)
{
        struct sim_ipc_rec *r = &st->ipc[slot];
        if (!r->in_use || (vmm_only && !r->vmm) || r->id != id)
                return;
        int dev = r->dev;
        uint64_t give = sim_ipc_leave(st, r, sim_g.proc);
        if (give && dev >= 0 && dev < SIM_MAX_DEVICES) {
                uint64_t *u = &st->proc[sim_g.proc].used[dev], *d = &st->dev[dev].used;
                *u = *u >= give ? *u - give : 0;
                *d = *d >= give ? *d - give : 0;
        }
}

/* Under the state lock: this process leaves its IPC record slot (id). */
static void leave(struct sim_state *st, int slot, uint64_t id)
{
        sim_ipc_leave_own(st, slot, id, false);
}

/* Moves the resident pages of [base, base+size) into a new memfd and maps
 * it over the range (same address, same bytes). The fd, or -1. */
static int share_pages(uint64_t base, uint64_t size)
{
        int fd = memfd_create("simgpu-ipc", MFD_CLOEXEC);
        if (fd < 0)
                return -1;
        if (ftruncate(fd, (off_t)size) < 0)
                goto fail;
        long pg = sysconf(_SC_PAGESIZE);
        size_t npages = size / (uint64_t)pg;
        unsigned char *vec = malloc(npages ? npages : 1);
        if (!vec || mincore((void *)(uintptr_t)base, size, vec) < 0) {
                free(vec);
                goto fail;
        }
        for (size_t i = 0; i < npages; i++) {
                if (!(vec[i] & 1))
                        continue; /* never touched: zero, a hole in the file */
                off_t off = (off_t)(i * (size_t)pg);
                if (pwrite(fd, (void *)(uintptr_t)(base + (uint64_t)off), (size_t)pg, off) != pg) {
                        free(vec);
                        goto fail;
                }
        }
        free(vec);
        if (mmap((void *)(uintptr_t)base, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                 0) == MAP_FAILED)
                goto fail;
        return fd;
fail:
        close(fd);
        return -1;
}

/* Under the state lock: a free record slot, or -1. */
int sim_ipc_claim(struct sim_state *st, int dev, int memfd, uint64_t bytes, bool vmm, uint64_t ino)
{
        for (int slot = 0; slot < SIM_MAX_IPC; slot++) {
                struct sim_ipc_rec *r = &st->ipc[slot];

                if (r->in_use)
                        continue;
                memset(r, 0, sizeof(*r));
                for (int k = 0; k < SIM_IPC_IMPORTERS; k++)
                        r->imp[k] = -1;
                r->id = ++st->next_ipc_id;
                r->vmm = vmm;
                r->ino = ino;
                r->dev = dev;
                r->exporter = r->owner = sim_g.proc;
                r->exporter_holds = 1;
                r->exporter_pid = (int32_t)getpid();
                r->memfd = memfd;
                r->bytes = bytes;
                r->in_use = 1;
                return slot;
        }
        return -1;
}

SIM_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *out, CUdeviceptr dptr)
{
        SIM_NEED_INIT();
        if (!out)
                return CUDA_ERROR_INVALID_VALUE;
        if (!sim_ctx_current())
                return CUDA_ERROR_INVALID_CONTEXT;
        struct sim_alloc a;
        if (!sim_table_find(dptr, 1, SIM_A_DEV, &a) || a.base != dptr)
                return CUDA_ERROR_INVALID_VALUE;
        struct sim_state *st = sim_g.st;
        struct sim_ipc_handle h = { .magic = SIM_IPC_MAGIC, .bytes = a.charged, .dev = a.dev };
        pthread_mutex_lock(&ipc_mu);
        struct ipc_local *l = local_find(false, dptr, 0);
        if (l) { /* exported before: the same handle */
                h.id = l->id;
                h.slot = l->slot;
                goto done;
        }
        l = calloc(1, sizeof(*l));
        int fd = l ? share_pages(a.base, a.size) : -1;
        if (fd < 0) {
                pthread_mutex_unlock(&ipc_mu);
                free(l);
                return CUDA_ERROR_MAP_FAILED;
        }
        sim_lock(st);
        int slot = sim_ipc_claim(st, a.dev, fd, a.charged, false, 0);
        if (slot >= 0)
                h.id = st->ipc[slot].id;
        sim_unlock(st);
        if (slot < 0) {
                /* the memory stays shared-mapped; only the export failed */
                pthread_mutex_unlock(&ipc_mu);
                close(fd);
                free(l);
                sim_log("no free IPC record (%d exports machine-wide)", SIM_MAX_IPC);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *l = (struct ipc_local){ .import = false, .slot = slot, .id = h.id, .base = a.base,
                                 .size = a.size, .memfd = fd, .ctx = a.ctx, .next = locals };
        locals = l;
        __atomic_add_fetch(&n_exports, 1, __ATOMIC_RELEASE);
        h.slot = slot;
done:
        pthread_mutex_unlock(&ipc_mu);
        memset(out, 0, sizeof(*out));
        memcpy(out->reserved, &h, sizeof(h));
        return CUDA_SUCCESS;
}

bool sim_ipc_free_exported(const struct sim_alloc *a)
{
        if (a->kind != SIM_A_DEV || !__atomic_load_n(&n_exports, __ATOMIC_ACQUIRE))
                return false;
        pthread_mutex_lock(&ipc_mu);
        struct ipc_local *l = local_find(false, a->base, 0);
        if (l) {
                local_unlink(l);
                __atomic_sub_fetch(&n_exports, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&ipc_mu);
        if (!l)
                return false;
        munmap((void *)(uintptr_t)a->base, a->size);
        close(l->memfd); /* importers keep their mappings of it */
        struct sim_state *st = sim_g.st;
        sim_lock(st);
        leave(st, l->slot, l->id);
        sim_unlock(st);
        free(l);
        return true;
}

/* Parses a handle; false if it is not one of simgpu's. */
static bool handle_parse(const CUipcMemHandle *in, struct sim_ipc_handle *h)
{
        memcpy(h, in->reserved, sizeof(*h));
        return h->magic == SIM_IPC_MAGIC && h->slot >= 0 && h->slot < SIM_MAX_IPC &&
               h->dev >= 0 && h->dev < SIM_MAX_DEVICES && h->bytes && h->bytes % SIM_GRANULE == 0;
}

/* Maps the exporter's memfd (through /proc) at a fresh 2 MiB aligned
 * address; 0 on failure. */
static uint64_t map_import(int32_t pid, int32_t memfd, uint64_t bytes)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, (int)memfd);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return 0;
        uint64_t base = sim_host_map(bytes);
        if (base && mmap((void *)(uintptr_t)base, bytes, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
                munmap((void *)(uintptr_t)base, bytes);
                base = 0;
        }
        close(fd);
        return base;
}

static CUresult ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
        SIM_NEED_INIT();
        struct CUctx_st *c = sim_ctx_current();
        if (!c)
                return CUDA_ERROR_INVALID_CONTEXT;
        struct sim_ipc_handle h;
        if (!pdptr || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
                return CUDA_ERROR_INVALID_VALUE;
        if (!handle_parse(&handle, &h))
                return CUDA_ERROR_INVALID_HANDLE;
        struct sim_state *st = sim_g.st;
        pthread_mutex_lock(&ipc_mu);
        struct ipc_local *l = local_find(true, 0, h.id);
        CUresult rc = CUDA_SUCCESS;
        sim_lock(st);
        sim_reap(st, false);
        struct sim_ipc_rec *r = &st->ipc[h.slot];
        int32_t pid = r->exporter_pid, memfd = r->memfd;
        if (!r->in_use || r->id != h.id || !r->exporter_holds)
                rc = CUDA_ERROR_INVALID_HANDLE;
        else if (r->exporter == sim_g.proc)
                rc = CUDA_ERROR_INVALID_CONTEXT; /* its own export */
        else if (r->dev != c->dev)
                rc = CUDA_ERROR_INVALID_DEVICE;
        int k = -1;
        for (int i = 0; rc == CUDA_SUCCESS && i < SIM_IPC_IMPORTERS; i++)
                if (r->imp[i] == sim_g.proc || (k < 0 && r->imp[i] < 0))
                        k = i;
        if (rc == CUDA_SUCCESS && k < 0)
                rc = CUDA_ERROR_TOO_MANY_PEERS;
        if (rc == CUDA_SUCCESS) { /* held now, so nobody frees it while we map */
                r->imp[k] = sim_g.proc;
                r->imp_refs[k]++;
        }
        sim_unlock(st);
        if (rc == CUDA_SUCCESS && l) { /* opened before: the same pointer */
                l->refs++;
                *pdptr = l->base;
                pthread_mutex_unlock(&ipc_mu);
                return CUDA_SUCCESS;
        }
        uint64_t base = 0;
        if (rc == CUDA_SUCCESS) {
                l = calloc(1, sizeof(*l));
                base = l ? map_import(pid, memfd, h.bytes) : 0;
                struct sim_alloc a = { .base = base, .size = h.bytes, .dev = c->dev,
                                       .kind = SIM_A_IPC, .ctx = c };
                if (!base || !sim_table_add(&a))
                        rc = CUDA_ERROR_MAP_FAILED;
        }
        if (rc != CUDA_SUCCESS) {
                if (base)
                        munmap((void *)(uintptr_t)base, h.bytes);
                free(l);
                if (k >= 0) {
                        sim_lock(st);
                        if (r->in_use && r->id == h.id && r->imp[k] == sim_g.proc &&
                            --r->imp_refs[k] == 0)
                                leave(st, h.slot, h.id);
                        sim_unlock(st);
                }
                pthread_mutex_unlock(&ipc_mu);
                return rc;
        }
        *l = (struct ipc_local){ .import = true, .slot = h.slot, .id = h.id, .base = base,
                                 .size = h.bytes, .refs = 1, .ctx = c, .next = locals };
        locals = l;
        pthread_mutex_unlock(&ipc_mu);
        *pdptr = base;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                          unsigned int flags)
{
        return ipc_open(pdptr, handle, flags);
}

SIM_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
        return ipc_open(pdptr, handle, flags);
}

/* Drops n opens of import l (unlinked from locals when none is left). */
static void import_drop(struct ipc_local *l, unsigned n)
{
        struct sim_state *st = sim_g.st;
        sim_lock(st);
        struct sim_ipc_rec *r = &st->ipc[l->slot];
        bool last = false;
        for (int k = 0; r->in_use && r->id == l->id && k < SIM_IPC_IMPORTERS; k++)
                if (r->imp[k] == sim_g.proc) {
                        r->imp_refs[k] = r->imp_refs[k] > n ? r->imp_refs[k] - n : 0;
                        last = r->imp_refs[k] == 0;
                }
        if (last)
                leave(st, l->slot, l->id);
        sim_unlock(st);
}

SIM_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
        SIM_NEED_INIT();
        pthread_mutex_lock(&ipc_mu);
        struct ipc_local *l = NULL;
        for (struct ipc_local *x = locals; x; x = x->next)
                if (x->import && x->base == dptr)
                        l = x;
        if (!l) {
                pthread_mutex_unlock(&ipc_mu);
                return CUDA_ERROR_INVALID_VALUE;
        }
        bool unmap = --l->refs == 0;
        if (unmap)
                local_unlink(l);
        import_drop(l, 1);
        pthread_mutex_unlock(&ipc_mu);
        if (unmap) {
                struct sim_alloc a;
                sim_table_take(dptr, SIM_A_IPC, &a);
                munmap((void *)(uintptr_t)dptr, l->size);
                free(l);
        }
        return CUDA_SUCCESS;
}

void sim_ipc_import_drop(const struct sim_alloc *a)
{
        pthread_mutex_lock(&ipc_mu);
        struct ipc_local *l = NULL;
        for (struct ipc_local *x = locals; x; x = x->next)
                if (x->import && x->base == a->base)
                        l = x;
        if (l) {
                local_unlink(l);
                import_drop(l, l->refs);
        }
        pthread_mutex_unlock(&ipc_mu);
        munmap((void *)(uintptr_t)a->base, a->size);
        free(l);
}
