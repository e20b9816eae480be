/* serve.h - `unico serve`, the HTTP API of docs/http.md: the server's one
 * entry point, which the `unico` program (cli/) runs for its `serve`
 * command. Everything else in server/ is internal (server.h). */
#ifndef UNICO_SERVE_H
#define UNICO_SERVE_H

/* The server's main: run until SIGTERM or SIGINT. argv is a command line
 * as main() gets it: argv[0] the program, then the server's options (the
 * CLI passes its own without the command word "serve", so `unico --store
 * URL serve --listen ADDR` reaches here as `unico --store URL --listen
 * ADDR`). Returns the process exit code: 0 after a clean shutdown, 1 for a
 * bad command line or configuration, 7 when a store that --schema needs
 * cannot be opened. */
int userv_main(int argc, char **argv);

#endif /* UNICO_SERVE_H */
