/* SPDX-License-Identifier: Apache-2.0 */
/* The text of a scrape (metrics_text) over a real node: pod slices carry
 * the `namespace`, `pod` and `container` labels of the pod the node knows
 * (node_set_pod_locked, as the Kubernetes front-ends record it), and none
 * when it knows none, when the container is "" (a DRA slice held by the
 * whole pod) or for a local slice; a freed slice's pod is forgotten with
 * it. The new families (GPU utilisation, time waited for the gate) are
 * declared with their types. No arbiter, events or NVML: their series are
 * left out, which is checked too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "daemon.h"
#include "node_test_util.h"

#define T_SHIM "/opt/gpuslice/lib/libgpuslice.so"
#define T_SOCK "/run/gpuslice/test.sock"
#define T_CDI "nvidia.com/gpu"

/* The line of `family` whose labels hold slice="id", or NULL (copied into
 * buf). */
static const char *series(const char *text, const char *family, const char *id, char *buf,
                          size_t size)
{
        char want[128];
        snprintf(want, sizeof(want), "slice=\"%s\"", id);
        size_t fl = strlen(family);
        for (const char *p = text; p && *p;) {
                const char *end = strchr(p, '\n');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                if (len < size && strncmp(p, family, fl) == 0 && p[fl] == '{') {
                        snprintf(buf, size, "%.*s", (int)len, p);
                        if (strstr(buf, want))
                                return buf;
                }
                p = end ? end + 1 : NULL;
        }
        return NULL;
}

static void set_pod(struct t_env *e, const char *id, const char *ns, const char *name,
                    const char *container, int want)
{
        struct node_pod p = { 0 };
        snprintf(p.ns, sizeof(p.ns), "%s", ns);
        snprintf(p.name, sizeof(p.name), "%s", name);
        snprintf(p.container, sizeof(p.container), "%s", container);
        node_lock(e->node);
        assert_int_equal(node_set_pod_locked(e->node, id, &p), want);
        node_unlock(e->node);
}

static char *scrape(struct daemon *d)
{
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(metrics_text(d, &text, &len), 0);
        assert_non_null(text);
        assert_int_equal(strlen(text), len);
        return text;
}

static void pod_labels(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(2, T_SHIM, T_SOCK, T_CDI);
        struct daemon *d = calloc(1, sizeof(*d));
        assert_non_null(d);
        d->node = e->node;

        struct node_request r1 = t_kube(300, "0.0-299"), r2 = t_kube(200, "0.300-499"),
                            r3 = t_kube(100, "0.500-599"), r4 = t_local(100);
        struct gs_slice a = t_prepare(e, &r1), b = t_prepare(e, &r2), c = t_prepare(e, &r3),
                        l = t_prepare(e, &r4);
        set_pod(e, a.id, "team-a", "trainer-0", "main", 0);
        set_pod(e, b.id, "team-b", "serve-7f9c", "", 0);
        set_pod(e, l.id, "team-a", "not-a-pod", "main", -ENOENT);

        char *text = scrape(d), line[1024];
        if (getenv("T_PRINT")) /* T_PRINT=1: show the text */
                fputs(text, stderr);
        const char *s = series(text, "gpuslice_slice_info", a.id, line, sizeof(line));
        assert_non_null(s);
        assert_non_null(strstr(s, "namespace=\"team-a\""));
        assert_non_null(strstr(s, "pod=\"trainer-0\""));
        assert_non_null(strstr(s, "container=\"main\""));
        assert_non_null(strstr(s, "kind=\"kubelet\""));
        /* Every per-slice family carries them, not only the info. */
        s = series(text, "gpuslice_slice_share_milli", a.id, line, sizeof(line));
        assert_non_null(s);
        assert_non_null(strstr(s, "pod=\"trainer-0\""));
        assert_non_null(strstr(s, "} 300"));

        s = series(text, "gpuslice_slice_info", b.id, line, sizeof(line));
        assert_non_null(s);
        assert_non_null(strstr(s, "namespace=\"team-b\",pod=\"serve-7f9c\""));
        assert_null(strstr(s, "container="));
        for (int k = 0; k < 2; k++) {
                s = series(text, "gpuslice_slice_info", k ? l.id : c.id, line, sizeof(line));
                assert_non_null(s);
                assert_null(strstr(s, "namespace="));
                assert_null(strstr(s, "pod="));
                assert_null(strstr(s, "container="));
        }

        /* Families are declared even without samples (no arbiter, no NVML). */
        assert_non_null(strstr(text, "# TYPE gpuslice_slice_gate_wait_seconds_total counter\n"));
        assert_non_null(strstr(text, "# TYPE gpuslice_gpu_utilization_ratio gauge\n"));
        assert_null(series(text, "gpuslice_slice_gate_wait_seconds_total", a.id, line,
                           sizeof(line)));
        assert_null(strstr(text, "gpuslice_gpu_utilization_ratio{"));
        free(text);

        /* A freed slice's pod goes with it: the next slice is unlabelled. */
        assert_int_equal(t_release(e, a.id), 0);
        text = scrape(d);
        assert_null(strstr(text, "trainer-0"));
        free(text);
        struct node_pod p;
        node_lock(e->node);
        assert_int_equal(node_pod_locked(e->node, a.id, &p), -ENOENT);
        node_unlock(e->node);

        free(d);
        t_env_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(pod_labels, t_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
