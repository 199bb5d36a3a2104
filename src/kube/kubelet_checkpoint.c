/* SPDX-License-Identifier: Apache-2.0 */
/* Reading the kubelet's device-manager checkpoint. See kubelet_checkpoint.h. */
#include "kubelet_checkpoint.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "base64.h"
#include "dp_codec.h"
#include "macro.h"

void kube_checkpoint_done(struct kube_checkpoint *cp)
{
        if (!cp)
                return;
        for (size_t i = 0; i < cp->n_entries; i++)
                free(cp->entries[i].units);
        free(cp->entries);
        free(cp->all);
        *cp = (struct kube_checkpoint){ 0 };
}

static void add_ids(const json_t *list, struct gs_unit_set *set)
{
        size_t i;
        const json_t *v;
        json_array_foreach(list, i, v)
        {
                unsigned g, u;
                if (json_is_string(v) && gs_unit_id_parse(json_string_value(v), &g, &u) == 0)
                        gs_unit_set_add(set, g, u);
        }
}

/* DeviceIDs: {"<numa node>": [ids], ...} (since 1.20) or [ids] (before). */
static int entry_units(const json_t *ids, struct gs_unit_set *set)
{
        gs_unit_set_clear(set);
        if (json_is_array(ids)) {
                add_ids(ids, set);
                return 0;
        }
        if (!json_is_object(ids))
                return -EBADMSG;
        const char *numa;
        const json_t *list;
        json_object_foreach((json_t *)ids, numa, list)
        {
                if (!json_is_array(list))
                        return -EBADMSG;
                add_ids(list, set);
        }
        return 0;
}

static void copy_str(char *dst, size_t size, const json_t *v)
{
        snprintf(dst, size, "%s", json_is_string(v) ? json_string_value(v) : "");
}

/* Our slice id and GPUs from the answer the kubelet cached. */
static void entry_answer(const json_t *resp, struct kube_cp_entry *e)
{
        char *buf = NULL;
        size_t len = 0;
        if (!json_is_string(resp) || gs_base64_decode(json_string_value(resp), &buf, &len) < 0)
                return;
        if (dp_decode_container_env((const uint8_t *)buf, len, "GPUSLICE_SLICE", e->slice, sizeof(e->slice)) < 0)
                e->slice[0] = '\0';
        if (dp_decode_container_env((const uint8_t *)buf, len, "NVIDIA_VISIBLE_DEVICES", e->gpus, sizeof(e->gpus)) < 0)
                e->gpus[0] = '\0';
        free(buf);
}

static int parse(const json_t *root, const char *resource, struct kube_checkpoint *cp)
{
        const json_t *data = json_object_get(root, "Data");
        const json_t *entries = data ? json_object_get(data, "PodDeviceEntries") : NULL;
        if (!json_is_object(data) || (entries && !json_is_array(entries) && !json_is_null(entries)))
                return -EBADMSG;
        size_t n = json_is_array(entries) ? json_array_size(entries) : 0;
        cp->entries = calloc(n ? n : 1, sizeof(*cp->entries));
        cp->all = calloc(1, sizeof(*cp->all));
        if (!cp->entries || !cp->all)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const json_t *x = json_array_get(entries, i);
                const json_t *res = json_object_get(x, "ResourceName");
                if (!json_is_object(x) || !json_is_string(res))
                        return -EBADMSG;
                if (strcmp(json_string_value(res), resource) != 0)
                        continue;
                struct kube_cp_entry *e = &cp->entries[cp->n_entries];
                if (!(e->units = malloc(sizeof(*e->units))))
                        return -ENOMEM;
                cp->n_entries++;
                if (entry_units(json_object_get(x, "DeviceIDs"), e->units) < 0)
                        return -EBADMSG;
                copy_str(e->pod_uid, sizeof(e->pod_uid), json_object_get(x, "PodUID"));
                copy_str(e->container, sizeof(e->container), json_object_get(x, "ContainerName"));
                entry_answer(json_object_get(x, "AllocResp"), e);
                gs_unit_set_union(cp->all, e->units);
        }
        return 0;
}

int kube_checkpoint_load(const char *path, const char *resource, struct kube_checkpoint *ret,
                         struct gs_error **err)
{
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = gs_file_read(path, KUBE_CHECKPOINT_MAX_BYTES, &text, &len, err);
        if (r < 0)
                return r == -ENOENT ? r : gs_error_wrap(err, "kubelet checkpoint");
        json_error_t je;
        json_t *root = json_loadb(text, len, 0, &je);
        if (!root)
                return gs_error_set(err, -EBADMSG, "kubelet checkpoint %s: line %d: %s", path,
                                    je.line, je.text);
        struct kube_checkpoint cp = { 0 };
        r = parse(root, resource, &cp);
        json_decref(root);
        if (r < 0) {
                kube_checkpoint_done(&cp);
                return gs_error_set(err, r, "kubelet checkpoint %s: %s", path,
                                    r == -ENOMEM ? "out of memory" : "not the device manager's format");
        }
        *ret = cp;
        return 0;
}
