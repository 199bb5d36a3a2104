/* SPDX-License-Identifier: Apache-2.0 */
/* libgpuslice.so internals, shared by the shim's files. Nothing here is
 * exported: the library is built with -fvisibility=hidden and a version
 * script that lists exactly the hooks of hooks.def (plus dlsym). */
#ifndef SHIM_H
#define SHIM_H

#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <gpuslice/nvml.h>
#include <gpuslice/slice_conf.h>

#include "shim_proto.h"

/* cuGraphAddNode of CUDA 12.2 (no edge data), which CUDA 13's cuda.h no
 * longer declares (shim_proto.h style: a declaration only). */
CUresult shim_proto_cuGraphAddNode_v1(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      CUgraphNodeParams *nodeParams);

#define SHIM_EXPORT __attribute__((visibility("default")))
#define SHIM_GRANULE (2ull << 20) /* the driver's 2 MiB allocation granularity */

/* ---- the hook list (hooks.def) ---- */
enum shim_hook {
#define CU(s, p, v) SHIM_H_##s,
#define NVML(s, p) SHIM_H_##s,
#include "hooks.def"
#undef CU
#undef NVML
        SHIM_H_COUNT
};

/* shim_t_<sym>: the function type of each hook, checked against cuda.h /
 * nvml.h; shim_w_<sym>: the exported wrapper, whose symbol name is <sym>. */
#define CU(s, p, v) typedef __typeof__(p) shim_t_##s;
#define NVML(s, p) typedef __typeof__(p) shim_t_##s;
#include "hooks.def"
#undef CU
#undef NVML
#define CU(s, p, v) SHIM_EXPORT extern shim_t_##s shim_w_##s __asm__(#s);
#define NVML(s, p) SHIM_EXPORT extern shim_t_##s shim_w_##s __asm__(#s);
#include "hooks.def"
#undef CU
#undef NVML

/* The real functions, resolved once (shim_resolve): NULL when the driver
 * lacks one. REAL(sym) is typed. */
extern void *shim_real[SHIM_H_COUNT];
extern void *const shim_wrapper[SHIM_H_COUNT];
extern const char *const shim_hook_name[SHIM_H_COUNT];
#define REAL(s) ((shim_t_##s *)shim_real[SHIM_H_##s])

/* Driver and NVML functions the shim calls but does not hook. */
struct shim_extra {
        __typeof__(&cuDeviceGetUuid) cuDeviceGetUuid;
        __typeof__(&cuMemPoolGetAttribute) cuMemPoolGetAttribute;
        __typeof__(&cuDeviceGetMemPool) cuDeviceGetMemPool;
        __typeof__(&cuCtxGetDevice) cuCtxGetDevice;
        __typeof__(&cuCtxGetCurrent) cuCtxGetCurrent;
        __typeof__(&cuStreamGetCtx) cuStreamGetCtx;
        __typeof__(&cuCtxPushCurrent) cuCtxPushCurrent;
        __typeof__(&cuCtxPopCurrent) cuCtxPopCurrent;
        __typeof__(&nvmlDeviceGetUUID) nvmlDeviceGetUUID;
};
extern struct shim_extra shim_x;

/* ---- modes ---- */
enum shim_mode {
        SHIM_MODE_PASS = 0,   /* no slice config: everything passes through */
        SHIM_MODE_SLICE = 1,  /* enforcing the slice */
        SHIM_MODE_FAILED = 2, /* config or accounting unusable: fail closed */
};

/* Resolves libcuda and the slice once (pthread_once) and returns the mode.
 * Never fails: problems become SHIM_MODE_FAILED and a log line. Preserves
 * errno. */
enum shim_mode shim_init(void);
/* Resolves libnvidia-ml once; false if it or a needed symbol is missing. */
bool shim_nvml_init(void);
/* The slice config (valid in SHIM_MODE_SLICE). */
extern struct gs_slice_conf shim_conf;
/* The uid that owns the slice config: root, this process's euid, or root
 * seen from a user namespace (see shim_uid_trusted). It is the daemon's
 * user for what the daemon gives the slice to read. Set once at start-up. */
extern uid_t shim_conf_uid;
/* Whether a file or directory open on fd and owned by uid may be trusted
 * as the daemon's: uid is root or shim_conf_uid, or the overflow uid
 * (65534, root seen from a user namespace) on a read-only mount. The
 * caller checks the mode. Thread-safe; no allocation. */
bool shim_uid_trusted(int fd, uid_t uid);

/* The fail-closed answer of every hooked CUDA entry. */
#define SHIM_FAIL_CLOSED_CU CUDA_ERROR_NOT_INITIALIZED
#define SHIM_FAIL_CLOSED_NVML NVML_ERROR_UNINITIALIZED

/* Depth of hooked calls on this thread: a driver that calls its own
 * exported entry points (simgpu's cuMemAllocAsync calls
 * cuMemAllocFromPoolAsync) reaches the shim again; those inner calls pass
 * through so that nothing is charged twice. */
extern __thread int shim_depth __attribute__((tls_model("initial-exec")));
static inline void shim_depth_leave(int *unused)
{
        (void)unused;
        shim_depth--;
}

/* Set on the thread that runs the shim's initialisation (shim_hooks.c). */
extern __thread bool shim_initializing __attribute__((tls_model("initial-exec")));
/* A hooked call reached on a thread that is already inside a hooked call
 * (shim_depth > 0) or inside the shim's initialisation: true when `caller`
 * (the wrapper's return address) lies in the driver, whose calls to its own
 * entry points pass through; false for anything else (a signal handler
 * interrupting the thread), logged: the call is refused. Never blocks. */
bool shim_nested_ok(const void *caller, const char *hook);
/* Whether this process may be in a slice, without starting the shim: a
 * config is named by the environment or the default config exists (or
 * cannot be looked at). For the loader's hooks, so that a process outside
 * every slice does not load the driver for a dlopen. */
bool shim_maybe_slice(void);

/* Common prologue of memory hooks: pass through outside a slice (and for
 * calls the driver makes to itself), refuse when fail-closed, refuse a
 * nested call that is not the driver's (a signal handler on a thread inside
 * a hooked call: CUDA_ERROR_NOT_PERMITTED). `call` is the pass-through
 * expression. Declares a guard that lasts to the end of the wrapper. */
#define SHIM_ENTER(hook, call)                                                \
        enum shim_mode m_ = shim_init();                                      \
        if (!REAL(hook))                                                      \
                return CUDA_ERROR_NOT_FOUND;                                  \
        if (__builtin_expect(shim_depth > 0 || shim_initializing, 0)) {       \
                if (!shim_nested_ok(__builtin_return_address(0), #hook))      \
                        return CUDA_ERROR_NOT_PERMITTED;                      \
                return call;                                                  \
        }                                                                     \
        if (m_ == SHIM_MODE_PASS)                                             \
                return call;                                                  \
        if (m_ == SHIM_MODE_FAILED)                                           \
                return SHIM_FAIL_CLOSED_CU;                                   \
        __attribute__((cleanup(shim_depth_leave), unused)) int shim_guard_ = ++shim_depth

/* ---- the loader's routes (shim_dlsym.c, shim_elf.c) ---- */
/* glibc's dlsym, dlvsym, dlopen and dlmopen (the shim exports its own of
 * each), resolved on first use (shim_dlsym_resolve); NULL when not found. */
extern void *shim_real_dlsym;
extern void *shim_real_dlvsym;
extern void *shim_real_dlopen;
extern void *shim_real_dlmopen;
typedef void *shim_dlsym_fn(void *, const char *);
#define REAL_DLSYM(h, n) (((shim_dlsym_fn *)shim_real_dlsym)((h), (n)))
void shim_dlsym_resolve(void);
/* The address of function `name` as glibc's libc.so.6 or libdl.so.2
 * defines it (its default version, else any), read from their dynamic
 * symbol tables without calling anything (safe before a sanitizer runtime
 * is initialised); NULL when not found. */
void *shim_elf_libc_sym(const char *name);

/* ---- cuGetProcAddress mapping (shim_hooks.c) ---- */
/* Maps the driver's answer `p` to cuGetProcAddress(symbol, cudaVersion,
 * flags) to the wrapper of the variant it is: by pointer when p is a
 * function the shim resolved, else by the variant the CUDA headers select
 * for (symbol, cudaVersion, per-thread flag) (hook_since in shim_hooks.c).
 * A hooked base name never comes back unhooked: when the variant cannot be
 * told, *ret_refuse is set (the caller answers CUDA_ERROR_NOT_FOUND) and
 * NULL is returned. Unhooked names return p unchanged. */
void *shim_map_real(void *p, const char *symbol, int cuda_version, cuuint64_t flags,
                    bool *ret_refuse);

/* ---- the slice's books (shim_books.c) ---- */
/* Attaches to <slice_dir>/memory, creating it race-free when absent, and
 * takes a slot for this process. 0 or -errno (logged). */
/* A mapped shared state file of the slice (shim_statefile.c). */
struct shim_statefile {
        int fd;
        void *map;           /* MAP_FAILED when not mapped */
        size_t size;
        bool fresh;          /* new, or left half-created: the caller initialises it */
        char path[GS_PATH_MAX + 32];
};

/* Open or create <dir>/<name>, a file of exactly `size` bytes whose first
 * 8 bytes are a magic its creator stores last, and map it shared. On
 * success the file's flock is held so the caller can check or initialise
 * it (ret->fresh: a new file, or one whose creator died before storing the
 * magic, zeroed); finish with shim_statefile_close(). Failures are logged
 * with the prefix `what`; a file of another size is -EPROTO. */
int shim_statefile_open(const char *dir, const char *name, size_t size, mode_t mode, const char *what,
                        struct shim_statefile *ret);
/* Unlock and close the file; keep the mapping (returned) when keep_map,
 * else unmap it (returns NULL). Safe on a half-opened struct. */
void *shim_statefile_close(struct shim_statefile *f, bool keep_map);

int shim_books_attach(const struct gs_slice_conf *conf);
/* Reserves `bytes` against the cap (reclaiming dead processes' memory
 * before refusing). 0, or -ENOMEM when the cap would be exceeded. */
int shim_books_reserve(uint64_t bytes);
/* Counts one refused request of `bytes` in the slice's books (ooms, the
 * first and latest refused sizes) for the daemon to report; lock-free,
 * never blocks or prints. */
void shim_books_refused(uint64_t bytes);
/* Charges `bytes` whatever the cap (the driver already allocated them). */
void shim_books_force(uint64_t bytes);
/* Gives back bytes reserved or charged. */
void shim_books_release(uint64_t bytes);
/* Reclaims the slots of processes that are gone (for reports: the figure
 * then shows what the driver still holds). Reads /proc; not for hot paths. */
void shim_books_reclaim(void);
/* Bytes charged to the whole slice. */
uint64_t shim_books_used(void);
/* The cap in force: the lower of conf_limit and the limit recorded in the
 * shared file by the slice's first process (conf_limit before attach). */
uint64_t shim_books_limit(uint64_t conf_limit);
/* Child side of fork: the child has no slot yet (taken lazily). */
void shim_books_atfork_child(void);

/* Rounds up to the 2 MiB granularity (UINT64_MAX on overflow). */
static inline uint64_t shim_round(uint64_t n)
{
        if (n > UINT64_MAX - (SHIM_GRANULE - 1))
                return UINT64_MAX;
        return (n + SHIM_GRANULE - 1) & ~(SHIM_GRANULE - 1);
}

/* ---- per-process table of what this process charged (shim_table.c) ---- */
enum shim_kind {
        SHIM_K_PTR = 1,     /* cuMemAlloc*, pitch, managed */
        SHIM_K_ASYNC = 2,   /* stream-ordered allocation; aux = pool */
        SHIM_K_POOL = 3,    /* a memory pool's reserve; bytes = charged */
        SHIM_K_VMM = 4,     /* cuMemCreate handle */
        SHIM_K_ARRAY = 5,   /* CUarray */
        SHIM_K_MIPMAP = 6,  /* CUmipmappedArray */
        SHIM_K_CTX = 7,     /* cuCtxCreate context */
        SHIM_K_PRIMARY = 8, /* primary context of a device; aux = retain count, ctx = it */
        SHIM_K_MAP = 9,     /* a cuMemMap'd range: key = address, bytes = size, aux = handle */
};
struct shim_entry {
        uint64_t key;
        uint64_t bytes;
        uint64_t aux;
        uint64_t ctx;  /* the context it lives in (freed with it), or 0 */
        uint32_t kind; /* enum shim_kind; 0 = empty */
        uint32_t tomb; /* 1 = deleted */
};
/* Inserts or replaces (kind, key). 0 or -ENOMEM. O(1) amortised. */
int shim_table_put(uint32_t kind, uint64_t key, uint64_t bytes, uint64_t aux);
/* shim_table_put with the context the object lives in (ctx: freed with
 * it, see shim_table_drop_ctx). */
int shim_table_put_in(uint32_t kind, uint64_t key, uint64_t bytes, uint64_t aux, uint64_t ctx);
/* Removes every entry of a kind in the mask `kinds` (bit 1 << kind) that
 * lives in ctx, copying at most n_ret of them into ret; returns how many it
 * removed (call again while it returns n_ret). O(table size): for context
 * teardown only. */
size_t shim_table_drop_ctx(uint64_t ctx, uint32_t kinds, struct shim_entry *ret, size_t n_ret);
/* Looks (kind, key) up into *ret. true if found. */
bool shim_table_get(uint32_t kind, uint64_t key, struct shim_entry *ret);
/* Removes (kind, key), copying it into *ret. true if it was there. */
bool shim_table_take(uint32_t kind, uint64_t key, struct shim_entry *ret);
/* Settles an entry that shim_table_take removed (had = its result) before
 * the driver call that destroys the object: if the driver refused (r is not
 * CUDA_SUCCESS) the entry goes back into the table, else its bytes go back
 * to the books. Nothing when had is false. */
void shim_table_settle(bool had, const struct shim_entry *e, CUresult r);
/* Child side of fork: empties the table (the child owns no allocations). */
void shim_table_atfork_child(void);

/* ---- fork and the test hook (shim_hooks.c) ---- */
/* Child side of fork for shim_mem.c (pools, vmm) and shim_ctx.c (primary
 * contexts): their process-local locks start unlocked (another thread of
 * the parent may have held them) and the child owns none of the parent's
 * pools. */
void shim_mem_atfork_child(void);
void shim_ctx_atfork_child(void);
/* For the test hook gpuslice_test_hold (GPUSLICE_TEST_HOOKS=1): the
 * shim's locks. shim_books_test_mutex(true) is the slice's shared lock
 * (NULL before attach). */
pthread_mutex_t *shim_table_test_mutex(void);
pthread_mutex_t *shim_books_test_mutex(bool shared);
pthread_mutex_t *shim_mem_test_mutex(bool vmm);
pthread_mutex_t *shim_ctx_test_mutex(void);
/* Child side of fork for shim_ipc.c and shim_limits.c: their locks start
 * unlocked (a parent thread may have held them across a driver call). */
void shim_ipc_atfork_child(void);
void shim_limits_atfork_child(void);
/* For the test hook: ipc_mu (shim_ipc.c) and limits_mu (shim_limits.c). */
pthread_mutex_t *shim_ipc_test_mutex(void);
pthread_mutex_t *shim_limits_test_mutex(void);
/* Holds (hold != 0) or releases the lock named `lock` (table, slot, books,
 * pool, vmm, prim, ipc, limits); 0, or -ENOENT for another name. */
int shim_test_hold(const char *lock, int hold);
/* Whether an allocation at loc may be made: not on another GPU than the
 * slice's (logged; shim_place.c). */
bool shim_location_ok(const CUmemLocation *loc, const char *what);

/* ---- device checks and reports (shim_ctx.c) ---- */
/* True if dev is the slice's GPU (by UUID); caches per ordinal. */
bool shim_dev_is_slice(CUdevice dev);
/* Re-reads every tracked pool's reserve and fixes the books; called before
 * refusing a reservation and before reports. */
void shim_pools_refresh(void);
/* The driver freed context ctx with everything allocated in it (cuCtxDestroy,
 * the last release or a reset of a primary context): gives back what this
 * process charged for its linear and stream-ordered allocations. */
void shim_mem_ctx_gone(uint64_t ctx);
/* The lock that spans each VMM driver call and its table update (shim_mem.c). */
void shim_vmm_lock(void);
void shim_vmm_unlock(void);
/* Records handle h of cuMemImportFromShareableHandle (shim_share.c),
 * charged `bytes`, as a VMM entry (shim_vmm_lock held): 1 when the entry is
 * new (the bytes are its charge), 0 when this process held h already (one
 * more reference; the bytes are not used), -ENOMEM. */
int shim_vmm_import_locked(uint64_t h, uint64_t bytes);
/* Reserves bytes, refreshing pool reserves before refusing; logs a
 * refusal. 0 or -ENOMEM. Preserves errno. */
int shim_reserve(uint64_t bytes);

/* ---- logging (shim_log.c) ---- */
/* Appends a line to $GPUSLICE_LOG (nothing if unset). Preserves errno. */
void shim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void shim_log_open(void);

#endif /* SHIM_H */
