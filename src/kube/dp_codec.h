/* SPDX-License-Identifier: Apache-2.0 */
/* Device plugin and PodResources messages as plain C, and their wire
 * encoding. dp_codec.c is the only file that touches protobuf-c: it turns
 * protobuf-c's NULL-on-failure into -EBADMSG / -ENOMEM and hands out plain
 * structs that the rest of src/kube owns and frees with the functions here. */
#ifndef GS_DP_CODEC_H
#define GS_DP_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An owned list of owned strings. */
struct dp_strv {
        char **v;
        size_t n;
};

/* Free the strings and the array; leaves an empty list. NULL-safe. */
void dp_strv_done(struct dp_strv *s);
/* Free an array of n lists (each with dp_strv_done) and the array. */
void dp_strv_array_free(struct dp_strv *a, size_t n);

/* One advertised device. */
struct dp_device {
        const char *id;
        bool healthy;
        int numa_node;   /* Device.topology: its GPU's NUMA node; < 0: none */
};

struct dp_kv {
        const char *key;
        const char *value;
};

struct dp_mount {
        const char *container_path;
        const char *host_path;
        bool read_only;
};

/* The answer for one container of an Allocate call (borrowed strings). */
struct dp_container_alloc {
        const struct dp_kv *envs;
        size_t n_envs;
        const struct dp_mount *mounts;
        size_t n_mounts;
        const char *const *cdi_devices;
        size_t n_cdi_devices;
};

/* One container of a GetPreferredAllocation call. */
struct dp_pref_request {
        struct dp_strv available;
        struct dp_strv must_include;
        int32_t size;
};

/* One container's devices of our resource, from PodResources List. */
struct dp_pod_devices {
        char *ns;
        char *pod;
        char *container;
        struct dp_strv ids;
};
void dp_pod_devices_array_free(struct dp_pod_devices *a, size_t n);

/* Bounds on decoded input (everything beyond is rejected with -E2BIG). */
#define DP_MAX_CONTAINERS 64
#define DP_MAX_IDS 65536
#define DP_MAX_ID_LEN 63

/* Every encoder returns 0 and a malloc'ed buffer (*ret_buf, *ret_len; free
 * with free()) or -ENOMEM. Every decoder returns 0 and owned results, or
 * -EBADMSG for bytes that are not the message, -E2BIG past the bounds above,
 * -EINVAL for empty or over-long ids, -ENOMEM; outputs untouched on failure. */

/* Check that buf is a valid Empty (unknown fields are allowed). */
int dp_decode_empty(const uint8_t *buf, size_t len);

/* AllocateRequest -> one id list per container request. */
int dp_decode_allocate(const uint8_t *buf, size_t len, struct dp_strv **ret_containers,
                       size_t *ret_n);
int dp_encode_allocate_response(const struct dp_container_alloc *c, size_t n, uint8_t **ret_buf,
                                size_t *ret_len);

/* PreferredAllocationRequest -> one request per container. */
int dp_decode_preferred(const uint8_t *buf, size_t len, struct dp_pref_request **ret_reqs,
                        size_t *ret_n);
void dp_pref_request_array_free(struct dp_pref_request *a, size_t n);
int dp_encode_preferred_response(const struct dp_strv *c, size_t n, uint8_t **ret_buf,
                                 size_t *ret_len);

/* PreStartContainerRequest: only validated; the response is empty. */
int dp_decode_prestart(const uint8_t *buf, size_t len);

int dp_encode_list(const struct dp_device *devs, size_t n, uint8_t **ret_buf, size_t *ret_len);
int dp_encode_options(bool pre_start_required, bool preferred_available, uint8_t **ret_buf,
                      size_t *ret_len);
int dp_encode_register(const char *version, const char *endpoint, const char *resource,
                       bool preferred_available, uint8_t **ret_buf, size_t *ret_len);
/* An empty message (Empty, PreStartContainerResponse, ListPodResourcesRequest). */
int dp_encode_empty(uint8_t **ret_buf, size_t *ret_len);

/* ListPodResourcesResponse -> the containers holding devices of `resource`
 * (containers without any are left out). */
int dp_decode_pod_resources(const uint8_t *buf, size_t len, const char *resource,
                            struct dp_pod_devices **ret, size_t *ret_n);

/* A ContainerAllocateResponse (as the kubelet's checkpoint keeps our
 * answer): the value of env `key` into ret (NUL-terminated). 0, -ENOENT
 * when the answer has no such env, -EBADMSG for undecodable bytes,
 * -ENAMETOOLONG when it does not fit. */
int dp_decode_container_env(const uint8_t *buf, size_t len, const char *key, char *ret,
                            size_t size);

#endif /* GS_DP_CODEC_H */
