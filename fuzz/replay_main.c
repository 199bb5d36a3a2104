/* SPDX-License-Identifier: Apache-2.0 */
/* Replays a fuzz target's corpus: every file in the directories (or the
 * files) named on the command line is fed once to LLVMFuzzerTestOneInput.
 * This makes each corpus an ordinary test in every build; a crash, a
 * sanitizer report or a hang fails it. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
        FILE *f = fopen(path, "rbe");
        if (!f) {
                perror(path);
                return -1;
        }
        size_t cap = 1 << 16, n = 0;
        uint8_t *buf = malloc(cap);
        if (!buf) {
                fclose(f);
                return -1;
        }
        for (;;) {
                size_t got = fread(buf + n, 1, cap - n, f);
                n += got;
                if (n < cap)
                        break;
                uint8_t *bigger = realloc(buf, cap * 2);
                if (!bigger) {
                        free(buf);
                        fclose(f);
                        return -1;
                }
                buf = bigger;
                cap *= 2;
        }
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
        free(buf);
        return 0;
}

int main(int argc, char **argv)
{
        int files = 0;
        for (int i = 1; i < argc; i++) {
                struct stat st;
                if (stat(argv[i], &st) < 0) {
                        perror(argv[i]);
                        return 1;
                }
                if (!S_ISDIR(st.st_mode)) {
                        if (replay_file(argv[i]) < 0)
                                return 1;
                        files++;
                        continue;
                }
                DIR *d = opendir(argv[i]);
                if (!d)
                        return 1;
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        char path[4096];
                        snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
                        if (replay_file(path) < 0) {
                                closedir(d);
                                return 1;
                        }
                        files++;
                }
                closedir(d);
        }
        if (files == 0) {
                fprintf(stderr, "no corpus files found\n");
                return 1;
        }
        printf("replayed %d corpus files\n", files);
        return 0;
}
