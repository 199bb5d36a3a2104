/* SPDX-License-Identifier: Apache-2.0 */
/* Shim overhead against simgpu alone, in the same run: the program runs
 * itself twice, once plain and once with LD_PRELOAD=libgpuslice.so in a
 * slice, and prints the added cost of each operation with its target.
 *
 * usage: bench_shim /path/to/libgpuslice.so   (LD_LIBRARY_PATH must point at
 * simgpu, GS_KERNELS_PTX at the project kernels; see bench/run-shim.sh) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "benchlib.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define LIVE 10000

struct figures {
        double launch, pair0, pair10k, meminfo;
};

/* Best of 5 runs of the per-operation average. */
static double pairs(unsigned n)
{
        double best = 1e18;
        for (int rep = 0; rep < 5; rep++) {
                uint64_t t = bench_now_ns();
                for (unsigned i = 0; i < n; i++) {
                        CUdeviceptr p;
                        BENCH_CHK(bench_cu.alloc(&p, 4096));
                        BENCH_CHK(bench_cu.free(p));
                }
                double per = (double)(bench_now_ns() - t) / n;
                best = per < best ? per : best;
        }
        return best;
}

static int child(void)
{
        bench_load();
        bench_ctx_setup();
        struct figures f;
        CUfunction busy = bench_busy_kernel();
        unsigned long long ns = 0;
        void *args[] = { &ns };
        f.launch = 1e18;
        for (int rep = 0; rep < 5; rep++) {
                uint64_t t = bench_now_ns();
                for (int i = 0; i < 20000; i++) {
                        BENCH_CHK(bench_cu.launch(busy, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
                        if (i % 256 == 255)
                                BENCH_CHK(bench_cu.sync());
                }
                BENCH_CHK(bench_cu.sync());
                double per = (double)(bench_now_ns() - t) / 20000;
                f.launch = per < f.launch ? per : f.launch;
        }

        f.pair0 = pairs(20000);
        CUdeviceptr *live = malloc(sizeof(*live) * LIVE);
        if (!live)
                bench_die("out of memory");
        for (int i = 0; i < LIVE; i++)
                BENCH_CHK(bench_cu.alloc(&live[i], 4096));
        f.pair10k = pairs(20000);
        for (int i = 0; i < LIVE; i++)
                BENCH_CHK(bench_cu.free(live[i]));
        free(live);

        f.meminfo = 1e18;
        for (int rep = 0; rep < 5; rep++) {
                size_t fr, tot;
                uint64_t t = bench_now_ns();
                for (int i = 0; i < 50000; i++)
                        BENCH_CHK(bench_cu.meminfo(&fr, &tot));
                double per = (double)(bench_now_ns() - t) / 50000;
                f.meminfo = per < f.meminfo ? per : f.meminfo;
        }
        if (write(1, &f, sizeof(f)) != (ssize_t)sizeof(f))
                return 1;
        return 0;
}

static int run(const char *preload, const char *conf, struct figures *out)
{
        return bench_run_child("BENCH_SHIM_CHILD", preload, conf, out, sizeof(*out));
}

static void verdict(const char *name, double value, const char *unit, const char *target, int pass)
{
        printf("VERDICT %s: %.1f %s (target %s): %s\n", name, value, unit, target, pass ? "PASS" : "FAIL");
}

int main(int argc, char **argv)
{
        bench_init("bench_shim");
        if (getenv("BENCH_SHIM_CHILD"))
                return child();
        if (argc < 2)
                bench_die("usage: bench_shim /path/to/libgpuslice.so");
        char dir[] = "/tmp/gs-bench-shim-XXXXXX";
        char uuid[64];
        bench_sim_setup(dir, uuid, sizeof(uuid));
        char slicedir[64], conf[64];
        snprintf(slicedir, sizeof(slicedir), "%s/slice", dir);
        snprintf(conf, sizeof(conf), "%s/slice.conf", dir);
        mkdir(slicedir, 0700);
        FILE *f = fopen(conf, "we");
        if (!f)
                bench_die("cannot write the config");
        fprintf(f,
                "version = 1\nslice = bench\ngpu_uuid = %s\nmemory_limit = %llu\ncompute_milli = 1000\n"
                "context_overhead = 268435456\nslice_dir = %s\n",
                uuid, 48 * GiB, slicedir);
        fclose(f);

        struct figures base, shim;
        if (run(NULL, NULL, &base) < 0 || run(argv[1], conf, &shim) < 0)
                bench_die("a measurement run failed");
        bench_rm_tree(dir);

        double dl = shim.launch - base.launch, d0 = shim.pair0 - base.pair0,
               d10 = shim.pair10k - base.pair10k, dm = shim.meminfo - base.meminfo;
        printf("shim overhead against simgpu alone (best of 5, ns per operation)\n");
        printf("  %-28s %10s %10s %10s %8s\n", "operation", "simgpu", "+shim", "added", "ratio");
        printf("  %-28s %10.1f %10.1f %10.1f %8.2f\n", "cuLaunchKernel", base.launch, shim.launch, dl,
               shim.launch / base.launch);
        printf("  %-28s %10.1f %10.1f %10.1f %8.2f\n", "alloc+free, 0 live", base.pair0, shim.pair0, d0,
               shim.pair0 / base.pair0);
        printf("  %-28s %10.1f %10.1f %10.1f %8.2f\n", "alloc+free, 10000 live", base.pair10k,
               shim.pair10k, d10, shim.pair10k / base.pair10k);
        printf("  %-28s %10.1f %10.1f %10.1f %8.2f\n", "cuMemGetInfo", base.meminfo, shim.meminfo, dm,
               shim.meminfo / base.meminfo);
        verdict("shim_launch_overhead", dl, "ns", "< 50 ns", dl < 50);
        verdict("shim_alloc_free_overhead", d0, "ns", "< 1000 ns", d0 < 1000);
        verdict("shim_alloc_free_overhead_10k_live", d10, "ns", "< 1000 ns", d10 < 1000);
        /* O(1): the added cost with 10,000 live allocations within 1.5x of
         * the empty case (a 100 ns floor keeps timer noise out). */
        double ref = d0 > 100 ? d0 : 100;
        verdict("shim_alloc_free_10k_vs_empty", d10 / ref, "x", "<= 1.5x", d10 <= 1.5 * ref);
        printf("VERDICT shim_meminfo_overhead: %.1f ns (reported, no target)\n", dm);
        return 0;
}
