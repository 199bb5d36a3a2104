/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the DRA plugin's message decoding (dra_codec.h): the
 * first byte picks the message (NodePrepareResourcesRequest or
 * NodeUnprepareResourcesRequest of v1 or v1beta1, RegistrationStatus,
 * InfoRequest), the rest is its wire bytes. Decoded claims must keep the
 * codec's bounds (else abort), and are answered through the encoders of
 * both versions, as dra_plugin.c does. Lives in fuzz/kube/ because it
 * links gs_kube; tests/kube/CMakeLists.txt replays its corpus. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_field(const char *s, size_t max)
{
        size_t len = s ? strlen(s) : 0;
        if (len == 0 || len > max || s[0] == '.' || strchr(s, '/') || strchr(s, ' '))
                abort();
}

static void answer(const struct dra_claim *c, size_t n)
{
        struct dra_prepare_result *pr = calloc(n ? n : 1, sizeof(*pr));
        struct dra_unprepare_result *ur = calloc(n ? n : 1, sizeof(*ur));
        struct dra_device *dev = calloc(n ? n : 1, sizeof(*dev));
        if (!pr || !ur || !dev)
                abort();
        for (size_t i = 0; i < n; i++) {
                check_field(c[i].ns, DRA_MAX_NS_LEN);
                check_field(c[i].uid, DRA_MAX_UID_LEN);
                check_field(c[i].name, DRA_MAX_NAME_LEN);
                char cdi[300];
                snprintf(cdi, sizeof(cdi), "gpuslice.io/slice=claim-%s", c[i].uid);
                dev[i].pool_name = strdup(c[i].ns);
                dev[i].device_name = strdup(c[i].name);
                dev[i].share_id = i % 3 ? strdup(c[i].uid) : NULL;
                if (!dev[i].pool_name || !dev[i].device_name ||
                    dra_device_add_cdi_id(&dev[i], cdi) < 0 ||
                    dra_device_add_request_name(&dev[i], c[i].name) < 0)
                        abort();
                pr[i].uid = c[i].uid;
                pr[i].devices = &dev[i];
                pr[i].n_devices = 1;
                pr[i].error = i % 2 ? "refused" : NULL;
                ur[i].uid = c[i].uid;
                ur[i].error = i % 2 ? NULL : "busy";
        }
        for (int v = DRA_V1; v <= DRA_V1BETA1; v++) {
                uint8_t *buf = NULL;
                size_t len = 0;
                if (dra_encode_prepare_response(v, pr, n, &buf, &len) < 0)
                        abort();
                free(buf);
                if (dra_encode_unprepare_response(v, ur, n, &buf, &len) < 0)
                        abort();
                free(buf);
        }
        dra_device_array_free(dev, n);
        free(pr);
        free(ur);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        const uint8_t *p = data + 1;
        size_t n = size - 1;
        int pick = data[0] % 6;
        switch (pick) {
        case 0:
        case 1:
        case 2:
        case 3: {
                enum dra_version v = pick % 2 ? DRA_V1BETA1 : DRA_V1;
                struct dra_claim *c = NULL;
                size_t nc = 0;
                int r = pick < 2 ? dra_decode_prepare_request(v, p, n, &c, &nc)
                                 : dra_decode_unprepare_request(v, p, n, &c, &nc);
                if (r == 0) {
                        if (nc > DRA_MAX_CLAIMS)
                                abort();
                        answer(c, nc);
                        dra_claim_array_free(c, nc);
                }
                break;
        }
        case 4: {
                bool registered = false;
                char *why = NULL;
                if (dra_decode_registration_status(p, n, &registered, &why) == 0) {
                        if (!why || strlen(why) > DRA_MAX_STATUS_ERROR_LEN)
                                abort();
                        free(why);
                }
                break;
        }
        default: dra_decode_info_request(p, n); break;
        }
        return 0;
}
