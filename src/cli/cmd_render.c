/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice render: turn an API spec into Kubernetes manifests, one
 * Deployment and one Service per API. The GPU share becomes the integer
 * extended resource gpuslice.io/gpu-milli (300m -> 300, 1 -> 1000), set as a
 * limit (the request defaults to it; extended resources cannot be
 * overcommitted). --runtime-class NAME sets each Deployment's pod
 * runtimeClassName (the NVIDIA runtime gives containers the driver's
 * libraries; not needed where it is the node's default).
 *
 * --dra asks the DRA driver gpu.gpuslice.io instead: each API also gets a
 * ResourceClaimTemplate <api>-gpu (resource.k8s.io/v1) whose one request
 * `gpu` asks a device of the DeviceClass gpu.gpuslice.io for the consumable
 * capacities milli (the share) and memory (gpu_memory, when given), with the
 * compute policy in an opaque SliceConfig; whole GPUs are `count: N` devices
 * of milli 1000 each. The pod references the template and the container the
 * claim, and asks for no gpuslice.io/gpu-milli. The DeviceClass itself is
 * cluster-scoped and comes with deploy/components/dra, not from here.
 *
 * Output is YAML on stdout, every string double-quoted. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "compute_policy.h"
#include "overuse_policy.h"
#include "error.h"
#include "macro.h"
#include "quantity.h"
#include "spec.h"

int cmd_render(int argc, char **argv);

/* The DRA driver's names: DRA_DRIVER_NAME (src/kube/dra_plugin.h) and
 * DRA_CONFIG_API / DRA_CONFIG_KIND (src/kube/dra_claim.h); the render test
 * checks that they agree. */
#define RENDER_DRA_DRIVER "gpu.gpuslice.io"
#define RENDER_DRA_CLASS RENDER_DRA_DRIVER
#define RENDER_DRA_CONFIG_API "gpu.gpuslice.io/v1alpha1"
#define RENDER_DRA_CONFIG_KIND "SliceConfig"
#define RENDER_DRA_CLAIM "gpu" /* the pod's claim and the template's request */

/* A YAML double-quoted scalar: ", \ and control bytes escaped. */
static void qstr(FILE *f, const char *s)
{
        fputc('"', f);
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p == '"' || *p == '\\')
                        fprintf(f, "\\%c", *p);
                else if (*p < 0x20 || *p == 0x7f)
                        fprintf(f, "\\x%02x", *p);
                else
                        fputc(*p, f);
        }
        fputc('"', f);
}

static void labels(FILE *f, const char *indent, const char *name)
{
        fprintf(f, "%sapp.kubernetes.io/name: ", indent);
        qstr(f, name);
        fputc('\n', f);
        fprintf(f, "%sapp.kubernetes.io/managed-by: \"gpuslice\"\n", indent);
}

/* An object's metadata: its name, namespace and the labels of the API
 * `app` (an object of that API, such as its claim template, carries the
 * API's labels). */
static void metadata_of(FILE *f, const char *name, const char *ns, const char *app)
{
        fputs("metadata:\n  name: ", f);
        qstr(f, name);
        fputc('\n', f);
        if (ns) {
                fputs("  namespace: ", f);
                qstr(f, ns);
                fputc('\n', f);
        }
        fputs("  labels:\n", f);
        labels(f, "    ", app);
}

static void metadata(FILE *f, const char *name, const char *ns)
{
        metadata_of(f, name, ns, name);
}

/* Whether `s` is a DNS-1123 subdomain (what Kubernetes accepts as a
 * RuntimeClass name): at most 253 characters, dot-separated labels of
 * [a-z0-9-], each starting and ending with a letter or digit. */
static bool dns_subdomain_valid(const char *s)
{
        size_t len = strnlen(s, 254), label = 0;

        if (len == 0 || len > 253)
                return false;
        for (size_t i = 0; i <= len; i++) {
                char c = s[i];
                if (c == '.' || c == '\0') {
                        if (label == 0 || s[i - 1] == '-')
                                return false;
                        label = 0;
                } else if (((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                            (c == '-' && label > 0)) && label < 63) {
                        label++;
                } else {
                        return false;
                }
        }
        return true;
}

/* The name of an API's claim template, <api>-gpu (the API's name is a DNS
 * label of at most 63 bytes, so the buffer always holds it). */
static void claim_template_name(const struct gs_api_spec *a, char *buf, size_t size)
{
        snprintf(buf, size, "%s-%s", a->name, RENDER_DRA_CLAIM);
}

/* The ResourceClaimTemplate of an API: one request for a device of the
 * class gpu.gpuslice.io with the share as milli and gpu_memory (if given)
 * as memory; whole GPUs are `count` devices of milli 1000 each. A slice's
 * compute policy goes to the driver in an opaque SliceConfig: always the
 * spec's (`share` unless it says `cap`), so that the claim means what the
 * spec means whatever the daemon's own --compute-policy default. Whole GPUs
 * have no policy (the spec refuses one for them). The over-use policy goes
 * in the same SliceConfig only when the spec names one (else the daemon's
 * --overuse-policy applies); whole GPUs get a SliceConfig for it alone. */
static void render_claim_template(FILE *f, const struct gs_api_spec *a, const char *ns)
{
        char name[GS_API_NAME_MAX + 16], q[64];
        uint32_t milli = a->compute.gpu_milli;
        bool whole = milli >= GS_MILLI_PER_GPU;

        claim_template_name(a, name, sizeof(name));
        fputs("---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n", f);
        metadata_of(f, name, ns, a->name);
        fputs("spec:\n  spec:\n    devices:\n      requests:\n"
              "      - name: \"" RENDER_DRA_CLAIM "\"\n        exactly:\n"
              "          deviceClassName: \"" RENDER_DRA_CLASS "\"\n", f);
        if (whole)
                fprintf(f, "          count: %" PRIu32 "\n", milli / GS_MILLI_PER_GPU);
        fprintf(f, "          capacity:\n            requests:\n              milli: \"%" PRIu32
                   "\"\n", whole ? (uint32_t)GS_MILLI_PER_GPU : milli);
        if (!whole && a->compute.gpu_memory &&
            gs_memory_quantity_format(a->compute.gpu_memory, q, sizeof(q)) >= 0)
                fprintf(f, "              memory: \"%s\"\n", q);
        bool overuse = a->compute.overuse != GS_OVERUSE_DEFAULT;
        if (whole && !overuse)
                return;
        fputs("      config:\n      - requests: [\"" RENDER_DRA_CLAIM "\"]\n"
              "        opaque:\n          driver: \"" RENDER_DRA_DRIVER "\"\n"
              "          parameters:\n"
              "            apiVersion: \"" RENDER_DRA_CONFIG_API "\"\n"
              "            kind: \"" RENDER_DRA_CONFIG_KIND "\"\n", f);
        if (!whole)
                fprintf(f, "            policy: \"%s\"\n",
                        gs_compute_policy_name(a->compute.policy));
        if (overuse)
                fprintf(f, "            overuse: \"%s\"\n",
                        gs_overuse_policy_name(a->compute.overuse));
}

/* The container's resources: the claim (--dra) or gpuslice.io/gpu-milli,
 * and cpu and mem as both limit and request. */
static void render_resources(FILE *f, const struct gs_api_spec *a, bool dra)
{
        char cpu[64] = "", mem[64] = "";
        if (a->compute.cpu_milli)
                gs_cpu_quantity_format(a->compute.cpu_milli, cpu, sizeof(cpu));
        if (a->compute.mem)
                gs_memory_quantity_format(a->compute.mem, mem, sizeof(mem));
        bool native = cpu[0] || mem[0];

        fputs("        resources:\n", f);
        if (dra)
                fputs("          claims:\n          - name: \"" RENDER_DRA_CLAIM "\"\n", f);
        if (!dra || native)
                fputs("          limits:\n", f);
        if (!dra)
                fprintf(f, "            gpuslice.io/gpu-milli: \"%" PRIu32 "\"\n",
                        a->compute.gpu_milli);
        if (!native)
                return;
        for (int req = 0; req < 2; req++) {
                if (req)
                        fputs("          requests:\n", f);
                if (cpu[0])
                        fprintf(f, "            cpu: \"%s\"\n", cpu);
                if (mem[0])
                        fprintf(f, "            memory: \"%s\"\n", mem);
        }
}

static void render_api(FILE *f, const struct gs_api_spec *a, const char *ns,
                       const char *runtime_class, bool dra)
{
        char q[64];
        if (dra)
                render_claim_template(f, a, ns);
        fputs("---\napiVersion: apps/v1\nkind: Deployment\n", f);
        metadata(f, a->name, ns);
        fprintf(f, "spec:\n  replicas: %" PRIu32 "\n  selector:\n    matchLabels:\n",
                a->replicas);
        labels(f, "      ", a->name);
        fputs("  template:\n    metadata:\n      labels:\n", f);
        labels(f, "        ", a->name);
        if (gs_gpu_quantity_format(a->compute.gpu_milli, q, sizeof(q)) >= 0) {
                fputs("      annotations:\n        gpuslice.io/gpu: ", f);
                qstr(f, q);
                fputc('\n', f);
        }
        fputs("    spec:\n", f);
        if (runtime_class) {
                fputs("      runtimeClassName: ", f);
                qstr(f, runtime_class);
                fputc('\n', f);
        }
        if (dra) {
                char name[GS_API_NAME_MAX + 16];
                claim_template_name(a, name, sizeof(name));
                fputs("      resourceClaims:\n      - name: \"" RENDER_DRA_CLAIM "\"\n"
                      "        resourceClaimTemplateName: ", f);
                qstr(f, name);
                fputc('\n', f);
        }
        fputs("      containers:\n      - name: ", f);
        qstr(f, a->name);
        fputs("\n        image: ", f);
        qstr(f, a->image);
        fputc('\n', f);
        if (a->n_command) {
                fputs("        command:\n", f);
                for (size_t i = 0; i < a->n_command; i++) {
                        fputs("        - ", f);
                        qstr(f, a->command[i]);
                        fputc('\n', f);
                }
        }
        fprintf(f, "        ports:\n        - name: \"http\"\n          containerPort: %u\n",
                (unsigned)a->port);
        if (a->n_env) {
                fputs("        env:\n", f);
                for (size_t i = 0; i < a->n_env; i++) {
                        fputs("        - name: ", f);
                        qstr(f, a->env[i].name);
                        fputs("\n          value: ", f);
                        qstr(f, a->env[i].value);
                        fputc('\n', f);
                }
        }
        render_resources(f, a, dra);
        fputs("---\napiVersion: v1\nkind: Service\n", f);
        metadata(f, a->name, ns);
        fputs("spec:\n  selector:\n", f);
        labels(f, "    ", a->name);
        fprintf(f, "  ports:\n  - name: \"http\"\n    port: %u\n    targetPort: %u\n",
                (unsigned)a->port, (unsigned)a->port);
}

enum { OPT_NAMESPACE = 1, OPT_RUNTIME_CLASS, OPT_DRA };

static const struct cli_opt render_table[] = {
        { OPT_NAMESPACE, 'n', "namespace", "NS", "the objects' namespace (a DNS label)", NULL },
        { OPT_RUNTIME_CLASS, 0, "runtime-class", "NAME",
          "the pods' runtimeClassName: use --runtime-class nvidia\n"
          "unless the NVIDIA runtime is the nodes' default",
          NULL },
        { OPT_DRA, 0, "dra", NULL,
          "ask the DRA driver " RENDER_DRA_DRIVER " instead: a\n"
          "ResourceClaimTemplate <api>-gpu per API (milli, memory,\n"
          "policy) that the pods claim (Kubernetes 1.36+; the\n"
          "DeviceClass is in deploy/components/dra)",
          NULL },
};

const struct cli_cmd cli_cmd_render = {
        .name = "render",
        .usage = "[--namespace NS] [--runtime-class NAME] [--dra] SPEC",
        .summary = "turn an API spec into Kubernetes manifests",
        .description = "Print a Deployment and a Service per API of the API spec SPEC (YAML), "
                       "asking for\ngpuslice.io/gpu-milli (or, with --dra, a ResourceClaim).\n",
        .opts = render_table,
        .n_opts = GS_ARRAY_SIZE(render_table),
        .operand = "FILE",
};

int cmd_render(int argc, char **argv)
{
        const char *ns = NULL, *runtime_class = NULL;
        bool dra = false;
        struct cli_args args;
        int c;
        cli_args_init(&args, &cli_cmd_render, argc, argv);
        while ((c = cli_args_next(&args)) > 0) {
                switch (c) {
                case OPT_NAMESPACE:
                        if (gs_dns_label_valid(args.arg) <= 0)
                                return cli_usage_error(&cli_cmd_render,
                                                       "--namespace: '%s' is not a DNS label",
                                                       args.arg);
                        ns = args.arg;
                        break;
                case OPT_RUNTIME_CLASS:
                        if (!dns_subdomain_valid(args.arg))
                                return cli_usage_error(&cli_cmd_render,
                                                       "--runtime-class: '%s' is not a "
                                                       "RuntimeClass name (a DNS subdomain)",
                                                       args.arg);
                        runtime_class = args.arg;
                        break;
                case OPT_DRA:
                        dra = true;
                        break;
                }
        }
        if (c < 0)
                return cli_args_exit(c);
        if (args.ind != argc - 1)
                return cli_usage_error(&cli_cmd_render, "expected one API spec file");
        const char *spec_path = argv[args.ind];
        _cleanup_error_ struct gs_error *err = NULL;
        _cleanup_(gs_spec_freep) struct gs_spec *spec = NULL;
        if (gs_spec_load_file(spec_path, &spec, &err) < 0) {
                fprintf(stderr, "gpuslice render: %s\n", gs_error_msg(err));
                return CLI_EXIT_FAILURE;
        }
        for (size_t i = 0; i < spec->n_apis; i++) {
                const struct gs_api_spec *a = &spec->apis[i];
                if (!a->image) {
                        fprintf(stderr, "gpuslice render: %s:%u: API %s has no image: "
                                        "Kubernetes needs one (command alone is for local mode)\n",
                                spec->source, a->line, a->name);
                        return CLI_EXIT_FAILURE;
                }
                if (a->compute.gpu_memory && !dra)
                        fprintf(stderr, "gpuslice render: note: API %s: gpu_memory is not "
                                        "passed through the device plugin; the slice gets "
                                        "share x GPU memory (render --dra passes it)\n",
                                a->name);
                if (a->compute.overuse != GS_OVERUSE_DEFAULT && !dra)
                        fprintf(stderr, "gpuslice render: note: API %s: overuse is not "
                                        "passed through the device plugin; the daemon's "
                                        "--overuse-policy applies (render --dra passes it)\n",
                                a->name);
        }
        for (size_t i = 0; i < spec->n_apis; i++)
                render_api(stdout, &spec->apis[i], ns, runtime_class, dra);
        if (fflush(stdout) != 0) {
                fprintf(stderr, "gpuslice render: cannot write: %s\n", strerror(errno));
                return CLI_EXIT_FAILURE;
        }
        return 0;
}
