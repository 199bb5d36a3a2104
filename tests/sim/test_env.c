/* SPDX-License-Identifier: Apache-2.0 */
/* Configuration by environment: bad values make cuInit fail, are logged to
 * SIMGPU_LOG and never printed on the host program's stdout/stderr;
 * CUDA_VISIBLE_DEVICES selects and orders devices by index or UUID prefix
 * like the real driver. Each case runs in a fresh child process. */
#include "simtest.h"

#include <fcntl.h>

static char dir4[4200];

/* Runs fn in a child with stdout/stderr captured; returns its exit status
 * and whether it wrote anything. */
static int run(void (*fn)(void), bool *printed)
{
        int fds[2];
        CT_ASSERT(pipe(fds) == 0, "pipe");
        pid_t pid = fork();
        if (pid == 0) {
                dup2(fds[1], 1);
                dup2(fds[1], 2);
                close(fds[0]);
                fn();
                exit(0);
        }
        close(fds[1]);
        char buf[256];
        ssize_t n = read(fds[0], buf, sizeof(buf));
        close(fds[0]);
        *printed = n > 0;
        return st_wait(pid);
}

static void bad_memory(void)
{
        setenv("SIMGPU_MEMORY", "16Gb", 1);
        if (cuInit(0) != CUDA_ERROR_INVALID_VALUE)
                _exit(10);
        int n;
        if (cuDeviceGetCount(&n) != CUDA_ERROR_NOT_INITIALIZED || cuInit(0) != CUDA_ERROR_INVALID_VALUE)
                _exit(11);
        _exit(0);
}

static void bad_overhead(void)
{
        setenv("SIMGPU_CTX_OVERHEAD", "3Mi", 1);
        _exit(cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 10);
}

static void bad_devices(void)
{
        setenv("SIMGPU_DEVICES", "17", 1);
        _exit(cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 10);
}

static void uuid_of(int ordinal, char *out)
{
        CUuuid u;
        if (cuDeviceGetUuid(&u, ordinal) != CUDA_SUCCESS)
                _exit(20);
        for (int i = 0; i < 16; i++)
                snprintf(out + 2 * i, 3, "%02x", (unsigned char)u.bytes[i]);
}

static char uuids[4][33];

static void all_four(void)
{
        setenv("SIMGPU_DIR", dir4, 1);
        setenv("SIMGPU_DEVICES", "4", 1);
        int n;
        if (cuInit(0) || cuDeviceGetCount(&n) || n != 4)
                _exit(10);
        _exit(0);
}

static void visible_2_uuid0(void)
{
        setenv("SIMGPU_DIR", dir4, 1);
        char v[64];
        snprintf(v, sizeof(v), "2,GPU-%.8s", uuids[0]);
        setenv("CUDA_VISIBLE_DEVICES", v, 1);
        int n;
        char u[33];
        if (cuInit(0) || cuDeviceGetCount(&n) || n != 2)
                _exit(10);
        uuid_of(0, u);
        if (strcmp(u, uuids[2]))
                _exit(11);
        uuid_of(1, u);
        if (strcmp(u, uuids[0]))
                _exit(12);
        CUdevice d;
        if (cuDeviceGet(&d, 2) != CUDA_ERROR_INVALID_DEVICE)
                _exit(13);
        _exit(0);
}

static void visible_stops_at_invalid(void)
{
        setenv("SIMGPU_DIR", dir4, 1);
        setenv("CUDA_VISIBLE_DEVICES", "1,7,0", 1);
        int n;
        if (cuInit(0) || cuDeviceGetCount(&n) || n != 1)
                _exit(10);
        _exit(0);
}

static void visible_none(void)
{
        setenv("SIMGPU_DIR", dir4, 1);
        setenv("CUDA_VISIBLE_DEVICES", "", 1);
        _exit(cuInit(0) == CUDA_ERROR_NO_DEVICE ? 0 : 10);
}

int main(void)
{
        st_fresh();
        const char *log = getenv("SIMGPU_LOG");
        CT_ASSERT(log, "SIMGPU_LOG");
        unlink(log);
        bool printed;
        CT_ASSERT(run(bad_memory, &printed) == 0 && !printed, "bad SIMGPU_MEMORY");
        CT_ASSERT(run(bad_overhead, &printed) == 0 && !printed, "bad SIMGPU_CTX_OVERHEAD");
        CT_ASSERT(run(bad_devices, &printed) == 0 && !printed, "bad SIMGPU_DEVICES");
        char *text = ct_read_file(log);
        CT_ASSERT(text && strstr(text, "SIMGPU_MEMORY") && strstr(text, "SIMGPU_CTX_OVERHEAD") &&
                  strstr(text, "SIMGPU_DEVICES"), "log names the bad variables: %s", text ? text : "");
        free(text);

        snprintf(dir4, sizeof(dir4), "%s-4dev", getenv("SIMGPU_DIR"));
        char path[4300];
        snprintf(path, sizeof(path), "%s/state", dir4);
        unlink(path);
        CT_ASSERT(run(all_four, &printed) == 0, "four devices");
        /* UUIDs are deterministic per index: read them here through the same state */
        setenv("SIMGPU_DIR", dir4, 1);
        CT_CHECK(cuInit(0));
        for (int i = 0; i < 4; i++)
                uuid_of(i, uuids[i]);
        CT_ASSERT(strcmp(uuids[0], uuids[1]) != 0, "distinct UUIDs");
        CT_ASSERT(run(visible_2_uuid0, &printed) == 0, "CUDA_VISIBLE_DEVICES=2,GPU-<uuid0>");
        CT_ASSERT(run(visible_stops_at_invalid, &printed) == 0, "CUDA_VISIBLE_DEVICES=1,7,0");
        CT_ASSERT(run(visible_none, &printed) == 0, "CUDA_VISIBLE_DEVICES=''");
        printf("env: ok\n");
        return 0;
}
