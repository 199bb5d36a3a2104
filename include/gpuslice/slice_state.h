/* SPDX-License-Identifier: Apache-2.0 */
/* The shared memory accounting of one slice: the file `<slice_dir>/memory`,
 * mmap'd MAP_SHARED by every process of the slice (the shim) and read by the
 * daemon. This layout is an ABI: `magic`, `version` and `file_size` are
 * checked on attach and a mismatch is refused (the shim then fails closed).
 * Bump GS_SLICE_STATE_VERSION whenever anything below changes.
 *
 * Concurrency. One process-shared ROBUST mutex (`lock`) guards `used` and
 * every slot's `charged`, and is held only for the bookkeeping itself (a few
 * instructions), never across a driver call. A process killed while holding
 * it leaves the lock EOWNERDEAD; the next locker rebuilds `used` as the sum
 * of `charged` over the live-or-dead slots (which is exact, because `used`
 * and the slot are always changed together under the lock) and marks the
 * mutex consistent. Readers that only want a figure (the daemon, `top`) may
 * read `used` and the slots with relaxed atomic loads without the lock.
 *
 * Admission: a reservation of n bytes succeeds only when used + n <= limit
 * (checked and applied under the lock), so two processes can never both
 * pass the check. The charge is taken BEFORE the driver call and given back
 * if the driver fails.
 *
 * Slots: a process takes a free slot (owner == 0) on attach. `owner` packs
 * the identity of the process: start time (field 22 of /proc/<pid>/stat,
 * clock ticks since boot) in bits 63..24 and the pid in bits 23..2 (Linux
 * pid_max is at most 2^22); bits 1..0 are 1 for a used slot. A slot whose
 * identity no longer matches a live process (kill -9 included, zombies
 * included) is reclaimed under the lock: its `charged` is subtracted from
 * `used` and the slot freed, exactly once. Slots are bounded
 * (GS_SLICE_STATE_SLOTS processes per slice). */
#ifndef GS_SLICE_STATE_H
#define GS_SLICE_STATE_H

#include <pthread.h>
#include <stdint.h>

#define GS_SLICE_STATE_MAGIC 0x314d454d43494c53ULL /* "SLICMEM1" little-endian */
#define GS_SLICE_STATE_VERSION 2u
#define GS_SLICE_STATE_FILE "memory"     /* name inside slice_dir */
#define GS_SLICE_STATE_SLOTS 1024u

#define GS_SLOT_OWNER_USED 1ull
#define GS_SLOT_OWNER(pid, start) \
        ((((uint64_t)(start)) << 24) | (((uint64_t)(pid) & 0x3fffffull) << 2) | GS_SLOT_OWNER_USED)
#define GS_SLOT_OWNER_PID(o) ((int)(((o) >> 2) & 0x3fffffull))
#define GS_SLOT_OWNER_START(o) ((o) >> 24)

struct gs_slice_slot {
        uint64_t owner;    /* 0: free; else GS_SLOT_OWNER(pid, start) */
        uint64_t charged;  /* bytes charged by this process (2 MiB multiples) */
        uint64_t peak;     /* highest `charged` seen, for reports */
        uint64_t reserved; /* 0 */
};

struct gs_slice_state {
        uint64_t magic;      /* GS_SLICE_STATE_MAGIC, written last at creation */
        uint32_t version;    /* GS_SLICE_STATE_VERSION */
        uint32_t n_slots;    /* GS_SLICE_STATE_SLOTS */
        uint64_t file_size;  /* sizeof(struct gs_slice_state) */
        uint64_t limit;      /* the cap (memory_limit of the creating process) */
        uint64_t used;       /* sum of charged over all slots */
        uint64_t peak;       /* highest `used` seen */
        uint64_t ooms;       /* reservations refused at the cap (one per refused call) */
        uint64_t reclaimed;  /* bytes reclaimed from dead processes */
        /* The refusals, for the daemon (docs/overuse.md, memory_refused):
         * the first refused request (bytes, and its process's pid as the
         * shim sees it), set once by the refusal that took ooms from 0, and
         * the latest. Written with atomic stores outside the lock; like the
         * rest of the file the tenant can write them, and hiding its own
         * refusals harms only itself. */
        uint64_t refused_first;
        uint64_t refused_last;
        uint32_t refused_pid;
        uint32_t reserved0;  /* 0 */
        char slice[64];      /* slice id, NUL-terminated */
        pthread_mutex_t lock; /* robust, process-shared; see above */
        char pad[64 - sizeof(pthread_mutex_t) % 64];
        struct gs_slice_slot slots[GS_SLICE_STATE_SLOTS];
};

#endif /* GS_SLICE_STATE_H */
