/* The tool's answers that need no command's options: --version, and
 * --help of the commands that read their own arguments (verify, plot). */
#ifndef CLI_USAGE_H
#define CLI_USAGE_H

/* The exit status when argv asks for one of them (printed on stdout),
 * else -1. */
int cli_usage(int argc, char **argv);

#endif
