/* SPDX-License-Identifier: Apache-2.0 */
/* The kubelet's DRA plugin messages (services v1 and v1beta1) and its
 * plugin-registration messages as plain C, and their wire encoding.
 * dra_codec.c is the only file that touches their protobuf-c types: both
 * DRA versions decode into and encode from the same C structs, the version
 * argument picks the message descriptors. Errors follow dp_codec.h:
 * protobuf-c's NULL-on-failure becomes -EBADMSG, allocation failures
 * -ENOMEM, and decoded input is bounded (below). */
#ifndef GS_DRA_CODEC_H
#define GS_DRA_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The DRA service version a message belongs to. v1beta1 has no
 * Device.share_id; everything else is the same on the wire. */
enum dra_version { DRA_V1, DRA_V1BETA1 };

/* One ResourceClaim as the kubelet names it (owned strings, never NULL,
 * never empty). Its uid keys the claim's entry in every answer. */
struct dra_claim {
        char *ns;   /* the claim's namespace: a DNS label */
        char *uid;  /* metadata.uid */
        char *name; /* metadata.name: a DNS subdomain */
};

/* Free each claim's strings and the array; NULL-safe. */
void dra_claim_array_free(struct dra_claim *a, size_t n);

/* One prepared device of a claim, as the driver returns it. Every string
 * and array is owned (malloc'ed) and freed by dra_device_done(). */
struct dra_device {
        char **request_names; /* the claim's requests it serves; none: all */
        size_t n_request_names;
        char *pool_name;       /* required: the ResourceSlice pool */
        char *device_name;     /* required: the device in that pool */
        char **cdi_device_ids; /* fully qualified CDI names ("vendor/class=name") */
        size_t n_cdi_device_ids;
        /* The allocation's shareID; NULL or "": none. Sent on v1 only
         * (v1beta1 has no such field). */
        char *share_id;
};

/* Free a device's strings and arrays and zero it; NULL-safe. */
void dra_device_done(struct dra_device *d);
/* dra_device_done() on each of n devices, then free the array; NULL-safe. */
void dra_device_array_free(struct dra_device *a, size_t n);
/* 0 when d can be sent (pool and device names set, no NULL string in its
 * arrays), else -EINVAL. */
int dra_device_check(const struct dra_device *d);
/* Append a copy of s to a device's CDI ids / request names. 0 or -ENOMEM
 * (the device is unchanged then); -EINVAL for a NULL or empty s. */
int dra_device_add_cdi_id(struct dra_device *d, const char *s);
int dra_device_add_request_name(struct dra_device *d, const char *s);

/* One claim's entry in a NodePrepareResources answer (borrowed). */
struct dra_prepare_result {
        const char *uid;
        const struct dra_device *devices; /* ignored when error is set */
        size_t n_devices;
        const char *error; /* NULL or "": prepared; else why not */
};

/* One claim's entry in a NodeUnprepareResources answer (borrowed). */
struct dra_unprepare_result {
        const char *uid;
        const char *error; /* NULL or "": unprepared */
};

/* Bounds on decoded input (beyond them: -E2BIG for counts, -EINVAL for
 * strings). The string rules also make every claim field safe as part of
 * a file name: none is empty or starts with '.', none holds '/', a control
 * byte or a space. */
#define DRA_MAX_CLAIMS 128             /* claims per call */
#define DRA_MAX_NS_LEN 63              /* namespace: a DNS label, [a-z0-9-] */
#define DRA_MAX_NAME_LEN 253           /* name: a DNS subdomain, [a-z0-9.-] */
#define DRA_MAX_UID_LEN 128            /* uid: [A-Za-z0-9._-] (a UUID in practice) */
#define DRA_MAX_STATUS_ERROR_LEN 65536 /* RegistrationStatus.error */

/* Every encoder returns 0 and a malloc'ed buffer (*ret_buf, *ret_len; free
 * with free(); never NULL, also for an empty message), or -ENOMEM, or
 * -EINVAL for a NULL string where one is required. Every decoder returns 0
 * and owned results, or -EBADMSG for bytes that are not the message,
 * -E2BIG / -EINVAL past the bounds above, -ENOMEM; outputs untouched on
 * failure. */

/* NodePrepareResourcesRequest / NodeUnprepareResourcesRequest of version v
 * -> its claims (*ret_n may be 0; *ret is then still a freeable array). */
int dra_decode_prepare_request(enum dra_version v, const uint8_t *buf, size_t len,
                               struct dra_claim **ret, size_t *ret_n);
int dra_decode_unprepare_request(enum dra_version v, const uint8_t *buf, size_t len,
                                 struct dra_claim **ret, size_t *ret_n);

/* The answers: one map entry per result, keyed by its uid, in order. A
 * result with an error carries no devices. -EINVAL for a NULL uid, a
 * device without pool or device name, or a NULL string in its arrays. */
int dra_encode_prepare_response(enum dra_version v, const struct dra_prepare_result *r, size_t n,
                                uint8_t **ret_buf, size_t *ret_len);
int dra_encode_unprepare_response(enum dra_version v, const struct dra_unprepare_result *r,
                                  size_t n, uint8_t **ret_buf, size_t *ret_len);

/* Registration (package pluginregistration). */
int dra_decode_info_request(const uint8_t *buf, size_t len);
int dra_encode_plugin_info(const char *type, const char *name, const char *endpoint,
                           const char *const *versions, size_t n_versions, uint8_t **ret_buf,
                           size_t *ret_len);
/* RegistrationStatus -> *ret_registered and *ret_error (owned, "" when the
 * kubelet sent none). */
int dra_decode_registration_status(const uint8_t *buf, size_t len, bool *ret_registered,
                                   char **ret_error);
/* RegistrationStatusResponse (an empty message). */
int dra_encode_registration_status_response(uint8_t **ret_buf, size_t *ret_len);

#endif /* GS_DRA_CODEC_H */
