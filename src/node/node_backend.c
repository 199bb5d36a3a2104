/* SPDX-License-Identifier: Apache-2.0 */
/* The backends: `whole` GPUs and `shim` slices. See node_backend.h. */
#include "node_backend.h"

#include <errno.h>
#include <inttypes.h>

#include "node.h"
#include "node_files.h"
#include "quantity.h"

static int whole_fit(uint32_t milli, uint64_t memory, struct gs_error **err)
{
        if (milli == 0 || milli % GS_MILLI_PER_GPU)
                return 0;
        if (memory)
                return gs_error_set(err, -EINVAL, "whole-GPU requests take no memory cap");
        return 1;
}

const struct node_backend node_backend_whole = {
        .name = "whole",
        .needs_shim = false,
        .fit = whole_fit,
        /* exclusive GPUs run without the shim: no files to write */
};

static int shim_fit(uint32_t milli, uint64_t memory, struct gs_error **err)
{
        (void)memory, (void)err;
        return milli >= 1 && milli < GS_MILLI_PER_GPU;
}

static int shim_prepare(struct node *n, const struct gs_slice *s, struct gs_error **err)
{
        return node_files_write_slice(n, s, err);
}

static void shim_release(struct node *n, const struct gs_slice *s)
{
        if (node_files_remove_slice(n, s->id) < 0)
                n->repair_pending = true; /* node_retry_locked removes them later */
}

static bool shim_files_ok(struct node *n, const struct gs_slice *s)
{
        return node_files_slice_ok(n, s);
}

const struct node_backend node_backend_shim = {
        .name = "shim",
        .needs_shim = true,
        .fit = shim_fit,
        .prepare = shim_prepare,
        .release = shim_release,
        .files_ok = shim_files_ok,
};

static const struct node_backend *const backends[] = { &node_backend_shim, &node_backend_whole };

int node_backend_prepare(const struct node_backend *be, struct node *n, const struct gs_slice *s,
                         struct gs_error **err)
{
        return be->prepare ? be->prepare(n, s, err) : 0;
}

void node_backend_release(const struct node_backend *be, struct node *n, const struct gs_slice *s)
{
        if (be->release)
                be->release(n, s);
}

bool node_backend_files_ok(const struct node_backend *be, struct node *n,
                           const struct gs_slice *s)
{
        return be->files_ok ? be->files_ok(n, s) : true;
}

const struct node_backend *node_backend_of(const struct gs_slice *s)
{
        return gs_slice_is_whole(s) ? &node_backend_whole : &node_backend_shim;
}

int node_backend_for(uint32_t milli, uint64_t memory, const struct node_backend **ret,
                     struct gs_error **err)
{
        for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
                int r = backends[i]->fit(milli, memory, err);
                if (r < 0)
                        return r;
                if (r > 0) {
                        *ret = backends[i];
                        return 0;
                }
        }
        return gs_error_set(err, -EINVAL,
                            "gpu share %" PRIu32 "m is neither 1m..999m nor whole GPUs", milli);
}
