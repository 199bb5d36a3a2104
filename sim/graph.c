/* SPDX-License-Identifier: Apache-2.0 */
/* simgpu libcuda: CUDA graphs (kernel and empty nodes), stream capture,
 * instantiation and launch. Dependencies must name nodes already in the
 * graph, so insertion order is a valid topological order; a launch enqueues
 * the kernel nodes in that order on the stream. */
#include "sim_cuda.h"

#include <stdlib.h>
#include <string.h>

struct CUgraphNode_st {
        struct CUgraph_st *g;
        bool empty;
        struct sim_launch l;
};

struct CUgraph_st {
        uint32_t magic;
        struct CUgraphNode_st **nodes;
        size_t n, cap;
};

struct CUgraphExec_st {
        uint32_t magic;
        struct sim_launch *items;
        size_t n;
};

static bool graph_ok(const struct CUgraph_st *g)
{
        return g && g->magic == SIM_MAGIC_GRAPH;
}

static struct CUgraph_st *graph_new(void)
{
        struct CUgraph_st *g = calloc(1, sizeof(*g));
        if (g)
                g->magic = SIM_MAGIC_GRAPH;
        return g;
}

static CUresult add_node(struct CUgraph_st *g, const struct CUgraphNode_st *tmpl,
                         const CUgraphNode *deps, size_t ndeps, CUgraphNode *out)
{
        if (ndeps && !deps)
                return CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < ndeps; i++)
                if (!deps[i] || deps[i]->g != g)
                        return CUDA_ERROR_INVALID_VALUE;
        if (g->n == g->cap) {
                size_t nc = g->cap ? g->cap * 2 : 16;
                struct CUgraphNode_st **nn = realloc(g->nodes, nc * sizeof(*nn));
                if (!nn)
                        return CUDA_ERROR_OUT_OF_MEMORY;
                g->nodes = nn;
                g->cap = nc;
        }
        struct CUgraphNode_st *node = malloc(sizeof(*node));
        if (!node)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *node = *tmpl;
        node->g = g;
        g->nodes[g->n++] = node;
        if (out)
                *out = node;
        return CUDA_SUCCESS;
}

CUresult sim_graph_append(struct CUgraph_st *g, const struct sim_launch *l)
{
        struct CUgraphNode_st t = { .l = *l };
        return add_node(g, &t, NULL, 0, NULL);
}

static void graph_free(struct CUgraph_st *g)
{
        for (size_t i = 0; i < g->n; i++)
                free(g->nodes[i]);
        free(g->nodes);
        g->magic = 0;
        free(g);
}

SIM_EXPORT CUresult cuGraphCreate(CUgraph *out, unsigned int flags)
{
        SIM_NEED_INIT();
        if (!out || flags)
                return CUDA_ERROR_INVALID_VALUE;
        *out = graph_new();
        return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SIM_EXPORT CUresult cuGraphDestroy(CUgraph g)
{
        SIM_NEED_INIT();
        if (!graph_ok(g))
                return CUDA_ERROR_INVALID_VALUE;
        graph_free(g);
        return CUDA_SUCCESS;
}

static CUresult kernel_node(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                            CUfunction f, unsigned gx, unsigned bx, void **params, void **extra)
{
        SIM_NEED_INIT();
        if (!out || !graph_ok(g) || !f || f->magic != SIM_MAGIC_FUNC || !gx || !bx)
                return CUDA_ERROR_INVALID_VALUE;
        struct CUgraphNode_st t = { 0 };
        CUresult r = sim_decode(f, params, extra, &t.l);
        if (r != CUDA_SUCCESS)
                return r;
        return add_node(g, &t, deps, ndeps, out);
}

SIM_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                            size_t ndeps, const CUDA_KERNEL_NODE_PARAMS *p)
{
        if (!p)
                return CUDA_ERROR_INVALID_VALUE;
        CUfunction f = p->func ? p->func : (CUfunction)(void *)p->kern;
        return kernel_node(out, g, deps, ndeps, f, p->gridDimX, p->blockDimX, p->kernelParams,
                           p->extra);
}

SIM_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                         size_t ndeps, const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
        if (!p)
                return CUDA_ERROR_INVALID_VALUE;
        return kernel_node(out, g, deps, ndeps, p->func, p->gridDimX, p->blockDimX,
                           p->kernelParams, p->extra);
}

SIM_EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                        size_t ndeps)
{
        SIM_NEED_INIT();
        if (!out || !graph_ok(g))
                return CUDA_ERROR_INVALID_VALUE;
        struct CUgraphNode_st t = { .empty = true };
        return add_node(g, &t, deps, ndeps, out);
}

SIM_EXPORT CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *n)
{
        SIM_NEED_INIT();
        if (!graph_ok(g) || !n)
                return CUDA_ERROR_INVALID_VALUE;
        if (nodes)
                for (size_t i = 0; i < *n && i < g->n; i++)
                        nodes[i] = g->nodes[i];
        *n = g->n;
        return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *out, CUgraph g)
{
        SIM_NEED_INIT();
        if (!out || !graph_ok(g))
                return CUDA_ERROR_INVALID_VALUE;
        struct CUgraphExec_st *e = calloc(1, sizeof(*e));
        if (!e)
                return CUDA_ERROR_OUT_OF_MEMORY;
        e->items = calloc(g->n ? g->n : 1, sizeof(*e->items));
        if (!e->items) {
                free(e);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        for (size_t i = 0; i < g->n; i++)
                if (!g->nodes[i]->empty)
                        e->items[e->n++] = g->nodes[i]->l;
        e->magic = SIM_MAGIC_EXEC;
        *out = e;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph g,
                                                unsigned long long flags)
{
        return instantiate(out, g);
}

SIM_EXPORT CUresult cuGraphInstantiate(CUgraphExec *out, CUgraph g, CUgraphNode *err,
                                       char *log, size_t logsize)
{
        if (log && logsize)
                log[0] = 0;
        return instantiate(out, g);
}

SIM_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *out, CUgraph g, CUgraphNode *err,
                                          char *log, size_t logsize)
{
        return cuGraphInstantiate(out, g, err, log, logsize);
}

SIM_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *out, CUgraph g,
                                                 CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
        CUresult r = instantiate(out, g);
        if (p)
                p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS
                                                  : CUDA_GRAPH_INSTANTIATE_ERROR;
        return r;
}

SIM_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *out, CUgraph g,
                                                      CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
        return cuGraphInstantiateWithParams(out, g, p);
}

SIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec e)
{
        SIM_NEED_INIT();
        if (!e || e->magic != SIM_MAGIC_EXEC)
                return CUDA_ERROR_INVALID_VALUE;
        e->magic = 0;
        free(e->items);
        free(e);
        return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec e, CUstream s)
{
        SIM_NEED_INIT();
        if (!e || e->magic != SIM_MAGIC_EXEC)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult rc = CUDA_SUCCESS;
        if (!sim_stream_ctx(s, &rc))
                return rc;
        for (size_t i = 0; i < e->n; i++) {
                rc = sim_submit(s, &e->items[i]);
                if (rc != CUDA_SUCCESS)
                        return rc;
        }
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s) { return graph_launch(e, s); }
SIM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s) { return graph_launch(e, s); }

SIM_EXPORT CUresult cuGraphUpload(CUgraphExec e, CUstream s)
{
        SIM_NEED_INIT();
        return e && e->magic == SIM_MAGIC_EXEC ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec e, CUstream s) { return cuGraphUpload(e, s); }

/* --- stream capture --- */

static uint64_t capture_ids;

static CUresult begin_capture(CUstream s, CUstreamCaptureMode mode)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        if (!sim_stream_ctx(s, &rc))
                return rc;
        if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
                return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        if (s->capture)
                return CUDA_ERROR_ILLEGAL_STATE;
        s->capture = graph_new();
        if (!s->capture)
                return CUDA_ERROR_OUT_OF_MEMORY;
        s->capture_id = __atomic_add_fetch(&capture_ids, 1, __ATOMIC_RELAXED);
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamBeginCapture(CUstream s)
{ return begin_capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL); }
SIM_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream s)
{ return begin_capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL); }
SIM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode m)
{ return begin_capture(s, m); }
SIM_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode m)
{ return begin_capture(s, m); }

static CUresult end_capture(CUstream s, CUgraph *out)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        if (!sim_stream_ctx(s, &rc))
                return rc;
        if (!out)
                return CUDA_ERROR_INVALID_VALUE;
        if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD || !s->capture)
                return CUDA_ERROR_ILLEGAL_STATE;
        *out = s->capture;
        s->capture = NULL;
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *g) { return end_capture(s, g); }
SIM_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *g) { return end_capture(s, g); }

static CUresult capture_info(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                             const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *nd)
{
        SIM_NEED_INIT();
        CUresult rc = CUDA_SUCCESS;
        if (!sim_stream_ctx(s, &rc))
                return rc;
        if (!st)
                return CUDA_ERROR_INVALID_VALUE;
        bool dflt = s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
        bool active = !dflt && s->capture;
        *st = active ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
        if (active) {
                if (id)
                        *id = s->capture_id;
                if (g)
                        *g = s->capture;
                if (deps)
                        *deps = s->capture->n ? (const CUgraphNode *)&s->capture->nodes[s->capture->n - 1]
                                              : NULL;
                if (edges)
                        *edges = NULL;
                if (nd)
                        *nd = s->capture->n ? 1 : 0;
        }
        return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st)
{ return capture_info(s, st, NULL, NULL, NULL, NULL, NULL); }
SIM_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *st)
{ return capture_info(s, st, NULL, NULL, NULL, NULL, NULL); }
SIM_EXPORT CUresult cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id)
{ return capture_info(s, st, id, NULL, NULL, NULL, NULL); }
SIM_EXPORT CUresult cuStreamGetCaptureInfo_ptsz(CUstream s, CUstreamCaptureStatus *st,
                                                cuuint64_t *id)
{ return capture_info(s, st, id, NULL, NULL, NULL, NULL); }
SIM_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus *st,
                                              cuuint64_t *id, CUgraph *g,
                                              const CUgraphNode **deps, size_t *nd)
{ return capture_info(s, st, id, g, deps, NULL, nd); }
SIM_EXPORT CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream s, CUstreamCaptureStatus *st,
                                                   cuuint64_t *id, CUgraph *g,
                                                   const CUgraphNode **deps, size_t *nd)
{ return capture_info(s, st, id, g, deps, NULL, nd); }
SIM_EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *st,
                                              cuuint64_t *id, CUgraph *g,
                                              const CUgraphNode **deps,
                                              const CUgraphEdgeData **edges, size_t *nd)
{ return capture_info(s, st, id, g, deps, edges, nd); }
SIM_EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream s, CUstreamCaptureStatus *st,
                                                   cuuint64_t *id, CUgraph *g,
                                                   const CUgraphNode **deps,
                                                   const CUgraphEdgeData **edges, size_t *nd)
{ return capture_info(s, st, id, g, deps, edges, nd); }
