/* SPDX-License-Identifier: Apache-2.0 */
/* Local API framing: round trip, truncated, oversized, bad magic/version,
 * malformed payloads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "local_proto.h"

static void round_trip(void **state)
{
        (void)state;
        struct gs_proto_builder b;
        gs_proto_builder_init(&b, GS_MSG_CREATE, GS_PROTO_MAX_REQUEST);
        gs_proto_builder_add(&b, "gpu_milli", "%u", 300u);
        gs_proto_builder_add(&b, "name", "%s", "iris");
        gs_proto_builder_add(&b, "note", "%s", "bad\nline"); /* a request gives a key once */
        uint8_t *frame = NULL;
        size_t len = 0;
        assert_int_equal(gs_proto_builder_finish(&b, &frame, &len), 0);
        struct gs_proto_header h;
        assert_int_equal(gs_proto_header_decode(frame, len, GS_PROTO_MAX_REQUEST, &h, NULL), 0);
        assert_int_equal(h.type, GS_MSG_CREATE);
        assert_int_equal(h.length, len - GS_PROTO_HEADER_SIZE);
        struct gs_proto_msg m;
        assert_int_equal(gs_proto_msg_parse(h.type, (const char *)frame + GS_PROTO_HEADER_SIZE,
                                            h.length, &m, NULL),
                         0);
        assert_int_equal(m.n_items, 3);
        assert_string_equal(gs_proto_msg_get(&m, "gpu_milli"), "300");
        assert_string_equal(gs_proto_msg_get(&m, "name"), "iris");
        assert_string_equal(m.items[2].value, "bad?line");   /* control chars replaced */
        assert_null(gs_proto_msg_get(&m, "pid"));
        gs_proto_msg_done(&m);
        gs_free(frame);
}

static void header_errors(void **state)
{
        (void)state;
        uint8_t h[GS_PROTO_HEADER_SIZE];
        struct gs_proto_header out;
        struct gs_error *err = NULL;
        gs_proto_header_encode(h, GS_MSG_LIST, 0);
        for (size_t n = 0; n < GS_PROTO_HEADER_SIZE; n++)   /* truncated: read more */
                assert_int_equal(gs_proto_header_decode(h, n, 100, &out, NULL), -EAGAIN);
        gs_proto_header_encode(h, GS_MSG_LIST, 101);
        assert_int_equal(gs_proto_header_decode(h, sizeof(h), 100, &out, &err), -EMSGSIZE);
        assert_non_null(strstr(gs_error_msg(err), "exceeds"));
        gs_error_free(err);
        err = NULL;
        memcpy(h, "GET ", 4);
        assert_int_equal(gs_proto_header_decode(h, sizeof(h), 100, &out, &err), -EPROTO);
        gs_error_free(err);
        err = NULL;
        gs_proto_header_encode(h, GS_MSG_LIST, 0);
        h[5] = 9;
        assert_int_equal(gs_proto_header_decode(h, sizeof(h), 100, &out, &err), -EPROTONOSUPPORT);
        gs_error_free(err);
        assert_true(gs_proto_request_known(GS_MSG_STATUS));
        assert_true(gs_proto_request_known(GS_MSG_STOP));
        assert_false(gs_proto_request_known(GS_MSG_STOP + 1));
        assert_false(gs_proto_request_known(0));
        assert_false(gs_proto_request_known(77));
        assert_false(gs_proto_request_known(GS_MSG_ERROR));
}

static void bad_payloads(void **state)
{
        (void)state;
        static const char *const bad[] = {
                "key=value",              /* no final newline */
                "novalue\n",
                "=x\n",
                "Key=x\n",
                "a_very_long_key_name_beyond_31_chars=x\n",
                "k=tab\there\n",
                "k=x\n\n",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct gs_proto_msg m;
                struct gs_error *err = NULL;
                if (gs_proto_msg_parse(1, bad[i], strlen(bad[i]), &m, &err) != -EINVAL)
                        fail_msg("payload %zu accepted", i);
                gs_error_free(err);
        }
        struct gs_proto_msg m;
        assert_int_equal(gs_proto_msg_parse(1, "", 0, &m, NULL), 0);
        assert_int_equal(m.n_items, 0);
        gs_proto_msg_done(&m);
        /* Embedded NUL in a value is a control character. */
        assert_int_equal(gs_proto_msg_parse(1, "k=a\0b\n", 6, &m, NULL), -EINVAL);
}

/* A create frame naming gpu_milli twice was granted the first value (issue
 * 17): a request's keys are given once; a plan's want and a reply's
 * records repeat. */
static void repeated_keys(void **state)
{
        (void)state;
        static const char create[] = "gpu_milli=100\npid=42\ngpu_milli=900\n";
        struct gs_proto_msg m;
        struct gs_error *err = NULL;
        assert_int_equal(gs_proto_msg_parse(GS_MSG_CREATE, create, strlen(create), &m, &err),
                         -EINVAL);
        assert_non_null(strstr(gs_error_msg(err), "'gpu_milli' is repeated"));
        err = gs_error_free(err);
        static const char release[] = "id=s1\nid=s2\n";
        assert_int_equal(gs_proto_msg_parse(GS_MSG_RELEASE, release, strlen(release), &m, NULL),
                         -EINVAL);
        static const char plan[] = "want=100,0\nwant=200,0\n";
        assert_int_equal(gs_proto_msg_parse(GS_MSG_PLAN, plan, strlen(plan), &m, NULL), 0);
        assert_int_equal(m.n_items, 2);
        gs_proto_msg_done(&m);
        static const char list[] = "gpu=0\ngpu_uuid=a\ngpu=1\ngpu_uuid=b\n";
        assert_int_equal(gs_proto_msg_parse(GS_MSG_REPLY | GS_MSG_LIST, list, strlen(list), &m,
                                            NULL), 0);
        assert_int_equal(m.n_items, 4);
        gs_proto_msg_done(&m);
}

static void size_limit(void **state)
{
        (void)state;
        struct gs_proto_builder b;
        gs_proto_builder_init(&b, GS_MSG_REPLY | GS_MSG_LIST, 64);
        gs_proto_builder_add(&b, "a", "%s", "0123456789012345678901234567890123456789");
        gs_proto_builder_add(&b, "b", "%s", "0123456789012345678901234567890123456789");
        uint8_t *frame = NULL;
        size_t len = 0;
        assert_int_equal(gs_proto_builder_finish(&b, &frame, &len), -EMSGSIZE);
        assert_int_equal(gs_proto_error_frame(-EINVAL, "bad\nthing", &frame, &len), 0);
        struct gs_proto_header h;
        assert_int_equal(gs_proto_header_decode(frame, len, GS_PROTO_MAX_REPLY, &h, NULL), 0);
        assert_int_equal(h.type, GS_MSG_ERROR);
        gs_free(frame);
}

static void default_dir(void **state)
{
        (void)state;
        char buf[64];
        assert_int_equal(gs_local_sim_dir(0, NULL, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "/run/gpuslice-sim");
        assert_int_equal(gs_local_sim_dir(0, "/run/user/0", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "/run/user/0/gpuslice-sim");
        assert_int_equal(gs_local_sim_dir(1000, "/run/user/1000", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "/run/user/1000/gpuslice-sim");
        assert_int_equal(gs_local_sim_dir(1000, "relative", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "/tmp/gpuslice-sim-1000");
        assert_int_equal(gs_local_sim_dir(1000, NULL, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "/tmp/gpuslice-sim-1000");
        assert_int_equal(gs_local_sim_dir(1000, "/a-very-long-runtime-directory-name-that-does-not-fit",
                                          buf, 20),
                         -ENAMETOOLONG);
        assert_string_equal(GS_LOCAL_SYSTEM_DIR, "/run/gpuslice");
}

/* The client trusts a socket directory owned by itself or root and
 * writable by nobody else. */
static void check_dir(void **state)
{
        (void)state;
        char dir[] = "/tmp/gs-checkdir-XXXXXX";
        assert_non_null(mkdtemp(dir)); /* 0700, ours */
        unsigned me = (unsigned)geteuid();
        struct gs_error *err = NULL;
        assert_int_equal(gs_local_check_dir(dir, me, &err), 0);
        assert_null(err);
        char missing[64];
        snprintf(missing, sizeof(missing), "%s/none", dir);
        assert_int_equal(gs_local_check_dir(missing, me, &err), -ENOENT);
        assert_null(err);
        /* Owned by someone else (seen by a client of another uid; a root-
         * owned directory is trusted by everyone). */
        if (me != 0) {
                assert_int_equal(gs_local_check_dir(dir, me + 1, &err), -EPERM);
                assert_non_null(strstr(gs_error_msg(err), dir));
                gs_error_free(err);
                err = NULL;
        } else {
                assert_int_equal(gs_local_check_dir(dir, 1000, NULL), 0);
        }
        /* Writable by group or others. */
        assert_int_equal(chmod(dir, 0770), 0);
        assert_int_equal(gs_local_check_dir(dir, me, &err), -EPERM);
        assert_non_null(strstr(gs_error_msg(err), "writable by group or others"));
        gs_error_free(err);
        err = NULL;
        assert_int_equal(chmod(dir, 01777), 0);
        assert_int_equal(gs_local_check_dir(dir, me, NULL), -EPERM);
        assert_int_equal(chmod(dir, 0755), 0);
        assert_int_equal(gs_local_check_dir(dir, me, NULL), 0);
        /* A file is not a directory. */
        char file[64];
        snprintf(file, sizeof(file), "%s/f", dir);
        FILE *f = fopen(file, "w");
        assert_non_null(f);
        fclose(f);
        assert_int_equal(gs_local_check_dir(file, me, NULL), -EPERM);
        unlink(file);
        /* Root: a directory another user (nobody) owns is refused. */
        if (me == 0) {
                struct passwd *pw = getpwnam("nobody");
                assert_non_null(pw);
                assert_int_equal(chown(dir, pw->pw_uid, pw->pw_gid), 0);
                assert_int_equal(gs_local_check_dir(dir, 0, &err), -EPERM);
                char want[64];
                snprintf(want, sizeof(want), "owned by uid %u", (unsigned)pw->pw_uid);
                assert_non_null(strstr(gs_error_msg(err), want));
                assert_non_null(strstr(gs_error_msg(err), dir));
                assert_non_null(strstr(gs_error_msg(err), "expected uid 0 (you) or root"));
                gs_error_free(err);
                /* The owner itself trusts it. */
                assert_int_equal(gs_local_check_dir(dir, (unsigned)pw->pw_uid, NULL), 0);
        }
        assert_int_equal(rmdir(dir), 0);
        if (me != 0)
                skip(); /* the chown-to-nobody case needs root */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(round_trip),
                cmocka_unit_test(header_errors),
                cmocka_unit_test(bad_payloads),
                cmocka_unit_test(repeated_keys),
                cmocka_unit_test(size_limit),
                cmocka_unit_test(default_dir),
                cmocka_unit_test(check_dir),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
