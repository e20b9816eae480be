/* tls.c - HTTPS for `unico serve`: libmicrohttpd's own TLS (GnuTLS), with
 * the server's certificate and key handed to each handshake by a callback
 * (so that a reload swaps them without a restart), TLS 1.2 and 1.3 only,
 * and client certificates checked against --tls-client-ca (mutual TLS).
 * docs/http.md#https says why libmicrohttpd's TLS and not OpenSSL. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "server.h"

#define MAX_CHAIN 16

/* One certificate chain with its key. Never freed while the server runs:
 * a handshake that took it may still use it after a reload swapped in
 * another (reloads are rare and a pair is a few kilobytes); all are freed
 * at exit by utls_free. */
typedef struct utls_pair {
  gnutls_pcert_st pcert[MAX_CHAIN];
  unsigned n;
  gnutls_privkey_t key;
  struct utls_pair *older;
} utls_pair;

/* The callback of GnuTLS has no user pointer: one server per process. */
static _Atomic(utls_pair *) current;
static int require_client; /* --tls-client-ca: ask every client for one */

static void pair_free(utls_pair *p) {
  while (p) {
    utls_pair *o = p->older;
    for (unsigned i = 0; i < p->n; i++) gnutls_pcert_deinit(&p->pcert[i]);
    if (p->key) gnutls_privkey_deinit(p->key);
    free(p);
    p = o;
  }
}

/* The whole file as a datum (NUL-terminated, for the PEM parsers); 0 or
 * -1 with the reason in err. */
static int read_file(const char *what, const char *path, gnutls_datum_t *d, char *err,
                     size_t cap) {
  FILE *f = fopen(path, "rb");
  usbuf b = {0};
  char tmp[4096];
  size_t n;
  if (!f) {
    snprintf(err, cap, "%s %s: %s", what, path, strerror(errno));
    return -1;
  }
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) usb_add(&b, tmp, n);
  int bad = ferror(f);
  fclose(f);
  size_t len = b.len;
  char *p = usb_take(&b);
  if (bad || !p) {
    free(p);
    snprintf(err, cap, "%s %s: %s", what, path, bad ? "read error" : "out of memory");
    return -1;
  }
  d->data = (unsigned char *)p;
  d->size = (unsigned)len;
  return 0;
}

/* Whether the key belongs to the certificate: their public keys agree. */
static int key_matches(gnutls_pcert_st *cert, gnutls_privkey_t key) {
  gnutls_pubkey_t pub = NULL;
  gnutls_datum_t a = {NULL, 0}, b = {NULL, 0};
  int same = 0;
  if (gnutls_pubkey_init(&pub) == 0 && gnutls_pubkey_import_privkey(pub, key, 0, 0) == 0 &&
      gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, &a) == 0 &&
      gnutls_pubkey_export2(cert->pubkey, GNUTLS_X509_FMT_DER, &b) == 0)
    same = a.size == b.size && memcmp(a.data, b.data, a.size) == 0;
  gnutls_free(a.data);
  gnutls_free(b.data);
  if (pub) gnutls_pubkey_deinit(pub);
  return same;
}

int utls_load(const char *cert_path, const char *key_path, char *err, size_t cap) {
  gnutls_datum_t cd = {NULL, 0}, kd = {NULL, 0};
  utls_pair *p = calloc(1, sizeof *p);
  int rc = -1, e;
  if (!p) {
    snprintf(err, cap, "out of memory");
    return -1;
  }
  if (read_file("--tls-cert", cert_path, &cd, err, cap) ||
      read_file("--tls-key", key_path, &kd, err, cap))
    goto leave;
  p->n = MAX_CHAIN;
  e = gnutls_pcert_list_import_x509_raw(p->pcert, &p->n, &cd, GNUTLS_X509_FMT_PEM, 0);
  if (e < 0 || p->n == 0) {
    p->n = 0;
    snprintf(err, cap, "--tls-cert %s: not a PEM certificate chain (at most %d certificates, "
                       "the server's first): %s", cert_path, MAX_CHAIN,
             e < 0 ? gnutls_strerror(e) : "no certificate");
    goto leave;
  }
  /* the server's certificate must be valid now: an expired one would be
   * refused by every client */
  gnutls_x509_crt_t crt = NULL;
  if (gnutls_x509_crt_init(&crt) == 0 &&
      gnutls_x509_crt_import(crt, &p->pcert[0].cert, GNUTLS_X509_FMT_DER) == 0) {
    time_t now = time(NULL), nb = gnutls_x509_crt_get_activation_time(crt),
           na = gnutls_x509_crt_get_expiration_time(crt);
    if (na != (time_t)-1 && na < now) {
      char when[32];
      struct tm tm;
      gmtime_r(&na, &tm);
      strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
      snprintf(err, cap, "--tls-cert %s: the certificate expired on %s", cert_path, when);
      gnutls_x509_crt_deinit(crt);
      goto leave;
    }
    if (nb != (time_t)-1 && nb > now + 300) {
      snprintf(err, cap, "--tls-cert %s: the certificate is not valid yet", cert_path);
      gnutls_x509_crt_deinit(crt);
      goto leave;
    }
  }
  if (crt) gnutls_x509_crt_deinit(crt);
  if ((e = gnutls_privkey_init(&p->key)) < 0 ||
      (e = gnutls_privkey_import_x509_raw(p->key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
    snprintf(err, cap, "--tls-key %s: not a PEM private key (unencrypted): %s", key_path,
             gnutls_strerror(e));
    goto leave;
  }
  if (!key_matches(&p->pcert[0], p->key)) {
    snprintf(err, cap, "--tls-key %s is not the key of the certificate in %s", key_path,
             cert_path);
    goto leave;
  }
  p->older = atomic_load(&current);
  atomic_store(&current, p);
  p = NULL;
  rc = 0;
leave:
  if (p) {
    p->older = NULL;
    pair_free(p);
  }
  if (kd.data) {
    memset(kd.data, 0, kd.size); /* the key's text */
    free(kd.data);
  }
  free(cd.data);
  return rc;
}

void utls_free(void) { pair_free(atomic_exchange(&current, NULL)); }

/* GnuTLS asks for the certificate once per handshake (after the client's
 * hello: before the server asks for the client's certificate). */
static int cert_cb(gnutls_session_t sess, const gnutls_datum_t *req_ca_dn, int nreqs,
                   const gnutls_pk_algorithm_t *algos, int nalgos, gnutls_pcert_st **pcert,
                   unsigned int *pcert_length, gnutls_privkey_t *pkey) {
  (void)req_ca_dn;
  (void)nreqs;
  (void)algos;
  (void)nalgos;
  utls_pair *p = atomic_load(&current);
  if (!p) return -1;
  if (require_client) {
    /* mutual TLS: a client without a certificate, or with one the CAs of
     * --tls-client-ca did not sign (or expired), fails the handshake */
    gnutls_certificate_server_set_request(sess, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_cert(sess, NULL, 0);
  }
  *pcert = p->pcert;
  *pcert_length = p->n;
  *pkey = p->key;
  return 0;
}

void *utls_cert_callback(int mutual) {
  require_client = mutual;
  return (void *)cert_cb;
}

int utls_read_pem(const char *what, const char *path, char **text, char *err, size_t cap) {
  gnutls_datum_t d = {NULL, 0};
  if (read_file(what, path, &d, err, cap)) return -1;
  gnutls_x509_crt_t *list = NULL;
  unsigned n = 0;
  int e = gnutls_x509_crt_list_import2(&list, &n, &d, GNUTLS_X509_FMT_PEM, 0);
  for (unsigned i = 0; i < n; i++) gnutls_x509_crt_deinit(list[i]);
  gnutls_free(list);
  if (e < 0 || n == 0) {
    snprintf(err, cap, "%s %s: no PEM certificate in it%s%s", what, path, e < 0 ? ": " : "",
             e < 0 ? gnutls_strerror(e) : "");
    free(d.data);
    return -1;
  }
  *text = (char *)d.data;
  return 0;
}

int utls_client(struct MHD_Connection *c, char *subject, size_t cap, char *why, size_t wcap) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  gnutls_session_t sess = ci ? (gnutls_session_t)ci->tls_session : NULL;
  unsigned status = 0, n = 0;
  subject[0] = 0;
  if (!sess) {
    snprintf(why, wcap, "no TLS session");
    return -1;
  }
  const gnutls_datum_t *certs = gnutls_certificate_get_peers(sess, &n);
  if (!certs || !n) {
    snprintf(why, wcap, "the client sent no certificate");
    return -1;
  }
  int e = gnutls_certificate_verify_peers2(sess, &status);
  if (e < 0 || status) {
    gnutls_datum_t out = {NULL, 0};
    if (e >= 0 && gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out,
                                                                0) == 0) {
      snprintf(why, wcap, "the client certificate is refused: %s", (char *)out.data);
      gnutls_free(out.data);
    } else {
      snprintf(why, wcap, "the client certificate is refused: %s",
               e < 0 ? gnutls_strerror(e) : "not trusted");
    }
    return -1;
  }
  gnutls_x509_crt_t crt;
  if (gnutls_x509_crt_init(&crt) == 0) {
    size_t sz = cap;
    if (gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER) != 0 ||
        gnutls_x509_crt_get_dn(crt, subject, &sz) != 0)
      subject[0] = 0;
    gnutls_x509_crt_deinit(crt);
  }
  return 0;
}
