/* SPDX-License-Identifier: Apache-2.0 */
/* Container edits of a slice. See node_edits.h. */
#include "node_edits.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "node_backend.h"
#include "node_files.h"

static int add_env(struct node_edits *e, const char *key, const char *value)
{
        struct node_env *v = &e->envs[e->n_envs++];
        v->key = key;
        return snprintf(v->value, sizeof(v->value), "%s", value) >= (int)sizeof(v->value)
                       ? -ENAMETOOLONG
                       : 0;
}

static int add_mount(struct node_edits *e, const char *container_path, const char *host_path,
                     bool read_only)
{
        struct node_mount *m = &e->mounts[e->n_mounts++];
        m->container_path = container_path;
        m->read_only = read_only;
        return snprintf(m->host_path, sizeof(m->host_path), "%s", host_path) >=
                               (int)sizeof(m->host_path)
                       ? -ENAMETOOLONG
                       : 0;
}

void node_socket_dir(const struct node *n, char *buf, size_t size)
{
        const char *slash = strrchr(n->daemon_socket, '/');
        size_t len = slash ? (size_t)(slash - n->daemon_socket) : 0;
        snprintf(buf, size, "%.*s", (int)len, n->daemon_socket);
        if (slash && len == 0)
                snprintf(buf, size, "/");
}

void node_container_socket_path(const struct node *n, char *buf, size_t size)
{
        const char *slash = strrchr(n->daemon_socket, '/');
        if (!n->daemon_socket[0])
                buf[0] = '\0';
        else
                snprintf(buf, size, "%s/%s", NODE_CONTAINER_DAEMON_DIR,
                         slash ? slash + 1 : n->daemon_socket);
}

int node_container_edits_locked(const struct node *n, const struct gs_slice *s,
                                struct node_edits *ret)
{
        struct node_edits e = { 0 };
        char gpus[NODE_EDIT_VALUE_MAX] = "";
        size_t off = 0;
        for (unsigned i = 0; i < s->n_gpus && off < sizeof(gpus); i++)
                off += (size_t)snprintf(gpus + off, sizeof(gpus) - off, "%s%s", i ? "," : "",
                                        s->gpus[i].uuid);
        int r = 0;
        r |= add_env(&e, "NVIDIA_VISIBLE_DEVICES", gpus);
        r |= add_env(&e, "CUDA_VISIBLE_DEVICES", gpus);
        if (node_backend_of(s)->needs_shim) {
                char path[NODE_PATH_MAX];
                r |= add_env(&e, "GPUSLICE_CONFIG", NODE_CONTAINER_CONF);
                node_conf_path(n, s->id, path, sizeof(path));
                r |= add_mount(&e, NODE_CONTAINER_CONF, path, true);
                node_slice_dir_path(n, s->id, path, sizeof(path));
                r |= add_mount(&e, NODE_CONTAINER_SLICE_DIR, path, false);
                if (n->shim_path[0]) {
                        r |= add_mount(&e, NODE_CONTAINER_SHIM, n->shim_path, true);
                        node_preload_path(n, path, sizeof(path));
                        r |= add_mount(&e, NODE_CONTAINER_PRELOAD, path, true);
                }
                if (n->daemon_socket[0]) {
                        /* Read-only: a connect() works through it, but no
                         * tenant can unlink the socket or bind its own. */
                        node_socket_dir(n, path, sizeof(path));
                        r |= add_mount(&e, NODE_CONTAINER_DAEMON_DIR, path, true);
                        /* The lease page's directory, read-only: the
                         * tenant may read its leases, never forge them
                         * (docs/internals/trust.md). */
                        node_page_dir_path(n, s->id, path, sizeof(path));
                        r |= add_mount(&e, NODE_CONTAINER_LEASE_DIR, path, true);
                }
        }
        r |= add_env(&e, "GPUSLICE_SLICE", s->id);
        for (unsigned i = 0; n->cdi_kind[0] && i < s->n_gpus; i++)
                if (snprintf(e.cdi_devices[e.n_cdi_devices++], sizeof(e.cdi_devices[0]), "%s=%s",
                             n->cdi_kind, s->gpus[i].uuid) >= (int)sizeof(e.cdi_devices[0]))
                        r = -ENAMETOOLONG;
        if (r < 0)
                return -ENAMETOOLONG;
        *ret = e;
        return 0;
}
