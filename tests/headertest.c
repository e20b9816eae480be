/* headertest.c - the public header compiles alone, pedantic, in C and
 * exposes a consistent error table. Built with -pedantic -Werror. */
#include "unico.h"

#include <stdio.h>
#include <string.h>

int headertest_errors(void); /* headertest_errors.c */

int main(void) {
  /* Every code has a message, a name and an exit code in 1..7. */
  static const int codes[] = {
#define XX(name, value, id, msg, exitcode) UNICO_E##name,
      UNICO_ERRNO_MAP(XX)
#undef XX
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    int c = codes[i];
    if (c >= 0 || c <= UNICO_ELAST_) bad++;
    if (!strcmp(unico_strerror(c), "unknown error")) bad++;
    if (!strcmp(unico_errname(c), "error")) bad++;
    if (unico_exit_code(c) < 1 || unico_exit_code(c) > 7) bad++;
  }
  if (unico_exit_code(UNICO_OK) != 0 || unico_version() != UNICO_VERSION_HEX ||
      strcmp(unico_version_string(), UNICO_VERSION_STRING))
    bad++;
  bad += headertest_errors();
  printf("%s\n", bad ? "header test FAILED" : "header test ok");
  return bad != 0;
}
