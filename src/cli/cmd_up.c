/* gpuslice up: placeholder until the real implementation lands. */
#include <stdio.h>

int cmd_up(int argc, char **argv);

int cmd_up(int argc, char **argv)
{
        (void)argc;
        (void)argv;
        fputs("up: not built yet\n", stderr);
        return 2;
}
