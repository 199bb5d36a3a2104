/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu's shared state: the "hardware" every process of the machine sees.
 *
 * One file, $SIMGPU_DIR/state, mmap'd MAP_SHARED by every process that uses
 * simgpu (libcuda, libnvidia-ml, simgpu-smi). The layout below is an ABI:
 * magic, version and total size are checked on attach; a mismatch is refused
 * (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH), never guessed at. Bump
 * SIM_STATE_VERSION whenever anything below changes.
 *
 * Everything is protected by one process-shared ROBUST mutex: a process
 * killed while holding it is detected (EOWNERDEAD) and the state repaired.
 * Per-process records carry pid + start time so a recycled pid is never
 * mistaken for a live process; dead processes are reaped (memory, contexts,
 * queued work returned) on attach, on allocation failure, on NVML queries and
 * periodically.
 *
 * Device time is CLOCK_MONOTONIC nanoseconds (shared by all processes). */
#ifndef SIM_STATE_H
#define SIM_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define SIM_STATE_MAGIC 0x31555047534d4953ULL /* "SIMGPU1" */
#define SIM_STATE_VERSION 5u
#define SIM_MAX_DEVICES 16
/* Processes and contexts machine-wide: 8 GPUs x 64 processes with one
 * context each, and room to spare. The file is sparse and its records are
 * used lowest slot first, so what is never used costs no memory, and scans
 * stop at the high-water marks proc_slots and ctx_slots. */
#define SIM_MAX_PROCS 1024
#define SIM_MAX_CTXS 1024
#define SIM_QUEUE_MAX 4096
#define SIM_MAX_EVENTS 4096
#define SIM_SNAPS 32
#define SIM_MAX_IPC 256      /* exported allocations (cuIpcGetMemHandle) machine-wide */
#define SIM_IPC_IMPORTERS 8  /* processes importing one of them at once */
#define SIM_SNAP_PERIOD_NS 100000000ull /* 100 ms between utilisation snapshots */
#define SIM_REAP_PERIOD_NS 500000000ull /* periodic reap at most every 0.5 s */
#define SIM_GRANULE (2ull << 20)        /* 2 MiB allocation granularity */
#define SIM_NAME_MAX 96
#define SIM_UUID_MAX 48

enum sim_proc_state { SIM_PROC_FREE = 0, SIM_PROC_ALIVE = 1, SIM_PROC_EXITED = 2 };

struct sim_work {
        uint64_t seq;          /* context-local sequence number, from 1 */
        uint64_t remaining_ns; /* device time still to run */
        int32_t event;         /* event slot to stamp at completion, or -1 */
        uint32_t pad;
};

struct sim_snap {
        uint64_t t_ns;    /* device time of the snapshot */
        uint64_t busy_ns; /* cumulative busy time at t_ns */
};

struct sim_ctx_rec {
        uint32_t in_use;
        int32_t proc;      /* owning process slot */
        int32_t dev;
        uint32_t head;     /* ring index of the oldest pending item */
        uint32_t count;    /* pending items */
        uint32_t pad;
        uint64_t enq_seq;  /* last sequence number enqueued */
        uint64_t done_seq; /* last sequence number completed */
        uint64_t busy_ns;
        struct sim_work q[SIM_QUEUE_MAX];
};

struct sim_event_rec {
        uint32_t in_use;
        int32_t proc;
        uint64_t seq;     /* sequence number whose completion time is in time_ns */
        uint64_t time_ns; /* device time at which that record completed */
};

struct sim_proc_rec {
        int32_t pid;
        uint32_t state;      /* enum sim_proc_state */
        uint64_t start_time; /* /proc/<pid>/stat field 22 */
        /* The image's link to the driver: libcuda's descriptor of the state
         * file (-1: unknown). Like the real driver's /dev/nvidia* files it
         * is close-on-exec, so an execve (or closing it) ends the process's
         * use of the GPU: its memory and contexts are returned. */
        int32_t att_fd;
        uint32_t image; /* the process image (AT_RANDOM bits: the same for every
                         * copy of simgpu in it, new at each execve) */
        uint64_t att_dev, att_ino; /* what att_fd must still refer to */
        uint64_t used[SIM_MAX_DEVICES]; /* bytes charged incl. context overhead */
        uint32_t nctx[SIM_MAX_DEVICES]; /* live contexts per device */
        uint64_t busy[SIM_MAX_DEVICES]; /* cumulative device time (ns) */
        uint32_t snap_head[SIM_MAX_DEVICES];
        struct sim_snap snaps[SIM_MAX_DEVICES][SIM_SNAPS];
};

/* An allocation exported with cuIpcGetMemHandle (or, vmm set, with
 * cuMemExportToShareableHandle: the exporter and importers hold it through
 * their handles and mappings, imp_refs 1 each). Its device memory lives
 * while the exporter's allocation or any import of it does (the real
 * driver's reference counting), and is charged to one process, `owner`:
 * the exporter while it holds the allocation, then an importer that keeps
 * it alive (in the real driver's books the last reference is an importer's
 * private memory). owner's used[] includes `bytes`. */
struct sim_ipc_rec {
        uint32_t in_use;
        int32_t dev;
        int32_t exporter;        /* process slot */
        uint32_t exporter_holds; /* 1 until the exporter frees it (or dies) */
        int32_t owner;           /* process slot charged for it */
        int32_t exporter_pid;    /* where importers find the memory: */
        int32_t memfd;           /*   /proc/<exporter_pid>/fd/<memfd> */
        uint32_t vmm;            /* 1: a cuMemCreate allocation exported as a file
                                  * descriptor (vmm_share.c), found by its inode */
        uint64_t id;             /* unique, in the handle */
        uint64_t bytes;
        uint64_t ino;            /* vmm: the inode of its memfd */
        int32_t imp[SIM_IPC_IMPORTERS];       /* importer process slots, -1 free */
        uint32_t imp_refs[SIM_IPC_IMPORTERS]; /* its opens not yet closed */
};

struct sim_dev_rec {
        char name[SIM_NAME_MAX];
        char uuid[SIM_UUID_MAX]; /* "GPU-" + 8-4-4-4-12 hex digits */
        uint8_t uuid_bytes[16];
        uint64_t total;    /* bytes */
        uint64_t used;     /* bytes, all processes */
        uint64_t now_ns;   /* simulated up to this device time */
        uint64_t busy_ns;  /* cumulative */
        uint64_t slice_end;
        int32_t cur_ctx;   /* context running now, or -1 */
        uint32_t lost;     /* set by simgpu-smi --set-lost */
        uint32_t snap_head;
        uint32_t pad;
        uint64_t last_snap_ns;
        struct sim_snap snaps[SIM_SNAPS];
};

struct sim_state {
        uint64_t magic;
        uint32_t version;
        uint32_t pad0;
        uint64_t total_size; /* sizeof(struct sim_state) */
        pthread_mutex_t lock;
        /* configuration, fixed at creation */
        uint32_t ndev;
        uint32_t sms;
        uint64_t memory;
        uint64_t ctx_overhead;
        uint64_t timeslice_ns;
        uint32_t queue_depth;
        uint32_t pad1;
        uint64_t created_ns;
        uint64_t next_reap_ns;
        uint64_t next_ipc_id;
        /* High-water marks: no record at or above them was ever used (they
         * only grow). Read them through sim_proc_slots / sim_ctx_slots. */
        uint32_t proc_slots;
        uint32_t ctx_slots;
        struct sim_dev_rec dev[SIM_MAX_DEVICES];
        struct sim_proc_rec proc[SIM_MAX_PROCS];
        struct sim_event_rec ev[SIM_MAX_EVENTS];
        struct sim_ipc_rec ipc[SIM_MAX_IPC];
        struct sim_ctx_rec ctx[SIM_MAX_CTXS];
};

/* Configuration read from the environment. */
struct sim_config {
        uint32_t ndev;
        uint32_t sms;
        uint64_t memory;
        uint64_t ctx_overhead;
        uint32_t queue_depth;
        uint64_t timeslice_ns;
        uint64_t pool_chunk; /* a memory pool's reserve grows by at least this (per process) */
        char name[SIM_NAME_MAX];
        char dir[4096];
};

/* An attachment of this process (one per library) to the state file. */
struct sim_attach {
        struct sim_state *st;
        int fd;
};

/* Error codes of the state layer (negative); the libraries map them. */
enum {
        SIM_E_CONFIG = -1000,   /* bad environment value */
        SIM_E_OS = -1001,       /* file system / mmap failure */
        SIM_E_MISMATCH = -1002, /* state file of another layout */
        SIM_E_ABSENT = -1003,   /* no state file and create == false */
        SIM_E_FULL = -1004,     /* no free process slot */
};

/* Fills *cfg from SIMGPU_* variables and the defaults. Returns 0, or
 * SIM_E_CONFIG after logging which variable was wrong (SIMGPU_LOG). */
int sim_config_load(struct sim_config *cfg);

/* Parses "123", "4Ki", "16Gi", ... into bytes. Returns 0 or -EINVAL. */
int sim_parse_size(const char *s, uint64_t *out);
/* simgpu's one number parser (it depends on nothing of gpuslice): the
 * decimal digits at the start of s (at least one, no sign), value in *out,
 * the rest in *end. 0, or -EINVAL (no digit, overflow). */
int sim_parse_u64_prefix(const char *s, uint64_t *out, const char **end);

/* Appends one formatted line to the file named by SIMGPU_LOG, if set. Never
 * writes to stdout/stderr. */
void sim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Maps the state file in cfg->dir, creating it from cfg when absent and
 * create is true. Returns 0 or a SIM_E_* code (logged). */
int sim_state_attach(struct sim_attach *a, const struct sim_config *cfg, bool create);

/* Unmaps. Safe on a zeroed struct. */
void sim_state_detach(struct sim_attach *a);

/* Locks the state (robust; repairs after a dead owner). */
void sim_lock(struct sim_state *st);
void sim_unlock(struct sim_state *st);

/* CLOCK_MONOTONIC in ns. */
uint64_t sim_now_ns(void);

/* Start time of pid from /proc (0 if unreadable). */
uint64_t sim_proc_start_time(pid_t pid);

/* Under the lock: how many process / context records to scan (the
 * high-water mark, never above the table: the file is shared, so it is
 * clamped rather than trusted). */
static inline int sim_proc_slots(const struct sim_state *st)
{
        return st->proc_slots < SIM_MAX_PROCS ? (int)st->proc_slots : SIM_MAX_PROCS;
}
static inline int sim_ctx_slots(const struct sim_state *st)
{
        return st->ctx_slots < SIM_MAX_CTXS ? (int)st->ctx_slots : SIM_MAX_CTXS;
}

/* Under the lock: takes the lowest free context record for process slot
 * proc on device dev. Returns the slot, or -1 when all are in use. */
int sim_ctx_alloc(struct sim_state *st, int proc, int dev);

/* Under the lock: registers the calling process image, whose libcuda holds
 * the state file open on att_fd. A record of the same process (pid and
 * start time) is this image's when another copy of simgpu in it registered
 * first (a second libcuda.so.1 by path, dlmopen): that record is returned;
 * else it is of an earlier image (before an execve), whose memory and
 * contexts are returned first, as the real driver frees them at exec.
 * Returns the slot or SIM_E_FULL. */
int sim_proc_register(struct sim_state *st, int att_fd);

/* Under the lock: reaps dead processes, returning their memory, contexts,
 * events and queued work. force=false does it only when the periodic reap
 * is due. Returns the number reaped. */
int sim_reap(struct sim_state *st, bool force);

/* Under the lock: the forced reap of only the processes with a context or
 * memory on device dev, for answers about that device (NVML's per-device
 * queries): the same certainty for what the answer shows, without reading
 * /proc for the processes of every other GPU. Returns the number reaped. */
int sim_reap_dev(struct sim_state *st, int dev);

/* Under the lock: process slot p no longer holds IPC record r (it closed
 * its last import, or freed the exported allocation, or died): when others
 * still hold it and p was charged, the charge moves to one of them. Returns
 * the bytes to give back to the device (the last holder left), else 0; the
 * caller subtracts them from p's and the device's used. */
uint64_t sim_ipc_leave(struct sim_state *st, struct sim_ipc_rec *r, int p);

/* Under the lock: true when the process record is of a live process whose
 * image still holds the driver open (its att_fd). What cannot be read
 * (another user's /proc entries, no file descriptor left to read them)
 * counts as alive: memory is never returned on a guess. */
bool sim_proc_alive(const struct sim_proc_rec *p);

/* Under the lock: advance every device's timeline to now. */
void sim_advance_all(struct sim_state *st, uint64_t now);

/* Under the lock: advance device dev's timeline to `now` (discrete-event,
 * exact): round-robin among contexts with pending work, time slices of
 * st->timeslice_ns, busy time charged to device, context and process. */
void sim_advance(struct sim_state *st, int dev, uint64_t now);

/* Under the lock: appends a work item to context slot c. The caller checks
 * capacity first. Returns the item's sequence number. */
uint64_t sim_enqueue(struct sim_state *st, int c, uint64_t ns, int32_t event);

/* Under the lock: lower bound of the device time until sequence seq of
 * context c completes (its own pending work up to seq). */
uint64_t sim_pending_ns(const struct sim_state *st, int c, uint64_t seq);

/* Under the lock: drops context c's queue and frees its slot. */
void sim_ctx_release(struct sim_state *st, int c);

/* Under the lock: process-utilisation snapshot lookup; returns busy_ns of
 * process slot p on dev at or before device time t (oldest snapshot if t is
 * older than all), and sets *t_at to that snapshot's time. */
uint64_t sim_proc_busy_at(const struct sim_state *st, int p, int dev, uint64_t t,
                          uint64_t *t_at);
/* Same for the whole device. */
uint64_t sim_dev_busy_at(const struct sim_state *st, int dev, uint64_t t, uint64_t *t_at);

/* Writes the deterministic UUID of device index i. */
void sim_make_uuid(unsigned i, uint8_t bytes[16], char str[SIM_UUID_MAX]);

#endif /* SIM_STATE_H */
