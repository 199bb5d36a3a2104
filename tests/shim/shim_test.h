/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the shim scenario programs (shim_test.c, shim_test_hardening.c). */
#ifndef GS_SHIM_TEST_H
#define GS_SHIM_TEST_H

#include "shim_harness.h"

#define CHUNK (64 * MiB)
#define ROOM ((ST_CAP - ST_CTX) / CHUNK) /* 15 */

extern const char good_conf[];
extern CUdevice dev;
extern CUcontext ctx;

/* Initialise the driver and make device 0's primary context current. */
void setup_ctx(void);
/* Fail the scenario if simgpu or the slice's books show more than the cap. */
void check_ground_truth(void);
/* Read one '\n'-terminated line from fd into buf (NUL-terminated, without
 * the newline); returns its length (0 at EOF). */
int read_line(int fd, char *buf, size_t size);
/* Allocate CHUNKs through alloc until it fails, and check exactly ROOM fit
 * and the next is refused with OOM; frees them all. */
void fill_with(CUresult (*alloc)(CUdeviceptr *, size_t), const char *how);
/* 1 when the shim's log (GPUSLICE_LOG) has a line containing needle. */
int log_has(const char *needle);

/* The hardening scenarios; each returns 0 on success. */
int run_forged(void);
int run_lim_b(void);
int run_biglimit(void);
int run_writable(void);
int run_foreignconf(void);
int run_opendir(void);
int run_badbooks(void);
int run_halfmade(void);
int run_exit_racer(void);
int run_exitrace(void);
int run_logfifo(void);
int run_graphalloc(void);
/* Lifetimes (shim_test_lifetime.c). */
int run_vmm_lifetime(void);
int run_pool_destroy(void);
int run_pool_many(void);
int run_pool_noctx(void);
int run_ctx_lost(void);
int run_exit_blocker(void);
int run_exit_flush(void);
int run_lt_hold(void);
int run_fd_full(void);
/* Memory kept without an allocation call (shim_test_reserve.c). */
int run_ipc(void);
int run_ipc_exporter(void);
int run_limits(void);
int run_globals(void);
int run_chunks(void);

#endif /* GS_SHIM_TEST_H */
