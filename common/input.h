/* input.h - how the command-line front ends read a whole input (a schema
 * file, a record from standard input): as text, refusing what would be cut
 * short silently, so that what the user gave is what is applied. */
#ifndef UNICO_COMMON_INPUT_H
#define UNICO_COMMON_INPUT_H

#include <stddef.h>

/* Read all of path ("-": standard input) into *out, NUL-terminated
 * (*len, if not NULL, gets its length). The text may not contain a NUL
 * byte: the library takes C strings, so everything after one would be
 * dropped without a word. On success returns 0 and the caller frees *out.
 * On failure *out is NULL, the error has been printed as WHO's error
 * (report.h: an unreadable file or standard input is a usage error; a NUL
 * byte is invalid input, its message naming the input and the byte
 * offset), and the exit code (1) is returned. */
int ucli_read_input(const char *who, const char *path, char **out, size_t *len);

#endif
