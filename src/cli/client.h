/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI's client of gpusliced's local API (docs/daemon.md): connecting
 * (and starting an embedded daemon when none answers), and typed wrappers
 * around each request. Blocking calls with bounded waits. */
#ifndef GS_CLI_CLIENT_H
#define GS_CLI_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "inventory.h"
#include "ledger.h"
#include "local_proto.h"

#define CLI_MAX_SLICE_GPUS GS_SLICE_MAX_GPUS

/* Where to find the daemon, and whether to start one. */
struct cli_conn_opts {
        bool sim;            /* --sim: a private simulated daemon (started with --sim) */
        bool start;          /* start a daemon when none answers (run, up; never ls/top/events) */
};

/* Connect to the daemon (docs/daemon.md, "Which daemon"): $GPUSLICE_SOCKET
 * or $GPUSLICE_STATE_DIR/gpusliced.sock when set; else with opts->sim the
 * user's private simulated daemon (gs_local_sim_dir); else the machine's
 * (GS_LOCAL_SYSTEM_DIR), or, when that does not answer, a private simulated
 * daemon of the user's that does. When none answers and opts->start is set,
 * gpusliced (next to this binary, in the build tree, $GPUSLICE_DAEMON or on
 * PATH) is started in the background with that socket, state dir and --sim,
 * and waited for (at most ~15 s): only in a private place (an explicit state
 * directory, or --sim), or by root as the machine's daemon. On success
 * *ret_fd is a connected socket (close it). On failure *err says why: for
 * the machine's daemon, how to start it or get access; the daemon's own
 * error lines when it failed to start. */
int cli_connect(const struct cli_conn_opts *opts, int *ret_fd, struct gs_error **err);

#define CLI_SIM_ENV_MAX 16

/* What a daemon says it serves (its status reply). */
struct cli_daemon_info {
        bool sim;                                /* simgpu, not NVIDIA's driver */
        char sim_libdir[GS_PATH_MAX];            /* simgpu's libraries; "" when not said */
        char sim_env[CLI_SIM_ENV_MAX][512];      /* "SIMGPU_...=value" of the daemon's simgpu */
        size_t n_sim_env;
};

/* Ask the daemon on fd what it serves. 0 and *ret, or a negative errno
 * with *err set (err may be NULL). */
int cli_status(int fd, struct cli_daemon_info *ret, struct gs_error **err);

/* Send one request built in b (consumed) and read the reply into *ret
 * (gs_proto_msg_done). An error reply returns its code with its message in
 * *err. */
int cli_call(int fd, struct gs_proto_builder *b, struct gs_proto_msg *ret, struct gs_error **err);

struct cli_slice {
        char id[GS_SLICE_ID_MAX + 1];
        char name[GS_SLICE_NAME_MAX + 1];
        uint32_t milli;
        uint64_t memory;         /* cap; 0 for whole GPUs */
        char policy[8];
        char overuse[8];         /* its own over-use policy, "default"; "" from an older daemon */
        bool kube;               /* a Kubernetes pod's slice (no pid) */
        int pid;
        unsigned uid;
        int64_t created;
        unsigned n_gpus;
        unsigned gpu_index[CLI_MAX_SLICE_GPUS];
        char gpu_uuid[CLI_MAX_SLICE_GPUS][GS_GPU_UUID_MAX];
        bool has_used;
        uint64_t used;           /* NVML's per-process memory, when known */
        bool has_gpu_time;
        uint32_t gpu_time;       /* measured share of its GPU over the last second (milli) */
        bool has_gate_wait;
        uint32_t gate_wait;      /* part of the last second it waited for the gate (milli) */
        bool has_gate_wait_ns;
        uint64_t gate_wait_ns;   /* time it waited for the gate since the daemon started */
        char config[GS_PATH_MAX];    /* "" for whole GPUs */
        char slice_dir[GS_PATH_MAX];
        bool stopping;               /* a stop (cli_stop_slice) is under way */
        bool draining;               /* its process is gone, not yet its GPU memory */
        bool has_refusals;           /* from a daemon whose watchdog counts them: */
        uint64_t refusals;           /* allocations the shim refused at its cap */
        int up_pid;                  /* the `gpuslice up` that runs it; 0: none (or not ours) */
        char up_spec[GS_PATH_MAX];   /* the spec that up runs; "" */
};

struct cli_gpu {
        unsigned index;
        char uuid[GS_GPU_UUID_MAX];
        char name[GS_GPU_NAME_MAX];
        uint64_t memory, free_memory, context_overhead;
        uint32_t free_milli;
        bool healthy;
        unsigned n_slices;
};

struct cli_listing {
        struct cli_gpu *gpus;
        size_t n_gpus;
        struct cli_slice *slices;
        size_t n_slices;
};

/* Ask for a slice for process `pid`: milli 1..999 or k*1000; memory 0 =
 * the default cap; policy "share"/"cap"/NULL; overuse "report"/"kill"/
 * "evict"/NULL (the daemon's); name may be NULL. A daemon that does not
 * echo the over-use policy asked for (one older than per-slice policies)
 * gets the slice released again, and -EPROTONOSUPPORT with a message.
 * up_spec: for `gpuslice up` running the spec at that absolute path (NULL:
 * none), the daemon records the asker as the slice's supervisor, which
 * `gpuslice down` stops (docs/daemon.md); a daemon that does not echo it
 * (an older one) keeps the slice as an ordinary one: *ret->up_pid is then
 * 0 (always 0 without up_spec). */
int cli_create_slice(int fd, uint32_t milli, uint64_t memory, const char *policy,
                     const char *overuse, const char *name, pid_t pid, const char *up_spec,
                     struct cli_slice *ret, struct gs_error **err);

/* Release a slice by id. *ret_stopped (unless ret_stopped is NULL): whether
 * the slice had been stopped by `gpuslice stop` (false from an older
 * daemon). A slice the daemon already freed answers -ENOENT, unless it was
 * stopped. */
int cli_release_slice(int fd, const char *id, bool *ret_stopped, struct gs_error **err);

/* Ask the daemon to stop slice `id` (GS_MSG_STOP): up false: SIGTERM to its
 * process now, SIGKILL after grace_ms, and the slice is freed once it is
 * gone; up true: SIGTERM to the `gpuslice up` that runs it (which stops its
 * APIs). -EPERM unless we own it or are root; -ENOENT for no such slice;
 * -EBADMSG from a daemon without stops. *ret_pid: the process signalled. */
int cli_stop_slice(int fd, const char *id, bool up, uint64_t grace_ms, int *ret_pid,
                   struct gs_error **err);

/* List GPUs and slices into *ret (cli_listing_done). */
int cli_list(int fd, struct cli_listing *ret, struct gs_error **err);
void cli_listing_done(struct cli_listing *l);

/* Check that n slices (milli[i], memory[i]; memory 0 = default) fit
 * together on the node now. 0, or -ENOSPC with a message naming the slice
 * that does not fit and each GPU's free share and memory. */
int cli_plan(int fd, const uint32_t *milli, const uint64_t *memory, size_t n,
             struct gs_error **err);

#endif /* GS_CLI_CLIENT_H */
