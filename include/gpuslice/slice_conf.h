/* SPDX-License-Identifier: Apache-2.0 */
/* The slice config file: the contract between whoever creates a slice (the
 * daemon, the CLI, the device plugin) and the shim inside the slice's
 * processes. ABI: documented in README.md ("The slice config file").
 *
 * Text, one `key = value` per line, `#` comments, keys:
 *   version        1 (required; the only version so far)
 *   slice          slice id, [A-Za-z0-9._-]{1,63} (required)
 *   gpu_uuid       UUID of the slice's GPU as NVML reports it (required)
 *   memory_limit   bytes, > 0 (required; includes context overhead)
 *   compute_milli  1..1000 share of the GPU's time (required)
 *   policy         share | cap (optional, default share)
 *   context_overhead bytes charged per CUDA context the slice creates
 *                  (optional; the daemon measures it on the real GPU;
 *                  default 0)
 *   slice_dir      directory of the slice's shared accounting (required)
 *   daemon_socket  the daemon's unix socket (optional)
 *   lease_page     the daemon's lease page for the slice, in a directory
 *                  the daemon owns (optional; without it the shim takes no
 *                  leases from the daemon)
 * Unknown keys, duplicates, bad values: the whole file is rejected. */
#ifndef GS_SLICE_CONF_H
#define GS_SLICE_CONF_H

#include <stdint.h>

#define GS_SLICE_CONF_VERSION 1
#define GS_SLICE_CONF_DEFAULT_PATH "/run/gpuslice/slice.conf"
#define GS_SLICE_CONF_MAX_BYTES 8192
#define GS_SLICE_ID_MAX 63
#define GS_PATH_MAX 4096

enum gs_compute_policy {
        GS_POLICY_SHARE = 0, /* guarantee; idle capacity is lent */
        GS_POLICY_CAP = 1,   /* never above the share */
};

struct gs_slice_conf {
        unsigned version;
        char slice[GS_SLICE_ID_MAX + 1];
        char gpu_uuid[96];
        uint64_t memory_limit;
        uint32_t compute_milli;
        enum gs_compute_policy policy;
        uint64_t context_overhead;
        char slice_dir[GS_PATH_MAX];
        char daemon_socket[GS_PATH_MAX];   /* "" when absent */
        char lease_page[GS_PATH_MAX];      /* "" when absent */
};

#endif /* GS_SLICE_CONF_H */
