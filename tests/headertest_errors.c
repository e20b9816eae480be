/* headertest_errors.c - unico_errors.h compiles alone, before any other
 * header (the stores include it without unico.h). Linked into headertest. */
#include "unico_errors.h"

int headertest_errors(void);

/* Nonzero when the codes are not negative and inside the reserved range. */
int headertest_errors(void) {
  int bad = UNICO_OK != 0;
#define XX(name, value, id, msg, exitcode, http, retry) \
  bad += UNICO_E##name >= 0 || UNICO_E##name <= UNICO_ELAST_;
  UNICO_ERRNO_MAP(XX)
#undef XX
  return bad;
}
