/* SPDX-License-Identifier: Apache-2.0 */
/* Two processes saturating one device each get half of its device time,
 * within 2 points, as simgpu-smi's ground truth reports. */
#include "simtest.h"

#include <math.h>
#include <signal.h>

static volatile sig_atomic_t stop_saturating;

static void on_stop(int sig)
{
        (void)sig;
        stop_saturating = 1;
}

/* Keeps the device's queue full until the parent's SIGUSR1 (or `seconds`,
 * a bound only): the measured window, which a loaded machine stretches
 * (each sample is a simgpu-smi run), always lies inside the saturation. */
static void saturate(int ready_fd, double seconds)
{
        CUdevice dev;
        CUcontext ctx;
        struct ct_kernels k;
        ct_setup(&dev, &ctx);
        ct_load_kernels(&k);
        char c = 1;
        if (write(ready_fd, &c, 1) != 1)
                exit(3);
        uint64_t end = ct_now_ns() + (uint64_t)(seconds * 1e9);
        while (!stop_saturating && ct_now_ns() < end)
                CT_CHECK(ct_busy(&k, NULL, 1000000ull)); /* 1 ms kernels; a full queue blocks */
        exit(0);
}

int main(void)
{
        st_fresh();
        int fds[2];
        CT_ASSERT(pipe(fds) == 0, "pipe");
        CT_ASSERT(signal(SIGUSR1, on_stop) != SIG_ERR, "signal");
        pid_t kids[2];
        for (int i = 0; i < 2; i++) {
                kids[i] = fork();
                CT_ASSERT(kids[i] >= 0, "fork");
                if (kids[i] == 0) {
                        close(fds[0]);
                        saturate(fds[1], 20);
                }
        }
        close(fds[1]);
        char c;
        for (int i = 0; i < 2; i++)
                CT_ASSERT(read(fds[0], &c, 1) == 1, "child %d did not start", i);
        usleep(400000); /* both queues are full by now */
        struct ct_smi_proc a0, b0, a1, b1;
        struct ct_smi_dev d0, d1;
        CT_ASSERT(ct_smi_proc(kids[0], 0, &a0) == 0 && ct_smi_proc(kids[1], 0, &b0) == 0 &&
                  ct_smi_dev(0, &d0) == 0, "processes not listed by simgpu-smi");
        usleep(1200000);
        CT_ASSERT(ct_smi_proc(kids[0], 0, &a1) == 0 && ct_smi_proc(kids[1], 0, &b1) == 0 &&
                  ct_smi_dev(0, &d1) == 0, "processes not listed by simgpu-smi");
        for (int i = 0; i < 2; i++)
                kill(kids[i], SIGUSR1);
        double da = (double)(a1.busy_ns - a0.busy_ns), db = (double)(b1.busy_ns - b0.busy_ns);
        double span = (double)(d1.sim_time_ns - d0.sim_time_ns);
        double dev_busy = (double)(d1.busy_ns - d0.busy_ns);
        printf("window %.3f s: A %.2f%%, B %.2f%%, device busy %.2f%%\n", span / 1e9,
               100 * da / span, 100 * db / span, 100 * dev_busy / span);
        CT_ASSERT(fabs(da / span - 0.5) < 0.02, "A got %.2f%%", 100 * da / span);
        CT_ASSERT(fabs(db / span - 0.5) < 0.02, "B got %.2f%%", 100 * db / span);
        CT_ASSERT(dev_busy / span > 0.98, "device idle while saturated");
        for (int i = 0; i < 2; i++)
                CT_ASSERT(st_wait(kids[i]) == 0, "child %d failed", i);
        printf("fair: ok\n");
        return 0;
}
