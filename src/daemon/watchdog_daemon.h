/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced's watchdog (watchdog.c): every interval, on the event loop, it
 * reads NVML's processes of every GPU, maps each to its slice (local
 * slices by ancestry up to the slice's process, pods by the identity of the
 * slice directory mounted in the process's root), reads every slice's
 * books read-only, asks core's rules (watchdog.h) for verdicts, and acts on
 * the actionable ones by policy. Every verdict and action is an event
 * (events.h). */
#ifndef GS_DAEMON_WATCHDOG_H
#define GS_DAEMON_WATCHDOG_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "ledger.h"
#include "overuse_policy.h"

struct wd_args {
        unsigned interval_ms;  /* --watch-interval, default 500; 0: watchdog off */
        int64_t grace_ms;      /* --overuse-grace, default 2000 */
        enum gs_overuse_policy policy; /* --overuse-policy, default report */
        bool kill_unsliced;    /* --kill-unsliced */
};

#define WD_DEFAULT_INTERVAL_MS 500
#define WD_DEFAULT_GRACE_MS 2000

struct daemon;

/* Open the events of d's state directory and add the watchdog's tick to
 * d's loop (after the inventory and NVML are open). 0 or a negative errno
 * with *err. */
int watchdog_start(struct daemon *d, const struct wd_args *a, struct gs_error **err);
/* Log the watchdog's CPU cost per sample, close the events. Under the
 * node's lock, before NVML is closed. */
void watchdog_stop(struct daemon *d);

/* What the watchdog's last sample found of slice `id` (its processes by
 * NVML, whatever the books say). */
struct wd_figures {
        bool sampled;      /* used[] and holders are known */
        uint64_t used[GS_SLICE_MAX_GPUS]; /* bytes per GPU of the slice, in its order */
        uint32_t holders;  /* processes of it that hold GPU memory */
        uint64_t refusals; /* allocations the shim refused at its cap */
};

/* The figures of slice id: true and *ret, false when the watchdog is off
 * or has not seen the slice yet. Under the node's lock, any thread. */
bool watchdog_slice_figures(const struct daemon *d, const char *id, struct wd_figures *ret);

/* Take one sample now (a slice's process exited or it was released: is
 * anything of it still on a GPU?), then what the sample decides (events,
 * draining slices freed). On the event loop with the node's lock held;
 * false when the watchdog is off. */
bool watchdog_sample_now(struct daemon *d);

#endif /* GS_DAEMON_WATCHDOG_H */
