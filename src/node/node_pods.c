/* SPDX-License-Identifier: Apache-2.0 */
/* Which pod holds each pod slice (node.h, "Pods"): learnt by the
 * front-ends at run time, kept in memory next to the ledger, forgotten
 * with the slice. */
#include "node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct node_pod_entry *entry_of(const struct node *n, const char *id)
{
        for (size_t i = 0; i < n->n_pods; i++)
                if (strcmp(n->pods[i].slice, id) == 0)
                        return &n->pods[i];
        return NULL;
}

static bool pod_valid(const struct node_pod *p)
{
        return p->ns[0] && p->name[0] && memchr(p->ns, '\0', sizeof(p->ns)) &&
               memchr(p->name, '\0', sizeof(p->name)) &&
               memchr(p->container, '\0', sizeof(p->container)) &&
               memchr(p->uid, '\0', sizeof(p->uid));
}

int node_set_pod_locked(struct node *n, const char *id, const struct node_pod *p)
{
        const struct gs_slice *s = gs_ledger_find(&n->ledger, id);
        if (!s || !gs_slice_in_container(s))
                return -ENOENT;
        if (!pod_valid(p))
                return -EINVAL;
        struct node_pod_entry *e = entry_of(n, id);
        if (!e) {
                if (n->n_pods == n->cap_pods) {
                        size_t cap = n->cap_pods ? n->cap_pods * 2 : 16;
                        struct node_pod_entry *m = realloc(n->pods, cap * sizeof(*m));
                        if (!m)
                                return -ENOMEM;
                        n->pods = m;
                        n->cap_pods = cap;
                }
                e = &n->pods[n->n_pods++];
                snprintf(e->slice, sizeof(e->slice), "%s", id);
        } else if (memcmp(&e->pod, p, sizeof(*p)) == 0) {
                return 0;
        }
        e->pod = *p;
        n->pods_generation++;
        return 0;
}

int node_pod_locked(const struct node *n, const char *id, struct node_pod *ret)
{
        const struct node_pod_entry *e = entry_of(n, id);
        if (!e)
                return -ENOENT;
        *ret = e->pod;
        return 0;
}

void node_forget_pod_locked(struct node *n, const char *id)
{
        struct node_pod_entry *e = entry_of(n, id);
        if (e) {
                *e = n->pods[--n->n_pods];
                n->pods_generation++;
        }
}
