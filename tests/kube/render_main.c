/* SPDX-License-Identifier: Apache-2.0 */
/* Runs `gpuslice render` on its own (cmd_render from src/cli), so that the
 * render tests do not depend on the CLI's command table. */
#include "cli.h"

int cmd_render(int argc, char **argv);

int main(int argc, char **argv)
{
        return cmd_render(argc, argv);
}
