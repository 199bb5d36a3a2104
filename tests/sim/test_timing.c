/* SPDX-License-Identifier: Apache-2.0 */
/* Timing model: event timing within 5% of the requested kernel time, stream
 * ordering, asynchronous launches completed by synchronisation, a full
 * launch queue (SIMGPU_QUEUE_DEPTH=4) blocks, graphs (explicit and captured)
 * take the time of their kernels. */
#include "simtest.h"

static struct ct_kernels k;

static float timed(CUstream s, void (*work)(CUstream, void *), void *arg)
{
        CUevent a, b;
        CT_CHECK(cuEventCreate(&a, 0));
        CT_CHECK(cuEventCreate(&b, 0));
        /* Keep the device busy while the events and the work are enqueued,
         * so the measured interval is device time only: a launcher that
         * the OS deschedules between two calls (a loaded CI machine) leaves
         * a real GPU idle too, and that gap is not the kernel's. */
        CT_CHECK(ct_busy(&k, s, 100000000ull));
        CT_CHECK(cuEventRecord(a, s));
        work(s, arg);
        CT_CHECK(cuEventRecord(b, s));
        CT_CHECK(cuEventSynchronize(b));
        CT_CHECK(cuEventQuery(b));
        float ms = 0;
        CT_CHECK(cuEventElapsedTime(&ms, a, b));
        CT_CHECK(cuEventDestroy(a));
        CT_CHECK(cuEventDestroy(b));
        return ms;
}

static void busy20(CUstream s, void *arg)
{
        (void)arg;
        CT_CHECK(ct_busy(&k, s, 20000000ull));
}

static void launch_graph(CUstream s, void *arg)
{
        CT_CHECK(cuGraphLaunch((CUgraphExec)arg, s));
}

int main(void)
{
        st_fresh();
        CUdevice dev;
        CUcontext ctx;
        ct_setup(&dev, &ctx);
        ct_load_kernels(&k);
        CUstream s;
        CT_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

        /* event timing of a 20 ms kernel */
        float ms = timed(s, busy20, NULL);
        CT_ASSERT(ms > 19.0f && ms < 21.0f, "20 ms kernel timed at %.3f ms", (double)ms);

        /* a launch returns at once; completion is seen by query/sync */
        uint64_t t0 = ct_now_ns();
        CT_CHECK(ct_busy(&k, s, 50000000ull));
        CT_ASSERT(ct_now_ns() - t0 < 20000000ull, "launch blocked");
        CT_EXPECT(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
        CT_CHECK(cuStreamSynchronize(s));
        CT_ASSERT(ct_now_ns() - t0 >= 50000000ull, "sync returned early");
        CT_CHECK(cuStreamQuery(s));

        /* stream ordering: fills applied in order; events in order */
        CUdeviceptr p;
        CT_CHECK(cuMemAlloc(&p, 4096));
        CUevent e1, e2;
        CT_CHECK(cuEventCreate(&e1, 0));
        CT_CHECK(cuEventCreate(&e2, 0));
        CT_CHECK(ct_busy(&k, s, 5000000ull));
        CT_CHECK(cuEventRecord(e1, s));
        CT_CHECK(ct_fill(&k, s, p, 1, 1024));
        /* 300 ms between the events: e2 is still pending when e1 is done
         * even if this thread is descheduled for a while (a loaded CI). */
        CT_CHECK(ct_busy(&k, s, 300000000ull));
        CT_CHECK(ct_fill(&k, s, p, 2, 1024));
        CT_CHECK(cuEventRecord(e2, s));
        CT_CHECK(cuEventSynchronize(e1));
        CT_EXPECT(cuEventQuery(e2), CUDA_ERROR_NOT_READY);
        CT_CHECK(cuStreamSynchronize(s));
        CT_CHECK(cuEventElapsedTime(&ms, e1, e2));
        CT_ASSERT(ms > 299.9f && ms < 300.5f, "e1->e2 %.3f ms", (double)ms);
        unsigned out[1024];
        CT_CHECK(cuMemcpyDtoH(out, p, sizeof(out)));
        CT_ASSERT(out[0] == 2 && out[1023] == 2, "last fill wins: %u", out[0]);

        /* queue depth 4: the 5th pending 20 ms launch blocks ~20 ms */
        t0 = ct_now_ns();
        for (int i = 0; i < 4; i++)
                CT_CHECK(ct_busy(&k, s, 20000000ull));
        uint64_t t1 = ct_now_ns();
        CT_CHECK(ct_busy(&k, s, 20000000ull));
        uint64_t t2 = ct_now_ns();
        CT_ASSERT(t1 - t0 < 10000000ull, "4 launches took %llu ns", (unsigned long long)(t1 - t0));
        CT_ASSERT(t2 - t1 >= 15000000ull, "5th launch did not block (%llu ns)",
                  (unsigned long long)(t2 - t1));
        CT_CHECK(cuCtxSynchronize());
        CT_ASSERT(ct_now_ns() - t0 >= 100000000ull, "5 x 20 ms done too early");

        /* explicit graph: three 10 ms kernels */
        CUgraph g;
        CT_CHECK(cuGraphCreate(&g, 0));
        unsigned long long ns = 10000000ull;
        void *args[] = { &ns };
        CUDA_KERNEL_NODE_PARAMS np = { .func = k.busy, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                       .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
                                       .kernelParams = args };
        CUgraphNode n1, n2, n3;
        CT_CHECK(cuGraphAddKernelNode(&n1, g, NULL, 0, &np));
        CT_CHECK(cuGraphAddKernelNode(&n2, g, &n1, 1, &np));
        CT_CHECK(cuGraphAddKernelNode(&n3, g, &n2, 1, &np));
        CUgraphExec ge;
        CT_CHECK(cuGraphInstantiate(&ge, g, 0));
        ms = timed(s, launch_graph, ge);
        CT_ASSERT(ms > 29.0f && ms < 31.5f, "graph of 3 x 10 ms: %.3f ms", (double)ms);
        CT_CHECK(cuGraphExecDestroy(ge));
        CT_CHECK(cuGraphDestroy(g));

        /* captured graph: nothing runs during capture; the launch runs it */
        CUstreamCaptureStatus cs;
        CT_CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CT_CHECK(cuStreamIsCapturing(s, &cs));
        CT_ASSERT(cs == CU_STREAM_CAPTURE_STATUS_ACTIVE, "capturing");
        t0 = ct_now_ns();
        CT_CHECK(ct_busy(&k, s, 15000000ull));
        CT_CHECK(ct_busy(&k, s, 15000000ull));
        CT_CHECK(cuStreamEndCapture(s, &g));
        CT_CHECK(cuStreamQuery(s));
        CT_CHECK(cuGraphInstantiate(&ge, g, 0));
        ms = timed(s, launch_graph, ge);
        CT_ASSERT(ms > 29.0f && ms < 31.5f, "captured 2 x 15 ms: %.3f ms", (double)ms);
        CT_CHECK(cuGraphExecDestroy(ge));
        CT_CHECK(cuGraphDestroy(g));

        /* cuLaunchKernelEx and cooperative launches take the same path */
        CUlaunchConfig cfg = { .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1,
                               .blockDimY = 1, .blockDimZ = 1, .hStream = s };
        ns = 7000000ull;
        CUevent a, b;
        CT_CHECK(cuEventCreate(&a, 0));
        CT_CHECK(cuEventCreate(&b, 0));
        /* Keep the device busy while the events and the work are enqueued,
         * so the measured interval is device time only: a launcher that
         * the OS deschedules between two calls (a loaded CI machine) leaves
         * a real GPU idle too, and that gap is not the kernel's. */
        CT_CHECK(ct_busy(&k, s, 100000000ull));
        CT_CHECK(cuEventRecord(a, s));
        CT_CHECK(cuLaunchKernelEx(&cfg, k.busy, args, NULL));
        CT_CHECK(cuLaunchCooperativeKernel(k.busy, 1, 1, 1, 1, 1, 1, 0, s, args));
        CT_CHECK(cuEventRecord(b, s));
        CT_CHECK(cuEventSynchronize(b));
        CT_CHECK(cuEventElapsedTime(&ms, a, b));
        CT_ASSERT(ms > 13.5f && ms < 14.7f, "Ex + cooperative 2 x 7 ms: %.3f ms", (double)ms);
        CT_EXPECT(cuLaunchKernel(k.busy, 0, 1, 1, 1, 1, 1, 0, s, args, NULL), CUDA_ERROR_INVALID_VALUE);
        CT_CHECK(cuStreamDestroy(s));
        printf("timing: ok\n");
        return 0;
}
