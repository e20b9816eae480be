/* serve.h - `unico serve`, the HTTP API of docs/http.md: the one entry point
 * the CLI calls. Everything else in server/ is internal (server.h). */
#ifndef UNICO_SERVE_H
#define UNICO_SERVE_H

/* Run `unico serve` until SIGTERM or SIGINT. argv is the CLI's whole command
 * line and argv[cmd] the word "serve"; every other argument is an option of
 * the server (including --store). Returns the process exit code: 0 after a
 * clean shutdown, 1 for a bad command line or configuration, 7 when a store
 * that --schema needs cannot be opened. */
int unico_serve_main(int argc, char **argv, int cmd);

#endif /* UNICO_SERVE_H */
