/* consumer.c - a program that uses unico the way a user does: built outside
 * the tree against an installed prefix (tests/install_consumer.sh: with
 * pkg-config and with find_package), linked to libunico.so, and run: an
 * LMDB store in a fresh directory under DIR, a schema, an insert, and a
 * conflicting insert that must fail with UNICO_ECONFLICT.
 * Usage: consumer DIR */
#define _POSIX_C_SOURCE 200809L
#include <unico.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, int rc, const unico_result *res) {
  fprintf(stderr, "consumer: %s: %s (%s): %s\n", what, unico_errname(rc),
          unico_strerror(rc), res->message);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: consumer DIR\n");
    return 2;
  }
  /* the header and the library linked are the same version */
  if (unico_version() != UNICO_VERSION_HEX ||
      strcmp(unico_version_string(), UNICO_VERSION_STRING)) {
    fprintf(stderr, "consumer: header %s, library %s\n", UNICO_VERSION_STRING,
            unico_version_string());
    return 1;
  }
  char dir[4096], url[4200];
  snprintf(dir, sizeof dir, "%s/storeXXXXXX", argv[1]);
  if (!mkdtemp(dir)) {
    perror("consumer: mkdtemp");
    return 1;
  }
  snprintf(url, sizeof url, "lmdb:%s", dir);

  unico *u = NULL;
  unico_result res = UNICO_RESULT_INIT;
  int rc = unico_open(&u, url, NULL, &res);
  if (rc != UNICO_OK) return fail("open", rc, &res);
  rc = unico_schema_apply(u,
                          "CREATE TABLE users (id text PRIMARY KEY, email text,"
                          " CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold);",
                          &res);
  if (rc != UNICO_OK) return fail("schema", rc, &res);
  rc = unico_insert(u, "users", "{\"id\":\"u1\",\"email\":\"Ada@example.com\"}",
                    NULL, &res);
  if (rc != UNICO_OK) return fail("insert u1", rc, &res);
  rc = unico_insert(u, "users", "{\"id\":\"u2\",\"email\":\"ada@EXAMPLE.com\"}",
                    NULL, &res);
  int ok = rc == UNICO_ECONFLICT && !strcmp(res.constraint, "users_email") &&
           res.owner && !strcmp(res.owner, "\"u1\"");
  if (ok)
    printf("consumer: %s: %s is taken by %s (%s)\n", unico_errname(rc),
           res.value, res.owner, res.constraint);
  else
    fprintf(stderr, "consumer: insert u2: want conflict on users_email owned by \"u1\", got %s, constraint '%s', owner %s\n",
            unico_errname(rc), res.constraint, res.owner ? res.owner : "(none)");
  unico_result_clear(&res);
  unico_close(u);
  return ok ? 0 : 1;
}
