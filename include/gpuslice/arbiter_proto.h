/* SPDX-License-Identifier: Apache-2.0 */
/* The compute-grant protocol between the shim (in every process of a slice)
 * and gpusliced's per-GPU arbiter. An ABI: both sides check magic, version
 * and size; bump GS_ARB_PROTO_VERSION whenever anything below changes.
 * The reasons for this shape, and the failure behaviour, are in
 * docs/internals/compute-arbiter.md.
 *
 * Two channels:
 *
 * 1. The lease page (daemon -> shim, read-only for the shim): the file
 *    `<slice_dir>/compute` (GS_ARB_PAGE_FILE), one per slice, created and
 *    written only by the daemon (mode 0644), mmap'd PROT_READ/MAP_SHARED by
 *    the shim. It says who may launch until when: while the slice holds a
 *    lease the launch gate reads it with plain atomic loads and the vDSO
 *    clock, so the launch path makes no syscall and takes no lock.
 *    Writer protocol (daemon): seq++ (odd), store gen/start/until, seq++
 *    (even), then futex++ and FUTEX_WAKE(futex, INT_MAX) (a shared futex,
 *    not FUTEX_PRIVATE) to wake shim threads waiting for a lease.
 *    Reader protocol (shim): s1 = load_acquire(seq); if odd, retry; read
 *    gen/start/until; s2 = load_acquire(seq); retry if s1 != s2. A launch
 *    may go when start - GS_ARB_PRESTART_NS <= now < until (start may lie
 *    ahead: the previous holder's queued work is predicted to drain then)
 *    and the gate's own estimate of its queued work's end is less than
 *    GS_ARB_AHEAD_NS ahead of now.
 *    `heartbeat_ns` is refreshed at least every GS_ARB_HEARTBEAT_NS; a shim
 *    that sees it older than GS_ARB_STALE_NS, or `epoch` change, or the
 *    socket fail, treats the daemon as gone (local enforcement, below).
 *
 * 2. The socket (shim <-> daemon transitions only): the daemon's unix socket
 *    (slice_conf `daemon_socket`); peer credentials (SO_PEERCRED) identify
 *    the process and so the slice. Fixed 32-byte frames, little-endian:
 *      u32 magic GS_ARB_MSG_MAGIC ("GSAR"), u16 version, u16 type,
 *      u64 gen, u64 value, u32 flags, u32 reserved (0).
 *    The first 4 bytes differ from the local API's "GSLP" magic, so one
 *    socket can carry both: the daemon dispatches on the magic of the first
 *    frame of a connection.
 *      HELLO   shim->daemon  first frame; value = GS_ARB_PROTO_VERSION
 *      WELCOME daemon->shim  gen = 0, value = daemon epoch
 *      WANT    shim->daemon  this process has work and no lease (sent once
 *                            per lease waited for; also when the slice
 *                            counts as pending already: it claims the GPU
 *                            back from a lender)
 *      IDLE    shim->daemon  this process has no more work
 *      DONE    shim->daemon  the lease `gen` is over for this process and its
 *                            work drained; value = device time (ns) of its
 *                            work during the hold; flags GS_ARB_F_PENDING if
 *                            it has more work (a thread waits for a lease).
 *                            Also sent, with value 0, for a lease of the
 *                            slice this process did not launch in, once it
 *                            is over: it owes a report either way, and the
 *                            flag tells the daemon whether it still waits.
 *                            A process that starts waiting after it read
 *                            the flag sends WANT after the DONE.
 *                            Sent early, before the lease ends, when the
 *                            process's streams for the hold are empty and
 *                            no thread launches or waits (a serving API
 *                            between requests): the hold is over for this
 *                            process, and a report from the holder with the
 *                            flag clear ends the hold at once (the daemon
 *                            hands the GPU on). Its next launch needs a
 *                            new lease (WANT).
 *      ERROR   daemon->shim  value = positive errno; the daemon closes
 *    A slice with several processes: the daemon ORs WANT over them and ends
 *    a hold when every process that was pending at grant time sent DONE
 *    (or the drain timeout passed); the hold's busy time is the sum.
 *
 * Local enforcement (daemon unreachable, stale or restarting): the shim
 * launches only in the slice's outage window (`window` below) when the
 * daemon gave one, else runs its own single-slice arbiter with policy cap
 * at its share (so the slices on a GPU together never oversubscribe it), logs it once per
 * transition, counts it in its metrics, retries the socket every
 * GS_ARB_RECONNECT_NS, and never waits more than GS_ARB_MAX_WAIT_NS for a
 * lease before falling back. */
#ifndef GS_ARBITER_PROTO_H
#define GS_ARBITER_PROTO_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GS_ARB_PROTO_VERSION 1u
#define GS_ARB_PAGE_MAGIC 0x3150524142534750ULL /* "PGSBARP1" little-endian */
#define GS_ARB_PAGE_FILE "compute"              /* name inside slice_dir */
#define GS_ARB_MSG_MAGIC 0x52415347u            /* "GSAR" little-endian */
#define GS_ARB_MSG_SIZE 32u

#define GS_ARB_HEARTBEAT_NS (100ull * 1000 * 1000)
#define GS_ARB_STALE_NS (1000ull * 1000 * 1000)
/* A thread waits at most this long for a lease from a live daemon (one
 * that beats); then its process falls back to local enforcement. Long: a
 * small share among long kernels waits seconds for its turn (50m among
 * 50 ms kernels: ~1 s), and falling back early makes it run outside the
 * arbiter, unreported. A daemon that stops beating is left after
 * GS_ARB_STALE_NS. */
#define GS_ARB_MAX_WAIT_NS (30000ull * 1000 * 1000)
/* A lease may be used this long before its start: the first launch reaches
 * the device by the time the previous holder's work drains. */
#define GS_ARB_PRESTART_NS (100ull * 1000)
#define GS_ARB_RECONNECT_NS (500ull * 1000 * 1000)
#define GS_ARB_AHEAD_NS (1000ull * 1000)
/* Outage windows (struct gs_arb_page.window): while the daemon is gone a
 * slice launches only inside its window of every period, the windows of
 * one GPU's slices are disjoint, so each gets its share without any
 * coordination at run time (docs/shim.md, "Local enforcement"). The word
 * packs GS_ARB_WINDOW_VALID | offset_milli << 16 | len_milli: the window
 * is [offset, offset + len) thousandths of the period. */
#define GS_ARB_WINDOW_PERIOD_NS (100ull * 1000 * 1000)
#define GS_ARB_WINDOW_VALID (1ull << 63)
#define GS_ARB_WINDOW_PACK(off, len) (GS_ARB_WINDOW_VALID | ((uint64_t)(off) << 16) | (uint64_t)(len))
#define GS_ARB_WINDOW_OFF(w) ((uint32_t)(((w) >> 16) & 0xffffu))
#define GS_ARB_WINDOW_LEN(w) ((uint32_t)((w) & 0xffffu))
/* The largest busy time a DONE may report (an hour); larger is malformed. */
#define GS_ARB_MAX_BUSY_NS (3600ull * 1000 * 1000 * 1000)

enum gs_arb_msg_type {
        GS_ARB_MSG_HELLO = 1,
        GS_ARB_MSG_WELCOME = 2,
        GS_ARB_MSG_WANT = 3,
        GS_ARB_MSG_IDLE = 4,
        GS_ARB_MSG_DONE = 5,
        GS_ARB_MSG_ERROR = 6,
};

#define GS_ARB_F_PENDING 0x1u
#define GS_ARB_F_ALL GS_ARB_F_PENDING

/* The lease page. Every field the daemon changes after creation is an
 * 8-byte atomic (lock-free on every target gpuslice supports). */
struct gs_arb_page {
        uint64_t magic;              /* GS_ARB_PAGE_MAGIC, written last at creation */
        uint32_t version;            /* GS_ARB_PROTO_VERSION */
        uint32_t size;               /* sizeof(struct gs_arb_page) */
        char slice[64];              /* slice id, NUL-terminated */
        uint32_t milli;              /* the slice's share, for local enforcement */
        uint32_t policy;             /* enum gs_compute_policy */
        uint64_t quantum_ns;         /* the arbiter's quantum, for local enforcement */
        _Atomic uint64_t epoch;      /* daemon instance; changes on restart */
        _Atomic uint64_t heartbeat_ns; /* CLOCK_MONOTONIC of the daemon's last beat */
        _Atomic uint64_t seq;        /* odd while the lease below is written */
        _Atomic uint64_t gen;        /* lease generation (0: never granted) */
        _Atomic uint64_t start_ns;   /* lease start, CLOCK_MONOTONIC */
        _Atomic uint64_t until_ns;   /* lease end; 0 or past: no lease */
        _Atomic uint32_t futex;      /* bumped after every lease write */
        uint32_t reserved0;
        /* The slice's outage window (GS_ARB_WINDOW_*): where in every
         * GS_ARB_WINDOW_PERIOD_NS of CLOCK_MONOTONIC the slice's processes
         * may launch while they cannot reach the daemon. 0: none given
         * (a daemon that predates it reads this field as reserved). The
         * daemon gives the slices of one GPU disjoint windows in
         * proportion to their shares, rewritten when they change. */
        _Atomic uint64_t window;
        uint64_t reserved[15];       /* zero */
};

_Static_assert(sizeof(struct gs_arb_page) == 280, "gs_arb_page layout changed: bump the version");

#ifdef __cplusplus
}
#endif

#endif /* GS_ARBITER_PROTO_H */
