/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced's compute arbiter service, inside: the state shared by
 * arbiter_server.c (pages, connections, timer), arbiter_members.c (which
 * slice a connecting process belongs to) and arbiter_conns.c (connection
 * limits). Not for other files. */
#ifndef GS_DAEMON_ARBITER_SERVER_INT_H
#define GS_DAEMON_ARBITER_SERVER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "arbiter.h"
#include "daemon.h"
#include "gpuslice/arbiter_proto.h"
#include "lease_page.h"

#define ARB_MAX_CONNS 1024                 /* shim connections (all slices) */
#define ARB_SAMPLES 21                     /* charge samples: one second of beats */
#define ARB_PID_DEPTH 64                   /* parent chain walked to find a slice */
/* Connection limits (arbiter_conns.c): a new connection must say HELLO,
 * and a frame once begun must complete, within 5 s; a verified one with no
 * frame pending stays as long as its process. Per non-root uid: at most
 * ARB_MAX_CONNS_PER_UID connections, ARB_MAX_UNVERIFIED_PER_UID of them
 * before HELLO; the last ARB_RESERVED_CONNS slots only for root and
 * slices' processes; past ARB_MAX_UNVERIFIED silent connections in all,
 * the oldest is cut off for a newcomer. */
#define ARB_HELLO_DEADLINE_MS 5000
#define ARB_FRAME_DEADLINE_MS 5000
#define ARB_MAX_CONNS_PER_UID 256
#define ARB_MAX_UNVERIFIED_PER_UID 8
#define ARB_MAX_UNVERIFIED 64
#define ARB_RESERVED_CONNS 64

enum arb_sub { ARB_TIMER, ARB_CONN };

struct arb_watch {
        struct node_watch w; /* ctx: the daemon */
        enum arb_sub sub;
};

struct arb_member {
        char id[GS_SLICE_ID_MAX + 1];
        enum gs_slice_kind kind;
        unsigned gpu;           /* position in d->inv */
        int slot;               /* in that GPU's arbiter */
        pid_t pid;
        uid_t uid;
        /* GS_SLICE_KUBE: identity of the slice's directory on the host,
         * which the device plugin bind-mounts into its containers at
         * NODE_CONTAINER_SLICE_DIR (see arb_member_of_pid). */
        bool dir_known;
        dev_t dir_dev;
        ino_t dir_ino;
        uint32_t milli;
        enum gs_compute_policy policy;
        struct lease_page page;
        uint64_t w_gen, w_start, w_until; /* what the page shows (arbiter gen) */
        bool hold_open;         /* a hold whose DONEs are awaited */
        bool hold_lost;         /* a process owing a DONE hung up */
        uint64_t hold_gen, hold_busy;
        /* Samples every beat: time, charged device time, time waited for
         * a lease (gs_arbiter_wait_ns), for the figures over a second. */
        uint64_t s_t[ARB_SAMPLES], s_c[ARB_SAMPLES], s_w[ARB_SAMPLES];
        unsigned s_pos, s_n;
        bool seen;
};

struct arb_conn {
        struct arb_watch aw;
        pid_t pid;
        uid_t uid;
        struct arb_member *m;   /* NULL before HELLO, or once the slice is freed */
        bool hello, pending, owes, dead;
        uint8_t in[GS_ARB_MSG_SIZE];
        size_t in_len;
        int64_t since_ms;       /* adopted (node_now_ms) */
        int64_t frame_ms;       /* first byte of an incomplete frame, 0 if none */
};

struct arb_gpu {
        struct gs_arbiter a;
        struct arb_member *slot[GS_ARB_MAX_SLICES];
        uint64_t wake_at;
};

struct arbsrv {
        uint64_t epoch, gen_base;
        struct arb_watch timer;
        struct arb_gpu *gpus;
        unsigned n_gpus;
        struct arb_member *members[GS_LEDGER_MAX_SLICES];
        size_t n_members;
        struct arb_conn *conns[ARB_MAX_CONNS];
        uint64_t next_beat;
        unsigned beats;
};

/* Remember the identity (st_dev, st_ino) of Kubernetes slice m's directory
 * on the host, `dir`. False, leaving it unknown (tried again when a process
 * says HELLO), when it cannot be read. */
bool arb_member_learn_dir(struct arb_member *m, const char *dir);

/* The member (slice) the process `pid` (a peer's SO_PEERCRED pid) belongs
 * to: a local slice whose process is pid or its nearest ancestor, else the
 * Kubernetes slice whose directory is mounted at NODE_CONTAINER_SLICE_DIR in
 * pid's mount namespace. NULL, with the reason in why, when it is in none. */
struct arb_member *arb_member_of_pid(struct daemon *d, pid_t pid, char *why, size_t why_size);

/* Give every slice of GPU g its outage window (struct gs_arb_page.window):
 * disjoint, in slot order, each as long as its share of
 * GS_ARB_WINDOW_PERIOD_NS. Called after every change of g's members or
 * shares; writes only the members' pages. */
void arb_windows_assign(struct arb_gpu *g);

/* May a new shim connection from pid/uid take a slot (the limits above)?
 * 0, possibly after cutting off the oldest silent connection; or -EBUSY
 * with the reason in why (logged, at most a line a second). With d->arb
 * set. */
int arb_conn_admit(struct daemon *d, pid_t pid, uid_t uid, char *why, size_t why_size);

/* The event loop's tick (node_tick_fn, ctx: the daemon): cut off
 * connections past their HELLO or frame deadline with ERROR ETIMEDOUT;
 * returns milliseconds until the next deadline, or -1. */
int arb_conns_tick(void *ctx, int64_t now_ms);

#endif /* GS_DAEMON_ARBITER_SERVER_INT_H */
