/* SPDX-License-Identifier: Apache-2.0 */
/* The watchdog's state, shared by its sampler (watchdog.c: NVML, the
 * mapping of processes to slices, the books, core's rules) and its actions
 * (watchdog_act.c: events, kills, evictions). Private to src/daemon. */
#ifndef GS_DAEMON_WATCHDOG_INT_H
#define GS_DAEMON_WATCHDOG_INT_H

#include <gpuslice/slice_state.h>

#include "events.h"
#include "evictions.h"
#include "node.h"
#include "nvml.h"
#include "watchdog.h"
#include "watchdog_daemon.h"

#define WD_MAX_PROCS 1024  /* per GPU */
#define WD_MAX_BOOKS 16384 /* used slots over all slices */
#define WD_MAX_VERDICTS 1024
#define WD_MEMO 8192 /* pids whose ancestry a sample walked (power of 2) */
#define WD_DEPTH 64
#define WD_SEEN 4096     /* processes remembered in their slice across samples */
#define WD_SEEN_KEEP 120 /* samples an unseen process is remembered */

struct memo {
        uint64_t gen;
        pid_t pid;
        int slice; /* snapshot index, -1 none */
};

/* A GPU process once mapped to its slice, by identity (pid, start time):
 * it stays in that slice when its parent dies and it is reparented away
 * from the slice's process (setsid, double fork). */
struct seen {
        pid_t pid;
        uint64_t start;
        char slice[GS_SLICE_ID_MAX + 1];
        uint64_t last; /* sample number it was last listed by NVML */
        bool claimed;  /* mapped by its books slot only (wd_books_claim) */
};

/* A GPU process's mapping, kept across samples (watchdog_cache.c). */
#define WD_PCACHE 4096     /* slots (power of 2); half may be used */
#define WD_PCACHE_KEEP 20  /* samples an entry outlives its last listing */
struct pcache {
        pid_t pid;      /* 0: empty, -1: a removed entry */
        int fd;         /* a pidfd pinning the process */
        int slice;      /* snapshot index (valid under the same map key), -1: none */
        uint32_t inner; /* its pid in its own namespace; 0: not read yet */
        uint64_t last;  /* the sample that last used it */
        char why[160];  /* why it is in no slice */
};

/* What the daemon keeps of a slice across samples (watchdog_slices.c):
 * the authoritative figures, from NVML, never from the books. */
struct wd_acct {
        char id[GS_SLICE_ID_MAX + 1];
        uint64_t gen;        /* the sample that last saw its slice */
        bool sampled;        /* used[] and holding are from a sample */
        bool nvml_ok;        /* NVML answered for each of its GPUs in that sample */
        uint64_t used[GS_SLICE_MAX_GPUS]; /* NVML bytes of its processes, per GPU */
        uint32_t holders;    /* its processes that held GPU memory */
        uint64_t books_ooms; /* the books' refusal count last read */
        uint64_t refusals;   /* refusals counted by the daemon (monotonic) */
        bool refusal_reported;
};

/* An eviction the watchdog asked for (policy evict), until its slice goes. */
struct wd_evicting {
        char slice[GS_SLICE_ID_MAX + 1];
        enum gs_wd_reason reason;
        char gpu[GS_GPU_UUID_MAX];
        int64_t asked_ms;    /* first asked */
        int64_t last_ask_ms; /* last asked (a refused eviction is asked again) */
        int64_t done_ms; /* when it was seen accepted; 0: not yet */
        bool reported;   /* its outcome is an event */
};

/* An evicted pod's processes still over-using this long after the
 * eviction was accepted (the pod's default termination grace period, 30 s,
 * and 10 s for the kubelet) are killed. */
#define WD_EVICT_WAIT_MS 40000
/* A refused eviction (a disruption budget's 429, an API server that did
 * not answer) is asked again on every sample for this long, then the
 * processes are killed. */
#define WD_EVICT_RETRY_MS 30000
#define WD_EVICT_REASK_MS 5000 /* between two asks */

struct wd_state {
        struct wd_args a;
        struct node *node;            /* the daemon's: pods of slices, claims */
        struct evictions *evictions;  /* NULL: no API-server access (evict kills) */
        int64_t now_ms;               /* this sample's */
        struct wd_evicting evicting[EVICTIONS_MAX];
        size_t n_evicting;
        struct pcache pcache[WD_PCACHE];
        size_t n_pcache_live, n_pcache_used, pcache_budget;
        uint64_t map_key;   /* what the mapping depends on, this sample */
        bool no_cache;      /* map afresh (before a kill) */
        struct gs_wd *rules;
        struct events *ev;
        int64_t next_ms;
        uint64_t last_seen_us[GS_MAX_GPUS];
        bool nvml_failed[GS_MAX_GPUS];
        /* one sample */
        uint64_t gen;
        struct memo memo[WD_MEMO];
        struct nvml_proc raw[GS_MAX_GPUS][WD_MAX_PROCS];
        struct gs_wd_proc procs[GS_MAX_GPUS][WD_MAX_PROCS];
        struct gs_wd_gpu gpus[GS_MAX_GPUS];
        struct gs_wd_slice slices[GS_LEDGER_MAX_SLICES];
        pid_t slice_pid[GS_LEDGER_MAX_SLICES]; /* a live local slice's process, else 0 */
        bool dir_known[GS_LEDGER_MAX_SLICES];  /* a pod slice's directory identity */
        dev_t dir_dev[GS_LEDGER_MAX_SLICES];
        ino_t dir_ino[GS_LEDGER_MAX_SLICES];
        size_t n_slices;
        bool any_pod;
        struct gs_wd_book books[WD_MAX_BOOKS];
        uint64_t book_start[WD_MAX_BOOKS]; /* the slot owner's start time (40 bits) */
        size_t n_books;
        uid_t slice_uid[GS_LEDGER_MAX_SLICES];
        /* the books' refusal figures (slice_state.h), per snapshot slice */
        uint64_t books_ooms[GS_LEDGER_MAX_SLICES];
        uint64_t refused_first[GS_LEDGER_MAX_SLICES];
        uint32_t refused_pid[GS_LEDGER_MAX_SLICES];
        struct wd_acct acct[GS_LEDGER_MAX_SLICES];
        size_t n_acct;
        struct gs_slice_state state; /* one slice's books file, read */
        struct gs_wd_verdict verdicts[WD_MAX_VERDICTS];
        char why[GS_MAX_GPUS][WD_MAX_PROCS][160]; /* why a process is in no slice */
        struct seen seen[WD_SEEN];
        size_t n_seen;
        pid_t killed[WD_MAX_VERDICTS]; /* this sample's kills */
        size_t n_killed;
        /* cost */
        uint64_t n_samples, cpu_us_sum, cpu_us_max;
        uint64_t nvml_us_sum; /* of which in NVML's calls (simgpu: its own /proc reads) */
};

/* The snapshot index of the slice with this id, or -1. */
int wd_slice_index(const struct wd_state *w, const char *id);

/* The snapshot index of pid's slice (its ancestry, or where it was seen
 * before), or -1 with why the process is in none (why_size bytes). */
int wd_map_pid(struct wd_state *w, pid_t pid, char *why, size_t why_size);

/* Events for verdict v of snapshot snap, and the policy's action once it
 * is actionable. On the event loop, the node's lock held. */
void wd_act(struct wd_state *w, const struct gs_wd_snapshot *snap, const struct gs_wd_verdict *v);

/* A local slice whose books hold a slot for pid (the same process by its
 * start time) and whose owner is pid's owner: its snapshot index, or -1.
 * For a process no certain route maps (it left its slice's process tree
 * before its first sample: setsid, double fork). */
int wd_books_claim(struct wd_state *w, pid_t pid);

/* Whether pid is in its slice by its books slot only (the tenant's word):
 * counted there and reported, but killed only under --kill-unsliced (as
 * it would be without the slot). */
bool wd_pid_claimed(const struct wd_state *w, pid_t pid);

/* After a sample's mapping (watchdog_slices.c): each slice's NVML figures
 * and refusals (a memory_refused event on its first), then the draining
 * slices whose processes hold no GPU memory any more are freed. */
void wd_acct_update(struct daemon *d, struct wd_state *w, const struct gs_wd_snapshot *snap);

/* The mapping cache. init: empty, with a budget of pidfds (the soft
 * RLIMIT_NOFILE raised to the hard one, at most 65536, a quarter of it).
 * rekey: every sample with what mappings depend on (the slices, their
 * processes and directories): a new key empties the cache. get: pid's
 * entry when it is cached and still the same process, else NULL. put:
 * remember pid's mapping (NULL when over budget). sweep: forget what NVML
 * stopped listing. flush: empty it, closing every pidfd. */
void wd_pcache_init(struct wd_state *w);
void wd_pcache_rekey(struct wd_state *w, uint64_t key);
struct pcache *wd_pcache_get(struct wd_state *w, pid_t pid);
struct pcache *wd_pcache_put(struct wd_state *w, pid_t pid, int slice, const char *why);
void wd_pcache_sweep(struct wd_state *w);
void wd_pcache_flush(struct wd_state *w);

/* Once per sample, after the slices' snapshot: an event for every
 * eviction that ended since the last sample; forget those whose slice is
 * gone. */
void wd_evictions_poll(struct wd_state *w);

#endif /* GS_DAEMON_WATCHDOG_INT_H */
