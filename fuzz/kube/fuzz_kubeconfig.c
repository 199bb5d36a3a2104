/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the API-server client's kubeconfig parser
 * (apiserver_kubeconfig_parse, src/kube/apiserver_config.c): the bytes are
 * a kubeconfig file, parsed for its current-context and, when that fails
 * to name one, for a context named "x". A parsed config must then hold an
 * https:// server or be refused by apiserver_new. Lives in fuzz/kube/
 * because it links gs_kube; tests/kube/CMakeLists.txt replays its corpus
 * (fuzz/corpus/kubeconfig). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void parse(const uint8_t *data, size_t size, const char *context)
{
        struct apiserver_config cfg = { 0 };
        struct gs_error *err = NULL;
        if (apiserver_kubeconfig_parse("fuzz", (const char *)data, size, "/base", context, &cfg,
                                       &err) == 0) {
                if (!cfg.server || (cfg.ca_pem && cfg.ca_pem_len == 0) ||
                    (!cfg.token && !cfg.token_file))
                        abort(); /* the parser's contract */
                struct apiserver *a = NULL;
                if (apiserver_new(&cfg, &a, &err) == 0 && strncmp(cfg.server, "https://", 8) != 0)
                        abort();
                apiserver_free(a);
        } else if (!err) {
                abort(); /* every failure says why */
        }
        gs_error_free(err);
        apiserver_config_done(&cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        parse(data, size, NULL);
        parse(data, size, "x");
        return 0;
}
