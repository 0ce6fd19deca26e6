/* The tool's commands, one file each (cmd_*.c): those that read their
 * options through cli_options.h, and those that read their own arguments. */
#ifndef CLI_COMMANDS_H
#define CLI_COMMANDS_H

#include "cli_options.h"

extern const cli_command cmd_encode, cmd_ask, cmd_bench, cmd_eval;

/* inferscale verify STORE and inferscale plot IN.json OUT.png, argv whole:
 * the exit status. */
int cmd_verify(int argc, char **argv);
int cmd_plot(int argc, char **argv);

#endif
