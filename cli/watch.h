/* watch.h - `unico watch` (cli/watch.c), a command that parses its own
 * command line: argv without the command word. Returns the exit code. */
#ifndef UNICO_CLI_WATCH_H
#define UNICO_CLI_WATCH_H

int ucli_watch_main(int argc, char **argv);

#endif
