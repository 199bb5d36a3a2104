/* SPDX-License-Identifier: Apache-2.0 */
/* The launch gate's cost on simgpu, in the same run: the program runs
 * itself three times, (1) plain, (2) with LD_PRELOAD=libgpuslice.so in a
 * whole-GPU slice (compute_milli 1000: gate off, the shim's memory-only
 * path) and (3) in a 900m slice (gate on, local enforcement), and prints:
 *
 *   - added ns per launch through the gate while the slice holds a lease:
 *     best batch of 256 launches of a 0 ns kernel in (3) minus (2)
 *     (batches that waited for a lease are not the fast path and lose the
 *     "best of"); target < 50 ns;
 *   - throughput with limits off: 10 us kernels completed per second in
 *     (2) over (1); target >= 0.99;
 *   - and, reported: the shim's memory-only launch cost over simgpu alone,
 *     the host-bound launch-rate ratio (2)/(1).
 *
 * usage: bench_gate /path/to/libgpuslice.so   (LD_LIBRARY_PATH must point at
 * simgpu, GS_KERNELS_PTX at the project kernels; see bench/run-gate.sh) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "benchlib.h"

#define BATCH 128
#define BATCHES 1500
#define TPUT_NS (1500ull * 1000 * 1000)
#define TPUT_KERNEL_NS 10000ull

struct figures {
        double launch_ns;      /* best batch average, ns per launch */
        double kernels_per_s;  /* 10 us kernels completed per second */
};

static int child(void)
{
        bench_load();
        bench_ctx_setup();
        CUfunction busy = bench_busy_kernel();
        struct figures f = { .launch_ns = 1e18 };

        unsigned long long ns = 0;
        void *args[] = { &ns };
        for (int b = 0; b < BATCHES; b++) {
                uint64_t t = bench_now_ns();
                for (int i = 0; i < BATCH; i++)
                        BENCH_CHK(bench_cu.launch(busy, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
                double per = (double)(bench_now_ns() - t) / BATCH;
                f.launch_ns = per < f.launch_ns ? per : f.launch_ns;
                BENCH_CHK(bench_cu.sync());
        }

        ns = TPUT_KERNEL_NS;
        uint64_t t0 = bench_now_ns(), n = 0;
        while (bench_now_ns() - t0 < TPUT_NS) {
                BENCH_CHK(bench_cu.launch(busy, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
                n++;
        }
        BENCH_CHK(bench_cu.sync());
        f.kernels_per_s = (double)n * 1e9 / (double)(bench_now_ns() - t0);
        if (write(1, &f, sizeof(f)) != (ssize_t)sizeof(f))
                return 1;
        return 0;
}

static void write_conf(const char *path, const char *uuid, unsigned milli, const char *slicedir)
{
        mkdir(slicedir, 0700);
        FILE *f = fopen(path, "we");
        if (!f)
                bench_die("cannot write a config");
        fprintf(f,
                "version = 1\nslice = bench\ngpu_uuid = %s\nmemory_limit = %llu\ncompute_milli = %u\n"
                "policy = cap\nslice_dir = %s\n",
                uuid, 32ull << 30, milli, slicedir);
        fclose(f);
}

static int run(const char *preload, const char *conf, struct figures *out)
{
        return bench_run_child("BENCH_GATE_CHILD", preload, conf, out, sizeof(*out));
}

static void verdict(const char *name, double value, const char *unit, const char *target, int pass)
{
        printf("VERDICT %s: %.3g %s (target %s): %s\n", name, value, unit, target, pass ? "PASS" : "FAIL");
}

int main(int argc, char **argv)
{
        bench_init("bench_gate");
        if (getenv("BENCH_GATE_CHILD"))
                return child();
        if (argc < 2)
                bench_die("usage: bench_gate /path/to/libgpuslice.so");
        char dir[] = "/tmp/gs-bench-gate-XXXXXX";
        char uuid[64];
        bench_sim_setup(dir, uuid, sizeof(uuid));
        char off_dir[64], on_dir[64], off_conf[64], on_conf[64];
        snprintf(off_dir, sizeof(off_dir), "%s/off", dir);
        snprintf(on_dir, sizeof(on_dir), "%s/on", dir);
        snprintf(off_conf, sizeof(off_conf), "%s/off.conf", dir);
        snprintf(on_conf, sizeof(on_conf), "%s/on.conf", dir);
        write_conf(off_conf, uuid, 1000, off_dir);
        write_conf(on_conf, uuid, 900, on_dir);

        struct figures plain, off, on;
        if (run(NULL, NULL, &plain) < 0 || run(argv[1], off_conf, &off) < 0 ||
            run(argv[1], on_conf, &on) < 0)
                bench_die("a measurement run failed");
        bench_rm_tree(dir);

        double gate = on.launch_ns - off.launch_ns, mem = off.launch_ns - plain.launch_ns;
        double tput = off.kernels_per_s / plain.kernels_per_s;
        double rate = plain.launch_ns / off.launch_ns;
        printf("launch gate on simgpu (best batch of %d launches of a 0 ns kernel, ns per launch)\n", BATCH);
        printf("  %-40s %10.1f\n", "simgpu alone", plain.launch_ns);
        printf("  %-40s %10.1f\n", "+shim, compute_milli 1000 (gate off)", off.launch_ns);
        printf("  %-40s %10.1f\n", "+shim, 900m cap, holding a lease", on.launch_ns);
        printf("throughput, %llu us kernels for %.1f s (kernels per second)\n", TPUT_KERNEL_NS / 1000,
               (double)TPUT_NS / 1e9);
        printf("  %-40s %10.0f\n", "simgpu alone", plain.kernels_per_s);
        printf("  %-40s %10.0f\n", "+shim, gate off", off.kernels_per_s);
        printf("  %-40s %10.0f\n", "+shim, 900m cap (for reference)", on.kernels_per_s);
        verdict("gate_launch_overhead", gate, "ns", "< 50 ns", gate < 50);
        verdict("gate_off_throughput_ratio", tput, "x", ">= 0.99", tput >= 0.99);
        printf("VERDICT gate_off_launch_added: %.1f ns (reported, no target)\n", mem);
        printf("VERDICT gate_off_launch_rate_ratio: %.3f x (reported, no target)\n", rate);
        return 0;
}
