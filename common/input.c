/* input.c - see input.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "input.h"
#include "report.h"

int ucli_read_input(const char *who, const char *path, char **out, size_t *len) {
  int is_stdin = !strcmp(path, "-");
  const char *name = is_stdin ? "standard input" : path;
  FILE *f = is_stdin ? stdin : fopen(path, "rb");
  char *buf = NULL;
  size_t cap = 4096, n = 0;
  int code = 0;
  *out = NULL;
  if (!f) {
    code = ucli_usage_error(who, "cannot read %s: %s", name, strerror(errno));
    goto leave;
  }
  buf = malloc(cap);
  for (;;) {
    if (!buf) {
      code = ucli_report_error(who, UNICO_ENOMEM, NULL);
      goto leave;
    }
    n += fread(buf + n, 1, cap - n - 1, f);
    if (n + 1 < cap) break; /* end of input or an error */
    char *nb = realloc(buf, cap * 2);
    if (!nb) free(buf);
    buf = nb;
    cap *= 2;
  }
  if (ferror(f)) {
    code = ucli_usage_error(who, "cannot read %s: %s", name,
                            strerror(errno ? errno : EIO));
    goto leave;
  }
  buf[n] = 0;
  const char *nul = memchr(buf, 0, n);
  if (nul) {
    unico_result res = UNICO_RESULT_INIT;
    snprintf(res.message, sizeof res.message,
             "%s contains a NUL byte at byte offset %zu (the input must be "
             "text)",
             name, (size_t)(nul - buf));
    code = ucli_report_error(who, UNICO_EINVAL, &res);
    goto leave;
  }
  *out = buf;
  buf = NULL;
  if (len) *len = n;
leave:
  free(buf);
  if (f && !is_stdin) fclose(f);
  return code;
}
