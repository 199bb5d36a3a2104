/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libcuda.so.1: process-local objects shared by the driver-API files.
 *
 * cuda.h is included with __CUDA_API_VERSION_INTERNAL so that every
 * versioned, unversioned and per-thread (_ptds/_ptsz) prototype is declared
 * under its own name, as the real driver is built. Only the functions listed
 * in sim_exports.h are exported (default visibility); everything else is
 * hidden. */
#ifndef SIM_CUDA_H
#define SIM_CUDA_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim_state.h"

#define SIM_EXPORT __attribute__((visibility("default")))
#define SIM_DRIVER_VERSION 13000

#define SIM_MAGIC_CTX 0x43545831u
#define SIM_MAGIC_STREAM 0x53545231u
#define SIM_MAGIC_EVENT 0x45564e31u
#define SIM_MAGIC_MOD 0x4d4f4431u
#define SIM_MAGIC_FUNC 0x46554e31u
#define SIM_MAGIC_POOL 0x504f4f31u
#define SIM_MAGIC_GRAPH 0x47524131u
#define SIM_MAGIC_EXEC 0x45584531u
#define SIM_MAGIC_ARRAY 0x41525231u

enum sim_kernel { SIM_K_BUSY = 1, SIM_K_FILL = 2 };

/* Links every live driver object into sim_g.objs (doubly linked, O(1)
 * removal), so objects a program never destroys stay reachable, like in the
 * real driver, and a context's modules can be found at its destruction. */
struct sim_link {
        struct sim_link *prev, *next;
};

struct CUctx_st {
        uint32_t magic;
        int slot;    /* shared sim_ctx_rec index */
        int dev;     /* physical device index */
        int ordinal; /* CUdevice as the program sees it */
        unsigned flags;
        bool primary;
        struct CUctx_st *next; /* list of live contexts (sim_g.ctxs) */
        /* cuCtxSetLimit (limits.c): values set (bit per CUlimit in
         * limits_set, others at their defaults) and the device memory they
         * reserve beyond what SIMGPU_CTX_OVERHEAD covers; guarded by sim_g.mu */
        size_t limits[CU_LIMIT_MAX];
        uint32_t limits_set;
        uint64_t limits_charged;
};

struct CUstream_st {
        uint32_t magic;
        struct CUctx_st *ctx;
        unsigned flags;
        int priority;
        uint64_t id;
        uint64_t last_seq;             /* last item this stream enqueued */
        struct CUgraph_st *capture;     /* non-NULL while capturing */
        uint64_t capture_id;
        struct sim_link link;           /* sim_g.objs: reachable until destroyed */
};

struct CUevent_st {
        uint32_t magic;
        unsigned flags;
        int slot;             /* shared sim_event_rec index */
        struct CUctx_st *ctx; /* context of the last record, NULL if never */
        uint64_t rec_seq;     /* sequence number of the last record */
        struct sim_link link;
};

struct CUfunc_st {
        uint32_t magic;
        enum sim_kernel kind;
        struct CUmod_st *mod;
        char name[32];
};

/* A __device__ variable of a module (PTX `.global` declaration). */
struct sim_mod_global {
        char name[64];
        uint64_t offset; /* in the module's global segment */
        uint64_t size;
};
#define SIM_MOD_GLOBALS 32

struct CUmod_st {
        uint32_t magic;
        struct CUctx_st *ctx;
        struct CUfunc_st funcs[2]; /* gs_busy, gs_fill when present */
        int nfuncs;
        struct sim_link link;
        /* module_globals.c: the global segment, device memory of the module's
         * context charged at load (0 when there are no globals) */
        struct sim_mod_global globals[SIM_MOD_GLOBALS];
        int nglobals;
        uint64_t gbase, gbytes;
};

/* A decoded launch of a project kernel. */
struct sim_launch {
        enum sim_kernel kind;
        uint64_t ns;       /* gs_busy */
        uint64_t ptr;      /* gs_fill */
        uint32_t value;
        uint64_t n;
};

struct CUmemPoolHandle_st {
        uint32_t magic;
        int dev;
        bool is_default;
        uint64_t reserved;   /* charged to the device */
        uint64_t used;       /* handed out */
        uint64_t reserved_high, used_high;
        uint64_t threshold;  /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */
        int reuse_flags[3];
        struct CUmemPoolHandle_st *next;
};

struct sim_global {
        pthread_once_t once;
        CUresult init_rc;
        int inited; /* atomic */
        struct sim_config cfg;
        struct sim_attach att;
        struct sim_state *st;
        int proc; /* our process slot */
        pid_t pid; /* ours, when the slot was taken */
        int nvis;
        int vis[SIM_MAX_DEVICES]; /* ordinal -> physical device */
        pthread_mutex_t mu;       /* process-local tables */
        struct CUctx_st *primary[SIM_MAX_DEVICES];
        int primary_refs[SIM_MAX_DEVICES];
        unsigned primary_flags[SIM_MAX_DEVICES];
        struct CUctx_st *ctxs;
        struct CUmemPoolHandle_st *default_pool[SIM_MAX_DEVICES];
        struct CUmemPoolHandle_st *cur_pool[SIM_MAX_DEVICES];
        struct CUmemPoolHandle_st *pools;
        uint64_t next_stream_id;
        struct sim_link objs; /* list head; guarded by mu */
};

extern struct sim_global sim_g;

/* NOT_INITIALIZED until cuInit succeeded. */
#define SIM_NEED_INIT()                                                       \
        do {                                                                  \
                if (!__atomic_load_n(&sim_g.inited, __ATOMIC_ACQUIRE))        \
                        return CUDA_ERROR_NOT_INITIALIZED;                    \
        } while (0)

/* Adds/removes an object's link to/from sim_g.objs (takes sim_g.mu). */
void sim_obj_add(struct sim_link *l);
void sim_obj_del(struct sim_link *l);

/* --- device.c --- */
/* Maps a program-visible ordinal to the physical index; -1 if invalid. */
int sim_dev_phys(CUdevice ordinal);

/* --- context.c --- */
/* In a forked child: forget the calling thread's context stack. */
void sim_ctx_tls_forget(void);
/* The calling thread's current context (NULL if none). */
struct CUctx_st *sim_ctx_current(void);
/* True if c is a live context of this process. */
bool sim_ctx_valid(const struct CUctx_st *c);
/* Resolves a stream handle (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or
 * a created stream) to its context; *rc is set on failure. */
struct CUctx_st *sim_stream_ctx(CUstream s, CUresult *rc);
/* Waits (sleeping, never spinning) until context slot c has completed seq. */
void sim_wait_seq(int slot, int dev, uint64_t seq);
/* Waits for everything context c has enqueued so far. */
void sim_ctx_drain(struct CUctx_st *c);
/* cuCtxSynchronize: waits for everything the calling thread's current
 * context has enqueued. CUDA_ERROR_NOT_INITIALIZED before cuInit,
 * CUDA_ERROR_INVALID_CONTEXT without a current context. */
CUresult sim_ctx_sync_current(void);

/* --- memory.c --- */
/* Charges bytes of device memory to this process on dev; reaps dead processes
 * before refusing. CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY. */
CUresult sim_charge(int dev, uint64_t bytes);
/* Returns bytes charged with sim_charge. */
void sim_uncharge(int dev, uint64_t bytes);
/* Rounds up to the 2 MiB granularity (0 stays 0; overflow gives UINT64_MAX). */
uint64_t sim_round(uint64_t bytes);
/* True if [p, p+n) lies within one live allocation (device, managed, pool,
 * mapped VMM or host). */
bool sim_range_ok(uint64_t p, size_t n);
/* In a forked child: forget the parent's allocation table (its mappings are
 * private copies that simply stay mapped). */
void sim_mem_forget(void);
/* Frees every allocation made while context c was current (cuCtxDestroy). */
void sim_mem_of_ctx_free(struct CUctx_st *c);
/* Releases a pool's reserve above its threshold (at synchronisation). */
void sim_pools_release(int dev);

enum sim_alloc_kind {
        SIM_A_DEV = 1,      /* cuMemAlloc, pitch */
        SIM_A_MANAGED = 2,  /* cuMemAllocManaged */
        SIM_A_HOST = 4,     /* page-locked host memory: not device memory */
        SIM_A_POOL = 8,     /* from a memory pool (async) */
        SIM_A_VMM = 16,     /* a cuMemMap'd range (charged at cuMemCreate) */
        SIM_A_RESERVE = 32, /* a cuMemAddressReserve range */
        SIM_A_MODULE = 64,  /* a module's global segment (cuModuleGetGlobal) */
        SIM_A_IPC = 128,    /* an import of another process's memory (cuIpcOpenMemHandle) */
};

/* One allocation of this process, keyed by base address. */
struct sim_alloc {
        uint64_t base;
        uint64_t size;    /* mapped length */
        uint64_t charged; /* device bytes charged for it (0 for host, VMM, reserve) */
        int dev;
        enum sim_alloc_kind kind;
        struct CUctx_st *ctx;
        struct CUmemPoolHandle_st *pool;
};

/* Maps bytes (a multiple of the page size) of zero-filled, 2 MiB aligned,
 * lazily backed memory; 0 on failure. */
uint64_t sim_host_map(uint64_t bytes);
/* Adds an allocation to the table; false if out of memory. */
bool sim_table_add(const struct sim_alloc *a);
/* Removes the allocation based at base whose kind is in kinds; copies it to
 * *out. false if there is none. */
bool sim_table_take(uint64_t base, unsigned kinds, struct sim_alloc *out);
/* Finds the allocation containing [p, p+n) (kinds mask); false if none. */
bool sim_table_find(uint64_t p, uint64_t n, unsigned kinds, struct sim_alloc *out);

/* --- vmm.c --- */
/* Returns a pool block (already removed from the table) to its pool. */
void sim_pool_free_block(const struct sim_alloc *a);

/* A CUmemGenericAllocationHandle: cuMemCreate's, or an import of another
 * process's (vmm_share.c). */
struct sim_vmm_handle {
        uint32_t magic;
        int fd; /* the memory's file (a memfd) */
        int dev;
        int refs; /* 1 per unreleased reference (cuMemCreate, cuMemRetainAllocationHandle,
                   * cuMemImportFromShareableHandle), +1 per mapping: the process lets go of
                   * the memory when it drops to 0 */
        uint64_t size;
        CUmemAllocationProp prop;
        /* exported or imported (vmm_share.c): the sim_ipc_rec this process
         * holds it through (share_slot -1: not shared), guarded by sim_g.mu */
        int share_slot;
        int share_pid; /* the process that holds it (not a forked child) */
        uint64_t share_id;
        struct sim_vmm_handle *share_next; /* this process's shared handles */
};
#define SIM_MAGIC_VMM 0x564d4d31u
/* The live handle hh, or NULL. */
struct sim_vmm_handle *sim_vmm_handle_of(CUmemGenericAllocationHandle hh);

/* --- vmm_share.c --- */
/* The last reference of h in this process is gone: a shared handle leaves
 * its record (the memory, and its charge, stay while another process holds
 * it; the last holder gives it back to the device) and true is returned;
 * false (not shared) leaves the uncharge to the caller. */
bool sim_vmm_share_leave(struct sim_vmm_handle *h);

/* --- pool.c --- */
/* Takes r bytes (a multiple of 2 MiB) for one block out of pool: from its
 * free reserve, else by growing the reserve by at least the pool chunk,
 * charged to the device. Atomic with every other take, free, trim and
 * release of this process's pools. CUDA_SUCCESS, or
 * CUDA_ERROR_OUT_OF_MEMORY with nothing taken. */
CUresult sim_pool_take(struct CUmemPoolHandle_st *pool, uint64_t r);
/* Gives back r bytes taken for a block that could not be completed (they
 * stay in the reserve, released at the next synchronisation). */
void sim_pool_untake(struct CUmemPoolHandle_st *pool, uint64_t r);

/* --- limits.c --- */
/* Returns what context c's limits reserve (cuCtxDestroy, primary reset). */
void sim_ctx_limits_free(struct CUctx_st *c);

/* --- module_globals.c --- */
/* Reads the `.global` variables of PTX text into m and allocates their
 * segment in m's context (charged). CUDA_SUCCESS, CUDA_ERROR_INVALID_PTX
 * (too many, or a malformed declaration) or CUDA_ERROR_OUT_OF_MEMORY. */
CUresult sim_module_globals_load(struct CUmod_st *m, const char *text, size_t len);
/* Frees m's global segment (cuModuleUnload). */
void sim_module_globals_free(struct CUmod_st *m);

/* --- ipc.c --- */
/* Called for every device allocation being freed (cuMemFree, the context's
 * end) after its removal from the table: an exported one is handled here
 * (unmapped; its memory and charge stay while importers hold it) and true
 * is returned; false leaves the release to the caller. */
bool sim_ipc_free_exported(const struct sim_alloc *a);
/* Under the state lock: this process leaves shared record slot if it is
 * still record id (and a VMM one, when vmm_only); what nobody holds any more
 * is given back to the device and the process's use. */
void sim_ipc_leave_own(struct sim_state *st, int slot, uint64_t id, bool vmm_only);
/* Drops an import (every open of it) removed from the table: the
 * context's end. */
void sim_ipc_import_drop(const struct sim_alloc *a);
/* In a forked child: forget the parent's exports and imports. */
void sim_ipc_forget(void);
/* Under sim_lock(st): claims a free record of st->ipc for an export by
 * this process (its exporter and owner, holding it; no importer yet) of
 * `bytes` on device dev: memfd is where importers find the memory (-1:
 * none), vmm and ino mark a cuMemCreate allocation found by its memfd's
 * inode (vmm_share.c). Returns the record's slot, its fresh id in
 * st->ipc[slot].id; or -1 when every record is in use. */
int sim_ipc_claim(struct sim_state *st, int dev, int memfd, uint64_t bytes, bool vmm, uint64_t ino);

/* --- launch.c --- */
/* Enqueues one decoded launch on stream s (or records it into the stream's
 * capture graph). */
CUresult sim_submit(CUstream s, const struct sim_launch *l);
/* Appends a work item to context c's queue, blocking (sleeping) while the
 * queue holds st->queue_depth items. Returns its sequence number. */
uint64_t sim_push(struct CUctx_st *c, uint64_t ns, int32_t event);
/* Decodes kernel parameters of f into *l. */
CUresult sim_decode(const struct CUfunc_st *f, void **params, void **extra,
                    struct sim_launch *l);

/* --- graph.c --- */
/* Appends a kernel node to g (capture). */
CUresult sim_graph_append(struct CUgraph_st *g, const struct sim_launch *l);

/* --- procaddr.c --- */
/* The internal entry point (what cuGetProcAddress hands out) of an exported
 * symbol, by exact name; NULL if absent. */
void *sim_symbol(const char *name);

#endif /* SIM_CUDA_H */
