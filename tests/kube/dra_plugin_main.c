/* SPDX-License-Identifier: Apache-2.0 */
/* Test driver for the DRA plugin layer: runs dra_plugin_run() with fake
 * driver operations until SIGTERM or SIGINT, for test_dra_plugin.py.
 *
 *   dra_plugin_main --registry DIR --plugin-dir DIR [--driver NAME]
 *                   [--reg-name FILE] [--check-ms N]
 *                   [--prepared FILE] [--unprepared FILE]
 *
 * prepare: one device "gpu-0" in pool "node-a" with CDI id
 * "gpuslice.io/slice=claim-<uid>" and share_id <uid>; a claim whose name
 * starts with "bad" fails; one whose name starts with "flaky" fails the
 * first time its uid is seen and succeeds afterwards; one whose name starts
 * with "broken" gets a device without a pool (which the plugin must turn
 * into that claim's error); unprepare fails for a claim whose name starts
 * with "stuck". Every prepare call appends "<uid>\n" to
 * --prepared, every unprepare "<uid>\n" to --unprepared. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "dra_plugin.h"
#include "log.h"
#include "number.h"

struct fake {
        const char *prepared_log;
        const char *unprepared_log;
        char *flaky_seen[64];
        size_t n_flaky_seen;
};

static void log_sink(void *ctx, enum gs_log_level level, const char *msg)
{
        (void)ctx;
        fprintf(stderr, "dra_plugin_main: %s: %s\n", gs_log_level_name(level), msg);
}

static void record(const char *path, const char *uid)
{
        if (!path)
                return;
        FILE *f = fopen(path, "ae");
        if (!f)
                return;
        fprintf(f, "%s\n", uid);
        fclose(f);
}

static bool starts_with(const char *s, const char *prefix)
{
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool flaky_first_time(struct fake *f, const char *uid)
{
        for (size_t i = 0; i < f->n_flaky_seen; i++)
                if (strcmp(f->flaky_seen[i], uid) == 0)
                        return false;
        if (f->n_flaky_seen < sizeof(f->flaky_seen) / sizeof(f->flaky_seen[0]))
                f->flaky_seen[f->n_flaky_seen++] = strdup(uid);
        return true;
}

static int fake_prepare(void *ctx, const struct dra_claim *c, struct dra_device **ret,
                        size_t *ret_n, struct gs_error **err)
{
        struct fake *f = ctx;
        record(f->prepared_log, c->uid);
        if (starts_with(c->name, "bad"))
                return gs_error_set(err, -EINVAL, "claim %s/%s refused by the test driver", c->ns,
                                    c->name);
        if (starts_with(c->name, "flaky") && flaky_first_time(f, c->uid))
                return gs_error_set(err, -EAGAIN, "claim %s/%s: not ready yet, try again", c->ns,
                                    c->name);
        struct dra_device *d = calloc(1, sizeof(*d));
        if (!d)
                return gs_error_set(err, -ENOMEM, "out of memory");
        char cdi[256];
        snprintf(cdi, sizeof(cdi), "gpuslice.io/slice=claim-%s", c->uid);
        d->device_name = strdup("gpu-0");
        d->pool_name = starts_with(c->name, "broken") ? NULL : strdup("node-a");
        d->share_id = strdup(c->uid);
        if (!d->device_name || !d->share_id || dra_device_add_cdi_id(d, cdi) < 0 ||
            (!d->pool_name && !starts_with(c->name, "broken"))) {
                dra_device_array_free(d, 1);
                return gs_error_set(err, -ENOMEM, "out of memory");
        }
        *ret = d;
        *ret_n = 1;
        return 0;
}

static int fake_unprepare(void *ctx, const struct dra_claim *c, struct gs_error **err)
{
        struct fake *f = ctx;
        record(f->unprepared_log, c->uid);
        if (starts_with(c->name, "stuck"))
                return gs_error_set(err, -EIO, "claim %s/%s: cannot unprepare", c->ns, c->name);
        return 0;
}

static int usage(void)
{
        fprintf(stderr, "usage: dra_plugin_main --registry DIR --plugin-dir DIR [--driver NAME] "
                        "[--reg-name FILE] [--check-ms N] [--prepared FILE] "
                        "[--unprepared FILE]\n");
        return 2;
}

int main(int argc, char **argv)
{
        struct dra_options o;
        dra_options_init(&o);
        struct fake f = { 0 };
        o.plugins_registry_dir = NULL;
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                const char *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (!v)
                        return usage();
                i++;
                if (strcmp(a, "--registry") == 0) {
                        o.plugins_registry_dir = v;
                } else if (strcmp(a, "--plugin-dir") == 0) {
                        o.plugin_dir = v;
                } else if (strcmp(a, "--driver") == 0) {
                        o.driver_name = v;
                } else if (strcmp(a, "--reg-name") == 0) {
                        o.reg_socket_name = v;
                } else if (strcmp(a, "--prepared") == 0) {
                        f.prepared_log = v;
                } else if (strcmp(a, "--unprepared") == 0) {
                        f.unprepared_log = v;
                } else if (strcmp(a, "--check-ms") == 0) {
                        uint64_t ms;
                        if (gs_u64_parse_str(v, 60000, &ms) < 0 || ms == 0)
                                return usage();
                        o.check_ms = (unsigned)ms;
                } else {
                        return usage();
                }
        }
        if (!o.plugins_registry_dir || !o.plugin_dir)
                return usage();
        gs_log_max_level = GS_LOG_DEBUG;
        gs_log_set_sink(log_sink, NULL);

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return 1;
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        if (sfd < 0)
                return 1;
        struct dra_ops ops = { .ctx = &f, .prepare = fake_prepare, .unprepare = fake_unprepare };
        struct gs_error *err = NULL;
        int r = dra_plugin_run(&o, &ops, sfd, &err);
        if (r < 0)
                fprintf(stderr, "dra_plugin_main: %s\n", gs_error_msg(err));
        gs_error_free(err);
        close(sfd);
        for (size_t i = 0; i < f.n_flaky_seen; i++)
                free(f.flaky_seen[i]);
        return r < 0 ? 1 : 0;
}
