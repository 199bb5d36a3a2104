/* SPDX-License-Identifier: Apache-2.0 */
/* Protobuf-c boundary of the DRA plugin and of plugin registration (see
 * dra_codec.h). Both DRA versions go through v1's generated types: the
 * kubelet's v1beta1 messages (pkg/apis/dra/v1beta1/api.proto) have the same
 * fields with the same numbers and types as v1's (pkg/apis/dra/v1/api.proto),
 * which only adds Device.share_id (field 5). A v1beta1 answer leaves it unset,
 * and an unset proto3 string is not on the wire, so the bytes are v1beta1's
 * exactly (test_dra_plugin reads them with v1beta1's own schema). */
#include "dra_codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dra_v1.pb-c.h"
#include "pb_pack.h"
#include "pluginregistration_v1.pb-c.h"

/* Short names for the generated types. */
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim V1Claim;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest V1PrepareReq;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest V1UnprepareReq;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse V1PrepareResp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry
        V1PrepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse V1PrepareOne;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device V1Device;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse V1UnprepareResp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry
        V1UnprepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse V1UnprepareOne;
#define V1_DESC(x) k8s__io__kubelet__pkg__apis__dra__v1__##x##__descriptor


void dra_claim_array_free(struct dra_claim *a, size_t n)
{
        if (!a)
                return;
        for (size_t i = 0; i < n; i++) {
                free(a[i].ns);
                free(a[i].uid);
                free(a[i].name);
        }
        free(a);
}

static void strs_free(char **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

void dra_device_done(struct dra_device *d)
{
        if (!d)
                return;
        strs_free(d->request_names, d->n_request_names);
        strs_free(d->cdi_device_ids, d->n_cdi_device_ids);
        free(d->pool_name);
        free(d->device_name);
        free(d->share_id);
        memset(d, 0, sizeof(*d));
}

void dra_device_array_free(struct dra_device *a, size_t n)
{
        if (!a)
                return;
        for (size_t i = 0; i < n; i++)
                dra_device_done(&a[i]);
        free(a);
}

static int strs_add(char ***v, size_t *n, const char *s)
{
        if (!s || !*s)
                return -EINVAL;
        char *copy = strdup(s);
        char **nv = copy ? realloc(*v, (*n + 1) * sizeof(**v)) : NULL;
        if (!nv) {
                free(copy);
                return -ENOMEM;
        }
        nv[(*n)++] = copy;
        *v = nv;
        return 0;
}

int dra_device_add_cdi_id(struct dra_device *d, const char *s)
{
        return strs_add(&d->cdi_device_ids, &d->n_cdi_device_ids, s);
}

int dra_device_add_request_name(struct dra_device *d, const char *s)
{
        return strs_add(&d->request_names, &d->n_request_names, s);
}


/* ---- decoding claims ---- */

enum field_kind { F_NS, F_NAME, F_UID };

/* A claim field within its bound and character set (see dra_codec.h). */
static bool field_ok(const char *s, enum field_kind k)
{
        size_t max = k == F_NS ? DRA_MAX_NS_LEN : k == F_NAME ? DRA_MAX_NAME_LEN : DRA_MAX_UID_LEN;
        size_t len = s ? strnlen(s, max + 1) : 0;
        if (len == 0 || len > max || s[0] == '.')
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                bool lower = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
                bool ok = lower || (k != F_NS && c == '.') ||
                          (k == F_UID && ((c >= 'A' && c <= 'Z') || c == '_'));
                if (!ok)
                        return false;
        }
        return true;
}

static int claim_copy(struct dra_claim *out, const char *ns, const char *uid, const char *name)
{
        if (!field_ok(ns, F_NS) || !field_ok(uid, F_UID) || !field_ok(name, F_NAME))
                return -EINVAL;
        out->ns = strdup(ns);
        out->uid = strdup(uid);
        out->name = strdup(name);
        if (!out->ns || !out->uid || !out->name)
                return -ENOMEM;
        return 0;
}

/* The claims of an unpacked request. */
static int claims_copy(V1Claim *const *src, size_t n, struct dra_claim **ret, size_t *ret_n)
{
        if (n > DRA_MAX_CLAIMS)
                return -E2BIG;
        struct dra_claim *c = calloc(n ? n : 1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int r = claim_copy(&c[i], src[i]->namespace_, src[i]->uid, src[i]->name);
                if (r < 0) {
                        dra_claim_array_free(c, n);
                        return r;
                }
        }
        *ret = c;
        *ret_n = n;
        return 0;
}

static int decode_request(enum dra_version v, bool unprepare, const uint8_t *buf, size_t len,
                          struct dra_claim **ret, size_t *ret_n)
{
        if (v != DRA_V1 && v != DRA_V1BETA1)
                return -EINVAL;
        const ProtobufCMessageDescriptor *d = unprepare ? &V1_DESC(node_unprepare_resources_request)
                                                        : &V1_DESC(node_prepare_resources_request);
        ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, buf);
        if (!m)
                return -EBADMSG;
        int r;
        if (unprepare) {
                const V1UnprepareReq *x = (const V1UnprepareReq *)m;
                r = claims_copy(x->claims, x->n_claims, ret, ret_n);
        } else {
                const V1PrepareReq *x = (const V1PrepareReq *)m;
                r = claims_copy(x->claims, x->n_claims, ret, ret_n);
        }
        protobuf_c_message_free_unpacked(m, NULL);
        return r;
}

int dra_decode_prepare_request(enum dra_version v, const uint8_t *buf, size_t len,
                               struct dra_claim **ret, size_t *ret_n)
{
        return decode_request(v, false, buf, len, ret, ret_n);
}

int dra_decode_unprepare_request(enum dra_version v, const uint8_t *buf, size_t len,
                                 struct dra_claim **ret, size_t *ret_n)
{
        return decode_request(v, true, buf, len, ret, ret_n);
}

/* ---- encoding answers ---- */

static bool strs_ok(char *const *v, size_t n)
{
        if (n && !v)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!v[i])
                        return false;
        return true;
}

int dra_device_check(const struct dra_device *d)
{
        if (!d || !d->pool_name || !*d->pool_name || !d->device_name || !*d->device_name ||
            !strs_ok(d->request_names, d->n_request_names) ||
            !strs_ok(d->cdi_device_ids, d->n_cdi_device_ids))
                return -EINVAL;
        return 0;
}

/* Check the results before building anything; counts the devices sent. */
static int results_check(const struct dra_prepare_result *r, size_t n, size_t *ret_devices)
{
        size_t total = 0;
        for (size_t i = 0; i < n; i++) {
                if (!r[i].uid)
                        return -EINVAL;
                if (r[i].error && *r[i].error)
                        continue;
                if (r[i].n_devices && !r[i].devices)
                        return -EINVAL;
                for (size_t j = 0; j < r[i].n_devices; j++)
                        if (dra_device_check(&r[i].devices[j]) < 0)
                                return -EINVAL;
                total += r[i].n_devices;
        }
        *ret_devices = total;
        return 0;
}

static bool failed(const struct dra_prepare_result *r)
{
        return r->error && *r->error;
}

/* with_share: v1, whose Device has share_id. */
static int encode_prepare(const struct dra_prepare_result *r, size_t n, size_t n_dev,
                          bool with_share, uint8_t **ret_buf, size_t *ret_len)
{
        int ret = -ENOMEM;
        V1PrepareResp resp;
        protobuf_c_message_init(&V1_DESC(node_prepare_resources_response), &resp);
        V1PrepareEntry *e = calloc(n ? n : 1, sizeof(*e));
        V1PrepareEntry **ep = calloc(n ? n : 1, sizeof(*ep));
        V1PrepareOne *one = calloc(n ? n : 1, sizeof(*one));
        V1Device *dev = calloc(n_dev ? n_dev : 1, sizeof(*dev));
        V1Device **devp = calloc(n_dev ? n_dev : 1, sizeof(*devp));
        if (!e || !ep || !one || !dev || !devp)
                goto out;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                protobuf_c_message_init(&V1_DESC(node_prepare_resources_response__claims_entry),
                                        &e[i]);
                protobuf_c_message_init(&V1_DESC(node_prepare_resource_response), &one[i]);
                e[i].key = (char *)r[i].uid;
                e[i].value = &one[i];
                ep[i] = &e[i];
                if (failed(&r[i])) {
                        one[i].error = (char *)r[i].error;
                        continue;
                }
                one[i].devices = &devp[k];
                one[i].n_devices = r[i].n_devices;
                for (size_t j = 0; j < r[i].n_devices; j++, k++) {
                        const struct dra_device *d = &r[i].devices[j];
                        protobuf_c_message_init(&V1_DESC(device), &dev[k]);
                        dev[k].request_names = d->request_names;
                        dev[k].n_request_names = d->n_request_names;
                        dev[k].pool_name = d->pool_name;
                        dev[k].device_name = d->device_name;
                        dev[k].cdi_device_ids = d->cdi_device_ids;
                        dev[k].n_cdi_device_ids = d->n_cdi_device_ids;
                        if (d->share_id && with_share)
                                dev[k].share_id = d->share_id;
                        devp[k] = &dev[k];
                }
        }
        resp.claims = ep;
        resp.n_claims = n;
        ret = kube_pb_pack(&resp.base, ret_buf, ret_len);
out:
        free(e);
        free(ep);
        free(one);
        free(dev);
        free(devp);
        return ret;
}

int dra_encode_prepare_response(enum dra_version v, const struct dra_prepare_result *r, size_t n,
                                uint8_t **ret_buf, size_t *ret_len)
{
        size_t n_dev = 0;
        int ret = results_check(r, n, &n_dev);
        if (ret < 0)
                return ret;
        if (v != DRA_V1 && v != DRA_V1BETA1)
                return -EINVAL;
        return encode_prepare(r, n, n_dev, v == DRA_V1, ret_buf, ret_len);
}

int dra_encode_unprepare_response(enum dra_version v, const struct dra_unprepare_result *r,
                                  size_t n, uint8_t **ret_buf, size_t *ret_len)
{
        for (size_t i = 0; i < n; i++)
                if (!r[i].uid)
                        return -EINVAL;
        if (v != DRA_V1 && v != DRA_V1BETA1)
                return -EINVAL;
        int ret = -ENOMEM;
        V1UnprepareEntry *e = calloc(n ? n : 1, sizeof(*e));
        V1UnprepareEntry **ep = calloc(n ? n : 1, sizeof(*ep));
        V1UnprepareOne *one = calloc(n ? n : 1, sizeof(*one));
        if (e && ep && one) {
                V1UnprepareResp resp;
                protobuf_c_message_init(&V1_DESC(node_unprepare_resources_response), &resp);
                for (size_t i = 0; i < n; i++) {
                        protobuf_c_message_init(
                                &V1_DESC(node_unprepare_resources_response__claims_entry), &e[i]);
                        protobuf_c_message_init(&V1_DESC(node_unprepare_resource_response), &one[i]);
                        one[i].error = (char *)(r[i].error ? r[i].error : "");
                        e[i].key = (char *)r[i].uid;
                        e[i].value = &one[i];
                        ep[i] = &e[i];
                }
                resp.claims = ep;
                resp.n_claims = n;
                ret = kube_pb_pack(&resp.base, ret_buf, ret_len);
        }
        free(e);
        free(ep);
        free(one);
        return ret;
}

/* ---- registration ---- */

int dra_decode_info_request(const uint8_t *buf, size_t len)
{
        Pluginregistration__InfoRequest *m =
                pluginregistration__info_request__unpack(NULL, len, buf);
        if (!m)
                return -EBADMSG;
        pluginregistration__info_request__free_unpacked(m, NULL);
        return 0;
}

int dra_encode_plugin_info(const char *type, const char *name, const char *endpoint,
                           const char *const *versions, size_t n_versions, uint8_t **ret_buf,
                           size_t *ret_len)
{
        if (!type || !name || !endpoint || !strs_ok((char *const *)versions, n_versions))
                return -EINVAL;
        Pluginregistration__PluginInfo m = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
        m.type = (char *)type;
        m.name = (char *)name;
        m.endpoint = (char *)endpoint;
        m.supported_versions = (char **)versions;
        m.n_supported_versions = n_versions;
        return kube_pb_pack(&m.base, ret_buf, ret_len);
}

int dra_decode_registration_status(const uint8_t *buf, size_t len, bool *ret_registered,
                                   char **ret_error)
{
        Pluginregistration__RegistrationStatus *m =
                pluginregistration__registration_status__unpack(NULL, len, buf);
        if (!m)
                return -EBADMSG;
        int r = 0;
        const char *e = m->error ? m->error : "";
        char *copy = NULL;
        if (strnlen(e, DRA_MAX_STATUS_ERROR_LEN + 1) > DRA_MAX_STATUS_ERROR_LEN)
                r = -E2BIG;
        else if (!(copy = strdup(e)))
                r = -ENOMEM;
        if (r == 0) {
                *ret_registered = m->plugin_registered;
                *ret_error = copy;
        }
        pluginregistration__registration_status__free_unpacked(m, NULL);
        return r;
}

int dra_encode_registration_status_response(uint8_t **ret_buf, size_t *ret_len)
{
        Pluginregistration__RegistrationStatusResponse m =
                PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
        return kube_pb_pack(&m.base, ret_buf, ret_len);
}
