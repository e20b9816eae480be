/* headertest.c - the public header compiles alone, pedantic, in C and
 * exposes a consistent error table. Built with -pedantic -Werror. */
#include "unico.h"

#include <stdio.h>
#include <string.h>

int headertest_errors(void); /* headertest_errors.c */

int main(void) {
  /* Every code has a message, a name and an exit code in 1..7. */
  static const int codes[] = {
#define XX(name, value, id, msg, exitcode, http, retry) UNICO_E##name,
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
    if (unico_http_status(c) < 400 || unico_http_status(c) > 599) bad++;
    if (unico_retry_after(c) < 0) bad++;
  }
  if (unico_http_status(UNICO_OK) != 200 || unico_retry_after(UNICO_OK) != 0) bad++;
  if (unico_exit_code(UNICO_OK) != 0 || unico_version() != UNICO_VERSION_HEX ||
      strcmp(unico_version_string(), UNICO_VERSION_STRING))
    bad++;
  bad += headertest_errors();
  /* unico_result holds the DDL's longest constraint name whole, and the
   * rest of its layout is the documented one */
  {
    unico_result r = UNICO_RESULT_INIT;
    if (sizeof r.constraint != UNICO_CONSTRAINT_NAME_MAX + 1 ||
        UNICO_CONSTRAINT_NAME_MAX != 838 || sizeof r.message != 512 ||
        sizeof r.column != 128 || r.rc != 0 || r.json || r.constraint[0] ||
        r.value || r.owner || r.version || r.missing || r.retry_at_ms ||
        sizeof r.owner_table != 64 || r.owner_table[0])
      bad++;
  }
  /* The value initializers fill what their type reads, and nothing else. */
  const char *s = "abc";
  unico_value v[] = {UNICO_VALUE_TEXT("t", s), UNICO_VALUE_INT("i", -7),
                     UNICO_VALUE_BOOL("b", 5), UNICO_VALUE_DOUBLE("d", 2.5),
                     UNICO_VALUE_NULL("n")};
  if (strcmp(v[0].column, "t") || v[0].type != UNICO_TEXT || v[0].text != s ||
      v[0].len != 3 || v[0].i != 0)
    bad++;
  if (v[1].type != UNICO_INT || v[1].i != -7 || v[1].text != NULL) bad++;
  if (v[2].type != UNICO_BOOL || v[2].i != 1) bad++;
  if (v[3].type != UNICO_DOUBLE || v[3].d != 2.5 || v[3].i != 0) bad++;
  if (strcmp(v[4].column, "n") || v[4].type != UNICO_NULL || v[4].text != NULL) bad++;
  printf("%s\n", bad ? "header test FAILED" : "header test ok");
  return bad != 0;
}
