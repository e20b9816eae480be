/* url.c - questions about a store URL that need no open store. */
#include "store/store.h"
#include "unico.h"

int unico_url_defers(const char *url) {
  unsigned caps = 0;
  int rc = ustore_url_caps(url, &caps, NULL);
  if (rc) return rc;
  return (caps & USTORE_CAP_DEFERS) != 0;
}
