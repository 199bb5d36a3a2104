/* SPDX-License-Identifier: Apache-2.0 */
/* The Alibaba GPU trace's CSV files (node list, pod lists), read by their
 * header's column names so that any file of the same format works; only
 * the resource columns are read. */
#ifndef GS_BENCH_TRACE_H
#define GS_BENCH_TRACE_H

#include <stddef.h>
#include <stdint.h>

struct trace_node {
        uint64_t cpu_milli, memory_mib;
        unsigned n_gpus;
        char model[32];
};

struct trace_pod {
        uint64_t cpu_milli, memory_mib;
        unsigned n_gpus;
        uint32_t gpu_milli;   /* per GPU; 1000 for whole GPUs, 0 for CPU only */
        char spec[96];        /* gpu_spec, "" when empty or absent */
};

/* Read a node list (columns cpu_milli, memory_mib, gpu, model). 0 with
 * *ret (malloc'd, caller frees) and *ret_n, or -errno with a message on
 * stderr naming the file, the line and the field. */
int trace_nodes_read(const char *path, struct trace_node **ret, size_t *ret_n);

/* Read a pod list (columns cpu_milli, memory_mib, num_gpu, gpu_milli and,
 * if present, gpu_spec). As trace_nodes_read. */
int trace_pods_read(const char *path, struct trace_pod **ret, size_t *ret_n);

#endif /* GS_BENCH_TRACE_H */
