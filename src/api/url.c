/* url.c - questions about a store URL that need no open store. */
#include "exec/exec.h"
#include "unico.h"

int unico_url_defers(const char *url) { return uexec_url_defers(url); }

int unico_store_option_secret(const char *name, size_t len) {
  return name ? uexec_option_is_secret(name, len) : 0;
}
