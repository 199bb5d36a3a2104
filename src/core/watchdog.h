/* SPDX-License-Identifier: Apache-2.0 */
/* The watchdog's rules, pure: given one snapshot of the node (NVML's
 * per-process view of every GPU, which a tenant cannot forge, and the
 * slices with the processes the daemon mapped to them and what each
 * slice's shim books say), produce verdicts with their evidence. The daemon
 * (src/daemon/watchdog.c) samples, maps and acts; nothing here does I/O.
 *
 * Rules (each verdict names the pid, the slice, the GPU and the figures):
 *  - GS_WD_MEMORY_OVER_CAP: a slice's processes on its GPU together hold
 *    more than its cap by NVML (the cap includes the per-context
 *    reservation). One verdict per culprit: the processes whose NVML use
 *    the books do not cover (unregistered, or books below NVML); when
 *    every process is covered, every process of the slice.
 *  - GS_WD_BOOKS_DISAGREE: a registered process's books figure is below
 *    NVML's by more than `books_tolerance` (one 2 MiB granule per context;
 *    one context per process and GPU is assumed), or the slice's books
 *    cannot be read at all while its processes use the GPU.
 *  - GS_WD_UNSLICED: a GPU process in no slice, on a GPU that has slices.
 *  - GS_WD_WRONG_GPU: a slice's process using a GPU its slice was not
 *    placed on.
 *  - GS_WD_NO_SHIM: a process of a shim slice that holds GPU memory but
 *    never registered (no slot in any slice's books).
 *  - GS_WD_COMPUTE_OVER_SHARE: a slice of policy cap whose processes'
 *    device time (NVML utilisation, averaged over `window_ms`) exceeds its
 *    share by more than `compute_tolerance_milli`.
 *  - GS_WD_BOOKS_FORGED: a shim slice whose books do not add up: the
 *    slice's total (`used`) is not the sum of its slots' charges, which the
 *    shim changes together under its lock; only a write from outside the
 *    shim leaves them apart (slice-wide, pid 0). It says nothing about
 *    over-use, which NVML decides (memory_over_cap).
 *
 * Grace: each (reason, pid, slice) is remembered from the first
 * evaluation that found it; a verdict is actionable once it has held for
 * `grace_ms` in every evaluation since (a verdict that disappears for one
 * evaluation starts over). Bounded: GS_WD_MAX_TRACK remembered verdicts. */
#ifndef GS_WATCHDOG_H
#define GS_WATCHDOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inventory.h"
#include "ledger.h"

#define GS_WD_GRANULE (2ull << 20)
#define GS_WD_MAX_TRACK 4096
#define GS_WD_MAX_WINDOWS GS_LEDGER_MAX_SLICES
#define GS_WD_WINDOW_SAMPLES 64
#define GS_WD_MSG_MAX 320

enum gs_wd_reason {
        GS_WD_MEMORY_OVER_CAP,
        GS_WD_BOOKS_DISAGREE,
        GS_WD_UNSLICED,
        GS_WD_WRONG_GPU,
        GS_WD_NO_SHIM,
        GS_WD_COMPUTE_OVER_SHARE,
        GS_WD_BOOKS_FORGED,
        GS_WD_N_REASONS,
};

/* "memory_over_cap", "books_disagree", "unsliced", "wrong_gpu", "no_shim",
 * "compute_over_share", "books_forged"; "unknown" out of range. */
const char *gs_wd_reason_name(enum gs_wd_reason r);

/* One process NVML lists on a GPU. */
struct gs_wd_proc {
        uint32_t pid;
        uint64_t used; /* bytes, NVML usedGpuMemory */
        int util;      /* percent of device time since the last sample, -1 unknown */
        int slice;     /* index into snapshot slices, -1: mapped to none */
};

struct gs_wd_gpu {
        char uuid[GS_GPU_UUID_MAX];
        const struct gs_wd_proc *procs;
        size_t n_procs;
};

/* What a slice's books say about one process (a used slot). */
struct gs_wd_book {
        uint32_t pid;
        uint64_t charged; /* bytes */
};

struct gs_wd_slice {
        char id[GS_SLICE_ID_MAX + 1];
        enum gs_slice_kind kind;
        char gpu[GS_GPU_UUID_MAX]; /* the GPU it was placed on (whole GPUs: the first) */
        char more_gpus[GS_SLICE_MAX_GPUS - 1][GS_GPU_UUID_MAX]; /* whole GPUs: the others */
        unsigned n_more_gpus;
        bool shim;    /* a shim slice (share < 1000): cap, books, shim expected */
        uint64_t cap; /* bytes; 0: no cap */
        uint32_t milli;
        enum gs_compute_policy policy;
        enum gs_overuse_policy overuse; /* the slice's own; DEFAULT: the daemon's */
        bool books_valid; /* the books could be read */
        const struct gs_wd_book *books;
        size_t n_books;
        uint64_t books_used; /* the books' slice total (`used`) */
        uint64_t books_sum;  /* the sum of every used slot's charge */
};

struct gs_wd_snapshot {
        const struct gs_wd_gpu *gpus;
        size_t n_gpus;
        const struct gs_wd_slice *slices;
        size_t n_slices;
};

struct gs_wd_config {
        int64_t grace_ms;                 /* default 2000 */
        uint64_t books_tolerance;         /* default GS_WD_GRANULE */
        int64_t window_ms;                /* compute window, default 5000 */
        uint32_t compute_tolerance_milli; /* default 50 (5 points) */
};

/* The defaults above. */
void gs_wd_config_default(struct gs_wd_config *c);

struct gs_wd_verdict {
        enum gs_wd_reason reason;
        uint32_t pid;                    /* 0: the slice as a whole */
        char slice[GS_SLICE_ID_MAX + 1]; /* "" for none */
        char gpu[GS_GPU_UUID_MAX];
        uint64_t used;       /* NVML bytes of pid on gpu */
        uint64_t slice_used; /* NVML bytes of the slice on its GPU */
        uint64_t cap;
        uint64_t books;                   /* books' bytes for pid (0: none) */
        uint32_t util_milli, share_milli; /* compute: measured / configured */
        int64_t first_seen_ms;
        bool fresh;              /* first evaluation that found it */
        bool actionable;         /* held for the grace period */
        bool became_actionable;  /* first evaluation that is actionable */
        char msg[GS_WD_MSG_MAX]; /* one line */
};

struct gs_wd;

/* A rule set with its memory (grace, compute windows); NULL on ENOMEM. */
struct gs_wd *gs_wd_new(const struct gs_wd_config *cfg);
void gs_wd_free(struct gs_wd *w);

/* Evaluate snapshot s at now_ms (monotonic). Writes at most max verdicts
 * to out and returns how many there were (more than max: the rest were
 * dropped, and their grace memory is kept nevertheless). */
size_t gs_wd_evaluate(struct gs_wd *w, const struct gs_wd_snapshot *s, int64_t now_ms,
                      struct gs_wd_verdict *out, size_t max);

#endif /* GS_WATCHDOG_H */
